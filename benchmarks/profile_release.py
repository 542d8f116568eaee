"""Where ``release`` spends its time and memory: each stage timed on its own, in this process.

    .venv/bin/python benchmarks/profile_release.py SRC [--stage all|plan|maxima|read|noise|write|release]
                                                       [--cprofile] [--batch-rows N] [--pre-buffer]

SRC is an ingested source (bench_release.py caches them under benchmarks/data/). Run one stage
per process (``--stage plan`` etc.) to get that stage's own peak RSS; ``--stage all`` runs them
in sequence, so its peak RSS is the largest stage's, and then runs ``release`` itself and checks
that the profiled write made the same bytes. The stages mirror dsh_assets.core.release.transform.release
(read a batch, noise the whole batch with ``noise.jitter`` on Arrow arrays, then drop the rows
of small cells, write fixed row groups) and call its public helpers; they are not a second
implementation. Written for c15_window_k5_noise5 (no alias, no coarsening).
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import io
import pstats
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core.release.configs import load_configs
from dsh_assets.core.files import FixedRowGroupWriter
from dsh_assets.core.release.noise import column_key, jitter
from dsh_assets.core.release.schema import ROW_ID, load_schema
from dsh_assets.core.secrets import load_secrets
from dsh_assets.core.release.source import distinct_apps
from dsh_assets.core.release.transform import (
    DEFAULT_BATCH_ROWS,
    column_maxima,
    plan_release,
    release,
    released_schema,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_release import CONFIG_ID, _peak_rss_mb, _status_mb


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("src")
    parser.add_argument("--stage", default="all",
                        choices=["all", "plan", "maxima", "read", "noise", "write", "release"])
    parser.add_argument("--cprofile", action="store_true", help="cProfile the stage(s), top 25 by cumulative time")
    parser.add_argument("--batch-rows", type=int, default=DEFAULT_BATCH_ROWS)
    parser.add_argument("--pre-buffer", action="store_true",
                        help="open the source with pyarrow's default read-ahead (release uses pre_buffer=False)")
    args = parser.parse_args()

    schema = load_schema()
    config = load_configs(schema=schema)[CONFIG_ID]
    with tempfile.TemporaryDirectory() as home:
        secrets = load_secrets(home, environ={})
    parquet = pq.ParquetFile(args.src, pre_buffer=args.pre_buffer)
    rows = parquet.metadata.num_rows
    target = released_schema(config, schema)
    if config.pseudonym or config.time_coarsen != "window" or config.app_groups:
        raise SystemExit(f"{CONFIG_ID}: the profile mirrors a release without alias or coarsening")
    noisy = [name for name in schema.measurements if name in target.names] if config.noise_scale > 0 else []
    read_columns = list(target.names) + [ROW_ID]
    dictionary_columns = [f.name for f in target if pa.types.is_string(f.type)]
    keys = {name: column_key(secrets.noise_seed, name) for name in noisy}
    state: dict = {}
    timings: dict[str, float] = {}

    def timed(name, function):
        cpu, start = time.process_time(), time.perf_counter()
        result = function()
        timings[name] = time.perf_counter() - start
        cpu = time.process_time() - cpu
        print(f"{name:<34}{timings[name]:8.2f} s  cpu {cpu:7.2f} s   peak RSS so far {_peak_rss_mb():7,.0f} MB",
              flush=True)
        return result

    def plan():
        state["plan"] = plan_release(args.src, config, schema, rows)

    def maxima():
        state["maxima"] = column_maxima(args.src, noisy)

    def read_only():
        n = 0
        for batch in parquet.iter_batches(batch_size=args.batch_rows, columns=read_columns):
            n += batch.num_rows
        return n

    def noise_filter(write_to=None):
        """As release: noise the whole batch (consecutive row ids), then drop the withheld rows once."""
        keep_all = state["plan"].keep
        maxima_ = state["maxima"]
        t_read = t_filter = t_noise = t_write = 0.0
        c_read = c_filter = c_noise = c_write = 0.0
        writer = FixedRowGroupWriter(write_to, target, dictionary_columns) if write_to else None
        batches = parquet.iter_batches(batch_size=args.batch_rows, columns=read_columns)
        while True:
            t0, p0 = time.perf_counter(), time.process_time()
            batch = next(batches, None)
            t1, p1 = time.perf_counter(), time.process_time()
            t_read += t1 - t0
            c_read += p1 - p0
            if batch is None:
                break
            row_ids = batch.column(ROW_ID).to_numpy()
            columns = []
            for field in target:
                if field.name in keys:
                    columns.append(jitter(batch.column(field.name), keys[field.name], row_ids,
                                          config.noise_scale, maxima_[field.name]))
                else:
                    columns.append(batch.column(field.name))
            out = pa.RecordBatch.from_arrays(columns, schema=target)
            t2, p2 = time.perf_counter(), time.process_time()
            t_noise += t2 - t1
            c_noise += p2 - p1
            keep = keep_all[row_ids]
            if not keep.all():
                out = out.filter(pa.array(keep))
            t3, p3 = time.perf_counter(), time.process_time()
            t_filter += t3 - t2
            c_filter += p3 - p2
            if writer:
                writer.write(out)
                t_write += time.perf_counter() - t3
                c_write += time.process_time() - p3
        if writer:
            t4, p4 = time.perf_counter(), time.process_time()
            writer.close()
            t_write += time.perf_counter() - t4
            c_write += time.process_time() - p4
        for name, value, cpu in (("  read batches", t_read, c_read),
                                 (f"  noise ({len(keys)} columns, whole batch)", t_noise, c_noise),
                                 ("  filter by keep mask", t_filter, c_filter),
                                 ("  write (FixedRowGroupWriter)", t_write, c_write)):
            if value:
                print(f"{name:<34}{value:8.2f} s  cpu {cpu:7.2f} s", flush=True)

    profiler = cProfile.Profile() if args.cprofile else None
    if profiler:
        profiler.enable()
    print(f"{args.src}: {rows:,} rows; RSS after imports {_status_mb('VmRSS') or 0:,.0f} MB", flush=True)
    same = True
    with tempfile.TemporaryDirectory(dir=Path(args.src).parent) as scratch:
        out = Path(scratch) / "out.parquet"
        released = Path(scratch) / "release.parquet"
        if args.stage in ("all", "plan", "noise", "write"):
            timed("plan_release (2 DuckDB scans)", plan)
        if args.stage in ("all", "maxima", "noise", "write"):
            timed("column_maxima", maxima)
        if args.stage in ("all", "read"):
            timed("read pass only (iter_batches)", read_only)
        if args.stage in ("all", "noise"):
            timed("read + noise + filter, no write", noise_filter)
        if args.stage in ("all", "write"):
            timed("read + noise + filter + write", lambda: noise_filter(out))
        if args.stage in ("all", "release"):
            apps = distinct_apps(args.src, schema)
            timed("release() end to end", lambda: release(args.src, released, config, schema, secrets, apps,
                                                          batch_rows=args.batch_rows))
        if args.stage == "all":
            same = _sha256(out) == _sha256(released)
            print(f"profiled write has the same bytes as release(): {'yes' if same else 'NO'}", flush=True)
    if profiler:
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(25)
        print(text.getvalue())
    print(f"peak RSS {_peak_rss_mb():,.0f} MB")
    return 0 if same else 1


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


if __name__ == "__main__":
    sys.exit(main())
