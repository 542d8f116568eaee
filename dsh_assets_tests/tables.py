"""Tiny source tables built row by row, so each test's answer can be worked out by hand."""

import datetime as dt
import hashlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.release.schema import Schema, load_schema
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.synth import synthesize
from dsh_assets.core.release.transform import release

T0 = dt.datetime(2026, 11, 20, 8, 0, tzinfo=dt.timezone.utc)
RELEASE_PERIOD = T0.date().isoformat()
"""The release period of the hand-built tables (the noise and the row order are keyed by it)."""


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


def sha256_file(path) -> str:
    """A file's SHA-256, computed here, apart from the code under test (which takes it through a DigestBook)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def table(rows: list[dict], schema: Schema | None = None) -> pa.Table:
    schema = schema or load_schema()
    return pa.Table.from_pylist(rows, schema=schema.arrow_schema())


def write(path, rows: list[dict]) -> str:
    pq.write_table(table(rows), path)
    return str(path)


def synthetic_stored(directory, rows: int, subscribers: int, seed: int, stored: str = "source.parquet"):
    """A synthetic input of the day of T0 (``directory``/raw.parquet) and its stored source; the stored path."""
    schema = load_schema()
    synthesize(directory / "raw.parquet", rows=rows, subscribers=subscribers, seed=seed, period=T0.date(),
               schema=schema)
    ingest_source(directory / "raw.parquet", directory / stored, schema, book=DigestBook())
    return directory / stored


def under_test(tmp_path, rows: list[dict], config, name: str = "t",
               secrets: Secrets = Secrets(b"demo", b"demo", "demo")) -> ReleaseUnderTest:
    """Ingest ``rows`` as a source, release it under ``config``: the release with its truth."""
    schema = load_schema()
    source = tmp_path / f"{name}_source.parquet"
    summary = ingest_source(write(tmp_path / f"{name}_raw.parquet", rows), source, schema, book=DigestBook())
    released = tmp_path / f"{name}_released.parquet"
    plan = release(source, released, config, schema, secrets, summary.apps, period=RELEASE_PERIOD, book=DigestBook())
    return ReleaseUnderTest(source, released, config, schema, plan, book=DigestBook())


def s(n: int) -> str:
    """Subscriber number ``n`` as an MSISDN."""
    return f"3584000000{n:02d}"


def plain(value) -> bool:
    """Only plain Python values (numpy's float64 passes json.dumps, so check types)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(plain(v) for v in value)
    return value is None or type(value) in (bool, int, float, str)
