"""DuckDB's ``quantile_cont`` from two order statistics per group, for inputs too large to hold every value.

``quantile_cont`` keeps every value of every group in its aggregate state (8 bytes a value), which does not
spill: at 110M rows the whole-source p10 of one measurement needs 880 MB and fails under a 1GB memory limit.
Where every group fits on its own, ``quantile_cont`` runs over batches of whole groups that fit together, a
pass each (``quantiles_by_batches``). Otherwise the answer only depends on the values at ranks
floor((n - 1) q) and ceil((n - 1) q) of each group's sorted non-null values, and ``quantile_cont`` below
interpolates between them with DuckDB's arithmetic (``ranked_quantiles``). A whole-input quantile finds them
by selection: counts per value range narrow each rank down to a range of a few values, which are fetched and
sorted (a few scans, no sort of the input and no spill; ``selected_quantiles``). Groups that do not fit, and
inputs with non-finite values, are numbered by a window sort, which spills to disk. The Spark passes rank the
same way. The figures are the same to the last bit (tests compare the methods on the same files).
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


def _budget(connection: duckdb.DuckDBPyConnection) -> int | None:
    """How many values one batch's ``quantile_cont`` states may hold (8 bytes each): an eighth of the memory limit,
    since a state's vector grows by doubling (a batch of 31M values, a quarter, ran out of 1GB at 110M rows)."""
    limit = memory_limit_bytes(connection)
    return None if limit is None else limit // 8 // 8


def holds_in_memory(connection: duckdb.DuckDBPyConnection, values: int) -> bool:
    """Whether one pass's ``quantile_cont`` states of ``values`` values fit in a quarter of the memory limit (22M
    values, 11M rows of two measurements, do under the default 1GB)."""
    budget = _budget(connection)
    return budget is None or values <= 2 * budget


def quantiles_by_batches(connection: duckdb.DuckDBPyConnection, rows_sql: str, parameters: Sequence,
                         keys: Sequence[str], values: Sequence[str], quantiles: Sequence[float],
                         sizes: Mapping[tuple, int]) -> dict[tuple, list] | None:
    """Per group of ``keys``: ``quantile_cont`` of each of ``values`` at ``quantiles`` (a list per value, None
    without a valid value), computed by ``quantile_cont`` itself over batches of whole groups whose values
    (``sizes``: the values a group holds) fit in memory together, one pass over ``rows_sql`` a batch. None when
    a single group does not fit: the caller ranks instead (``ranked_quantiles``)."""
    budget = _budget(connection)
    batches, batch, held = [], [], 0
    for group, size in sizes.items():
        if budget is not None and size > budget:
            return None
        if batch and budget is not None and held + size > budget:
            batches.append(batch)
            batch, held = [], 0
        batch.append(group)
        held += size
    if batch:
        batches.append(batch)
    terms = ", ".join(f"quantile_cont({value}, [{', '.join(map(repr, quantiles))}])" for value in values)
    found: dict[tuple, list] = {}
    for batch in batches:
        connection.register("__groups", pa.table({key: [group[i] for group in batch] for i, key in enumerate(keys)}))
        try:
            records = connection.execute(
                f"SELECT {', '.join(keys)}, {terms} FROM ({rows_sql}) SEMI JOIN __groups USING ({', '.join(keys)}) "
                f"GROUP BY ALL", list(parameters)).fetchall()
        finally:
            connection.unregister("__groups")
        found.update({tuple(record[:len(keys)]): list(record[len(keys):]) for record in records})
    return found


def ranked_quantiles(connection: duckdb.DuckDBPyConnection, rows_sql: str, parameters: Sequence,
                     keys: Sequence[str], value: str, quantiles: Sequence[float]) -> dict[tuple, list[float]]:
    """Per group of ``keys`` (a tuple of their values; () for the whole input): ``quantile_cont`` of ``value`` at
    each of ``quantiles`` over the group's non-null values. ``rows_sql`` selects the keys and ``value`` (with
    ``parameters``); groups without a valid value are absent."""
    if not keys:
        selected = selected_quantiles(connection, rows_sql, parameters, value, quantiles)
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
"""Value ranges a selection pass counts per rank still open: each pass narrows a rank's range by about this."""
SELECTION_FETCH_VALUES = 1 << 20
"""Values of a rank's range fetched and sorted in memory (8 MB) once its range holds no more."""
SELECTION_PASSES = 8
"""Counting passes before a selection gives up (values spread over many orders of magnitude): a window sort."""


@dataclass(frozen=True)
class _Range:
    """Values in [lo, hi]: ``count`` of them, ``below`` values of the input under lo; holds the ``ranks``."""

    lo: float
    hi: float
    below: int
    count: int
    ranks: tuple[int, ...]


def selected_quantiles(connection: duckdb.DuckDBPyConnection, rows_sql: str, parameters: Sequence, value: str,
                       quantiles: Sequence[float]) -> dict[tuple, list[float]] | None:
    """``ranked_quantiles`` of the whole input (``{}`` without a valid value) by selection instead of a sort;
    None when it cannot tell (a non-finite value, or SELECTION_PASSES not enough): the caller sorts.

    Each pass counts the values of each open range in SELECTION_BUCKETS equal-width buckets, a monotone
    function of the value, so a bucket's values are exactly those between its minimum and maximum: the bucket
    holding a rank is its next range, which holds the rank at (rank - values below it)."""
    values = f"(SELECT {_VALUE} FROM (SELECT {value} AS {_VALUE} FROM ({rows_sql})) WHERE {_VALUE} IS NOT NULL)"
    count, lo, hi = connection.execute(f"SELECT count(*), min({_VALUE}), max({_VALUE}) FROM {values}",
                                       list(parameters)).fetchone()
    if count == 0:
        return {}
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    wanted = sorted({rank for q in quantiles for rank in _ranks_read(count, q)})
    ranges, found = [_Range(lo, hi, 0, count, tuple(wanted))], {}
    for _ in range(SELECTION_PASSES):
        found.update({rank: r.lo for r in ranges if r.lo == r.hi for rank in r.ranks})
        ranges = [r for r in ranges if r.lo != r.hi]
        small = [r for r in ranges if r.count <= SELECTION_FETCH_VALUES]
        if small:
            found.update(_fetched(connection, values, parameters, small))
        ranges = _narrowed(connection, values, parameters, [r for r in ranges if r.count > SELECTION_FETCH_VALUES])
        if not ranges:
            return {(): [quantile_cont(found, count, q) for q in quantiles]}
    return None


def _ranks_read(count: int, q: float) -> set[int]:
    position = (count - 1) * q
    return {math.floor(position), math.ceil(position)}


def _in_ranges(ranges: Sequence[_Range]) -> tuple[str, list[float]]:
    """A SQL condition on the value: inside one of ``ranges`` (bound as DOUBLE parameters, exactly)."""
    return " OR ".join(f"{_VALUE} BETWEEN ? AND ?" for _ in ranges), [bound for r in ranges for bound in (r.lo, r.hi)]


def _fetched(connection: duckdb.DuckDBPyConnection, values: str, parameters: Sequence,
             ranges: Sequence[_Range]) -> dict[int, float]:
    """The order statistics of ``ranges``' ranks, from their values fetched in one scan and sorted."""
    condition, bounds = _in_ranges(ranges)
    fetched = connection.execute(f"SELECT {_VALUE} FROM {values} WHERE {condition}",
                                 [*parameters, *bounds]).fetchnumpy()[_VALUE]
    found = {}
    for r in ranges:
        inside = np.sort(fetched[(fetched >= r.lo) & (fetched <= r.hi)])
        if len(inside) != r.count:
            raise RuntimeError(f"selection: {len(inside)} values in [{r.lo!r}, {r.hi!r}], counted {r.count}")
        found.update({rank: float(inside[rank - r.below]) for rank in r.ranks})
    return found


def _narrowed(connection: duckdb.DuckDBPyConnection, values: str, parameters: Sequence,
              ranges: Sequence[_Range]) -> list[_Range]:
    """Each range's ranks in the buckets of one counting pass: the ranges they fall in next."""
    if not ranges:
        return []
    condition, bounds = _in_ranges(ranges)
    which = " ".join(f"WHEN {_VALUE} BETWEEN ? AND ? THEN {i}" for i in range(len(ranges)))
    lows = " ".join(f"WHEN {i} THEN ?::DOUBLE" for i in range(len(ranges)))
    widths = " ".join(f"WHEN {i} THEN ?::DOUBLE" for i in range(len(ranges)))
    buckets = SELECTION_BUCKETS
    records = connection.execute(
        f"SELECT i, least(floor(({_VALUE} - CASE i {lows} END) / CASE i {widths} END * {buckets}), {buckets - 1}) "
        f"AS b, count(*), min({_VALUE}), max({_VALUE}) "
        f"FROM (SELECT {_VALUE}, CASE {which} END AS i FROM {values} WHERE {condition}) GROUP BY ALL ORDER BY i, b",
        [*[r.lo for r in ranges], *[r.hi - r.lo for r in ranges], *bounds, *parameters, *bounds]).fetchall()
    narrowed = []
    for i, r in enumerate(ranges):
        below = r.below
        for _, _, n, lo, hi in (record for record in records if record[0] == i):
            inside = tuple(rank for rank in r.ranks if below <= rank < below + n)
            if inside:
                narrowed.append(_Range(lo, hi, below, n, inside))
            below += n
    return narrowed
