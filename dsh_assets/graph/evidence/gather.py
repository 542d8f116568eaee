"""The figures each configuration's assets recorded, read back from the instance for the scorecard and the report."""

import dagster as dg

from dsh_assets.core.evidence.metrics import assets_of_kind
from dsh_assets.graph.history import recorded_metadata
from dsh_assets.graph.partitions import release_key


def recorded_evidence(instance: dg.DagsterInstance, config, period: str) -> tuple[dict, dict[str, dict]]:
    """(the latest metadata of the release asset, asset name -> latest metadata) of one configuration and period."""
    key = str(release_key(config.id, period))
    release_asset, *_ = names = assets_of_kind(config.kind)
    latest = {}
    for name in names:
        history = recorded_metadata(instance, dg.AssetKey(name), key, limit=1)
        if history:
            latest[name] = history[0]
    return latest.get(release_asset, {}), latest
