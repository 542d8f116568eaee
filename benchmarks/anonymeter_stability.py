"""Whether anonymeter's verdict on a candidate holds whatever blocks are drawn: the same release evaluated at full
strength under several values of `[attacker.anonymeter] seed`, each criterion of the gate on anonymeter's figures
with its value and verdict per seed. Not a timing (it prints the CPU each evaluation took, beside its budget).

    .venv/bin/python benchmarks/anonymeter_stability.py --home HOME --period P \
        [--config c22_hour_k5_shuffle_code10_round3 ...] [--seeds 2029,7,1,2,3] [--json PATH]

HOME is a home where `dsh run` stored the period's source; the release is made again from it, under the home's
secrets, in a scratch folder, so the evaluation is the one `dsh run` makes but for the seed. The gate is the
packaged releases file's (or DSH_RELEASES's).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from pathlib import Path

from dsh_assets.core.evidence.metrics import Evidence
from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy import anonymeter
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.publication.gate import gate_values
from dsh_assets.core.release.source import distinct_apps
from dsh_assets.core.release.transform import release
from dsh_assets.definitions import settings_from_environment
from dsh_assets.graph.resources import resources_for


def stability(home: Path, period: str, config_ids: list[str], seeds: list[int]) -> dict:
    settings = settings_from_environment(home=str(home))
    configs, schema, attacker = settings.configs(), settings.schema(), settings.attacker()
    resources = resources_for(settings)
    policy = resources["publications"].policy()
    criteria = [c for c in policy.gates["rows"] if c.name.startswith(anonymeter.NAME + "_")]
    source = settings.layout.source(period)
    secrets, apps = resources["secrets"].load(), distinct_apps(source, schema)
    found = {}
    with tempfile.TemporaryDirectory() as scratch:
        for config_id in config_ids:
            config = configs[config_id]
            out = Path(scratch) / f"{config_id}.parquet"
            plan = release(source, out, config, schema, secrets, apps, period=period, book=DigestBook())
            under = ReleaseUnderTest(source, out, config, schema, plan, book=DigestBook())
            for seed in seeds:
                model = dataclasses.replace(attacker, anonymeter=dataclasses.replace(attacker.anonymeter, seed=seed))
                result = anonymeter.evaluate(under, secrets, model, apps, Path(scratch) / "anonymeter",
                                             limits=policy.maxima(anonymeter.GATE_NAMES.values()))
                values = gate_values(Evidence(privacy=result.figures()))
                found.setdefault(config_id, {})[seed] = {
                    "criteria": {c.name: {"value": values.get(c.name), "ok": c.failure(values.get(c.name)) is None}
                                 for c in criteria},
                    "widths": _widths(result.figures()[anonymeter.NAME]),
                    "narrowed": list(result.narrowed), "further_blocks": result.further_blocks,
                    "cpu_seconds": result.metadata()["anonymeter_cpu_seconds"],
                    "budget_cpu_seconds": result.budget_cpu_seconds}
                _print(config_id, seed, found[config_id][seed])
    return found


def _widths(detail: dict) -> dict:
    """Each test's 95% interval width (the widest secret's for inference)."""
    tests = {name: detail[name] for name in ("singling_out_univariate", "singling_out", "linkability")}
    widest = max(detail["inference"].values(), key=lambda test: test["risk_ci"][1] - test["risk_ci"][0])
    return {name: test["risk_ci"][1] - test["risk_ci"][0] for name, test in {**tests, "inference": widest}.items()}


def _print(config_id: str, seed: int, row: dict) -> None:
    cells = "  ".join(f"{name.removeprefix('anonymeter_')} {value['value']:.3f} {'ok' if value['ok'] else 'FAIL'}"
                      for name, value in row["criteria"].items())
    narrowed = (f"; narrowed {', '.join(row['narrowed'])} on {row['further_blocks']} further blocks"
                if row["further_blocks"] else "")
    print(f"{config_id} seed {seed}: {cells}  (cpu {row['cpu_seconds']:.0f} s of {row['budget_cpu_seconds']:g}"
          f"{narrowed})", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--period", required=True)
    parser.add_argument("--config", action="append", help="a row-level configuration (repeatable)")
    parser.add_argument("--seeds", default="2029,7,1,2,3")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    config_ids = args.config or ["c22_hour_k5_shuffle_code10_round3"]
    found = stability(args.home, args.period, config_ids, [int(seed) for seed in args.seeds.split(",")])
    for config_id, by_seed in found.items():
        verdicts = {tuple(value["ok"] for value in row["criteria"].values()) for row in by_seed.values()}
        print(f"{config_id}: the same verdict on every anonymeter criterion under {len(by_seed)} seeds: "
              f"{'yes' if len(verdicts) == 1 else 'NO'}")
    if args.json:
        args.json.write_text(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
