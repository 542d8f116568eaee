"""`python -m dsh_assets_tests.release_bytes SOURCE HOME`: the period's stored source and every row-level release,
made through the graph (the source, each release and its checks; no evidence), as SHA-256 on stdout in JSON.

`test_cli` runs it under another PYTHONHASHSEED than its `dsh run`: nothing in a release may depend on the order
of a set or a dict of strings, and the release steps are all that decide the bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import dagster as dg

from dsh_assets.core.layout import Layout
from dsh_assets.core.release.configs import ROW_RELEASE, period_configs
from dsh_assets_tests.conftest import PERIOD, Harness, make_defs
from dsh_assets_tests.tables import sha256_file


def release_bytes(source: Path, home: Path) -> dict:
    with dg.DagsterInstance.ephemeral() as instance:
        harness = Harness(make_defs(home, source), instance, home)
        harness.source()
        row_level = [config_id for config_id, config in period_configs(harness.defs.resources["home"].configs()).items()
                     if config.kind == ROW_RELEASE]
        for config_id in row_level:
            if not harness.release_only(config_id).success:
                raise SystemExit(f"the release of {config_id} failed")
        return {"stored_sha256": sha256_file(Layout(home).source(PERIOD)),
                "releases": {config_id: sha256_file(harness.released_path(config_id)) for config_id in row_level}}


if __name__ == "__main__":
    print(json.dumps(release_bytes(Path(sys.argv[1]), Path(sys.argv[2]))))
