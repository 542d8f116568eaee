"""The registry of figures: each figure and each evidence asset declared once, read everywhere else.

The scorecard's columns, the report's labels, the `dsh run` summary, the asset descriptions and
the grouping of recorded figures into `privacy` / `utility` / `answers` / `dp` / `budget` all
derive from the declarations below. A new figure is one line here plus the code that computes it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from dsh_assets.core.release.configs import DP_COUNTS, DP_SYNTHETIC
from dsh_assets.core.release.configs import ROW_RELEASE as ROWS

PRIVACY, UTILITY, ANSWERS, DP, BUDGET = "privacy", "utility", "answers", "dp", "budget"


@dataclass(frozen=True)
class EvidenceAsset:
    """An asset whose `figures` metadata feeds one family of a configuration's evidence."""

    name: str
    family: str
    release_kind: str
    """"rows" (partitions of `released`), "dp_counts" (partitions of `dp_release`), "" (period partitions)."""
    description: str


@dataclass(frozen=True)
class Figure:
    key: str
    """The figure's key in its asset's `figures` and in `dsh run --json`."""
    label: str
    family: str
    asset: str
    """The asset that records it."""
    unit: str
    explains: str = ""
    """One line of plain words for the report."""
    headline: str | None = None
    """The key whose value counts toward headline risk (the figure itself, or its risk above baseline)."""
    scorecard: bool = True


RELEASE_ASSET = {ROWS: "released", DP_COUNTS: "dp_release", DP_SYNTHETIC: "dp_synthetic_release"}
"""The asset that holds a release of each kind (its metadata: checksums, counts, provenance)."""
_PUBLISHED_AS = {DP_SYNTHETIC: ROWS}


def published_as(kind: str) -> str:
    """The kind whose gate judges a release and as which it is published: a DP synthetic table is a row-level table
    (the row-level gate, on the same figures; the period's row-level release); every other kind is its own."""
    return _PUBLISHED_AS.get(kind, kind)

EVIDENCE_ASSETS = (
    EvidenceAsset("singling_out", PRIVACY, ROWS,
                  "Share of subscribers with a released row alone in its cell of released quasi-identifiers (exact)."),
    EvidenceAsset("numeric_fingerprint", PRIVACY, ROWS,
                  "1,500 sampled raw rows: categorical fields plus 14 measurements to +-1% - unique and correct "
                  "matches."),
    EvidenceAsset("linkage", PRIVACY, ROWS,
                  "500 targets, one known observation; and alias chaining over three observations where an alias "
                  "is released."),
    EvidenceAsset("cross_release_linkage", PRIVACY, ROWS,
                  "Rows and aliases relinked between two independent releases of the same source, and across "
                  "periods."),
    EvidenceAsset("informed_match", PRIVACY, ROWS,
                  "An attacker who knows the mechanism and a few measurements of a session ranks the rows of its "
                  "released cell by their likelihood: per knowledge set, the share of the session's other values "
                  "it finds (sampled released sessions, with a random-pick baseline)."),
    EvidenceAsset("anonymeter", PRIVACY, ROWS,
                  "The peer library anonymeter, run unmodified on an evaluation release made without a held-out "
                  "tenth of the subscribers (the control): singling out, linkability, and inference of each "
                  "measurement the attacker does not know."),
    EvidenceAsset("inference", PRIVACY, ROWS,
                  "Share of subscribers whose app is inferable (>= 90% of their quasi-identifier class) and correct "
                  "(exact)."),
    EvidenceAsset("quality_groups", UTILITY, ROWS,
                  "App x radio x measurement cells (>= 30 valid source records): p10/p50/p90 and tail shares, source "
                  "vs release; lost or inexpressible cells are unavailable, never zero."),
    EvidenceAsset("elina_answers", ANSWERS, ROWS,
                  "Elina's three questions (gaming or streaming; apps to prioritise; overloaded stations) answered "
                  "from the base data and from the release, with same_answer."),
    EvidenceAsset("dp_release", DP, DP_COUNTS,
                  "The differentially private count table of one DP configuration for one period, published once "
                  "through the privacy-budget ledger."),
    EvidenceAsset("dp_accuracy_lab", DP, DP_COUNTS,
                  "Replication before trust (seed 002): repeated draws of the DP mechanism on the period's true "
                  "bounded counts; measured MAE vs the discrete Laplace's theory per epsilon, small and large cells "
                  "apart, and the seed's own continuous-Laplace lab. Evaluation only: never published, spends no "
                  "budget."),
    EvidenceAsset("dp_elina_answers", ANSWERS, DP_COUNTS,
                  "Elina's questions from the DP release: Q1 from its DP latency medians (with how often the answer "
                  "is the same over repeated draws), Q2 from its own slow-download table; Q3 needs stations it does "
                  "not hold."),
    EvidenceAsset("dp_privacy_audit", DP, DP_COUNTS,
                  "An independent attack on the DP release: the best threshold test between the period's source "
                  "with and without a worst-case subscriber, over many draws of the release's own mechanism; a "
                  "Clopper-Pearson lower bound on epsilon, beside the claim, two broken mechanisms and an un-noised "
                  "k-suppressed table."),
    EvidenceAsset("dp_synthetic_release", DP, DP_SYNTHETIC,
                  "A differentially private synthetic table of one dp_synthetic configuration for one period: every "
                  "row drawn from a model fitted to noisy marginals (core/dp/synthetic.py), drawn once through its "
                  "own slice of the privacy-budget ledger."),
    EvidenceAsset("dp_synthetic_privacy", PRIVACY, DP_SYNTHETIC,
                  "anonymeter's three tests on a synthetic table drawn from half of the subscribers, against the "
                  "other half (the control); the attacks that look for a session's own row score 0 by construction, "
                  "for no synthetic row is a session's."),
    EvidenceAsset("dp_synthetic_quality_groups", UTILITY, DP_SYNTHETIC,
                  "The quality groups of the synthetic table against the source, as for every row-level release."),
    EvidenceAsset("dp_synthetic_elina_answers", ANSWERS, DP_SYNTHETIC,
                  "Elina's three questions from the synthetic table, as for every row-level release."),
    EvidenceAsset("dp_q1_median", DP, DP_COUNTS,
                  "Elina's Q1 table: DP medians of 5G radio latency for Gaming and Streaming (OpenDP), bounded per "
                  "subscriber, replicated against their stated accuracy first, then published once through the "
                  "ledger."),
)
PERIOD_ASSETS = (
    EvidenceAsset("release_pairs", PRIVACY, "",
                  "For each row-level release published in the period (A) and each other candidate (B), what an "
                  "attacker holding both gets: rows of B relinked to A, and the singling-out rate of B's rows "
                  "carrying their twins' quasi-identifiers in A. The evidence a further publication of the period "
                  "must pass; with nothing published yet, there is no pair to compute, and no candidate is read."),
)
"""Evidence over all of a period's candidates at once (period partitions, not configuration x period)."""
ASSETS_BY_NAME = {asset.name: asset for asset in (*EVIDENCE_ASSETS, *PERIOD_ASSETS)}
ATTACK_ASSETS = tuple(asset.name for asset in EVIDENCE_ASSETS if asset.family == PRIVACY and asset.release_kind == ROWS)

FIGURES = (
    Figure("singling_out_rate", "singling out", PRIVACY, "singling_out", "share of subscribers",
           "Singling out: subscribers with a released row alone in its cell (exact)",
           headline="singling_out_rate"),
    Figure("fingerprint_correct", "numeric fingerprint", PRIVACY, "numeric_fingerprint", "share of sampled rows",
           "Numeric fingerprint: unique and correct match from categorical fields + measurements to +-1%",
           headline="fingerprint_correct_risk"),
    Figure("linkage_correct", "linkage", PRIVACY, "linkage", "share of sampled targets",
           "Linkage: one known observation links to the subscriber", headline="linkage_correct_risk"),
    Figure("alias_chain_correct", "alias chaining", PRIVACY, "linkage", "share of sampled targets",
           "Alias chaining: three known observations narrow to the subscriber's alias",
           headline="alias_chain_correct_risk"),
    Figure("cross_release_relinked", "re-release", PRIVACY, "cross_release_linkage", "share of sampled rows",
           "Re-release: rows relinked between this release and a re-release of it with fresh noise and order "
           "(what a second publication of the same configuration would give away; the ledger refuses one, so it "
           "is not part of the headline risk of a period's only publication)"),
    Figure("inference_rate", "inference", PRIVACY, "inference", "share of subscribers",
           "Inference: app inferable (>= 90% of the class) and correct (exact)", headline="inference_rate"),
    Figure("informed_match_risk", "informed match", PRIVACY, "informed_match", "risk above a random pick",
           "Informed match: an attacker who knows the mechanism and a few measurements of a session picks the most "
           "likely row of its cell (the worst knowledge set's success above a random pick)",
           headline="informed_match_risk"),
    Figure("anonymeter_inference_risk", "anonymeter inference", PRIVACY, "anonymeter", "risk above the control",
           "anonymeter's inference: the cell and a few measurements give away another (the worst secret's risk)",
           headline="anonymeter_inference_risk"),
    Figure("anonymeter_linkability_risk", "anonymeter linkability", PRIVACY, "anonymeter", "risk above the control",
           "anonymeter's linkability: two partial records of a session linked through the release",
           headline="anonymeter_linkability_risk"),
    Figure("anonymeter_singling_out_risk", "anonymeter singling out", PRIVACY, "anonymeter", "risk above the control",
           "anonymeter's singling out: predicates built from the release that isolate one source row (the worse of "
           "its two modes, univariate and multivariate)",
           headline="anonymeter_singling_out_risk"),
    *(Figure(f"anonymeter_{test}_risk_upper", f"anonymeter {label}, upper end", PRIVACY, "anonymeter",
             "risk above the control", f"The upper end of the 95% interval of anonymeter's {label} risk{which}: "
             f"what the gate reads", scorecard=False)
      for test, label, which in (("singling_out", "singling out", ", the larger of its two modes"),
                                 ("linkability", "linkability", ""),
                                 ("inference", "inference", ", the largest over the secrets"))),
    Figure("synthetic_epsilon", "epsilon of a synthetic table", PRIVACY, "dp_synthetic_privacy", "epsilon",
           "A DP synthetic table's epsilon per period (at its delta): the formal bound on what any attack learns of "
           "one subscriber"),
    Figure("groups_kept", "groups kept", UTILITY, "quality_groups", "quality groups"),
    Figure("groups_total", "groups in the source", UTILITY, "quality_groups", "quality groups"),
    Figure("median_quantile_error", "median quantile error", UTILITY, "quality_groups", "share of p10-p90 spread",
           scorecard=False),
    Figure("max_quantile_error", "worst quantile error", UTILITY, "quality_groups", "share of p10-p90 spread"),
    Figure("max_tail_share_error_pp", "worst tail-share error", UTILITY, "quality_groups", "percentage points"),
    Figure("large_group_max_quantile_error", "worst quantile error, large groups", UTILITY, "quality_groups",
           "share of p10-p90 spread",
           "The largest quantile error over the quality groups of at least [utility] large_group_records source "
           "records, where Elina's decisions rest"),
    Figure("large_group_max_tail_share_error_pp", "worst tail-share error, large groups", UTILITY, "quality_groups",
           "percentage points",
           "The largest tail-share error over the quality groups of at least [utility] large_group_records source "
           "records"),
    Figure("joint_max_error_pp", "worst joint-share error", UTILITY, "quality_groups", "percentage points",
           "Per app on 5G, the share of sessions both slow and laggy: the worst error, base data against release"),
    Figure("pair_correlation_max_error", "worst pair-correlation error", UTILITY, "quality_groups",
           "rank correlation",
           "The largest change of a strong pair's rank correlation (download ~ upload, latency ~ handshake...) in a "
           "large (app, radio) group, base data against release: whether a row still holds a session together"),
    Figure("pair_correlation_median_error", "median pair-correlation error", UTILITY, "quality_groups",
           "rank correlation", "The median change of the strong pairs' rank correlations over the large groups",
           scorecard=False),
    Figure("q1", "Q1 gaming or streaming", ANSWERS, "elina_answers", "answer",
           "Focus product development on gaming or streaming?"),
    Figure("q2", "Q2 apps to prioritise", ANSWERS, "elina_answers", "answer",
           "Which apps to prioritise for network-quality improvements?"),
    Figure("q3", "Q3 overloaded stations", ANSWERS, "elina_answers", "answer",
           "Which base stations are overloaded and should get a capacity upgrade?"),
    Figure("epsilon", "epsilon per period", DP, "dp_release", "epsilon"),
    Figure("mae_small_cells", "mean absolute error, cells < 20", DP, "dp_accuracy_lab", "subscribers",
           scorecard=False),
    Figure("mae_large_cells", "mean absolute error, cells >= 20", DP, "dp_accuracy_lab", "subscribers",
           scorecard=False),
    Figure("audit", "privacy audit", DP, "dp_privacy_audit", "epsilon",
           "Privacy audit: empirical lower bound on epsilon (95%) from the best distinguishing test, beside the claim",
           scorecard=False),
    Figure("error", "error per cell: noise, bias, total", DP, "dp_accuracy_lab", "subscribers per cell",
           "Mean absolute error per cell, small (< 20) and large: noise against the bounded count, the bound's "
           "undercount (bias), and the total against the true distinct subscribers", scorecard=False),
    Figure("bound", "contribution bound and its expected error", DP, "dp_accuracy_lab", "subscribers per cell",
           "Cells per subscriber: the bound used and the expected total error (bias + noise) of each candidate",
           scorecard=False),
    Figure("q1_replication_ok", "DP median replicates its stated accuracy", DP, "dp_q1_median", "pass",
           scorecard=False),
)
FIGURES_BY_KEY = {figure.key: figure for figure in FIGURES}
ATTACK_FIGURES = tuple(figure for figure in FIGURES if figure.family == PRIVACY)
HEADLINE_FIGURES = tuple((figure.headline, figure.label) for figure in ATTACK_FIGURES if figure.headline)
QUESTIONS = tuple(figure.key for figure in FIGURES if figure.family == ANSWERS)
QUESTION_TEXT = {figure.key: figure.explains for figure in FIGURES if figure.family == ANSWERS}
"""Elina's questions in her words, by key ("q1", "q2", "q3")."""


def family_figures(family: str, scorecard_only: bool = False) -> tuple[Figure, ...]:
    return tuple(f for f in FIGURES if f.family == family and (f.scorecard or not scorecard_only))


def assets_of_kind(kind: str) -> tuple[str, ...]:
    """The release asset and the evidence assets of one release kind."""
    return (RELEASE_ASSET[kind], *(a.name for a in EVIDENCE_ASSETS if a.release_kind == kind
                                   and a.name != RELEASE_ASSET[kind]))


def family_asset(kind: str, family: str) -> str | None:
    """The evidence asset of one release kind that records one family (the first, where there are several)."""
    return next((a.name for a in EVIDENCE_ASSETS if a.release_kind == kind and a.family == family), None)


@dataclass(frozen=True)
class Evidence:
    """A candidate's recorded figures by family, as the gate, the scorecard, the report and `dsh run --json` read
    them. A family nothing recorded is empty; ``dp`` and ``budget`` are None but for a DP release."""

    privacy: dict = field(default_factory=dict)
    utility: dict = field(default_factory=dict)
    answers: dict = field(default_factory=dict)
    dp: dict | None = None
    budget: dict | None = None

    @classmethod
    def of_assets(cls, figures: dict[str, dict]) -> Evidence:
        """From asset name -> the `figures` that asset recorded (those of one configuration and period)."""
        def merged(family: str, leave_out: str = "") -> dict:
            return {key: value for asset in EVIDENCE_ASSETS if asset.family == family and asset.name != leave_out
                    for key, value in (figures.get(asset.name) or {}).items()}

        row_level = cls(merged(PRIVACY), merged(UTILITY), merged(ANSWERS))
        published = figures.get(RELEASE_ASSET[DP_COUNTS]) or {}
        if DP not in published:
            return row_level
        lab = merged(DP, leave_out=RELEASE_ASSET[DP_COUNTS])
        return replace(row_level, dp={**published[DP], **lab}, budget=published[BUDGET])

    @property
    def is_dp(self) -> bool:
        return self.dp is not None

    def with_budget(self, budget: dict | None) -> Evidence:
        """A DP release's evidence with the ledger's status ``budget`` (read after later debits of the period) in
        place of the one its release recorded; anything else as it is."""
        return replace(self, budget=budget) if self.budget is not None and budget is not None else self

    def as_json(self) -> dict:
        """The families as `dsh run --json` prints them: an empty family is null; "dp" and "budget" only for a DP
        release."""
        families = {PRIVACY: self.privacy or None, UTILITY: self.utility or None, ANSWERS: self.answers or None}
        return {**families, DP: self.dp, BUDGET: self.budget} if self.is_dp else families


def headline(privacy: dict) -> tuple[float | None, str | None]:
    """The worst risk measured and the attack it belongs to (None, None when nothing was measured)."""
    measured = [(privacy.get(key), label) for key, label in HEADLINE_FIGURES if privacy.get(key) is not None]
    if not measured:
        return None, None
    return max(measured)
