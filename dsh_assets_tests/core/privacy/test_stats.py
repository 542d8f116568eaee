"""Risk above a baseline and sampled rates, on numbers worked out by hand."""

import numpy as np
import pytest

from dsh_assets.core.privacy.stats import SampledRate, plain_values, risk


@pytest.mark.parametrize("success, baseline, expected", [
    (0.5, 0.0, 0.5),     # no baseline: the success rate itself
    (0.6, 0.2, 0.5),     # (0.6 - 0.2) / (1 - 0.2)
    (0.1, 0.2, 0.0),     # worse than chance: clipped to 0
    (0.9, 1.0, 0.0),     # a certain baseline leaves nothing to risk
])
def test_risk_is_success_above_the_baseline_over_what_the_baseline_leaves(success, baseline, expected):
    assert risk(success, baseline) == pytest.approx(expected)


def test_a_sampled_rate_with_its_baseline_and_interval():
    rate = SampledRate(successes=30, trials=100, baseline_successes=10, baseline_trials=100)
    assert (rate.rate, rate.baseline) == (0.3, 0.1)
    assert rate.risk == pytest.approx(0.2 / 0.9)
    low, high = rate.interval
    assert low < 0.3 < high and not rate.baseline_as_good_as_attack
    assert SampledRate(2, 100, 10, 100).baseline_as_good_as_attack  # the baseline is within the attack's interval
    assert SampledRate(0, 0, 0, 0).rate == 0.0 and SampledRate(0, 0, 0, 0).baseline == 0.0


def test_plain_values_turn_numpy_and_sequences_into_python():
    values = plain_values({"n": np.int64(3), "rate": np.float32(0.5), "ci95": (np.float64(0.1), 1), "name": "x"})
    assert values == {"n": 3, "rate": 0.5, "ci95": [0.1, 1.0], "name": "x"}
    assert type(values["n"]) is int and type(values["rate"]) is float
