"""Streaming a sorted Spark frame to the driver through parts the executors write: order kept, nothing left."""

import datetime as dt

import pyarrow as pa
import pytest

from dsh_assets.core.spark.session import arrow_batches

pytestmark = pytest.mark.spark


def test_a_sorted_frame_streams_back_in_order_across_partitions_and_leaves_no_parts(spark, tmp_path):
    from pyspark.sql import functions as F

    keys = spark.range(0, 5000, numPartitions=7).select((F.col("id") * 7919 % 5000).alias("key"))  # shuffled 0..4999
    rows = keys.select("key", F.timestamp_micros(F.col("key") * 1_000_003).alias("at"))
    ordered = rows.repartitionByRange(5, "key").sortWithinPartitions("key")
    table = pa.Table.from_batches(list(arrow_batches(ordered, tmp_path)))
    assert table.column("key").to_pylist() == list(range(5000))
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    assert table.schema.field("at").type == pa.timestamp("us", "UTC")
    assert table.column("at").to_pylist() == [epoch + dt.timedelta(microseconds=key * 1_000_003) for key in range(5000)]
    assert list(tmp_path.iterdir()) == []


def test_an_abandoned_stream_removes_its_parts(spark, tmp_path):
    stream = arrow_batches(spark.range(0, 300_000, numPartitions=3).orderBy("id"), tmp_path)
    next(stream)
    assert len(list(tmp_path.iterdir())) == 1
    stream.close()
    assert list(tmp_path.iterdir()) == []
