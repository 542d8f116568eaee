"""The differentially private count release in the graph: `dp_release` (published through the ledger) and its lab."""

import dagster as dg
import pyarrow.parquet as pq

from dsh_assets.core.dp import bound as bound_choice
from dsh_assets.core.dp import median
from dsh_assets.core.dp.lab import EPSILONS, accuracy_lab, error_against_truth, seed_lab
from dsh_assets.core.dp.ledger import BudgetExceeded
from dsh_assets.core.dp.publish import (
    Counting,
    publish_dp_bound,
    publish_dp_counts,
    publish_dp_slow_shares,
    read_public_metadata,
)
from dsh_assets.core.evidence.metrics import ASSETS_BY_NAME
from dsh_assets.core.files import DigestBook
from dsh_assets.core.provenance import code_version
from dsh_assets.graph.metadata import as_metadata
from dsh_assets.graph.partitions import config_and_period
from dsh_assets.graph.records import materialized
from dsh_assets.graph.release.assets import provenance, recorded_source
from dsh_assets.graph.release.store import StoredRelease, stored_release
from dsh_assets.graph.resources import BudgetLedger, ComputeEngine, DshHome, DshSecrets
from dsh_assets.graph.refusals import refusing



class DrawOptions(dg.Config):
    """A run's choice for the DP tables of its period."""

    republish: bool = False
    """Draw the period's tables again and debit their epsilon again, instead of returning the stored ones."""

LAB_DRAWS = 3
"""Draws per epsilon over every cell: OpenDP's exact sampler costs ~50 us a draw, so the lab is kept small."""
BUDGET_KEYS = ("period_used", "period_cap", "year_used", "year_cap")


def _publish(context: dg.AssetExecutionContext, home: DshHome, keys, ledger, config, period: str,
             counting: Counting, republish: bool, book: DigestBook) -> dict:
    """Publish the period's DP tables once through the ledger, counted by ``counting``; raise a Failure (nothing
    written) at the cap."""
    layout, schema = home.layout, home.schema()
    source = layout.source(period)
    try:
        chosen = None
        if config.auto_bound:  # the bound first, from its own ledgered DP estimate
            config, chosen = publish_dp_bound(source, layout.dp_bound(config.id, period), config, schema, ledger,
                                              period, republish=republish, counting=counting, book=book)
        counts = publish_dp_counts(source, layout.released(config.id, period), config, schema, keys, ledger,
                                   period, republish=republish, counting=counting, book=book)
        q2 = None
        if config.slow_share_epsilon > 0:
            q2 = publish_dp_slow_shares(source, layout.dp_q2(config.id, period), config, schema, keys, ledger,
                                        period, republish=republish, counting=counting, book=book)
    except BudgetExceeded as refusal:
        raise dg.Failure(f"DP release {config.id} {period} refused: {refusal}") from None
    spent = counts.epsilon_spent + (q2.epsilon_spent if q2 else 0.0) + (chosen.epsilon_spent if chosen else 0.0)
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
    if chosen is not None:
        metadata["bound_chosen"] = chosen.metadata["chosen_bound"]
        metadata["bound_curve"] = dg.MetadataValue.md(_curve_markdown(chosen.metadata["curve"]))
        metadata["bound_sha256"] = chosen.sha256
    metadata["epsilon_debited"] = spent
    metadata["republished"] = republish
    return metadata


def _curve_markdown(curve: dict) -> str:
    rows = [f"| {b} | {v['bias']:.3f} | {v['noise']:.3f} | {v['total']:.3f} |" for b, v in curve.items()]
    return "\n".join(["| bound | bias | noise | expected total |", "| --- | --- | --- | --- |", *rows])


def resolved_config(home: DshHome, stored: StoredRelease):
    """The configuration as published: an "auto" bound resolved to the bound its count table was drawn with (as its
    release recorded it from the table's own metadata, whatever the configuration said then)."""
    config = home.configs()[stored.config_id]
    return config.with_bound(stored.recorded["dp_max_cells_per_subscriber"]) if config.auto_bound else config


def bound_figure(home: DshHome, config, period: str, source, schema, counting: Counting) -> tuple[dict, dict]:
    """(the `bound` figure, the curve on the true data): an "auto" bound's DP curve, or a configured bound's
    curve on the true data (evaluation only, never used to choose)."""
    histogram, cells = counting.cells_per_subscriber(source, config, schema)
    true_curve = bound_choice.expected_total_error(histogram, cells, config.counts_epsilon)
    if home.configs()[config.id].auto_bound:
        public = read_public_metadata(home.layout.dp_bound(config.id, period))
        curve = {int(b): v for b, v in public["curve"].items()}
        figure = bound_choice.bound_figures(public["chosen_bound"], curve,
                                            f"chosen from a DP histogram (epsilon {public['epsilon']:g}, ledgered)")
    else:
        figure = bound_choice.bound_figures(config.max_cells_per_subscriber, true_curve,
                                            "configured; the curve is on the true data (evaluation only)")
    return figure, true_curve


def build_dp_release_asset(partitions: dg.MultiPartitionsDefinition, source: dg.AssetsDefinition) -> dg.AssetsDefinition:
    @dg.asset(name="dp_release", partitions_def=partitions, deps=[source], group_name="dp",
              kinds={"parquet", "opendp", "duckdb", "spark"}, code_version=code_version(),
              description=ASSETS_BY_NAME["dp_release"].description)
    @refusing
    def dp_release(context: dg.AssetExecutionContext, config: DrawOptions, home: DshHome, secrets: DshSecrets,
                   ledger: BudgetLedger, engine: ComputeEngine,
                   digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        config_id, period = config_and_period(context.partition_key)
        configured = home.configs()[config_id]
        recorded = recorded_source(home, digests, source.key, period)
        keys = secrets.load()
        counting = engine.get().counting()
        published = _publish(context, home, keys, ledger.ledger(), configured, period, counting, config.republish,
                             digests)
        # Rows here are source rows: counted in the release, or dropped by the contribution bound.
        dropped = published.get("bounding_rows_dropped_by_bound", 0)
        counts = {"rows_in": recorded["rows"], "rows_released": recorded["rows"] - dropped, "rows_withheld": dropped}
        out_path = home.layout.released(config_id, period)
        metadata = {**published, **provenance(configured, period, recorded, out_path, keys, digests, home.engine),
                    **counts,
                    "dagster/row_count": pq.ParquetFile(out_path).metadata.num_rows}
        context.log.info(f"DP release {config_id} {period}: {counts['rows_released']} source rows counted, "
                         f"{dropped} dropped by the contribution bound")
        return materialized(context, home, metadata, dg.DataVersion(metadata["sha256"]))

    return dp_release


def build_dp_lab_asset(dp_release: dg.AssetsDefinition) -> dg.AssetsDefinition:
    partitions = dp_release.partitions_def

    @dg.asset(name="dp_accuracy_lab", partitions_def=partitions, deps=[dp_release], group_name="dp",
              kinds={"opendp", "duckdb", "spark"}, code_version=code_version(),
              description=ASSETS_BY_NAME["dp_accuracy_lab"].description)
    @refusing
    def dp_accuracy_lab(context: dg.AssetExecutionContext, home: DshHome, secrets: DshSecrets,
                        engine: ComputeEngine, digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        config_id, period = config_and_period(context.partition_key)
        stored = stored_release(home, digests, dp_release.key, config_id, period)
        config = resolved_config(home, stored)
        source, schema = home.layout.source(period), home.schema()
        counting = engine.get().counting()
        truth = counting.cell_counts(source, config, schema, secrets.load())
        epsilons = tuple(sorted({*EPSILONS, config.counts_epsilon}))
        lab = accuracy_lab(truth.counts, epsilons, sensitivity=config.sensitivity, draws=LAB_DRAWS)
        at_config = next(row for row in lab.rows if row.epsilon == config.counts_epsilon)
        error = error_against_truth(truth.counts, truth.unbounded, config.counts_epsilon, config.sensitivity,
                                    draws=LAB_DRAWS)
        bound, true_curve = bound_figure(home, config, period, source, schema, counting)
        figures = {
            "mae_small_cells": at_config.small_mae_published,
            "mae_large_cells": at_config.large_mae_published,
            "replication_ok": lab.passed,
            "error": error,
            "bound": bound,
        }
        metadata = as_metadata({"lab": lab.records(), "seed_lab": seed_lab(), "assumptions": lab.assumptions(),
                                "error_definition": error_against_truth.__doc__.split("\n\n")[0].strip()},
                               figures)
        metadata["table"] = dg.MetadataValue.md(f"```\n{lab.table()}\n```")
        metadata["bound_curve_true_data"] = dg.MetadataValue.md(_curve_markdown(true_curve))
        return materialized(context, home, {**metadata, **stored.provenance()})

    return dp_accuracy_lab


Q1_LAB_DRAWS = 100
"""Private medians per app in the Q1 replication (OpenDP, unseeded; ~15 ms each on 10,000 values)."""


def build_dp_q1_asset(dp_release: dg.AssetsDefinition) -> dg.AssetsDefinition:
    partitions = dp_release.partitions_def

    @dg.asset(name="dp_q1_median", partitions_def=partitions, deps=[dp_release], group_name="dp",
              kinds={"opendp"}, code_version=code_version(),
              description=ASSETS_BY_NAME["dp_q1_median"].description + "\n\n" + median.__doc__)
    @refusing
    def dp_q1_median(context: dg.AssetExecutionContext, config: DrawOptions, home: DshHome, secrets: DshSecrets,
                     ledger: BudgetLedger, digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        config_id, period = config_and_period(context.partition_key)
        configured = home.configs()[config_id]
        if not configured.q1_epsilon > 0:
            return materialized(context, home, as_metadata({"note": "q1_epsilon is 0: no Q1 table"},
                                                           {"q1_replication_ok": None}))
        layout, schema, keys = home.layout, home.schema(), secrets.load()
        rows = configured.q1_max_rows_per_subscriber
        values = median.latency_values(layout.source(period), schema, keys, rows)
        lab = median.median_lab(values, configured.q1_epsilon / len(median.APPS), rows, draws=Q1_LAB_DRAWS)
        if not lab.passed:  # replicate first: a mechanism off its stated accuracy is not used, nothing is debited
            raise dg.Failure(f"Q1 median replication failed for {config_id} {period}; Q1 not published",
                             metadata={"lab": dg.MetadataValue.json(lab.records())})
        try:
            outcome = median.publish_dp_q1(layout.source(period), layout.dp_q1(config_id, period), configured,
                                           schema, keys, ledger.ledger(), period, republish=config.republish,
                                           book=digests)
        except BudgetExceeded as refusal:
            raise dg.Failure(f"DP Q1 table {config_id} {period} refused: {refusal}") from None
        metadata = as_metadata({"lab": lab.records(), **outcome.to_metadata()}, {"q1_replication_ok": lab.passed})
        metadata["lab_table"] = dg.MetadataValue.md(f"```\n{lab.table()}\n```")
        metadata["path"] = dg.MetadataValue.path(str(outcome.path))
        return materialized(context, home, metadata)

    return dp_q1_median
