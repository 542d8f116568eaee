"""Class-majority inference of the application on hand-built tables (answers worked out in the comments)."""

import collections
import dataclasses
import datetime as dt
import json

import pytest

from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy import inference
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.release.configs import load_configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.synth import synthesize
from dsh_assets.core.release.transform import release
from dsh_assets_tests.tables import RELEASE_PERIOD, plain, row, s, under_test

SCHEMA = load_schema()
CONFIGS = load_configs(schema=SCHEMA)
SECRETS = Secrets(b"demo", b"demo", "demo")
ID_REMOVAL = CONFIGS["id_removal"]
C15 = CONFIGS["c15_window_k5_noise5"]
C17 = CONFIGS["c17_hour_groups_k5_noise10"]





def ninety_and_eighty() -> list[dict]:
    """Two classes of ten rows, twenty subscribers, one row each (Uusimaa, 4G, station 101).

    X (minute 0):  s1..s9 Gaming, s10 IM          -> 9/10 = 90%: inferable (Gaming), s1..s9 count
    Y (minute 10): s11..s18 Gaming, s19 s20 IM    -> 8/10 = 80%: not inferable at 0.9
    """
    rows = [row(s(n), 0, app="Gaming", radio="4G") for n in range(1, 10)] + [row(s(10), 0, app="IM", radio="4G")]
    rows += [row(s(n), 10, app="Gaming", radio="4G") for n in range(11, 19)]
    rows += [row(s(n), 10, app="IM", radio="4G") for n in (19, 20)]
    return rows


@pytest.fixture(scope="module")
def ninety(tmp_path_factory) -> ReleaseUnderTest:
    return under_test(tmp_path_factory.mktemp("ninety"), ninety_and_eighty(), ID_REMOVAL)


def test_class_at_exactly_ninety_percent_is_inferable_and_at_eighty_not(ninety):
    result = inference.evaluate(ninety)
    # Only X is inferable; its nine Gaming subscribers are correctly inferable: 9 of 20.
    assert result.figures() == {"inference_rate": 0.45}
    metadata = result.metadata()
    assert (metadata["classes"], metadata["inferable_classes"], metadata["rows_in_inferable_classes"]) == (2, 1, 10)
    assert metadata["rows_correctly_inferable"] == 9 and metadata["threshold"] == 0.9
    assert metadata["class_columns"] == ["time_start", "province", "radio_access_type", "enb_id"]


def test_threshold_is_compared_exactly_as_written(ninety):
    # At 0.8 both classes are inferable (8 of 10, compared as integers against 4/5, inclusive):
    # X's nine and Y's eight Gaming subscribers, 17 of 20.
    assert inference.evaluate(ninety, threshold=0.8).figures() == {"inference_rate": 0.85}
    with pytest.raises(ValueError, match="threshold"):
        inference.evaluate(ninety, threshold=0.5)  # two apps could tie for the majority


def test_app_is_inferred_as_released_where_apps_are_grouped(tmp_path):
    # Five Gaming rows (s1..s5) and five Streaming rows (s6..s10), all minute 0, Uusimaa, 5G.
    rows = [row(s(n), 0, app="Gaming") for n in range(1, 6)] + [row(s(n), 0, app="Streaming") for n in range(6, 11)]
    # c15 keeps both 5-row cells: the class (minute 0, Uusimaa, 5G) is 50/50, nothing inferable.
    assert inference.evaluate(under_test(tmp_path, rows, C15)).figures() == {"inference_rate": 0.0}
    # c17 groups both apps as Media: the class (hour 08:00, Uusimaa, 5G) is 100% Media, all 10 count.
    result = inference.evaluate(under_test(tmp_path, rows, C17, name="c17"))
    assert result.figures() == {"inference_rate": 1.0}
    assert result.metadata()["class_columns"] == ["time_start", "province", "radio_access_type"]


def test_a_class_of_one_row_is_inferable(tmp_path):
    # Station 102 has a single row (s3): its class is 100% its app. Station 101: s1 Gaming, s2 IM (50%).
    rows = [row(s(1), 0, app="Gaming"), row(s(2), 0, app="IM"), row(s(3), 0, app="IM", station=102)]
    result = inference.evaluate(under_test(tmp_path, rows, ID_REMOVAL))
    assert result.figures() == {"inference_rate": 1 / 3}
    assert result.metadata()["inferable_classes_of_one_row"] == 1


def test_fully_suppressed_release_infers_nothing(tmp_path):
    result = inference.evaluate(under_test(tmp_path, ninety_and_eighty(), dataclasses.replace(ID_REMOVAL, k=10**6)))
    assert result.figures() == {"inference_rate": 0.0}
    assert result.metadata()["classes"] == 0 and result.metadata()["subscribers_released"] == 0


def test_nothing_is_inferred_where_the_app_is_not_released(tmp_path):
    no_app = dataclasses.replace(ID_REMOVAL, drop_fields=("identifiers", SCHEMA.app))
    result = inference.evaluate(under_test(tmp_path, ninety_and_eighty(), no_app))
    assert result.figures() == {"inference_rate": 0.0}
    assert result.metadata()["app_released"] is False and result.metadata()["subscribers_released"] == 20


def test_metadata_is_plain_and_states_assumptions(ninety):
    result = inference.evaluate(ninety)
    metadata = result.metadata()
    assert plain(metadata) and plain(result.figures()) and json.loads(json.dumps(metadata)) == metadata
    assert metadata["assumptions"] == inference.ASSUMPTIONS and "90%" in inference.ASSUMPTIONS
    text = json.dumps(metadata)
    assert not any(r[SCHEMA.subscriber] in text for r in ninety_and_eighty())


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """A small synthetic source (20,000 rows, 4,000 subscribers), ingested."""
    directory = tmp_path_factory.mktemp("synthetic")
    synthesize(directory / "raw.parquet", rows=20_000, subscribers=4_000, period=dt.date(2026, 11, 20))
    summary = ingest_source(directory / "raw.parquet", directory / "source.parquet", SCHEMA, book=DigestBook())
    return directory, summary.apps


def test_unprotected_small_release_leaks_the_app_and_suppression_stops_it(synthetic):
    directory, apps = synthetic
    figures, attacked = {}, {}
    for config in (ID_REMOVAL, C15, dataclasses.replace(ID_REMOVAL, k=10**6)):
        released = directory / f"{config.id}_{config.k}.parquet"
        plan = release(directory / "source.parquet", released, config, SCHEMA, SECRETS, apps, period=RELEASE_PERIOD,
                       book=DigestBook())
        attacked[config.k] = ReleaseUnderTest(directory / "source.parquet", released, config, SCHEMA, plan,
                                              book=DigestBook())
        figures[(config.id, config.k)] = inference.evaluate(attacked[config.k]).figures()["inference_rate"]
    # 20,000 rows over thousands of stations: most (time, province, radio, station) classes are tiny.
    assert figures[("id_removal", 0)] > 0.3
    assert figures[("c15_window_k5_noise5", 5)] < figures[("id_removal", 0)] / 2
    assert figures[("id_removal", 10**6)] == 0.0

    # Cross-check id_removal with plain Python (it releases every row with the source's own values).
    classes = [SCHEMA.time, SCHEMA.province, SCHEMA.radio, SCHEMA.station]
    source = attacked[0].source_table([*classes, SCHEMA.app, SCHEMA.subscriber]).to_pylist()
    apps_of = collections.defaultdict(collections.Counter)
    for r in source:
        apps_of[tuple(r[c] for c in classes)][r[SCHEMA.app]] += 1
    majority = {}
    for key, counts in apps_of.items():
        app, top = counts.most_common(1)[0]
        if 10 * top >= 9 * sum(counts.values()):
            majority[key] = app
    inferable = {r[SCHEMA.subscriber] for r in source if majority.get(tuple(r[c] for c in classes)) == r[SCHEMA.app]}
    assert figures[("id_removal", 0)] == len(inferable) / len({r[SCHEMA.subscriber] for r in source})
