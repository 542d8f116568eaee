"""Singling out on hand-built tables whose answers are worked out in the comments, and on a small synthetic source."""

import collections
import dataclasses
import datetime as dt
import json

import numpy as np
import pytest

from dsh_assets.core import files
from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy import singling_out
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.release.configs import load_configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.release.synth import synthesize
from dsh_assets.core.release.transform import release
from dsh_assets_tests.tables import RELEASE_PERIOD, plain, row, s, under_test

SCHEMA = load_schema()
CONFIGS = load_configs(schema=SCHEMA)
SECRETS = Secrets(b"demo", b"demo", "demo")
ID_REMOVAL = CONFIGS["id_removal"]
C15 = CONFIGS["c15_window_k5_noise5"]




def hand_rows() -> list[dict]:
    """Ten subscribers, fourteen rows, six cells under id_removal (station released):

    A  s1      min 0,  Uusimaa, Gaming,    5G, station 101   1 row   -> s1 singled out
    B  s1      min 10, Uusimaa, Gaming,    5G, station 101   1 row   -> s1 again (counted once)
    C  s2 s3   min 0,  Uusimaa, Streaming, 4G, station 101   2 rows
    D  s2 s4 s4 min 0, Lappi,   IM,        3G, station 201   3 rows
    E  s5..s9 s3 min 0, Lappi,  Email,     4G, station 202   6 rows
    F  s10     min 0,  Lappi,   Email,     4G, station 203   1 row   -> s10 singled out by its station
    """
    rows = [row(s(1), 0, "Uusimaa", "Gaming", "5G", 101), row(s(1), 10, "Uusimaa", "Gaming", "5G", 101)]
    rows += [row(s(n), 0, "Uusimaa", "Streaming", "4G", 101) for n in (2, 3)]
    rows += [row(s(n), 0, "Lappi", "IM", "3G", 201) for n in (2, 4, 4)]
    rows += [row(s(n), 0, "Lappi", "Email", "4G", 202) for n in (5, 6, 7, 8, 9, 3)]
    rows += [row(s(10), 0, "Lappi", "Email", "4G", 203)]
    return rows



def test_id_removal_singles_out_by_station_and_buckets_cells(tmp_path):
    result = singling_out.evaluate(under_test(tmp_path, hand_rows(), ID_REMOVAL))
    # Cells of one: A, B (both s1) and F (s10): 2 of 10 subscribers. C has 2 rows, D 3, E 6.
    assert result.figures() == {
        "singling_out_rate": 0.2,
        "singling_out_cells": {"1": 3, "2": 1, "3-4": 1, "5+": 1},
    }
    metadata = result.metadata()
    assert metadata["singling_out_rows"] == {"1": 3, "2": 2, "3-4": 3, "5+": 6}
    assert metadata["subscribers_singled_out"] == 2 and metadata["subscribers_released"] == 10
    assert metadata["rows_released"] == 14 and metadata["cells"] == 6
    assert "enb_id" in metadata["quasi_identifiers"]
    # Plain JSON values, the assumptions stated, and no subscriber identifier anywhere.
    assert plain(result.figures()) and plain(metadata) and set(result.figures()) <= set(metadata)
    assert metadata["assumptions"] == singling_out.ASSUMPTIONS and "not identified" in metadata["assumptions"]
    assert not any(r[SCHEMA.subscriber] in json.dumps(metadata) for r in hand_rows())


def test_station_does_not_matter_where_it_is_dropped(tmp_path):
    # c15 without suppression: station dropped, so F merges into E (7 rows); only A and B (s1) are alone.
    no_k = dataclasses.replace(C15, k=0)
    result = singling_out.evaluate(under_test(tmp_path, hand_rows(), no_k))
    assert result.figures() == {"singling_out_rate": 0.1, "singling_out_cells": {"1": 2, "2": 1, "3-4": 1, "5+": 1}}
    assert result.metadata()["singling_out_rows"] == {"1": 2, "2": 2, "3-4": 3, "5+": 7}
    # c15 itself (k=5): A, B, C, D are withheld; E+F is one 7-row cell of 7 subscribers; nobody alone.
    result = singling_out.evaluate(under_test(tmp_path, hand_rows(), C15, name="c15"))
    assert result.figures() == {"singling_out_rate": 0.0, "singling_out_cells": {"1": 0, "2": 0, "3-4": 0, "5+": 1}}
    assert result.metadata()["subscribers_released"] == 7


def test_one_singleton_cell_singles_out_exactly_its_subscriber(tmp_path):
    # s1..s5 share one cell (minute 0); s6 has the only row of minute 10: 1 subscriber of 6.
    rows = [row(s(n), 0) for n in range(1, 6)] + [row(s(6), 10)]
    result = singling_out.evaluate(under_test(tmp_path, rows, ID_REMOVAL))
    assert result.figures() == {"singling_out_rate": 1 / 6, "singling_out_cells": {"1": 1, "2": 0, "3-4": 0, "5+": 1}}
    # s1 also observed at minute 10: that cell now has 2 rows, and nobody is alone.
    result = singling_out.evaluate(under_test(tmp_path, rows + [row(s(1), 10)], ID_REMOVAL, name="pair"))
    assert result.figures() == {"singling_out_rate": 0.0, "singling_out_cells": {"1": 0, "2": 1, "3-4": 0, "5+": 1}}


def test_subscribers_are_counted_from_either_side_of_the_keep_mask(tmp_path):
    # Five subscribers fill one 5-row cell (kept at k=5); six rows of s1 and s6..s10 sit alone in
    # other windows (withheld). Most rows are withheld, so the kept rows are looked up (semi join).
    lone = [row(s(n), 10 * (i + 1)) for i, n in enumerate((1, 6, 7, 8, 9, 10))]
    rows = [row(s(n), 0) for n in range(1, 6)] + lone
    result = singling_out.evaluate(under_test(tmp_path, rows, dataclasses.replace(ID_REMOVAL, k=5)))
    assert result.metadata()["subscribers_released"] == 5 and result.metadata()["rows_released"] == 5
    # Add a 2-row IM cell (s11, s12) and use k=2: 7 rows kept, the 6 lone rows withheld, so the
    # withheld side is the smaller one (anti join): 7 subscribers, nobody alone.
    few_withheld = rows + [row(s(n), 0, app="IM") for n in (11, 12)]
    result = singling_out.evaluate(under_test(tmp_path, few_withheld, dataclasses.replace(ID_REMOVAL, k=2), "few"))
    assert result.metadata()["subscribers_released"] == 7 and result.figures()["singling_out_rate"] == 0.0


def test_a_whole_releases_subscribers_are_counted_once_while_source_and_kept_rows_are_the_same(tmp_path,
                                                                                               monkeypatch):
    monkeypatch.setattr(files, "SETTLED_NS", 0)  # the sources are fresh: treat them as settled
    counted = []
    count_distinct = singling_out.duck.count_distinct
    monkeypatch.setattr(singling_out.duck, "count_distinct", lambda *args: counted.append(1) or count_distinct(*args))
    rows = [row(s(n), 0) for n in range(1, 6)] + [row(s(n), 10 * n) for n in (6, 7)]  # a 5-row cell, two lone rows
    release = under_test(tmp_path, rows, dataclasses.replace(ID_REMOVAL, k=5))
    with singling_out.duck.connect() as connection:
        assert [singling_out.count_subscribers(connection, release) for _ in range(3)] == [5, 5, 5]
        assert len(counted) == 1
        # Other rows kept (k=1 keeps the lone rows too): counted again.
        every_row = dataclasses.replace(release, plan=under_test(tmp_path, rows, ID_REMOVAL, "all").plan)
        assert singling_out.count_subscribers(connection, every_row) == 7 and len(counted) == 2
        # The source file rewritten (s1 twice in the cell, the same rows kept): counted again.
        rewritten = under_test(tmp_path, rows[:4] + [row(s(1), 0)] + rows[5:], dataclasses.replace(ID_REMOVAL, k=5))
        assert rewritten.source_path == release.source_path
        assert singling_out.count_subscribers(connection, rewritten) == 4 and len(counted) == 3
        # Positions are counted every time.
        assert singling_out.count_subscribers(connection, release, np.array([0, 1])) == 2 and len(counted) == 4


def test_fully_suppressed_release_has_no_cells_and_rate_zero(tmp_path):
    everything_withheld = dataclasses.replace(ID_REMOVAL, k=10**6)
    result = singling_out.evaluate(under_test(tmp_path, hand_rows(), everything_withheld))
    assert result.figures() == {"singling_out_rate": 0.0, "singling_out_cells": {"1": 0, "2": 0, "3-4": 0, "5+": 0}}
    assert result.metadata()["subscribers_released"] == 0 and result.metadata()["cells"] == 0


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """A small synthetic source (20,000 rows, 4,000 subscribers), ingested."""
    directory = tmp_path_factory.mktemp("synthetic")
    synthesize(directory / "raw.parquet", rows=20_000, subscribers=4_000, period=dt.date(2026, 11, 20))
    summary = ingest_source(directory / "raw.parquet", directory / "source.parquet", SCHEMA, book=DigestBook())
    return directory, summary.apps


def synthetic_release(synthetic, config) -> ReleaseUnderTest:
    directory, apps = synthetic
    released = directory / f"{config.id}_{config.k}.parquet"
    plan = release(directory / "source.parquet", released, config, SCHEMA, SECRETS, apps, period=RELEASE_PERIOD,
                   book=DigestBook())
    return ReleaseUnderTest(directory / "source.parquet", released, config, SCHEMA, plan, book=DigestBook())


def test_unprotected_release_singles_out_many_and_c15_none(synthetic):
    # 20,000 rows over thousands of stations: most (time, province, app, radio, station) cells hold one row.
    unprotected = singling_out.evaluate(synthetic_release(synthetic, ID_REMOVAL)).figures()
    assert unprotected["singling_out_rate"] > 0.5
    assert unprotected["singling_out_cells"]["1"] > unprotected["singling_out_cells"]["5+"]
    # k = 5 on exactly these cells (station dropped): no released cell is below 5 rows.
    protected = singling_out.evaluate(synthetic_release(synthetic, C15)).figures()
    assert protected["singling_out_rate"] == 0.0
    assert protected["singling_out_cells"]["1"] == protected["singling_out_cells"]["2"] == 0
    suppressed = singling_out.evaluate(synthetic_release(synthetic, dataclasses.replace(ID_REMOVAL, k=10**6)))
    assert suppressed.figures()["singling_out_rate"] == 0.0


def test_agrees_with_a_plain_python_count(synthetic):
    # id_removal keeps every row and releases the source's own categorical values, so the cells can
    # be counted straight from the source with a Counter.
    attacked = synthetic_release(synthetic, ID_REMOVAL)
    source = attacked.source_table([*ID_REMOVAL.released_qis(SCHEMA), SCHEMA.subscriber]).to_pylist()
    key = lambda r: tuple(r[q] for q in ID_REMOVAL.released_qis(SCHEMA))  # noqa: E731
    sizes = collections.Counter(key(r) for r in source)
    alone = {r[SCHEMA.subscriber] for r in source if sizes[key(r)] == 1}
    everyone = {r[SCHEMA.subscriber] for r in source}
    result = singling_out.evaluate(attacked)
    assert result.figures()["singling_out_rate"] == len(alone) / len(everyone)
    assert result.figures()["singling_out_cells"]["5+"] == sum(1 for n in sizes.values() if n >= 5)
