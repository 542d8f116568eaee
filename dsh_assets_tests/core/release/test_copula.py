"""The shuffle that keeps rank correlations: every cell keeps its values, nulls stay on their rows, the truth follows
each value, and a group's rank correlations come out at the source's; the settings that trade it away."""

import dataclasses

import numpy as np
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.privacy import informed_match
from dsh_assets.core.release import copula
from dsh_assets.core.release.configs import ConfigError, RankCorrelationShuffle, load_configs
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.utility.pair_correlation import spearman
from dsh_assets_tests.core.privacy.test_informed_match import attacker
from dsh_assets_tests.core.release.test_values import CONFIGS, SCHEMA, SHUFFLED, _toml, by_cell
from dsh_assets_tests.tables import row, sha256_file, under_test

DOWNLOAD, UPLOAD, VOLUME = SCHEMA.download, "ul_throughput_kbps", "dl_volume_kb"
KEEPING = dataclasses.replace(SHUFFLED, id="keeping", keep_rank_correlation=RankCorrelationShuffle())


def related_rows(cells: int, per_cell: int, seed: int, region: str = "P") -> list[dict]:
    """``cells`` ten-minute cells of Gaming on 5G, each session's upload and volume tied to its download (rank
    correlations near 0.9 and 0.7), every other measurement drawn on its own."""
    rng = np.random.default_rng(seed)
    rows = []
    for cell in range(cells):
        for session in range(per_cell):
            download = float(np.exp(rng.normal(4.0, 1.0)))
            values = {m: float(np.exp(rng.normal(4.0, 1.0))) for m in SCHEMA.measurements}
            values[DOWNLOAD] = download
            values[UPLOAD] = download * float(np.exp(rng.normal(0.0, 0.4)))
            values[VOLUME] = download * float(np.exp(rng.normal(0.0, 1.0)))
            rows.append(row(f"3584{region}{cell:04d}{session:04d}", minute=10 * (cell % 6),
                            province=f"{region}{cell // 6}", **values))
    return rows


def released_rho(path, x: str, y: str) -> float:
    table = pq.read_table(path, columns=[x, y])
    values = np.column_stack([table.column(name).to_numpy(zero_copy_only=False) for name in (x, y)]).astype(float)
    return spearman(values, [(0, 1)])[0][0]


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    directory = tmp_path_factory.mktemp("copula")
    rows = related_rows(60, 20, seed=31)
    rows[5][UPLOAD] = None
    rows[17][VOLUME] = None
    return {name: under_test(directory, rows, config, name)
            for name, config in (("plain", SHUFFLED), ("keeping", KEEPING))}


def test_each_cell_keeps_its_values_and_the_truth_follows_them(releases):
    plain, keeping = releases["plain"], releases["keeping"]
    assert by_cell(keeping.released_path) == by_cell(plain.released_path)
    released = pq.read_table(keeping.released_path)
    source = pq.read_table(keeping.source_path).to_pandas().set_index("row_id")
    positions = np.arange(released.num_rows)
    for m in SCHEMA.measurements:
        np.testing.assert_array_equal(released.column(m).to_numpy(zero_copy_only=False),
                                      source[m].to_numpy()[keeping.value_origins(positions, m)])


def test_nulls_stay_on_their_rows(releases):
    keeping = releases["keeping"]
    positions = np.arange(pq.read_metadata(keeping.released_path).num_rows)
    for m in (UPLOAD, VOLUME):
        null = np.isnan(pq.read_table(keeping.released_path, columns=[m]).column(m).to_numpy(zero_copy_only=False))
        assert null.sum() == 1
        [at] = np.flatnonzero(null)
        assert keeping.value_origins(positions, m)[at] == keeping.plan.order[at], "the null is its own row's"


def test_the_groups_rank_correlations_come_out_at_the_sources(releases):
    """The plain shuffle takes download ~ upload from about 0.9 to about 0; the kept one leaves it within 0.03."""
    source_path = releases["keeping"].source_path
    for x, y in ((DOWNLOAD, UPLOAD), (DOWNLOAD, VOLUME)):
        source = released_rho(source_path, x, y)
        assert source > 0.6
        assert abs(released_rho(releases["plain"].released_path, x, y)) < 0.1
        assert released_rho(releases["keeping"].released_path, x, y) == pytest.approx(source, abs=0.03)


def test_calibration_closes_the_gap_that_rank_matching_in_small_cells_leaves(tmp_path, monkeypatch):
    """Without its calibration rounds, draws correlated as the source realise less in cells of 10 rows (0.83
    against 0.93 here); with them, within 0.02."""
    rows = related_rows(60, 10, seed=32)

    def error(name):
        release = under_test(tmp_path, rows, KEEPING, name)
        return abs(released_rho(release.released_path, DOWNLOAD, UPLOAD)
                   - released_rho(release.source_path, DOWNLOAD, UPLOAD))

    calibrated = error("calibrated")
    monkeypatch.setattr(copula, "CALIBRATION_ROUNDS", 0)
    uncalibrated = error("uncalibrated")
    assert calibrated < 0.02 < uncalibrated


def test_the_same_bytes_twice_and_other_bytes_under_another_key(tmp_path):
    rows = related_rows(12, 10, seed=33)
    first, again = under_test(tmp_path, rows, KEEPING, "first"), under_test(tmp_path, rows, KEEPING, "again")
    other = under_test(tmp_path, rows, KEEPING, "other", secrets=Secrets(b"another", b"demo", "test"))
    assert sha256_file(first.released_path) == sha256_file(again.released_path)
    assert sha256_file(other.released_path) != sha256_file(first.released_path)


@pytest.mark.parametrize("settings", [RankCorrelationShuffle(min_cell_rows=21), RankCorrelationShuffle(shrink=1.0)])
def test_small_cells_and_a_full_shrink_get_the_plain_permutation(tmp_path, settings):
    """Every cell holds 20 rows: min_cell_rows 21 leaves each to independent draws, as shrink 1 does."""
    rows = related_rows(60, 20, seed=34)
    release = under_test(tmp_path, rows, dataclasses.replace(KEEPING, keep_rank_correlation=settings))
    assert abs(released_rho(release.released_path, DOWNLOAD, UPLOAD)) < 0.1


def test_cells_left_to_the_plain_permutation_are_not_made_up_for_in_the_others(tmp_path):
    """Cells of 20 and of 5 rows in one group, min_cell_rows 10: the small cells lose the relationship, and the large
    ones keep their own rank correlation (within 0.03), not more to make up for the small ones."""
    rows = related_rows(60, 20, seed=36) + related_rows(60, 5, seed=37, region="Q")
    release = under_test(tmp_path, rows, dataclasses.replace(KEEPING, keep_rank_correlation=RankCorrelationShuffle(
        min_cell_rows=10)))
    released = pq.read_table(release.released_path).to_pandas()
    source = pq.read_table(release.source_path).to_pandas()
    large = {name: frame[frame[SCHEMA.province].str.startswith("P")] for name, frame in
             (("released", released), ("source", source))}
    small = released[released[SCHEMA.province].str.startswith("Q")]
    assert large["released"][[DOWNLOAD, UPLOAD]].corr(method="spearman").iloc[0, 1] == pytest.approx(
        large["source"][[DOWNLOAD, UPLOAD]].corr(method="spearman").iloc[0, 1], abs=0.03)
    assert abs(small[[DOWNLOAD, UPLOAD]].corr(method="spearman").iloc[0, 1]) < 0.2


def test_shrink_aims_at_a_share_of_the_correlation(tmp_path):
    rows = related_rows(60, 20, seed=35)
    half = under_test(tmp_path, rows, dataclasses.replace(KEEPING, keep_rank_correlation=RankCorrelationShuffle(
        shrink=0.5)))
    source = released_rho(half.source_path, DOWNLOAD, UPLOAD)
    assert 0.3 * source < released_rho(half.released_path, DOWNLOAD, UPLOAD) < 0.7 * source


def test_the_configuration_language_and_the_plain_shuffles_hash():
    c22, c24 = CONFIGS["c22_hour_k5_shuffle_code10_round3"], CONFIGS["c24_hour_k5_copula_code10_round3"]
    assert c22.keep_rank_correlation is None and c24.keep_rank_correlation == RankCorrelationShuffle()
    assert c24.operations()["shuffle"] == {"within": "cell", "keep": "rank_correlation", "min_cell_rows": 0,
                                           "shrink": 0.0}
    assert c22.operations()["shuffle"] == "cell"
    # c22's definition, and so its hash, is what it was before the language had `keep`
    assert c22.definition_hash() == "7a42b2571466750e79671c44ab430a5b1655d30076e4f33b003766019af5b382"


@pytest.mark.parametrize("shuffle, named", [
    ({"within": "row"}, 'shuffle must be "cell" or a table'),
    ({"within": "cell", "keep": "pearson"}, 'shuffle keep must be "rank_correlation"'),
    ({"within": "cell", "keep": "rank_correlation", "min_cell_rows": -1}, "min_cell_rows must be an integer >= 0"),
    ({"within": "cell", "keep": "rank_correlation", "shrink": 2}, "shrink must be a number in [0, 1]"),
    ({"within": "cell", "shrink": 0.5}, 'need keep = "rank_correlation"'),
])
def test_bad_shuffle_tables_are_refused_in_one_line(tmp_path, shuffle, named):
    (tmp_path / "releases.toml").write_text(f"[configs.bad]\nk = 5\nshuffle = {_toml(shuffle)}\n")
    with pytest.raises(ConfigError) as refused:
        load_configs(tmp_path / "releases.toml", SCHEMA)
    assert named in str(refused.value) and "\n" not in str(refused.value)


def test_a_rank_swap_cannot_be_combined_with_it(tmp_path):
    (tmp_path / "releases.toml").write_text(
        '[configs.bad]\nk = 5\nshuffle = { within = "cell", keep = "rank_correlation" }\nrank_swap = { percent = 5 }\n')
    with pytest.raises(ConfigError, match="cannot be combined"):
        load_configs(tmp_path / "releases.toml", SCHEMA)


def test_the_informed_attacker_takes_the_nearest_row_and_is_scored_by_the_truth(releases):
    """No row-level likelihood exists after a shuffle: the attacker who knows a session's download takes the row
    nearest in log space, and scores the share of the session's other values that row holds, from the truth."""
    result = informed_match.evaluate(releases["keeping"], attacker([DOWNLOAD]))
    [entry] = result.figures()["informed_match"]
    assert result.figures()["informed_match_rule"] == informed_match.NEAREST
    assert entry["n"] == 1_200 and 0 <= entry["baseline"] <= entry["correct"] <= 1


def test_a_groups_target_is_pooled_with_the_weight_of_thirty_rows():
    """Group 0 (30 rows) correlates +1 within its cells, group 1 (90 rows) -1; pooled, their sums cancel (0). The
    targets: 30 / 60 of +1 and 90 / 120 of -1."""
    within = np.array([[[1.0, 1.0], [1.0, 1.0]], [[1.0, -1.0], [-1.0, 1.0]]])
    targets = copula._targets(within, np.array([30, 90]))
    assert targets[0, 0, 1] == pytest.approx(0.5) and targets[1, 0, 1] == pytest.approx(-0.75)
    assert targets[0, 0, 0] == targets[1, 1, 1] == 1.0
