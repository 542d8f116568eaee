"""The source's and the releases' blocking checks on real partitions: each examines the file on disk, fails as a
check (not a crashed step) on a file it cannot read, and a failed release check quarantines its candidate."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.layout import Layout
from dsh_assets.core.publication.quarantine import quarantine_note
from dsh_assets.core.release.schema import ROW_ID
from dsh_assets.graph.partitions import release_key
from dsh_assets_tests.conftest import (
    PERIOD,
    QUIET,
    RELEASED_CHECKS,
    Harness,
    check_results,
    make_defs,
    materialization_metadata,
    releases_text,
    sourced_harness,
)
from dsh_assets_tests.tables import sha256_file

NO_K, SMALLEST_CELLS, UNREADABLE, GONE, DP = ("id_removal", "c17_hour_groups_k5_noise10", "c16_window_k5_noise5_key",
                                            "c18_window_k5_shuffle", "dp_counts_eps1")
NO_PROVINCE = "c20_window_k5_swap5"


def with_line(path: Path, config_id: str, line: str, replacement: str) -> Path:
    """The test tier's configurations at ``path``, with ``line`` of the table [configs.CONFIG_ID] replaced."""
    table = rf"(?ms)(^\[configs\.{config_id}\]\n(?:(?!^\[).)*?)^{re.escape(line)}$"
    text, found = re.subn(table, lambda match: match.group(1) + replacement, releases_text(), count=1)
    assert found == 1, f"[configs.{config_id}] no longer has the line {line!r}"
    path.write_text(text)
    return path


def _rewrite_without_last_row(path) -> None:
    table = pq.read_table(path)
    pq.write_table(table.slice(0, table.num_rows - 1), path)


def append_a_byte(path) -> None:
    with open(path, "ab") as handle:
        handle.write(b"\0")


def checked_alone(harness: Harness, check: str, config_id: str) -> dg.ExecuteInProcessResult:
    """One check of a row-level release run by itself: no other check of the run moves its file away first (the
    first failed check quarantines the candidate, and the checks after it find no file)."""
    job = dg.define_asset_job(f"{check}_alone", selection=dg.AssetSelection.checks(
        dg.AssetCheckKey(dg.AssetKey("released"), check)))
    merged = dg.Definitions.merge(harness.defs, dg.Definitions(jobs=[job]))
    return merged.resolve_job_def(job.name).execute_in_process(
        instance=harness.instance, run_config=QUIET, raise_on_error=False,
        tags={"dagster/partition": str(release_key(config_id, PERIOD))})


def check_metadata(result: dg.ExecuteInProcessResult) -> dict[str, dict]:
    """Check name -> its metadata as plain values."""
    return {e.check_name: {key: value.value for key, value in e.metadata.items()}
            for e in result.get_asset_check_evaluations()}


@pytest.fixture(scope="module")
def checked(tmp_path_factory, source_file):
    """One home with a release per case (NO_PROVINCE's from a releases file where it drops the province), each
    checked as it was written and passing; then SMALLEST_CELLS's checks under a k one above its smallest cell (5
    rows, its k), and after their files changed, the checks of GONE (its candidate folder deleted) and DP (a byte
    appended to its Q2 table), and `no_identifiers` alone on UNREADABLE (its release overwritten with bytes that are
    not Parquet)."""
    folder = tmp_path_factory.mktemp("release_checks")
    with sourced_harness(folder, source_file) as harness:
        home, instance = harness.home, harness.instance
        written = {config_id: harness.release_only(config_id)
                   for config_id in (NO_K, SMALLEST_CELLS, UNREADABLE, GONE, DP)}
        no_province = with_line(folder / "no_province.toml", NO_PROVINCE, 'drop_fields = ["identifiers", "station"]',
                                'drop_fields = ["identifiers", "station", "province"]')
        written[NO_PROVINCE] = Harness(make_defs(home, source_file, no_province), instance, home
                                       ).release_only(NO_PROVINCE)
        assert all(all(check_results(result).values()) for result in written.values())
        layout = Layout(home)
        layout.released(UNREADABLE, PERIOD).write_bytes(b"not a parquet file")
        shutil.rmtree(layout.candidate_dir(GONE, PERIOD))
        append_a_byte(layout.dp_q2(DP, PERIOD))
        again = {config_id: harness.released_checks_only(config_id) for config_id in (GONE, DP)}
        again[UNREADABLE] = checked_alone(harness, "no_identifiers", UNREADABLE)
        k_6 = with_line(folder / "k_6.toml", SMALLEST_CELLS, "k = 5", "k = 6")
        again[SMALLEST_CELLS] = Harness(make_defs(home, source_file, k_6), instance, home
                                        ).released_checks_only(SMALLEST_CELLS)
        yield layout, written, again


def test_a_release_without_k_passes_min_cell_size_with_a_note_saying_so(checked):
    _, written, _ = checked
    assert check_metadata(written[NO_K])["min_cell_size"] == {"k": 0, "note": "no k configured for this release"}


def test_min_cell_size_holds_at_k_and_quarantines_a_candidate_whose_smallest_cell_is_under_it(checked):
    layout, written, again = checked
    at_k = check_metadata(written[SMALLEST_CELLS])["min_cell_size"]
    assert check_results(written[SMALLEST_CELLS])["min_cell_size"]
    assert (at_k["k"], at_k["min_cell_size"]) == (5, 5)  # k = 5 withholds every smaller cell: the smallest is 5
    under = check_metadata(again[SMALLEST_CELLS])["min_cell_size"]
    assert not check_results(again[SMALLEST_CELLS])["min_cell_size"]
    assert under["problem"] == "a released cell has 5 rows, under k = 6"
    assert not layout.released(SMALLEST_CELLS, PERIOD).exists()
    note = quarantine_note(layout, SMALLEST_CELLS, PERIOD)
    assert note["failed_checks"]["min_cell_size"] == "a released cell has 5 rows, under k = 6"
    assert (layout.quarantine_dir(SMALLEST_CELLS, PERIOD) / "released.parquet").is_file()  # moved, not deleted


def test_min_cell_size_counts_the_cells_a_release_keeps_when_it_drops_a_quasi_identifier(checked):
    layout, written, _ = checked
    # The cells of the released file itself, counted apart: its rows grouped by the quasi-identifiers it kept.
    released = pq.read_table(layout.released(NO_PROVINCE, PERIOD))
    assert "province" not in released.column_names
    sizes = released.group_by(["time_start", "application_category", "radio_access_type"]).aggregate(
        [([], "count_all")]).column("count_all").to_pylist()
    assert check_metadata(written[NO_PROVINCE])["min_cell_size"] == {"k": 5, "min_cell_size": min(sizes),
                                                                   "cells": len(sizes)}


def test_a_release_that_is_not_parquet_fails_no_identifiers_as_a_check_not_a_crash(checked):
    layout, _, again = checked
    assert check_results(again[UNREADABLE]) == {"no_identifiers": False}
    problem = check_metadata(again[UNREADABLE])["no_identifiers"]["problem"]
    assert problem.startswith(f"{layout.released(UNREADABLE, PERIOD)} is unreadable: "), problem
    assert "No such file" not in problem  # read and refused, not missing
    quarantined = layout.quarantine_dir(UNREADABLE, PERIOD) / "released.parquet"
    assert quarantined.read_bytes() == b"not a parquet file"  # kept as it was: nothing in it was read


def test_a_candidate_gone_from_disk_fails_its_checks_and_no_quarantine_claims_it(checked):
    """Nothing to move: a note would tell `dsh verify` it was quarantined, when it is missing."""
    layout, _, again = checked
    assert check_results(again[GONE]) == dict.fromkeys(RELEASED_CHECKS, False)
    assert all("quarantined" not in metadata for metadata in check_metadata(again[GONE]).values())
    assert quarantine_note(layout, GONE, PERIOD) is None


def test_checksum_drift_guards_a_dp_releases_q2_table_too(checked):
    layout, _, again = checked
    drift = check_metadata(again[DP])["checksum_drift"]
    assert not check_results(again[DP])["checksum_drift"]
    assert drift["recorded_q2_sha256"] != drift["on_disk_q2_sha256"]
    assert drift["problem"] == f"{layout.dp_q2(DP, PERIOD)} on disk differs from the recorded SHA-256"
    assert sorted(path.name for path in layout.quarantine_dir(DP, PERIOD).glob("*.parquet")) == [
        "q2_slow_5g.parquet", "released.parquet"]


@pytest.mark.parametrize("tamper", [_rewrite_without_last_row, append_a_byte], ids=["rewrite", "append_byte"])
def test_tampered_release_fails_checksum_drift_and_a_rerun_restores_it(harness: Harness, tamper):
    config_id = "c15_window_k5_noise5"
    harness.source()
    first = materialization_metadata(harness.release_only(config_id), "released")["sha256"].value
    path = harness.released_path(config_id)
    key = release_key(config_id, PERIOD)

    # Untouched: the check-only run passes and materialises nothing.
    untouched = harness.released_checks_only(config_id)
    assert untouched.get_asset_materialization_events() == []
    assert RELEASED_CHECKS <= set(check_results(untouched)) and all(check_results(untouched).values())

    tamper(path)
    tampered = sha256_file(path)
    assert tampered != first
    checked = harness.released_checks_only(config_id)
    assert checked.get_asset_materialization_events() == [], "a check-only run must not rewrite the release"
    assert check_results(checked)["checksum_drift"] is False
    drift = check_metadata(checked)["checksum_drift"]
    assert drift["recorded_sha256"] == first
    assert drift["on_disk_sha256"] == tampered
    assert "differs" in drift["problem"]
    assert not checked.success
    assert len(harness.recorded("released", key, limit=10)) == 1
    # The failed check quarantined the candidate: out of candidates/, kept as it was, with a note of why.
    assert not path.exists()
    quarantined = harness.home / "quarantine" / config_id / PERIOD
    assert sha256_file(quarantined / "released.parquet") == tampered, "the check-only run touched the file"
    note = json.loads((quarantined / "quarantine.json").read_text())
    assert "checksum_drift" in note["failed_checks"] and note["files"]["released.parquet"]["sha256"] == tampered

    # Re-materialising with unchanged inputs gives the same bytes, and the drift check passes again.
    again = harness.release_only(config_id)
    assert again.success
    metadata = {k: v.value for k, v in materialization_metadata(again, "released").items()}
    assert metadata["sha256"] == first == sha256_file(path)
    assert RELEASED_CHECKS <= set(check_results(again)) and all(check_results(again).values())
    history = harness.recorded("released", key, limit=10)
    assert [entry["sha256"] for entry in history] == [first, first]
    drift_after = check_metadata(again)["checksum_drift"]
    assert drift_after["previous_same_inputs"] is True
    assert drift_after["previous_sha256"] == first
    assert all(check_results(harness.released_checks_only(config_id)).values())


def test_a_stored_source_changed_after_its_ingest_fails_the_source_checks(harness: Harness):
    """The ingest remembers what validating its stored file finds, in this very process: a file changed since is
    read, so the blocking schema check still fails on it."""
    result = harness.source()
    assert check_results(result) == {"source_schema": True, "source_checksum_drift": True}
    stored = harness.home / "source" / PERIOD / "source.parquet"
    data = pq.read_table(stored)
    ids = data.column(ROW_ID).to_numpy().copy()
    ids[[0, 1]] = ids[[1, 0]]
    pq.write_table(data.set_column(data.schema.get_field_index(ROW_ID), ROW_ID, pa.array(ids)), stored)

    checks = harness.source_checks_only()
    assert check_results(checks) == {"source_schema": False, "source_checksum_drift": False}
    problems = {e.check_name: e.metadata["problem"].value for e in checks.get_asset_check_evaluations()}
    assert "2 rows whose row id is not their position" in problems["source_schema"], problems
    assert not harness.release("id_removal", raise_on_error=False).success  # nothing is released from it
