import numpy as np
import pyarrow as pa
import pytest

from dsh_assets.core.release.noise import jitter, jitter_values, laplace_factors, noise_key, stream_words, uniforms

KEY = noise_key(b"seed", "c15", "2026-11-20", "dl_throughput_kbps")


def test_uniform_of_a_row_does_not_depend_on_which_rows_are_drawn_with_it():
    all_rows = uniforms(KEY, np.arange(0, 1000))
    for ids in (np.array([5]), np.array([3, 4, 5, 6]), np.array([997, 12, 500]), np.array([0, 2, 1, 3]),
                np.arange(401, 999)):
        assert np.array_equal(uniforms(KEY, ids), all_rows[ids])


def test_words_of_rows_far_apart_are_those_of_the_whole_stream():
    """Row ids spread thin are generated block by block; each gets its word of the one stream all the same,
    in whatever order they are asked for (ids on every place of a four-word block, and the last of the span)."""
    whole = stream_words(KEY, np.arange(0, 1_000_000))
    far_apart = np.array([999_999, 7, 4, 5, 6, 250_001, 500_002, 750_003, 4])
    assert len(far_apart) * 4096 < far_apart.max() - far_apart.min() + 1  # the path block by block
    assert np.array_equal(stream_words(KEY, far_apart), whole[far_apart])
    assert np.array_equal(stream_words(KEY, np.array([123_457])), whole[[123_457]])


def test_uniforms_lie_in_the_open_unit_interval():
    values = uniforms(KEY, np.arange(200_000))
    assert values.min() > 0.0 and values.max() < 1.0
    assert abs(values.mean() - 0.5) < 0.005


def test_streams_differ_by_seed_column_configuration_and_period():
    ids = np.arange(100)
    others = [noise_key(b"seed", "c15", "2026-11-20", "ul_throughput_kbps"),
              noise_key(b"other", "c15", "2026-11-20", "dl_throughput_kbps"),
              noise_key(b"seed", "c17", "2026-11-20", "dl_throughput_kbps"),
              noise_key(b"seed", "c15", "2026-11-21", "dl_throughput_kbps"),
              # length-prefixed parts: moving a character between configuration and period is another key
              noise_key(b"seed", "c152", "026-11-20", "dl_throughput_kbps")]
    for other in others:
        assert not np.array_equal(uniforms(KEY, ids), uniforms(other, ids))


def test_log_factors_are_laplace_with_the_configured_scale():
    logs = np.log(laplace_factors(KEY, np.arange(200_000), 0.05))
    assert abs(np.median(logs)) < 0.001
    assert np.mean(np.abs(logs)) == pytest.approx(0.05, rel=0.02)  # E|L| = scale for Laplace(0, scale)
    # The smallest uniform is 2**-54, so |log factor| <= scale * 53 * ln 2.
    assert np.max(np.abs(logs)) <= 0.05 * 53 * np.log(2) + 1e-12


def test_jitter_clips_to_zero_and_column_max_and_keeps_nulls():
    values = pa.array([0.0, 100.0, 100.0, None, 50.0] * 200, pa.float64())
    noisy = jitter(values, KEY, np.arange(len(values)), 0.5, clip_max=100.0)
    assert noisy.null_count == 200 and noisy.is_null().to_pylist() == values.is_null().to_pylist()
    finite = np.array(noisy.drop_null().to_pylist())
    assert finite.min() >= 0.0 and finite.max() <= 100.0
    as_list = noisy.to_pylist()
    assert all(v == 0.0 for v in as_list[0::5])  # zero times any factor stays zero
    assert any(v == 100.0 for v in as_list[1::5]) and any(v < 100.0 for v in as_list[1::5])  # clipped, jittered


def test_jitter_of_a_sliced_column_matches_the_whole():
    values = pa.array([float(i) for i in range(50)])
    whole = jitter(values, KEY, np.arange(50), 0.1, 1000.0).to_pylist()
    assert jitter(values.slice(10, 20), KEY, np.arange(10, 30), 0.1, 1000.0).to_pylist() == whole[10:30]


def test_factors_are_the_two_branch_inverse_cdf_bit_for_bit():
    ids = np.arange(100_000)
    u = uniforms(KEY, ids)
    expected = np.where(u < 0.5, 0.05 * np.log(2.0 * u), -0.05 * np.log(2.0 - 2.0 * u))
    assert np.array_equal(laplace_factors(KEY, ids, 0.05), np.exp(expected))


def test_empty_batch():
    assert len(uniforms(KEY, np.array([], dtype=np.int64))) == 0


def test_a_value_stage_is_jittered_as_the_row_transform_jitters_its_positions():
    # more positions than one chunk of jitter_values holds: each chunk's factors are those of its own positions
    rng = np.random.default_rng(5)
    values = rng.lognormal(3, 1, 150_000)
    values[::9] = np.nan
    values[::13] = 0.0
    key = noise_key(b"s" * 32, "cfg", "2026-11-02", "latency")
    column = pa.array(values, mask=np.isnan(values))
    expected = jitter(column, key, np.arange(len(values), dtype=np.int64), 0.3, 200.0)
    staged = jitter_values(values, key, 0.3, 200.0)
    assert np.array_equal(staged, expected.fill_null(np.nan).to_numpy(), equal_nan=True)
    assert np.array_equal(np.isnan(staged), np.isnan(values)) and np.nanmax(staged) <= 200.0
    in_place = values.copy()
    jitter_values(in_place, key, 0.3, 200.0, out=in_place)
    assert np.array_equal(in_place, staged, equal_nan=True)
