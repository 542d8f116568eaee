"""The publication ledger: no-op on the same bytes, one row-level release per source and period, races."""

import datetime as dt
import pytest

from dsh_assets.core.dp.ledger import Ledger
from dsh_assets.core.publication.ledger import PublicationError, PublicationLedger, PublicationRefused
from dsh_assets_tests.racing import race

NOW = dt.datetime(2026, 11, 20, 6, 0, tzinfo=dt.timezone.utc)
PERIOD = "2026-11-20"
SOURCE = "5" * 64
C15, C17, DP = "c15_window_k5_noise5", "c17_hour_groups_k5_noise10", "dp_counts_eps1"


@pytest.fixture
def ledger(tmp_path) -> PublicationLedger:
    return PublicationLedger(tmp_path / "publications.sqlite")


def test_a_publication_is_recorded_with_everything_that_identifies_it(ledger):
    record = ledger.record(SOURCE, PERIOD, C15, "a" * 64, "rows", "/published/c15.parquet", now=NOW)
    assert (record.source_sha256, record.period, record.config_id, record.release_sha256, record.kind,
            record.path, record.also_publish, record.published_at) == (
        SOURCE, PERIOD, C15, "a" * 64, "rows", "/published/c15.parquet", False, "2026-11-20T06:00:00+00:00")
    assert ledger.entries() == ledger.published(PERIOD) == [record]
    assert ledger.published("2026-11-21") == []
    assert PublicationLedger(ledger.path).entries() == [record]  # durable: another instance reads it back


def test_the_same_bytes_again_are_a_no_op(ledger):
    first = ledger.record(SOURCE, PERIOD, C15, "a" * 64, "rows", "/published/c15.parquet", now=NOW)
    again = ledger.record(SOURCE, dt.date(2026, 11, 20), C15, "a" * 64, "rows", "/elsewhere.parquet",
                          now=NOW + dt.timedelta(hours=1))
    assert again == first and len(ledger.entries()) == 1


def test_a_second_row_level_release_of_the_period_is_refused_and_names_the_first(ledger):
    first = ledger.record(SOURCE, PERIOD, C15, "a" * 64, "rows", "/published/c15.parquet", now=NOW)
    with pytest.raises(PublicationRefused) as other_config:
        ledger.record(SOURCE, PERIOD, C17, "b" * 64, "rows", "/published/c17.parquet", now=NOW)
    assert other_config.value.existing == first
    message = str(other_config.value)
    assert C17 in message and f"publication {first.id}: {C15!r}" in message and "[publication.pairs]" in message
    with pytest.raises(PublicationRefused):  # the same configuration with other bytes is a second release too
        ledger.record(SOURCE, PERIOD, C15, "c" * 64, "rows", "/published/c15-rerun.parquet", now=NOW)
    assert ledger.entries() == [first]  # a refusal records nothing


def test_an_additional_publication_is_recorded_when_allowed(ledger):
    ledger.record(SOURCE, PERIOD, C15, "a" * 64, "rows", "/published/c15.parquet", now=NOW)
    second = ledger.record(SOURCE, PERIOD, C17, "b" * 64, "rows", "/published/c17.parquet", also_publish=True,
                           now=NOW)
    assert second.also_publish
    assert [r.config_id for r in ledger.row_level(SOURCE, PERIOD)] == [C15, C17]


def test_other_periods_and_sources_are_not_blocked(ledger):
    ledger.record(SOURCE, PERIOD, C15, "a" * 64, "rows", "/p/1.parquet", now=NOW)
    ledger.record(SOURCE, "2026-11-21", C17, "b" * 64, "rows", "/p/2.parquet", now=NOW)
    ledger.record("6" * 64, PERIOD, C17, "c" * 64, "rows", "/p/3.parquet", now=NOW)
    assert len(ledger.entries()) == 3


def test_dp_count_tables_neither_block_nor_are_blocked(ledger):
    ledger.record(SOURCE, PERIOD, DP, "d" * 64, "dp_counts", "/published/dp.parquet", now=NOW)
    ledger.record(SOURCE, PERIOD, C15, "a" * 64, "rows", "/published/c15.parquet", now=NOW)
    ledger.record(SOURCE, PERIOD, DP + "_b", "e" * 64, "dp_counts", "/published/dp_b.parquet", now=NOW)
    assert [r.kind for r in ledger.published(PERIOD)] == ["dp_counts", "rows", "dp_counts"]


def test_it_shares_the_budget_ledgers_file_in_its_own_table(tmp_path):
    path = tmp_path / "budget.sqlite"
    budget = Ledger(path, period_cap=1.0, year_cap=3.0)
    budget.complete(budget.reserve(DP, PERIOD, 0.5, NOW), "d" * 64)
    publications = PublicationLedger(path)
    publications.record(SOURCE, PERIOD, DP, "d" * 64, "dp_counts", "/published/dp.parquet", now=NOW)
    assert len(budget.entries()) == 1 and len(publications.entries()) == 1
    assert budget.status(PERIOD)["period_used"] == 0.5


@pytest.mark.parametrize("arguments, message", [
    ((SOURCE, PERIOD, C15, "a" * 64, "csv"), "kind must be one of"),
    ((SOURCE, "20 November", C15, "a" * 64, "rows"), "not an ISO date"),
    (("", PERIOD, C15, "a" * 64, "rows"), "source_sha256 must be"),
    ((SOURCE, PERIOD, C15, None, "rows"), "release_sha256 must be"),
])
def test_bad_arguments_are_refused(ledger, arguments, message):
    with pytest.raises(PublicationError, match=message):
        ledger.record(*arguments, "/p.parquet")
    assert ledger.entries() == []


def _publish_in_process(barrier, results, path, config_id, release_sha256):
    ledger = PublicationLedger(path)
    barrier.wait()
    try:
        ledger.record(SOURCE, PERIOD, config_id, release_sha256, "rows", f"/published/{config_id}.parquet")
        results.put((config_id, "won"))
    except PublicationRefused:
        results.put((config_id, "refused"))


def test_two_processes_racing_to_publish_one_period_one_wins(tmp_path):
    path = tmp_path / "publications.sqlite"
    PublicationLedger(path)
    outcomes = dict(race(_publish_in_process, [(path, C15, "a" * 64), (path, C17, "b" * 64)]))
    assert sorted(outcomes.values()) == ["refused", "won"]
    [winner] = PublicationLedger(path).entries()
    assert outcomes[winner.config_id] == "won"


def test_a_refusal_is_kept_as_its_runs_verdict_and_needs_a_reason(ledger):
    kept = ledger.record_refusal("run-1", "published", "2026-11-20", "c15", ["informed_match_risk 0.8 > max 0.05"],
                                 {"informed_match_risk": 0.8}, now=dt.datetime(2026, 11, 21, 6, tzinfo=dt.timezone.utc))
    ledger.record_refusal("run-2", "dp_published", "2026-11-20", "dp_counts_eps1", ["audit failed"], {}, 1.1)
    assert ledger.refusals_of_run("run-1") == {"published": kept}
    assert kept.reasons == ["informed_match_risk 0.8 > max 0.05"] and kept.gate == {"informed_match_risk": 0.8}
    assert kept.epsilon_spent is None and kept.refused_at.startswith("2026-11-21T06:00")
    assert ledger.refusals_of_run("run-2")["dp_published"].epsilon_spent == 1.1
    assert ledger.refusals_of_run("run-3") == {} and ledger.published("2026-11-20") == []
    with pytest.raises(PublicationError, match="at least one reason"):
        ledger.record_refusal("run-4", "published", "2026-11-20", "c15", [], {})
