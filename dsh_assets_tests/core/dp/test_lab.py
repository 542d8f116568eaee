"""The DP accuracy lab: the replication check, small cells apart, and the seed chapter's own lab."""

import math

import numpy as np
import pytest

from dsh_assets.core.dp import mechanism
from dsh_assets.core.dp.lab import accuracy_lab, seed_lab

# 200 cells: 20 small ones (0..19) and 180 large ones; 50 draws -> 10,000 samples per epsilon.
TRUE = np.arange(0, 400, 2)
SEED_PRINTED = [
    "epsilon 0.1  mean abs error  9.91  mean relative error on 5 small cells  94.1%",
    "epsilon 0.5  mean abs error  1.98  mean relative error on 5 small cells  22.0%",
    "epsilon 1.0  mean abs error  0.98  mean relative error on 5 small cells   9.3%",
    "epsilon 2.0  mean abs error  0.51  mean relative error on 5 small cells   5.0%",
]


def test_the_replication_check_passes_on_the_opendp_mechanism(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = accuracy_lab(TRUE, sensitivity=4, draws=50)
    assert [row.epsilon for row in result.rows] == [0.1, 0.5, 1.0, 2.0]
    assert result.passed, result.table()
    for row in result.rows:
        a = math.exp(-row.epsilon / 4)
        assert row.theory_mae == pytest.approx(2 * a / (1 - a * a), rel=1e-9)  # not 4 / epsilon
        assert row.samples == 10_000 and row.tolerance == pytest.approx(5 * row.standard_error)
        assert (row.small_cells, row.large_cells) == (10, 190)
        assert row.small_rel_error > row.large_rel_error  # reported apart: the average would hide them
        assert row.small_rel_error_published <= row.small_rel_error  # clamping at 0 only helps
        assert row.coverage_95 > 0.93
    assert list(tmp_path.iterdir()) == []  # lab draws are never written anywhere


@pytest.mark.parametrize("factor", [2.0, 0.5, 1.1])
def test_the_replication_check_fails_when_the_scale_is_wrong(factor):
    def wrong_scale(counts, scale):
        return mechanism.discrete_laplace(counts, factor * scale)

    result = accuracy_lab(TRUE, epsilons=(1.0,), sensitivity=4, draws=50, mechanism=wrong_scale)
    assert not result.passed
    [row] = result.rows
    # half or twice the scale: about 50 or 100 standard errors off; 10% more: about 10, where the check allows 5
    assert abs(row.mae - row.theory_mae) > (25 if factor != 1.1 else 5) * row.standard_error
    assert "FAIL" in result.table() and result.mechanism == "wrong_scale"


def test_the_replication_check_fails_for_float_laplace_read_as_the_continuous_theory():
    # A continuous Laplace rounded to integers is not the discrete Laplace: at scale 0.5 its mean
    # absolute error is about 0.43 against 2a/(1-a^2) = 0.28 (some 30 standard errors here).
    rng = np.random.default_rng(0)

    def rounded_float_laplace(counts, scale):
        return np.rint(counts + rng.laplace(0.0, scale, len(counts))).astype(np.int64)

    result = accuracy_lab(TRUE, epsilons=(2.0,), sensitivity=1, draws=50, mechanism=rounded_float_laplace)
    assert not result.passed


def test_the_seed_lab_reproduces_the_printed_figures_exactly():
    rows = seed_lab()
    assert [row["line"] for row in rows] == SEED_PRINTED
    assert [round(row["mae"], 2) for row in rows] == [9.91, 1.98, 0.98, 0.51]
    assert [f"{row['small_rel_error']:.1%}" for row in rows] == ["94.1%", "22.0%", "9.3%", "5.0%"]
    assert all(row["small_cells"] == 5 for row in rows)
    assert all(row["passed"] for row in rows)  # within 3 standard errors of 1/epsilon
