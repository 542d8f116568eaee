"""Per period, across configurations: the scorecard (UI) and the self-contained HTML report (people)."""

import functools
from dataclasses import dataclass

import dagster as dg

from dsh_assets.core.evidence import scorecard
from dsh_assets.core.evidence.metrics import ANSWERS, UTILITY, Evidence, family_asset
from dsh_assets.core.evidence.questions import question_plots
from dsh_assets.core.evidence.report import render_report
from dsh_assets.core.files import DigestBook, atomic_path
from dsh_assets.core.provenance import code_version
from dsh_assets.core.release.configs import DP_COUNTS, DP_SYNTHETIC, ROW_RELEASE
from dsh_assets.graph.automation import AFTER_ITS_INPUTS
from dsh_assets.graph.evidence.gather import PUBLISHED, answer_details, candidates
from dsh_assets.graph.metadata import markdown_table
from dsh_assets.graph.partitions import BY_PERIOD, PERIODS
from dsh_assets.graph.records import materialized
from dsh_assets.graph.resources import BudgetLedger, DshHome, Publications
from dsh_assets.graph.refusals import refusing

"""Under the daemon (`dagster dev`), a period's scorecard and report follow its releases by themselves."""


@dataclass
class PeriodEvidence:
    """Everything the scorecard and the report show of a period."""

    evidence: dict[str, Evidence]
    released: dict[str, dict]
    verdicts: dict[str, dict]
    """Config id -> {"kind", "status", "publishable", "refused", "gate"}, and for a DP release "epsilon_spent"."""
    pairs: dict[str, dict]
    """B -> A -> figures of what an attacker holding both gets."""
    publication: dict | None
    """The period's row-level publication."""
    dp_publications: list[dict]
    """Each DP count release published beside it."""
    lab: list[dict] | None
    """The DP accuracy lab's rows (one per epsilon), from the first DP configuration that has them."""
    frame: object
    details: dict[str, dict]
    """Config id -> {"answers": the numbers behind Elina's answers, "worst_cells": the most distorted quality
    groups, "origins": asset name -> where its figures were recorded (asset, partition, code version)}."""
    source: dict
    """The period's source as recorded: origin (synthetic or file), rows, subscribers, SHA-256, code version."""
    region: tuple[float | None, float | None] = (None, None)
    """The gate's least utility kept and most headline risk (the frontier's shaded region)."""
    listed: tuple[str, ...] = ()
    """The DPO's ordered publication list ([publication] config)."""

    @functools.cached_property
    def risk_utility_png(self) -> bytes:
        """Drawn once, for both the scorecard's file and the report."""
        return scorecard.risk_utility_png(self.frame, self.region,
                                          self.publication["config"] if self.publication else None)


def _gather(home: DshHome, book: DigestBook, publications: Publications, ledgers: BudgetLedger,
            period: str, check_names: dict[str, tuple[str, ...]]) -> PeriodEvidence:
    """Evidence, release metadata, the gate's verdicts and the scorecard of every candidate of the period; the
    budget as each slice's ledger holds it now, after every debit of the period's runs."""
    budget = ledgers.ledger()
    slices = {DP_COUNTS: budget}
    configs = home.configs()
    policy = publications.policy()
    found = candidates(home, book, policy, period, check_names, budget.status(period))
    records = publications.ledger().published(period)
    published_ids = {record.config_id for record in records}
    evidence, released, verdicts, details, lab = {}, {}, {}, {}, None
    for config_id, found_candidate in found.items():
        if not found_candidate.released:
            continue
        latest = {name: record.values for name, record in found_candidate.records.items()}
        kind = configs[config_id].kind
        quality = latest.get(family_asset(kind, UTILITY), {})
        details[config_id] = {
            "answers": answer_details(latest.get(family_asset(kind, ANSWERS), {})),
            "worst_cells": quality.get("worst_cells") or [],
            "large_groups": {key: quality.get(key) for key in ("large_group_worst_quantile", "large_group_worst_tail")},
            "relationships": quality.get("pair_correlation") or [],
            "origins": {name: record.origin() for name, record in found_candidate.records.items()},
        }
        evidence[config_id] = found_candidate.evidence
        released[config_id] = found_candidate.released
        config = configs[config_id]
        verdicts[config_id] = {
            "kind": config.kind, "status": PUBLISHED if config_id in published_ids else found_candidate.status,
            "publishable": found_candidate.publishable, "refused": found_candidate.refused,
            "gate": found_candidate.gate,
        }
        if config.kind in (DP_COUNTS, DP_SYNTHETIC):
            if config.kind not in slices:
                slices[config.kind] = ledgers.ledger(config.kind)
            verdicts[config_id]["epsilon_spent"] = slices[config.kind].spent(config.ledger_debits(), period)
        lab = lab or latest.get("dp_accuracy_lab", {}).get("lab")
    if not evidence:
        raise dg.Failure(f"no release materialised for period {period}")
    pair_record = home.records().latest("release_pairs", period)
    pairs = ((pair_record.values.get("figures") or {}).get("pairs") or {}) if pair_record else {}
    shown = [{"config": r.config_id, "sha256": r.release_sha256, "path": r.path, "published_at": r.published_at,
              "kind": r.kind, "also_publish": r.also_publish} for r in records]
    publication = next((r for r in shown if r["kind"] == ROW_RELEASE and not r["also_publish"]), None)
    source_record = home.records().latest("source", period)
    source = {**source_record.values, **source_record.origin()} if source_record else {}
    source = {key: source.get(key) for key in ("origin", "rows", "subscribers", "sha256", "asset", "partition",
                                               "code_version")}
    return PeriodEvidence(evidence, released, verdicts, pairs, publication,
                          [r for r in shown if r["kind"] == DP_COUNTS], lab,
                          scorecard.scorecard_frame(evidence, released, verdicts), details, source,
                          scorecard.gate_region(policy.gates.get(ROW_RELEASE, ())), policy.config_ids)


def _report_plots(gathered: PeriodEvidence) -> dict[str, tuple[bytes, str]]:
    """The report's figures, each with its caption: only those the period's evidence can draw."""
    plots = {
        "risk_vs_utility": (gathered.risk_utility_png, "The risk-utility frontier: each candidate's worst risk "
                                                       "against the utility it keeps; shaded where the gate's "
                                                       "limits on both hold; the published one ringed."),
        "attacks": (scorecard.attacks_png(gathered.frame), "Each attack's success per row-level configuration."),
    }
    if gathered.pairs:
        plots["pairs"] = (scorecard.pairs_png(gathered.pairs),
                          "Rows of B (row) relinked to A (column) by an attacker holding both candidates.")
    relationships = scorecard.relationships_png({config_id: detail.get("relationships") or []
                                                 for config_id, detail in gathered.details.items()})
    if relationships:
        plots["relationships"] = (relationships, "Relationships between a session's measurements: each strong pair "
                                                 "in each large (app, radio) group, its rank correlation in the base "
                                                 "data against the release's; on the diagonal the release keeps it, "
                                                 "the band is +-0.1.")
    informed = scorecard.informed_match_png(gathered.evidence)
    if informed:
        plots["informed_match"] = (informed, "The informed attacker's success against the number of measurements "
                                             "it knows, per configuration.")
    dp_error = scorecard.dp_error_png(gathered.lab) if gathered.lab else None
    if dp_error:
        plots["dp_error"] = (dp_error, "DP accuracy lab: mean relative error of the published counts against "
                                       "epsilon, small and large cells apart.")
    plots.update(question_plots(gathered.details))
    return plots


def build_report_assets(per_release_assets, period_assets, check_names: dict[str, tuple[str, ...]]
                        ) -> list[dg.AssetsDefinition]:
    """The period's scorecard and report, over every release and evidence asset of every kind."""
    deps = [*(dg.AssetDep(asset, partition_mapping=BY_PERIOD) for asset in per_release_assets), *period_assets]

    @dg.asset(name="scorecard", partitions_def=PERIODS, deps=deps, group_name="report", kinds={"pandas"},
              code_version=code_version(), automation_condition=AFTER_ITS_INPUTS, io_manager_key="handed_over",
              description="Configuration by configuration: privacy figures, groups kept, worst utility errors, "
                          "which of Elina's questions keep their answer; and the risk-vs-utility plot.\n\n"
                          + scorecard.__doc__)
    @refusing
    def scorecard_asset(context: dg.AssetExecutionContext, home: DshHome, publications: Publications,
                        ledger: BudgetLedger, digests: dg.ResourceParam[DigestBook]) -> dg.Output:
        gathered = _gather(home, digests, publications, ledger, context.partition_key, check_names)
        frame = gathered.frame
        plot = home.layout.report_dir(context.partition_key) / "risk_vs_utility.png"
        with atomic_path(plot) as temporary:
            temporary.write_bytes(gathered.risk_utility_png)
        return materialized(context, home, {
            "scorecard": markdown_table(frame),
            "risk_vs_utility": dg.MetadataValue.path(str(plot)),
            "configurations": len(frame),
        }, handed_over=gathered)

    @dg.asset(name="release_report", partitions_def=PERIODS, ins={"gathered": dg.AssetIn("scorecard")},
              group_name="report", kinds={"html"}, code_version=code_version(),
              automation_condition=AFTER_ITS_INPUTS,
              description="A self-contained HTML report per period (plots embedded) for the data protection "
                          "officer and Elina: what each configuration does, protects, keeps and cannot answer, "
                          "with provenance. It shows the period's evidence as the scorecard gathered it.")
    @refusing
    def release_report(context: dg.AssetExecutionContext, home: DshHome, gathered: PeriodEvidence,
                       digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        period = context.partition_key
        evidence, frame = gathered.evidence, gathered.frame
        configs = home.configs()
        described = {cid: (configs[cid].description, configs[cid].operations()) for cid in evidence}
        plots = _report_plots(gathered)
        page = render_report(period, frame, evidence, gathered.released, described, plots, gathered.lab,
                             gathered.verdicts, gathered.pairs, gathered.publication,
                             details=gathered.details, source=gathered.source,
                             dp_publications=gathered.dp_publications, listed=gathered.listed)
        path = home.layout.report_dir(period) / "report.html"
        with atomic_path(path) as temporary:
            temporary.write_text(page, encoding="utf-8")
        return materialized(context, home, {"path": dg.MetadataValue.path(str(path)), "bytes": len(page),
                                            "sha256": digests.sha256(path, own_write=True),
                                            "configurations": len(evidence)})

    return [scorecard_asset, release_report]



