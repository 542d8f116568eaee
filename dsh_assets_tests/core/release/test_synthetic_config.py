"""A DP synthetic configuration: its declared bins and its refusals."""

import math

import numpy as np
import pytest

from dsh_assets.core.release.synthetic_config import MeasurementBins, parse_dp_synthetic_config


def test_bins_code_and_release_values_on_the_declared_grid():
    bins = MeasurementBins(low=1.0, high=100.0, per_decade=1)  # [0, 1), [1, 10), [10, 100 and above)
    assert list(bins.edges) == [0.0, 1.0, 10.0]
    assert bins.size == 4
    codes = bins.codes(np.array([np.nan, 0.0, 0.5, 1.0, 9.99, 10.0, 1e6]))
    assert list(codes) == [0, 1, 1, 2, 2, 3, 3]
    codes = np.array([0, 1, 2, 3, 2, 3])
    values = bins.values(codes, np.array([0.5, 0.5, 0.5, 0.5, 0.0, 0.999999]))
    assert math.isnan(values[0])
    # at u = 0.5 a bin's geometric midpoint; at 0 its lower edge; near 1 its upper edge (the top bin: one step)
    assert list(values[1:]) == pytest.approx([0.0, math.sqrt(10.0), math.sqrt(10.0 * 100.0), 1.0, 100.0], rel=1e-5)


def test_a_count_keeps_its_small_integers():
    bins = MeasurementBins(low=1.0, high=100.0, per_decade=1, count=True)  # 0 .. 9, then [10, 100 and above)
    assert list(bins.edges) == [*range(10), 10.0]
    codes = bins.codes(np.array([0.0, 3.0, 9.0, 50.0]))
    # the integers as they are whatever the uniform; above, floored within the bin: 10 * 10^0.5 = 31.6 at 0.5
    assert list(bins.values(codes, np.full(4, 0.5))) == [0.0, 3.0, 9.0, 31.0]


def test_a_negative_measurement_is_refused():
    with pytest.raises(ValueError, match="below 0"):
        MeasurementBins(1.0, 10.0, 1).codes(np.array([-1.0]))


@pytest.mark.parametrize("fields, message", [
    ({}, "epsilon is required"),
    ({"epsilon": 0}, "epsilon must be"),
    ({"epsilon": 1, "delta": 1.5}, "delta must be below 1"),
    ({"epsilon": 1, "max_rows_per_subscriber": 0}, "max_rows_per_subscriber"),
    ({"epsilon": 1, "selection_share": 1}, "selection_share"),
    ({"epsilon": 1, "bins": {"low": 10, "high": 1}}, "low < high"),
    ({"epsilon": 1, "measurement_bins": {"cqi": {"step": 1}}}, "unknown fields"),
    ({"epsilon": 1, "time_coarsen": "window"}, "hour"),
    ({"epsilon": 1, "noise_scale": 0.1}, "unknown fields"),
])
def test_a_malformed_configuration_is_refused_by_name(fields, message):
    with pytest.raises(ValueError, match=message):
        parse_dp_synthetic_config("synthetic_test", fields)


def test_bins_default_and_per_measurement():
    config = parse_dp_synthetic_config("synthetic_test", {
        "epsilon": 1, "bins": {"per_decade": 10},
        "measurement_bins": {"cqi": {"low": 0.1, "high": 20}, "video_stall_count": {"low": 1, "high": 100,
                                                                                     "count": True}}})
    assert config.bins_of("dl_throughput_kbps") == MeasurementBins(0.001, 1e9, 10)
    assert config.bins_of("cqi") == MeasurementBins(0.1, 20.0, 10)
    assert config.bins_of("video_stall_count").count
    assert config.ledger_debits() == {"synthetic_test": 1.0}
