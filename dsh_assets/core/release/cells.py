"""The released cell of a row: its (time, province, app, radio) after the configuration's coarsening.

One definition in two forms: on Arrow columns (the release's batches, Spark's batches, anonymeter's view of the
source) and in DuckDB SQL (every query that groups by released cell). Both must give the same cells.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from dsh_assets.core.duck import sql_identifier, sql_literal
from dsh_assets.core.release.configs import ReleaseConfig
from dsh_assets.core.release.schema import Schema


def coarsen_time(column: pa.Array | pa.ChunkedArray, config: ReleaseConfig):
    if config.time_coarsen == "hour":
        return pc.floor_temporal(column, unit="hour")
    return column


def coarsen_app(column: pa.Array | pa.ChunkedArray, config: ReleaseConfig):
    if not config.app_groups:
        return column
    group_of = config.app_group_of()
    apps = pa.array(sorted(group_of))
    groups = pa.array([group_of[app] for app in apps.to_pylist()])
    return pc.take(groups, pc.index_in(column, value_set=apps))


def cell_expressions(config: ReleaseConfig, schema: Schema) -> list[str]:
    """The released (time, province, app, radio) cell in DuckDB SQL, as coarsen_time/coarsen_app make it."""
    time = sql_identifier(schema.time)
    if config.time_coarsen == "hour":
        # UTC hours whatever the session's zone, as floor_temporal makes them; date_trunc goes through ICU's
        # calendar for a TIMESTAMPTZ (three times the cost) and through the session's zone.
        time = f"time_bucket(INTERVAL 1 hour, {time})"
    app = sql_identifier(schema.app)
    if config.app_groups:
        branches = " ".join(f"WHEN {sql_literal(a)} THEN {sql_literal(g)}"
                            for a, g in sorted(config.app_group_of().items()))
        app = f"CASE {app} {branches} END"
    return [time, sql_identifier(schema.province), app, sql_identifier(schema.radio)]
