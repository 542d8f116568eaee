"""Elina's Q1 from the DP release: DP medians of 5G radio latency for Gaming and Streaming (OpenDP).

Q1 asks where to focus, gaming or streaming: the app whose 5G rows have the higher median radio
latency is the worse served. The DP release answers it from two medians drawn by OpenDP's
``make_private_quantile`` (alpha 0.5): the quantile score of every candidate of a PUBLIC grid
(``CANDIDATES``: 0 to 1,000 ms by 1 ms, fixed before seeing any data) and report-noisy-max over
the scores; the release is always a candidate. The score of candidate c on n values is
|d #(x < c) - (d/2) (n - #(x = c))| with d the denominator of alpha as a fraction (2 for the
median), so a score gap of g is a rank error of g/d values; OpenDP draws Gumbel noise of scale
``scale`` x d on the scores (``score_denominator`` reads d off OpenDP's own scorer).

Privacy unit: the subscriber. Each subscriber contributes at most ``max_rows`` (default 1) of
their 5G rows to each app's vector (the smallest keyed hash of (seed, subscriber, row id)), so
adding or removing a subscriber changes each vector by at most max_rows (symmetric distance).
A subscriber may use both apps, so the two medians compose sequentially: each gets half of
``q1_epsilon``, at the noise scale for which OpenDP's own privacy map certifies it. The median is
of these bounded rows, not of all rows (the base answer's): the same question, asked of one
(or max_rows) row per subscriber.

Accuracy stated before the data (union bound over the candidates; a difference of two Gumbels
exceeds g with probability <= exp(-g / (scale x d))): with probability >= 1 - beta the chosen
candidate's score is within t = scale x d x ln((|C| - 1) / beta) of the best candidate's, i.e.
its rank is within scale x ln((|C| - 1) / beta) of the median's. The lab (``median_lab``) replicates this on the period's true bounded values before the
answer is used: over many draws, the share of draws within t must not be significantly below
1 - beta (Clopper-Pearson). Lab draws are never published.

Published once per period through the ledger (``publish_dp_q1``, key ``<config>.q1``), like the
count tables.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import os
from dataclasses import asdict, dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa

from dsh_assets.core import duck
from dsh_assets.core.dp.ledger import Ledger
from dsh_assets.core.dp.mechanism import certified_scale, opendp_vector
from dsh_assets.core.dp.publish import FIVE_G, DpOutcome, publish_once, bound_key
from dsh_assets.core.files import DigestBook
from dsh_assets.core.statistics import clopper_pearson
from dsh_assets.core.release.configs import ConfigError, DpCountsConfig
from dsh_assets.core.release.schema import ROW_ID, Schema
from dsh_assets.core.secrets import Secrets

GAMING, STREAMING = "Gaming", "Streaming"
APPS = (GAMING, STREAMING)
CANDIDATES = tuple(float(ms) for ms in range(0, 1001))
"""The public candidate grid of radio latencies, ms."""
BETA = 0.05
LAB_DRAWS = 100
SAME_ANSWER_DRAWS = 20
MECHANISM = ("OpenDP make_private_quantile (alpha 0.5, quantile score over a public candidate grid, "
             "report-noisy-max) on vector_domain(atom_domain(T=float)), symmetric_distance, max_divergence")
_Q1_PURPOSE = b"dsh-dp-q1-bound-v1\x00"

Median = Callable[[Sequence[float], float, int], float]
"""(values, epsilon, max_rows) -> one private median; the default is OpenDP's."""


# -- the bounded inputs ---------------------------------------------------------------------------

def latency_values(source_path: str | os.PathLike, schema: Schema, secrets: Secrets, max_rows: int = 1,
                   radio: str = FIVE_G, apps: Sequence[str] = APPS) -> dict[str, np.ndarray]:
    """Per app: the radio latencies of at most ``max_rows`` rows per subscriber on ``radio`` (evaluation truth)."""
    with duck.connect() as connection:
        rows = connection.execute(
            f'SELECT app, latency FROM (SELECT "{schema.app}" AS app, "{schema.latency}" AS latency, '
            f'row_number() OVER (PARTITION BY "{schema.subscriber}", "{schema.app}" ORDER BY '
            f'sha256(concat_ws(chr(31), ?, "{schema.subscriber}", "{ROW_ID}"::VARCHAR)), "{ROW_ID}") AS r '
            f'FROM read_parquet(?) WHERE "{schema.radio}" = ? AND "{schema.app}" IN (SELECT unnest(?)) '
            f'AND "{schema.latency}" IS NOT NULL) WHERE r <= ? ORDER BY app, latency',
            [bound_key(secrets, _Q1_PURPOSE), str(source_path), radio, list(apps), max_rows]).fetchall()
    values = {app: [] for app in apps}
    for app, latency in rows:
        values[app].append(float(latency))
    return {app: np.asarray(v, dtype=np.float64) for app, v in values.items()}


# -- the mechanism --------------------------------------------------------------------------------

@functools.lru_cache(maxsize=32)
def _measurement(scale: float):
    import opendp.prelude as dp

    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    return dp.m.make_private_quantile(domain, dp.symmetric_distance(), dp.max_divergence(), list(CANDIDATES),
                                      0.5, scale)


@functools.lru_cache(maxsize=8)
def _scorer():
    import opendp.prelude as dp

    dp.enable_features("contrib")
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    return dp.t.make_quantile_score_candidates(domain, dp.symmetric_distance(), list(CANDIDATES), 0.5)


def median_scale(epsilon: float, max_rows: int) -> float:
    """The noise scale at which OpenDP certifies the median at ``epsilon`` for ``max_rows`` rows per subscriber."""
    if not epsilon > 0 or max_rows < 1:
        raise ValueError(f"need epsilon > 0 and max_rows >= 1, not {epsilon}, {max_rows}")
    return certified_scale(max_rows / epsilon, max_rows, epsilon, _measurement)


def opendp_median(values: Sequence[float], epsilon: float, max_rows: int) -> float:
    """One private median (spends ``epsilon`` if published)."""
    return float(_measurement(median_scale(epsilon, max_rows))(opendp_vector(values, np.float64)))


def scores(values: Sequence[float]) -> np.ndarray:
    """OpenDP's quantile score of every candidate (lower is better)."""
    return np.asarray(_scorer()(opendp_vector(values, np.float64)), dtype=np.float64)


@functools.lru_cache(maxsize=1)
def score_denominator() -> int:
    """d: one value below every candidate scores |d - d/2| = d/2 everywhere, one above scores d/2."""
    below, above = scores([CANDIDATES[0] - 1.0]), scores([CANDIDATES[-1] + 1.0])
    return int(below[0] + above[0])


def stated_score_accuracy(scale: float, beta: float = BETA, candidates: int = len(CANDIDATES)) -> float:
    """t with P(score gap of the release > t) <= beta: (scale x d) x ln((|C| - 1) / beta), the union bound
    over the other candidates of P(Gumbel difference > t) <= exp(-t / (scale x d))."""
    return scale * score_denominator() * math.log((candidates - 1) / beta)


def focus(gaming_ms: float, streaming_ms: float) -> str:
    return GAMING if gaming_ms > streaming_ms else STREAMING if streaming_ms > gaming_ms else "tie"


# -- the lab: replicate the stated accuracy before the answer is used --------------------------------

@dataclass(frozen=True)
class MedianLabRow:
    app: str
    values: int
    epsilon: float
    scale: float
    stated_score_accuracy: float
    stated_rank_accuracy: float
    """Stated: with probability >= 1 - beta the release's rank is within this of the median's."""
    stated_ms_accuracy: float
    """The widest latency distance, from the true bounded median, of a candidate within the stated score
    accuracy (depends on the data: evaluation only)."""
    draws: int
    within: int
    coverage: float
    coverage_ci: tuple[float, float]
    mean_abs_error_ms: float
    """Mean |release - true median of the bounded values| over the draws."""
    true_median_ms: float
    passed: bool


@dataclass(frozen=True)
class MedianLab:
    rows: tuple[MedianLabRow, ...]
    beta: float
    same_answer_rate: float | None
    """Share of the lab's paired draws whose focus equals ``base_focus`` (None without a base)."""
    same_answer_draws: int
    base_focus: str | None

    @property
    def passed(self) -> bool:
        return all(row.passed for row in self.rows)

    def records(self) -> list[dict]:
        return [{**asdict(row), "coverage_ci": list(row.coverage_ci)} for row in self.rows]

    def table(self) -> str:
        lines = ["app        values  epsilon  scale  stated rank  stated ms  coverage  mean |err| ms  check"]
        for r in self.rows:
            lines.append(f"{r.app:10} {r.values:6d}  {r.epsilon:7.3f} {r.scale:6.1f}  {r.stated_rank_accuracy:11.1f} "
                         f"{r.stated_ms_accuracy:9.1f}  {r.coverage:8.3f}  {r.mean_abs_error_ms:13.2f}  "
                         f"{'pass' if r.passed else 'FAIL'}")
        return "\n".join(lines)


def median_lab(values: Mapping[str, np.ndarray], epsilon: float, max_rows: int = 1, draws: int = LAB_DRAWS,
               beta: float = BETA, base_focus: str | None = None, mechanism: Median | None = None,
               same_answer_draws: int = SAME_ANSWER_DRAWS) -> MedianLab:
    """``draws`` private medians per app at ``epsilon`` each; coverage of the stated accuracy, and Q1's stability.

    Passes when the Clopper-Pearson 95% upper bound of the coverage is at least 1 - beta (the
    share within the stated accuracy is not significantly below what is stated). The first
    ``same_answer_draws`` paired draws (Gaming, Streaming) give how often Q1 is ``base_focus``.
    """
    draw = mechanism or opendp_median
    scale = median_scale(epsilon, max_rows)
    t = stated_score_accuracy(scale, beta)
    rows, drawn = [], {}
    for app in APPS:
        x = np.asarray(values[app], dtype=np.float64)
        if len(x) == 0:
            raise ValueError(f"no {app} values: the median lab needs data")
        score = scores(x)
        best = score.min()
        grid = np.asarray(CANDIDATES)
        truth = float(np.median(x))
        near = grid[score <= best + t]
        releases = np.array([draw(x, epsilon, max_rows) for _ in range(draws)])
        drawn[app] = releases
        gaps = score[np.searchsorted(grid, releases)] - best
        within = int((gaps <= t).sum())
        ci = clopper_pearson(within, draws)
        rows.append(MedianLabRow(
            app=app, values=len(x), epsilon=epsilon, scale=scale, stated_score_accuracy=t,
            stated_rank_accuracy=t / score_denominator(), stated_ms_accuracy=float(np.abs(near - truth).max()), draws=draws,
            within=within, coverage=within / draws, coverage_ci=ci,
            mean_abs_error_ms=float(np.abs(releases - truth).mean()), true_median_ms=truth,
            passed=ci[1] >= 1 - beta))
    paired = min(same_answer_draws, draws)
    rate = None
    if base_focus is not None and paired:
        answers = [focus(g, s) for g, s in zip(drawn[GAMING][:paired], drawn[STREAMING][:paired])]
        rate = sum(a == base_focus for a in answers) / paired
    return MedianLab(rows=tuple(rows), beta=beta, same_answer_rate=rate, same_answer_draws=paired,
                     base_focus=base_focus)


# -- publication, once per period -----------------------------------------------------------------

def q1_table(values: Mapping[str, np.ndarray], config: DpCountsConfig) -> tuple[pa.Table, dict]:
    """Draw both medians (spends ``config.q1_epsilon``: half each) and the table's public metadata."""
    per_median = config.q1_epsilon / len(APPS)
    rows = config.q1_max_rows_per_subscriber
    medians = [opendp_median(values[app], per_median, rows) for app in APPS]
    scale = median_scale(per_median, rows)
    table = pa.table({"app": pa.array(APPS, pa.string()), "dp_median_radio_latency_ms": pa.array(medians, pa.float64())})
    public = {
        "table": "dp_q1_latency_medians", "config_id": config.id, "definition_hash": config.definition_hash(),
        "mechanism": MECHANISM, "privacy_unit": "subscriber", "epsilon": config.q1_epsilon,
        "epsilon_per_median": per_median, "composition": "sequential (a subscriber may use both apps)",
        "max_rows_per_subscriber": rows, "radio": FIVE_G, "scale": scale,
        "candidates": f"{CANDIDATES[0]:g} to {CANDIDATES[-1]:g} ms by 1 ms (public grid)",
        "accuracy_95_rank": stated_score_accuracy(scale) / score_denominator(),
        "accuracy_note": ("with probability >= 0.95 each released median's rank among the app's bounded values is "
                          "within accuracy_95_rank of the middle"),
        "focus": focus(*medians),
    }
    return table, public


def publish_dp_q1(source_path, out_path, config: DpCountsConfig, schema: Schema, secrets: Secrets, ledger: Ledger,
                  period: str, *, republish: bool = False, now: dt.datetime | None = None,
                  book: DigestBook) -> DpOutcome:
    """Elina's Q1 table (app, DP median), once per period: debits ``config.q1_epsilon`` under ``<id>.q1``."""
    if not config.q1_epsilon > 0:
        raise ConfigError(f"DP configuration {config.id!r}: q1_epsilon is 0, so it has no Q1 table")
    return publish_once(
        ledger=ledger, key=config.q1_ledger_key, period=period, epsilon=config.q1_epsilon, out_path=out_path,
        now=now, republish=republish, definition_hash=config.definition_hash(),
        prepare=lambda: latency_values(source_path, schema, secrets, config.q1_max_rows_per_subscriber),
        draw=lambda values: q1_table(values, config),
        bounding_of=lambda values: {f"{app.lower()}_values": int(len(v)) for app, v in values.items()}, book=book,
    )
