"""TrimAndJitterV3 (c15_window_k5_noise5) as the seed deck's notebook would write it: one pandas function.

The point of comparison for ``bench_release.py``; not used by the platform. The whole table is
loaded into memory, as the hackathon's notebook did. ``row_id`` (a column our ingest adds) is
dropped with the identifiers so that the three contenders write the same columns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

IDENTIFIERS = ["msisdn", "imsi", "imei", "enb_id"]
CELL = ["time_start", "province", "application_category", "radio_access_type"]
MEASUREMENTS = [
    "dl_throughput_kbps", "ul_throughput_kbps", "radio_latency_ms", "core_latency_ms",
    "jitter_ms", "packet_loss_pct", "retransmission_pct", "dl_volume_kb", "ul_volume_kb",
    "session_duration_s", "tcp_handshake_ms", "dns_latency_ms", "video_stall_count", "cqi",
]


def trim_and_jitter_v3(src: str, out: str, seed: int = 42, k: int = 5, scale: float = 0.05) -> int:
    """Drop identifiers, keep the window, jitter measurements, withhold cells of fewer than k rows.

    Returns the number of released rows.
    """
    df = pd.read_parquet(src)
    # 1. Trim: phone, SIM, device and station identifiers (and our ingest's row id).
    df = df.drop(columns=IDENTIFIERS + [c for c in ["row_id"] if c in df.columns])
    # 2. time_coarsen = window: the ten-minute window is released as is.
    # 3. Jitter: multiply by exp(Laplace(0, scale)) from one seeded generator, clip to [0, column max].
    rng = np.random.default_rng(seed)
    for column in MEASUREMENTS:
        factor = np.exp(rng.laplace(0.0, scale, len(df)))
        df[column] = (df[column] * factor).clip(0.0, df[column].max())
    # 4. k-suppression: withhold rows whose (time, province, app, radio) cell has fewer than k rows.
    sizes = df.groupby(CELL, observed=True, dropna=False)[CELL[0]].transform("size")
    df = df[sizes >= k]
    df.to_parquet(out, index=False)
    return len(df)
