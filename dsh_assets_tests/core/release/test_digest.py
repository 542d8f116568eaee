import datetime as dt
import hashlib
import struct

import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core.files import DigestBook
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
    assert content_sha256(tmp_path / "a.parquet", book=DigestBook()) == content_sha256(tmp_path / "b.parquet",
                                                                                       book=DigestBook())


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


def _digest_by_hand(columns: dict, types: dict[str, str], block_rows: int) -> str:
    """The module docstring's definition, value by value: the names and types, then per block of rows its row
    count and, column by column, a validity byte per row and the values (8-byte little-endian numbers, nulls as
    zero; or every string's 8-byte length, then their UTF-8 bytes, nulls as empty)."""
    digest = hashlib.sha256(b"dsh-content-v1\x00")
    for name, canonical_type in types.items():
        digest.update(f"{name}\x00{canonical_type}\x00".encode())
    rows = len(next(iter(columns.values())))
    for start in range(0, rows, block_rows):
        block = {name: values[start:start + block_rows] for name, values in columns.items()}
        digest.update(len(block[next(iter(block))]).to_bytes(8, "little"))
        for name, values in block.items():
            digest.update(bytes(value is not None for value in values))
            if types[name] == "string":
                encoded = [(value or "").encode() for value in values]
                digest.update(b"".join(len(text).to_bytes(8, "little") for text in encoded) + b"".join(encoded))
            elif types[name] in ("double", "float"):
                digest.update(b"".join(struct.pack("<d", 0.0 if value is None else value) for value in values))
            else:
                digest.update(b"".join(struct.pack("<q", 0 if value is None else value) for value in values))
    return digest.hexdigest()


def test_the_digest_is_its_definition_for_every_kind_of_column_sliced_or_not():
    """Plain, large and dictionary strings, 4- and 8-byte numbers, timestamps; nulls, empty strings, a column of
    nulls only; arrays sliced out of larger ones (an offset into their buffers), as a reader's batches are."""
    microseconds = [1_795_000_000_000_000 + 60_000_000 * i for i in range(11)]
    columns = {
        "s": ["s_a", None, "", "s_ccc", "é", None, "s_dd", "", "x", "yy", "zzz"],
        "big": ["a", "bb", None, "", "ccc", "d", None, "e", "ff", "", "g"],
        "app": ["video", "web", "video", None, "web", "web", "video", None, "video", "web", "web"],
        "empty": [None] * 11,
        "n32": [1, -2, None, 4, 0, 2**31 - 1, None, -(2**31), 7, 8, 9],
        "n64": [2**62, None, -1, 0, 5, 6, None, 8, 9, 10, -(2**63)],
        "f32": [1.5, None, -0.25, 3.0, None, 0.0, 2.0, 4.5, None, 8.0, 16.0],
        "f64": [0.1, 2.2e300, None, -3.3, float("nan"), 5.5, None, 7.7, -0.0, 9.9, 1e-300],
        "time": [microseconds[0], None, *microseconds[2:]],
    }
    types = {"s": "string", "big": "string", "app": "string", "empty": "string", "n32": "int32", "n64": "int64",
             "f32": "float", "f64": "double", "time": "timestamp[us, tz=UTC]"}
    arrow_types = {"s": pa.string(), "big": pa.large_string(), "app": pa.string(), "empty": pa.string(),
                   "n32": pa.int32(), "n64": pa.int64(), "f32": pa.float32(), "f64": pa.float64(),
                   "time": pa.timestamp("us", "UTC")}
    padded = pa.table({name: pa.array(["pad", *values, "pad"] if types[name] == "string" else [0, *values, 0],
                                      arrow_types[name]) for name, values in columns.items()})
    padded = padded.set_column(2, "app", padded.column("app").dictionary_encode())  # a dictionary column
    table = padded.slice(1, 11)  # every column starts one value into its buffers
    by_hand = {block_rows: _digest_by_hand(columns, types, block_rows) for block_rows in (3, 4, 11)}
    for block_rows, expected in by_hand.items():
        for batch_rows in (1, 2, 5, 11):
            assert content_sha256_of_batches(table.schema, table.to_batches(max_chunksize=batch_rows),
                                             block_rows=block_rows) == expected, (block_rows, batch_rows)
    assert len(set(by_hand.values())) == 3  # the blocks' row counts are part of it
