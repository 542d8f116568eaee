"""End to end: `dsh synth`, `dsh run`, `dsh verify` run as a user runs them, in subprocesses.

Each `dsh` process spends seconds importing Dagster and each run of all configurations several
more, so the independent runs of this module are started together, once, by a module fixture,
and each test waits for the ones it reads. A test that must change a home works on a copy.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dsh_assets.core.privacy.attacker import DEFAULT_KNOWN_MEASUREMENTS
from dsh_assets.core.publication.gate import load_publication
from dsh_assets.core.release.configs import load_configs, period_configs, sweep_configs
from dsh_assets.core.files import DigestBook
from dsh_assets.core.release.digest import content_sha256
from dsh_assets_tests.conftest import (
    DP_RELEASE_CHECKS,
    PERIOD,
    RELEASED_CHECKS,
    SMALL_ROWS,
    SMALL_SEED,
    SMALL_SUBSCRIBERS,
    SWEEP_TABLE,
    clean_environ,
    releases_text,
)
from dsh_assets_tests.tables import sha256_file

pytestmark = pytest.mark.e2e

DSH = [sys.executable, "-m", "dsh_assets.cli"]
PUBLICATION_LIST = load_publication(None, load_configs()).config_ids
"""The packaged [publication] config: the DPO's ordered list."""
RUN_TIMEOUT = 900
RELEASE_KEYS = {"path", "sha256", "content_sha256", "engine", "rows_in", "rows_released", "rows_withheld", "seed_id",
                "checks"}
SOURCE_KEYS = {"path", "sha256", "rows", "subscribers"}


class Dsh:
    """One `dsh` process, started now; ``result()`` waits for it (bounded) and keeps the outcome."""

    program = DSH

    def __init__(self, *args, cwd, **environ: str):
        self.args = [*self.program, *map(str, args)]
        self.process = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        env=clean_environ(**environ), cwd=cwd, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
        self._outcome: subprocess.CompletedProcess | None = None

    def result(self) -> subprocess.CompletedProcess:
        if self._outcome is None:
            try:
                stdout, stderr = self.process.communicate(timeout=RUN_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.stop()
                raise
            self._outcome = subprocess.CompletedProcess(self.args, self.process.returncode, stdout, stderr)
        return self._outcome

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)  # its own session: only this run's processes
            self.process.communicate()


class Python(Dsh):
    """One module of this checkout run as a program (``python -m``), started now."""

    program = [sys.executable, "-m"]


def dsh(*args, cwd) -> subprocess.CompletedProcess:
    return Dsh(*args, cwd=cwd).result()


def explain(process: subprocess.CompletedProcess) -> str:
    return f"exit {process.returncode}\n--- stdout\n{process.stdout[-3000:]}\n--- stderr\n{process.stderr[-3000:]}"


def released_files(home) -> list:
    """Every candidate file under the home (candidates/<config>/<period>/...)."""
    return sorted(p for p in (home / "candidates").rglob("*") if p.is_file()) if (home / "candidates").exists() else []


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("cli")


@pytest.fixture(scope="module")
def cli_source(workdir):
    out = workdir / "synthetic.parquet"
    process = dsh("synth", "--out", out, "--rows", SMALL_ROWS, "--subscribers", SMALL_SUBSCRIBERS,
                  "--seed", SMALL_SEED, "--period", PERIOD, "--json", cwd=workdir)
    assert process.returncode == 0, explain(process)
    reported = json.loads(process.stdout)
    assert reported["sha256"] == sha256_file(out)
    return out


@pytest.fixture(scope="module")
def runs(workdir, cli_source):
    """Every independent `dsh run` of the module, started at once (they share nothing but the source)."""
    bad_sources = {case: _write_bad_source(workdir, cli_source, case) for case in BAD_SOURCES}
    started = {
        # The same releases made in two processes with different string hashing, so nothing in a release may
        # depend on set or dict order of strings: `dsh run`, and the graph's release steps alone.
        "full": Dsh("run", "--source", cli_source, "--period", PERIOD, "--home", workdir / "home", "--json",
                    cwd=workdir, PYTHONHASHSEED="1"),
        "full_again": Python("dsh_assets_tests.release_bytes", cli_source, workdir / "home_again", cwd=workdir,
                             PYTHONHASHSEED="2"),
        "c15_only": Dsh("run", "--source", cli_source, "--period", PERIOD, "--home", workdir / "home_c15",
                        "--config", "c15_window_k5_noise5", "--json", cwd=workdir),
        "unknown_config": Dsh("run", "--source", cli_source, "--period", PERIOD, "--home",
                              workdir / "home_unknown_config", "--config", "no_such_config", cwd=workdir),
        "unknown_known_column": Dsh("run", "--source", cli_source, "--period", PERIOD, "--home",
                                    workdir / "home_unknown_known", cwd=workdir,
                                    DSH_RELEASES=str(_releases_knowing(workdir, "dl_speed_kbps"))),
        "no_anonymeter": Dsh("run", "--source", cli_source, "--period", PERIOD, "--home", workdir / "home_no_anonymeter",
                             cwd=workdir, DSH_ANONYMETER_PYTHON=str(workdir / "nowhere" / "python")),
        "sweep": Dsh("sweep", "--source", cli_source, "--period", PERIOD, "--home", workdir / "home_sweep", "--json",
                     cwd=workdir, DSH_RELEASES=str(short_sweeps(workdir))),
        # The gate refuses id_removal (about a third of subscribers singled out); a scheduler asked to know.
        "refused_required": Dsh("run", "--source", cli_source, "--period", PERIOD, "--home", workdir / "home_refused",
                                "--config", "id_removal", "--publish", "id_removal", "--require-publication",
                                "--json", cwd=workdir),
    }
    for case, path in bad_sources.items():
        started[case] = Dsh("run", "--source", path, "--period", PERIOD, "--home", workdir / f"home_{case}",
                            cwd=workdir)
    # c15 passes a lenient row-level gate, so the period has a row-level publication and retention a clock.
    started["published_with_dp"] = Dsh("run", "--source", cli_source, "--period", PERIOD, "--home",
                                       workdir / "home_dp", "--config", "c15_window_k5_noise5", "--config",
                                       "dp_counts_eps1", "--publish", "c15_window_k5_noise5", "--json", cwd=workdir,
                                       DSH_RELEASES=str(lenient_releases(workdir)))
    started["verbose_refusal"] = Dsh("--verbose", "run", "--source", bad_sources["positive_infinity"], "--period",
                                     PERIOD, "--home", workdir / "home_verbose_refusal", cwd=workdir)
    yield started
    for run in started.values():
        run.stop()


def _releases_knowing(workdir, column: str):
    """The test tier's releases file whose first knowledge set names ``column``."""
    path = workdir / f"releases_knowing_{column}.toml"
    path.write_text(releases_text().replace('    ["dl_throughput_kbps"],\n', f'    ["{column}"],\n', 1))
    return path


SHORT_SWEEPS = "short_sweeps.toml"


def short_sweeps(workdir) -> Path:
    """The test tier's releases file with three sweep points of two sweeps, not the packaged twenty-six of nine."""
    path = workdir / SHORT_SWEEPS
    text, replaced = SWEEP_TABLE.subn("", releases_text())
    assert replaced == 9, "the packaged file no longer declares nine sweeps"
    path.write_text(text + '\n[sweep.shuffle_noise]\nbase = "c18_window_k5_shuffle"\nnoise_scale = [0.0, 0.05]\n'
                    '\n[sweep.rank_swap_percent]\nbase = "c20_window_k5_swap5"\n"rank_swap.percent" = [10]\n')
    return path


def lenient_releases(workdir) -> Path:
    """The test tier's configurations with a row-level gate c15 passes on the small source (the rest as packaged)."""
    path = workdir / "lenient_releases.toml"
    text, replaced = re.subn(r"(?ms)^\[publication\.gate\]\n.*?(?=^\[)",
                             "[publication.gate]\nsingling_out_rate = { max = 0.5 }\n", releases_text())
    assert replaced == 1
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def full_run(workdir, runs):
    """The successful run of every configuration: (home, parsed JSON, the process)."""
    process = runs["full"].result()
    assert process.returncode == 0, explain(process)
    return workdir / "home", json.loads(process.stdout), process


def test_the_command_and_the_graph_import_no_library_only_some_steps_need():
    """Start-up is paid before the first step of every run: pandas (the scorecard, the quality tables),
    OpenDP (the DP steps), pyspark (the spark engine) and numba (the copula's loops, the relationships figure's
    ranks) are imported where they are used."""
    listed = subprocess.run(
        [sys.executable, "-c", "import sys, dsh_assets.cli, dsh_assets.definitions; "
                               "print(' '.join(m for m in ('pandas', 'opendp', 'pyspark', 'numba') if m in sys.modules))"],
        capture_output=True, text=True, env=clean_environ(), check=True)
    assert listed.stdout.split() == []


def test_synth_writes_the_same_bytes_as_the_library(cli_source, source_file):
    assert sha256_file(cli_source) == sha256_file(source_file)


def test_run_prints_one_json_object_with_every_configuration(full_run, cli_source):
    home, report, process = full_run
    assert isinstance(report, dict)
    assert report["period"] == PERIOD
    source = report["source"]
    assert SOURCE_KEYS <= set(source)
    assert source["rows"] == SMALL_ROWS and source["subscribers"] == SMALL_SUBSCRIBERS
    assert source["sha256"] == sha256_file(cli_source), "source sha256 is the input file's"
    assert source["stored_sha256"] == sha256_file(source["path"])
    assert list(report["releases"]) == list(period_configs(load_configs())), "every period's configuration, in order"
    assert "c16_window_k5_noise5_key" not in report["releases"], "an on-request configuration waits to be named"
    for config_id, release in report["releases"].items():
        assert RELEASE_KEYS <= set(release), f"{config_id}: missing {RELEASE_KEYS - set(release)}"
        path = home / "candidates" / config_id / PERIOD / "released.parquet"
        assert release["path"] == str(path)
        assert release["sha256"] == sha256_file(path)
        assert release["content_sha256"] == content_sha256(path, book=DigestBook()) and release["engine"] == "duckdb"
        assert release["rows_in"] == SMALL_ROWS
        if "dp" in release:  # an aggregate table: one row per cell; rows are the source rows it counts
            assert release["dp"]["cells"] == pq.ParquetFile(path).metadata.num_rows
            assert release["budget"]["period_used"] <= release["budget"]["period_cap"]
            # the audit, the three errors per size class, the bound's curve; Q1 from the DP medians
            assert set(release["dp"]["audit"]) == {"epsilon_claimed", "epsilon_lower", "epsilon_lower_ci", "draws",
                                                   "target_cells", "ok"} and release["dp"]["audit"]["ok"]
            assert all({"noise", "bias", "total"} <= set(release["dp"]["error"][size]) for size in ("small", "large"))
            assert {"chosen", "candidates"} <= set(release["dp"]["bound"])
            assert {"base", "release", "same_answer", "same_answer_rate"} <= set(release["answers"]["q1"])
            assert not release["answers"]["q1"]["release"].startswith("unavailable")
        else:
            assert release["rows_released"] == pq.ParquetFile(path).metadata.num_rows
            assert set(release["privacy"]) >= {"singling_out_rate", "fingerprint_correct", "linkage_correct",
                                               "alias_chain_correct", "cross_release_relinked", "inference_rate",
                                               "informed_match", "informed_match_risk", "anonymeter",
                                               "anonymeter_inference_risk", "anonymeter_inference_risk_upper",
                                               "anonymeter_singling_out_risk_upper",
                                               "anonymeter_linkability_risk_upper"}
            informed = release["privacy"]["informed_match"]
            assert [entry["known"] for entry in informed] == [list(s) for s in DEFAULT_KNOWN_MEASUREMENTS]
            assert all(set(entry) == {"known", "knowledge_error", "correct", "correct_ci", "baseline", "risk", "n"}
                       for entry in informed)
            assert release["privacy"]["informed_match_risk"] == max(entry["risk"] for entry in informed)
            anonymeter = release["privacy"]["anonymeter"]
            assert set(anonymeter) == {"version", "strength", "blocks", "narrowed", "further_blocks", "singling_out",
                                       "singling_out_univariate", "linkability", "inference"}
            assert release["privacy"]["anonymeter_inference_risk"] == max(
                secret["risk"] for secret in anonymeter["inference"].values())
            assert release["privacy"]["anonymeter_inference_risk_upper"] == max(
                secret["risk_ci"][1] for secret in anonymeter["inference"].values())
            assert anonymeter["strength"] == ("full" if config_id in PUBLICATION_LIST else "light")
            assert set(release["utility"]) >= {"groups_total", "groups_kept", "lost_groups", "joint",
                                               "joint_max_error_pp", "median_quantile_error",
                                               "large_group_max_quantile_error",
                                               "large_group_max_tail_share_error_pp"}
            assert {"same_answer", "same_decision"} <= set(release["answers"]["q2"])
        assert set(release["answers"]) == {"q1", "q2", "q3"}
        assert release["rows_in"] == release["rows_released"] + release["rows_withheld"]
        expected_checks = DP_RELEASE_CHECKS if "dp" in release else RELEASED_CHECKS
        assert set(release["checks"]) == expected_checks, config_id
        assert all(release["checks"].values()), f"{config_id}: {release['checks']}"
        assert len(release["seed_id"]) == 16
    assert len({r["sha256"] for r in report["releases"].values()}) == len(report["releases"])
    assert len([p for p in released_files(home) if p.name == "released.parquet"]) == len(report["releases"])
    # Progress goes to stderr, so stdout stays one JSON document.
    assert "id_removal" in process.stderr


def test_run_with_one_config_runs_only_that_one_and_gives_the_same_bytes(workdir, runs, full_run):
    _, full_report, _ = full_run
    home = workdir / "home_c15"
    process = runs["c15_only"].result()
    assert process.returncode == 0, explain(process)
    report = json.loads(process.stdout)
    assert list(report["releases"]) == ["c15_window_k5_noise5"]
    assert released_files(home) == [home / "candidates" / "c15_window_k5_noise5" / PERIOD / "released.parquet"]
    # Determinism through the whole graph: a fresh home, a fresh instance, the same bytes.
    assert report["releases"]["c15_window_k5_noise5"]["sha256"] == \
        full_report["releases"]["c15_window_k5_noise5"]["sha256"]


def test_another_process_with_other_string_hashing_makes_the_same_releases(workdir, runs, full_run):
    _, first, _ = full_run
    process = runs["full_again"].result()
    assert process.returncode == 0, explain(process)
    second = json.loads(process.stdout)
    # Row-level releases are deterministic; a DP draw is not (OpenDP's sampler takes no seed): its
    # reproducibility is the ledger's "published once, then the stored table" (test_dp.py).
    row_level = [c for c, r in first["releases"].items() if "dp" not in r]
    assert len(row_level) >= 6 and second["releases"] == {c: first["releases"][c]["sha256"] for c in row_level}
    assert second["stored_sha256"] == first["source"]["stored_sha256"]


def test_verify_passes_and_then_names_a_tampered_partition(workdir, full_run):
    home, _, _ = full_run
    tampered_home = workdir / "home_tampered"
    shutil.copytree(home, tampered_home)
    target = tampered_home / "candidates" / "c15_window_k5_noise5" / PERIOD / "released.parquet"
    with open(target, "ab") as handle:
        handle.write(b"\0")
    clean, tampered = Dsh("verify", "--home", home, cwd=workdir), Dsh("verify", "--home", tampered_home, cwd=workdir)

    process = clean.result()
    assert process.returncode == 0, explain(process)
    stored = [p for p in released_files(home) if p.name == "released.parquet"]
    assert f"{len(stored)} stored release(s), " in process.stdout, explain(process)
    assert process.stdout.rstrip().endswith("0 problem(s)"), explain(process)

    process = tampered.result()
    assert process.returncode != 0, explain(process)
    assert f"c15_window_k5_noise5|{PERIOD}" in process.stderr, explain(process)
    assert "DRIFT" in process.stderr
    for other in set(period_configs(load_configs())) - {"c15_window_k5_noise5"}:
        assert f"{other}|{PERIOD}" not in process.stderr


def test_verify_reads_each_file_once_a_published_link_and_its_candidate_too(full_run, monkeypatch):
    """One book for the whole verification: a publication is a hard link of its candidate, the same bytes."""
    from dsh_assets.core import files
    from dsh_assets.graph.resources import DshHome
    from dsh_assets.graph.verification import verify_home

    home, _, _ = full_run
    monkeypatch.setattr(files, "SETTLED_NS", 0)  # every file of the finished run counts as settled
    reads = collections.Counter()
    real = files._read_sha256
    monkeypatch.setattr(files, "_read_sha256", lambda path: reads.update([os.stat(path).st_ino]) or real(path))

    verification = verify_home(DshHome(home=str(home)))

    assert verification.ok and verification.published, verification.problems
    assert max(reads.values()) == 1
    linked = {os.stat(row.path).st_ino for row in verification.published}
    assert linked <= {os.stat(row.path).st_ino for row in verification.releases}


def _missing_column(table: pa.Table) -> pa.Table:
    return table.drop_columns(["jitter_ms"])


def _negative_measurement(table: pa.Table) -> pa.Table:
    column = table.column("dl_throughput_kbps").to_numpy(zero_copy_only=False).copy()
    column[[10, 20, 30]] = -5.0
    index = table.schema.get_field_index("dl_throughput_kbps")
    return table.set_column(index, "dl_throughput_kbps", pa.array(column, pa.float64()))


def _null_quasi_identifier(table: pa.Table) -> pa.Table:
    index = table.schema.get_field_index("province")
    mask = pa.array([i in (1, 2, 3, 4) for i in range(table.num_rows)])
    nulled = pc.if_else(mask, pa.scalar(None, pa.string()), table.column("province").cast(pa.string()))
    return table.set_column(index, "province", nulled)


def _empty(table: pa.Table) -> pa.Table:
    return table.slice(0, 0)


def _duplicate_column(table: pa.Table) -> pa.Table:
    # A second `province` holding MSISDNs: readers disagree on which one they take.
    return table.append_column("province", table.column("msisdn"))


def _set(table: pa.Table, column: str, rows, value) -> pa.Table:
    mask = pa.array([i in rows for i in range(table.num_rows)])
    index = table.schema.get_field_index(column)
    return table.set_column(index, column, pc.if_else(mask, pa.scalar(value, table.schema.field(column).type),
                                                       table.column(column)))


def _positive_infinity(table: pa.Table) -> pa.Table:
    return _set(table, "jitter_ms", (5, 6), float("inf"))


def _negative_infinity(table: pa.Table) -> pa.Table:
    return _set(table, "cqi", (7,), float("-inf"))


def _outside_period(table: pa.Table) -> pa.Table:
    # Three rows a month later: not rows of this period.
    times = table.column("time_start")
    later = pc.add(times, pa.scalar(30 * 24 * 3600 * 10**6, pa.duration("us")))
    mask = pa.array([i in (0, 1, 2) for i in range(table.num_rows)])
    return table.set_column(table.schema.get_field_index("time_start"), "time_start", pc.if_else(mask, later, times))


def _naive_timestamps(table: pa.Table) -> pa.Table:
    index = table.schema.get_field_index("time_start")
    return table.set_column(index, "time_start", table.column("time_start").cast(pa.timestamp("us")))


BAD_SOURCES = {
    "missing_column": (_missing_column, ["missing columns", "jitter_ms"]),
    "negative_measurement": (_negative_measurement, ["dl_throughput_kbps", "3 negative values"]),
    "null_quasi_identifier": (_null_quasi_identifier, ["province", "4 null values"]),
    "empty_table": (_empty, ["empty"]),
    "not_parquet": (None, ["not a Parquet file"]),
    "duplicate_column": (_duplicate_column, ["duplicate column names: province (2 columns)"]),
    "positive_infinity": (_positive_infinity, ["jitter_ms: 2 infinite values"]),
    "negative_infinity": (_negative_infinity, ["cqi: 1 infinite values"]),
    "outside_period": (_outside_period, ["3 rows outside the period 2026-11-20 00:00:00+00:00 to 2026-11-21",
                                         "last 2026-12-20"]),
    "naive_timestamps": (_naive_timestamps, ["time_start has timestamps without a time zone"]),
}


def _write_bad_source(workdir, cli_source, case: str):
    make, _ = BAD_SOURCES[case]
    bad = workdir / f"bad_{case}.parquet"
    if make is None:
        bad.write_text("msisdn,imsi\n358401234567,244051234567890\n")
    else:
        pq.write_table(make(pq.read_table(cli_source)), bad)
    return bad


@pytest.mark.parametrize("case", list(BAD_SOURCES))
def test_a_bad_source_is_refused_with_a_named_problem_and_writes_no_release(workdir, runs, case):
    _, expected = BAD_SOURCES[case]
    home = workdir / f"home_{case}"
    process = runs[case].result()
    assert process.returncode != 0, explain(process)
    for fragment in expected:
        assert fragment in process.stderr, f"{fragment!r} not on stderr\n{explain(process)}"
    assert released_files(home) == [], "a refused source must not lead to any released file"
    assert not (home / "source" / PERIOD / "source.parquet").exists()


TRACEBACK_MARKERS = ("Traceback", "Stack Trace", 'File "', "dagster._core")


@pytest.mark.parametrize("case", list(BAD_SOURCES))
def test_a_refused_source_is_one_line_exit_2_and_leaves_nothing(workdir, runs, case):
    _, expected = BAD_SOURCES[case]
    home = workdir / f"home_{case}"
    process = runs[case].result()
    assert process.returncode == 2, explain(process)
    lines = process.stderr.splitlines()
    naming = [line for line in lines if expected[0] in line]
    assert len(naming) == 1, f"the problem is named on one line\n{explain(process)}"
    assert naming[0].startswith(f"source {PERIOD}: REFUSED: source "), explain(process)
    assert not any(marker in process.stderr for marker in TRACEBACK_MARKERS), explain(process)
    assert len(lines) <= 2, f"progress and the refusal, nothing else\n{explain(process)}"
    assert process.stdout == ""
    written = [p for p in home.rglob("*") if p.is_file() and "dagster" not in p.relative_to(home).parts]
    assert written == [], f"a refused source writes nothing outside the run records: {written}"


def test_verbose_prints_the_traceback_the_event_log_keeps(workdir, runs, monkeypatch):
    process = runs["verbose_refusal"].result()
    assert process.returncode == 2, explain(process)
    assert "Stack Trace" in process.stderr and "SourceError" in process.stderr, explain(process)
    assert "jitter_ms: 2 infinite values" in process.stderr
    # Without --verbose the same refusal is kept, traceback and all, in the run's event log.
    import dagster as dg
    dagster_home = workdir / "home_positive_infinity" / "dagster"
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        (run,) = instance.get_runs()
        assert run.status == dg.DagsterRunStatus.FAILURE
        failures = [entry.dagster_event.step_failure_data.error for entry in instance.all_logs(run.run_id)
                    if entry.dagster_event is not None and entry.dagster_event.is_step_failure]
    assert failures and "SourceError" in failures[0].to_string() and failures[0].to_string().count('File "') >= 3


def test_an_unknown_config_is_refused_clearly(workdir, runs):
    home = workdir / "home_unknown_config"
    process = runs["unknown_config"].result()
    assert process.returncode != 0, explain(process)
    assert "unknown configuration" in process.stderr and "no_such_config" in process.stderr, explain(process)
    assert "c15_window_k5_noise5" in process.stderr, "the message lists the known configurations"
    assert released_files(home) == []


def test_run_reports_the_publication_and_each_candidates_status(full_run):
    home, report, process = full_run
    publication = report["publication"]
    assert set(publication) == {"config", "published", "path", "sha256", "refused", "gate", "considered"}
    named = publication["config"]
    considered = [entry["config"] for entry in publication["considered"]]
    # the packaged list tried in its order: up to the one published, or every one, the first named
    assert considered == list(PUBLICATION_LIST[:len(considered)]) and considered
    assert named == (considered[-1] if publication["published"] else considered[0])
    assert all(entry["refused"] for entry in publication["considered"][:-1])
    statuses = {config_id: release["status"] for config_id, release in report["releases"].items()}
    assert set(statuses.values()) <= {"candidate", "published", "quarantined"}
    row_level = {config_id: status for config_id, status in statuses.items()
                 if "dp" not in report["releases"][config_id]}
    if publication["published"]:
        assert publication["refused"] == [] and all(c["ok"] for c in publication["gate"].values())
        assert [c for c, s in row_level.items() if s == "published"] == [named]
        published = home / "published" / PERIOD / "released.parquet"
        assert publication["path"] == str(published)
        assert publication["sha256"] == sha256_file(published) == report["releases"][named]["sha256"]
    else:
        assert publication["refused"] and "published for" in process.stderr
        assert "published" not in row_level.values()
        assert not (home / "published" / PERIOD / "released.parquet").exists()
    # The DP release is judged by its own criteria and published beside the period's release.
    own = report["releases"]["dp_counts_eps1"]["publication"]
    assert statuses["dp_counts_eps1"] == "published" and own["published"] and own["budget_spent"], own
    assert set(own["gate"]) == {"audit_claim_holds", "replication_ok", "small_cells_total_error", "budget_within_caps"}
    assert own["path"] == str(home / "published" / PERIOD / "dp" / "dp_counts_eps1" / "dp_counts.parquet")
    # the period's first publication: no release was published before it to hold a candidate with
    assert all(release["pairs"] == {} for release in report["releases"].values())


def test_a_refused_publication_is_exit_3_with_require_publication_and_writes_nothing(workdir, runs):
    process = runs["refused_required"].result()
    assert process.returncode == 3, explain(process)
    report = json.loads(process.stdout)
    assert report["publication"]["published"] is False
    assert any(reason.startswith("singling_out_rate ") and "> max 0.001" in reason
               for reason in report["publication"]["refused"]), report["publication"]
    assert report["publication"]["gate"]["singling_out_rate"]["ok"] is False
    assert report["releases"]["id_removal"]["status"] == "candidate"
    assert not (workdir / "home_refused" / "published").exists()
    assert "nothing published" in process.stderr


def test_verify_fails_on_a_deleted_release_or_a_deleted_publication(workdir, full_run):
    home, report, _ = full_run
    for name, victim in (("deleted_candidate", Path("candidates") / "c17_hour_groups_k5_noise10" / PERIOD /
                          "released.parquet"),
                         ("deleted_report", Path("reports") / PERIOD / "report.html")):
        copy = workdir / f"home_{name}"
        shutil.copytree(home, copy)
        (copy / victim).unlink()
        process = dsh("verify", "--home", copy, cwd=workdir)
        assert process.returncode == 1, explain(process)
        assert "MISSING" in process.stderr and str(copy / victim) in process.stderr, explain(process)
    if report["publication"]["published"]:
        copy = workdir / "home_deleted_publication"
        shutil.copytree(home, copy)
        (copy / "published" / PERIOD / "released.parquet").unlink()
        process = dsh("verify", "--home", copy, "--json", cwd=workdir)
        assert process.returncode == 1, explain(process)
        assert [row["status"][:7] for row in json.loads(process.stdout)["published"]] == ["MISSING"]


@pytest.mark.parametrize("case, named", [
    ("unknown_known_column", "[attacker] known_measurements: 'dl_speed_kbps' is not a measurement of the roles file"),
    ("no_anonymeter", "anonymeter's environment is missing"),
])
def test_a_bad_attacker_or_a_missing_anonymeter_is_refused_in_one_line_before_anything_is_written(
        workdir, runs, case, named):
    process = runs[case].result()
    assert process.returncode == 2, explain(process)
    assert process.stderr.count("\n") == 1 and named in process.stderr, explain(process)
    if case == "no_anonymeter":
        assert "build it with: make anonymeter" in process.stderr
    home = workdir / ("home_unknown_known" if case == "unknown_known_column" else "home_no_anonymeter")
    assert not (home / "source").exists() and not (home / "candidates").exists()


def test_sweep_evaluates_every_point_publishes_nothing_and_draws_the_frontier(workdir, runs):
    process = runs["sweep"].result()
    assert process.returncode == 0, explain(process)
    report = json.loads(process.stdout)
    assert set(report["candidates"]) == set(sweep_configs(load_configs(workdir / SHORT_SWEEPS))) == {
        "sweep_shuffle_noise_0", "sweep_shuffle_noise_0p05", "sweep_rank_swap_percent_10"}
    for config_id, candidate in report["candidates"].items():
        assert candidate["ok"] and candidate["worst_attack"] and 0 <= candidate["worst_risk"] <= 1, config_id
        assert candidate["utility_kept"] is not None and isinstance(candidate["gate"], dict)
        assert candidate["publishable"] == (not candidate["refused"])
    assert report["candidates"]["sweep_shuffle_noise_0p05"]["operations"]["noise_scale"] == 0.05
    page = Path(report["report"]["path"]).read_text()
    assert "sweep_rank_swap_percent_10" in page and 'data-plot="risk_vs_utility"' in page
    assert not (workdir / "home_sweep" / "published").exists()


def test_the_runs_budget_is_the_ledgers_after_every_debit_of_the_run(workdir, runs):
    """The summary reads the ledger after every debit of the run: Q1's 0.1 slice comes after the count tables'."""
    process = runs["published_with_dp"].result()
    assert process.returncode == 0, explain(process)
    reported = json.loads(process.stdout)["releases"]["dp_counts_eps1"]["budget"]
    ledger = dsh("budget", "--home", workdir / "home_dp", "--period", PERIOD, "--json", cwd=workdir)
    assert ledger.returncode == 0, explain(ledger)
    status = json.loads(ledger.stdout)["status"]
    assert {key: reported[key] for key in reported if key != "as_of"} == \
        {key: status[key] for key in reported if key != "as_of"}
    assert reported["period_used"] == pytest.approx(1.1)  # counts 0.75 + Q2 0.25 + Q1 0.1


def files_by_digest(home: Path) -> dict[str, Path]:
    """SHA-256 -> a file of the home holding those bytes (the Dagster instance aside)."""
    return {hashlib.sha256(path.read_bytes()).hexdigest(): path for path in sorted(home.rglob("*"))
            if path.is_file() and "dagster" not in path.relative_to(home).parts}


def test_every_dp_table_a_run_paid_for_is_still_there_a_year_later(workdir, runs):
    """A DP table that passes its own gate is published and kept: under candidates/ alone, retention would delete
    it days after the period's publication, its epsilon spent."""
    process = runs["published_with_dp"].result()
    assert process.returncode == 0, explain(process)
    home = workdir / "home_dp_a_year_later"
    shutil.copytree(workdir / "home_dp", home)
    paid = {entry["config"]: entry["sha256"] for entry in json.loads(dsh(
        "budget", "--home", home, "--period", PERIOD, "--json", cwd=workdir).stdout)["entries"]
        if entry["status"] == "published"}
    assert set(paid) == {"dp_counts_eps1", "dp_counts_eps1.slow_5g", "dp_counts_eps1.q1"}

    purged = dsh("purge", "--home", home, "--today", "2027-11-20", "--json", cwd=workdir)
    assert purged.returncode == 0, explain(purged)
    assert {row["config"] for row in json.loads(purged.stdout)["deleted"] if row["kind"] == "candidate"} == \
        {"c15_window_k5_noise5", "dp_counts_eps1"}  # the period was published: its candidates are due
    kept = files_by_digest(home)
    lost = sorted(key for key, digest in paid.items() if digest not in kept)
    assert lost == [], f"DP tables paid for and deleted by retention: {lost}"
    assert all(kept[digest].relative_to(home).parts[0] == "published" for digest in paid.values())
    verified = dsh("verify", "--home", home, "--json", cwd=workdir)
    assert verified.returncode == 0, explain(verified)
