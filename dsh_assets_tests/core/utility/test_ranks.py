"""Quantiles from order statistics (core/utility/ranks.py) against DuckDB's own quantile_cont, to the last bit."""

import random

import duckdb
import numpy as np
import pandas as pd
import pytest

from dsh_assets.core import duck
from dsh_assets.core import files as files_module
from dsh_assets.core.files import DigestBook
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.release.source import ingest_source
from dsh_assets.core.utility import quality_groups
from dsh_assets.core.utility.quality_groups import HIGH, LOW, DuckDBAggregations, Measure
from dsh_assets.core.utility import ranks
from dsh_assets.core.utility.ranks import (
    memory_limit_bytes,
    quantile_cont,
    ranked_quantiles,
    selected_quantiles,
)
from dsh_assets_tests.tables import row, synthetic_stored, write

SCHEMA = load_schema()
MEASURES = (Measure(SCHEMA.download, LOW), Measure(SCHEMA.latency, HIGH))


def test_quantile_cont_interpolates_as_duckdb_does():
    """The interpolation against DuckDB's own quantile_cont, bit for bit, on random groups of 1 to 40."""
    draw = random.Random(14)
    groups = [[draw.uniform(-50.0, 1e5) * draw.random() for _ in range(draw.randint(1, 40))] for _ in range(400)]
    with duckdb.connect() as con:
        expected = [con.execute("SELECT quantile_cont(x, [0.1, 0.5, 0.9]) FROM unnest(?::DOUBLE[]) t(x)",
                                [values]).fetchone()[0] for values in groups]
    computed = [[quantile_cont(dict(enumerate(sorted(values))), len(values), q) for q in (0.1, 0.5, 0.9)]
                for values in groups]
    assert computed == expected


def test_a_window_sort_finds_the_order_statistics_quantile_cont_reads(monkeypatch):
    # Groups of 1 to 60 values with ties and nulls, one group with only nulls (absent from the answer).
    monkeypatch.setattr(ranks, "selected_quantiles", lambda *args: None)  # as for a NaN: the window sort
    draw = random.Random(5)
    records = [(g, None if draw.random() < 0.1 else float(draw.randint(0, 20)))
               for g in range(50) for _ in range(draw.randint(1, 60))] + [(99, None), (99, None)]
    with duckdb.connect() as con:
        con.execute("CREATE TABLE t (g INTEGER, x DOUBLE)")
        con.executemany("INSERT INTO t VALUES (?, ?)", records)
        expected = dict(con.execute("SELECT g, quantile_cont(x, [0.1, 0.5, 0.9]) FROM t WHERE x IS NOT NULL "
                                    "GROUP BY g").fetchall())
        found = ranked_quantiles(con, "SELECT g AS k0, x AS v FROM t", [], ["k0"], "v", (0.1, 0.5, 0.9))
        whole = ranked_quantiles(con, "SELECT x AS v FROM t WHERE g < ?", [10], [], "v", (0.25,))
        whole_expected = con.execute("SELECT quantile_cont(x, 0.25) FROM t WHERE g < 10").fetchone()[0]
    assert {key[0]: value for key, value in found.items()} == expected and 99 not in expected
    assert whole == {(): [whole_expected]}


QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.9, 1.0)


def _table_with_ties_and_nulls(con, rows: int, seed: int):
    draw = random.Random(seed)
    con.execute("CREATE TABLE t (g INTEGER, x DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?, ?)", [
        (None if draw.random() < 0.02 else draw.randint(0, 9), None if draw.random() < 0.05 else
         draw.choice([float(draw.randint(0, 30)), draw.lognormvariate(0, 3), -draw.expovariate(0.1)]))
        for _ in range(rows)])


@pytest.mark.parametrize("buckets, exact", [(2, 0), (16, 7), (1 << 16, 1 << 12)])
def test_selection_finds_the_order_statistics_quantile_cont_reads(monkeypatch, buckets, exact):
    # 2 buckets and no range counted by value: a rank's range halves each pass, down to one distinct value.
    monkeypatch.setattr(ranks, "SELECTION_BUCKETS", buckets)
    monkeypatch.setattr(ranks, "SELECTION_EXACT_VALUES", exact)
    monkeypatch.setattr(ranks, "SELECTION_PASSES", 200)
    with duckdb.connect() as con:
        _table_with_ties_and_nulls(con, 3001, seed=buckets)
        for cut in (10, 3, 1):
            expected = con.execute("SELECT quantile_cont(x, ?) FROM t WHERE g < ?", [list(QUANTILES), cut]).fetchone()[0]
            found = selected_quantiles(con, "SELECT x AS v FROM t WHERE g < ?", [cut], [], "v", QUANTILES)
            assert found == {(): expected}
        assert selected_quantiles(con, "SELECT x AS v FROM t WHERE g > ?", [99], [], "v", QUANTILES) == {}
        # per group, a null group included; a group with no valid value is absent, as in ranked_quantiles
        con.execute("INSERT INTO t VALUES (42, NULL)")
        expected = dict(con.execute("SELECT g, quantile_cont(x, ?) FROM t WHERE x IS NOT NULL GROUP BY g",
                                    [list(QUANTILES)]).fetchall())
        found = selected_quantiles(con, "SELECT g AS k0, x AS v FROM t", [], ["k0"], "v", QUANTILES)
        assert {key[0]: value for key, value in found.items()} == expected and None in expected


def test_selection_leaves_non_finite_values_and_wide_spreads_to_the_window_sort(monkeypatch):
    with duckdb.connect() as con:
        _table_with_ties_and_nulls(con, 500, seed=3)
        con.execute("INSERT INTO t VALUES (1, 'nan'::DOUBLE), (2, 'inf'::DOUBLE), (3, 1e300), (4, 1e-300)")
        for rows in ("SELECT x AS v FROM t", "SELECT x AS v FROM t WHERE g <> 2", "SELECT x AS v FROM t WHERE g > 2"):
            expected = con.execute(f"SELECT quantile_cont(v, ?) FROM ({rows})", [list(QUANTILES)]).fetchone()[0]
            monkeypatch.setattr(ranks, "SELECTION_EXACT_VALUES", 4)
            monkeypatch.setattr(ranks, "SELECTION_PASSES", 1)
            selected = selected_quantiles(con, rows, [], [], "v", QUANTILES)
            assert selected is None  # a NaN, an infinity, or more values than one pass narrows to four
            ranked = ranked_quantiles(con, rows, [], [], "v", QUANTILES)
            assert list(ranked) == [()]
            np.testing.assert_array_equal(ranked[()], expected)  # exact, and NaN where DuckDB gives NaN


def test_the_memory_limit_is_read_in_bytes():
    with duckdb.connect() as con:
        con.execute("SET memory_limit = '1GB'")
        assert abs(memory_limit_bytes(con) - 10**9) < 10**7  # DuckDB reports it as 953.6 MiB
        con.execute("SET memory_limit = '512MB'")
        assert abs(memory_limit_bytes(con) - 512 * 10**6) < 10**7


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A synthetic source, and a small one with edge groups: one value, only nulls, ties."""
    directory = tmp_path_factory.mktemp("ranks")
    source = synthetic_stored(directory, rows=5000, subscribers=900, seed=9)
    edge = [row("358400000001", app="IM", radio="3G", value=4.0),
            *[row(f"35840000001{i}", app="VPN", radio="5G", value=7.0) for i in range(4)],
            *[row(f"35840000002{i}", app="Gaming", radio="4G", dl_throughput_kbps=None, radio_latency_ms=None)
              for i in range(3)],
            *[row(f"35840000003{i}", app="Gaming", radio="5G", value=float(i % 3)) for i in range(9)]]
    ingest_source(write(directory / "edge_raw.parquet", edge), directory / "edge.parquet", SCHEMA, book=DigestBook())
    return [source, directory / "edge.parquet"]


def _passes(path):
    """The three passes, computed afresh (DuckDBAggregations would remember them)."""
    with duck.connect() as connection:
        thresholds = quality_groups.tail_thresholds(path, MEASURES, connection)
        cells = quality_groups.cell_statistics(path, SCHEMA.app, SCHEMA.radio, MEASURES, thresholds,
                                               connection=connection)
        five_g = quality_groups.cell_statistics(path, SCHEMA.app, SCHEMA.radio, MEASURES, thresholds,
                                                only_radio="5G", connection=connection)
        stations, overall = quality_groups.station_statistics(path, SCHEMA.station, SCHEMA.latency, connection)
    stations = stations.sort_values("station").reset_index(drop=True)
    return thresholds, cells, five_g, stations.astype({"station": "int64", "load": "int64"}), overall


@pytest.mark.parametrize("which", [0, 1])
@pytest.mark.parametrize("selection", [True, False], ids=["selected", "window sort"])
def test_the_utility_passes_give_the_same_figures_whichever_way_the_quantiles_come(files, monkeypatch, which,
                                                                                 selection):
    in_memory = _passes(files[which])
    monkeypatch.setattr(quality_groups, "holds_in_memory", lambda connection, values: False)
    monkeypatch.setattr(ranks, "SELECTION_EXACT_VALUES", 2)  # every group is narrowed before it is counted by value
    if not selection:
        monkeypatch.setattr(ranks, "selected_quantiles", lambda *args: None)
    ranked = _passes(files[which])
    assert ranked[:3] == in_memory[:3]
    pd.testing.assert_frame_equal(ranked[3], in_memory[3], check_exact=True)
    assert ranked[4] == in_memory[4]
    if which == 1:  # the edge groups: a null-only group has no quantiles on either side
        assert in_memory[1].get("Gaming", "4G", SCHEMA.download)["p50"] is None
        assert in_memory[1].get("IM", "3G", SCHEMA.download)["p10"] == 4.0


def test_the_passes_over_an_unchanged_file_run_once_a_process(files, monkeypatch):
    monkeypatch.setattr(files_module, "SETTLED_NS", 0)
    calls = []
    real = quality_groups.cell_statistics
    monkeypatch.setattr(quality_groups, "cell_statistics", lambda *args, **kw: calls.append(args) or real(*args, **kw))
    with duck.connect() as connection:
        passes = DuckDBAggregations(connection, DigestBook())
        thresholds = passes.tail_thresholds(files[0], MEASURES)
        first = passes.cell_statistics(files[0], SCHEMA.app, SCHEMA.radio, MEASURES, thresholds)
        again = passes.cell_statistics(files[0], SCHEMA.app, SCHEMA.radio, MEASURES, thresholds)
        assert again is first and len(calls) == 1
        passes.cell_statistics(files[0], SCHEMA.app, SCHEMA.radio, MEASURES, thresholds, only_radio="5G")
        assert len(calls) == 2  # other arguments, another pass
        files[0].touch()  # a later write: read again
        passes.cell_statistics(files[0], SCHEMA.app, SCHEMA.radio, MEASURES, thresholds)
        assert len(calls) == 3
