"""Singling out: which subscribers have a released row that no other released row shares.

Exact over the whole release; the evaluator's truth is used only to count subscribers.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable

import duckdb
import numpy as np
import pyarrow as pa

from dsh_assets.core import duck
from dsh_assets.core.duck import sql_identifier
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.privacy.stats import AttackResult
from dsh_assets.core.release.schema import ROW_ID

BUCKETS = ("1", "2", "3-4", "5+")
"""Cell-size buckets of the distribution: one row, two rows, three or four, five or more."""

ASSUMPTIONS = (
    "Singling out (exact, whole release). The released rows are partitioned by the released "
    "categorical quasi-identifiers: the time window (as coarsened), province, application (as "
    "released, an app group where apps are grouped), radio type, and the station (enb_id) where the "
    "release keeps it. A cell holding exactly one row singles that row out: an attacker who knows "
    "those few fields of an observation finds one row, and with it every released measurement of "
    "that observation. A subscriber counts when at least one of their released rows sits in a cell "
    "of one; the rate is those subscribers over the subscribers with at least one released row. "
    "Evaluator truth (which subscriber each row belongs to) is used only to count subscribers; the "
    "attack itself uses the release alone. Singled out is not identified: naming the person still "
    "needs outside knowledge of that observation. Cells of two to four rows are reported too, as "
    "near misses (a 2-row cell leaves a one-in-two guess). Exact count, so no sample, interval "
    "or baseline: a cell of one is a fact of the release, not a guess."
)


@dataclass(frozen=True)
class SinglingOutResult(AttackResult):
    """Exact singling-out counts of one release (no evaluator truth kept, only counts)."""

    subscribers_singled_out: int
    subscribers_released: int
    rows_released: int
    cells_by_bucket: tuple[int, ...]
    """Number of cells per bucket, in BUCKETS order."""
    rows_by_bucket: tuple[int, ...]
    """Number of released rows per bucket, in BUCKETS order."""
    quasi_identifiers: tuple[str, ...]

    @property
    def rate(self) -> float:
        if self.subscribers_released == 0:
            return 0.0
        return self.subscribers_singled_out / self.subscribers_released

    def figures(self) -> dict:
        return {
            "singling_out_rate": float(self.rate),
            "singling_out_cells": dict(zip(BUCKETS, (int(n) for n in self.cells_by_bucket))),
        }

    def metadata(self) -> dict:
        return {
            **self.figures(),
            "singling_out_rows": dict(zip(BUCKETS, (int(n) for n in self.rows_by_bucket))),
            "subscribers_singled_out": int(self.subscribers_singled_out),
            "subscribers_released": int(self.subscribers_released),
            "rows_released": int(self.rows_released),
            "cells": int(sum(self.cells_by_bucket)),
            "quasi_identifiers": list(self.quasi_identifiers),
            "exact": True,
            "assumptions": ASSUMPTIONS,
        }


def bucket_of(cell_rows: int) -> int:
    """The index in BUCKETS of a cell of ``cell_rows`` rows."""
    return 0 if cell_rows == 1 else 1 if cell_rows == 2 else 2 if cell_rows <= 4 else 3


def bucketed(cells_by_size: Iterable[tuple[int, int]]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(cells per bucket, rows per bucket) from (cell size, cells of that size) pairs: each engine counts the cells
    of each size, this puts them in BUCKETS."""
    cells, rows = [0] * len(BUCKETS), [0] * len(BUCKETS)
    for size, count in cells_by_size:
        cells[bucket_of(int(size))] += int(count)
        rows[bucket_of(int(size))] += int(size) * int(count)
    return tuple(cells), tuple(rows)


def count_subscribers(connection: duckdb.DuckDBPyConnection, release: ReleaseUnderTest,
                      positions: np.ndarray | None = None) -> int:
    """Distinct subscribers (evaluator truth) of released rows, by their positions in the release.

    ``positions=None`` counts every released row, once for a source file and the rows a plan keeps (kept in
    ``release.book``): singling out, inference and the pair evidence of one run all need it. A
    released row's truth is its source row (``release.released_row_ids()[position]``) and that row's
    subscriber; DuckDB counts them straight from the source file, so the subscriber column is never held in
    Python.
    """
    if positions is not None:
        return _count_subscribers(connection, release, positions)
    kept = hashlib.sha256(np.packbits(np.asarray(release.keep, dtype=bool))).hexdigest()
    kind = ("subscribers_released", release.schema.subscriber, len(release.keep), kept)
    return release.book.figure(release.source_path, kind, lambda _: _count_subscribers(connection, release, None))


def _count_subscribers(connection: duckdb.DuckDBPyConnection, release: ReleaseUnderTest,
                       positions: np.ndarray | None) -> int:
    subscriber, source = duck.sql_identifier(release.schema.subscriber), [str(release.source_path)]
    if positions is None and release.keep.all():
        return duck.count_distinct(connection, subscriber, "FROM read_parquet(?)", source, len(release.keep))
    if positions is None and 2 * np.count_nonzero(~release.keep) <= len(release.keep):
        rows, join = np.flatnonzero(~release.keep), "ANTI JOIN"  # the few withheld rows
    else:
        rows = release.released_row_ids() if positions is None else release.released_row_ids()[positions]
        join = "SEMI JOIN"
    if len(rows) == 0 and join == "SEMI JOIN":
        return 0
    connection.register("__rows", pa.table({ROW_ID: rows.astype(np.int64)}))
    try:
        counted = len(rows) if join == "SEMI JOIN" else len(release.keep) - len(rows)
        return duck.count_distinct(connection, subscriber, f"FROM read_parquet(?) {join} __rows USING ({ROW_ID})",
                                   source, counted)
    finally:
        connection.unregister("__rows")


def evaluate(release: ReleaseUnderTest) -> SinglingOutResult:
    """Partition the released rows by their released quasi-identifiers and count cells of one.

    DuckDB groups the released Parquet file with count(*) and any_value(row position): a cell of
    one row is that row, whose position joins it to the evaluator's truth (its source row, hence
    its subscriber). Only the positions of one-row cells reach Python.
    """
    qis = list(release.config.released_qis(release.schema))
    rows_released = int(np.count_nonzero(release.keep))
    keys = ", ".join(sql_identifier(name) for name in qis) or "NULL"
    with duck.connect() as connection:
        connection.execute(
            "CREATE TEMP TABLE cells AS SELECT count(*) AS n, any_value(file_row_number) AS position "
            f"FROM read_parquet(?, file_row_number = true) GROUP BY {keys}",
            [str(release.released_path)],
        )
        in_cells = connection.execute("SELECT coalesce(sum(n), 0) FROM cells").fetchall()[0][0]
        if in_cells != rows_released:
            raise ValueError(f"{release.released_path}: {in_cells} rows, the plan keeps {rows_released}")
        alone = connection.execute("SELECT position FROM cells WHERE n = 1").fetchnumpy()["position"]
        by_size = connection.execute("SELECT n, count(*) FROM cells GROUP BY n").fetchall()
        singled_out = count_subscribers(connection, release, np.sort(alone.astype(np.int64)))
        released_subscribers = count_subscribers(connection, release)
    cell_counts, row_counts = bucketed(by_size)
    return SinglingOutResult(
        subscribers_singled_out=singled_out,
        subscribers_released=released_subscribers,
        rows_released=int(rows_released),
        cells_by_bucket=cell_counts,
        rows_by_bucket=row_counts,
        quasi_identifiers=tuple(qis),
    )
