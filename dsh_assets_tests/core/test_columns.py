"""Columns kept on disk: saved as they come, read back mapped, their folder private and removed with them."""

import gc
import os
import subprocess
import sys

import numpy as np
import pytest

from dsh_assets.core.columns import StoredColumns


def test_columns_are_saved_as_they_come_and_read_back_whole_or_in_part(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    made = []

    def one_at_a_time():
        for name in ("a", "b"):
            made.append(name)
            yield name, np.arange(5, dtype=np.float64) * (10 if name == "b" else 1)

    stored = StoredColumns(one_at_a_time(), "test-")
    assert made == ["a", "b"] and list(stored) == ["a", "b"] and len(stored) == 2
    assert stored.folder.parent == tmp_path and stored.folder.stat().st_mode & 0o777 == 0o700
    assert stored["b"].tolist() == [0, 10, 20, 30, 40]
    assert stored.taken("a", np.array([4, 0])).tolist() == [4, 0]
    assert stored.taken("b", slice(1, 3)).tolist() == [10, 20]
    assert "c" not in stored and stored.get("c") is None
    with pytest.raises(KeyError):
        stored["c"]
    stored.remove()
    assert not stored.folder.exists()


def test_the_folder_goes_with_the_columns_and_with_a_failed_producer(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    stored = StoredColumns([("a", np.zeros(3))], "test-")
    del stored
    gc.collect()

    def failing():
        yield "a", np.zeros(3)
        raise ValueError("the source has no such column")

    with pytest.raises(ValueError, match="no such column"):
        StoredColumns(failing(), "test-")
    gc.collect()
    assert list(tmp_path.iterdir()) == []


def test_a_killed_processs_folder_is_removed_by_the_next_one(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    stale, live = tmp_path / f"test-{gone.pid}-abc", tmp_path / f"test-{os.getppid()}-def"
    for folder in (stale, live):
        folder.mkdir()
    stored = StoredColumns([("a", np.zeros(2))], "test-")
    assert not stale.exists() and live.exists()  # a live process's folder is left alone
    assert stored.folder.name.startswith(f"test-{os.getpid()}-")
