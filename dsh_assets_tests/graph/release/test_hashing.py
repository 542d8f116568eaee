"""A file is hashed where it is written and read to be verified at most once by the runs of one definitions."""

from __future__ import annotations

import collections

from dsh_assets.core import files
from dsh_assets.core.layout import Layout
from dsh_assets_tests.conftest import PERIOD, Harness

ROW_LEVEL, DP = "c15_window_k5_noise5", "dp_counts_eps1"


def test_every_run_of_a_period_reads_each_file_at_most_once_and_what_it_wrote_never(harness: Harness,
                                                                                    monkeypatch):
    """Source, two releases with their checks and evidence, the publication: each its own run, one book."""
    reads = collections.Counter()
    real = files._read_sha256
    monkeypatch.setattr(files, "_read_sha256", lambda path: reads.update([str(path)]) or real(path))

    harness.source()
    for config_id in (ROW_LEVEL, DP):
        assert harness.release(config_id).success
    harness.publication(publish=ROW_LEVEL)

    layout = Layout(harness.home)
    asked = {layout.source(PERIOD), layout.released(ROW_LEVEL, PERIOD), layout.released(DP, PERIOD)}
    assert all(path.is_file() for path in asked)
    assert max(reads.values()) == 1, reads
    assert {str(layout.source(PERIOD)), str(layout.released(ROW_LEVEL, PERIOD))}.isdisjoint(reads), \
        "hashed as they were written: never read to be verified"


def test_a_file_changed_between_two_runs_is_read_again_and_refused(harness: Harness):
    """The book keeps a digest only while the file stays as it was: the next run's checks read the change."""
    harness.source()
    assert harness.release(ROW_LEVEL).success
    with open(harness.released_path(ROW_LEVEL), "ab") as handle:
        handle.write(b"\0")

    result = harness.released_checks_only(ROW_LEVEL)

    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not evaluations["checksum_drift"].passed
    assert "differs from the recorded SHA-256" in evaluations["checksum_drift"].metadata["problem"].value


def test_the_source_check_takes_the_validation_the_ingest_kept(harness: Harness, monkeypatch):
    """`source_schema` in the run that wrote the stored source: judged from the ingest's validation, not re-read."""
    from dsh_assets.core.release import source as source_module

    stored_reads = []
    real = source_module._validated

    def counted(path, schema, window, stored):
        if stored:
            stored_reads.append(path)
        return real(path, schema, window, stored)

    monkeypatch.setattr(source_module, "_validated", counted)
    result = harness.source()

    assert {e.check_name: e.passed for e in result.get_asset_check_evaluations()}["source_schema"]
    assert stored_reads == []
