"""Elina's three questions: the planted effects of the synthetic source, and hand-built tables."""

import datetime as dt
import json

import pyarrow.parquet as pq
import pytest

from dsh_assets.core.files import DigestBook
from dsh_assets.core.utility import elina
from dsh_assets.core.utility import quality_groups as qg
from dsh_assets.core.release.configs import load_configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.synth import DEFAULT_SEED, overloaded_stations, synthesize
from dsh_assets.core.release.transform import release
from dsh_assets_tests.tables import RELEASE_PERIOD, row, table, write

SCHEMA = load_schema()
CONFIGS = load_configs(schema=SCHEMA)
SECRETS = Secrets(b"s", b"k", "test")
DL, LAT = SCHEMA.download, SCHEMA.latency
FIGURE_KEYS = {"q1": {"base", "release", "same_answer"},
               "q2": {"base", "release", "same_answer", "same_decision", "rank_correlation"},
               "q3": {"available", "base", "release", "same_answer"}}


def ingest(directory, rows) -> tuple:
    raw = write(directory / "raw.parquet", rows)
    summary = ingest_source(raw, directory / "source.parquet", SCHEMA, book=DigestBook())
    return directory / "source.parquet", summary.apps


def released(directory, source, config_id, name=None):
    path, apps = source
    out = directory / (name or f"{config_id}.parquet")
    release(path, out, CONFIGS[config_id], SCHEMA, SECRETS, apps, period=RELEASE_PERIOD, book=DigestBook())
    return out


def write_release(path, rows) -> str:
    """A released file written directly (identifiers and station dropped), for hand-made answers."""
    pq.write_table(table(rows).drop_columns([*SCHEMA.identifiers, SCHEMA.station]), path)
    return str(path)


def rows_of(app, radio, count, first, **measurements) -> list[dict]:
    return [row(f"3584{first + i:08d}", app=app, radio=radio, **measurements) for i in range(count)]


# -- the planted effects -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """200,000 rows of the default generator (the effects hold at this size), with two releases."""
    directory = tmp_path_factory.mktemp("elina_synthetic")
    synthesize(directory / "raw.parquet", rows=200_000, subscribers=36_000, period=dt.date(2026, 11, 20))
    summary = ingest_source(directory / "raw.parquet", directory / "source.parquet", SCHEMA, book=DigestBook())
    source = (directory / "source.parquet", summary.apps)
    return {"source": source[0],
            **{config_id: released(directory, source, config_id)
               for config_id in ("id_removal", "c15_window_k5_noise5")}}


def test_planted_effects_come_out_of_the_base_data(synthetic):
    answers = elina.answer(synthetic["source"], synthetic["id_removal"], CONFIGS["id_removal"], SCHEMA)
    figures, details = answers.figures(), answers.details()
    assert figures["q1"]["base"] == "Gaming"
    assert details["q1"]["base"]["gaming_ms"] > 1.3 * details["q1"]["base"]["streaming_ms"]
    assert figures["q2"]["base"][:2] == ["VPN", "IM"] and len(figures["q2"]["base"]) == 6
    assert figures["q3"]["base"] == sorted(overloaded_stations(DEFAULT_SEED))
    # id_removal changes no value and keeps the station: every answer survives
    assert figures["q1"]["same_answer"] and figures["q2"]["same_answer"] and figures["q3"]["same_answer"]
    assert figures["q2"]["rank_correlation"] == 1.0 and figures["q3"]["available"]


def test_trim_and_jitter_keeps_q1_q2_and_loses_q3(synthetic):
    config = CONFIGS["c15_window_k5_noise5"]
    answers = elina.answer(synthetic["source"], synthetic["c15_window_k5_noise5"], config, SCHEMA)
    figures = answers.figures()
    assert figures["q1"] == {"base": "Gaming", "release": "Gaming", "same_answer": True}
    assert figures["q2"]["release"][:2] == ["VPN", "IM"] and figures["q2"]["rank_correlation"] > 0.8
    assert figures["q3"] == {"available": False, "base": sorted(overloaded_stations(DEFAULT_SEED)),
                             "release": "unavailable: station identifier removed", "same_answer": False}
    # reusing the quality groups of the same files gives the same answers without scanning again
    quality = qg.evaluate(synthetic["source"], synthetic["c15_window_k5_noise5"], config, SCHEMA)
    reused = elina.answer(synthetic["source"], synthetic["c15_window_k5_noise5"], config, SCHEMA, quality=quality)
    assert reused.figures() == figures and reused.details() == answers.details()


# -- Q1 ------------------------------------------------------------------------------------------

def q1_rows(gaming_ms: float, streaming_ms: float) -> list[dict]:
    return (rows_of("Gaming", "5G", 40, 0, radio_latency_ms=gaming_ms)
            + rows_of("Streaming", "5G", 40, 100, radio_latency_ms=streaming_ms)
            + rows_of("Streaming", "4G", 40, 200, radio_latency_ms=500.0))  # not 5G: ignored


def test_q1_same_answer_false_when_the_release_flips_it(tmp_path):
    source = ingest(tmp_path, q1_rows(100.0, 50.0))
    identical = write_release(tmp_path / "same.parquet", q1_rows(100.0, 50.0))
    flipped = write_release(tmp_path / "flipped.parquet", q1_rows(50.0, 100.0))
    config = CONFIGS["c15_window_k5_noise5"]

    same = elina.answer(source[0], identical, config, SCHEMA)
    assert same.figures()["q1"] == {"base": "Gaming", "release": "Gaming", "same_answer": True}
    answers = elina.answer(source[0], flipped, config, SCHEMA)
    assert answers.figures()["q1"] == {"base": "Gaming", "release": "Streaming", "same_answer": False}
    release_answer = answers.details()["q1"]["release"]
    assert (release_answer["gaming_ms"], release_answer["streaming_ms"]) == (50.0, 100.0)
    assert answers.metadata()["q1_base_gaming_ms"] == 100.0


def test_q1_unavailable_when_an_app_has_no_5g_rows_released(tmp_path):
    source = ingest(tmp_path, q1_rows(100.0, 50.0))
    without_streaming = write_release(tmp_path / "r.parquet", [r for r in q1_rows(100.0, 50.0)
                                                               if not (r["application_category"] == "Streaming"
                                                                       and r["radio_access_type"] == "5G")])
    figures = elina.answer(source[0], without_streaming, CONFIGS["c15_window_k5_noise5"], SCHEMA).figures()
    assert figures["q1"]["release"].startswith("unavailable: no 5G Streaming records")
    assert figures["q1"]["same_answer"] is False


def test_grouped_apps_cannot_answer_q1_or_q2(tmp_path):
    source = ingest(tmp_path, q1_rows(100.0, 50.0))
    config_id = "c17_hour_groups_k5_noise10"
    figures = elina.answer(source[0], released(tmp_path, source, config_id), CONFIGS[config_id], SCHEMA).figures()
    assert figures["q1"]["base"] == "Gaming"
    assert figures["q1"]["release"] == "unavailable: apps grouped (Gaming and Streaming are both in Media)"
    assert figures["q2"]["release"].startswith("unavailable: apps grouped")
    assert not figures["q1"]["same_answer"] and not figures["q2"]["same_answer"]
    assert figures["q2"]["rank_correlation"] is None


# -- Q2 ------------------------------------------------------------------------------------------

Q2_APPS = ("VPN", "IM", "Cloud storage", "P2P", "Video conferencing", "Online education", "Banking")


def q2_rows(slow_counts: dict[str, int]) -> list[dict]:
    """40 valid 5G downloads per app, ``slow_counts[app]`` of them at 1 kbps and the rest at 1000;
    plus Chat with 10 rows, all slow, too few to be ranked. The source p10 of download is 1.0."""
    rows, first = [], 0
    for app, slow in slow_counts.items():
        rows += rows_of(app, "5G", slow, first, dl_throughput_kbps=1.0)
        rows += rows_of(app, "5G", 40 - slow, first + slow, dl_throughput_kbps=1000.0)
        first += 100
    return rows + rows_of("Chat", "5G", 10, first, dl_throughput_kbps=1.0)


BASE_SLOW = dict(zip(Q2_APPS, (20, 16, 12, 8, 4, 2, 0)))  # shares 0.5, 0.4, 0.3, 0.2, 0.1, 0.05, 0


def test_q2_ranks_apps_by_share_of_slow_5g_downloads(tmp_path):
    source = ingest(tmp_path, q2_rows(BASE_SLOW))
    answers = elina.answer(source[0], write_release(tmp_path / "same.parquet", q2_rows(BASE_SLOW)),
                           CONFIGS["c15_window_k5_noise5"], SCHEMA)
    assert answers.slow_threshold == 1.0
    assert answers.figures()["q2"] == {"base": list(Q2_APPS[:6]), "release": list(Q2_APPS[:6]),
                                       "same_answer": True, "same_decision": True, "rank_correlation": 1.0}
    assert [entry["share"] for entry in answers.details()["q2"]["base"]] == [0.5, 0.4, 0.3, 0.2, 0.1, 0.05]
    assert "Chat" not in answers.metadata()["q2_base_shares"]  # 10 valid 5G downloads < 30


def test_q2_swapped_release_changes_the_answer_and_the_rank_correlation(tmp_path):
    source = ingest(tmp_path, q2_rows(BASE_SLOW))
    swapped = {**BASE_SLOW, "IM": 12, "Cloud storage": 16}
    answers = elina.answer(source[0], write_release(tmp_path / "swapped.parquet", q2_rows(swapped)),
                           CONFIGS["c15_window_k5_noise5"], SCHEMA)
    figures = answers.figures()["q2"]
    assert figures["release"][:3] == ["VPN", "Cloud storage", "IM"]
    assert figures["same_answer"] is False
    # 16 and 12 slow of 40: Wilson intervals [0.26, 0.56] and [0.18, 0.46] overlap, so the swap is the same decision
    assert figures["same_decision"] is True
    # Spearman over the 7 ranked apps, one adjacent swap: 1 - 6 * 2 / (7 * (49 - 1))
    assert figures["rank_correlation"] == pytest.approx(1 - 12 / 336)


def test_q2_swapping_apps_the_base_data_separates_is_another_decision(tmp_path):
    source = ingest(tmp_path, q2_rows(BASE_SLOW))
    swapped = {**BASE_SLOW, "VPN": 2, "Online education": 20}  # 0.5 [0.35, 0.65] and 0.05 [0.01, 0.17]
    figures = elina.answer(source[0], write_release(tmp_path / "swapped.parquet", q2_rows(swapped)),
                           CONFIGS["c15_window_k5_noise5"], SCHEMA).figures()["q2"]
    assert figures["same_answer"] is False and figures["same_decision"] is False


def ranking(*apps) -> list[dict]:
    return [{"app": app, "slow": slow, "n": 1000} for app, slow in apps]


# Wilson intervals of n = 1000: 300 -> [0.272, 0.330]; 200 -> [0.176, 0.226]; 100..96 -> about +-0.019 around each
# (all overlap); 10 -> [0.005, 0.018].
NEAR_TIES = ranking(("A", 300), ("B", 200), ("C", 100), ("D", 99), ("E", 98), ("F", 97), ("G", 96), ("H", 10))


@pytest.mark.parametrize("release, same", [
    (["A", "B", "C", "D", "E", "F", "G", "H"], True),   # the same ranking
    (["A", "B", "D", "C", "E", "G", "F", "H"], True),   # near-ties swapped, G (not separated from F) in the top six
    (["B", "A", "C", "D", "E", "F", "G", "H"], False),  # A and B are separated: their order is the decision
    (["A", "B", "C", "D", "E", "H", "F", "G"], False),  # H lies wholly below the 6th: not in the top six
    (["A", "C", "D", "E", "F", "G", "H", "B"], False),  # B lies wholly above the 7th: in the top six
    (["A", "B", "C", "D", "E", "X", "F", "G"], False),  # an app the base does not rank
])
def test_q2_same_decision_by_hand(release, same):
    assert elina.q2_same_decision(NEAR_TIES, release) is same


def test_q2_same_decision_with_six_apps_or_fewer_needs_every_one():
    six = NEAR_TIES[:6]
    assert elina.q2_same_decision(six, ["A", "B", "D", "C", "F", "E"])
    assert not elina.q2_same_decision(six, ["A", "B", "C", "D", "E"])  # F dropped: nothing separates it from a 7th


# -- Q3 ------------------------------------------------------------------------------------------

def q3_rows() -> list[dict]:
    """Ten ordinary stations (10 rows, 50 ms), one overloaded (60 rows, 150 ms), one busy but fast
    (60 rows, 50 ms), one slow but quiet (10 rows, 200 ms). Median load 10, median latency 50 ms."""
    rows = []
    for s in range(10):
        rows += rows_of("Gaming", "5G", 10, 1000 * s, station=100 + s, radio_latency_ms=50.0)
    rows += rows_of("Gaming", "5G", 60, 20_000, station=900, radio_latency_ms=150.0)
    rows += rows_of("Gaming", "5G", 60, 30_000, station=901, radio_latency_ms=50.0)
    rows += rows_of("Gaming", "5G", 10, 40_000, station=902, radio_latency_ms=200.0)
    return rows


def test_q3_overloaded_stations_available_under_id_removal_not_under_c15(tmp_path):
    source = ingest(tmp_path, q3_rows())
    kept = elina.answer(source[0], released(tmp_path, source, "id_removal"), CONFIGS["id_removal"], SCHEMA)
    assert kept.figures()["q3"] == {"available": True, "base": [900], "release": [900], "same_answer": True}
    station = kept.details()["q3"]["base"]["stations"][0]
    assert station == {"station": 900, "load": 60, "load_ratio": 6.0, "median_latency_ms": 150.0,
                       "latency_ratio": 3.0}
    assert kept.metadata()["q3_rule_parameters"] == {"load_ratio": 5.0, "latency_ratio": 1.8}

    dropped = elina.answer(source[0], released(tmp_path, source, "c15_window_k5_noise5"),
                           CONFIGS["c15_window_k5_noise5"], SCHEMA)
    assert dropped.figures()["q3"] == {"available": False, "base": [900],
                                       "release": "unavailable: station identifier removed", "same_answer": False}

    stricter = elina.answer(source[0], released(tmp_path, source, "id_removal"), CONFIGS["id_removal"], SCHEMA,
                            overload_rule=elina.OverloadRule(load_ratio=7.0))
    assert stricter.figures()["q3"]["base"] == []


def test_figures_have_exactly_the_agreed_keys_and_plain_values(tmp_path):
    source = ingest(tmp_path, q1_rows(100.0, 50.0) + q3_rows())
    answers = elina.answer(source[0], released(tmp_path, source, "id_removal"), CONFIGS["id_removal"], SCHEMA)
    figures = answers.figures()
    assert {q: set(v) for q, v in figures.items()} == FIGURE_KEYS
    assert json.loads(json.dumps(figures)) == figures
    metadata = answers.metadata()
    assert json.loads(json.dumps(metadata)) == metadata
    assert "median station load" in metadata["q3_rule"]
    json.dumps(answers.details())
