"""The home folder: usable, or refused in one line; and the file locks that keep processes on one home apart."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterator


class HomeError(ValueError):
    """The home folder cannot be used (not a directory, not writable); the message says which and why."""


def check_home(home: str | os.PathLike) -> Path:
    """Create ``home`` if need be and prove it writable; else raise HomeError naming the problem."""
    home = Path(home)
    if home.exists() and not home.is_dir():
        raise HomeError(f"home {home} is not a directory")
    try:
        home.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise HomeError(f"home {home}: a parent folder is not a directory") from None
    except OSError as error:
        raise HomeError(f"cannot create home {home}: {error.strerror or error}") from None
    try:
        # os.access says nothing of a read-only mount, and root passes it anyway: try a write.
        handle, probe = tempfile.mkstemp(prefix=".dsh-write-probe-", dir=home)
        os.close(handle)
        os.unlink(probe)
    except OSError as error:
        reason = "read-only file system" if error.errno == errno.EROFS else (error.strerror or str(error))
        raise HomeError(f"home {home} is not writable: {reason}") from None
    return home


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (created if need be) for the block.

    When another process holds it, ``on_wait`` is called once with what that process wrote in the
    file (its pid), then the call blocks until the lock is free. The lock goes with the process:
    a killed holder releases it, so a crash never leaves a home locked.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                holder = os.pread(handle, 64, 0).decode(errors="replace").strip()
                on_wait(holder or "unknown")
            fcntl.flock(handle, fcntl.LOCK_EX)
        os.ftruncate(handle, 0)
        os.pwrite(handle, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(handle)  # closing the descriptor releases the lock
