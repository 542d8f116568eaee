"""The content digest of a released table: SHA-256 over its rows in release order, whatever the file layout.

The file SHA-256 changes with row groups, compression or the writer's version; this digest does not. It
hashes the column names and types, then the rows in fixed blocks of DIGEST_BLOCK_ROWS (cut by row index,
never by how the file or a reader batches them), each block column by column in a canonical encoding:
one validity byte per row, then little-endian 8-byte values (nulls as zero) for numbers and timestamps,
or 8-byte lengths and the UTF-8 bytes (nulls as empty) for strings. Two engines that release the same
rows and values in the same order therefore record the same digest, streamed batch by batch.
"""

from __future__ import annotations

import hashlib
import os
from typing import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsh_assets.core.files import remembered_digest

DIGEST_VERSION = b"dsh-content-v1"
DIGEST_BLOCK_ROWS = 65_536
_READ_BATCH_ROWS = 65_536


def _plain(column: pa.Array) -> pa.Array:
    return column.dictionary_decode() if pa.types.is_dictionary(column.type) else column


def _canonical_type(data_type: pa.DataType) -> str:
    if pa.types.is_dictionary(data_type):
        data_type = data_type.value_type
    if pa.types.is_large_string(data_type):
        return "string"
    return str(data_type)


def _encoded(column: pa.Array) -> Iterator[bytes | memoryview]:
    """The canonical bytes of one column of one block."""
    column = _plain(column)
    yield pc.is_valid(column).to_numpy(zero_copy_only=False).astype(np.uint8).tobytes()
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        strings = pa.concat_arrays([column.fill_null("").cast(pa.large_string())])
        offsets = np.frombuffer(strings.buffers()[1], dtype=np.int64)[strings.offset:strings.offset + len(strings) + 1]
        yield np.diff(offsets).astype("<u8").tobytes()
        yield memoryview(strings.buffers()[2])[int(offsets[0]):int(offsets[-1])]
    elif pa.types.is_floating(column.type):
        yield column.cast(pa.float64()).fill_null(0.0).to_numpy().astype("<f8").tobytes()
    elif pa.types.is_integer(column.type) or pa.types.is_timestamp(column.type):
        yield column.cast(pa.int64()).fill_null(0).to_numpy().astype("<i8").tobytes()
    else:
        raise TypeError(f"content digest: no canonical encoding for column type {column.type}")


def _blocks(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.Table]:
    """The rows of ``batches`` re-cut into blocks of ``rows`` rows (the last may be shorter)."""
    pending: list[pa.RecordBatch] = []
    pending_rows = 0
    for batch in batches:
        pending.append(batch)
        pending_rows += batch.num_rows
        while pending_rows >= rows:
            table = pa.Table.from_batches(pending)
            yield table.slice(0, rows)
            rest = table.slice(rows)
            pending, pending_rows = rest.to_batches(), rest.num_rows
    if pending_rows:
        yield pa.Table.from_batches(pending)


def content_sha256_of_batches(schema: pa.Schema, batches: Iterable[pa.RecordBatch],
                              block_rows: int = DIGEST_BLOCK_ROWS) -> str:
    """The content digest of the rows ``batches`` hold, in their order (``block_rows`` is for tests only)."""
    digest = hashlib.sha256(DIGEST_VERSION + b"\x00")
    for field in schema:
        digest.update(f"{field.name}\x00{_canonical_type(field.type)}\x00".encode())
    for block in _blocks(batches, block_rows):
        digest.update(block.num_rows.to_bytes(8, "little"))
        for column in block.columns:
            for part in _encoded(pa.concat_arrays(column.chunks) if column.num_chunks != 1 else column.chunk(0)):
                digest.update(part)
    return digest.hexdigest()


def _content_sha256_of_file(path: str | os.PathLike) -> str:
    parquet = pq.ParquetFile(path, pre_buffer=False)
    return content_sha256_of_batches(parquet.schema_arrow, parquet.iter_batches(batch_size=_READ_BATCH_ROWS))


def content_sha256(path: str | os.PathLike, *, own_write: bool = False) -> str:
    """The content digest of a Parquet file, read batch by batch (memory stays flat); remembered per process as
    ``files.remembered_digest`` says."""
    return remembered_digest(path, "content_sha256", _content_sha256_of_file, own_write=own_write)
