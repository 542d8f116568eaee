"""The period's scorecard and report through the graph: every candidate with its status and the gate's verdict."""

from dsh_assets.graph import runner
from dsh_assets_tests.conftest import PERIOD, materialization_metadata
from dsh_assets_tests.graph.publication.test_published import LENIENT_GATE, releases_file


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
