"""The copula shuffle's compiled loops by hand: exact orders within a cell and a group, average ranks, and a round's
sums the same as those of the donors it hands out."""

import numpy as np

from dsh_assets.core.release import copula_kernels


def test_a_cells_values_are_ranked_by_exact_value_then_position():
    """Cells [0, 4) and [4, 6); 1 and 1 + 1e-12 differ only far below a float32's digits, -0.0 sorts just below
    0.0, equal values go by position, a null has no rank."""
    values = np.array([1.0 + 1e-12, 1.0, 1.0, np.nan, 0.0, -0.0])
    cells = np.array([0, 0, 0, 0, 1, 1], dtype=np.int32)
    assert copula_kernels.cell_value_ranks(values, cells).tolist() == [2, 0, 1, -1, 1, 0]


def test_packed_order_restores_exact_order_below_the_packed_bits():
    """With 6 keys the index takes the low 3 bits: keys 8 and 9 share their high bits and 9 < 8 + 1 must still
    come after 8 even though its index is lower; equal keys go by index."""
    keys = np.array([9, 8, 16, 8, 3, 1], dtype=np.uint64)
    assert copula_kernels._packed_order(keys).tolist() == [5, 4, 1, 3, 0, 2]


def test_centred_group_ranks_by_hand():
    """Group ranks of 1, 3, 2, 5, 5 are 1, 3, 2, 4.5, 4.5 (ties at their average); centred in their cells (means 2
    and 4.5): -1, 1, 0 and 0, 0; a null scores 0."""
    values = np.array([1.0, 3.0, 2.0, np.nan, 5.0, 5.0])
    cells, groups = np.array([0, 0, 0, 1, 1, 1]), np.zeros(6, dtype=np.int64)
    centred = copula_kernels.centred_group_ranks(values, cells, groups, np.arange(6))
    assert centred.tolist() == [-1.0, 1.0, 0.0, 0.0, 0.0, 0.0]


def test_a_rounds_sums_are_those_of_the_donors_it_hands_out():
    """The fused pass of a calibration round and the final donors are one permutation: the round's sums of products
    equal those of the scores moved by each measurement's donors."""
    rng = np.random.default_rng(11)
    cells = np.repeat(np.arange(60), rng.integers(1, 50, size=60)).astype(np.int32)
    n, columns = len(cells), 4
    groups = (cells % 3).astype(np.int16)
    values = rng.lognormal(size=(columns, n))
    values[rng.random((columns, n)) < 0.1] = np.nan
    ranks = np.stack([copula_kernels.cell_value_ranks(v, cells) for v in values])
    scores = rng.standard_normal((columns, n)).astype(np.float32)
    normals = rng.standard_normal((columns, n)).astype(np.float32)
    factors = np.linalg.cholesky(np.full((3, columns, columns), 0.5) + 0.5 * np.eye(columns))
    plain = cells < 5
    realised = copula_kernels.realised_pair_sums(normals, factors, groups, plain, cells, ranks, scores, 3)
    moved = np.stack([scores[m][copula_kernels.donors_of(m, normals, factors, groups, plain, cells, ranks)]
                      for m in range(columns)])
    assert np.array_equal(realised, copula_kernels.pair_sums(moved, groups, 3))
    for m in range(columns):  # each cell keeps its values: a donor lies in its own cell, a null keeps its own
        donors = copula_kernels.donors_of(m, normals, factors, groups, plain, cells, ranks)
        assert np.array_equal(cells[donors], cells)
        assert np.array_equal(np.isnan(values[m][donors]), np.isnan(values[m]))
