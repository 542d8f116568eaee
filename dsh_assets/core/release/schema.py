"""The source table's schema: column roles (from configuration) and validation.

Every other module asks the schema for a column by its role (``schema.app``), never by a
literal name, so a real file with other column names only needs another roles file.
"""

from __future__ import annotations

import os
import tomllib
import zoneinfo
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pyarrow as pa

ROW_ID = "row_id"
"""Stable row number assigned at ingest; noise is keyed by it, so it never depends on batching."""

DEFAULT_COLUMNS_FILE = "columns.toml"


class SourceError(ValueError):
    """The source cannot be released; the message names the column and the count of bad rows."""


@dataclass(frozen=True)
class Schema:
    subscriber: str
    identifiers: tuple[str, ...]
    station: str
    time: str
    province: str
    app: str
    radio: str
    download: str
    latency: str
    measurements: tuple[str, ...]
    time_zone: str | None = None
    """The zone of timestamps written without one ([source] time_zone); None: such timestamps are refused."""

    @property
    def categorical_qis(self) -> tuple[str, ...]:
        """The quasi-identifiers a release may keep and a k-suppression cell is made of."""
        return (self.time, self.province, self.app, self.radio)

    @property
    def string_columns(self) -> tuple[str, ...]:
        return (*self.identifiers, self.province, self.app, self.radio)

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.identifiers, self.station, *self.categorical_qis, *self.measurements)

    def expected_types(self) -> dict[str, str]:
        """Column name -> the kind of Arrow type it must have (string, int, timestamp, float)."""
        kinds = {name: "string" for name in self.string_columns}
        kinds[self.station] = "integer"
        kinds[self.time] = "timestamp"
        kinds.update({name: "float" for name in self.measurements})
        return kinds

    def arrow_schema(self) -> pa.Schema:
        arrow = {"string": pa.string(), "integer": pa.int64(),
                 "timestamp": pa.timestamp("us", tz="UTC"), "float": pa.float64()}
        kinds = self.expected_types()
        return pa.schema([(name, arrow[kinds[name]]) for name in self.columns])


def load_schema(path: str | os.PathLike | None = None) -> Schema:
    """Roles from ``path``, else from the packaged default roles file."""
    if path:
        text = Path(path).read_text()
    else:
        text = resources.files("dsh_assets").joinpath(DEFAULT_COLUMNS_FILE).read_text()
    parsed = tomllib.loads(text)
    roles = parsed["roles"]
    time_zone = parsed.get("source", {}).get("time_zone")
    if time_zone is not None:
        try:
            zoneinfo.ZoneInfo(time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"roles file: [source] time_zone {time_zone!r} is not a known IANA time zone") from None
    schema = Schema(
        subscriber=roles["subscriber"],
        identifiers=tuple(roles["identifiers"]),
        station=roles["station"],
        time=roles["time"],
        province=roles["province"],
        app=roles["app"],
        radio=roles["radio"],
        download=roles["download"],
        latency=roles["latency"],
        measurements=tuple(roles["measurements"]),
        time_zone=time_zone,
    )
    if schema.subscriber not in schema.identifiers:
        raise ValueError(f"roles file: subscriber column {schema.subscriber!r} must be one of the identifiers")
    for role in ("download", "latency"):
        if getattr(schema, role) not in schema.measurements:
            raise ValueError(f"roles file: {role} column {getattr(schema, role)!r} is not a measurement")
    duplicated = {c for c in schema.columns if schema.columns.count(c) > 1}
    if duplicated:
        raise ValueError(f"roles file: columns with two roles: {sorted(duplicated)}")
    quoted = [c for c in schema.columns if '"' in c]
    if quoted:  # the SQL the passes build quotes each name; a name holding a quote would end it early
        raise ValueError(f"roles file: a column name holds a double quote: {quoted}")
    return schema
