"""Relationships between measurements: what a row-level release keeps of a session's values held together.

Per large (app, radio) group (at least ``large_group_records`` source rows) and per pair of released
measurements, Spearman's rank correlation in the source and in the release, each over the rows of the group where
both values are present: the values of that pair's complete rows ranked (ties get their average rank), then the
Pearson correlation of the two rank vectors (pandas' ``corr(method="spearman")`` and scipy's ``spearmanr`` on the
same rows give the same number). A pair is *strong* when its source |rho| is at least ``strong_pair_correlation``
in at least one large group. The error of a (pair, group) is |rho_release - rho_source|; the figures are its
largest value and its median over every (strong pair, large group) the release keeps.

A per-column figure is blind to this: a release that permutes each measurement on its own keeps every quantile
and loses every relationship. A release that cannot say (apps grouped, the app or radio column or a strong pair's
measurement dropped) has the figures unmeasured (None), never 0; where no large group is kept they are None too.
A source with large groups but no strong pair has nothing to lose: both figures are 0 and ``strong_pairs`` is
empty. A group the release keeps with fewer than ``min_records`` complete rows of a pair, or a pair whose release
rank correlation is undefined (every released value of one measurement tied), has lost that relationship: its
release rho counts as 0.

Work: one pass over each file, a batch of groups at a time (at most ``BATCH_ROWS`` rows held), each group's
measurements sorted once; a pair's ranks are then a filter of the sorted orders, O(n) per pair. Rows are read in
file order, so the sums, and every figure, are the same bytes on every run.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dsh_assets.core import duck
from dsh_assets.core.duck import sql_identifier

DEFAULT_STRONG_PAIR_CORRELATION = 0.3
BATCH_ROWS = 2_000_000
"""Rows of one batch of groups read at once: 2M rows of 14 measurements are 224 MB of float64."""

DEFINITION = (
    "Relationships between measurements: per large (app, radio) group (>= {large_group_records} source rows) and "
    "per pair of released measurements, Spearman's rank correlation (average ranks for ties) over the group's rows "
    "where both values are present, in the source and in the release. A pair is strong when its source |rho| >= "
    "{strong} in at least one large group. Error = |rho_release - rho_source|; pair_correlation_max_error is the "
    "largest over the strong pairs and the large groups the release keeps, pair_correlation_median_error their "
    "median. A kept group with fewer than {min_records} complete rows of a pair, or with every released value of one "
    "measurement tied, has lost the relationship (release rho 0). Unmeasured (None), never 0, where the release "
    "groups apps or drops the app, the radio or a strong pair's measurement. The floor: one standard error of the "
    "source rho (Bonett and Wright), what a fresh draw of the group's sessions alone moves it by.")

Pair = tuple[str, str]
Group = tuple[str, str]


@dataclass(frozen=True)
class GroupCorrelations:
    """One (app, radio) group of a file: its rows, and per pair of measurements its rank correlation and the count
    of rows where both are present (NaN: undefined, fewer than two such rows or one side all tied)."""

    rows: int
    rho: dict[Pair, float]
    complete: dict[Pair, int]


def spearman(values: np.ndarray, pairs: Sequence[tuple[int, int]]) -> tuple[list[float], list[int]]:
    """Per pair (i, j) of columns of ``values`` (rows x columns, NaN for null): Spearman's rank correlation over the
    rows where both are present, and the count of those rows. Each column is sorted once; a pair's ranks are the
    sorted order filtered to its complete rows, so a pair costs O(n). The sums are exact integers, so the figure does
    not depend on the order of the rows (an engine that hands them over in another order gets the same bytes)."""
    from dsh_assets.core.utility import rank_sums  # numba, imported where it is used (docs/architecture.md)

    values = np.ascontiguousarray(values, dtype=np.float64)
    columns = sorted({column for pair in pairs for column in pair})
    orders = np.zeros((values.shape[1], len(values)), dtype=np.int64)
    for column in columns:
        orders[column] = np.argsort(values[:, column], kind="stable")  # NaN last
    counts, sums = rank_sums.pair_rank_sums(values, orders, np.array(pairs, dtype=np.int64).reshape(-1, 2))
    rhos = []
    for count, (xx, yy, xy) in zip(counts, sums.reshape(-1, 3, 2).tolist()):
        xx, yy, xy = (high * rank_sums.CARRY + low for high, low in (xx, yy, xy))
        rhos.append(math.nan if count < 2 or not xx or not yy else xy / math.sqrt(xx * yy))
    return rhos, [int(count) for count in counts]


def group_sizes(path: str | os.PathLike, app: str, radio: str,
                connection: duckdb.DuckDBPyConnection | None = None) -> dict[Group, int]:
    """Rows per (app, radio) group of a file."""
    with duck.using(connection) as con:
        records = con.execute(
            f"SELECT {sql_identifier(app)}::VARCHAR, {sql_identifier(radio)}::VARCHAR, count(*) "
            f"FROM read_parquet(?) GROUP BY ALL", [str(path)]).fetchall()
    return {(a, r): int(n) for a, r, n in records}


def group_correlations(path: str | os.PathLike, app: str, radio: str, pairs: Sequence[Pair], *,
                       groups: Iterable[Group] | None = None, min_rows: int = 0,
                       connection: duckdb.DuckDBPyConnection | None = None,
                       batch_rows: int = BATCH_ROWS) -> dict[Group, GroupCorrelations]:
    """Per (app, radio) group of the file with at least ``min_rows`` rows (and among ``groups``, where given): the
    rank correlation of each pair of ``pairs`` (see the module)."""
    columns, positions = pair_columns(pairs)
    sizes = group_sizes(path, app, radio, connection)
    result = {}
    with duck.using(connection) as con:
        for batch in _batches(chosen_groups(sizes, groups, min_rows), sizes, batch_rows):
            for group, values in _read_groups(con, path, app, radio, batch, columns):
                rhos, counts = spearman(values, positions)
                result[group] = GroupCorrelations(rows=len(values), rho=dict(zip(pairs, rhos)),
                                                  complete=dict(zip(pairs, counts)))
    return result


def pair_columns(pairs: Sequence[Pair]) -> tuple[list[str], list[tuple[int, int]]]:
    """The measurements ``pairs`` read, sorted, and each pair as the places of its two among them."""
    columns = sorted({name for pair in pairs for name in pair})
    index = {name: i for i, name in enumerate(columns)}
    return columns, [(index[a], index[b]) for a, b in pairs]


def chosen_groups(sizes: dict[Group, int], groups: Iterable[Group] | None, min_rows: int) -> list[Group]:
    """The groups of a file (``sizes``: rows per group) with at least ``min_rows`` rows, among ``groups`` where
    given, sorted."""
    present = sizes.keys() if groups is None else set(groups) & sizes.keys()
    return sorted(group for group in present if sizes[group] >= min_rows)


def _batches(groups: list[Group], sizes: dict[Group, int], batch_rows: int) -> Iterator[list[Group]]:
    batch, held = [], 0
    for group in groups:
        if batch and held + sizes[group] > batch_rows:
            yield batch
            batch, held = [], 0
        batch.append(group)
        held += sizes[group]
    if batch:
        yield batch


def _read_groups(con: duckdb.DuckDBPyConnection, path, app: str, radio: str, batch: list[Group],
                 columns: list[str]) -> Iterator[tuple[Group, np.ndarray]]:
    """Each group of ``batch`` with its rows of ``columns`` (float64, NaN for null), in file order."""
    wanted = pa.table({"__app": [g[0] for g in batch], "__radio": [g[1] for g in batch],
                       "__group": np.arange(len(batch), dtype=np.int64)})
    con.register("__pair_groups", wanted)
    try:
        selected = ", ".join(f"{sql_identifier(c)}::DOUBLE AS c{i}" for i, c in enumerate(columns))
        table = con.sql(
            f"SELECT w.__group, {selected} FROM read_parquet(?, file_row_number = true) t "
            f"JOIN __pair_groups w ON t.{sql_identifier(app)}::VARCHAR = w.__app "
            f"AND t.{sql_identifier(radio)}::VARCHAR = w.__radio ORDER BY w.__group, t.file_row_number",
            params=[str(path)]).to_arrow_table()
    finally:
        con.unregister("__pair_groups")
    group_of = table.column("__group").to_numpy()
    values = np.empty((table.num_rows, len(columns)), dtype=np.float64)
    for i in range(len(columns)):
        values[:, i] = pc.fill_null(table.column(f"c{i}"), math.nan).to_numpy()
    del table
    bounds = np.searchsorted(group_of, np.arange(len(batch) + 1))
    for g, group in enumerate(batch):
        yield group, values[bounds[g]:bounds[g + 1]]


def standard_error(rho: float, n: int) -> float | None:
    """Bonett and Wright's (2000) standard error of a Spearman correlation from n rows: sqrt((1 + rho^2 / 2) /
    (n - 3)) x (1 - rho^2)."""
    if n <= 3 or not math.isfinite(rho):
        return None
    return math.sqrt((1 + rho * rho / 2) / (n - 3)) * (1 - rho * rho)


def all_pairs(measurements: Sequence[str]) -> list[Pair]:
    return [(a, b) for i, a in enumerate(measurements) for b in measurements[i + 1:]]


@dataclass
class PairCorrelationResult:
    """The relationships a release keeps (see the module)."""

    large_group_records: int
    strong_pair_correlation: float
    min_records: int
    large_groups: list[Group]
    strong_pairs: list[Pair]
    entries: list[dict] = field(default_factory=list)
    """Per (strong pair, large group): app, radio, x, y, source, release, error, n_source, n_release, kept."""
    reason: str | None = None
    """Why the release cannot say (the figures are then None)."""

    @property
    def kept(self) -> list[dict]:
        return [e for e in self.entries if e["kept"]]

    def worst(self) -> dict | None:
        return max(self.kept, key=lambda e: (e["error"], e["app"], e["radio"], e["x"], e["y"]), default=None)

    def figures(self) -> dict:
        measured = self.reason is None and bool(self.kept or (self.large_groups and not self.strong_pairs))
        errors = [e["error"] for e in self.kept]
        worst = self.worst()
        return {
            "pair_correlation_max_error": (max(errors) if errors else 0.0) if measured else None,
            "pair_correlation_median_error": (float(statistics.median(errors)) if errors else 0.0)
            if measured else None,
            "pair_correlation_worst": None if worst is None or not measured else {
                "pair": [worst["x"], worst["y"]], "group": f"{worst['app']} / {worst['radio']}",
                "source": worst["source"], "release": worst["release"], "floor": worst["floor"]},
        }

    def floor(self) -> float | None:
        """The median over the kept entries of one standard error of the source rho: what a fresh draw of a group's
        sessions alone moves a rank correlation by."""
        floors = [e["floor"] for e in self.kept if e["floor"] is not None]
        return float(statistics.median(floors)) if floors else None

    def metadata(self) -> dict:
        return {
            **self.figures(),
            "pair_correlation": [{key: e[key] for key in ("app", "radio", "x", "y", "source", "release", "error")}
                                 for e in self.kept],
            "pair_correlation_strong_pairs": [list(pair) for pair in self.strong_pairs],
            "pair_correlation_large_groups": len(self.large_groups),
            "pair_correlation_groups_kept": len({(e["app"], e["radio"]) for e in self.kept}),
            "pair_correlation_floor": self.floor(),
            "pair_correlation_reason": self.reason,
            "pair_correlation_definition": DEFINITION.format(
                large_group_records=self.large_group_records, strong=self.strong_pair_correlation,
                min_records=self.min_records),
        }


def evaluate_pairs(source: dict[Group, GroupCorrelations], release: dict[Group, GroupCorrelations] | None,
                   measurements: Sequence[str], released: set[str], *, reason: str | None,
                   large_group_records: int, strong_pair_correlation: float,
                   min_records: int) -> PairCorrelationResult:
    """The figures from each file's group correlations: ``source`` over the large groups and every pair of
    ``measurements``; ``release`` (None where the release cannot say, ``reason``) over the strong pairs.
    ``released``: the measurements the release keeps."""
    large = sorted(group for group, g in source.items() if g.rows >= large_group_records)
    strong = [pair for pair in all_pairs(measurements)
              if any(abs(source[group].rho.get(pair, math.nan)) >= strong_pair_correlation for group in large)]
    dropped = sorted({name for pair in strong for name in pair} - released)
    if reason is None and dropped:
        reason = f"cannot express: strong pair measurement dropped ({', '.join(dropped)})"
    result = PairCorrelationResult(large_group_records, strong_pair_correlation, min_records, large, strong,
                                   reason=reason)
    if reason is not None or release is None:
        return result
    for group in large:
        kept = group in release and release[group].rows >= min_records
        for pair in strong:
            rho_source = source[group].rho[pair]
            if not math.isfinite(rho_source):
                continue
            entry = {"app": group[0], "radio": group[1], "x": pair[0], "y": pair[1], "source": rho_source,
                     "n_source": source[group].complete[pair], "kept": kept, "release": None, "error": None,
                     "n_release": 0, "floor": standard_error(rho_source, source[group].complete[pair])}
            if kept:
                n_release = release[group].complete.get(pair, 0)
                rho_release = release[group].rho.get(pair, math.nan)
                if n_release < min_records or not math.isfinite(rho_release):
                    rho_release = 0.0
                entry.update(release=rho_release, n_release=n_release, error=abs(rho_release - rho_source))
            result.entries.append(entry)
    return result
