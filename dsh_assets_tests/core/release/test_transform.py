import dataclasses
import datetime as dt
import hashlib
import hmac

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.files import sha256_file
from dsh_assets.core.release.configs import ROW_RELEASE, ConfigError, load_configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.synth import synthesize
from dsh_assets.core.release.transform import ALIAS_COLUMN, release
from dsh_assets.core.secrets import Secrets
from dsh_assets_tests.tables import row, write

SCHEMA = load_schema()
CONFIGS = load_configs(schema=SCHEMA)
SECRETS = Secrets(b"seed-one", b"key-one", "test")


def hand_rows() -> list[dict]:
    """Cell A: exactly k=5 rows (kept). Cell B: 2+2+1 rows over three windows, 5 in their hour. C: 1 row."""
    cell_a = [row(f"35840000000{i}", 0, app="Gaming", radio="5G") for i in (1, 1, 2, 3, 4)]
    cell_a[0]["dl_throughput_kbps"] = 1000.0  # the column maximum
    cell_b = [row(f"35850000000{i}", minute, app="Streaming", radio="4G") for i, minute in
              ((1, 0), (2, 0), (3, 10), (4, 10), (5, 20))]
    cell_c = [row("358409999999", 30, province="Lappi", app="IM", radio="3G")]
    return cell_a + cell_b + cell_c


@pytest.fixture
def source(tmp_path):
    raw = write(tmp_path / "raw.parquet", hand_rows())
    ingested = tmp_path / "source.parquet"
    summary = ingest_source(raw, ingested, SCHEMA)
    return ingested, summary.apps


def run(source, tmp_path, config_id, secrets=SECRETS, name="out.parquet", **kwargs):
    path, apps = source
    out = tmp_path / name
    plan = release(path, out, CONFIGS[config_id], SCHEMA, secrets, apps, **kwargs)
    return plan, pq.read_table(out)


def test_cell_of_exactly_k_rows_is_kept_and_of_k_minus_one_withheld(source, tmp_path):
    plan, table = run(source, tmp_path, "c15_window_k5_noise5")
    assert plan.rows_in == 11 and plan.rows_released == 5
    assert plan.keep.tolist() == [True] * 5 + [False] * 6
    assert set(table.column("application_category").to_pylist()) == {"Gaming"}
    assert plan.min_released_cell == 5 and plan.cells_withheld == 4  # B's three windows and C


def test_hour_windows_and_app_groups_merge_cells_before_suppression(source, tmp_path):
    plan, table = run(source, tmp_path, "c17_hour_groups_k5_noise10")
    assert plan.rows_released == 10  # A and B each make a 5-row hour cell; C stays alone
    assert set(table.column("application_category").to_pylist()) == {"Media"}
    assert {t.minute for t in table.column("time_start").to_pylist()} == {0}


def test_identifier_removal_keeps_every_row_and_the_station(source, tmp_path):
    plan, table = run(source, tmp_path, "id_removal")
    assert plan.rows_released == 11 and plan.min_released_cell is None
    assert "enb_id" in table.column_names
    assert not set(SCHEMA.identifiers) & set(table.column_names)
    assert sorted(table.column("dl_throughput_kbps").to_pylist()) == sorted(r["dl_throughput_kbps"] for r in hand_rows())


def test_stored_source_is_ordered_by_cell_not_by_subscriber(source):
    stored = pq.read_table(source[0])
    minutes = [t.minute for t in stored.column("time_start").to_pylist()]
    assert minutes == sorted(minutes)
    assert stored.column("row_id").to_pylist() == list(range(11))


def test_dropped_fields_and_no_row_id_in_release(source, tmp_path):
    _, table = run(source, tmp_path, "c15_window_k5_noise5")
    assert table.column_names == [
        "time_start", "province", "application_category", "radio_access_type", *SCHEMA.measurements
    ]


def test_noise_moves_values_within_bounds_and_clips_at_the_column_maximum(source, tmp_path):
    config = dataclasses.replace(CONFIGS["id_removal"], noise_scale=2.0)
    path, apps = source
    release(path, tmp_path / "noisy.parquet", config, SCHEMA, SECRETS, apps)
    values = np.array(pq.read_table(tmp_path / "noisy.parquet").column("dl_throughput_kbps").to_pylist())
    assert values.min() >= 0.0 and values.max() <= 1000.0
    assert (values != 10.0).sum() >= 9  # with scale 2 every 10.0 moves, most far
    assert (values[1:] > 10.0).any() and (values[1:] < 10.0).any()


def test_alias_is_stable_within_a_release_and_differs_across_keys(source, tmp_path):
    _, table = run(source, tmp_path, "c16_window_k5_noise5_key")
    aliases = table.column(ALIAS_COLUMN).to_pylist()
    expected = "s_" + hmac.new(b"key-one", b"358400000001", hashlib.sha256).hexdigest()[:20]
    assert aliases.count(expected) == 2  # the subscriber with two rows in cell A, one alias
    assert len(set(aliases)) == 4
    _, other = run(source, tmp_path, "c16_window_k5_noise5_key", Secrets(b"seed-one", b"key-two", "test"), "other.parquet")
    assert not set(aliases) & set(other.column(ALIAS_COLUMN).to_pylist())
    assert all(alias.startswith("s_") and len(alias) == 22 for alias in aliases)


def test_same_seed_same_bytes_other_seed_other_bytes(source, tmp_path):
    run(source, tmp_path, "c15_window_k5_noise5", name="a.parquet")
    run(source, tmp_path, "c15_window_k5_noise5", name="b.parquet")
    run(source, tmp_path, "c15_window_k5_noise5", Secrets(b"seed-two", b"key-one", "test"), "c.parquet")
    assert sha256_file(tmp_path / "a.parquet") == sha256_file(tmp_path / "b.parquet")
    assert sha256_file(tmp_path / "a.parquet") != sha256_file(tmp_path / "c.parquet")


@pytest.mark.parametrize("config_id", ["c15_window_k5_noise5", "c16_window_k5_noise5_key", "c17_hour_groups_k5_noise10"])
def test_batch_size_does_not_change_bytes(source, tmp_path, config_id):
    run(source, tmp_path, config_id, name="whole.parquet")
    for batch_rows in (1, 2, 3, 7):
        run(source, tmp_path, config_id, name=f"b{batch_rows}.parquet", batch_rows=batch_rows)
        assert sha256_file(tmp_path / f"b{batch_rows}.parquet") == sha256_file(tmp_path / "whole.parquet")


def test_grouping_that_misses_an_app_is_refused_and_writes_nothing(source, tmp_path):
    groups = tuple((g, tuple(a for a in apps if a != "IM")) for g, apps in CONFIGS["c17_hour_groups_k5_noise10"].app_groups)
    config = dataclasses.replace(CONFIGS["c17_hour_groups_k5_noise10"], app_groups=groups)
    path, apps = source
    with pytest.raises(ConfigError, match="does not cover 1 app.*: IM"):
        release(path, tmp_path / "refused.parquet", config, SCHEMA, SECRETS, apps)
    assert list(tmp_path.glob("*refused*")) == []


def test_batch_noise_matches_large_source_determinism(tmp_path):
    """Many rows over several row groups: the streamed result equals the one-batch result."""
    rows = [row(f"3584{i:08d}", (i % 6) * 10, app=("Gaming", "IM")[i % 2], value=float(i % 97)) for i in range(3000)]
    raw = write(tmp_path / "raw.parquet", rows)
    ingest_source(raw, tmp_path / "src.parquet", SCHEMA)
    apps = ("Gaming", "IM")
    for batch_rows in (3000, 256):
        release(tmp_path / "src.parquet", tmp_path / f"r{batch_rows}.parquet", CONFIGS["c15_window_k5_noise5"],
                SCHEMA, SECRETS, apps, batch_rows=batch_rows)
    assert sha256_file(tmp_path / "r3000.parquet") == sha256_file(tmp_path / "r256.parquet")


def test_a_failing_write_raises_in_the_caller_and_leaves_no_file(tmp_path):
    from dsh_assets.core.files import BackgroundWriter, FixedRowGroupWriter, atomic_path

    schema = pa.schema([("a", pa.int64())])
    wrong = pa.RecordBatch.from_pydict({"b": pa.array(["x"])})
    with pytest.raises(Exception):
        with atomic_path(tmp_path / "out.parquet") as temporary, \
                FixedRowGroupWriter(temporary, schema, []) as fixed, BackgroundWriter(fixed) as writer:
            writer.write(pa.RecordBatch.from_pydict({"a": pa.array([1])}, schema=schema))
            writer.write(wrong)
    assert list(tmp_path.iterdir()) == []


RELEASE_DIGESTS = {
    "id_removal": "757c80dedcd69350049cbba0c55a34de5756ebeefe39c4cd9f0667573f161424",
    "c15_window_k5_noise5": "a79cf3fb91f3a59fb3d19bc3b74b80d34885689d2bc8fb1cf1306048ef7add01",
    "c16_window_k5_noise5_key": "ccfa05dbbdca5f2ce13eb531004cf8f23d165640ee669207e8d03bcbefc400aa",
    "c17_hour_groups_k5_noise10": "a8c0c3ff1a90e30358add8061a72a4f83426268d34a0743367c937cc36f75515",
}
"""SHA-256 of each row-level release of a fixed small source, taken from main before the layout moved
(commit 68c49c7): moving code must not move a byte."""


def test_release_bytes_are_the_ones_recorded_before_the_redesign(tmp_path):
    schema = load_schema()
    raw, source = tmp_path / "raw.parquet", tmp_path / "source.parquet"
    synthesize(raw, rows=4000, subscribers=800, seed=7, period=dt.date(2026, 11, 20), schema=schema)
    summary = ingest_source(raw, source, schema)
    assert sha256_file(source) == "d3e56c05fb3d6e763c27f36e72337fe707b3221f988801fcd53517d5c7acb046"
    secrets = Secrets(b"fixed-noise-seed", b"fixed-alias-key", "configured")
    digests = {}
    for config_id, config in load_configs(None, schema).items():
        if config.kind == ROW_RELEASE:
            release(source, tmp_path / f"{config_id}.parquet", config, schema, secrets, summary.apps)
            digests[config_id] = sha256_file(tmp_path / f"{config_id}.parquet")
    assert digests == RELEASE_DIGESTS
