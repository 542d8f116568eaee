"""`dsh run --period` releases any past period, registering it in the home's instance as its source arrives,
and refuses a malformed, off-cadence or future period before anything is written."""

from __future__ import annotations

import datetime as dt
import json

import dagster as dg
import pytest

from dsh_assets.core.layout import Layout
from dsh_assets.graph.instance import open_instance
from dsh_assets.graph.partitions import PERIODS
from dsh_assets_tests.conftest import SMALL_SEED
from dsh_assets_tests.test_cli import Dsh, explain

pytestmark = pytest.mark.e2e

YEAR_BEFORE = "2025-11-01"
"""A year before the first period the deployment used to start at (2026-11-01)."""
CONFIG = "c15_window_k5_noise5"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("cli_periods")


@pytest.fixture(scope="module")
def runs(workdir):
    """The year-old release and every refusal, started together (each `dsh` spends seconds importing Dagster)."""
    source = workdir / f"synthetic_{YEAR_BEFORE}.parquet"
    synth = Dsh("synth", "--out", source, "--rows", 6_000, "--subscribers", 1_200, "--seed", SMALL_SEED,
                "--period", YEAR_BEFORE, cwd=workdir).result()
    assert synth.returncode == 0, explain(synth)
    started = {"year_before": Dsh("run", "--source", source, "--period", YEAR_BEFORE, "--config", CONFIG,
                                  "--home", workdir / "home", "--json", cwd=workdir)}
    for case, (period, environ) in REFUSED.items():
        started[case] = Dsh("run", "--source", source, "--period", period, "--config", CONFIG,
                            "--home", workdir / f"home_{case}", cwd=workdir, **environ)
    started["report_unknown_period"] = Dsh("report", "--period", "2025-11-02", "--home", workdir / "home_report",
                                           cwd=workdir)
    yield started
    for run in started.values():
        run.stop()


def test_a_period_a_year_before_is_released(workdir, runs):
    process = runs["year_before"].result()
    assert process.returncode == 0, explain(process)
    result = json.loads(process.stdout)
    assert result["period"] == YEAR_BEFORE
    release = result["releases"][CONFIG]
    assert release["ok"] and release["status"] in {"candidate", "published"}, release
    layout = Layout(workdir / "home")
    assert layout.source(YEAR_BEFORE).is_file()
    assert layout.released(CONFIG, YEAR_BEFORE).is_file()
    assert (layout.home / "reports" / YEAR_BEFORE / "report.html").is_file()


def test_the_instance_knows_exactly_the_periods_that_were_run(workdir, runs):
    assert runs["year_before"].result().returncode == 0
    with open_instance(Layout(workdir / "home")) as instance:
        assert instance.get_dynamic_partitions(PERIODS.name) == [YEAR_BEFORE], "no backlog of empty periods"
        assert instance.get_materialized_partitions(dg.AssetKey("source")) == {YEAR_BEFORE}


TOMORROW = (dt.datetime.now(dt.timezone.utc).date() + dt.timedelta(days=1)).isoformat()
REFUSED = {
    "future": ("2099-01-01", {}),
    "not_ended": (TOMORROW, {}),
    "not_a_monday": ("2025-11-05", {"DSH_PERIOD_CADENCE": "weekly"}),
    "not_a_first_day": ("2025-11-05", {"DSH_PERIOD_CADENCE": "monthly"}),
    "malformed": ("2025-13-01", {}),
}
MESSAGES = {
    "future": "dsh run: period 2099-01-01 has not ended yet (it ends 2099-01-02 00:00 UTC); only a past period",
    "not_ended": f"dsh run: period {TOMORROW} has not ended yet",
    "not_a_monday": "dsh run: period 2025-11-05 is not a weekly release period: a weekly period starts on a Monday",
    "not_a_first_day": "dsh run: period 2025-11-05 is not a monthly release period: a monthly period starts on the "
                       "first day of a month",
    "malformed": "argument --period: period must be a date YYYY-MM-DD, not '2025-13-01'",
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_future_off_cadence_or_malformed_period_is_refused_and_leaves_nothing(workdir, runs, case):
    process = runs[case].result()
    assert process.returncode == 2, explain(process)
    assert MESSAGES[case] in process.stderr, explain(process)
    assert process.stdout == ""
    assert not (workdir / f"home_{case}").exists(), "refused before the home (or its instance) was made"


def test_a_report_of_a_period_without_a_source_is_refused_by_name(workdir, runs):
    process = runs["report_unknown_period"].result()
    assert process.returncode == 2, explain(process)
    assert (f"dsh report: period 2025-11-02 has no source in {workdir / 'home_report'}; release it first with "
            f"dsh run --period 2025-11-02") in process.stderr, explain(process)
    assert not (workdir / "home_report" / "reports").exists()
