"""The Dagster definitions, built by one factory so tests and the `dsh` command get their own home."""

from __future__ import annotations

import os

import dagster as dg

from dsh_assets.core.release.configs import load_configs
from dsh_assets.core.layout import default_home
from dsh_assets.core.release.schema import load_schema
from dsh_assets.graph.release.assets import build_released_asset, build_source_asset
from dsh_assets.graph.release.checks import build_released_checks, build_source_checks
from dsh_assets.graph.dp.assets import build_budget_check, build_dp_lab_asset
from dsh_assets.graph.partitions import DEFAULT_CADENCE, DEFAULT_FIRST_PERIOD, period_partitions, release_partitions
from dsh_assets.graph.privacy.assets import build_privacy_assets
from dsh_assets.graph.evidence.assets import build_report_assets
from dsh_assets.graph.resources import DshSettings
from dsh_assets.graph.schedules import build_period_schedule, build_release_sensor
from dsh_assets.graph.utility.assets import build_utility_assets

SOURCE_ENV = "DSH_SOURCE"
CADENCE_ENV = "DSH_PERIOD_CADENCE"
FIRST_PERIOD_ENV = "DSH_FIRST_PERIOD"


def settings_from_environment(**overrides) -> DshSettings:
    values = {
        "home": str(default_home()),
        "source_path": os.environ.get(SOURCE_ENV, ""),
        "columns_file": os.environ.get("DSH_COLUMNS", ""),
        "releases_file": os.environ.get("DSH_RELEASES", ""),
        "cadence": os.environ.get(CADENCE_ENV, DEFAULT_CADENCE),
    }
    values.update({key: value for key, value in overrides.items() if value is not None})
    return DshSettings(**values)


def build_defs(settings: DshSettings | None = None, cadence: str | None = None, first_period: str | None = None) -> dg.Definitions:
    settings = settings or settings_from_environment()
    cadence = cadence or settings.cadence
    periods = period_partitions(cadence, first_period or os.environ.get(FIRST_PERIOD_ENV, DEFAULT_FIRST_PERIOD))
    configs = load_configs(settings.releases_file or None, load_schema(settings.columns_file or None))
    source = build_source_asset(periods)
    released = build_released_asset(release_partitions(configs, periods), source)
    evidence = [*build_privacy_assets(released), *build_utility_assets(released), build_dp_lab_asset(released)]
    report = build_report_assets(released, evidence, periods)
    source_job = dg.define_asset_job("source_job", selection=dg.AssetSelection.assets(source))
    release_job = dg.define_asset_job("release_job", selection=dg.AssetSelection.assets(released, *evidence))
    report_job = dg.define_asset_job("report_job", selection=dg.AssetSelection.assets(*report))
    return dg.Definitions(
        assets=[source, released, *evidence, *report],
        asset_checks=[*build_source_checks(source), *build_released_checks(released), build_budget_check(released)],
        jobs=[source_job, release_job, report_job],
        schedules=[build_period_schedule(source_job, periods, cadence)],
        sensors=[build_release_sensor(source.key, release_job, list(configs))],
        resources={"settings": settings},
    )


defs = build_defs()
