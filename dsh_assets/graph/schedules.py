"""Each new release period: the schedule registers the period and materialises its source, then a sensor
releases every configuration.

Dagster runs one partitions definition per run, so the period-partitioned source and the
configuration x period releases cannot share a run. The sensor fires on each new source
materialisation, which puts the source strictly before the releases of its period.

The sensor's first tick (no cursor) sees every past source materialisation. So that starting the
UI on a home that already holds releases launches nothing, a configuration is skipped when its
release partition's record (the home's record store) was made from the same stored source bytes
(`source_stored_sha256` equals the source materialisation's `sha256`).
"""

from pathlib import Path

import dagster as dg

from dsh_assets.core.evidence.metrics import RELEASE_ASSET
from dsh_assets.core.periods import latest_ended_period
from dsh_assets.graph.partitions import CRON, RELEASE_JOBS, register_period, release_key
from dsh_assets.graph.records import recorded
from dsh_assets.graph.resources import DshHome


def build_period_schedule(source_job, settings: DshHome) -> dg.ScheduleDefinition:
    @dg.schedule(name="release_period_schedule", cron_schedule=CRON[settings.cadence], job=source_job,
                 default_status=dg.DefaultScheduleStatus.RUNNING,
                 description="Register the period that has just closed and materialise its source.")
    def release_period_schedule(context: dg.ScheduleEvaluationContext):
        period = latest_ended_period(context.scheduled_execution_time, settings.cadence)
        if settings.source_path and not Path(settings.source_path).is_file():
            return dg.SkipReason(f"no source for period {period}: {settings.source_path} does not exist")
        # A schedule cannot request partitions as a sensor does: the period is added before it is requested.
        register_period(context.instance, period)
        return dg.RunRequest(run_key=f"source|{period}", partition_key=period)

    return release_period_schedule


def released_from_source(home: DshHome, config, period: str, source_sha256: str | None) -> bool:
    """True when the recorded release of (config, period) was made from the stored source with this SHA-256."""
    if source_sha256 is None:
        return False
    record = recorded(home, dg.AssetKey(RELEASE_ASSET[config.kind]), release_key(config.id, period))
    return record is not None and record.values.get("source_stored_sha256") == source_sha256


def build_release_sensor(source_key: dg.AssetKey, release_jobs, configs: dict, interval: int) -> dg.SensorDefinition:
    @dg.sensor(name="release_every_config", jobs=release_jobs, minimum_interval_seconds=interval,
               default_status=dg.DefaultSensorStatus.RUNNING,
               description="On each new source materialisation, release every configuration for its period "
                           "(skipping those already released from the same source bytes).")
    def release_every_config(context: dg.SensorEvaluationContext, home: DshHome):
        after = int(context.cursor) if context.cursor else None
        records = context.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=source_key, after_storage_id=after), limit=100, ascending=True
        ).records
        requests, already = [], []
        for record in records:
            period = record.partition_key
            source_metadata = record.asset_materialization.metadata if record.asset_materialization else {}
            source_sha256 = source_metadata["sha256"].value if "sha256" in source_metadata else None
            for config_id, config in configs.items():
                if released_from_source(home, config, period, source_sha256):
                    already.append(f"{config_id}|{period}")
                    continue
                requests.append(dg.RunRequest(
                    run_key=f"{config_id}|{period}|{record.storage_id}",
                    job_name=RELEASE_JOBS[config.kind],
                    partition_key=release_key(config_id, period),
                ))
        cursor = str(records[-1].storage_id) if records else context.cursor
        if already and not requests:
            return dg.SensorResult(skip_reason=dg.SkipReason(
                f"already released from the same source bytes: {', '.join(already)}"), cursor=cursor)
        return dg.SensorResult(run_requests=requests, cursor=cursor)

    return release_every_config


def build_automation_sensor(interval: int) -> dg.AutomationConditionSensorDefinition:
    """Enabled, unlike Dagster's default one (stopped until toggled in the UI): without it no automation
    condition is evaluated, and a release materialised from the UI would leave its evidence stale."""
    return dg.AutomationConditionSensorDefinition(
        "evidence_follows_releases", target=dg.AssetSelection.all(), default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=interval,
        description="Evaluates the automation conditions (graph/automation.py): the evidence, publication, scorecard "
                    "and report of a period follow a release materialised on its own.")


RETENTION_CRON = "30 1 * * *"


def build_retention_schedule(retention_job) -> dg.ScheduleDefinition:
    """Daily, enabled: the `retention` asset deletes what [retention] makes due (core/retention.py)."""
    return dg.ScheduleDefinition(name="retention_schedule", cron_schedule=RETENTION_CRON, job=retention_job,
                                 default_status=dg.DefaultScheduleStatus.RUNNING,
                                 description="Delete what the [retention] periods make due, recording each deletion.")
