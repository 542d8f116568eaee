"""The discrete Laplace mechanism (OpenDP) and the exact figures of its error distribution."""

from __future__ import annotations

import functools
import math

import numpy as np

CONFIDENCE = 0.95
MECHANISM = "discrete Laplace: OpenDP make_laplace on vector_domain(atom_domain(T=i64)), l1_distance"


@functools.lru_cache(maxsize=64)
def opendp_measurement(scale: float):
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64"), scale=scale)


def laplace_scale(sensitivity: int, epsilon: float) -> float:
    """sensitivity / epsilon, raised by a few ulps if OpenDP's (rounded-up) map exceeds epsilon."""
    if sensitivity < 1 or not epsilon > 0:
        raise ValueError(f"need sensitivity >= 1 and epsilon > 0, not {sensitivity}, {epsilon}")
    return certified_scale(sensitivity / epsilon, sensitivity, epsilon, opendp_measurement)


def certified_scale(nominal: float, d_in: int, epsilon: float, measurement) -> float:
    """``nominal``, raised by a few ulps until OpenDP's (rounded-up) map of ``measurement(scale)`` is <= epsilon."""
    scale = nominal
    for _ in range(64):
        if measurement(scale).map(d_in) <= epsilon:
            return scale
        scale = math.nextafter(scale, math.inf)
    raise RuntimeError(f"no scale near {nominal} gives OpenDP epsilon <= {epsilon}")


def discrete_laplace(values: np.ndarray, scale: float) -> np.ndarray:
    """values + OpenDP discrete Laplace noise of ``scale`` (one independent draw per entry)."""
    values = np.asarray(values, dtype=np.int64)
    if len(values) == 0:
        return values.copy()
    return np.asarray(opendp_measurement(float(scale))(opendp_vector(values, np.int64)), dtype=np.int64)


def opendp_vector(values, dtype) -> np.ndarray:
    """The values as OpenDP takes a vector fastest: a contiguous, writable array of its atom type, handed over
    as a buffer (a list is checked and converted value by value in Python, about 1.3 us a value here)."""
    return np.require(values, dtype=dtype, requirements=["C_CONTIGUOUS", "WRITEABLE"])


def discrete_laplace_mae(scale: float) -> float:
    """E|X| for the discrete Laplace, P(X = k) proportional to a^|k|, a = exp(-1/scale): 2a / (1 - a^2)."""
    a = math.exp(-1.0 / scale)
    return 2.0 * a / -math.expm1(-2.0 / scale)


def discrete_laplace_abs_sd(scale: float) -> float:
    """Standard deviation of |X|: E[X^2] = 2a / (1 - a)^2, minus (E|X|)^2."""
    a = math.exp(-1.0 / scale)
    second = 2.0 * a / math.expm1(-1.0 / scale) ** 2
    return math.sqrt(max(second - discrete_laplace_mae(scale) ** 2, 0.0))


def _tail(t: int, scale: float) -> float:
    """P(|X| > t) = 2 a^(t+1) / (1 + a), computed in log space."""
    a = math.exp(-1.0 / scale)
    return math.exp(math.log(2.0) - (t + 1) / scale - math.log1p(a))


def discrete_laplace_half_width(scale: float, confidence: float = CONFIDENCE) -> int:
    """The smallest integer t with P(|X| <= t) >= confidence, from the exact distribution."""
    alpha = 1.0 - confidence
    a = math.exp(-1.0 / scale)
    t = max(0, math.ceil(math.log(alpha * (1.0 + a) / 2.0) * -scale) - 1)
    while _tail(t, scale) > alpha:
        t += 1
    while t > 0 and _tail(t - 1, scale) <= alpha:
        t -= 1
    return t


def discrete_laplace_pmf(k, scale: float):
    """P(X = k) = (1 - a) / (1 + a) a^|k|, a = exp(-1 / scale): the distribution OpenDP samples exactly."""
    a = math.exp(-1.0 / scale)
    return -math.expm1(-1.0 / scale) / (1.0 + a) * np.exp(-np.abs(np.asarray(k, dtype=np.float64)) / scale)


def discrete_laplace_numpy(rng: np.random.Generator, scale: float, shape) -> np.ndarray:
    """Seeded twin of OpenDP's discrete Laplace, for EVALUATION draws only (the audit): never publish these.

    X = G1 - G2 with G1, G2 independent geometric on {0, 1, ...}, P(G = k) = (1 - a) a^k: then
    P(X = k) = sum_j (1 - a)^2 a^j a^(j + |k|) = (1 - a) / (1 + a) a^|k|, the same distribution as
    OpenDP's ``make_laplace`` on integers (``discrete_laplace_pmf``). numpy's geometric sampler
    uses floating point, which is why this twin is for measuring the mechanism, never for
    releasing: it is fast, vectorised and reproducible from a seed, OpenDP's is exact and unseeded.
    """
    p = -math.expm1(-1.0 / scale)
    return (rng.geometric(p, shape) - rng.geometric(p, shape)).astype(np.int64)
