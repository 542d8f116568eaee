"""The DP synthetic table: declared bins, the accounting, the keyed bound, and the mechanism end to end."""

import math

import numpy as np
import pyarrow as pa
import pytest

from dsh_assets.core.dp import synthetic
from dsh_assets.core.dp.synthetic import bounded_rows, delta_of, epsilon_of, rho_of, synthesize
from dsh_assets.core.files import DigestBook
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.synthetic_config import parse_dp_synthetic_config
from dsh_assets.core.secrets import Secrets
from dsh_assets_tests.tables import row, s, write

SECRETS = Secrets(b"test-seed", b"test-key", "test")


def test_rho_and_epsilon_convert_both_ways_as_opendp_does():
    import opendp.prelude as dp

    dp.enable_features("contrib")
    rho = rho_of(1.0, 1e-9)
    assert delta_of(rho, 1.0) <= 1e-9 < delta_of(rho * 1.01, 1.0)
    assert epsilon_of(rho, 1e-9) == pytest.approx(1.0, rel=1e-9)
    gaussian = dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float),
                                  scale=1 / math.sqrt(2 * rho))
    converted = dp.c.make_zCDP_to_approxDP(gaussian).map(1.0).epsilon(1e-9)
    assert converted == pytest.approx(1.0, rel=1e-6)


def test_the_bound_keeps_at_most_that_many_rows_of_a_subscriber_by_a_keyed_hash(tmp_path):
    schema = load_schema()
    rows = [row(s(1), minute=m, value=float(m + 1)) for m in range(5)] + [row(s(2), minute=7, value=100.0)]
    source = tmp_path / "source.parquet"
    ingest_source(write(tmp_path / "raw.parquet", rows), source, schema, book=DigestBook())
    kept = bounded_rows(source, schema, list(schema.measurements), 2, SECRETS)
    assert kept.num_rows == 3  # two of the first subscriber's five, the second's one
    assert 100.0 in kept.column(schema.download).to_pylist()
    again = bounded_rows(source, schema, list(schema.measurements), 2, SECRETS)
    assert again.equals(kept)
    others = [bounded_rows(source, schema, list(schema.measurements), 2, Secrets(bytes([i]), b"k", "test"))
              for i in range(8)]
    assert len({tuple(t.column(schema.download).to_pylist()) for t in others}) > 1  # the key decides
    assert schema.subscriber not in kept.column_names


def _config(epsilon, **bins):
    return parse_dp_synthetic_config("synthetic_test", {
        "epsilon": epsilon, "iterations": 300, "bins": {"low": 1.0, "high": 1e4, "per_decade": 2, **bins}})


def _measurements(schema):
    return [schema.download, schema.measurements[1], schema.latency]


def _rows(schema, n_per_group=400):
    """Two (app, radio) groups apart in every measurement: Gaming's all near 3, VPN's near 300; download and
    upload tied (the same value) in both; latency independent of them."""
    rng = np.random.default_rng(0)
    columns = {name: [] for name in (schema.time, schema.province, schema.app, schema.radio, *_measurements(schema))}
    for app, centre in (("Gaming", 3.0), ("VPN", 300.0)):
        for _ in range(n_per_group):
            value = centre * float(np.exp(rng.normal(0, 0.3)))
            columns[schema.time].append(0)
            columns[schema.province].append("Uusimaa")
            columns[schema.app].append(app)
            columns[schema.radio].append("5G")
            for m in _measurements(schema):
                columns[m].append(value if m != schema.latency else centre * float(np.exp(rng.normal(0, 0.3))))
    return pa.table({**{k: v for k, v in columns.items() if k != schema.time},
                     schema.time: pa.array(columns[schema.time], pa.int64()).cast(pa.timestamp("us", tz="UTC"))})


def test_a_near_exact_epsilon_gives_back_each_group_s_own_values_and_the_tie():
    schema = load_schema()
    measurements = _measurements(schema)
    result = synthesize(_rows(schema), schema, measurements, _config(1e5), seed=1)
    table = result.table
    assert abs(table.num_rows - 800) <= 2
    apps = np.array(table.column(schema.app).to_pylist())
    download = table.column(schema.download).to_numpy()
    upload = table.column(measurements[1]).to_numpy()
    assert set(apps) == {"Gaming", "VPN"}
    # the fit stops at 300 iterations, a little mass short of 0 on the empty cells: a few strays
    assert np.mean(download[apps == "Gaming"] < 10) > 0.98 and np.mean(download[apps == "VPN"] > 100) > 0.98
    bins = _config(1e5).bins_of(schema.download)
    assert np.mean(bins.codes(download) == bins.codes(upload)) > 0.95  # the tree's pair carries the tie (same bin)
    assert result.metadata["rho_spent"] <= result.metadata["rho"] * (1 + 1e-9)
    assert result.metadata["epsilon_at_delta"] == pytest.approx(1e5, rel=1e-6)


def test_at_a_small_epsilon_the_noise_is_on_the_marginals_at_the_scale_worked_out_by_hand():
    schema = load_schema()
    result = synthesize(_rows(schema), schema, _measurements(schema), _config(0.05), seed=1)
    marginals = 2 + 3 + 2  # (group, hour), (group, province), (group, m) for 3 measurements, 2 tree pairs
    rho = rho_of(0.05, 1e-9)
    assert result.metadata["marginal_scale"] == pytest.approx(1 / math.sqrt(2 * 0.9 * rho / marginals))
    assert result.metadata["marginal_scale"] > 250  # ~ 300: the total of 800 rows is far from exact
    assert abs(result.table.num_rows - 800) > 2


def test_the_same_noisy_model_and_seed_give_the_same_rows_and_another_seed_others():
    schema = load_schema()
    spec, pair = _config(1e5), _measurements(schema)[:2]  # one tree: no tie for the noisy max to break
    first = synthesize(_rows(schema), schema, pair, spec, seed=1).table
    assert synthesize(_rows(schema), schema, pair, spec, seed=1).table.equals(first)
    assert not synthesize(_rows(schema), schema, pair, spec, seed=2).table.equals(first)


def test_the_sample_seed_is_keyed_by_the_noise_seed():
    assert synthetic.sample_seed(SECRETS, "c", "2026-12-01") != synthetic.sample_seed(
        Secrets(b"other", b"test-key", "test"), "c", "2026-12-01")
