"""Property-based tests (hypothesis) of the release's invariants over random small tables.

Whatever the rows: no released cell under k, no identifier column or identifier-shaped value,
every measurement within [0, the source column's maximum], the same inputs give the same bytes,
and a configuration whose app grouping misses an app of the source is refused, writing nothing.
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_assets.core.files import DigestBook
from dsh_assets.core.release.configs import ROW_RELEASE, ConfigError, load_configs
from dsh_assets.core.release.guards import find_identifiers, min_cell_size
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.transform import ALIAS_COLUMN, release
from dsh_assets.core.secrets import Secrets
from dsh_assets_tests.tables import RELEASE_PERIOD, row, sha256_file, write

SCHEMA = load_schema()
CONFIGS = load_configs(schema=SCHEMA)
ROW_CONFIGS = sorted(config_id for config_id, config in CONFIGS.items() if config.kind == ROW_RELEASE)
GROUPED = sorted(config_id for config_id in ROW_CONFIGS if CONFIGS[config_id].app_groups)
GROUPED_APPS = sorted({app for config_id in GROUPED for app in CONFIGS[config_id].app_group_of()})
APPS = GROUPED_APPS[:6] or ["Gaming", "Streaming", "IM"]
SECRETS = Secrets(b"property-seed", b"property-key", "test")
PROPERTY_SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                             suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

measurement = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False))


@st.composite
def source_rows(draw, apps=APPS) -> list[dict]:
    """1 to 40 rows over few subscribers, windows, provinces, apps and radios: small cells are common."""
    rows = []
    for _ in range(draw(st.integers(min_value=1, max_value=40))):
        record = row(
            subscriber=f"3584000000{draw(st.integers(min_value=0, max_value=9)):02d}",
            minute=10 * draw(st.integers(min_value=0, max_value=11)),
            province=draw(st.sampled_from(["Uusimaa", "Lappi", "Pirkanmaa"])),
            app=draw(st.sampled_from(apps)),
            radio=draw(st.sampled_from(["3G", "4G", "5G"])),
            station=draw(st.integers(min_value=100, max_value=104)),
        )
        record.update({name: draw(measurement) for name in SCHEMA.measurements})
        rows.append(record)
    return rows


def released_table(folder: Path, rows: list[dict], config_id: str, name: str = "released") -> tuple[Path, Path]:
    source = folder / "source.parquet"
    if not source.exists():
        ingest_source(write(folder / "raw.parquet", rows), source, SCHEMA, book=DigestBook())
    out = folder / f"{name}.parquet"
    apps = sorted({r[SCHEMA.app] for r in rows})
    release(source, out, CONFIGS[config_id], SCHEMA, SECRETS, apps, period=RELEASE_PERIOD, book=DigestBook())
    return source, out


@PROPERTY_SETTINGS
@given(rows=source_rows(), config_id=st.sampled_from(ROW_CONFIGS))
def test_a_release_keeps_k_drops_identifiers_and_bounds_measurements(rows, config_id):
    config = CONFIGS[config_id]
    with tempfile.TemporaryDirectory() as folder:
        source, out = released_table(Path(folder), rows, config_id)
        released = pq.read_table(out)
        source_table = pq.read_table(source)

        if config.k:
            smallest, _ = min_cell_size(out, SCHEMA.categorical_qis)
            assert smallest is None or smallest >= config.k, f"a released cell of {smallest} rows under k={config.k}"

        found = find_identifiers(out, SCHEMA)
        assert found.identifier_columns == (), found
        assert not any(found.shaped_values.values()), found
        assert not set(SCHEMA.identifiers) & set(released.column_names)
        assert config.pseudonym == (ALIAS_COLUMN in released.column_names)

        for name in SCHEMA.measurements:
            if name not in released.column_names:
                continue
            values = [v for v in released.column(name).to_pylist() if v is not None]
            top = max((v for v in source_table.column(name).to_pylist() if v is not None), default=0.0)
            assert all(math.isfinite(v) and 0.0 <= v <= top for v in values), (name, top, values)


@PROPERTY_SETTINGS
@given(rows=source_rows(), config_id=st.sampled_from(ROW_CONFIGS))
def test_the_same_inputs_give_the_same_bytes(rows, config_id):
    with tempfile.TemporaryDirectory() as folder:
        _, first = released_table(Path(folder), rows, config_id, "first")
        _, second = released_table(Path(folder), rows, config_id, "second")
        assert sha256_file(first) == sha256_file(second)


unknown_app = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF), min_size=1, max_size=12).filter(
    lambda app: app not in GROUPED_APPS)


@pytest.mark.skipif(not GROUPED, reason="no configuration groups apps in the packaged releases file")
@PROPERTY_SETTINGS
@given(rows=source_rows(), extra=unknown_app, config_id=st.sampled_from(GROUPED or ["none"]))
def test_a_configuration_is_refused_for_an_app_it_does_not_cover(rows, extra, config_id):
    rows = [*rows, {**rows[0], SCHEMA.app: extra}]
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "released.parquet"
        with pytest.raises(ConfigError, match=f"does not cover 1 app.*{re.escape(extra)}"):
            released_table(Path(folder), rows, config_id)
        assert not out.exists()
        assert not [p for p in Path(folder).iterdir() if p.name.endswith(".tmp")]
