"""Provenance: the code version (a hash of the package's own files) and checksums against what was recorded."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import pyarrow as pa

import dsh_assets
from dsh_assets.core.files import DigestBook
from dsh_assets.core.release.digest import content_sha256

CONTENT_KEY = "content_sha256"
"""The recorded layout-independent digest of a release's rows (core/release/digest.py)."""

_PACKAGE = Path(dsh_assets.__file__).resolve().parent


@functools.cache
def code_version() -> str:
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE.rglob("*")):
        if path.suffix in {".py", ".toml"} and "__pycache__" not in path.parts:
            digest.update(path.relative_to(_PACKAGE).as_posix().encode() + b"\x00")
            digest.update(path.read_bytes() + b"\x00")
    return f"{dsh_assets.__version__}+{digest.hexdigest()[:12]}"


def checksum_problems(files: list[tuple[Path, str]], history: list[dict], input_fields: tuple[str, ...],
                      book: DigestBook) -> tuple[dict, list[str]]:
    """Files on disk against the SHA-256 their materialisation recorded, and against the previous one.

    ``files``: (path, metadata key of its recorded SHA-256); the first is the release itself, whose rows are
    also checked against the recorded content digest where one was recorded (a file re-written with another
    layout changes its SHA-256, not its content; a changed row changes both).
    ``history``: recorded metadata of the partition, newest first. A missing file is a problem, not
    a crash: a deleted release must not pass. ``book``: the digests of the files as they stand, read from them
    unless it keeps them. Returns (what was compared, the problems found).
    """
    if not history:
        return {}, ["no recorded materialisation"]
    latest = history[0]
    compared: dict = {}
    problems = []
    for path, key in files:
        if key not in latest:
            continue
        on_disk = book.sha256(path) if Path(path).is_file() else "missing"
        compared[f"recorded_{key}"], compared[f"on_disk_{key}"] = latest[key], on_disk
        if on_disk == "missing":
            problems.append(f"{path} is missing")
        elif on_disk != latest[key]:
            problems.append(f"{path} on disk differs from the recorded SHA-256")
    release_path = Path(files[0][0]) if files else None
    if CONTENT_KEY in latest and release_path is not None and release_path.is_file():
        compared[f"recorded_{CONTENT_KEY}"] = latest[CONTENT_KEY]
        try:
            compared[f"on_disk_{CONTENT_KEY}"] = content_sha256(release_path, book)
        except (pa.ArrowException, OSError) as error:
            compared[f"on_disk_{CONTENT_KEY}"] = "unreadable"
            problems.append(f"{release_path} is not a readable Parquet file ({error})")
        else:
            if compared[f"on_disk_{CONTENT_KEY}"] != latest[CONTENT_KEY]:
                problems.append(f"{release_path}: its rows differ from the recorded content digest")
    if len(history) > 1:
        previous = history[1]
        same_inputs = all(previous.get(field) == latest.get(field) for field in input_fields)
        compared["previous_sha256"] = previous.get("sha256")
        compared["previous_same_inputs"] = same_inputs
        if same_inputs and previous.get("sha256") != latest.get("sha256"):
            problems.append("same inputs and code as the previous materialisation, different bytes")
    return compared, problems
