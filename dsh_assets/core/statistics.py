"""Binomial intervals, below every domain that measures a rate: the attacks' Wilson intervals, and the exact
Clopper-Pearson interval the DP audit and the DP median's replication rely on (from the regularized incomplete
beta)."""

from __future__ import annotations

import math

Z_95 = 1.959963984540054


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion; (0, 1) when there are no trials."""
    if trials == 0:
        return (0.0, 1.0)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    # The bounds are exactly 0 at no successes and 1 at all successes; floating point misses them by
    # an ulp (10 of 10 gave 0.9999999999999999), so they are set, not computed, there.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return (low, high)


# -- Clopper-Pearson: the exact binomial interval, from the regularized incomplete beta --------

def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (modified Lentz); converges for x < (a + 1) / (a + b + 2)."""
    tiny, epsilon = 1e-300, 1e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1_000_000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            step = d * c
            h *= step
        if abs(step - 1.0) < epsilon:
            return h
    raise ArithmeticError(f"incomplete beta did not converge for a={a}, b={b}, x={x}")


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) = P(Beta(a, b) <= x), for a, b > 0."""
    if not (a > 0 and b > 0):
        raise ValueError(f"need a, b > 0, not {a}, {b}")
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def beta_quantile(q: float, a: float, b: float) -> float:
    """The x with I_x(a, b) = q, by bisection (I_x is increasing in x) to within 1e-15."""
    low, high = 0.0, 1.0
    while high - low > 1e-15:
        middle = (low + high) / 2.0
        if regularized_incomplete_beta(a, b, middle) < q:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def clopper_pearson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) two-sided interval of a binomial proportion; (0, 1) with no trials.

    low = Beta quantile alpha/2 of (k, n - k + 1), high = Beta quantile 1 - alpha/2 of (k + 1, n - k),
    with alpha = 1 - confidence: P(Bin(n, high) <= k) = alpha/2 = P(Bin(n, low) >= k).
    """
    if not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials, not {successes}, {trials}")
    if trials == 0:
        return (0.0, 1.0)
    alpha = 1.0 - confidence
    low = 0.0 if successes == 0 else beta_quantile(alpha / 2, successes, trials - successes + 1)
    high = 1.0 if successes == trials else beta_quantile(1 - alpha / 2, successes + 1, trials - successes)
    return (low, high)
