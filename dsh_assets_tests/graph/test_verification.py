"""`dsh verify` over a real home: which releases it verifies (recorded by the instance or found on disk), against
which asset's records, and the publications and reports beside them."""

import re
import shutil

import dagster as dg
import pytest

from dsh_assets.core.layout import Layout
from dsh_assets.core.publication.quarantine import quarantine_note
from dsh_assets.core.verification import OK
from dsh_assets.graph import runner
from dsh_assets.graph.instance import open_instance
from dsh_assets.graph.resources import DshHome
from dsh_assets.graph.verification import verify_home
from dsh_assets_tests.conftest import PERIOD, Harness, check_results, make_defs
from dsh_assets_tests.graph.publication.test_published import LENIENT_GATE, releases_file
from dsh_assets_tests.graph.release.test_checks import append_a_byte
from dsh_assets_tests.tables import sha256_file

PUBLISHED, DELETED, QUARANTINED_ID, DP, UNRECORDED, UNDECLARED = (
    "c15_window_k5_noise5", "c17_hour_groups_k5_noise10", "id_removal", "dp_counts_eps1", "c19_window_microagg10",
    "c21_window_microagg10_shuffle")
UNDECLARED_TABLE = re.compile(rf"(?ms)^\[configs\.{UNDECLARED}\]\n.*?(?=^\[)")


@pytest.fixture(scope="module")
def verified(tmp_path_factory, source_file):
    """A home on its own persistent instance, as `dsh` keeps one: PUBLISHED released, scored and published, the
    period's report written; DELETED, QUARANTINED_ID, DP and UNDECLARED released; then DP's Q2 table changed,
    DELETED's release deleted, QUARANTINED_ID changed and quarantined by its checks, a copy of PUBLISHED's release
    put where UNRECORDED's would be, and the report changed. Verified with a releases file that no longer declares
    UNDECLARED."""
    folder = tmp_path_factory.mktemp("verify")
    home = folder / "home"
    home.mkdir()
    releases = releases_file(folder, LENIENT_GATE)
    layout = Layout(home)
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv("DAGSTER_HOME", str(folder))  # open_instance points it at the home's instance
        with open_instance(layout) as instance:
            harness = Harness(make_defs(home, source_file, releases), instance, home)
            harness.source()
            for config_id in (PUBLISHED, DELETED, QUARANTINED_ID, DP, UNDECLARED):
                assert all(check_results(harness.release_only(config_id)).values()), config_id
            assert harness.evidence_only("singling_out", PUBLISHED).success
            assert harness.publication().success
            assert runner.launch_report(harness.defs, instance, PERIOD).success
            for path in (layout.dp_q2(DP, PERIOD), layout.released(QUARANTINED_ID, PERIOD),
                         layout.report_dir(PERIOD) / "report.html"):
                append_a_byte(path)
            layout.released(DELETED, PERIOD).unlink()
            assert not harness.released_checks_only(QUARANTINED_ID).success
        layout.candidate_dir(UNRECORDED, PERIOD).mkdir(parents=True)
        shutil.copy(layout.released(PUBLISHED, PERIOD), layout.released(UNRECORDED, PERIOD))
        text, found = UNDECLARED_TABLE.subn("", releases.read_text())
        assert found == 1
        undeclared = folder / "undeclared.toml"
        undeclared.write_text(text)
        yield layout, verify_home(DshHome(home=str(home), releases_file=str(undeclared)))


def _release(verification, config_id: str):
    (verdict,) = [row for row in verification.releases if row.config == config_id]
    return verdict


def test_every_release_recorded_or_on_disk_is_verified_once_and_a_quarantined_one_apart(verified):
    layout, verification = verified
    assert [(row.config, row.period) for row in verification.releases] == sorted(
        (config_id, PERIOD) for config_id in (PUBLISHED, DELETED, DP, UNRECORDED, UNDECLARED))
    [quarantined] = verification.quarantined
    assert (quarantined.config, quarantined.period) == (QUARANTINED_ID, PERIOD)
    assert quarantined.failed_checks == quarantine_note(layout, QUARANTINED_ID, PERIOD)["failed_checks"] != {}
    assert not any(QUARANTINED_ID in problem for problem in verification.problems)


def test_an_untouched_release_and_its_publication_verify_ok(verified):
    layout, verification = verified
    release = _release(verification, PUBLISHED)
    assert release.status == OK and release.sha256 == release.recorded_sha256 == sha256_file(
        layout.released(PUBLISHED, PERIOD))
    [published] = verification.published
    assert (published.config, published.period, published.path, published.status) == (
        PUBLISHED, PERIOD, layout.published(PERIOD), OK)


def test_a_recorded_release_whose_file_is_gone_is_missing(verified):
    layout, verification = verified
    deleted = _release(verification, DELETED)
    assert (deleted.status, deleted.sha256) == (f"MISSING: {layout.released(DELETED, PERIOD)} is missing", None)
    assert deleted.recorded_sha256 is not None
    assert f"{DELETED}|{PERIOD}: MISSING: {layout.released(DELETED, PERIOD)} is missing" in verification.problems


def test_a_dp_release_is_verified_against_its_own_records_its_q2_table_too(verified):
    layout, verification = verified
    release = _release(verification, DP)
    assert release.status == f"DRIFT: {layout.dp_q2(DP, PERIOD)} on disk differs from the recorded SHA-256"
    assert release.recorded_sha256 == release.sha256  # the counts table itself is as recorded


def test_a_release_file_no_materialisation_recorded_is_reported(verified):
    _, verification = verified
    release = _release(verification, UNRECORDED)
    assert (release.status, release.recorded_sha256) == ("no recorded materialisation", None)
    assert f"{UNRECORDED}|{PERIOD}: no recorded materialisation" in verification.problems


def test_a_release_of_a_configuration_no_longer_declared_is_still_verified(verified):
    layout, verification = verified
    release = _release(verification, UNDECLARED)
    assert release.status == OK and release.recorded_sha256 == sha256_file(layout.released(UNDECLARED, PERIOD))


def test_a_changed_report_is_a_problem(verified):
    layout, verification = verified
    path = layout.report_dir(PERIOD) / "report.html"
    [report] = verification.reports
    assert (report.period, report.path, report.status) == (PERIOD, path,
                                                           f"DRIFT: {path} differs from its recorded sha256")


def test_verifying_closes_the_instance_it_opens(verified, monkeypatch):
    layout, _ = verified
    disposed, dispose = [], dg.DagsterInstance.dispose
    monkeypatch.setattr(dg.DagsterInstance, "dispose", lambda instance: disposed.append(instance) or dispose(instance))
    verify_home(DshHome(home=str(layout.home)))
    assert len(disposed) == 1
