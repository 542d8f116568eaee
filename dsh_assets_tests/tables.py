"""Tiny source tables built row by row, so each test's answer can be worked out by hand."""

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core.schema import Schema, load_schema

T0 = dt.datetime(2026, 11, 20, 8, 0, tzinfo=dt.timezone.utc)


def row(subscriber: str = "358400000001", minute: int = 0, province: str = "Uusimaa", app: str = "Gaming",
        radio: str = "5G", station: int = 101, value: float = 10.0, **measurements) -> dict:
    """One source row; every measurement is ``value`` unless given by name."""
    schema = load_schema()
    record = {
        schema.identifiers[0]: subscriber,
        schema.identifiers[1]: "24405" + subscriber[-10:],
        schema.identifiers[2]: "35" + subscriber[-13:].rjust(13, "0"),
        schema.station: station,
        schema.time: T0 + dt.timedelta(minutes=minute),
        schema.province: province,
        schema.app: app,
        schema.radio: radio,
    }
    record.update({name: value for name in schema.measurements})
    record.update(measurements)
    return record


def table(rows: list[dict], schema: Schema | None = None) -> pa.Table:
    schema = schema or load_schema()
    return pa.Table.from_pylist(rows, schema=schema.arrow_schema())


def write(path, rows: list[dict]) -> str:
    pq.write_table(table(rows), path)
    return str(path)
