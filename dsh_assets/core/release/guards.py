"""What the asset checks examine, computed from the files on disk (never from the writer's word)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core import duck
from dsh_assets.core.duck import sql_identifier
from dsh_assets.core.release.schema import ROW_ID, Schema

IDENTIFIER_PATTERN = r"^\+?[0-9][0-9 -]{7,18}[0-9]$"
"""MSISDN (E.164, up to 15 digits), IMSI (15 digits), IMEI (14-16 digits), allowing spaces or dashes."""


def listed_without_identifiers(values) -> str:
    """``values`` for a message, which Dagster's event log keeps: each named, but an identifier-shaped one (a
    phone number in a category column) only counted."""
    shaped = sum(1 for value in values if re.fullmatch(IDENTIFIER_PATTERN, value))
    named = [value for value in values if not re.fullmatch(IDENTIFIER_PATTERN, value)]
    if shaped:
        named.append(f"{shaped} identifier-shaped value{'s' if shaped > 1 else ''} (not shown)")
    return ", ".join(named)


@dataclass(frozen=True)
class IdentifierFinding:
    identifier_columns: tuple[str, ...]
    """Identifier (or row-id) columns present in the release by name."""
    shaped_values: dict[str, int]
    """String column -> count of identifier-shaped values."""

    @property
    def clean(self) -> bool:
        return not self.identifier_columns and not any(self.shaped_values.values())


def find_identifiers(path: str | os.PathLike, schema: Schema) -> IdentifierFinding:
    arrow_schema = pq.read_schema(path)
    forbidden = {*schema.identifiers, ROW_ID}
    named = tuple(name for name in arrow_schema.names if name in forbidden)
    strings = [f.name for f in arrow_schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    shaped: dict[str, int] = {}
    if strings:
        # Each distinct value is matched once and counts its rows: a released string column (province, app,
        # radio, an app group) holds a few dozen values, and matching 11M rows was nine tenths of the check.
        terms = ", ".join(
            f"(SELECT coalesce(sum(n) FILTER (WHERE regexp_full_match(v, '{IDENTIFIER_PATTERN}')), 0) FROM "
            f"(SELECT {duck.sql_identifier(name)} AS v, count(*) AS n FROM read_parquet($path) GROUP BY v))"
            for name in strings
        )
        with duck.connect() as connection:
            counts = connection.execute(f"SELECT {terms}", {"path": str(path)}).fetchone()
        shaped = dict(zip(strings, (int(c) for c in counts)))
    return IdentifierFinding(identifier_columns=named, shaped_values=shaped)


def min_cell_size(path: str | os.PathLike, cell_columns) -> tuple[int | None, int]:
    """(smallest cell, number of cells) of the released rows grouped by ``cell_columns``."""
    columns = ", ".join(sql_identifier(name) for name in cell_columns)
    with duck.connect() as connection:
        smallest, cells = connection.execute(
            f"SELECT min(n), count(*) FROM (SELECT count(*) AS n FROM read_parquet(?) GROUP BY {columns})",
            [str(path)],
        ).fetchone()
    return (None if smallest is None else int(smallest)), int(cells)
