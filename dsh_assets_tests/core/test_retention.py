"""Retention: which files are due on a given day, and their durable deletion records."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from dsh_assets.core.layout import Layout
from dsh_assets.core.publication.ledger import PublicationLedger
from dsh_assets.core.release.configs import ConfigError
from dsh_assets.core.retention import (
    DELETED,
    DELETING,
    DeletionRecord,
    RetentionPolicy,
    due,
    load_retention,
    parse_retention,
    purge,
    was_deleted,
)
from dsh_assets_tests.tables import sha256_file

TODAY = dt.date(2026, 11, 30)
DEAD_PID = 2**22 + 1
"""Above Linux's largest pid (2^22): no process has it."""
OLD, RECENT, UNPUBLISHED = "2026-10-01", "2026-11-28", "2026-10-02"
POLICY = RetentionPolicy(source_days=30, input_days=30, candidate_days_after_publication=7, quarantine_days=30)


def _write(path: Path, content: bytes = b"bytes") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content + str(path).encode())
    return path


def make_home(root: Path) -> tuple[Layout, PublicationLedger]:
    """Old and recent sources, inputs, candidates (a published and an unpublished old period), a quarantine."""
    layout = Layout(root)
    for period in (OLD, RECENT, UNPUBLISHED):
        _write(layout.source(period))
        _write(layout.synthetic_input(period))
        _write(layout.released("c15", period))
        _write(layout.released("dp", period))
        _write(layout.dp_q2("dp", period))
    _write(layout.quarantine_dir("id_removal", OLD) / "quarantine.json", b"{}")
    _write(layout.quarantine_dir("id_removal", RECENT) / "quarantine.json", b"{}")
    _write(layout.candidate_dir("c15", OLD) / f".released.parquet.{os.getpid()}.tmp")  # a live writer's temporary
    _write(layout.candidate_dir("dp", OLD) / f".released.parquet.{DEAD_PID}.tmp")  # a killed writer's temporary
    _write(layout.source(OLD).with_name(f".source.parquet.{DEAD_PID}.bucket3.tmp"))  # a killed ingest's bucket
    ledger = PublicationLedger(layout.ledger)
    for period, published_on in ((OLD, dt.datetime(2026, 10, 2, 1)), (RECENT, dt.datetime(2026, 11, 29, 1))):
        published = _write(layout.published(period))
        ledger.record("src" + period, period, "c15", sha256_file(published), "rows", published, now=published_on)
    return layout, ledger


def test_due_is_old_sources_inputs_quarantine_and_candidates_of_long_published_periods(tmp_path):
    layout, ledger = make_home(tmp_path)
    items = due(layout, POLICY, ledger.entries(), TODAY)
    got = sorted((item.kind, item.period, item.config_id, item.path.relative_to(tmp_path).as_posix())
                 for item in items)
    assert got == sorted([
        ("source", OLD, None, f"source/{OLD}/source.parquet"),
        ("source", UNPUBLISHED, None, f"source/{UNPUBLISHED}/source.parquet"),
        ("input", OLD, None, f"inputs/synthetic_{OLD}.parquet"),
        ("input", UNPUBLISHED, None, f"inputs/synthetic_{UNPUBLISHED}.parquet"),
        ("candidate", OLD, "c15", f"candidates/c15/{OLD}/released.parquet"),
        ("candidate", OLD, "dp", f"candidates/dp/{OLD}/released.parquet"),
        ("candidate", OLD, "dp", f"candidates/dp/{OLD}/q2_slow_5g.parquet"),
        ("quarantine", OLD, "id_removal", f"quarantine/id_removal/{OLD}/quarantine.json"),
    ])
    assert not any("published" in item.path.parts or item.path == layout.ledger for item in items)


def test_candidates_are_due_days_after_the_first_publication_not_the_period(tmp_path):
    layout, ledger = make_home(tmp_path)

    def on(day):
        return {item.period for item in due(layout, POLICY, ledger.entries(), day) if item.kind == "candidate"}

    assert on(dt.date(2026, 10, 8)) == set()  # published 2026-10-02: 6 days
    assert on(dt.date(2026, 10, 9)) == {OLD}
    assert on(dt.date(2026, 12, 6)) == {OLD, RECENT}  # never the unpublished period


def test_a_published_dp_table_is_never_due_and_starts_no_clock(tmp_path):
    """A DP table published on its own criteria is kept a year later, and its period's candidates wait for the
    period's row-level publication."""
    layout, ledger = make_home(tmp_path)
    tables = [_write(layout.dp_published("dp", UNPUBLISHED)),
              _write(layout.dp_published("dp", UNPUBLISHED).with_name("q2_slow_5g.parquet"))]
    ledger.record("src" + UNPUBLISHED, UNPUBLISHED, "dp", sha256_file(tables[0]), "dp_counts", tables[0],
                  now=dt.datetime(2026, 10, 3, 1))
    a_year_later = due(layout, POLICY, ledger.entries(), dt.date(2027, 10, 2))
    assert not any(item.period == UNPUBLISHED and item.kind == "candidate" for item in a_year_later)
    deleted = purge(layout, a_year_later, DeletionRecord(layout.ledger))
    assert deleted and all(table.is_file() for table in tables)


def test_a_key_left_out_keeps_those_files(tmp_path):
    layout, ledger = make_home(tmp_path)
    assert due(layout, RetentionPolicy(), ledger.entries(), dt.date(2030, 1, 1)) == []
    kinds = {item.kind for item in due(layout, RetentionPolicy(source_days=0), ledger.entries(), TODAY)}
    assert kinds == {"source"}


def test_purge_deletes_each_due_file_and_records_it(tmp_path):
    layout, ledger = make_home(tmp_path)
    items = due(layout, POLICY, ledger.entries(), TODAY)
    digests = {item.path: sha256_file(item.path) for item in items}
    record = DeletionRecord(layout.ledger)
    done = purge(layout, items, record, now=dt.datetime(2026, 11, 30, 2))
    assert {Path(entry.path) for entry in done} == set(digests)
    for entry in done:
        assert not Path(entry.path).exists()
        assert entry.sha256 == digests[Path(entry.path)] and entry.state == DELETED
        assert entry.deleted_at.startswith("2026-11-30T02:00")
    assert not layout.candidate_dir("dp", OLD).exists()  # emptied folders go, a killed writer's temporary with them
    assert not layout.source(OLD).parent.exists()  # and a killed ingest's scratch bucket (raw rows) with its source
    assert layout.candidate_dir("c15", OLD).is_dir()  # a hidden temporary is left alone
    assert layout.published(OLD).is_file() and layout.released("c15", UNPUBLISHED).is_file()
    assert due(layout, POLICY, ledger.entries(), TODAY) == []
    assert was_deleted(record, layout.released("dp", OLD), digests[layout.released("dp", OLD)]) is not None
    assert was_deleted(record, layout.released("dp", OLD), "other bytes") is None


def test_a_deleting_record_counts_only_when_the_file_is_gone(tmp_path):
    """A purge that crashed between its record and its unlink: the file is still there, so not deleted."""
    layout, ledger = make_home(tmp_path)
    item = next(i for i in due(layout, POLICY, ledger.entries(), TODAY) if i.kind == "source")
    record = DeletionRecord(layout.ledger)
    record.deleting(item, sha256_file(item.path))
    assert was_deleted(record, item.path) is None
    item.path.unlink()  # crashed after the unlink, before "deleted"
    assert was_deleted(record, item.path).state == DELETING
    record.completed()
    assert was_deleted(record, item.path).state == DELETED


def test_the_packaged_releases_file_declares_retention():
    policy = load_retention()
    assert policy.source_days == 30 and policy.candidate_days_after_publication == 7


@pytest.mark.parametrize("table, message", [
    ({"published_days": 3}, "unknown key 'published_days'"),
    ({"source_days": -1}, "whole number of days"),
    ({"source_days": 1.5}, "whole number of days"),
    ({"source_days": True}, "whole number of days"),
])
def test_malformed_retention_is_refused(table, message):
    with pytest.raises(ConfigError, match=message):
        parse_retention({"retention": table})
