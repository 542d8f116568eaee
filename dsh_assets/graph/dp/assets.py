"""The differentially private count release in the graph: publication, accuracy lab, budget check."""

import dagster as dg

from dsh_assets.core.dp.ledger import BudgetExceeded
from dsh_assets.core.release.configs import DpCountsConfig
from dsh_assets.core.dp.publish import publish_dp_counts, publish_dp_slow_shares, true_cell_counts
from dsh_assets.core.dp.lab import EPSILONS, accuracy_lab, seed_lab
from dsh_assets.core.provenance import code_version
from dsh_assets.graph.metadata import as_metadata, not_applicable
from dsh_assets.graph.partitions import config_and_period
from dsh_assets.graph.resources import DshSettings

REPUBLISH_TAG = "dsh/republish"
LAB_DRAWS = 3
"""Draws per epsilon over every cell: OpenDP's exact sampler costs ~50 us a draw, so the lab is kept small."""


def publish(context: dg.AssetExecutionContext, settings: DshSettings, config: DpCountsConfig, period: str) -> dict:
    """Publish the period's DP tables once through the ledger; raise a Failure (nothing written) at the cap."""
    layout, schema, secrets = settings.layout, settings.schema(), settings.secrets()
    republish = context.run.tags.get(REPUBLISH_TAG) == "true"
    ledger = settings.ledger()
    source = layout.source(period)
    try:
        counts = publish_dp_counts(source, layout.released(config.id, period), config, schema, secrets, ledger,
                                   period, republish=republish)
        q2 = None
        if config.slow_share_epsilon > 0:
            q2 = publish_dp_slow_shares(source, layout.dp_q2(config.id, period), config, schema, secrets, ledger,
                                        period, republish=republish)
    except BudgetExceeded as refusal:
        raise dg.Failure(f"DP release {config.id} {period} refused: {refusal}") from None
    spent = counts.epsilon_spent + (q2.epsilon_spent if q2 else 0.0)
    context.log.info(f"DP release {config.id} {period}: {'reused the stored table' if counts.reused else 'drawn'}; "
                     f"epsilon debited now {spent:g}")
    metadata = as_metadata(counts.to_metadata(), {
        "dp": {"epsilon": config.epsilon, "counts_epsilon": config.counts_epsilon,
               "sensitivity": config.sensitivity, "scale": counts.metadata.get("scale"),
               "cells": counts.metadata.get("cells_published")},
        "budget": _budget_figures(ledger.status(period)),
    })
    if q2 is not None:
        metadata["q2_path"] = dg.MetadataValue.path(str(q2.path))
        metadata["q2_sha256"] = q2.sha256
    metadata["epsilon_debited"] = spent
    metadata["republished"] = republish
    return metadata


def _budget_figures(status: dict) -> dict:
    return {key: status.get(key) for key in ("period_used", "period_cap", "year_used", "year_cap")}


def build_dp_lab_asset(released: dg.AssetsDefinition) -> dg.AssetsDefinition:
    partitions = released.partitions_def

    @dg.asset(name="dp_accuracy_lab", partitions_def=partitions, deps=[released], group_name="privacy",
              kinds={"opendp"}, code_version=code_version(),
              description="Replication before trust (seed 002): repeated draws of the DP mechanism on the period's "
                          "true bounded counts; measured MAE vs the discrete Laplace's theory per epsilon, small and "
                          "large cells apart, and the seed's own continuous-Laplace lab. Evaluation only: never "
                          "published, spends no budget.")
    def dp_accuracy_lab(context: dg.AssetExecutionContext, settings: DshSettings) -> dg.MaterializeResult:
        config_id, period = config_and_period(partitions, context.partition_key)
        config = settings.configs()[config_id]
        if not isinstance(config, DpCountsConfig):
            return not_applicable("row-level release: no DP mechanism to replicate")
        true_counts = true_cell_counts(settings.layout.source(period), config, settings.schema(), settings.secrets())
        epsilons = tuple(sorted({*EPSILONS, config.counts_epsilon}))
        lab = accuracy_lab(true_counts, epsilons, sensitivity=config.sensitivity, draws=LAB_DRAWS)
        at_config = next(row for row in lab.rows if row.epsilon == config.counts_epsilon)
        figures = {
            "mae_small_cells": at_config.small_mae_published,
            "mae_large_cells": at_config.large_mae_published,
            "replication_ok": lab.passed,
        }
        metadata = as_metadata({"lab": lab.records(), "seed_lab": seed_lab(), "assumptions": lab.assumptions()},
                               figures)
        metadata["table"] = dg.MetadataValue.md(f"```\n{lab.table()}\n```")
        return dg.MaterializeResult(metadata=metadata)

    return dp_accuracy_lab


def build_budget_check(released: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    partitions = released.partitions_def

    @dg.asset_check(asset=released, name="budget_within_caps", blocking=True, partitions_def=partitions,
                    description="Privacy budget used and left for the period and its year; fails when a cap is crossed.")
    def budget_within_caps(context: dg.AssetCheckExecutionContext, settings: DshSettings) -> dg.AssetCheckResult:
        config_id, period = config_and_period(partitions, context.partition_key)
        if not isinstance(settings.configs()[config_id], DpCountsConfig):
            return dg.AssetCheckResult(passed=True, metadata={"note": "row-level release: spends no DP budget"})
        status = settings.ledger().status(period)
        passed = status["period_used"] <= status["period_cap"] + 1e-12 and status["year_used"] <= status["year_cap"] + 1e-12
        return dg.AssetCheckResult(passed=passed, metadata={key: _plain(value) for key, value in status.items()})

    return budget_within_caps


def _plain(value):
    return value if isinstance(value, (int, float, str, bool)) else str(value)
