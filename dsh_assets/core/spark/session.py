"""One Spark session per process: classic (``local[N]``, a cluster master) or Spark Connect (``sc://host:port``).

Created on first use only, so a deployment on the embedded engine never starts a JVM. The session's time
zone is UTC, so timestamps reach Arrow batches as the UTC instants the embedded engine works on.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from dsh_assets.core.environment import export

DEFAULT_MASTER = "local[2]"
DRIVER_MEMORY = "4g"
"""In local mode the executors run in the driver's JVM: its heap holds their sort buffers (which spill beyond it)."""
PART_TIMESTAMPS = ("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
"""Parts written for the driver to stream carry UTC microsecond timestamps (Spark's default is INT96)."""
PART_BATCH_ROWS = 131_072


@functools.cache
def spark_session(master: str = DEFAULT_MASTER, remote: str = ""):
    """The process's session for ``remote`` (Spark Connect) if set, else for ``master``."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as error:
        raise RuntimeError("the spark engine needs pyspark: pip install -e '.[spark]'") from error
    # Local Python workers run this interpreter (pyarrow and this package importable), not the first python on PATH.
    export("PYSPARK_PYTHON", sys.executable, replace=False)
    builder = SparkSession.builder.config("spark.sql.session.timeZone", "UTC")
    if remote:
        return builder.remote(remote).getOrCreate()
    return (builder.master(master).appName("dsh_assets")
            .config("spark.driver.memory", DRIVER_MEMORY)
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate())


def arrow_batches(frame, scratch_parent: str | os.PathLike):
    """The rows of a sorted DataFrame as Arrow record batches, in its order, without collecting it on the driver.

    The executors write one Parquet part per partition of the sorted frame into a scratch folder under
    ``scratch_parent`` (which executors must reach: a shared filesystem on a cluster); the driver streams the
    parts back in partition order, so it holds a batch, not the table. The folder is deleted when the stream
    ends or is abandoned.
    """
    scratch = Path(tempfile.mkdtemp(prefix=".spark-parts-", dir=scratch_parent))
    try:
        frame.sparkSession.conf.set(*PART_TIMESTAMPS)
        frame.write.mode("overwrite").parquet(str(scratch))
        for part in sorted(scratch.glob("part-*.parquet"), key=_partition_index):
            yield from pq.ParquetFile(part).iter_batches(batch_size=PART_BATCH_ROWS)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _partition_index(part: Path) -> int:
    """Spark names a part after the partition that wrote it: part-00007-<uuid>-c000.snappy.parquet."""
    return int(part.name.split("-")[1])
