"""The discrete Laplace mechanism: its certified scale, OpenDP's draws, the exact figures of its error, and the
seeded twin the audit draws from."""

import math
from decimal import Decimal, localcontext
from types import SimpleNamespace

import numpy as np
import pytest

from dsh_assets.core.dp import mechanism

# -- the scale ----------------------------------------------------------------------------------

@pytest.mark.parametrize("sensitivity, epsilon", [(1, 1.0), (4, 0.75), (3, 0.3), (4, 1 / 3), (2, 0.1)])
def test_the_scale_is_sensitivity_over_epsilon_and_opendp_certifies_epsilon(sensitivity, epsilon):
    scale = mechanism.laplace_scale(sensitivity, epsilon)
    assert scale == pytest.approx(sensitivity / epsilon, rel=1e-12) and scale >= sensitivity / epsilon
    assert mechanism.opendp_measurement(scale).map(sensitivity) <= epsilon


@pytest.mark.parametrize("sensitivity, epsilon", [(0, 1.0), (1, 0.0), (1, -1.0), (1, math.nan)])
def test_a_scale_needs_a_sensitivity_of_one_or_more_and_a_positive_epsilon(sensitivity, epsilon):
    with pytest.raises(ValueError, match="need sensitivity >= 1 and epsilon > 0"):
        mechanism.laplace_scale(sensitivity, epsilon)


def rounds_up_below(enough: float):
    """A measurement whose privacy map exceeds epsilon = 1 below the scale ``enough`` (as OpenDP's rounding up does
    a few ulps short of sensitivity / epsilon), and the scales it was asked for."""
    tried = []

    def measurement(scale: float):
        tried.append(scale)
        return SimpleNamespace(map=lambda d_in: 1.0 if scale >= enough else math.nextafter(1.0, math.inf))

    return measurement, tried


def test_the_certified_scale_is_raised_ulp_by_ulp_until_the_map_holds_epsilon():
    one_ulp_up = math.nextafter(4.0, math.inf)
    two_ulps_up = math.nextafter(one_ulp_up, math.inf)
    measurement, tried = rounds_up_below(two_ulps_up)
    assert mechanism.certified_scale(4.0, 4, 1.0, measurement) == two_ulps_up
    assert tried == [4.0, one_ulp_up, two_ulps_up]


def test_no_certified_scale_within_64_ulps_is_an_error_not_a_weaker_guarantee():
    measurement, tried = rounds_up_below(math.inf)
    with pytest.raises(RuntimeError, match="no scale near 4.0 gives OpenDP epsilon <= 1.0"):
        mechanism.certified_scale(4.0, 4, 1.0, measurement)
    assert len(tried) == 64


# -- OpenDP's draws -----------------------------------------------------------------------------

def test_noise_is_integer_and_centred():
    noisy = mechanism.discrete_laplace(np.full(20_000, 50), 2.0)
    assert noisy.dtype == np.int64
    assert abs(noisy.mean() - 50) < 0.1
    assert np.mean(np.abs(noisy - 50)) == pytest.approx(mechanism.discrete_laplace_mae(2.0), rel=0.05)


def test_no_values_give_no_noise_and_a_new_array():
    values = np.array([], dtype=np.int64)
    noisy = mechanism.discrete_laplace(values, 2.0)
    assert noisy.dtype == np.int64 and noisy.shape == (0,) and noisy is not values


def _read_only(values: np.ndarray) -> np.ndarray:
    values.flags.writeable = False
    return values


@pytest.mark.parametrize("values", [np.arange(10, dtype=np.int64)[::2], _read_only(np.arange(0, 10, 2, dtype=np.int64)),
                                    np.arange(0, 10, 2, dtype=np.int32)], ids=["strided", "read_only", "int32"])
def test_opendp_is_handed_a_contiguous_writable_vector_of_its_atom_type(values):
    vector = mechanism.opendp_vector(values, np.int64)
    assert vector.dtype == np.int64 and vector.flags.c_contiguous and vector.flags.writeable
    assert vector.tolist() == [0, 2, 4, 6, 8]


# -- the exact figures of its error --------------------------------------------------------------

def test_the_pmf_at_scale_one_by_hand():
    # a = e^-1: P(0) = (1 - a) / (1 + a) = tanh(1/2), and each step away from 0 multiplies by a
    p0 = math.tanh(0.5)
    assert mechanism.discrete_laplace_pmf([0, 1, -1, 3], 1.0) == pytest.approx([p0, p0 / math.e, p0 / math.e,
                                                                              p0 / math.e ** 3])
    assert mechanism.discrete_laplace_pmf(np.arange(-60, 61), 1.0).sum() == pytest.approx(1.0)


def test_the_theory_moments_match_the_distribution():
    for scale in (0.5, 2.0, 8.0):
        a = math.exp(-1 / scale)
        ks = np.arange(-2000, 2001)
        pmf = (1 - a) / (1 + a) * a ** np.abs(ks)
        mae = float((np.abs(ks) * pmf).sum())
        sd = math.sqrt(float((ks ** 2 * pmf).sum()) - mae ** 2)
        assert mechanism.discrete_laplace_mae(scale) == pytest.approx(mae)
        assert mechanism.discrete_laplace_abs_sd(scale) == pytest.approx(sd)


@pytest.mark.parametrize("scale", [0.2, 0.3, 1.0, 2.0, 4.0, 16 / 3, 40.0])
def test_the_95_percent_half_width_is_exact_for_the_discrete_laplace(scale):
    """0.2: P(|X| > 0) = 2a / (1 + a) = 0.013 with a = e^-5, so the half width is 0."""
    import opendp.accuracy

    t = mechanism.discrete_laplace_half_width(scale)
    a = math.exp(-1 / scale)
    pmf = lambda k: (1 - a) / (1 + a) * a ** abs(k)  # noqa: E731
    assert sum(pmf(k) for k in range(-t, t + 1)) >= 0.95
    assert t == 0 or sum(pmf(k) for k in range(-t + 1, t)) < 0.95
    assert t == max(math.ceil(opendp.accuracy.discrete_laplacian_scale_to_accuracy(float(scale), 0.05)) - 1, 0)


def test_a_closed_form_rounded_short_is_corrected_from_the_exact_tail():
    """At this scale P(|X| > 0) = 2a / (1 + a) exceeds 1 - 0.95 by 2e-17 (in 50-digit decimals), so 0 does not
    cover 95%: the closed form's float estimate is 0, the half width is 1."""
    scale = 0.2729584204093975
    with localcontext(prec=50):
        a = (-1 / Decimal(scale)).exp()
        assert 2 * a / (1 + a) > 1 - Decimal(0.95)
    assert mechanism.discrete_laplace_half_width(scale) == 1


# -- the seeded twin ----------------------------------------------------------------------------

@pytest.mark.parametrize("scale", [0.7, 2.0, 5.333])
def test_the_numpy_twin_has_the_discrete_laplace_pmf(scale):
    draws = mechanism.discrete_laplace_numpy(np.random.default_rng(1), scale, 400_000)
    support = np.arange(-12, 13)
    observed = np.array([(draws == k).mean() for k in support])
    assert np.abs(observed - mechanism.discrete_laplace_pmf(support, scale)).max() < 0.003
    assert np.abs(draws).mean() == pytest.approx(mechanism.discrete_laplace_mae(scale), rel=0.01)


def test_the_numpy_twin_matches_opendps_own_draws():
    scale = 2.0
    opendp = mechanism.discrete_laplace(np.zeros(20_000, dtype=np.int64), scale)
    twin = mechanism.discrete_laplace_numpy(np.random.default_rng(2), scale, 20_000)
    support = np.arange(-8, 9)
    frequencies = [np.array([(x == k).mean() for k in support]) for x in (opendp, twin)]
    exact = mechanism.discrete_laplace_pmf(support, scale)
    # total variation over the support: sampling noise at n = 20,000 is about 0.01
    assert 0.5 * np.abs(frequencies[0] - exact).sum() < 0.03
    assert 0.5 * np.abs(frequencies[0] - frequencies[1]).sum() < 0.04
