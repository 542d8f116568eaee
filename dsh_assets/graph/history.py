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


def latest_check_outcomes(instance: dg.DagsterInstance, asset_key: dg.AssetKey, check_names, partition_key: str,
                          materialised_by: str) -> dict[str, str]:
    """Check name -> outcome of its latest execution on the partition's materialisation by run
    ``materialised_by`` (the latest, as the record store holds it).

    "SUCCEEDED" or "FAILED"; "not run on this materialisation" when the latest execution checked an
    earlier materialisation (the asset was materialised again without its checks), or never ran.
    Check outcomes are Dagster's own records: they are read from its event log.
    """
    from dagster._core.event_api import PartitionKeyFilter

    keys = [dg.AssetCheckKey(asset_key, name) for name in check_names]
    latest = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        keys, partition_filter=PartitionKeyFilter(key=str(partition_key)))
    outcomes = {}
    for key in keys:
        record = latest.get(key)
        evaluation = record.event.dagster_event.event_specific_data if record and record.event else None
        target = getattr(evaluation, "target_materialization_data", None)
        if record is None or target is None or target.run_id != materialised_by:
            outcomes[key.name] = NOT_RUN
        else:
            outcomes[key.name] = record.status.value
    return outcomes


NOT_RUN = "not run on this materialisation"
