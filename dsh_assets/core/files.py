"""File helpers: checksums, atomic writes, and a Parquet writer whose bytes do not depend on batching."""

from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import threading
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

ROW_GROUP_ROWS = 262_144
"""Fixed row-group size: the file layout, hence its bytes, never follows the batch size."""


def sha256_file(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def atomic_path(final: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``final``; rename it into place only if the block succeeds."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    temporary = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        yield temporary
        os.replace(temporary, final)
    finally:
        temporary.unlink(missing_ok=True)


class FixedRowGroupWriter:
    """Buffers record batches and writes row groups of exactly ROW_GROUP_ROWS rows (the last may be short)."""

    def __init__(self, path: str | os.PathLike, schema: pa.Schema, dictionary_columns: list[str]):
        self._writer = pq.ParquetWriter(
            path, schema, compression="snappy", use_dictionary=dictionary_columns or False
        )
        self._schema = schema
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self.rows_written = 0

    def write(self, batch: pa.RecordBatch) -> None:
        if not batch.schema.equals(self._schema):
            raise ValueError(f"batch schema {batch.schema} is not the file's schema {self._schema}")
        if batch.num_rows == 0:
            return
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        while self._pending_rows >= ROW_GROUP_ROWS:
            self._flush(ROW_GROUP_ROWS)

    def _flush(self, rows: int) -> None:
        table = pa.Table.from_batches(self._pending, schema=self._schema)
        # One contiguous chunk per row group, so page boundaries cannot follow batch boundaries either.
        self._writer.write_table(table.slice(0, rows).combine_chunks(), row_group_size=rows)
        rest = table.slice(rows)
        self._pending = rest.to_batches()
        self._pending_rows = rest.num_rows
        self.rows_written += rows

    def close(self) -> None:
        if self._pending_rows:
            self._flush(self._pending_rows)
        self._writer.close()

    def __enter__(self) -> "FixedRowGroupWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class BackgroundWriter:
    """Feeds a FixedRowGroupWriter from a second thread, so Parquet encoding overlaps the caller's work.

    One consumer takes the batches in the order given, so the file's bytes are those of a direct
    write. An error in the writer thread is raised in the caller at its next write or at close.
    """

    def __init__(self, writer: FixedRowGroupWriter, depth: int = 2):
        self._writer = writer
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="parquet-writer", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while (batch := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self._writer.write(batch)
                except BaseException as error:  # handed to the caller's thread
                    self._error = error

    def write(self, batch: pa.RecordBatch) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(batch)

    def close(self) -> None:
        """Wait for every queued batch; then raise the writer's error, if any."""
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def __enter__(self) -> "BackgroundWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
