"""What every attack shares: its result's shape, a sampled rate with its Wilson interval, and risk above a baseline
(as anonymeter does). The intervals themselves are in core/statistics.py, which the DP domain uses too."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from dsh_assets.core.statistics import wilson_interval

FULL, LIGHT = "full", "light"
"""Strengths of an evaluation: full for the candidates the publication tries, whose figures the gate reads; light,
and marked so, for the others, where an attack's cost is a budget or a second release rather than the table."""


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
