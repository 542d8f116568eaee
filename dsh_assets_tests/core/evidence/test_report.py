"""The report renders in a real headless browser, with its plots, and says in words what its evidence holds."""

import dataclasses
import os
import shutil
import subprocess
import sys
import warnings

import pytest

from dsh_assets.core.evidence.metrics import QUESTION_TEXT, Evidence
from dsh_assets.core.evidence.questions import question_plots
from dsh_assets.core.evidence.report import (
    _anonymeter_strength,
    _light_samples,
    elinas_losses,
    informed_sentence,
    lost_relationships,
    relationships_in_words,
    render_report,
)
from dsh_assets.core.evidence.scorecard import (
    attacks_png,
    dp_error_png,
    informed_match_png,
    relationships_png,
    risk_utility_png,
    scorecard_frame,
)
from dsh_assets.core.privacy import informed_match
from dsh_assets_tests.browser import open_report

EVIDENCE = {
    "open": Evidence(
        privacy={"singling_out_rate": 0.34, "fingerprint_correct": 0.9, "fingerprint_correct_ci": [0.88, 0.92],
                 "fingerprint_correct_baseline": 0.0, "fingerprint_correct_risk": 0.9, "inference_rate": 0.1},
        utility={"groups_total": 200, "groups_kept": 200, "lost_groups": [], "median_quantile_error": 0.0,
                 "max_quantile_error": 0.0, "max_tail_share_error_pp": 0.0},
        answers={"q1": {"base": "Gaming", "release": "Gaming", "same_answer": True},
                 "q3": {"available": False, "base": [1, 2], "release": "unavailable: station identifier removed",
                        "same_answer": False}}),
    "closed": Evidence(privacy={"singling_out_rate": 0.0, "inference_rate": 0.02},
                       utility={"groups_total": 200, "groups_kept": 150, "lost_groups": ["Chat / 5G / dl"]}),
    "dp": Evidence(dp={"epsilon": 1.0, "sensitivity": 4, "scale": 5.3, "replication_ok": True}, budget={}),
}
RELEASED = {"open": {"rows_released": 10, "sha256": "ab" * 32}, "closed": {"rows_released": 8}}


def _page():
    frame = scorecard_frame(EVIDENCE, RELEASED)
    configs = {c: (f"{c} release", {"k": 5}) for c in EVIDENCE}
    plots = {"risk_vs_utility": (risk_utility_png(frame), "risk"), "attacks": (attacks_png(frame), "attacks")}
    return render_report("2026-11-20", frame, EVIDENCE, RELEASED, configs, plots, [{"epsilon": 1.0, "mae": 3.9}])


INFORMED = [{"known": ["dl_throughput_kbps"], "knowledge_error": 0.0, "correct": 0.31, "correct_ci": [0.28, 0.34],
             "baseline": 0.02, "risk": 0.296, "n": 1000},
            {"known": ["dl_throughput_kbps", "radio_latency_ms", "session_duration_s"], "knowledge_error": 0.0,
             "correct": 0.944, "correct_ci": [0.93, 0.96], "baseline": 0.02, "risk": 0.943, "n": 1000}]


def test_the_informed_attacker_is_said_in_words_and_drawn_per_configuration():
    evidence = {"c15": Evidence(privacy={"informed_match": INFORMED, "informed_match_risk": 0.943,
                                         "informed_match_rule": "multiplicative Laplace"}),
                "shuffled": Evidence(privacy={"informed_match": [dict(e, correct=0.02, risk=0.0) for e in INFORMED],
                                              "informed_match_risk": 0.0,
                                              "informed_match_rule": informed_match.NEAREST})}
    assert informed_sentence("c15", INFORMED, "multiplicative Laplace") == (
        "c15: someone who knows the download speed, latency and duration of one of your sessions finds its row in "
        "94 of 100 tries (a random pick in its cell: 2 of 100).")
    png = informed_match_png(evidence)
    assert png.startswith(b"\x89PNG")
    frame = scorecard_frame(evidence, {})
    page = render_report("2026-11-20", frame, evidence, {}, {c: (c, {}) for c in evidence},
                         {"informed_match": (png, "informed")}, None)
    assert "finds its row in 94 of 100 tries" in page
    assert "shuffled: someone who knows the download speed of one of your sessions finds the session&#x27;s own " \
           "values of its other measurements in 2 of 100 tries" in page
    assert page.count('data-plot="informed_match"') == 1
    assert frame.set_index("config").loc["c15", "weakest_against"] == "informed match"
    assert informed_match_png({"dp": Evidence(dp={})}) is None


@pytest.mark.parametrize("configs", [("open", "closed", "dp"), ("dp",), ("open",)], ids=["all", "dp_only", "one"])
def test_every_plot_is_drawn_without_a_warning(configs):
    """A run of one configuration (`dsh run --config dp_counts_eps1`) drew legends of nothing: matplotlib warned
    on stderr. Each plot, for the candidates a run can leave, draws under warnings turned into errors."""
    evidence = {config_id: EVIDENCE[config_id] for config_id in configs}
    frame = scorecard_frame(evidence, RELEASED)
    details = {config_id: {"answers": {"q1_base_gaming_ms": 80.0, "q1_base_streaming_ms": 60.0}} for config_id in configs}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        drawn = [risk_utility_png(frame), attacks_png(frame), informed_match_png(evidence),
                 dp_error_png([{"epsilon": 1.0, "small_rel_error_published": 0.5}]), *question_plots(details).values()]
    assert all(png is None or isinstance(png, (bytes, tuple)) for png in drawn)


def test_the_plots_are_drawn_without_pyplot():
    """No pyplot, so no registry of open figures that a plot failing before its close would leave behind."""
    drawn = subprocess.run(
        [sys.executable, "-c", "import sys; from dsh_assets.core.evidence import questions, scorecard; "
                               "from dsh_assets_tests.core.evidence.test_report import EVIDENCE, RELEASED; "
                               "frame = scorecard.scorecard_frame(EVIDENCE, RELEASED); "
                               "pngs = [scorecard.risk_utility_png(frame), scorecard.attacks_png(frame)]; "
                               "print(all(p.startswith(b'\\x89PNG') for p in pngs), "
                               "'matplotlib.pyplot' in sys.modules)"],
        capture_output=True, text=True, check=True)
    assert drawn.stdout.split() == ["True", "False"]


def test_report_is_self_contained_and_says_what_cannot_be_answered():
    page = _page()
    assert "http://" not in page and "https://" not in page  # nothing fetched from elsewhere
    assert page.count('data-plot="') == 2
    assert "Q3: unavailable: station identifier removed" in page
    assert "95% CI 0.880-0.920; baseline 0.000, risk 0.900" in page
    assert "ab" * 32 in page


def test_what_elina_loses_is_said_in_her_figures():
    utility = {"median_quantile_error": 0.0003, "large_group_max_quantile_error": 0.0052,
               "large_group_max_tail_share_error_pp": 0.37}
    answers = {"q1": {"base": "Gaming", "release": "Gaming", "same_answer": True},
               "q2": {"same_answer": False, "same_decision": True}}
    details = {"large_groups": {"large_group_worst_quantile": "IM / 4G / dl", "large_group_worst_tail": "VPN / 5G / dl"}}
    assert elinas_losses(utility, answers, details) == (
        "her quantiles move by a median 0.0003 of their p10-p90 spread; in the large groups by at most 0.0052 "
        "(IM / 4G / dl), her tail shares by at most 0.37 pp (VPN / 5G / dl); Q1 keeps its answer (Gaming in the "
        "base data, Gaming released); Q2 supports the same decision (not the same six in order)")
    assert elinas_losses({}, answers, details) is None  # a DP release has no quality groups


def test_the_report_says_how_hard_anonymeter_looked_and_which_tests_it_narrowed():
    detail = {"strength": "full", "blocks": 5, "singling_out": {"n_attacks": 7500},
              "singling_out_univariate": {"n_attacks": 2500}, "linkability": {"n_attacks": 2500},
              "narrowed": ["inference:cqi"], "further_blocks": 19}
    assert _anonymeter_strength(detail) == (
        '<p class="muted">anonymeter: full strength, what the gate reads; 5 blocks, 2,500 attacks of univariate '
        "singling out, 7,500 of multivariate, 2,500 of linkability; inference:cqi, whose interval held the gate&#x27;s "
        "limit, on 19 further blocks, each upper end the 95% interval's.</p>")
    assert "further" not in _anonymeter_strength({**detail, "narrowed": [], "further_blocks": 0})


def test_the_report_marks_the_sampled_attacks_evaluated_lightly():
    light = {"informed_match_strength": "light", "informed_match": [{"n": 200}, {"n": 200}],
             "cross_release_strength": "light", "cross_release_n": 200}
    assert _light_samples(light) == (
        '<p class="muted">Light evaluations, marked as such (the gate reads full-strength ones): the informed attacker '
        "on 200 targets; cross-release linkage on 200 probed rows against a second release made for their cells "
        "alone.</p>")
    assert _light_samples({**light, "informed_match_strength": "full", "cross_release_strength": "full"}) == ""


def test_the_publication_says_why_each_candidate_above_the_published_one_was_refused():
    verdicts = {"a": {"kind": "rows", "status": "candidate", "publishable": False, "gate": {},
                      "refused": ["anonymeter_inference_risk_upper 0.06 > max 0.05"]},
                "b": {"kind": "rows", "status": "published", "publishable": True, "gate": {}, "refused": []},
                "c": {"kind": "rows", "status": "candidate", "publishable": True, "gate": {}, "refused": []}}
    published = {"config": "b", "path": "/p", "sha256": "cd" * 32, "published_at": "now"}
    page = render_report("2026-11-20", scorecard_frame({}, {}, {}), {}, {}, {}, {}, None, verdicts, {}, published,
                         listed=("a", "b", "c"))
    tried = page[page.index("tried in its order"):page.index("</ol>")]
    assert "a: refused: anonymeter_inference_risk_upper 0.06 &gt; max 0.05." in tried
    assert "b: published." in tried and "c:" not in tried  # the one after the published one was not tried



def test_a_synthetic_table_s_verdict_says_its_truth_based_zeros_are_by_construction_and_what_it_spent():
    verdicts = {"s": {"kind": "dp_synthetic", "status": "candidate", "publishable": False, "gate": {},
                      "refused": ["median_quantile_error 0.1 > max 0.02"], "epsilon_spent": 1.0},
                "b": {"kind": "rows", "status": "published", "publishable": True, "gate": {}, "refused": []}}
    published = {"config": "b", "path": "/p", "sha256": "cd" * 32, "published_at": "now"}
    page = render_report("2026-11-20", scorecard_frame({}, {}, {}), {}, {}, {}, {}, None, verdicts, {}, published,
                         listed=("s", "b"))
    why = page[page.index("median_quantile_error 0.1 &gt; max 0.02. A synthetic table"):]
    why = why[:why.index("</td>")]
    assert "score 0 by construction" in why and "epsilon 1 spent all the same" in why
    assert "[publication.gate.dp_synthetic]" not in page  # the row-level gate judges it

CHROMIUM = shutil.which("chromium")


@pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"), reason="Debian chromium not installed (.ci/run installs it)")
@pytest.mark.browser
def test_report_renders_with_its_plots_in_headless_chromium(tmp_path):
    assert CHROMIUM, "CI must have chromium: .ci/run installs it"
    path = tmp_path / "report.html"
    path.write_text(_page(), encoding="utf-8")
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom", path.as_uri()]
    dom = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    assert 'data-plots-total="2"' in dom
    assert 'data-plots-rendered="2"' in dom  # both PNGs decoded to real images in the browser
    assert "2 of 2 plots rendered" in dom


@pytest.mark.browser
def test_report_reads_at_1280_px_in_headless_chromium_through_playwright(tmp_path):
    path = tmp_path / "report.html"
    path.write_text(_page(), encoding="utf-8")
    seen = open_report(path)
    assert seen["scrollWidth"] <= seen["innerWidth"], "the report scrolls sideways at 1280 px"
    assert not seen["tablesScrollingSideways"], "a table scrolls sideways in its box at 1280 px"
    assert seen["images"] and all(image["complete"] and image["width"] > 0 for image in seen["images"])
    for text in QUESTION_TEXT.values():
        assert text in seen["text"]
    assert "DP accuracy lab" in seen["headings"] and "measured mean absolute error" in seen["tableHeaders"]
    assert "```" not in seen["text"]


def test_the_bound_table_lists_bounds_in_numeric_order():
    evidence = {**EVIDENCE, "dp": dataclasses.replace(EVIDENCE["dp"], dp={**EVIDENCE["dp"].dp, "bound": {
        "chosen": 4, "basis": "expected error", "candidates": {"1": 9.0, "16": 7.5, "2": 6.0, "32": 9.9, "4": 5.0}}})}
    frame = scorecard_frame(evidence, RELEASED)
    page = render_report("2026-11-20", frame, evidence, RELEASED, {c: (c, {}) for c in evidence}, {}, None)
    cells = [page.index(f"<tr><td>{bound}") for bound in ("1<", "2<", "4 (used)", "16<", "32<")]
    assert cells == sorted(cells)


@pytest.mark.browser
def test_six_configurations_with_long_names_fit_1280_px(tmp_path):
    names = [f"c{n}_hour_groups_k5_noise10_with_a_long_name" for n in range(20, 26)]
    evidence = {name: EVIDENCE["open"] for name in names}
    released = {name: {"rows_released": 1_096_529, "sha256": "ab" * 32} for name in names}
    frame = scorecard_frame(evidence, released)
    page = render_report("2026-11-20", frame, evidence, released, {c: (c, {"k": 5}) for c in names}, {}, None)
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    seen = open_report(path)
    assert seen["scrollWidth"] <= seen["innerWidth"], "the report scrolls sideways at 1280 px"
    assert not seen["tablesScrollingSideways"], "a table scrolls sideways in its box at 1280 px"



RELATIONSHIPS = [
    {"app": "VPN", "radio": "5G", "x": "dl_throughput_kbps", "y": "ul_throughput_kbps", "source": 0.96,
     "release": 0.01, "error": 0.95},
    {"app": "IM", "radio": "5G", "x": "dl_throughput_kbps", "y": "ul_throughput_kbps", "source": 0.95,
     "release": 0.90, "error": 0.05},
    {"app": "IM", "radio": "5G", "x": "radio_latency_ms", "y": "tcp_handshake_ms", "source": 0.8,
     "release": 0.75, "error": 0.05},
]


def test_the_report_says_which_relationships_a_candidate_loses():
    """Download ~ upload moves by 0.95 in VPN/5G (lost, named with its worst group); latency ~ handshake by 0.05
    (kept); two strong pairs in two large groups."""
    utility = {"pair_correlation_max_error": 0.95, "pair_correlation_median_error": 0.05}
    words = relationships_in_words(utility, RELATIONSHIPS)
    assert "moves by at most 0.95 (median 0.050) over 2 strong pairs in 2 large (app, radio) groups" in words
    assert "It loses 1 of them: download speed ~ upload speed (VPN / 5G: 0.96 in the base data, 0.01 released)" \
        in words
    kept = relationships_in_words({**utility, "pair_correlation_max_error": 0.05}, RELATIONSHIPS[1:])
    assert kept.endswith("It keeps every relationship the base data shows within 0.1.")
    assert "not measured" in relationships_in_words({"pair_correlation_max_error": None}, [])
    assert relationships_in_words({}, RELATIONSHIPS) is None  # evidence from before the figure existed
    # each lost pair once, with its worst group; a pair within the limit is kept
    assert [(e["x"], e["app"]) for e in lost_relationships(RELATIONSHIPS, 0.04)] == [
        ("dl_throughput_kbps", "VPN"), ("radio_latency_ms", "IM")]


def test_the_relationships_picture_has_a_panel_per_candidate_with_the_figure():
    assert relationships_png({"grouped": []}) is None
    assert relationships_png({"c22": RELATIONSHIPS, "grouped": []}).startswith(b"\x89PNG")
