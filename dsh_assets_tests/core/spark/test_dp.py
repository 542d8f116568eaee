"""The DP tables' counting on Spark against the embedded engine: the same bounded counts, histogram and Q2 counts,
and, fed the same noise, the same published table bytes."""

import datetime as dt
import hashlib
import itertools
import uuid

import numpy as np
import pyarrow.parquet as pq
import pytest

from dsh_assets.core import engines
from dsh_assets.core.dp import bound as bound_choice
from dsh_assets.core.dp import publish as dp
from dsh_assets.core.dp.ledger import Ledger
from dsh_assets.core.files import DigestBook
from dsh_assets.core.release import configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.release.synth import synthesize
from dsh_assets.core.spark import dp as spark_dp
from dsh_assets_tests.core.spark.test_release import SECRETS
from dsh_assets_tests.tables import RELEASE_PERIOD, T0, row, s, write

pytestmark = pytest.mark.spark

SCHEMA = load_schema()
BOUND = 3
APPS = ("Gaming", "Streaming", "IM", "VPN", "Music", "Email")
NOW = dt.datetime(2026, 11, 21, 0, 15, tzinfo=dt.timezone.utc)


def config(bound=BOUND, **extra) -> configs.DpCountsConfig:
    return configs.parse_dp_config("dp_spark", {"epsilon": 1.0, "max_cells_per_subscriber": bound, **extra})


def bounding_rows() -> list[dict]:
    """s(1) in 6 cells over two windows (over the bound, alone in four of them, so some cells empty after
    bounding), s(2) in exactly BOUND cells, s(3) in 1 cell with 2 rows, and 3G rows only s(4) has."""
    heavy = [row(s(1), 0 if i < 3 else 20, app=app) for i, app in enumerate(APPS)]
    at_bound = [row(s(2), 0, app=app) for app in APPS[:BOUND]]
    light = [row(s(3), 10, province="Lappi", app="IM", radio="4G", value=v) for v in (500.0, 2000.0)]
    other = [row(s(4), 30, province="Pirkanmaa", app="Maps", radio="3G")]
    return heavy + at_bound + light + other


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("spark_dp")
    synthetic = directory / "synthetic.parquet"
    synthesize(synthetic, rows=2000, subscribers=300, seed=11, period=dt.date(2026, 11, 20), schema=SCHEMA)
    return {"bounding": write(directory / "bounding.parquet", bounding_rows()),
            "single_row": write(directory / "single.parquet", [row()]),
            "synthetic": str(synthetic)}


def assert_same_counts(on_spark: dp.CellCounts, embedded: dp.CellCounts) -> None:
    assert on_spark.cells.equals(embedded.cells)
    assert on_spark.counts.dtype == embedded.counts.dtype == np.int64
    assert np.array_equal(on_spark.counts, embedded.counts)
    assert np.array_equal(on_spark.unbounded, embedded.unbounded)
    assert (on_spark.bound, on_spark.loss) == (embedded.bound, embedded.loss)


@pytest.mark.parametrize(("name", "time_coarsen"), [("bounding", "window"), ("single_row", "window"),
                                                   ("synthetic", "hour")])
def test_cell_counts_on_spark_equal_the_embedded_ones(spark, sources, name, time_coarsen):
    cfg = config(time_coarsen=time_coarsen)
    observed = spark_dp.bound_ranked_cells(spark, sources[name], cfg, SCHEMA, SECRETS)
    embedded = dp.bounded_cell_counts(sources[name], cfg, SCHEMA, SECRETS, book=DigestBook())
    assert_same_counts(dp.counts_over_domain(observed, BOUND, SCHEMA), embedded)
    domain = {"province": ["Uusimaa", "Lappi"], "radio": ["3G", "4G", "5G"]}
    assert_same_counts(dp.counts_over_domain(observed, BOUND, SCHEMA, domain),
                       dp.bounded_cell_counts(sources[name], cfg, SCHEMA, SECRETS, public_domain=domain,
                                              book=DigestBook()))
    if name == "bounding":  # the source has what the parity must cover
        assert embedded.loss["subscribers_over_bound"] == 1
        assert ((embedded.counts == 0) & (embedded.unbounded > 0)).any()  # cells emptied by the bound


def test_a_subscriber_over_the_bound_keeps_exactly_bound_cells_those_of_smallest_keyed_hash(spark, sources):
    counts = spark_dp.bounded_cell_counts(spark, sources["bounding"], config(), SCHEMA, SECRETS)
    n_of = {tuple(cell.values()): int(n) for cell, n in zip(counts.cells.to_pylist(), counts.counts)}
    heavy = [(T0 + dt.timedelta(minutes=0 if i < 3 else 20), "Uusimaa", app, "5G") for i, app in enumerate(APPS)]
    at_bound = set(heavy[:BOUND])  # s(2) is in these too, within the bound

    def keyed(cell):
        micros = str(int(cell[0].timestamp()) * 1_000_000)
        return hashlib.sha256("\x1f".join([dp.bound_key(SECRETS), s(1), micros, *cell[1:]]).encode()).hexdigest()

    kept = set(sorted(heavy, key=keyed)[:BOUND])
    assert [n_of[cell] for cell in heavy] == [(cell in kept) + (cell in at_bound) for cell in heavy]
    assert counts.loss["pairs_dropped_by_bound"] == len(APPS) - BOUND


@pytest.mark.parametrize("name", ["bounding", "synthetic"])
def test_cells_per_subscriber_on_spark_equal_the_embedded_histogram(spark, sources, name):
    cfg = configs.parse_dp_config("dp_auto", {"epsilon": 1.0, "max_cells_per_subscriber": "auto",
                                              "bound_epsilon": 0.1})
    histogram, cells = bound_choice.cells_per_subscriber(sources[name], cfg, SCHEMA, book=DigestBook())
    on_spark, spark_cells = spark_dp.cells_per_subscriber(spark, sources[name], cfg, SCHEMA)
    assert np.array_equal(on_spark, histogram) and spark_cells == cells
    curve = bound_choice.expected_total_error(histogram, cells, cfg.counts_epsilon)
    assert bound_choice.choose_bound(curve) == bound_choice.choose_bound(
        bound_choice.expected_total_error(on_spark, spark_cells, cfg.counts_epsilon))


@pytest.mark.parametrize(("name", "radio"), [("bounding", "4G"), ("synthetic", "5G")])
def test_slow_download_counts_on_spark_equal_the_embedded_ones(spark, sources, name, radio):
    embedded = dp.slow_download_counts(sources[name], SCHEMA, SECRETS, 1, 1000.0, radio)
    on_spark = spark_dp.slow_download_counts(spark, sources[name], SCHEMA, SECRETS, 1, 1000.0, radio)
    assert on_spark.apps == embedded.apps and on_spark.loss == embedded.loss
    assert np.array_equal(on_spark.slow, embedded.slow) and np.array_equal(on_spark.on_radio, embedded.on_radio)
    assert embedded.on_radio.sum() > 0


def _fixed_noise(counts, scale):
    """A stand-in for OpenDP's unseedable sampler: the same noise for the same vector on both engines."""
    return np.asarray(counts, dtype=np.int64) + np.random.default_rng(len(counts)).integers(-3, 4, len(counts))


def test_the_published_tables_are_the_same_bytes_when_both_engines_get_the_same_noise(spark, sources, tmp_path,
                                                                                     monkeypatch):
    monkeypatch.setattr(dp, "discrete_laplace", _fixed_noise)
    monkeypatch.setattr(dp.uuid, "uuid4", lambda: uuid.UUID(int=next(tokens)))  # the token is in the footer
    cfg = config(slow_share_epsilon=0.25)
    sessions = []
    published = {}
    for engine in engines.ENGINES:
        tokens = itertools.count(1)
        counting = engines.engine_for(engine, DigestBook(), lambda: sessions.append(spark) or spark).counting()
        ledger = Ledger(tmp_path / f"ledger_{engine}.sqlite", period_cap=10.0, year_cap=30.0)
        counts = dp.publish_dp_counts(sources["synthetic"], tmp_path / f"{engine}.parquet", cfg, SCHEMA, SECRETS,
                                      ledger, RELEASE_PERIOD, now=NOW, counting=counting, book=DigestBook())
        q2 = dp.publish_dp_slow_shares(sources["synthetic"], tmp_path / f"{engine}_q2.parquet", cfg, SCHEMA,
                                       SECRETS, ledger, RELEASE_PERIOD, now=NOW, counting=counting, book=DigestBook())
        published[engine] = counts, q2
    assert sessions == [spark, spark]  # the spark engine counted on Spark, the embedded one never asked
    (counts, q2), (spark_counts, spark_q2) = published[engines.EMBEDDED], published[engines.SPARK]
    assert pq.read_table(spark_counts.path).equals(pq.read_table(counts.path))
    assert (spark_counts.sha256, spark_q2.sha256) == (counts.sha256, q2.sha256)
    assert spark_counts.bounding == counts.bounding and spark_counts.metadata == counts.metadata
