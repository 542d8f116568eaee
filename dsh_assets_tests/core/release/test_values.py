"""Shuffle, microaggregation and rank swapping: what each keeps, what each moves, on tables whose answers follow
from their construction; and their one-line refusals."""

import dataclasses

import numpy as np
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.privacy import informed_match
from dsh_assets.core.release import values
from dsh_assets.core.release.configs import (
    Coding, ConfigError, Microaggregation, RankSwap, Rounding, load_configs,
)
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.utility import elina, quality_groups
from dsh_assets_tests.core.privacy.test_informed_match import DOWNLOAD, DURATION, LATENCY, attacker, spread_rows
from dsh_assets_tests.tables import row, sha256_file, under_test

SCHEMA = load_schema()
CONFIGS = load_configs(schema=SCHEMA)
C15 = CONFIGS["c15_window_k5_noise5"]
PLAIN = dataclasses.replace(C15, id="plain", noise_scale=0.0)
SHUFFLED = dataclasses.replace(PLAIN, id="shuffled", shuffle=True)
CELL = [SCHEMA.time, SCHEMA.province, SCHEMA.app, SCHEMA.radio]


def by_cell(path) -> dict:
    """Each released cell's sorted values of every measurement (nulls as None, sorted last)."""
    frame = pq.read_table(path).to_pandas()
    return {cell: {m: sorted((None if v != v else v for v in group[m].tolist()), key=lambda v: (v is None, v or 0))
                   for m in SCHEMA.measurements}
            for cell, group in frame.groupby(CELL)}


def test_a_shuffle_keeps_every_cells_values_and_so_the_quality_groups_and_q1_q2(tmp_path):
    rows = spread_rows(30, 9, seed=21)
    rows[3][LATENCY] = None
    plain, shuffled = under_test(tmp_path, rows, PLAIN, "plain"), under_test(tmp_path, rows, SHUFFLED, "shuffled")
    assert by_cell(shuffled.released_path) == by_cell(plain.released_path)
    assert pq.read_table(shuffled.released_path).column(DOWNLOAD) != pq.read_table(plain.released_path).column(
        DOWNLOAD), "the values did move"
    assert shuffled.plan.moves_values and set(shuffled.plan.origins) == set(SCHEMA.measurements)

    def figures(release):
        quality = quality_groups.evaluate(release.source_path, release.released_path, release.config, SCHEMA)
        answers = elina.answer(release.source_path, release.released_path, release.config, SCHEMA)
        return quality.figures() | {"joint": None, "joint_max_error_pp": None}, answers.figures()

    assert figures(shuffled) == figures(plain)


def test_a_shuffle_is_the_same_bytes_twice_and_another_key_gives_another_permutation(tmp_path):
    rows = spread_rows(10, 8, seed=22)
    first = under_test(tmp_path, rows, SHUFFLED, "first")
    again = under_test(tmp_path, rows, SHUFFLED, "again")
    other = under_test(tmp_path, rows, SHUFFLED, "other", secrets=Secrets(b"another", b"demo", "test"))
    assert sha256_file(first.released_path) == sha256_file(again.released_path)
    assert by_cell(other.released_path) == by_cell(first.released_path)
    assert sha256_file(other.released_path) != sha256_file(first.released_path)
    for m in SCHEMA.measurements:
        assert not np.array_equal(other.value_origins(np.arange(80), m), first.value_origins(np.arange(80), m))


def test_the_truth_follows_every_shuffled_value_to_its_row(tmp_path):
    shuffled = under_test(tmp_path, spread_rows(6, 7, seed=23), SHUFFLED)
    released = pq.read_table(shuffled.released_path)
    source = pq.read_table(shuffled.source_path).to_pandas().set_index("row_id")
    positions = np.arange(released.num_rows)
    for m in SCHEMA.measurements:
        np.testing.assert_array_equal(released.column(m).to_numpy(),
                                      source[m].to_numpy()[shuffled.value_origins(positions, m)])


def test_the_informed_attacker_who_finds_c15s_rows_is_at_its_baseline_on_a_shuffle(tmp_path):
    rows = spread_rows(40, 8, seed=24)
    model = attacker([DOWNLOAD, LATENCY, DURATION])
    noisy = informed_match.evaluate(under_test(tmp_path, rows, C15, "c15"), model).figures()["informed_match"][0]
    shuffled = informed_match.evaluate(under_test(tmp_path, rows, dataclasses.replace(C15, shuffle=True),
                                                  "shuffled"), model)
    [entry] = shuffled.figures()["informed_match"]
    assert noisy["correct"] >= 0.9
    assert shuffled.figures()["informed_match_rule"] == informed_match.NEAREST
    assert entry["correct_ci"][0] <= entry["baseline"] <= entry["correct_ci"][1] and entry["risk"] < 0.1


def test_microaggregation_groups_hold_at_least_g_sessions_of_one_cell(tmp_path):
    config = dataclasses.replace(PLAIN, id="microaggregated", microaggregate=Microaggregation(4, "median"))
    rows = spread_rows(12, 9, seed=25) + [row(f"35849999{i:04d}", minute=50, app="Banking") for i in range(3)]
    release = under_test(tmp_path, rows, config)
    assert release.plan.k == 5 and release.plan.rows_released == 108  # the 3-row Banking cell is withheld
    frame = pq.read_table(release.released_path).to_pandas()
    for _, cell in frame.groupby(CELL):
        groups = cell.groupby(list(SCHEMA.measurements), dropna=False).size()
        assert groups.min() >= 4, groups  # rows sharing every released value: one group, at least g of them
    assert not release.plan.moves_values  # a value replaced by its group's statistic stands for its own row


def mdav_by_definition(features: np.ndarray, size: int) -> list[np.ndarray]:
    """MDAV (Domingo-Ferrer and Torra, 2005) on the rows of one cell, a row at a time, as the paper states it:
    groups of ``size`` rows (the last one of ``size`` to 2 x ``size`` - 1; one group when there are fewer than
    2 x ``size`` rows). While at least 3 x size rows remain: the row r farthest from the remaining rows' mean and
    its size - 1 nearest rows form a group, then the row farthest from r and its nearest rows another. Distances
    are Euclidean; ties go to the lower row."""
    alive = np.ones(len(features), dtype=bool)
    groups: list[np.ndarray] = []

    def farthest(point: np.ndarray) -> int:
        distance = ((features - point) ** 2).sum(axis=1)
        distance[~alive] = -np.inf
        return int(np.argmax(distance))

    def group_around(row: int) -> None:
        distance = ((features - features[row]) ** 2).sum(axis=1)
        distance[~alive] = np.inf
        members = np.sort(np.argsort(distance, kind="stable")[:size])
        alive[members] = False
        groups.append(members)

    left = len(features)
    while left >= 3 * size:
        r = farthest(features[alive].mean(axis=0))
        group_around(r)
        group_around(farthest(features[r]))
        left -= 2 * size
    if left >= 2 * size:
        group_around(farthest(features[alive].mean(axis=0)))
        left -= size
    if left:
        groups.append(np.flatnonzero(alive))
    return groups


@pytest.mark.parametrize("size", [2, 3, 5])
def test_mdav_on_cells_batched_together_is_mdav_cell_by_cell(size):
    rng = np.random.default_rng(size)
    sizes = rng.integers(1, 12 * size, size=40)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    features = rng.lognormal(size=(int(starts[-1]), 3))
    labels = values.mdav_labels(features, starts, size)
    for first, end in zip(starts[:-1], starts[1:]):
        expected = np.empty(end - first, dtype=np.int64)
        for number, members in enumerate(mdav_by_definition(features[first:end], size)):
            expected[members] = number
        assert np.array_equal(labels[first:end] - labels[first:end].min(), expected), (first, end)


def test_mdav_on_a_hand_built_cell_gives_the_hand_computed_groups():
    # Three clear clusters of three on one measurement: the farthest from the mean (1002) takes its two nearest,
    # then the farthest from it (1) its two nearest; three rows remain, fewer than 2 x 3: one group.
    features = np.array([[1.0], [2.0], [3.0], [100.0], [101.0], [103.0], [1000.0], [1001.0], [1002.0]])
    groups = mdav_by_definition(features, 3)
    assert [g.tolist() for g in groups] == [[6, 7, 8], [0, 1, 2], [3, 4, 5]]
    column = {"m": features[:, 0].copy()}
    values.microaggregate(column, np.array([0, 9]), 3, "median")
    assert column["m"].tolist() == [2.0, 2.0, 2.0, 101.0, 101.0, 101.0, 1001.0, 1001.0, 1001.0]
    # Two cells (runs) of three: one group each; a null stays null, its group's statistic is of the values it has.
    two = {"m": np.array([1.0, 2.0, np.nan, 1.0, 2.0, 6.0])}
    values.microaggregate(two, np.array([0, 3, 6]), 3, "mean")
    assert two["m"].tolist()[:2] == [1.5, 1.5] and np.isnan(two["m"][2]) and two["m"].tolist()[3:] == [3.0] * 3


@pytest.mark.parametrize("percent", [1, 5, 10, 50, 100])
def test_rank_swapping_moves_each_value_within_p_percent_of_its_rank_and_keeps_the_column(percent):
    rng = np.random.default_rng(percent)
    column = rng.lognormal(3.0, 1.0, 2_000)
    column[rng.choice(2_000, 40, replace=False)] = np.nan
    groups = rng.integers(0, 3, 2_000)
    donor = values.rank_swap_donors(column, groups, percent, np.array([5, 6], dtype=np.uint64))
    swapped = column[donor]
    assert sorted(swapped[~np.isnan(swapped)]) == sorted(column[~np.isnan(column)])  # the multiset
    assert np.array_equal(np.isnan(swapped), np.isnan(column))  # nulls stay where they are
    for group in range(3):
        mine = np.flatnonzero((groups == group) & ~np.isnan(column))
        rank = {position: r for r, position in enumerate(mine[np.argsort(column[mine], kind="stable")])}
        assert (groups[donor[mine]] == group).all()  # within its (app, radio) group
        moved = [abs(rank[donor[p]] - rank[p]) for p in mine]
        assert max(moved) <= percent / 100 * len(mine)
        assert sum(m > 0 for m in moved) >= 0.75 * len(mine)  # all but one value of each odd block of >= 5
    assert np.array_equal(donor[donor], np.arange(2_000))  # pairs: each exchange is a swap


def test_a_rank_swapped_release_keeps_each_app_radio_groups_values(tmp_path):
    config = dataclasses.replace(PLAIN, id="swapped", rank_swap=RankSwap(10.0))
    release = under_test(tmp_path, spread_rows(20, 8, seed=26), config)
    plain = under_test(tmp_path, spread_rows(20, 8, seed=26), PLAIN, "plain")

    def by_group(path):
        frame = pq.read_table(path).to_pandas()
        return {key: {m: sorted(g[m].tolist()) for m in SCHEMA.measurements}
                for key, g in frame.groupby([SCHEMA.app, SCHEMA.radio])}

    assert by_group(release.released_path) == by_group(plain.released_path)
    assert by_cell(release.released_path) != by_cell(plain.released_path)  # values crossed cells


@pytest.mark.parametrize("fields, named", [
    ({"microaggregate": {"size": 1}}, "microaggregate size must be an integer >= 2"),
    ({"microaggregate": {"size": 5, "statistic": "mode"}}, "statistic must be one of"),
    ({"rank_swap": {"percent": 0}}, "rank_swap must be a table { percent = p } with p in (0, 100]"),
    ({"rank_swap": {"percent": 150}}, "p in (0, 100]"),
    ({"shuffle": "row"}, 'shuffle must be "cell"'),
    ({"shuffle": "cell", "drop_fields": ["identifiers", "time_start", "province", "application_category",
                                         "radio_access_type"]}, "shuffle needs a released cell"),
])
def test_bad_value_operations_are_refused_in_one_line(tmp_path, fields, named):
    table = "\n".join(f"{key} = {_toml(value)}" for key, value in {"k": 5, **fields}.items())
    (tmp_path / "releases.toml").write_text(f"[configs.bad]\n{table}\n")
    with pytest.raises(ConfigError) as refused:
        load_configs(tmp_path / "releases.toml", SCHEMA)
    assert named in str(refused.value) and "\n" not in str(refused.value)
    assert str(refused.value).startswith("release configuration 'bad'")


def _toml(value) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return f'"{value}"' if isinstance(value, str) else str(value)


def test_a_sweep_declares_its_points_which_no_period_run_takes(tmp_path):
    from dsh_assets.core.release.configs import period_configs, sweep_configs

    points = sweep_configs(CONFIGS)
    assert {"sweep_shuffle_noise_0", "sweep_shuffle_noise_0p05", "sweep_shuffle_noise_0p1",
            "sweep_microaggregate_size_10", "sweep_rank_swap_percent_1"} <= set(points)
    assert points["sweep_shuffle_noise_0p05"].noise_scale == 0.05 and points["sweep_shuffle_noise_0p05"].shuffle
    assert points["sweep_microaggregate_size_10"].cell_minimum == 10
    assert not set(points) & set(period_configs(CONFIGS))
    (tmp_path / "releases.toml").write_text('[configs.a]\nk = 5\n[sweep.s]\nbase = "nowhere"\nk = [1]\n')
    with pytest.raises(ConfigError, match=r"\[sweep.s\] base 'nowhere' is not a row-level configuration"):
        load_configs(tmp_path / "releases.toml", SCHEMA)


# -- coarsening each value: rounding, top and bottom coding; per-column microaggregation ----------------------

@pytest.mark.parametrize("value, digits, rounded", [
    (1234.5, 2, 1200.0), (1250.0, 2, 1300.0), (0.012345, 2, 0.012), (9.96, 2, 10.0), (999.5, 3, 1000.0),
    (7.0, 1, 7.0), (1.05, 2, 1.1), (123456789.0, 3, 123000000.0), (0.0, 2, 0.0), (float("nan"), 2, float("nan")),
])
def test_rounding_to_significant_digits_by_hand(value, digits, rounded):
    got = values.round_values(np.array([value]), Rounding(significant=digits))[0]
    assert got == rounded or (np.isnan(got) and np.isnan(rounded))


def test_rounding_gives_the_double_nearest_the_decimal_of_every_value():
    sample = np.exp(np.random.default_rng(1).uniform(-12, 20, 20_000))
    for digits in (1, 2, 3, 5):
        expected = np.array([float(f"{x:.{digits - 1}e}") for x in sample])  # the decimal, rounded by Python
        assert np.array_equal(values.round_values(sample, Rounding(significant=digits)), expected)
        in_place = sample.copy()
        values.round_values(in_place, Rounding(significant=digits), out=in_place)
        assert np.array_equal(in_place, expected)


def test_rounding_does_not_depend_on_how_log10_rounds(monkeypatch):
    """A log10 a little off at a power of ten (2.999999999 for 1000) is corrected, not trusted."""
    sample = np.array([1000.0, 0.001, 99.99, 10.0, 1e-5, 123.0])
    exact = values.round_values(sample, Rounding(significant=2))
    log10 = np.log10
    for off in (-1e-9, 1e-9):
        monkeypatch.setattr(np, "log10", lambda x, off=off: log10(x) + off)
        assert np.array_equal(values.round_values(sample, Rounding(significant=2)), exact)


def test_rounding_to_a_geometric_grid():
    rounded = values.round_values(np.array([1.0, 2.8, 3.0, 0.0, 40.0]), Rounding(ratio=2.0))
    assert rounded.tolist() == [1.0, 2.0, 4.0, 0.0, 32.0]  # log2: 0, 1.49, 1.58, -, 5.32 to the nearest power


def test_top_and_bottom_coding_by_rank_and_by_quantile_within_each_group():
    column = np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 50, 60, np.nan], dtype=float)
    groups = np.array([0] * 10 + [1, 1, 1])
    top = values.code_values(column, groups, [(Coding("cell", rank=3), True)])
    assert top[:10].tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 8, 8]  # the 3 largest become the 3rd largest
    assert top[10:12].tolist() == [50, 50] and np.isnan(top[12])  # 2 values: the least extreme; null stays null
    bottom = values.code_values(column, groups, [(Coding("cell", rank=2), False)])
    assert bottom[:10].tolist() == [2, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    quantile = values.code_values(column, groups, [(Coding("cell", quantile=0.9), True)])
    assert quantile[:10].tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 9, 9]  # ceil(0.9 x 10) = 9th value, not 9.000...01
    low = values.code_values(column, groups, [(Coding("cell", quantile=0.15), False)])
    assert low[:10].tolist() == [2, 2, 3, 4, 5, 6, 7, 8, 9, 10]  # ceil(1.5) = 2nd value


def test_a_bound_is_taken_over_the_values_the_codings_before_it_left():
    column = np.array([1, 2, 3, 30, 10, 20, 40], dtype=float)
    groups = np.array([0, 0, 0, 1, 1, 1, 1])
    codings = [(Coding("cell", rank=2), True), (Coding("cell", rank=3), False)]
    # group 0: top-coded to [1, 2, 2], whose 3rd smallest is 2 (the raw 3rd smallest is 3); group 1: top 30, then
    # the 3rd smallest of [30, 10, 20, 30] is 30
    assert values.code_values(column, groups, codings).tolist() == [2, 2, 2, 30, 30, 30, 30]
    one_at_a_time = values.code_values(values.code_values(column, groups, codings[:1]), groups, codings[1:])
    assert np.array_equal(values.code_values(column, groups, codings), one_at_a_time)


@pytest.mark.parametrize("chunk_rows", [1, 5, 64, 1 << 22])
def test_the_shuffle_made_a_few_runs_at_a_time_is_one_stable_sort(monkeypatch, chunk_rows):
    starts = np.array([0, 3, 3 + 40, 3 + 40 + 7, 100])
    key = np.array([7, 11], dtype=np.uint64)
    run = np.repeat(np.arange(4, dtype=np.uint64), np.diff(starts))
    words = values.stream_words(key, np.arange(100, dtype=np.int64)) >> np.uint64(24)
    one_sort = np.argsort((run << np.uint64(40)) | words, kind="stable")
    monkeypatch.setattr(values, "CHUNK_ROWS", chunk_rows)
    donors = values.shuffle_donors(starts, key)
    assert np.array_equal(donors, one_sort)
    for first, end in zip(starts[:-1], starts[1:]):  # a permutation within each run
        assert sorted(donors[first:end]) == list(range(first, end))


def test_ties_keep_their_index_order_as_a_stable_sort_does():
    rank = np.array([5, 1, 5, 3, 1, 5, 0, 3], dtype=np.uint64)
    assert values.stable_order(rank).tolist() == [6, 1, 4, 3, 7, 0, 2, 5]


def coded_by_sorting(column: np.ndarray, groups: np.ndarray, coding: Coding, top: bool) -> np.ndarray:
    """Coding as its definition reads: each group's non-null values sorted, the bound at its rank."""
    out = column.copy()
    by_group = np.argsort(groups, kind="stable")
    for rows in np.split(by_group, np.flatnonzero(np.diff(groups[by_group])) + 1):
        rows = rows[~np.isnan(column[rows])]
        if not len(rows):
            continue
        held = np.sort(column[rows])
        n = len(held)
        at = (n - min(coding.rank, n) if top else min(coding.rank, n) - 1) if coding.rank is not None else \
            max(int(np.ceil(coding.quantile * n - 1e-9)), 1) - 1
        out[rows] = np.minimum(column[rows], held[at]) if top else np.maximum(column[rows], held[at])
    return out


@pytest.mark.parametrize("group_count", [3, 40_000])  # 16-bit group numbers (a radix sort), and wider ones
def test_coding_agrees_with_sorting_each_group_whatever_order_the_groups_come_in(group_count):
    rng = np.random.default_rng(group_count)
    column = rng.integers(0, 50, 90_000).astype(float)  # ties
    column[rng.random(len(column)) < 0.1] = np.nan
    groups = rng.integers(0, group_count, len(column))
    for coding, top in ((Coding("cell", rank=4), True), (Coding("app_radio", rank=3), False),
                        (Coding("cell", quantile=0.9), True), (Coding("cell", quantile=0.05), False)):
        expected = coded_by_sorting(column, groups, coding, top)
        np.testing.assert_array_equal(values.code_values(column, groups, [(coding, top)]), expected)
        in_place = column.copy()  # every bound is taken before a value is coded
        values.code_values(in_place, groups, [(coding, top)], out=in_place)
        np.testing.assert_array_equal(in_place, expected)


def test_per_column_microaggregation_groups_sorted_values_of_each_run():
    starts = np.array([0, 7, 10])
    column = np.array([5, 1, 4, 2, 3, 6, 7, 30, 10, 20], dtype=float)
    # run 1: 1..7 in groups [1, 2, 3] and [4, 5, 6, 7] (the last takes the rest); run 2: fewer than 2 x 3 values
    assert values.column_microaggregate(column, starts, 3, "median").tolist() == [5.5, 2, 5.5, 2, 2, 5.5, 5.5,
                                                                                    20, 20, 20]
    assert values.column_microaggregate(column, starts, 3, "mean").tolist()[7:] == [20, 20, 20]


def test_a_coarsened_release_puts_every_value_on_its_grid_and_keeps_each_cells_rounded_values(tmp_path):
    rows = spread_rows(10, 12)
    config = dataclasses.replace(SHUFFLED, id="coarse", round=Rounding(significant=2),
                                 top_code=Coding("cell", rank=2), bottom_code=Coding("cell", rank=2))
    release = under_test(tmp_path, rows, config, "coarse")
    plain = under_test(tmp_path, rows, PLAIN, "plain")
    released, source = by_cell(release.released_path), by_cell(plain.released_path)
    assert released.keys() == source.keys()
    for cell, columns in released.items():
        for m, held in columns.items():
            raw = np.array([np.nan if v is None else v for v in source[cell][m]])
            expected = values.round_values(
                values.code_values(values.code_values(raw, np.zeros(len(raw), dtype=int), [(Coding("cell", rank=2), True)]),
                                   np.zeros(len(raw), dtype=int), [(Coding("cell", rank=2), False)]),
                Rounding(significant=2))
            # the shuffle permutes the final values: each cell holds its own values, coded and rounded
            assert sorted(v for v in held if v is not None) == sorted(v for v in expected if v == v)


def test_a_release_that_only_rounds_keeps_each_value_in_its_own_row(tmp_path):
    config = dataclasses.replace(PLAIN, id="rounded", round=Rounding(significant=2))
    release = under_test(tmp_path, spread_rows(10, 12), config, "rounded")
    assert not release.plan.moves_values and informed_match.likelihood_of(config) == informed_match.NEAREST
    released = pq.read_table(release.released_path)
    source = pq.read_table(release.source_path).take(release.released_row_ids())
    for m in (DOWNLOAD, LATENCY):
        assert np.array_equal(released.column(m).to_numpy(),
                              values.round_values(source.column(m).to_numpy(), Rounding(significant=2)))


@pytest.mark.parametrize("fields, named", [
    ({"round": {"significant": 0}}, "round significant must be an integer from 1 to 15"),
    ({"round": {"ratio": 1.0}}, "round ratio must be a number above 1"),
    ({"round": {"significant": 2, "ratio": 1.1}}, "round must be a table { significant = 2 } or { ratio = 1.1 }"),
    ({"top_code": {"rank": 10}}, "top_code within must be one of ('cell', 'app_radio')"),
    ({"top_code": {"rank": 0, "within": "cell"}}, "top_code rank must be an integer >= 1"),
    ({"bottom_code": {"quantile": 1.0, "within": "cell"}}, "bottom_code quantile must be a number in (0, 1)"),
    ({"bottom_code": {"quantile": 0.01, "rank": 3, "within": "cell"}}, "bottom_code must be a table"),
    ({"microaggregate": {"size": 10, "by": "session"}}, "microaggregate by must be one of ('row', 'column')"),
])
def test_bad_coarsening_operations_are_refused_in_one_line(tmp_path, fields, named):
    test_bad_value_operations_are_refused_in_one_line(tmp_path, fields, named)


def test_a_configuration_that_does_not_name_by_keeps_its_definition_hash():
    c19 = CONFIGS["c19_window_microagg10"]
    assert c19.microaggregate.by == "row"
    assert c19.definition_hash() == "f0f2febdc715" + c19.definition_hash()[12:]  # pinned before `by` existed
    column = dataclasses.replace(c19, microaggregate=Microaggregation(10, "median", "column"))
    assert column.definition_hash() != c19.definition_hash()
