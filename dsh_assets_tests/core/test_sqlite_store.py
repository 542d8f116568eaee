"""The ledgers' SQLite plumbing: tables made once, a column added to an old file, all-or-nothing writes."""

import datetime as dt

import pytest

from dsh_assets.core.sqlite_store import add_missing_column, connect, create_tables, utc_timestamp, write_transaction

SCHEMA = "CREATE TABLE IF NOT EXISTS entries (id INTEGER PRIMARY KEY, name TEXT NOT NULL);"


def _names(path) -> list[str]:
    with connect(path) as connection:
        return [row["name"] for row in connection.execute("SELECT name FROM entries ORDER BY id")]


def test_a_write_transaction_commits_on_success_and_leaves_nothing_on_failure(tmp_path):
    path = create_tables(tmp_path / "ledger" / "budget.sqlite", SCHEMA)
    create_tables(path, SCHEMA)  # again: nothing to do
    with write_transaction(path) as connection:
        connection.execute("INSERT INTO entries (name) VALUES ('first')")
    with pytest.raises(RuntimeError), write_transaction(path) as connection:
        connection.execute("INSERT INTO entries (name) VALUES ('half')")
        raise RuntimeError("a fault between two writes")
    assert _names(path) == ["first"]


def test_a_missing_column_is_added_once_with_its_default_for_old_rows(tmp_path):
    path = create_tables(tmp_path / "budget.sqlite", SCHEMA)
    with write_transaction(path) as connection:
        connection.execute("INSERT INTO entries (name) VALUES ('old')")
    add_missing_column(path, "entries", "state", "TEXT NOT NULL DEFAULT 'kept'")
    add_missing_column(path, "entries", "state", "TEXT NOT NULL DEFAULT 'kept'")
    with connect(path) as connection:
        assert [tuple(row) for row in connection.execute("SELECT name, state FROM entries")] == [("old", "kept")]


def test_timestamps_are_utc_and_a_naive_moment_is_read_as_utc():
    assert utc_timestamp(dt.datetime(2026, 11, 20, 8, 0)) == "2026-11-20T08:00:00+00:00"
    helsinki = dt.timezone(dt.timedelta(hours=2))
    assert utc_timestamp(dt.datetime(2026, 11, 20, 10, 0, tzinfo=helsinki)) == "2026-11-20T08:00:00+00:00"
