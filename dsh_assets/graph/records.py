"""Every partitioned asset returns through `materialized`, and every blocking check through `outcome_recorded`:
Dagster records the metadata (and the check's result) for the UI, and the home's record store (core/records.py)
keeps the same plain values, made from the one result, for the assets that read them later."""

from __future__ import annotations

import functools
import json

import dagster as dg

from dsh_assets.core.records import Record
from dsh_assets.graph.resources import DshHome


def materialized(context: dg.AssetExecutionContext, home: DshHome, metadata: dict,
                 data_version: dg.DataVersion | None = None, handed_over=None) -> dg.MaterializeResult | dg.Output:
    """``handed_over``: the asset's output for the assets that take it as an input (its IO manager keeps it)."""
    home.records().write(Record(
        asset=context.asset_key.to_user_string(),
        partition=str(context.partition_key),
        run_id=context.run.run_id,
        code_version=context.assets_def.code_versions_by_key.get(context.asset_key),
        values=plain_values(metadata),
    ))
    if handed_over is not None:
        return dg.Output(handed_over, metadata=metadata, data_version=data_version)
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


SUCCEEDED, FAILED, EXECUTION_FAILED = "SUCCEEDED", "FAILED", "EXECUTION_FAILED"
NOT_RUN = "not run on this materialisation"


def check_record(check: dg.AssetCheckKey) -> str:
    """The record store's name of a check's outcomes: beside its asset's records."""
    return f"{check.asset_key.to_user_string()}/checks/{check.name}"


def outcome_recorded(check_fn):
    """A blocking check's outcome kept in the record store, with the run of the materialisation it checked (the
    asset's record when the check ran): the publication reads whether a release's checks passed on these very
    bytes there. A check that raises is recorded as EXECUTION_FAILED, never left with an earlier outcome.
    Put under ``@dg.asset_check``, which calls the check with its context and its resources by name; the check
    takes ``home``."""

    @functools.wraps(check_fn)
    def recording(context: dg.AssetCheckExecutionContext, **resources) -> dg.AssetCheckResult:
        home: DshHome = resources["home"]
        (spec,) = context.check_specs
        partition = str(context.partition_key)
        target = home.records().latest(spec.asset_key.to_user_string(), partition)

        def keep(outcome: str) -> None:
            home.records().write(Record(asset=check_record(spec.key), partition=partition, run_id=context.run.run_id,
                                        code_version=None, values={"outcome": outcome, "checked_run_id": (
                                            target.run_id if target is not None else None)}))

        try:
            result = check_fn(context, **resources)
        except BaseException:
            keep(EXECUTION_FAILED)
            raise
        keep(SUCCEEDED if result.passed else FAILED)
        return result

    return recording


def check_outcomes(home: DshHome, asset_key: dg.AssetKey, check_names, partition_key,
                   materialised_by: str) -> dict[str, str]:
    """Check name -> the outcome of its latest execution on the partition, SUCCEEDED or FAILED (or
    EXECUTION_FAILED), when that execution checked the materialisation of run ``materialised_by``; NOT_RUN
    when it checked an earlier one (the asset was materialised again without its checks) or never ran."""
    outcomes = {}
    for name in check_names:
        record = home.records().latest(check_record(dg.AssetCheckKey(asset_key, name)), str(partition_key))
        checked_this = record is not None and record.values.get("checked_run_id") == materialised_by
        outcomes[name] = record.values["outcome"] if checked_this else NOT_RUN
    return outcomes
