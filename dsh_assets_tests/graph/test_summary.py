"""`dsh run --json` and `dsh sweep --json` from outcomes made by hand: scripts read these keys, so each is pinned to
where it comes from."""

import pytest

from dsh_assets.core.publication.gate import parse_publication
from dsh_assets.core.release.configs import load_configs
from dsh_assets.graph.resources import BudgetLedger, DshHome
from dsh_assets.graph.runner import PeriodOutcome, Publication, StepOutcome
from dsh_assets.graph.summary import budget_after, run_json, sweep_json
from dsh_assets_tests.conftest import PERIOD

C15, C17, DP = "c15_window_k5_noise5", "c17_hour_groups_k5_noise10", "dp_counts_eps1"
SOURCE = StepOutcome(success=True, metadata={"path": "/in/source.parquet", "input_sha256": "11" * 32,
                                             "sha256": "22" * 32, "rows": 30, "subscribers": 6, "period": PERIOD},
                     figures={}, checks={"source_schema": True}, errors=[], seconds=1.0)
RECORDED_RELEASE = {"path": "/home/candidates/c15/released.parquet", "sha256": "33" * 32, "content_sha256": "44" * 32,
                    "engine": "duckdb", "rows_in": 30, "rows_released": 25, "rows_withheld": 5, "seed_id": "seed-1"}
PAIR = {"rows_relinked": 0.02, "rows_relinked_ci": [0.01, 0.03], "combined_singling_out_rate": 0.0,
        "rows_compared": 25}
RECORDED_BUDGET = {"period_used": 1.0, "period_cap": 1.1, "year_used": 1.0, "year_cap": 402.6}
BUDGET_NOW = {"period_used": 1.1, "period_cap": 1.1, "year_used": 1.1, "year_cap": 402.6}


def release(success: bool = True, checks: dict | None = None, errors: list | None = None, **others) -> StepOutcome:
    """A row-level release's run that recorded RECORDED_RELEASE (plus its lineage) and a singling-out rate of 0."""
    return StepOutcome(success=success, metadata={**RECORDED_RELEASE, "lineage": {"source": "s"}},
                       figures={"singling_out": {"singling_out_rate": 0.0}},
                       checks=checks if checks is not None else {"checksum_drift": True}, errors=errors or [],
                       seconds=2.0, **others)


def dp_release() -> StepOutcome:
    """A DP release whose run recorded RECORDED_BUDGET, and whose own publication published it."""
    return StepOutcome(success=True, metadata={"sha256": "55" * 32},
                       figures={"dp_release": {"dp": {"epsilon": 0.75}, "budget": RECORDED_BUDGET}},
                       checks={"budget_within_caps": True}, errors=[], seconds=2.0,
                       recorded={"dp_published": {"path": "/home/published/dp_counts.parquet", "sha256": "55" * 32,
                                                  "gate": {"budget_within_caps": {"ok": True}},
                                                  "epsilon_spent": 1.1}})


def publication(published: bool, pairs: dict | None = None) -> Publication:
    """The period's publication step of C15 (its step's metadata names the published file either way)."""
    step = StepOutcome(success=True, metadata={"path": "/home/published/released.parquet", "sha256": "33" * 32},
                       figures={"release_pairs": {"pairs": pairs or {}}}, checks={}, errors=[], seconds=1.0)
    return Publication(step=step, config=C15, published=published, refused=[] if published else ["too risky"],
                       gate={"singling_out_rate": {"ok": published}}, crashed=False,
                       considered=[{"config": C15, "refused": [] if published else ["too risky"]}])


def test_the_source_entry_tells_the_input_file_digest_from_the_stored_ones():
    source = run_json(PeriodOutcome(PERIOD, SOURCE), {}, None)["source"]
    assert source == {"path": "/in/source.parquet", "sha256": "11" * 32, "stored_sha256": "22" * 32, "rows": 30,
                      "subscribers": 6, "ok": True, "errors": []}


def test_a_release_entry_repeats_its_recorded_provenance_with_its_checks_status_and_evidence():
    failed = release(success=False, checks={"checksum_drift": True, "min_cell_size": False},
                     errors=["check min_cell_size failed: a released cell has 4 rows, under k = 5"])
    entry = run_json(PeriodOutcome(PERIOD, SOURCE, {C15: failed}), {C15: "quarantined"}, BUDGET_NOW)["releases"][C15]
    assert {key: entry[key] for key in RECORDED_RELEASE} == RECORDED_RELEASE
    assert "lineage" not in entry  # recorded, but not one of the entry's keys
    assert (entry["checks"], entry["ok"], entry["status"]) == ({"checksum_drift": True, "min_cell_size": False},
                                                               False, "quarantined")
    assert entry["errors"] == ["check min_cell_size failed: a released cell has 4 rows, under k = 5"]
    assert entry["privacy"] == {"singling_out_rate": 0.0} and entry["utility"] is None
    assert "budget" not in entry and "publication" not in entry  # a row-level release has neither
    assert entry["pairs"] == {}


def test_pairs_keep_only_the_pair_figures_against_each_other_candidate_in_id_order():
    pairs = {C17: {"c16_window_k5_noise5_key": PAIR, C15: PAIR}}  # B -> A -> figures, A not in id order
    outcome = PeriodOutcome(PERIOD, SOURCE, {C15: release(), C17: release()}, publication(True, pairs))
    releases = run_json(outcome, {C15: "published", C17: "candidate"}, None)["releases"]
    kept = {"rows_relinked": 0.02, "rows_relinked_ci": [0.01, 0.03], "combined_singling_out_rate": 0.0}
    assert list(releases[C17]["pairs"].items()) == [(C15, kept), ("c16_window_k5_noise5_key", kept)]
    assert releases[C15]["pairs"] == {}  # held by nothing as B


def test_a_dp_entry_shows_the_ledgers_budget_after_the_run_and_its_own_publication():
    outcome = PeriodOutcome(PERIOD, SOURCE, {DP: dp_release()})
    entry = run_json(outcome, {DP: "candidate"}, BUDGET_NOW)["releases"][DP]
    assert entry["budget"] == BUDGET_NOW  # not the 1.0 its release recorded before the period's later debits
    assert entry["dp"] == {"epsilon": 0.75}
    assert entry["publication"] == {"published": True, "path": "/home/published/dp_counts.parquet",
                                    "sha256": "55" * 32, "refused": [], "gate": {"budget_within_caps": {"ok": True}},
                                    "epsilon_spent": 1.1, "budget_spent": True}
    assert run_json(outcome, {DP: "candidate"}, None)["releases"][DP]["budget"] == RECORDED_BUDGET  # no ledger


def test_the_publication_names_the_published_file_only_when_it_was_published():
    published = run_json(PeriodOutcome(PERIOD, SOURCE, {C15: release()}, publication(True)), {C15: "published"},
                         None)["publication"]
    assert published == {"config": C15, "published": True, "path": "/home/published/released.parquet",
                         "sha256": "33" * 32, "refused": [], "gate": {"singling_out_rate": {"ok": True}},
                         "considered": [{"config": C15, "refused": []}]}
    refused = run_json(PeriodOutcome(PERIOD, SOURCE, {C15: release()}, publication(False)), {C15: "candidate"},
                       None)["publication"]
    assert (refused["published"], refused["path"], refused["sha256"], refused["refused"]) == (False, None, None,
                                                                                              ["too risky"])
    assert run_json(PeriodOutcome(PERIOD, SOURCE), {}, None)["publication"] == {
        "config": None, "published": False, "path": None, "sha256": None, "refused": [], "gate": {}, "considered": []}


def test_the_report_entry_is_where_the_report_was_written():
    written = StepOutcome(success=True, metadata={"path": "/home/reports/report.html"}, figures={}, checks={},
                          errors=[], seconds=1.0)
    assert run_json(PeriodOutcome(PERIOD, SOURCE, report=written), {}, None)["report"] == {
        "path": "/home/reports/report.html"}


def test_the_budget_is_the_ledgers_status_after_every_debit_and_none_without_a_ledger(tmp_path):
    home = DshHome(home=str(tmp_path))
    assert budget_after(home, PERIOD) is None
    assert not home.layout.ledger.exists()  # reading the budget made no ledger
    ledger = BudgetLedger(home=home).ledger()
    ledger.reserve(DP, PERIOD, 0.75)
    ledger.reserve(f"{DP}/q1", PERIOD, 0.1)  # a later debit of the same period
    budget = budget_after(home, PERIOD)
    # 0.75 + 0.1 used of the packaged period cap 1.1: 0.25 left
    assert (budget["period_used"], budget["period_cap"], budget["period_left"]) == pytest.approx((0.85, 1.1, 0.25))


def test_a_sweep_point_shows_its_sweep_operations_and_the_gates_verdict_refused_by_its_failed_checks():
    configs = load_configs()
    policy = parse_publication({"publication": {"gate": {"singling_out_rate": {"max": 0.001}}}})
    failing, passing = "sweep_shuffle_noise_0p05", "sweep_shuffle_noise_0p1"
    outcome = PeriodOutcome(PERIOD, SOURCE, {
        failing: release(success=False, checks={"checksum_drift": True, "min_cell_size": False},
                         errors=["the step crashed"]),
        passing: release()})
    swept = sweep_json(outcome, configs, policy)
    assert swept["period"] == PERIOD and swept["report"] == {"path": None}
    point = swept["candidates"][failing]
    assert (point["sweep"], point["operations"], point["ok"]) == ("shuffle_noise", configs[failing].operations(),
                                                                  False)
    assert point["refused"] == ["check min_cell_size failed", "the step crashed"] and not point["publishable"]
    other = swept["candidates"][passing]
    assert other["refused"] == [] and other["publishable"] and other["ok"]
    assert other["gate"] == {"singling_out_rate": {"value": 0.0, "operator": "max", "limit": 0.001, "ok": True}}
