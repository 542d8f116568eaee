"""The release on Spark: the embedded engine's rows and values, in its order, computed where the data is.

Spark reads the stored source, applies the embedded engine's RowTransform to each Arrow batch (mapInArrow:
coarsening, noise keyed by seed, configuration, period, column and row id, alias), counts the released cells,
withholds the rows of cells under k and sorts the rest by cell and by the keyed order word, which is how the
embedded plan orders them. The executors write the sorted rows in parts; the driver streams them into the same fixed-row-group writer.
A release that moves values between rows (shuffle, microaggregation, rank swapping) has them moved and noised on the
driver by the embedded engine's ``ValueStage``, from the stored source and the release's plan, as the rows stream in
release order: the same code, so the same bytes.
"""

from __future__ import annotations

import os
from pathlib import Path
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dsh_assets.core.files import DigestBook
from dsh_assets.core.release.cells import coarsen_app, coarsen_time
from dsh_assets.core.release.configs import ReleaseConfig
from dsh_assets.core.release.schema import ROW_ID, Schema
from dsh_assets.core.release.transform import (
    RowTransform,
    check_app_coverage,
    noisy_columns,
    order_key,
    order_words,
    released_schema,
    stored_plan,
    value_stage,
    write_release_file,
)
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.spark.session import arrow_batches

_CELL = ("__cell_time", "__cell_province", "__cell_app", "__cell_radio")
_ORDER_WORD = "__order_word"


@dataclass(frozen=True)
class ReleaseCounts:
    """The row and cell counts a release records (the embedded engine's ReleasePlan has the same properties)."""

    rows_in: int
    rows_released: int
    cells_withheld: int


def _maxima(frame, columns: list[str]) -> dict[str, float]:
    """Per-column maximum of the source, as column_maxima computes it (an all-null column: 0.0)."""
    from pyspark.sql import functions as F

    if not columns:
        return {}
    values = frame.agg(*[F.max(F.col(name).cast("double")) for name in columns]).first()
    return {name: 0.0 if value is None else float(value) for name, value in zip(columns, values)}


def _batch_function(rows: RowTransform, key: np.ndarray, output: pa.Schema):
    """The function mapInArrow runs on each partition's batches: released columns, the cell, the order word."""
    schema, config = rows.schema, rows.config

    def released(batches):
        aliaser = rows.aliaser()
        for batch in batches:
            row_ids = batch.column(ROW_ID).to_numpy()
            cell = [coarsen_time(batch.column(schema.time), config), batch.column(schema.province),
                    coarsen_app(batch.column(schema.app), config), batch.column(schema.radio)]
            words = pa.array(order_words(key, row_ids).astype(np.int64))
            columns = [*rows.released_columns(batch, aliaser), *cell, pa.array(row_ids), words]
            yield pa.RecordBatch.from_arrays(columns, schema=output)

    return released


def released_frame(spark, source_path: str | os.PathLike, config: ReleaseConfig, schema: Schema, secrets: Secrets,
                   period: str):
    """The released rows as a Spark frame, unordered, with their row ids and released cells; and the size of every
    cell of the source (released or withheld), collected on the driver."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    source = spark.read.parquet(str(source_path))
    rows = RowTransform.of(config, schema, secrets, period, _maxima(source, noisy_columns(config, schema)))
    output = pa.schema([*rows.target, pa.field(_CELL[0], pa.timestamp("us", "UTC")),
                        *[pa.field(name, pa.string()) for name in _CELL[1:]],
                        pa.field(ROW_ID, pa.int64()), pa.field(_ORDER_WORD, pa.int64())])
    function = _batch_function(rows, order_key(secrets, config, period), output)
    cells = list(_CELL)
    read = dict.fromkeys([*rows.read_columns, *schema.categorical_qis])
    noised = source.select(*read).mapInArrow(function, from_arrow_schema(output))
    cell_sizes = noised.groupBy(*cells).count()
    sizes = [row[0] for row in cell_sizes.select("count").collect()]
    kept = noised
    if config.cell_minimum:
        kept = noised.join(F.broadcast(cell_sizes.filter(F.col("count") >= config.cell_minimum).select(*cells)),
                           on=cells)
    return kept, sizes


def release(spark, source_path: str | os.PathLike, out_path: str | os.PathLike, config: ReleaseConfig,
            schema: Schema, secrets: Secrets, apps_in_source, *, period: str,
            book: DigestBook) -> ReleaseCounts:
    """Write the release of ``config`` for ``period`` atomically, as core.release.transform.release would."""
    check_app_coverage(config, apps_in_source)
    kept, sizes = released_frame(spark, source_path, config, schema, secrets, period)
    target = released_schema(config, schema)
    ordered = kept.orderBy(*_CELL, _ORDER_WORD, ROW_ID).select(*target.names)
    with value_stage(source_path, stored_plan(source_path, config, schema, secrets, period), config, schema, secrets,
                     period) as stage:
        write_release_file(arrow_batches(ordered, Path(out_path).parent), out_path, target, stage, book=book)
    released = [n for n in sizes if n >= config.cell_minimum]
    return ReleaseCounts(rows_in=sum(sizes), rows_released=sum(released), cells_withheld=len(sizes) - len(released))
