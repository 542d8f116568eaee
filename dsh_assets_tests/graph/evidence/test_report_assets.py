"""The period's scorecard and report through the graph: every candidate with its status and the gate's verdict."""

import base64

import pytest

from dsh_assets.core.evidence.metrics import QUESTION_TEXT
from dsh_assets.core.evidence.questions import QUESTION_PLOTS
from dsh_assets.graph import runner
from dsh_assets_tests.browser import open_report
from dsh_assets_tests.conftest import PERIOD, materialization_metadata
from dsh_assets_tests.graph.publication.test_published import LENIENT_GATE, releases_file


@pytest.mark.browser
def test_scorecard_and_report_show_the_publication_and_each_candidates_verdict(tmp_path, home, source_file,
                                                                              build_harness):
    harness = build_harness(home, source_file, releases_file(tmp_path, LENIENT_GATE))
    harness.source()
    for config_id in ("id_removal", "c15_window_k5_noise5"):
        assert harness.release(config_id).success
    assert harness.publication().success
    result = runner.launch_report(harness.defs, harness.instance, PERIOD)
    assert result.success
    scorecard = materialization_metadata(result, "scorecard")["scorecard"].value
    header, _, *rows = scorecard.splitlines()
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    by_config = {cells[0]: dict(zip(columns, cells)) for cells in
                 ([cell.strip() for cell in row.strip("|").split("|")] for row in rows)}
    assert by_config["c15_window_k5_noise5"]["status"] == "published"
    assert by_config["id_removal"]["status"] == "candidate"
    assert by_config["c15_window_k5_noise5"]["gate"] == "passes"
    page = (home / "reports" / PERIOD / "report.html").read_text()
    assert "Published for " + PERIOD + ": c15_window_k5_noise5" in page
    assert "Two candidates held together" in page
    # Gathered and drawn once per run: the report embeds the very plot the scorecard wrote.
    plot = base64.b64encode((home / "reports" / PERIOD / "risk_vs_utility.png").read_bytes()).decode()
    assert 'data-plot="risk_vs_utility" alt="The risk-utility frontier' in page
    assert f'src="data:image/png;base64,{plot}"' in page

    # A reader at 1280 px in headless chromium: every plot decodes, nothing scrolls sideways, every part is there.
    seen = open_report(home / "reports" / PERIOD / "report.html")
    assert seen["scrollWidth"] <= seen["innerWidth"], "the report scrolls sideways at 1280 px"
    assert not seen["tablesScrollingSideways"], "a table scrolls sideways in its box at 1280 px"
    assert all(image["complete"] and image["width"] > 0 for image in seen["images"]), seen["images"]
    images = {image["name"] for image in seen["images"]}
    assert {"risk_vs_utility", "attacks", "informed_match", "relationships", *QUESTION_PLOTS} <= images
    assert "pairs" not in images  # no pair is held before a period's first publication
    assert "when a further publication is asked for (dsh run --also-publish): none was" in seen["text"]
    # the relationships picture, and in words what each candidate keeps of a session's measurements together
    assert "Relationships between a session's measurements: each strong pair" in page.replace("&#x27;", "'")
    assert seen["text"].count("Relationships between measurements: a strong pair's rank correlation moves") == 2
    for text in QUESTION_TEXT.values():
        assert text in seen["text"]
    for heading in ("Publication", "Elina's questions", "Scorecard", "Scorecard in detail",
                    "What each configuration gives up", "Two candidates held together", "Configurations"):
        assert heading in seen["headings"], heading
    assert {"headline risk (as the period's only publication)", "gate verdict", "its answer", "asset",
            "code version", "criterion", "limit"} <= set(seen["tableHeaders"])
    assert "unavailable: the station identifier is removed on purpose" in seen["text"]
    assert "No subscriber grouping" in seen["text"] and "Sample limits" not in seen["text"]  # a file source
