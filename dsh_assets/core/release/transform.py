"""Apply a release configuration to an ingested source: the anonymised table.

Two streaming passes in file order. The first reads only the four cell columns and counts rows
per (time, province, app, radio) cell after coarsening; the second reads every kept column in
batches, withholds rows of small cells, jitters measurements with counter-based noise keyed by
the stable row id, adds the keyed alias, and writes fixed-size row groups. Row order is the
source's, so the same inputs give the same bytes whatever the batch size.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsh_assets.core import duck
from dsh_assets.core.duck import sql_literal
from dsh_assets.core.release.configs import ConfigError, ReleaseConfig
from dsh_assets.core.files import BackgroundWriter, FixedRowGroupWriter, atomic_path
from dsh_assets.core.release.noise import column_key, jitter
from dsh_assets.core.release.schema import ROW_ID, Schema
from dsh_assets.core.secrets import Secrets

ALIAS_COLUMN = "subscriber_alias"
DEFAULT_BATCH_ROWS = 131_072


@dataclass(frozen=True)
class ReleasePlan:
    """Which source rows a release keeps, from the cell counts; also the evaluator's truth."""

    keep: np.ndarray
    """Boolean per source row (indexed by row id)."""
    cell_sizes: np.ndarray
    """Rows per cell, for every cell present in the source."""
    k: int

    @property
    def rows_in(self) -> int:
        return len(self.keep)

    @property
    def rows_released(self) -> int:
        return int(self.keep.sum())

    @property
    def cells_withheld(self) -> int:
        return int((self.cell_sizes < self.k).sum())

    @property
    def min_released_cell(self) -> int | None:
        kept = self.cell_sizes[self.cell_sizes >= self.k]
        return int(kept.min()) if len(kept) else None


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


def check_app_coverage(config: ReleaseConfig, apps_in_source) -> None:
    unmapped = config.unmapped_apps(set(apps_in_source))
    if unmapped:
        raise ConfigError(
            f"release configuration {config.id!r}: app grouping {config.app_coarsen!r} does not cover "
            f"{len(unmapped)} app(s) present in the source: {', '.join(unmapped)}"
        )


def cell_expressions(config: ReleaseConfig, schema: Schema) -> list[str]:
    """The released (time, province, app, radio) cell in DuckDB SQL, as coarsen_time/coarsen_app make it."""
    time = f'"{schema.time}"'
    if config.time_coarsen == "hour":
        time = f"date_trunc('hour', {time})"
    app = f'"{schema.app}"'
    if config.app_groups:
        branches = " ".join(f"WHEN {sql_literal(a)} THEN {sql_literal(g)}"
                            for a, g in sorted(config.app_group_of().items()))
        app = f"CASE {app} {branches} END"
    return [time, f'"{schema.province}"', app, f'"{schema.radio}"']


def plan_release(source_path: str | os.PathLike, config: ReleaseConfig, schema: Schema, rows: int) -> ReleasePlan:
    """Cell sizes and the keep mask (every row kept when k is 0), streamed by DuckDB from Parquet."""
    keep = np.ones(rows, dtype=bool)
    if config.k == 0:
        return ReleasePlan(keep=keep, cell_sizes=np.empty(0, dtype=np.int64), k=0)
    cell = ", ".join(f"{expression} AS c{i}" for i, expression in enumerate(cell_expressions(config, schema)))
    keys = ", ".join(f"c{i}" for i in range(4))
    with duck.connect() as connection:
        connection.execute(
            f"CREATE TEMP TABLE cells AS SELECT {keys}, count(*) AS n "
            f"FROM (SELECT {cell} FROM read_parquet(?)) GROUP BY ALL",
            [str(source_path)],
        )
        cell_sizes = connection.execute("SELECT n FROM cells").fetchnumpy()["n"].astype(np.int64)
        withheld = connection.execute(
            f"SELECT r FROM (SELECT {cell}, {ROW_ID} AS r FROM read_parquet(?)) "
            f"SEMI JOIN (SELECT * FROM cells WHERE n < ?) USING ({keys})",
            [str(source_path), config.k],
        ).fetchnumpy()["r"]
    keep[withheld.astype(np.int64)] = False
    return ReleasePlan(keep=keep, cell_sizes=cell_sizes, k=config.k)


def released_schema(config: ReleaseConfig, schema: Schema) -> pa.Schema:
    dropped = set(config.dropped_columns(schema))
    fields = [field for field in schema.arrow_schema() if field.name not in dropped]
    if config.pseudonym:
        fields.insert(0, pa.field(ALIAS_COLUMN, pa.string()))
    return pa.schema(fields)


class _Aliaser:
    """HMAC-SHA256 alias per subscriber, cached so each subscriber is hashed once per release."""

    def __init__(self, key: bytes):
        self._key = key
        self._cache: dict[str, str] = {}

    def alias(self, value: str) -> str:
        alias = self._cache.get(value)
        if alias is None:
            digest = hmac.new(self._key, value.encode(), hashlib.sha256).hexdigest()
            alias = self._cache[value] = "s_" + digest[:20]
        return alias

    def __call__(self, column: pa.Array) -> pa.Array:
        encoded = pc.dictionary_encode(column)
        aliases = pa.array([self.alias(value) for value in encoded.dictionary.to_pylist()], pa.string())
        return pc.take(aliases, encoded.indices)


def column_maxima(source_path: str | os.PathLike, columns) -> dict[str, float]:
    """Per-column maximum of the source (DuckDB answers from Parquet statistics where it can)."""
    if not columns:
        return {}
    select = ", ".join(f'max("{name}")::DOUBLE' for name in columns)
    with duck.connect() as connection:
        values = connection.execute(f"SELECT {select} FROM read_parquet(?)", [str(source_path)]).fetchone()
    return {name: 0.0 if value is None else value for name, value in zip(columns, values)}


def release(
    source_path: str | os.PathLike,
    out_path: str | os.PathLike,
    config: ReleaseConfig,
    schema: Schema,
    secrets: Secrets,
    apps_in_source,
    batch_rows: int = DEFAULT_BATCH_ROWS,
) -> ReleasePlan:
    """Write the release of ``config`` atomically; a refused configuration writes nothing."""
    check_app_coverage(config, apps_in_source)
    # pre_buffer=False: pyarrow's default read-ahead holds most of the file (1.4 GB at 11M rows).
    parquet = pq.ParquetFile(source_path, pre_buffer=False)
    plan = plan_release(source_path, config, schema, parquet.metadata.num_rows)
    target = released_schema(config, schema)
    noisy = [name for name in schema.measurements if name in target.names] if config.noise_scale > 0 else []
    maxima = column_maxima(source_path, noisy)
    keys = {name: column_key(secrets.noise_seed, name) for name in noisy}
    aliaser = _Aliaser(secrets.alias_key) if config.pseudonym else None
    read_columns = [name for name in target.names if name != ALIAS_COLUMN] + [ROW_ID]
    if aliaser and schema.subscriber not in read_columns:
        read_columns.append(schema.subscriber)
    dictionary_columns = [f.name for f in target if pa.types.is_string(f.type) and f.name != ALIAS_COLUMN]
    with (atomic_path(out_path) as temporary,
          FixedRowGroupWriter(temporary, target, dictionary_columns) as parquet_writer,
          BackgroundWriter(parquet_writer) as writer):
        for batch in parquet.iter_batches(batch_size=batch_rows, columns=read_columns):
            # Noise the whole batch (consecutive row ids: a slice of the stream), then filter once.
            row_ids = batch.column(ROW_ID).to_numpy()
            columns = []
            for field in target:
                if field.name == ALIAS_COLUMN:
                    columns.append(aliaser(batch.column(schema.subscriber)))
                elif field.name == schema.time:
                    columns.append(coarsen_time(batch.column(field.name), config))
                elif field.name == schema.app:
                    columns.append(coarsen_app(batch.column(field.name), config))
                elif field.name in keys:
                    columns.append(jitter(batch.column(field.name), keys[field.name], row_ids,
                                          config.noise_scale, maxima[field.name]))
                else:
                    columns.append(batch.column(field.name))
            out = pa.RecordBatch.from_arrays(columns, schema=target)
            keep = plan.keep[row_ids]
            writer.write(out if keep.all() else out.filter(pa.array(keep)))
    return plan
