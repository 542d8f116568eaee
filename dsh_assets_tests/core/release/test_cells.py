"""The released cell, in its two forms: Arrow's coarsening by hand, and DuckDB's SQL giving the same cells."""

import dataclasses
import datetime as dt

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from dsh_assets.core.release import cells
from dsh_assets.core.release.configs import load_configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets_tests.tables import T0

SCHEMA = load_schema()
CONFIGS = load_configs(schema=SCHEMA)
C15, C17 = CONFIGS["c15_window_k5_noise5"], CONFIGS["c17_hour_groups_k5_noise10"]
QUOTED_GROUPS = dataclasses.replace(C17, id="quoted", app_groups=(("Kid's", ("Gaming", "IM")), ("Transfer", ("VPN",))))
"""A group name SQL must quote, and most apps in no group."""


def test_an_hour_release_floors_each_time_to_its_hour_and_a_window_release_keeps_it():
    times = pa.array([T0, T0 + dt.timedelta(minutes=59, seconds=59, microseconds=999_999),
                      T0 + dt.timedelta(minutes=70)], pa.timestamp("us", tz="UTC"))
    assert cells.coarsen_time(times, C17).to_pylist() == [T0, T0, T0 + dt.timedelta(hours=1)]
    assert cells.coarsen_time(times, C15).equals(times)


def test_a_grouped_release_shows_each_apps_group_and_an_ungrouped_one_the_app():
    apps = pa.array(["Gaming", "IM", "VPN", "Streaming"])
    assert cells.coarsen_app(apps, C17).to_pylist() == ["Media", "Messaging", "Transfer", "Media"]
    assert cells.coarsen_app(apps, C15).equals(apps)


@pytest.mark.parametrize("config", [C15, C17, QUOTED_GROUPS], ids=lambda config: config.id)
def test_the_sql_cell_is_the_arrow_cell(config):
    """Every app of the packaged groups and one of none (NULL in both forms), times on and off the hour, and column
    names SQL must quote: a space, a double quote."""
    schema = dataclasses.replace(SCHEMA, time="time start", province='region "fi"')
    apps = sorted(C17.app_group_of()) + ["Pinball"]
    table = pa.table({schema.time: pa.array([T0 + dt.timedelta(minutes=7 * i) for i in range(len(apps))],
                                            pa.timestamp("us", tz="UTC")),
                      schema.province: ["Uusimaa", "Lappi"] * (len(apps) // 2),
                      schema.app: apps, schema.radio: ["5G", "4G"] * (len(apps) // 2)})
    connection = duckdb.connect()
    connection.register("t", table)
    in_sql = connection.sql(f"SELECT {', '.join(cells.cell_expressions(config, schema))} FROM t").fetchall()
    in_arrow = zip(cells.coarsen_time(table.column(schema.time), config).to_pylist(),
                   table.column(schema.province).to_pylist(),
                   cells.coarsen_app(table.column(schema.app), config).to_pylist(),
                   table.column(schema.radio).to_pylist())
    assert in_sql == list(in_arrow)


@pytest.mark.parametrize("session_zone", ["UTC", "Asia/Kolkata"])
def test_the_sql_hour_is_the_released_hour_in_any_session_zone(session_zone):
    """The SQL cell (plan, pairs, attacks) and the released column (pyarrow) floor to the same UTC hours, also
    before 1970, on the hour and a microsecond either side, and in a session whose zone is not whole hours."""
    hours = np.arange(-30, 30, dtype=np.int64) * 3_600_000_000
    micros = np.concatenate([hours - 1, hours, hours + 1, np.random.default_rng(9).integers(-2**60, 2**60, 1000)
                             // 1000])
    times = pa.array(micros, pa.timestamp("us", tz="UTC"))
    connection = duckdb.connect()
    connection.execute(f"SET TimeZone = '{session_zone}'")
    connection.register("t", pa.table({"time_start": times}))
    expression = cells.cell_expressions(C17, SCHEMA)[0]
    in_sql = connection.sql(f"SELECT {expression} AS hour FROM t").to_arrow_table().column("hour")
    assert in_sql.cast(pa.int64()).to_pylist() == \
        cells.coarsen_time(times, C17).cast(pa.int64()).to_pylist()
