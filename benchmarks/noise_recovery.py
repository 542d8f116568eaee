"""The c15^2 / c17 recovery on a home: c15 and c17 rows aligned by evaluator truth (their plans' orders).

With one noise draw shared by both releases, c15^2 / c17 is the original value. Usage:
    .venv/bin/python benchmarks/noise_recovery.py HOME PERIOD
"""
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from dsh_assets.core.release.configs import load_configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.release.transform import plan_release
from dsh_assets.core.secrets import load_secrets
home, period = Path(sys.argv[1]), sys.argv[2]
schema = load_schema(); configs = load_configs(None, schema); secrets = load_secrets(home)
src = home / "source" / period / "source.parquet"
n = pq.ParquetFile(src).metadata.num_rows
def by_row(cid):
    plan = plan_release(src, configs[cid], schema, n, secrets, period)
    t = pq.read_table(home / "candidates" / cid / period / "released.parquet", columns=["dl_throughput_kbps"])
    full = np.full(n, np.nan); full[plan.order] = t.column(0).to_numpy(zero_copy_only=False).astype(float)
    return full
a, b = by_row("c15_window_k5_noise5"), by_row("c17_hour_groups_k5_noise10")
x = pq.read_table(src, columns=["dl_throughput_kbps"]).column(0).to_numpy(zero_copy_only=False).astype(float)
ok = (x > 0) & (b > 0) & np.isfinite(a) & np.isfinite(b) & (a < np.nanmax(a)) & (b < np.nanmax(b))
rng = np.random.default_rng(0); sample = rng.choice(np.flatnonzero(ok), size=min(10665, ok.sum()), replace=False)
rec = np.isclose(a[sample] ** 2 / b[sample], x[sample], rtol=1e-9)
print(f"c15^2/c17 equals the original value for {int(rec.sum())} of {len(sample)} sampled rows ({rec.mean():.4%})")
