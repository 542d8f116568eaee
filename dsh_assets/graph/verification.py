"""`dsh verify` over a home: what the instance and the ledgers recorded, handed to the core's verdicts."""

from __future__ import annotations

import dagster as dg

from dsh_assets.core.evidence.metrics import RELEASE_ASSET
from dsh_assets.core.files import DigestBook
from dsh_assets.core.publication.ledger import PublicationLedger
from dsh_assets.core.retention import DeletionRecord
from dsh_assets.core.verification import (
    QuarantinedRelease,
    Verification,
    verify_publication,
    verify_release,
    verify_report,
)
from dsh_assets.graph.history import recorded_metadata
from dsh_assets.graph.instance import open_instance
from dsh_assets.graph.partitions import config_and_period, release_key
from dsh_assets.graph.release.checks import RELEASE_INPUT_FIELDS, release_files
from dsh_assets.graph.resources import DshHome

REPORT_ASSET = dg.AssetKey("release_report")


def verify_home(home: DshHome) -> Verification:
    """Every release the home's instance recorded or its folders hold, every publication of the ledger, every
    report."""
    layout, configs = home.layout, home.configs()
    deletions = DeletionRecord(layout.ledger)
    on_disk = {(config_id, period) for config_id, period, _ in layout.released_files()}
    verdicts, book = [], DigestBook()
    with open_instance(layout) as instance:
        recorded = {config_and_period(key) for name in sorted(set(RELEASE_ASSET.values()))
                    for key in instance.get_materialized_partitions(dg.AssetKey(name))}
        for config_id, period in sorted(recorded | on_disk):
            config = configs.get(config_id)
            asset = dg.AssetKey(RELEASE_ASSET[config.kind] if config is not None else "released")
            history = recorded_metadata(instance, asset, str(release_key(config_id, period)), limit=2)
            verdicts.append(verify_release(layout, config_id, period, release_files(home, config_id, period),
                                           history, RELEASE_INPUT_FIELDS, deletions, book))
        reports = [verify_report(layout, period, recorded_metadata(instance, REPORT_ASSET, period, limit=1)[0],
                                 book) for period in sorted(instance.get_materialized_partitions(REPORT_ASSET))]
    records = PublicationLedger(layout.ledger).entries() if layout.ledger.is_file() else []
    return Verification(releases=[v for v in verdicts if not isinstance(v, QuarantinedRelease)],
                        published=[verify_publication(layout, record, book) for record in records], reports=reports,
                        quarantined=[v for v in verdicts if isinstance(v, QuarantinedRelease)])
