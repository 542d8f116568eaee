"""Compare, exactly, what two homes recorded for one configuration and period: every evidence figure (but
anonymeter's baselines, see UNSEEDED) and the SHA-256 of the stored source and of the release (e.g. a `dsh run`
before and after a performance change).

    .venv/bin/python benchmarks/compare_figures.py HOME_A HOME_B [--config c15_window_k5_noise5] [--period 2026-11-02]

Exit status 1 when anything differs (floats compared with ==, NaN equal to NaN).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from dsh_assets.core.evidence.metrics import RELEASE_ASSET, assets_of_kind
from dsh_assets.core.release.configs import ROW_RELEASE

UNSEEDED = "baseline"
"""anonymeter's random-guess baselines: its guessers are unseeded inside anonymeter, so two runs of the same inputs
differ there (its attack, control and risk figures do not). Left out of the comparison."""
EVIDENCE = tuple(asset for asset in assets_of_kind(ROW_RELEASE) if asset != RELEASE_ASSET[ROW_RELEASE])


def recorded(home: Path, config: str, period: str) -> dict:
    import dagster as dg

    from dsh_assets.core.layout import Layout
    from dsh_assets.graph.history import recorded_metadata
    from dsh_assets.graph.instance import open_instance
    from dsh_assets.graph.partitions import release_key

    instance = open_instance(Layout(home))
    partition = str(release_key(config, period))

    def latest(asset: str, key: str) -> dict:
        records = recorded_metadata(instance, dg.AssetKey(asset), key, limit=1)
        return records[0] if records else {}

    found = {name: latest(name, partition).get("figures") for name in EVIDENCE}
    found["release_pairs"] = latest("release_pairs", period).get("figures")
    found["source_sha256"] = latest("source", period).get("sha256")
    found["release_sha256"] = latest("released", partition).get("sha256")
    instance.dispose()
    return found


def differences(a, b, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [line for key in sorted(set(a) | set(b)) if key != UNSEEDED or not path.startswith(".anonymeter")
                for line in differences(a.get(key), b.get(key), f"{path}.{key}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [line for i, (x, y) in enumerate(zip(a, b)) for line in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return []
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home_a", type=Path)
    parser.add_argument("home_b", type=Path)
    parser.add_argument("--config", default="c15_window_k5_noise5")
    parser.add_argument("--period", default="2026-11-02")
    args = parser.parse_args(argv)
    a, b = (recorded(home.resolve(), args.config, args.period) for home in (args.home_a, args.home_b))
    found = differences(a, b)
    print(f"{len(json.dumps(a))} characters of figures and checksums compared: {len(found)} differences")
    print("\n".join(found))
    print(f"stored source {a['source_sha256']}, release {a['release_sha256']}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
