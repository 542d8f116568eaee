"""Shared fixtures: one small synthetic source, a fresh home per test, defs and an ephemeral instance."""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import os
import re
import tempfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import dagster as dg
import pytest

from dsh_assets.core import duck
from dsh_assets.core.evidence.metrics import RELEASE_ASSET
from dsh_assets.core.layout import Layout
from dsh_assets.core.release.synth import synthesize
from dsh_assets.definitions import build_defs
from dsh_assets.graph import runner
from dsh_assets.graph.history import recorded_metadata
from dsh_assets.graph.partitions import release_key
from dsh_assets.graph.resources import DshHome
from dsh_assets_tests.postgres import PostgresServer, Unavailable

PERIOD = "2026-11-20"
SMALL_ROWS = 30_000
SMALL_SUBSCRIBERS = 6_000
SMALL_SEED = 20261101
CONFIG_IDS = ("id_removal", "c15_window_k5_noise5", "c16_window_k5_noise5_key", "c17_hour_groups_k5_noise10")
RELEASED_CHECKS = {"checksum_drift", "no_identifiers", "min_cell_size"}
DP_RELEASE_CHECKS = {"checksum_drift", "no_identifiers", "budget_within_caps"}
SOURCE_CHECKS = {"source_schema", "source_checksum_drift"}
QUIET = runner.QUIET_LOGS

# Environment that changes what build_defs / load_secrets / load_configs do: cleared in every test.
DSH_ENVIRONMENT = ("DSH_HOME", "DSH_SOURCE", "DSH_COLUMNS", "DSH_RELEASES", "DSH_PERIOD_CADENCE",
                   "DSH_NOISE_SEED", "DSH_ALIAS_KEY", "DSH_SECRETS_FILE", "DSH_POSTGRES_URL",
                   "DSH_ENGINE", "DSH_SPARK_MASTER", "DSH_SPARK_REMOTE", "DSH_SENSOR_INTERVAL",
                   "DSH_DUCKDB_MEMORY_LIMIT")


SLOW_TIERS_FIRST = ("spark", "browser", "e2e", "postgres")
"""The order in which `make test` hands units of work to its workers: the slow tiers first, the rest after them."""
SPARK_UNIT = "spark"


def work_unit(nodeid: str) -> str:
    """The unit of work of `make test` (``--dist loadfile``) a test belongs to: its module, so the module's
    fixtures (a dozen `dsh` runs, a server) start once; but the Spark modules (under ``spark/``, or named
    ``*_spark.py``) share one unit, so one worker starts one JVM for the `spark` session fixture."""
    module = nodeid.split("::", 1)[0]
    return SPARK_UNIT if "/spark/" in module or module.endswith("_spark.py") else module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """xdist's file scheduler, grouping by ``work_unit`` (optional: ``-p no:xdist`` runs without xdist)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class WorkUnitScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return WorkUnitScheduling(config, log)


def pytest_collection_modifyitems(items):
    """Units of the slow tiers first (``--no-loadscope-reorder`` keeps this order): a long unit handed out last
    would run alone while the other workers idle. A test of the `spark` session outside the Spark unit is refused:
    its worker would start a second JVM."""
    def tier(item) -> int:
        return next((rank for rank, marker in enumerate(SLOW_TIERS_FIRST) if item.get_closest_marker(marker)),
                    len(SLOW_TIERS_FIRST))

    rank: dict[str, tuple[int, int]] = {}
    for index, item in enumerate(items):
        unit = work_unit(item.nodeid)
        if "spark" in item.fixturenames and unit != SPARK_UNIT:
            raise pytest.UsageError(f"{item.nodeid} uses the spark session: put it under a spark/ folder or in a "
                                    f"module named *_spark.py")
        earlier = rank.get(unit, (len(SLOW_TIERS_FIRST), index))
        rank[unit] = (min(earlier[0], tier(item)), earlier[1])
    items.sort(key=lambda item: rank[work_unit(item.nodeid)])


@pytest.fixture(autouse=True)
def _clean_dsh_environment(monkeypatch):
    for name in DSH_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _no_shared_duckdb_objects():
    """Every DuckDB connection of the core is a cursor of one database per process, so a table or view that is not
    TEMP would outlive its connection and be seen by every later one: no test may leave one."""
    yield
    with duck.connect() as connection:
        shared = connection.sql("SELECT table_name FROM duckdb_tables() WHERE NOT temporary UNION ALL "
                                "SELECT view_name FROM duckdb_views() WHERE NOT temporary AND NOT internal").fetchall()
    assert not shared, f"non-temporary DuckDB objects left in the process's database: {shared}"


FAST_ATTACKER = {"sample_size = 1000": "sample_size = 300", "attacks = 500": "attacks = 100",
                 "block_rows = 3000": "block_rows = 1500", "cpu_seconds = 90": "cpu_seconds = 2",
                 "light_cpu_seconds = 5": "light_cpu_seconds = 1"}
"""The test tier's attacker: the packaged knowledge sets and rules on smaller samples (anonymeter's full strength, 8
blocks of 3,000 rows and 500 attacks, takes about 90 CPU seconds of a listed candidate's evidence; 2 blocks of 1,500
rows and 100 attacks take a few)."""


FAST_SYNTHESIS = {"iterations = 1000 ": "iterations = 150 "}
"""The test tier's DP synthetic tables: fewer steps of the model's fit (1,000 take about 30 s on the default data)."""


SWEEP_TABLE = re.compile(r"(?ms)^\[sweep\.[^\]]+\]\n.*?(?=^\[)")
"""One [sweep.NAME] table of a releases file, up to the next table: what a test takes out to declare fewer points."""


def releases_text(fast_attacker: bool = True) -> str:
    """The packaged release configurations file, with the test tier's DP synthesis and, unless ``fast_attacker`` is
    False, its attacker."""
    text = resources.files("dsh_assets").joinpath("releases.toml").read_text()
    if fast_attacker:
        for packaged, fast in FAST_ATTACKER.items():
            assert text.count(f"\n{packaged}\n") == 1, f"the packaged [attacker] table no longer says {packaged!r}"
            text = text.replace(f"\n{packaged}\n", f"\n{fast}\n")
    for packaged, fast in FAST_SYNTHESIS.items():
        assert f"\n{packaged}" in text, f"the packaged DP synthetic table no longer says {packaged!r}"
        text = text.replace(f"\n{packaged}", f"\n{fast}")
    return text


def fast_releases_file() -> Path:
    """The packaged configurations with the test tier's attacker, written once per test session."""
    path = Path(tempfile.gettempdir()) / f"dsh-test-releases-{os.getpid()}.toml"
    if not path.exists():
        path.write_text(releases_text())
        atexit.register(path.unlink, missing_ok=True)
    return path


def clean_environ(**extra: str) -> dict[str, str]:
    """os.environ without any DSH_* or DAGSTER_HOME setting, plus ``extra`` (for subprocesses); the releases file is
    the test tier's (``fast_releases_file``) unless ``extra`` names one."""
    environ = {k: v for k, v in os.environ.items() if k not in DSH_ENVIRONMENT and k != "DAGSTER_HOME"}
    environ["DSH_RELEASES"] = str(fast_releases_file())
    environ.update(extra)
    return environ


@pytest.fixture(scope="session")
def source_file(tmp_path_factory) -> Path:
    """A small deterministic synthetic source for PERIOD (30,000 rows, 6,000 subscribers)."""
    path = tmp_path_factory.mktemp("source") / f"synthetic_{PERIOD}.parquet"
    synthesize(path, rows=SMALL_ROWS, subscribers=SMALL_SUBSCRIBERS, seed=SMALL_SEED,
               period=dt.date.fromisoformat(PERIOD))
    return path


@pytest.fixture
def home(tmp_path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def make_defs(home: Path, source_path: Path | str = "", releases_file: Path | str = "") -> dg.Definitions:
    """Defs over a home; the releases file is the test tier's (``fast_releases_file``) unless one is named."""
    return build_defs(DshHome(home=str(home), source_path=str(source_path),
                              releases_file=str(releases_file or fast_releases_file())))


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as ephemeral:
        yield ephemeral


@pytest.fixture(scope="session")
def postgres() -> PostgresServer:
    """One throwaway PostgreSQL server for the session (loopback, temporary data folder), stopped by its PID."""
    try:
        server = PostgresServer.start()
    except Unavailable as why:
        pytest.skip(str(why))
    yield server
    server.stop()


@dataclass
class Harness:
    """Materialise real partitions of one defs on one instance, through the runner the `dsh` command uses."""

    defs: dg.Definitions
    instance: dg.DagsterInstance
    home: Path

    def config(self, config_id: str):
        return self.defs.resources["home"].configs()[config_id]

    def source(self, period: str = PERIOD, raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
        return runner.launch_source(self.defs, self.instance, period, raise_on_error=raise_on_error)

    def release(self, config_id: str, period: str = PERIOD, raise_on_error: bool = True) -> dg.ExecuteInProcessResult:
        return runner.launch_release(self.defs, self.instance, self.config(config_id), period,
                                     raise_on_error=raise_on_error)

    def publication(self, period: str = PERIOD, publish: str | None = None,
                    also_publish: bool = False) -> dg.ExecuteInProcessResult:
        return runner.launch_publication(self.defs, self.instance, period, publish, also_publish)

    def released_checks_only(self, config_id: str, period: str = PERIOD) -> dg.ExecuteInProcessResult:
        """Run the checks of the release asset alone for one partition: nothing is re-materialised."""
        return self._selected(RELEASE_ASSET[self.config(config_id).kind], str(release_key(config_id, period)))

    def release_only(self, config_id: str, period: str = PERIOD) -> dg.ExecuteInProcessResult:
        """Materialise the release asset and its checks alone for one partition, without its evidence: for the
        tests about the release file itself."""
        return self._selected(RELEASE_ASSET[self.config(config_id).kind], str(release_key(config_id, period)),
                              with_asset=True)

    def evidence_only(self, asset: str, config_id: str, period: str = PERIOD) -> dg.ExecuteInProcessResult:
        """Materialise one evidence asset of one release partition, over the release already stored."""
        return self._selected(asset, str(release_key(config_id, period)), with_asset=True)

    def source_checks_only(self, period: str = PERIOD) -> dg.ExecuteInProcessResult:
        """Run the source's checks alone for one period: nothing is re-materialised."""
        return self._selected("source", period)

    def _selected(self, asset: str, partition_key: str, with_asset: bool = False) -> dg.ExecuteInProcessResult:
        """A run of ``asset``'s checks (and the asset itself ``with_asset``) on one partition."""
        chosen = next(a for a in self.defs.assets if getattr(a, "key", None) == dg.AssetKey(asset))
        selection = dg.AssetSelection.checks_for_assets(chosen)
        name = f"{asset}_checks_only"
        if with_asset:
            selection, name = selection | dg.AssetSelection.assets(chosen), f"{asset}_only"
        merged = dg.Definitions.merge(self.defs, dg.Definitions(jobs=[dg.define_asset_job(name, selection=selection)]))
        return merged.resolve_job_def(name).execute_in_process(
            instance=self.instance, run_config=QUIET, raise_on_error=False, tags={"dagster/partition": partition_key})

    def recorded(self, asset: str, partition_key, limit: int = 1) -> list[dict]:
        return recorded_metadata(self.instance, dg.AssetKey(asset), str(partition_key), limit=limit)

    def released_path(self, config_id: str, period: str = PERIOD) -> Path:
        return Layout(self.home).released(config_id, period)


def materialization_metadata(result: dg.ExecuteInProcessResult, asset: str | None = None) -> dict:
    """The metadata of the run's one materialisation of ``asset`` (default: the run's only asset)."""
    events = [e for e in result.get_asset_materialization_events()
              if asset is None or e.materialization.asset_key == dg.AssetKey(asset)]
    assert len(events) == 1, f"expected one materialisation of {asset or 'the asset'}, got {len(events)}"
    return dict(events[0].materialization.metadata)


def check_results(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {evaluation.check_name: evaluation.passed for evaluation in result.get_asset_check_evaluations()}


def step_failure_messages(result: dg.ExecuteInProcessResult) -> list[str]:
    messages = []
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data.error is not None:
            error = event.step_failure_data.error
            while error is not None:
                messages.append(error.message)
                error = error.cause
    return messages


@pytest.fixture
def harness(home, source_file, instance) -> Harness:
    """Defs over the small source file with a fresh home and an ephemeral instance."""
    return Harness(make_defs(home, source_file), instance, home)


@contextlib.contextmanager
def sourced_harness(folder: Path, source_file):
    """A home under ``folder`` with the period's source materialised, on an ephemeral instance open for the block:
    for a module fixture whose tests share one home."""
    home = folder / "home"
    home.mkdir()
    with dg.DagsterInstance.ephemeral() as instance:
        harness = Harness(make_defs(home, source_file), instance, home)
        harness.source()
        yield harness


@pytest.fixture
def build_harness(instance):
    """A factory for a Harness with other settings (another releases file, no source file...)."""
    def build(home: Path, source_path: Path | str = "", releases_file: Path | str = "") -> Harness:
        return Harness(make_defs(home, source_path, releases_file), instance, home)
    return build



@pytest.fixture(scope="session")
def spark():
    """One local[2] Spark session for the whole test session (a JVM takes tens of seconds to start); its JVM also
    serves Spark Connect (``dsh_assets_tests.spark.connect_url``)."""
    from dsh_assets_tests.spark import local_session, require_spark

    require_spark()
    with local_session() as session:
        yield session
