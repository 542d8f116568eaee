"""Relationships between measurements: Spearman's rho by hand, pairwise complete, and the figures over strong pairs
and large groups."""

import math

import numpy as np
import pandas as pd
import pytest

from dsh_assets.core.utility import pair_correlation as pc
from dsh_assets.core.utility.pair_correlation import GroupCorrelations
from dsh_assets_tests.tables import row, write

NAN = math.nan


def rho(x, y) -> float:
    [value], [count] = pc.spearman(np.column_stack([x, y]).astype(float), [(0, 1)])
    return value


def test_spearman_by_hand():
    # d = (0, -1, 1, 0): 1 - 6 x 2 / (4 x 15) = 0.8
    assert rho([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    # ties get their average rank: x ranks 1.5, 1.5, 3, 4 against 1..4 give 4.5 / sqrt(4.5 x 5)
    assert rho([1, 1, 2, 3], [10, 20, 30, 40]) == pytest.approx(4.5 / math.sqrt(22.5))
    assert rho([4, 3, 2, 1], [1, 2, 3, 4]) == pytest.approx(-1.0)


def test_spearman_ranks_each_pair_over_its_complete_rows_only():
    """Row 1 has no y: x's 1, 3, 4 rank 1, 2, 3 among the complete rows (not 1, 3, 4 of all four), so rho is that
    of (1, 2, 3) against y's ranks (1, 3, 2): 0.5, as pandas computes it."""
    x, y = [1, 2, 3, 4], [1, NAN, 3, 2]
    assert rho(x, y) == pytest.approx(0.5)
    assert rho(x, y) == pytest.approx(pd.DataFrame({"x": x, "y": y}).corr(method="spearman").loc["x", "y"])
    [_], [complete] = pc.spearman(np.column_stack([x, y]).astype(float), [(0, 1)])
    assert complete == 3


def test_spearman_is_undefined_without_spread_or_rows():
    assert math.isnan(rho([1, 1, 1], [1, 2, 3]))
    assert math.isnan(rho([1, NAN, 3], [NAN, 2, NAN]))


def test_spearman_does_not_depend_on_the_order_of_rows():
    """Exact integer sums: the same bytes whatever order an engine hands the rows over in."""
    rng = np.random.default_rng(5)
    values = rng.lognormal(size=(5_000, 3))
    values[rng.random(values.shape) < 0.05] = NAN
    values[:, 1] = np.round(values[:, 1], 1)  # ties
    pairs = [(0, 1), (0, 2), (1, 2)]
    shuffled = values[rng.permutation(len(values))]
    assert pc.spearman(values, pairs) == pc.spearman(shuffled, pairs)
    expected = pd.DataFrame(values).corr(method="spearman")
    for (i, j), value in zip(pairs, pc.spearman(values, pairs)[0]):
        assert value == pytest.approx(expected.loc[i, j], abs=1e-12)


def test_group_correlations_of_a_file_per_app_and_radio(tmp_path):
    """Two groups of a file: Gaming/5G with download and upload in the same order (rho 1), IM/4G in opposite
    orders (rho -1); a group under min_rows is left out."""
    rows = [row(f"3584000001{i:02d}", app="Gaming", radio="5G", dl_throughput_kbps=float(i),
                ul_throughput_kbps=float(10 * i)) for i in range(6)]
    rows += [row(f"3584000002{i:02d}", app="IM", radio="4G", dl_throughput_kbps=float(i),
                 ul_throughput_kbps=float(-i + 100)) for i in range(6)]
    rows += [row("358400000301", app="VPN", radio="3G")]
    path = write(tmp_path / "pairs.parquet", rows)
    pair = ("dl_throughput_kbps", "ul_throughput_kbps")
    found = pc.group_correlations(path, "application_category", "radio_access_type", [pair], min_rows=2,
                                  batch_rows=6)
    assert set(found) == {("Gaming", "5G"), ("IM", "4G")}
    assert found[("Gaming", "5G")].rho[pair] == pytest.approx(1.0)
    assert found[("IM", "4G")].rho[pair] == pytest.approx(-1.0)
    assert found[("Gaming", "5G")].rows == 6 and found[("Gaming", "5G")].complete[pair] == 6


def correlations(rows, **rho) -> GroupCorrelations:
    pairs = {tuple(name.split("_")): value for name, value in rho.items()}
    return GroupCorrelations(rows, pairs, {pair: rows for pair in pairs})


SOURCE = {
    ("Gaming", "5G"): correlations(2_000, a_b=0.9, a_c=0.1, b_c=0.2),
    ("IM", "4G"): correlations(1_500, a_b=0.5, a_c=0.35, b_c=0.0),
    ("VPN", "3G"): correlations(10, a_b=0.0, a_c=0.0, b_c=0.99),  # not large: b ~ c is not strong
}
RELEASE = {
    ("Gaming", "5G"): correlations(1_990, a_b=0.85, a_c=0.1),
    ("IM", "4G"): correlations(1_480, a_b=0.2, a_c=0.3),
}


def figures(release=RELEASE, released=("a", "b", "c"), reason=None):
    return pc.evaluate_pairs(SOURCE, release, ["a", "b", "c"], set(released), reason=reason,
                             large_group_records=1_000, strong_pair_correlation=0.3, min_records=30)


def test_the_figures_are_the_largest_and_the_median_error_over_strong_pairs_and_large_groups():
    """Strong: a ~ b (0.9, 0.5) and a ~ c (0.35 in IM/4G); b ~ c only in a small group. Errors: Gaming a~b 0.05, a~c
    0.0; IM a~b 0.3, a~c 0.05: the largest 0.3 (never the smallest, 0.0), the median 0.05."""
    result = figures()
    assert result.strong_pairs == [("a", "b"), ("a", "c")]
    assert result.large_groups == [("Gaming", "5G"), ("IM", "4G")]
    values = result.figures()
    assert values["pair_correlation_max_error"] == pytest.approx(0.3)
    assert values["pair_correlation_median_error"] == pytest.approx(0.05)
    assert values["pair_correlation_worst"]["pair"] == ["a", "b"]
    assert values["pair_correlation_worst"]["group"] == "IM / 4G"
    metadata = result.metadata()
    assert len(metadata["pair_correlation"]) == 4 and metadata["pair_correlation_groups_kept"] == 2


def test_a_lost_group_is_left_out_and_a_lost_relationship_counts_as_no_correlation():
    lost_group = {("Gaming", "5G"): RELEASE[("Gaming", "5G")]}
    assert figures(lost_group).figures()["pair_correlation_max_error"] == pytest.approx(0.05)
    flat = {**RELEASE, ("IM", "4G"): correlations(1_480, a_b=NAN, a_c=0.3)}
    assert figures(flat).figures()["pair_correlation_max_error"] == pytest.approx(0.5)


def test_a_release_that_cannot_say_has_the_figures_unmeasured_never_zero():
    for result in (figures(reason="cannot express: apps grouped"), figures(released=("a", "b"))):
        assert result.figures()["pair_correlation_max_error"] is None
        assert result.figures()["pair_correlation_median_error"] is None
    assert "strong pair measurement dropped (c)" in figures(released=("a", "b")).reason
    nothing_large = pc.evaluate_pairs({("VPN", "3G"): SOURCE[("VPN", "3G")]}, {}, ["a", "b", "c"], {"a", "b", "c"},
                                      reason=None, large_group_records=1_000, strong_pair_correlation=0.3,
                                      min_records=30)
    assert nothing_large.figures()["pair_correlation_max_error"] is None


def test_a_source_without_a_strong_pair_has_nothing_to_lose():
    weak = {group: correlations(g.rows, a_b=0.1, a_c=0.0, b_c=-0.2) for group, g in SOURCE.items()}
    result = pc.evaluate_pairs(weak, {}, ["a", "b", "c"], {"a", "b", "c"}, reason=None, large_group_records=1_000,
                               strong_pair_correlation=0.3, min_records=30)
    assert result.strong_pairs == []
    assert result.figures()["pair_correlation_max_error"] == 0.0


def test_the_floor_is_one_standard_error_of_the_source_rho():
    # Bonett and Wright: sqrt((1 + 0.25 / 2) / 997) x 0.75 for rho 0.5 over 1,000 rows
    assert pc.standard_error(0.5, 1_000) == pytest.approx(math.sqrt(1.125 / 997) * 0.75)
    assert pc.standard_error(0.5, 3) is None
