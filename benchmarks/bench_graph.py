"""Benchmark the whole graph for one configuration as a user runs it, step by step, against a DuckDB floor.

    .venv/bin/python benchmarks/bench_graph.py [--large] [--sizes 1.1M[,11M]] [--repeats 3]
                                               [--config c15_window_k5_noise5|all] [--day even|busy-hour]
                                               [--data-dir benchmarks/data] [--json PATH] [--no-plot]

Per size, a raw synthetic source is built once (``synth.synthesize``, period 2026-11-02, default seed) and
cached under the data dir; ``--day busy-hour`` moves its rows into one hour (cells of thousands of rows). Each repetition then runs, in fresh processes and in an order rotated per
repetition:

    graph   dsh run --config CONFIG --home FRESH --source SRC --period P --json (``--config all``: no
            --config, every configuration with the period's publication)
            (a new, empty home every run: source ingest, the release and its evidence, pair evidence,
            publication, report)
    floor   DuckDB COPY of the same raw source, identifiers dropped, written as zstd Parquet: the
            read + write every step is measured against

The per-step seconds come from the Dagster event log of the run's home (STEP_START to STEP_SUCCESS or
STEP_FAILURE of each step key, over every run of the instance; with several workers, steps of different
candidates overlap, so their sum exceeds the wall time). A candidate's time runs from its first step's start to
its last step's end, over its runs. The job's peak memory is the largest sum of the resident sets of the `dsh`
process and every process below it (its candidate workers, anonymeter's), sampled every 0.2 s; each step is
given the largest sample taken while it ran. The largest one process (``os.wait4``'s ru_maxrss) is
printed beside it, and the CPU the job used per wall second. The disk a graph run uses
at once is the input's size plus the largest sample (every second) of the blocks allocated under the run's
home, where the stored source, the releases, scratch files and DuckDB's spill live, and under the run's TMPDIR
(a folder beside the home), where releases keep their stored columns. The script prints
medians of the runs, each step's ratio to the median floor of the same size measured in the same run,
writes every run to a JSON file under benchmarks/results/, and (with two sizes or more) a log-log plot of step
time against rows.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CHECKOUT = HERE.parent
PERIOD = dt.date(2026, 11, 2)
DEFAULT_CONFIG = "c15_window_k5_noise5"
ALL_CONFIGS = "all"
"""--config all: every configuration of releases.toml, with the period's publication (a plain `dsh run`)."""
IDENTIFIERS = ("msisdn", "imsi", "imei", "enb_id")
RSS_SAMPLE_SECONDS = 0.2
DISK_SAMPLE_EVERY = 5
"""RSS samples between two samples of the disk in use (a walk of the home)."""
FLOOR_SQL = ("COPY (SELECT * EXCLUDE ({ids}) FROM read_parquet({src})) "
             "TO {out} (FORMAT parquet, COMPRESSION zstd)")


def _quote(path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _env(extra: dict | None = None) -> dict:
    env = {**os.environ, **(extra or {})}
    env["PYTHONPATH"] = str(CHECKOUT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("DSH_HOME", None)
    return env


def _resident_mb(pid: int) -> float | None:
    """The resident sets (VmRSS) of the process and of every process below it (its workers, anonymeter's), summed,
    MB; None once the process is gone."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parents[int(entry)] = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    if pid not in parents:
        return None
    tree, frontier = {pid}, [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier and child not in tree]
        tree.update(children)
        frontier = children
    return sum(_own_resident_mb(member) or 0.0 for member in tree)


def _own_resident_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        return None
    return None


def _allocated_gb(folder: Path) -> float:
    """Disk blocks allocated to the files under ``folder`` (GB), each inode once (the published release is a
    hard link to the candidate); files that vanish meanwhile count nothing."""
    blocks = {}
    for directory, _, names in os.walk(folder):
        for name in names:
            try:
                status = os.lstat(os.path.join(directory, name))
            except OSError:
                continue
            blocks[(status.st_dev, status.st_ino)] = status.st_blocks * 512
    return sum(blocks.values()) / 1e9


def _sample(pid: int, samples: list, disk_samples: list, watched: tuple[Path, ...], stop: threading.Event) -> None:
    """(epoch seconds, VmRSS MB) every RSS_SAMPLE_SECONDS, to attribute the peak to the step running then, and
    (epoch seconds, GB allocated under the ``watched`` folders) every DISK_SAMPLE_EVERY of them."""
    tick = 0
    while not stop.is_set():
        resident = _resident_mb(pid)
        if resident is not None:
            samples.append((time.time(), resident))
        if watched and tick % DISK_SAMPLE_EVERY == 0:
            disk_samples.append((time.time(), sum(_allocated_gb(folder) for folder in watched)))
        tick += 1
        stop.wait(RSS_SAMPLE_SECONDS)


def _run_child(command: list[str], watched: tuple[Path, ...] = (), env: dict | None = None) -> dict:
    """A fresh process (``env``: variables set for it); wall seconds, its CPU seconds, its peak RSS (MB, 10^6 bytes)
    from wait4, and its resident set (and the disk allocated under the ``watched`` folders) sampled over time."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    samples: list[tuple[float, float]] = []
    disk_samples: list[tuple[float, float]] = []
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start, started_at = time.perf_counter(), time.time()
        process = subprocess.Popen(command, stdout=out, stderr=err, env=_env(env), cwd=CHECKOUT)
        stop = threading.Event()
        sampler = threading.Thread(target=_sample, args=(process.pid, samples, disk_samples, watched, stop),
                                   daemon=True)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
        stop.set()
        sampler.join()
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    return {"returncode": process.returncode, "seconds": wall, "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_rss_mb": usage.ru_maxrss * 1024 / 1e6,
            "peak_rss_all_mb": max((mb for _, mb in samples), default=None), "load_before": load,
            "rss_samples": samples,
            "disk_samples": disk_samples, "started_at": started_at,
            "stdout": stdout, "stderr": stderr[-3000:]}


# ---------------------------------------------------------------------------------------------
# step times from the event log
# ---------------------------------------------------------------------------------------------

CONFIG_TAG = "dagster/partition/config"
"""The tag naming a candidate's run by its configuration (the config dimension of its partition)."""


def step_intervals(home: Path) -> tuple[dict[str, list[tuple[float, float]]], dict[str, tuple[float, float]],
                                        dict[str, dict[str, float]]]:
    """Step key -> its (start, end) epoch seconds, from STEP_START to STEP_SUCCESS (or failure), over every run;
    configuration -> (its first step's start, its last step's end) over the runs of that candidate; and
    configuration -> step key -> its seconds in that candidate's runs."""
    from dagster import DagsterEventType

    from dsh_assets.core.layout import Layout
    from dsh_assets.graph.instance import open_instance

    instance = open_instance(Layout(home))
    intervals: dict[str, list[tuple[float, float]]] = {}
    candidates: dict[str, tuple[float, float]] = {}
    candidate_steps: dict[str, dict[str, float]] = {}
    try:
        for run in instance.get_runs():
            started: dict[str, float] = {}
            spans, span_keys = [], []
            for entry in instance.all_logs(run.run_id):
                event = entry.dagster_event
                if event is None or not entry.step_key:
                    continue
                if event.event_type == DagsterEventType.STEP_START:
                    started[entry.step_key] = entry.timestamp
                elif event.event_type in (DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE):
                    if entry.step_key in started:
                        spans.append((started.pop(entry.step_key), entry.timestamp))
                        span_keys.append(entry.step_key)
                        intervals.setdefault(entry.step_key, []).append(spans[-1])
            config = run.tags.get(CONFIG_TAG)
            if config and spans:
                first, last = candidates.get(config, (float("inf"), 0.0))
                candidates[config] = (min(first, *(a for a, _ in spans)), max(last, *(b for _, b in spans)))
                steps = candidate_steps.setdefault(config, {})
                for key, (start, end) in zip(span_keys, spans):
                    steps[key] = steps.get(key, 0.0) + end - start
    finally:
        instance.dispose()
    return intervals, candidates, candidate_steps


def step_peaks(intervals: dict[str, list[tuple[float, float]]], samples: list[tuple[float, float]]) -> dict:
    """Step key -> the largest sample (resident set MB, or disk GB) taken while it ran; steps of one run may
    overlap."""
    return {key: max((value for at, value in samples if any(start <= at <= end for start, end in spans)), default=None)
            for key, spans in intervals.items()}


# ---------------------------------------------------------------------------------------------
# sources and runs
# ---------------------------------------------------------------------------------------------

def parse_size(label: str) -> tuple[str, int, int]:
    from dsh_assets.core.release.synth import DEFAULT_ROWS, DEFAULT_SUBSCRIBERS

    text = label.strip()
    factor = float(text[:-1]) / 1.1 if text.upper().endswith("M") else int(text) / DEFAULT_ROWS
    return text, round(DEFAULT_ROWS * factor), max(1, round(DEFAULT_SUBSCRIBERS * factor))


BUSY_HOUR = "busy-hour"
DAYS = ("even", BUSY_HOUR)
"""The days a source can have: the synthetic day, or the same rows moved into one hour (17:00-18:00 of the
period, each keeping its minute and second): cells of thousands of rows, as a stadium's or a festival's."""


def prepare_raw_source(data_dir: Path, label: str, rows: int, subscribers: int, day: str = "even") -> Path:
    """The raw synthetic source (what a user hands to `dsh run --source`), built once per size and day."""
    raw = _synthetic_source(data_dir, label, rows, subscribers)
    if day != BUSY_HOUR:
        return raw
    busy = raw.with_name(raw.name.replace(".raw.parquet", f".{BUSY_HOUR}.raw.parquet"))
    if not busy.exists():
        import duckdb

        from dsh_assets.core.release.schema import load_schema

        time = load_schema().time
        print(f"  [{label}] moving every row into one hour ...", flush=True)
        temporary = busy.with_name(busy.name + ".tmp")
        moved = (f'"{time}" - date_trunc(\'hour\', "{time}") + TIMESTAMPTZ \'{PERIOD.isoformat()} 17:00:00+00\' '
                 f'AS "{time}"')
        with duckdb.connect() as connection:
            connection.execute(f"COPY (SELECT * REPLACE ({moved}) FROM read_parquet({_quote(raw)})) "
                               f"TO {_quote(temporary)} (FORMAT parquet, COMPRESSION zstd)")
        temporary.replace(busy)
    return busy


def _synthetic_source(data_dir: Path, label: str, rows: int, subscribers: int) -> Path:
    from dsh_assets.core.release.schema import load_schema
    from dsh_assets.core.release.synth import DEFAULT_SEED, synthesize

    data_dir.mkdir(parents=True, exist_ok=True)
    raw = data_dir / f"graph_source_{rows}r_{subscribers}s_{DEFAULT_SEED}_{PERIOD.isoformat()}.raw.parquet"
    if not raw.exists():
        print(f"  [{label}] synthesising {rows:,} rows, {subscribers:,} subscribers ...", flush=True)
        temporary = raw.with_name(raw.name + ".tmp")
        synthesize(temporary, rows=rows, subscribers=subscribers, seed=DEFAULT_SEED, period=PERIOD,
                   schema=load_schema())
        temporary.replace(raw)
    return raw


def run_graph(src: Path, config: str, work: Path) -> dict:
    home, temporary = work / "home", work / "tmp"
    shutil.rmtree(home, ignore_errors=True)
    temporary.mkdir(exist_ok=True)
    chosen = [] if config == ALL_CONFIGS else ["--config", config]
    command = [sys.executable, "-m", "dsh_assets.cli", "run", *chosen, "--home", str(home),
               "--source", str(src), "--period", PERIOD.isoformat(), "--json"]
    # the release's stored columns (core/columns.py) go to TMPDIR: put it where the disk is counted
    result = _run_child(command, watched=(home, temporary), env={"TMPDIR": str(temporary)})
    result["disk_at_once_gb"] = src.stat().st_size / 1e9 + max((gb for _, gb in result["disk_samples"]), default=0.0)
    if result["returncode"] == 0:
        intervals, candidates, candidate_steps = step_intervals(home)
        result["candidates"] = {config: end - start for config, (start, end) in candidates.items()}
        result["candidate_steps"] = candidate_steps
        result["steps"] = {key: sum(end - start for start, end in spans) for key, spans in intervals.items()}
        result["step_peak_rss_mb"] = step_peaks(intervals, result["rss_samples"])
        result["step_peak_disk_gb"] = step_peaks(intervals, result["disk_samples"])
        result["before_first_step"] = min(start for spans in intervals.values() for start, _ in spans) - result["started_at"]
        shutil.rmtree(home, ignore_errors=True)
    else:  # kept for its event log: the failed steps' tracebacks
        kept = work.parent / f"failed_home_{int(time.time())}"
        home.rename(kept)
        result["kept_home"] = str(kept)
    del result["stdout"], result["rss_samples"], result["disk_samples"]
    return result


def run_floor(src: Path, work: Path) -> dict:
    out = work / "floor.parquet"
    code = ("import duckdb, sys, time, json\n"
            "start = time.perf_counter()\n"
            "with duckdb.connect() as c: c.execute(sys.argv[1])\n"
            "print(json.dumps({'step_seconds': time.perf_counter() - start}))\n")
    sql = FLOOR_SQL.format(ids=", ".join(IDENTIFIERS), src=_quote(src), out=_quote(out))
    result = _run_child([sys.executable, "-c", code, sql])
    if result["returncode"] == 0:
        result["step_seconds"] = json.loads(result["stdout"].strip().splitlines()[-1])["step_seconds"]
    out.unlink(missing_ok=True)
    del result["stdout"], result["rss_samples"], result["disk_samples"]
    return result


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def bench_size(label: str, rows: int, subscribers: int, args) -> dict:
    src = prepare_raw_source(args.data_dir, label, rows, subscribers, args.day)
    with open(src, "rb") as handle:  # page cache: nobody pays the first read from disk
        while handle.read(1 << 24):
            pass
    runs = {"graph": [], "floor": []}
    with tempfile.TemporaryDirectory(dir=args.data_dir) as work:
        work = Path(work)
        for repetition in range(args.repeats):
            order = ["graph", "floor"] if repetition % 2 == 0 else ["floor", "graph"]
            for name in order:
                result = run_graph(src, args.config, work) if name == "graph" else run_floor(src, work)
                runs[name].append(result)
                if result["returncode"] != 0:
                    print(f"  [{label}] {name} FAILED ({result['returncode']}):\n{result['stderr']}", flush=True)
                else:
                    print(f"  [{label}] run {repetition + 1} {name}: {result['seconds']:.1f} s, "
                          f"peak RSS {result['peak_rss_mb']:.0f} MB", flush=True)
    ok = [r for r in runs["graph"] if r["returncode"] == 0]
    keys = sorted({key for r in ok for key in r["steps"]})
    floor = _median([r.get("step_seconds") for r in runs["floor"] if r["returncode"] == 0])
    steps = {key: _median([r["steps"].get(key) for r in ok]) for key in keys}
    return {
        "label": label, "rows": rows, "subscribers": subscribers, "source": str(src), "runs": runs,
        "floor_seconds": floor,
        "floor_process_seconds": _median([r["seconds"] for r in runs["floor"] if r["returncode"] == 0]),
        "graph_process_seconds": _median([r["seconds"] for r in ok]),
        "graph_cpu_seconds": _median([r["cpu_seconds"] for r in ok]),
        "graph_peak_rss_mb": _median([r["peak_rss_mb"] for r in ok]),
        "graph_peak_rss_mb_max": max((r["peak_rss_mb"] for r in ok), default=None),
        "graph_peak_rss_all_mb": _median([r["peak_rss_all_mb"] for r in ok]),
        "graph_peak_rss_all_mb_max": max((r["peak_rss_all_mb"] or 0 for r in ok), default=None),
        "graph_disk_at_once_gb": _median([r["disk_at_once_gb"] for r in ok]),
        "before_first_step_seconds": _median([r["before_first_step"] for r in ok]),
        "steps": steps,
        "candidates": {config: _median([r["candidates"].get(config) for r in ok])
                       for config in sorted({config for r in ok for config in r["candidates"]})},
        "candidate_steps": {config: {key: _median([r["candidate_steps"].get(config, {}).get(key) for r in ok])
                                     for key in sorted({k for r in ok for k in r["candidate_steps"].get(config, {})})}
                            for config in sorted({config for r in ok for config in r["candidate_steps"]})},
        "step_peak_rss_mb": {key: _median([r["step_peak_rss_mb"].get(key) for r in ok]) for key in keys},
        "step_peak_disk_gb": {key: _median([r["step_peak_disk_gb"].get(key) for r in ok]) for key in keys},
        "steps_total": sum(v for v in steps.values() if v is not None),
        "failures": len(runs["graph"]) - len(ok),
    }


def print_size(summary: dict) -> None:
    floor = summary["floor_seconds"]
    print()
    if summary["graph_process_seconds"] is None or floor is None:
        print(f"{summary['label']} ({summary['rows']:,} rows): no run of the graph or of the floor succeeded "
              f"(their errors are printed above)")
        return
    print(f"{summary['label']} ({summary['rows']:,} rows): medians of {len(summary['runs']['graph'])} runs; "
          f"floor (DuckDB read + zstd write) {floor:.2f} s")
    print(f"   {'step':<28}{'median s':>10}{'/ floor':>10}{'peak RSS MB':>13}{'home GB':>9}")
    for key, value in sorted(summary["steps"].items(), key=lambda item: -(item[1] or 0)):
        peak, disk = summary["step_peak_rss_mb"].get(key), summary["step_peak_disk_gb"].get(key)
        print(f"   {key:<28}{value:>10.2f}{value / floor:>9.2f}x{peak or float('nan'):>13.0f}"
              f"{float('nan') if disk is None else disk:>9.2f}")
    total = summary["steps_total"]
    for config, seconds in sorted(summary["candidates"].items(), key=lambda item: -(item[1] or 0)):
        print(f"   candidate {config:<40}{seconds:>10.2f}{seconds / floor:>9.2f}x  (its first step's start to its "
              f"last step's end)")
        slowest = sorted(summary["candidate_steps"].get(config, {}).items(), key=lambda item: -(item[1] or 0))[:3]
        print("      slowest: " + ", ".join(f"{key} {value:.1f} s" for key, value in slowest))
    print(f"   {'sum of steps':<28}{total:>10.2f}{total / floor:>9.2f}x")
    process = summary["graph_process_seconds"]
    print(f"   {'dsh run process (wall)':<28}{process:>10.2f}{process / floor:>9.2f}x   "
          f"CPU {summary['graph_cpu_seconds']:.1f} s ({summary['graph_cpu_seconds'] / process:.2f} per wall "
          f"second), {process / summary['rows'] * 1e6:.2f} s per million rows")
    print(f"   {'peak memory, all processes':<28}{summary['graph_peak_rss_all_mb']:>10.0f}   MB (the largest sum of "
          f"the resident sets of dsh and every process below it, sampled every {RSS_SAMPLE_SECONDS} s; max "
          f"{summary['graph_peak_rss_all_mb_max']:.0f}); the largest one process: {summary['graph_peak_rss_mb']:.0f} MB")
    print(f"   {'disk at once':<28}{summary['graph_disk_at_once_gb']:>10.2f}   GB (the input and the largest "
          f"sample of the run's home and TMPDIR: stored source, releases, scratch, DuckDB's spill, stored columns)")
    print(f"   {'before the first step':<28}{summary['before_first_step_seconds']:>10.2f}   "
          f"(process start to the first STEP_START: interpreter, imports, definitions, instance)")


def plot(summaries: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 6))
    rows = [s["rows"] for s in summaries]
    keys = sorted({k for s in summaries for k in s["steps"]})
    for index, key in enumerate(keys):
        axes.plot(rows, [s["steps"].get(key) for s in summaries], marker="o", label=key,
                  linestyle=("-", "--", ":")[index // 10 % 3])
    axes.plot(rows, [s["floor_seconds"] for s in summaries], marker="s", color="black", linewidth=2, label="floor")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("rows")
    axes.set_ylabel("seconds (median)")
    axes.legend(fontsize=7, ncol=2)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", help="comma-separated sizes (default 1.1M; with --large 1.1M,11M)")
    parser.add_argument("--large", action="store_true", help="also 11M rows")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--config", default=DEFAULT_CONFIG, help=f"a configuration id, or {ALL_CONFIGS!r}")
    parser.add_argument("--day", choices=DAYS, default="even",
                        help="the synthetic day, or its rows moved into one busy hour")
    parser.add_argument("--data-dir", type=Path, default=HERE / "data")
    parser.add_argument("--json", type=Path, help="default: benchmarks/results/graph_<UTC time>.json")
    parser.add_argument("--no-plot", action="store_true")
    args = parser.parse_args(argv)
    args.data_dir = args.data_dir.resolve()
    sizes = [parse_size(text) for text in (args.sizes or ("1.1M,11M" if args.large else "1.1M")).split(",")]
    started = dt.datetime.now(dt.UTC)
    print(f"bench_graph: dsh run --config {args.config}, sizes {', '.join(s[0] for s in sizes)}, {args.day} day, "
          f"{args.repeats} runs each, interleaved with the floor", flush=True)
    summaries = [bench_size(label, rows, subscribers, args) for label, rows, subscribers in sizes]
    import duckdb
    import numpy
    import pyarrow

    print(f"\nmachine: nproc {os.cpu_count()}, python {sys.version.split()[0]}, numpy {numpy.__version__}, "
          f"pyarrow {pyarrow.__version__}, duckdb {duckdb.__version__}; load average now "
          + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    print("note: step seconds from the Dagster event log (start to success); ratios are against the floor's "
          "median measured in this run; peak RSS is the whole dsh process (wait4 ru_maxrss).")
    for summary in summaries:
        print_size(summary)
    stamp = started.strftime("%Y%m%dT%H%M%SZ")
    out = args.json or RESULTS / f"graph_{stamp}.json"
    out.write_text(json.dumps({"config": args.config, "started": started.isoformat(timespec="seconds"),
                               "repeats": args.repeats, "sizes": summaries}, indent=2) + "\n")
    print(f"\nwrote {out}")
    if len(summaries) >= 2 and not args.no_plot:
        picture = out.with_suffix(".png")
        plot(summaries, picture)
        print(f"wrote {picture}")
    return 1 if any(s["failures"] for s in summaries) else 0


if __name__ == "__main__":
    sys.exit(main())
