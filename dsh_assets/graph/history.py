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
