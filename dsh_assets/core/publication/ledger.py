"""The publication ledger: a durable, transactional record of every release published, and of every refusal.

One SQLite table (``published_releases``; it may share the budget ledger's file) with a row per
publication: the source's SHA-256, the period, the configuration, the released file's SHA-256, its
kind (``rows`` or ``dp_counts``), the published path, when, and whether it was allowed as an
additional publication of its period. ``record`` decides and writes in ONE ``BEGIN IMMEDIATE``
transaction (``core/sqlite_store.py``, as the budget ledger does), so two processes publishing at
once are serialised and the second sees the first's row:

* the same (source, period, configuration, release SHA-256) already recorded: a no-op that returns
  the existing record (re-publishing the same bytes publishes nothing new);
* a row-level release when a row-level release of the same source and period is already recorded
  (another configuration, or other bytes of the same one): refused (``PublicationRefused``, naming
  the existing publication) unless ``also_publish=True``, which the caller passes only after the
  pair's evidence passed ``[publication.pairs]`` (``gate.check_pair``). Two row-level releases of
  one source let an attacker relink rows and average the noise away;
* a DP count table (``dp_counts``) neither blocks nor is blocked: its cost is epsilon, accounted
  for by the budget ledger.

Record BEFORE the file is moved into the published area: a crash in between leaves a record without
its file (the ledger over-claims, never under-claims), and the retry, with the same bytes, is a no-op.

A second table (``refused_publications``) keeps each refusal as the verdict it is: the run and the publication
step that refused, the configuration, every reason, the gate's figures and, for a DP release, the epsilon its
tables cost all the same. A refusal publishes nothing; this row is its only trace.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sqlite3
from dataclasses import dataclass, field

from dsh_assets.core import sqlite_store
from dsh_assets.core.release.configs import DP_COUNTS, ROW_RELEASE

KINDS = (ROW_RELEASE, DP_COUNTS)

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS published_releases (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    source_sha256  TEXT NOT NULL,
    period         TEXT NOT NULL,
    config         TEXT NOT NULL,
    release_sha256 TEXT NOT NULL,
    kind           TEXT NOT NULL CHECK (kind IN ('{ROW_RELEASE}', '{DP_COUNTS}')),
    path           TEXT NOT NULL,
    also_publish   INTEGER NOT NULL CHECK (also_publish IN (0, 1)),
    published_at   TEXT NOT NULL,
    UNIQUE (source_sha256, period, config, release_sha256)
);
CREATE INDEX IF NOT EXISTS published_releases_period ON published_releases (period);
CREATE TABLE IF NOT EXISTS refused_publications (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id         TEXT NOT NULL,
    step           TEXT NOT NULL,
    period         TEXT NOT NULL,
    config         TEXT NOT NULL,
    reasons        TEXT NOT NULL,
    gate           TEXT NOT NULL,
    epsilon_spent  REAL,
    refused_at     TEXT NOT NULL,
    considered     TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX IF NOT EXISTS refused_publications_run ON refused_publications (run_id);
"""


class PublicationError(RuntimeError):
    """The publication ledger refuses an argument (unknown kind, period not an ISO date...)."""


@dataclass(frozen=True)
class PublicationRecord:
    id: int
    source_sha256: str
    period: str
    config_id: str
    release_sha256: str
    kind: str
    path: str
    also_publish: bool
    """True when it was allowed as an additional row-level publication of its period (pair evidence passed)."""
    published_at: str

    def describe(self) -> str:
        return (f"publication {self.id}: {self.config_id!r} ({self.kind}, release sha256 {self.release_sha256[:12]}) "
                f"at {self.path}, published {self.published_at}")


@dataclass(frozen=True)
class Refusal:
    """A publication refused by its gate or by this ledger: the verdict, with every reason."""

    step: str
    """The publication step that refused (`published`, `dp_published`)."""
    period: str
    config_id: str
    """Empty when no configuration was named."""
    reasons: list[str]
    gate: dict
    epsilon_spent: float | None
    """A DP release's epsilon, spent when its tables were drawn, published or not; None for a row-level one."""
    refused_at: str
    considered: list = field(default_factory=list)
    """The candidates the publication list tried, in its order, each {"config", "refused"}: every one refused."""


class PublicationRefused(PublicationError):
    """A second row-level publication of the same source and period, not allowed; nothing was recorded."""

    def __init__(self, config_id: str, period: str, existing: PublicationRecord):
        self.config_id, self.period, self.existing = config_id, period, existing
        super().__init__(
            f"publication refused: {config_id!r} would be a second row-level release of period {period} of source "
            f"{existing.source_sha256[:12]}; already published: {existing.describe()}. Two row-level releases of "
            f"one source let an attacker relink rows; publish it as an additional release only when the pair's "
            f"evidence passes [publication.pairs] (also_publish)")


def _period(period: str | dt.date) -> str:
    text = period.date().isoformat() if isinstance(period, dt.datetime) else str(period)
    try:
        return dt.date.fromisoformat(text).isoformat()
    except ValueError as error:
        raise PublicationError(f"period {period!r} is not an ISO date (YYYY-MM-DD)") from error


def _record(row: sqlite3.Row) -> PublicationRecord:
    return PublicationRecord(id=int(row["id"]), source_sha256=row["source_sha256"], period=row["period"],
                             config_id=row["config"], release_sha256=row["release_sha256"], kind=row["kind"],
                             path=row["path"], also_publish=bool(row["also_publish"]),
                             published_at=row["published_at"])


class PublicationLedger:
    """The publication ledger in the SQLite file at ``path`` (created with its table when absent)."""

    def __init__(self, path: str | os.PathLike):
        self.path = sqlite_store.create_tables(path, _SCHEMA)
        sqlite_store.add_missing_column(self.path, "refused_publications", "considered", "TEXT NOT NULL DEFAULT '[]'")

    def record(self, source_sha256: str, period: str | dt.date, config_id: str, release_sha256: str, kind: str,
               path: str | os.PathLike, also_publish: bool = False, now: dt.datetime | None = None
               ) -> PublicationRecord:
        """Record a publication and return it; the existing record when these bytes are already recorded.

        Raises ``PublicationRefused`` (nothing recorded) for a second row-level release of the same
        source and period unless ``also_publish``. The check and the insert are one ``BEGIN IMMEDIATE``
        transaction.
        """
        if kind not in KINDS:
            raise PublicationError(f"kind must be one of {KINDS}, not {kind!r}")
        for name, digest in (("source_sha256", source_sha256), ("release_sha256", release_sha256)):
            if not isinstance(digest, str) or not digest:
                raise PublicationError(f"{name} must be a SHA-256 hex digest, not {digest!r}")
        period = _period(period)
        key = [source_sha256, period, config_id, release_sha256]
        with sqlite_store.write_transaction(self.path) as connection:
            same = connection.execute(
                "SELECT * FROM published_releases WHERE source_sha256 = ? AND period = ? AND config = ? "
                "AND release_sha256 = ?", key).fetchone()
            if same is not None:
                return _record(same)
            if kind == ROW_RELEASE and not also_publish:
                earlier = connection.execute(
                    "SELECT * FROM published_releases WHERE source_sha256 = ? AND period = ? AND kind = ? "
                    "ORDER BY id LIMIT 1", [source_sha256, period, ROW_RELEASE]).fetchone()
                if earlier is not None:
                    raise PublicationRefused(config_id, period, _record(earlier))
            cursor = connection.execute(
                "INSERT INTO published_releases (source_sha256, period, config, release_sha256, kind, path, "
                "also_publish, published_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [*key, kind, os.fspath(path), int(bool(also_publish)), sqlite_store.utc_timestamp(now)])
            row = connection.execute("SELECT * FROM published_releases WHERE id = ?", [cursor.lastrowid]).fetchone()
            return _record(row)

    def record_refusal(self, run_id: str, step: str, period: str | dt.date, config_id: str, reasons: list[str],
                       gate: dict, epsilon_spent: float | None = None, now: dt.datetime | None = None,
                       considered: list | None = None) -> Refusal:
        """Keep a refusal of ``step`` in run ``run_id`` (``considered``: every candidate the publication list tried,
        with its reasons); returns it as recorded."""
        if not reasons:
            raise PublicationError("a refusal names at least one reason")
        refusal = Refusal(step, _period(period), config_id, list(reasons), dict(gate), epsilon_spent,
                          sqlite_store.utc_timestamp(now), list(considered or []))
        with sqlite_store.write_transaction(self.path) as connection:
            connection.execute(
                "INSERT INTO refused_publications (run_id, step, period, config, reasons, gate, epsilon_spent, "
                "refused_at, considered) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [run_id, step, refusal.period, config_id, json.dumps(refusal.reasons),
                 json.dumps(refusal.gate, sort_keys=True, default=str), epsilon_spent, refusal.refused_at,
                 json.dumps(refusal.considered, sort_keys=True, default=str)])
        return refusal

    def refusals_of_run(self, run_id: str) -> dict[str, Refusal]:
        """Publication step -> its refusal in run ``run_id`` (the latest, should a step refuse twice)."""
        with sqlite_store.connect(self.path) as connection:
            rows = connection.execute("SELECT * FROM refused_publications WHERE run_id = ? ORDER BY id",
                                      [run_id]).fetchall()
        return {row["step"]: Refusal(row["step"], row["period"], row["config"], json.loads(row["reasons"]),
                                     json.loads(row["gate"]), row["epsilon_spent"], row["refused_at"],
                                     json.loads(row["considered"]))
                for row in rows}

    def published(self, period: str | dt.date) -> list[PublicationRecord]:
        """Every publication of the period, oldest first."""
        return self._select("WHERE period = ?", [_period(period)])

    def row_level(self, source_sha256: str, period: str | dt.date) -> list[PublicationRecord]:
        """The row-level publications of one source and period, oldest first: what a new one would pair with."""
        return self._select("WHERE source_sha256 = ? AND period = ? AND kind = ?",
                            [source_sha256, _period(period), ROW_RELEASE])

    def entries(self) -> list[PublicationRecord]:
        """Every publication, oldest first."""
        return self._select("", [])

    def _select(self, where: str, parameters: list) -> list[PublicationRecord]:
        with sqlite_store.connect(self.path) as connection:
            rows = connection.execute(f"SELECT * FROM published_releases {where} ORDER BY id", parameters).fetchall()
        return [_record(row) for row in rows]
