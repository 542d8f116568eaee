"""The persistent Dagster instance under the home folder, shared by `dsh` and the UI.

Storage is SQLite under $DSH_HOME/dagster (the embedded default) or PostgreSQL when
DSH_POSTGRES_URL is set (the production setting: `dagster.postgres.yaml`). Creating and migrating
the storage happens under an exclusive lock (a file lock on the home; with PostgreSQL also an
advisory lock in the database), so concurrent first runs cannot stamp a schema twice. Opening the
instance marks failed the runs a `dsh` process started and left STARTED when it died.
"""

import contextlib
import json
import os
import re
import socket
from pathlib import Path
from typing import Callable

import dagster as dg

from dsh_assets.core.environment import export
from dsh_assets.core.files import atomic_path, pid_alive
from dsh_assets.core.home import exclusive_lock
from dsh_assets.core.layout import CHECKOUT, Layout
from dsh_assets.graph.resources import DEFAULT_WORKERS

INSTANCE_TEMPLATE = CHECKOUT / "dagster.yaml"
POSTGRES_TEMPLATE = CHECKOUT / "dagster.postgres.yaml"
POSTGRES_ENV = "DSH_POSTGRES_URL"
INSTANCE_LOCK = ".instance.lock"
PID_TAG, HOST_TAG = "dsh/pid", "dsh/host"
"""Which process on which machine runs a run in-process: a run left STARTED by a process now gone is stale."""
UNFINISHED = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
_ADVISORY_LOCK_KEY = 0x64736864  # "dshd": one key for creating dsh's Dagster storage in a database


def instance_template() -> Path:
    """The checkout's instance configuration: PostgreSQL when DSH_POSTGRES_URL is set, else SQLite."""
    return POSTGRES_TEMPLATE if os.environ.get(POSTGRES_ENV) else INSTANCE_TEMPLATE


def postgres_urls() -> tuple[str, str] | None:
    """DSH_POSTGRES_URL for SQLAlchemy (which Dagster uses) and for psycopg2; None without it.

    SQLAlchemy 2.1 reads a bare `postgresql://` URL with psycopg 3, which dagster-postgres does not
    install: the driver is named explicitly, so either spelling works.
    """
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        return None
    scheme, separator, rest = url.partition("://")
    if not separator or scheme.split("+")[0] not in ("postgresql", "postgres"):
        raise ValueError(f"{POSTGRES_ENV} must be a postgresql:// URL")
    return f"postgresql+psycopg2://{rest}", f"postgresql://{rest}"


def installed_configuration(template: str, dagster_home: Path, workers: int) -> str:
    """The checkout's instance configuration as a home installs it: its SQLite storage at the home's own path (so a
    process that opens the instance needs no environment variable), and the run queue's ``max_concurrent_runs`` the
    home's ``workers``."""
    text, found = re.subn(r"max_concurrent_runs: *\d+", f"max_concurrent_runs: {int(workers)}", template)
    if found != 1:
        raise ValueError("the instance configuration must set max_concurrent_runs once")
    return text.replace("base_dir:\n      env: DAGSTER_HOME", f"base_dir: {json.dumps(str(dagster_home))}")


def _install_configuration(layout: Layout, workers: int) -> Path:
    urls = postgres_urls()
    if urls:
        export(POSTGRES_ENV, urls[0])  # what dagster.postgres.yaml reads (also in `dagster dev`)
    template = instance_template()
    if not template.is_file():
        raise FileNotFoundError(f"instance configuration {template} is missing from the checkout")
    dagster_home = layout.dagster_home
    dagster_home.mkdir(parents=True, exist_ok=True)
    target = dagster_home / "dagster.yaml"
    text = installed_configuration(template.read_text(), dagster_home, workers).encode()
    if not target.is_file() or target.read_bytes() != text:
        with atomic_path(target) as temporary:  # a reader never sees half a file
            temporary.write_bytes(text)
    export("DAGSTER_HOME", str(dagster_home))
    return dagster_home


def prepare_dagster_home(layout: Layout, workers: int = DEFAULT_WORKERS) -> Path:
    """Install the checkout's dagster.yaml into HOME/dagster and point DAGSTER_HOME at it."""
    with exclusive_lock(layout.dagster_home / INSTANCE_LOCK):
        return _install_configuration(layout, workers)


@contextlib.contextmanager
def _database_lock():
    """With PostgreSQL storage, a session advisory lock: homes on other machines may share the database."""
    urls = postgres_urls()
    if not urls:
        yield
        return
    import psycopg2

    connection = psycopg2.connect(urls[1])
    try:
        connection.autocommit = True
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", (_ADVISORY_LOCK_KEY,))
        yield
    finally:
        connection.close()  # ends the session, which releases the lock


def open_instance(layout: Layout, progress: Callable[[str], None] = lambda message: None,
                  workers: int = DEFAULT_WORKERS) -> dg.DagsterInstance:
    """The home's instance, its storage created or migrated under the instance lock; stale runs marked failed."""
    with exclusive_lock(layout.dagster_home / INSTANCE_LOCK), _database_lock():
        dagster_home = _install_configuration(layout, workers)
        instance = dg.DagsterInstance.from_config(str(dagster_home))
        instance.get_runs(limit=1)  # every storage is created by now, inside the lock
    for run_id, message in fail_stale_runs(instance):
        progress(f"run {run_id}: {message}")
    return instance


def fail_stale_runs(instance: dg.DagsterInstance) -> list[tuple[str, str]]:
    """Mark failed each unfinished run that a `dsh` process on this machine started and that process is gone."""
    host = socket.gethostname()
    stale = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=UNFINISHED, tags={HOST_TAG: host})):
        pid = run.tags.get(PID_TAG, "")
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            message = f"the process that ran it (pid {pid} on {host}) is gone; marked failed"
            instance.report_run_failed(run, message=f"dsh: {message}")
            stale.append((run.run_id, message))
    return stale
