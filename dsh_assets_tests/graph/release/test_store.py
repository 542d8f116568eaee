"""The release store hands a downstream asset only the release its materialisation recorded."""

from __future__ import annotations

import dagster as dg
import pytest

from dsh_assets.core.files import DigestBook
from dsh_assets.core.records import Record
from dsh_assets.graph.partitions import release_key
from dsh_assets.graph.release.store import stored_release, stored_release_or_none
from dsh_assets.graph.resources import DshHome
from dsh_assets_tests.conftest import PERIOD, Harness, step_failure_messages

CONFIG = "c15_window_k5_noise5"
RELEASED = dg.AssetKey("released")


def _recorded_release(home: DshHome, content: bytes, book: DigestBook) -> str:
    """A release file and its record, as the release step leaves them (its digest kept in ``book``); its SHA-256."""
    path = home.layout.released(CONFIG, PERIOD)
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    digest = book.sha256(path, own_write=True)
    home.records().write(Record("released", str(release_key(CONFIG, PERIOD)), "run-1", "v1",
                                {"sha256": digest, "seed_id": "seed-7"}))
    return digest


def test_a_recorded_release_is_handed_over_with_its_digest_seed_and_partition(tmp_path):
    home, book = DshHome(home=str(tmp_path)), DigestBook()
    digest = _recorded_release(home, b"release bytes", book)

    stored = stored_release(home, book, RELEASED, CONFIG, PERIOD)

    assert (stored.path, stored.source_path) == (home.layout.released(CONFIG, PERIOD), home.layout.source(PERIOD))
    assert stored.provenance() == {
        "release_sha256": digest, "seed_id": "seed-7",
        "release": dg.MetadataValue.json({"asset": "released", "partition": f"{CONFIG}|{PERIOD}"})}


def test_a_release_changed_since_its_record_is_refused_by_name(tmp_path):
    """The book kept the digest the release was written with: a change since is read again, not trusted."""
    home, book = DshHome(home=str(tmp_path)), DigestBook()
    _recorded_release(home, b"release bytes", book)
    with open(home.layout.released(CONFIG, PERIOD), "ab") as handle:
        handle.write(b"\0")

    with pytest.raises(dg.Failure, match="differs from its recorded SHA-256: refusing to score another file"):
        stored_release(home, book, RELEASED, CONFIG, PERIOD)
    assert stored_release_or_none(home, book, RELEASED, CONFIG, PERIOD) is None


@pytest.mark.parametrize("missing", ["file", "record"])
def test_a_release_without_its_file_or_its_record_is_not_materialised(tmp_path, missing):
    home, book = DshHome(home=str(tmp_path)), DigestBook()
    _recorded_release(home, b"release bytes", book)
    if missing == "file":
        home.layout.released(CONFIG, PERIOD).unlink()
    else:
        home.records().path("released", str(release_key(CONFIG, PERIOD))).unlink()

    with pytest.raises(dg.Failure, match=f"release {CONFIG} {PERIOD} is not materialised .*materialise `released`"):
        stored_release(home, book, RELEASED, CONFIG, PERIOD)
    assert stored_release_or_none(home, book, RELEASED, CONFIG, PERIOD) is None


def test_evidence_over_a_release_changed_on_disk_fails_and_records_nothing(harness: Harness):
    harness.source()
    assert harness.release_only(CONFIG).success
    with open(harness.released_path(CONFIG), "ab") as handle:
        handle.write(b"\0")

    result = harness.evidence_only("linkage", CONFIG)

    assert not result.success
    assert any("refusing to score another file than the release" in m for m in step_failure_messages(result))
    assert result.get_asset_materialization_events() == []
    assert not (harness.home / "records" / "linkage").exists()
