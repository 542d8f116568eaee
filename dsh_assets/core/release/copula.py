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

import numpy as np

from dsh_assets.core.release.configs import RankCorrelationShuffle
from dsh_assets.core.release.noise import uniforms

POOL_ROWS = 30
"""The pooled correlation counts as this many rows of a group's own (a quality group needs 30 valid records)."""
CALIBRATION_ROUNDS = 3
CALIBRATED_GROUP_ROWS = 500
"""A group of at least this many rows is calibrated on its own; the smaller ones together."""
_LIMIT = 0.999
"""The draws' correlations are kept within (-0.999, 0.999): a correlation of 1 has no Cholesky factor."""
_FLOOR = 1e-6
"""The smallest eigenvalue a projected correlation matrix keeps."""


def rank_correlation_donors(values: Iterable[np.ndarray], columns: int, cells: np.ndarray, groups: np.ndarray,
                            settings: RankCorrelationShuffle,
                            key_of: Callable[[str, int], np.ndarray]) -> Iterator[np.ndarray]:
    """Per measurement (``values``: the raw values of each of ``columns`` measurements in release order, NaN for
    null, one at a time), for each release position, the position whose value it takes, one measurement at a time.
    ``cells``: each position's released cell (runs of release order); ``groups``: its released (app, radio) group,
    numbered from 0; ``key_of(purpose, column index)``: a draw's secret key. What is held across measurements is
    narrow: per value a centred rank (float32), its place in its cell's order of values (int32) and a normal draw
    (float32)."""
    from dsh_assets.core.release import copula_kernels  # numba, imported where it is used (docs/architecture.md)

    n = len(cells)
    plain = np.bincount(cells)[cells] < settings.min_cell_rows if n else np.zeros(0, dtype=bool)
    by_group = np.argsort(groups, kind="stable")
    scores = np.empty((columns, n), dtype=np.float32)
    ranks = np.empty((columns, n), dtype=np.int32)
    for m, column in enumerate(values):
        scores[m] = copula_kernels.centred_group_ranks(column, cells, groups, by_group)
        scores[m][plain] = 0.0  # a cell left to the plain permutation is neither aimed at nor made up for elsewhere
        ranks[m] = copula_kernels.cell_value_ranks(column, cells)
        del column
    del by_group
    group_count = int(groups.max()) + 1 if n else 0
    group_rows = np.bincount(groups, minlength=group_count)
    within = copula_kernels.pair_sums(scores, groups, group_count)
    target = _targets(within, group_rows) * (1.0 - settings.shrink)
    unit = np.where(group_rows >= CALIBRATED_GROUP_ROWS, np.arange(group_count), group_count)
    normals = np.empty((columns, n), dtype=np.float32)
    for k in range(columns):
        normals[k] = _standard_normals(key_of, k, n)
    correction = np.zeros((group_count + 1, columns, columns))
    for _ in range(CALIBRATION_ROUNDS):
        realised = copula_kernels.realised_pair_sums(normals, _draw_factors(_corrected(target, correction[unit])),
                                                     groups, plain, cells, ranks, scores, group_count)
        correction += _unit_gap(within, realised, target, unit, group_count)
    del scores
    factors = _draw_factors(_corrected(target, correction[unit]))
    for m in range(columns):
        yield copula_kernels.donors_of(m, normals, factors, groups, plain, cells, ranks)


def _fisher(correlation: np.ndarray) -> np.ndarray:
    return np.arctanh(np.clip(correlation, -_LIMIT, _LIMIT))


def _corrected(target: np.ndarray, correction: np.ndarray) -> np.ndarray:
    """The draws' correlations: the target moved by the correction in Fisher's z (atanh), where a step near +-1 is
    as large as the realised correlation's slope there is small."""
    return np.tanh(_fisher(target) + correction)


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
