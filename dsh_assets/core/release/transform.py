"""Apply a release configuration to an ingested source: the anonymised table.

The plan reads only the four cell columns: it counts rows per released (time, province, app,
radio) cell after coarsening, marks rows of cells under k as withheld, and fixes the release's
row order: released cells in sorted order and, within a cell, rows in the order of a keyed
per-release word of their row id. Two releases of one source therefore list a cell's rows in
unrelated orders, and position tells an attacker nothing beyond the released cell (a row's
position in the source, which would reveal its ten-minute window inside a released hour, is gone).

The write streams the source in batches: rows of small cells withheld, measurements jittered with
counter-based noise keyed by (seed, configuration, period, column) and the stable row id, the
keyed alias added. Where every released cell is one run of the stored source (the source is stored in
cell order, and a configuration that coarsens neither time nor app keeps its cells), the rows are
put in release order in memory as they stream: a batch's rows are written once every earlier
position has arrived, and only the cell straddling a batch boundary waits. Otherwise (coarsened
cells gather rows from all over the source) the rows go to scratch buckets of their positions
and are put in order a bucket at a time (``tables.in_position_order``, as the ingest does): no
sort carries the columns. Either way the rows are written in fixed-size row groups, so the same
inputs give the same bytes whatever the batch size and whichever path.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsh_assets.core import duck
from dsh_assets.core.columns import StoredColumns
from dsh_assets.core.duck import sql_identifier
from dsh_assets.core.files import DigestBook, parquet_file
from dsh_assets.core.release.cells import cell_expressions, coarsen_app, coarsen_time
from dsh_assets.core.release.configs import ConfigError, ReleaseConfig
from dsh_assets.core.release.digest import CONTENT_DIGEST_KIND, ContentDigest
from dsh_assets.core.release.guards import listed_without_identifiers
from dsh_assets.core.release.noise import jitter, jitter_values, noise_key, stream_key, stream_words
from dsh_assets.core.release.schema import ROW_ID, Schema
from dsh_assets.core.release.values import (
    Coarsening, cell_runs, moved_origins, positions_in_file, released_measurements, run_chunks, settled_columns,
    stable_order,
)
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.tables import in_position_order, row_pool, take_rows

ALIAS_COLUMN = "subscriber_alias"
DEFAULT_BATCH_ROWS = 131_072
RELEASE_BUCKET_ROWS = 1 << 18
"""Positions per scratch bucket of a release put in order: a release's batches come nearly in order, each spanning
few buckets, so a quarter of the ingest's buckets costs no time and holds a quarter of the rows (c23 at 11M rows:
the write peaked at 757 MB against 1,174 MB with the ingest's)."""
_CELL_BITS = 24
"""Released cells are numbered in 24 bits (16M cells) and the keyed order word keeps 40 bits."""


@dataclass(frozen=True)
class ReleasePlan:
    """Which source rows a release keeps, from the cell counts; also the evaluator's truth."""

    keep: np.ndarray
    """Boolean per source row (indexed by row id)."""
    cell_sizes: np.ndarray
    """Rows per cell, for every cell present in the source."""
    k: int
    order: np.ndarray
    """The source row id of each released row, in release order: the evaluator's truth of position (of
    ``row_id_dtype``: a plan stays cached for the whole run, and 32-bit ids halve it)."""
    period: str
    """The release period the order (and the noise) is keyed by."""
    contiguous: bool = False
    """True when every released cell is one run of consecutive row ids, the cells in release order (a source
    stored in cell order and a configuration that coarsens nothing): the release order then only permutes rows
    within runs, and the write reorders them in memory as it streams."""
    origins: Mapping[str, np.ndarray] = field(default_factory=dict)
    """Per measurement whose values an operation moves between rows: the source row id whose value each release
    position holds (absent: the row's own, ``order``)."""

    @property
    def rows_in(self) -> int:
        return len(self.keep)

    @property
    def rows_released(self) -> int:
        return int(self.keep.sum())

    @property
    def cells_withheld(self) -> int:
        return int((self.cell_sizes < self.k).sum())

    def position_of_row(self) -> np.ndarray:
        """Per source row id, its position in the release (-1 where withheld)."""
        return positions_of_rows(self.order, len(self.keep))

    @property
    def moves_values(self) -> bool:
        """Whether some measurement's values are held by other rows than their own (``origins``)."""
        return bool(self.origins)

    def value_origins(self, positions: np.ndarray, column: str) -> np.ndarray:
        """The source row whose value of ``column`` the release holds at each position: the evaluator's truth
        that follows values to the rows that hold them."""
        origins = self.origins.get(column, self.order)
        return np.asarray(origins[np.asarray(positions, dtype=np.int64)])

    @property
    def min_released_cell(self) -> int | None:
        """The smallest released cell where k is configured; None without k."""
        if self.k == 0:
            return None
        kept = self.cell_sizes[self.cell_sizes >= self.k]
        return int(kept.min()) if len(kept) else None


def check_app_coverage(config: ReleaseConfig, apps_in_source) -> None:
    unmapped = config.unmapped_apps(set(apps_in_source))
    if unmapped:
        raise ConfigError(
            f"release configuration {config.id!r}: app grouping {config.app_coarsen!r} does not cover "
            f"{len(unmapped)} app(s) present in the source: {listed_without_identifiers(unmapped)}"
        )


def row_id_dtype(rows: int) -> np.dtype:
    """The narrowest signed integer that holds every row id and position of a source of ``rows`` rows."""
    return np.dtype(np.int32 if rows <= np.iinfo(np.int32).max else np.int64)


def positions_of_rows(order: np.ndarray, rows: int) -> np.ndarray:
    """The inverse of a release order (the source row id at each position): per source row id of a source of
    ``rows`` rows, its position, -1 where the release withholds it."""
    dtype = row_id_dtype(rows)
    position = np.full(rows, -1, dtype=dtype)
    position[order] = np.arange(len(order), dtype=dtype)
    return position


def order_key(secrets: Secrets, config: ReleaseConfig, period: str) -> np.ndarray:
    """The key of the release's row order: secret, and its own for each configuration and period."""
    return stream_key(secrets.noise_seed, "row-order", config.id, period)


def order_words(key: np.ndarray, row_ids: np.ndarray) -> np.ndarray:
    """Each row's place within its released cell: the top 40 bits of its keyed word (ties go to the lower row id)."""
    return stream_words(key, row_ids) >> np.uint64(_CELL_BITS)


_ROWS, _LO, _HI = "__rows", "__lo", "__hi"
"""Column names of the source's own cells (rows, first and last row id) in ``plan_release``."""


def plan_release(source_path: str | os.PathLike, config: ReleaseConfig, schema: Schema, rows: int,
                 secrets: Secrets, period: str) -> ReleasePlan:
    """Which rows the release keeps, in which order, and where its value operations move values (the truth)."""
    plan = _plan_rows(source_path, config, schema, rows, secrets, period)
    if not config.moves_values:
        return plan
    starts = cell_runs(plan.cell_sizes, plan.k)
    origins = moved_origins(source_path, plan.order, starts, config, schema, secrets, period)
    return replace(plan, origins=StoredColumns(origins, "dsh-origins-"))


def _plan_rows(source_path: str | os.PathLike, config: ReleaseConfig, schema: Schema, rows: int,
               secrets: Secrets, period: str) -> ReleasePlan:
    """Cell sizes, the keep mask (every row kept when k is 0) and the row order, streamed by DuckDB from Parquet.

    The released cells are counted from the source's own cells (its raw time, province, app and radio): a
    stored source is ordered by those, so each is a run of row ids, and a coarser released cell (hours,
    app groups) is a union of runs whose row ids need no per-row join to find."""
    keys = ", ".join(f"c{i}" for i in range(4))
    raw = ", ".join(sql_identifier(name) for name in schema.categorical_qis)
    cell = ", ".join(f"{expression} AS c{i}" for i, expression in enumerate(cell_expressions(config, schema)))
    with duck.connect() as connection:
        connection.execute(
            f"CREATE TEMP TABLE source_cells AS SELECT {raw}, count(*) AS {_ROWS}, min({ROW_ID}) AS {_LO}, "
            f"max({ROW_ID}) AS {_HI} FROM read_parquet(?) GROUP BY ALL", [str(source_path)])
        connection.execute(
            f"CREATE TEMP TABLE cells AS SELECT row_number() OVER (ORDER BY {keys}) - 1 AS cell, * FROM ("
            f"SELECT {keys}, sum({_ROWS})::BIGINT AS n, min({_LO}) AS lo, max({_HI}) AS hi "
            f"FROM (SELECT {cell}, {_ROWS}, {_LO}, {_HI} FROM source_cells) GROUP BY ALL)")
        cells = connection.execute("SELECT n, lo, hi FROM cells ORDER BY cell").fetchnumpy()
        cell_sizes = cells["n"].astype(np.int64)
        if len(cell_sizes) >= 1 << _CELL_BITS:
            raise ValueError(f"{len(cell_sizes)} released cells: more than the row order can number")
        key, k = order_key(secrets, config, period), config.cell_minimum
        if _are_runs(cell_sizes, cells["lo"], cells["hi"], rows):
            # Each released cell one run of row ids, in cell order: no per-row cell at all.
            return ReleasePlan(keep=np.repeat(cell_sizes >= k, cell_sizes), cell_sizes=cell_sizes, k=k,
                               order=_order_of_runs(cell_sizes, k, key), period=period, contiguous=True)
        runs = connection.execute(
            f"SELECT {_ROWS}, {_LO}, {_HI}, cell FROM (SELECT {cell}, {_ROWS}, {_LO}, {_HI} FROM source_cells) "
            f"JOIN cells USING ({keys}) ORDER BY {_LO}").fetchnumpy()
        if _are_runs(runs[_ROWS].astype(np.int64), runs[_LO], runs[_HI], rows):
            cell_of = np.repeat(runs["cell"].astype(np.uint64), runs[_ROWS].astype(np.int64))
        else:  # a source in another order (not one ingest stored): each row's cell by a join
            per_row = connection.execute(
                f"SELECT {ROW_ID} AS r, cell FROM (SELECT {cell}, {ROW_ID} FROM read_parquet(?)) "
                f"JOIN cells USING ({keys})",
                [str(source_path)],
            ).fetchnumpy()
            cell_of = np.empty(rows, dtype=np.uint64)
            cell_of[per_row["r"].astype(np.int64)] = per_row["cell"].astype(np.uint64)
            del per_row
    keep = cell_sizes[cell_of.astype(np.int64)] >= k
    kept = np.flatnonzero(keep)
    order = _ordered(kept, cell_of[kept], key).astype(row_id_dtype(rows))
    return ReleasePlan(keep=keep, cell_sizes=cell_sizes, k=k, order=order, period=period, contiguous=False)


def _are_runs(sizes: np.ndarray, lo: np.ndarray, hi: np.ndarray, rows: int) -> bool:
    """Whether cells (sizes, first and last row id, in this order) tile the row ids 0..rows-1 one run each."""
    lo, hi = lo.astype(np.int64), hi.astype(np.int64)
    return bool(len(sizes) and lo[0] == 0 and hi[-1] == rows - 1 and np.all(hi - lo + 1 == sizes)
                and np.all(lo[1:] == hi[:-1] + 1))



def _ordered(kept: np.ndarray, cell_of_kept: np.ndarray, key: np.ndarray) -> np.ndarray:
    """The kept row ids (ascending) in release order: by released cell, then by their keyed word (ties: lower row
    id)."""
    rank = (cell_of_kept.astype(np.uint64) << np.uint64(64 - _CELL_BITS)) | order_words(key, kept)
    return kept[stable_order(rank)]


def _order_of_runs(cell_sizes: np.ndarray, k: int, key: np.ndarray) -> np.ndarray:
    """_ordered for cells that are consecutive runs of row ids in cell order, a few million rows at a time.

    Cells never straddle a chunk, so each chunk's order is its stretch of the whole order: the same array as
    one global sort, without holding per-row cell numbers, words and ranks for every row at once (at 110M
    rows those were about 5 GB)."""
    starts = np.concatenate([[0], np.cumsum(cell_sizes)])
    released = cell_sizes >= k
    order = np.empty(int(cell_sizes[released].sum()), dtype=row_id_dtype(int(starts[-1])))
    filled = 0
    for first, last in run_chunks(starts):
        sizes = cell_sizes[first:last]
        kept_cell = np.repeat(released[first:last], sizes)
        kept = np.arange(starts[first], starts[last], dtype=np.int64)[kept_cell]
        cell_of_kept = np.repeat(np.arange(first, last, dtype=np.uint64), sizes)[kept_cell]
        order[filled:filled + len(kept)] = _ordered(kept, cell_of_kept, key)
        filled += len(kept)
    return order


@functools.lru_cache(maxsize=2)
def _stored_plan(source_path: Path, stamp: tuple[int, int, int], config: ReleaseConfig, schema: Schema,
                 secrets: Secrets, period: str) -> ReleasePlan:
    return plan_release(source_path, config, schema, pq.ParquetFile(source_path).metadata.num_rows, secrets, period)


def stored_plan(source_path: str | os.PathLike, config: ReleaseConfig, schema: Schema, secrets: Secrets,
                period: str) -> ReleasePlan:
    """plan_release of a stored source, made once per process while the file is unchanged: the release and
    the attack, utility and pair steps of one run all need the same plan (callers must not modify it). Two are
    kept, a pair's: a candidate worker runs one candidate after another, and each plan kept holds 55 MB at 11M
    rows, and its truth of the moves on disk (616 MB for c22)."""
    path = Path(source_path).resolve()
    stat = path.stat()
    return _stored_plan(path, (stat.st_mtime_ns, stat.st_size, stat.st_ino), config, schema, secrets, period)


def released_schema(config: ReleaseConfig, schema: Schema) -> pa.Schema:
    dropped = set(config.dropped_columns(schema))
    fields = [field for field in schema.arrow_schema() if field.name not in dropped]
    if config.pseudonym:
        fields.insert(0, pa.field(ALIAS_COLUMN, pa.string()))
    return pa.schema(fields)


ALIAS_PREFIX = "s_"
ALIAS_HEX_DIGITS = 20
_ALIAS_BYTES = len(ALIAS_PREFIX) + ALIAS_HEX_DIGITS


class _Aliaser:
    """HMAC-SHA256 alias per subscriber, each subscriber hashed once per release.

    The stored order is by cell, so a batch holds most of its subscribers once and nearly all were seen in
    earlier batches: a dictionary lookup per row in Python was most of a pseudonymous release's time. Instead
    a batch's distinct values find their aliases by their md5 (computed by DuckDB) in a sorted array of the md5s
    seen so far, all vectorised, and only new values are hashed in Python. The md5's first 64 bits are searched
    and its last 64 bits must match too: a value whose first half another value already holds is aliased
    directly, every time, so only two subscriber ids with one and the same md5 could share an alias (as two
    whose HMACs agree in their first 80 bits already do)."""

    def __init__(self, key: bytes):
        self._inner, self._outer = _hmac_sha256_states(key)
        self._connection = None
        self._high = np.empty(0, dtype=np.uint64)
        """The first 64 bits of the md5 of every value seen, sorted."""
        self._low = np.empty(0, dtype=np.uint64)
        self._slots = np.empty(0, dtype=np.int64)
        """Each sorted md5's row in _aliases."""
        self._aliases = np.empty((1024, _ALIAS_BYTES), dtype=np.uint8)
        self._count = 0

    def alias(self, value: str) -> str:
        inner = self._inner.copy()
        inner.update(value.encode())
        outer = self._outer.copy()
        outer.update(inner.digest())
        return ALIAS_PREFIX + outer.hexdigest()[:ALIAS_HEX_DIGITS]

    def __call__(self, column: pa.Array) -> pa.Array:
        encoded = pc.dictionary_encode(column)
        values = encoded.dictionary
        high, low = self._md5_halves(values)
        slot = np.full(len(values), -1, dtype=np.int64)
        seen = np.zeros(len(values), dtype=bool)
        if self._count:
            # Searching in sorted order walks the sorted array forward (four times as fast as in the values' order).
            order = np.argsort(high)
            at = np.empty(len(high), dtype=np.int64)
            at[order] = np.minimum(np.searchsorted(self._high, high[order]), len(self._high) - 1)
            seen = self._high[at] == high
            same = seen & (self._low[at] == low)
            slot[same] = self._slots[at[same]]
        slot[~seen] = self._add(values.filter(pa.array(~seen)), high[~seen], low[~seen])
        rows = self._aliases[np.maximum(slot, 0)]
        for index in np.flatnonzero(slot < 0):
            rows[index] = np.frombuffer(self.alias(values[int(index)].as_py()).encode(), dtype=np.uint8)
        offsets = np.arange(0, _ALIAS_BYTES * (len(rows) + 1), _ALIAS_BYTES, dtype=np.int32)
        aliases = pa.StringArray.from_buffers(len(rows), pa.py_buffer(offsets), pa.py_buffer(rows))
        return pc.take(aliases, encoded.indices)

    def _md5_halves(self, values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        if self._connection is None:
            self._connection = duck.connect()
        halves = self._connection.from_arrow(pa.table({"v": values})).select(
            "(md5_number(v) >> 64)::UBIGINT AS high, (md5_number(v) & 18446744073709551615::UHUGEINT)::UBIGINT AS low"
        ).fetchnumpy()
        return np.asarray(halves["high"], dtype=np.uint64), np.asarray(halves["low"], dtype=np.uint64)

    def _add(self, values: pa.Array, high: np.ndarray, low: np.ndarray) -> np.ndarray:
        """Alias values not seen before; their rows in _aliases."""
        if not len(values):
            return np.empty(0, dtype=np.int64)
        slots = np.arange(self._count, self._count + len(values), dtype=np.int64)
        if self._count + len(values) > len(self._aliases):
            grown = np.empty((2 * (self._count + len(values)), _ALIAS_BYTES), dtype=np.uint8)
            grown[:self._count] = self._aliases[:self._count]
            self._aliases = grown
        digests = "".join(map(self.alias, values.to_pylist())).encode()
        self._aliases[slots] = np.frombuffer(digests, dtype=np.uint8).reshape(len(values), _ALIAS_BYTES)
        self._count += len(values)
        order = np.argsort(high, kind="stable")
        places = np.searchsorted(self._high, high[order], side="right")
        self._high = np.insert(self._high, places, high[order])
        self._low = np.insert(self._low, places, low[order])
        self._slots = np.insert(self._slots, places, slots[order])
        return slots


def _hmac_sha256_states(key: bytes) -> tuple:
    """SHA-256 after the inner and the outer padded key: HMAC(key, m) = outer(inner(m)), as hmac.new computes it."""
    block = hashlib.sha256().block_size
    if len(key) > block:
        key = hashlib.sha256(key).digest()
    key = key.ljust(block, b"\0")
    return (hashlib.sha256(bytes(byte ^ 0x36 for byte in key)), hashlib.sha256(bytes(byte ^ 0x5C for byte in key)))


def column_maxima(source_path: str | os.PathLike, columns) -> dict[str, float]:
    """Per-column maximum of the source (DuckDB answers from Parquet statistics where it can)."""
    if not columns:
        return {}
    select = ", ".join(f'max("{name}")::DOUBLE' for name in columns)
    with duck.connect() as connection:
        values = connection.execute(f"SELECT {select} FROM read_parquet(?)", [str(source_path)]).fetchone()
    return {name: 0.0 if value is None else value for name, value in zip(columns, values)}


def noisy_columns(config: ReleaseConfig, schema: Schema) -> list[str]:
    """The measurements the row transform jitters: those the release keeps, when it has noise and no value
    operation (a release that moves values is noised after they move, by its ``ValueStage``)."""
    if config.noise_scale <= 0 or config.has_value_operations:
        return []
    return released_measurements(config, schema)


@dataclass(frozen=True)
class ValueStage:
    """The measurement values of a release with value operations, in release order, as it writes them: settled
    (microaggregated), moved between rows (rank swap, shuffle), jittered by exp(Laplace(0, scale)) addressed by the
    release position (so, as the row transform's, the noise does not depend on batches) and clipped to the source's
    column maximum, then coded and rounded (``values.Coarsening``). Made a column at a time and kept on disk
    (``StoredColumns``): at 110M rows, 14 columns of float64 are 12 GB."""

    values: StoredColumns

    @classmethod
    def of(cls, source_path: str | os.PathLike, plan: ReleasePlan, config: ReleaseConfig, schema: Schema,
           secrets: Secrets, period: str) -> "ValueStage | None":
        if not config.has_value_operations:
            return None
        columns = released_measurements(config, schema)
        if set(plan.origins) != (set(columns) if config.moves_values else set()):
            raise ValueError(f"release {config.id!r}: the plan does not hold the truth of its value operations "
                             f"(plan_release makes it)")
        return cls(StoredColumns(_staged_columns(source_path, plan, config, schema, secrets, period, columns),
                                 "dsh-values-"))

    def columns_at(self, positions: np.ndarray | slice) -> dict[str, pa.Array]:
        """Each measurement's released values at these release positions."""
        columns = {}
        for m in self.values:
            taken = self.values.taken(m, positions)
            columns[m] = pa.array(taken, mask=np.isnan(taken))
        return columns

    def staged(self, batch: pa.RecordBatch, first_position: int) -> pa.RecordBatch:
        """A batch of rows in release order from ``first_position`` on, its measurements the staged values."""
        moved = self.columns_at(slice(first_position, first_position + batch.num_rows))
        return pa.RecordBatch.from_arrays([moved.get(name, batch.column(name)) for name in batch.schema.names],
                                          schema=batch.schema)


@contextlib.contextmanager
def value_stage(source_path: str | os.PathLike, plan: ReleasePlan, config: ReleaseConfig, schema: Schema,
                secrets: Secrets, period: str) -> Iterator[ValueStage | None]:
    """``ValueStage.of`` for one write: its files removed when the write ends, whatever its outcome."""
    stage = ValueStage.of(source_path, plan, config, schema, secrets, period)
    try:
        yield stage
    finally:
        if stage is not None:
            stage.values.remove()


def _staged_columns(source_path, plan: ReleasePlan, config: ReleaseConfig, schema: Schema, secrets: Secrets,
                    period: str, columns: list[str]) -> Iterator[tuple[str, np.ndarray]]:
    """ValueStage's columns, one at a time."""
    starts, at = cell_runs(plan.cell_sizes, plan.k), positions_in_file(source_path, plan.order)
    position = plan.position_of_row() if plan.origins else None
    maxima = column_maxima(source_path, columns) if config.noise_scale > 0 else {}
    coarsen = Coarsening.of(source_path, at, starts, config, schema)
    for m, values in settled_columns(source_path, at, starts, config, columns):
        if m in plan.origins:  # each position takes the value of the source row its truth names
            values = values[position[plan.origins[m]]]
        if m in maxima:
            jitter_values(values, noise_key(secrets.noise_seed, config.id, period, m), config.noise_scale, maxima[m],
                          out=values)
        yield m, coarsen(values)
        del values  # not held while the next column is read


@dataclass(frozen=True)
class RowTransform:
    """What the release does to each source row, batch by batch: a pure function of the row and its row id.

    Every engine applies this object to its own batches (pyarrow here, Spark's mapInArrow there), so the
    released values cannot differ between engines, whatever the batches.
    """

    config: ReleaseConfig
    schema: Schema
    target: pa.Schema
    noise_keys: dict[str, np.ndarray]
    maxima: dict[str, float]
    alias_key: bytes | None

    @classmethod
    def of(cls, config: ReleaseConfig, schema: Schema, secrets: Secrets, period: str,
           maxima: dict[str, float]) -> "RowTransform":
        """``maxima``: the source's maximum of each noisy column (the clip bound)."""
        return cls(config, schema, released_schema(config, schema),
                   {name: noise_key(secrets.noise_seed, config.id, period, name) for name in maxima}, maxima,
                   alias_key(secrets, config, period) if config.pseudonym else None)

    @property
    def read_columns(self) -> list[str]:
        """The source columns a batch must carry."""
        columns = [name for name in self.target.names if name != ALIAS_COLUMN] + [ROW_ID]
        if self.alias_key is not None and self.schema.subscriber not in columns:
            columns.append(self.schema.subscriber)
        return columns

    def aliaser(self) -> "_Aliaser | None":
        """A fresh alias cache (one per stream of batches)."""
        return _Aliaser(self.alias_key) if self.alias_key is not None else None

    def released_columns(self, batch: pa.RecordBatch, aliaser: "_Aliaser | None") -> list[pa.Array]:
        """The released columns of every row of ``batch``, in target order (noise on the whole batch: with
        consecutive row ids a slice of the stream)."""
        row_ids = batch.column(ROW_ID).to_numpy()
        columns = []
        for column in self.target:
            if column.name == ALIAS_COLUMN:
                columns.append(aliaser(batch.column(self.schema.subscriber)))
            elif column.name == self.schema.time:
                columns.append(coarsen_time(batch.column(column.name), self.config))
            elif column.name == self.schema.app:
                columns.append(coarsen_app(batch.column(column.name), self.config))
            elif column.name in self.noise_keys:
                columns.append(jitter(batch.column(column.name), self.noise_keys[column.name], row_ids,
                                      self.config.noise_scale, self.maxima[column.name]))
            else:
                columns.append(batch.column(column.name))
        return columns


def alias_key(secrets: Secrets, config: ReleaseConfig, period: str) -> bytes:
    """The key of the release's aliases: the alias key itself (scope "forever"), or one derived per period."""
    if config.alias_scope == "forever":
        return secrets.alias_key
    return hmac.new(secrets.alias_key, b"dsh-alias-period\x00" + period.encode(), hashlib.sha256).digest()


def release(
    source_path: str | os.PathLike,
    out_path: str | os.PathLike,
    config: ReleaseConfig,
    schema: Schema,
    secrets: Secrets,
    apps_in_source,
    *,
    period: str,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    plan: ReleasePlan | None = None,
    book: DigestBook,
) -> ReleasePlan:
    """Write the release of ``config`` for ``period`` atomically; a refused configuration writes nothing.

    ``plan``: the source's plan when the caller made it (an evaluation-only release); else the stored plan.
    ``book`` keeps the file's SHA-256 and content digest, taken as it is written."""
    check_app_coverage(config, apps_in_source)
    # pre_buffer=False: pyarrow's default read-ahead holds most of the file (1.4 GB at 11M rows).
    parquet = pq.ParquetFile(source_path, pre_buffer=False)
    plan = plan or stored_plan(source_path, config, schema, secrets, period)
    position = plan.position_of_row()
    rows = RowTransform.of(config, schema, secrets, period, column_maxima(source_path, noisy_columns(config, schema)))
    target, aliaser = rows.target, rows.aliaser()
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)

    def released_batches():
        """The released rows of each source batch, in source order, noised, with their release positions."""
        for batch in parquet.iter_batches(batch_size=batch_rows, columns=rows.read_columns):
            row_ids = batch.column(ROW_ID).to_numpy()
            out = pa.RecordBatch.from_arrays(rows.released_columns(batch, aliaser), schema=target)
            positions = position[row_ids]
            keep = plan.keep[row_ids]
            if keep.all():
                yield out, positions
            else:
                yield out.filter(pa.array(keep)), positions[keep]

    with value_stage(source_path, plan, config, schema, secrets, period) as stage:
        if plan.contiguous:
            _write_reordered_in_memory(released_batches(), out_path, target, stage, book)
            return plan
        with in_position_order(released_batches(), plan.rows_released, out_path, batch_rows,
                               RELEASE_BUCKET_ROWS) as ordered:
            write_release_file(ordered, out_path, target, stage, book=book)
        return plan


@contextlib.contextmanager
def _release_file(out_path: str | os.PathLike, target: pa.Schema, stage: ValueStage | None,
                  book: DigestBook):
    """The release's atomic Parquet writer, fed batches in release order (through the value stage, where the
    release moves values); the content digest of its rows is taken as they are written (so recording the release
    does not read it back) and kept in ``book`` with its SHA-256."""
    dictionary_columns = [f.name for f in target if pa.types.is_string(f.type) and f.name != ALIAS_COLUMN]
    with parquet_file(out_path, target, dictionary_columns,
                      digests={CONTENT_DIGEST_KIND: ContentDigest(target)}, book=book) as writer:
        yield writer if stage is None else _StagedWriter(writer, stage)


class _StagedWriter:
    """A writer whose batches, in release order, pass through the value stage first."""

    def __init__(self, writer, stage: ValueStage):
        self._writer, self._stage, self._written = writer, stage, 0

    def write(self, batch: pa.RecordBatch) -> None:
        staged = self._stage.staged(batch, self._written)
        self._written += batch.num_rows
        self._writer.write(staged)


def _write_reordered_in_memory(batches, out_path: Path, target: pa.Schema, stage: ValueStage | None,
                               book: DigestBook) -> None:
    """Rows arriving with their release positions, written in position order: the rows whose positions come
    next are written as soon as they have all arrived, the rest wait (with contiguous cells: the cell that
    straddles a batch boundary). Same rows, same order, same row groups as the scratch-bucket path.

    Each position arrives once, so a row's place in what can be written is its position less the next one to
    write: a scatter, not a sort."""
    pending = target.empty_table()
    pending_positions = np.empty(0, dtype=np.int64)
    next_position = 0
    with _release_file(out_path, target, stage, book) as writer, row_pool() as pool:
        for batch, positions in batches:
            if batch.num_rows == 0:
                continue
            table = pa.Table.from_batches([batch]) if pending.num_rows == 0 else pa.concat_tables(
                [pending, pa.Table.from_batches([batch])])
            positions = np.concatenate([pending_positions, positions]) if len(pending_positions) else positions
            place = positions - next_position
            row_at = np.full(len(place), -1, dtype=np.int64)
            arrived = place < len(place)
            row_at[place[arrived]] = np.flatnonzero(arrived)
            gaps = np.flatnonzero(row_at < 0)
            ready = int(gaps[0]) if len(gaps) else len(place)
            if ready:
                for chunk in take_rows(table, row_at[:ready], pool).to_batches():
                    writer.write(chunk)
                next_position += ready
            waiting = np.flatnonzero(place >= ready)
            pending, pending_positions = table.take(waiting), positions[waiting]
        if pending.num_rows:
            raise ValueError(f"release order: {pending.num_rows} rows never reached their position")


def write_release_file(batches, out_path: str | os.PathLike, target: pa.Schema, stage: ValueStage | None = None, *,
                       book: DigestBook) -> None:
    """Batches already in release order, written atomically in fixed row groups (the bytes do not depend on
    the batches' sizes, so every engine that streams the same rows writes the same file)."""
    with _release_file(out_path, target, stage, book) as writer:
        for batch in batches:
            writer.write(batch.cast(target) if batch.schema != target else batch)
