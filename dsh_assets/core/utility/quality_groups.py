"""Quality groups: what a release keeps of the app x radio x measurement distributions.

A *cell* (a quality group) is one app x radio x measurement with at least ``min_records`` valid
(non-null) records in the SOURCE. Per cell, on each side (source and release):

- p10, p50 and p90 of the measurement (DuckDB ``quantile_cont``, linear interpolation);
- the *tail share*: the share of the cell's valid records beyond a FIXED raw-file threshold.
  For download (``schema.download``, more is better) the tail is ``value <= t`` where t is the
  p10 of that measurement over the whole source; for every other measurement (radio latency and
  the like, more is worse) it is ``value >= t`` with t the whole-source p90. The thresholds are
  computed once, from the source, and applied unchanged to both files.

The release side uses the same app x radio cell of the released file. A cell is *unavailable*
(its release statistics and errors are None, never zero) when the release

- lost it: fewer than ``min_records`` valid records released ("lost: N records released (< 30)"),
  e.g. after k-suppression;
- cannot express it: the release groups apps, so its app column holds group names and a per-app
  cell cannot be computed ("cannot express: apps grouped"); or the measurement (or the app or radio
  column) is not in the release ("cannot express: column dropped").

Errors of an available cell: the normalised quantile error |q_rel - q_orig| / (p90_orig - p10_orig)
for q in p10, p50, p90 (None, with a note, when the source spread p90 - p10 is zero), and the
tail-share error |share_rel - share_orig| * 100 in percentage points. Records are rows, so the
statistics are row-weighted, not person-weighted.

Work: one whole-source aggregate for the thresholds, then one DuckDB GROUP BY (app, radio) pass
per file computing every cell at once (counts, ``quantile_cont`` lists and tail counts for all
measurements); nothing loops over cells in Python except to arrange the ~200 result rows. Those passes
are the engine's (``Aggregations``: DuckDB here, Spark in core.spark.utility, the same figures); the
cells and their errors are computed from them by the same code on both.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:  # annotations only
    import pandas as pd

from dsh_assets.core import duck
from dsh_assets.core.duck import sql_identifier
from dsh_assets.core.files import DigestBook
from dsh_assets.core.release.configs import ConfigError, ReleaseConfig
from dsh_assets.core.release.schema import Schema
from dsh_assets.core.utility.pair_correlation import (
    DEFAULT_STRONG_PAIR_CORRELATION, Group, GroupCorrelations, Pair, PairCorrelationResult, all_pairs,
    evaluate_pairs, group_correlations,
)
from dsh_assets.core.utility.ranks import holds_in_memory, ranked_quantiles

QUANTILES = (0.1, 0.5, 0.9)
QUANTILE_NAMES = ("p10", "p50", "p90")
DEFAULT_MIN_RECORDS = 30
DEFAULT_LARGE_GROUP_RECORDS = 1_000
UTILITY_TABLE = "utility"
LOW, HIGH = "low", "high"
"""Tail directions: LOW = share with value <= the source p10 (slow); HIGH = share >= the source p90."""

AVAILABLE = "available"
APPS_GROUPED = "cannot express: apps grouped"
COLUMN_DROPPED = "cannot express: column dropped"

DEFINITION = (
    "Quality groups: app x radio x measurement cells with >= {min_records} valid records in the source. "
    "Per cell p10/p50/p90 (DuckDB quantile_cont) and the share of records beyond a fixed raw-file "
    "threshold (download <= whole-source p10; other measurements >= whole-source p90), computed on the "
    "source and on the release for the same cell. Unavailable (never zero) when the release has fewer "
    "than {min_records} valid records in the cell, groups apps, or lacks the column. Errors: "
    "|q_rel - q_orig| / (p90_orig - p10_orig) for p10, p50, p90; tail share in percentage points. "
    "Row-weighted, not person-weighted. Large groups (>= {large_group_records} valid source records), where "
    "Elina's decisions rest: the largest quantile error and tail-share error over those the release keeps."
)


@dataclass(frozen=True)
class Measure:
    """A measurement column and the direction of its tail."""

    column: str
    tail: str

    def __post_init__(self):
        if self.tail not in (LOW, HIGH):
            raise ValueError(f"measurement {self.column!r}: tail must be {LOW!r} or {HIGH!r}, not {self.tail!r}")

    @property
    def threshold_quantile(self) -> float:
        return 0.1 if self.tail == LOW else 0.9

    @property
    def tail_label(self) -> str:
        return "<= source p10" if self.tail == LOW else ">= source p90"


def measures_for(schema: Schema, measurements: Sequence[str] | Mapping[str, str] | None = None) -> tuple[Measure, ...]:
    """The measurements to evaluate: default download and radio latency.

    ``measurements`` is a sequence of column names (download gets the LOW tail, every other
    column the HIGH tail) or a mapping column -> "low" | "high".
    """
    if measurements is None:
        measurements = (schema.download, schema.latency)
    if isinstance(measurements, Mapping):
        measures = tuple(Measure(column, tail) for column, tail in measurements.items())
    else:
        measures = tuple(Measure(column, LOW if column == schema.download else HIGH) for column in measurements)
    if not measures:
        raise ValueError("quality groups need at least one measurement")
    unknown = [m.column for m in measures if m.column not in schema.measurements]
    if unknown:
        raise ValueError(f"not measurement columns of the schema: {unknown}")
    if len({m.column for m in measures}) != len(measures):
        raise ValueError("a measurement is listed twice")
    return measures


def parquet_columns(path: str | os.PathLike) -> set[str]:
    return set(pq.read_schema(path).names)


def _as_double(path: str | os.PathLike, columns: Sequence[str]) -> dict[str, str]:
    """Column -> its SQL expression as DOUBLE (a cast only where the file does not store float64)."""
    types = {f.name: f.type for f in pq.read_schema(path)}
    return {c: sql_identifier(c) if types.get(c) == pa.float64() else f"{sql_identifier(c)}::DOUBLE" for c in columns}


def _rows(path: str | os.PathLike) -> int:
    return pq.ParquetFile(path).metadata.num_rows


def tail_thresholds(source_path: str | os.PathLike, measures: Sequence[Measure],
                    connection: duckdb.DuckDBPyConnection | None = None) -> dict[str, float | None]:
    """Column -> the fixed raw-file threshold (whole-source p10 for LOW tails, p90 for HIGH); one pass (a selection
    per measurement where the values do not fit in memory: core/utility/ranks.py)."""
    expressions = _as_double(source_path, [m.column for m in measures])
    with duck.using(connection) as con:
        if not holds_in_memory(con, _rows(source_path) * len(measures)):
            found = {m.column: ranked_quantiles(con, f"SELECT {expressions[m.column]} AS v FROM read_parquet(?)",
                                                [str(source_path)], [], "v", [m.threshold_quantile])
                     for m in measures}
            return {column: quantiles.get((), [None])[0] for column, quantiles in found.items()}
        select = ", ".join(f"quantile_cont({expressions[m.column]}, {m.threshold_quantile})" for m in measures)
        values = con.execute(f"SELECT {select} FROM read_parquet(?)", [str(source_path)]).fetchall()[0]
    return {m.column: (None if v is None else float(v)) for m, v in zip(measures, values)}


@dataclass(frozen=True)
class CellStats:
    """Per (app, radio) group of one file: for each measurement n, p10, p50, p90 and the tail count."""

    rows: dict[tuple[str, str], dict[str, dict]]
    """(app, radio) -> column -> {"n", "p10", "p50", "p90", "tail"}."""
    total_rows: int

    def get(self, app: str, radio: str, column: str) -> dict | None:
        return self.rows.get((app, radio), {}).get(column)


def cell_statistics(path: str | os.PathLike, app: str, radio: str, measures: Sequence[Measure],
                    thresholds: Mapping[str, float | None], *, only_radio: str | None = None,
                    connection: duckdb.DuckDBPyConnection | None = None) -> CellStats:
    """Every (app, radio) group of ``path`` in one GROUP BY pass (optionally one radio only); where the values do
    not fit in memory, the quantiles of every group and measurement come from one selection, a few scans
    (core/utility/ranks.py).

    Measurements absent from the file are skipped (their entries are missing).
    """
    present = parquet_columns(path)
    measures = [m for m in measures if m.column in present]
    expressions = _as_double(path, [m.column for m in measures])
    where = "" if only_radio is None else f" WHERE {sql_identifier(radio)} = ?"
    rows_parameters = [str(path), *([] if only_radio is None else [only_radio])]
    with duck.using(connection) as con:
        in_memory = holds_in_memory(con, _rows(path) * len(measures))
        terms, thresholds_used = [], []
        for m in measures:
            column = expressions[m.column]
            threshold = thresholds.get(m.column)
            terms.append(f"count({column})")
            terms.append(f"quantile_cont({column}, [{', '.join(map(str, QUANTILES))}])" if in_memory else "NULL")
            if threshold is None:
                terms.append("NULL::BIGINT")
            else:
                terms.append(f"count(*) FILTER (WHERE {column} {'<=' if m.tail == LOW else '>='} ?)")
                thresholds_used.append(threshold)
        query = (f"SELECT {sql_identifier(app)}::VARCHAR, {sql_identifier(radio)}::VARCHAR, count(*)"
                 f"{''.join(', ' + t for t in terms)} FROM read_parquet(?){where} GROUP BY ALL")
        # positional parameters in query order: FILTER thresholds, the file, the radio
        records = con.execute(query, [*thresholds_used, *rows_parameters]).fetchall()
        if not in_memory:
            records = [list(record) for record in records]
            groups = f"SELECT {sql_identifier(app)}::VARCHAR AS k0, {sql_identifier(radio)}::VARCHAR AS k1"
            values = " UNION ALL ".join(f"{groups}, {i} AS k2, {expressions[m.column]} AS v FROM read_parquet(?){where}"
                                        for i, m in enumerate(measures))
            found = ranked_quantiles(con, values, rows_parameters * len(measures), ["k0", "k1", "k2"], "v", QUANTILES)
            for i in range(len(measures)):
                for record in records:
                    record[4 + 3 * i] = found.get((record[0], record[1], i))
        return cell_stats(records, measures)


def cell_stats(records, measures: Sequence[Measure]) -> CellStats:
    """CellStats from one record per (app, radio) group, the shape each engine's pass returns: app, radio, rows,
    then per measurement n, [p10, p50, p90] (None without a valid value) and the tail count (None without a
    threshold)."""
    rows: dict[tuple[str, str], dict[str, dict]] = {}
    total = 0
    for record in records:
        key = (record[0], record[1])
        total += record[2]
        per_column = {}
        for i, m in enumerate(measures):
            n, quantiles, tail = record[3 + 3 * i: 6 + 3 * i]
            quantiles = quantiles or [None, None, None]
            per_column[m.column] = {"n": int(n), **{name: _float(q) for name, q in zip(QUANTILE_NAMES, quantiles)},
                                    "tail": None if tail is None else int(tail)}
        rows[key] = per_column
    return CellStats(rows=rows, total_rows=total)


def station_statistics(path: str | os.PathLike, station: str, latency: str,
                       connection: duckdb.DuckDBPyConnection) -> tuple[pd.DataFrame, float | None]:
    """Rows and median radio latency per station, and the median radio latency over all rows; one pass (where the
    latencies do not fit in memory, a selection per station and one over all rows: core/utility/ranks.py)."""
    if not holds_in_memory(connection, 2 * _rows(path)):
        return _ranked_station_statistics(path, station, latency, connection)
    frame = connection.execute(
        f"SELECT {sql_identifier(station)} AS station, grouping({sql_identifier(station)}) AS whole, count(*) AS load, "
        f"quantile_cont({sql_identifier(latency)}, 0.5) AS median_latency "
        f"FROM read_parquet(?) GROUP BY GROUPING SETS (({sql_identifier(station)}), ())",
        [str(path)],
    ).df()
    whole = frame[frame["whole"] == 1]
    overall = whole["median_latency"].iloc[0] if len(whole) else None
    import pandas as pd  # on first use: 0.3 s of every dsh start-up otherwise
    overall = None if overall is None or pd.isna(overall) else float(overall)
    return frame[frame["whole"] == 0].drop(columns="whole").reset_index(drop=True), overall


def _ranked_station_statistics(path, station: str, latency: str,
                               connection: duckdb.DuckDBPyConnection) -> tuple[pd.DataFrame, float | None]:
    frame = connection.execute(f"SELECT {sql_identifier(station)} AS station, count(*) AS load FROM read_parquet(?) "
                               f"GROUP BY ALL", [str(path)]).df()
    rows = f"SELECT {sql_identifier(station)} AS k0, {sql_identifier(latency)} AS v FROM read_parquet(?)"
    medians = ranked_quantiles(connection, rows, [str(path)], ["k0"], "v", (0.5,))
    frame["median_latency"] = [(medians.get((value,)) or [math.nan])[0] for value in frame["station"].tolist()]
    overall = ranked_quantiles(connection, rows, [str(path)], [], "v", (0.5,)).get(())
    return frame, None if overall is None else overall[0]


def joint_counts(path: str | os.PathLike, app: str, radio: str, download: str, latency: str,
                 thresholds: tuple[float, float], radio_value: str,
                 connection: duckdb.DuckDBPyConnection | None = None) -> dict[str, tuple[int, int]]:
    """Per app, among the rows of one radio type: those with both a download and a latency, and of them those both
    slow (download <= the first threshold) and laggy (latency >= the second); one pass."""
    dl, lat = (_as_double(path, [download, latency])[c] for c in (download, latency))
    with duck.using(connection) as con:
        records = con.execute(
            f"SELECT {sql_identifier(app)}::VARCHAR, count(*) FILTER (WHERE {dl} IS NOT NULL AND {lat} IS NOT NULL), "
            f"count(*) FILTER (WHERE {dl} <= ? AND {lat} >= ?) FROM read_parquet(?) "
            f"WHERE {sql_identifier(radio)} = ? GROUP BY ALL", [*thresholds, str(path), radio_value]).fetchall()
    return {record[0]: (int(record[1]), int(record[2])) for record in records}


class Aggregations(Protocol):
    """The passes over whole files behind the utility metrics: the only work that differs per engine.

    ``DuckDBAggregations`` runs them embedded, core.spark.utility.SparkAggregations on Spark; both return the
    same structures, so the cells, errors and Elina's answers are computed from them by the same code.
    """

    def tail_thresholds(self, source_path: str | os.PathLike,
                        measures: Sequence[Measure]) -> dict[str, float | None]: ...

    def cell_statistics(self, path: str | os.PathLike, app: str, radio: str, measures: Sequence[Measure],
                        thresholds: Mapping[str, float | None], *, only_radio: str | None = None) -> CellStats: ...

    def station_statistics(self, path: str | os.PathLike, station: str,
                           latency: str) -> tuple[pd.DataFrame, float | None]: ...

    def joint_counts(self, path: str | os.PathLike, app: str, radio: str, download: str, latency: str,
                     thresholds: tuple[float, float], radio_value: str) -> dict[str, tuple[int, int]]: ...

    def group_correlations(self, path: str | os.PathLike, app: str, radio: str, pairs: Sequence[Pair], *,
                           groups: Sequence[Group] | None = None,
                           min_rows: int = 0) -> dict[Group, GroupCorrelations]: ...


@dataclass(frozen=True)
class DuckDBAggregations:
    """The embedded engine's passes, over one DuckDB connection; each result is kept in ``book`` while the file is
    unchanged, so the source's passes run once for every configuration released from it, not once per
    configuration."""

    connection: duckdb.DuckDBPyConnection
    book: DigestBook

    def tail_thresholds(self, source_path, measures):
        return dict(self.book.figure(source_path, ("tail_thresholds", tuple(measures)),
                                     lambda path: tail_thresholds(path, measures, self.connection)))

    def cell_statistics(self, path, app, radio, measures, thresholds, *, only_radio=None):
        kind = ("cell_statistics", app, radio, tuple(measures), tuple(sorted(thresholds.items())), only_radio)
        return self.book.figure(path, kind, lambda file: cell_statistics(
            file, app, radio, measures, thresholds, only_radio=only_radio, connection=self.connection))

    def station_statistics(self, path, station, latency):
        stations, overall = self.book.figure(path, ("station_statistics", station, latency),
                                             lambda file: station_statistics(file, station, latency, self.connection))
        return stations.copy(), overall

    def joint_counts(self, path, app, radio, download, latency, thresholds, radio_value):
        kind = ("joint_counts", app, radio, download, latency, tuple(thresholds), radio_value)
        return dict(self.book.figure(path, kind, lambda file: joint_counts(
            file, app, radio, download, latency, thresholds, radio_value, self.connection)))

    def group_correlations(self, path, app, radio, pairs, *, groups=None, min_rows=0):
        kind = ("group_correlations", app, radio, tuple(pairs), None if groups is None else tuple(sorted(groups)),
                min_rows)
        return dict(self.book.figure(path, kind, lambda file: group_correlations(
            file, app, radio, pairs, groups=groups, min_rows=min_rows, connection=self.connection)))


@contextmanager
def aggregations_or_embedded(aggregations: Aggregations | None) -> Iterator[Aggregations]:
    """``aggregations`` if given, else the embedded passes over a fresh DuckDB connection (closed on exit), keeping
    their figures for this block only."""
    if aggregations is not None:
        yield aggregations
        return
    with duck.connect() as connection:
        yield DuckDBAggregations(connection, DigestBook())


def _float(value) -> float | None:
    return None if value is None else float(value)


def tail_share(stats: dict | None) -> float | None:
    if not stats or not stats["n"] or stats["tail"] is None:
        return None
    return stats["tail"] / stats["n"]


@dataclass
class QualityResult:
    """Every quality group of one release, with its source and release statistics and errors."""

    config_id: str
    source_path: str
    released_path: str
    min_records: int
    measures: tuple[Measure, ...]
    thresholds: dict[str, float | None]
    cells: list[dict]
    """One dict per cell, the rows of ``table()``, sorted by app, radio, measurement."""
    release_reason: str | None = None
    """Why no cell can be expressed, when that holds for the whole release (else None)."""
    source_stats: CellStats | None = field(default=None, repr=False)
    release_stats: CellStats | None = field(default=None, repr=False)
    joint: dict[str, dict] = field(default_factory=dict)
    """App -> {"base", "release", "error_pp"}: the share of its 5G sessions both slow and laggy (``joint_figure``)."""
    large_group_records: int = DEFAULT_LARGE_GROUP_RECORDS
    """A quality group with at least this many valid source records is large: where Elina's decisions rest."""
    pairs: PairCorrelationResult | None = None
    """The relationships between measurements the release keeps (core.utility.pair_correlation)."""

    # -- summary -----------------------------------------------------------------------------
    @property
    def available_cells(self) -> list[dict]:
        return [c for c in self.cells if c["available"]]

    def quantile_errors(self) -> list[float]:
        return [c[f"{q}_error"] for c in self.available_cells for q in QUANTILE_NAMES if c[f"{q}_error"] is not None]

    @property
    def large_cells(self) -> list[dict]:
        """The quality groups with at least ``large_group_records`` valid source records."""
        return [c for c in self.cells if c["n_source"] >= self.large_group_records]

    def large_group_worst(self) -> dict:
        """Over the large groups the release keeps: the largest quantile error and tail-share error, and the group of
        each (None where no large group is kept, or none has the error)."""
        kept = [c for c in self.large_cells if c["available"]]
        quantile = [(max(c[f"{q}_error"] for q in QUANTILE_NAMES), group_name(c)) for c in kept
                    if all(c[f"{q}_error"] is not None for q in QUANTILE_NAMES)]
        tail = [(c["tail_share_error_pp"], group_name(c)) for c in kept if c["tail_share_error_pp"] is not None]
        worst_quantile, worst_tail = max(quantile, default=(None, None)), max(tail, default=(None, None))
        return {"large_group_max_quantile_error": worst_quantile[0], "large_group_worst_quantile": worst_quantile[1],
                "large_group_max_tail_share_error_pp": worst_tail[0], "large_group_worst_tail": worst_tail[1],
                "large_groups": len(self.large_cells), "large_groups_kept": len(kept)}

    def figures(self) -> dict:
        """The headline numbers, plain Python types; None where no cell is available."""
        errors = self.quantile_errors()
        tails = [c["tail_share_error_pp"] for c in self.available_cells if c["tail_share_error_pp"] is not None]
        return {
            "groups_total": len(self.cells),
            "groups_kept": len(self.available_cells),
            "lost_groups": sorted(group_name(c) for c in self.cells if not c["available"]),
            "median_quantile_error": float(statistics.median(errors)) if errors else None,
            "max_quantile_error": float(max(errors)) if errors else None,
            "max_tail_share_error_pp": float(max(tails)) if tails else None,
            **{key: self.large_group_worst()[key] for key in LARGE_GROUP_FIGURES},
            "joint": self.joint,
            "joint_max_error_pp": max((v["error_pp"] for v in self.joint.values() if v["error_pp"] is not None),
                                      default=None),
            **(self.pairs.figures() if self.pairs else dict.fromkeys(PAIR_FIGURES)),
        }

    def table(self) -> pd.DataFrame:
        """One row per cell (app, radio, measurement); release statistics None where unavailable."""
        import pandas as pd  # on first use: 0.3 s of every dsh start-up otherwise
        return pd.DataFrame(self.cells, columns=TABLE_COLUMNS)

    def unavailable_by_reason(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for c in self.cells:
            if not c["available"]:
                reason = "lost" if c["status"].startswith("lost") else c["status"]
                counts[reason] = counts.get(reason, 0) + 1
        return counts

    def per_measurement(self) -> dict[str, dict]:
        summary = {}
        for m in self.measures:
            cells = [c for c in self.cells if c["measurement"] == m.column]
            kept = [c for c in cells if c["available"]]
            errors = [c[f"{q}_error"] for c in kept for q in QUANTILE_NAMES if c[f"{q}_error"] is not None]
            tails = [c["tail_share_error_pp"] for c in kept if c["tail_share_error_pp"] is not None]
            summary[m.column] = {
                "groups_total": len(cells), "groups_kept": len(kept),
                "median_quantile_error": float(statistics.median(errors)) if errors else None,
                "max_quantile_error": float(max(errors)) if errors else None,
                "max_tail_share_error_pp": float(max(tails)) if tails else None,
            }
        return summary

    def worst_cells(self, limit: int = 5) -> list[dict]:
        """The available cells with the largest quantile error (for a report), with the source and release values
        of their worst quantile and of their tail share."""
        def worst(c):
            return max((c[f"{q}_error"] or 0.0) for q in QUANTILE_NAMES)
        def worst_quantile(c):
            return max(QUANTILE_NAMES, key=lambda q: c[f"{q}_error"] or 0.0)
        ranked = sorted(self.available_cells, key=lambda c: (-worst(c), group_name(c)))[:limit]
        return [{"group": group_name(c), "max_quantile_error": worst(c),
                 "tail_share_error_pp": c["tail_share_error_pp"], "quantile": worst_quantile(c),
                 "source": c[f"{worst_quantile(c)}_source"], "release": c[f"{worst_quantile(c)}_release"],
                 "tail": c["tail"], "tail_share_source": c["tail_share_source"],
                 "tail_share_release": c["tail_share_release"]} for c in ranked]

    def metadata(self) -> dict:
        """Plain values for Dagster metadata: the figures, the thresholds and the definition."""
        return {
            **self.figures(),
            "groups_lost": len(self.cells) - len(self.available_cells),
            "unavailable_by_reason": self.unavailable_by_reason(),
            "per_measurement": self.per_measurement(),
            "worst_cells": self.worst_cells(),
            "thresholds": {m.column: {"tail": m.tail_label, "value": self.thresholds.get(m.column)}
                           for m in self.measures},
            **{key: value for key, value in self.large_group_worst().items() if key not in LARGE_GROUP_FIGURES},
            "large_group_records": self.large_group_records,
            "measurements": [m.column for m in self.measures],
            "min_records": self.min_records,
            "config_id": self.config_id,
            "release_reason": self.release_reason,
            "definition": DEFINITION.format(min_records=self.min_records,
                                            large_group_records=self.large_group_records),
            "joint_definition": JOINT_DEFINITION.format(min_records=self.min_records),
            **(self.pairs.metadata() if self.pairs else {}),
        }


LARGE_GROUP_FIGURES = ("large_group_max_quantile_error", "large_group_max_tail_share_error_pp")
PAIR_FIGURES = ("pair_correlation_max_error", "pair_correlation_median_error", "pair_correlation_worst")


TABLE_COLUMNS = [
    "app", "radio", "measurement", "tail", "n_source", "n_release",
    "p10_source", "p50_source", "p90_source", "p10_release", "p50_release", "p90_release",
    "tail_share_source", "tail_share_release",
    "p10_error", "p50_error", "p90_error", "tail_share_error_pp", "available", "status", "note",
]


def group_name(cell: Mapping) -> str:
    return f"{cell['app']} / {cell['radio']} / {cell['measurement']}"


def release_limitation(released_columns: set[str], config: ReleaseConfig, schema: Schema) -> str | None:
    """Why the release cannot express any per-app x radio cell, or None."""
    if schema.app not in released_columns or schema.radio not in released_columns:
        return COLUMN_DROPPED
    if config.app_groups:
        return APPS_GROUPED
    return None


def evaluate(source_path: str | os.PathLike, released_path: str | os.PathLike, config: ReleaseConfig,
             schema: Schema, *, min_records: int = DEFAULT_MIN_RECORDS,
             measurements: Sequence[str] | Mapping[str, str] | None = None,
             aggregations: Aggregations | None = None,
             large_group_records: int = DEFAULT_LARGE_GROUP_RECORDS,
             strong_pair_correlation: float = DEFAULT_STRONG_PAIR_CORRELATION) -> QualityResult:
    """The quality groups of ``released_path`` against ``source_path`` (see the module docstring), and the
    relationships between its measurements (core.utility.pair_correlation).

    ``aggregations``: the engine's passes over the two files (default: embedded, DuckDB).
    """
    if min_records < 1:
        raise ValueError(f"min_records must be >= 1, not {min_records}")
    measures = measures_for(schema, measurements)
    released_columns = parquet_columns(released_path)
    limitation = release_limitation(released_columns, config, schema)
    with aggregations_or_embedded(aggregations) as passes:
        thresholds = passes.tail_thresholds(source_path, measures)
        source_stats = passes.cell_statistics(source_path, schema.app, schema.radio, measures, thresholds)
        release_stats = None
        if limitation is None and any(m.column in released_columns for m in measures):
            release_stats = passes.cell_statistics(released_path, schema.app, schema.radio, measures, thresholds)
        joint = joint_figure(passes, source_path, released_path, schema, limitation, min_records,
                             known={m: thresholds[m.column] for m in measures})
        pairs = pair_figure(passes, source_path, released_path, schema, limitation, min_records,
                            large_group_records, strong_pair_correlation)
    cells = []
    for (app, radio), per_column in sorted(source_stats.rows.items()):
        for m in measures:
            orig = per_column[m.column]
            if orig["n"] < min_records:
                continue
            cells.append(_cell(app, radio, m, orig, release_stats, released_columns, limitation, min_records))
    return QualityResult(
        config_id=config.id, source_path=str(source_path), released_path=str(released_path),
        min_records=min_records, measures=measures, thresholds=thresholds, cells=cells,
        release_reason=limitation, source_stats=source_stats, release_stats=release_stats, joint=joint,
        large_group_records=large_group_records, pairs=pairs,
    )


def pair_figure(passes: Aggregations, source_path, released_path, schema: Schema, limitation: str | None,
                min_records: int, large_group_records: int,
                strong_pair_correlation: float) -> PairCorrelationResult:
    """The rank correlations of every pair of measurements in the source's large (app, radio) groups, and of the
    strong pairs in the release's same groups, where the release can say (``limitation`` None)."""
    source = passes.group_correlations(source_path, schema.app, schema.radio, all_pairs(schema.measurements),
                                       min_rows=large_group_records)
    released = parquet_columns(released_path) & set(schema.measurements)
    result = evaluate_pairs(source, None, schema.measurements, released, reason=limitation,
                            large_group_records=large_group_records, strong_pair_correlation=strong_pair_correlation,
                            min_records=min_records)
    if result.reason is not None or not result.strong_pairs:
        return result
    release = passes.group_correlations(released_path, schema.app, schema.radio, result.strong_pairs,
                                        groups=result.large_groups)
    return evaluate_pairs(source, release, schema.measurements, released, reason=None,
                          large_group_records=large_group_records, strong_pair_correlation=strong_pair_correlation,
                          min_records=min_records)


@dataclass(frozen=True)
class UtilitySettings:
    """The ``[utility]`` table of a releases file."""

    large_group_records: int = DEFAULT_LARGE_GROUP_RECORDS
    """Valid source records that make a quality group, or source rows that make an (app, radio) group, large."""
    strong_pair_correlation: float = DEFAULT_STRONG_PAIR_CORRELATION
    """A pair of measurements whose source |rank correlation| reaches this in some large group is strong."""


def parse_utility(document: dict) -> UtilitySettings:
    """``[utility]`` of a parsed releases file (the defaults where absent); a ConfigError names a bad value."""
    table = document.get(UTILITY_TABLE, {})
    keys = {"large_group_records", "strong_pair_correlation"}
    if not isinstance(table, dict) or set(table) - keys:
        raise ConfigError(f"[{UTILITY_TABLE}] must be a table with {' and '.join(sorted(keys))}, not {table!r}")
    records = table.get("large_group_records", DEFAULT_LARGE_GROUP_RECORDS)
    if isinstance(records, bool) or not isinstance(records, int) or records < 1:
        raise ConfigError(f"[{UTILITY_TABLE}] large_group_records must be a positive integer, not {records!r}")
    strong = table.get("strong_pair_correlation", DEFAULT_STRONG_PAIR_CORRELATION)
    if isinstance(strong, bool) or not isinstance(strong, (int, float)) or not 0 < strong <= 1:
        raise ConfigError(f"[{UTILITY_TABLE}] strong_pair_correlation must be a number in (0, 1], not {strong!r}")
    return UtilitySettings(records, float(strong))


JOINT_RADIO = "5G"
JOINT_DEFINITION = (
    "Joint figure: per app, among its 5G sessions with both a download and a radio latency, the share both slow "
    "(download <= the whole-source p10) and laggy (latency >= the whole-source p90), in the base data and in the "
    "release (apps with >= {min_records} such sessions in the source); error in percentage points. Unlike the "
    "quality groups it needs a session's two values in one row: a release that moves values between rows can "
    "keep every per-column figure and lose this one.")


def joint_figure(passes: Aggregations, source_path, released_path, schema: Schema, limitation: str | None,
                 min_records: int, known: Mapping[Measure, float | None] | None = None) -> dict[str, dict]:
    """App -> {"base", "release", "error_pp"} (see JOINT_DEFINITION); the release's share None where it cannot
    say (apps grouped, a column dropped, fewer than ``min_records`` sessions of the app released). ``known``:
    thresholds the caller already has (the quality groups'); only the others are computed."""
    known = known or {}
    needed = measures_for(schema)
    thresholds = {m.column: known[m] for m in needed if m in known}
    missing = [m for m in needed if m not in known]
    if missing:
        thresholds.update(passes.tail_thresholds(source_path, missing))
    if thresholds.get(schema.download) is None or thresholds.get(schema.latency) is None:
        return {}
    bounds = (thresholds[schema.download], thresholds[schema.latency])
    arguments = (schema.app, schema.radio, schema.download, schema.latency, bounds, JOINT_RADIO)
    base = passes.joint_counts(source_path, *arguments)
    expressible = limitation is None and {schema.download, schema.latency} <= parquet_columns(released_path)
    release = passes.joint_counts(released_path, *arguments) if expressible else {}
    joint = {}
    for app, (n, both) in sorted(base.items()):
        if n < min_records:
            continue
        n_release, both_release = release.get(app, (0, 0))
        share = both_release / n_release if n_release >= min_records else None
        joint[app] = {"base": both / n, "release": share,
                      "error_pp": None if share is None else abs(share - both / n) * 100.0}
    return joint


def _cell(app: str, radio: str, m: Measure, orig: dict, release_stats: CellStats | None,
          released_columns: set[str], limitation: str | None, min_records: int) -> dict:
    cell = {
        "app": app, "radio": radio, "measurement": m.column, "tail": m.tail_label,
        "n_source": orig["n"], "n_release": None,
        **{f"{q}_source": orig[q] for q in QUANTILE_NAMES},
        **{f"{q}_release": None for q in QUANTILE_NAMES},
        "tail_share_source": tail_share(orig), "tail_share_release": None,
        **{f"{q}_error": None for q in QUANTILE_NAMES},
        "tail_share_error_pp": None, "available": False, "status": "", "note": None,
    }
    if limitation is not None:
        cell["status"] = limitation
        return cell
    if m.column not in released_columns:
        cell["status"] = COLUMN_DROPPED
        return cell
    released = release_stats.get(app, radio, m.column) if release_stats else None
    n_release = released["n"] if released else 0
    cell["n_release"] = n_release
    if n_release < min_records:
        cell["status"] = f"lost: {n_release} records released (< {min_records})"
        return cell
    cell["available"] = True
    cell["status"] = AVAILABLE
    for q in QUANTILE_NAMES:
        cell[f"{q}_release"] = released[q]
    cell["tail_share_release"] = tail_share(released)
    spread = orig["p90"] - orig["p10"]
    if spread > 0 and math.isfinite(spread):
        for q in QUANTILE_NAMES:
            cell[f"{q}_error"] = abs(released[q] - orig[q]) / spread
    else:
        cell["note"] = "quantile errors undefined: zero spread (source p90 = p10)"
    if cell["tail_share_source"] is not None and cell["tail_share_release"] is not None:
        cell["tail_share_error_pp"] = abs(cell["tail_share_release"] - cell["tail_share_source"]) * 100.0
    return cell
