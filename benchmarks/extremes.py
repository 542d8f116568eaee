"""Whether the extremes of a cell line up: how often a released row holds two values of one session, for every
strong pair of measurements, in all rows and in the rows that hold their cell's largest value of the pair's first
measurement. Not a timing. A plain permutation puts a session's two values in one row by chance (about 1 / cell
size); a shuffle that keeps rank correlations puts them there more often, most at the extremes, where a strong
correlation leaves the draws little room.

    .venv/bin/python benchmarks/extremes.py --home HOME --period P [--config ID ...] [--json PATH]

HOME is a home where `dsh run` stored the period's source; each release's plan (its truth: which source row each
released value came from) is made again from it under the home's secrets. The strong pairs are the source's
(`[utility] strong_pair_correlation` in a large group), as the quality groups find them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from dsh_assets.core.release.transform import plan_release
from dsh_assets.core.release.values import cell_runs, run_numbers
from dsh_assets.core.utility.pair_correlation import all_pairs, evaluate_pairs, group_correlations
from dsh_assets.definitions import settings_from_environment
from dsh_assets.graph.resources import resources_for


def together(home: Path, period: str, config_ids: list[str]) -> dict:
    settings = settings_from_environment(home=str(home))
    configs, schema = settings.configs(), settings.schema()
    utility = settings.releases().utility
    secrets = resources_for(settings)["secrets"].load()
    source = settings.layout.source(period)
    rows = pq.read_metadata(source).num_rows
    correlations = group_correlations(source, schema.app, schema.radio, all_pairs(schema.measurements),
                                      min_rows=utility.large_group_records)
    strong = evaluate_pairs(correlations, None, schema.measurements, set(schema.measurements), reason=None,
                            large_group_records=utility.large_group_records,
                            strong_pair_correlation=utility.strong_pair_correlation, min_records=30).strong_pairs
    values = {m: pq.read_table(source, columns=[m]).column(m).to_numpy(zero_copy_only=False)
              for m in {name for pair in strong for name in pair}}
    found = {}
    for config_id in config_ids:
        plan = plan_release(source, configs[config_id], schema, rows, secrets, period)
        starts = cell_runs(plan.cell_sizes, plan.k)
        cells = run_numbers(starts)
        positions = np.arange(len(plan.order))
        chance = float(np.mean(1.0 / np.diff(starts)[cells]))
        per_pair = {}
        for x, y in strong:
            origin_x, origin_y = plan.value_origins(positions, x), plan.value_origins(positions, y)
            same = origin_x == origin_y
            released_x = values[x][origin_x]
            largest = _largest_of_cell(released_x, cells)
            per_pair[f"{x} ~ {y}"] = {"rows": float(same.mean()), "at_cell_maxima": float(same[largest].mean())}
        found[config_id] = {"chance": chance, "pairs": per_pair,
                            "rows_max": max(p["rows"] for p in per_pair.values()),
                            "at_cell_maxima_max": max(p["at_cell_maxima"] for p in per_pair.values())}
        if plan.origins:
            plan.origins.remove()
    return {"period": period, "strong_pairs": [list(pair) for pair in strong], "configs": found}


def _largest_of_cell(values: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """The positions that hold their cell's largest non-null value (the first of equal largest ones)."""
    valid = np.flatnonzero(~np.isnan(values))
    ranked = valid[np.lexsort((valid, -values[valid], cells[valid]))]
    first = np.concatenate([[True], cells[ranked][1:] != cells[ranked][:-1]])
    return ranked[first]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--period", required=True)
    parser.add_argument("--config", action="append", default=None)
    parser.add_argument("--json", type=Path)
    options = parser.parse_args()
    ids = options.config or ["c22_hour_k5_shuffle_code10_round3", "c24_hour_k5_copula_code10_round3"]
    result = together(options.home, options.period, ids)
    print(f"period {result['period']}: {len(result['strong_pairs'])} strong pairs")
    print(f"{'configuration':44} {'chance':>8} {'rows, worst pair':>17} {'cell maxima, worst pair':>24}")
    for config_id, figures in result["configs"].items():
        print(f"{config_id:44} {figures['chance']:8.4f} {figures['rows_max']:17.4f} "
              f"{figures['at_cell_maxima_max']:24.4f}")
    if options.json:
        options.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
