"""Not a timing: how often one `dsh run` asks for a file's SHA-256 and how often it reads the file to compute it.

    .venv/bin/python benchmarks/count_hashing.py run --source S --period P --home H --json

The arguments are `dsh`'s. The run is in-process, with every `DigestBook.sha256` (a step asking for a file's
digest) and every read of a file to hash it (`files._read_sha256`, which only a book calls) counted per path; the
counts go to stderr as JSON. A file written through `files.parquet_file` is hashed as it is written, so it is asked
for often and read never.
"""

from __future__ import annotations

import collections
import json
import sys

import dsh_assets.core.files as files

asked: collections.Counter = collections.Counter()
calls: collections.Counter = collections.Counter()
_asked, _read_sha256 = files.DigestBook.sha256, files._read_sha256


def counted_asked(book, path, **kwargs):
    asked[str(path)] += 1
    return _asked(book, path, **kwargs)


def counted_read(path):
    calls[str(path)] += 1
    return _read_sha256(path)


def main() -> int:
    files.DigestBook.sha256, files._read_sha256 = counted_asked, counted_read
    from dsh_assets.cli import main as dsh  # imported after the patch: every module binds the counted function

    status = dsh(sys.argv[1:])
    print(json.dumps({"dsh_status": status, "files_asked": len(asked), "asked": sum(asked.values()),
                      "files_hashed": len(calls), "reads": sum(calls.values()),
                      "most_calls_for_one_file": max(calls.values(), default=0),
                      "asked_per_file": dict(asked), "calls_per_file": dict(calls)}, indent=1), file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
