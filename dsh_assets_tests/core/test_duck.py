"""Every connection is a cursor of the process's database, in UTC, with the configured memory limit and spill
folder, and keeps its temporary objects to itself."""

import duckdb
import pyarrow as pa
import pytest

from dsh_assets.core import duck


def test_connections_use_the_configured_limit_and_spill_folder(tmp_path):
    previous = duck.memory_settings()
    spill = tmp_path / "scratch" / "duckdb"
    try:
        duck.configure("256MB", spill)
        with duck.connect() as connection:
            limit, folder = connection.execute(
                "SELECT current_setting('memory_limit'), current_setting('temp_directory')").fetchone()
        assert limit in ("256.0 MiB", "244.1 MiB") and folder == str(spill) and spill.is_dir()
    finally:
        duck.configure(previous.memory_limit, previous.temp_directory)


def test_connections_share_a_database_but_not_their_temporary_objects():
    with duck.connect() as first, duck.connect() as second:
        first.execute("CREATE TEMP TABLE mine AS SELECT 1 AS x")
        first.register("registered", pa.table({"y": [2]}))
        for name in ("mine", "registered"):
            with pytest.raises(duckdb.CatalogException, match="does not exist"):
                second.sql(f"SELECT * FROM {name}").fetchall()
        assert first.sql("SELECT x FROM mine").fetchall() == [(1,)]
        assert second.execute("SELECT current_setting('TimeZone')").fetchone()[0] == "UTC"
    with duck.connect() as later:
        assert later.execute("SELECT count(*) FROM duckdb_tables()").fetchone()[0] == 0


def test_other_settings_start_a_new_database_and_an_open_connection_keeps_its_own(tmp_path):
    previous = duck.memory_settings()
    try:
        duck.configure("256MB", tmp_path / "a")
        with duck.connect() as before:
            duck.configure("256MB", tmp_path / "a")  # the same settings: the same database
            with duck.connect() as same:
                same.execute("SET GLOBAL max_expression_depth = 77")
                assert before.execute("SELECT current_setting('max_expression_depth')").fetchone()[0] == 77
            duck.configure("128MB", tmp_path / "b")
            with duck.connect() as after:
                limit, folder = after.execute(
                    "SELECT current_setting('memory_limit'), current_setting('temp_directory')").fetchone()
                assert limit in ("128.0 MiB", "122.0 MiB") and folder == str(tmp_path / "b")
                assert after.execute("SELECT current_setting('max_expression_depth')").fetchone()[0] != 77
            assert before.execute("SELECT current_setting('temp_directory')").fetchone()[0] == str(tmp_path / "a")
    finally:
        duck.configure(previous.memory_limit, previous.temp_directory)


def test_a_distinct_count_in_passes_over_hash_shares_is_the_exact_count(monkeypatch):
    with duck.connect() as connection:
        connection.execute("CREATE TEMP TABLE t AS SELECT (i % 997)::VARCHAR AS s, i FROM range(20000) r(i)")
        relation, parameters = "FROM t WHERE i >= ?", [5000]
        one = duck.count_distinct(connection, "s", relation, parameters, rows=15000)
        monkeypatch.setattr(duck, "DISTINCT_ROWS_PER_PASS", 1000)  # 15 passes
        assert duck.count_distinct(connection, "s", relation, parameters, rows=15000) == one == 997


def test_groups_made_in_passes_over_hash_shares_are_the_same_groups(monkeypatch):
    with duck.connect() as connection:
        connection.execute("CREATE TEMP TABLE t AS SELECT (i % 997)::VARCHAR AS s, i FROM range(20000) r(i)")
        select, relation = "s, count(*) AS n, min(i) AS first", "FROM t WHERE i >= 5000"
        one = duck.grouped(connection, "s", select, relation, rows=15000).sort_by("first")
        monkeypatch.setattr(duck, "DISTINCT_ROWS_PER_PASS", 1000)  # 15 passes
        assert duck.grouped(connection, "s", select, relation, rows=15000).sort_by("first").equals(one)
        assert duck.grouped(connection, "s", select, "FROM t", rows=20000).num_rows == 997


@pytest.mark.parametrize("limit, parts, share", [
    ("2GB", 2, "1000000000B"), ("1GB", 3, "333333333B"), ("512 MiB", 4, "134217728B"), ("80%", 2, "40%"),
    ("1.5GB", 1, "1.5GB"),
])
def test_a_memory_limit_is_shared_between_processes(limit, parts, share):
    assert duck.divided_memory_limit(limit, parts) == share


def test_a_memory_limit_in_a_unit_it_cannot_share_is_refused_by_name():
    with pytest.raises(ValueError, match="memory limit '3 pages': cannot share it between 2 processes"):
        duck.divided_memory_limit("3 pages", 2)
