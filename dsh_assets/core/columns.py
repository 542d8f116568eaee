"""Named arrays kept on disk rather than in memory: what a release must hold whole for random access, but need not
hold in its resident memory (the truth of its moves, its staged values: at 110M rows each column is 440 or 880 MB,
and a release has fourteen)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np

from dsh_assets.core.files import pid_alive


class StoredColumns(Mapping):
    """Columns saved one ``.npy`` file each in a private temporary folder (under ``TMPDIR``, mode 0700) as they
    come, so a producer holds one column at a time; each is read back mapped. The folder is removed by
    ``remove()`` or with the object, and a killed process's by the next process that stores columns."""

    def __init__(self, columns: Iterable[tuple[str, np.ndarray]], prefix: str):
        _remove_stale_folders(prefix)
        self.folder = Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-"))
        self.remove = weakref.finalize(self, shutil.rmtree, self.folder, True)
        self._names: list[str] = []
        for name, values in columns:
            np.save(self._file(len(self._names)), values)
            self._names.append(name)
            del values  # not held while the producer makes the next one

    def _file(self, index: int) -> Path:
        return self.folder / f"{index}.npy"

    def __getitem__(self, name: str) -> np.ndarray:
        """The column mapped read-only: its pages are read as they are touched and go with the array."""
        if name not in self._names:
            raise KeyError(name)
        return np.load(self._file(self._names.index(name)), mmap_mode="r")

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def taken(self, name: str, at: np.ndarray | slice) -> np.ndarray:
        """A copy of the column's values at these positions; the file is mapped for the call only."""
        mapped = self[name]
        taken = np.array(mapped[at])
        del mapped
        return taken


def _remove_stale_folders(prefix: str) -> None:
    """Remove the folders of ``prefix`` (``<prefix><pid>-...``) whose process is gone: a killed process cannot."""
    pattern = re.compile(rf"^{re.escape(prefix)}(\d+)-")
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        match = pattern.match(folder.name)
        if match and int(match.group(1)) != os.getpid() and not pid_alive(int(match.group(1))):
            shutil.rmtree(folder, ignore_errors=True)
