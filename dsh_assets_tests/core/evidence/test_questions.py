"""Elina's questions in the report: each answer in words, and each chart with the base data drawn once beside the
releases that answer."""

import pytest

from dsh_assets.core.evidence import questions
from dsh_assets.core.evidence.questions import (
    BASE,
    QUESTION_PLOTS,
    UNAVAILABLE_STATION,
    q1_png,
    q1_words,
    q2_png,
    q2_words,
    q3_png,
    q3_words,
    question_plots,
    ranked,
)
from dsh_assets.core.utility.elina import STATION_REMOVED
from dsh_assets_tests.figures import bar_labels, bars, keep_figures, legend

Q1_BASE = {"q1_base_gaming_ms": 80.0, "q1_base_streaming_ms": 60.0}
GREY = (1 / 3, 1 / 3, 1 / 3, 1.0)
"""#555, the base data's colour."""

# -- in words -------------------------------------------------------------------------------------

@pytest.mark.parametrize("gaming, streaming, words", [
    (114.0, 72.0, "focus on Gaming: it is the worse-served experience (5G median radio latency 114.0 ms vs 72.0 ms "
                  "for Streaming)"),
    (60.0, 1234.5, "focus on Streaming: it is the worse-served experience (5G median radio latency 1,234.5 ms vs "
                   "60.0 ms for Gaming)"),
    (80.0, 80.0, "a tie: 5G median radio latency 80.0 ms for both Gaming and Streaming"),
])
def test_q1_names_the_worse_served_app_with_both_medians(gaming, streaming, words):
    answers = {"q1_release_gaming_ms": gaming, "q1_release_streaming_ms": streaming, "q1_base_gaming_ms": 1.0}
    assert q1_words(answers, "release") == words


def test_q1_without_both_medians_of_its_side_has_no_words():
    assert q1_words({"q1_release_gaming_ms": 114.0, "q1_base_streaming_ms": 72.0}, "release") is None


def test_q2_ranks_by_share_then_name_whatever_order_was_recorded():
    assert list(ranked({"IM": 0.2, "VPN": 0.4, "Chat": 0.2})) == ["VPN", "Chat", "IM"]
    assert q2_words({"IM": 0.125, "VPN": 0.5}) == "prioritise, by share of slow 5G downloads: VPN (50.0%), IM (12.5%)"


@pytest.mark.parametrize("shares", [{}, "unavailable: apps grouped", ["VPN", "IM"], None])
def test_q2_without_shares_to_rank_has_no_words(shares):
    assert ranked(shares) is None and q2_words(shares) is None


def test_q3_lists_each_overloaded_station_with_its_ratios():
    answer = {"stations": [{"station": 900, "load_ratio": 6.0, "latency_ratio": 3.0},
                           {"station": 1207, "load_ratio": 1234.56, "latency_ratio": 1.84}]}
    assert q3_words(answer) == ("2 overloaded: 900 (load 6.0 x the median, latency 3.0 x), "
                                "1207 (load 1,234.6 x the median, latency 1.8 x)")
    assert q3_words({"stations": []}) == "no station is overloaded under the rule"


def test_q3_says_the_station_identifier_is_removed_on_purpose():
    assert q3_words(STATION_REMOVED) == UNAVAILABLE_STATION
    assert q3_words("unavailable: no rows released") == "unavailable: no rows released"  # another reason, as given
    assert q3_words(None) is None


# -- the charts -----------------------------------------------------------------------------------

def test_q1_draws_the_base_once_beside_each_release_that_answers(monkeypatch):
    drawn = keep_figures(monkeypatch, questions)
    numbers = {"dp": Q1_BASE,  # the base answer, but no release medians: not a series
               "c15": {**Q1_BASE, "q1_release_gaming_ms": 70.0, "q1_release_streaming_ms": 75.4}}
    assert q1_png(numbers).startswith(b"\x89PNG")
    [axes] = drawn[0].axes
    assert bars(axes) == {BASE: [80.0, 60.0], "c15": [70.0, 75.4]}
    assert bar_labels(axes) == ["80", "60", "70", "75"]
    assert [label.get_text() for label in axes.get_xticklabels()] == ["Gaming", "Streaming"]
    assert [patch.get_facecolor() for patch in axes.containers[0]] == [GREY, GREY]
    assert legend(axes) == [BASE, "c15"]


def test_q1_without_a_base_answer_draws_nothing():
    assert q1_png({"c15": {"q1_base_gaming_ms": 80.0, "q1_release_gaming_ms": 70.0,
                           "q1_release_streaming_ms": 75.0}}) is None


def test_q2_draws_the_base_top_and_any_app_a_release_ranks_instead_with_each_sides_rank(monkeypatch):
    drawn = keep_figures(monkeypatch, questions)
    numbers = {"c15": {"q2_base_shares": {"IM": 0.4, "VPN": 0.5, "Chat": 0.1},
                       "q2_release_shares": {"IM": 0.45, "VPN": 0.3, "Maps": 0.2}},
               "c17": {"q2_release_shares": "unavailable: apps grouped"}}
    assert q2_png(numbers).startswith(b"\x89PNG")
    [axes] = drawn[0].axes
    assert [label.get_text() for label in axes.get_yticklabels()] == ["VPN", "IM", "Chat", "Maps"]
    assert axes.yaxis_inverted()  # the first of these on top: the list reads as the ranking
    assert bars(axes) == {BASE: [0.5, 0.4, 0.1, 0.0], "c15": [0.3, 0.45, 0.0, 0.2]}
    assert bar_labels(axes) == ["#1 50.0%", "#2 40.0%", "#3 10.0%", "n/a: not in its top six",
                                "#2 30.0%", "#1 45.0%", "n/a: not in its top six", "#3 20.0%"]
    assert axes.get_xlim() == pytest.approx((0.0, 0.5 * 1.45))  # room right of the longest bar for its label
    assert legend(axes) == [BASE, "c15"]


def test_q2_without_a_base_ranking_draws_nothing():
    assert q2_png({"c15": {"q2_base_shares": "unavailable: no app with >= 30 valid 5G downloads",
                           "q2_release_shares": {"IM": 0.4}}}) is None


def test_q3_draws_each_flagged_stations_load_and_names_the_releases_without_stations(monkeypatch):
    drawn = keep_figures(monkeypatch, questions)
    base = {"stations": [{"station": 905, "load_ratio": 5.5}, {"station": 900, "load_ratio": 6.0}]}
    numbers = {"id_removal": {"q3_base": base, "q3_release": {"stations": [{"station": 900, "load_ratio": 6.2}]}},
               "c15": {"q3_base": base, "q3_release": STATION_REMOVED}}
    assert q3_png(numbers).startswith(b"\x89PNG")
    [axes] = drawn[0].axes
    assert [label.get_text() for label in axes.get_xticklabels()] == ["900", "905"]
    assert bars(axes) == {BASE: [6.0, 5.5], "id_removal": [6.2, 0.0]}
    assert bar_labels(axes) == ["6.0x", "5.5x", "6.2x", "not flagged"]
    assert "unavailable (station identifier removed on purpose): c15" in [text.get_text() for text in axes.texts]


def test_q3_with_no_overloaded_station_says_so(monkeypatch):
    drawn = keep_figures(monkeypatch, questions)
    assert q3_png({"id_removal": {"q3_base": {"stations": []}, "q3_release": {"stations": []}}}) is not None
    [axes] = drawn[0].axes
    assert [text.get_text() for text in axes.texts] == ["no station is overloaded in the base data"]
    assert q3_png({"id_removal": {"q3_base": "unavailable: no rows in the source"}}) is None


def test_each_question_with_a_base_answer_gets_its_plot_and_caption():
    plots = question_plots({"c15": {"answers": Q1_BASE}, "dp_counts_eps1": {}})
    assert list(plots) == ["q1_latency"]
    png, caption = plots["q1_latency"]
    assert png.startswith(b"\x89PNG") and caption == QUESTION_PLOTS["q1_latency"][1]
    assert question_plots({"c15": {"answers": None}}) == {}
