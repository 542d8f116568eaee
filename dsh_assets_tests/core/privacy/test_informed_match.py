"""The informed attacker (it knows the mechanism) on hand-built releases whose answers follow from their construction,
and against an independent brute-force reading of its definition."""

import dataclasses
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.evidence.metrics import Evidence
from dsh_assets.core.privacy import informed_match
from dsh_assets.core.privacy.attacker import AttackerModel, AnonymeterSettings
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.privacy.stats import FULL, LIGHT
from dsh_assets.core.publication.gate import check_candidate, load_publication
from dsh_assets.core.release.configs import load_configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets_tests.tables import row, under_test

SCHEMA = load_schema()
CONFIGS = load_configs(schema=SCHEMA)
C15 = CONFIGS["c15_window_k5_noise5"]
DOWNLOAD, LATENCY, DURATION = "dl_throughput_kbps", "radio_latency_ms", "session_duration_s"
APPS = ("Gaming", "Streaming", "IM", "VPN", "Music")


def attacker(*sets, error: float = 0.0, sample_size: int = 10_000) -> AttackerModel:
    return AttackerModel(knowledge_sets=tuple(tuple(s) for s in sets), knowledge_error=error,
                         sample_size=sample_size, sample_seed=7, anonymeter=AnonymeterSettings(known=(DOWNLOAD,)))


def spread_rows(cells: int, per_cell: int, seed: int = 1) -> list[dict]:
    """``cells`` cells (five apps x ten-minute windows) of ``per_cell`` sessions, each measurement drawn log-normal
    with a spread of e (so values of a cell lie far apart next to 5% noise), every session its own subscriber."""
    rng = np.random.default_rng(seed)
    rows = []
    for cell in range(cells):
        for session in range(per_cell):
            values = {m: float(np.exp(rng.normal(4.0, 1.0))) for m in SCHEMA.measurements}
            rows.append(row(f"3584{cell:04d}{session:04d}", minute=10 * (cell // len(APPS)),
                            app=APPS[cell % len(APPS)], **values))
    return rows


def outcome(result, *known):
    [entry] = [e for e in result.figures()["informed_match"] if tuple(e["known"]) == known]
    return entry


def test_five_percent_noise_gives_way_to_three_known_measurements_and_less_to_one(tmp_path):
    release = under_test(tmp_path, spread_rows(40, 8), C15)
    result = informed_match.evaluate(release, attacker([DOWNLOAD], [DOWNLOAD, LATENCY, DURATION]))
    three, one = outcome(result, DOWNLOAD, LATENCY, DURATION), outcome(result, DOWNLOAD)
    assert three["n"] == one["n"] == 320  # every released session is a target
    assert three["correct"] >= 0.9
    assert one["correct"] < three["correct"]
    # Rows keep a session's values together here: the random pick's chance is 1 / cell size = 1/8.
    assert three["baseline"] == pytest.approx(1 / 8)
    assert three["risk"] == pytest.approx((three["correct"] - 1 / 8) / (1 - 1 / 8))
    assert result.figures()["informed_match_risk"] == max(three["risk"], one["risk"])
    assert result.figures()["informed_match_rule"] == informed_match.LAPLACE


def test_a_light_evaluation_draws_the_light_sample_and_the_gate_does_not_decide_on_it(tmp_path):
    release = under_test(tmp_path, spread_rows(40, 8), C15)
    model = dataclasses.replace(attacker([DOWNLOAD, LATENCY, DURATION]), light_sample_size=50)
    result = informed_match.evaluate(release, model, LIGHT)
    assert outcome(result, DOWNLOAD, LATENCY, DURATION)["n"] == 50
    assert result.figures()["informed_match_strength"] == LIGHT
    assert informed_match.evaluate(release, model).figures()["informed_match_strength"] == FULL
    _, refused = check_candidate(load_publication(None, load_configs()), Evidence(privacy=result.figures()))
    assert any(reason.startswith("informed_match_risk: informed_match's evaluation is light") for reason in refused)


def test_without_noise_every_target_whose_known_values_are_unique_in_its_cell_is_found(tmp_path):
    rows = spread_rows(10, 6, seed=2)
    for index in range(0, len(rows), 6):  # in each cell, the first three sessions share one download value
        for twin in rows[index + 1:index + 3]:
            twin[DOWNLOAD] = rows[index][DOWNLOAD]
    release = under_test(tmp_path, rows, dataclasses.replace(C15, noise_scale=0.0))
    matches = informed_match.match(release, attacker([DOWNLOAD]))
    assert matches.likelihood == informed_match.EQUALITY
    shared = np.isin(matches.target_rows, _rows_with_shared_download(release))
    found = matches.scores[0] == 1.0
    assert len(matches.target_rows) == 60 and shared.sum() == 30
    assert found[~shared].all()
    # A shared value is a three-way tie, broken at random: each tied target is found about once in three.
    assert 0 < found[shared].sum() < shared.sum()


def _rows_with_shared_download(release: ReleaseUnderTest) -> np.ndarray:
    source = pq.read_table(release.source_path, columns=["row_id", SCHEMA.time, SCHEMA.app, DOWNLOAD]).to_pandas()
    counts = source.groupby([SCHEMA.time, SCHEMA.app, DOWNLOAD])["row_id"].transform("count")
    return source["row_id"][counts > 1].to_numpy()


def test_ties_go_to_a_random_row_of_the_tie_not_the_first(tmp_path):
    rows = [row(f"35840000{i:04d}", app="Gaming", value=5.0) for i in range(40)]  # one cell, identical rows
    release = under_test(tmp_path, rows, dataclasses.replace(C15, noise_scale=0.0))
    matches = informed_match.match(release, attacker([DOWNLOAD]))
    assert len(set(matches.picks[0].tolist())) > 20  # 40 targets, 40 tied rows each: picks spread over the cell
    assert matches.scores[0].mean() == pytest.approx(1 / 40, abs=0.1)
    assert matches.expected[0] == pytest.approx(np.full(40, 1 / 40))


def test_values_drawn_independently_per_cell_leave_the_attacker_at_its_baseline(tmp_path):
    release = independently_drawn(under_test(tmp_path, spread_rows(40, 8, seed=3), C15), seed=4)
    result = informed_match.evaluate(release, attacker([DOWNLOAD, LATENCY, DURATION]))
    entry = outcome(result, DOWNLOAD, LATENCY, DURATION)
    low, high = entry["correct_ci"]
    assert low <= entry["baseline"] <= high
    assert entry["risk"] < 0.1


def independently_drawn(release: ReleaseUnderTest, seed: int) -> ReleaseUnderTest:
    """``release`` rewritten so that each measurement of each row is drawn with replacement from its cell's values
    of that measurement, independently per row and column; the plan's truth follows every value to its row."""
    table = pq.read_table(release.released_path)
    order = release.released_row_ids()
    starts = np.flatnonzero(np.concatenate([[True], np.any([
        table.column(name).to_numpy()[1:] != table.column(name).to_numpy()[:-1]
        for name in (SCHEMA.time, SCHEMA.app)], axis=0)]))
    ends = np.append(starts[1:], table.num_rows)
    rng = np.random.default_rng(seed)
    origins = {}
    for name in SCHEMA.measurements:
        donor = np.concatenate([rng.integers(start, end, size=end - start) for start, end in zip(starts, ends)])
        table = table.set_column(table.schema.get_field_index(name), name, table.column(name).take(pa.array(donor)))
        origins[name] = order[donor]
    path = release.released_path.with_name("drawn.parquet")
    pq.write_table(table, path)
    return dataclasses.replace(release, released_path=path,
                               plan=dataclasses.replace(release.plan, origins=origins))


def test_a_known_measurement_the_release_drops_gives_nothing(tmp_path):
    dropped = dataclasses.replace(C15, drop_fields=(*C15.drop_fields, DOWNLOAD))
    result = informed_match.evaluate(under_test(tmp_path, spread_rows(20, 8, seed=5), dropped),
                                     attacker([DOWNLOAD], [DOWNLOAD, LATENCY]))
    blind = outcome(result, DOWNLOAD)
    assert blind["correct"] == pytest.approx(blind["baseline"], abs=0.1)
    assert result.metadata()["informed_match_detail"][0]["used"] == []
    assert result.metadata()["informed_match_detail"][1]["used"] == [LATENCY]


def test_withheld_sessions_are_not_targets_and_their_share_is_reported_apart(tmp_path):
    rows = spread_rows(10, 6, seed=6) + [row("358499990001", minute=50, app="Banking", value=3.0)]
    result = informed_match.evaluate(under_test(tmp_path, rows, C15), attacker([DOWNLOAD]))
    assert outcome(result, DOWNLOAD)["n"] == 60  # the lone Banking session is withheld (k = 5)
    assert result.figures()["informed_match_withheld"] == pytest.approx(1 / 61)


@pytest.mark.parametrize("error", [0.0, 0.03])
def test_each_pick_is_a_most_likely_row_of_the_cell_by_a_brute_force_reading_of_the_definition(tmp_path, error):
    rows = spread_rows(12, 10, seed=8)
    top = max(r[DOWNLOAD] for r in rows) * 3
    for index in range(10):  # the first cell near the column maximum, the clip bound: about half its rows clipped
        rows[index][DOWNLOAD] = top * (1.0 - 0.02 * index)
    rows[4][LATENCY] = 0.0  # zeros stay zero under the noise
    rows[5][DURATION] = None  # nulls stay null
    release = under_test(tmp_path, rows, dataclasses.replace(C15, noise_scale=0.2))
    assert (pq.read_table(release.released_path).column(DOWNLOAD).to_numpy() == top).sum() >= 3  # clipped there
    model = attacker([DOWNLOAD, LATENCY, DURATION], [DOWNLOAD], error=error)
    matches = informed_match.match(release, model)
    released = pq.read_table(release.released_path).to_pandas()
    source = pq.read_table(release.source_path).to_pandas().set_index("row_id")
    known = source.loc[matches.target_rows, [DOWNLOAD, LATENCY, DURATION]].to_numpy(dtype=float).copy()
    if error:
        known *= 1.0 + np.random.default_rng([model.sample_seed, 1]).uniform(-error, error, size=known.shape)
    positions = release.plan.position_of_row()[matches.target_rows]
    maxima = released[[DOWNLOAD, LATENCY, DURATION]].max().to_numpy()
    for index, columns in enumerate((3, 1)):  # the three measurements; the download alone
        for target, pick in enumerate(matches.picks[index]):
            cell = released[(released[SCHEMA.time] == released[SCHEMA.time][positions[target]])
                            & (released[SCHEMA.app] == released[SCHEMA.app][positions[target]])]
            scores = [sum(_nll(known[target, i], value, 0.2, error, maxima[i]) for i, value in enumerate(values))
                      for values in cell[[DOWNLOAD, LATENCY, DURATION][:columns]].to_numpy()]
            picked = dict(zip(cell.index, scores))[pick]
            assert picked == pytest.approx(min(scores), rel=1e-6, abs=1e-6), (columns, target, picked, min(scores))


def _nll(x: float, y: float, b: float, error: float, maximum: float) -> float:
    """-log likelihood of released y given known x, by the definition: y = clip(x' e^L, 0, max), L ~ Laplace(0, b), x'
    the true value, uniform in log over [x / (1 + error), x / (1 - error)] (integrated numerically here)."""
    if math.isnan(x) or math.isnan(y):
        return 0.0 if math.isnan(x) and math.isnan(y) else math.inf
    if x == 0 or y == 0:
        return 0.0 if x == y else math.inf
    lows = np.linspace(math.log(x) - math.log1p(error), math.log(x) - math.log1p(-error), 4001) if error else \
        np.array([math.log(x)])
    if y >= maximum:  # the clip bound: the probability that the noise takes the value there or above
        u = math.log(maximum) - lows
        mass = np.where(u >= 0, 0.5 * np.exp(-u / b), 1 - 0.5 * np.exp(u / b))
        return -math.log(float(np.trapezoid(mass, lows) / (lows[-1] - lows[0]) if error else mass[0]))
    density = np.exp(-np.abs(math.log(y) - lows) / b) / (2 * b)
    return -math.log(float(np.trapezoid(density, lows) / (lows[-1] - lows[0]) if error else density[0]))
