"""Retention, as data: what the home may delete and when, and a durable record of every deletion.

The periods are declared in ``[retention]`` of the releases file (``releases.toml``), in days:

* ``source_days``: a stored source (``source/<period>/``) is due once its period is that old;
* ``input_days``: a generated synthetic input (``inputs/synthetic_<period>.parquet``) likewise;
* ``candidate_days_after_publication``: the candidates of a period (``candidates/<config>/<period>/``)
  are due that many days after the period's first row-level publication in the publication ledger; a
  period with no row-level release published keeps its candidates (a DP table published on its own
  criteria is not the period's release, and starts no clock);
* ``quarantine_days``: a quarantined candidate (``quarantine/<config>/<period>/``, note included)
  once its period is that old.

A key left out keeps that kind of file forever; without a ``[retention]`` table nothing is due.
Published releases (``published/``, the DP tables under ``published/<period>/dp/`` included),
reports and the ledgers are never due: no key can name them.
"Age" is ``today - period`` (or ``today - first publication date``) in whole days; due when it is at
least the declared number of days.

Every deletion is recorded in the ``deletions`` table of the home's SQLite ledger file
(``layout.ledger``): path, kind, period, configuration, the SHA-256 of the bytes deleted, when, why.
The order is: record the row as ``deleting`` (with the SHA-256, committed), unlink the file, mark
the row ``deleted``. Recording after the unlink could lose the record in a crash (a deleted file
would then look lost); recording "deleted" before the unlink could claim a deletion of a file still
there. With the intermediate state, a crash leaves either ``deleting`` and the file present (not
deleted: ``dsh verify`` checks the file, and the next purge deletes it again and completes the row)
or ``deleting`` and the file gone (the unlink happened: counted as deleted, and the next purge marks
it ``deleted``). No deletion is ever unrecorded.
"""

from __future__ import annotations

import datetime as dt
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from dsh_assets.core import sqlite_store
from dsh_assets.core.files import DigestBook, remove_stale_temporaries
from dsh_assets.core.layout import Layout
from dsh_assets.core.release.configs import ROW_RELEASE, ConfigError, releases_document

SOURCE, INPUT, CANDIDATE, QUARANTINE = "source", "input", "candidate", "quarantine"
KINDS = (SOURCE, INPUT, CANDIDATE, QUARANTINE)
_KEYS = {"source_days": SOURCE, "input_days": INPUT, "candidate_days_after_publication": CANDIDATE,
         "quarantine_days": QUARANTINE}
DELETING, DELETED = "deleting", "deleted"

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS deletions (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    path       TEXT NOT NULL,
    kind       TEXT NOT NULL,
    period     TEXT NOT NULL,
    config     TEXT,
    sha256     TEXT NOT NULL,
    reason     TEXT NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ('{DELETING}', '{DELETED}')),
    deleted_at TEXT NOT NULL,
    UNIQUE (path, sha256)
);
CREATE INDEX IF NOT EXISTS deletions_path ON deletions (path);
"""


@dataclass(frozen=True)
class RetentionPolicy:
    """Days each kind of file is kept (None: forever)."""

    source_days: int | None = None
    input_days: int | None = None
    candidate_days_after_publication: int | None = None
    quarantine_days: int | None = None

    def days(self, kind: str) -> int | None:
        return {SOURCE: self.source_days, INPUT: self.input_days,
                CANDIDATE: self.candidate_days_after_publication, QUARANTINE: self.quarantine_days}[kind]


def parse_retention(document: dict) -> RetentionPolicy:
    table = document.get("retention", {})
    if not isinstance(table, dict):
        raise ConfigError("[retention] must be a table of days, e.g. source_days = 30")
    values = {}
    for key, value in table.items():
        if key not in _KEYS:
            raise ConfigError(f"[retention]: unknown key {key!r}; known: {', '.join(_KEYS)} (published releases, "
                              f"reports and ledgers are always kept)")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"[retention] {key}: must be a whole number of days >= 0, not {value!r}")
        values[key] = value
    return RetentionPolicy(**values)


def load_retention(path: str | os.PathLike | None = None) -> RetentionPolicy:
    """The ``[retention]`` table of the releases file (``path``, else the packaged one)."""
    return parse_retention(releases_document(path))


@dataclass(frozen=True)
class Due:
    """A file that retention deletes."""

    kind: str
    period: str
    config_id: str | None
    path: Path
    reason: str

    def as_json(self) -> dict:
        return {"kind": self.kind, "period": self.period, "config": self.config_id, "path": str(self.path),
                "reason": self.reason}


def _date(text: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(text[:10])
    except ValueError:
        return None


def _files(folder: Path) -> list[Path]:
    """The files of a folder, sorted; hidden ones (a live writer's temporaries) are left alone."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))


def due(layout: Layout, policy: RetentionPolicy, publications: Iterable, today: dt.date) -> list[Due]:
    """Every file the policy deletes on ``today``; ``publications``: the publication ledger's records (the
    row-level ones start the candidates' clock)."""
    found: list[Due] = []
    home = layout.home

    def old(kind: str, since: dt.date | None) -> str | None:
        days = policy.days(kind)
        if days is None or since is None or (today - since).days < days:
            return None
        return f"{kind} kept {days} day(s)"

    for folder in sorted((home / "source").glob("*/")):
        reason = old(SOURCE, _date(folder.name))
        found += [Due(SOURCE, folder.name, None, path, f"{reason} after its period")
                  for path in (_files(folder) if reason else [])]
    for path in sorted((home / "inputs").glob("synthetic_*.parquet")):
        period = path.stem.removeprefix("synthetic_")
        reason = old(INPUT, _date(period))
        if reason:
            found.append(Due(INPUT, period, None, path, f"{reason} after its period"))
    first_published: dict[str, dt.date] = {}
    for record in (record for record in publications if record.kind == ROW_RELEASE):
        when = _date(record.published_at)
        if when is not None and (record.period not in first_published or when < first_published[record.period]):
            first_published[record.period] = when
    for folder in sorted((home / "candidates").glob("*/*/")):
        period, config_id = folder.name, folder.parent.name
        reason = old(CANDIDATE, first_published.get(period))
        found += [Due(CANDIDATE, period, config_id, path,
                      f"{reason} after period {period} was published ({first_published[period]})")
                  for path in (_files(folder) if reason else [])]
    for folder in sorted((home / "quarantine").glob("*/*/")):
        period, config_id = folder.name, folder.parent.name
        reason = old(QUARANTINE, _date(period))
        found += [Due(QUARANTINE, period, config_id, path, f"{reason} after its period")
                  for path in (_files(folder) if reason else [])]
    return found


@dataclass(frozen=True)
class Deletion:
    path: str
    kind: str
    period: str
    config_id: str | None
    sha256: str
    reason: str
    state: str
    deleted_at: str

    def as_json(self) -> dict:
        return {"path": self.path, "kind": self.kind, "period": self.period, "config": self.config_id,
                "sha256": self.sha256, "reason": self.reason, "state": self.state, "deleted_at": self.deleted_at}


def _deletion(row: sqlite3.Row) -> Deletion:
    return Deletion(row["path"], row["kind"], row["period"], row["config"], row["sha256"], row["reason"],
                    row["state"], row["deleted_at"])


class DeletionRecord:
    """The ``deletions`` table in the SQLite file at ``path`` (the home's ledger file)."""

    def __init__(self, path: str | os.PathLike):
        self.path = sqlite_store.create_tables(path, _SCHEMA)

    def deleting(self, item: Due, sha256: str, now: dt.datetime | None = None) -> None:
        with sqlite_store.write_transaction(self.path) as connection:
            connection.execute(
                "INSERT INTO deletions (path, kind, period, config, sha256, reason, state, deleted_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (path, sha256) DO UPDATE SET state = excluded.state, "
                "deleted_at = excluded.deleted_at, reason = excluded.reason",
                [str(item.path), item.kind, item.period, item.config_id, sha256, item.reason, DELETING,
                 sqlite_store.utc_timestamp(now)])

    def deleted(self, path: str | os.PathLike, sha256: str) -> None:
        with sqlite_store.write_transaction(self.path) as connection:
            connection.execute("UPDATE deletions SET state = ? WHERE path = ? AND sha256 = ?",
                               [DELETED, os.fspath(path), sha256])

    def entries(self) -> list[Deletion]:
        with sqlite_store.connect(self.path) as connection:
            rows = connection.execute("SELECT * FROM deletions ORDER BY id").fetchall()
        return [_deletion(row) for row in rows]

    def of(self, path: str | os.PathLike) -> list[Deletion]:
        """The deletions of a path, newest first."""
        with sqlite_store.connect(self.path) as connection:
            rows = connection.execute("SELECT * FROM deletions WHERE path = ? ORDER BY id DESC",
                                      [os.fspath(path)]).fetchall()
        return [_deletion(row) for row in rows]

    def completed(self) -> list[Deletion]:
        """Mark ``deleted`` every ``deleting`` row whose file is gone (a purge crashed after the unlink)."""
        done = []
        for entry in self.entries():
            if entry.state == DELETING and not Path(entry.path).exists():
                self.deleted(entry.path, entry.sha256)
                done.append(entry)
        return done


def was_deleted(record: DeletionRecord, path: str | os.PathLike, sha256: str | None = None) -> Deletion | None:
    """The deletion that explains why ``path`` is absent (of the bytes ``sha256`` when given), else None.

    A file still on disk was not deleted, whatever its record says (a purge that crashed before the unlink).
    """
    if Path(path).exists():
        return None
    for entry in record.of(path):
        if sha256 is None or entry.sha256 == sha256:
            return entry
    return None


def purge(layout: Layout, items: list[Due], record: DeletionRecord, now: dt.datetime | None = None) -> list[Deletion]:
    """Delete every due file, each recorded durably (``deleting``, unlink, ``deleted``); returns the deletions."""
    record.completed()
    done = []
    for item in items:
        if not item.path.is_file():
            continue
        digest = DigestBook().sha256(item.path)
        record.deleting(item, digest, now)
        item.path.unlink()
        remove_stale_temporaries(item.path)  # a killed writer's copy of the same rows goes with the file
        record.deleted(item.path, digest)
        done.append(record.of(item.path)[0])
        folder = item.path.parent
        while folder.parent != layout.home and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent
    return done
