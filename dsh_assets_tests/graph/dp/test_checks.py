"""`budget_within_caps` on a real DP release: what the ledger says of the period, failing once a cap is crossed."""

from pathlib import Path

import dagster as dg
import pytest

from dsh_assets.graph.resources import BudgetLedger
from dsh_assets_tests.conftest import PERIOD, Harness, check_results, make_defs, releases_text, sourced_harness

DP = "dp_counts_eps1"
PACKAGED_PERIOD_CAP = "period_cap = 1.1\n"


def capped_releases(folder: Path, period_cap: float) -> Path:
    """The test tier's configurations with another period cap (a DPO lowering it after the period's debits)."""
    text = releases_text()
    assert text.count(PACKAGED_PERIOD_CAP) == 1, "the packaged [budget] table no longer says period_cap = 1.1"
    path = folder / f"period_cap_{period_cap}.toml"
    path.write_text(text.replace(PACKAGED_PERIOD_CAP, f"period_cap = {period_cap}\n"))
    return path


def _budget_evaluation(result: dg.ExecuteInProcessResult) -> dg.AssetCheckEvaluation:
    (evaluation,) = [e for e in result.get_asset_check_evaluations() if e.check_name == "budget_within_caps"]
    return evaluation


def _without_time(metadata: dict) -> dict:
    """Status values but ``as_of``, the time the ledger was read."""
    return {key: value for key, value in metadata.items() if key != "as_of"}


@pytest.fixture(scope="module")
def dp_release(tmp_path_factory, source_file):
    """One DP release (its counts and Q2 tables debit 0.75 + 0.25 = 1.0 of the period's cap, 1.1) with its checks,
    then its checks alone under a releases file whose period cap, 0.9, is below what the period has used."""
    folder = tmp_path_factory.mktemp("dp_checks")
    with sourced_harness(folder, source_file) as harness:
        released = harness.release_only(DP)
        over = Harness(make_defs(harness.home, source_file, capped_releases(folder, 0.9)), harness.instance,
                       harness.home).released_checks_only(DP)
        yield harness, released, over


def test_within_its_caps_the_check_passes_and_records_the_ledgers_status_of_the_period(dp_release):
    harness, released, _ = dp_release
    evaluation = _budget_evaluation(released)
    assert evaluation.passed
    recorded = {key: value.value for key, value in evaluation.metadata.items()}
    assert (recorded["period"], recorded["period_used"], recorded["period_cap"]) == (PERIOD, 1.0, 1.1)
    ledger = BudgetLedger(home=harness.defs.resources["home"]).ledger()
    assert _without_time(recorded) == _without_time(ledger.status(PERIOD))  # numbers stay numbers


def test_a_period_cap_below_what_the_period_used_fails_the_check_alone(dp_release):
    _, _, over = dp_release
    evaluation = _budget_evaluation(over)
    assert not evaluation.passed
    assert (evaluation.metadata["period_used"].value, evaluation.metadata["period_cap"].value) == (1.0, 0.9)
    assert check_results(over) == {"budget_within_caps": False, "checksum_drift": True, "no_identifiers": True}
