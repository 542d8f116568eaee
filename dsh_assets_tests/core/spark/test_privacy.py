"""The exact attacks on Spark: the embedded engine's figures on every configuration, and figures worked out by
hand, the threshold compared exactly."""

import dataclasses

import pytest

from dsh_assets.core.privacy import inference, singling_out
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.spark import privacy as spark_privacy
from dsh_assets_tests.core.privacy.test_singling_out import hand_rows
from dsh_assets_tests.core.spark.test_release import CONFIGS, SCHEMA, SECRETS, edge_rows
from dsh_assets_tests.spark import on_both_engines
from dsh_assets_tests.tables import RELEASE_PERIOD, row, s, under_test

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def edge_attacked(tmp_path_factory) -> dict[str, ReleaseUnderTest]:
    """The edge source (exactly k and k - 1 rows, null measurements, a lone row) released by the embedded engine
    under each configuration, with its truth."""
    directory = tmp_path_factory.mktemp("spark_privacy_edge")
    return {config_id: under_test(directory, edge_rows(), config, name=config_id, secrets=SECRETS)
            for config_id, config in CONFIGS.items()}


@pytest.mark.parametrize("config_id", sorted(CONFIGS))
def test_singling_out_on_spark_equals_the_embedded_figures(spark, edge_attacked, config_id):
    attacked = edge_attacked[config_id]
    embedded, on_spark = on_both_engines(spark, lambda engine: engine.singling_out(attacked, SECRETS, RELEASE_PERIOD))
    assert embedded == singling_out.evaluate(attacked)
    assert on_spark.metadata() == embedded.metadata()
    # One subscriber per edge row: the truth joins by row id.
    assert on_spark.subscribers_released == attacked.plan.rows_released


@pytest.mark.parametrize("config_id", sorted(CONFIGS))
def test_inference_on_spark_equals_the_embedded_figures(spark, edge_attacked, config_id):
    attacked = edge_attacked[config_id]
    embedded, on_spark = on_both_engines(spark, lambda engine: engine.inference(attacked, SECRETS, RELEASE_PERIOD))
    assert embedded == inference.evaluate(attacked)
    assert on_spark == embedded and on_spark.metadata() == embedded.metadata()
    assert on_spark.rows_released == attacked.plan.rows_released
    # Microaggregation in groups of 10 withholds every edge cell (at most 5 rows): no row, so no class.
    assert (on_spark.classes > 0) == (attacked.plan.rows_released > 0)


def test_inference_of_a_single_row_period_on_spark_equals_the_embedded_figures(spark, tmp_path):
    # Released alone (k = 0), the row is its class: inferable. Withheld (k = 5), nothing is released; the
    # other k = 5 configurations withhold it the same way (their release parity: test_release's single-row test).
    for config_id in ("id_removal", "c15_window_k5_noise5"):
        config = CONFIGS[config_id]
        attacked = under_test(tmp_path, [row()], config, name=config_id, secrets=SECRETS)
        on_spark = spark_privacy.inference(spark, attacked.source_path, config, SCHEMA, SECRETS, RELEASE_PERIOD)
        assert on_spark == inference.evaluate(attacked)
        assert (on_spark.rows_released, on_spark.inferable_classes_of_one_row) == ((0, 0) if config.k else (1, 1))


def at_and_below_threshold() -> list[dict]:
    """Four classes (Uusimaa, 5G, station 101; one per minute), Gaming against IM:

    X (minute 0):  s1..s9 Gaming, s10 IM                        9/10 = 0.9 exactly
    Y (minute 10): s11..s18 Gaming, s19 IM                      8/9 = 0.889, just below 0.9
    Z (minute 20): s21..s31 Gaming, s32..s40 IM, 5 rows each    55/100 = 0.55 exactly (0.55 * 100 is
                                                                55.00000000000001 in floats)
    W (minute 30): s1..s6 Gaming (again), s41..s45 IM           6/11 = 0.545, just below 0.55
    """
    def rows(subscribers, minute, app, each=1):
        return [row(s(n), minute, app=app, value=float(i)) for n in subscribers for i in range(each)]

    return (rows(range(1, 10), 0, "Gaming") + rows([10], 0, "IM")
            + rows(range(11, 19), 10, "Gaming") + rows([19], 10, "IM")
            + rows(range(21, 32), 20, "Gaming", each=5) + rows(range(32, 41), 20, "IM", each=5)
            + rows(range(1, 7), 30, "Gaming") + rows(range(41, 46), 30, "IM"))


@pytest.fixture(scope="module")
def at_threshold(tmp_path_factory) -> ReleaseUnderTest:
    return under_test(tmp_path_factory.mktemp("at_threshold"), at_and_below_threshold(), CONFIGS["id_removal"],
                      secrets=SECRETS)


@pytest.mark.parametrize("threshold, inferable_classes, rows_in, rows_correct, subscribers", [
    (0.9, 1, 10, 9, 9),  # X only: s1..s9
    (0.55, 3, 119, 72, 28),  # X, Y and Z: s1..s9, s11..s18, s21..s31 (s1..s6 also have W's Gaming rows)
])
def test_inference_on_spark_compares_the_threshold_exactly_as_embedded(spark, at_threshold, threshold,
                                                                      inferable_classes, rows_in, rows_correct,
                                                                      subscribers):
    embedded = inference.evaluate(at_threshold, threshold=threshold)
    assert (embedded.classes, embedded.inferable_classes, embedded.rows_in_inferable_classes,
            embedded.rows_correctly_inferable, embedded.subscribers_inferable) == (
        4, inferable_classes, rows_in, rows_correct, subscribers)
    assert (embedded.rows_released, embedded.subscribers_released) == (130, 44)
    on_spark = spark_privacy.inference(spark, at_threshold.source_path, at_threshold.config, SCHEMA, SECRETS,
                                       RELEASE_PERIOD, threshold=threshold)
    assert on_spark == embedded and on_spark.metadata() == embedded.metadata()


def test_inference_on_spark_infers_nothing_where_the_app_is_not_released(spark, tmp_path):
    no_app = dataclasses.replace(CONFIGS["id_removal"], drop_fields=("identifiers", SCHEMA.app))
    attacked = under_test(tmp_path, at_and_below_threshold(), no_app, secrets=SECRETS)
    on_spark = spark_privacy.inference(spark, attacked.source_path, no_app, SCHEMA, SECRETS, RELEASE_PERIOD)
    assert on_spark == inference.evaluate(attacked)
    assert (on_spark.app_released, on_spark.rate, on_spark.subscribers_released) == (False, 0.0, 44)


def test_singling_out_on_spark_by_hand(spark, tmp_path):
    """test_singling_out's six cells: A and B (both s1) and F (s10) hold one row each; with k = 5 only E and F,
    one cell of 7 rows once the station is dropped, are released."""
    id_removal = under_test(tmp_path, hand_rows(), CONFIGS["id_removal"], name="id_removal", secrets=SECRETS)
    on_spark = spark_privacy.singling_out(spark, id_removal.source_path, id_removal.config, SCHEMA, SECRETS,
                                          RELEASE_PERIOD)
    assert (on_spark.subscribers_singled_out, on_spark.subscribers_released, on_spark.rows_released) == (2, 10, 14)
    assert (on_spark.cells_by_bucket, on_spark.rows_by_bucket) == ((3, 1, 1, 1), (3, 2, 3, 6))
    assert SCHEMA.station in on_spark.quasi_identifiers
    c15 = under_test(tmp_path, hand_rows(), CONFIGS["c15_window_k5_noise5"], name="c15", secrets=SECRETS)
    on_spark = spark_privacy.singling_out(spark, c15.source_path, c15.config, SCHEMA, SECRETS, RELEASE_PERIOD)
    assert (on_spark.subscribers_singled_out, on_spark.subscribers_released, on_spark.rows_released) == (0, 7, 7)
    assert on_spark.cells_by_bucket == (0, 0, 0, 1)


def test_inference_on_spark_of_a_release_keeping_only_the_app_takes_the_release_as_one_class(spark, tmp_path):
    """Time, province, radio and station dropped: nothing classes the rows, so the four rows are one class, 3 of
    4 Gaming: inferable at a threshold of 0.75, not at 0.9."""
    app_only = dataclasses.replace(CONFIGS["id_removal"], drop_fields=(
        "identifiers", "station", SCHEMA.time, SCHEMA.province, SCHEMA.radio))
    rows = [row(s(1), 0, "Uusimaa", "Gaming"), row(s(2), 10, "Lappi", "Gaming", "4G"),
            row(s(3), 20, "Uusimaa", "Gaming", "3G"), row(s(4), 30, "Lappi", "IM")]
    attacked = under_test(tmp_path, rows, app_only, secrets=SECRETS)
    for threshold, inferable in ((0.75, 1), (0.9, 0)):
        on_spark = spark_privacy.inference(spark, attacked.source_path, app_only, SCHEMA, SECRETS, RELEASE_PERIOD,
                                           threshold=threshold)
        assert on_spark == inference.evaluate(attacked, threshold=threshold)
        assert (on_spark.class_columns, on_spark.classes, on_spark.inferable_classes) == ((), 1, inferable)
        assert (on_spark.rows_correctly_inferable, on_spark.subscribers_inferable) == (3 * inferable, 3 * inferable)
