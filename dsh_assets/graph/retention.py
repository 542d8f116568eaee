"""The `retention` asset: one daily purge of what `[retention]` makes due (a thin shell over core/retention.py).

Its materialisation's metadata lists every file deleted. Each deleted candidate release is also
recorded on its own partition as an `AssetObservation` ("deleted", with the path and SHA-256), so the
partition's history in the UI shows the deletion. An observation, not a materialisation: a
materialisation would become the partition's latest recorded metadata, and `dsh verify` and the
`checksum_drift` check compare files with that.
"""

import datetime as dt

import dagster as dg

from dsh_assets.core.evidence.metrics import RELEASE_ASSET
from dsh_assets.core.retention import CANDIDATE, DeletionRecord, due, purge
from dsh_assets.graph.partitions import release_key
from dsh_assets.graph.resources import DshHome, Publications
from dsh_assets.graph.refusals import refusing

RETENTION_JOB = "retention_job"


def build_retention_asset() -> dg.AssetsDefinition:
    @dg.asset(name="retention", group_name="operations",
              description="Delete what the [retention] periods of the releases file make due (sources, inputs, "
                          "candidates of long-published periods, quarantine), each deletion recorded with its "
                          "SHA-256 in the home's ledger file. Published releases, reports and ledgers are kept.")
    @refusing
    def retention(context: dg.AssetExecutionContext, home: DshHome, publications: Publications) -> dg.MaterializeResult:
        layout = home.layout
        today = dt.datetime.now(dt.timezone.utc).date()
        policy = home.releases().retention
        deleted = purge(layout, due(layout, policy, publications.ledger().entries(), today),
                        DeletionRecord(layout.ledger))
        configs = home.configs()
        for entry in deleted:
            if entry.kind == CANDIDATE and entry.config_id in configs:
                context.log_event(dg.AssetObservation(
                    asset_key=RELEASE_ASSET[configs[entry.config_id].kind],
                    partition=str(release_key(entry.config_id, entry.period)),
                    metadata={"deleted": entry.path, "deleted_sha256": entry.sha256, "reason": entry.reason}))
        return dg.MaterializeResult(metadata={
            "today": today.isoformat(),
            "deleted_files": len(deleted),
            "deleted": dg.MetadataValue.json([entry.as_json() for entry in deleted]),
        })

    return retention
