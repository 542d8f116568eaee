"""File helpers: checksums, atomic writes, and a Parquet writer whose bytes do not depend on batching."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import queue
import re
import threading
import time
from pathlib import Path
from typing import Callable, Hashable, Iterator, Protocol, Sequence, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

T = TypeVar("T")

ROW_GROUP_ROWS = 262_144
"""Fixed row-group size: the file layout, hence its bytes, never follows the batch size."""


SETTLED_NS = 2_000_000_000
"""A file whose inode changed at least this long before it was hashed is kept in a DigestBook: a write in the
same timestamp tick as the hash could otherwise leave size and times unchanged (file systems stamp
times in ticks of up to 2 s)."""

SHA256 = "sha256"
"""The kind of a file's SHA-256 in a DigestBook."""


def _identity(status: os.stat_result) -> tuple[int, ...]:
    """Device, inode, size and modification and change times: any write through the file system changes one."""
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


class DigestBook:
    """Figures that depend only on a file's bytes (its SHA-256, the content digest of its rows, statistics of its
    columns), each kept with the file's identity as it stood when the figure was taken, and taken again once that
    identity moves; the one way this code takes a file's digest. Whoever spans the work owns a book: a `dsh`
    command's definitions (their ``digests`` resource, which their engine keeps its statistics in too), a
    verification; the same file is then hashed once where it is written and read at most once more. It holds at
    most ``capacity`` figures, and forgets the least recently used first.

    The inode's change time moves with any write, rename or permission change. A figure is kept once the file
    has settled (SETTLED_NS), or at once when the caller wrote the file and renamed it into place itself
    (``own_write``): then only another writer in that very timestamp tick (milliseconds on the file systems a
    home lives on) could change it unseen.
    """

    def __init__(self, capacity: int = 256):
        self._capacity = capacity
        self._known: dict[tuple, object] = {}

    def figure(self, path: str | os.PathLike, kind: Hashable, compute: Callable[[str | os.PathLike], T], *,
               own_write: bool = False) -> T:
        """``compute(path)``, or the figure of this ``kind`` kept for the file as it stands now."""
        before = os.stat(path)
        key = (kind, *_identity(before))
        if key in self._known:
            self._known[key] = self._known.pop(key)  # the last used is the last evicted
            return self._known[key]
        started_ns = time.time_ns()
        value = compute(path)
        settled = started_ns - before.st_ctime_ns >= SETTLED_NS
        if (own_write or settled) and _identity(os.stat(path)) == key[1:]:
            self.keep(path, kind, value)
        return value

    def sha256(self, path: str | os.PathLike, *, own_write: bool = False) -> str:
        """The file's SHA-256: the one kept for it as it stands, else read from its bytes."""
        return self.figure(path, SHA256, _read_sha256, own_write=own_write)

    def keep(self, path: str | os.PathLike, kind: Hashable, value) -> None:
        """Keep ``value`` as the ``kind`` of figure of the file as it stands now: for a writer that has just
        renamed the file into place and knows the figure without reading it back."""
        if len(self._known) >= self._capacity:
            self._known.pop(next(iter(self._known)))
        self._known[(kind, *_identity(os.stat(path)))] = value

    def carry(self, before: os.stat_result, path: str | os.PathLike) -> None:
        """The figures kept for a file as it stood at ``before`` hold for ``path`` too when it is that very inode
        with the same size and modification time: a hard link or a rename moves only the change time."""
        now = os.stat(path)
        if (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns) != (
                before.st_dev, before.st_ino, before.st_size, before.st_mtime_ns):
            return
        earlier = _identity(before)
        for (kind, *identity), value in list(self._known.items()):
            if tuple(identity) == earlier:
                self._known[(kind, *_identity(now))] = value


def _read_sha256(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class DiskFullError(OSError):
    """A write stopped because its file system is full; the message names the file."""


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True  # no /proc: os.kill's answer stands


def remove_stale_temporaries(final: str | os.PathLike) -> list[Path]:
    """Remove the temporaries of ``final`` (``.<name>.<pid>[.<suffix>].tmp``) whose writing process is gone.

    A process killed mid-write cannot clean up after itself; the next write of the same file does.
    A live writer's temporary (another run of the same partition) is left alone.
    """
    final = Path(final)
    pattern = re.compile(rf"^\.{re.escape(final.name)}\.(\d+)(\.[^/]*)?\.tmp$")
    removed = []
    try:
        candidates = list(final.parent.iterdir())
    except FileNotFoundError:
        return removed
    for candidate in candidates:
        match = pattern.match(candidate.name)
        if match and int(match.group(1)) != os.getpid() and not pid_alive(int(match.group(1))):
            candidate.unlink(missing_ok=True)
            removed.append(candidate)
    return removed


@contextlib.contextmanager
def atomic_path(final: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``final``; rename it into place only if the block succeeds.

    Temporaries a killed writer of the same file left behind are removed first. A full disk is
    named as such, with the file it stopped: the previous file, if any, is left as it was.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(final)
    temporary = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        yield temporary
        os.replace(temporary, final)
    except OSError as error:
        if error.errno == errno.ENOSPC or "No space left on device" in str(error):
            raise DiskFullError(errno.ENOSPC, f"disk full: no space left on device writing {final} "
                                              f"(nothing replaced; a previous file stays as it was)") from error
        raise
    finally:
        temporary.unlink(missing_ok=True)


class FixedRowGroupWriter:
    """Buffers record batches and writes row groups of exactly ROW_GROUP_ROWS rows (the last may be short).

    Columns are snappy-compressed with min/max statistics, but for ``raw_columns``: written uncompressed and
    without statistics. Meant for high-entropy strings such as identifiers, which nothing filters on by range:
    on 11M MSISDNs snappy and the statistics were 1.0 of the 1.25 CPU seconds of the column's encoding, for
    half its size."""

    def __init__(self, path: str | os.PathLike, schema: pa.Schema, dictionary_columns: list[str],
                 raw_columns: Sequence[str] = ()):
        compression, statistics = "snappy", True
        if raw_columns:
            compression = {name: "none" if name in raw_columns else "snappy" for name in schema.names}
            statistics = [name for name in schema.names if name not in raw_columns]
        self._writer = pq.ParquetWriter(path, schema, compression=compression,
                                        use_dictionary=dictionary_columns or False, write_statistics=statistics)
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


class _HashingFile(io.RawIOBase):
    """A file opened for writing that hashes (SHA-256) every byte written to it, in order."""

    def __init__(self, path: str | os.PathLike):
        super().__init__()
        self._file = open(path, "wb")
        self.sha256 = hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        self.sha256.update(data)
        return self._file.write(data)

    def tell(self) -> int:
        return self._file.tell()

    def close(self) -> None:
        if not self.closed:
            self._file.close()
        super().close()


class RowDigest(Protocol):
    """A digest of rows in their order (``digest.ContentDigest``)."""

    def update(self, batch: pa.RecordBatch) -> None: ...

    def hexdigest(self) -> str: ...


@contextlib.contextmanager
def parquet_file(final: str | os.PathLike, schema: pa.Schema, dictionary_columns: list[str],
                 digests: dict[str, RowDigest] | None = None, raw_columns: Sequence[str] = (), *,
                 book: DigestBook) -> Iterator["BackgroundWriter | _Fanout"]:
    """Write ``final`` atomically in fixed row groups, encoding in a second thread (yields what takes the batches);
    ``raw_columns`` as FixedRowGroupWriter says.

    The SHA-256 is taken from the bytes as they are written and kept in ``book`` once the file is renamed into
    place, so recording a stored source or a release does not read it again. Each of ``digests`` (kind -> digest)
    is fed the same batches in a thread of its own and kept under its kind the same way."""
    digests = digests or {}
    with atomic_path(final) as temporary:
        with (_HashingFile(temporary) as sink,
              FixedRowGroupWriter(sink, schema, dictionary_columns, raw_columns) as parquet_writer,
              contextlib.ExitStack() as feeds):
            writers = [feeds.enter_context(BackgroundWriter(consume))
                       for consume in (parquet_writer.write, *(digest.update for digest in digests.values()))]
            yield writers[0] if len(writers) == 1 else _Fanout(writers)
        digest = sink.sha256.hexdigest()
    book.keep(final, SHA256, digest)
    for kind, row_digest in digests.items():
        book.keep(final, kind, row_digest.hexdigest())


class _Fanout:
    """Hands each batch to several BackgroundWriters."""

    def __init__(self, writers: list["BackgroundWriter"]):
        self._writers = writers

    def write(self, batch: pa.RecordBatch) -> None:
        for writer in self._writers:
            writer.write(batch)


class BackgroundWriter:
    """Feeds batches to ``consume`` (a FixedRowGroupWriter's write, a digest's update) from a second thread, so
    that work overlaps the caller's.

    One consumer takes the batches in the order given, so a file's bytes are those of a direct write. An error
    in the thread is raised in the caller at its next write or at close.
    """

    def __init__(self, consume: Callable[[pa.RecordBatch], None], depth: int = 2):
        self._consume = consume
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="background-writer", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while (batch := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self._consume(batch)
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
