"""Asset checks: blocking where a bad release must not flow on. Each examines the file on disk."""


import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core.release.configs import ReleaseConfig
from dsh_assets.core.files import sha256_file
from dsh_assets.core.release.guards import find_identifiers, min_cell_size
from dsh_assets.core.release.schema import SourceError
from dsh_assets.core.release.source import validate_stored_source
from dsh_assets.graph.history import recorded_metadata
from dsh_assets.graph.partitions import config_and_period
from dsh_assets.graph.resources import DshSettings

_INPUT_FIELDS = ("source_sha256", "config_hash", "code_version", "seed_id", "ledger_reservation")
"""Equal in two materialisations: the bytes must be equal too (a DP re-publication is a new reservation)."""


def checksum_drift(instance: dg.DagsterInstance, asset_key: dg.AssetKey, partition_key: str, path,
                   input_fields: tuple[str, ...]) -> dg.AssetCheckResult:
    """The file against its recorded SHA-256, and against the previous materialisation with the same inputs."""
    history = recorded_metadata(instance, asset_key, partition_key, limit=2)
    if not history:
        return dg.AssetCheckResult(passed=False, metadata={"problem": "no recorded materialisation"})
    latest = history[0]
    on_disk = sha256_file(path) if path.exists() else "missing"
    metadata = {"recorded_sha256": latest["sha256"], "on_disk_sha256": on_disk}
    problems = []
    if on_disk != latest["sha256"]:
        problems.append("file on disk differs from the recorded SHA-256")
    if len(history) > 1:
        previous = history[1]
        same_inputs = all(previous.get(field) == latest.get(field) for field in input_fields)
        metadata["previous_sha256"] = previous.get("sha256")
        metadata["previous_same_inputs"] = same_inputs
        if same_inputs and previous.get("sha256") != latest["sha256"]:
            problems.append("same inputs and code as the previous materialisation, different bytes")
    if problems:
        metadata["problem"] = "; ".join(problems)
    return dg.AssetCheckResult(passed=not problems, metadata=metadata)


def build_source_checks(source: dg.AssetsDefinition) -> list[dg.AssetChecksDefinition]:
    partitions = source.partitions_def

    @dg.asset_check(asset=source, name="source_schema", blocking=True, partitions_def=partitions,
                    description="The stored source has every declared column with its type, valid values and row ids 0..n-1.")
    def source_schema(context: dg.AssetCheckExecutionContext, settings: DshSettings) -> dg.AssetCheckResult:
        path = settings.layout.source(context.partition_key)
        try:
            summary = validate_stored_source(path, settings.schema())
        except SourceError as error:
            return dg.AssetCheckResult(passed=False, metadata={"problem": str(error)})
        return dg.AssetCheckResult(passed=True, metadata={"rows": summary.rows, "subscribers": summary.subscribers})

    @dg.asset_check(asset=source, name="source_checksum_drift", blocking=True, partitions_def=partitions,
                    description="The stored source file still has the SHA-256 recorded when it was materialised.")
    def source_checksum_drift(context: dg.AssetCheckExecutionContext, settings: DshSettings) -> dg.AssetCheckResult:
        return checksum_drift(context.instance, source.key, context.partition_key,
                              settings.layout.source(context.partition_key), ("input_sha256", "code_version"))

    return [source_schema, source_checksum_drift]


def build_released_checks(released: dg.AssetsDefinition) -> list[dg.AssetChecksDefinition]:
    partitions = released.partitions_def

    @dg.asset_check(asset=released, name="checksum_drift", blocking=True, partitions_def=partitions,
                    description="The released file matches its recorded SHA-256, and the previous materialisation's "
                                "when source, configuration, code and seed are unchanged.")
    def released_checksum_drift(context: dg.AssetCheckExecutionContext, settings: DshSettings) -> dg.AssetCheckResult:
        config_id, period = config_and_period(partitions, context.partition_key)
        return checksum_drift(context.instance, released.key, context.partition_key,
                              settings.layout.released(config_id, period), _INPUT_FIELDS)

    @dg.asset_check(asset=released, name="no_identifiers", blocking=True, partitions_def=partitions,
                    description="No identifier column and no MSISDN/IMSI/IMEI-shaped value in any string column.")
    def no_identifiers(context: dg.AssetCheckExecutionContext, settings: DshSettings) -> dg.AssetCheckResult:
        config_id, period = config_and_period(partitions, context.partition_key)
        path = settings.layout.released(config_id, period)
        unreadable = _unreadable(path)
        if unreadable:
            return unreadable
        finding = find_identifiers(path, settings.schema())
        return dg.AssetCheckResult(
            passed=finding.clean,
            metadata={"identifier_columns": ", ".join(finding.identifier_columns) or "none",
                      "identifier_shaped_values": dg.MetadataValue.json(finding.shaped_values)},
        )

    @dg.asset_check(asset=released, name="min_cell_size", blocking=True, partitions_def=partitions,
                    description="Every released (time, province, app, radio) cell has at least k rows, where k is configured.")
    def released_min_cell_size(context: dg.AssetCheckExecutionContext, settings: DshSettings) -> dg.AssetCheckResult:
        config_id, period = config_and_period(partitions, context.partition_key)
        config, schema = settings.configs()[config_id], settings.schema()
        if not isinstance(config, ReleaseConfig):
            return dg.AssetCheckResult(passed=True, metadata={"note": "aggregate (DP) release: no released rows"})
        if config.k == 0:
            return dg.AssetCheckResult(passed=True, metadata={"k": 0, "note": "no k configured for this release"})
        path = settings.layout.released(config_id, period)
        unreadable = _unreadable(path)
        if unreadable:
            return unreadable
        cell_columns = [name for name in schema.categorical_qis if name not in config.dropped_columns(schema)]
        smallest, cells = min_cell_size(path, cell_columns)
        passed = smallest is None or smallest >= config.k
        return dg.AssetCheckResult(passed=passed, metadata={"k": config.k, "min_cell_size": smallest if smallest is not None else 0,
                                                            "cells": cells})

    return [released_checksum_drift, no_identifiers, released_min_cell_size]



def _unreadable(path) -> dg.AssetCheckResult | None:
    """A failed check (not a crashed step) when the release is missing or not a readable Parquet file."""
    try:
        pq.read_metadata(path)
    except (OSError, pa.ArrowInvalid) as error:
        return dg.AssetCheckResult(passed=False, metadata={"problem": f"{path} is unreadable: {error}"})
    return None
