"""The release gate: parsing the DPO's criteria, deriving values from evidence, verdicts and refusal reasons."""

import pytest

from dsh_assets.core.evidence.metrics import Evidence
from dsh_assets.core.publication import gate
from dsh_assets.core.publication.gate import (
    Criterion,
    check_candidate,
    dp_gate_values,
    evaluate,
    frontier_point,
    gate_values,
    parse_publication,
)
from dsh_assets.core.release.configs import DP_COUNTS, ROW_RELEASE, ConfigError

KNOWN_CONFIGS = ("id_removal", "c15_window_k5_noise5", "c17_hour_groups_k5_noise10", "c21_window_microagg10_shuffle",
                 "c22_hour_k5_shuffle_code10_round3", "c23_hour_k5_shuffle_noise2_code10_round3",
                 "c24_hour_k5_copula_code10_round3", "dp_counts_eps1")
DPO_GATE = {
    "singling_out_rate": {"max": 0.001},
    "fingerprint_correct_upper": {"max": 0.05},
    "linkage_correct_risk": {"max": 0.05},
    "informed_match_risk": {"max": 0.05},
    "anonymeter_singling_out_risk_upper": {"max": 0.05},
    "anonymeter_linkability_risk_upper": {"max": 0.05},
    "anonymeter_inference_risk_upper": {"max": 0.05},
    "utility_kept": {"min": 0.95},
    "median_quantile_error": {"max": 0.02},
    "large_group_max_quantile_error": {"max": 0.05},
    "large_group_max_tail_share_error_pp": {"max": 1.0},
    "pair_correlation_max_error": {"max": 0.10},
    "pair_correlation_median_error": {"max": 0.03},
    "q1_same": {"equals": True},
    "q2_same_decision": {"equals": True},
}


DP_GATE = {
    "audit_claim_holds": {"equals": True},
    "replication_ok": {"equals": True},
    "small_cells_total_error": {"max": 8},
    "budget_within_caps": {"equals": True},
}


def document(**publication) -> dict:
    return {"publication": {"config": "c15_window_k5_noise5", "gate": {**DPO_GATE, DP_COUNTS: DP_GATE},
                            **publication}}


def dp_evidence(**dp) -> Evidence:
    """A DP release's evidence; every DP criterion holds."""
    return Evidence(answers={"q1": {"same_answer": True}},
                    dp={"epsilon": 1.0, "replication_ok": True, "q1_replication_ok": True,
                        "audit": {"epsilon_claimed": 0.75, "epsilon_lower": 0.31, "ok": True},
                        "error": {"small": {"total": 3.2, "bias": 0.7, "noise": 3.0}, "large": {"total": 15.8}}, **dp},
                    budget={"period_used": 1.1, "period_cap": 1.1, "year_used": 1.1, "year_cap": 402.6})


def evidence(**privacy) -> Evidence:
    """A row-level candidate's evidence; every criterion holds."""
    return Evidence(
        privacy={"singling_out_rate": 0.0, "fingerprint_correct": 0.01, "fingerprint_correct_ci": [0.005, 0.02],
                 "linkage_correct_risk": 0.0, "informed_match_risk": 0.01, "anonymeter_inference_risk": 0.02,
                 "anonymeter_singling_out_risk_upper": 0.03, "anonymeter_linkability_risk_upper": 0.01,
                 "anonymeter_inference_risk_upper": 0.04, "anonymeter": {"strength": "full", "blocks": 5},
                 **privacy},
        utility={"groups_kept": 96, "groups_total": 100, "max_quantile_error": 0.1, "median_quantile_error": 0.01,
                 "large_group_max_quantile_error": 0.03, "large_group_max_tail_share_error_pp": 0.5,
                 "pair_correlation_max_error": 0.04, "pair_correlation_median_error": 0.01},
        answers={"q1": {"same_answer": True}, "q2": {"same_answer": False, "same_decision": True},
                 "q3": {"same_answer": False}},
    )


def test_the_packaged_gate_parses_and_names_a_known_configuration():
    policy = gate.load_publication(known_configs=KNOWN_CONFIGS)
    assert policy.declared and policy.config_ids == ("c24_hour_k5_copula_code10_round3",
                                                     "c22_hour_k5_shuffle_code10_round3",
                                                     "c23_hour_k5_shuffle_noise2_code10_round3")
    assert {c.name for c in policy.gates[ROW_RELEASE]} == set(DPO_GATE)
    assert {c.name for c in policy.gates[DP_COUNTS]} == set(DP_GATE)


def test_values_are_derived_from_the_evidence():
    values = gate_values(evidence())
    assert values["fingerprint_correct_upper"] == 0.02  # upper end of the 95% interval
    assert values["fingerprint_correct_lower"] == 0.005
    assert values["utility_kept"] == pytest.approx(0.96)  # 96 of 100 groups kept
    assert values["q1_same"] is True and values["q3_same"] is False
    assert values["singling_out_rate"] == 0.0 and values["max_quantile_error"] == 0.1


def test_a_candidate_meeting_every_criterion_passes():
    policy = parse_publication(document(), KNOWN_CONFIGS)
    verdict, refused = check_candidate(policy, evidence())
    assert refused == []
    assert set(verdict) == set(DPO_GATE) and all(v["ok"] for v in verdict.values())
    assert verdict["utility_kept"] == {"value": pytest.approx(0.96), "operator": "min", "limit": 0.95, "ok": True}


def test_each_refusal_names_the_criterion_its_value_and_its_limit():
    policy = parse_publication(document(), KNOWN_CONFIGS)
    failing = evidence(singling_out_rate=0.0042, fingerprint_correct_ci=[0.04, 0.07])
    failing.utility["groups_kept"] = 90
    failing.utility["large_group_max_tail_share_error_pp"] = 1.5
    failing.utility["pair_correlation_max_error"] = 0.62
    failing.answers["q2"]["same_decision"] = False
    verdict, refused = check_candidate(policy, failing)
    assert refused == [
        "singling_out_rate 0.0042 > max 0.001",
        "fingerprint_correct_upper 0.07 > max 0.05",
        "utility_kept 0.9 < min 0.95",
        "large_group_max_tail_share_error_pp 1.5 > max 1",
        "pair_correlation_max_error 0.62 > max 0.1",
        "q2_same_decision false != equals true",
    ]
    assert not verdict["singling_out_rate"]["ok"] and verdict["linkage_correct_risk"]["ok"]


def test_the_publication_list_is_one_configuration_or_an_ordered_list_of_known_ones():
    assert parse_publication(document(), KNOWN_CONFIGS).config_ids == ("c15_window_k5_noise5",)
    listed = parse_publication(document(config=["c17_hour_groups_k5_noise10", "c15_window_k5_noise5"]), KNOWN_CONFIGS)
    assert listed.config_ids == ("c17_hour_groups_k5_noise10", "c15_window_k5_noise5")  # the DPO's order
    for named, problem in ((["c15_window_k5_noise5", "c15_window_k5_noise5"], "names a configuration twice"),
                           ([], "a configuration id or a non-empty list"), (["nope"], "'nope' is not a known"),
                           (3, "a configuration id or a non-empty list")):
        with pytest.raises(ConfigError, match=problem):
            parse_publication(document(config=named), KNOWN_CONFIGS)


def test_q2_same_decision_is_read_from_the_answers():
    values = gate_values(evidence())
    assert values["q2_same"] is False and values["q2_same_decision"] is True
    assert gate_values(Evidence())["q2_same_decision"] is None  # not measured


def test_a_value_that_was_not_measured_fails():
    # Evidence without attack and quality-group figures (a DP release's) under the row-level gate: each criterion
    # fails as not measured. A DP release is judged by its own gate (below), never by this one.
    dp_evidence = Evidence(answers={"q2": {"same_decision": True}}, dp={"epsilon": 1.0}, budget={})
    verdict, refused = check_candidate(parse_publication(document(), KNOWN_CONFIGS), dp_evidence, ROW_RELEASE)
    assert "singling_out_rate not measured (needs max 0.001)" in refused
    assert "utility_kept not measured (needs min 0.95)" in refused
    assert "large_group_max_quantile_error not measured (needs max 0.05)" in refused
    assert "q1_same not measured (needs equals true)" in refused
    assert verdict["q2_same_decision"]["ok"] and verdict["singling_out_rate"] == {
        "value": None, "operator": "max", "limit": 0.001, "ok": False}
    assert len(refused) == len(DPO_GATE) - 1


def test_a_dp_release_is_judged_by_its_own_criteria():
    policy = parse_publication(document(), KNOWN_CONFIGS)
    values = dp_gate_values(dp_evidence())
    assert values["audit_claim_holds"] is True and values["small_cells_total_error"] == 3.2
    assert values["budget_within_caps"] is True and values["q1_same"] is True
    verdict, refused = check_candidate(policy, dp_evidence(), DP_COUNTS)
    assert refused == [] and set(verdict) == set(DP_GATE)
    failing = dp_evidence(audit={"epsilon_claimed": 0.75, "epsilon_lower": 0.9, "ok": False},
                          error={"small": {"total": 9.5}})
    failing.budget["period_used"] = 1.2
    _, refused = check_candidate(policy, failing, DP_COUNTS)
    assert refused == ["audit_claim_holds false != equals true", "small_cells_total_error 9.5 > max 8",
                       "budget_within_caps false != equals true"]
    assert not any("singling_out" in reason for reason in refused)


def test_a_dp_release_without_its_own_gate_is_not_publishable():
    policy = parse_publication({"publication": {"gate": DPO_GATE}}, KNOWN_CONFIGS)
    verdict, refused = check_candidate(policy, dp_evidence(), DP_COUNTS)
    assert verdict == {} and refused == [gate.NO_KIND_GATE.format(kind=DP_COUNTS)]
    assert "[publication.gate.dp_counts]" in refused[0]


def test_equals_does_not_take_one_for_true():
    verdict, refused = evaluate([Criterion("q1_same", "equals", True)], {"q1_same": 1})
    assert refused == ["q1_same 1 != equals true"]
    _, refused = evaluate([Criterion("singling_out_rate", "max", 0.1)], {"singling_out_rate": True})
    assert refused == ["singling_out_rate True is not a number (needs max 0.1)"]


def test_without_a_publication_table_nothing_is_publishable():
    policy = parse_publication({"configs": {}}, KNOWN_CONFIGS)
    assert not policy.declared
    verdict, refused = check_candidate(policy, evidence())
    assert verdict == {} and refused == [gate.NOT_DECLARED]


@pytest.mark.parametrize("publication, message", [
    ({"gate": {"singling_out": {"max": 0.1}}}, r"\[publication.gate\] singling_out: unknown criterion"),
    ({"gate": {"singling_out_rate": {"below": 0.1}}}, r"singling_out_rate: unknown operator 'below'"),
    ({"gate": {"singling_out_rate": {"max": "0.1"}}}, r"singling_out_rate: max must be a finite number, not '0.1'"),
    ({"gate": {"utility_kept": {"min": True}}}, r"utility_kept: min must be a finite number, not True"),
    ({"gate": {"singling_out_rate": {"max": 0.1, "min": 0.0}}}, r"singling_out_rate: write one operator"),
    ({"gate": {"singling_out_rate": 0.1}}, r"singling_out_rate: write one operator"),
    ({"gate": {"q1_same": {"equals": "yes"}}}, r"q1_same: equals must be true, false or a number"),
    ({"gate": {}}, r"\[publication.gate\] declares no criterion"),
    ({"config": "c15_window_k5_noise5"}, r"declares no \[publication.gate\]"),
    ({"config": "c99", "gate": DPO_GATE}, r"config 'c99' is not a known configuration"),
    ({"gates": DPO_GATE}, r"unknown entries \['gates'\]"),
    ({"gate": {**DPO_GATE, "dp_counts": {"singling_out_rate": {"max": 0.1}}}},
     r"\[publication.gate.dp_counts\] singling_out_rate: unknown criterion"),
    ({"gate": {**DPO_GATE, "dp_counts": {}}}, r"\[publication.gate.dp_counts\] declares no criterion"),
    ({"gate": {"dp_counts": DP_GATE}}, r"\[publication.gate\] declares no criterion"),
])
def test_a_bad_entry_is_named(publication, message):
    with pytest.raises(ConfigError, match=message):
        parse_publication({"publication": publication}, KNOWN_CONFIGS)


def test_a_frontier_point_is_the_worst_risk_the_utility_kept_and_the_gates_verdict():
    policy = parse_publication({"publication": {"gate": {"informed_match_risk": {"max": 0.05},
                                                         "utility_kept": {"min": 0.95}}}})
    evidence = Evidence(privacy={"informed_match_risk": 0.01, "anonymeter_singling_out_risk": 0.3},
                        utility={"groups_kept": 96, "groups_total": 100, "joint_max_error_pp": 2.5},
                        answers={"q1": {"same_answer": True}})
    point = frontier_point(policy, evidence, [])
    assert (point["worst_risk"], point["worst_attack"]) == (0.3, "anonymeter singling out")
    assert point["utility_kept"] == 0.96 and point["joint_max_error_pp"] == 2.5 and point["q1_same"] is True
    assert point["publishable"] and point["refused"] == [] and point["gate"]["utility_kept"]["ok"]
    refused = frontier_point(policy, evidence, ["check min_cell_size failed"])
    assert not refused["publishable"] and refused["refused"] == ["check min_cell_size failed"]
