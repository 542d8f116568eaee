"""What each release keeps: quality groups and Elina's three questions, per configuration x period."""

import dagster as dg
import pyarrow.parquet as pq

from dsh_assets.core.utility import elina, quality_groups
from dsh_assets.core.release.configs import ReleaseConfig
from dsh_assets.core.release.configs import DpCountsConfig
from dsh_assets.core.provenance import code_version
from dsh_assets.graph.metadata import as_metadata, markdown_table, not_applicable
from dsh_assets.graph.partitions import config_and_period
from dsh_assets.graph.resources import DshSettings

_AS_IS = ReleaseConfig(id="as_is", description="the base data itself", drop_fields=(), time_coarsen="window",
                       app_coarsen="none", noise_scale=0.0, k=0, pseudonym=False)
"""Answers the questions on the base data alone (the source read as if it were its own release)."""


def _release_files(settings: DshSettings, config_id: str, period: str):
    source, released = settings.layout.source(period), settings.layout.released(config_id, period)
    if not (source.exists() and released.exists()):
        raise dg.Failure(f"release {config_id} {period} is not materialised; materialise `released` first")
    return source, released


def build_utility_assets(released: dg.AssetsDefinition) -> list[dg.AssetsDefinition]:
    partitions = released.partitions_def

    @dg.asset(name="quality_groups", partitions_def=partitions, deps=[released], group_name="utility",
              kinds={"duckdb"}, code_version=code_version(),
              description="App x radio x measurement cells (>= 30 valid source records): p10/p50/p90 and tail "
                          "shares, source vs release; lost or inexpressible cells are unavailable, never zero.\n\n"
                          + quality_groups.DEFINITION)
    def quality_groups_asset(context: dg.AssetExecutionContext, settings: DshSettings) -> dg.MaterializeResult:
        config_id, period = config_and_period(partitions, context.partition_key)
        config = settings.configs()[config_id]
        if not isinstance(config, ReleaseConfig):
            return not_applicable("aggregate (DP) release: no measurements released")
        source, release = _release_files(settings, config_id, period)
        result = quality_groups.evaluate(source, release, config, settings.schema())
        metadata = as_metadata(result.metadata(), result.figures())
        metadata["cells"] = markdown_table(result.table())
        return dg.MaterializeResult(metadata=metadata)

    @dg.asset(name="elina_answers", partitions_def=partitions, deps=[released], group_name="utility",
              kinds={"duckdb"}, code_version=code_version(),
              description="Elina's three questions (gaming or streaming; apps to prioritise; overloaded "
                          "stations) answered from the base data and from the release, with same_answer.")
    def elina_answers(context: dg.AssetExecutionContext, settings: DshSettings) -> dg.MaterializeResult:
        config_id, period = config_and_period(partitions, context.partition_key)
        config = settings.configs()[config_id]
        if isinstance(config, DpCountsConfig):
            return _dp_answers(settings, config, period)
        source, release = _release_files(settings, config_id, period)
        result = elina.answer(source, release, config, settings.schema())
        return dg.MaterializeResult(metadata=as_metadata(result.metadata(), result.figures()))

    return [quality_groups_asset, elina_answers]


def _dp_answers(settings: DshSettings, config: DpCountsConfig, period: str) -> dg.MaterializeResult:
    """Q2 from the DP release's own slow-download table; Q1 and Q3 need medians or stations it does not hold."""
    q2_path, source = settings.layout.dp_q2(config.id, period), settings.layout.source(period)
    base = elina.base_q2_ranking(source, settings.schema())
    base_answers = elina.answer(source, source, _AS_IS, settings.schema()).figures()
    if q2_path.exists():
        table = pq.read_table(q2_path, columns=["app", "share"]).to_pylist()
        q2 = elina.q2_from_shares(base, {row["app"]: row["share"] for row in table})
    else:
        q2 = {"base": [e["app"] for e in base[:elina.TOP]], "release": "unavailable: no Q2 table in this release",
              "same_answer": False, "rank_correlation": None}
    figures = {
        "q1": {"base": base_answers["q1"]["base"],
               "release": "unavailable: the DP release publishes counts, not latency medians", "same_answer": False},
        "q2": q2,
        "q3": {"available": False, "base": base_answers["q3"]["base"], "release": elina.STATION_REMOVED,
               "same_answer": False},
    }
    note = ("Q2 compares the base ranking (share of slow 5G download rows, slow = download <= the source's p10) "
            "with the DP ranking (share of 5G subscribers with a download <= the public slow threshold).")
    return dg.MaterializeResult(metadata=as_metadata({"note": note}, figures))

