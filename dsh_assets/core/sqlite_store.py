"""The SQLite plumbing the ledgers share: a durable connection and a write transaction that locks first.

Both the privacy-budget ledger (``core/dp/ledger.py``) and the publication ledger
(``core/publication/ledger.py``) decide by reading and then writing; ``write_transaction`` begins
with ``BEGIN IMMEDIATE``, which takes SQLite's write lock before anything is read, so two processes
deciding at once are serialised and the second sees what the first wrote. They may share one file:
each keeps its own table (as does retention's record of deletions, ``core/retention.py``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sqlite3
from pathlib import Path
from typing import Iterator

BUSY_TIMEOUT_S = 60.0
"""How long a writer waits for another's lock before SQLite raises ``database is locked``."""


@contextlib.contextmanager
def connect(path: str | os.PathLike) -> Iterator[sqlite3.Connection]:
    """An autocommit connection (rows by column name, ``synchronous = FULL``), closed on exit."""
    connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    connection.row_factory = sqlite3.Row
    try:
        connection.execute("PRAGMA synchronous = FULL")
        yield connection
    finally:
        connection.close()


def create_tables(path: str | os.PathLike, schema: str) -> Path:
    """The SQLite file at ``path`` (its folder created) with ``schema``'s tables (CREATE ... IF NOT EXISTS)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with connect(path) as connection:
        connection.executescript(schema)
    return path


def add_missing_column(path: str | os.PathLike, table: str, column: str, declaration: str) -> None:
    """Add ``column`` to ``table`` of a file made before the column existed (its default fills the old rows); looked
    for again under the write lock, so two processes adding it at once add it once."""
    def missing(connection: sqlite3.Connection) -> bool:
        return column not in {row["name"] for row in connection.execute(f"PRAGMA table_info({table})")}

    with connect(path) as connection:
        if not missing(connection):
            return
    with write_transaction(path) as connection:
        if missing(connection):
            connection.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")


@contextlib.contextmanager
def write_transaction(path: str | os.PathLike) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE: the write lock is taken before anything is read; committed on success, else rolled back."""
    with connect(path) as connection:
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield connection
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")


def utc_timestamp(moment: dt.datetime | None = None) -> str:
    """``moment`` (default: now; naive = UTC) as an ISO 8601 UTC timestamp."""
    moment = moment or dt.datetime.now(dt.timezone.utc)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.astimezone(dt.timezone.utc).isoformat()
