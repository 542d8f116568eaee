"""The one place the process environment is written: the variables a child process or a library reads from it
(``DAGSTER_HOME`` and the PostgreSQL URL for Dagster's instance file, ``DSH_HOME`` for `dagster dev`'s code
location, ``PYSPARK_PYTHON`` for Spark's Python workers). Settings are read in ``dsh_assets.settings``."""

from __future__ import annotations

import os


def export(name: str, value: str, *, replace: bool = True) -> None:
    """Set ``name`` for this process and the processes it starts; ``replace=False`` keeps a value already set."""
    if replace or name not in os.environ:
        os.environ[name] = value
