"""Benchmark the spark engine (local[2]) against the embedded one, step by step, on the synthetic source.

    .venv/bin/python benchmarks/bench_spark.py [--large | --sizes 1.1M 11M] [--repeats 3]
                                               [--data-dir benchmarks/data] [--json PATH]

Per size (1.1M rows; 11M with --large), synthesises the source once, then per repetition times, in this
process, each step on each engine: ingest (validation + stored source with row ids), the release of
c15_window_k5_noise5 (cells in place) and of c17_hour_groups_k5_noise10 (coarsened cells), the content
digest of a release, and the exact figures the assets compute on the chosen engine (through
core/engines.py). The Spark session is started once, before the first step, and its start is reported
apart. Medians over the repetitions; every Spark file's content digest and every Spark figure must equal
the embedded one's (the benchmark exits 1 otherwise). Not a test: on 2 cores Spark is expected to be
slower than the embedded engine."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from dsh_assets.core import engines  # noqa: E402
from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy.inputs import ReleaseUnderTest  # noqa: E402
from dsh_assets.core.release.configs import load_configs  # noqa: E402
from dsh_assets.core.release.digest import content_sha256  # noqa: E402
from dsh_assets.core.release.schema import load_schema  # noqa: E402
from dsh_assets.core.release.source import distinct_apps, ingest_source  # noqa: E402
from dsh_assets.core.release.synth import synthesize  # noqa: E402
from dsh_assets.core.release.transform import release  # noqa: E402
from dsh_assets.core.secrets import Secrets  # noqa: E402
from dsh_assets.core.spark import release as spark_release  # noqa: E402
from dsh_assets.core.spark import source as spark_source  # noqa: E402
from dsh_assets.core.spark.session import spark_session  # noqa: E402
from dsh_assets.core.utility import elina, quality_groups  # noqa: E402

PERIOD = dt.date(2026, 11, 2)
SIZES = {"1.1M": (1_099_340, 199_195), "11M": (10_993_400, 1_991_950)}
RELEASES = ("c15_window_k5_noise5", "c17_hour_groups_k5_noise10")
ATTACKED = "c15_window_k5_noise5"
"""The release the exact metrics are measured on."""
DP_CONFIG = "dp_counts_eps1"
SECRETS = Secrets(b"bench-noise-seed", b"bench-alias-key", "configured")
MASTER = "local[2]"


def _timed(step, label: str = "") -> float:
    started = time.perf_counter()
    step()
    seconds = time.perf_counter() - started
    print(f"  {label}: {seconds:.2f} s", file=sys.stderr, flush=True)
    return seconds


def bench(size: str, data_dir: Path, repeats: int, spark) -> dict:
    schema, configs = load_schema(), load_configs()
    rows, subscribers = SIZES[size]
    raw = data_dir / f"spark_raw_{size}.parquet"
    if not raw.exists():
        synthesize(raw, rows=rows, subscribers=subscribers, period=PERIOD, schema=schema)
    work = data_dir / f"spark_{size}"
    work.mkdir(exist_ok=True)
    stored = {"duckdb": work / "source.parquet", "spark": work / "source_spark.parquet"}
    ingest = {"duckdb": lambda: ingest_source(raw, stored["duckdb"], schema, book=DigestBook()),
              "spark": lambda: spark_source.ingest_source(spark, raw, stored["spark"], schema, book=DigestBook())}
    times: dict[str, dict[str, list[float]]] = {}
    digests: dict[str, dict[str, str]] = {}
    figures_equal: dict[str, bool] = {}
    for _ in range(repeats):
        for engine, step in ingest.items():
            times.setdefault("ingest", {}).setdefault(engine, []).append(_timed(step, f"ingest {engine}"))
        apps = distinct_apps(stored["duckdb"], schema)
        for config_id in RELEASES:
            config = configs[config_id]
            outs = {engine: work / f"{config_id}_{engine}.parquet" for engine in ("duckdb", "spark")}
            steps = {
                "duckdb": lambda: release(stored["duckdb"], outs["duckdb"], config, schema, SECRETS, apps,
                                          period=PERIOD.isoformat(), book=DigestBook()),
                "spark": lambda: spark_release.release(spark, stored["duckdb"], outs["spark"], config, schema,
                                                       SECRETS, apps, period=PERIOD.isoformat(), book=DigestBook()),
            }
            for engine, step in steps.items():
                times.setdefault(f"release {config_id}", {}).setdefault(engine, []).append(
                    _timed(step, f"release {config_id} {engine}"))
            digests[config_id] = {engine: content_sha256(path, book=DigestBook()) for engine, path in outs.items()}
            times.setdefault("content digest", {}).setdefault("both", []).append(
                _timed(lambda: content_sha256(outs["duckdb"], book=DigestBook()), "content digest"))
        for step, on_engine in evidence_steps(stored["duckdb"], work / f"{ATTACKED}_duckdb.parquet", configs, schema,
                                              spark).items():
            results = {}
            for engine in engines.ENGINES:
                on = engines.engine_for(engine, DigestBook(), lambda: spark)
                times.setdefault(step, {}).setdefault(engine, []).append(
                    _timed(lambda: results.__setitem__(engine, on_engine(on)), f"{step} {engine}"))
            figures_equal[step] = results[engines.EMBEDDED] == results[engines.SPARK]
    medians = {step: {engine: statistics.median(values) for engine, values in by_engine.items()}
               for step, by_engine in times.items()}
    return {"rows": rows, "medians_s": medians, "digests": digests,
            "digests_equal": all(len(set(d.values())) == 1 for d in digests.values()), "figures_equal": figures_equal}


def evidence_steps(source: Path, released: Path, configs, schema, spark) -> dict:
    """Exact figures computed on either engine from the stored source (and the embedded release of ATTACKED):
    step -> (engine -> the step's figures), through the dispatch the assets use."""
    attacked = configs[ATTACKED]
    period = PERIOD.isoformat()
    under_test = ReleaseUnderTest.of_stored(source, released, attacked, schema, SECRETS, period, book=DigestBook())
    return {
        f"singling out {ATTACKED}": lambda engine: engine.singling_out(under_test, SECRETS, period),
        f"inference {ATTACKED}": lambda engine: engine.inference(under_test, SECRETS, period),
        f"quality groups {ATTACKED}": lambda engine: _figures(_with_aggregations(
            engine, quality_groups.evaluate, source, released, attacked, schema)),
        f"Elina's answers {ATTACKED}": lambda engine: _figures(_with_aggregations(
            engine, elina.answer, source, released, attacked, schema)),
        f"DP cell counts {DP_CONFIG}": lambda engine: _cell_counts(
            engine.counting().cell_counts(source, configs[DP_CONFIG], schema, SECRETS)),
    }


def _with_aggregations(engine, metric, *args):
    """A utility metric over the engine's aggregations."""
    with engine.aggregations() as passes:
        return metric(*args, aggregations=passes)


def _figures(result) -> str:
    """A metric's recorded figures, comparable across engines (NaN equals NaN in JSON text)."""
    return json.dumps([result.metadata(), result.figures()], sort_keys=True, default=str)


def _cell_counts(counts) -> tuple:
    """What the DP counts publish from: the cells, their bounded and unbounded counts."""
    unbounded = None if counts.unbounded is None else counts.unbounded.tolist()
    return counts.cells.to_pydict(), counts.counts.tolist(), unbounded, counts.bound, counts.loss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help="also 11M rows")
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), help="these sizes only (overrides --large)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=HERE / "data")
    parser.add_argument("--json", type=Path, default=HERE / "results" / f"spark_{dt.date.today().isoformat()}.json")
    args = parser.parse_args()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    spark = spark_session(MASTER)
    session_s = time.perf_counter() - started
    results = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load": os.getloadavg()},
               "master": MASTER, "session_start_s": session_s, "sizes": {}}
    for size in args.sizes or (["1.1M", "11M"] if args.large else ["1.1M"]):
        results["sizes"][size] = bench(size, args.data_dir, args.repeats, spark)
        result = results["sizes"][size]
        print(f"\n{size} rows ({result['rows']:,}), medians of {args.repeats}; Spark session start {session_s:.1f} s")
        print(f"{'step':<42}{'embedded s':>12}{'spark s':>12}{'spark/embedded':>16}")
        for step, by_engine in result["medians_s"].items():
            if "duckdb" in by_engine:
                ratio = by_engine["spark"] / by_engine["duckdb"]
                print(f"{step:<42}{by_engine['duckdb']:>12.2f}{by_engine['spark']:>12.2f}{ratio:>15.1f}x")
            else:
                print(f"{step:<42}{by_engine['both']:>12.2f}")
        print(f"content digests equal: {result['digests_equal']}; figures equal: {result['figures_equal']}")
    args.json.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {args.json}")
    equal = all(r["digests_equal"] and all(r["figures_equal"].values()) for r in results["sizes"].values())
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
