import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core.release.digest import content_sha256, content_sha256_of_batches

UTC = dt.timezone.utc


def _table() -> pa.Table:
    return pa.table({
        "alias": pa.array(["s_a", None, "s_ccc", "", "s_dd"] * 3, pa.string()),
        "time": pa.array([dt.datetime(2026, 11, 20, 8, m, tzinfo=UTC) for m in range(15)], pa.timestamp("us", "UTC")),
        "station": pa.array(range(15), pa.int64()),
        "latency": pa.array([1.5, None, 0.0, 2.25, 3.0] * 3, pa.float64()),
    })


def test_digest_does_not_depend_on_row_groups_compression_or_dictionary(tmp_path):
    table = _table()
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=2, compression="zstd", use_dictionary=False)
    pq.write_table(table, tmp_path / "b.parquet", row_group_size=15, compression="none", use_dictionary=True)
    assert content_sha256(tmp_path / "a.parquet") == content_sha256(tmp_path / "b.parquet")


def test_digest_does_not_depend_on_batching():
    table = _table()
    expected = content_sha256_of_batches(table.schema, table.to_batches(), block_rows=4)
    for size in (1, 3, 7, 15):
        assert content_sha256_of_batches(table.schema, table.to_batches(max_chunksize=size), block_rows=4) == expected


def test_digest_sees_a_changed_value_a_null_and_the_row_order():
    table = _table()
    base = content_sha256_of_batches(table.schema, table.to_batches())
    changed = table.set_column(3, "latency", pa.array([1.5, None, 0.0, 2.25, 3.0000001] + [1.5, None, 0.0, 2.25, 3.0] * 2))
    nulled = table.set_column(0, "alias", pa.array([""] + ["s_a", None, "s_ccc", "", "s_dd"][1:] + ["s_a", None, "s_ccc", "", "s_dd"] * 2))
    reordered = table.take(pa.array([1, 0] + list(range(2, 15))))
    for other in (changed, nulled, reordered):
        assert content_sha256_of_batches(other.schema, other.to_batches()) != base


def test_digest_sees_string_boundaries():
    """("ab", "c") and ("a", "bc") concatenate alike; their lengths tell them apart."""
    one = pa.table({"s": ["ab", "c"]})
    two = pa.table({"s": ["a", "bc"]})
    assert content_sha256_of_batches(one.schema, one.to_batches()) != content_sha256_of_batches(two.schema, two.to_batches())
