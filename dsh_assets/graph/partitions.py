"""Partitions: release periods (registered as their source arrives) and release configurations (from the data file).

The period dimension is dynamic: the instance holds exactly the periods that have a source, so the UI's
partitions grid shows no backlog of empty periods. What a period is (its window, the one before it)
follows from its key and the cadence alone (`core/periods.py`).
"""

from __future__ import annotations

import dagster as dg

from dsh_assets.core.release.configs import DP_COUNTS, DP_SYNTHETIC, ROW_RELEASE

PERIODS = dg.DynamicPartitionsDefinition(name="period")
"""Every period that has a source: added by the schedule and by `dsh run` before the source is materialised."""
CRON = {"daily": "15 0 * * *", "weekly": "15 0 * * 1", "monthly": "15 0 1 * *"}
BY_PERIOD = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="period")
"""A period's assets depend on every configuration's partition of that period."""
RELEASE_JOBS = {ROW_RELEASE: "release_job", DP_COUNTS: "dp_release_job", DP_SYNTHETIC: "dp_synthetic_job"}
"""The job that materialises a release of each kind (config.kind) with its evidence, one partition per run."""


def register_period(instance: dg.DagsterInstance, period: str) -> bool:
    """Add ``period`` to the instance's periods; True when it was not there yet."""
    if instance.has_dynamic_partition(PERIODS.name, period):
        return False
    instance.add_dynamic_partitions(PERIODS.name, [period])
    return True


def release_partitions(config_ids) -> dg.MultiPartitionsDefinition:
    return dg.MultiPartitionsDefinition({"config": dg.StaticPartitionsDefinition(list(config_ids)), "period": PERIODS})


def release_key(config_id: str, period: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"config": config_id, "period": period})


_RELEASE_KEYS = release_partitions(())
"""The dimensions of every release partition key, whatever configurations declare them."""


def config_and_period(partition_key) -> tuple[str, str]:
    """(config id, period) of a release partition key: a run's, or one the instance stores as a string."""
    keys = _RELEASE_KEYS.get_partition_key_from_str(str(partition_key)).keys_by_dimension
    return keys["config"], keys["period"]
