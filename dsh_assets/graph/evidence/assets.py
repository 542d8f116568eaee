"""Per period, across configurations: the scorecard (UI) and the self-contained HTML report (people)."""

import dagster as dg

from dsh_assets.core.evidence import scorecard
from dsh_assets.core.evidence.metrics import evidence_from_figures
from dsh_assets.core.evidence.report import render_report
from dsh_assets.core.files import atomic_path
from dsh_assets.core.provenance import code_version
from dsh_assets.graph.evidence.gather import recorded_evidence
from dsh_assets.graph.metadata import markdown_table
from dsh_assets.graph.resources import DshHome

_BY_PERIOD = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="period")
_AFTER_RELEASES = dg.AutomationCondition.eager()
"""Under the daemon (`dagster dev`), a period's scorecard and report follow its releases by themselves."""


def _gather(instance: dg.DagsterInstance, home: DshHome, period: str):
    """Evidence, released metadata and the scorecard of every configuration released for the period."""
    evidence, released, lab = {}, {}, None
    for config_id, config in home.configs().items():
        released_meta, latest = recorded_evidence(instance, config, period)
        if not released_meta:
            continue
        evidence[config_id] = evidence_from_figures({name: meta.get("figures") or {} for name, meta in latest.items()})
        released[config_id] = released_meta
        lab = lab or (latest.get("dp_accuracy_lab") or {}).get("table")
    if not evidence:
        raise dg.Failure(f"no release materialised for period {period}")
    return evidence, released, lab, scorecard.scorecard_frame(evidence, released)


def build_report_assets(per_release_assets, periods) -> list[dg.AssetsDefinition]:
    """The period's scorecard and report, over every release and evidence asset of every kind."""
    deps = [dg.AssetDep(asset, partition_mapping=_BY_PERIOD) for asset in per_release_assets]

    @dg.asset(name="scorecard", partitions_def=periods, deps=deps, group_name="report", kinds={"pandas"},
              code_version=code_version(), automation_condition=_AFTER_RELEASES,
              description="Configuration by configuration: privacy figures, groups kept, worst utility errors, "
                          "which of Elina's questions keep their answer; and the risk-vs-utility plot.\n\n"
                          + scorecard.__doc__)
    def scorecard_asset(context: dg.AssetExecutionContext, home: DshHome) -> dg.MaterializeResult:
        period = context.partition_key
        _, _, _, frame = _gather(context.instance, home, period)
        folder = home.layout.report_dir(period)
        plot = folder / "risk_vs_utility.png"
        with atomic_path(plot) as temporary:
            temporary.write_bytes(scorecard.risk_utility_png(frame))
        return dg.MaterializeResult(metadata={
            "scorecard": markdown_table(frame),
            "risk_vs_utility": dg.MetadataValue.path(str(plot)),
            "configurations": len(frame),
        })

    @dg.asset(name="release_report", partitions_def=periods, deps=[scorecard_asset], group_name="report",
              kinds={"html"}, code_version=code_version(), automation_condition=_AFTER_RELEASES,
              description="A self-contained HTML report per period (plots embedded) for the data protection "
                          "officer and Elina: what each configuration does, protects, keeps and cannot answer, "
                          "with provenance.")
    def release_report(context: dg.AssetExecutionContext, home: DshHome) -> dg.MaterializeResult:
        period = context.partition_key
        evidence, released_meta, lab_table, frame = _gather(context.instance, home, period)
        configs = home.configs()
        described = {cid: (configs[cid].description, configs[cid].operations()) for cid in evidence}
        plots = {
            "risk_vs_utility": (scorecard.risk_utility_png(frame), "Headline risk against utility kept."),
            "attacks": (scorecard.attacks_png(frame), "Each attack's success per row-level configuration."),
        }
        page = render_report(period, frame, evidence, released_meta, described, plots, lab_table)
        path = home.layout.report_dir(period) / "report.html"
        with atomic_path(path) as temporary:
            temporary.write_text(page, encoding="utf-8")
        return dg.MaterializeResult(metadata={"path": dg.MetadataValue.path(str(path)), "bytes": len(page),
                                              "configurations": len(evidence)})

    return [scorecard_asset, release_report]



