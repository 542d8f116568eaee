"""Quarantine: a candidate that failed a blocking check leaves the candidates, with a note of why.

A quarantined release never counts as released: the `published` asset only takes candidates,
`dsh verify` lists quarantined ones apart, and the report shows them as refused with the reason.
A candidate found to hold identifiers is deleted instead of moved (a copy of identifiers is a
copy too many); its note stays, with the SHA-256 of what was deleted.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

from dsh_assets.core.files import DigestBook, atomic_path
from dsh_assets.core.layout import QUARANTINE_NOTE, Layout


def quarantine(layout: Layout, config_id: str, period: str, check: str, problem: str, *,
               holds_identifiers: bool = False, now: dt.datetime | None = None) -> Path:
    """Move (or delete) the candidate files of (config, period) and add ``check``'s failure to the note.

    Idempotent: a second failed check of the same candidate only adds its line to the note.
    Returns the note's path.
    """
    now = now or dt.datetime.now(dt.timezone.utc)
    folder = layout.quarantine_dir(config_id, period)
    folder.mkdir(parents=True, exist_ok=True)
    note_path = folder / QUARANTINE_NOTE
    note = read_note(note_path) or {"config": config_id, "period": period, "failed_checks": {}, "files": {}}
    candidate = layout.candidate_dir(config_id, period)
    for path in sorted(candidate.glob("*.parquet")) if candidate.is_dir() else []:
        entry = {"sha256": DigestBook().sha256(path), "moved_at": now.isoformat()}
        if holds_identifiers:
            path.unlink()
            entry["deleted"] = "it held identifiers"
        else:
            os.replace(path, folder / path.name)
            entry["path"] = str(folder / path.name)
        note["files"][path.name] = entry
    if candidate.is_dir() and not any(candidate.iterdir()):
        candidate.rmdir()
    note["failed_checks"][check] = problem
    note["quarantined_at"] = note.get("quarantined_at") or now.isoformat()
    with atomic_path(note_path) as temporary:
        temporary.write_text(json.dumps(note, indent=2, sort_keys=True), encoding="utf-8")
    return note_path


def read_note(path: str | os.PathLike) -> dict | None:
    path = Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def quarantine_note(layout: Layout, config_id: str, period: str) -> dict | None:
    """The quarantine note of (config, period), if it was ever quarantined."""
    return read_note(layout.quarantine_dir(config_id, period) / QUARANTINE_NOTE)
