"""The one way the core opens DuckDB, and quotes what it puts into SQL text.

Every connection is a cursor of one in-memory database per process, with the session time zone set to UTC
(timestamps are tz-aware UTC throughout, so a time key truncates and compares as the release wrote it, whatever the
machine's zone) and no progress bar (nothing on stdout). Opening a database builds DuckDB's whole catalog of
functions (about 14 ms); a cursor of an open one costs microseconds, and a run opens hundreds. A cursor's temporary
tables, views and registered Arrow tables are its own and go when it closes, so the core creates only TEMP objects:
anything else would be shared by every cursor of the process. DuckDB keeps some options per database, not per cursor
(the memory limit, ``disabled_optimizers``): a query that needs one set resets it as soon as it is done
(``cross_release._relink``). Values are passed as query parameters where DuckDB allows it; where it does not (a
view's file, a CASE of constants), they are inlined as quoted literals.

Memory: the database gets the memory limit and the spill folder of ``configure`` (the home's settings;
docs/operations.md), so the limit bounds DuckDB's memory in the whole process. A sort, join or grouping larger
than the limit spills to that folder instead of growing the process; unset, DuckDB's own defaults apply (80% of
the RAM, spill beside the working directory).
"""

from __future__ import annotations

import os
import re
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import duckdb
import pyarrow as pa

MEMORY_LIMIT_ENV = "DSH_DUCKDB_MEMORY_LIMIT"
DEFAULT_MEMORY_LIMIT = "1GB"
"""Per process: every connection is a cursor of one database. 1GB keeps a whole `dsh run` under 2 GB at 11M rows
(the ingest sort peaked at 2.6 GB under 2GB, 1.6 GB under 1GB, in about the same CPU time: benchmarks/README.md)."""


@dataclass(frozen=True)
class MemorySettings:
    memory_limit: str | None = None
    """DuckDB's ``memory_limit`` ("2GB", "512MB"); None keeps DuckDB's default."""
    temp_directory: str | None = None
    """Where DuckDB spills; None keeps DuckDB's default."""


_memory = MemorySettings()
_database: tuple[int, duckdb.DuckDBPyConnection] | None = None
"""This process's database (by process id: a forked child opens its own), made by the first ``connect``."""


def configure(memory_limit: str | None, temp_directory: str | os.PathLike | None) -> None:
    """Memory limit and spill folder of every connection opened from now on in this process.

    Other settings than the current ones start a new database; cursors already open keep the old one until they
    close."""
    global _memory, _database
    settings = MemorySettings(memory_limit or None, str(temp_directory) if temp_directory else None)
    if settings != _memory:
        _memory, _database = settings, None


def memory_limit_problem(value: str) -> str | None:
    """Why DuckDB refuses ``value`` as a memory limit, in DuckDB's words (None: it takes it). DuckDB's own parser
    decides, on a throwaway database, so a setting is refused when it is read, not by a run's first query, and
    exactly what DuckDB takes is taken ("2GB", "512 MiB", "80%")."""
    try:
        with duckdb.connect() as probe:
            probe.execute(f"SET memory_limit = {sql_literal(value)}")
    except duckdb.Error as error:
        return str(error)
    return None


_BYTES_PER_UNIT = {"b": 1, "bytes": 1, "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12,
                   "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40}


def divided_memory_limit(limit: str, parts: int) -> str:
    """Each of ``parts`` processes' share of a memory limit, so that the limit bounds them together: "2GB" in two
    is "1000000000B", "80%" in two "40%". A unit DuckDB takes but this does not know is refused, naming it."""
    if parts <= 1:
        return limit
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z%]*)\s*", limit)
    unit = match[2].lower() if match else None
    if unit == "%":
        return f"{float(match[1]) / parts:g}%"
    if unit not in _BYTES_PER_UNIT:
        raise ValueError(f"memory limit {limit!r}: cannot share it between {parts} processes; write it in B, KB, MB, "
                         f"GB, TB, KiB, MiB, GiB, TiB or %")
    return f"{int(float(match[1]) * _BYTES_PER_UNIT[unit]) // parts}B"


def memory_settings() -> MemorySettings:
    return _memory


def connect() -> duckdb.DuckDBPyConnection:
    """A cursor of this process's database in UTC without a progress bar; a context manager that closes it (and
    drops its temporary tables, views and registered tables)."""
    cursor = _shared_database().cursor()
    cursor.execute("SET TimeZone = 'UTC'")
    cursor.execute("SET enable_progress_bar = false")
    return cursor


def _shared_database() -> duckdb.DuckDBPyConnection:
    global _database
    if _database is None or _database[0] != os.getpid():
        database = duckdb.connect()
        database.execute("SET enable_external_file_cache = false")  # every read sees the file as it is now
        if _memory.memory_limit:
            database.execute(f"SET memory_limit = {sql_literal(_memory.memory_limit)}")
        if _memory.temp_directory:
            os.makedirs(_memory.temp_directory, exist_ok=True)
            database.execute(f"SET temp_directory = {sql_literal(_memory.temp_directory)}")
        _database = (os.getpid(), database)
    return _database[1]


def drop_database() -> None:
    """Let go of this process's database: its buffers are freed once the cursors still open close, and the next
    ``connect`` opens a new one (with the same settings)."""
    global _database
    _database = None


def using(connection: duckdb.DuckDBPyConnection | None) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
    """The given connection (left open on exit), or a fresh ``connect()`` (closed on exit) when None."""
    return connect() if connection is None else nullcontext(connection)


DISTINCT_ROWS_PER_PASS = 16_000_000
"""Rows whose distinct values one query counts: DuckDB's hash table of distinct values does not spill (the 20M
distinct MSISDNs of 110M rows ran out of a 1GB limit in one query)."""


def count_distinct(connection: duckdb.DuckDBPyConnection, column: str, relation: str, parameters: list,
                   rows: int) -> int:
    """count(DISTINCT column) FROM relation, exactly: past DISTINCT_ROWS_PER_PASS rows, summed over passes that
    each count the values of one share of DuckDB's hash of them (disjoint shares, so no value is counted twice)."""
    passes = _passes(rows)
    if passes == 1:
        return int(connection.execute(f"SELECT count(DISTINCT {column}) {relation}", parameters).fetchall()[0][0])
    return sum(int(connection.execute(f"SELECT count(DISTINCT {column}) FROM (SELECT {column} {relation}) "
                                      f"WHERE hash({column}) % {passes} = {part}", parameters).fetchall()[0][0])
               for part in range(passes))


def _passes(rows: int) -> int:
    return max(1, -(-rows // DISTINCT_ROWS_PER_PASS))


def grouped(connection: duckdb.DuckDBPyConnection, key: str, select: str, relation: str, rows: int) -> pa.Table:
    """SELECT {select} {relation} GROUP BY {key}, as an Arrow table in no particular order, exactly: past
    DISTINCT_ROWS_PER_PASS rows, the groups of each share of DuckDB's hash of the key in turn (all of a group's
    rows fall in one share, so every group is whole), concatenated."""
    passes = _passes(rows)
    if passes == 1:
        return connection.sql(f"SELECT {select} {relation} GROUP BY {key}").to_arrow_table()
    return pa.concat_tables(
        connection.sql(f"SELECT {select} FROM (SELECT * {relation}) WHERE hash({key}) % {passes} = {part} "
                       f"GROUP BY {key}").to_arrow_table()
        for part in range(passes))


def sql_literal(value) -> str:
    """``value`` (a string, or a path) as a single-quoted SQL string literal, quotes doubled."""
    return "'" + str(value).replace("'", "''") + "'"


def sql_identifier(name: str) -> str:
    """``name`` as a double-quoted SQL identifier, double quotes doubled."""
    return '"' + name.replace('"', '""') + '"'
