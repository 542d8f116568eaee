"""A candidate's evidence, grouped by family from what each asset recorded, by hand."""

from dsh_assets.core.evidence.metrics import Evidence


def test_a_row_level_release_merges_each_familys_assets_and_has_no_dp_part():
    evidence = Evidence.of_assets({
        "released": {"ignored": 1},
        "singling_out": {"singling_out_rate": 0.01},
        "linkage": {"linkage_correct": 0.02, "alias_chain_correct": None},
        "quality_groups": {"groups_kept": 9, "groups_total": 10},
        "elina_answers": {"q1": {"same_answer": True}},
    })
    assert evidence == Evidence(privacy={"singling_out_rate": 0.01, "linkage_correct": 0.02,
                                         "alias_chain_correct": None},
                                utility={"groups_kept": 9, "groups_total": 10},
                                answers={"q1": {"same_answer": True}})
    assert not evidence.is_dp
    assert evidence.with_budget({"period_used": 1.0}) is evidence, "a row-level release has no budget to replace"
    assert evidence.as_json() == {"privacy": evidence.privacy, "utility": evidence.utility,
                                  "answers": evidence.answers}


def test_a_dp_release_joins_its_lab_to_its_own_figures_and_takes_the_ledgers_budget():
    evidence = Evidence.of_assets({
        "dp_release": {"dp": {"epsilon": 1.0, "scale": 4.0}, "budget": {"period_used": 0.9}},
        "dp_accuracy_lab": {"mae_small_cells": 3.1, "replication_ok": True},
        "dp_privacy_audit": {"audit": {"ok": True}},
        "dp_elina_answers": {"q1": {"same_answer": True}},
    })
    assert evidence.is_dp and evidence.privacy == {} and evidence.utility == {}
    assert evidence.dp == {"epsilon": 1.0, "scale": 4.0, "mae_small_cells": 3.1, "replication_ok": True,
                           "audit": {"ok": True}}
    later = evidence.with_budget({"period_used": 1.0})
    assert later.budget == {"period_used": 1.0} and evidence.budget == {"period_used": 0.9}
    assert evidence.with_budget(None) is evidence
    assert later.as_json() == {"privacy": None, "utility": None, "answers": {"q1": {"same_answer": True}},
                               "dp": later.dp, "budget": {"period_used": 1.0}}


def test_a_dp_release_that_recorded_no_table_yet_is_not_dp_evidence():
    """`dp_release` records its `dp` figures only once drawn: before that its evidence has no DP part."""
    evidence = Evidence.of_assets({"dp_release": {"sha256": "ab"}, "dp_accuracy_lab": {"replication_ok": True}})
    assert not evidence.is_dp and evidence.as_json() == {"privacy": None, "utility": None, "answers": None}
