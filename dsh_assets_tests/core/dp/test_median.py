"""Q1 from the DP release: bounded latency vectors, OpenDP's private median, its lab, and publication once."""

import datetime as dt

import numpy as np
import pytest

from dsh_assets.core.dp import median
from dsh_assets.core.dp.ledger import Ledger
from dsh_assets.core.files import DigestBook
from dsh_assets.core.release import configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.secrets import Secrets
from dsh_assets_tests.tables import row, s, write

SECRETS = Secrets(b"test-seed", b"test-key", "test")
NOW = dt.datetime(2026, 11, 21, tzinfo=dt.timezone.utc)


@pytest.fixture
def source(tmp_path):
    """Gaming 5G rows at 100-139 ms, Streaming at 60-99 ms; subscriber 1 has three Gaming rows; a 4G row."""
    rows = [row(s(n), app="Gaming", radio_latency_ms=100.0 + n) for n in range(40)]
    rows += [row(s(1), app="Gaming", radio_latency_ms=500.0), row(s(1), app="Gaming", radio_latency_ms=501.0)]
    rows += [row(s(n), app="Streaming", radio_latency_ms=60.0 + n) for n in range(40)]
    rows += [row(s(90), app="Gaming", radio="4G", radio_latency_ms=900.0)]
    path = tmp_path / "source.parquet"
    ingest_source(write(tmp_path / "raw.parquet", rows), path, load_schema(), book=DigestBook())
    return path


def test_each_subscriber_contributes_at_most_max_rows_per_app(source):
    values = median.latency_values(source, load_schema(), SECRETS, max_rows=1)
    assert len(values["Gaming"]) == 40 and len(values["Streaming"]) == 40  # not 42: one row of subscriber 1
    assert 900.0 not in values["Gaming"]  # 4G is not 5G
    both = median.latency_values(source, load_schema(), SECRETS, max_rows=3)
    assert len(both["Gaming"]) == 42


def test_the_scale_is_certified_by_opendp():
    for epsilon, rows in ((0.05, 1), (0.5, 2), (1 / 3, 1)):
        scale = median.median_scale(epsilon, rows)
        assert scale == pytest.approx(rows / epsilon, rel=1e-12)
        assert median._measurement(scale).map(rows) <= epsilon


def test_the_stated_accuracy_is_the_union_bound_in_opendps_score_units():
    assert median.score_denominator() == 2  # the median's alpha = 1/2; OpenDP's noise is scale x 2 on scores
    assert median.scores([0.5]).tolist()[:2] == [1.0, 1.0]  # |2 x 0 - 1| below the value, |2 x 1 - 1| above
    assert median.stated_score_accuracy(20.0) == pytest.approx(2 * 20.0 * np.log(1000 / 0.05))


def test_the_median_lab_passes_opendp_and_fails_a_mechanism_that_ignores_the_data():
    rng = np.random.default_rng(1)
    values = {"Gaming": rng.gamma(6, 20, 3_000), "Streaming": rng.gamma(4, 18, 3_000)}
    lab = median.median_lab(values, 0.5, draws=60, base_focus="Gaming")
    assert lab.passed and all(r.coverage_ci[1] >= 0.95 for r in lab.rows)
    assert lab.same_answer_rate == 1.0 and lab.same_answer_draws == 20
    assert all(r.mean_abs_error_ms < 3 for r in lab.rows)

    def anywhere(values, epsilon, max_rows):
        return float(rng.integers(0, 1001))
    broken = median.median_lab(values, 0.5, draws=60, base_focus="Gaming", mechanism=anywhere)
    assert not broken.passed and broken.same_answer_rate < 1.0


def test_q1_is_published_once_through_the_ledger(source, tmp_path):
    config = configs.parse_dp_config("dp_q", {"epsilon": 1.0, "max_cells_per_subscriber": 4, "q1_epsilon": 0.5})
    ledger = Ledger(tmp_path / "budget.sqlite", period_cap=2.0, year_cap=30.0)
    out = tmp_path / "q1.parquet"
    first = median.publish_dp_q1(source, out, config, load_schema(), SECRETS, ledger, "2026-11-20", now=NOW,
                                 book=DigestBook())
    assert first.epsilon_spent == 0.5 and first.metadata["epsilon_per_median"] == 0.25
    assert first.metadata["focus"] in ("Gaming", "Streaming", "tie")
    again = median.publish_dp_q1(source, out, config, load_schema(), SECRETS, ledger, "2026-11-20", now=NOW,
                                 book=DigestBook())
    assert again.reused and again.sha256 == first.sha256 and again.epsilon_spent == 0.0
    assert [(e["config"], e["epsilon"]) for e in ledger.entries()] == [("dp_q.q1", 0.5)]
    no_q1 = configs.parse_dp_config("dp_n", {"epsilon": 1.0, "max_cells_per_subscriber": 4})
    with pytest.raises(configs.ConfigError, match="q1_epsilon is 0"):
        median.publish_dp_q1(source, out, no_q1, load_schema(), SECRETS, ledger, "2026-11-20", now=NOW,
                             book=DigestBook())
