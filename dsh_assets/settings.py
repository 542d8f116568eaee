"""The DSH_* environment variables: the one place the platform reads them.

Every layer below is handed the values (a file's path, a home folder), never a variable's name, so a test or a
command that names a file gets that file whatever the environment says. Secrets are read by ``core.secrets`` from
the environment it is given, and never pass through here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from dsh_assets.core.duck import DEFAULT_MEMORY_LIMIT, MEMORY_LIMIT_ENV, memory_limit_problem
from dsh_assets.core.engines import EMBEDDED
from dsh_assets.core.layout import DEFAULT_HOME
from dsh_assets.core.periods import DEFAULT_CADENCE
from dsh_assets.core.privacy.anonymeter import DEFAULT_PYTHON
from dsh_assets.core.spark.session import DEFAULT_MASTER
from dsh_assets.graph.resources import DEFAULT_SENSOR_INTERVAL, DEFAULT_WORKERS

HOME_ENV = "DSH_HOME"
SOURCE_ENV = "DSH_SOURCE"
COLUMNS_ENV = "DSH_COLUMNS"
RELEASES_ENV = "DSH_RELEASES"
CADENCE_ENV = "DSH_PERIOD_CADENCE"
ENGINE_ENV = "DSH_ENGINE"
SPARK_MASTER_ENV = "DSH_SPARK_MASTER"
SPARK_REMOTE_ENV = "DSH_SPARK_REMOTE"
ANONYMETER_PYTHON_ENV = "DSH_ANONYMETER_PYTHON"
SENSOR_INTERVAL_ENV = "DSH_SENSOR_INTERVAL"
WORKERS_ENV = "DSH_WORKERS"


def environment_settings(environ: Mapping[str, str] | None = None) -> dict[str, str | int]:
    """The home's settings as the environment gives them, by ``DshHome`` field (empty file paths: the packaged
    files)."""
    environ = os.environ if environ is None else environ
    return {
        "home": str(Path(environ.get(HOME_ENV) or DEFAULT_HOME).resolve()),
        "source_path": environ.get(SOURCE_ENV, ""),
        "columns_file": environ.get(COLUMNS_ENV, ""),
        "releases_file": environ.get(RELEASES_ENV, ""),
        "cadence": environ.get(CADENCE_ENV, DEFAULT_CADENCE),
        "duckdb_memory_limit": _memory_limit(environ),
        "engine": environ.get(ENGINE_ENV, EMBEDDED),
        "spark_master": environ.get(SPARK_MASTER_ENV, DEFAULT_MASTER),
        "spark_remote": environ.get(SPARK_REMOTE_ENV, ""),
        "anonymeter_python": environ.get(ANONYMETER_PYTHON_ENV) or str(DEFAULT_PYTHON),
        "sensor_interval": _at_least_one(environ, SENSOR_INTERVAL_ENV, DEFAULT_SENSOR_INTERVAL, "seconds"),
        "workers": _at_least_one(environ, WORKERS_ENV, DEFAULT_WORKERS, "workers"),
    }


def _at_least_one(environ: Mapping[str, str], name: str, default: int, what: str) -> int:
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{name}={raw!r}: must be a whole number of {what}, at least 1")
    return int(raw)


def _memory_limit(environ: Mapping[str, str]) -> str:
    raw = environ.get(MEMORY_LIMIT_ENV, "").strip()
    if not raw:
        return DEFAULT_MEMORY_LIMIT
    problem = memory_limit_problem(raw)
    if problem:
        raise ValueError(f"{MEMORY_LIMIT_ENV}={raw!r}: DuckDB does not take it as a memory limit ({problem}); "
                         f"write a size such as 2GB or 512MB")
    return raw
