"""The exact singling-out attack on Spark, over the released rows where they are computed: the same counts as
core.privacy.singling_out.evaluate, without collecting the release to the driver.

The evaluator's truth (the subscriber of each released row) comes from joining the stored source by row id,
on Spark; only counts reach the driver.
"""

from __future__ import annotations

import os

from dsh_assets.core.privacy.singling_out import BUCKETS, SinglingOutResult
from dsh_assets.core.release.configs import ReleaseConfig
from dsh_assets.core.release.schema import ROW_ID, Schema
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.spark.release import released_frame

_SIZE = "__cell_rows"


def singling_out(spark, source_path: str | os.PathLike, config: ReleaseConfig, schema: Schema, secrets: Secrets,
                 period: str) -> SinglingOutResult:
    """Partition the released rows by their released quasi-identifiers; count the subscribers with a cell of one."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    qis = list(config.released_qis(schema))
    kept, _ = released_frame(spark, source_path, config, schema, secrets, period)
    truth = spark.read.parquet(str(source_path)).select(ROW_ID, F.col(schema.subscriber).alias("__subscriber"))
    rows = (kept.select(*qis, ROW_ID).join(truth, on=ROW_ID)
            .withColumn(_SIZE, F.count(F.lit(1)).over(Window.partitionBy(*qis))))
    counts = rows.agg(F.count(F.lit(1)), F.count_distinct("__subscriber"),
                      F.count_distinct(F.when(F.col(_SIZE) == 1, F.col("__subscriber")))).first()
    size = F.col("count")
    bucket = F.when(size == 1, 0).when(size == 2, 1).when(size <= 4, 2).otherwise(3)
    by_bucket = {row[0]: (row[1], row[2]) for row in
                 kept.groupBy(*qis).count().groupBy(bucket.alias("bucket")).agg(F.count(F.lit(1)), F.sum(size))
                 .collect()}
    return SinglingOutResult(
        subscribers_singled_out=int(counts[2]),
        subscribers_released=int(counts[1]),
        rows_released=int(counts[0]),
        cells_by_bucket=tuple(int(by_bucket.get(i, (0, 0))[0]) for i in range(len(BUCKETS))),
        rows_by_bucket=tuple(int(by_bucket.get(i, (0, 0))[1]) for i in range(len(BUCKETS))),
        quasi_identifiers=tuple(qis),
    )
