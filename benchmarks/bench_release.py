from dsh_assets.core.files import DigestBook
"""Benchmark the TrimAndJitterV3 release (c15_window_k5_noise5) against pandas and a DuckDB floor,
and time the evidence steps (privacy attacks, quality groups + Elina's answers) against the same floor.

    .venv/bin/python benchmarks/bench_release.py [--sizes 1.1M,11M] [--repeats 3]
                                                 [--evidence-sizes 1.1M]
                                                 [--data-dir benchmarks/data] [--json PATH]

Per size, builds the synthetic source once (``dsh_assets.core.release.synth.synthesize``), ingests it
(``dsh_assets.core.release.source.ingest_source``) and caches the ingested file under the data dir. Then,
for each repetition, runs the contenders one after the other (order rotated each repetition),
each in a fresh subprocess, so that peak RSS (VmHWM) is per step:

    ours           dsh_assets.core.release.transform.release(..., configs["c15_window_k5_noise5"], ...)
    pandas         benchmarks/pandas_reference.py: the seed's ~25-line pandas function
    floor          DuckDB COPY of the ingested source with the identifiers dropped, no transform

and, at the evidence sizes (default 1.1M only), two more steps on a release of the same
configuration written once beforehand (not timed):

    attacks        plan_release + ReleaseUnderTest, then singling_out, numeric_fingerprint, linkage,
                   inference and cross_release (make_second_release + evaluate)
    quality+elina  quality_groups.evaluate, then elina.answer(..., quality=<that result>)

Step time is measured inside the child around the step only (imports and interpreter start
excluded; the process wall time is in the JSON). Not a test: it prints a table and exits 0
unless a step fails or the row counts disagree.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONFIG_ID = "c15_window_k5_noise5"
PERIOD = dt.date(2026, 11, 2)
CONTENDERS = ("ours", "pandas", "floor")
EVIDENCE = ("attacks", "quality+elina")
LABELS = {"ours": "ours (release)", "pandas": "pandas reference", "floor": "floor (DuckDB COPY)",
          "attacks": "attacks (5, one config)", "quality+elina": "quality groups + Elina"}
TARGETS = {
    # size label -> minimum pandas/ours speed-up
    "speedup": {"1.1M": 2.0, "11M": 3.0},
    "ours_over_floor": 1.5,
    "rss_mb_at_11M": 1000.0,  # "< 1 GB", read as 1,000 MB (decimal), the stricter reading
    "attacks_over_floor": 3.0,
    "quality_elina_over_floor": 1.0,
}
FLOOR_SQL = ("COPY (SELECT * EXCLUDE (msisdn, imsi, imei, enb_id, row_id) FROM read_parquet({src})) "
             "TO {out} (FORMAT parquet)")


# ---------------------------------------------------------------------------------------------
# child side: one contender, one run, one JSON line on stdout
# ---------------------------------------------------------------------------------------------

def _status_mb(field: str) -> float | None:
    """VmHWM / VmRSS of this process in MB (decimal), from /proc/self/status."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    return None


def _peak_rss_mb() -> float:
    peak = _status_mb("VmHWM")
    if peak is None:  # not Linux: ru_maxrss is KiB on Linux, bytes on macOS
        import resource

        scale = 1 if sys.platform == "darwin" else 1024
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 1e6
    return peak


def _quote(path: str) -> str:
    return "'" + path.replace("'", "''") + "'"


def _demo_inputs():
    """Schema, the configuration, the demo secrets and the source's apps, as every step uses them."""
    from dsh_assets.core.release.configs import load_configs
    from dsh_assets.core.release.schema import load_schema
    from dsh_assets.core.secrets import load_secrets

    schema = load_schema()
    config = load_configs(schema=schema)[CONFIG_ID]
    with tempfile.TemporaryDirectory() as home:
        # An empty home and no environment: the demo seed, never a configured secret.
        secrets = load_secrets(home, environ={})
    return schema, config, secrets


class _Parts:
    """Wall and CPU seconds of the parts of one step, printed as they finish (to stderr)."""

    def __init__(self, step: str):
        self.step = step
        self.seconds: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._wall, self._process = time.perf_counter(), time.process_time()

    def done(self, name: str) -> None:
        wall, process = time.perf_counter(), time.process_time()
        self.seconds[name], self.cpu[name] = wall - self._wall, process - self._process
        self._wall, self._process = wall, process
        print(f"{self.step}: {name:<34}{self.seconds[name]:8.2f} s  cpu {self.cpu[name]:7.2f} s  "
              f"peak RSS so far {_peak_rss_mb():7,.0f} MB", file=sys.stderr, flush=True)


def _attacks(src: str, released: str, schema, config, secrets) -> tuple[_Parts, dict]:
    """The whole attack suite for one configuration, as dsh_assets.graph.privacy.assets runs it (one process)."""
    import pyarrow.parquet as pq

    from dsh_assets.core.privacy import cross_release, inference, linkage, numeric_fingerprint, singling_out
    from dsh_assets.core.privacy.inputs import ReleaseUnderTest
    from dsh_assets.core.release.source import distinct_apps
    from dsh_assets.core.release.transform import plan_release

    parts = _Parts("attacks")
    rows = pq.ParquetFile(src).metadata.num_rows
    plan = plan_release(src, config, schema, rows, secrets, PERIOD.isoformat())
    release = ReleaseUnderTest(Path(src), Path(released), config, schema, plan, book=DigestBook())
    parts.done("plan_release (keep mask)")
    figures = {"singling_out": singling_out.evaluate(release).figures()}
    parts.done("singling_out")
    figures["numeric_fingerprint"] = numeric_fingerprint.evaluate(release).figures()
    parts.done("numeric_fingerprint")
    figures["linkage"] = linkage.evaluate(release).figures()
    parts.done("linkage")
    figures["inference"] = inference.evaluate(release).figures()
    parts.done("inference")
    apps = distinct_apps(src, schema)
    second = cross_release.make_second_release(release, secrets, apps)
    parts.done("cross_release: second release (plan)")
    figures["cross_release"] = cross_release.evaluate(release, second).figures()
    parts.done("cross_release: evaluate")
    return parts, figures


def _quality_elina(src: str, released: str, schema, config) -> tuple[_Parts, dict]:
    """quality_groups.evaluate, then elina.answer reusing its result."""
    from dsh_assets.core.utility import elina, quality_groups

    parts = _Parts("quality+elina")
    quality = quality_groups.evaluate(src, released, config, schema)
    parts.done("quality_groups.evaluate")
    answers = elina.answer(src, released, config, schema, quality=quality)
    parts.done("elina.answer (quality reused)")
    return parts, {"quality_cells": len(quality.cells), "elina": answers.figures()}


def run_child(contender: str, src: str, out: str, released: str | None = None) -> dict:
    """One step, timed around the step only. ``out`` is the output file, or a scratch directory
    for the evidence steps (which read ``released``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if contender != "floor":
        # pyarrow imports pandas (about 0.4 s here) on its first array conversion: an import, so
        # paid before the clock, as pandas_reference.py pays it at import. The floor never loads it.
        pa.array([0]).to_numpy()
    parts = figures = None
    if contender == "ours":
        from dsh_assets.core.release.source import distinct_apps
        from dsh_assets.core.release.transform import release

        schema, config, secrets = _demo_inputs()
        apps = distinct_apps(src, schema)
        rss_before = _status_mb("VmRSS")
        cpu_start, start = time.process_time(), time.perf_counter()
        plan = release(src, out, config, schema, secrets, apps, period=PERIOD.isoformat(), book=DigestBook())
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        rows_out = plan.rows_released
    elif contender == "pandas":
        sys.path.insert(0, str(HERE))
        from pandas_reference import trim_and_jitter_v3

        rss_before = _status_mb("VmRSS")
        cpu_start, start = time.process_time(), time.perf_counter()
        rows_out = trim_and_jitter_v3(src, out)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    elif contender == "floor":
        import duckdb

        rss_before = _status_mb("VmRSS")
        cpu_start, start = time.process_time(), time.perf_counter()
        with duckdb.connect() as connection:
            connection.execute(FLOOR_SQL.format(src=_quote(src), out=_quote(out)))
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        rows_out = None
    elif contender in EVIDENCE:
        if released is None:
            raise SystemExit(f"{contender}: --released is required")
        # Import what the step needs before the clock starts, as for the other contenders.
        import importlib

        for module in ("attacks.cross_release", "attacks.inference", "attacks.linkage", "attacks.numeric_fingerprint",
                       "attacks.singling_out", "elina", "quality_groups", "transform"):
            importlib.import_module(f"dsh_assets.core.{module}")

        schema, config, secrets = _demo_inputs()
        rss_before = _status_mb("VmRSS")
        cpu_start, start = time.process_time(), time.perf_counter()
        if contender == "attacks":
            parts, figures = _attacks(src, released, schema, config, secrets)
        else:
            parts, figures = _quality_elina(src, released, schema, config)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        rows_out = None
    else:
        raise SystemExit(f"unknown contender {contender!r}")
    peak = _peak_rss_mb()
    result = {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "peak_rss_mb": peak,
        "rss_before_mb": rss_before,
    }
    if parts is not None:
        result.update(part_seconds=parts.seconds, part_cpu_seconds=parts.cpu, figures=figures)
        return result
    written = pq.ParquetFile(out).metadata.num_rows
    if rows_out is not None and rows_out != written:
        raise SystemExit(f"{contender}: reported {rows_out} rows but wrote {written}")
    result.update(rows_out=written, out_mb=os.path.getsize(out) / 1e6)
    return result


# ---------------------------------------------------------------------------------------------
# parent side: data, runs, table
# ---------------------------------------------------------------------------------------------

def parse_size(label: str) -> tuple[str, int, int]:
    """'1.1M' -> the default source (1,099,340 rows, 199,195 subscribers); '11M' -> 10x both.

    ``<n>M`` scales the default by n / 1.1; a plain integer is a row count, subscribers scaled along.
    """
    from dsh_assets.core.release.synth import DEFAULT_ROWS, DEFAULT_SUBSCRIBERS

    text = label.strip()
    if text.upper().endswith("M"):
        factor = float(text[:-1]) / 1.1
    else:
        factor = int(text.replace(",", "").replace("_", "")) / DEFAULT_ROWS
    rows = round(DEFAULT_ROWS * factor)
    subscribers = max(1, round(DEFAULT_SUBSCRIBERS * factor))
    if rows < 1:
        raise argparse.ArgumentTypeError(f"size {label!r} gives no rows")
    return text, rows, subscribers


def _synth_fingerprint() -> str:
    """Hash of the code that makes the ingested source (generator, ingest, writer, schema, roles).

    A cached source built by other versions of these is stale (another person may be tuning the
    generator or the ingest order).
    """
    from importlib import resources

    from dsh_assets.core import files
    from dsh_assets.core.release import schema, source, synth

    digest = hashlib.sha256()
    for module in (synth, source, files, schema):
        digest.update(Path(module.__file__).read_bytes())
    digest.update(resources.files("dsh_assets").joinpath("columns.toml").read_bytes())
    return digest.hexdigest()[:16]


def prepare_source(data_dir: Path, label: str, rows: int, subscribers: int, keep_stale: bool) -> tuple[Path, dict]:
    """The ingested source for this size, built once and reused while synth.py is unchanged."""
    from dsh_assets.core.release.schema import load_schema
    from dsh_assets.core.release.source import ingest_source
    from dsh_assets.core.release.synth import DEFAULT_SEED, synthesize

    data_dir.mkdir(parents=True, exist_ok=True)
    stem = f"source_{rows}r_{subscribers}s_{DEFAULT_SEED}_{PERIOD.isoformat()}"
    ingested = data_dir / f"{stem}.ingested.parquet"
    sidecar = data_dir / f"{stem}.json"
    fingerprint = _synth_fingerprint()
    if ingested.exists() and sidecar.exists():
        meta = json.loads(sidecar.read_text())
        if meta.get("synth_fingerprint") == fingerprint or keep_stale:
            if meta.get("synth_fingerprint") != fingerprint:
                print(f"  [{label}] note: reusing a source built by other versions of synth.py/source.py", flush=True)
            return ingested, meta
        print(f"  [{label}] synth.py or the ingest code changed since {ingested.name} was built: rebuilding",
              flush=True)
    schema = load_schema()
    raw = data_dir / f"{stem}.raw.parquet"
    print(f"  [{label}] synthesising {rows:,} rows, {subscribers:,} subscribers ...", flush=True)
    start = time.perf_counter()
    synthesize(raw, rows=rows, subscribers=subscribers, seed=DEFAULT_SEED, period=PERIOD, schema=schema)
    synth_seconds = time.perf_counter() - start
    print(f"  [{label}] ingesting ...", flush=True)
    start = time.perf_counter()
    summary = ingest_source(raw, ingested, schema, book=DigestBook())
    ingest_seconds = time.perf_counter() - start
    raw.unlink()  # only the ingested copy is benchmarked
    meta = {
        "rows": summary.rows,
        "subscribers": summary.subscribers,
        "apps": len(summary.apps),
        "seed": DEFAULT_SEED,
        "period": PERIOD.isoformat(),
        "synth_fingerprint": fingerprint,
        "synth_seconds": round(synth_seconds, 1),
        "ingest_seconds": round(ingest_seconds, 1),
    }
    sidecar.write_text(json.dumps(meta, indent=2) + "\n")
    return ingested, meta


def _warm(path: Path) -> None:
    """Read the file once so that no contender pays for the first read from disk."""
    with open(path, "rb") as handle:
        while handle.read(1 << 24):
            pass


def run_once(contender: str, src: Path, out: Path, released: Path | None = None) -> dict:
    """One step in a fresh subprocess. ``out`` is the output file (removed afterwards), or for the
    evidence steps a scratch directory (created and removed here)."""
    scratch = contender in EVIDENCE
    if scratch:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
    else:
        out.unlink(missing_ok=True)
    command = [sys.executable, str(Path(__file__).resolve()), "--child", contender, "--src", str(src), "--out", str(out)]
    if released is not None:
        command += ["--released", str(released)]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    start = time.perf_counter()
    try:
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
    finally:
        if scratch:
            shutil.rmtree(out, ignore_errors=True)
    wall = time.perf_counter() - start
    if completed.returncode != 0:
        if not scratch:
            out.unlink(missing_ok=True)
        return {"failed": True, "returncode": completed.returncode, "stderr": completed.stderr[-2000:],
                "process_seconds": wall, "load_before": load}
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    result["process_seconds"] = wall
    result["load_before"] = load
    if not scratch:
        out.unlink(missing_ok=True)
    return result


def prepare_release(src: Path, out: Path) -> tuple[int, float]:
    """The release the evidence steps read, written once per size by a child (not a timed run)."""
    out.unlink(missing_ok=True)
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "ours", "--src", str(src), "--out", str(out)]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        out.unlink(missing_ok=True)
        raise SystemExit(f"could not write the release for the evidence steps: {completed.stderr[-2000:]}")
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    return result["rows_out"], result["seconds"]


def _median(runs: list[dict], key: str) -> float | None:
    values = [run[key] for run in runs if not run.get("failed") and run.get(key) is not None]
    return statistics.median(values) if values else None


def _machine() -> dict:
    import duckdb
    import numpy
    import pandas
    import pyarrow

    memory = None
    try:
        with open("/proc/meminfo") as handle:
            memory = round(int(handle.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    return {
        "nproc": os.cpu_count(),
        "nproc_available": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": memory,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "pyarrow": pyarrow.__version__,
        "duckdb": duckdb.__version__,
        "pandas": pandas.__version__,
    }


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "NOT MET")


def bench_size(label: str, rows: int, subscribers: int, evidence: bool, args) -> dict:
    contenders = CONTENDERS + (EVIDENCE if evidence else ())
    src, meta = prepare_source(args.data_dir, label, rows, subscribers, args.keep_stale_data)
    _warm(src)
    out_dir = args.data_dir / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    released = out_dir / f"evidence_release_{rows}r.parquet"
    evidence_rows = None
    if evidence:
        print(f"  [{label}] writing the release the evidence steps read (not timed) ...", flush=True)
        evidence_rows, seconds = prepare_release(src, released)
        print(f"  [{label}] release written: {evidence_rows:,} rows in {seconds:.1f} s", flush=True)
    runs: dict[str, list[dict]] = {name: [] for name in contenders}
    try:
        for repetition in range(args.repeats):
            order = contenders[repetition % len(contenders):] + contenders[:repetition % len(contenders)]
            for contender in order:
                if contender in EVIDENCE:
                    result = run_once(contender, src, out_dir / f"scratch_{contender.replace('+', '_')}", released)
                else:
                    result = run_once(contender, src, out_dir / f"{contender}.parquet")
                runs[contender].append(result)
                shown = ("FAILED" if result.get("failed")
                         else f"{result['seconds']:.2f} s, {result['peak_rss_mb']:,.0f} MB")
                print(f"  [{label}] run {repetition + 1}/{args.repeats} {contender:<14}{shown}", flush=True)
    finally:
        released.unlink(missing_ok=True)
    summary = {
        "label": label,
        "rows": meta["rows"],
        "subscribers": meta["subscribers"],
        "source_mb": round(src.stat().st_size / 1e6, 1),
        "contenders": {},
    }
    for name in contenders:
        ok = [r for r in runs[name] if not r.get("failed")]
        entry = {
            "median_seconds": _median(runs[name], "seconds"),
            "median_cpu_seconds": _median(runs[name], "cpu_seconds"),
            "median_peak_rss_mb": _median(runs[name], "peak_rss_mb"),
            "max_peak_rss_mb": max((r["peak_rss_mb"] for r in ok), default=None),
            "median_process_seconds": _median(runs[name], "process_seconds"),
            "rows_out": sorted({r["rows_out"] for r in ok if "rows_out" in r}),
            "out_mb": _median(runs[name], "out_mb"),
            "failures": len(runs[name]) - len(ok),
            "runs": runs[name],
        }
        if name in EVIDENCE and ok:
            part_names = list(ok[0]["part_seconds"])
            entry["parts"] = {
                part: {"median_seconds": statistics.median(r["part_seconds"][part] for r in ok),
                       "median_cpu_seconds": statistics.median(r["part_cpu_seconds"][part] for r in ok)}
                for part in part_names
            }
        summary["contenders"][name] = entry
    ours, pandas_, floor = (summary["contenders"][n] for n in CONTENDERS)
    problems = []
    for name in contenders:
        if summary["contenders"][name]["failures"]:
            failed = next(r for r in runs[name] if r.get("failed"))
            problems.append(f"{name} failed (exit {failed['returncode']}): {failed['stderr'].strip()[-400:]}")
    if ours["rows_out"] and pandas_["rows_out"] and ours["rows_out"] != pandas_["rows_out"]:
        problems.append(f"released rows differ: ours {ours['rows_out']} vs pandas {pandas_['rows_out']}")
    if ours["rows_out"] and evidence_rows is not None and ours["rows_out"] != [evidence_rows]:
        problems.append(f"released rows differ: ours {ours['rows_out']} vs the evidence steps' release {evidence_rows}")
    if floor["rows_out"] and floor["rows_out"] != [meta["rows"]]:
        problems.append(f"floor wrote {floor['rows_out']} rows, source has {meta['rows']}")
    summary["problems"] = problems
    ratio = lambda a, b: None if a is None or b is None else a / b
    summary["pandas_over_ours"] = ratio(pandas_["median_seconds"], ours["median_seconds"])
    summary["ours_over_floor"] = ratio(ours["median_seconds"], floor["median_seconds"])
    summary["cpu_pandas_over_ours"] = ratio(pandas_["median_cpu_seconds"], ours["median_cpu_seconds"])
    summary["cpu_ours_over_floor"] = ratio(ours["median_cpu_seconds"], floor["median_cpu_seconds"])
    for name in EVIDENCE if evidence else ():
        step = summary["contenders"][name]
        summary[f"{name}_over_floor"] = ratio(step["median_seconds"], floor["median_seconds"])
        summary[f"cpu_{name}_over_floor"] = ratio(step["median_cpu_seconds"], floor["median_cpu_seconds"])
    loads = [r["load_before"] for name in contenders for r in runs[name] if r.get("load_before") is not None]
    summary["load_range"] = [min(loads), max(loads)] if loads else None
    return summary


def print_size(summary: dict) -> list[tuple[str, bool | None]]:
    label = summary["label"]
    released = summary["contenders"]["ours"]["rows_out"]
    released_text = f"{released[0]:,}" if len(released) == 1 else str(released)
    print()
    print(f"== {label}: {summary['rows']:,} rows, {summary['subscribers']:,} subscribers, "
          f"ingested source {summary['source_mb']:,.0f} MB; released {released_text} rows")
    print(f"   {'step':<26}{'median s':>10}  {'runs s':<24}{'CPU s':>8}{'peak RSS MB':>13}{'out MB':>9}")
    for name in summary["contenders"]:
        c = summary["contenders"][name]
        each = ", ".join("fail" if r.get("failed") else f"{r['seconds']:.2f}" for r in c["runs"])
        print(f"   {LABELS[name]:<26}{_fmt(c['median_seconds'], '.2f'):>10}  {each:<24}"
              f"{_fmt(c['median_cpu_seconds'], '.2f'):>8}"
              f"{_fmt(c['median_peak_rss_mb'], ',.0f'):>13}{_fmt(c['out_mb'], ',.0f'):>9}")
    verdicts = []
    speedup = summary["pandas_over_ours"]
    want = TARGETS["speedup"].get(label)
    ok = None if speedup is None or want is None else speedup >= want
    target = f">= {want:.1f}x" if want else "(no target at this size)"
    print(f"   {'pandas/ours':<22}{_fmt(speedup, '.2f'):>6}x   target {target:<22}{_verdict(ok) if want else ''}")
    if want:
        verdicts.append((f"{label} pandas/ours >= {want:.0f}x", ok))
    over = summary["ours_over_floor"]
    want = TARGETS["ours_over_floor"]
    ok = None if over is None else over <= want
    print(f"   {'ours/floor':<22}{_fmt(over, '.2f'):>6}x   target <= {want:.1f}x{'':<15}{_verdict(ok)}")
    verdicts.append((f"{label} ours/floor <= {want}x", ok))
    if label == "11M":
        peak = summary["contenders"]["ours"]["max_peak_rss_mb"]
        want = TARGETS["rss_mb_at_11M"]
        ok = None if peak is None else peak < want
        print(f"   ours peak RSS {_fmt(peak, ',.0f')} MB (max of runs)   target < {want:,.0f} MB (1 GB)   {_verdict(ok)}")
        verdicts.append(("11M ours peak RSS < 1 GB", ok))
    if "attacks" in summary["contenders"]:
        floor = summary["contenders"]["floor"]["median_seconds"]
        print(f"   evidence steps against this run's floor ({_fmt(floor, '.2f')} s), medians:")
        rows = (("ours (release), context", "ours", summary["ours_over_floor"], None),
                ("attacks", "attacks", summary["attacks_over_floor"], TARGETS["attacks_over_floor"]),
                ("quality+elina", "quality+elina", summary["quality+elina_over_floor"],
                 TARGETS["quality_elina_over_floor"]))
        for text, name, over, want in rows:
            seconds = summary["contenders"][name]["median_seconds"]
            line = f"     {text:<26}{_fmt(seconds, '.2f'):>7} s  {_fmt(over, '.2f'):>6}x"
            if want is not None:
                ok = None if over is None else over <= want
                line += f"   target <= {want:.1f}x {_verdict(ok)}"
                verdicts.append((f"{label} {name}/floor <= {want:.0f}x", ok))
            print(line)
        print(f"     {'part (median of runs)':<46}{'s':>7}{'CPU s':>8}")
        for name in EVIDENCE:
            for part, figures in summary["contenders"][name].get("parts", {}).items():
                print(f"       {name + ': ' + part:<44}{figures['median_seconds']:>7.2f}"
                      f"{figures['median_cpu_seconds']:>8.2f}")
    load = summary["load_range"]
    context = (f"CPU-time ratios pandas/ours {_fmt(summary['cpu_pandas_over_ours'], '.2f')}x, "
               f"ours/floor {_fmt(summary['cpu_ours_over_floor'], '.2f')}x")
    if "attacks" in summary["contenders"]:
        context += (f", attacks/floor {_fmt(summary['cpu_attacks_over_floor'], '.2f')}x, "
                    f"(quality+elina)/floor {_fmt(summary['cpu_quality+elina_over_floor'], '.2f')}x")
    print(f"   (context, not targets: {context}; 1-min load average before runs "
          + ("-" if load is None else f"{load[0]:.1f} to {load[1]:.1f}") + ")")
    for problem in summary["problems"]:
        print(f"   PROBLEM: {problem}")
    return verdicts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1.1M,11M", help="comma-separated sizes: 1.1M = the default source, 11M = 10x")
    parser.add_argument("--evidence-sizes", default="1.1M",
                        help="sizes (among --sizes) at which the attacks and quality+elina steps also run "
                             "(default 1.1M; empty: none)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=HERE / "data")
    parser.add_argument("--json", type=Path, help="also write the figures (every run) to this JSON file")
    parser.add_argument("--keep-stale-data", action="store_true",
                        help="reuse cached sources even if synth.py or the ingest code changed since they were built")
    parser.add_argument("--child", choices=CONTENDERS + EVIDENCE, help=argparse.SUPPRESS)
    parser.add_argument("--src", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--released", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        print(json.dumps(run_child(args.child, args.src, args.out, args.released)), flush=True)
        return 0

    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    args.data_dir = args.data_dir.resolve()
    sizes = [parse_size(text) for text in args.sizes.split(",") if text.strip()]
    evidence_rows = {parse_size(text)[1] for text in args.evidence_sizes.split(",") if text.strip()}
    missing = evidence_rows - {rows for _, rows, _ in sizes}
    if missing:
        print(f"note: --evidence-sizes not in --sizes, skipped: {', '.join(f'{n:,} rows' for n in sorted(missing))}")
    machine = _machine()
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    with_evidence = [label for label, rows, _ in sizes if rows in evidence_rows]
    print(f"bench_release: {CONFIG_ID} (TrimAndJitterV3), sizes {', '.join(s[0] for s in sizes)}, "
          f"evidence steps at {', '.join(with_evidence) or 'none'}, {args.repeats} repeats", flush=True)
    summaries = [bench_size(label, rows, subscribers, rows in evidence_rows, args)
                 for label, rows, subscribers in sizes]

    print()
    print(f"machine: nproc {machine['nproc']} (available {machine['nproc_available']}), "
          f"{machine['memory_gib']} GiB RAM, {machine['platform']}")
    print(f"         python {machine['python']}, numpy {machine['numpy']}, pyarrow {machine['pyarrow']}, "
          f"duckdb {machine['duckdb']}, pandas {machine['pandas']}")
    if hasattr(os, "getloadavg"):
        print("         load average now (1, 5, 15 min): " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    print(f"note: seconds are medians of {args.repeats} runs per step on a shared, noisy machine (runs vary "
          f"by about +-30%); each run is a fresh subprocess, the steps interleaved (order rotated per "
          f"repetition), source file in the page cache. Step time excludes interpreter start and imports; "
          f"CPU s is user+sys of all the child's threads during the step; peak RSS is the child's VmHWM "
          f"(whole process, imports included). MB = 10^6 bytes. Ratios compare medians measured in this run.")
    verdicts = []
    for summary in summaries:
        verdicts.extend(print_size(summary))
    print()
    print("targets: " + "; ".join(f"{name}: {_verdict(ok)}" for name, ok in verdicts))

    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "config": CONFIG_ID, "started": started, "repeats": args.repeats, "machine": machine,
            "targets": TARGETS, "sizes": summaries,
            "verdicts": [{"target": name, "met": ok} for name, ok in verdicts],
        }, indent=2) + "\n")
        print(f"wrote {args.json}")
    return 1 if any(summary["problems"] for summary in summaries) else 0


if __name__ == "__main__":
    sys.exit(main())
