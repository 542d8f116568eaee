"""A period's candidates as the gate sees them, read back from real materialisations: each status, and every reason
a candidate is refused (its checks, its quarantine, stale evidence, the gate of its kind)."""

import pytest

from dsh_assets.core.files import DigestBook
from dsh_assets.core.publication.gate import parse_publication
from dsh_assets.core.publication.quarantine import quarantine_note
from dsh_assets.core.release.configs import DP_COUNTS, ROW_RELEASE
from dsh_assets.core.secrets import ALIAS_KEY_ENV, NOISE_SEED_ENV
from dsh_assets.graph.evidence.gather import CANDIDATE, MISSING, QUARANTINED, answer_details, candidate, candidates
from dsh_assets.graph.records import FAILED, SUCCEEDED
from dsh_assets_tests.conftest import (
    DP_RELEASE_CHECKS,
    PERIOD,
    RELEASED_CHECKS,
    Harness,
    check_results,
    make_defs,
    materialization_metadata,
    sourced_harness,
)
from dsh_assets_tests.graph.dp.test_checks import capped_releases
from dsh_assets_tests.graph.release.test_checks import append_a_byte
from dsh_assets_tests.tables import sha256_file

CLEAN, STALE, NEVER, CHANGED, QUARANTINED_ID, DP = (
    "c15_window_k5_noise5", "c16_window_k5_noise5_key", "c17_hour_groups_k5_noise10", "c18_window_k5_shuffle",
    "id_removal", "dp_counts_eps1")
CHECK_NAMES = {ROW_RELEASE: tuple(sorted(RELEASED_CHECKS)), DP_COUNTS: tuple(sorted(DP_RELEASE_CHECKS))}
POLICY = parse_publication({"publication": {"gate": {"singling_out_rate": {"max": 0.5},
                                                     "dp_counts": {"budget_within_caps": {"equals": True}}}}})
OVER_THE_PERIOD_CAP = {"period_used": 1.2, "period_cap": 1.1, "year_used": 1.2, "year_cap": 402.6}


@pytest.fixture(scope="module")
def gathered(tmp_path_factory, source_file):
    """One home whose period holds a candidate in each state: CLEAN released, checked and scored by `singling_out`;
    STALE scored, then released again with other secrets (other bytes); NEVER not released; CHANGED released,
    then a byte appended with no check run since; QUARANTINED_ID released, a byte appended, its checks run (the
    drift quarantines it); DP released, then its checks run under a period cap (0.9) below what it used (1.0)."""
    folder = tmp_path_factory.mktemp("gather")
    with sourced_harness(folder, source_file) as harness:
        for config_id in (CLEAN, STALE, CHANGED, QUARANTINED_ID, DP):
            assert all(check_results(harness.release_only(config_id)).values()), config_id
        for config_id in (CLEAN, STALE):
            assert harness.evidence_only("singling_out", config_id).success
        scored = sha256_file(harness.released_path(STALE))
        with pytest.MonkeyPatch.context() as environment:
            environment.setenv(NOISE_SEED_ENV, "another-noise-seed")
            environment.setenv(ALIAS_KEY_ENV, "another-alias-key")
            again = harness.release_only(STALE)
        assert materialization_metadata(again, "released")["sha256"].value != scored
        for config_id in (CHANGED, QUARANTINED_ID):
            append_a_byte(harness.released_path(config_id))
        assert not harness.released_checks_only(QUARANTINED_ID).success
        Harness(make_defs(harness.home, source_file, capped_releases(folder, 0.9)), harness.instance, harness.home
                ).released_checks_only(DP)
        yield harness.defs.resources["home"]


def judged(home, config_id: str, budget: dict | None = None):
    return candidate(home, DigestBook(), POLICY, home.configs()[config_id], PERIOD, CHECK_NAMES, budget)


def test_a_checked_release_with_evidence_of_these_bytes_is_publishable_when_its_gate_holds(gathered):
    found = judged(gathered, CLEAN)
    assert (found.status, found.refused, found.publishable) == (CANDIDATE, [], True)
    assert found.checks == dict.fromkeys(CHECK_NAMES[ROW_RELEASE], SUCCEEDED)
    assert set(found.records) == {"released", "singling_out"}  # the evidence never materialised is left out
    assert found.released["sha256"] == sha256_file(gathered.layout.released(CLEAN, PERIOD))
    # k = 5 leaves no subscriber alone in a cell: a rate of 0, within the gate's 0.5
    assert found.gate == {"singling_out_rate": {"value": 0.0, "operator": "max", "limit": 0.5, "ok": True}}


def test_a_configuration_never_released_is_missing(gathered):
    found = judged(gathered, NEVER)
    assert (found.status, found.refused, found.records, found.released) == (
        MISSING, [f"{NEVER} has no release for {PERIOD}"], {}, {})
    assert not found.publishable


def test_a_release_changed_on_disk_and_not_quarantined_is_missing(gathered):
    found = judged(gathered, CHANGED)
    path = gathered.layout.released(CHANGED, PERIOD)
    assert (found.status, found.refused) == (MISSING, [f"{path} is missing or differs from its recorded SHA-256"])


def test_a_quarantined_release_is_refused_with_the_checks_that_failed_it(gathered):
    found = judged(gathered, QUARANTINED_ID)
    failed = quarantine_note(gathered.layout, QUARANTINED_ID, PERIOD)["failed_checks"]  # the first check run to fail
    assert failed and found.status == QUARANTINED
    assert found.refused == [f"quarantined: {check} failed ({problem})" for check, problem in failed.items()]


def test_evidence_that_scored_an_earlier_release_refuses_the_candidate(gathered):
    found = judged(gathered, STALE)
    assert found.status == CANDIDATE and found.checks == dict.fromkeys(CHECK_NAMES[ROW_RELEASE], SUCCEEDED)
    assert found.refused == ["evidence singling_out scored another release than the one on disk; re-materialise it"]


def test_a_dp_candidate_is_judged_on_its_own_kinds_checks_and_on_the_ledgers_budget_now(gathered):
    as_recorded = judged(gathered, DP)  # the budget its release recorded: 1.0 of the period's 1.1
    assert as_recorded.checks == {"budget_within_caps": FAILED, "checksum_drift": SUCCEEDED,
                                  "no_identifiers": SUCCEEDED}
    assert as_recorded.refused == ["check budget_within_caps: FAILED"]
    now = judged(gathered, DP, budget=OVER_THE_PERIOD_CAP)
    assert now.evidence.budget == OVER_THE_PERIOD_CAP
    assert now.refused == ["check budget_within_caps: FAILED", "budget_within_caps false != equals true"]


def test_every_configuration_of_the_home_is_a_candidate_of_the_period(gathered):
    found = candidates(gathered, DigestBook(), POLICY, PERIOD, CHECK_NAMES)
    assert set(found) == set(gathered.configs())
    assert {config_id for config_id, each in found.items() if each.publishable} == {CLEAN}


def test_the_answers_details_keep_the_recorded_numbers_and_drop_what_was_not_measured():
    recorded = {"q1_base_gaming_ms": 41.5, "q1_release_gaming_ms": None, "q2_slow_threshold": 1000,
                "q3_base": "n/a", "q3_rule": "top decile", "rows_released": 25}
    assert answer_details(recorded) == {"q1_base_gaming_ms": 41.5, "q2_slow_threshold": 1000, "q3_rule": "top decile"}
