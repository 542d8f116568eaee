"""A shuffle within the cell that keeps the rank correlations between a session's measurements.

Muralidhar and Sarathy's data shuffling (sdcMicro's ``shuffle``), within each released cell: every measurement
keeps its own values of the cell exactly, and they are handed out to the cell's rows in the rank order of keyed
draws from a multivariate normal, whose correlation comes from the whole (app, radio) group. A plain permutation
(``shuffle = "cell"``) is the same with independent draws: it keeps every quantile and loses every relationship.

* Nulls stay where they are: a measurement's non-null values of a cell go to the cell's rows where it is non-null,
  the j-th smallest value to the row with the j-th smallest draw (equal values by release position). So the rows
  with both values of a pair are the source's, and a row keeps the session's pattern of missing values.
* What is kept. Per released (app, radio) group, each measurement's values are ranked over the group (ties get
  their average rank) and the ranks centred in their cell; the *within-cell correlation* of two measurements is the
  correlation of those centred ranks over the group. Moving values within their cells changes only this part of the
  group's rank correlation (each cell's mean rank stays), so a release that matches it keeps Spearman's rho of the
  group.
* Pooling. A group's target is its own within-cell correlation blended with the pooled one of all groups, with the
  weight of ``POOL_ROWS`` rows ((n x own + POOL_ROWS x pooled) / (n + POOL_ROWS)): a group of a handful of rows
  borrows strength, a large group keeps its own. ``shrink`` scales every target by (1 - shrink).
* Calibration. Rank matching in small cells, ties (a mostly-zero count) and non-normal values make the realised
  correlation fall short of the draws' own. The draws' correlation starts at the target and is corrected
  ``CALIBRATION_ROUNDS`` times by the gap between the target and what the draws realise (the same keyed draws each
  round; each step in Fisher's z, atanh, so that it does not stall near +-1), then projected onto the valid
  correlation matrices. Groups of fewer than ``CALIBRATED_GROUP_ROWS`` rows are corrected together, as one pool: a
  gap measured on a few rows is mostly noise. In cells of about five rows each pair falls short by its own amount,
  and no one correlation matrix of the draws makes up for all of them at once (download ~ upload 0.89 against 0.93,
  measured in the tests' cells of five): there the release keeps less. A measurement that is a step function of
  another needs draws correlated near 1, which three fixed steps reach slowly (docs/configurations.md).
* Small cells. A cell of fewer than ``min_cell_rows`` rows gets independent draws: the plain permutation; it is left
  out of the targets and of the calibration, so no other cell makes up for it. With strong correlations in a cell
  of five rows, the row that gets the largest throughput tends to get the largest volume too, as the session that
  had them.

Every draw is a pure function of (secret key, configuration, period, measurement, release position): the same
inputs give the same bytes on every engine. The work is a few sorts per measurement per round: O(n log n) in a cell.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from dsh_assets.core.release.configs import RankCorrelationShuffle
from dsh_assets.core.release.noise import uniforms
from dsh_assets.core.tables import narrowest_index

POOL_ROWS = 30
"""The pooled correlation counts as this many rows of a group's own (a quality group needs 30 valid records)."""
CALIBRATION_ROUNDS = 3
CALIBRATED_GROUP_ROWS = 500
"""A group of at least this many rows is calibrated on its own; the smaller ones together."""
_LIMIT = 0.999
"""The draws' correlations are kept within (-0.999, 0.999): a correlation of 1 has no Cholesky factor."""
_FLOOR = 1e-6
"""The smallest eigenvalue a projected correlation matrix keeps."""


def rank_correlation_donors(values: Iterable[np.ndarray], cells: np.ndarray, groups: np.ndarray,
                            settings: RankCorrelationShuffle,
                            key_of: Callable[[str, int], np.ndarray]) -> Iterator[np.ndarray]:
    """Per measurement (``values``: its raw values in release order, NaN for null, one at a time), for each release
    position, the position whose value it takes, one measurement at a time. ``cells``: each position's released cell
    (runs of release order); ``groups``: its released (app, radio) group, numbered from 0; ``key_of(purpose, column
    index)``: a draw's secret key. What is held across measurements is narrow: a centred rank (float32) and the
    cell-and-value order (the narrowest integers that number the rows) per value, a draw (float32) per position and measurement."""
    n = len(cells)
    index = narrowest_index(n)
    plain = np.bincount(cells)[cells] < settings.min_cell_rows if n else np.zeros(0, dtype=bool)
    scores, orders = [], []
    for column in values:
        score = _centred_group_ranks(column, cells, groups).astype(np.float32)
        score[plain] = 0.0  # a cell left to the plain permutation is neither aimed at nor made up for elsewhere
        scores.append(score)
        orders.append(_ValueOrder(_value_order(column, cells).astype(index),
                                  np.flatnonzero(~np.isnan(column)).astype(index)))
        del column
    columns = len(scores)
    group_count = int(groups.max()) + 1 if n else 0
    group_rows = np.bincount(groups, minlength=group_count)
    within = _within_sums(scores, groups, group_count)
    target = _targets(within, group_rows) * (1.0 - settings.shrink)
    unit = np.where(group_rows >= CALIBRATED_GROUP_ROWS, np.arange(group_count), group_count)
    normals = [_standard_normals(key_of, k, n) for k in range(columns)]
    correction = np.zeros((group_count + 1, columns, columns))
    for _ in range(CALIBRATION_ROUNDS):
        factors = _draw_factors(_corrected(target, correction[unit]))
        moved = [score[donor] for score, donor in zip(scores, _donors(normals, factors, groups, plain, cells, orders))]
        realised = _within_sums(moved, groups, group_count)
        del moved
        correction += _unit_gap(within, realised, target, unit, group_count)
    yield from _donors(normals, _draw_factors(_corrected(target, correction[unit])), groups, plain, cells, orders)


@dataclass(frozen=True)
class _ValueOrder:
    """One measurement's non-null positions, ordered by (cell, value, position) and by position."""

    by_value: np.ndarray
    held: np.ndarray


def _fisher(correlation: np.ndarray) -> np.ndarray:
    return np.arctanh(np.clip(correlation, -_LIMIT, _LIMIT))


def _corrected(target: np.ndarray, correction: np.ndarray) -> np.ndarray:
    """The draws' correlations: the target moved by the correction in Fisher's z (atanh), where a step near +-1 is
    as large as the realised correlation's slope there is small."""
    return np.tanh(_fisher(target) + correction)


def _centred_group_ranks(values: np.ndarray, cells: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each non-null value's average rank within its group, minus the mean of those ranks in its cell; 0 for null."""
    valid = np.flatnonzero(~np.isnan(values))
    if not len(valid):
        return np.zeros(len(values))
    ranked = valid[_ordered_within(groups[valid], values[valid])]
    group_of, value_of = groups[ranked], values[ranked]
    new_run = np.concatenate([[True], (group_of[1:] != group_of[:-1]) | (value_of[1:] != value_of[:-1])])
    new_group = np.concatenate([[True], group_of[1:] != group_of[:-1]])
    place = np.arange(len(ranked)) - np.maximum.accumulate(np.where(new_group, np.arange(len(ranked)), 0))
    run_start = np.flatnonzero(new_run)
    run_end = np.append(run_start[1:], len(ranked))
    run_id = np.cumsum(new_run) - 1
    first_place = place[run_start]
    average = first_place + (run_end - run_start + 1) / 2.0
    ranks = np.zeros(len(values))
    ranks[ranked] = average[run_id]
    cell_count = np.bincount(cells[valid], minlength=int(cells.max()) + 1 if len(cells) else 0)
    cell_sum = np.bincount(cells[valid], weights=ranks[valid], minlength=len(cell_count))
    mean = cell_sum / np.maximum(cell_count, 1)
    centred = np.zeros(len(values))
    centred[valid] = ranks[valid] - mean[cells[valid]]
    return centred


def _value_order(values: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """The non-null positions ordered by (cell, value, position): a stable sort keeps equal values in position
    order."""
    valid = np.flatnonzero(~np.isnan(values))
    return valid[_ordered_within(cells[valid], values[valid])]


def _within_sums(scores: list[np.ndarray], groups: np.ndarray, group_count: int) -> np.ndarray:
    """Per group, the sums of products of every two measurements' centred ranks (groups x columns x columns)."""
    columns = len(scores)
    sums = np.zeros((group_count, columns, columns))
    for x in range(columns):
        for y in range(x, columns):
            sums[:, x, y] = sums[:, y, x] = np.bincount(groups, weights=scores[x] * scores[y], minlength=group_count)
    return sums


def _correlations(sums: np.ndarray, diagonal: np.ndarray) -> np.ndarray:
    """Correlations from sums of products over the given diagonal (a measurement without spread: 0)."""
    scale = np.sqrt(np.einsum("...ii->...i", diagonal))
    denominator = scale[..., :, None] * scale[..., None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        correlation = np.where(denominator > 0, sums / np.where(denominator > 0, denominator, 1.0), 0.0)
    index = np.arange(sums.shape[-1])
    correlation[..., index, index] = 1.0
    return correlation


def _targets(within: np.ndarray, group_rows: np.ndarray) -> np.ndarray:
    """Per group, its own within-cell correlation blended with the pooled one (see the module)."""
    own = _correlations(within, within)
    pooled_sums = within.sum(axis=0)
    pooled = _correlations(pooled_sums, pooled_sums)
    weight = (group_rows / (group_rows + POOL_ROWS))[:, None, None]
    return weight * own + (1.0 - weight) * pooled[None]


def _unit_gap(within: np.ndarray, realised: np.ndarray, target: np.ndarray, unit: np.ndarray,
              group_count: int) -> np.ndarray:
    """Per calibration unit, the target minus what the draws realised in Fisher's z, each over the unit's pooled sums
    (the diagonal of a permutation's sums is the source's)."""
    units = group_count + 1
    pooled = np.zeros((units, *within.shape[1:]))
    np.add.at(pooled, unit, within)
    achieved = np.zeros_like(pooled)
    np.add.at(achieved, unit, realised)
    rows = np.zeros((units, 1, 1))
    np.add.at(rows, unit, 1.0)
    aimed = np.zeros_like(pooled)
    np.add.at(aimed, unit, target * np.sqrt(np.einsum("gii->gi", within))[:, :, None]
              * np.sqrt(np.einsum("gii->gi", within))[:, None, :])
    gap = _fisher(_correlations(aimed, pooled)) - _fisher(_correlations(achieved, pooled))
    return np.where(rows > 0, gap, 0.0)


def _draw_factors(correlations: np.ndarray) -> np.ndarray:
    """Per group, the lower Cholesky factor of the nearest valid correlation matrix to ``correlations`` (entries
    clipped to (-0.999, 0.999), eigenvalues raised to a floor, the diagonal rescaled to 1)."""
    factors = np.empty_like(correlations)
    index = np.arange(correlations.shape[-1])
    for g, matrix in enumerate(correlations):
        matrix = np.clip((matrix + matrix.T) / 2.0, -_LIMIT, _LIMIT)
        matrix[index, index] = 1.0
        eigenvalues, vectors = np.linalg.eigh(matrix)
        if eigenvalues.min() < _FLOOR:
            matrix = (vectors * np.maximum(eigenvalues, _FLOOR)) @ vectors.T
            scale = np.sqrt(np.diag(matrix))
            matrix = matrix / scale[:, None] / scale[None, :]
        factors[g] = np.linalg.cholesky(matrix)
    return factors


def _standard_normals(key_of: Callable[[str, int], np.ndarray], column: int, n: int) -> np.ndarray:
    """Independent standard normal draws, one per release position (Box and Muller, from two keyed uniforms), kept
    as float32: a draw only orders the positions of a cell (equal draws go by position)."""
    positions = np.arange(n, dtype=np.int64)
    radius = np.sqrt(-2.0 * np.log(uniforms(key_of("copula-radius", column), positions)))
    return (radius * np.cos(2.0 * math.pi * uniforms(key_of("copula-angle", column), positions))).astype(np.float32)


def _donors(normals: list[np.ndarray], factors: np.ndarray, groups: np.ndarray, plain: np.ndarray,
            cells: np.ndarray, orders: list[_ValueOrder]) -> Iterator[np.ndarray]:
    """Per measurement in turn, the donor of each position: the draws of a position's group correlated by its factor
    (a cell of the plain permutation keeps its independent draws), each cell's non-null positions ordered by their
    draw and given the values in ascending order."""
    for m, order in enumerate(orders):
        draw = np.zeros(len(groups))
        for k in range(m + 1):
            draw += factors[groups, m, k] * normals[k]
        draw = np.where(plain, normals[m], draw)
        donor = np.arange(len(groups), dtype=np.int64)
        donor[order.held[_ordered_within(cells[order.held], draw[order.held])]] = order.by_value
        yield donor


_VALUE_BITS = 40
"""A value's place within its run in the sort key: the top 40 bits of its order-preserving 64-bit image (about 9
significant digits); values that share them are put in order exactly."""


def _ordered_within(runs: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The indices of ``values`` ordered by (run, value, index), ``runs`` numbered below 2 ** 24: one stable sort of
    a 64-bit key (the run in the high 24 bits, the value's image in the low 40), then the rare stretches of equal keys
    that hold different values put in exact order."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)
    image = np.where(bits >> np.uint64(63), ~bits, bits | np.uint64(1 << 63))
    key = (runs.astype(np.uint64) << np.uint64(_VALUE_BITS)) | (image >> np.uint64(64 - _VALUE_BITS))
    order = np.argsort(key, kind="stable")
    ranked, held = key[order], values[order]
    same_key = ranked[1:] == ranked[:-1]
    differ = same_key & (held[1:] != held[:-1])
    if differ.any():
        stretch = np.cumsum(np.concatenate([[True], ~same_key]))
        places = np.flatnonzero(np.isin(stretch, stretch[1:][differ]))
        moved = order[places]
        order[places] = moved[np.lexsort((moved, values[moved], stretch[places]))]
    return order
