"""Code version: a hash of the package's own source and data files, so any code change shows."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import dsh_assets

_PACKAGE = Path(dsh_assets.__file__).resolve().parent


@functools.cache
def code_version() -> str:
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*")):
        if path.suffix in {".py", ".toml"} and "__pycache__" not in path.parts:
            digest.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\x00")
            digest.update(path.read_bytes() + b"\x00")
    return f"{dsh_assets.__version__}+{digest.hexdigest()[:12]}"
