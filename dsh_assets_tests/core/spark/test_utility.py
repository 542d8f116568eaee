"""The utility metrics on Spark against the embedded engine: the same quality groups and Elina's answers, exactly."""

import pandas as pd
import pytest

from dsh_assets.core.files import DigestBook
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.transform import release
from dsh_assets.core.spark.utility import SparkAggregations
from dsh_assets.core.utility import elina, quality_groups
from dsh_assets.core.utility.dp_answers import AS_IS
from dsh_assets.core.utility.pair_correlation import all_pairs, group_correlations
from dsh_assets.core.utility.quality_groups import LOW, Measure, aggregations_or_embedded
from dsh_assets_tests.core.spark.test_release import CONFIGS, SCHEMA, SECRETS, edge_rows
from dsh_assets_tests.spark import on_both_engines
from dsh_assets_tests.tables import RELEASE_PERIOD, row, write

pytestmark = pytest.mark.spark

EVERY_CELL = 1
"""min_records for the edge source, whose cells hold a few rows: every cell with a valid record is evaluated."""
MEASURES = (Measure(SCHEMA.download, LOW), Measure(SCHEMA.latency, "high"))


def _cells(aggregations, path, only_radio=None):
    thresholds = aggregations.tail_thresholds(path, MEASURES)
    return thresholds, aggregations.cell_statistics(path, SCHEMA.app, SCHEMA.radio, MEASURES, thresholds,
                                                    only_radio=only_radio)


def _embedded(function, *args, **kwargs):
    with aggregations_or_embedded(None) as embedded:
        return function(embedded, *args, **kwargs)


def test_even_count_median_and_a_group_of_nulls_by_hand(spark, tmp_path):
    """Four values 1, 2, 3, 10: median 2.5 (interpolated), p10 1.3, p90 7.9; a group whose latencies are all null
    has n = 0, no quantiles and a tail count of 0, on both engines; the station medians likewise."""
    rows = [row(f"35840000000{i}", app="Gaming", radio="5G", station=7, value=v) for i, v in enumerate((3, 1, 10, 2))]
    rows += [row(f"35850000000{i}", app="IM", radio="4G", station=8, value=5.0, radio_latency_ms=None)
             for i in range(3)]
    path = write(tmp_path / "hand.parquet", rows)
    thresholds, on_spark = _cells(SparkAggregations(spark), path)
    assert (thresholds, on_spark) == _embedded(_cells, path)
    gaming = on_spark.get("Gaming", "5G", SCHEMA.latency)
    assert gaming["n"] == 4 and gaming["p50"] == 2.5
    assert gaming["p10"] == pytest.approx(1.3) and gaming["p90"] == pytest.approx(7.9)
    assert on_spark.get("IM", "4G", SCHEMA.latency) == {"n": 0, "p10": None, "p50": None, "p90": None, "tail": 0}
    assert on_spark.total_rows == 7
    stations, overall = SparkAggregations(spark).station_statistics(path, SCHEMA.station, SCHEMA.latency)
    embedded_stations, embedded_overall = _embedded(lambda a: a.station_statistics(path, SCHEMA.station,
                                                                                   SCHEMA.latency))
    pd.testing.assert_frame_equal(stations, embedded_stations.sort_values("station").reset_index(drop=True),
                                  check_exact=True)
    assert overall == embedded_overall == 2.5
    assert stations["median_latency"].isna().tolist() == [False, True]


@pytest.fixture(scope="module")
def edge_releases(tmp_path_factory):
    """The edge source (exactly k and k - 1 rows, null measurements, a lone row) and its release per row-level
    configuration (both stored by the embedded engine, whose files the Spark ones equal: test_release)."""
    directory = tmp_path_factory.mktemp("spark_utility_edge")
    source = directory / "source.parquet"
    summary = ingest_source(write(directory / "raw.parquet", edge_rows()), source, SCHEMA, book=DigestBook())
    released = {}
    for config_id, config in CONFIGS.items():
        released[config_id] = directory / f"{config_id}.parquet"
        release(source, released[config_id], config, SCHEMA, SECRETS, summary.apps, period=RELEASE_PERIOD,
                book=DigestBook())
    return source, released


def _quality(source, released, config):
    """The quality groups of a release on an engine, over its aggregations."""

    def compute(engine):
        with engine.aggregations() as passes:
            return quality_groups.evaluate(source, released, config, SCHEMA, min_records=EVERY_CELL,
                                           aggregations=passes)

    return compute


@pytest.mark.parametrize("config_id", sorted(CONFIGS))
def test_quality_groups_and_answers_on_spark_equal_the_embedded_ones_on_edge_cells(spark, edge_releases, config_id):
    """Every statistic, cell and figure; then Elina's answers from those cell statistics (reused, as the benchmark
    does) and each engine's station pass."""
    source, released = edge_releases
    config = CONFIGS[config_id]
    embedded, on_spark = on_both_engines(spark, _quality(source, released[config_id], config))
    assert (on_spark.source_stats, on_spark.release_stats) == (embedded.source_stats, embedded.release_stats)
    assert on_spark.cells == embedded.cells and on_spark.metadata() == embedded.metadata()
    assert embedded.cells, "the edge source has quality groups to compare"
    answers = [elina.answer(source, released[config_id], config, SCHEMA, min_records=EVERY_CELL, quality=quality,
                            aggregations=aggregations)
               for quality, aggregations in ((on_spark, SparkAggregations(spark)), (embedded, None))]
    assert answers[0] == answers[1]


def test_elina_answers_on_spark_equal_the_embedded_ones_on_edge_cells(spark, edge_releases):
    """Through each engine's aggregations, on Elina's own passes (the 5G cells of both files, the stations), where
    the release keeps every column."""
    source, released = edge_releases

    def answers(engine):
        with engine.aggregations() as passes:
            return elina.answer(source, released["id_removal"], CONFIGS["id_removal"], SCHEMA,
                                min_records=EVERY_CELL, aggregations=passes)

    embedded, on_spark = on_both_engines(spark, answers)
    assert on_spark == embedded
    assert on_spark.q2_release and on_spark.q3_release["stations_with_rows"] > 0


def test_single_row_period_figures_on_spark_equal_the_embedded_ones(spark, tmp_path):
    path = write(tmp_path / "one.parquet", [row()])
    assert _cells(SparkAggregations(spark), path) == _embedded(_cells, path)
    spark_answers = elina.answer(path, path, AS_IS, SCHEMA, aggregations=SparkAggregations(spark))
    assert spark_answers == elina.answer(path, path, AS_IS, SCHEMA)


def test_base_answers_on_spark_equal_the_embedded_ones_on_the_small_source(spark, source_file):
    """The 30,000-row synthetic source: Q1 medians, the Q2 ranking and Q3's stations, all exact."""
    on_spark = SparkAggregations(spark)
    spark_answers = elina.answer(source_file, source_file, AS_IS, SCHEMA, aggregations=on_spark)
    embedded_answers = elina.answer(source_file, source_file, AS_IS, SCHEMA)
    assert spark_answers == embedded_answers
    assert embedded_answers.q3_base["stations"], "the synthetic source plants overloaded stations"
    ranking = elina.base_q2_ranking(source_file, SCHEMA, aggregations=on_spark)
    assert ranking == elina.base_q2_ranking(source_file, SCHEMA) and len(ranking) > elina.TOP


def test_rank_correlations_on_spark_equal_the_embedded_ones_on_the_small_source(spark, source_file):
    """Every pair of measurements in every (app, radio) group of at least 100 rows: each group's rows ranked in one
    executor task give the embedded figures' bytes, whatever order Spark hands them over in."""
    pairs = all_pairs(SCHEMA.measurements)
    on_spark = SparkAggregations(spark).group_correlations(source_file, SCHEMA.app, SCHEMA.radio, pairs,
                                                           min_rows=100)
    embedded = group_correlations(source_file, SCHEMA.app, SCHEMA.radio, pairs, min_rows=100)
    assert embedded and list(on_spark) == list(embedded)
    for group, figures in embedded.items():
        assert on_spark[group].rows == figures.rows and on_spark[group].complete == figures.complete
        assert repr(on_spark[group].rho) == repr(figures.rho)  # NaN equals NaN in its repr
