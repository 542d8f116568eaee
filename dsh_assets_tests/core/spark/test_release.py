"""The release on Spark against the embedded engine: same rows, values and order (content digest), same bytes;
and its singling-out figures on Spark equal to the embedded ones."""

import datetime as dt

import pyarrow.parquet as pq
import pytest

from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy import singling_out
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
from dsh_assets_tests.tables import RELEASE_PERIOD, row, sha256_file, write

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
    summary = ingest_source(raw, embedded, SCHEMA, book=DigestBook())
    assert spark_source.ingest_source(spark, raw, on_spark, SCHEMA, book=DigestBook()) == summary
    assert sha256_file(on_spark) == sha256_file(embedded)
    return embedded, summary


def _parity(spark, source, summary, directory, config_id) -> dict:
    config = CONFIGS[config_id]
    embedded_out, spark_out = directory / f"{config_id}.parquet", directory / f"{config_id}_spark.parquet"
    plan = release(source, embedded_out, config, SCHEMA, SECRETS, summary.apps, period=RELEASE_PERIOD,
                   book=DigestBook())
    counts = spark_release.release(spark, source, spark_out, config, SCHEMA, SECRETS, summary.apps,
                                   period=RELEASE_PERIOD, book=DigestBook())
    assert (counts.rows_in, counts.rows_released, counts.cells_withheld) == (
        plan.rows_in, plan.rows_released, plan.cells_withheld)
    assert pq.read_table(spark_out).equals(pq.read_table(embedded_out))
    assert content_sha256(spark_out, book=DigestBook()) == content_sha256(embedded_out, book=DigestBook())
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
                       period=RELEASE_PERIOD, book=DigestBook())
        embedded = singling_out.evaluate(ReleaseUnderTest(source, tmp_path / "attacked.parquet", config, SCHEMA, plan,
                                                          book=DigestBook()))
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
                                  period=RELEASE_PERIOD, book=DigestBook())
            embedded = directory / f"{config_id}_embedded_batch{records_per_batch}.parquet"
            release(source, embedded, CONFIGS[config_id], SCHEMA, SECRETS, summary.apps, period=RELEASE_PERIOD,
                    book=DigestBook())
            assert sha256_file(out) == sha256_file(embedded)
            assert content_sha256(out, book=DigestBook()) == content_sha256(embedded, book=DigestBook())
    finally:
        spark.conf.set(BATCH_LIMIT, default)
