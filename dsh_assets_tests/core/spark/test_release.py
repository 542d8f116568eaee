"""The release on Spark against the embedded engine: same rows, values and order (content digest), same bytes;
and the exact attacks' figures on Spark equal to the embedded ones."""

import dataclasses
import datetime as dt

import pyarrow.parquet as pq
import pytest

from dsh_assets.core.files import sha256_file
from dsh_assets.core.privacy import inference, singling_out
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.release.configs import ROW_RELEASE, load_configs, publishable_configs
from dsh_assets.core.release.digest import content_sha256
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.synth import synthesize
from dsh_assets.core.release.transform import release
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.spark import privacy as spark_privacy
from dsh_assets.core.spark import release as spark_release
from dsh_assets.core.spark import source as spark_source
from dsh_assets_tests.spark import on_both_engines
from dsh_assets_tests.tables import RELEASE_PERIOD, row, s, under_test, write

pytestmark = pytest.mark.spark

SCHEMA = load_schema()
CONFIGS = {cid: c for cid, c in publishable_configs(load_configs(schema=SCHEMA)).items() if c.kind == ROW_RELEASE}
SECRETS = Secrets(b"spark-parity-seed", b"spark-parity-key", "test")
BATCH_LIMIT = "spark.sql.execution.arrow.maxRecordsPerBatch"


def edge_rows() -> list[dict]:
    """Exactly k = 5 rows in one cell (two with null measurements), k - 1 = 4 in another, a lone row, and an
    hour that gathers 2 + 3 rows from two windows (kept only where time is coarsened)."""
    exactly_k = [row(f"3584000000{i:02d}", 0, app="Gaming", radio="5G", value=10.0 + i) for i in range(5)]
    exactly_k[1]["radio_latency_ms"] = None
    exactly_k[3]["dl_throughput_kbps"] = None
    k_minus_one = [row(f"3585000000{i:02d}", 0, app="Streaming", radio="4G", value=5.0 * i) for i in range(4)]
    lone = [row("358409999999", 30, province="Lappi", app="IM", radio="3G")]
    hour = [row(f"3586000000{i:02d}", 10 if i < 2 else 20, app="VPN", radio="5G", value=1.0 + i) for i in range(5)]
    return exactly_k + k_minus_one + lone + hour


def _both(spark, raw, directory):
    """The source ingested by each engine; the stored files must be the same bytes."""
    embedded, on_spark = directory / "source.parquet", directory / "source_spark.parquet"
    summary = ingest_source(raw, embedded, SCHEMA)
    assert spark_source.ingest_source(spark, raw, on_spark, SCHEMA) == summary
    assert sha256_file(on_spark) == sha256_file(embedded)
    return embedded, summary


def _parity(spark, source, summary, directory, config_id) -> dict:
    config = CONFIGS[config_id]
    embedded_out, spark_out = directory / f"{config_id}.parquet", directory / f"{config_id}_spark.parquet"
    plan = release(source, embedded_out, config, SCHEMA, SECRETS, summary.apps, period=RELEASE_PERIOD)
    counts = spark_release.release(spark, source, spark_out, config, SCHEMA, SECRETS, summary.apps,
                                   period=RELEASE_PERIOD)
    assert (counts.rows_in, counts.rows_released, counts.cells_withheld) == (
        plan.rows_in, plan.rows_released, plan.cells_withheld)
    assert pq.read_table(spark_out).equals(pq.read_table(embedded_out))
    assert content_sha256(spark_out) == content_sha256(embedded_out)
    return {"rows": counts.rows_released, "file_equal": sha256_file(spark_out) == sha256_file(embedded_out)}


@pytest.fixture(scope="module")
def edge_source(spark, tmp_path_factory):
    directory = tmp_path_factory.mktemp("spark_edge")
    return (*_both(spark, write(directory / "raw.parquet", edge_rows()), directory), directory)


@pytest.mark.parametrize("config_id", sorted(CONFIGS))
def test_release_on_spark_equals_the_embedded_one_on_edge_cells(spark, edge_source, config_id):
    source, summary, directory = edge_source
    parity = _parity(spark, source, summary, directory, config_id)
    assert parity["file_equal"]
    expected_rows = {"id_removal": 15, "c15_window_k5_noise5": 5, "c16_window_k5_noise5_key": 5,
                     "c17_hour_groups_k5_noise10": 10}
    assert parity["rows"] == expected_rows.get(config_id, parity["rows"])


def test_single_row_period_on_spark_equals_the_embedded_one(spark, tmp_path):
    source, summary = _both(spark, write(tmp_path / "raw.parquet", [row()]), tmp_path)
    rows = {config_id: _parity(spark, source, summary, tmp_path, config_id)["rows"] for config_id in CONFIGS}
    assert rows["id_removal"] == 1 and rows["c15_window_k5_noise5"] == 0


def test_synthetic_release_on_spark_equals_the_embedded_one(spark, tmp_path):
    raw = tmp_path / "raw.parquet"
    synthesize(raw, rows=3000, subscribers=600, seed=5, period=dt.date(2026, 11, 20), schema=SCHEMA)
    source, summary = _both(spark, raw, tmp_path)
    for config_id, config in CONFIGS.items():
        assert _parity(spark, source, summary, tmp_path, config_id)["file_equal"]
        plan = release(source, tmp_path / "attacked.parquet", config, SCHEMA, SECRETS, summary.apps,
                       period=RELEASE_PERIOD)
        embedded = singling_out.evaluate(ReleaseUnderTest(source, tmp_path / "attacked.parquet", config, SCHEMA, plan))
        assert spark_privacy.singling_out(spark, source, config, SCHEMA, SECRETS, RELEASE_PERIOD) == embedded


@pytest.mark.parametrize("records_per_batch", [1, 7, None])
def test_spark_arrow_batch_size_does_not_change_the_bytes(spark, edge_source, records_per_batch):
    source, summary, directory = edge_source
    default = spark.conf.get(BATCH_LIMIT)
    spark.conf.set(BATCH_LIMIT, str(records_per_batch or default))
    try:
        for config_id in ("c16_window_k5_noise5_key", "c17_hour_groups_k5_noise10"):
            out = directory / f"{config_id}_batch{records_per_batch}.parquet"
            spark_release.release(spark, source, out, CONFIGS[config_id], SCHEMA, SECRETS, summary.apps,
                                  period=RELEASE_PERIOD)
            embedded = directory / f"{config_id}_embedded_batch{records_per_batch}.parquet"
            release(source, embedded, CONFIGS[config_id], SCHEMA, SECRETS, summary.apps, period=RELEASE_PERIOD)
            assert sha256_file(out) == sha256_file(embedded)
            assert content_sha256(out) == content_sha256(embedded)
    finally:
        spark.conf.set(BATCH_LIMIT, default)


@pytest.fixture(scope="module")
def edge_attacked(edge_source) -> dict[str, ReleaseUnderTest]:
    """The edge source released by the embedded engine under each configuration, with its truth."""
    source, summary, directory = edge_source
    attacked = {}
    for config_id, config in CONFIGS.items():
        released = directory / f"{config_id}_attacked.parquet"
        plan = release(source, released, config, SCHEMA, SECRETS, summary.apps, period=RELEASE_PERIOD)
        attacked[config_id] = ReleaseUnderTest(source, released, config, SCHEMA, plan)
    return attacked


@pytest.mark.parametrize("config_id", sorted(CONFIGS))
def test_singling_out_on_spark_equals_the_embedded_figures(spark, edge_attacked, config_id):
    attacked = edge_attacked[config_id]
    embedded, on_spark = on_both_engines(spark, lambda engine: engine.singling_out(attacked, SECRETS, RELEASE_PERIOD))
    assert embedded == singling_out.evaluate(attacked)
    assert on_spark.metadata() == embedded.metadata()
    # One subscriber per edge row: the truth joins by row id.
    assert on_spark.subscribers_released == attacked.plan.rows_released


@pytest.mark.parametrize("config_id", sorted(CONFIGS))
def test_inference_on_spark_equals_the_embedded_figures(spark, edge_attacked, config_id):
    attacked = edge_attacked[config_id]
    embedded, on_spark = on_both_engines(spark, lambda engine: engine.inference(attacked, SECRETS, RELEASE_PERIOD))
    assert embedded == inference.evaluate(attacked)
    assert on_spark == embedded and on_spark.metadata() == embedded.metadata()
    assert on_spark.rows_released == attacked.plan.rows_released
    # Microaggregation in groups of 10 withholds every edge cell (at most 5 rows): no row, so no class.
    assert (on_spark.classes > 0) == (attacked.plan.rows_released > 0)


def test_inference_of_a_single_row_period_on_spark_equals_the_embedded_figures(spark, tmp_path):
    # Released alone (k = 0), the row is its class: inferable. Withheld (k = 5), nothing is released; the
    # other k = 5 configurations withhold it the same way (their release parity: the single-row test above).
    for config_id in ("id_removal", "c15_window_k5_noise5"):
        config = CONFIGS[config_id]
        attacked = under_test(tmp_path, [row()], config, name=config_id, secrets=SECRETS)
        on_spark = spark_privacy.inference(spark, attacked.source_path, config, SCHEMA, SECRETS, RELEASE_PERIOD)
        assert on_spark == inference.evaluate(attacked)
        assert (on_spark.rows_released, on_spark.inferable_classes_of_one_row) == ((0, 0) if config.k else (1, 1))


def at_and_below_threshold() -> list[dict]:
    """Four classes (Uusimaa, 5G, station 101; one per minute), Gaming against IM:

    X (minute 0):  s1..s9 Gaming, s10 IM                        9/10 = 0.9 exactly
    Y (minute 10): s11..s18 Gaming, s19 IM                      8/9 = 0.889, just below 0.9
    Z (minute 20): s21..s31 Gaming, s32..s40 IM, 5 rows each    55/100 = 0.55 exactly (0.55 * 100 is
                                                                55.00000000000001 in floats)
    W (minute 30): s1..s6 Gaming (again), s41..s45 IM           6/11 = 0.545, just below 0.55
    """
    def rows(subscribers, minute, app, each=1):
        return [row(s(n), minute, app=app, value=float(i)) for n in subscribers for i in range(each)]

    return (rows(range(1, 10), 0, "Gaming") + rows([10], 0, "IM")
            + rows(range(11, 19), 10, "Gaming") + rows([19], 10, "IM")
            + rows(range(21, 32), 20, "Gaming", each=5) + rows(range(32, 41), 20, "IM", each=5)
            + rows(range(1, 7), 30, "Gaming") + rows(range(41, 46), 30, "IM"))


@pytest.fixture(scope="module")
def at_threshold(tmp_path_factory) -> ReleaseUnderTest:
    return under_test(tmp_path_factory.mktemp("at_threshold"), at_and_below_threshold(), CONFIGS["id_removal"],
                      secrets=SECRETS)


@pytest.mark.parametrize("threshold, inferable_classes, rows_in, rows_correct, subscribers", [
    (0.9, 1, 10, 9, 9),  # X only: s1..s9
    (0.55, 3, 119, 72, 28),  # X, Y and Z: s1..s9, s11..s18, s21..s31 (s1..s6 also have W's Gaming rows)
])
def test_inference_on_spark_compares_the_threshold_exactly_as_embedded(spark, at_threshold, threshold,
                                                                      inferable_classes, rows_in, rows_correct,
                                                                      subscribers):
    embedded = inference.evaluate(at_threshold, threshold=threshold)
    assert (embedded.classes, embedded.inferable_classes, embedded.rows_in_inferable_classes,
            embedded.rows_correctly_inferable, embedded.subscribers_inferable) == (
        4, inferable_classes, rows_in, rows_correct, subscribers)
    assert (embedded.rows_released, embedded.subscribers_released) == (130, 44)
    on_spark = spark_privacy.inference(spark, at_threshold.source_path, at_threshold.config, SCHEMA, SECRETS,
                                       RELEASE_PERIOD, threshold=threshold)
    assert on_spark == embedded and on_spark.metadata() == embedded.metadata()


def test_inference_on_spark_infers_nothing_where_the_app_is_not_released(spark, tmp_path):
    no_app = dataclasses.replace(CONFIGS["id_removal"], drop_fields=("identifiers", SCHEMA.app))
    attacked = under_test(tmp_path, at_and_below_threshold(), no_app, secrets=SECRETS)
    on_spark = spark_privacy.inference(spark, attacked.source_path, no_app, SCHEMA, SECRETS, RELEASE_PERIOD)
    assert on_spark == inference.evaluate(attacked)
    assert (on_spark.app_released, on_spark.rate, on_spark.subscribers_released) == (False, 0.0, 44)
