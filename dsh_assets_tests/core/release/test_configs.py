import dataclasses
from importlib import resources

import pyarrow.parquet as pq
import pytest

from dsh_assets.core.files import DigestBook
from dsh_assets.core.release.configs import (
    Coding, ConfigError, Microaggregation, RankSwap, Rounding, load_configs, period_configs, publishable_configs,
)
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.transform import release
from dsh_assets_tests.tables import RELEASE_PERIOD, row, table

SCHEMA = load_schema()


def test_packaged_configurations():
    configs = load_configs(schema=SCHEMA)
    assert list(period_configs(configs)) == [
        "id_removal", "c15_window_k5_noise5", "c17_hour_groups_k5_noise10", "c18_window_k5_shuffle",
        "c22_hour_k5_shuffle_code10_round3", "c23_hour_k5_shuffle_noise2_code10_round3",
        "c24_hour_k5_copula_code10_round3", "dp_counts_eps1"]
    on_request = [config_id for config_id, config in configs.items() if not getattr(config, "every_period", True)]
    assert on_request == ["c16_window_k5_noise5_key", "c19_window_microagg10", "c20_window_k5_swap5",
                          "c21_window_microagg10_shuffle", "dp_synthetic_eps1"]
    # what may be published (and paired with a publication): the daily set and those on request, no sweep point
    assert set(publishable_configs(configs)) == set(period_configs(configs)) | set(on_request)
    assert configs["c18_window_k5_shuffle"].shuffle and configs["c18_window_k5_shuffle"].noise_scale == 0.0
    assert configs["c19_window_microagg10"].microaggregate == Microaggregation(10, "median")
    assert configs["c20_window_k5_swap5"].rank_swap == RankSwap(5.0)
    c21 = configs["c21_window_microagg10_shuffle"]
    assert c21.microaggregate == Microaggregation(10, "median") and c21.shuffle and c21.noise_scale == 0.0
    dp = configs["dp_counts_eps1"]
    assert (dp.epsilon, dp.sensitivity, dp.counts_epsilon, dp.slow_share_epsilon) == (1.0, 4, 0.75, 0.25)
    c15 = configs["c15_window_k5_noise5"]
    assert c15.dropped_columns(SCHEMA) == ("msisdn", "imsi", "imei", "enb_id")
    assert (c15.noise_scale, c15.k, c15.pseudonym, c15.time_coarsen) == (0.05, 5, False, "window")
    assert configs["id_removal"].released_qis(SCHEMA)[-1] == "enb_id"
    c17 = configs["c17_hour_groups_k5_noise10"]
    assert len(c17.app_groups) == 6 and len(c17.app_group_of()) == 25
    c22 = configs["c22_hour_k5_shuffle_code10_round3"]
    assert (c22.time_coarsen, c22.shuffle, c22.round) == ("hour", True, Rounding(significant=3))
    assert c22.top_code == c22.bottom_code == Coding("app_radio", rank=10)
    assert c22.has_value_operations and c22.moves_values


def test_definition_hash_follows_the_operations():
    c15 = load_configs(schema=SCHEMA)["c15_window_k5_noise5"]
    assert c15.definition_hash() == load_configs(schema=SCHEMA)["c15_window_k5_noise5"].definition_hash()
    assert c15.definition_hash() != dataclasses.replace(c15, k=6).definition_hash()
    # An operation left unset is not part of the definition: adding one to the language changed no hash.
    assert c15.definition_hash() == "e5df4f10d23f90a75be2832852ab790dfce89d130b258a02999d3e31ee70da41"
    assert c15.definition_hash() != dataclasses.replace(c15, shuffle=True).definition_hash()


@pytest.mark.parametrize("body, message", [
    ('[configs.x]\ntime_coarsen = "day"', "time_coarsen must be one of"),
    ('[configs.x]\nk = -1', "k must be a non-negative integer"),
    ('[configs.x]\nnoise = 0.1', "unknown fields"),
    ('[configs.x]\napp_coarsen = "three"', "names no \\[app_groups.three\\]"),
    ('[configs.x]\ndrop_fields = ["phone"]', "neither"),
    ('[configs.Bad-Id]\nk = 1', "id must be lowercase"),
    ('[configs.x]\napp_coarsen = "g"\n[app_groups.g]\na = ["IM"]\nb = ["IM"]', "in two groups"),
    ('title = "no configs"', "declares no"),
    ('[configs.x]\nkind = "cubes"', "kind must be"),
    ('[configs.x', "not valid TOML"),
])
def test_malformed_configurations_are_refused(tmp_path, body, message):
    (tmp_path / "releases.toml").write_text(body)
    with pytest.raises(ConfigError, match=message):
        load_configs(tmp_path / "releases.toml", SCHEMA)


def test_a_new_configuration_needs_no_code(tmp_path):
    (tmp_path / "releases.toml").write_text(
        '[configs.k10_hour]\ndrop_fields = ["identifiers", "station"]\ntime_coarsen = "hour"\nk = 10\n'
    )
    config = load_configs(tmp_path / "releases.toml", SCHEMA)["k10_hour"]
    assert (config.k, config.time_coarsen, config.noise_scale, config.pseudonym) == (10, "hour", 0.0, False)


def test_a_real_file_with_other_column_names_maps_through_the_roles_file(tmp_path):
    renames = {"msisdn": "phone", "province": "region", "dl_throughput_kbps": "download_kbps"}
    roles = tmp_path / "columns.toml"
    text = resources.files("dsh_assets").joinpath("columns.toml").read_text()
    for old, new in renames.items():
        text = text.replace(f'"{old}"', f'"{new}"')
    roles.write_text(text)
    schema = load_schema(roles)
    assert (schema.subscriber, schema.province, schema.download) == ("phone", "region", "download_kbps")
    data = table([row(f"35840000000{i}") for i in range(6)]).rename_columns(
        [renames.get(name, name) for name in SCHEMA.columns])
    pq.write_table(data, tmp_path / "real.parquet")
    summary = ingest_source(tmp_path / "real.parquet", tmp_path / "in.parquet", schema, book=DigestBook())
    config = load_configs(schema=schema)["c15_window_k5_noise5"]
    plan = release(tmp_path / "in.parquet", tmp_path / "out.parquet", config, schema, Secrets(b"s", b"k", "t"), summary.apps,
                   period=RELEASE_PERIOD, book=DigestBook())
    released = pq.read_table(tmp_path / "out.parquet")
    assert plan.rows_released == 6 and "region" in released.column_names and "phone" not in released.column_names
