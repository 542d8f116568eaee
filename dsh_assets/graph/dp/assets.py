"""The differentially private count release in the graph: `dp_release` (published through the ledger) and its lab."""

import dagster as dg
import pyarrow.parquet as pq

from dsh_assets.core.dp.lab import EPSILONS, accuracy_lab, seed_lab
from dsh_assets.core.dp.ledger import BudgetExceeded
from dsh_assets.core.dp.publish import publish_dp_counts, publish_dp_slow_shares, true_cell_counts
from dsh_assets.core.evidence.metrics import ASSETS_BY_NAME
from dsh_assets.core.provenance import code_version
from dsh_assets.graph.metadata import as_metadata
from dsh_assets.graph.partitions import config_and_period
from dsh_assets.graph.release.assets import provenance, recorded_source, scored_release
from dsh_assets.graph.resources import BudgetLedger, DshHome, DshSecrets

REPUBLISH_TAG = "dsh/republish"
LAB_DRAWS = 3
"""Draws per epsilon over every cell: OpenDP's exact sampler costs ~50 us a draw, so the lab is kept small."""
BUDGET_KEYS = ("period_used", "period_cap", "year_used", "year_cap")


def _publish(context: dg.AssetExecutionContext, home: DshHome, keys, ledger, config, period: str) -> dict:
    """Publish the period's DP tables once through the ledger; raise a Failure (nothing written) at the cap."""
    layout, schema = home.layout, home.schema()
    republish = context.run.tags.get(REPUBLISH_TAG) == "true"
    source = layout.source(period)
    try:
        counts = publish_dp_counts(source, layout.released(config.id, period), config, schema, keys, ledger,
                                   period, republish=republish)
        q2 = None
        if config.slow_share_epsilon > 0:
            q2 = publish_dp_slow_shares(source, layout.dp_q2(config.id, period), config, schema, keys, ledger,
                                        period, republish=republish)
    except BudgetExceeded as refusal:
        raise dg.Failure(f"DP release {config.id} {period} refused: {refusal}") from None
    spent = counts.epsilon_spent + (q2.epsilon_spent if q2 else 0.0)
    context.log.info(f"DP release {config.id} {period}: {'reused the stored table' if counts.reused else 'drawn'}; "
                     f"epsilon debited now {spent:g}")
    status = ledger.status(period)
    metadata = as_metadata(counts.to_metadata(), {
        "dp": {"epsilon": config.epsilon, "counts_epsilon": config.counts_epsilon,
               "sensitivity": config.sensitivity, "scale": counts.metadata.get("scale"),
               "cells": counts.metadata.get("cells_published")},
        "budget": {key: status.get(key) for key in BUDGET_KEYS},
    })
    if q2 is not None:
        metadata["q2_path"] = dg.MetadataValue.path(str(q2.path))
        metadata["q2_sha256"] = q2.sha256
    metadata["epsilon_debited"] = spent
    metadata["republished"] = republish
    return metadata


def build_dp_release_asset(partitions: dg.MultiPartitionsDefinition, source: dg.AssetsDefinition) -> dg.AssetsDefinition:
    @dg.asset(name="dp_release", partitions_def=partitions, deps=[source], group_name="dp",
              kinds={"parquet", "opendp"}, code_version=code_version(),
              description=ASSETS_BY_NAME["dp_release"].description)
    def dp_release(context: dg.AssetExecutionContext, home: DshHome, secrets: DshSecrets,
                   ledger: BudgetLedger) -> dg.MaterializeResult:
        config_id, period = config_and_period(partitions, context.partition_key)
        config = home.configs()[config_id]
        recorded = recorded_source(context, home, source.key, period)
        keys = secrets.load()
        published = _publish(context, home, keys, ledger.ledger(), config, period)
        # Rows here are source rows: counted in the release, or dropped by the contribution bound.
        dropped = published.get("bounding_rows_dropped_by_bound", 0)
        counts = {"rows_in": recorded["rows"], "rows_released": recorded["rows"] - dropped, "rows_withheld": dropped}
        out_path = home.layout.released(config_id, period)
        metadata = {**published, **provenance(config, period, recorded, out_path, keys), **counts,
                    "dagster/row_count": pq.ParquetFile(out_path).metadata.num_rows}
        context.log.info(f"DP release {config_id} {period}: {counts['rows_released']} source rows counted, "
                         f"{dropped} dropped by the contribution bound")
        return dg.MaterializeResult(data_version=dg.DataVersion(metadata["sha256"]), metadata=metadata)

    return dp_release


def build_dp_lab_asset(dp_release: dg.AssetsDefinition) -> dg.AssetsDefinition:
    partitions = dp_release.partitions_def

    @dg.asset(name="dp_accuracy_lab", partitions_def=partitions, deps=[dp_release], group_name="dp",
              kinds={"opendp"}, code_version=code_version(),
              description=ASSETS_BY_NAME["dp_accuracy_lab"].description)
    def dp_accuracy_lab(context: dg.AssetExecutionContext, home: DshHome, secrets: DshSecrets) -> dg.MaterializeResult:
        config_id, period = config_and_period(partitions, context.partition_key)
        config = home.configs()[config_id]
        scored = scored_release(context, home, dp_release.key, config_id, period)
        true_counts = true_cell_counts(home.layout.source(period), config, home.schema(), secrets.load())
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
        return dg.MaterializeResult(metadata={**metadata, **scored})

    return dp_accuracy_lab
