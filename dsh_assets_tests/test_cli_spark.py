"""`dsh run --engine spark` end to end, through a real Spark Connect server: the test session's Spark JVM serves it
on a free loopback port (``dsh_assets_tests.spark.local_session``), and stops with it, by its PID.

The Spark run records the engine and the same content digest, singling-out, inference, quality-group and answer
figures as the embedded run of the same source and secrets, and `dsh verify` passes on its home.
(The runs are subprocesses: a process holds either a classic session or a Spark Connect one, never both.)
"""

from __future__ import annotations

import json

import pytest

from dsh_assets.core.files import DigestBook
from dsh_assets.core.release.digest import content_sha256
from dsh_assets_tests.conftest import PERIOD
from dsh_assets_tests.spark import connect_url, unavailable
from dsh_assets_tests.test_cli import Dsh, explain

pytestmark = [pytest.mark.spark, pytest.mark.e2e,
              pytest.mark.skipif(unavailable() is not None, reason=unavailable() or "")]
CONFIGS = ("c16_window_k5_noise5_key", "c17_hour_groups_k5_noise10")


def test_run_through_spark_connect_records_the_embedded_content_digest(tmp_path, spark):
    source = tmp_path / "synthetic.parquet"
    assert Dsh("synth", "--out", source, "--rows", 3000, "--subscribers", 600, "--period", PERIOD,
               cwd=tmp_path).result().returncode == 0
    selection = [argument for config_id in CONFIGS for argument in ("--config", config_id)]
    run = ("run", "--source", source, "--period", PERIOD, *selection, "--json")
    embedded = Dsh(*run, "--home", tmp_path / "duckdb", "--engine", "duckdb", cwd=tmp_path)
    on_spark = Dsh(*run, "--home", tmp_path / "spark", "--engine", "spark", cwd=tmp_path,
                   DSH_SPARK_REMOTE=connect_url(spark)).result()
    assert on_spark.returncode == 0, explain(on_spark)
    reports = {"spark": json.loads(on_spark.stdout), "duckdb": json.loads(embedded.result().stdout)}
    assert reports["spark"]["source"]["stored_sha256"] == reports["duckdb"]["source"]["stored_sha256"]
    for config_id in CONFIGS:
        release, reference = reports["spark"]["releases"][config_id], reports["duckdb"]["releases"][config_id]
        assert (release["engine"], reference["engine"]) == ("spark", "duckdb")
        assert release["content_sha256"] == reference["content_sha256"] == content_sha256(release["path"],
                                                                                          book=DigestBook())
        assert release["rows_released"] == reference["rows_released"] and release["ok"], release["errors"]
        for figure in ("singling_out_rate", "singling_out_cells", "inference_rate"):  # on Spark through the server
            assert release["privacy"][figure] == reference["privacy"][figure]
        assert release["utility"] and release["answers"]  # quality groups and Elina's answers, also through it
        assert (release["utility"], release["answers"]) == (reference["utility"], reference["answers"])
    verified = Dsh("verify", "--home", tmp_path / "spark", cwd=tmp_path).result()
    assert verified.returncode == 0, explain(verified)
