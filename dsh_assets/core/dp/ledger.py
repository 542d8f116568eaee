"""The privacy-budget ledger: a durable, transactional record of every epsilon spent.

One SQLite file under the home folder (standard library; a real file with real transactions).
Each DP table debits its epsilon in two steps:

1. ``reserve`` - in ONE ``BEGIN IMMEDIATE`` transaction: sum the epsilon already reserved or
   published in the period and in its calendar year, refuse (``BudgetExceeded``) if the new
   debit would pass either cap, else insert a ``reserved`` row that names the output path and a
   reservation token. ``BEGIN IMMEDIATE`` takes SQLite's write lock before the sums are read, so
   two processes racing for the last of a cap are serialised: the second sees the first's row.
2. ``complete`` (the file is in place; record its SHA-256) or ``roll_back`` (nothing published).

A reservation counts against the caps from the moment it exists, so a crash can only ever make
the ledger over-count, never under-count. ``recover`` resolves reservations whose owner died
between the two steps: the file at the recorded path (written by an atomic rename, so a present
file is whole) is checked by ``verify(path, token)``; if it was written for that reservation the
row is completed with the file's checksum, otherwise it is rolled back. A reservation is never
left half-way and never resolved while its owner still runs: the owner holds an exclusive
``flock`` on a per-reservation lock file (taken BEFORE the row is inserted, released after the
row leaves ``reserved``); the operating system drops the lock when the process dies, however it
dies, so ``recover`` treats a reservation whose lock it can take as orphaned. Lock files live in
``<ledger>.locks/`` beside the database: keep the ledger on a local disk of one host.

Periods are ISO dates (the first day of a release period: daily, weekly or monthly cadence); a
period counts in the calendar year of its first day. Epsilons are summed as exact decimals of
their shortest float representation, so ten debits of 0.1 fill a cap of 1.0 exactly.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import os
import sqlite3
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Callable

from dsh_assets.core import sqlite_store
from dsh_assets.core.files import DigestBook
from dsh_assets.core.periods import CADENCES, next_period_start
from dsh_assets.core.sqlite_store import utc_timestamp as _iso

_SCHEMA = """
CREATE TABLE IF NOT EXISTS publications (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    config         TEXT NOT NULL,
    period         TEXT NOT NULL,
    epsilon        REAL NOT NULL CHECK (epsilon > 0),
    status         TEXT NOT NULL CHECK (status IN ('reserved', 'published', 'rolled_back')),
    reserved_at    TEXT NOT NULL,
    published_at   TEXT,
    rolled_back_at TEXT,
    sha256         TEXT,
    path           TEXT NOT NULL,
    token          TEXT NOT NULL UNIQUE,
    pid            INTEGER NOT NULL,
    details        TEXT,
    note           TEXT
);
CREATE INDEX IF NOT EXISTS publications_period ON publications (period);
"""

# Reservation token -> file descriptor of its held lock, for reservations this process owns.
_HELD: dict[str, int] = {}


class BudgetError(RuntimeError):
    """The ledger refuses an operation (unknown reservation, wrong state...)."""


class BudgetExceeded(BudgetError):
    """A debit would pass the period or the year cap; nothing was reserved or written."""

    def __init__(self, config: str, period: str, epsilon: float, status: dict):
        self.config, self.period, self.epsilon, self.status = config, period, epsilon, status
        super().__init__(
            f"privacy budget refused: {config!r} asks epsilon {epsilon:g} in period {period}; "
            f"period {period}: {status['period_used']:g} of {status['period_cap']:g} used, "
            f"{status['period_left']:g} left, renews {status['period_renews']}; "
            f"year {status['year']}: {status['year_used']:g} of {status['year_cap']:g} used, "
            f"{status['year_left']:g} left, renews {status['year_renews']}"
        )


class PublicationInProgress(BudgetError):
    """Another live process holds a reservation for the same (config, period)."""


def _decimal(value: float) -> Decimal:
    return Decimal(repr(float(value)))


def period_date(period: str | dt.date) -> dt.date:
    if isinstance(period, dt.datetime):
        return period.date()
    if isinstance(period, dt.date):
        return period
    try:
        return dt.date.fromisoformat(str(period))
    except ValueError as error:
        raise BudgetError(f"period {period!r} is not an ISO date (YYYY-MM-DD)") from error


def within_caps(status: dict) -> bool:
    """The period's and the year's epsilon at or below their caps, in a status as ``Ledger.status`` gives it."""
    return (status["period_used"] <= status["period_cap"] + 1e-12
            and status["year_used"] <= status["year_cap"] + 1e-12)


def file_exists_verify(path: Path, token: str) -> bool:
    """Default ``recover`` check: a file is present at the path (the atomic rename makes it whole).

    Callers that can read a reservation token back from their file (dp.py stores it in the
    Parquet footer) should pass a stricter check: a present file may be an earlier publication
    that a crashed re-publish never replaced.
    """
    return Path(path).is_file()


class Ledger:
    """The ledger file at ``path`` with a cap per period and per calendar year (epsilon)."""

    def __init__(self, path: str | os.PathLike, period_cap: float, year_cap: float, cadence: str = "daily"):
        if cadence not in CADENCES:
            raise BudgetError(f"cadence must be one of {CADENCES}, not {cadence!r}")
        for name, cap in (("period_cap", period_cap), ("year_cap", year_cap)):
            if not isinstance(cap, (int, float)) or isinstance(cap, bool) or not cap >= 0 or cap == float("inf"):
                raise BudgetError(f"{name} must be a finite number >= 0, not {cap!r}")
        self.path = Path(path)
        self.period_cap = float(period_cap)
        self.year_cap = float(year_cap)
        self.cadence = cadence
        self.lock_dir = self.path.with_name(self.path.name + ".locks")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as connection:
            connection.executescript(_SCHEMA)

    # -- plumbing -------------------------------------------------------------------------

    def _connect(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        return sqlite_store.connect(self.path)

    def _write_transaction(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """BEGIN IMMEDIATE: the write lock is taken before anything is read."""
        return sqlite_store.write_transaction(self.path)

    def _lock_path(self, token: str) -> Path:
        return self.lock_dir / f"{token}.lock"

    def _hold(self, token: str) -> None:
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path(token), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BaseException:
            os.close(fd)
            raise
        _HELD[token] = fd

    def _release(self, token: str) -> None:
        fd = _HELD.pop(token, None)
        self._lock_path(token).unlink(missing_ok=True)
        if fd is not None:
            os.close(fd)

    def _owner_alive(self, token: str) -> bool:
        """True while some process holds the reservation's lock (this one included)."""
        if token in _HELD:
            return True
        try:
            fd = os.open(self._lock_path(token), os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return True  # the owner still holds it
            raise
        finally:
            os.close(fd)  # closing drops the probe's own lock, if it got one
        return False

    @staticmethod
    def _sum(rows) -> Decimal:
        return sum((_decimal(row["epsilon"]) for row in rows), Decimal(0))

    def _status(self, connection: sqlite3.Connection, period: str | dt.date, now: dt.datetime | None) -> dict:
        start = period_date(period)
        year = start.year
        period_rows = connection.execute(
            "SELECT epsilon FROM publications WHERE period = ? AND status IN ('reserved', 'published')",
            [start.isoformat()],
        ).fetchall()
        year_rows = connection.execute(
            "SELECT epsilon FROM publications WHERE substr(period, 1, 4) = ? AND status IN ('reserved', 'published')",
            [f"{year:04d}"],
        ).fetchall()
        in_flight = connection.execute(
            "SELECT count(*) FROM publications WHERE status = 'reserved'").fetchone()[0]
        period_used, year_used = self._sum(period_rows), self._sum(year_rows)
        period_left = max(_decimal(self.period_cap) - period_used, Decimal(0))
        year_left = max(_decimal(self.year_cap) - year_used, Decimal(0))
        return {
            "period": start.isoformat(),
            "period_used": float(period_used),
            "period_cap": self.period_cap,
            "period_left": float(period_left),
            "period_renews": next_period_start(start, self.cadence).isoformat(),
            "year": year,
            "year_used": float(year_used),
            "year_cap": self.year_cap,
            "year_left": float(year_left),
            "year_renews": dt.date(year + 1, 1, 1).isoformat(),
            "left": float(min(period_left, year_left)),
            "cadence": self.cadence,
            "in_flight_reservations": in_flight,
            "as_of": _iso(now),
        }

    # -- the protocol ---------------------------------------------------------------------

    def reserve(self, config: str, period: str | dt.date, epsilon: float, now: dt.datetime | None = None,
                path: str | os.PathLike = "", token: str | None = None) -> int:
        """Debit ``epsilon`` for (config, period) if both caps allow it; return the reservation id.

        The cap check and the insert are one ``BEGIN IMMEDIATE`` transaction. Raises
        ``BudgetExceeded`` (nothing reserved) or ``PublicationInProgress`` (a live process is
        publishing the same config and period). ``path`` is where the table will be written;
        ``token`` (default: a fresh UUID) identifies the reservation in that file.
        """
        if not isinstance(epsilon, (int, float)) or isinstance(epsilon, bool) or not 0 < epsilon < float("inf"):
            raise BudgetError(f"epsilon must be a finite number > 0, not {epsilon!r}")
        start = period_date(period)
        token = token or uuid.uuid4().hex
        self._hold(token)  # before the row exists, so no other process can see it unowned
        try:
            with self._write_transaction() as connection:
                busy = connection.execute(
                    "SELECT id, token FROM publications WHERE config = ? AND period = ? AND status = 'reserved'",
                    [config, start.isoformat()],
                ).fetchall()
                live = [row["id"] for row in busy if self._owner_alive(row["token"])]
                if live:
                    raise PublicationInProgress(
                        f"{config!r} period {start}: reservation {live[0]} is being published by a running process")
                status = self._status(connection, start, now)
                used_period = _decimal(status["period_used"]) + _decimal(epsilon)
                used_year = _decimal(status["year_used"]) + _decimal(epsilon)
                if used_period > _decimal(self.period_cap) or used_year > _decimal(self.year_cap):
                    raise BudgetExceeded(config, start.isoformat(), float(epsilon), status)
                cursor = connection.execute(
                    "INSERT INTO publications (config, period, epsilon, status, reserved_at, path, token, pid) "
                    "VALUES (?, ?, ?, 'reserved', ?, ?, ?, ?)",
                    [config, start.isoformat(), float(epsilon), _iso(now), os.fspath(path), token, os.getpid()],
                )
                return int(cursor.lastrowid)
        except BaseException:
            self._release(token)
            raise

    def complete(self, reservation: int, sha256: str, path: str | os.PathLike | None = None,
                 now: dt.datetime | None = None, details: dict | None = None) -> None:
        """The table is in place: mark the reservation published with the file's checksum."""
        with self._write_transaction() as connection:
            row = self._reserved_row(connection, reservation)
            connection.execute(
                "UPDATE publications SET status = 'published', published_at = ?, sha256 = ?, path = ?, details = ? "
                "WHERE id = ?",
                [_iso(now), sha256, os.fspath(path) if path is not None else row["path"],
                 json.dumps(details, sort_keys=True) if details is not None else None, reservation],
            )
        self._release(row["token"])

    def roll_back(self, reservation: int, now: dt.datetime | None = None, note: str = "") -> None:
        """Nothing was published: release the reserved epsilon."""
        with self._write_transaction() as connection:
            row = self._reserved_row(connection, reservation)
            connection.execute(
                "UPDATE publications SET status = 'rolled_back', rolled_back_at = ?, note = ? WHERE id = ?",
                [_iso(now), note or None, reservation],
            )
        self._release(row["token"])

    @staticmethod
    def _reserved_row(connection: sqlite3.Connection, reservation: int) -> sqlite3.Row:
        row = connection.execute("SELECT * FROM publications WHERE id = ?", [reservation]).fetchone()
        if row is None:
            raise BudgetError(f"no reservation {reservation} in the ledger")
        if row["status"] != "reserved":
            raise BudgetError(f"reservation {reservation} is {row['status']}, not reserved")
        return row

    def recover(self, now: dt.datetime | None = None,
                verify: Callable[[Path, str], bool] = file_exists_verify) -> list[dict]:
        """Resolve reservations orphaned by a dead process; return what was done.

        An orphan whose file exists and ``verify(path, token)`` accepts is completed with the
        file's SHA-256; any other orphan is rolled back. Reservations of live processes
        (including this one) are left alone.
        """
        actions = []
        resolved_tokens = []
        with self._write_transaction() as connection:
            rows = connection.execute("SELECT * FROM publications WHERE status = 'reserved' ORDER BY id").fetchall()
            for row in rows:
                if self._owner_alive(row["token"]):
                    continue
                path = Path(row["path"]) if row["path"] else None
                if path is not None and path.is_file() and verify(path, row["token"]):
                    digest = DigestBook().sha256(path)
                    connection.execute(
                        "UPDATE publications SET status = 'published', published_at = ?, sha256 = ?, note = ? "
                        "WHERE id = ?",
                        [_iso(now), digest, "completed by recover: the file was in place", row["id"]],
                    )
                    actions.append({"id": row["id"], "config": row["config"], "period": row["period"],
                                    "action": "completed", "sha256": digest})
                else:
                    connection.execute(
                        "UPDATE publications SET status = 'rolled_back', rolled_back_at = ?, note = ? WHERE id = ?",
                        [_iso(now), "rolled back by recover: no file written for this reservation", row["id"]],
                    )
                    actions.append({"id": row["id"], "config": row["config"], "period": row["period"],
                                    "action": "rolled_back"})
                resolved_tokens.append(row["token"])
        for token in resolved_tokens:
            self._lock_path(token).unlink(missing_ok=True)
        return actions

    # -- reading --------------------------------------------------------------------------

    def status(self, period: str | dt.date, now: dt.datetime | None = None) -> dict:
        """Used, cap and left for the period and its calendar year, and when each renews."""
        with self._connect() as connection:
            return self._status(connection, period, now)

    def spent(self, keys, period: str | dt.date) -> float:
        """Epsilon reserved or published in the period under ``keys`` (the ledger keys of one configuration's
        tables, ``DpCountsConfig.ledger_debits``): what its tables cost, published or not."""
        keys = list(keys)
        with self._connect() as connection:
            rows = connection.execute(
                f"SELECT epsilon FROM publications WHERE period = ? AND status IN ('reserved', 'published') "
                f"AND config IN ({', '.join('?' for _ in keys)})", [period_date(period).isoformat(), *keys]
            ).fetchall()
        return float(self._sum(rows))

    def latest_published(self, config: str, period: str | dt.date) -> dict | None:
        with self._connect() as connection:
            row = connection.execute(
                "SELECT * FROM publications WHERE config = ? AND period = ? AND status = 'published' "
                "ORDER BY id DESC LIMIT 1",
                [config, period_date(period).isoformat()],
            ).fetchone()
        return _entry(row) if row is not None else None

    def entry(self, reservation: int) -> dict:
        with self._connect() as connection:
            row = connection.execute("SELECT * FROM publications WHERE id = ?", [reservation]).fetchone()
        if row is None:
            raise BudgetError(f"no reservation {reservation} in the ledger")
        return _entry(row)

    def entries(self) -> list[dict]:
        """Every row, oldest first (rolled-back rows included: they are part of the record)."""
        with self._connect() as connection:
            rows = connection.execute("SELECT * FROM publications ORDER BY id").fetchall()
        return [_entry(row) for row in rows]


def _entry(row: sqlite3.Row) -> dict:
    entry = dict(row)
    entry["details"] = json.loads(entry["details"]) if entry["details"] else None
    return entry
