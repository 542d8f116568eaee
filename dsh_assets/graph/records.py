"""Every partitioned asset returns through `materialized`: Dagster records the metadata for the UI, and the home's
record store (core/records.py) keeps the same plain values for the assets that read them later."""

from __future__ import annotations

import json

import dagster as dg

from dsh_assets.core.records import Record
from dsh_assets.graph.resources import DshHome


def materialized(context: dg.AssetExecutionContext, home: DshHome, metadata: dict,
                 data_version: dg.DataVersion | None = None) -> dg.MaterializeResult:
    home.records().write(Record(
        asset=context.asset_key.to_user_string(),
        partition=str(context.partition_key),
        run_id=context.run.run_id,
        code_version=context.assets_def.code_versions_by_key.get(context.asset_key),
        values=plain_values(metadata),
    ))
    return dg.MaterializeResult(metadata=metadata, data_version=data_version)


def plain_values(metadata: dict) -> dict:
    """Each value as the event log hands it back: a JSON value's contents, a path's string, a number. Dagster's
    own `dagster/` keys and the tables shown in the UI are left to the event log."""
    values = {}
    for key, value in metadata.items():
        plain = value.value if isinstance(value, dg.MetadataValue) else value
        if key.startswith("dagster/") or isinstance(plain, dg.MetadataValue):
            continue
        values[key] = plain
    return json.loads(json.dumps(values))


def recorded(home: DshHome, asset_key: dg.AssetKey, partition_key) -> Record | None:
    return home.records().latest(asset_key.to_user_string(), str(partition_key))
