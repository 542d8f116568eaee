"""Validation and ingest on Spark: the same counts, the same messages and the same stored file as the embedded engine.

Spark counts what the embedded engine's validation query counts (``raise_on_count_problems`` turns the counts
into the same SourceError), then sorts the rows by cell and by md5 of their input position, the order the
embedded engine stores them in; the executors write them in parts, which the driver streams into the stored file
with row ids 0..n-1 in that order.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pyarrow as pa

from dsh_assets.core.files import DigestBook
from dsh_assets.core.release.schema import Schema
from dsh_assets.core.release.source import (
    ROW_ORDER_SALT,
    SourceSummary,
    Window,
    checked_arrow_schema,
    raise_on_count_problems,
    required_columns,
    write_stored_source,
)
from dsh_assets.core.spark.session import arrow_batches


def _time_column(schema: Schema, arrow_schema: pa.Schema):
    """The time column as a UTC instant: naive timestamps are local times of the declared zone."""
    from pyspark.sql import functions as F

    field_type = arrow_schema.field(schema.time).type
    if pa.types.is_timestamp(field_type) and field_type.tz is None and schema.time_zone:
        return F.to_utc_timestamp(F.col(schema.time), schema.time_zone)
    return F.col(schema.time)


def _micros(instant: dt.datetime) -> int:
    return round((instant - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)).total_seconds() * 1_000_000)


def _instant(micros: int | None) -> dt.datetime | None:
    if micros is None:
        return None
    return dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=micros)


def _counts(frame, schema: Schema, time, window: Window | None) -> tuple:
    """The validation counts in the order raise_on_count_problems reads them."""
    from pyspark.sql import functions as F

    infinity = F.lit(float("inf"))
    terms = [F.count(F.lit(1)), F.count_distinct(F.col(schema.subscriber))]
    for name in schema.measurements:
        value = F.col(name).cast("double")
        terms += [F.count_if((value < 0) & (value != -infinity)), F.count_if(F.isnan(value)),
                  F.count_if(F.abs(value) == infinity)]
    terms += [F.count_if(F.col(name).isNull()) for name in required_columns(schema)]
    micros = F.unix_micros(time)
    outside = ((micros < _micros(window[0])) | (micros >= _micros(window[1]))) if window else F.lit(False)
    terms += [F.count_if(outside), F.min(F.when(outside, micros)), F.max(F.when(outside, micros))]
    counts = tuple(frame.agg(*terms).first())
    return (*counts[:-2], _instant(counts[-2]), _instant(counts[-1]))


def validate_source(spark, path: str | os.PathLike, schema: Schema, window: Window | None = None) -> SourceSummary:
    """validate_source of the embedded engine, counted by Spark: SourceError with the same message, else a summary."""
    arrow_schema = checked_arrow_schema(path, schema)
    frame = spark.read.parquet(str(path))
    counts = _counts(frame, schema, _time_column(schema, arrow_schema), window)
    raise_on_count_problems(path, schema, window, counts)
    apps = sorted(row[0] for row in frame.select(schema.app).distinct().collect())
    return SourceSummary(rows=counts[0], subscribers=counts[1], apps=tuple(apps))


def ingest_source(spark, path: str | os.PathLike, out_path: str | os.PathLike, schema: Schema,
                  window: Window | None = None, *, book: DigestBook) -> SourceSummary:
    """Validate on Spark, then store the rows in the embedded engine's order: by cell, then by md5 of the input
    position (the file's row index), with row ids 0..n-1 (see core.release.source.ingest_source)."""
    from pyspark.sql import functions as F

    summary = validate_source(spark, path, schema, window)
    time = _time_column(schema, checked_arrow_schema(path, schema))
    frame = spark.read.parquet(str(path)).select("*", F.col("_metadata.row_index").alias("__input_row"))
    columns = [time.alias(name) if name == schema.time else F.col(name) for name in schema.columns]
    shuffle = F.md5(F.concat(F.lit(ROW_ORDER_SALT), F.col("__input_row").cast("string")))
    ordered = frame.orderBy(*[time if name == schema.time else F.col(name) for name in schema.categorical_qis],
                            shuffle).select(*columns)
    write_stored_source(arrow_batches(ordered, Path(out_path).parent), out_path, schema, summary, book)
    return summary
