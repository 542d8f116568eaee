"""`dsh purge` deletes exactly what is due, and `dsh verify` then tells a deleted file from a lost one.

The home is built by hand (real files, a real publication ledger entry, materialisations recorded in
the home's Dagster instance) rather than by a `dsh run`, which takes minutes.
"""

from __future__ import annotations

import pytest

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import dagster as dg

from dsh_assets.core.layout import Layout
from dsh_assets.core.publication.ledger import PublicationLedger
from dsh_assets.graph.instance import open_instance
from dsh_assets.graph.partitions import release_key
from dsh_assets_tests.conftest import clean_environ
from dsh_assets_tests.tables import sha256_file

pytestmark = pytest.mark.e2e

DSH = [sys.executable, "-m", "dsh_assets.cli"]
OLD, UNPUBLISHED = "2026-10-01", "2026-10-02"
CONFIG = "c15_window_k5_noise5"
QUARANTINED = "id_removal"


def stored(layout: Layout) -> set[str]:
    """Every file of the home but the Dagster instance and the ledger file."""
    return {str(p) for p in layout.home.rglob("*")
            if p.is_file() and layout.dagster_home not in p.parents and p != layout.ledger}


def dsh(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*DSH, *args], capture_output=True, text=True, timeout=300, env=clean_environ())


def _write(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(f"content of {path.name} {path.parent.name}".encode())
    return path


def make_home(root: Path) -> Layout:
    """Sources and candidates of an old published period and an old unpublished one, each release recorded."""
    layout = Layout(root)
    instance = open_instance(layout)
    for period in (OLD, UNPUBLISHED):
        _write(layout.source(period))
        released = _write(layout.released(CONFIG, period))
        instance.report_runless_asset_event(dg.AssetMaterialization(
            asset_key="released", partition=str(release_key(CONFIG, period)),
            metadata={"path": str(released), "sha256": sha256_file(released)}))
    quarantined = _write(layout.quarantine_dir(QUARANTINED, OLD) / "released.parquet")
    (layout.quarantine_dir(QUARANTINED, OLD) / "quarantine.json").write_text(
        json.dumps({"failed_checks": ["no_identifiers"], "files": {}}))
    instance.report_runless_asset_event(dg.AssetMaterialization(
        asset_key="released", partition=str(release_key(QUARANTINED, OLD)),
        metadata={"path": str(layout.released(QUARANTINED, OLD)), "sha256": sha256_file(quarantined)}))
    published = _write(layout.published(OLD))
    PublicationLedger(layout.ledger).record("source-sha", OLD, CONFIG, sha256_file(published), "rows", published,
                                            now=dt.datetime(2026, 10, 2, 1))
    return layout


def test_purge_deletes_exactly_what_is_due_and_verify_reports_it_deleted(tmp_path):
    layout = make_home(tmp_path / "home")
    home = str(layout.home)
    quarantine = layout.quarantine_dir(QUARANTINED, OLD)
    due = {str(layout.source(OLD)), str(layout.source(UNPUBLISHED)), str(layout.released(CONFIG, OLD)),
           str(quarantine / "released.parquet"), str(quarantine / "quarantine.json")}
    before = stored(layout)

    dry = dsh("purge", "--home", home, "--today", "2026-11-30", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert {row["path"] for row in json.loads(dry.stdout)["due"]} == due
    assert stored(layout) == before  # --dry-run deletes nothing

    done = dsh("purge", "--home", home, "--today", "2026-11-30", "--json")
    assert done.returncode == 0, done.stderr
    deleted = json.loads(done.stdout)["deleted"]
    assert {row["path"] for row in deleted} == due
    assert all(row["state"] == "deleted" and len(row["sha256"]) == 64 for row in deleted)
    assert stored(layout) == before - due  # exactly what was due
    assert layout.published(OLD).is_file() and layout.released(CONFIG, UNPUBLISHED).is_file()

    again = dsh("purge", "--home", home, "--today", "2026-11-30")
    assert again.returncode == 0 and "0 file(s) deleted" in again.stdout

    verified = dsh("verify", "--home", home, "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    report = json.loads(verified.stdout)
    statuses = {(row["config"], row["period"]): row["status"] for row in report["releases"]}
    assert statuses == {(CONFIG, OLD): "deleted", (CONFIG, UNPUBLISHED): "ok", (QUARANTINED, OLD): "deleted"}
    assert {row["path"] for row in report["deleted"]} == {str(layout.released(CONFIG, OLD)),
                                                          str(quarantine / "quarantine.json")}
    assert report["ok"] and [row["status"] for row in report["published"]] == ["ok"]

    layout.released(CONFIG, UNPUBLISHED).unlink()  # lost, not deleted by retention
    lost = dsh("verify", "--home", home, "--json")
    assert lost.returncode == 1
    statuses = {(row["config"], row["period"]): row["status"] for row in json.loads(lost.stdout)["releases"]}
    assert statuses[CONFIG, OLD] == "deleted" and statuses[CONFIG, UNPUBLISHED].startswith("MISSING")
    text = dsh("verify", "--home", home)
    assert "2 deleted file(s)" in text.stdout and f"{CONFIG}|{UNPUBLISHED}: MISSING" in text.stderr
