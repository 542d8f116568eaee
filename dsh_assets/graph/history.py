"""Read back what earlier materialisations recorded, per partition."""

from __future__ import annotations

import dagster as dg


def recorded_metadata(instance: dg.DagsterInstance, asset_key: dg.AssetKey, partition_key: str, limit: int = 2) -> list[dict]:
    """Metadata of the latest ``limit`` materialisations of one partition, newest first, as plain values."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=[str(partition_key)]), limit=limit
    ).records
    return [
        {key: value.value for key, value in record.asset_materialization.metadata.items()}
        for record in records
        if record.asset_materialization is not None
    ]


def latest_check_outcomes(instance: dg.DagsterInstance, asset_key: dg.AssetKey, check_names, partition_key: str
                          ) -> dict[str, str | None]:
    """Check name -> status of its latest execution on one partition ("SUCCEEDED", "FAILED", "PLANNED"; None: never)."""
    from dagster._core.event_api import PartitionKeyFilter

    keys = [dg.AssetCheckKey(asset_key, name) for name in check_names]
    latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        keys, partition_filter=PartitionKeyFilter(key=str(partition_key)))
    return {key.name: (latest[key].status.value if key in latest else None) for key in keys}
