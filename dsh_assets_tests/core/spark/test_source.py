"""A bad source is refused on Spark with the embedded engine's very message."""

import datetime as dt

import pyarrow.parquet as pq
import pytest

from dsh_assets.core.files import DigestBook
from dsh_assets.core.release.schema import SourceError, load_schema
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.spark import source as spark_source
from dsh_assets_tests.tables import T0, row, write

pytestmark = pytest.mark.spark

SCHEMA = load_schema()


def _refusal(ingest, *args) -> str:
    with pytest.raises(SourceError) as refused:
        ingest(*args, book=DigestBook())
    return str(refused.value)


def test_bad_values_are_refused_on_spark_with_the_same_message(spark, tmp_path):
    rows = [row(f"35840000000{i}") for i in range(4)]
    rows[0]["radio_latency_ms"] = -1.0
    rows[1]["jitter_ms"] = float("nan")
    rows[2]["cqi"] = float("inf")
    rows[3]["application_category"] = None
    rows.append(row("358400000009", minute=60 * 24))  # the next day: outside the period
    raw = write(tmp_path / "raw.parquet", rows)
    window = (T0.replace(hour=0), T0.replace(hour=0) + dt.timedelta(days=1))
    embedded = _refusal(ingest_source, raw, tmp_path / "a.parquet", SCHEMA, window)
    on_spark = _refusal(spark_source.ingest_source, spark, raw, tmp_path / "b.parquet", SCHEMA, window)
    assert on_spark == embedded
    for problem in ("1 negative values", "1 NaN values", "1 infinite values", "1 null values", "1 rows outside"):
        assert problem in on_spark
    assert not (tmp_path / "b.parquet").exists()


def test_missing_column_and_empty_source_are_refused_on_spark_with_the_same_message(spark, tmp_path):
    empty = write(tmp_path / "empty.parquet", [])
    assert (_refusal(spark_source.ingest_source, spark, empty, tmp_path / "b.parquet", SCHEMA)
            == _refusal(ingest_source, empty, tmp_path / "a.parquet", SCHEMA))
    no_cqi = write(tmp_path / "raw.parquet", [row()])
    pq.write_table(pq.read_table(no_cqi).drop_columns(["cqi"]), no_cqi)
    message = _refusal(spark_source.ingest_source, spark, no_cqi, tmp_path / "b.parquet", SCHEMA)
    assert message == _refusal(ingest_source, no_cqi, tmp_path / "a.parquet", SCHEMA)
    assert "missing columns: cqi" in message
