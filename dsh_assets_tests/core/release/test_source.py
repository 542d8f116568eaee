import dataclasses
import datetime as dt
import hashlib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsh_assets.core import duck, tables
from dsh_assets.core.files import DigestBook
from dsh_assets.core.release import source as source_module
from dsh_assets.core.release.schema import ROW_ID, SourceError, load_schema
from dsh_assets.core.release.source import (ROW_ORDER_SALT, distinct_apps, ingest_source, validate_source,
                                            validate_stored_source)
from dsh_assets_tests.tables import T0, row, sha256_file, synthetic_stored, table, write

SCHEMA = load_schema()
UTC = dt.timezone.utc
DAY = (dt.datetime(2026, 11, 20, tzinfo=UTC), dt.datetime(2026, 11, 21, tzinfo=UTC))
"""The daily period of tables.T0."""


def rejected(tmp_path, path, pattern, schema=SCHEMA, window=None):
    out = tmp_path / "ingested" / "source.parquet"
    with pytest.raises(SourceError, match=pattern):
        ingest_source(path, out, schema, window, book=DigestBook())
    assert not out.parent.exists() or not any(out.parent.iterdir())  # nothing written, not even a temp file


def test_valid_source_is_summarised_and_ingested_with_row_ids(tmp_path):
    path = write(tmp_path / "s.parquet", [row("358400000001"), row("358400000002"), row("358400000001", 10)])
    summary = ingest_source(path, tmp_path / "in.parquet", SCHEMA, book=DigestBook())
    assert (summary.rows, summary.subscribers, summary.apps) == (3, 2, ("Gaming",))
    assert pq.read_table(tmp_path / "in.parquet").column(ROW_ID).to_pylist() == [0, 1, 2]
    validate_stored_source(tmp_path / "in.parquet", SCHEMA, book=DigestBook())


def test_one_read_summarises_as_the_separate_queries_did(tmp_path):
    # Apps, counted in the validating read, are those of distinct_apps: distinct, in DuckDB's order.
    rows = [row("358400000001", app="VPN"), row("358400000002", app="Gaming"), row("358400000001", 10, app="IM"),
            row("358400000003", app="Gaming")]
    path = write(tmp_path / "s.parquet", rows)
    summary = ingest_source(path, tmp_path / "in.parquet", SCHEMA, book=DigestBook())
    assert summary.apps == distinct_apps(path, SCHEMA) == ("Gaming", "IM", "VPN")
    assert (summary.rows, summary.subscribers) == (4, 3)
    assert validate_stored_source(tmp_path / "in.parquet", SCHEMA, book=DigestBook()) == summary


def test_stored_source_without_row_ids_fails_validation(tmp_path):
    path = write(tmp_path / "s.parquet", [row()])
    with pytest.raises(SourceError, match=f"missing column: {ROW_ID}"):
        validate_stored_source(path, SCHEMA, book=DigestBook())


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


def with_naive_time(data: pa.Table) -> pa.Table:
    naive = data.column("time_start").cast(pa.timestamp("ms"))
    return data.set_column(data.schema.get_field_index("time_start"), "time_start", naive)


def test_integer_measurements_and_naive_timestamps_are_normalised(tmp_path):
    # Naive timestamps are read in the zone the roles file declares; here it declares UTC.
    data = table([row(), row("358400000002")])
    data = data.set_column(data.schema.get_field_index("video_stall_count"), "video_stall_count", pa.array([1, 2]))
    data = with_naive_time(data)
    pq.write_table(data, tmp_path / "s.parquet")
    ingest_source(tmp_path / "s.parquet", tmp_path / "in.parquet", dataclasses.replace(SCHEMA, time_zone="UTC"),
                  book=DigestBook())
    stored = pq.read_table(tmp_path / "in.parquet")
    assert stored.schema.field("video_stall_count").type == pa.float64()
    assert stored.schema.field("time_start").type == pa.timestamp("us", tz="UTC")
    assert stored.column("time_start")[0].as_py() == row()["time_start"]


def test_stored_source_with_shuffled_row_ids_fails_validation(tmp_path):
    path = write(tmp_path / "s.parquet", [row(), row("358400000002")])
    ingest_source(path, tmp_path / "in.parquet", SCHEMA, book=DigestBook())
    data = pq.read_table(tmp_path / "in.parquet")
    data = data.set_column(data.schema.get_field_index(ROW_ID), ROW_ID, pa.array([1, 0]))
    pq.write_table(data, tmp_path / "in.parquet")
    with pytest.raises(SourceError, match="2 rows whose row id is not their position"):
        validate_stored_source(tmp_path / "in.parquet", SCHEMA, book=DigestBook())


def test_duplicate_column_names_are_refused(tmp_path):
    # Readers disagree on which `province` they take (the last for DuckDB's checks, the first for
    # a by-name lookup): a file whose first `province` held MSISDNs would release them.
    data = table([row(), row("358400000002")])
    data = data.append_column("province", data.column("msisdn"))
    pq.write_table(data, tmp_path / "s.parquet")
    rejected(tmp_path, tmp_path / "s.parquet", r"duplicate column names: province \(2 columns\)")


@pytest.mark.parametrize("value", [float("inf"), float("-inf")])
def test_infinite_measurements_are_counted(tmp_path, value):
    rows = [row(), row(jitter_ms=value), row(jitter_ms=value, cqi=value)]
    path = write(tmp_path / "s.parquet", rows)
    rejected(tmp_path, path, r"jitter_ms: 2 infinite values.*cqi: 1 infinite values")
    with pytest.raises(SourceError) as refused:
        validate_source(path, SCHEMA)
    assert "negative" not in str(refused.value), "an infinity is named once, as an infinity"


def test_rows_outside_the_period_are_counted_with_their_first_and_last_time(tmp_path):
    month_later = 30 * 24 * 60
    day_before = -(8 * 60 + 1)  # T0 is 08:00 UTC: 23:59 the day before
    rows = [row(), row(minute=month_later), row(minute=month_later + 10), row(minute=day_before)]
    path = write(tmp_path / "s.parquet", rows)
    rejected(tmp_path, path, r"time_start: 3 rows outside the period 2026-11-20 00:00:00\+00:00 to "
                             r"2026-11-21 00:00:00\+00:00 \(first 2026-11-19 23:59:00\+00:00, "
                             r"last 2026-12-20 08:10:00\+00:00\)", window=DAY)
    # Without a window (a stored source, a test table) the time is not checked.
    assert validate_source(path, SCHEMA).rows == 4


def test_rows_inside_the_period_pass_and_the_end_is_exclusive(tmp_path):
    inside = write(tmp_path / "in.parquet", [row(), row(minute=15 * 60 + 59)])
    assert validate_source(inside, SCHEMA, DAY).rows == 2
    at_end = write(tmp_path / "end.parquet", [row(), row(minute=16 * 60)])  # T0 is 08:00; 08:00 + 16 h = next day
    rejected(tmp_path, at_end, "1 rows outside the period", window=DAY)


def test_naive_timestamps_are_refused_without_a_declared_time_zone(tmp_path):
    pq.write_table(with_naive_time(table([row()])), tmp_path / "s.parquet")
    rejected(tmp_path, tmp_path / "s.parquet", r"time_start has timestamps without a time zone.*time_zone")


def test_naive_timestamps_are_converted_from_the_declared_time_zone(tmp_path):
    pq.write_table(with_naive_time(table([row(), row("358400000002", minute=10)])), tmp_path / "s.parquet")
    helsinki = dataclasses.replace(SCHEMA, time_zone="Europe/Helsinki")
    ingest_source(tmp_path / "s.parquet", tmp_path / "in.parquet", helsinki, DAY, book=DigestBook())
    stored = pq.read_table(tmp_path / "in.parquet").column("time_start").to_pylist()
    # 08:00 wall-clock time in Helsinki in November (UTC+2) is 06:00 UTC.
    assert sorted(stored) == [T0 - dt.timedelta(hours=2), T0 - dt.timedelta(hours=2) + dt.timedelta(minutes=10)]


def test_the_window_applies_to_converted_times(tmp_path):
    # 00:30 local time in Helsinki on 2026-11-20 is 22:30 UTC on the 19th: outside the UTC day.
    early = row(minute=-(7 * 60 + 30))
    pq.write_table(with_naive_time(table([row(), early])), tmp_path / "s.parquet")
    helsinki = dataclasses.replace(SCHEMA, time_zone="Europe/Helsinki")
    rejected(tmp_path, tmp_path / "s.parquet", r"1 rows outside .*first 2026-11-19 22:30:00\+00:00",
             schema=helsinki, window=DAY)


def test_rows_are_stored_by_cell_then_by_md5_of_their_input_row(tmp_path):
    # Worked out here with hashlib: the cells in (time, province, app, radio) order, then within a cell the
    # hex md5 of "dsh-row-order" + the input row number, as text.
    rows = [row(s, minute) for minute in (10, 0) for s in ("358400000001", "358400000002", "358400000003")]
    rows += [row("358400000004", 0, province="Lappi"), row("358400000005", 0, app="IM")]
    path = write(tmp_path / "s.parquet", rows)
    ingest_source(path, tmp_path / "in.parquet", SCHEMA, book=DigestBook())

    def key(index):
        shuffle = hashlib.md5(f"{ROW_ORDER_SALT}{index}".encode()).hexdigest()
        return (*(rows[index][name] for name in SCHEMA.categorical_qis), shuffle)

    expected = [rows[i]["msisdn"] + str(rows[i]["time_start"]) for i in sorted(range(len(rows)), key=key)]
    stored = pq.read_table(tmp_path / "in.parquet").to_pylist()
    assert [r["msisdn"] + str(r["time_start"]) for r in stored] == expected
    assert [r[ROW_ID] for r in stored] == list(range(len(rows)))


@pytest.mark.parametrize("text", ["dsh-row-order0", "dsh-row-order1099339", "", "abc", "x" * 200])
def test_md5_halves_are_the_hex_digest_read_as_two_big_endian_numbers(text):
    digest = hashlib.md5(text.encode()).hexdigest()
    with duck.connect() as connection:
        halves = connection.execute(f"SELECT {', '.join(source_module.md5_halves('$text'))}", {"text": text}).fetchone()
    assert halves == (int(digest[:16], 16), int(digest[16:], 16))


@pytest.fixture(scope="module")
def synthetic_input(tmp_path_factory):
    directory = tmp_path_factory.mktemp("buckets")
    synthetic_stored(directory, rows=3000, subscribers=500, seed=3, stored="one_bucket.parquet")
    return directory


@pytest.mark.parametrize("bucket_rows", [400, 1024])
def test_the_number_of_scratch_buckets_does_not_change_the_stored_bytes(synthetic_input, tmp_path, monkeypatch,
                                                                        bucket_rows):
    monkeypatch.setattr(source_module, "INPUT_BATCH_ROWS", bucket_rows)
    monkeypatch.setattr(source_module, "INGEST_BATCH_ROWS", 97)  # batches that end inside cells
    monkeypatch.setattr(tables, "SCRATCH_BUCKET_ROWS", bucket_rows)
    monkeypatch.setattr(tables, "MAX_SCRATCH_BUCKETS", 4)  # 400 rows a bucket grow to 750
    out = tmp_path / "stored" / "source.parquet"
    ingest_source(synthetic_input / "raw.parquet", out, SCHEMA, book=DigestBook())
    assert sha256_file(out) == sha256_file(synthetic_input / "one_bucket.parquet")
    assert [p.name for p in out.parent.iterdir()] == ["source.parquet"]  # no scratch bucket left


def test_a_failed_write_leaves_neither_the_stored_source_nor_a_scratch_bucket(synthetic_input, tmp_path,
                                                                              monkeypatch):
    monkeypatch.setattr(source_module, "INPUT_BATCH_ROWS", 500)
    monkeypatch.setattr(tables, "SCRATCH_BUCKET_ROWS", 500)

    def failing(batches, out_path, schema, validated, book):
        next(iter(batches))
        raise OSError("the disk went away")

    monkeypatch.setattr(source_module, "write_stored_source", failing)
    out = tmp_path / "stored" / "source.parquet"
    with pytest.raises(OSError, match="the disk went away"):
        ingest_source(synthetic_input / "raw.parquet", out, SCHEMA, book=DigestBook())
    assert list(out.parent.iterdir()) == []


def test_every_kind_of_bad_measurement_is_counted_apart_and_zero_and_null_pass(tmp_path):
    rows = [row(jitter_ms=-2.0), row(jitter_ms=float("nan")), row(jitter_ms=float("inf")), row(jitter_ms=-0.0),
            row(jitter_ms=None), row(jitter_ms=0.0), row(cqi=float("-inf")), row(cqi=float("nan")), row(cqi=-1e-300)]
    path = write(tmp_path / "s.parquet", rows)
    with pytest.raises(SourceError) as refused:
        validate_source(path, SCHEMA)
    message = str(refused.value)
    assert ("column jitter_ms: 1 negative values (measurements must be >= 0); column jitter_ms: 1 NaN values "
            "(use null for a missing measurement); column jitter_ms: 1 infinite values") in message
    assert "cqi: 1 negative values" in message and "cqi: 1 NaN values" in message and "cqi: 1 infinite" in message
    assert sum(name in message for name in SCHEMA.measurements) == 2  # the other measurements are clean


def test_distinct_subscribers_counted_in_several_passes_are_the_same_count(tmp_path, monkeypatch):
    rows = [row(f"3584000000{i % 37:02d}", i % 50) for i in range(300)]
    path = write(tmp_path / "s.parquet", rows)
    in_one = validate_source(path, SCHEMA)
    monkeypatch.setattr(duck, "DISTINCT_ROWS_PER_PASS", 40)  # 8 passes
    assert validate_source(path, SCHEMA) == in_one and in_one.subscribers == 37


def test_a_failure_while_filling_the_buckets_leaves_none_of_them(synthetic_input, tmp_path, monkeypatch):
    monkeypatch.setattr(source_module, "INPUT_BATCH_ROWS", 500)
    monkeypatch.setattr(tables, "SCRATCH_BUCKET_ROWS", 500)
    real, calls = tables.take_rows, []

    def failing_on_the_third_batch(*args):
        calls.append(1)
        if len(calls) == 3:
            raise OSError("the disk went away")
        return real(*args)

    monkeypatch.setattr(tables, "take_rows", failing_on_the_third_batch)
    out = tmp_path / "stored" / "source.parquet"
    with pytest.raises(OSError, match="the disk went away"):
        ingest_source(synthetic_input / "raw.parquet", out, SCHEMA, book=DigestBook())
    assert list(out.parent.iterdir()) == []


def test_the_ingest_keeps_what_validating_its_stored_file_finds_and_a_changed_file_is_read_again(
        synthetic_input, tmp_path, monkeypatch):
    out, book = tmp_path / "source.parquet", DigestBook()
    summary = ingest_source(synthetic_input / "raw.parquet", out, SCHEMA, book=book)
    read = source_module._validated(out, SCHEMA, None, stored=True)
    assert read == summary  # what the kept figure stands for: the stored file, read

    def no_read(*args, **kwargs):
        raise AssertionError("the stored source was read again")

    monkeypatch.setattr(source_module, "_validated", no_read)
    assert validate_stored_source(out, SCHEMA, book) == summary
    other_roles = dataclasses.replace(SCHEMA, measurements=SCHEMA.measurements[:-1])
    with pytest.raises(AssertionError, match="read again"):  # kept per roles, not per file alone
        validate_stored_source(out, other_roles, book)
    with pytest.raises(AssertionError, match="read again"):  # kept in the ingest's book, nowhere else
        validate_stored_source(out, SCHEMA, DigestBook())
    monkeypatch.undo()

    # The same file with two row ids swapped: another inode, read and refused.
    data = pq.read_table(out)
    ids = data.column(ROW_ID).to_numpy().copy()
    ids[[0, 1]] = ids[[1, 0]]
    pq.write_table(data.set_column(data.schema.get_field_index(ROW_ID), ROW_ID, pa.array(ids)), out)
    with pytest.raises(SourceError, match="2 rows whose row id is not their position"):
        validate_stored_source(out, SCHEMA, book)


def test_the_stored_file_keeps_the_declared_types_and_stores_identifiers_raw(synthetic_input, tmp_path):
    out = tmp_path / "source.parquet"
    ingest_source(synthetic_input / "raw.parquet", out, SCHEMA, book=DigestBook())
    assert pq.read_schema(out).remove_metadata() == source_module.ingested_schema(SCHEMA)
    row_group = pq.ParquetFile(out).metadata.row_group(0)
    chunks = {row_group.column(i).path_in_schema: row_group.column(i) for i in range(row_group.num_columns)}
    raw = {name for name, chunk in chunks.items() if chunk.compression == "UNCOMPRESSED"}
    assert raw == set(SCHEMA.identifiers)
    assert {name for name, chunk in chunks.items() if not chunk.is_stats_set} == set(SCHEMA.identifiers)
    assert {chunks[name].compression for name in chunks.keys() - raw} == {"SNAPPY"}
