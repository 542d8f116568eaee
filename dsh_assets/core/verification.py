"""`dsh verify`'s verdicts: each stored release, publication and report against what was recorded of it.

Only the decisions live here: what was recorded and what retention deleted are handed in by the caller,
which reads them where they are kept (the Dagster instance, the ledgers) and renders the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dsh_assets.core.files import DigestBook
from dsh_assets.core.layout import QUARANTINE_NOTE, Layout
from dsh_assets.core.provenance import checksum_problems
from dsh_assets.core.publication.ledger import PublicationRecord
from dsh_assets.core.publication.quarantine import quarantine_note
from dsh_assets.core.retention import Deletion, DeletionRecord, was_deleted

OK = "ok"
DELETED = "deleted"


@dataclass(frozen=True)
class ReleaseVerdict:
    """A stored release: ok, deleted by retention, not recorded, or what is MISSING or has DRIFTed."""

    config: str
    period: str
    path: Path
    sha256: str | None
    """The file's SHA-256 on disk; None when it is absent."""
    recorded_sha256: str | None
    status: str
    deletions: tuple[Deletion, ...] = ()
    """The retention deletions that explain why its files are gone."""

    def as_json(self) -> dict:
        return {"config": self.config, "period": self.period, "path": str(self.path), "sha256": self.sha256,
                "recorded_sha256": self.recorded_sha256, "status": self.status}


@dataclass(frozen=True)
class QuarantinedRelease:
    """A candidate moved out of the candidates by a failed blocking check: listed apart, never a problem."""

    config: str
    period: str
    failed_checks: dict[str, str]
    files: dict[str, dict]

    def as_json(self) -> dict:
        return {"config": self.config, "period": self.period, "failed_checks": self.failed_checks,
                "files": self.files}


@dataclass(frozen=True)
class PublicationVerdict:
    """A published release against the SHA-256 the publication ledger recorded."""

    config: str
    period: str
    path: Path
    sha256: str
    status: str

    def as_json(self) -> dict:
        return {"config": self.config, "period": self.period, "path": str(self.path), "sha256": self.sha256,
                "status": self.status}


@dataclass(frozen=True)
class ReportVerdict:
    """A period's report against the SHA-256 its materialisation recorded."""

    period: str
    path: Path
    status: str

    def as_json(self) -> dict:
        return {"period": self.period, "path": str(self.path), "status": self.status}


@dataclass(frozen=True)
class Verification:
    """Every verdict over one home; ``ok`` when nothing is missing or has drifted."""

    releases: list[ReleaseVerdict]
    published: list[PublicationVerdict]
    reports: list[ReportVerdict]
    quarantined: list[QuarantinedRelease]

    @property
    def deleted(self) -> list[Deletion]:
        return [deletion for release in self.releases for deletion in release.deletions]

    @property
    def problems(self) -> list[str]:
        """One line per release, publication or report that is neither ok nor deleted by retention."""
        return ([f"{row.config}|{row.period}: {row.status}" for row in self.releases if row.status not in (OK, DELETED)]
                + [f"published {row.config}|{row.period}: {row.status}" for row in self.published if row.status != OK]
                + [f"report {row.period}: {row.status}" for row in self.reports if row.status != OK])

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_json(self) -> dict:
        return {"releases": [row.as_json() for row in self.releases],
                "published": [row.as_json() for row in self.published],
                "reports": [row.as_json() for row in self.reports],
                "quarantined": [row.as_json() for row in self.quarantined],
                "deleted": [deletion.as_json() for deletion in self.deleted], "ok": self.ok}


def verify_release(layout: Layout, config_id: str, period: str, files: list[tuple[Path, str]], history: list[dict],
                   input_fields: tuple[str, ...], deletions: DeletionRecord,
                   book: DigestBook) -> ReleaseVerdict | QuarantinedRelease:
    """One release partition: its ``files`` (path, recorded key; the release first) against ``history`` (its
    recorded metadata, newest first), told apart from a quarantined candidate and from files retention deleted.
    ``book``: one for the whole verification, so each file is read once, whatever checks it."""
    path = layout.released(config_id, period)
    note = quarantine_note(layout, config_id, period)
    if note is not None and not path.is_file():
        return QuarantinedRelease(config_id, period, note["failed_checks"], note["files"])
    _, found = checksum_problems(files, history, input_fields, book)
    gone = _deleted_files(deletions, files, history)
    if not gone and not path.is_file():  # quarantined, then its quarantine deleted by retention
        note_deleted = was_deleted(deletions, layout.quarantine_dir(config_id, period) / QUARANTINE_NOTE)
        gone = [note_deleted] if note_deleted else []
    return ReleaseVerdict(config_id, period, path, book.sha256(path) if path.is_file() else None,
                          history[0]["sha256"] if history else None,
                          _release_status(found, bool(history), path.is_file(), bool(gone)), tuple(gone))


def _release_status(found: list[str], recorded: bool, on_disk: bool, deleted: bool) -> str:
    if deleted:
        return DELETED
    if not found:
        return OK
    if not recorded:
        return "no recorded materialisation"
    return f"{'DRIFT' if on_disk else 'MISSING'}: {'; '.join(found)}"


def _deleted_files(deletions: DeletionRecord, files: list[tuple[Path, str]], history: list[dict]) -> list[Deletion]:
    """The deletion records of a release's files when every recorded file is gone by retention, else [].

    A file counts as deleted only when a deletion of the very bytes its latest materialisation
    recorded exists; a file gone without one (or re-made after a deletion, then lost) is MISSING.
    """
    latest = history[0] if history else {}
    recorded = [(path, latest[key]) for path, key in files if key in latest]
    if not recorded or any(Path(path).is_file() for path, _ in recorded):
        return []
    entries = [was_deleted(deletions, path, digest) for path, digest in recorded]
    return entries if all(entries) else []


def verify_publication(layout: Layout, record: PublicationRecord, book: DigestBook) -> PublicationVerdict:
    """A published file against the digest the ledger recorded; ``book`` as in ``verify_release`` (a publication
    linked to its candidate is the candidate's inode, read once for both)."""
    path = _in_home(layout, record.path, "published")
    return PublicationVerdict(record.config_id, record.period, path, record.release_sha256,
                              _verified_file(path, record.release_sha256, book))


def verify_report(layout: Layout, period: str, recorded: dict, book: DigestBook) -> ReportVerdict:
    path = _in_home(layout, recorded["path"], "reports")
    return ReportVerdict(period, path, _verified_file(path, recorded.get("sha256"), book))


def _in_home(layout: Layout, recorded: str, folder: str) -> Path:
    """A recorded path rebased onto the home being verified (a home may be copied or moved as a whole)."""
    path = Path(recorded)
    parts = path.parts
    if folder in parts:
        index = len(parts) - 1 - parts[::-1].index(folder)
        return layout.home.joinpath(*parts[index:])
    return path


def _verified_file(path: Path, expected: str | None, book: DigestBook) -> str:
    """ok, or what is wrong with a file expected to hold ``expected`` (None: not recorded, not checked)."""
    if expected is None:
        return OK
    if not path.is_file():
        return f"MISSING: {path} was recorded and is gone"
    if book.sha256(path) != expected:
        return f"DRIFT: {path} differs from its recorded sha256"
    return OK
