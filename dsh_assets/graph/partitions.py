"""Partitions: release periods (daily by default) and release configurations (from the data file)."""

from __future__ import annotations

import datetime as dt

import dagster as dg

from dsh_assets.core.release.configs import DP_COUNTS, ROW_RELEASE

CADENCES = ("daily", "weekly", "monthly")
DEFAULT_CADENCE = "daily"
DEFAULT_FIRST_PERIOD = "2026-11-01"
CRON = {"daily": "15 0 * * *", "weekly": "15 0 * * 1", "monthly": "15 0 1 * *"}
BY_PERIOD = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="period")
"""A period's assets depend on every configuration's partition of that period."""
RELEASE_JOBS = {ROW_RELEASE: "release_job", DP_COUNTS: "dp_release_job"}
"""The job that materialises a release of each kind (config.kind) with its evidence, one partition per run."""


def period_partitions(cadence: str = DEFAULT_CADENCE, first_period: str = DEFAULT_FIRST_PERIOD) -> dg.TimeWindowPartitionsDefinition:
    if cadence not in CADENCES:
        raise ValueError(f"release period cadence must be one of {CADENCES}, not {cadence!r}")
    if cadence == "daily":
        return dg.DailyPartitionsDefinition(start_date=first_period)
    if cadence == "weekly":
        return dg.WeeklyPartitionsDefinition(start_date=first_period)
    return dg.MonthlyPartitionsDefinition(start_date=first_period)


def release_partitions(config_ids, periods: dg.TimeWindowPartitionsDefinition) -> dg.MultiPartitionsDefinition:
    return dg.MultiPartitionsDefinition({"config": dg.StaticPartitionsDefinition(list(config_ids)), "period": periods})


def release_key(config_id: str, period: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"config": config_id, "period": period})


def config_and_period(partitions: dg.MultiPartitionsDefinition, partition_key) -> tuple[str, str]:
    keys = partitions.get_partition_key_from_str(str(partition_key)).keys_by_dimension
    return keys["config"], keys["period"]


def period_dimension(partitions: dg.MultiPartitionsDefinition) -> dg.TimeWindowPartitionsDefinition:
    return partitions.get_partitions_def_for_dimension("period")


def previous_period(periods: dg.TimeWindowPartitionsDefinition, period: str) -> str | None:
    window = periods.get_prev_partition_window(periods.time_window_for_partition_key(period).start)
    return None if window is None else periods.get_partition_key_for_timestamp(window.start.timestamp())


def plain_window(time_window: dg.TimeWindow) -> tuple[dt.datetime, dt.datetime]:
    """A partition's time window as plain UTC datetimes [start, end), for the Dagster-free core."""
    return tuple(dt.datetime.fromtimestamp(moment.timestamp(), dt.timezone.utc)
                 for moment in (time_window.start, time_window.end))
