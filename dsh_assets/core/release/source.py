"""Validate a source Parquet file and ingest it: canonical types and a stable row id.

Nothing is released from a source that fails validation, and a failed ingest leaves no file.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsh_assets.core import duck
from dsh_assets.core.duck import sql_identifier, sql_literal
from dsh_assets.core.files import DigestBook, parquet_file
from dsh_assets.core.release.schema import ROW_ID, Schema, SourceError
from dsh_assets.core.tables import in_position_order

INGEST_BATCH_ROWS = 131_072
ROW_ORDER_SALT = "dsh-row-order"
"""Rows of a cell are stored in the order of md5(ROW_ORDER_SALT || input position): fixed, and no subscriber's."""


@dataclass(frozen=True)
class SourceSummary:
    rows: int
    subscribers: int
    apps: tuple[str, ...]


def _kind_matches(kind: str, arrow_type: pa.DataType) -> bool:
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    if kind == "string":
        return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)
    if kind == "integer":
        return pa.types.is_integer(arrow_type)
    if kind == "timestamp":
        return pa.types.is_timestamp(arrow_type)
    # Counts such as video stalls may arrive as integers; they are measurements all the same.
    return pa.types.is_floating(arrow_type) or pa.types.is_integer(arrow_type)


def read_parquet_schema(path: str | os.PathLike) -> pa.Schema:
    path = Path(path)
    if not path.is_file():
        raise SourceError(f"source {path} does not exist or is not a file")
    try:
        return pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as error:
        raise SourceError(f"source {path} is not a Parquet file ({error})") from error


Window = tuple[dt.datetime, dt.datetime]
"""A release period's time window: [start, end), tz-aware datetimes."""


def _is_naive_timestamp(arrow_type: pa.DataType) -> bool:
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    return pa.types.is_timestamp(arrow_type) and arrow_type.tz is None


def time_expression(schema: Schema, arrow_schema: pa.Schema) -> str:
    """The time column as a UTC instant in DuckDB SQL: naive timestamps are local times of the declared zone."""
    column = sql_identifier(schema.time)
    if _is_naive_timestamp(arrow_schema.field(schema.time).type) and schema.time_zone:
        return f"timezone({sql_literal(schema.time_zone)}, {column})"
    return column


def _schema_problems(arrow_schema: pa.Schema, schema: Schema) -> list[str]:
    """Problems visible in the file's schema alone: duplicated, missing or mistyped columns, naive timestamps."""
    names = arrow_schema.names
    duplicated = sorted({name for name in names if names.count(name) > 1})
    if duplicated:
        # Readers disagree on which of two equal names they take: nothing else is worth checking.
        return ["duplicate column names: " + ", ".join(f"{name} ({names.count(name)} columns)" for name in duplicated)]
    present = {field.name: field.type for field in arrow_schema}
    problems = []
    missing = [name for name in schema.columns if name not in present]
    if missing:
        problems.append(f"missing columns: {', '.join(missing)}")
    for name, kind in schema.expected_types().items():
        if name in present and not _kind_matches(kind, present[name]):
            problems.append(f"column {name} has type {present[name]}, expected {kind}")
    if schema.time in present and _is_naive_timestamp(present[schema.time]) and not schema.time_zone:
        problems.append(f"column {schema.time} has timestamps without a time zone; declare the source's zone "
                        f"in the roles file ([source] time_zone = \"Europe/Helsinki\", say) or write UTC timestamps")
    return problems


def checked_arrow_schema(path: str | os.PathLike, schema: Schema) -> pa.Schema:
    """The file's Arrow schema; SourceError naming every problem visible in the schema alone."""
    arrow_schema = read_parquet_schema(path)
    problems = _schema_problems(arrow_schema, schema)
    if problems:
        raise SourceError(f"source {path}: " + "; ".join(problems))
    return arrow_schema


def validate_source(path: str | os.PathLike, schema: Schema, window: Window | None = None) -> SourceSummary:
    """Raise SourceError naming every problem (column, count of bad rows); else summarise.

    ``window`` is the release period's [start, end): rows whose time falls outside are refused.
    """
    return _validated(path, schema, window, stored=False)


STORED_VALIDATION_KIND = "stored_source_validation"
"""The kind under which a stored source's validation is kept for the file in a ``files.DigestBook``."""


def validate_stored_source(path: str | os.PathLike, schema: Schema, book: DigestBook) -> SourceSummary:
    """An ingested source: valid as a source, and its row ids are exactly 0..n-1 in file order.

    Read unless ``book`` keeps it for the file as it stands: the ingest keeps it for the file it has just written
    (``write_stored_source``), so the source's check in the same run does not read the rows again; a file that
    changed since is read."""
    return book.figure(path, (STORED_VALIDATION_KIND, schema), lambda file: _validated(file, schema, None, stored=True))


def _validated(path: str | os.PathLike, schema: Schema, window: Window | None, stored: bool) -> SourceSummary:
    """Every count a source (``stored``: an ingested one, with its row ids) is checked on, in one read of the file."""
    arrow_schema = checked_arrow_schema(path, schema)
    if stored and ROW_ID not in arrow_schema.names:
        raise SourceError(f"source {path}: missing column: {ROW_ID}")
    # One term per measurement, counting its negative, NaN and infinite values. isfinite, not "< infinity":
    # DuckDB folds a comparison away when the Parquet statistics bound it, and they leave NaN out.
    measurement_terms = [f"count_if(NOT ({value} >= 0 AND isfinite({value})))"
                         for value in map(_as_double, schema.measurements)]
    required = required_columns(schema)
    null_terms = [f"count_if({sql_identifier(name)} IS NULL)" for name in required]
    time = time_expression(schema, arrow_schema)
    outside = f"({time} < $start OR {time} >= $end)" if window else "false"
    window_terms = [f"count_if({outside})", f"min({time}) FILTER (WHERE {outside})",
                    f"max({time}) FILTER (WHERE {outside})"]
    # The same list as distinct_apps: the distinct values in DuckDB's order (a null only with a refused null).
    apps_term = f"list(DISTINCT {sql_identifier(schema.app)} ORDER BY {sql_identifier(schema.app)})"
    row_id_term = f"count_if({ROW_ID} IS DISTINCT FROM file_row_number)" if stored else "0"
    subscriber = sql_identifier(schema.subscriber)
    rows_in_file = pq.ParquetFile(path).metadata.num_rows
    in_one_query = rows_in_file <= duck.DISTINCT_ROWS_PER_PASS
    query = (
        f"SELECT count(*), {f'count(DISTINCT {subscriber})' if in_one_query else 'NULL'}, {apps_term}, {row_id_term}, "
        f"{', '.join(measurement_terms + null_terms + window_terms)} "
        f"FROM read_parquet($path, file_row_number = true)"
    )
    parameters = {"path": str(path)}
    if window:
        parameters.update(start=window[0], end=window[1])
    with duck.connect() as connection:
        counts = connection.execute(query, parameters).fetchall()[0]
        rows, subscribers, apps, out_of_place = counts[:4]
        if not in_one_query:
            subscribers = duck.count_distinct(connection, subscriber, "FROM read_parquet(?)", [str(path)], rows)
        invalid = dict(zip(schema.measurements, counts[4:4 + len(schema.measurements)]))
        per_measurement = _measurement_problem_counts(connection, path, [name for name, n in invalid.items() if n])
    measurement_counts = [count for name in schema.measurements for count in per_measurement.get(name, (0, 0, 0))]
    raise_on_count_problems(path, schema, window,
                            (rows, subscribers, *measurement_counts, *counts[4 + len(schema.measurements):]))
    if out_of_place:
        raise SourceError(f"stored source {path}: column {ROW_ID}: {out_of_place} rows whose row id is not "
                          f"their position")
    return SourceSummary(rows=rows, subscribers=subscribers, apps=tuple(apps))


def _as_double(name: str) -> str:
    return f"{sql_identifier(name)}::DOUBLE"


def _measurement_problem_counts(connection, path, names: list[str]) -> dict[str, tuple[int, int, int]]:
    """Negative, NaN and infinite values of each named measurement (read only for a source about to be refused)."""
    if not names:
        return {}
    terms = []
    for value in map(_as_double, names):
        terms += [f"count(*) FILTER (WHERE {value} < 0 AND isfinite({value}))",
                  f"count(*) FILTER (WHERE isnan({value}))", f"count(*) FILTER (WHERE isinf({value}))"]
    counts = connection.execute(f"SELECT {', '.join(terms)} FROM read_parquet(?)", [str(path)]).fetchall()[0]
    return {name: tuple(counts[3 * i:3 * i + 3]) for i, name in enumerate(names)}


def raise_on_count_problems(path, schema: Schema, window: Window | None, counts) -> None:
    """Raise SourceError naming every problem the validation counts show; any engine that counts alike says the same.

    ``counts``: rows, distinct subscribers; per measurement its negative, NaN and infinite values; per required
    column its nulls; the rows outside ``window`` and their first and last time (UTC instants).
    """
    rows = counts[0]
    if rows == 0:
        raise SourceError(f"source {path} is empty: no rows to release")
    problems = []
    offset = 2
    for name in schema.measurements:
        negative, nan, infinite = counts[offset:offset + 3]
        offset += 3
        if negative:
            problems.append(f"column {name}: {negative} negative values (measurements must be >= 0)")
        if nan:
            problems.append(f"column {name}: {nan} NaN values (use null for a missing measurement)")
        if infinite:
            problems.append(f"column {name}: {infinite} infinite values (measurements must be finite)")
    required = required_columns(schema)
    for name, nulls in zip(required, counts[offset:offset + len(required)]):
        if nulls:
            problems.append(f"column {name}: {nulls} null values (quasi-identifiers and identifiers must be set)")
    outside_rows, first, last = counts[offset + len(required):]
    if outside_rows:
        problems.append(f"column {schema.time}: {outside_rows} rows outside the period {_instant(window[0])} to "
                        f"{_instant(window[1])} (first {_instant(first)}, last {_instant(last)})")
    if problems:
        raise SourceError(f"source {path}: " + "; ".join(problems))


def required_columns(schema: Schema) -> tuple[str, ...]:
    """The columns that must never be null: the subscriber, the station and the cell's quasi-identifiers."""
    return (schema.subscriber, schema.station, *schema.categorical_qis)


def _instant(value: dt.datetime) -> str:
    return value.astimezone(dt.timezone.utc).isoformat(sep=" ")


def distinct_apps(path: str | os.PathLike, schema: Schema) -> tuple[str, ...]:
    with duck.connect() as connection:
        rows = connection.execute(f'SELECT DISTINCT "{schema.app}" FROM read_parquet(?) ORDER BY 1', [str(path)])
        return tuple(value for (value,) in rows.fetchall())


def _canonical_batch(batch: pa.RecordBatch, schema: Schema, target: pa.Schema, first_row: int) -> pa.RecordBatch:
    columns = []
    for field in target:
        if field.name == ROW_ID:
            columns.append(pa.array(np.arange(first_row, first_row + batch.num_rows, dtype=np.int64)))
            continue
        column = batch.column(field.name)
        if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
        if pa.types.is_timestamp(column.type) and column.type.tz is None:
            column = pc.assume_timezone(column, "UTC")
        columns.append(column.cast(field.type))
    return pa.RecordBatch.from_arrays(columns, schema=target)


def ingested_schema(schema: Schema) -> pa.Schema:
    return schema.arrow_schema().append(pa.field(ROW_ID, pa.int64(), nullable=False))


def write_stored_source(batches, out_path: str | os.PathLike, schema: Schema, validated: SourceSummary,
                        book: DigestBook) -> None:
    """Batches of the validated input's rows in stored order, written atomically with row ids 0..n-1 in that order
    (whichever engine sorted them, the stored file is the same).

    Only the province, app and radio are dictionary-encoded: a row group holds about as many MSISDNs, IMSIs
    and IMEIs as rows, so their dictionaries passed a megabyte and fell back to plain encoding, after the cost
    of building them (a quarter of the encoding's time, for a file no smaller). The identifiers are written
    uncompressed and without statistics (``files.FixedRowGroupWriter``): snappy and min/max were most of the
    file's encoding and halved only them.

    The file holds the input's rows, cast to the declared types, with row ids written here as their positions, so
    validating it finds what validating the input found (``validated``): ``book`` keeps that for the file, with the
    digests ``files.parquet_file`` takes as it writes."""
    target = ingested_schema(schema)
    dictionary_columns = [schema.province, schema.app, schema.radio]
    with parquet_file(out_path, target, dictionary_columns, raw_columns=schema.identifiers, book=book) as writer:
        first_row = 0  # the encoding, in the writer's thread, overlaps the reading
        for batch in batches:
            writer.write(_canonical_batch(batch, schema, target, first_row))
            first_row += batch.num_rows
        if first_row != validated.rows:  # raised before the file is renamed into place
            raise RuntimeError(f"stored source {out_path}: {first_row} rows written of {validated.rows} validated")
    book.keep(out_path, (STORED_VALIDATION_KIND, schema), validated)


_INPUT_ROW = "__input_row"
INPUT_BATCH_ROWS = 1 << 20
"""Rows per batch read from the input (and per batch of the key sort's result)."""


def ingest_source(path: str | os.PathLike, out_path: str | os.PathLike, schema: Schema,
                  window: Window | None = None, *, book: DigestBook) -> SourceSummary:
    """Validate, then write the canonical copy, atomically, ordered by cell with row ids 0..n-1.

    Releases keep the stored order, so the stored order must not say whose rows are whose: a
    source sorted by subscriber would put a subscriber's rows side by side in every release.
    Rows are ordered by (time, province, app, radio) and, within a cell, by a hash of their
    position in the input, a fixed pseudo-random order that carries no subscriber information.
    Naive timestamps are converted from the roles file's declared zone to UTC.

    Only the keys are sorted (``stored_positions``); the rows then move to their places through
    scratch buckets of stored positions (``tables.in_position_order``), so no sort ever carries the 22
    columns: memory stays at about one bucket, and no sort spills every column to disk. The cell's own
    columns (time, province, app, radio) do not move at all: in the stored order each cell is one run of
    rows, so they are written from the cells (``_with_cell_columns``), never taken or put in the scratch
    (at 11M rows the ingest took 16.8 s with them, 14.5 s without).
    """
    summary = validate_source(path, schema, window)
    time = time_expression(schema, read_parquet_schema(path))
    expressions = {name: time if name == schema.time else sql_identifier(name) for name in schema.columns}
    carried = [name for name in schema.columns if name not in schema.categorical_qis]
    columns = ", ".join(f"{expressions[name]} AS {sql_identifier(name)}" for name in carried)
    with duck.connect() as connection:
        position, cells = stored_positions(connection, path, [expressions[name] for name in schema.categorical_qis],
                                           summary.rows)
        reader = connection.sql(
            f"SELECT {columns}, file_row_number AS {_INPUT_ROW} FROM read_parquet($path, file_row_number = true)",
            params={"path": str(path)},
        ).to_arrow_reader(INPUT_BATCH_ROWS)
        pieces = ((batch.drop_columns([_INPUT_ROW]), position[batch.column(_INPUT_ROW).to_numpy()])
                  for batch in reader)
        with in_position_order(pieces, summary.rows, out_path, INGEST_BATCH_ROWS) as stored_order:
            write_stored_source(_with_cell_columns(stored_order, cells, schema.categorical_qis), out_path, schema,
                                summary, book)
    return summary


def _with_cell_columns(batches, cells: pa.Table, names) -> Iterator[pa.RecordBatch]:
    """Batches in stored order with the columns ``names`` of their cells added: ``cells`` holds each cell's
    values (c0..) and its rows (``rows``) in stored order, so stored row i is in the cell whose run holds i.
    (A new batch, not ``append_column``: appending a taken column cost 80 ms a batch of 131,072 rows.)"""
    ends = np.cumsum(cells.column("rows").to_numpy())
    values = [cells.column(f"c{i}").combine_chunks() for i in range(len(names))]
    first_row = 0
    for batch in batches:
        cell = pa.array(np.searchsorted(ends, np.arange(first_row, first_row + batch.num_rows), side="right"))
        first_row += batch.num_rows
        yield pa.RecordBatch.from_arrays([*batch.columns, *(column.take(cell) for column in values)],
                                         names=[*batch.schema.names, *names])


def stored_positions(connection, path: str | os.PathLike, cell_expressions: list[str],
                     rows: int) -> tuple[np.ndarray, pa.Table]:
    """Each input row's position in the stored order (indexed by the input's row number), and the cells in
    that order: their values (c0..) and rows (``rows``).

    The order is (time, province, app, radio) then md5(ROW_ORDER_SALT || input row number) as hex text. DuckDB
    numbers the distinct cells in that order and sorts the rows by (cell number, the digest's two 64-bit halves
    read big-endian): integer keys that order exactly as the text keys do (32 hex digits of fixed length order
    as the 128-bit number they spell), and a sort that carries one row number per row."""
    cells = ", ".join(f"{expression} AS c{i}" for i, expression in enumerate(cell_expressions))
    keys = ", ".join(f"c{i}" for i in range(len(cell_expressions)))
    same_cell = " AND ".join(f"r.c{i} = cell.c{i}" for i in range(len(cell_expressions)))
    halves = ", ".join(md5_halves(f"{sql_literal(ROW_ORDER_SALT)} || r.n::VARCHAR"))
    connection.execute(
        f"CREATE TEMP TABLE ingest_cells AS SELECT row_number() OVER (ORDER BY {keys}) AS cell, {keys}, "
        f"count(*) AS rows FROM (SELECT {cells} FROM read_parquet($path)) GROUP BY {keys}", {"path": str(path)})
    ordered = connection.sql(
        f"SELECT r.n FROM (SELECT {cells}, file_row_number AS n FROM read_parquet($path, file_row_number = true)) r "
        f"JOIN ingest_cells cell ON {same_cell} ORDER BY cell.cell, {halves}", params={"path": str(path)})
    position = np.full(rows, -1, dtype=np.int64)
    placed = 0
    for batch in ordered.to_arrow_reader(INPUT_BATCH_ROWS):
        input_rows = batch.column(0).to_numpy()
        position[input_rows] = np.arange(placed, placed + len(input_rows), dtype=np.int64)
        placed += len(input_rows)
    in_order = connection.sql(f"SELECT {keys}, rows FROM ingest_cells ORDER BY cell").to_arrow_table()
    connection.execute("DROP TABLE ingest_cells")
    if placed != rows or (rows and position.min() < 0):
        raise RuntimeError(f"ingest order: {placed} of {rows} rows placed")
    return position, in_order


def md5_halves(text: str) -> tuple[str, str]:
    """DuckDB SQL for the md5 of ``text`` as two UBIGINTs, its first and last 8 bytes read big-endian: together
    they order as the hex digest does."""
    # md5_number reads the 16 digest bytes as one little-endian number: its low 64 bits are the first 8 bytes.
    digest = f"md5_number({text})"
    return (_byte_swapped(f"({digest} & 18446744073709551615::UHUGEINT)::UBIGINT"),
            _byte_swapped(f"({digest} >> 64)::UBIGINT"))


def _byte_swapped(expression: str) -> str:
    """A UBIGINT's 8 bytes in reverse order, in DuckDB SQL: about half the cost of the md5's hex text cut and
    parsed in two (measured on 11M row numbers)."""
    return "(" + " | ".join(f"((({expression} >> {8 * i}) & 255::UBIGINT) << {56 - 8 * i})" for i in range(8)) + ")"


def stored_rows(source_path, row_ids: np.ndarray) -> pa.Table:
    """The rows of a stored source (row id i is its i-th row) with these sorted row ids, taken from the row groups
    that hold them one group at a time: blocks of random cells touch most groups of a large source, and reading
    them at once held most of it (3.9 GB at 11M rows)."""
    parquet = pq.ParquetFile(source_path, pre_buffer=False)
    group_rows = [parquet.metadata.row_group(i).num_rows for i in range(parquet.metadata.num_row_groups)]
    first_of = np.concatenate([[0], np.cumsum(group_rows)])
    group_of = np.searchsorted(first_of, row_ids, side="right") - 1
    bounds = np.searchsorted(group_of, np.arange(len(group_rows) + 1))
    pieces = [parquet.read_row_group(group).take(pa.array(row_ids[start:end] - first_of[group]))
              for group, (start, end) in enumerate(zip(bounds[:-1], bounds[1:])) if end > start]
    rows = pa.concat_tables(pieces) if pieces else parquet.schema_arrow.empty_table()
    if not np.array_equal(rows.column(ROW_ID).to_numpy(), row_ids):
        raise ValueError(f"{source_path} is not a stored source: its row ids are not its row positions")
    return rows
