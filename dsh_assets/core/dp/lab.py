"""The DP accuracy lab (seed 002, chapter 4): replicate the mechanism's own theory before trusting it.

``accuracy_lab`` draws the release mechanism - OpenDP's discrete Laplace at scale
sensitivity / epsilon, exactly what ``dp.publish_dp_counts`` uses - many times over the period's
true bounded counts, and for each epsilon of the grid compares the measured mean absolute error
with the discrete Laplace's own theory, E|X| = 2a / (1 - a^2), a = exp(-1 / scale)
= exp(-epsilon / sensitivity). (The seed's 1/epsilon is the CONTINUOUS Laplace's E|X| at
sensitivity 1; the discrete one is close to scale for large scales and below it for small ones.)

The replication check: |measured MAE - theory| <= ``tolerance_se`` standard errors (default 5),
the standard error being that of a mean of n independent |X| under the theory,
sd(|X|) / sqrt(n), with E[X^2] = 2a / (1 - a)^2. Under a correct mechanism the check fails with
probability about 6e-7 per epsilon (the gate refuses a DP release whose lab fails, after its budget is
spent, so a false alarm must be rare); a mechanism at the wrong scale (2x) fails it by hundreds of
standard errors, and one 10% off by about 18 over 34,200 draws at scale 16/3. Small cells (true
count < ``small_cell``) and large cells are reported apart, as the mean relative error
|noisy - true| / max(true, 1), of the raw mechanism output and of the published value (clamped at
0), so that an average cannot hide the small cells.

Lab draws are for evaluation only: nothing is written and nothing is published. Its figures
describe the true counts (the small-cell errors depend on them): they are for the privacy
engineer, not for release, and they spend no budget only because they are never released.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

import numpy as np

from dsh_assets.core.dp.mechanism import (
    discrete_laplace,
    discrete_laplace_abs_sd,
    discrete_laplace_half_width,
    discrete_laplace_mae,
    laplace_scale,
)

EPSILONS = (0.1, 0.5, 1.0, 2.0)
DEFAULT_DRAWS = 20
SMALL_CELL = 20
TOLERANCE_SE = 5.0

Mechanism = Callable[[np.ndarray, float], np.ndarray]
"""(true counts, scale) -> noisy counts; the default is OpenDP's discrete Laplace."""


@dataclass(frozen=True)
class LabRow:
    epsilon: float
    scale: float
    samples: int
    mae: float
    """Measured mean |noisy - true| of the raw mechanism output."""
    theory_mae: float
    """2a / (1 - a^2), a = exp(-1 / scale)."""
    standard_error: float
    """sd(|X|) / sqrt(samples) under the theory."""
    tolerance: float
    """tolerance_se x standard_error."""
    passed: bool
    small_cells: int
    small_mae_published: float | None
    """Mean |published - true| on small cells (clamping at 0 makes it smaller than the raw MAE)."""
    small_rel_error: float | None
    small_rel_error_published: float | None
    large_cells: int
    large_mae_published: float | None
    large_rel_error: float | None
    large_rel_error_published: float | None
    accuracy_95: int
    """a-priori half-width: P(|X| <= accuracy_95) >= 0.95."""
    coverage_95: float
    """Measured share of draws within accuracy_95 (expect >= 0.95)."""


@dataclass(frozen=True)
class LabResult:
    rows: tuple[LabRow, ...]
    sensitivity: int
    cells: int
    draws: int
    small_cell: int
    tolerance_se: float
    mechanism: str

    @property
    def passed(self) -> bool:
        return all(row.passed for row in self.rows)

    def records(self) -> list[dict]:
        return [asdict(row) for row in self.rows]

    def assumptions(self) -> str:
        return (f"{self.draws} independent draws of the mechanism ({self.mechanism}) on {self.cells} true cell "
                f"counts at L1 sensitivity {self.sensitivity}; check: |MAE - 2a/(1-a^2)| <= {self.tolerance_se:g} "
                f"standard errors of the mean under the theory; small cells: true count < {self.small_cell}; "
                f"relative error |noisy - true| / max(true, 1); evaluation only, nothing published")

    def table(self) -> str:
        def pct(value):
            return "   n/a" if value is None else f"{value:6.1%}"
        lines = ["epsilon  scale     MAE  theory  tolerance  check  small rel (pub)     "
                 "large rel (pub)     95% hw  cover"]
        for row in self.rows:
            check = "pass" if row.passed else "FAIL"
            lines.append(
                f"{row.epsilon:7.2f} {row.scale:6.2f} {row.mae:7.3f} {row.theory_mae:7.3f}  +-{row.tolerance:7.3f}  "
                f"{check}   {pct(row.small_rel_error)} ({pct(row.small_rel_error_published)})   "
                f"{pct(row.large_rel_error)} ({pct(row.large_rel_error_published)})  {row.accuracy_95:6d}  "
                f"{row.coverage_95:5.3f}")
        return "\n".join(lines)


def _mean_or_none(values: np.ndarray) -> float | None:
    return float(values.mean()) if len(values) else None


def accuracy_lab(
    true_counts: np.ndarray,
    epsilons: Sequence[float] = EPSILONS,
    sensitivity: int = 1,
    draws: int = DEFAULT_DRAWS,
    small_cell: int = SMALL_CELL,
    tolerance_se: float = TOLERANCE_SE,
    mechanism: Mechanism | None = None,
) -> LabResult:
    """Measured vs theoretical error of the mechanism per epsilon; see the module docstring.

    ``mechanism`` replaces the OpenDP sampler, e.g. with one at a deliberately wrong scale, to
    show that the check catches it. The nominal scale (theory) is always sensitivity / epsilon.
    """
    true = np.asarray(true_counts, dtype=np.int64)
    if true.ndim != 1 or len(true) == 0:
        raise ValueError("true_counts must be a non-empty vector of counts")
    if draws < 1:
        raise ValueError(f"draws must be >= 1, not {draws}")
    draw = mechanism or discrete_laplace
    tiled = np.tile(true, draws)
    divisor = np.maximum(tiled, 1).astype(np.float64)
    small = tiled < small_cell
    rows = []
    for epsilon in epsilons:
        scale = laplace_scale(sensitivity, epsilon)
        noisy = np.asarray(draw(tiled, scale), dtype=np.int64)
        errors = np.abs(noisy - tiled).astype(np.float64)
        published_errors = np.abs(np.maximum(noisy, 0) - tiled).astype(np.float64)
        relative, relative_published = errors / divisor, published_errors / divisor
        theory = discrete_laplace_mae(scale)
        standard_error = discrete_laplace_abs_sd(scale) / math.sqrt(len(errors))
        mae = float(errors.mean())
        half_width = discrete_laplace_half_width(scale)
        rows.append(LabRow(
            epsilon=float(epsilon),
            scale=scale,
            samples=len(errors),
            mae=mae,
            theory_mae=theory,
            standard_error=standard_error,
            tolerance=tolerance_se * standard_error,
            passed=abs(mae - theory) <= tolerance_se * standard_error,
            small_cells=int((true < small_cell).sum()),
            small_mae_published=_mean_or_none(published_errors[small]),
            small_rel_error=_mean_or_none(relative[small]),
            small_rel_error_published=_mean_or_none(relative_published[small]),
            large_cells=int((true >= small_cell).sum()),
            large_mae_published=_mean_or_none(published_errors[~small]),
            large_rel_error=_mean_or_none(relative[~small]),
            large_rel_error_published=_mean_or_none(relative_published[~small]),
            accuracy_95=half_width,
            coverage_95=float((errors <= half_width).mean()),
        ))
    name = "OpenDP discrete Laplace" if mechanism is None else getattr(mechanism, "__name__", "custom mechanism")
    return LabResult(rows=tuple(rows), sensitivity=sensitivity, cells=len(true), draws=draws,
                     small_cell=small_cell, tolerance_se=tolerance_se, mechanism=name)


def seed_lab() -> list[dict]:
    """The seed chapter's lab, statement for statement (random.Random(3), its ``lap``), and its figures.

    Continuous Laplace from Python floats - a teaching replica, never a release mechanism. Each
    row also carries the continuous theory E|X| = 1/epsilon and a 3-standard-error check
    (|Lap(b)| is exponential with mean and sd b).
    """
    r = random.Random(3)
    true = [r.randint(0, 400) for _ in range(100)]

    def lap(b):
        u = r.random() - 0.5
        return -b * math.copysign(1, u) * math.log(1 - 2 * abs(u))

    rows = []
    for eps in [0.1, 0.5, 1.0, 2.0]:
        errs = [abs(lap(1 / eps)) for _ in true for _ in range(20)]
        small = [t for t in true if t < 20]
        rel = sum(abs(lap(1 / eps)) / max(t, 1) for t in small for _ in range(20)) / (20 * len(small))
        mae = sum(errs) / len(errs)
        standard_error = (1 / eps) / math.sqrt(len(errs))
        rows.append({
            "epsilon": eps,
            "mae": mae,
            "theory_mae": 1 / eps,
            "standard_error": standard_error,
            "passed": abs(mae - 1 / eps) <= 3 * standard_error,
            "small_cells": len(small),
            "small_rel_error": rel,
            "line": (f"epsilon {eps:3.1f}  mean abs error {sum(errs)/len(errs):5.2f}  "
                     f"mean relative error on {len(small)} small cells {rel:6.1%}"),
        })
    return rows


# -- the error a planner sees: noise, bounding bias and their total, against the unbounded truth ----

def error_against_truth(
    bounded: np.ndarray,
    unbounded: np.ndarray,
    epsilon: float,
    sensitivity: int,
    draws: int = DEFAULT_DRAWS,
    small_cell: int = SMALL_CELL,
    mechanism: Mechanism | None = None,
) -> dict[str, dict]:
    """Per cell size class, three mean absolute errors of the published count (clamped at 0), per cell:

    * ``noise``: |published - bounded count| (the replication lab's figure: the mechanism alone);
    * ``bias``: bounded count - true distinct subscribers (the contribution bound's undercount, exact);
    * ``total``: |published - true distinct subscribers| (what a planner sees; what the report leads with).

    The size class is the TRUE (unbounded) count: small below ``small_cell``, large otherwise.
    Per cell, total <= bias + noise (the noise sometimes offsets the undercount), with equality where
    the cell has no bias or the noise does not point up past the undercount. Same draws for all three.
    Evaluation only: the figures describe the true counts and are never published.
    """
    bounded, unbounded = np.asarray(bounded, dtype=np.int64), np.asarray(unbounded, dtype=np.int64)
    if bounded.shape != unbounded.shape or (bounded > unbounded).any():
        raise ValueError("bounded counts must be aligned with, and at most, the unbounded ones")
    draw = mechanism or discrete_laplace
    scale = laplace_scale(sensitivity, epsilon)
    published = np.maximum(np.asarray(draw(np.tile(bounded, draws), scale), dtype=np.int64), 0)
    truth, kept = np.tile(unbounded, draws), np.tile(bounded, draws)
    small = truth < small_cell
    errors = {"noise": np.abs(published - kept), "bias": truth - kept, "total": np.abs(published - truth)}
    result = {}
    for name, members in (("small", small), ("large", ~small)):
        result[name] = {key: _mean_or_none(values[members].astype(np.float64)) for key, values in errors.items()}
        result[name]["cells"] = int((unbounded < small_cell).sum() if name == "small" else (unbounded >= small_cell).sum())
    return result
