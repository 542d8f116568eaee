import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.release.schema import ROW_ID, SourceError, load_schema
from dsh_assets.core.release.source import ingest_source, validate_source, validate_stored_source
from dsh_assets_tests.tables import row, table, write

SCHEMA = load_schema()


def rejected(tmp_path, path, pattern):
    out = tmp_path / "ingested" / "source.parquet"
    with pytest.raises(SourceError, match=pattern):
        ingest_source(path, out, SCHEMA)
    assert not out.parent.exists() or not any(out.parent.iterdir())  # nothing written, not even a temp file


def test_valid_source_is_summarised_and_ingested_with_row_ids(tmp_path):
    path = write(tmp_path / "s.parquet", [row("358400000001"), row("358400000002"), row("358400000001", 10)])
    summary = ingest_source(path, tmp_path / "in.parquet", SCHEMA)
    assert (summary.rows, summary.subscribers, summary.apps) == (3, 2, ("Gaming",))
    assert pq.read_table(tmp_path / "in.parquet").column(ROW_ID).to_pylist() == [0, 1, 2]
    validate_stored_source(tmp_path / "in.parquet", SCHEMA)


def test_missing_column_is_named(tmp_path):
    data = table([row()]).drop_columns(["jitter_ms", "imei"])
    pq.write_table(data, tmp_path / "s.parquet")
    rejected(tmp_path, tmp_path / "s.parquet", "missing columns: imei, jitter_ms")


def test_wrong_type_is_named(tmp_path):
    data = table([row()])
    data = data.set_column(data.schema.get_field_index("cqi"), "cqi", pa.array(["high"]))
    pq.write_table(data, tmp_path / "s.parquet")
    rejected(tmp_path, tmp_path / "s.parquet", "column cqi has type string, expected float")


def test_negative_measurements_are_counted(tmp_path):
    rows = [row(), row(radio_latency_ms=-1.0), row(radio_latency_ms=-0.5), row(cqi=-3.0)]
    path = write(tmp_path / "s.parquet", rows)
    rejected(tmp_path, path, "radio_latency_ms: 2 negative values.*cqi: 1 negative")


def test_nan_measurement_is_refused(tmp_path):
    path = write(tmp_path / "s.parquet", [row(), row(jitter_ms=float("nan"))])
    rejected(tmp_path, path, "jitter_ms: 1 NaN values")


def test_null_measurement_is_accepted(tmp_path):
    path = write(tmp_path / "s.parquet", [row(), row(jitter_ms=None)])
    assert validate_source(path, SCHEMA).rows == 2


def test_null_quasi_identifier_is_counted(tmp_path):
    path = write(tmp_path / "s.parquet", [row(), row(province=None), row(province=None), row(radio=None)])
    rejected(tmp_path, path, "province: 2 null values.*radio_access_type: 1 null")


def test_empty_table_is_refused(tmp_path):
    pq.write_table(table([]), tmp_path / "s.parquet")
    rejected(tmp_path, tmp_path / "s.parquet", "is empty")


def test_file_that_is_not_parquet_is_refused(tmp_path):
    (tmp_path / "s.parquet").write_text("msisdn,imsi\n1,2\n")
    rejected(tmp_path, tmp_path / "s.parquet", "is not a Parquet file")


def test_missing_file_is_refused(tmp_path):
    rejected(tmp_path, tmp_path / "absent.parquet", "does not exist")


def test_integer_measurements_and_naive_timestamps_are_normalised(tmp_path):
    data = table([row(), row("358400000002")])
    data = data.set_column(data.schema.get_field_index("video_stall_count"), "video_stall_count", pa.array([1, 2]))
    naive = data.column("time_start").cast(pa.timestamp("ms"))
    data = data.set_column(data.schema.get_field_index("time_start"), "time_start", naive)
    pq.write_table(data, tmp_path / "s.parquet")
    ingest_source(tmp_path / "s.parquet", tmp_path / "in.parquet", SCHEMA)
    stored = pq.read_table(tmp_path / "in.parquet")
    assert stored.schema.field("video_stall_count").type == pa.float64()
    assert stored.schema.field("time_start").type == pa.timestamp("us", tz="UTC")
    assert stored.column("time_start")[0].as_py() == row()["time_start"]


def test_stored_source_with_shuffled_row_ids_fails_validation(tmp_path):
    path = write(tmp_path / "s.parquet", [row(), row("358400000002")])
    ingest_source(path, tmp_path / "in.parquet", SCHEMA)
    data = pq.read_table(tmp_path / "in.parquet")
    data = data.set_column(data.schema.get_field_index(ROW_ID), ROW_ID, pa.array([1, 0]))
    pq.write_table(data, tmp_path / "in.parquet")
    with pytest.raises(SourceError, match="2 rows whose row id is not their position"):
        validate_stored_source(tmp_path / "in.parquet", SCHEMA)
