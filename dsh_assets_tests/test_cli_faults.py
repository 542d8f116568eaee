"""Faults, hit through `dsh` as a user hits them: an unusable home, concurrent runs, a killed run, a full disk.

Like test_cli.py, each case runs `dsh` in subprocesses. The PostgreSQL cases use the session's
throwaway server (conftest.py `postgres`); the disk-full cases mount a small tmpfs (root only).
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from dsh_assets.core.layout import Layout
from dsh_assets.core.release.synth import synthesize
from dsh_assets.graph.instance import POSTGRES_ENV, UNFINISHED, open_instance
from dsh_assets_tests.conftest import PERIOD, SMALL_SEED, clean_environ
from dsh_assets_tests.tables import sha256_file
from dsh_assets_tests.test_cli import Dsh, explain

pytestmark = pytest.mark.e2e

CONFIG = "c15_window_k5_noise5"
TRACEBACK_MARKERS = ("Traceback", "Stack Trace", 'File "')


def run_args(source, home) -> list:
    return ["run", "--source", source, "--period", PERIOD, "--home", home, "--config", CONFIG]


def one_line_exit_2(process: subprocess.CompletedProcess, fragment: str) -> None:
    assert process.returncode == 2, explain(process)
    assert process.stderr.count("\n") == 1 and fragment in process.stderr, explain(process)
    assert not any(marker in process.stderr for marker in TRACEBACK_MARKERS), explain(process)


def runs_of(home: Path, monkeypatch, postgres_url: str | None = None) -> list[dg.DagsterRun]:
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    if postgres_url:
        monkeypatch.setenv(POSTGRES_ENV, postgres_url)
    with open_instance(Layout(home)) as instance:
        return list(instance.get_runs())


def temporaries(home: Path) -> list[Path]:
    return sorted(p for p in home.rglob("*.tmp"))


# --- a home that cannot be used ------------------------------------------------------------------

@pytest.fixture
def read_only_home(tmp_path):
    """A folder nobody may write: a read-only tmpfs as root (root ignores modes), mode 0555 otherwise."""
    path = tmp_path / "read_only_home"
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        yield path
        path.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(path)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)


def test_a_home_that_is_a_file_or_read_only_is_one_line_and_exit_2(tmp_path, read_only_home, source_file):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a folder")
    cases = {
        ("run", "is not a directory"): Dsh(*run_args(source_file, a_file), cwd=tmp_path),
        ("verify", "a parent folder is not a directory"): Dsh("verify", "--home", a_file / "below", cwd=tmp_path),
        ("run", "is not writable"): Dsh(*run_args(source_file, read_only_home), cwd=tmp_path),
        ("verify", "is not writable"): Dsh("verify", "--home", read_only_home, cwd=tmp_path),
        ("report", "is not writable"): Dsh("report", "--home", read_only_home, cwd=tmp_path),
        ("budget", "is not writable"): Dsh("budget", "--home", read_only_home, cwd=tmp_path),
        ("budget", "cannot create home"): Dsh("budget", "--home", read_only_home / "new", cwd=tmp_path),
    }
    for (command, fragment), started in cases.items():
        process = started.result()
        one_line_exit_2(process, f"dsh {command}: ")
        assert fragment in process.stderr, explain(process)
    assert a_file.read_text() == "not a folder"
    assert list(read_only_home.iterdir()) == []


# --- concurrent first runs -----------------------------------------------------------------------

def alembic_rows_sqlite(home: Path) -> dict[str, int]:
    rows = {}
    for database in sorted((home / "dagster").rglob("*.db")):
        with sqlite3.connect(database) as connection:
            names = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "alembic_version" in names:
                rows[database.name] = connection.execute("SELECT count(*) FROM alembic_version").fetchone()[0]
    return rows


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request) -> dict[str, str]:
    """The environment of a `dsh` process for each instance storage: the SQLite default, or PostgreSQL."""
    if request.param == "sqlite":
        return {}
    return {POSTGRES_ENV: request.getfixturevalue("postgres").new_database()}


def test_two_concurrent_first_runs_queue_then_verify_and_a_third_run_succeed(tmp_path, source_file, backend,
                                                                              monkeypatch, request):
    home = tmp_path / "home"  # fresh: neither run finds an instance
    first, second = (Dsh(*run_args(source_file, home), cwd=tmp_path, **backend) for _ in range(2))
    outcomes = [first.result(), second.result()]
    for process in outcomes:
        assert process.returncode == 0, explain(process)
    waited = [p for p in outcomes if "waiting for it to finish" in p.stderr]
    assert len(waited) == 1, "the later run says it waits for the earlier one"
    if POSTGRES_ENV in backend:
        server = request.getfixturevalue("postgres")
        database = backend[POSTGRES_ENV].rsplit("/", 1)[1]
        assert server.execute("SELECT count(*) FROM alembic_version", database) == [(1,)]
    else:
        assert set(alembic_rows_sqlite(home).values()) == {1}, alembic_rows_sqlite(home)

    verify = Dsh("verify", "--home", home, cwd=tmp_path, **backend).result()
    assert verify.returncode == 0, explain(verify)
    third = Dsh(*run_args(source_file, home), cwd=tmp_path, **backend).result()
    assert third.returncode == 0, explain(third)
    runs = runs_of(home, monkeypatch, backend.get(POSTGRES_ENV))
    # A refused publication is a verdict recorded as a failed publication run; every other run succeeded.
    others = [run for run in runs if run.job_name != "publication_job"]
    assert others and all(run.status == dg.DagsterRunStatus.SUCCESS for run in others), [r.status for r in others]


OPEN_INSTANCE = """
import sys
from pathlib import Path
from dsh_assets.core.layout import Layout
from dsh_assets.graph.instance import open_instance
with open_instance(Layout(Path(sys.argv[1]))) as instance:
    instance.get_runs(limit=1)
"""


@pytest.mark.parametrize("processes", [3])
def test_concurrent_openings_of_a_fresh_instance_stamp_its_schema_once(tmp_path, backend, processes, request):
    """The instance lock: SQLite on one home; PostgreSQL shared by several homes (the advisory lock)."""
    shared_postgres = POSTGRES_ENV in backend
    homes = [tmp_path / (f"home_{i}" if shared_postgres else "home") for i in range(processes)]
    started = [subprocess.Popen([sys.executable, "-c", OPEN_INSTANCE, str(home)], env=clean_environ(**backend),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for home in homes]
    for process in started:
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, stderr[-3000:]
    if shared_postgres:
        server = request.getfixturevalue("postgres")
        database = backend[POSTGRES_ENV].rsplit("/", 1)[1]
        assert server.execute("SELECT count(*) FROM alembic_version", database) == [(1,)]
    else:
        rows = alembic_rows_sqlite(homes[0])
        assert rows and set(rows.values()) == {1}, rows


# --- a killed run --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def larger_source(tmp_path_factory) -> Path:
    """120,000 rows: writes take long enough to be caught half-done."""
    path = tmp_path_factory.mktemp("larger") / "source.parquet"
    synthesize(path, rows=120_000, subscribers=24_000, seed=SMALL_SEED, period=dt.date.fromisoformat(PERIOD))
    return path


def kill_during_a_write(source: Path, home: Path, cwd: Path) -> list[Path]:
    """Start `dsh run`, SIGKILL its process group as soon as a temporary file appears; the leftovers."""
    run = Dsh(*run_args(source, home), cwd=cwd)
    deadline = time.monotonic() + 240
    while run.process.poll() is None and time.monotonic() < deadline:
        if temporaries(home):
            os.killpg(run.process.pid, signal.SIGKILL)
            break
        time.sleep(0.002)
    run.stop()
    run.process.wait()
    return temporaries(home)


def test_a_rerun_after_sigkill_removes_the_leftovers_and_fails_the_stale_run(tmp_path, larger_source, monkeypatch):
    for attempt in range(3):  # the kill must land while a temporary exists; a rename may win the race
        home = tmp_path / f"home_{attempt}"
        leftovers = kill_during_a_write(larger_source, home, tmp_path)
        if leftovers:
            break
    assert leftovers, "no run was caught mid-write in three attempts"
    assert "STARTED" in raw_statuses(home), "the killed run is left STARTED until a later process looks"

    rerun = Dsh(*run_args(larger_source, home), cwd=tmp_path).result()  # the same partitions
    assert rerun.returncode == 0, explain(rerun)
    assert temporaries(home) == [], f"leftovers survived the re-run: {temporaries(home)}"
    assert "is gone; marked failed" in rerun.stderr, explain(rerun)
    runs = runs_of(home, monkeypatch)
    assert not [run for run in runs if run.status in UNFINISHED], [(r.run_id, r.status) for r in runs]
    assert any(run.status == dg.DagsterRunStatus.FAILURE for run in runs)


def raw_statuses(home: Path) -> list[str]:
    """Run statuses read straight from SQLite, without opening the instance (which would fix them)."""
    with sqlite3.connect(home / "dagster" / "history" / "runs.db") as connection:
        return [status for (status,) in connection.execute("SELECT status FROM runs")]


# --- a full disk ---------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """Mount a tmpfs of the given size on a folder (root only); unmounted afterwards."""
    mounted = []

    def mount(path: Path, size: str) -> Path:
        if os.geteuid() != 0:
            pytest.skip("a full disk is made with a small tmpfs, which only root can mount")
        path.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                                capture_output=True)
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
        mounted.append(path)
        return path

    yield mount
    for path in reversed(mounted):
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], check=False)


def fill(folder: Path, leave_bytes: int) -> None:
    free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
    with open(folder / "filler", "wb") as handle:
        handle.write(b"\0" * max(free - leave_bytes, 0))


def release_again_on_a_full_disk(tmp_path, source_file, home: Path, full: Path, leave_bytes: int):
    """A first run, then `full` filled to ``leave_bytes`` and the same run again: (its process, the file, its hash)."""
    first = Dsh(*run_args(source_file, home), cwd=tmp_path).result()
    assert first.returncode == 0, explain(first)
    path = home / "candidates" / CONFIG / PERIOD / "released.parquet"
    before = sha256_file(path)
    fill(full, leave_bytes)
    again = Dsh(*run_args(source_file, home), cwd=tmp_path).result()
    assert again.returncode == 1, explain(again)
    assert not any(marker in again.stderr for marker in TRACEBACK_MARKERS), explain(again)
    assert sha256_file(path) == before, "the previous release is intact"
    assert temporaries(home) == []
    return again, path


def test_a_release_that_fills_the_disk_leaves_the_previous_file_and_records(tmp_path, source_file, small_disk):
    home = tmp_path / "home"
    released = small_disk(home / "candidates", "4m")  # room for one release of the small source, not two
    again, path = release_again_on_a_full_disk(tmp_path, source_file, home, released, leave_bytes=512 << 10)
    (failed,) = [line for line in again.stderr.splitlines() if line.startswith(f"[1/1] {CONFIG}: FAILED")]
    assert f"disk full: no space left on device writing {path}" in failed, explain(again)
    verify = Dsh("verify", "--home", home, cwd=tmp_path).result()
    assert verify.returncode == 0, f"the records still match the file\n{explain(verify)}"


def test_a_full_home_is_named_and_leaves_files_and_records_intact(tmp_path, source_file, small_disk):
    """The whole home full: Dagster's SQLite storage cannot write either (SQLite says "disk I/O error")."""
    home = small_disk(tmp_path / "home", "12m")
    again, _ = release_again_on_a_full_disk(tmp_path, source_file, home, home, leave_bytes=1536 << 10)
    assert "dsh run: disk full" in again.stderr, explain(again)
    (home / "filler").unlink()
    verify = Dsh("verify", "--home", home, cwd=tmp_path).result()
    assert verify.returncode == 0, f"the records still match the file\n{explain(verify)}"
