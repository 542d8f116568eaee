"""The relationships figure's exact rank sums, compiled by numba: per pair of measurements, the twice-centred ranks
of its complete rows written while each column's sorted order is walked, and their products summed as exact
integers in one pass (core/utility/pair_correlation.py defines the figure)."""

from __future__ import annotations

import numba
import numpy as np

CARRY = 1 << 62
"""The exact sums are kept as high * 2**62 + low in two int64: a product of two ranks (below 2**56 for groups of
fewer than 2**27 rows) never carries the low part past int64."""


@numba.njit(cache=True, nogil=True)
def pair_rank_sums(values, orders, pairs):
    """Per pair: the count of complete rows, and the exact sums of x * x, y * y and x * y of twice its columns'
    centred ranks among them (as ``_twice_centred_ranks``), each as (high, low) over ``CARRY``."""
    n = values.shape[0]
    counts = np.zeros(pairs.shape[0], dtype=np.int64)
    sums = np.zeros((pairs.shape[0], 3, 2), dtype=np.int64)
    ranks = np.zeros((2, n), dtype=np.int64)
    run = np.empty(n, dtype=np.int64)
    for p in range(pairs.shape[0]):
        i, j = pairs[p, 0], pairs[p, 1]
        count = 0
        for row in range(n):
            if not (np.isnan(values[row, i]) or np.isnan(values[row, j])):
                count += 1
        counts[p] = count
        if count < 2:
            continue
        for side in range(2):
            column, other = (i, j) if side == 0 else (j, i)
            _twice_centred_ranks(values, orders[column], column, other, count, ranks[side], run)
        for row in range(n):
            if not (np.isnan(values[row, i]) or np.isnan(values[row, j])):
                x, y = ranks[0, row], ranks[1, row]
                _add_exact(sums[p, 0], x * x)
                _add_exact(sums[p, 1], y * y)
                _add_exact(sums[p, 2], x * y)
    return counts, sums


@numba.njit(cache=True, nogil=True)
def _twice_centred_ranks(values, order, column, other, count, ranks, run) -> None:
    """Into ``ranks``, per row where ``column`` and ``other`` are both present, twice (its 1-based rank among those
    rows, tied values their average rank, minus the mean rank): an integer, as an average rank is a half-integer
    and the mean rank is (count + 1) / 2. ``order``: the rows by ``column``'s value, NaN last."""
    place = 0
    held = 0
    for t in range(order.shape[0]):
        row = order[t]
        value = values[row, column]
        if np.isnan(value):
            break
        if np.isnan(values[row, other]):
            continue
        if held and value != values[run[0], column]:
            _rank_run(ranks, run, held, place, count)
            place += held
            held = 0
        run[held] = row
        held += 1
    _rank_run(ranks, run, held, place, count)


@numba.njit(cache=True, nogil=True)
def _rank_run(ranks, run, held, place, count) -> None:
    """The rows of one run of equal values, at places [place, place + held) of the order: twice their centred
    average rank."""
    twice = place + (place + held) - count
    for t in range(held):
        ranks[run[t]] = twice


@numba.njit(cache=True, nogil=True)
def _add_exact(total, value) -> None:
    low = total[1] + value
    if low >= CARRY:
        low -= CARRY
        total[0] += 1
    elif low <= -CARRY:
        low += CARRY
        total[0] -= 1
    total[1] = low
