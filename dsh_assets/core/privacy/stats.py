"""What every attack shares: its result's shape, the Wilson interval and risk above a baseline (as anonymeter does)."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

Z_95 = 1.959963984540054


class AttackResult(ABC):
    """The result of one attack on one release: counts and rates only, never the evaluator's truth."""

    @abstractmethod
    def figures(self) -> dict:
        """The headline figures, as plain values (what the scorecard and report compare)."""

    @abstractmethod
    def metadata(self) -> dict:
        """Everything recorded for the attack, as plain values: the figures, details and assumptions."""

    def warnings(self) -> list[str]:
        """Reasons the figures are no evidence (e.g. the baseline is as good as the attack); none by default."""
        return []


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


def risk(success_rate: float, baseline_rate: float) -> float:
    """(success - baseline) / (1 - baseline), clipped to [0, 1]; 0 when the baseline is certain."""
    if baseline_rate >= 1.0:
        return 0.0
    return min(1.0, max(0.0, (success_rate - baseline_rate) / (1.0 - baseline_rate)))


@dataclass(frozen=True)
class SampledRate:
    """A sampled success rate with its interval, its baseline and the risk above the baseline."""

    successes: int
    trials: int
    baseline_successes: int
    baseline_trials: int

    @property
    def rate(self) -> float:
        return self.successes / self.trials if self.trials else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.successes, self.trials)

    @property
    def baseline(self) -> float:
        return self.baseline_successes / self.baseline_trials if self.baseline_trials else 0.0

    @property
    def risk(self) -> float:
        return risk(self.rate, self.baseline)

    @property
    def baseline_as_good_as_attack(self) -> bool:
        """anonymeter's warning: the attack does no better than its baseline within the interval."""
        return self.baseline >= self.interval[0]

    def to_dict(self) -> dict:
        low, high = self.interval
        return {"rate": self.rate, "ci95": [low, high], "n": self.trials, "baseline": self.baseline,
                "baseline_n": self.baseline_trials, "risk": self.risk}


def plain_values(values: dict) -> dict:
    """A flat dict (e.g. ``SampledRate.to_dict()``) as plain values: sequences as lists of floats, numpy numbers
    as Python ones, anything else as it is."""
    plain = {}
    for key, value in values.items():
        if isinstance(value, (list, tuple)):
            plain[key] = [float(v) for v in value]
        elif isinstance(value, np.integer):
            plain[key] = int(value)
        elif isinstance(value, np.floating):
            plain[key] = float(value)
        else:
            plain[key] = value
    return plain
