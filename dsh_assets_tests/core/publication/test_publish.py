"""Publishing a candidate: the ledger decides before the file lands, so racing publications leave one file."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.files import DigestBook, atomic_path
from dsh_assets.core.layout import Layout
from dsh_assets.core.publication.ledger import PublicationLedger, PublicationRefused
from dsh_assets.core.publication.publish import CandidateChanged, publish_candidate
from dsh_assets_tests.racing import race
from dsh_assets_tests.tables import sha256_file

PERIOD = "2026-11-20"
SOURCE = "5" * 64
C15, C17 = "c15_window_k5_noise5", "c17_hour_groups_k5_noise10"


def candidate(layout: Layout, config_id: str, value: float) -> str:
    """A candidate written as the release writes it: a temporary renamed into place."""
    path = layout.released(config_id, PERIOD)
    with atomic_path(path) as temporary:
        pq.write_table(pa.table({"x": [value]}), temporary)
    return sha256_file(path)


def leftovers(layout: Layout) -> list[str]:
    return sorted(p.name for p in layout.home.rglob("*.tmp"))


def test_publish_copies_the_recorded_candidate_and_records_it(tmp_path):
    layout = Layout(tmp_path)
    digest = candidate(layout, C15, 1.0)
    ledger = PublicationLedger(layout.ledger)
    record = publish_candidate(layout, ledger, C15, "rows", PERIOD, digest, SOURCE, {"seed_id": "s"}, book=DigestBook())
    assert record.path == str(layout.published(PERIOD)) and sha256_file(layout.published(PERIOD)) == digest
    note = json.loads((layout.published_dir(PERIOD) / "publication.json").read_text())
    assert note["config"] == C15 and note["sha256"] == digest and note["seed_id"] == "s"
    # a lost copy is restored by publishing the same bytes again, without a second ledger entry
    layout.published(PERIOD).unlink()
    publish_candidate(layout, ledger, C15, "rows", PERIOD, digest, SOURCE, {}, book=DigestBook())
    assert sha256_file(layout.published(PERIOD)) == digest and len(ledger.entries()) == 1


def test_a_dp_table_is_published_beside_the_periods_release_never_as_it(tmp_path):
    """Published first, a DP table takes neither the period's released.parquet and publication.json nor pushes
    the row-level release published after it under also/."""
    layout = Layout(tmp_path)
    ledger = PublicationLedger(layout.ledger)
    dp_digest = candidate(layout, "dp_counts_eps1", 2.0)
    q2 = layout.dp_q2("dp_counts_eps1", PERIOD)
    pq.write_table(pa.table({"app": ["IM"]}), q2)
    record = publish_candidate(layout, ledger, "dp_counts_eps1", "dp_counts", PERIOD, dp_digest, SOURCE, {},
                               book=DigestBook())
    folder = layout.published_dir(PERIOD) / "dp" / "dp_counts_eps1"
    assert record.path == str(folder / "dp_counts.parquet") and sha256_file(folder / "dp_counts.parquet") == dp_digest
    note = json.loads((folder / "publication.json").read_text())
    assert note["file"] == "dp_counts.parquet" and note["further_tables"] == {q2.name: sha256_file(q2)}
    row_digest = candidate(layout, C15, 1.0)
    record = publish_candidate(layout, ledger, C15, "rows", PERIOD, row_digest, SOURCE, {}, book=DigestBook())
    assert record.path == str(layout.published(PERIOD)) and not record.also_publish
    assert sorted(p.name for p in layout.published_dir(PERIOD).iterdir()) == ["dp", "publication.json",
                                                                              "released.parquet"]


def test_the_published_file_is_a_link_to_the_candidate_and_outlives_its_replacement(tmp_path):
    layout = Layout(tmp_path)
    digest = candidate(layout, C15, 1.0)
    publish_candidate(layout, PublicationLedger(layout.ledger), C15, "rows", PERIOD, digest, SOURCE, {},
                      book=DigestBook())
    assert layout.published(PERIOD).samefile(layout.released(C15, PERIOD))
    candidate(layout, C15, 3.0)  # a re-release replaces the candidate by renaming a new file into place
    assert sha256_file(layout.published(PERIOD)) == digest


def test_across_file_systems_the_candidate_is_copied_and_checked(tmp_path, monkeypatch):
    def cross_device(*_):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr("dsh_assets.core.publication.publish.os.link", cross_device)
    layout = Layout(tmp_path)
    digest = candidate(layout, C15, 1.0)
    publish_candidate(layout, PublicationLedger(layout.ledger), C15, "rows", PERIOD, digest, SOURCE, {},
                      book=DigestBook())
    assert not layout.published(PERIOD).samefile(layout.released(C15, PERIOD))
    assert sha256_file(layout.published(PERIOD)) == digest and leftovers(layout) == []


def test_a_refused_or_changed_candidate_leaves_nothing_behind(tmp_path):
    layout = Layout(tmp_path)
    ledger = PublicationLedger(layout.ledger)
    publish_candidate(layout, ledger, C15, "rows", PERIOD, candidate(layout, C15, 1.0), SOURCE, {}, book=DigestBook())
    other = candidate(layout, C17, 2.0)
    with pytest.raises(PublicationRefused):
        publish_candidate(layout, ledger, C17, "rows", PERIOD, other, SOURCE, {}, book=DigestBook())
    assert not layout.also_published_dir(C17, PERIOD).exists() and leftovers(layout) == []
    with pytest.raises(CandidateChanged):
        publish_candidate(layout, ledger, C17, "rows", PERIOD, "0" * 64, SOURCE, {}, also_publish=True,
                          book=DigestBook())
    assert not (layout.also_published_dir(C17, PERIOD) / "released.parquet").exists() and leftovers(layout) == []
    assert [r.config_id for r in ledger.entries()] == [C15]


def _publish_racing(barrier, results, home: str, config_id: str, digest: str) -> None:
    layout = Layout(__import__("pathlib").Path(home))
    ledger = PublicationLedger(layout.ledger)
    barrier.wait()
    try:
        publish_candidate(layout, ledger, config_id, "rows", PERIOD, digest, SOURCE, {}, book=DigestBook())
        results.put((config_id, "won"))
    except PublicationRefused:
        results.put((config_id, "refused"))


def test_two_racing_publications_of_one_period_exactly_one_wins(tmp_path):
    layout = Layout(tmp_path)
    digests = {C15: candidate(layout, C15, 1.0), C17: candidate(layout, C17, 2.0)}
    PublicationLedger(layout.ledger)  # the table exists before the race
    outcome = dict(race(_publish_racing, [(str(tmp_path), config_id, digest) for config_id, digest in digests.items()]))
    assert sorted(outcome.values()) == ["refused", "won"]
    [winner] = [config_id for config_id, result in outcome.items() if result == "won"]
    assert sha256_file(layout.published(PERIOD)) == digests[winner]
    assert [r.config_id for r in PublicationLedger(layout.ledger).entries()] == [winner]
    assert not (layout.published_dir(PERIOD) / "also").exists() and leftovers(layout) == []
