"""The one way the core opens DuckDB, and quotes what it puts into SQL text.

Every connection is private and in memory, with the session time zone set to UTC (timestamps are
tz-aware UTC throughout, so a time key truncates and compares as the release wrote it, whatever
the machine's zone) and no progress bar (nothing on stdout). Values are passed as query
parameters where DuckDB allows it; where it does not (a view's file, a CASE of constants), they
are inlined as quoted literals.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import duckdb


def connect() -> duckdb.DuckDBPyConnection:
    """A private in-memory connection in UTC without a progress bar; a context manager that closes it."""
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")
    connection.execute("SET enable_progress_bar = false")
    return connection


def using(connection: duckdb.DuckDBPyConnection | None) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
    """The given connection (left open on exit), or a fresh ``connect()`` (closed on exit) when None."""
    return connect() if connection is None else nullcontext(connection)


def sql_literal(value) -> str:
    """``value`` (a string, or a path) as a single-quoted SQL string literal, quotes doubled."""
    return "'" + str(value).replace("'", "''") + "'"


def sql_identifier(name: str) -> str:
    """``name`` as a double-quoted SQL identifier, double quotes doubled."""
    return '"' + name.replace('"', '""') + '"'
