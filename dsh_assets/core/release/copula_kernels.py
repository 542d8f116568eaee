"""The copula shuffle's per-position loops, compiled by numba.

A round of calibration is one pass over the cells: each cell's draws for every measurement, their order within the
cell, the centred ranks they move and the group's sums of products of those, all in a cell-sized scratch. A draw
only orders a cell of a few rows, so no array of the release's length is made per step and nothing is sorted
across cells: at 11M rows memory traffic, not arithmetic, is the cost.

Every sum runs in release order, and every product in a fixed precision (float32 by float32 for two centred ranks,
float64 by a widened float32 normal for a draw), so the bytes do not depend on how the work is split.
"""

from __future__ import annotations

import numba
import numpy as np

_SMALL_RUN = 32
"""A run of at most this many keys is put in order by insertion; a longer one by a stable merge sort."""
_SIGN = np.uint64(1 << 63)


@numba.njit(cache=True, nogil=True)
def pair_sums(scores: np.ndarray, groups: np.ndarray, group_count: int) -> np.ndarray:
    """Per group, the sums over its positions of the products of every two measurements' scores (``scores``:
    measurements x positions, float32), each in position order."""
    columns, n = scores.shape
    sums = np.zeros((group_count, columns, columns))
    for i in range(n):
        _add_products(sums, scores[:, i], groups[i])
    _mirror(sums)
    return sums


@numba.njit(cache=True, nogil=True)
def realised_pair_sums(normals: np.ndarray, factors: np.ndarray, groups: np.ndarray, plain: np.ndarray,
                       cells: np.ndarray, ranks: np.ndarray, scores: np.ndarray, group_count: int) -> np.ndarray:
    """``pair_sums`` of the scores as the draws of ``factors`` move them: every measurement's donors, a cell at a
    time (see ``cell_donors``)."""
    columns, n = scores.shape
    sums = np.zeros((group_count, columns, columns))
    largest = _largest_run(cells)
    scratch = _scratch(largest)
    donors = np.empty(largest, dtype=np.int64)
    moved = np.empty((columns, largest), dtype=np.float32)
    start = 0
    while start < n:
        end = _run_end(cells, start)
        for m in range(columns):
            _cell_donors(m, start, end, normals, factors, groups, plain, ranks, scratch, donors)
            for t in range(end - start):
                moved[m, t] = scores[m, donors[t]]
        for t in range(end - start):
            _add_products(sums, moved[:, t], groups[start + t])
        start = end
    _mirror(sums)
    return sums


@numba.njit(cache=True, nogil=True)
def donors_of(m: int, normals: np.ndarray, factors: np.ndarray, groups: np.ndarray, plain: np.ndarray,
              cells: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Measurement ``m``'s donor of every position (see ``cell_donors``)."""
    n = groups.shape[0]
    donors = np.empty(n, dtype=np.int64)
    scratch = _scratch(_largest_run(cells))
    start = 0
    while start < n:
        end = _run_end(cells, start)
        _cell_donors(m, start, end, normals, factors, groups, plain, ranks, scratch, donors[start:end])
        start = end
    return donors


@numba.njit(cache=True, nogil=True)
def cell_value_ranks(values: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """Each non-null value's place in its cell in the order of (value, position), from 0; -1 for null."""
    n = values.shape[0]
    ranks = np.full(n, -1, dtype=np.int32)
    scratch = _scratch(_largest_run(cells))
    start = 0
    while start < n:
        end = _run_end(cells, start)
        positions, held_values, keys, _, order = scratch
        held = 0
        for i in range(start, end):
            if not np.isnan(values[i]):
                positions[held] = i
                held_values[held] = values[i]
                held += 1
        _images(held_values[:held], keys)
        _stable_order(keys[:held], order)
        for t in range(held):
            ranks[positions[order[t]]] = t
        start = end
    return ranks


def centred_group_ranks(values: np.ndarray, cells: np.ndarray, groups: np.ndarray,
                        by_group: np.ndarray) -> np.ndarray:
    """Each non-null value's average rank within its group (from 1; equal values share the mean of their ranks),
    minus the mean of those ranks in its cell; 0 for null. ``by_group``: every position ordered by (group,
    position)."""
    held = by_group[~np.isnan(values[by_group])]
    held_values = values[held]
    held_groups = groups[held]
    keys = np.empty(len(held), dtype=np.uint64)
    _images(held_values, keys)
    bounds = np.flatnonzero(np.concatenate([[True], held_groups[1:] != held_groups[:-1], [True]]))
    order = np.empty(len(held), dtype=np.int64)
    for start, end in zip(bounds[:-1], bounds[1:]):
        order[start:end] = start + _packed_order(keys[start:end])
    return _centred(values, cells, held, held_values, held_groups, keys, order)


def _packed_order(keys: np.ndarray) -> np.ndarray:
    """The indices of ``keys`` in the order of (key, index): numpy's sort of bare integers (an order of magnitude
    faster than its argsort) on each key's high bits with the index in the low ones, then exact order restored in
    the rare stretches whose keys share the high bits and differ below them."""
    size = len(keys)
    bits = np.uint64(max(1, (size - 1).bit_length()))
    packed = ((keys >> bits) << bits) | np.arange(size, dtype=np.uint64)
    packed.sort()
    order = (packed & ((np.uint64(1) << bits) - np.uint64(1))).astype(np.int64)
    _exact_stretches(keys, order, bits)
    return order


@numba.njit(cache=True, nogil=True)
def _exact_stretches(keys, order, bits) -> None:
    """Where consecutive entries of ``order`` share their keys' high bits (above ``bits``) but not their keys, the
    stretch is put in the order of (key, index) in place."""
    start = 0
    while start < order.shape[0]:
        end = start + 1
        mixed = False
        while end < order.shape[0] and keys[order[end]] >> bits == keys[order[start]] >> bits:
            mixed = mixed or keys[order[end]] != keys[order[start]]
            end += 1
        if mixed:
            stretch = order[start:end].copy()
            stretch_keys = keys[stretch]
            within = np.empty(end - start, dtype=np.int64)
            _stable_order(stretch_keys, within)
            for t in range(end - start):
                order[start + t] = stretch[within[t]]
        start = end


@numba.njit(cache=True, nogil=True)
def _centred(values, cells, held, held_values, held_groups, keys, order) -> np.ndarray:
    """``centred_group_ranks`` from the non-null positions in (group, value, position) order."""
    n = values.shape[0]
    count = held.shape[0]
    ranks = np.zeros(n)
    run_start = 0
    group_start = 0
    while run_start < count:
        group, value = held_groups[order[run_start]], held_values[order[run_start]]
        if group != held_groups[order[group_start]]:
            group_start = run_start
        run_end = run_start + 1
        while run_end < count and held_groups[order[run_end]] == group and held_values[order[run_end]] == value:
            run_end += 1
        average = (run_start - group_start) + (run_end - run_start + 1) / 2.0
        for t in range(run_start, run_end):
            ranks[held[order[t]]] = average
        run_start = run_end
    cell_count = np.zeros(cells.max() + 1 if n else 0, dtype=np.int64)
    cell_sum = np.zeros(cell_count.shape[0])
    for i in range(n):
        if not np.isnan(values[i]):
            cell_count[cells[i]] += 1
            cell_sum[cells[i]] += ranks[i]
    centred = np.zeros(n)
    for i in range(n):
        if not np.isnan(values[i]):
            centred[i] = ranks[i] - cell_sum[cells[i]] / max(cell_count[cells[i]], 1)
    return centred


@numba.njit(cache=True, nogil=True)
def _scratch(size):
    """A cell's working arrays, sized once for the largest cell: positions, draws, keys, by rank, order."""
    return (np.empty(size, dtype=np.int64), np.empty(size), np.empty(size, dtype=np.uint64),
            np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64))


@numba.njit(cache=True, nogil=True)
def _cell_donors(m, start, end, normals, factors, groups, plain, ranks, scratch, donors) -> None:
    """Measurement ``m``'s donors of the cell's positions ``start:end`` into ``donors[:end - start]``: each non-null
    position's draw is its group's factor row times its independent normals (``normals``: measurements x
    positions; a position of ``plain`` keeps its own normal); ordered by (draw, position), the t-th takes the value
    of the t-th in the order of (value, position) (``ranks``). A null position keeps its own."""
    positions, draws, keys, by_rank, order = scratch
    held = 0
    for i in range(start, end):
        donors[i - start] = i
        rank = ranks[m, i]
        if rank < 0:
            continue
        if plain[i]:
            draw = np.float64(normals[m, i])
        else:
            g = groups[i]
            draw = 0.0
            for k in range(m + 1):
                draw += factors[g, m, k] * np.float64(normals[k, i])
        positions[held] = i
        draws[held] = draw
        by_rank[rank] = i
        held += 1
    _images(draws[:held], keys)
    _stable_order(keys[:held], order)
    for t in range(held):
        donors[positions[order[t]] - start] = by_rank[t]


@numba.njit(cache=True, nogil=True)
def _add_products(sums, scores, group) -> None:
    for x in range(scores.shape[0]):
        score = scores[x]
        for y in range(x, scores.shape[0]):
            sums[group, x, y] += np.float64(score * scores[y])


@numba.njit(cache=True, nogil=True)
def _mirror(sums) -> None:
    for x in range(sums.shape[1]):
        for y in range(x + 1, sums.shape[1]):
            sums[:, y, x] = sums[:, x, y]


@numba.njit(cache=True, nogil=True)
def _run_end(labels, start) -> int:
    end = start + 1
    while end < labels.shape[0] and labels[end] == labels[start]:
        end += 1
    return end


@numba.njit(cache=True, nogil=True)
def _largest_run(labels) -> int:
    largest = 1
    start = 0
    while start < labels.shape[0]:
        end = _run_end(labels, start)
        largest = max(largest, end - start)
        start = end
    return largest


@numba.njit(cache=True, nogil=True)
def _stable_order(keys, order):
    """The indices of ``keys`` in ascending order, equal keys by index, written into ``order`` (as long as
    ``keys`` at least) and returned."""
    size = keys.shape[0]
    if size > _SMALL_RUN:
        order[:size] = np.argsort(keys, kind="mergesort")
        return order[:size]
    for t in range(size):
        index = t
        s = t - 1
        while s >= 0 and keys[order[s]] > keys[index]:
            order[s + 1] = order[s]
            s -= 1
        order[s + 1] = index
    return order[:size]


@numba.njit(cache=True, nogil=True)
def _images(values, out) -> None:
    """Each float64's bits mapped so that unsigned order is the numbers' order (-0.0 just below 0.0), into
    ``out``."""
    bits = values.view(np.uint64)
    for t in range(bits.shape[0]):
        out[t] = ~bits[t] if bits[t] & _SIGN else bits[t] | _SIGN
