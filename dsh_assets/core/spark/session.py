"""One Spark session per process: classic (``local[N]``, a cluster master) or Spark Connect (``sc://host:port``).

Created on first use only, so a deployment on the embedded engine never starts a JVM. The session's time
zone is UTC, so timestamps reach Arrow batches as the UTC instants the embedded engine works on.
"""

from __future__ import annotations

import functools
import os
import sys

DEFAULT_MASTER = "local[2]"
DRIVER_MEMORY = "4g"
"""The driver collects the sorted rows to write the one release file: 1g (Spark's default) fails at 1.1M rows."""


@functools.cache
def spark_session(master: str = DEFAULT_MASTER, remote: str = ""):
    """The process's session for ``remote`` (Spark Connect) if set, else for ``master``."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as error:
        raise RuntimeError("the spark engine needs pyspark: pip install -e '.[spark]'") from error
    # Local Python workers run this interpreter (pyarrow and this package importable), not the first python on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.config("spark.sql.session.timeZone", "UTC")
    if remote:
        return builder.remote(remote).getOrCreate()
    return (builder.master(master).appName("dsh_assets")
            .config("spark.driver.memory", DRIVER_MEMORY)
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate())


def arrow_batches(frame):
    """The rows of a DataFrame as Arrow record batches, in the frame's order (collected on the driver)."""
    return frame.toArrow().to_batches()
