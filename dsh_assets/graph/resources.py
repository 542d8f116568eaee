"""Resources, one per concern: the home (layout, column roles, configurations, engine), the compute engine, the
secrets, the budget ledger, the publications (policy and ledger).

Annotations here are evaluated (no ``from __future__ import annotations``): Dagster tells a nested resource that is
a plain object (``dg.ResourceDependency``) by its annotation's value."""

import functools
import os
import pickle
from pathlib import Path

import dagster as dg

from dsh_assets.core import duck
from dsh_assets.core.dp.ledger import Ledger
from dsh_assets.core.duck import DEFAULT_MEMORY_LIMIT
from dsh_assets.core.engines import EMBEDDED, Engine, check_engine, engine_for
from dsh_assets.core.files import DigestBook, atomic_path
from dsh_assets.core.spark.session import DEFAULT_MASTER
from dsh_assets.core.layout import Layout
from dsh_assets.core.periods import DEFAULT_CADENCE
from dsh_assets.core.privacy.anonymeter import DEFAULT_PYTHON
from dsh_assets.core.privacy.attacker import AttackerModel
from dsh_assets.core.publication.gate import PublicationPolicy
from dsh_assets.core.publication.ledger import PublicationLedger, Refusal
from dsh_assets.core.records import RecordStore
from dsh_assets.core.releases_file import ReleasesFile
from dsh_assets.core.release.configs import DP_COUNTS, DP_SYNTHETIC
from dsh_assets.core.release.schema import Schema, load_schema
from dsh_assets.core.release.synth import DEFAULT_ROWS, DEFAULT_SEED, DEFAULT_SUBSCRIBERS
from dsh_assets.core.secrets import Secrets, load_secrets
from dsh_assets.core.utility.quality_groups import UtilitySettings


def _stamp(path: str) -> tuple[str, int | None]:
    """A settings file (empty: the packaged one) and its modification time: parsed once, again only when it
    changes."""
    return path, (os.stat(path).st_mtime_ns if path and os.path.exists(path) else None)


@functools.lru_cache(maxsize=16)
def _schema(stamp: tuple[str, int | None]) -> Schema:
    return load_schema(stamp[0] or None)


@functools.lru_cache(maxsize=16)
def _releases(stamp: tuple[str, int | None], schema_stamp: tuple[str, int | None]) -> ReleasesFile:
    return ReleasesFile.read(stamp[0] or None, _schema(schema_stamp))


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

    def releases(self) -> ReleasesFile:
        """The releases file, every table of it parsed once (again only when the file changes)."""
        return _releases(_stamp(self.releases_file), _stamp(self.columns_file))

    def configs(self) -> dict:
        return self.releases().configs

    def utility(self) -> UtilitySettings:
        """What makes a quality group large and a pair of measurements strong ([utility] of the releases file)."""
        return self.releases().utility

    def attacker(self) -> AttackerModel:
        """The attacker the evidence assumes ([attacker] of the releases file), checked against the roles."""
        return self.releases().attacker


class ComputeEngine(dg.ConfigurableResource):
    """The engine of the passes over whole files (core.engines.Engine) the home names: "duckdb", embedded, or
    "spark", whose session is classic (a master such as local[2]) or Spark Connect (sc://host:port), started on
    first use and once per process, so the embedded engine never starts a JVM. It keeps what its passes take of a
    file in ``digests``, the definitions' book."""

    home: DshHome
    digests: dg.ResourceDependency[DigestBook]

    def get(self) -> Engine:
        return engine_for(self.home.engine, self.digests, self._session)

    def _session(self):
        from dsh_assets.core.spark.session import spark_session

        return spark_session(self.home.spark_master, self.home.spark_remote)


class DshSecrets(dg.ConfigurableResource):
    """Noise seed and alias key of the home (environment or a 0600 file); only their ids are ever recorded."""

    home: DshHome

    def load(self) -> Secrets:
        return load_secrets(self.home.layout.home)


class BudgetLedger(dg.ConfigurableResource):
    """The privacy-budget ledger of the home, with the caps of its releases file."""

    home: DshHome

    def ledger(self, kind: str = DP_COUNTS) -> Ledger:
        """The ledger of a kind's budget slice: the DP counts' (``[budget]``), or the DP synthetic tables' own
        (``[budget.dp_synthetic]``, its own file and caps)."""
        caps = self.home.releases().budget_caps
        if kind == DP_SYNTHETIC:
            caps, path = caps.synthetic, self.home.layout.synthetic_ledger
        else:
            path = self.home.layout.ledger
        return Ledger(path, caps.period_cap, caps.year_cap, self.home.cadence)


class Publications(dg.ConfigurableResource):
    """What may be published (the DPO's [publication] policy) and the record of what was (the publication ledger)."""

    home: DshHome

    def policy(self) -> PublicationPolicy:
        return self.home.releases().publication

    def ledger(self) -> PublicationLedger:
        return PublicationLedger(self.home.layout.ledger)

    def refusals_of_run(self, run_id: str) -> dict[str, Refusal]:
        """The publications refused in run ``run_id``; none without a ledger, which is not created to say so (a
        refused source leaves nothing in the home)."""
        path = self.home.layout.ledger
        return PublicationLedger(path).refusals_of_run(run_id) if path.exists() else {}


class HandOver(dg.ConfigurableIOManager):
    """An asset's output handed to the assets that take it as an input (``dg.AssetIn``), kept under the home per
    partition, replaced atomically: the scorecard's gathering of a period's evidence, which the report shows."""

    home: DshHome

    def handle_output(self, context: dg.OutputContext, obj) -> None:
        path = self.home.layout.handed_over(context.asset_key.to_user_string(), context.asset_partition_key)
        with atomic_path(path) as temporary:
            temporary.write_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))

    def load_input(self, context: dg.InputContext):
        path = self.home.layout.handed_over(context.asset_key.to_user_string(), context.asset_partition_key)
        try:
            return pickle.loads(path.read_bytes())
        except FileNotFoundError:
            raise dg.Failure(f"{context.asset_key.to_user_string()} {context.asset_partition_key} has handed "
                             f"nothing over ({path} is missing): materialise it first") from None


def resources_for(home: DshHome) -> dict[str, dg.ConfigurableResource | dg.ResourceDefinition]:
    """Every resource of the graph: the home, and the resources that depend on it (nested: each reads its settings
    from the one ``DshHome``, whatever sets them); ``digests`` is one book for every run of these
    definitions (a `dsh` command's, or a run worker's), so a file is hashed where it is written and read to be
    verified at most once while it stays as it is."""
    check_engine(home.engine)
    digests = DigestBook()
    return {
        "home": home,
        "engine": ComputeEngine(home=home, digests=digests),
        "secrets": DshSecrets(home=home),
        "ledger": BudgetLedger(home=home),
        "publications": Publications(home=home),
        "handed_over": HandOver(home=home),
        "digests": dg.ResourceDefinition.hardcoded_resource(
            digests, "What these definitions' runs took of the files they wrote, read or verified: SHA-256s, content "
                     "digests, a source's statistics."),
    }
