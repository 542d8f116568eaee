"""The scorecard: one row per candidate from its evidence and the gate's verdict, and the plots drawn from it, read
back for their numbers."""

import math

import pytest

from dsh_assets.core.evidence import scorecard
from dsh_assets.core.evidence.metrics import ATTACK_FIGURES, Evidence
from dsh_assets.core.evidence.scorecard import (
    attacks_png,
    dp_error_png,
    gate_region,
    gate_summary,
    informed_match_png,
    pairs_png,
    risk_utility_png,
    scorecard_frame,
)
from dsh_assets.core.publication.gate import Criterion
from dsh_assets_tests.core.evidence.test_report import EVIDENCE, RELEASED
from dsh_assets_tests.figures import bars, keep_figures, legend

CANDIDATES = {
    "open": Evidence(privacy={"singling_out_rate": 0.3},
                     utility={"groups_total": 4, "groups_kept": 4, "max_quantile_error": 0.1}),
    "closed": Evidence(privacy={"singling_out_rate": 0.01},
                       utility={"groups_total": 4, "groups_kept": 3, "max_quantile_error": 0.2}),
    "dp": Evidence(dp={"epsilon": 1.0}),
}
"""Two row-level candidates at (utility kept, worst risk) (1.0, 0.3) and (0.75, 0.01), and a DP one with neither."""
VERDICTS = {"open": {"status": "candidate", "refused": ["singling_out_rate 0.3 > max 0.001"]},
            "closed": {"status": "published", "refused": []}}


def data_extent(axes, artist) -> list[float]:
    """[x0, y0, x1, y1] of a drawn artist in the axes' data coordinates."""
    extent = artist.get_window_extent()
    return axes.transData.inverted().transform([[extent.x0, extent.y0], [extent.x1, extent.y1]]).ravel().tolist()


# -- the frame ------------------------------------------------------------------------------------

def test_scorecard_headline_risk_is_the_weakest_attack():
    frame = scorecard_frame(EVIDENCE, RELEASED).set_index("config")
    assert frame.loc["open", "headline_risk"] == 0.9
    assert frame.loc["open", "weakest_against"] == "numeric fingerprint"
    assert frame.loc["closed", "headline_risk"] == 0.02 and frame.loc["closed", "utility_kept"] == 0.75
    assert frame.loc["dp", "headline_risk"] is None and frame.loc["dp", "epsilon"] == 1.0
    assert frame.loc["open", "rows_released"] == 10 and frame.loc["closed", "rows_withheld"] is None


def test_the_gates_verdict_in_a_few_words():
    assert gate_summary({"refused": []}) == "passes"
    assert gate_summary({"refused": ["quarantined: min_cell_size", "utility_kept 0.5 < min 0.95"]}) == (
        "refused: quarantined: min_cell_size; utility_kept 0.5 < min 0.95")
    assert gate_summary(None) is None and gate_summary({}) is None


def test_each_row_carries_its_kind_status_gate_answers_and_no_utility_without_groups():
    evidence = {**CANDIDATES, "empty": Evidence(utility={"groups_total": 0, "groups_kept": 0},
                                                answers={"q1": {"same_answer": True}, "q3": {}})}
    frame = scorecard_frame(evidence, {}, VERDICTS).set_index("config")
    assert frame["kind"].to_dict() == {"open": "rows", "closed": "rows", "dp": "dp_counts", "empty": "rows"}
    assert frame["status"].to_dict() == {"open": "candidate", "closed": "published", "dp": None, "empty": None}
    assert frame.loc["open", "gate"] == "refused: singling_out_rate 0.3 > max 0.001"
    assert frame.loc["closed", "gate"] == "passes" and frame.loc["dp", "gate"] is None
    assert frame.loc["empty", "utility_kept"] is None  # no group in the source: not 0 of 0 kept
    assert [frame.loc["empty", f"{q}_same"] for q in ("q1", "q2", "q3")] == [True, None, None]


def test_the_gate_region_is_the_strictest_utility_and_the_loosest_headline_risk():
    """Only a minimum of utility kept bounds the utility axis; only a maximum on a figure that counts toward headline
    risk bounds the risk axis: a *_upper, a figure whose headline is its risk above baseline, or a utility figure
    does not."""
    criteria = [Criterion("utility_kept", "min", 0.9), Criterion("utility_kept", "min", 0.95),
                Criterion("utility_kept", "max", 0.99),
                Criterion("singling_out_rate", "max", 0.001), Criterion("informed_match_risk", "max", 0.05),
                Criterion("anonymeter_inference_risk_upper", "max", 0.5), Criterion("fingerprint_correct", "max", 0.6),
                Criterion("max_quantile_error", "max", 0.7), Criterion("inference_rate", "min", 0.8)]
    assert gate_region(criteria) == (0.95, 0.05)
    assert gate_region([]) == (None, None)


# -- the plots ------------------------------------------------------------------------------------

def test_the_frontier_marks_each_row_level_candidate_and_shades_what_the_gate_accepts(monkeypatch):
    drawn = keep_figures(monkeypatch, scorecard)
    no_groups = Evidence(privacy={"singling_out_rate": 0.2})  # a worst risk, but no utility kept to plot it at
    frame = scorecard_frame({**CANDIDATES, "no_groups": no_groups}, {}, VERDICTS)
    assert risk_utility_png(frame, region=(0.7, 0.05), published="closed").startswith(b"\x89PNG")
    kept, quantile_error = drawn[0].axes
    # open and closed, then the ring round the published one; the DP candidate and no_groups lack a figure
    assert [c.get_offsets().tolist() for c in kept.collections] == [[[1.0, 0.3]], [[0.75, 0.01]], [[0.75, 0.01]]]
    assert [c.get_offsets().tolist() for c in quantile_error.collections] == [[[0.1, 0.3]], [[0.2, 0.01]],
                                                                              [[0.2, 0.01]]]
    hollow, filled = kept.collections[0], kept.collections[1]
    assert len(hollow.get_facecolors()) == 0 and filled.get_facecolors().tolist() == filled.get_edgecolors().tolist()
    assert [t.get_text() for t in drawn[0].legends[0].get_texts()] == [
        "the gate's utility and risk limits hold", "open (refused)", "closed", "published: closed"]
    # shaded: utility kept >= 0.7 (to the axis' end) and risk <= 0.05, on both plots
    [accepted] = kept.patches
    assert data_extent(kept, accepted) == pytest.approx([0.7, -0.05, 1.1, 0.05])
    [below_the_risk_limit] = quantile_error.patches
    assert data_extent(quantile_error, below_the_risk_limit)[1::2] == pytest.approx([-0.05, 0.05])


def test_the_frontier_without_limits_or_candidates_shades_nothing_and_says_why(monkeypatch):
    drawn = keep_figures(monkeypatch, scorecard)
    risk_utility_png(scorecard_frame({"dp": CANDIDATES["dp"]}, {}))
    kept, quantile_error = drawn[0].axes
    assert list(kept.patches) == list(quantile_error.patches) == list(kept.collections) == []
    assert [t.get_text() for t in kept.texts] == ["no row-level candidate with both figures"]
    assert drawn[0].legends == []


def test_attacks_tell_a_measured_zero_from_a_figure_not_measured(monkeypatch):
    drawn = keep_figures(monkeypatch, scorecard)
    evidence = {"open": Evidence(privacy={"singling_out_rate": 0.3, "linkage_correct": 0.0,
                                          "inference_rate": math.nan}),
                "dp": CANDIDATES["dp"]}
    assert attacks_png(scorecard_frame(evidence, {})).startswith(b"\x89PNG")
    [axes] = drawn[0].axes
    keys = [figure.key for figure in ATTACK_FIGURES]
    assert bars(axes) == {"open": [0.3 if key == "singling_out_rate" else 0.0 for key in keys]}
    # one word per attack that is not a positive figure, in the attacks' order: NaN is not measured, like None
    assert [t.get_text() for t in axes.texts] == ["0" if key == "linkage_correct" else "n/a"
                                                 for key in keys if key != "singling_out_rate"]
    assert [label.get_text() for label in axes.get_xticklabels()] == [figure.label for figure in ATTACK_FIGURES]
    assert legend(axes) == ["open"]


def test_attacks_without_a_row_level_candidate_say_so(monkeypatch):
    drawn = keep_figures(monkeypatch, scorecard)
    attacks_png(scorecard_frame({"dp": CANDIDATES["dp"]}, {}))
    [axes] = drawn[0].axes
    assert [t.get_text() for t in axes.texts] == ["no row-level candidate"] and axes.get_legend() is None


def test_the_informed_attacker_is_drawn_through_its_best_knowledge_set_at_each_count(monkeypatch):
    drawn = keep_figures(monkeypatch, scorecard)
    entries = [{"known": ["download"], "correct": 0.3, "baseline": 0.02},
               {"known": ["latency"], "correct": 0.5, "baseline": 0.04},
               {"known": ["download", "latency"], "correct": 0.9, "baseline": 0.02}]
    evidence = {"c15": Evidence(privacy={"informed_match": entries}), "c17": Evidence(privacy={"informed_match": []})}
    assert informed_match_png(evidence).startswith(b"\x89PNG")
    [axes] = drawn[0].axes
    best, baseline = axes.lines
    assert (best.get_label(), best.get_xdata().tolist(), best.get_ydata().tolist()) == ("c15", [1, 2], [0.5, 0.9])
    assert baseline.get_ydata().tolist() == [0.04, 0.02] and baseline.get_linestyle() == ":"
    [points] = axes.collections
    assert points.get_offsets().tolist() == [[1, 0.3], [1, 0.5], [2, 0.9]]
    assert axes.get_xticks().tolist() == [1, 2] and legend(axes) == ["c15"]
    assert informed_match_png({"c17": evidence["c17"]}) is None


def test_the_pairs_heat_map_reads_b_relinked_to_a_and_marks_pairs_not_measured(monkeypatch):
    drawn = keep_figures(monkeypatch, scorecard)
    pairs_png({"b": {"a": {"rows_relinked": 0.25}, "c": {}}, "a": {}, "c": {"a": {"rows_relinked": 1.0}}})
    axes = drawn[0].axes[0]
    # rows and columns a, b, c; row b, column a: 0.25; row c, column a: 1.00; the rest not measured
    assert [t.get_text() for t in axes.texts] == ["-", "-", "-", "0.25", "-", "-", "1.00", "-", "-"]
    assert [label.get_text() for label in axes.get_yticklabels()] == ["a", "b", "c"]
    assert axes.images[0].get_clim() == (0.0, 1.0)


def test_the_error_against_epsilon_plot_draws_what_the_lab_measured_and_nothing_without_it(monkeypatch):
    """Small and large cells apart, in epsilon's order; a lab row without an epsilon or a figure is left out."""
    drawn = keep_figures(monkeypatch, scorecard)
    lab = [{"epsilon": 1.0, "small_rel_error_published": 0.2, "large_rel_error_published": 0.01},
           {"epsilon": 0.5, "small_rel_error_published": 0.4, "large_rel_error_published": None},
           {"epsilon": None, "small_rel_error_published": 0.9}]
    assert dp_error_png(lab).startswith(b"\x89PNG\r\n\x1a\n")
    [axes] = drawn[0].axes
    assert [(line.get_label(), line.get_xdata().tolist(), line.get_ydata().tolist()) for line in axes.lines] == [
        ("small cells (< 20)", [0.5, 1.0], [0.4, 0.2]), ("large cells", [1.0], [0.01])]
    assert (axes.get_xscale(), axes.get_yscale()) == ("log", "log")
    assert dp_error_png([{"epsilon": 1.0, "small_rel_error_published": None}]) is None
