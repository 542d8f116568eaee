"""What an asset downstream of a release holds of it: a typed handle, checked against its record where it is read.
The release step hashed the file as it wrote it and recorded that digest (``provenance``); a reader compares the
file on disk with the record before it trusts a byte of it, and scores nothing else. ``book`` (the ``digests``
resource) holds the digest of the file as it stands, so the comparison reads the file only when it changed since
it was hashed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.secrets import Secrets
from dsh_assets.graph.partitions import release_key
from dsh_assets.graph.records import recorded
from dsh_assets.graph.resources import DshHome


@dataclass(frozen=True)
class StoredRelease:
    """One release on disk whose bytes are the ones its materialisation recorded."""

    asset_key: dg.AssetKey
    config_id: str
    period: str
    path: Path
    source_path: Path
    recorded: dict
    """Every value the release's materialisation recorded (its record in the home's record store)."""

    @property
    def sha256(self) -> str:
        return self.recorded["sha256"]

    @property
    def seed_id(self) -> str:
        return self.recorded["seed_id"]

    def provenance(self) -> dict:
        """What each evidence asset records of the release it scored."""
        return {"release_sha256": self.sha256, "seed_id": self.seed_id,
                "release": dg.MetadataValue.json({"asset": self.asset_key.to_user_string(),
                                                  "partition": str(release_key(self.config_id, self.period))})}

    def under_test(self, home: DshHome, secrets: Secrets, book: DigestBook) -> ReleaseUnderTest:
        """The release with the evaluator's truth (its plan); the attacks keep their counts in ``book``."""
        return ReleaseUnderTest.of_stored(self.source_path, self.path, home.configs()[self.config_id], home.schema(),
                                          secrets, self.period, book)


def stored_release(home: DshHome, book: DigestBook, asset_key: dg.AssetKey, config_id: str,
                   period: str) -> StoredRelease:
    """The release of (config, period) as recorded; a Failure naming the problem when it is missing, quarantined or
    no longer the file that was recorded."""
    found = _verified(home, book, asset_key, config_id, period)
    if isinstance(found, str):
        raise dg.Failure(found)
    return found


def stored_release_or_none(home: DshHome, book: DigestBook, asset_key: dg.AssetKey, config_id: str,
                           period: str) -> StoredRelease | None:
    """The release of (config, period) as recorded, or None where ``stored_release`` would refuse it."""
    found = _verified(home, book, asset_key, config_id, period)
    return None if isinstance(found, str) else found


def _verified(home: DshHome, book: DigestBook, asset_key: dg.AssetKey, config_id: str,
              period: str) -> StoredRelease | str:
    record = recorded(home, asset_key, release_key(config_id, period))
    path = home.layout.released(config_id, period)
    if record is None or not path.is_file():
        return (f"release {config_id} {period} is not materialised (or was quarantined); "
                f"materialise `{asset_key.to_user_string()}` first")
    if book.sha256(path) != record.values["sha256"]:
        return f"{path} differs from its recorded SHA-256: refusing to score another file than the release"
    return StoredRelease(asset_key, config_id, period, path, home.layout.source(period), record.values)
