"""The contribution bound chosen by utility (in the spirit of PipelineDP's utility analysis).

A bound B (cells per subscriber) trades two errors of a published count against the true,
unbounded number of distinct subscribers in the cell:

* bias: subscribers in more than B cells are dropped from all but B of them. Over the domain's
  ``cells`` cells, the mean undercount per cell is sum_m h[m] x max(0, m - B) / cells, where h[m]
  is the number of subscribers in m cells;
* noise: the discrete Laplace at scale B / epsilon, E|X| = 2a / (1 - a^2), a = exp(-epsilon / B).

The expected total error of B is bias + noise: the mean absolute error a planner sees is at most
that (triangle inequality; the noise sometimes offsets the undercount), and equal to it on a cell
with no bias. The chooser takes the candidate with the smallest expected total (ties: the smaller
bound).

Where h comes from, and what it costs. Choosing on the raw data of the period would spend the
published table's budget on the data without accounting for it (the bound is published, and it
depends on every subscriber). The choice is made instead from a DIFFERENTIALLY PRIVATE estimate
of h, paid for with a declared slice, ``bound_epsilon``, debited in the ledger under
``<config>.bound`` before the counts are drawn: h is a histogram in which each subscriber counts
once (in the bin of their number of cells, capped at ``HISTOGRAM_CAP``), so its L1 sensitivity
is 1 and OpenDP's discrete Laplace at scale 1 / bound_epsilon makes it bound_epsilon-DP. The bound
is then post-processing of a DP table. (The alternative, choosing on the previous period's data,
costs no new budget but leaks the previous period's raw data into a public choice, most of the
same subscribers, with no ledger entry: not taken.) The estimate is itself published once per
period, like every DP table here; the domain size (cells) comes from the category lists, which
are treated as public, as everywhere in the DP release.

Subscribers in more than HISTOGRAM_CAP cells count as HISTOGRAM_CAP, so the bias of a bound is
underestimated for them (by at most their excess): the candidates stay well below the cap.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from dsh_assets.core import duck
from dsh_assets.core.files import DigestBook
from dsh_assets.core.dp.mechanism import (
    MECHANISM,
    discrete_laplace,
    discrete_laplace_mae,
    laplace_scale,
    opendp_measurement,
)
from dsh_assets.core.release.configs import DpCountsConfig
from dsh_assets.core.release.schema import Schema
from dsh_assets.core.release.cells import cell_expressions

CANDIDATES = (1, 2, 4, 8, 16, 32)
HISTOGRAM_CAP = 128
"""Bins 0..HISTOGRAM_CAP cells per subscriber; the last bin holds every subscriber with at least that many."""


def cells_per_subscriber(source_path: str | os.PathLike, config: DpCountsConfig, schema: Schema,
                         book: DigestBook) -> tuple[np.ndarray, int]:
    """(h, cells): h[m] = subscribers in m distinct cells (m capped at HISTOGRAM_CAP); the domain's cell count.

    Evaluation truth, never published as such: ``noisy_histogram`` makes the DP estimate of h. Kept in ``book``
    while the file is unchanged: the bound's publication and the lab's curve count the same pairs.
    """
    kind = ("cells_per_subscriber", tuple(cell_expressions(config, schema)), schema.subscriber)
    return book.figure(source_path, kind, lambda path: _cells_per_subscriber(path, config, schema))


def _cells_per_subscriber(source_path: str | os.PathLike, config: DpCountsConfig,
                          schema: Schema) -> tuple[np.ndarray, int]:
    expressions = cell_expressions(config, schema)
    cell = ", ".join(f"{expression} AS c{i}" for i, expression in enumerate(expressions))
    with duck.connect() as connection:
        connection.execute(f'CREATE TEMP TABLE pairs AS SELECT DISTINCT "{schema.subscriber}" AS s, {cell} '
                           f"FROM read_parquet(?)", [str(source_path)])
        rows = connection.execute("SELECT least(n, ?), count(*) FROM (SELECT s, count(*) AS n FROM pairs GROUP BY s) "
                                  "GROUP BY ALL", [HISTOGRAM_CAP]).fetchall()
        cells = connection.execute("SELECT " + " * ".join(f"count(DISTINCT c{i})" for i in range(4))
                                   + " FROM pairs").fetchone()[0]
    histogram = histogram_of(rows)
    histogram.setflags(write=False)  # remembered: shared by its callers
    return histogram, int(cells)


def histogram_of(subscribers_by_cells) -> np.ndarray:
    """h from (m, subscribers in m cells) pairs, m already capped at HISTOGRAM_CAP; the bins no pair names are 0."""
    histogram = np.zeros(HISTOGRAM_CAP + 1, dtype=np.int64)
    for m, n in subscribers_by_cells:
        histogram[int(m)] = int(n)
    return histogram


def noisy_histogram(histogram: np.ndarray, epsilon: float) -> tuple[np.ndarray, dict]:
    """h + OpenDP discrete Laplace at scale 1 / epsilon (sensitivity 1: a subscriber is in one bin), clamped at 0.

    SPENDS ``epsilon``: publish through ``publish.publish_dp_bound`` (ledger, once per period).
    """
    scale = laplace_scale(1, epsilon)
    noisy = np.maximum(discrete_laplace(np.asarray(histogram, dtype=np.int64), scale), 0)
    noisy[0] = 0  # a subscriber of the source is in at least one cell: bin 0 is empty by definition
    public = {"mechanism": MECHANISM, "privacy_unit": "subscriber", "epsilon": epsilon, "sensitivity_l1": 1,
              "scale": scale, "opendp_epsilon": float(opendp_measurement(scale).map(1)),
              "histogram_cap": HISTOGRAM_CAP}
    return noisy, public


def expected_total_error(histogram, cells: int, epsilon: float,
                         candidates=CANDIDATES) -> dict[int, dict[str, float]]:
    """Bound -> {"bias", "noise", "total"}: mean undercount per cell from ``histogram``, E|noise| from theory."""
    h = np.asarray(histogram, dtype=np.float64)
    m = np.arange(len(h))
    curve = {}
    for bound in candidates:
        bias = float((h * np.maximum(m - bound, 0)).sum() / cells) if cells else 0.0
        noise = discrete_laplace_mae(laplace_scale(int(bound), epsilon))
        curve[int(bound)] = {"bias": bias, "noise": noise, "total": bias + noise}
    return curve


def choose_bound(curve: dict[int, dict[str, float]]) -> int:
    """The candidate with the smallest expected total error; the smaller bound on a tie."""
    return min(curve, key=lambda bound: (curve[bound]["total"], bound))


def bound_figures(chosen: int, curve: dict[int, dict[str, float]], basis: str) -> dict:
    """The `bound` figure of `dsh run --json`: the bound, the expected total error per candidate, and its basis."""
    return {"chosen": int(chosen), "candidates": {str(b): v["total"] for b, v in curve.items()}, "basis": basis}


def histogram_table(noisy: np.ndarray) -> pa.Table:
    return pa.table({"cells_per_subscriber": pa.array(np.arange(len(noisy)), pa.int64()),
                     "noisy_subscribers": pa.array(noisy, pa.int64())})
