"""Asset checks of the source and of the row-level release: blocking where a bad release must not flow on.

`checksum_drift` and `no_identifiers` guard every kind of release (`build_release_file_checks` is
shared with the DP release); `min_cell_size` guards the row-level one. Each examines the file on disk.
A release check that fails quarantines its candidate (core/publication/quarantine.py): a release
that failed a blocking check never stays where releases are expected.
"""

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core.files import DigestBook
from dsh_assets.core.provenance import checksum_problems
from dsh_assets.core.publication.quarantine import quarantine
from dsh_assets.core.release.guards import find_identifiers, min_cell_size
from dsh_assets.core.release.schema import SourceError
from dsh_assets.core.release.source import validate_stored_source
from dsh_assets.graph.history import recorded_metadata
from dsh_assets.graph.partitions import config_and_period
from dsh_assets.graph.records import outcome_recorded
from dsh_assets.graph.resources import DshHome

RELEASE_INPUT_FIELDS = ("source_sha256", "config_hash", "code_version", "seed_id", "ledger_reservation")
"""Equal in two materialisations: the bytes must be equal too (a DP re-publication is a new reservation)."""
SOURCE_INPUT_FIELDS = ("input_sha256", "code_version")


def release_files(home: DshHome, config_id: str, period: str) -> list:
    """(path, recorded key) of every file a release writes: the table and, for a DP release, its Q2 table."""
    layout = home.layout
    return [(layout.released(config_id, period), "sha256"), (layout.dp_q2(config_id, period), "q2_sha256")]


def checksum_drift(instance: dg.DagsterInstance, asset_key: dg.AssetKey, partition_key: str, files,
                   input_fields: tuple[str, ...], book: DigestBook) -> dg.AssetCheckResult:
    """The files against their recorded SHA-256, and against the previous materialisation with the same inputs."""
    history = recorded_metadata(instance, asset_key, partition_key, limit=2)
    compared, problems = checksum_problems(files, history, input_fields, book)
    metadata = dict(compared)
    if problems:
        metadata["problem"] = "; ".join(problems)
    return dg.AssetCheckResult(passed=not problems, metadata=metadata)


def quarantined_if_failed(home: DshHome, config_id: str, period: str, check: str, result: dg.AssetCheckResult,
                          holds_identifiers: bool = False) -> dg.AssetCheckResult:
    """A failed release check moves the candidate to quarantine (deletes it if it holds identifiers)."""
    if result.passed or not home.layout.candidate_dir(config_id, period).is_dir():
        return result
    problem = result.metadata.get("problem")
    problem = problem.value if problem is not None else f"{check} failed"
    note = quarantine(home.layout, config_id, period, check, str(problem), holds_identifiers=holds_identifiers)
    return dg.AssetCheckResult(passed=False, metadata={**result.metadata, "quarantined": dg.MetadataValue.path(str(note))})


def build_source_checks(source: dg.AssetsDefinition) -> list[dg.AssetChecksDefinition]:
    partitions = source.partitions_def

    @dg.asset_check(asset=source, name="source_schema", blocking=True, partitions_def=partitions,
                    description="The stored source has every declared column with its type, valid values and row ids 0..n-1.")
    @outcome_recorded
    def source_schema(context: dg.AssetCheckExecutionContext, home: DshHome,
                      digests: dg.ResourceParam[DigestBook]) -> dg.AssetCheckResult:
        path = home.layout.source(context.partition_key)
        try:
            summary = validate_stored_source(path, home.schema(), digests)
        except SourceError as error:
            return dg.AssetCheckResult(passed=False, metadata={"problem": str(error)})
        return dg.AssetCheckResult(passed=True, metadata={"rows": summary.rows, "subscribers": summary.subscribers})

    @dg.asset_check(asset=source, name="source_checksum_drift", blocking=True, partitions_def=partitions,
                    description="The stored source file still has the SHA-256 recorded when it was materialised.")
    @outcome_recorded
    def source_checksum_drift(context: dg.AssetCheckExecutionContext, home: DshHome,
                              digests: dg.ResourceParam[DigestBook]) -> dg.AssetCheckResult:
        files = [(home.layout.source(context.partition_key), "sha256")]
        return checksum_drift(context.instance, source.key, context.partition_key, files, SOURCE_INPUT_FIELDS,
                              digests)

    return [source_schema, source_checksum_drift]


def build_release_file_checks(release_asset: dg.AssetsDefinition) -> list[dg.AssetChecksDefinition]:
    """`checksum_drift` and `no_identifiers` on a release asset of either kind."""
    partitions = release_asset.partitions_def

    @dg.asset_check(asset=release_asset, name="checksum_drift", blocking=True, partitions_def=partitions,
                    description="The released files match their recorded SHA-256, and the previous materialisation's "
                                "when source, configuration, code and seed are unchanged.")
    @outcome_recorded
    def release_checksum_drift(context: dg.AssetCheckExecutionContext, home: DshHome,
                               digests: dg.ResourceParam[DigestBook]) -> dg.AssetCheckResult:
        config_id, period = config_and_period(context.partition_key)
        result = checksum_drift(context.instance, release_asset.key, context.partition_key,
                                release_files(home, config_id, period), RELEASE_INPUT_FIELDS, digests)
        return quarantined_if_failed(home, config_id, period, "checksum_drift", result)

    @dg.asset_check(asset=release_asset, name="no_identifiers", blocking=True, partitions_def=partitions,
                    description="No identifier column and no MSISDN/IMSI/IMEI-shaped value in any string column.")
    @outcome_recorded
    def no_identifiers(context: dg.AssetCheckExecutionContext, home: DshHome) -> dg.AssetCheckResult:
        config_id, period = config_and_period(context.partition_key)
        path = home.layout.released(config_id, period)
        unreadable = _unreadable(path)
        if unreadable:
            return quarantined_if_failed(home, config_id, period, "no_identifiers", unreadable)
        finding = find_identifiers(path, home.schema())
        metadata = {"identifier_columns": ", ".join(finding.identifier_columns) or "none",
                    "identifier_shaped_values": dg.MetadataValue.json(finding.shaped_values)}
        if not finding.clean:
            shaped = {column: count for column, count in finding.shaped_values.items() if count}
            metadata["problem"] = (f"identifier columns: {metadata['identifier_columns']}; identifier-shaped values "
                                   f"per column: {shaped or 'none'}")
        return quarantined_if_failed(home, config_id, period, "no_identifiers",
                                     dg.AssetCheckResult(passed=finding.clean, metadata=metadata),
                                     holds_identifiers=not finding.clean)

    return [release_checksum_drift, no_identifiers]


def build_min_cell_size_check(released: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    partitions = released.partitions_def

    @dg.asset_check(asset=released, name="min_cell_size", blocking=True, partitions_def=partitions,
                    description="Every released (time, province, app, radio) cell has at least k rows (and a microaggregation's "
                                "group size), where k is configured.")
    @outcome_recorded
    def released_min_cell_size(context: dg.AssetCheckExecutionContext, home: DshHome) -> dg.AssetCheckResult:
        config_id, period = config_and_period(context.partition_key)
        config, schema = home.configs()[config_id], home.schema()
        k = config.cell_minimum
        if k == 0:
            return dg.AssetCheckResult(passed=True, metadata={"k": 0, "note": "no k configured for this release"})
        path = home.layout.released(config_id, period)
        unreadable = _unreadable(path)
        if unreadable:
            return quarantined_if_failed(home, config_id, period, "min_cell_size", unreadable)
        cell_columns = [name for name in schema.categorical_qis if name not in config.dropped_columns(schema)]
        smallest, cells = min_cell_size(path, cell_columns)
        passed = smallest is None or smallest >= k
        metadata = {"k": k, "min_cell_size": smallest if smallest is not None else 0, "cells": cells}
        if not passed:
            metadata["problem"] = f"a released cell has {smallest} rows, under k = {k}"
        return quarantined_if_failed(home, config_id, period, "min_cell_size",
                                     dg.AssetCheckResult(passed=passed, metadata=metadata))

    return released_min_cell_size


def _unreadable(path) -> dg.AssetCheckResult | None:
    """A failed check (not a crashed step) when the release is missing or not a readable Parquet file."""
    try:
        pq.read_metadata(path)
    except (OSError, pa.ArrowInvalid) as error:
        return dg.AssetCheckResult(passed=False, metadata={"problem": f"{path} is unreadable: {error}"})
    return None
