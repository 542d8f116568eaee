"""Binomial intervals: Wilson's, and the exact Clopper-Pearson interval (from the incomplete beta) the DP audit and
the DP median's replication rely on."""

import math

import pytest

from dsh_assets.core.statistics import beta_quantile, clopper_pearson, regularized_incomplete_beta, wilson_interval


def binomial_cdf(k: int, n: int, p: float) -> float:
    return sum(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(k + 1))


@pytest.mark.parametrize("a, b, x", [(1, 1, 0.3), (2, 5, 0.2), (5, 2, 0.9), (30, 70, 0.33), (0.5, 0.5, 0.5)])
def test_incomplete_beta_matches_closed_forms_and_the_binomial_identity(a, b, x):
    value = regularized_incomplete_beta(a, b, x)
    if (a, b) == (1, 1):
        assert value == pytest.approx(x, abs=1e-14)
    elif (a, b) == (0.5, 0.5):
        assert value == pytest.approx(2 / math.pi * math.asin(math.sqrt(x)), abs=1e-13)
    else:  # integer a, b: I_x(a, b) = P(Bin(a + b - 1, x) >= a)
        assert value == pytest.approx(1 - binomial_cdf(a - 1, a + b - 1, x), abs=1e-12)


def test_clopper_pearson_known_values():
    assert clopper_pearson(0, 10) == (0.0, pytest.approx(1 - 0.025 ** 0.1, abs=1e-12))  # 0.3085
    assert clopper_pearson(10, 10) == (pytest.approx(0.025 ** 0.1, abs=1e-12), 1.0)
    low, high = clopper_pearson(5, 10)
    assert (round(low, 4), round(high, 4)) == (0.1871, 0.8129)
    assert clopper_pearson(0, 0) == (0.0, 1.0)


@pytest.mark.parametrize("k, n", [(3, 40), (17, 200), (0, 50), (199, 200)])
def test_clopper_pearson_bounds_put_alpha_over_two_in_each_tail(k, n):
    low, high = clopper_pearson(k, n)
    if k < n:
        assert binomial_cdf(k, n, high) == pytest.approx(0.025, abs=1e-9)
    if k > 0:
        assert 1 - binomial_cdf(k - 1, n, low) == pytest.approx(0.025, abs=1e-9)


def test_clopper_pearson_on_audit_sized_samples_is_fast_and_sane():
    low, high = clopper_pearson(20_000, 500_000)
    assert low < 0.04 < high and high - low < 0.0012
    assert beta_quantile(0.5, 1, 1) == pytest.approx(0.5, abs=1e-14)


def test_wilson_interval_known_values():
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    low, high = wilson_interval(5, 10)
    assert low == pytest.approx(0.2366, abs=5e-5) and high == pytest.approx(0.7634, abs=5e-5)
    assert wilson_interval(0, 0) == (0.0, 1.0)
