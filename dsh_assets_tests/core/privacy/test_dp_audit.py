"""The DP release's privacy audit: a lower bound on epsilon that a correct mechanism passes and a broken one fails."""

import math

import numpy as np
import pytest

from dsh_assets.core.dp import mechanism
from dsh_assets.core.dp.publish import bounded_cell_counts
from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy import dp_audit
from dsh_assets.core.release import configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.secrets import Secrets
from dsh_assets_tests.tables import row, s, write

SECRETS = Secrets(b"test-seed", b"test-key", "test")
APPS = ("Gaming", "Streaming", "IM", "VPN", "Music", "Email", "Maps", "News", "Banking", "Chat")
BOUND, EPSILON = 4, 0.75
DRAWS = 200_000


def dp_config(bound=BOUND, epsilon=1.0):
    return configs.parse_dp_config("dp_test", {"epsilon": epsilon, "max_cells_per_subscriber": bound,
                                               "slow_share_epsilon": 0.25})


@pytest.fixture
def source(tmp_path):
    """Subscriber 1 in all ten apps' cells; 2..7 in three of them each, 10..15 in Gaming and Streaming; 8, 9 elsewhere."""
    rows = [row(s(1), app=app) for app in APPS] + [row(s(1), app=APPS[0])]
    for n in range(2, 8):
        rows += [row(s(n), app=app) for app in APPS[n - 2:n + 1]]
    rows += [row(s(n), app=app) for n in range(10, 16) for app in APPS[:2]]
    rows += [row(s(8), province="Pirkanmaa"), row(s(9), province="Lappi", app="IM")]
    return write(tmp_path / "source.parquet", rows)


# -- the audit on hand-made neighbours ----------------------------------------------------------

WITH = np.array([7, 3, 12, 0, 5, 9])
WITHOUT = np.array([6, 2, 11, 0, 4, 9])  # the target in four cells (the bound), -1 in each


def test_a_correct_mechanism_passes_and_the_bound_is_close_to_the_claim():
    scale = mechanism.laplace_scale(BOUND, EPSILON)
    result = dp_audit.audit(WITH, WITHOUT, dp_audit.dp_counts_release(scale), EPSILON, DRAWS, seed=3)
    assert result.target_cells == 4 and result.draws == DRAWS // 2
    assert result.ok and result.epsilon_lower <= EPSILON
    # the likelihood-ratio tests "K >= 4" and "K >= 1" (its mirror: K = 0 says absent) have exactly epsilon;
    # the Clopper-Pearson bounds at 100,000 draws cost under a tenth
    assert result.epsilon_lower > EPSILON - 0.1 and result.threshold in (1, 4)
    low, high = result.epsilon_lower_ci
    assert low == result.epsilon_lower <= result.epsilon_point <= high


def test_a_quarter_of_the_scale_is_caught():
    scale = mechanism.laplace_scale(BOUND, EPSILON) / 4
    result = dp_audit.audit(WITH, WITHOUT, dp_audit.dp_counts_release(scale), EPSILON, DRAWS, seed=4)
    assert not result.ok and result.epsilon_lower > EPSILON


def test_the_bound_switched_off_is_caught():
    """The target in ten cells, noise calibrated for four: the true epsilon is 10/4 of the claim."""
    with_target = np.array([5] * 10 + [3])
    without_target = np.array([4] * 10 + [3])
    scale = mechanism.laplace_scale(BOUND, EPSILON)
    result = dp_audit.audit(with_target, without_target, dp_audit.dp_counts_release(scale), EPSILON, DRAWS, seed=5)
    assert result.target_cells == 10 and not result.ok and result.epsilon_lower > EPSILON


def test_differencing_an_unnoised_k_suppressed_table_tells_presence():
    result = dp_audit.audit(WITH, WITHOUT, dp_audit.k_suppressed_release(5), EPSILON, DRAWS, seed=6)
    assert result.false_positive_rate == 0.0 and result.false_negative_rate == 0.0
    # zero errors in n draws: CP upper 1 - 0.025^(1/n), so the bound is about log(n / 3.7)
    assert result.epsilon_lower == pytest.approx(math.log(DRAWS // 2 / 3.689), abs=0.01)
    assert not result.ok


def test_k_suppression_hides_only_a_target_whose_cells_are_all_below_k():
    with pytest.raises(ValueError, match="nothing to tell apart"):
        dp_audit.audit(WITH, WITH, dp_audit.k_suppressed_release(5), EPSILON, 100)
    hidden = dp_audit.audit(np.array([3, 2]), np.array([2, 1]), dp_audit.k_suppressed_release(5), EPSILON, 1_000)
    assert hidden.epsilon_lower == 0.0 and hidden.ok


def test_the_audit_is_deterministic_from_its_seed():
    release = dp_audit.dp_counts_release(2.0)
    first, second = (dp_audit.audit(WITH, WITHOUT, release, 1.0, 10_000, seed=9) for _ in range(2))
    assert first == second


# -- neighbours from a source: the release's own bounding, with and without the target ---------------

def test_the_target_is_the_subscriber_with_most_cells_and_reaches_the_bound(source, tmp_path):
    pair = dp_audit.neighbours(source, dp_config(), load_schema(), SECRETS, tmp_path)
    assert pair.target_cells_in_source == 10
    assert (pair.bounded_with - pair.bounded_without).tolist() == [1] * BOUND
    assert (pair.unbounded_with - pair.unbounded_without).tolist() == [1] * 10  # bound off: all ten cells
    assert not list(tmp_path.glob("audit_*.parquet"))


def test_the_restricted_neighbours_equal_the_full_recomputation(source, tmp_path):
    """Counting only the subscribers who share a cell with the target gives the target's cells exactly."""
    schema, config = load_schema(), dp_config()
    pair = dp_audit.neighbours(source, config, schema, SECRETS, tmp_path)
    import duckdb
    without = tmp_path / "without.parquet"
    duckdb.execute(f"COPY (SELECT * FROM read_parquet('{source}') WHERE \"{schema.subscriber}\" <> '{s(1)}') "
                   f"TO '{without}' (FORMAT parquet)")
    full_with = bounded_cell_counts(source, config, schema, SECRETS, book=DigestBook())
    domain = {role: full_with.cells.column(i).unique().to_pylist() for i, role in enumerate(("time", "province",
                                                                                             "app", "radio"))}
    full_without = bounded_cell_counts(without, config, schema, SECRETS, public_domain=domain, book=DigestBook())
    full_diff = full_with.counts - full_without.counts
    assert sorted(full_with.counts[full_diff != 0].tolist()) == sorted(pair.bounded_with.tolist())
    assert sorted(full_without.counts[full_diff != 0].tolist()) == sorted(pair.bounded_without.tolist())
    assert full_diff.sum() == BOUND and (full_diff >= 0).all()


def test_audit_configuration_passes_the_release_and_fails_the_broken_ones(source, tmp_path):
    result = dp_audit.audit_configuration(source, dp_config(), load_schema(), SECRETS, tmp_path, draws=100_000)
    assert result.published.ok and result.published.epsilon_claimed == 0.75
    assert all(r.ok for r in result.grid) and [r.epsilon_claimed for r in result.grid] == [0.5, 1.0, 2.0]
    assert not result.quarter_scale.ok and not result.bound_off.ok and not result.k_suppressed.ok
    figures = result.figures()["audit"]
    assert set(figures) == {"epsilon_claimed", "epsilon_lower", "epsilon_lower_ci", "draws", "target_cells", "ok"}
    assert "358400" not in repr(result.metadata())  # no identifier in what is recorded
