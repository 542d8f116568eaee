"""`dsh verify`'s verdicts on a small home: a file as recorded, changed, lost, deleted by retention, or quarantined,
and a copied home verified where it now is."""

import hashlib
import os
from pathlib import Path

from dsh_assets.core import files
from dsh_assets.core.files import SHA256, DigestBook
from dsh_assets.core.layout import QUARANTINE_NOTE, Layout
from dsh_assets.core.publication.ledger import PublicationLedger
from dsh_assets.core.publication.quarantine import quarantine
from dsh_assets.core.release.configs import ROW_RELEASE
from dsh_assets.core.retention import CANDIDATE, QUARANTINE, DeletionRecord, Due, purge
from dsh_assets.core.verification import (
    DELETED,
    OK,
    PublicationVerdict,
    QuarantinedRelease,
    ReleaseVerdict,
    ReportVerdict,
    Verification,
    verify_publication,
    verify_release,
    verify_report,
)

PERIOD = "2026-11-20"
CONFIG = "c15"


def stored(path: Path, content: bytes = b"PAR1 the release") -> str:
    """``content`` written at ``path``; its SHA-256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return hashlib.sha256(content).hexdigest()


def release_files(layout: Layout) -> list[tuple[Path, str]]:
    """What a release writes, with the key of its recorded SHA-256: the table, and a DP release's Q2 table."""
    return [(layout.released(CONFIG, PERIOD), "sha256"), (layout.dp_q2(CONFIG, PERIOD), "q2_sha256")]


def verdict(layout: Layout, history: list[dict], book: DigestBook | None = None):
    return verify_release(layout, CONFIG, PERIOD, release_files(layout), history, ("source_sha256",),
                          DeletionRecord(layout.ledger), book or DigestBook())


def deleted_by_retention(layout: Layout, kind: str, *paths: Path):
    """``paths`` purged as retention purges them; their deletions."""
    return purge(layout, [Due(kind, PERIOD, CONFIG, path, f"{kind} kept 7 day(s)") for path in paths],
                 DeletionRecord(layout.ledger))


# -- a stored release -----------------------------------------------------------------------------

def test_a_release_as_recorded_is_ok(tmp_path):
    layout = Layout(tmp_path)
    digest = stored(layout.released(CONFIG, PERIOD))
    assert verdict(layout, [{"sha256": digest}]) == ReleaseVerdict(CONFIG, PERIOD, layout.released(CONFIG, PERIOD),
                                                                   digest, digest, OK)


def test_changed_bytes_are_drift_and_a_lost_file_is_missing(tmp_path):
    layout = Layout(tmp_path)
    path = layout.released(CONFIG, PERIOD)
    recorded = stored(path)
    changed = stored(path, b"PAR1 other rows")
    drift = verdict(layout, [{"sha256": recorded}])
    assert drift.status == f"DRIFT: {path} on disk differs from the recorded SHA-256"
    assert (drift.sha256, drift.recorded_sha256) == (changed, recorded)
    path.unlink()
    missing = verdict(layout, [{"sha256": recorded}])
    assert missing.status == f"MISSING: {path} is missing" and missing.sha256 is None and missing.deletions == ()


def test_a_release_no_materialisation_recorded_is_said_so(tmp_path):
    layout = Layout(tmp_path)
    digest = stored(layout.released(CONFIG, PERIOD))
    unrecorded = verdict(layout, [])
    assert (unrecorded.status, unrecorded.sha256, unrecorded.recorded_sha256) == (
        "no recorded materialisation", digest, None)


def test_a_release_deleted_by_retention_is_deleted_and_says_by_which_deletion(tmp_path):
    layout = Layout(tmp_path)
    digest = stored(layout.released(CONFIG, PERIOD))
    deletions = deleted_by_retention(layout, CANDIDATE, layout.released(CONFIG, PERIOD))
    gone = verdict(layout, [{"sha256": digest}])
    assert (gone.status, gone.sha256, gone.deletions) == (DELETED, None, tuple(deletions))


def test_a_release_remade_after_its_deletion_then_lost_is_missing(tmp_path):
    """The deletion is of the earlier bytes: the ones recorded last were lost, not deleted."""
    layout = Layout(tmp_path)
    path = layout.released(CONFIG, PERIOD)
    stored(path)
    deleted_by_retention(layout, CANDIDATE, path)
    remade = stored(path, b"PAR1 the release, made again")
    path.unlink()
    assert verdict(layout, [{"sha256": remade}]).status == f"MISSING: {path} is missing"


def test_a_dp_release_is_deleted_only_when_every_file_it_recorded_is(tmp_path):
    layout = Layout(tmp_path)
    table, q2 = layout.released(CONFIG, PERIOD), layout.dp_q2(CONFIG, PERIOD)
    history = [{"sha256": stored(table), "q2_sha256": stored(q2, b"PAR1 the Q2 table")}]
    deleted_by_retention(layout, CANDIDATE, table)
    assert verdict(layout, history).status == f"MISSING: {table} is missing"  # its Q2 table is still there
    q2.unlink()
    assert verdict(layout, history).status == f"MISSING: {table} is missing; {q2} is missing"  # lost, not deleted
    stored(q2, b"PAR1 the Q2 table")
    deleted_by_retention(layout, CANDIDATE, q2)
    both = verdict(layout, history)
    assert both.status == DELETED and [Path(d.path) for d in both.deletions] == [table, q2]


# -- quarantine -----------------------------------------------------------------------------------

def test_a_quarantined_candidate_is_listed_apart_with_its_note(tmp_path):
    layout = Layout(tmp_path)
    digest = stored(layout.released(CONFIG, PERIOD))
    quarantine(layout, CONFIG, PERIOD, "min_cell_size", "a cell of 2 rows, under k = 5")
    listed = verdict(layout, [{"sha256": digest}])
    assert isinstance(listed, QuarantinedRelease)
    assert (listed.config, listed.period, listed.failed_checks) == (CONFIG, PERIOD,
                                                                   {"min_cell_size": "a cell of 2 rows, under k = 5"})
    assert listed.files["released.parquet"]["sha256"] == digest


def test_a_candidate_made_again_after_its_quarantine_is_verified_as_a_release(tmp_path):
    layout = Layout(tmp_path)
    stored(layout.released(CONFIG, PERIOD))
    quarantine(layout, CONFIG, PERIOD, "min_cell_size", "a cell of 2 rows, under k = 5")
    again = stored(layout.released(CONFIG, PERIOD), b"PAR1 made again")
    assert verdict(layout, [{"sha256": again}]).status == OK


def test_a_quarantine_deleted_by_retention_explains_the_missing_release(tmp_path):
    layout = Layout(tmp_path)
    digest = stored(layout.released(CONFIG, PERIOD))
    quarantine(layout, CONFIG, PERIOD, "min_cell_size", "a cell of 2 rows, under k = 5")
    folder = layout.quarantine_dir(CONFIG, PERIOD)
    deletions = deleted_by_retention(layout, QUARANTINE, folder / "released.parquet", folder / QUARANTINE_NOTE)
    gone = verdict(layout, [{"sha256": digest}])
    assert (gone.status, gone.deletions) == (DELETED, (deletions[1],))  # the note's deletion


# -- publications and reports ---------------------------------------------------------------------

def test_a_publication_is_verified_where_the_copied_home_holds_it(tmp_path):
    layout = Layout(tmp_path / "copy")
    digest = stored(layout.published(PERIOD))
    # recorded in the home it was published in; the last "published" of the path is the home's folder
    elsewhere = Path("/srv/published/home") / layout.published(PERIOD).relative_to(layout.home)
    record = PublicationLedger(layout.ledger).record("source-digest", PERIOD, CONFIG, digest, ROW_RELEASE, elsewhere)
    assert verify_publication(layout, record, DigestBook()) == PublicationVerdict(
        CONFIG, PERIOD, layout.published(PERIOD), digest, OK)
    stored(layout.published(PERIOD), b"PAR1 other rows")
    assert verify_publication(layout, record, DigestBook()).status == (
        f"DRIFT: {layout.published(PERIOD)} differs from its recorded sha256")
    layout.published(PERIOD).unlink()
    assert verify_publication(layout, record, DigestBook()).status == (
        f"MISSING: {layout.published(PERIOD)} was recorded and is gone")


def test_a_report_is_checked_against_its_recorded_digest_when_one_was_recorded(tmp_path):
    layout = Layout(tmp_path / "copy")
    report = layout.report_dir(PERIOD) / "report.html"
    digest = stored(report, b"<html>the report</html>")
    recorded = {"path": str(Path("/srv/home") / report.relative_to(layout.home)), "sha256": digest}
    assert verify_report(layout, PERIOD, recorded, DigestBook()) == ReportVerdict(PERIOD, report, OK)
    report.unlink()
    assert verify_report(layout, PERIOD, recorded, DigestBook()).status == f"MISSING: {report} was recorded and is gone"
    assert verify_report(layout, PERIOD, {"path": recorded["path"]}, DigestBook()).status == OK  # nothing to check


def test_a_path_outside_any_home_folder_is_kept_as_recorded(tmp_path):
    outside = tmp_path / "elsewhere" / "report.html"
    stored(outside, b"<html></html>")
    assert verify_report(Layout(tmp_path / "home"), PERIOD, {"path": str(outside)}, DigestBook()).path == outside


def test_each_file_is_read_through_the_book_handed_in(tmp_path, monkeypatch):
    """A publication hard-linked to its candidate is that candidate's inode: the book a writer told its digest
    answers for both, so verifying reads neither file again."""
    layout = Layout(tmp_path)
    digest = stored(layout.released(CONFIG, PERIOD))
    layout.published(PERIOD).parent.mkdir(parents=True)
    os.link(layout.released(CONFIG, PERIOD), layout.published(PERIOD))
    book = DigestBook()
    book.keep(layout.published(PERIOD), SHA256, digest)  # as the writer that renamed it into place does
    reads, read = [], files._read_sha256
    monkeypatch.setattr(files, "_read_sha256", lambda path: reads.append(path) or read(path))
    record = PublicationLedger(layout.ledger).record("source-digest", PERIOD, CONFIG, digest, ROW_RELEASE,
                                                     layout.published(PERIOD))
    assert verdict(layout, [{"sha256": digest}], book).status == OK
    assert verify_publication(layout, record, book).status == OK
    assert reads == []


# -- the verification -----------------------------------------------------------------------------

def test_problems_are_what_is_neither_ok_nor_deleted(tmp_path):
    layout = Layout(tmp_path)
    digest = stored(layout.released(CONFIG, PERIOD))
    deletions = deleted_by_retention(layout, CANDIDATE, layout.released(CONFIG, PERIOD))
    releases = [verdict(layout, [{"sha256": digest}]),
                ReleaseVerdict("c17", PERIOD, tmp_path / "c17.parquet", None, "ab", "MISSING: c17.parquet is missing"),
                ReleaseVerdict("id_removal", PERIOD, tmp_path / "id.parquet", "cd", "cd", OK)]
    published = [PublicationVerdict(CONFIG, PERIOD, tmp_path / "p.parquet", "ef", "DRIFT: p.parquet differs")]
    reports = [ReportVerdict(PERIOD, tmp_path / "r.html", "MISSING: r.html was recorded and is gone")]
    quarantined = [QuarantinedRelease("c21", PERIOD, {"no_identifiers": "MSISDN-shaped values"}, {})]
    verification = Verification(releases, published, reports, quarantined)
    assert verification.problems == [f"c17|{PERIOD}: MISSING: c17.parquet is missing",
                                     f"published {CONFIG}|{PERIOD}: DRIFT: p.parquet differs",
                                     f"report {PERIOD}: MISSING: r.html was recorded and is gone"]
    assert not verification.ok and verification.deleted == deletions
    printed = verification.as_json()
    assert printed["deleted"] == [deletions[0].as_json()] and printed["ok"] is False
    assert printed["quarantined"] == [{"config": "c21", "period": PERIOD,
                                       "failed_checks": {"no_identifiers": "MSISDN-shaped values"}, "files": {}}]
    assert Verification(releases[:1] + releases[2:], [], [], quarantined).ok  # deleted and quarantined: no problem
