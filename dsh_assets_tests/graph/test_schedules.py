"""The schedule requests the source of the period that has just closed; the sensor then every configuration."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest

from dsh_assets.core.evidence.metrics import RELEASE_ASSET
from dsh_assets.core.records import Record
from dsh_assets.core.release.configs import load_configs, period_configs
from dsh_assets.core.release.synth import synthesize
from dsh_assets.graph.partitions import PERIODS, RELEASE_JOBS, release_key
from dsh_assets_tests.conftest import PERIOD, SMALL_SEED, Harness, make_defs
from dsh_assets_tests.graph.conftest import postgres_instance

UTC = dt.timezone.utc
NEXT_PERIOD = (dt.date.fromisoformat(PERIOD) + dt.timedelta(days=1)).isoformat()
TICK_AFTER_PERIOD = dt.datetime.fromisoformat(PERIOD).replace(tzinfo=UTC) + dt.timedelta(days=1, minutes=15)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def instance(request, tmp_path, monkeypatch):
    """A schedule reaches the instance (to register its period) only when it is persistent, as the daemon's is."""
    if request.param == "sqlite":
        with dg.instance_for_test() as persistent:
            yield persistent
        return
    with postgres_instance(request, tmp_path, monkeypatch) as persistent:
        yield persistent


def evaluate_schedule(harness: Harness, when: dt.datetime):
    schedule = harness.defs.resolve_schedule_def("release_period_schedule")
    context = dg.build_schedule_context(instance=harness.instance, scheduled_execution_time=when,
                                        repository_def=harness.defs.get_repository_def())
    return schedule.evaluate_tick(context)


def evaluate_sensor(harness: Harness, cursor: str | None):
    sensor = harness.defs.resolve_sensor_def("release_every_config")
    # With its reference, as under the daemon: run requests for registered periods are checked against the instance.
    context = dg.build_sensor_context(instance=harness.instance, instance_ref=harness.instance.get_ref(), cursor=cursor,
                                      definitions=harness.defs, resources={"home": harness.defs.resources["home"]})
    return sensor.evaluate_tick(context)


def test_schedule_requests_the_source_of_the_period_that_has_just_closed(harness: Harness):
    schedule = harness.defs.resolve_schedule_def("release_period_schedule")
    assert schedule.job_name == "source_job"
    data = evaluate_schedule(harness, TICK_AFTER_PERIOD)
    assert not data.skip_message
    assert len(data.run_requests) == 1
    request = data.run_requests[0]
    assert request.partition_key == PERIOD
    assert request.run_key == f"source|{PERIOD}"
    # The next tick asks for the next period, under another run key.
    later = evaluate_schedule(harness, TICK_AFTER_PERIOD + dt.timedelta(days=1))
    assert [r.partition_key for r in later.run_requests] == [NEXT_PERIOD]


def test_the_schedule_registers_the_period_it_requests_and_only_that_one(harness: Harness):
    assert harness.instance.get_dynamic_partitions(PERIODS.name) == []
    evaluate_schedule(harness, TICK_AFTER_PERIOD)
    assert harness.instance.get_dynamic_partitions(PERIODS.name) == [PERIOD]


def test_the_schedule_registers_nothing_when_the_source_file_is_missing(tmp_path, instance):
    missing = tmp_path / "not_delivered.parquet"
    harness = Harness(make_defs(tmp_path / "home", missing), instance, tmp_path / "home")
    data = evaluate_schedule(harness, TICK_AFTER_PERIOD)
    assert not data.run_requests
    assert data.skip_message == f"no source for period {PERIOD}: {missing} does not exist"
    assert instance.get_dynamic_partitions(PERIODS.name) == []


def test_sensor_requests_every_configuration_once_per_new_source_materialisation(harness: Harness):
    configs = period_configs(load_configs())
    config_ids = list(configs)
    assert len(config_ids) >= 4

    nothing_yet = evaluate_sensor(harness, cursor=None)
    assert not nothing_yet.run_requests

    assert harness.source(PERIOD).success

    first = evaluate_sensor(harness, cursor=None)
    keys = [str(request.partition_key) for request in first.run_requests]
    expected = sorted(str(release_key(config_id, PERIOD)) for config_id in config_ids)
    assert sorted(keys) == expected, "every configuration exactly once for the period"
    assert not [key for key in keys if key.startswith("sweep_")], "a sweep's points are evaluated on request only"
    assert len(set(request.run_key for request in first.run_requests)) == len(config_ids)
    for request in first.run_requests:
        by_dimension = request.partition_key.keys_by_dimension
        assert request.job_name == RELEASE_JOBS[configs[by_dimension["config"]].kind]
        assert by_dimension["period"] == PERIOD and by_dimension["config"] in config_ids
    assert first.cursor

    second = evaluate_sensor(harness, cursor=first.cursor)
    assert not second.run_requests, "the same source materialisation was requested twice"
    assert second.cursor == first.cursor

    # A requested release partition really runs (the key the sensor built is a valid key of its job).
    some_request = first.run_requests[0]
    some_key = some_request.partition_key
    result = harness.defs.resolve_job_def(some_request.job_name).execute_in_process(
        partition_key=some_key, instance=harness.instance,
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}})
    assert result.success
    # A released materialisation is not a source materialisation: still nothing new.
    assert not evaluate_sensor(harness, cursor=first.cursor).run_requests


def test_sensor_requests_only_the_newly_materialised_period(harness: Harness):
    config_ids = list(period_configs(load_configs()))
    harness.source(PERIOD)
    first = evaluate_sensor(harness, cursor=None)
    assert len(first.run_requests) == len(config_ids)

    # The next period's source (a file of that period: rows outside a period are refused): only
    # that period is requested.
    next_source = harness.home.parent / f"synthetic_{NEXT_PERIOD}.parquet"
    synthesize(next_source, rows=3_000, subscribers=600, seed=SMALL_SEED, period=dt.date.fromisoformat(NEXT_PERIOD))
    Harness(make_defs(harness.home, next_source), harness.instance, harness.home).source(NEXT_PERIOD)
    second = evaluate_sensor(harness, cursor=first.cursor)
    assert sorted(str(r.partition_key) for r in second.run_requests) == sorted(
        str(release_key(config_id, NEXT_PERIOD)) for config_id in config_ids)
    assert not evaluate_sensor(harness, cursor=second.cursor).run_requests


def test_a_scheduled_tick_then_the_sensor_release_every_configuration_of_the_new_period(harness: Harness):
    config_ids = list(period_configs(load_configs()))
    (source_request,) = evaluate_schedule(harness, TICK_AFTER_PERIOD).run_requests
    result = harness.defs.resolve_job_def("source_job").execute_in_process(
        partition_key=source_request.partition_key, tags=source_request.tags, instance=harness.instance,
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}})
    assert result.success
    first = evaluate_sensor(harness, cursor=None)
    assert sorted(str(r.partition_key) for r in first.run_requests) == sorted(
        str(release_key(config_id, PERIOD)) for config_id in config_ids)
    assert not evaluate_sensor(harness, cursor=first.cursor).run_requests


def _record_release(harness: Harness, config, period: str, source_stored_sha256: str) -> None:
    """A release's record as the release asset keeps it in the home (only the field the sensor reads)."""
    harness.defs.resources["home"].records().write(Record(
        asset=RELEASE_ASSET[config.kind], partition=str(release_key(config.id, period)), run_id="recorded-by-test",
        code_version=None, values={"source_stored_sha256": source_stored_sha256}))


def test_sensor_launches_nothing_over_partitions_already_released_from_the_same_source(harness: Harness):
    configs = period_configs(load_configs())
    harness.source(PERIOD)
    (source_record,) = harness.recorded("source", PERIOD)
    stale_id, *current_ids = list(configs)
    for config_id in current_ids:
        _record_release(harness, configs[config_id], PERIOD, source_record["sha256"])
    _record_release(harness, configs[stale_id], PERIOD, "another source's bytes")

    # A first tick (no cursor, as when the UI starts on this home): only the release made from other bytes.
    first = evaluate_sensor(harness, cursor=None)
    assert [str(r.partition_key) for r in first.run_requests] == [str(release_key(stale_id, PERIOD))]

    _record_release(harness, configs[stale_id], PERIOD, source_record["sha256"])
    for _ in range(2):  # every partition released from these bytes: no run request, however often it ticks
        again = evaluate_sensor(harness, cursor=None)
        assert not again.run_requests
        assert "already released from the same source bytes" in again.skip_message
