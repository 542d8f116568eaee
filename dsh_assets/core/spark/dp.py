"""The DP tables' counting on Spark: the contribution bounding and the true count vectors, computed where the data
is; the driver gets one row per cell (or per app) and draws the noise exactly as the embedded engine does.

The cells come from the coarsening functions the Spark release applies (cells.coarsen_time and coarsen_app,
whose SQL form, cell_expressions, the embedded query uses), per Arrow batch with mapInArrow. A subscriber's kept
cells are those with the smallest SHA-256 of the same text the embedded query hashes
(key, subscriber, cell microseconds and names, joined by chr(31)), as lowercase hex, ties by cell: Spark's sha2
and DuckDB's sha256 give the same digest of the same bytes, so the keep-order, and with it every count, is the
same on both engines (core.dp.publish, core.dp.bound).
"""

from __future__ import annotations

import os
from typing import Callable

import numpy as np
import pyarrow as pa

from dsh_assets.core.dp import bound as bound_choice
from dsh_assets.core.dp.publish import (
    FIVE_G,
    SLOW_PURPOSE,
    CellCounts,
    SlowCounts,
    bound_key,
    counts_over_domain,
    slow_counts_of,
)
from dsh_assets.core.release.configs import DpCountsConfig
from dsh_assets.core.release.schema import Schema
from dsh_assets.core.release.cells import coarsen_app, coarsen_time
from dsh_assets.core.secrets import Secrets

_CELL = ("c0", "c1", "c2", "c3")
_SEPARATOR = "\x1f"
_PAIR_SCHEMA = pa.schema([pa.field("s", pa.string()), pa.field("c0", pa.timestamp("us", "UTC")),
                          *[pa.field(name, pa.string()) for name in _CELL[1:]]])


def _cell_function(config: DpCountsConfig):
    """What mapInArrow runs on each batch of (subscriber, time, province, app, radio): the subscriber and the cell."""

    def cells(batches):
        for batch in batches:
            columns = [batch.column(0), coarsen_time(batch.column(1), config), batch.column(2),
                       coarsen_app(batch.column(3), config), batch.column(4)]
            yield pa.RecordBatch.from_arrays(columns, schema=_PAIR_SCHEMA)

    return cells


def _pairs(spark, source_path: str | os.PathLike, config: DpCountsConfig, schema: Schema):
    """(subscriber, cell) pairs of the source with their row counts, n_rows."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    source = spark.read.parquet(str(source_path))
    columns = [F.col(schema.subscriber).cast("string"), schema.time, schema.province, schema.app, schema.radio]
    cells = source.select(*columns).mapInArrow(_cell_function(config), from_arrow_schema(_PAIR_SCHEMA))
    return cells.groupBy("s", *_CELL).agg(F.count(F.lit(1)).alias("n_rows"))


def _ranked(pairs, key: str, *keys):
    """``pairs`` with r: each row's rank within its subscriber by SHA-256(key, subscriber, keys...), ties by keys."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    text = [F.unix_micros(F.col(name)).cast("string") if name == "c0" else F.col(name) for name in keys]
    digest = F.sha2(F.concat_ws(_SEPARATOR, F.lit(key), F.col("s"), *text), 256)
    return pairs.withColumn("r", F.row_number().over(Window.partitionBy("s").orderBy(digest, *keys)))


def bound_ranked_cells(spark, source_path: str | os.PathLike, config: DpCountsConfig, schema: Schema,
                       secrets: Secrets) -> pa.Table:
    """core.dp.publish.bound_ranked_cells on Spark: the same table, one row per observed cell."""
    from pyspark.sql import functions as F

    bound = config.max_cells_per_subscriber
    rank = F.col("r")
    ranked = _ranked(_pairs(spark, source_path, config, schema), bound_key(secrets), *_CELL)
    return ranked.groupBy(*_CELL).agg(
        F.count_if(rank <= bound).alias("kept"), F.count(F.lit(1)).alias("pairs"),
        F.count_if(rank == 1).alias("first_pairs"), F.count_if(rank == bound + 1).alias("pairs_at_bound"),
        F.sum("n_rows").alias("rows"), F.coalesce(F.sum(F.when(rank > bound, F.col("n_rows"))), F.lit(0))
        .alias("rows_dropped"),
    ).toArrow()


def bounded_cell_counts(spark, source_path: str | os.PathLike, config: DpCountsConfig, schema: Schema,
                        secrets: Secrets, public_domain=None) -> CellCounts:
    """core.dp.publish.bounded_cell_counts with the bounding on Spark: the same CellCounts."""
    observed = bound_ranked_cells(spark, source_path, config, schema, secrets)
    return counts_over_domain(observed, config.max_cells_per_subscriber, schema, public_domain)


def cells_per_subscriber(spark, source_path: str | os.PathLike, config: DpCountsConfig,
                         schema: Schema) -> tuple[np.ndarray, int]:
    """core.dp.bound.cells_per_subscriber on Spark: the same (h, cells)."""
    from pyspark.sql import functions as F

    pairs = _pairs(spark, source_path, config, schema).cache()
    try:
        cells_of = pairs.groupBy("s").agg(F.least(F.count(F.lit(1)), F.lit(bound_choice.HISTOGRAM_CAP)).alias("m"))
        histogram = bound_choice.histogram_of(cells_of.groupBy("m").count().collect())
        distinct = pairs.agg(*[F.count_distinct(name) for name in _CELL]).first()
    finally:
        pairs.unpersist()
    return histogram, int(np.prod([int(n) for n in distinct]))


def slow_ranked_apps(spark, source_path: str | os.PathLike, schema: Schema, secrets: Secrets,
                     max_apps_per_subscriber: int, slow_threshold: float, radio: str = FIVE_G) -> pa.Table:
    """core.dp.publish.slow_ranked_apps on Spark: the same table, one row per app of the source."""
    from pyspark.sql import functions as F

    bound, rank = max_apps_per_subscriber, F.col("r")
    source = spark.read.parquet(str(source_path))
    download = F.col(schema.download)
    per = (source.where((F.col(schema.radio) == radio) & download.isNotNull())
           .groupBy(F.col(schema.subscriber).cast("string").alias("s"), F.col(schema.app).alias("app"))
           .agg(F.bool_or(download <= F.lit(float(slow_threshold))).alias("slow"), F.count(F.lit(1)).alias("n_rows")))
    ranked = _ranked(per, bound_key(secrets, SLOW_PURPOSE), "app")
    apps = source.select(F.col(schema.app).alias("app")).distinct()
    return apps.join(ranked, on="app", how="left").groupBy("app").agg(
        F.count_if(rank <= bound).alias("on_radio"), F.count_if((rank <= bound) & F.col("slow")).alias("slow"),
        F.count_if(rank == 1).alias("first_pairs"), F.count("s").alias("pairs"),
        F.coalesce(F.sum("n_rows"), F.lit(0)).alias("rows"),
        F.coalesce(F.sum(F.when(rank > bound, F.col("n_rows"))), F.lit(0)).alias("rows_dropped"),
    ).toArrow()


def slow_download_counts(spark, source_path: str | os.PathLike, schema: Schema, secrets: Secrets,
                         max_apps_per_subscriber: int, slow_threshold: float, radio: str = FIVE_G) -> SlowCounts:
    """core.dp.publish.slow_download_counts with the bounding on Spark: the same SlowCounts."""
    per_app = slow_ranked_apps(spark, source_path, schema, secrets, max_apps_per_subscriber, slow_threshold, radio)
    return slow_counts_of(per_app, max_apps_per_subscriber)


class SparkCounting:
    """The DP tables' counting on Spark; the session is started only when a count runs, so a reused table starts
    no JVM."""

    def __init__(self, session: Callable[[], object]):
        self._session = session

    def cell_counts(self, source_path, config, schema, secrets, public_domain=None):
        return bounded_cell_counts(self._session(), source_path, config, schema, secrets, public_domain)

    def cells_per_subscriber(self, source_path, config, schema):
        return cells_per_subscriber(self._session(), source_path, config, schema)

    def slow_download_counts(self, source_path, schema, secrets, max_apps_per_subscriber, slow_threshold):
        return slow_download_counts(self._session(), source_path, schema, secrets, max_apps_per_subscriber,
                                    slow_threshold)
