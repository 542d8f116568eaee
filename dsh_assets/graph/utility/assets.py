"""What each release keeps: quality groups and Elina's three questions, per configuration x period."""

import dagster as dg

from dsh_assets.core.evidence.metrics import ASSETS_BY_NAME
from dsh_assets.core.files import DigestBook
from dsh_assets.core.provenance import code_version
from dsh_assets.core.dp import median
from dsh_assets.core.utility import dp_answers, elina, quality_groups
from dsh_assets.graph.metadata import as_metadata, markdown_table
from dsh_assets.graph.partitions import config_and_period
from dsh_assets.graph.records import materialized
from dsh_assets.graph.release.store import stored_release
from dsh_assets.graph.resources import ComputeEngine, DshHome, DshSecrets
from dsh_assets.graph.refusals import refusing

ON_ENGINE_KINDS = {"duckdb", "spark"}
"""The kinds of the utility assets: their passes over the files run on the home's engine (ON_ENGINE_METRICS)."""


def build_utility_assets(released: dg.AssetsDefinition, prefix: str = "") -> list[dg.AssetsDefinition]:
    """`quality_groups` and `elina_answers` of a kind's release asset; ``prefix`` names those of another kind than
    the row-level releases' (each asset key is the graph's once)."""
    partitions = released.partitions_def

    @dg.asset(name=prefix + "quality_groups", partitions_def=partitions, deps=[released], group_name="utility",
              kinds=ON_ENGINE_KINDS, code_version=code_version(),
              description=ASSETS_BY_NAME[prefix + "quality_groups"].description + "\n\n"
              + quality_groups.DEFINITION.format(min_records=quality_groups.DEFAULT_MIN_RECORDS,
                                                 large_group_records="[utility] large_group_records"))
    @refusing
    def quality_groups_asset(context: dg.AssetExecutionContext, home: DshHome,
                             engine: ComputeEngine, digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        config_id, period = config_and_period(context.partition_key)
        stored = stored_release(home, digests, released.key, config_id, period)
        source, release = stored.source_path, stored.path
        with engine.get().aggregations() as passes:
            result = quality_groups.evaluate(source, release, home.configs()[config_id], home.schema(),
                                             aggregations=passes,
                                             large_group_records=home.utility().large_group_records,
                                             strong_pair_correlation=home.utility().strong_pair_correlation)
        metadata = {**as_metadata(result.metadata(), result.figures()), "engine": home.engine, **stored.provenance()}
        metadata["cells"] = markdown_table(result.table())
        return materialized(context, home, metadata)

    @dg.asset(name=prefix + "elina_answers", partitions_def=partitions, deps=[released], group_name="utility",
              kinds=ON_ENGINE_KINDS, code_version=code_version(),
              description=ASSETS_BY_NAME[prefix + "elina_answers"].description)
    @refusing
    def elina_answers(context: dg.AssetExecutionContext, home: DshHome,
                      engine: ComputeEngine, digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        config_id, period = config_and_period(context.partition_key)
        stored = stored_release(home, digests, released.key, config_id, period)
        source, release = stored.source_path, stored.path
        with engine.get().aggregations() as passes:
            result = elina.answer(source, release, home.configs()[config_id], home.schema(), aggregations=passes)
        return materialized(context, home, {**as_metadata(result.metadata(), result.figures()), "engine": home.engine,
                                            **stored.provenance()})

    return [quality_groups_asset, elina_answers]


def build_dp_answers_asset(dp_release: dg.AssetsDefinition, *more_deps: dg.AssetsDefinition) -> dg.AssetsDefinition:
    partitions = dp_release.partitions_def

    @dg.asset(name="dp_elina_answers", partitions_def=partitions, deps=[dp_release, *more_deps], group_name="utility",
              kinds=ON_ENGINE_KINDS, code_version=code_version(),
              description=ASSETS_BY_NAME["dp_elina_answers"].description)
    @refusing
    def dp_elina_answers(context: dg.AssetExecutionContext, home: DshHome, secrets: DshSecrets,
                         engine: ComputeEngine, digests: dg.ResourceParam[DigestBook]) -> dg.MaterializeResult:
        config_id, period = config_and_period(context.partition_key)
        stored = stored_release(home, digests, dp_release.key, config_id, period)
        config, source, schema = home.configs()[config_id], home.layout.source(period), home.schema()

        def q1_stability(base_focus: str):
            """Fresh evaluation draws of the same two medians (never published): how often Q1 is the base's."""
            rows = config.q1_max_rows_per_subscriber
            values = median.latency_values(source, schema, secrets.load(), rows)
            lab = median.median_lab(values, config.q1_epsilon / len(median.APPS), rows, draws=median.SAME_ANSWER_DRAWS,
                                    base_focus=base_focus)
            return lab.same_answer_rate, lab.same_answer_draws

        with engine.get().aggregations() as passes:
            figures = dp_answers.answers_from_dp_release(
                source, home.layout.dp_q2(config_id, period), schema, q1_path=home.layout.dp_q1(config_id, period),
                q1_stability=q1_stability if config.q1_epsilon > 0 else None, aggregations=passes)
        return materialized(context, home, {**as_metadata({"note": dp_answers.NOTE}, figures), "engine": home.engine,
                                            **stored.provenance()})

    return dp_elina_answers
