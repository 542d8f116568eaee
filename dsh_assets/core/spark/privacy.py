"""The exact attacks on Spark (singling out, inference), over the released rows where they are computed: the same
counts as core.privacy.singling_out.evaluate and core.privacy.inference.evaluate, without collecting the release
to the driver.

The evaluator's truth (the subscriber of each released row) comes from joining the stored source by row id,
on Spark; only counts reach the driver.
"""

from __future__ import annotations

import os

from dsh_assets.core.privacy.inference import DEFAULT_THRESHOLD, InferenceResult, class_columns, exact_threshold
from dsh_assets.core.privacy.singling_out import SinglingOutResult, bucketed
from dsh_assets.core.release.configs import ReleaseConfig
from dsh_assets.core.release.schema import ROW_ID, Schema
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.spark.release import released_frame

_SIZE = "__cell_rows"
_SUBSCRIBER = "__subscriber"
_APP, _CLASS, _CLASS_ROWS, _APP_ROWS = "__app", "__class", "__class_rows", "__app_rows"
_INFERRED, _INFERABLE, _FIRST = "__inferred", "__inferable", "__first_of_class"


def _truth(spark, source_path: str | os.PathLike, schema: Schema):
    """The evaluator's truth: each source row's subscriber, by row id (joined on Spark, never collected)."""
    from pyspark.sql import functions as F

    return spark.read.parquet(str(source_path)).select(ROW_ID, F.col(schema.subscriber).alias(_SUBSCRIBER))


def singling_out(spark, source_path: str | os.PathLike, config: ReleaseConfig, schema: Schema, secrets: Secrets,
                 period: str) -> SinglingOutResult:
    """Partition the released rows by their released quasi-identifiers; count the subscribers with a cell of one."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    qis = list(config.released_qis(schema))
    kept, _ = released_frame(spark, source_path, config, schema, secrets, period)
    truth = _truth(spark, source_path, schema)
    rows = (kept.select(*qis, ROW_ID).join(truth, on=ROW_ID)
            .withColumn(_SIZE, F.count(F.lit(1)).over(Window.partitionBy(*qis))))
    counts = rows.agg(F.count(F.lit(1)), F.count_distinct(_SUBSCRIBER),
                      F.count_distinct(F.when(F.col(_SIZE) == 1, F.col(_SUBSCRIBER)))).first()
    sizes = kept.groupBy(*qis).count().groupBy(F.col("count").alias("cell_rows")).count()
    cells, rows_in_cells = bucketed((row["cell_rows"], row["count"]) for row in sizes.collect())
    return SinglingOutResult(
        subscribers_singled_out=int(counts[2]),
        subscribers_released=int(counts[1]),
        rows_released=int(counts[0]),
        cells_by_bucket=cells,
        rows_by_bucket=rows_in_cells,
        quasi_identifiers=tuple(qis),
    )


def inference(spark, source_path: str | os.PathLike, config: ReleaseConfig, schema: Schema, secrets: Secrets,
              period: str, threshold: float = DEFAULT_THRESHOLD) -> InferenceResult:
    """Mark each released row whose application holds at least ``threshold`` of its class's rows; count them.

    The share is compared in integers, app rows * denominator >= numerator * class rows, as 38-digit decimals
    (no float share, no overflow), so 9 of 10 rows meets 0.9 as on the embedded engine. Above one half only
    the majority application can meet it: the marked rows of an inferable class are its correctly inferable ones.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql.types import DecimalType

    fraction = exact_threshold(threshold)
    classed_by, app_released = class_columns(config, schema)
    kept, _ = released_frame(spark, source_path, config, schema, secrets, period)
    truth = _truth(spark, source_path, schema)
    if not app_released:
        released = kept.select(ROW_ID).join(truth, on=ROW_ID).agg(F.count(F.lit(1)), F.count_distinct(_SUBSCRIBER))
        rows_released, subscribers_released = released.first()
        return InferenceResult(float(threshold), 0, int(subscribers_released), int(rows_released), 0, 0, 0, 0, 0,
                               classed_by, app_released)

    keys = [*classed_by, _CLASS]  # a constant key too: with no class column the whole release is one class
    by_class, wide = Window.partitionBy(*keys), DecimalType(38, 0)
    marked = (kept.select(*classed_by, F.lit(0).alias(_CLASS), F.col(schema.app).alias(_APP), ROW_ID)
              .withColumn(_CLASS_ROWS, F.count(F.lit(1)).over(by_class))
              .withColumn(_APP_ROWS, F.count(F.lit(1)).over(Window.partitionBy(*keys, _APP)))
              .withColumn(_INFERRED, F.col(_APP_ROWS).cast(wide) * F.lit(fraction.denominator).cast(wide)
                          >= F.lit(fraction.numerator).cast(wide) * F.col(_CLASS_ROWS).cast(wide))
              .withColumn(_INFERABLE, F.max(_INFERRED).over(by_class))
              .withColumn(_FIRST, F.row_number().over(by_class.orderBy(ROW_ID)) == 1)
              .join(truth, on=ROW_ID))
    # Row figures over every row; class figures over each class's first row, all in one pass.
    inferred, total = F.col(_INFERRED), F.col(_CLASS_ROWS)
    first = F.col(_FIRST)
    first_of_inferable = first & F.col(_INFERABLE)
    (rows_released, subscribers_released, subscribers_inferable, rows_correct, classes, inferable_classes,
     of_one_row, rows_in) = marked.agg(
        F.count(F.lit(1)), F.count_distinct(_SUBSCRIBER), F.count_distinct(F.when(inferred, F.col(_SUBSCRIBER))),
        F.count(F.when(inferred, 1)), F.count(F.when(first, 1)), F.count(F.when(first_of_inferable, 1)),
        F.count(F.when(first_of_inferable & (total == 1), 1)),
        F.coalesce(F.sum(F.when(first_of_inferable, total)), F.lit(0))).first()
    return InferenceResult(
        threshold=float(threshold),
        subscribers_inferable=int(subscribers_inferable),
        subscribers_released=int(subscribers_released),
        rows_released=int(rows_released),
        classes=int(classes),
        inferable_classes=int(inferable_classes),
        inferable_classes_of_one_row=int(of_one_row),
        rows_in_inferable_classes=int(rows_in),
        rows_correctly_inferable=int(rows_correct),
        class_columns=classed_by,
        app_released=app_released,
    )
