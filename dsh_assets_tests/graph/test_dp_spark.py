"""The `dp_release` asset on the spark engine: its counting runs on Spark, it records the engine, and its bounding
figures equal the embedded run's (the noise is OpenDP's, unseeded, so the tables themselves differ by draw)."""

from __future__ import annotations

import pytest

import datetime as dt

import dagster as dg

from dsh_assets.core.dp.publish import bound_key
from dsh_assets.core.release.synth import synthesize
from dsh_assets.core.spark import dp as spark_dp
from dsh_assets.definitions import build_defs
from dsh_assets.graph.partitions import release_key
from dsh_assets.graph.resources import DshHome
from dsh_assets_tests.conftest import PERIOD, QUIET, Harness, make_defs, materialization_metadata

pytestmark = pytest.mark.spark

CONFIG_ID = "dp_counts_eps1"


def _dp_release(harness: Harness) -> dict:
    """Materialise the dp_release partition alone (its evidence assets are not this test's subject)."""
    job = dg.define_asset_job("dp_release_only", selection=["dp_release"])
    merged = dg.Definitions.merge(harness.defs, dg.Definitions(jobs=[job]))
    result = merged.resolve_job_def("dp_release_only").execute_in_process(
        instance=harness.instance, run_config=QUIET, tags={"dagster/partition": str(release_key(CONFIG_ID, PERIOD))})
    return {key: value.value for key, value in materialization_metadata(result, "dp_release").items()}


def test_dp_release_counts_on_spark_and_records_the_engine(spark, tmp_path, monkeypatch):
    source_file = tmp_path / f"synthetic_{PERIOD}.parquet"
    synthesize(source_file, rows=3000, subscribers=600, seed=3, period=dt.date.fromisoformat(PERIOD))
    calls = []
    counted = spark_dp.bounded_cell_counts
    monkeypatch.setattr(spark_dp, "bounded_cell_counts", lambda *args: calls.append(args[0]) or counted(*args))
    recorded = {}
    for engine in ("duckdb", "spark"):
        home = tmp_path / engine
        home.mkdir()
        with dg.DagsterInstance.ephemeral() as instance:
            Harness(make_defs(home, source_file), instance, home).source()  # the same stored file on both engines
            defs = build_defs(DshHome(home=str(home), source_path=str(source_file), engine=engine))
            recorded[engine] = _dp_release(Harness(defs, instance, home))
            keys = defs.resources["secrets"].load()
    assert calls == [spark]  # the spark home counted on the test's Spark session; the embedded one never did
    assert (recorded["duckdb"]["engine"], recorded["spark"]["engine"]) == ("duckdb", "spark")
    bounding = {engine: {k: v for k, v in metadata.items() if k.startswith("bounding_")}
                for engine, metadata in recorded.items()}
    assert bounding["spark"] == bounding["duckdb"] and bounding["spark"]["bounding_subscribers"] > 0
    assert recorded["spark"]["rows_released"] == recorded["duckdb"]["rows_released"]
    secret_texts = (bound_key(keys), keys.noise_seed.decode(errors="replace"), keys.noise_seed.hex())
    assert not any(secret in str(recorded["spark"]) for secret in secret_texts)
