"""Every connection carries the configured memory limit and spill folder."""

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


def test_a_distinct_count_in_passes_over_hash_shares_is_the_exact_count(monkeypatch):
    with duck.connect() as connection:
        connection.execute("CREATE TABLE t AS SELECT (i % 997)::VARCHAR AS s, i FROM range(20000) r(i)")
        relation, parameters = "FROM t WHERE i >= ?", [5000]
        one = duck.count_distinct(connection, "s", relation, parameters, rows=15000)
        monkeypatch.setattr(duck, "DISTINCT_ROWS_PER_PASS", 1000)  # 15 passes
        assert duck.count_distinct(connection, "s", relation, parameters, rows=15000) == one == 997


def test_groups_made_in_passes_over_hash_shares_are_the_same_groups(monkeypatch):
    with duck.connect() as connection:
        connection.execute("CREATE TABLE t AS SELECT (i % 997)::VARCHAR AS s, i FROM range(20000) r(i)")
        select, relation = "s, count(*) AS n, min(i) AS first", "FROM t WHERE i >= 5000"
        one = duck.grouped(connection, "s", select, relation, rows=15000).sort_by("first")
        monkeypatch.setattr(duck, "DISTINCT_ROWS_PER_PASS", 1000)  # 15 passes
        assert duck.grouped(connection, "s", select, relation, rows=15000).sort_by("first").equals(one)
        assert duck.grouped(connection, "s", select, "FROM t", rows=20000).num_rows == 997
