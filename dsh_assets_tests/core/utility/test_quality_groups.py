"""Quality groups on hand-built tables whose quantiles and tail shares can be worked out by hand.

quantile_cont over 1..100 gives p10 = 10.9, p50 = 50.5, p90 = 90.1; over 1..200 it gives
p10 = 20.9 and p90 = 180.1, the fixed raw-file thresholds when the source holds 1..200.
"""

import dataclasses
import json

import pandas as pd
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.files import DigestBook
from dsh_assets.core.utility import quality_groups as qg
from dsh_assets.core.release.configs import ConfigError, load_configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.synth import PROVINCES
from dsh_assets.core.release.transform import release
from dsh_assets_tests.tables import RELEASE_PERIOD, row, table, write

SCHEMA = load_schema()
CONFIGS = load_configs(schema=SCHEMA)
SECRETS = Secrets(b"s", b"k", "test")
DL, LAT = SCHEMA.download, SCHEMA.latency
FIGURE_KEYS = {"groups_total", "groups_kept", "lost_groups", "median_quantile_error", "max_quantile_error",
               "max_tail_share_error_pp", "large_group_max_quantile_error", "large_group_max_tail_share_error_pp",
               "joint", "joint_max_error_pp", "pair_correlation_max_error", "pair_correlation_median_error",
               "pair_correlation_worst"}


def cell_rows(app: str, radio: str, values, first: int = 0, **fields) -> list[dict]:
    """One row per value (every measurement = value), each its own subscriber."""
    return [row(f"3584{first + i:08d}", app=app, radio=radio, value=float(v), **fields) for i, v in enumerate(values)]


def scattered_rows(app: str, radio: str, count: int, first: int) -> list[dict]:
    """``count`` rows, each alone in its (window, province) cell (never minute 0 in Uusimaa, where
    cell_rows puts its rows): all withheld by k = 5."""
    places = [(minute, province) for minute in range(0, 60, 10) for province in PROVINCES][1:count + 1]
    return [row(f"3585{first + i:08d}", minute, province, app=app, radio=radio, value=float(i + 1))
            for i, (minute, province) in enumerate(places)]


def ingest(tmp_path, rows) -> tuple:
    raw = write(tmp_path / "raw.parquet", rows)
    summary = ingest_source(raw, tmp_path / "source.parquet", SCHEMA, book=DigestBook())
    return tmp_path / "source.parquet", summary.apps


def released(tmp_path, source, config, name="released.parquet"):
    path, apps = source
    release(path, tmp_path / name, config, SCHEMA, SECRETS, apps, period=RELEASE_PERIOD, book=DigestBook())
    return tmp_path / name


def write_release(path, rows) -> str:
    """A released file written directly (identifiers and station dropped), for hand-made changes."""
    pq.write_table(table(rows).drop_columns([*SCHEMA.identifiers, SCHEMA.station]), path)
    return str(path)


def base_rows() -> list[dict]:
    return cell_rows("Gaming", "5G", range(1, 101)) + cell_rows("IM", "4G", range(101, 201), first=100)


def by_cell(result: qg.QualityResult) -> dict:
    return {(c["app"], c["radio"], c["measurement"]): c for c in result.cells}


def test_known_quantiles_tail_shares_and_zero_errors_on_an_identical_release(tmp_path):
    source = ingest(tmp_path, base_rows())
    result = qg.evaluate(source[0], released(tmp_path, source, CONFIGS["id_removal"]), CONFIGS["id_removal"], SCHEMA)

    assert result.thresholds[DL] == pytest.approx(20.9)
    assert result.thresholds[LAT] == pytest.approx(180.1)
    cells = by_cell(result)
    gaming = cells[("Gaming", "5G", DL)]
    assert (gaming["p10_source"], gaming["p50_source"], gaming["p90_source"]) == pytest.approx((10.9, 50.5, 90.1))
    assert gaming["tail_share_source"] == pytest.approx(0.20)  # 1..20 <= 20.9
    assert cells[("Gaming", "5G", LAT)]["tail_share_source"] == 0.0
    im_latency = cells[("IM", "4G", LAT)]
    assert (im_latency["p10_source"], im_latency["p90_source"]) == pytest.approx((110.9, 190.1))
    assert im_latency["tail_share_source"] == pytest.approx(0.20)  # 181..200 >= 180.1
    for cell in result.cells:
        assert cell["available"] and cell["status"] == "available" and cell["n_release"] == 100
        assert [cell[f"{q}_error"] for q in ("p10", "p50", "p90")] == [0.0, 0.0, 0.0]
        assert cell["tail_share_error_pp"] == 0.0

    figures = result.figures()
    # Every measurement of a row is one value, so no 5G session is both at most the p10 and at least the p90.
    assert figures == {"groups_total": 4, "groups_kept": 4, "lost_groups": [], "median_quantile_error": 0.0,
                       "max_quantile_error": 0.0, "max_tail_share_error_pp": 0.0,
                       # no group holds 1,000 source records: no large group to measure
                       "large_group_max_quantile_error": None, "large_group_max_tail_share_error_pp": None,
                       "joint": {"Gaming": {"base": 0.0, "release": 0.0, "error_pp": 0.0}}, "joint_max_error_pp": 0.0,
                       # nor a large (app, radio) group: the relationships are unmeasured too
                       "pair_correlation_max_error": None, "pair_correlation_median_error": None,
                       "pair_correlation_worst": None}
    json.dumps(result.metadata())
    frame = result.table()
    assert len(frame) == 4 and list(frame.columns) == qg.TABLE_COLUMNS


def test_errors_on_a_shifted_release(tmp_path):
    """Gaming's values shifted by +10 in the release: quantile error 10 / 79.2, tail share 20% -> 10%."""
    source = ingest(tmp_path, base_rows())
    shifted = cell_rows("Gaming", "5G", range(11, 111)) + cell_rows("IM", "4G", range(101, 201), first=100)
    released_path = write_release(tmp_path / "shifted.parquet", shifted)
    result = qg.evaluate(source[0], released_path, CONFIGS["id_removal"], SCHEMA)

    gaming = by_cell(result)[("Gaming", "5G", DL)]
    assert (gaming["p10_release"], gaming["p50_release"], gaming["p90_release"]) == pytest.approx((20.9, 60.5, 100.1))
    for q in ("p10", "p50", "p90"):
        assert gaming[f"{q}_error"] == pytest.approx(10 / 79.2)
    assert gaming["tail_share_release"] == pytest.approx(0.10)
    assert gaming["tail_share_error_pp"] == pytest.approx(10.0)
    assert by_cell(result)[("Gaming", "5G", LAT)]["tail_share_error_pp"] == 0.0  # >= 180.1 neither side
    figures = result.figures()
    assert figures["median_quantile_error"] == pytest.approx(10 / 79.2 / 2)  # six errors of 0.126, six of 0
    assert figures["max_quantile_error"] == pytest.approx(10 / 79.2)
    assert figures["max_tail_share_error_pp"] == pytest.approx(10.0)


def test_large_groups_are_those_of_enough_source_records_and_their_worst_errors_are_named(tmp_path):
    """The shifted release again: each of the four groups holds 100 source records; Gaming's are off by 10 / 79.2."""
    source = ingest(tmp_path, base_rows())
    shifted = cell_rows("Gaming", "5G", range(11, 111)) + cell_rows("IM", "4G", range(101, 201), first=100)
    released_path = write_release(tmp_path / "shifted.parquet", shifted)
    large = qg.evaluate(source[0], released_path, CONFIGS["id_removal"], SCHEMA, large_group_records=100)
    assert large.figures()["large_group_max_quantile_error"] == pytest.approx(10 / 79.2)
    assert large.figures()["large_group_max_tail_share_error_pp"] == pytest.approx(10.0)
    worst = large.metadata()
    assert worst["large_groups"] == worst["large_groups_kept"] == 4
    assert worst["large_group_worst_tail"] == f"Gaming / 5G / {DL}"
    none_large = qg.evaluate(source[0], released_path, CONFIGS["id_removal"], SCHEMA, large_group_records=101)
    assert none_large.figures()["large_group_max_quantile_error"] is None  # not measured: the gate refuses it
    assert none_large.metadata()["large_groups"] == 0


@pytest.mark.parametrize("table, problem", [
    ({"large_group_records": 0}, "must be a positive integer"),
    ({"large_group_records": "many"}, "must be a positive integer"),
    ({"large_groups": 1000}, "must be a table with large_group_records"),
    ({"strong_pair_correlation": 0}, r"strong_pair_correlation must be a number in \(0, 1\]"),
    ({"strong_pair_correlation": 1.5}, r"strong_pair_correlation must be a number in \(0, 1\]"),
    ({"strong_pair_correlation": True}, r"strong_pair_correlation must be a number in \(0, 1\]"),
])
def test_a_bad_utility_setting_is_refused(table, problem):
    with pytest.raises(ConfigError, match=problem):
        qg.parse_utility({"utility": table})


def test_utility_settings_default_and_parse():
    assert qg.parse_utility({}) == qg.UtilitySettings(qg.DEFAULT_LARGE_GROUP_RECORDS, 0.3)
    assert qg.parse_utility({"utility": {"large_group_records": 50, "strong_pair_correlation": 0.5}}) == \
        qg.UtilitySettings(50, 0.5)


def test_a_cell_needs_thirty_valid_records_in_the_source(tmp_path):
    chat = cell_rows("Chat", "3G", range(1, 36))
    for record in chat[:6]:
        record[DL] = None  # 29 valid downloads, 35 valid latencies
    rows = chat + cell_rows("Email", "4G", range(1, 30), first=100) + cell_rows("News", "5G", range(1, 31), first=200)
    source = ingest(tmp_path, rows)
    result = qg.evaluate(source[0], released(tmp_path, source, CONFIGS["id_removal"]), CONFIGS["id_removal"], SCHEMA)

    assert set(by_cell(result)) == {("Chat", "3G", LAT), ("News", "5G", DL), ("News", "5G", LAT)}
    assert by_cell(result)[("Chat", "3G", LAT)]["n_source"] == 35
    assert result.figures()["groups_total"] == 3


def test_a_suppressed_cell_is_unavailable_and_lost_never_zero(tmp_path):
    rows = (cell_rows("Gaming", "5G", range(1, 41))           # one k-cell of 40 rows: kept
            + scattered_rows("Chat", "5G", 40, first=0)       # 40 singleton k-cells: all withheld
            + cell_rows("VoIP", "4G", range(1, 11), first=500)  # 10 rows kept ...
            + scattered_rows("VoIP", "4G", 25, first=100))    # ... and 25 withheld
    source = ingest(tmp_path, rows)
    config = CONFIGS["c15_window_k5_noise5"]
    released_path = released(tmp_path, source, config)
    result = qg.evaluate(source[0], released_path, config, SCHEMA)

    figures = result.figures()
    assert figures["groups_total"] == 6 and figures["groups_kept"] == 2
    assert figures["lost_groups"] == [
        f"Chat / 5G / {DL}", f"Chat / 5G / {LAT}", f"VoIP / 4G / {DL}", f"VoIP / 4G / {LAT}",
    ]
    cells = by_cell(result)
    assert cells[("Chat", "5G", DL)]["status"] == "lost: 0 records released (< 30)"
    assert cells[("VoIP", "4G", LAT)]["status"] == "lost: 10 records released (< 30)"
    assert cells[("VoIP", "4G", LAT)]["n_release"] == 10
    for key in [("Chat", "5G", DL), ("VoIP", "4G", LAT)]:
        cell = cells[key]
        assert not cell["available"]
        for name in ("p10_release", "p50_release", "p90_release", "tail_share_release",
                     "p10_error", "p50_error", "p90_error", "tail_share_error_pp"):
            assert cell[name] is None, name
    frame = result.table().set_index(["app", "radio", "measurement"])
    assert pd.isna(frame.loc[("Chat", "5G", DL), "p50_error"])  # missing, not 0
    assert result.metadata()["unavailable_by_reason"] == {"lost": 4}
    # the Gaming cell is available with small noise errors; the lost cells do not enter the summary
    assert 0 < figures["max_quantile_error"] < 0.5

    with_ten = qg.evaluate(source[0], released_path, config, SCHEMA, min_records=10)
    assert with_ten.figures()["groups_kept"] == 4  # VoIP's 10 released rows now suffice


def test_grouped_apps_make_per_app_cells_inexpressible(tmp_path):
    source = ingest(tmp_path, base_rows())
    config = CONFIGS["c17_hour_groups_k5_noise10"]
    result = qg.evaluate(source[0], released(tmp_path, source, config), config, SCHEMA)

    assert {c["status"] for c in result.cells} == {"cannot express: apps grouped"}
    assert all(c["n_release"] is None and c["p50_release"] is None for c in result.cells)
    figures = result.figures()
    assert figures["groups_total"] == 4 and figures["groups_kept"] == 0 and len(figures["lost_groups"]) == 4
    assert figures["median_quantile_error"] is None and figures["max_tail_share_error_pp"] is None
    assert result.release_stats is None  # the release is not scanned


def test_a_dropped_measurement_cannot_be_expressed(tmp_path):
    source = ingest(tmp_path, base_rows())
    config = dataclasses.replace(CONFIGS["id_removal"], drop_fields=("identifiers", LAT))
    result = qg.evaluate(source[0], released(tmp_path, source, config), config, SCHEMA)

    statuses = {(c["app"], c["measurement"]): c["status"] for c in result.cells}
    dropped = "cannot express: column dropped"
    assert statuses == {("Gaming", DL): "available", ("IM", DL): "available",
                        ("Gaming", LAT): dropped, ("IM", LAT): dropped}
    assert result.figures()["groups_kept"] == 2


def test_zero_spread_gives_no_quantile_error_but_a_tail_error(tmp_path):
    rows = cell_rows("Gaming", "5G", [7.0] * 40) + cell_rows("IM", "4G", range(1, 101), first=100)
    source = ingest(tmp_path, rows)
    result = qg.evaluate(source[0], released(tmp_path, source, CONFIGS["id_removal"]), CONFIGS["id_removal"], SCHEMA)

    constant = by_cell(result)[("Gaming", "5G", DL)]
    assert constant["available"] and constant["p10_error"] is None and "zero spread" in constant["note"]
    assert constant["tail_share_error_pp"] == 0.0
    assert result.figures()["groups_kept"] == 4


def test_figures_are_plain_python(tmp_path):
    source = ingest(tmp_path, base_rows())
    config = CONFIGS["c15_window_k5_noise5"]
    result = qg.evaluate(source[0], released(tmp_path, source, config), config, SCHEMA)
    figures = result.figures()
    assert set(figures) == FIGURE_KEYS
    assert type(figures["groups_total"]) is int and type(figures["median_quantile_error"]) is float
    assert json.loads(json.dumps(figures)) == figures
    metadata = result.metadata()
    assert json.loads(json.dumps(metadata)) == metadata
    assert metadata["thresholds"][DL]["value"] == pytest.approx(20.9)


def test_unknown_measurement_is_refused(tmp_path):
    source = ingest(tmp_path, base_rows())
    with pytest.raises(ValueError, match="not measurement columns"):
        qg.evaluate(source[0], source[0], CONFIGS["id_removal"], SCHEMA, measurements=["province"])


def test_the_joint_share_counts_sessions_both_slow_and_laggy_and_a_shuffle_loses_it(tmp_path):
    # 40 Gaming and 40 IM sessions on 5G, download i and latency 1000 - i for i = 1..40 (Gaming) or 41..80 (IM), so a
    # slow download goes with a high latency. Whole-source thresholds over 1..80: download p10 = 8.9, latency p90 =
    # 1000 - 8.9 = 991.1; a session is both slow and laggy exactly when i <= 8: 8 of 40 Gaming sessions, no IM one.
    rows = [row(f"3584{i:08d}", app="Gaming" if i <= 40 else "IM", radio="5G", value=5.0,
                **{DL: float(i), LAT: 1000.0 - i}) for i in range(1, 81)]
    source = ingest(tmp_path, rows)
    plain = dataclasses.replace(CONFIGS["id_removal"], id="plain")
    joint = qg.evaluate(source[0], released(tmp_path, source, plain), plain, SCHEMA).figures()["joint"]
    assert joint == {"Gaming": {"base": 0.2, "release": 0.2, "error_pp": 0.0},
                     "IM": {"base": 0.0, "release": 0.0, "error_pp": 0.0}}
    shuffled = dataclasses.replace(plain, id="shuffled", shuffle=True)
    result = qg.evaluate(source[0], released(tmp_path, source, shuffled, "shuffled.parquet"), shuffled, SCHEMA)
    figures = result.figures()
    assert figures["groups_kept"] == figures["groups_total"] and figures["max_quantile_error"] == 0.0
    # Latencies of the slow sessions move to random rows of their cell: the eight slow Gaming sessions keep a
    # latency >= 991.1 only where the shuffle happens to give them one of the eight high values.
    assert figures["joint"]["Gaming"]["release"] < 0.2 and figures["joint_max_error_pp"] > 5
    grouped = CONFIGS["c17_hour_groups_k5_noise10"]
    unanswerable = qg.evaluate(source[0], released(tmp_path, source, grouped, "grouped.parquet"), grouped, SCHEMA)
    assert unanswerable.figures()["joint"]["Gaming"] == {"base": 0.2, "release": None, "error_pp": None}


def test_the_quality_groups_measure_the_relationships_a_shuffle_loses(tmp_path):
    """Gaming/5G of 1,000 sessions in 20 cells, download and latency in the same order in each session (rho 1): the
    identical release keeps it (error 0), a plain shuffle within the cell loses it, one that keeps rank correlations
    keeps it; a release that groups apps cannot say."""
    rows = [row(f"3584{i:08d}", minute=10 * (i % 6), province=f"P{i % 20 // 6}", app="Gaming", radio="5G",
                dl_throughput_kbps=float(i + 1), radio_latency_ms=float(2 * i + 1)) for i in range(1_000)]
    source = ingest(tmp_path, rows)
    plain = dataclasses.replace(CONFIGS["c22_hour_k5_shuffle_code10_round3"], id="plain")
    keeping = CONFIGS["c24_hour_k5_copula_code10_round3"]
    figures = {}
    for config in (CONFIGS["id_removal"], plain, keeping, CONFIGS["c17_hour_groups_k5_noise10"]):
        release_path = released(tmp_path, source, config, f"{config.id}.parquet")
        result = qg.evaluate(source[0], release_path, config, SCHEMA, large_group_records=1_000)
        figures[config.id] = result.figures()
    assert figures["id_removal"]["pair_correlation_max_error"] == 0.0
    assert figures["id_removal"]["pair_correlation_worst"]["pair"] == [DL, LAT]
    assert figures["plain"]["pair_correlation_max_error"] > 0.5
    assert figures[keeping.id]["pair_correlation_max_error"] < 0.05
    assert figures["c17_hour_groups_k5_noise10"]["pair_correlation_max_error"] is None
