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

from dsh_assets.core.files import DigestBook

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


def _encoded(column: pa.Array) -> Iterator[bytes | memoryview | np.ndarray]:
    """The canonical bytes of one column of one block, as views of Arrow's buffers where they already are those
    bytes (8-byte numbers without nulls, string data): the copies were a third of the digest's time, and the
    digest is taken of every release as it is written."""
    column = _plain(column)
    rows, nulls = len(column), column.null_count
    yield pc.is_valid(column).to_numpy(zero_copy_only=False).view(np.uint8) if nulls else b"\x01" * rows
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        offset_type = np.int64 if pa.types.is_large_string(column.type) else np.int32
        column = column.fill_null("") if nulls else column
        _, offsets_buffer, data = column.buffers()
        offsets = np.frombuffer(offsets_buffer, dtype=offset_type)[column.offset:column.offset + rows + 1]
        yield np.diff(offsets).astype("<u8")
        yield memoryview(data)[int(offsets[0]):int(offsets[-1])]
    elif pa.types.is_floating(column.type):
        yield _little_endian_values(column, pa.float64(), 0.0)
    elif pa.types.is_integer(column.type) or pa.types.is_timestamp(column.type):
        yield _little_endian_values(column, pa.int64(), 0)
    else:
        raise TypeError(f"content digest: no canonical encoding for column type {column.type}")


def _little_endian_values(column: pa.Array, eight_bytes: pa.DataType, null_as) -> np.ndarray:
    """The column as ``eight_bytes`` numbers, nulls as ``null_as``, little-endian: a view of Arrow's buffer where it
    already holds them."""
    column = column.cast(eight_bytes) if column.type != eight_bytes else column
    column = column.fill_null(null_as) if column.null_count else column
    values = np.frombuffer(column.buffers()[1], dtype=eight_bytes.to_pandas_dtype(), count=len(column),
                           offset=column.offset * 8)
    return values.astype(values.dtype.newbyteorder("<"), copy=False)


class ContentDigest:
    """The content digest of rows fed batch by batch, in their order: blocks are cut by row index, so the batches'
    sizes do not matter (``block_rows`` is for tests only)."""

    def __init__(self, schema: pa.Schema, block_rows: int = DIGEST_BLOCK_ROWS):
        self._schema, self._block_rows = schema, block_rows
        self._digest = hashlib.sha256(DIGEST_VERSION + b"\x00")
        for field in schema:
            self._digest.update(f"{field.name}\x00{_canonical_type(field.type)}\x00".encode())
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0

    def update(self, batch: pa.RecordBatch) -> None:
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        while self._pending_rows >= self._block_rows:
            table = pa.Table.from_batches(self._pending, schema=self._schema)
            self._add_block(table.slice(0, self._block_rows))
            rest = table.slice(self._block_rows)
            self._pending, self._pending_rows = rest.to_batches(), rest.num_rows

    def hexdigest(self) -> str:
        if self._pending_rows:
            self._add_block(pa.Table.from_batches(self._pending, schema=self._schema))
            self._pending, self._pending_rows = [], 0
        return self._digest.hexdigest()

    def _add_block(self, block: pa.Table) -> None:
        self._digest.update(block.num_rows.to_bytes(8, "little"))
        for column in block.columns:
            for part in _encoded(pa.concat_arrays(column.chunks) if column.num_chunks != 1 else column.chunk(0)):
                self._digest.update(part)


def content_sha256_of_batches(schema: pa.Schema, batches: Iterable[pa.RecordBatch],
                              block_rows: int = DIGEST_BLOCK_ROWS) -> str:
    """The content digest of the rows ``batches`` hold, in their order (``block_rows`` is for tests only)."""
    digest = ContentDigest(schema, block_rows)
    for batch in batches:
        digest.update(batch)
    return digest.hexdigest()


def _content_sha256_of_file(path: str | os.PathLike) -> str:
    parquet = pq.ParquetFile(path, pre_buffer=False)
    return content_sha256_of_batches(parquet.schema_arrow, parquet.iter_batches(batch_size=_READ_BATCH_ROWS))


CONTENT_DIGEST_KIND = "content_sha256"
"""The kind under which the content digest of a file is kept in a ``files.DigestBook``."""


def content_sha256(path: str | os.PathLike, book: DigestBook, *, own_write: bool = False) -> str:
    """The content digest of a Parquet file, read batch by batch (memory stays flat), unless ``book`` keeps it for
    the file as it stands (a release writer keeps the digest of the rows it wrote)."""
    return book.figure(path, CONTENT_DIGEST_KIND, _content_sha256_of_file, own_write=own_write)
