"""Quarantine on a small home: files moved (or deleted when they hold identifiers) and a note of every failure."""

import datetime as dt
import hashlib

from dsh_assets.core.layout import Layout
from dsh_assets.core.publication.quarantine import quarantine, quarantine_note

NOW = dt.datetime(2026, 11, 21, 6, 0, tzinfo=dt.timezone.utc)


def _candidate(layout: Layout, config_id: str = "c15", period: str = "2026-11-20") -> bytes:
    content = b"PAR1 not really a release"
    layout.released(config_id, period).parent.mkdir(parents=True)
    layout.released(config_id, period).write_bytes(content)
    return content


def test_a_failed_check_moves_the_candidate_and_a_second_adds_its_line(tmp_path):
    layout = Layout(tmp_path)
    content = _candidate(layout)
    quarantine(layout, "c15", "2026-11-20", "min_cell_size", "a cell of 2 rows, under k = 5", now=NOW)
    quarantine(layout, "c15", "2026-11-20", "checksum_drift", "differs", now=NOW + dt.timedelta(hours=1))
    note = quarantine_note(layout, "c15", "2026-11-20")
    moved = layout.quarantine_dir("c15", "2026-11-20") / "released.parquet"
    assert not layout.candidate_dir("c15", "2026-11-20").exists() and moved.read_bytes() == content
    assert note["failed_checks"] == {"min_cell_size": "a cell of 2 rows, under k = 5", "checksum_drift": "differs"}
    assert note["files"]["released.parquet"] == {"sha256": hashlib.sha256(content).hexdigest(),
                                                 "moved_at": NOW.isoformat(), "path": str(moved)}
    assert note["quarantined_at"] == NOW.isoformat()  # the first failure's time


def test_a_candidate_holding_identifiers_is_deleted_and_only_its_digest_kept(tmp_path):
    layout = Layout(tmp_path)
    content = _candidate(layout)
    quarantine(layout, "c15", "2026-11-20", "no_identifiers", "MSISDN-shaped values", holds_identifiers=True, now=NOW)
    entry = quarantine_note(layout, "c15", "2026-11-20")["files"]["released.parquet"]
    assert entry == {"sha256": hashlib.sha256(content).hexdigest(), "moved_at": NOW.isoformat(),
                     "deleted": "it held identifiers"}
    assert not any(layout.quarantine_dir("c15", "2026-11-20").glob("*.parquet"))
    assert quarantine_note(layout, "c99", "2026-11-20") is None
