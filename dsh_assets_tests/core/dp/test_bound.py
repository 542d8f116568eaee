"""The bound chosen by utility, and the three errors a planner sees (noise, bias, total)."""

import math

import numpy as np
import pytest

from dsh_assets.core import files
from dsh_assets.core.dp import bound
from dsh_assets.core.dp.lab import error_against_truth
from dsh_assets.core.dp.publish import EmbeddedCounting
from dsh_assets.core.files import DigestBook
from dsh_assets.core.release import configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets_tests.tables import row, s, write


# -- noise, bias and total error on a hand-checkable table -----------------------------------------

def shifted(by):
    """A stand-in mechanism that adds a fixed vector (tiled over the draws) instead of noise."""
    def mechanism_(values, scale):
        return values + np.tile(np.asarray(by), len(values) // len(by))
    return mechanism_


def test_total_error_is_bias_plus_noise_on_a_hand_checkable_table():
    # true (unbounded) 12, 30, 5, 40; the bound drops 2 from the first and 3 from the last
    unbounded = np.array([12, 30, 5, 40])
    bounded = np.array([10, 30, 5, 37])
    # noise -1, +2, -3, -1: never up past an undercount, so the errors add up cell by cell
    result = error_against_truth(bounded, unbounded, 1.0, 4, draws=3, mechanism=shifted([-1, 2, -3, -1]))
    # small cells (true < 20): 12 and 5. noise (1 + 3) / 2 = 2, bias (2 + 0) / 2 = 1, total (3 + 3) / 2 = 3
    assert result["small"] == {"noise": 2.0, "bias": 1.0, "total": 3.0, "cells": 2}
    # large: 30 and 40. noise (2 + 1) / 2 = 1.5, bias (0 + 3) / 2 = 1.5, total (2 + 4) / 2 = 3
    assert result["large"] == {"noise": 1.5, "bias": 1.5, "total": 3.0, "cells": 2}
    for size in result.values():
        assert size["total"] == size["bias"] + size["noise"]


def test_noise_can_offset_the_undercount_so_total_is_at_most_bias_plus_noise():
    result = error_against_truth(np.array([10]), np.array([12]), 1.0, 4, draws=1, mechanism=shifted([1]))
    assert result["small"] == {"noise": 1.0, "bias": 2.0, "total": 1.0, "cells": 1}


def test_with_the_real_mechanism_total_is_noise_where_nothing_is_dropped():
    counts = np.array([0, 3, 25, 80])
    result = error_against_truth(counts, counts, 0.75, 4, draws=200)
    for size in result.values():
        assert size["bias"] == 0.0 and size["total"] == size["noise"]
    with pytest.raises(ValueError):
        error_against_truth(np.array([5]), np.array([4]), 1.0, 1)


# -- the bound chosen by utility --------------------------------------------------------------------

def test_the_chooser_picks_the_hand_computed_minimum():
    """100 cells; 60 subscribers in 1 cell, 30 in 3, 10 in 12. epsilon 1.

    bias(B) = sum h[m] max(0, m - B) / 100: B=1: (30*2 + 10*11) / 100 = 1.70; B=2: (30 + 100) / 100 = 1.30;
    B=4: 80 / 100 = 0.80; B=8: 40 / 100 = 0.40; B=16: 0.
    noise(B) = 2a / (1 - a^2), a = exp(-1 / B): B=1: 0.8509; 2: 1.9190; 4: 3.9581; 8: 7.9790; 16: 15.9896.
    total: 2.551, 3.219, 4.758, 8.379, 15.990 -> B = 1.
    """
    histogram = np.zeros(bound.HISTOGRAM_CAP + 1, dtype=np.int64)
    histogram[[1, 3, 12]] = [60, 30, 10]
    curve = bound.expected_total_error(histogram, 100, 1.0, candidates=(1, 2, 4, 8, 16))
    for b, bias in {1: 1.7, 2: 1.3, 4: 0.8, 8: 0.4, 16: 0.0}.items():
        a = math.exp(-1 / b)
        assert curve[b]["bias"] == pytest.approx(bias)
        assert curve[b]["noise"] == pytest.approx(2 * a / (1 - a * a), rel=1e-9)
        assert curve[b]["total"] == curve[b]["bias"] + curve[b]["noise"]
    assert bound.choose_bound(curve) == 1
    # with 1,000 subscribers in 12 cells the bias dominates: B=1: (60 + 11,000) / 100 + 0.85 = 111.45;
    # B=2: (30 + 10,000) / 100 + 1.92 = 102.22; B=4: 80 + 3.96; B=8: 40 + 7.98; B=16: 0 + 15.99 -> B = 16
    histogram[12] = 1_000
    curve = bound.expected_total_error(histogram, 100, 1.0, candidates=(1, 2, 4, 8, 16))
    assert {b: round(v["total"], 2) for b, v in curve.items()} == {1: 111.45, 2: 102.22, 4: 83.96, 8: 47.98,
                                                                   16: 15.99}
    assert bound.choose_bound(curve) == 16
    assert bound.bound_figures(16, curve, "x")["candidates"]["16"] == curve[16]["total"]


def test_ties_go_to_the_smaller_bound():
    curve = {2: {"total": 1.0}, 1: {"total": 1.0}, 4: {"total": 3.0}}
    assert bound.choose_bound(curve) == 1


def test_cells_per_subscriber_counts_each_subscriber_once(tmp_path):
    rows = [row(s(1), app=app) for app in ("Gaming", "IM", "VPN")] + [row(s(1), app="Gaming")]
    rows += [row(s(2), app="Gaming"), row(s(3), province="Lappi", app="IM")]
    source = write(tmp_path / "source.parquet", rows)
    config = configs.parse_dp_config("dp_t", {"epsilon": 1.0, "max_cells_per_subscriber": "auto",
                                              "bound_epsilon": 0.1})
    histogram, cells = bound.cells_per_subscriber(source, config, load_schema(), book=DigestBook())
    assert histogram[1] == 2 and histogram[3] == 1 and histogram.sum() == 3
    assert cells == 1 * 2 * 3 * 1  # one window x (Uusimaa, Lappi) x (Gaming, IM, VPN) x 5G
    assert not histogram.flags.writeable  # remembered per process, so shared by every caller


def test_cells_per_subscriber_is_remembered_while_the_file_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "SETTLED_NS", 0)  # the file is fresh: treat it as settled
    real, calls = bound._cells_per_subscriber, []
    monkeypatch.setattr(bound, "_cells_per_subscriber", lambda *args: calls.append(1) or real(*args))
    source = write(tmp_path / "source.parquet", [row(s(1), app="Gaming"), row(s(2), app="IM")])
    config = configs.parse_dp_config("dp_t", {"epsilon": 1.0, "max_cells_per_subscriber": "auto",
                                              "bound_epsilon": 0.1})
    book = DigestBook()
    first = bound.cells_per_subscriber(source, config, load_schema(), book)
    assert bound.cells_per_subscriber(source, config, load_schema(), book)[1] == first[1] == 2 and len(calls) == 1
    write(source, [row(s(1), app="Gaming")])
    assert bound.cells_per_subscriber(source, config, load_schema(), book)[1] == 1 and len(calls) == 2


def test_the_noisy_histogram_spends_its_epsilon_at_sensitivity_one():
    noisy, public = bound.noisy_histogram(np.array([0, 500, 300, 10]), 0.1)
    assert public["sensitivity_l1"] == 1 and public["opendp_epsilon"] <= 0.1 and noisy[0] == 0
    assert (noisy >= 0).all()


def test_auto_bound_configuration_is_parsed_and_its_slices_declared():
    config = configs.parse_dp_config("dp_a", {"epsilon": 1.0, "max_cells_per_subscriber": "auto",
                                              "bound_epsilon": 0.05, "slow_share_epsilon": 0.25, "q1_epsilon": 0.1})
    assert config.auto_bound and config.counts_epsilon == 0.75
    assert config.ledger_debits() == {"dp_a": 0.75, "dp_a.slow_5g": 0.25, "dp_a.q1": 0.1, "dp_a.bound": 0.05}
    assert config.total_epsilon == pytest.approx(1.15)
    with pytest.raises(ValueError, match="chosen per period"):
        config.sensitivity
    assert config.with_bound(8).sensitivity == 8
    with pytest.raises(configs.ConfigError, match="needs bound_epsilon"):
        configs.parse_dp_config("dp_a", {"epsilon": 1.0, "max_cells_per_subscriber": "auto"})
    with pytest.raises(configs.ConfigError, match="only for"):
        configs.parse_dp_config("dp_a", {"epsilon": 1.0, "max_cells_per_subscriber": 4, "bound_epsilon": 0.1})


def test_an_auto_bound_is_chosen_once_per_period_from_a_ledgered_dp_histogram(tmp_path):
    import datetime as dt

    from dsh_assets.core.dp.ledger import Ledger
    from dsh_assets.core.dp.publish import publish_dp_bound

    rows = [row(s(n), app=app) for n in range(1, 40) for app in ("Gaming", "IM")]
    source = write(tmp_path / "source.parquet", rows)
    config = configs.parse_dp_config("dp_a", {"epsilon": 1.0, "max_cells_per_subscriber": "auto",
                                              "bound_epsilon": 0.1})
    ledger = Ledger(tmp_path / "budget.sqlite", period_cap=2.0, year_cap=30.0)
    now = dt.datetime(2026, 11, 21, tzinfo=dt.timezone.utc)
    resolved, first = publish_dp_bound(source, tmp_path / "bound.parquet", config, load_schema(), ledger,
                                       "2026-11-20", now=now, counting=EmbeddedCounting(DigestBook()),
                                       book=DigestBook())
    assert resolved.max_cells_per_subscriber == first.metadata["chosen_bound"] in bound.CANDIDATES
    assert first.epsilon_spent == 0.1 and set(first.metadata["curve"]) == {str(b) for b in bound.CANDIDATES}
    again, second = publish_dp_bound(source, tmp_path / "bound.parquet", config, load_schema(), ledger,
                                     "2026-11-20", now=now, counting=EmbeddedCounting(DigestBook()),
                                     book=DigestBook())
    assert second.reused and second.epsilon_spent == 0.0 and again == resolved
    assert [(e["config"], e["epsilon"]) for e in ledger.entries()] == [("dp_a.bound", 0.1)]
