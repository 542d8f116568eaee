"""Elina's questions answered from a DP release's own tables: Q1 from its DP medians, Q2 from its slow-download
shares, Q3 never (it holds no station), each beside the base data's answer."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.utility.dp_answers import answers_from_dp_release, q1_from_medians
from dsh_assets.core.utility.elina import STATION_REMOVED
from dsh_assets_tests.core.utility.test_elina import BASE_SLOW, Q2_APPS, SCHEMA, ingest, q1_rows, q2_rows

NO_Q1_TABLE = "unavailable: the DP release publishes no Q1 medians table"


def q1_table(path, gaming_ms: float, streaming_ms: float) -> str:
    """The DP release's Q1 table: one DP median of 5G radio latency per app."""
    pq.write_table(pa.table({"app": ["Gaming", "Streaming", "VPN"],
                             "dp_median_radio_latency_ms": [gaming_ms, streaming_ms, 500.0]}), path)
    return str(path)


def q2_table(path, shares: dict[str, float]) -> str:
    pq.write_table(pa.table({"app": list(shares), "share": list(shares.values())}), path)
    return str(path)


@pytest.mark.parametrize("gaming_ms, streaming_ms, focus", [(95.0, 52.0, "Gaming"), (52.0, 95.0, "Streaming"),
                                                            (70.0, 70.0, "tie")])
def test_q1_focus_is_the_app_with_the_higher_dp_median(tmp_path, gaming_ms, streaming_ms, focus):
    answer = q1_from_medians("Gaming", q1_table(tmp_path / "q1.parquet", gaming_ms, streaming_ms))
    assert answer == {"base": "Gaming", "release": focus, "same_answer": focus == "Gaming",
                      "gaming_ms": gaming_ms, "streaming_ms": streaming_ms}


def test_q1_says_how_often_repeated_draws_keep_the_base_focus(tmp_path):
    asked = []

    def stability(base_focus: str) -> tuple[float, int]:
        asked.append(base_focus)
        return 0.85, 20

    answer = q1_from_medians("Streaming", q1_table(tmp_path / "q1.parquet", 95.0, 52.0), stability)
    assert asked == ["Streaming"]
    assert (answer["release"], answer["same_answer"]) == ("Gaming", False)
    assert (answer["same_answer_rate"], answer["same_answer_draws"]) == (0.85, 20)


@pytest.mark.parametrize("published", [None, "missing.parquet"], ids=["not_published", "not_on_disk"])
def test_q1_without_a_medians_table_is_unavailable_and_not_the_same(tmp_path, published):
    path = None if published is None else tmp_path / published
    assert q1_from_medians("Gaming", path, lambda focus: (1.0, 20)) == {
        "base": "Gaming", "release": NO_Q1_TABLE, "same_answer": False}


@pytest.fixture
def source(tmp_path) -> str:
    """Q2's seven apps at slow shares 0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0; Gaming's 5G latency 100 ms against
    Streaming's 50 ms (so Gaming is the base focus), their downloads never slow; every row at one station."""
    return ingest(tmp_path, q2_rows(BASE_SLOW) + q1_rows(100.0, 50.0))[0]


def test_the_dp_tables_answer_q1_and_q2_beside_the_base_and_q3_is_unavailable(tmp_path, source):
    released_shares = dict(zip(Q2_APPS, (0.45, 0.41, 0.3, 0.2, 0.1, 0.06, 0.0)))  # the base order, other values
    answers = answers_from_dp_release(source, q2_table(tmp_path / "q2.parquet", released_shares), SCHEMA,
                                      q1_path=q1_table(tmp_path / "q1.parquet", 95.0, 52.0))
    assert answers == {
        "q1": {"base": "Gaming", "release": "Gaming", "same_answer": True, "gaming_ms": 95.0, "streaming_ms": 52.0},
        "q2": {"base": list(Q2_APPS[:6]), "release": list(Q2_APPS[:6]), "same_answer": True, "same_decision": True,
               "rank_correlation": 1.0},  # the same ranks over the seven apps ranked on both sides
        "q3": {"available": False, "base": [], "release": STATION_REMOVED, "same_answer": False},
    }


def test_a_dp_release_without_its_tables_still_shows_the_base_answers(tmp_path, source):
    answers = answers_from_dp_release(source, tmp_path / "no_q2.parquet", SCHEMA)
    assert answers["q1"] == {"base": "Gaming", "release": NO_Q1_TABLE, "same_answer": False}
    q2 = answers["q2"]
    assert (q2["base"], q2["release"]) == (list(Q2_APPS[:6]), "unavailable: no Q2 table in this release")
    assert q2["same_answer"] is False and q2["same_decision"] is False and q2["rank_correlation"] is None
