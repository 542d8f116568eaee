"""Not a timing: how often one `dsh run` asks for a file's SHA-256 and how often it reads the file to compute it.

    .venv/bin/python benchmarks/count_hashing.py run --source S --period P --home H --json

The arguments are `dsh`'s. The run is in-process, with `files.remembered_digest` (every `sha256_file` call) and
`files._sha256_of_bytes` (every read of a file to hash it) counted per path; the counts go to stderr as JSON.
"""

from __future__ import annotations

import collections
import json
import sys

import dsh_assets.core.files as files

calls: collections.Counter = collections.Counter()
hashings: collections.Counter = collections.Counter()
_remembered_digest, _hash = files.remembered_digest, files._sha256_of_bytes


def counted_remembered_digest(path, kind, compute, own_write=False):
    if kind == "sha256":
        calls[str(path)] += 1
    return _remembered_digest(path, kind, compute, own_write=own_write)


def counted_hash(path):
    hashings[str(path)] += 1
    return _hash(path)


def main() -> int:
    files.remembered_digest, files._sha256_of_bytes = counted_remembered_digest, counted_hash
    from dsh_assets.cli import main as dsh

    status = dsh(sys.argv[1:])
    print(json.dumps({"dsh_status": status, "files_asked": len(calls), "calls": sum(calls.values()),
                      "files_read": len(hashings), "reads": sum(hashings.values()),
                      "most_reads_of_one_file": max(hashings.values(), default=0),
                      "calls_per_file": dict(calls), "reads_per_file": dict(hashings)}, indent=1), file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
