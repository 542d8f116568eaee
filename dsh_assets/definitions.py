"""The Dagster definitions, built by one factory so tests and the `dsh` command get their own home."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import dagster as dg

from dsh_assets.core.periods import check_cadence
from dsh_assets.core.release.configs import DP_COUNTS, DP_SYNTHETIC, ROW_RELEASE, period_configs, sweep_configs
from dsh_assets.graph.automation import AFTER_ITS_INPUTS
from dsh_assets.graph.dp.assets import build_dp_lab_asset, build_dp_q1_asset, build_dp_release_asset
from dsh_assets.graph.dp.checks import build_budget_check
from dsh_assets.graph.dp.synthetic import build_dp_synthetic_release_asset
from dsh_assets.graph.evidence.assets import build_report_assets
from dsh_assets.graph.memory import MEMORY_HOOKS
from dsh_assets.graph.partitions import RELEASE_JOBS, release_partitions
from dsh_assets.graph.privacy.assets import (
    build_dp_audit_asset,
    build_dp_synthetic_privacy_asset,
    build_pairs_asset,
    build_privacy_assets,
)
from dsh_assets.graph.publication.assets import build_dp_published_asset, build_published_asset
from dsh_assets.graph.release.assets import build_released_asset, build_source_asset
from dsh_assets.graph.release.checks import build_min_cell_size_check, build_release_file_checks, build_source_checks
from dsh_assets.graph.resources import DshHome, resources_for
from dsh_assets.graph.retention import RETENTION_JOB, build_retention_asset
from dsh_assets.graph.schedules import (
    build_automation_sensor,
    build_period_schedule,
    build_release_sensor,
    build_retention_schedule,
)
from dsh_assets.graph.utility.assets import build_dp_answers_asset, build_utility_assets
from dsh_assets.settings import environment_settings

SWEEP_JOB = "sweep_job"


def settings_from_environment(**overrides) -> DshHome:
    """The home's settings as the environment gives them (``settings.environment_settings``), ``overrides`` (not
    None) taking precedence."""
    values = environment_settings()
    values.update({key: value for key, value in overrides.items() if value is not None})
    return DshHome(**values)


def check_names(checks: list[dg.AssetChecksDefinition]) -> tuple[str, ...]:
    return tuple(key.name for check in checks for key in check.check_keys)


@dataclass(frozen=True)
class KindGraph:
    """One kind of release in the graph: its release asset, the evidence that follows it, and their checks."""

    release: dg.AssetsDefinition
    evidence: list[dg.AssetsDefinition]
    checks: list[dg.AssetChecksDefinition]
    period_evidence: list[dg.AssetsDefinition]
    """Evidence over every candidate of a period at once (period partitions)."""
    publication: list[dg.AssetsDefinition]
    """A kind whose every release is published on its own criteria (DP count tables): that publication, which
    its release job runs after the evidence."""

    @property
    def blocking_checks(self) -> tuple[str, ...]:
        return check_names(self.checks)

    @property
    def per_release(self) -> list[dg.AssetsDefinition]:
        """Every asset of one release partition, in the order its job runs them."""
        return [self.release, *self.evidence, *self.publication]


def _row_level_graph(config_ids, source) -> KindGraph:
    released = build_released_asset(release_partitions(config_ids), source)
    return KindGraph(released, [*build_privacy_assets(released), *build_utility_assets(released)],
                     [*build_release_file_checks(released), build_min_cell_size_check(released)],
                     [build_pairs_asset(released)], [])


def _dp_graph(config_ids, source) -> KindGraph:
    dp_release = build_dp_release_asset(release_partitions(config_ids), source)
    q1 = build_dp_q1_asset(dp_release)
    evidence = [build_dp_lab_asset(dp_release), q1, build_dp_answers_asset(dp_release, q1),
                build_dp_audit_asset(dp_release)]
    checks = [*build_release_file_checks(dp_release), build_budget_check(dp_release)]
    return KindGraph(dp_release, evidence, checks, [],
                     [build_dp_published_asset(dp_release, evidence, check_names(checks))])


def _dp_synthetic_graph(config_ids, source) -> KindGraph:
    release = build_dp_synthetic_release_asset(release_partitions(config_ids), source)
    evidence = [build_dp_synthetic_privacy_asset(release), *build_utility_assets(release, prefix="dp_synthetic_")]
    checks = [*build_release_file_checks(release), build_budget_check(release, DP_SYNTHETIC)]
    return KindGraph(release, evidence, checks, [], [])


_GRAPH_OF_KIND = {ROW_RELEASE: _row_level_graph, DP_COUNTS: _dp_graph, DP_SYNTHETIC: _dp_synthetic_graph}


def _sweep_job(graphs: dict, configs: dict) -> list[dg.UnresolvedAssetJobDefinition]:
    """The sweep's points, each a candidate with its full evidence, launched from the UI (pick the sweep_* configs
    and a period); `dsh sweep` runs the same assets for every point."""
    points = sweep_configs(configs)
    if not points or ROW_RELEASE not in graphs:
        return []
    graph = graphs[ROW_RELEASE]
    return [dg.define_asset_job(SWEEP_JOB, selection=dg.AssetSelection.assets(graph.release, *graph.evidence),
                                description="Evaluate points of the [sweep.*] tables ("
                                            + ", ".join(points) + "): choose them and a period as partitions.",
                                hooks=MEMORY_HOOKS)]
"""Each kind of release and how its part of the graph is built."""

def build_defs(settings: DshHome | None = None) -> dg.Definitions:
    settings = settings or settings_from_environment()
    check_cadence(settings.cadence)
    configs = settings.configs()
    settings.attacker()  # a malformed [attacker] table is refused before anything runs
    source = build_source_asset()
    graphs = {}
    for kind, build in _GRAPH_OF_KIND.items():
        config_ids = [config_id for config_id, config in configs.items() if config.kind == kind]
        if config_ids:
            graph = build(config_ids, source)
            # Under the daemon the evidence follows a release materialised on its own; a release job run
            # materialises release and evidence together, so nothing repeats.
            graphs[kind] = replace(graph, **{part: [asset.with_attributes(automation_condition=AFTER_ITS_INPUTS)
                                                    for asset in getattr(graph, part)]
                                             for part in ("evidence", "publication")})
    per_release = [asset for graph in graphs.values() for asset in graph.per_release]
    period_evidence = [asset for graph in graphs.values() for asset in graph.period_evidence]
    blocking = {kind: graph.blocking_checks for kind, graph in graphs.items()}
    published = build_published_asset(per_release, next(iter(period_evidence), None), blocking)
    report = build_report_assets(per_release, period_evidence, blocking)
    release_jobs = [dg.define_asset_job(RELEASE_JOBS[kind], selection=dg.AssetSelection.assets(*graph.per_release),
                                        hooks=MEMORY_HOOKS)
                    for kind, graph in graphs.items()]
    source_job = dg.define_asset_job("source_job", selection=dg.AssetSelection.assets(source), hooks=MEMORY_HOOKS)
    publication_job = dg.define_asset_job("publication_job",
                                          selection=dg.AssetSelection.assets(*period_evidence, published),
                                          hooks=MEMORY_HOOKS)
    report_job = dg.define_asset_job("report_job", selection=dg.AssetSelection.assets(*report), hooks=MEMORY_HOOKS)
    retention = build_retention_asset()
    retention_job = dg.define_asset_job(RETENTION_JOB, selection=dg.AssetSelection.assets(retention),
                                        hooks=MEMORY_HOOKS)
    return dg.Definitions(
        assets=[source, *per_release, *period_evidence, published, *report, retention],
        asset_checks=[*build_source_checks(source), *(check for graph in graphs.values() for check in graph.checks)],
        jobs=[source_job, *release_jobs, *_sweep_job(graphs, configs), publication_job, report_job, retention_job],
        schedules=[build_period_schedule(source_job, settings), build_retention_schedule(retention_job)],
        sensors=[build_release_sensor(source.key, release_jobs, period_configs(configs), settings.sensor_interval),
                 build_automation_sensor(settings.sensor_interval)],
        resources=resources_for(settings),
        # A run the UI or the daemon launches runs its steps in one process, as `dsh run`'s do: a release is then
        # hashed once per run, not once per step, and no step pays a fresh interpreter's imports.
        executor=dg.in_process_executor,
    )


@functools.cache
def _default_defs() -> dg.Definitions:
    return build_defs()


def __getattr__(name: str):
    """``defs`` (what workspace.yaml names for `dagster dev`), built on first use and once: importing this module
    for `dsh run`, which builds its own for its home, builds nothing."""
    if name == "defs":
        return _default_defs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
