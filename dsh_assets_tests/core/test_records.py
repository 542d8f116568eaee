"""The record store keeps one partition's latest record per file, replaced whole, and names a file it cannot read."""

import pytest

from dsh_assets.core.records import Record, RecordError, RecordStore


def _record(partition: str, sha: str, run_id: str = "run-1") -> Record:
    return Record(asset="released", partition=partition, run_id=run_id, code_version="abc123",
                  values={"sha256": sha, "figures": {"k": 5, "share": 0.25, "cells": [1, 2]}, "note": None})


def test_a_record_reads_back_as_written(tmp_path):
    store = RecordStore(tmp_path)
    written = _record("c15|2026-11-01", "aa")
    store.write(written)
    assert store.latest("released", "c15|2026-11-01") == written


def test_a_partition_never_materialised_has_no_record(tmp_path):
    store = RecordStore(tmp_path)
    store.write(_record("c15|2026-11-01", "aa"))
    assert store.latest("released", "c15|2026-12-01") is None
    assert store.latest("source", "c15|2026-11-01") is None


def test_partitions_that_differ_only_in_the_separator_stay_apart(tmp_path):
    """The multi-partition key's "|" is quoted in the file name, never dropped or turned into a folder."""
    store = RecordStore(tmp_path)
    store.write(_record("a|b_c", "one"))
    store.write(_record("a_b|c", "two"))
    store.write(_record("a/b|c", "three"))
    assert [store.latest("released", key).values["sha256"] for key in ("a|b_c", "a_b|c", "a/b|c")] == [
        "one", "two", "three"]
    assert all(path.parent == tmp_path / "released" for path in tmp_path.rglob("*.json"))


def test_a_new_materialisation_replaces_the_record_and_leaves_no_temporary(tmp_path):
    store = RecordStore(tmp_path)
    store.write(_record("c15|2026-11-01", "aa", run_id="run-1"))
    store.write(_record("c15|2026-11-01", "bb", run_id="run-2"))
    latest = store.latest("released", "c15|2026-11-01")
    assert (latest.values["sha256"], latest.run_id) == ("bb", "run-2")
    assert [path.name for path in (tmp_path / "released").iterdir()] == ["c15%7C2026-11-01.json"]


def test_the_origin_names_asset_partition_code_version_and_run(tmp_path):
    assert _record("c15|2026-11-01", "aa").origin() == {
        "asset": "released", "partition": "c15|2026-11-01", "code_version": "abc123", "run_id": "run-1"}


def test_a_record_it_cannot_read_is_named(tmp_path):
    store = RecordStore(tmp_path)
    path = store.path("released", "c15|2026-11-01")
    path.parent.mkdir(parents=True)
    path.write_text('{"asset": "released"}')
    with pytest.raises(RecordError, match=r"c15%7C2026-11-01\.json.*re-materialise released c15\|2026-11-01"):
        store.latest("released", "c15|2026-11-01")
