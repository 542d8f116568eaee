import numpy as np
import pytest

from dsh_assets.core.noise import column_key, jitter, laplace_factors, uniforms

KEY = column_key(b"seed", "dl_throughput_kbps")


def test_uniform_of_a_row_does_not_depend_on_which_rows_are_drawn_with_it():
    all_rows = uniforms(KEY, np.arange(0, 1000))
    for ids in (np.array([5]), np.array([3, 4, 5, 6]), np.array([997, 12, 500]), np.arange(401, 999)):
        assert np.array_equal(uniforms(KEY, ids), all_rows[ids])


def test_uniforms_lie_in_the_open_unit_interval():
    values = uniforms(KEY, np.arange(200_000))
    assert values.min() > 0.0 and values.max() < 1.0
    assert abs(values.mean() - 0.5) < 0.005


def test_streams_differ_by_seed_and_by_column():
    ids = np.arange(100)
    other_column = column_key(b"seed", "ul_throughput_kbps")
    other_seed = column_key(b"other", "dl_throughput_kbps")
    assert not np.array_equal(uniforms(KEY, ids), uniforms(other_column, ids))
    assert not np.array_equal(uniforms(KEY, ids), uniforms(other_seed, ids))


def test_log_factors_are_laplace_with_the_configured_scale():
    logs = np.log(laplace_factors(KEY, np.arange(200_000), 0.05))
    assert abs(np.median(logs)) < 0.001
    assert np.mean(np.abs(logs)) == pytest.approx(0.05, rel=0.02)  # E|L| = scale for Laplace(0, scale)
    # The smallest uniform is 2**-54, so |log factor| <= scale * 53 * ln 2.
    assert np.max(np.abs(logs)) <= 0.05 * 53 * np.log(2) + 1e-12


def test_jitter_clips_to_zero_and_column_max_and_keeps_nulls():
    values = np.array([0.0, 100.0, 100.0, np.nan, 50.0] * 200)
    noisy = jitter(values.copy(), KEY, np.arange(len(values)), 0.5, clip_max=100.0)
    assert np.isnan(noisy[3::5]).all()
    finite = noisy[~np.isnan(noisy)]
    assert finite.min() >= 0.0 and finite.max() <= 100.0
    assert (noisy[0::5] == 0.0).all()  # zero times any factor stays zero
    assert (noisy[1::5] == 100.0).any() and (noisy[1::5] < 100.0).any()  # clipped above, jittered below


def test_empty_batch():
    assert len(uniforms(KEY, np.array([], dtype=np.int64))) == 0
