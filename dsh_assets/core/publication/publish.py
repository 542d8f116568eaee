"""Put a candidate where analysts pick it up: recorded in the publication ledger, placed atomically.

The ledger decides (one ``BEGIN IMMEDIATE`` transaction) before the file is renamed into place, so
of two racing publications of one period exactly one lands, and a refused one leaves nothing but
the refusal: its file is a temporary that is removed. The published file is a hard link to the
candidate where the file system allows (a release of 110M rows is 11 GB: no second copy, no second
write), else a copy; every write in the home replaces files by renaming, so the candidate's later
fate (re-released, quarantined, purged) never touches the published bytes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

from dsh_assets.core.files import DigestBook, atomic_path
from dsh_assets.core.layout import RELEASED_FILE, Layout
from dsh_assets.core.publication.ledger import PublicationLedger, PublicationRecord
from dsh_assets.core.publication.quarantine import quarantine_note
from dsh_assets.core.release.configs import DP_COUNTS, ROW_RELEASE

PUBLICATION_RECORD = "publication.json"


class CandidateChanged(RuntimeError):
    """The candidate on disk is not the recorded one: nothing is published."""


def _placed(candidate: Path, temporary: Path, release_sha256: str, book: DigestBook) -> bool:
    """Put the candidate's bytes at ``temporary``: linked, or copied across file systems; False (and nothing
    trusted) unless they are the recorded release."""
    before = os.stat(candidate)
    if book.sha256(candidate) != release_sha256:
        return False
    try:
        os.link(candidate, temporary)
    except OSError:  # another file system, or links not allowed
        shutil.copyfile(candidate, temporary)
        return book.sha256(temporary) == release_sha256
    linked = os.stat(temporary)  # the very inode that was hashed, unchanged since
    return ((linked.st_dev, linked.st_ino, linked.st_size, linked.st_mtime_ns)
            == (before.st_dev, before.st_ino, before.st_size, before.st_mtime_ns))


def published_path(layout: Layout, ledger: PublicationLedger, config_id: str, kind: str, period: str) -> Path:
    """Where a release is published: a DP count table under ``published/<period>/dp/<config>/``, beside the
    period's release; the period's first row-level release at ``published/<period>/released.parquet``, a
    further one (``also_publish``) under ``published/<period>/also/<config>/``."""
    if kind == DP_COUNTS:
        return layout.dp_published(config_id, period)
    earlier = [record for record in ledger.published(period)
               if record.kind == ROW_RELEASE and record.config_id != config_id]
    return layout.also_published_dir(config_id, period) / RELEASED_FILE if earlier else layout.published(period)


def publish_candidate(layout: Layout, ledger: PublicationLedger, config_id: str, kind: str, period: str,
                      release_sha256: str, source_sha256: str, note: dict, *, also_publish: bool = False,
                      book: DigestBook, now: dt.datetime | None = None) -> PublicationRecord:
    """Publish the candidate of (config, period) whose recorded SHA-256 is ``release_sha256``, at
    ``published_path``, with its further tables (a DP release's Q1, Q2 and bound tables) and ``publication.json``.

    Raises ``PublicationRefused`` (nothing written) when the ledger refuses, ``CandidateChanged`` when the
    file is not the recorded one. Re-publishing the same bytes is a no-op in the ledger and restores a lost copy.
    ``book``: the digests already taken of the candidate (it is verified against them, or read).
    """
    target = published_path(layout, ledger, config_id, kind, period)
    folder = target.parent
    candidate = layout.candidate_dir(config_id, period)
    created = [parent for parent in (folder, *folder.parents) if not parent.exists()]
    before = os.stat(candidate / RELEASED_FILE)
    try:
        with atomic_path(target) as temporary:
            if not _placed(candidate / RELEASED_FILE, temporary, release_sha256, book):
                raise CandidateChanged(f"the candidate of {config_id} for {period} is not the recorded release")
            record = ledger.record(source_sha256, period, config_id, release_sha256, kind, target,
                                   also_publish=also_publish, now=now)
    except BaseException:
        for parent in created:  # a refusal leaves no trace but the refusal: not even an empty folder
            if parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
        raise
    book.carry(before, target)  # linked: what the book holds of the candidate holds of the published file
    further = {}
    for companion in sorted(candidate.glob("*.parquet")):  # a DP release's further tables (Q1, Q2, bound)
        if companion.name != RELEASED_FILE:
            with atomic_path(folder / companion.name) as temporary:
                shutil.copyfile(companion, temporary)
            further[companion.name] = book.sha256(folder / companion.name, own_write=True)
    with atomic_path(folder / PUBLICATION_RECORD) as temporary:
        temporary.write_text(json.dumps({**note, "config": config_id, "period": period, "sha256": release_sha256,
                                         "file": target.name, "further_tables": further,
                                         "source_sha256": source_sha256, "published_at": record.published_at,
                                         "also_publish": record.also_publish, "ledger_publication": record.id},
                                        indent=2, sort_keys=True, default=str), encoding="utf-8")
    return record


def candidate_statuses(layout: Layout, period: str, config_ids) -> dict[str, str]:
    """candidate | published | quarantined, per configuration, from the publication ledger and the quarantine."""
    published = ({record.config_id for record in PublicationLedger(layout.ledger).published(period)}
                 if layout.ledger.is_file() else set())  # reading must not create the ledger of a refused run
    statuses = {}
    for config_id in config_ids:
        if config_id in published:
            statuses[config_id] = "published"
        elif quarantine_note(layout, config_id, period) and not layout.released(config_id, period).is_file():
            statuses[config_id] = "quarantined"
        else:
            statuses[config_id] = "candidate"
    return statuses
