"""DuckDB's ``quantile_cont`` from two order statistics per group, for inputs too large to hold every value.

``quantile_cont`` keeps every value of every group in its aggregate state (8 bytes a value), which does not
spill: at 110M rows the whole-source p10 of one measurement needs 880 MB and fails under a 1GB memory limit.
The answer only depends on the values at ranks floor((n - 1) q) and ceil((n - 1) q) of each group's sorted
non-null values, and ``quantile_cont`` below interpolates between them with DuckDB's arithmetic
(``ranked_quantiles``). They are found by selection: counts per value range narrow each rank down to a range
of a few values, which are then counted by value (about three scans whatever the number of groups, no sort of
the input and no spill; ``selected_quantiles``). Inputs with non-finite values, and values spread too widely to
narrow, are numbered by a window sort instead, which spills to disk. The Spark passes rank with a window. The
figures are the same to the last bit (tests compare the methods on the same files).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import duckdb
import numpy as np
import pyarrow as pa

_VALUE, _RANK, _COUNT = "__value", "__rank", "__count"
_SIZE = re.compile(r"^\s*([0-9.]+)\s*([KMGT]?i?B|bytes)\s*$", re.IGNORECASE)
_UNITS = {"bytes": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def quantile_cont(order_statistics: Mapping[int, float], count: int, q: float) -> float:
    """DuckDB's ``quantile_cont`` at ``q`` of ``count`` values, from the order statistics (0-based) it reads.

    DuckDB interpolates lo * (1 - d) + hi * d with d = (n - 1) q - floor((n - 1) q), and its build evaluates that
    as one fused multiply-add: the plainly rounded sum differs in the last bit for about a quarter of p10s and p90s
    (measured with duckdb 2.0.1; the test against DuckDB guards it).
    """
    position = (count - 1) * q
    lower, upper = math.floor(position), math.ceil(position)
    lo = order_statistics[lower]
    if lower == upper:
        return lo
    fraction = position - lower
    return _fused_multiply_add(lo, 1.0 - fraction, order_statistics[upper] * fraction)


def _fused_multiply_add(a: float, b: float, c: float) -> float:
    """a * b + c rounded once (math.fma from Python 3.13 on); plain arithmetic where a value is not finite."""
    if not all(map(math.isfinite, (a, b, c))):
        return a * b + c
    return float(Fraction(a) * Fraction(b) + Fraction(c))


def memory_limit_bytes(connection: duckdb.DuckDBPyConnection) -> int | None:
    """The connection's memory limit in bytes (None when DuckDB reports none it can be read as)."""
    setting = connection.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
    match = _SIZE.match(str(setting))
    return round(float(match.group(1)) * _UNITS[match.group(2).lower()]) if match else None


def holds_in_memory(connection: duckdb.DuckDBPyConnection, values: int) -> bool:
    """Whether one pass's ``quantile_cont`` states of ``values`` values (8 bytes each) fit in a quarter of the
    memory limit (22M values, 11M rows of two measurements, do under the default 1GB; a state's vector grows by
    doubling, and 31M values ran out of 1GB at 110M rows)."""
    limit = memory_limit_bytes(connection)
    return limit is None or values * 8 <= limit // 4


def ranked_quantiles(connection: duckdb.DuckDBPyConnection, rows_sql: str, parameters: Sequence,
                     keys: Sequence[str], value: str, quantiles: Sequence[float]) -> dict[tuple, list[float]]:
    """Per group of ``keys`` (a tuple of their values; () for the whole input): ``quantile_cont`` of ``value`` at
    each of ``quantiles`` over the group's non-null values. ``rows_sql`` selects the keys and ``value`` (with
    ``parameters``); groups without a valid value are absent."""
    selected = selected_quantiles(connection, rows_sql, parameters, keys, value, quantiles)
    if selected is not None:
        return selected
    partition = f"PARTITION BY {', '.join(keys)}" if keys else ""
    ranks = ", ".join(f"floor(({_COUNT} - 1) * {q!r})::BIGINT, ceil(({_COUNT} - 1) * {q!r})::BIGINT"
                      for q in quantiles)
    key_list = "".join(f"{key}, " for key in keys)
    query = (
        f"SELECT {key_list}{_COUNT}, {_RANK}, {_VALUE} FROM ("
        f"SELECT {key_list}{_VALUE}, row_number() OVER ({partition} ORDER BY {_VALUE}) - 1 AS {_RANK}, "
        f"count(*) OVER ({partition}) AS {_COUNT} "
        f"FROM (SELECT {key_list}{value} AS {_VALUE} FROM ({rows_sql})) WHERE {_VALUE} IS NOT NULL) "
        f"WHERE list_contains([{ranks}], {_RANK})"
    )
    order_statistics: dict[tuple, dict[int, float]] = {}
    counts: dict[tuple, int] = {}
    for *group, count, rank, found in connection.execute(query, list(parameters)).fetchall():
        order_statistics.setdefault(tuple(group), {})[rank] = found
        counts[tuple(group)] = count
    return {group: [quantile_cont(statistics, counts[group], q) for q in quantiles]
            for group, statistics in order_statistics.items()}


SELECTION_BUCKETS = 1 << 16
"""Buckets a selection pass counts an open range in (fewer when many are open): each pass narrows a rank's
range by about this."""
SELECTION_BUCKETS_PER_PASS = 1 << 20
"""Buckets one counting pass may return in all (ranges open x buckets each)."""
SELECTION_EXACT_VALUES = 1 << 12
"""A range holding no more values is counted by value, which settles its ranks in that pass."""
SELECTION_PASSES = 8
"""Counting passes before a selection gives up (values spread over many orders of magnitude): a window sort."""
_GROUP, _LO, _HI, _WIDTH, _EXACT, _RANGE = "__group", "__lo", "__hi", "__width", "__exact", "__range"


@dataclass(frozen=True)
class _Range:
    """Values of group ``group`` in [lo, hi]: ``count`` of them, ``below`` of the group's values under lo; holds
    the group's ``ranks`` that fall in it."""

    group: tuple
    lo: float
    hi: float
    below: int
    count: int
    ranks: tuple[int, ...]


def selected_quantiles(connection: duckdb.DuckDBPyConnection, rows_sql: str, parameters: Sequence,
                       keys: Sequence[str], value: str, quantiles: Sequence[float]) -> dict[tuple, list[float]] | None:
    """``ranked_quantiles`` by selection instead of a sort; None when it cannot tell (a non-finite value, or
    SELECTION_PASSES not enough): the caller sorts.

    Each pass counts the values of each open range in equal-width buckets, a monotone function of the value, so
    a bucket's values are exactly those between its minimum and maximum: the bucket holding a rank is its next
    range, which holds the rank at (rank - the group's values below it). A range of few values is counted by
    value, so its ranks' values are known after that pass. About three scans of the value and the keys,
    whatever the number of groups."""
    key_list = "".join(f"{key}, " for key in keys)
    values = (f"(SELECT {key_list}{_VALUE} FROM (SELECT {key_list}{value} AS {_VALUE} FROM ({rows_sql})) "
              f"WHERE {_VALUE} IS NOT NULL)")
    records = connection.execute(f"SELECT {key_list}count(*), min({_VALUE}), max({_VALUE}) FROM {values} "
                                 f"GROUP BY ALL", list(parameters)).fetchall()
    records = [record for record in records if record[len(keys)]]  # without keys, an empty input gives (0, NULL, NULL)
    if not all(math.isfinite(lo) and math.isfinite(hi) for *_, lo, hi in records):
        return None
    counts = {tuple(group): count for *group, count, _, _ in records}
    ranges = [_Range(tuple(group), lo, hi, 0, count,
                     tuple(sorted({rank for q in quantiles for rank in _ranks_read(count, q)})))
              for *group, count, lo, hi in records]
    found: dict[tuple, dict[int, float]] = {group: {} for group in counts}
    for _ in range(SELECTION_PASSES + 1):
        for r in ranges:
            if r.lo == r.hi:
                found[r.group].update(dict.fromkeys(r.ranks, r.lo))
        ranges = [r for r in ranges if r.lo != r.hi]
        if not ranges:
            return {group: [quantile_cont(found[group], counts[group], q) for q in quantiles] for group in counts}
        ranges = _narrowed(connection, values, parameters, keys, ranges)
    return None


def _ranks_read(count: int, q: float) -> set[int]:
    position = (count - 1) * q
    return {math.floor(position), math.ceil(position)}


def _narrowed(connection: duckdb.DuckDBPyConnection, values: str, parameters: Sequence, keys: Sequence[str],
              ranges: Sequence[_Range]) -> list[_Range]:
    """Each range's ranks in the buckets of one counting pass: the ranges they fall in next (a range counted by
    value: ranges of one value)."""
    exact, held = set(), 0
    for i in sorted(range(len(ranges)), key=lambda i: ranges[i].count):
        if ranges[i].count > SELECTION_EXACT_VALUES or held + ranges[i].count > SELECTION_BUCKETS_PER_PASS // 2:
            break
        exact.add(i)
        held += ranges[i].count
    bucketed = len(ranges) - len(exact)
    buckets = max(2, min(SELECTION_BUCKETS, SELECTION_BUCKETS_PER_PASS // 2 // max(1, bucketed)))
    connection.register("__ranges", pa.table({
        **{key: [r.group[i] for r in ranges] for i, key in enumerate(keys)}, _GROUP: [0] * len(ranges),
        _RANGE: list(range(len(ranges))), _EXACT: [i in exact for i in range(len(ranges))],
        _LO: pa.array([r.lo for r in ranges], pa.float64()), _HI: pa.array([r.hi for r in ranges], pa.float64()),
        _WIDTH: pa.array([r.hi - r.lo for r in ranges], pa.float64())}))
    same_group = " AND ".join(f"v.{key} IS NOT DISTINCT FROM r.{key}" for key in [*keys, _GROUP])
    bucket = (f"CASE WHEN r.{_EXACT} THEN v.{_VALUE} "
              f"ELSE least(floor((v.{_VALUE} - r.{_LO}) / r.{_WIDTH} * {buckets}), {buckets - 1}) END")
    try:
        counted = connection.execute(
            f"SELECT r.{_RANGE} AS i, {bucket} AS b, count(*) AS n, min(v.{_VALUE}) AS lo, max(v.{_VALUE}) AS hi "
            f"FROM (SELECT *, 0 AS {_GROUP} FROM {values}) v JOIN __ranges r "
            f"ON {same_group} AND v.{_VALUE} BETWEEN r.{_LO} AND r.{_HI} GROUP BY ALL ORDER BY i, b",
            list(parameters)).fetchnumpy()
    finally:
        connection.unregister("__ranges")
    which, n = counted["i"].astype(np.int64), counted["n"].astype(np.int64)
    lows, highs = counted["lo"].astype(np.float64), counted["hi"].astype(np.float64)
    starts = np.searchsorted(which, np.arange(len(ranges) + 1))
    narrowed = []
    for i, r in enumerate(ranges):
        first, last = starts[i], starts[i + 1]
        if n[first:last].sum() != r.count:
            raise RuntimeError(f"selection: {n[first:last].sum()} values in [{r.lo!r}, {r.hi!r}] of {r.group}, "
                               f"counted {r.count} before")
        above = r.below + np.cumsum(n[first:last])  # the group's values below each bucket's end
        holding = np.searchsorted(above, np.asarray(r.ranks), side="right")
        for bucket in np.unique(holding):
            at = first + bucket
            narrowed.append(_Range(r.group, float(lows[at]), float(highs[at]), int(above[bucket] - n[at]), int(n[at]),
                                   tuple(rank for rank, held in zip(r.ranks, holding) if held == bucket)))
    return narrowed
