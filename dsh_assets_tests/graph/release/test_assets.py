"""Materialise real `source` and `released` partitions on an ephemeral instance and read what they record."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.dp.publish import read_public_metadata
from dsh_assets.core.release.configs import load_configs
from dsh_assets.core.provenance import code_version
from dsh_assets.core.layout import Layout
from dsh_assets.core.records import RecordStore
from dsh_assets.core.release.synth import synthesize
from dsh_assets.core.secrets import DEMO_ALIAS_KEY, DEMO_NOISE_SEED, Secrets
from dsh_assets.graph import runner
from dsh_assets.graph.instance import open_instance, postgres_urls
from dsh_assets.graph.partitions import PERIODS, register_period, release_key
from dsh_assets_tests.conftest import (
    CONFIG_IDS,
    DP_RELEASE_CHECKS,
    PERIOD,
    RELEASED_CHECKS,
    SMALL_ROWS,
    SMALL_SEED,
    SMALL_SUBSCRIBERS,
    SOURCE_CHECKS,
    Harness,
    check_results,
    make_defs,
    materialization_metadata,
    step_failure_messages,
    releases_text,
)
from dsh_assets_tests.tables import sha256_file

RELEASE_METADATA_KEYS = {
    "config_id", "config_hash", "source_sha256", "sha256", "rows_in", "rows_released", "rows_withheld",
    "seed_id", "seed_kind", "code_version", "lineage",
}
IDENTIFIER_COLUMNS = {"msisdn", "imsi", "imei"}


def everything_recorded(instance: dg.DagsterInstance) -> str:
    """Every event of every run on the instance (metadata, check evaluations, logs), serialised."""
    texts = []
    for run in instance.get_runs():
        texts.append(dg.serialize_value(run))
        texts.extend(dg.serialize_value(entry) for entry in instance.all_logs(run.run_id))
    return "\n".join(texts)


def metadata_texts(metadata: dict) -> list[str]:
    texts = []
    for value in metadata.values():
        texts.append(str(value.value))
        texts.append(repr(value))
        if isinstance(value, dg.JsonMetadataValue):
            texts.append(json.dumps(value.value))
    return texts


def secret_spellings(secret: bytes) -> list[str]:
    return [secret.decode(), secret.hex(), secret.hex().upper()]


def test_source_partition_materialises_and_passes_its_checks(harness: Harness, source_file):
    result = harness.source()
    assert result.success
    checks = check_results(result)
    assert SOURCE_CHECKS <= set(checks), checks
    assert all(checks.values()), checks
    metadata = {key: value.value for key, value in materialization_metadata(result).items()}
    stored = harness.home / "source" / PERIOD / "source.parquet"
    assert metadata["period"] == PERIOD
    assert metadata["rows"] == SMALL_ROWS
    assert metadata["subscribers"] == SMALL_SUBSCRIBERS
    assert metadata["input_sha256"] == sha256_file(source_file)
    assert metadata["sha256"] == sha256_file(stored)
    assert metadata["origin"]["kind"] == "file"
    assert metadata["code_version"] == code_version()


def test_releases_of_every_configuration_pass_their_checks_and_record_provenance(storage_harness: Harness, source_file):
    harness = storage_harness
    harness.source()
    configs = load_configs()
    demo = Secrets(DEMO_NOISE_SEED, DEMO_ALIAS_KEY, "demo")
    shas = {}
    for config_id in CONFIG_IDS:
        result = harness.release(config_id)
        assert result.success
        checks = check_results(result)
        assert RELEASED_CHECKS <= set(checks), checks
        assert all(checks.values()), f"{config_id}: {checks}"

        raw = materialization_metadata(result, "released")
        assert RELEASE_METADATA_KEYS <= set(raw), RELEASE_METADATA_KEYS - set(raw)
        assert "preview" not in raw  # no row of an unchecked release is recorded
        assert isinstance(raw["lineage"], dg.JsonMetadataValue)
        metadata = {key: value.value for key, value in raw.items()}
        path = harness.released_path(config_id)
        assert path.is_file()
        released_rows = pq.ParquetFile(path).metadata.num_rows

        assert metadata["config_id"] == config_id
        assert metadata["config_hash"] == configs[config_id].definition_hash()
        assert metadata["source_sha256"] == sha256_file(source_file)
        assert metadata["sha256"] == sha256_file(path)
        assert metadata["rows_in"] == SMALL_ROWS
        assert metadata["rows_released"] == released_rows
        assert metadata["rows_withheld"] == SMALL_ROWS - released_rows
        assert metadata["seed_id"] == demo.seed_id
        assert "demo" in metadata["seed_kind"].lower()
        assert metadata["code_version"] == code_version()
        lineage = metadata["lineage"]
        assert lineage["source"]["partition"] == PERIOD
        assert lineage["source"]["input_sha256"] == sha256_file(source_file)
        assert lineage["config"] == {"id": config_id, "hash": configs[config_id].definition_hash()}
        assert not IDENTIFIER_COLUMNS & set(pq.read_schema(path).names)
        if configs[config_id].k:
            assert metadata["rows_withheld"] > 0, f"{config_id}: k = {configs[config_id].k} withheld nothing"
        else:
            assert metadata["rows_withheld"] == 0

        texts = metadata_texts(raw)
        for secret in (DEMO_NOISE_SEED, DEMO_ALIAS_KEY):
            for spelling in secret_spellings(secret):
                assert not any(spelling in text for text in texts), f"{config_id}: demo secret in metadata"
        shas[config_id] = metadata["sha256"]

    assert len(set(shas.values())) == len(CONFIG_IDS), "two configurations released identical bytes"
    # The same recorded per partition, and nothing in the whole event log spells the demo secrets.
    for config_id in CONFIG_IDS:
        assert harness.recorded("released", release_key(config_id, PERIOD))[0]["sha256"] == shas[config_id]
    log = everything_recorded(harness.instance)
    for secret in (DEMO_NOISE_SEED, DEMO_ALIAS_KEY):
        for spelling in secret_spellings(secret):
            assert spelling not in log


def test_configured_secrets_appear_nowhere_in_recorded_metadata(monkeypatch, harness: Harness):
    noise_seed, alias_key = "nz-7Q2xK9pL4mV8-configured-noise-seed", "ak-3Rt6Yw1Hs5Jd-configured-alias-key"
    monkeypatch.setenv("DSH_NOISE_SEED", noise_seed)
    monkeypatch.setenv("DSH_ALIAS_KEY", alias_key)
    harness.source()
    configured = Secrets(noise_seed.encode(), alias_key.encode(), "environment")
    demo = Secrets(DEMO_NOISE_SEED, DEMO_ALIAS_KEY, "demo")
    for config_id in ("c15_window_k5_noise5", "c16_window_k5_noise5_key"):
        result = harness.release(config_id)
        assert result.success
        assert all(check_results(result).values())
        raw = materialization_metadata(result, "released")
        metadata = {key: value.value for key, value in raw.items()}
        assert "configured" in metadata["seed_kind"].lower()
        assert "demo" not in metadata["seed_kind"].lower()
        assert metadata["seed_id"] == configured.seed_id != demo.seed_id
        if config_id == "c16_window_k5_noise5_key":
            assert metadata["alias_key_id"] == configured.alias_key_id
        for text in metadata_texts(raw):
            for secret in (noise_seed, alias_key):
                assert secret not in text, f"{config_id}: a configured secret is in the metadata"
    log = everything_recorded(harness.instance)
    records = "\n".join(path.read_text() for path in Layout(harness.home).records.rglob("*.json"))
    assert '"seed_id"' in records
    for secret in (noise_seed, alias_key):
        for spelling in (secret, secret.encode().hex()):
            assert spelling not in log
            assert spelling not in records


def test_same_inputs_give_the_same_bytes_in_a_fresh_home_and_instance(tmp_path, source_file):
    shas = []
    for name in ("first", "second"):
        home = tmp_path / name
        with dg.DagsterInstance.ephemeral() as instance:
            harness = Harness(make_defs(home, source_file), instance, home)
            harness.source()
            shas.append({c: materialization_metadata(harness.release_only(c), "released")["sha256"].value
                         for c in ("c16_window_k5_noise5_key", "c17_hour_groups_k5_noise10")})
    assert shas[0] == shas[1]


def test_a_grouping_that_misses_an_app_of_the_source_is_refused(tmp_path, home, source_file, build_harness):
    packaged = releases_text()
    assert '"P2P", "VPN"]' in packaged
    releases = tmp_path / "releases_without_vpn.toml"
    releases.write_text(packaged.replace('"P2P", "VPN"]', '"P2P"]'))
    harness = build_harness(home, source_file, releases)
    harness.source()

    result = harness.release("c17_hour_groups_k5_noise10", raise_on_error=False)
    assert not result.success
    assert result.get_asset_materialization_events() == []
    message = "\n".join(step_failure_messages(result))
    assert "VPN" in message and "six_groups" in message and "does not cover" in message, message
    assert not harness.released_path("c17_hour_groups_k5_noise10").exists()
    assert not [p for p in home.glob("released/**/*") if p.is_file()], "a refused release left a file"
    assert harness.recorded("released", release_key("c17_hour_groups_k5_noise10", PERIOD)) == []

    # A configuration of the same file that keeps the apps is not affected.
    assert harness.release_only("c15_window_k5_noise5").success


def test_the_instance_knows_exactly_the_periods_whose_source_was_materialised(storage_harness: Harness):
    harness = storage_harness
    assert harness.instance.get_dynamic_partitions(PERIODS.name) == []
    assert harness.source(PERIOD).success
    later = "2026-11-21"  # the source file holds rows of PERIOD only: refused as another period's source
    assert not harness.source(later, raise_on_error=False).success
    # A failed later run of a period that has a source keeps it (here: the source file has gone).
    gone = Harness(make_defs(harness.home, harness.home / "gone.parquet"), harness.instance, harness.home)
    assert not gone.source(PERIOD, raise_on_error=False).success
    assert harness.instance.get_dynamic_partitions(PERIODS.name) == [PERIOD]


def test_a_release_whose_source_is_not_materialised_fails_clearly(harness: Harness):
    register_period(harness.instance, PERIOD)  # as the schedule does before the source's run
    result = harness.release("c15_window_k5_noise5", raise_on_error=False)
    assert not result.success
    message = "\n".join(step_failure_messages(result))
    assert f"source for period {PERIOD} is not materialised" in message, message
    assert not harness.released_path("c15_window_k5_noise5").exists()
    assert result.get_asset_materialization_events() == []


def test_a_release_over_a_tampered_stored_source_is_refused(harness: Harness):
    harness.source()
    stored = harness.home / "source" / PERIOD / "source.parquet"
    with open(stored, "ab") as handle:
        handle.write(b"\0")
    result = harness.release("id_removal", raise_on_error=False)
    assert not result.success
    assert "differs from its recorded SHA-256" in "\n".join(step_failure_messages(result))
    assert not harness.released_path("id_removal").exists()


ATTACK_ASSETS = ("singling_out", "numeric_fingerprint", "linkage", "cross_release_linkage", "inference")


def test_attack_and_utility_assets_materialise_for_two_configurations(harness: Harness, source_file):
    """One run per configuration materialises the release and its evidence, for the same partition."""
    harness.source()
    subscribers = set(pq.read_table(source_file, columns=["msisdn"]).column(0).to_pylist())
    figures = {}
    for config_id in ("id_removal", "c15_window_k5_noise5"):
        result = harness.release(config_id)
        assert result.success
        materialised = {e.materialization.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
        assert {"released", *ATTACK_ASSETS, "quality_groups", "elina_answers"} <= materialised
        figures[config_id] = {}
        for asset in (*ATTACK_ASSETS, "quality_groups", "elina_answers"):
            metadata = harness.recorded(asset, release_key(config_id, PERIOD))[0]
            figures[config_id].update(metadata["figures"])
            text = repr(metadata)
            assert not any(s in text for s in list(subscribers)[:500]), f"{asset}: a subscriber id in metadata"
        assert "assumptions" in repr(harness.recorded("singling_out", release_key(config_id, PERIOD))[0]).lower()
        for on_engine in ("singling_out", "inference", "quality_groups", "elina_answers"):
            assert harness.recorded(on_engine, release_key(config_id, PERIOD))[0]["engine"] == "duckdb"
        assert "engine" not in harness.recorded("linkage", release_key(config_id, PERIOD))[0]
    # No protection singles out many subscribers; TrimAndJitterV3's k = 5 cells single out none.
    assert figures["id_removal"]["singling_out_rate"] > 0.2
    assert figures["c15_window_k5_noise5"]["singling_out_rate"] == 0.0
    assert figures["id_removal"]["fingerprint_correct"] > figures["c15_window_k5_noise5"]["fingerprint_correct"]
    assert figures["id_removal"]["alias_chain_correct"] is None  # no alias released
    assert figures["id_removal"]["q3"]["available"] and not figures["c15_window_k5_noise5"]["q3"]["available"]
    assert figures["id_removal"]["groups_kept"] == figures["id_removal"]["groups_total"]
    assert _records_matching_the_event_log(harness) >= 1 + 2 * (3 + len(ATTACK_ASSETS))


def _records_matching_the_event_log(harness: Harness) -> int:
    """How many partitions the record store holds exactly as the event log does: the same values (but Dagster's
    own `dagster/` keys and the UI's tables), the same run and code version. Fails on the first that differs."""
    store, compared = RecordStore(Layout(harness.home).records), 0
    for key in harness.instance.get_asset_keys():
        for partition in harness.instance.get_materialized_partitions(key):
            latest = harness.instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1).records[0]
            materialization = latest.asset_materialization
            logged = {name: value.value for name, value in materialization.metadata.items()
                      if not name.startswith("dagster/") and not isinstance(value.value, dg.MetadataValue)}
            record = store.latest(key.to_user_string(), partition)
            assert json.dumps(record.values, sort_keys=True) == json.dumps(logged, sort_keys=True), (key, partition)
            assert (record.run_id, record.code_version) == (latest.run_id,
                                                            materialization.tags.get("dagster/code_version"))
            compared += 1
    return compared


def test_dp_release_spends_budget_once_and_reuses_the_stored_table(harness: Harness):
    harness.source()
    first = harness.release("dp_counts_eps1")
    assert first.success and all(check_results(first).values()), check_results(first)
    published = {k: v.value for k, v in materialization_metadata(first, "dp_release").items()}
    assert published["epsilon_debited"] == 1.0 and published["figures"]["budget"]["period_used"] == 1.0
    again = harness.release("dp_counts_eps1")
    reused = {k: v.value for k, v in materialization_metadata(again, "dp_release").items()}
    assert reused["epsilon_debited"] == 0.0 and reused["sha256"] == published["sha256"]
    lab = harness.recorded("dp_accuracy_lab", release_key("dp_counts_eps1", PERIOD))[0]
    assert lab["figures"]["replication_ok"] is True
    # A run that asks to draw again debits again: past the period's cap here, so it is refused, nothing written.
    redrawn = runner.launch_release(harness.defs, harness.instance, harness.config("dp_counts_eps1"), PERIOD,
                                    republish=True)
    assert not redrawn.success
    assert any("budget refused" in message for message in step_failure_messages(redrawn))
    assert sha256_file(harness.released_path("dp_counts_eps1")) == published["sha256"]


def test_a_dp_partition_has_no_attack_or_utility_asset_and_a_row_level_one_no_budget_check(harness: Harness):
    """Each kind of release has its own asset graph: no `not_applicable` results, no misplaced checks."""
    graph = harness.defs.resolve_asset_graph()
    checks_of = {key: {check.name for check in graph.get(key).check_keys} for key in graph.get_all_asset_keys()}
    row_level = {"released", *ATTACK_ASSETS, "quality_groups", "elina_answers"}
    # the DP graph has its own attack (dp_privacy_audit), Q1's median table (dp_q1_median) and its own
    # publication (dp_published), on its own criteria
    dp_level = {"dp_release", "dp_accuracy_lab", "dp_elina_answers", "dp_privacy_audit", "dp_q1_median",
                "dp_published"}

    def configs_of(asset: str) -> set[str]:
        partitions = graph.get(dg.AssetKey(asset)).partitions_def
        return set(partitions.get_partitions_def_for_dimension("config").get_partition_keys())

    dp_ids = {"dp_counts_eps1"}
    row_ids = {config_id for config_id, config in harness.defs.resources["home"].configs().items()
               if config.kind == "rows"}
    assert set(CONFIG_IDS) < row_ids  # a sweep's points are partitions too
    for asset in row_level:
        assert configs_of(asset) == row_ids, asset
    for asset in dp_level:
        assert configs_of(asset) == dp_ids, asset
    assert checks_of[dg.AssetKey("released")] == RELEASED_CHECKS
    assert checks_of[dg.AssetKey("dp_release")] == DP_RELEASE_CHECKS

    harness.source()
    result = harness.release("dp_counts_eps1")
    materialised = {e.materialization.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert materialised == dp_level
    assert set(check_results(result)) == DP_RELEASE_CHECKS



def test_dp_release_is_audited_its_errors_and_bound_recorded_and_q1_answered_from_it(harness: Harness):
    """The audit's lower bound, noise / bias / total per size class, the bound curve, Q1 from DP medians."""
    harness.source()
    result = harness.release("dp_counts_eps1")
    assert result.success
    key = release_key("dp_counts_eps1", PERIOD)
    audit = harness.recorded("dp_privacy_audit", key)[0]["figures"]["audit"]
    assert audit["ok"] and audit["epsilon_lower"] <= audit["epsilon_claimed"] == 0.75 and audit["target_cells"] == 4
    lab = harness.recorded("dp_accuracy_lab", key)[0]["figures"]
    for size in ("small", "large"):
        assert set(lab["error"][size]) >= {"noise", "bias", "total"}
        assert lab["error"][size]["total"] <= lab["error"][size]["bias"] + lab["error"][size]["noise"] + 1e-9
    assert lab["bound"]["chosen"] == 4 and set(lab["bound"]["candidates"]) == {"1", "2", "4", "8", "16", "32"}
    q1 = harness.recorded("dp_q1_median", key)[0]
    assert q1["figures"]["q1_replication_ok"] is True and q1["epsilon_spent"] == 0.1
    recorded_answers = harness.recorded("dp_elina_answers", key)[0]
    assert recorded_answers["engine"] == "duckdb"  # its base answers' passes ran on the home's engine
    answers = recorded_answers["figures"]["q1"]
    assert answers["release"] in ("Gaming", "Streaming", "tie") and answers["same_answer_draws"] == 20
    assert 0.0 <= answers["same_answer_rate"] <= 1.0
    status = harness.recorded("dp_q1_median", key)[0]["budget_period_used"]
    assert status == pytest.approx(1.1)  # counts 0.75 + Q2 0.25 + Q1 0.1, within the period cap of 1.1


def _auto_bound_releases(folder: Path) -> Path:
    """The test tier's configurations with dp_counts_eps1's bound "auto" (bound_epsilon 0.1, period cap 1.2)."""
    releases = folder / "auto_bound.toml"
    auto = 'max_cells_per_subscriber = "auto"\nbound_epsilon = 0.1\n'  # the period's total: 1.1 + 0.1
    releases.write_text(releases_text().replace("max_cells_per_subscriber = 4\n", auto)
                        .replace("period_cap = 1.1\n", "period_cap = 1.2\n"))
    return releases


def test_an_auto_bound_reaches_the_lab_and_the_audit_as_its_release_recorded_it(tmp_path, home, source_file,
                                                                               build_harness):
    harness = build_harness(home, source_file, _auto_bound_releases(tmp_path))
    harness.source()
    assert harness.release("dp_counts_eps1").success
    key = release_key("dp_counts_eps1", PERIOD)
    chosen = harness.recorded("dp_release", key)[0]["bound_chosen"]
    assert chosen == read_public_metadata(harness.released_path("dp_counts_eps1"))["max_cells_per_subscriber"]
    assert harness.recorded("dp_accuracy_lab", key)[0]["figures"]["bound"]["chosen"] == chosen
    audit = harness.recorded("dp_privacy_audit", key)[0]["figures"]["audit"]
    assert audit["ok"] and audit["epsilon_claimed"] == 0.75


def test_a_bound_made_auto_after_its_release_is_audited_with_the_bound_the_table_was_drawn_with(
        tmp_path, home, source_file, harness: Harness, build_harness):
    harness.source()
    assert harness.release("dp_counts_eps1").success  # the packaged bound, 4
    audited = build_harness(home, source_file, _auto_bound_releases(tmp_path)).evidence_only("dp_privacy_audit",
                                                                                             "dp_counts_eps1")
    assert audited.success, step_failure_messages(audited)
    assert harness.recorded("dp_privacy_audit", release_key("dp_counts_eps1", PERIOD))[0]["figures"]["audit"]["ok"]


PLANTED_ROWS = 60
STORAGE_SKIPS_HOME_FOLDERS = ("source", "inputs", "quarantine")
"""Where the home keeps a source's own rows (and what a failed check moved aside): scanned by nothing here."""


def planted_source(folder: Path) -> tuple[Path, list[str]]:
    """A small synthetic source whose `province` holds a phone number on 60 rows (a real export can carry such an
    error): a distinct number each, of a prefix the generator never gives a subscriber."""
    path = folder / "planted.parquet"
    synthesize(path, rows=3_000, subscribers=600, seed=SMALL_SEED, period=dt.date.fromisoformat(PERIOD))
    table = pq.read_table(path)
    planted = [f"35870{i:07d}" for i in range(PLANTED_ROWS)]
    assert not set(planted) & set(table.column("msisdn").to_pylist())
    provinces = table.column("province").to_pylist()
    for row, value in zip(range(0, table.num_rows, table.num_rows // PLANTED_ROWS), planted):
        provinces[row] = value
    index = table.schema.get_field_index("province")
    pq.write_table(table.set_column(index, "province", pa.array(provinces, table.schema.field(index).type)), path)
    return path, planted


def files_holding(folder: Path, values: list[str], skip: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """Every file under ``folder`` (but its top folders ``skip``) whose bytes hold one of ``values``."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.relative_to(folder).parts[0] not in skip:
            data = path.read_bytes()
            held = [value for value in values if value.encode() in data]
            if held:
                found[str(path)] = held
    return found


def database_text(url: str) -> str:
    """Every row of every table of a PostgreSQL database, as text (bytea as its hex)."""
    import psycopg2

    connection = psycopg2.connect(url)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
            texts = []
            for (table,) in cursor.fetchall():
                cursor.execute(f'SELECT t::text FROM "{table}" t')
                texts.extend(row[0] for row in cursor.fetchall())
    finally:
        connection.close()
    return "\n".join(texts)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def stored_instance(request, tmp_path, monkeypatch, home):
    """A persistent instance as `dsh` opens one: SQLite under the home, or PostgreSQL; and its storage as text
    (empty for SQLite, whose files are under the home and scanned as such)."""
    if request.param == "sqlite":
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))  # open_instance points it at the home's instance
        with open_instance(Layout(home)) as instance:
            yield instance, lambda: ""
        return
    from dsh_assets_tests.graph.conftest import postgres_instance

    with postgres_instance(request, tmp_path, monkeypatch) as instance:
        yield instance, lambda: database_text(postgres_urls()[1])


def test_no_row_value_of_a_release_reaches_dagster_storage_before_its_checks_pass(tmp_path, home, stored_instance):
    """A candidate's rows are kept out of the event log, run records, logs and check metadata until every
    blocking check of it passed; the planted numbers are found nowhere but in the source and the quarantine."""
    instance, storage_text = stored_instance
    inputs = tmp_path / "input"
    inputs.mkdir()
    source, planted = planted_source(inputs)
    harness = Harness(make_defs(home, source), instance, home)
    harness.source()
    checks = {config_id: check_results(harness.release(config_id, raise_on_error=False))
              for config_id in (*CONFIG_IDS, "dp_counts_eps1")}
    assert checks["id_removal"]["no_identifiers"] is False and checks["dp_counts_eps1"]["no_identifiers"] is False
    assert all(checks["c15_window_k5_noise5"].values())  # k = 5 withholds each planted row: its cell is its own
    harness.publication()
    assert runner.launch_report(harness.defs, instance, PERIOD).success

    in_storage = [value for value in planted if value in storage_text()]
    assert in_storage == [], f"planted values in the PostgreSQL storage: {in_storage[:5]}"
    leaked = files_holding(home, planted, skip=STORAGE_SKIPS_HOME_FOLDERS)
    leaked.update(files_holding(Path(instance.root_directory), planted))
    assert leaked == {}, f"planted values in the home or the instance's files: {leaked}"
