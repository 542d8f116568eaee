import os
import subprocess
import sys
import threading

import pytest

from dsh_assets.core.files import atomic_path, pid_alive, remove_stale_temporaries
from dsh_assets.core.home import HomeError, check_home, exclusive_lock


def test_a_home_is_created_and_a_file_or_a_file_parent_is_refused(tmp_path):
    assert check_home(tmp_path / "new" / "home").is_dir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(HomeError, match="is not a directory"):
        check_home(tmp_path / "file")
    with pytest.raises(HomeError, match="a parent folder is not a directory"):
        check_home(tmp_path / "file" / "home")
    assert [p.name for p in (tmp_path / "new" / "home").iterdir()] == [], "the write probe is removed"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through any mode; the read-only mount case is in test_cli_faults")
def test_a_home_without_write_permission_is_refused(tmp_path):
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(HomeError, match="is not writable"):
            check_home(tmp_path)
    finally:
        tmp_path.chmod(0o755)


def test_a_second_holder_is_told_who_holds_the_lock_and_waits(tmp_path):
    lock, told, acquired = tmp_path / "lock", [], threading.Event()

    def second():
        with exclusive_lock(lock, on_wait=told.append):
            acquired.set()

    with exclusive_lock(lock):
        thread = threading.Thread(target=second)
        thread.start()
        assert not acquired.wait(0.5), "the second holder waits while the first holds the lock"
    thread.join(10)
    assert acquired.is_set() and told == [str(os.getpid())]


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    assert not pid_alive(process.pid)
    return process.pid


def test_the_next_write_of_a_file_removes_only_the_temporaries_of_dead_writers(tmp_path):
    final, dead = tmp_path / "released.parquet", dead_pid()
    stale = [tmp_path / f".released.parquet.{dead}.tmp", tmp_path / f".released.parquet.{dead}.unordered.tmp"]
    kept = [tmp_path / ".released.parquet.1.tmp",                     # a live process (init)
            tmp_path / f".source.parquet.{dead}.tmp"]                 # another file's: its own next write
    for path in stale + kept:
        path.write_bytes(b"PAR1")
    with atomic_path(final) as temporary:
        temporary.write_bytes(b"new")
    assert final.read_bytes() == b"new"
    assert not any(p.exists() for p in stale)
    assert all(p.exists() for p in kept)
    assert remove_stale_temporaries(tmp_path / "absent" / "x.parquet") == []
