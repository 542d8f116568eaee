"""Where everything lives under a home, and what a home holds found again from its folders."""

from dsh_assets.core.layout import QUARANTINE_NOTE, RELEASED_FILE, Layout


def test_a_candidate_and_its_publication_have_their_own_places(tmp_path):
    layout = Layout(tmp_path)
    assert layout.released("c22", "2026-11-02") == tmp_path / "candidates" / "c22" / "2026-11-02" / RELEASED_FILE
    assert layout.published("2026-11-02") == tmp_path / "published" / "2026-11-02" / RELEASED_FILE
    assert layout.dp_published("dp1", "2026-11-02").parent == tmp_path / "published" / "2026-11-02" / "dp" / "dp1"
    assert layout.quarantine_dir("c22", "2026-11-02") == tmp_path / "quarantine" / "c22" / "2026-11-02"


def test_a_hand_over_of_a_multi_partition_key_is_one_file(tmp_path):
    path = Layout(tmp_path).handed_over("scorecard", "c22|2026-11-02")
    assert path.parent == tmp_path / "handed_over" / "scorecard" and path.name == "c22%7C2026-11-02.pickle"


def test_stored_releases_and_quarantined_candidates_are_found_sorted(tmp_path):
    layout = Layout(tmp_path)
    for config_id, period in (("c23", "2026-11-02"), ("c15", "2026-11-03"), ("c15", "2026-11-02")):
        layout.released(config_id, period).parent.mkdir(parents=True)
        layout.released(config_id, period).write_bytes(b"")
    (layout.candidate_dir("c99", "2026-11-02")).mkdir(parents=True)  # a folder without a release is not one
    assert [(c, p) for c, p, _ in layout.released_files()] == [
        ("c15", "2026-11-02"), ("c15", "2026-11-03"), ("c23", "2026-11-02")]
    layout.quarantine_dir("c18", "2026-11-02").mkdir(parents=True)
    (layout.quarantine_dir("c18", "2026-11-02") / QUARANTINE_NOTE).write_text("{}")
    assert layout.quarantined() == [("c18", "2026-11-02", layout.quarantine_dir("c18", "2026-11-02"))]
