"""Resources, one per concern: the home (layout, column roles, configurations, engine), the compute engine, the
secrets, the budget ledger, the publications (policy and ledger)."""

from __future__ import annotations

import functools
import os
from pathlib import Path

import dagster as dg

from dsh_assets.core import duck
from dsh_assets.core.dp.ledger import Ledger
from dsh_assets.core.duck import DEFAULT_MEMORY_LIMIT
from dsh_assets.core.engines import EMBEDDED, Engine, check_engine, engine_for
from dsh_assets.core.files import DigestBook
from dsh_assets.core.spark.session import DEFAULT_MASTER
from dsh_assets.core.layout import Layout
from dsh_assets.core.periods import DEFAULT_CADENCE
from dsh_assets.core.privacy.anonymeter import DEFAULT_PYTHON
from dsh_assets.core.privacy.attacker import AttackerModel, load_attacker
from dsh_assets.core.publication.gate import PublicationPolicy, load_publication
from dsh_assets.core.publication.ledger import PublicationLedger, Refusal
from dsh_assets.core.records import RecordStore
from dsh_assets.core.release.configs import load_budget_caps, load_configs, releases_document
from dsh_assets.core.release.schema import Schema, load_schema
from dsh_assets.core.release.synth import DEFAULT_ROWS, DEFAULT_SEED, DEFAULT_SUBSCRIBERS
from dsh_assets.core.secrets import Secrets, load_secrets
from dsh_assets.core.utility.quality_groups import parse_large_group_records


def _stamp(path: str) -> tuple[str, int | None]:
    """A settings file (empty: the packaged one) and its modification time: parsed once, again only when it
    changes."""
    return path, (os.stat(path).st_mtime_ns if path and os.path.exists(path) else None)


@functools.lru_cache(maxsize=16)
def _schema(stamp: tuple[str, int | None]) -> Schema:
    return load_schema(stamp[0] or None)


@functools.lru_cache(maxsize=16)
def _configs(stamp: tuple[str, int | None], schema_stamp: tuple[str, int | None]) -> dict:
    return load_configs(stamp[0] or None, _schema(schema_stamp))


@functools.lru_cache(maxsize=16)
def _large_group_records(stamp: tuple[str, int | None]) -> int:
    return parse_large_group_records(releases_document(stamp[0] or None))


@functools.lru_cache(maxsize=16)
def _attacker(stamp: tuple[str, int | None], schema_stamp: tuple[str, int | None]) -> AttackerModel:
    return load_attacker(stamp[0] or None, _schema(schema_stamp))


DEFAULT_SENSOR_INTERVAL = 30
"""Seconds between two evaluations of each sensor under the daemon (Dagster's own default)."""
DEFAULT_WORKERS = os.cpu_count() or 1
"""Candidates evaluated at once: one per core."""


class DshHome(dg.ConfigurableResource):
    """Where everything lives and what it is made of: home folder, source file (empty: the synthetic
    default), the column roles and the release configurations (each file parsed once)."""

    home: str
    source_path: str = ""
    synthetic_rows: int = DEFAULT_ROWS
    synthetic_subscribers: int = DEFAULT_SUBSCRIBERS
    synthetic_seed: int = DEFAULT_SEED
    columns_file: str = ""
    """The column roles file; empty: the packaged one."""
    releases_file: str = ""
    """The release configurations file; empty: the packaged one."""
    cadence: str = DEFAULT_CADENCE
    duckdb_memory_limit: str = DEFAULT_MEMORY_LIMIT
    """DuckDB's memory limit in each process; beyond it DuckDB spills under the home (``Layout.duckdb_spill``)."""
    engine: str = EMBEDDED
    """Where ingest and the release run: "duckdb" (embedded, one machine) or "spark" (the ComputeEngine resource)."""
    spark_master: str = DEFAULT_MASTER
    spark_remote: str = ""
    """A Spark Connect URL (sc://host:port); when set it is used instead of spark_master."""
    anonymeter_python: str = str(DEFAULT_PYTHON)
    """The Python of anonymeter's environment, where the second opinion's worker runs."""
    sensor_interval: int = DEFAULT_SENSOR_INTERVAL
    """How often, in seconds, the daemon evaluates the release sensor and the automation conditions: the longest a
    new source waits for its releases, and each hop of evidence, publication and report after a release."""
    workers: int = DEFAULT_WORKERS
    """Runs at once: `dsh run`'s candidates, each in a worker process of its own, and the run queue's
    ``max_concurrent_runs`` for the UI and the daemon (the instance's dagster.yaml). DuckDB's memory limit is shared
    between them, so it bounds the whole job."""

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        duck.configure(self.duckdb_memory_limit, self.layout.duckdb_spill)

    @property
    def layout(self) -> Layout:
        return Layout(Path(self.home).resolve())

    def records(self) -> RecordStore:
        return RecordStore(self.layout.records)

    def schema(self) -> Schema:
        return _schema(_stamp(self.columns_file))

    def configs(self) -> dict:
        return _configs(_stamp(self.releases_file), _stamp(self.columns_file))

    def large_group_records(self) -> int:
        """How many valid source records make a quality group large ([utility] of the releases file)."""
        return _large_group_records(_stamp(self.releases_file))

    def attacker(self) -> AttackerModel:
        """The attacker the evidence assumes ([attacker] of the releases file), checked against the roles."""
        return _attacker(_stamp(self.releases_file), _stamp(self.columns_file))


class ComputeEngine(dg.ConfigurableResource):
    """The engine of the passes over whole files (core.engines.Engine): "duckdb", embedded, or "spark", whose
    session is classic (a master such as local[2]) or Spark Connect (sc://host:port), started on first use and once
    per process, so the embedded engine never starts a JVM."""

    kind: str = EMBEDDED
    spark_master: str = DEFAULT_MASTER
    spark_remote: str = ""

    def get(self) -> Engine:
        return engine_for(self.kind, self._session)

    def _session(self):
        from dsh_assets.core.spark.session import spark_session

        return spark_session(self.spark_master, self.spark_remote)


class DshSecrets(dg.ConfigurableResource):
    """Noise seed and alias key of the home (environment or a 0600 file); only their ids are ever recorded."""

    home: str

    def load(self) -> Secrets:
        return load_secrets(Path(self.home).resolve())


class BudgetLedger(dg.ConfigurableResource):
    """The privacy-budget ledger of the home, with the caps of the releases file."""

    home: str
    releases_file: str = ""
    cadence: str = DEFAULT_CADENCE

    def ledger(self) -> Ledger:
        caps = load_budget_caps(self.releases_file or None)
        return Ledger(Layout(Path(self.home).resolve()).ledger, caps.period_cap, caps.year_cap, self.cadence)


class Publications(dg.ConfigurableResource):
    """What may be published (the DPO's [publication] policy) and the record of what was (the publication ledger)."""

    home: str
    releases_file: str = ""

    def policy(self, known_configs) -> PublicationPolicy:
        return load_publication(self.releases_file or None, known_configs)

    def ledger(self) -> PublicationLedger:
        return PublicationLedger(Layout(Path(self.home).resolve()).ledger)

    def refusals_of_run(self, run_id: str) -> dict[str, Refusal]:
        """The publications refused in run ``run_id``; none without a ledger, which is not created to say so (a
        refused source leaves nothing in the home)."""
        path = Layout(Path(self.home).resolve()).ledger
        return PublicationLedger(path).refusals_of_run(run_id) if path.exists() else {}


def resources_for(home: DshHome) -> dict[str, dg.ConfigurableResource | dg.ResourceDefinition]:
    """Every resource of the graph, derived from the home's settings; ``digests`` is one book for every run of these
    definitions (a `dsh` command's, or a run worker's), so a file is hashed where it is written and read to be
    verified at most once while it stays as it is."""
    check_engine(home.engine)
    return {
        "home": home,
        "engine": ComputeEngine(kind=home.engine, spark_master=home.spark_master, spark_remote=home.spark_remote),
        "secrets": DshSecrets(home=home.home),
        "ledger": BudgetLedger(home=home.home, releases_file=home.releases_file, cadence=home.cadence),
        "publications": Publications(home=home.home, releases_file=home.releases_file),
        "digests": dg.ResourceDefinition.hardcoded_resource(
            DigestBook(), "The SHA-256 and content digests of the files these definitions' runs wrote or verified."),
    }
