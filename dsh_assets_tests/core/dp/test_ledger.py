"""The privacy-budget ledger: caps, refusals, races between processes, crash recovery."""

import datetime as dt
import hashlib
import multiprocessing
import signal
import subprocess
import sys
import textwrap

import pytest

from dsh_assets.core.dp.ledger import (
    BudgetError,
    BudgetExceeded,
    Ledger,
    PublicationInProgress,
)

NOW = dt.datetime(2026, 11, 20, 0, 15, tzinfo=dt.timezone.utc)
PERIOD = "2026-11-20"


@pytest.fixture
def ledger(tmp_path) -> Ledger:
    return Ledger(tmp_path / "budget.sqlite", period_cap=1.0, year_cap=3.0)


def test_reserve_complete_and_status(ledger, tmp_path):
    reservation = ledger.reserve("dp_a", PERIOD, 0.75, NOW, tmp_path / "a.parquet")
    assert ledger.status(PERIOD, NOW)["period_used"] == 0.75  # a reservation counts at once
    ledger.complete(reservation, "ab" * 32, now=NOW, details={"bounding": {"rows_dropped_by_bound": 3}})
    status = ledger.status(PERIOD, NOW)
    assert status["period_used"] == 0.75 and status["period_left"] == 0.25 and status["left"] == 0.25
    assert status["year"] == 2026 and status["year_used"] == 0.75 and status["year_left"] == 2.25
    assert status["period_renews"] == "2026-11-21" and status["year_renews"] == "2027-01-01"
    [entry] = ledger.entries()
    assert entry["status"] == "published" and entry["sha256"] == "ab" * 32
    assert entry["details"] == {"bounding": {"rows_dropped_by_bound": 3}}
    assert ledger.latest_published("dp_a", PERIOD)["id"] == reservation
    assert ledger.latest_published("dp_a", "2026-11-21") is None


def test_ten_debits_of_a_tenth_fill_a_cap_of_one_exactly(ledger):
    for i in range(10):
        ledger.complete(ledger.reserve(f"dp_{i}", PERIOD, 0.1, NOW), "00")
    assert ledger.status(PERIOD)["period_left"] == 0.0
    with pytest.raises(BudgetExceeded):
        ledger.reserve("dp_x", PERIOD, 0.1, NOW)


def test_refusal_names_what_is_left_and_when_it_renews_and_reserves_nothing(ledger):
    ledger.complete(ledger.reserve("dp_a", PERIOD, 0.75, NOW), "00")
    with pytest.raises(BudgetExceeded) as refused:
        ledger.reserve("dp_b", PERIOD, 0.5, NOW)
    message = str(refused.value)
    assert "0.25 left, renews 2026-11-21" in message and "2.25 left, renews 2027-01-01" in message
    assert refused.value.status["period_left"] == 0.25
    assert len(ledger.entries()) == 1
    assert not list(ledger.lock_dir.glob("*.lock"))  # the refused reservation's lock is gone too


def test_year_cap_sums_every_period_of_the_calendar_year(ledger):
    for day in ("2026-01-01", "2026-06-30", "2026-12-31"):
        ledger.complete(ledger.reserve("dp_a", day, 1.0, NOW), "00")
    with pytest.raises(BudgetExceeded, match="year 2026: 3 of 3 used"):
        ledger.reserve("dp_a", "2026-11-20", 0.1, NOW)
    ledger.reserve("dp_a", "2027-01-01", 1.0, NOW)  # a new year


def test_rolled_back_epsilon_is_free_again_and_states_are_one_way(ledger):
    reservation = ledger.reserve("dp_a", PERIOD, 1.0, NOW)
    ledger.roll_back(reservation, NOW, note="test")
    assert ledger.status(PERIOD)["period_used"] == 0.0
    with pytest.raises(BudgetError, match="rolled_back, not reserved"):
        ledger.complete(reservation, "00")
    ledger.complete(ledger.reserve("dp_a", PERIOD, 1.0, NOW), "00")


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(BudgetError):
        Ledger(tmp_path / "l.sqlite", period_cap=-1, year_cap=1)
    ledger = Ledger(tmp_path / "l.sqlite", period_cap=1, year_cap=1)
    with pytest.raises(BudgetError):
        ledger.reserve("dp_a", PERIOD, 0.0, NOW)
    with pytest.raises(BudgetError):
        ledger.reserve("dp_a", "20 November", 0.5, NOW)


def test_a_second_reservation_of_the_same_table_while_the_first_runs_is_refused(ledger):
    ledger.reserve("dp_a", PERIOD, 0.25, NOW)
    with pytest.raises(PublicationInProgress):
        ledger.reserve("dp_a", PERIOD, 0.25, NOW)


# -- processes ---------------------------------------------------------------------------------

def _reserve_in_process(path, barrier, results, name):
    ledger = Ledger(path, period_cap=1.0, year_cap=30.0)
    barrier.wait()
    try:
        ledger.complete(ledger.reserve(name, PERIOD, 0.5, NOW), "00")
        results.put((name, "won"))
    except BudgetExceeded:
        results.put((name, "refused"))


def test_racing_processes_never_pass_the_cap(tmp_path):
    path = tmp_path / "budget.sqlite"
    Ledger(path, period_cap=1.0, year_cap=30.0)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(3), context.Queue()
    workers = [context.Process(target=_reserve_in_process, args=(path, barrier, results, f"dp_{i}")) for i in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    outcomes = sorted(results.get(timeout=5)[1] for _ in workers)
    assert outcomes == ["refused", "won", "won"]  # 0.5 each against a cap of 1.0
    assert Ledger(path, 1.0, 30.0).status(PERIOD)["period_used"] == 1.0


CRASHING_CHILD = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from dsh_assets.core.dp.ledger import Ledger
    ledger_path, out_path, write = sys.argv[1], Path(sys.argv[2]), sys.argv[3] == "write"
    ledger = Ledger(ledger_path, period_cap=1.0, year_cap=30.0)
    ledger.reserve("dp_a", "2026-11-20", 0.5, path=out_path)
    if write:
        out_path.write_bytes(b"the table")
    os.kill(os.getpid(), signal.SIGKILL)  # dies between reserve and complete
""")


def _crash(ledger_path, out_path, write: bool):
    done = subprocess.run([sys.executable, "-c", CRASHING_CHILD, str(ledger_path), str(out_path),
                           "write" if write else "no"], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL, done.stderr


def test_crash_before_the_write_is_rolled_back_by_recover(tmp_path):
    ledger = Ledger(tmp_path / "budget.sqlite", period_cap=1.0, year_cap=30.0)
    _crash(ledger.path, tmp_path / "out.parquet", write=False)
    assert [e["status"] for e in ledger.entries()] == ["reserved"]
    assert ledger.status(PERIOD)["period_used"] == 0.5  # counted until resolved, never under-counted
    [action] = ledger.recover(NOW)
    assert action["action"] == "rolled_back"
    assert [e["status"] for e in ledger.entries()] == ["rolled_back"]
    assert ledger.status(PERIOD)["period_used"] == 0.0
    assert ledger.recover(NOW) == []


def test_crash_after_the_write_is_completed_by_recover(tmp_path):
    ledger = Ledger(tmp_path / "budget.sqlite", period_cap=1.0, year_cap=30.0)
    out_path = tmp_path / "out.parquet"
    _crash(ledger.path, out_path, write=True)
    [action] = ledger.recover(NOW)
    assert action["action"] == "completed"
    [entry] = ledger.entries()
    assert entry["status"] == "published"
    assert entry["sha256"] == hashlib.sha256(b"the table").hexdigest()
    assert ledger.status(PERIOD)["period_used"] == 0.5


def test_recover_rolls_back_when_the_file_was_not_written_for_the_reservation(tmp_path):
    ledger = Ledger(tmp_path / "budget.sqlite", period_cap=1.0, year_cap=30.0)
    out_path = tmp_path / "out.parquet"
    _crash(ledger.path, out_path, write=True)
    [action] = ledger.recover(NOW, verify=lambda path, token: False)  # e.g. an earlier table at the path
    assert action["action"] == "rolled_back"


def test_recover_leaves_a_live_reservation_alone(ledger, tmp_path):
    reservation = ledger.reserve("dp_a", PERIOD, 0.5, NOW, tmp_path / "out.parquet")
    assert ledger.recover(NOW) == []  # this process holds its lock: still running
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from dsh_assets.core.dp.ledger import Ledger; "
         "print(len(Ledger(sys.argv[1], 1.0, 30.0).recover()))", str(ledger.path)],
        capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "0", done.stderr  # nor does another process touch it
    assert ledger.entry(reservation)["status"] == "reserved"
