"""The utility metrics' passes over whole files on Spark: the same structures as the embedded DuckDB passes
(core.utility.quality_groups.DuckDBAggregations), so the quality groups and Elina's answers are computed from them
by the same code and hold the same figures.

Exactness. Counts are Spark counts of the same rows (nulls ignored, as DuckDB's aggregates ignore them); every
measurement is read as a double, as the embedded SQL casts it. A quantile is DuckDB's ``quantile_cont``: the
non-null values of a group are ranked on Spark (a window sorted by value), only the two order statistics around
the position (n - 1) q reach the driver, and ``quantile_cont`` below interpolates between them with DuckDB's
arithmetic. Spark's own ``percentile`` interpolates with another formula (and ``percentile_approx`` is not exact),
so neither is used.

Scale. The per-cell and per-station ranks partition by their group; a whole-file quantile (the tail thresholds,
the overall median latency) sorts each measurement in one task.
"""

from __future__ import annotations

import functools
import math
import operator
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from dsh_assets.core.utility.pair_correlation import (
    Group, GroupCorrelations, Pair, chosen_groups, pair_columns, spearman,
)
from dsh_assets.core.utility.quality_groups import (
    HIGH, LOW, QUANTILES, CellStats, Measure, cell_stats, parquet_columns,
)
from dsh_assets.core.utility.ranks import quantile_cont

THRESHOLD_QUANTILES = tuple(sorted({Measure("", tail).threshold_quantile for tail in (LOW, HIGH)}))
_MEASUREMENT, _VALUE, _WHOLE = "__measurement", "__value", "__whole"
_RANK, _ROWS, _VALID, _TAIL = "__rank", "__rows", "__valid", "__tail"
_PAIR, _RHO, _COMPLETE = "__pair", "__rho", "__complete"


@dataclass(frozen=True)
class _Group:
    """One group's counts and quantiles, as DuckDB's aggregates give them (None: no valid value, no tail asked)."""

    rows: int
    valid: int
    quantiles: list[float] | None
    tail: int | None


def _groups(frame, keys: Sequence[str], value: str, quantiles: Sequence[float], in_tail=None) -> dict[tuple, _Group]:
    """Per group of ``keys`` (a tuple of their values): its rows, its non-null ``value``s, their ``quantile_cont``
    at each of ``quantiles`` and (given a condition) how many are ``in_tail``; one window pass, ranked by value."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    group = Window.partitionBy(*keys)
    tail = F.lit(None) if in_tail is None else F.count(F.when(in_tail, 1)).over(group)
    ranked = frame.select(
        *keys, value, (F.row_number().over(group.orderBy(F.col(value).asc_nulls_last())) - 1).alias(_RANK),
        F.count(F.lit(1)).over(group).alias(_ROWS), F.count(value).over(group).alias(_VALID), tail.alias(_TAIL))
    last = F.col(_VALID) - 1
    needed = functools.reduce(operator.or_, [F.col(_RANK).isin(F.floor(last * q), F.ceil(last * q))
                                             for q in quantiles])
    order_statistics: dict[tuple, dict[int, float]] = {}
    counts: dict[tuple, tuple] = {}
    for row in ranked.where((F.col(_RANK) == 0) | (F.col(value).isNotNull() & needed)).collect():
        key = tuple(row[k] for k in keys)
        counts[key] = (row[_ROWS], row[_VALID], row[_TAIL])
        if row[value] is not None:
            order_statistics.setdefault(key, {})[row[_RANK]] = row[value]
    return {key: _Group(rows, valid, [quantile_cont(order_statistics[key], valid, q) for q in quantiles] if valid
                        else None, tail) for key, (rows, valid, tail) in counts.items()}


class SparkAggregations:
    """The passes of core.utility.quality_groups.Aggregations on a Spark session, one window pass per file each."""

    def __init__(self, spark):
        self.spark = spark

    def _doubles(self, path: str | os.PathLike, columns: Sequence[str], *keys: str):
        """The file's ``keys`` and its ``columns`` as doubles (the embedded SQL casts them to DOUBLE)."""
        from pyspark.sql import functions as F

        return self.spark.read.parquet(str(path)).select(*keys, *[F.col(c).cast("double").alias(c) for c in columns])

    def tail_thresholds(self, source_path: str | os.PathLike, measures: Sequence[Measure]) -> dict[str, float | None]:
        """Column -> the whole-source p10 (LOW tails) or p90 (HIGH tails)."""
        columns = [m.column for m in measures]
        values = self._doubles(source_path, columns).unpivot([], columns, _MEASUREMENT, _VALUE)
        found = _groups(values, [_MEASUREMENT], _VALUE, THRESHOLD_QUANTILES)
        thresholds = {}
        for m in measures:
            quantiles = found[(m.column,)].quantiles if (m.column,) in found else None  # None: no valid value
            thresholds[m.column] = (None if quantiles is None
                                    else quantiles[THRESHOLD_QUANTILES.index(m.threshold_quantile)])
        return thresholds

    def cell_statistics(self, path: str | os.PathLike, app: str, radio: str, measures: Sequence[Measure],
                        thresholds: Mapping[str, float | None], *, only_radio: str | None = None) -> CellStats:
        """Every (app, radio) group of ``path`` (optionally one radio only); measurements absent from the file are
        skipped, as embedded."""
        from pyspark.sql import functions as F

        present = parquet_columns(path)
        measures = [m for m in measures if m.column in present]
        frame = self._doubles(path, [m.column for m in measures], app, radio)
        if only_radio is not None:
            frame = frame.where(F.col(radio) == only_radio)
        frame = frame.withColumns({app: F.col(app).cast("string"), radio: F.col(radio).cast("string")})
        if not measures:
            return cell_stats(frame.groupBy(app, radio).count().collect(), measures)
        values = frame.unpivot([app, radio], [m.column for m in measures], _MEASUREMENT, _VALUE)
        value, measurement = F.col(_VALUE), F.col(_MEASUREMENT)
        in_tail = functools.reduce(operator.or_, [
            (measurement == m.column) & ((value >= thresholds[m.column]) if m.tail == HIGH
                                         else (value <= thresholds[m.column]))
            for m in measures if thresholds.get(m.column) is not None], F.lit(False))
        found = _groups(values, [app, radio, _MEASUREMENT], _VALUE, QUANTILES, in_tail)
        records = []
        for key in dict.fromkeys(key[:2] for key in found):  # each group has every measurement (nulls kept)
            groups = [found[(*key, m.column)] for m in measures]
            record = [*key, groups[0].rows]
            for m, group in zip(measures, groups):
                record += [group.valid, group.quantiles, None if thresholds.get(m.column) is None else group.tail]
            records.append(record)
        return cell_stats(records, measures)

    def joint_counts(self, path: str | os.PathLike, app: str, radio: str, download: str, latency: str,
                     thresholds: tuple[float, float], radio_value: str) -> dict[str, tuple[int, int]]:
        """Per app, on one radio: rows with a download and a latency, and those both slow and laggy."""
        from pyspark.sql import functions as F

        frame = self._doubles(path, [download, latency], app, radio).where(F.col(radio) == radio_value)
        both = F.col(download).isNotNull() & F.col(latency).isNotNull()
        joint = (F.col(download) <= thresholds[0]) & (F.col(latency) >= thresholds[1])
        rows = frame.groupBy(F.col(app).cast("string").alias(app)).agg(
            F.count(F.when(both, 1)).alias("n"), F.count(F.when(joint, 1)).alias("joint")).collect()
        return {row[app]: (int(row["n"]), int(row["joint"])) for row in rows}

    def station_statistics(self, path: str | os.PathLike, station: str,
                           latency: str) -> tuple[pd.DataFrame, float | None]:
        """Rows and median radio latency per station (by station), and the median radio latency over all rows: the
        rows once per station and once more as one whole group, as DuckDB's GROUPING SETS."""
        from pyspark.sql import functions as F

        frame = self._doubles(path, [latency], station)
        both = frame.withColumn(_WHOLE, F.lit(False)).unionByName(
            frame.withColumns({station: F.lit(None).cast(frame.schema[station].dataType), _WHOLE: F.lit(True)}))
        found = _groups(both, [station, _WHOLE], latency, (0.5,))
        whole = found.pop((None, True), None)
        stations = sorted(key[0] for key in found)
        table = pd.DataFrame({
            "station": pd.Series(stations, dtype="Int64"),
            "load": pd.Series([found[(s, False)].rows for s in stations], dtype="int64"),
            "median_latency": pd.Series([(found[(s, False)].quantiles or [math.nan])[0] for s in stations],
                                        dtype="float64"),
        })
        return table, whole.quantiles[0] if whole and whole.quantiles else None

    def group_correlations(self, path: str | os.PathLike, app: str, radio: str, pairs: Sequence[Pair], *,
                           groups: Sequence[Group] | None = None,
                           min_rows: int = 0) -> dict[Group, GroupCorrelations]:
        """Per (app, radio) group of at least ``min_rows`` rows (among ``groups``, where given): the rank correlation
        of each pair. Each group's rows meet in one task on an executor (``applyInPandas``), ranked there by the
        embedded code, whose exact integer sums make the figure independent of the order Spark hands the rows over
        in; only the figures reach the driver."""
        import numpy as np
        from pyspark.sql import functions as F
        from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

        columns, positions = pair_columns(pairs)
        frame = self._doubles(path, columns, app, radio).withColumns(
            {app: F.col(app).cast("string"), radio: F.col(radio).cast("string")})
        sizes = {(row[app], row[radio]): int(row["count"]) for row in frame.groupBy(app, radio).count().collect()}
        wanted = chosen_groups(sizes, groups, min_rows)
        if not wanted:
            return {}
        keys = StructType([StructField(app, StringType()), StructField(radio, StringType())])
        frame = frame.join(F.broadcast(self.spark.createDataFrame(wanted, keys)), [app, radio])

        def correlate(rows: pd.DataFrame) -> pd.DataFrame:
            rhos, counts = spearman(rows[columns].to_numpy(dtype=np.float64, na_value=np.nan), positions)
            return pd.DataFrame({app: rows[app].iloc[0], radio: rows[radio].iloc[0], _PAIR: range(len(positions)),
                                 _RHO: rhos, _COMPLETE: counts, _ROWS: len(rows)})

        schema = StructType([*keys.fields, StructField(_PAIR, LongType()), StructField(_RHO, DoubleType()),
                             StructField(_COMPLETE, LongType()), StructField(_ROWS, LongType())])
        found: dict[Group, GroupCorrelations] = {}
        for row in frame.groupBy(app, radio).applyInPandas(correlate, schema).collect():
            group = found.setdefault((row[app], row[radio]), GroupCorrelations(int(row[_ROWS]), {}, {}))
            pair = tuple(pairs[row[_PAIR]])
            # pandas' NaN (an undefined rho) crosses Arrow as a null
            group.rho[pair] = math.nan if row[_RHO] is None else float(row[_RHO])
            group.complete[pair] = int(row[_COMPLETE])
        return {group: GroupCorrelations(g.rows, {p: g.rho[p] for p in map(tuple, pairs)},
                                         {p: g.complete[p] for p in map(tuple, pairs)})
                for group, g in sorted(found.items())}
