"""The daily `retention_schedule` runs the `retention` asset, which purges through core/retention.py."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg

from dsh_assets.core.layout import Layout
from dsh_assets.core.publication.ledger import PublicationLedger
from dsh_assets.core.retention import DeletionRecord
from dsh_assets.graph.partitions import release_key
from dsh_assets.graph.retention import RETENTION_JOB
from dsh_assets_tests.conftest import make_defs
from dsh_assets_tests.tables import sha256_file

OLD = "2020-01-01"  # older than every declared retention, whatever today is
CONFIG = "c15_window_k5_noise5"


def _write(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(path.name.encode())
    return path


def test_retention_schedule_runs_the_retention_job_daily(tmp_path):
    defs = make_defs(tmp_path)
    schedule = defs.resolve_schedule_def("retention_schedule")
    assert schedule.job_name == RETENTION_JOB and schedule.cron_schedule == "30 1 * * *"
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    asset = defs.resolve_assets_def("retention")
    assert asset.group_names_by_key[dg.AssetKey("retention")] == "operations"


def test_the_retention_asset_deletes_what_is_due_and_marks_the_partition_deleted(tmp_path):
    layout = Layout(tmp_path)
    source, released = _write(layout.source(OLD)), _write(layout.released(CONFIG, OLD))
    kept = _write(layout.released(CONFIG, "2020-01-02"))  # never published
    published = _write(layout.published(OLD))
    PublicationLedger(layout.ledger).record("src", OLD, CONFIG, sha256_file(published), "rows", published,
                                            now=dt.datetime(2020, 1, 2))
    digest = sha256_file(released)
    defs = make_defs(tmp_path)
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def(RETENTION_JOB).execute_in_process(instance=instance)
        assert result.success
        metadata = result.asset_materializations_for_node("retention")[0].metadata
        assert metadata["deleted_files"].value == 2
        observations = instance.fetch_observations(dg.AssetRecordsFilter(
            asset_key=dg.AssetKey("released"), asset_partitions=[str(release_key(CONFIG, OLD))]), limit=5).records
        assert [o.asset_observation.metadata["deleted_sha256"].value for o in observations] == [digest]
    assert not source.exists() and not released.exists()
    assert kept.is_file() and published.is_file()
    assert {entry.path for entry in DeletionRecord(layout.ledger).entries()} == {str(source), str(released)}
