"""An empirical privacy audit of the DP count release: a lower bound on its epsilon from an attack.

Seed 002 closes with "Chapter 5 runs the main study with an independent attack". The DP release
claims epsilon; this module measures how much an attacker can actually tell, and turns that into
a statistical LOWER bound on epsilon. A correct mechanism gives a lower bound at or below the
claim; a broken one (noise at the wrong scale, the contribution bound switched off) exceeds it.

Method (the standard distinguishing audit):

1. Two neighbouring inputs: the period's source D and D' = D without one target subscriber. The
   target is the worst case for the bound: the subscriber with the most cells (ties broken by a
   keyed hash, never by identifier), who reaches the contribution bound whenever anyone does.
2. The release's own bounding (``dp.publish.bounded_cell_counts``, the same keyed-hash choice)
   runs on both inputs. Only cells whose counts differ between D and D' can tell the inputs
   apart: every other cell has the same output distribution under both, independently of the
   differing cells, so it carries no information for any test. The audit therefore draws the
   differing cells only (``target_cells`` of them: the target's bounded cells). Bounding is per
   subscriber (a subscriber's kept cells depend on their own rows only), so the counts of the
   target's cells are computed exactly from the subscribers who share a cell with the target.
3. The mechanism is run ``draws`` times on each input: counts plus discrete Laplace noise at the
   release's scale, clamped at 0, cells below the threshold not published. The draws use
   ``dp.mechanism.discrete_laplace_numpy``, a seeded, vectorised sampler with exactly the
   distribution of OpenDP's (tested against the pmf and against OpenDP's own draws): OpenDP's
   sampler cannot be seeded and costs ~50 us a draw. Audit draws are never published.
4. The attacker knows both neighbouring count vectors (the DP threat model) and uses the
   likelihood-ratio test: K = the number of differing cells whose published value is at least
   the midpoint of its two possible true counts (for the discrete Laplace the likelihood ratio is
   a monotone function of K, so a threshold on K is the Neyman-Pearson best test); it says
   "present" when K >= t. The first half of the draws picks the threshold t with the largest
   lower bound (from Wilson bounds, which are fast); the second half measures that test's false-positive rate (present said on D')
   and false-negative rate (absent said on D), so the choice does not inflate the bound.
5. With Clopper-Pearson 95% upper bounds FPR_u, FNR_u (two-sided intervals, delta = 0):
   epsilon_lower = max(log((1 - FNR_u) / FPR_u), log((1 - FPR_u) / FNR_u)). Any epsilon-DP
   mechanism has 1 - FNR <= e^eps FPR and 1 - FPR <= e^eps FNR, so epsilon_lower exceeds the
   true epsilon with probability at most about 5%.

The same attacker against a count table published WITHOUT noise but with k-suppression (cells
with fewer than k subscribers withheld, the seed's pilot): its output is deterministic, so the
differencing of the two tables tells the target's presence without error, and the lower bound
grows without limit with the draws (log(draws) - 1.3): a hard k threshold is no protection
against differencing. That contrast is why the release adds noise.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa

from dsh_assets.core import duck
from dsh_assets.core.duck import sql_identifier
from dsh_assets.core.dp.mechanism import discrete_laplace_numpy, laplace_scale
from dsh_assets.core.dp.publish import DOMAIN_ROLES, bounded_cell_counts
from dsh_assets.core.files import DigestBook
from dsh_assets.core.statistics import clopper_pearson, wilson_interval
from dsh_assets.core.release.configs import DpCountsConfig
from dsh_assets.core.release.schema import Schema
from dsh_assets.core.release.cells import cell_expressions
from dsh_assets.core.secrets import Secrets

ASSUMPTIONS = (
    "Neighbouring inputs: the period's source with and without one target subscriber, the one with the most "
    "cells (worst case for the contribution bound; ties by keyed hash). The attacker knows both inputs' true "
    "counts (the DP threat model) and sees one published table; the likelihood-ratio threshold test on the "
    "target's cells, threshold picked on half the draws and measured on the other half; Clopper-Pearson 95% "
    "bounds on its false-positive and false-negative rates, delta = 0. Draws: the release's bounding and scale, "
    "a seeded numpy sampler with the discrete Laplace's exact distribution; clamping and threshold applied as "
    "published. Evaluation only: audit draws are never published and spend no budget.")
DEFAULT_DRAWS = 400_000
"""Draws of the mechanism on EACH input (half choose the test, half measure it)."""
CONTROL_DRAWS = 20_000
"""Draws for the controls that differ on every cell of the target (bound off, no noise): their
epsilon is far above the claim, so fewer draws show it (the bound is at most about log(draws / 7.4))."""
CONFIDENCE = 0.95
AUDIT_EPSILONS = (0.5, 1.0, 2.0)
PILOT_K = 5
"""k of the un-noised, k-suppressed contrast table (the row-level configurations' k)."""
_TARGET_PURPOSE = b"dsh-dp-audit-target-v1\x00"
_CHUNK = 50_000
ABSENT = -1
"""The value of a cell the table does not publish (below any published count)."""

Release = Callable[[np.ndarray, np.random.Generator, int], np.ndarray]
"""(true counts of the differing cells, rng, draws) -> published values, shape (draws, cells); ABSENT = withheld."""


def dp_counts_release(scale: float, threshold: int | None = 0) -> Release:
    """The DP release on a count vector: + discrete Laplace(scale), clamped at 0, withheld below ``threshold``."""
    def release(counts: np.ndarray, rng: np.random.Generator, draws: int) -> np.ndarray:
        noisy = np.maximum(counts[None, :] + discrete_laplace_numpy(rng, scale, (draws, len(counts))), 0)
        return np.where(noisy >= (threshold or 0), noisy, ABSENT)
    release.__name__ = f"discrete Laplace, scale {scale:.4g}"
    return release


def k_suppressed_release(k: int = PILOT_K) -> Release:
    """The pilot's table: true counts, no noise, cells with fewer than ``k`` subscribers withheld."""
    def release(counts: np.ndarray, rng: np.random.Generator, draws: int) -> np.ndarray:
        return np.broadcast_to(np.where(counts >= k, counts, ABSENT), (draws, len(counts)))
    release.__name__ = f"no noise, k = {k} suppression"
    return release


@dataclass(frozen=True)
class AuditResult:
    mechanism: str
    epsilon_claimed: float
    epsilon_lower: float
    """95%-confidence lower bound on the mechanism's epsilon (from the rates' Clopper-Pearson upper bounds)."""
    epsilon_lower_ci: tuple[float, float]
    """The chosen test's empirical epsilon from the rates' CP upper bounds (= epsilon_lower) and lower bounds."""
    epsilon_point: float
    """The chosen test's empirical epsilon from the measured rates."""
    draws: int
    """Draws of the mechanism on each input."""
    target_cells: int
    """Cells whose true counts differ between the two inputs (the target's bounded cells)."""
    threshold: int
    false_positive_rate: float
    false_negative_rate: float
    fpr_ci: tuple[float, float]
    fnr_ci: tuple[float, float]
    seed: int

    @property
    def ok(self) -> bool:
        """The claim survives the audit: the lower bound does not exceed the claimed epsilon."""
        return self.epsilon_lower <= self.epsilon_claimed

    def figures(self) -> dict:
        return {"epsilon_claimed": self.epsilon_claimed, "epsilon_lower": self.epsilon_lower,
                "epsilon_lower_ci": list(self.epsilon_lower_ci), "draws": self.draws,
                "target_cells": self.target_cells, "ok": self.ok}

    def record(self) -> dict:
        return {**asdict(self), "epsilon_lower_ci": list(self.epsilon_lower_ci), "fpr_ci": list(self.fpr_ci),
                "fnr_ci": list(self.fnr_ci), "ok": self.ok}


def epsilon_from_rates(fpr: float, fnr: float) -> float:
    """max(log((1 - FNR) / FPR), log((1 - FPR) / FNR)), delta = 0; 0 when neither ratio exceeds 1."""
    def log_ratio(numerator: float, denominator: float) -> float:
        if numerator <= 0:
            return 0.0
        return math.inf if denominator <= 0 else math.log(numerator / denominator)
    return max(0.0, log_ratio(1 - fnr, fpr), log_ratio(1 - fpr, fnr))


def _statistics(with_target: np.ndarray, without_target: np.ndarray, release: Release, draws: int,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """K under each input, chunk by chunk: cells on the side of their midpoint that the target's presence gives."""
    midpoint = (with_target + without_target) / 2.0
    direction = np.sign(with_target - without_target)

    def statistic(counts: np.ndarray) -> np.ndarray:
        out = np.empty(draws, dtype=np.int32)
        for start in range(0, draws, _CHUNK):
            n = min(_CHUNK, draws - start)
            published = release(counts, rng, n).astype(np.float64)
            out[start:start + n] = (direction * (published - midpoint) > 0).sum(axis=1)
        return out

    return statistic(with_target), statistic(without_target)


def audit(with_target, without_target, release: Release, epsilon_claimed: float, draws: int = DEFAULT_DRAWS,
          seed: int = 0, confidence: float = CONFIDENCE) -> AuditResult:
    """Lower bound on the epsilon of ``release`` from the best threshold test between two neighbouring inputs.

    ``with_target`` and ``without_target`` are the true count vectors of the two inputs, aligned by
    cell; only cells where they differ are drawn (see the module docstring).
    """
    with_target, without_target = np.asarray(with_target, np.int64), np.asarray(without_target, np.int64)
    if with_target.shape != without_target.shape:
        raise ValueError("the two inputs' count vectors must be aligned by cell")
    differs = with_target != without_target
    if not differs.any():
        raise ValueError("the two inputs have the same counts: there is nothing to tell apart")
    if draws < 20:
        raise ValueError(f"need at least 20 draws, not {draws}")
    rng = np.random.default_rng(seed)
    present, absent = _statistics(with_target[differs], without_target[differs], release, draws, rng)
    half = draws // 2
    cells = int(differs.sum())

    def bounds(t: int, on_present: np.ndarray, on_absent: np.ndarray):
        false_negatives, false_positives = int((on_present < t).sum()), int((on_absent >= t).sum())
        fnr_ci = clopper_pearson(false_negatives, len(on_present), confidence)
        fpr_ci = clopper_pearson(false_positives, len(on_absent), confidence)
        return false_positives / len(on_absent), false_negatives / len(on_present), fpr_ci, fnr_ci

    def selection_score(t: int) -> float:  # Wilson bounds: fast, and any choice is fair (measured apart)
        fnr_high = wilson_interval(int((present[:half] < t).sum()), half)[1]
        fpr_high = wilson_interval(int((absent[:half] >= t).sum()), half)[1]
        return epsilon_from_rates(fpr_high, fnr_high)

    threshold = max(range(1, cells + 1), key=lambda t: (selection_score(t), -t))
    fpr, fnr, fpr_ci, fnr_ci = bounds(threshold, present[half:], absent[half:])
    return AuditResult(
        mechanism=getattr(release, "__name__", "custom"),
        epsilon_claimed=float(epsilon_claimed),
        epsilon_lower=epsilon_from_rates(fpr_ci[1], fnr_ci[1]),
        epsilon_lower_ci=(epsilon_from_rates(fpr_ci[1], fnr_ci[1]), epsilon_from_rates(fpr_ci[0], fnr_ci[0])),
        epsilon_point=epsilon_from_rates(fpr, fnr),
        draws=draws - half,
        target_cells=cells,
        threshold=threshold,
        false_positive_rate=fpr,
        false_negative_rate=fnr,
        fpr_ci=fpr_ci,
        fnr_ci=fnr_ci,
        seed=seed,
    )


# -- the neighbouring inputs, from the period's source -----------------------------------------

@dataclass(frozen=True)
class Neighbours:
    """True counts of the target's cells with and without the target, aligned by cell (evaluator truth)."""

    bounded_with: np.ndarray
    bounded_without: np.ndarray
    unbounded_with: np.ndarray
    """Distinct subscribers per cell without contribution bounding (the un-noised table; bound switched off)."""
    unbounded_without: np.ndarray
    target_cells_in_source: int
    bound: int

    def describe(self) -> dict:
        return {"target_cells_in_source": self.target_cells_in_source, "bound": self.bound,
                "target_cells_after_bound": int((self.bounded_with != self.bounded_without).sum())}


def _target_key(secrets: Secrets) -> str:
    return hashlib.sha256(_TARGET_PURPOSE + secrets.noise_seed).hexdigest()


def neighbours(source_path: str | os.PathLike, config: DpCountsConfig, schema: Schema, secrets: Secrets,
               workdir: str | os.PathLike) -> Neighbours:
    """The worst-case target's cells, counted by the release's own bounding on D and on D' = D - target.

    1. The target: most distinct cells (ties by a keyed hash). 2. Its kept cells: the release's
    ``bounded_cell_counts`` on the target's rows alone (a subscriber's kept cells depend on their
    own rows only). 3. The bounded counts of those cells on D and D': ``bounded_cell_counts`` on
    the rows of the subscribers in them, with and without the target (the count of a cell depends
    on its own subscribers only, each bounded on their own rows). 4. Without the bound, the
    distinct subscribers of every cell of the target, with and without it. Small temporary Parquet
    files in ``workdir`` are removed; no identifier leaves this function.
    """
    expressions = cell_expressions(config, schema)
    cell = ", ".join(f"{expression} AS c{i}" for i, expression in enumerate(expressions))
    keys = ", ".join(f"c{i}" for i in range(4))
    subscriber = sql_identifier(schema.subscriber)
    workdir = Path(workdir)
    target_path = workdir / "audit_target.parquet"
    with_path, without_path = workdir / "audit_with.parquet", workdir / "audit_without.parquet"
    source = str(source_path)
    scratch = DigestBook()  # the temporary files' bounding, forgotten with them
    try:
        with duck.connect() as connection:
            connection.execute(
                f"CREATE TEMP TABLE pairs AS SELECT DISTINCT {subscriber} AS s, {cell} FROM read_parquet(?)", [source])
            target, target_cells = connection.execute(
                "SELECT s, count(*) AS n FROM pairs GROUP BY s ORDER BY n DESC, sha256(concat(?, s)) LIMIT 1",
                [_target_key(secrets)]).fetchone()
            unbounded = connection.execute(
                f"SELECT count(*), count(*) FILTER (WHERE p.s <> $target) FROM pairs p "
                f"SEMI JOIN (SELECT {keys} FROM pairs WHERE s = $target) t USING ({keys}) GROUP BY {keys} "
                f"ORDER BY {keys}", {"target": target}).fetchall()
            # The columns the bounding reads: of the target's rows, then of the subscribers in its kept cells (D, D').
            bounded = ", ".join(sql_identifier(c) for c in dict.fromkeys([schema.subscriber, *schema.categorical_qis]))
            connection.execute(f"COPY (SELECT {bounded} FROM read_parquet($source) WHERE {subscriber} = $target) "
                               f"TO '{target_path}' (FORMAT parquet)", {"source": source, "target": target})
            own = bounded_cell_counts(target_path, config, schema, secrets, scratch)
            kept = own.cells.filter(pa.array(own.counts > 0)).rename_columns([f"c{i}" for i in range(4)])
            connection.register("kept", kept)
            connection.execute(
                f"COPY (SELECT {bounded} FROM read_parquet($source) WHERE {subscriber} IN "
                f"(SELECT DISTINCT p.s FROM pairs p SEMI JOIN kept USING ({keys}))) TO '{with_path}' (FORMAT parquet)",
                {"source": source})
            connection.execute(f"COPY (SELECT * FROM read_parquet('{with_path}') WHERE {subscriber} <> $target) "
                               f"TO '{without_path}' (FORMAT parquet)", {"target": target})
        domain = {role: kept.column(i).unique().to_pylist() for i, role in enumerate(DOMAIN_ROLES)}
        counted = [bounded_cell_counts(path, config, schema, secrets, scratch, public_domain=domain)
                   for path in (with_path, without_path)]
    finally:
        for path in (target_path, with_path, without_path):
            path.unlink(missing_ok=True)
    # the domain is the cross product of the kept cells' values: keep the kept cells themselves
    wanted = set(zip(*(kept.column(i).to_pylist() for i in range(4))))
    is_kept = np.array([key in wanted for key in zip(*(counted[0].cells.column(i).to_pylist() for i in range(4)))])
    return Neighbours(bounded_with=counted[0].counts[is_kept], bounded_without=counted[1].counts[is_kept],
                      unbounded_with=np.array([n for n, _ in unbounded], dtype=np.int64),
                      unbounded_without=np.array([n for _, n in unbounded], dtype=np.int64),
                      target_cells_in_source=int(target_cells), bound=config.max_cells_per_subscriber)


# -- the audit of a configuration, as the asset runs it --------------------------------------------

@dataclass(frozen=True)
class DpAudit:
    """The audit of the published mechanism, its epsilon grid, the broken controls and the un-noised contrast."""

    published: AuditResult
    grid: tuple[AuditResult, ...]
    quarter_scale: AuditResult
    bound_off: AuditResult
    k_suppressed: AuditResult
    neighbours: dict

    def figures(self) -> dict:
        return {"audit": self.published.figures()}

    def metadata(self) -> dict:
        return {
            "assumptions": ASSUMPTIONS,
            "audit": self.published.record(),
            "epsilon_grid": [result.record() for result in self.grid],
            "broken_quarter_scale": self.quarter_scale.record(),
            "broken_bound_off": self.bound_off.record(),
            "k_suppressed_differencing": self.k_suppressed.record(),
            "target": self.neighbours,
        }

    def table(self) -> str:
        lines = ["mechanism                              claimed  lower   95% interval       cells  ok"]
        for label, result in (("published", self.published), *((f"epsilon {r.epsilon_claimed:g}", r) for r in self.grid),
                              ("broken: quarter scale", self.quarter_scale), ("broken: bound off", self.bound_off),
                              (f"no noise, k = {PILOT_K}", self.k_suppressed)):
            low, high = result.epsilon_lower_ci
            lines.append(f"{label:38} {result.epsilon_claimed:7.3f} {result.epsilon_lower:6.3f}  "
                         f"[{low:6.3f}, {high:6.3f}]  {result.target_cells:5d}  {'yes' if result.ok else 'NO'}")
        return "\n".join(lines)


def audit_configuration(source_path, config: DpCountsConfig, schema: Schema, secrets: Secrets, workdir,
                        draws: int = DEFAULT_DRAWS, epsilons=AUDIT_EPSILONS, seed: int = 0,
                        epsilon: float | None = None) -> DpAudit:
    """Audit ``config``'s count mechanism on the period's source; ``epsilon`` defaults to its counts epsilon."""
    pair = neighbours(source_path, config, schema, secrets, workdir)
    claimed = config.counts_epsilon if epsilon is None else float(epsilon)
    bound = config.max_cells_per_subscriber

    def run(counts, scale, claim, offset, release=None, draws=draws) -> AuditResult:
        release = release or dp_counts_release(scale, config.threshold)
        return audit(counts[0], counts[1], release, claim, draws, seed + offset)

    bounded = (pair.bounded_with, pair.bounded_without)
    scale = laplace_scale(bound, claimed)
    return DpAudit(
        published=run(bounded, scale, claimed, 0),
        grid=tuple(run(bounded, laplace_scale(bound, e), e, 1 + i) for i, e in enumerate(epsilons)),
        quarter_scale=run(bounded, scale / 4, claimed, 101),
        bound_off=run((pair.unbounded_with, pair.unbounded_without), scale, claimed, 102,
                      draws=min(draws, CONTROL_DRAWS)),
        k_suppressed=run((pair.unbounded_with, pair.unbounded_without), None, claimed, 103,
                         k_suppressed_release(PILOT_K), draws=min(draws, CONTROL_DRAWS)),
        neighbours=pair.describe(),
    )
