"""Differentially private subscriber counts per cell, published once per period through the ledger.

What is released: for each (time, province, app, radio) cell, the number of distinct subscribers
in it, plus integer noise from OpenDP's discrete Laplace mechanism (``make_laplace`` on an
integer vector domain; OpenDP samples it exactly from a CSPRNG, so no floating-point Laplace and
no seed that could strip the noise).

The privacy unit is the subscriber, not the row. Contributions are bounded first: a subscriber
present in more than ``max_cells_per_subscriber`` cells counts in exactly that many, the ones
with the smallest keyed hash of (seed, subscriber, cell) - a deterministic choice that depends
on nothing but the subscriber's own cells, so it does not depend on row order and keeps the L1
sensitivity of the count vector at the bound. Scale = sensitivity / epsilon (nudged up by a few
ulps, if needed, until OpenDP's own privacy map certifies at most epsilon).

Which cells are published: the full cross product of the category lists (the period's time
values after coarsening x provinces x apps x radios), so a cell with no subscriber gets a noisy
count like any other and absence is not revealed by omission. By default the lists are the
values observed in the period's source and are TREATED AS PUBLIC: a province, app, radio or time
window that appears only because of one subscriber's rows would disclose that such rows exist.
Pass ``public_domain`` (lists known independently of the data: the 19 provinces, the app
catalogue, the radio types, the period's windows) to remove that assumption; source cells
outside a public domain are then dropped and counted.

Post-processing only (no privacy cost): noisy counts are clamped at 0, and with a threshold
cells whose noisy count is below it are not published (a threshold on noisy counts, unlike a
k threshold on true counts, does not leak through differencing).

OpenDP's sampler cannot be seeded (a seed would let its holder strip the noise), so the bytes of a
draw are never reproducible: a re-run gets the same checksum only by returning the stored file.
Nothing here is free: the count table and Elina's Q2 table are each drawn once per period by
``publish_dp_counts`` / ``publish_dp_slow_shares``, which reserve their epsilon in the ledger
first; re-running returns the stored file, or with ``republish=True`` debits again. The ledger
keys are ``config.id`` for the counts and ``config.id + ".slow_5g"`` for Q2: the config's
``epsilon`` is split between them (``counts_epsilon + slow_share_epsilon = epsilon``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Protocol, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsh_assets.core import duck
from dsh_assets.core.dp import bound as bound_choice
from dsh_assets.core.dp.ledger import Ledger
from dsh_assets.core.dp.mechanism import (
    MECHANISM,
    discrete_laplace,
    discrete_laplace_half_width,
    discrete_laplace_mae,
    laplace_scale,
    opendp_measurement,
)
from dsh_assets.core.files import DigestBook, atomic_path
from dsh_assets.core.release.configs import ConfigError, DpCountsConfig
from dsh_assets.core.release.schema import Schema
from dsh_assets.core.release.cells import cell_expressions
from dsh_assets.core.secrets import Secrets

NOISY_COUNT = "noisy_count"
FOOTER_KEY = b"dsh_dp"
TOKEN_KEY = b"dsh_dp_reservation"
FIVE_G = "5G"
DOMAIN_ROLES = ("time", "province", "app", "radio")
BOUND_PURPOSE = b"dsh-dp-bound-v1\x00"
SLOW_PURPOSE = b"dsh-dp-slow5g-bound-v1\x00"


# -- true (bounded) counts: deterministic, never published ------------------------------------

@dataclass(frozen=True)
class CellCounts:
    """Bounded distinct-subscriber counts over the full cell domain, in cell order."""

    cells: pa.Table
    """(time, province, app, radio) of every cell of the domain, sorted."""
    counts: np.ndarray
    """True bounded counts (int64), aligned with ``cells``; evaluation truth, never published."""
    bound: int
    loss: dict = field(default_factory=dict)
    """Contribution-bounding loss: not differentially private, for the operator only."""
    unbounded: np.ndarray | None = None
    """True distinct subscribers per cell WITHOUT the bound (int64, aligned): the truth a planner wants;
    evaluation only, never published."""


def bound_key(secrets: Secrets, purpose: bytes = BOUND_PURPOSE) -> str:
    return hashlib.sha256(purpose + secrets.noise_seed).hexdigest()


OBSERVED_COLUMNS = ("kept", "pairs", "first_pairs", "pairs_at_bound", "rows", "rows_dropped")
"""The engine's per-observed-cell figures, besides the cell c0..c3: subscribers kept after the bound, all
(subscriber, cell) pairs, pairs ranked first (one per subscriber), pairs ranked bound + 1 (one per subscriber
over the bound), source rows, and source rows of the pairs dropped by the bound."""


def bound_ranked_cells(source_path: str | os.PathLike, config: DpCountsConfig, schema: Schema,
                       secrets: Secrets, book: DigestBook) -> pa.Table:
    """Per observed cell (c0..c3), the OBSERVED_COLUMNS of the bounding, streamed by DuckDB from Parquet.

    The engine's part of ``bounded_cell_counts`` (core.spark.dp has the Spark one): (subscriber, cell)
    pairs with their row counts, ranked per subscriber by SHA-256(key, subscriber, cell) with the key
    derived from the noise seed; pairs ranked beyond the bound are dropped. Kept in ``book`` while the
    file is unchanged: the release and its accuracy lab bound the same source alike (7 s at 11M rows), keyed
    by the seed's public id, never the seed.
    """
    kind = ("bound_ranked_cells", tuple(cell_expressions(config, schema)), config.max_cells_per_subscriber,
            schema.subscriber, secrets.seed_id)
    return book.figure(source_path, kind, lambda path: _bound_ranked_cells(path, config, schema, secrets))


def _bound_ranked_cells(source_path: str | os.PathLike, config: DpCountsConfig, schema: Schema,
                        secrets: Secrets) -> pa.Table:
    bound = config.max_cells_per_subscriber
    expressions = cell_expressions(config, schema)
    cell = ", ".join(f"{expression} AS c{i}" for i, expression in enumerate(expressions))
    with duck.connect() as connection:
        return connection.sql(
            f"WITH cells AS (SELECT \"{schema.subscriber}\" AS s, {cell}, count(*) AS n_rows "
            f"FROM read_parquet(?) GROUP BY ALL), "
            f"pairs AS (SELECT *, row_number() OVER (PARTITION BY s ORDER BY "
            f"sha256(concat_ws(chr(31), ?, s, epoch_us(c0)::VARCHAR, c1, c2, c3)), c0, c1, c2, c3) AS r "
            f"FROM cells) "
            f"SELECT c0, c1, c2, c3, count(*) FILTER (WHERE r <= ?) AS kept, count(*) AS pairs, "
            f"count(*) FILTER (WHERE r = 1) AS first_pairs, count(*) FILTER (WHERE r = ? + 1) AS pairs_at_bound, "
            f"sum(n_rows) AS rows, coalesce(sum(n_rows) FILTER (WHERE r > ?), 0) AS rows_dropped "
            f"FROM pairs GROUP BY ALL",
            params=[str(source_path), bound_key(secrets), bound, bound, bound],
        ).to_arrow_table()


def counts_over_domain(observed: pa.Table, bound: int, schema: Schema,
                       public_domain: Mapping[str, Sequence] | None = None) -> CellCounts:
    """The CellCounts of an engine's ``bound_ranked_cells`` table: every cell of the domain, in cell order.

    Shared by the engines (the table is one row per observed cell, small next to the source). The domain
    is the cross product of ``public_domain`` (keys time, province, app, radio) where given, else of the
    values observed in the source.
    """
    domain_of = dict(public_domain or {})
    unknown = set(domain_of) - set(DOMAIN_ROLES)
    if unknown:
        raise ValueError(f"public_domain keys must be among {DOMAIN_ROLES}, not {sorted(unknown)}")
    arrow_types = [pa.timestamp("us", tz="UTC"), pa.string(), pa.string(), pa.string()]
    observed = pa.table([*(observed.column(f"c{i}").cast(arrow_types[i]) for i in range(4)),
                         *(observed.column(name).cast(pa.int64()) for name in OBSERVED_COLUMNS)],
                        names=[*(f"c{i}" for i in range(4)), *OBSERVED_COLUMNS])
    with duck.connect() as connection:
        connection.register("observed", observed)
        lists = []
        for i, role in enumerate(DOMAIN_ROLES):
            if role in domain_of:
                values = pa.array(sorted(set(domain_of[role])), type=arrow_types[i])
                connection.register(f"public_{i}", pa.table({f"c{i}": values}))
                lists.append(f"(SELECT c{i} FROM public_{i})")
            else:
                lists.append(f"(SELECT DISTINCT c{i} FROM observed)")
        connection.execute(f"CREATE TEMP TABLE domain AS SELECT * FROM {' CROSS JOIN '.join(lists)}")
        result = connection.sql(
            "SELECT d.c0, d.c1, d.c2, d.c3, coalesce(o.kept, 0)::BIGINT AS n, coalesce(o.pairs, 0)::BIGINT AS u "
            "FROM domain d LEFT JOIN observed o USING (c0, c1, c2, c3) ORDER BY d.c0, d.c1, d.c2, d.c3"
        ).to_arrow_table()
        outside = connection.execute(
            "SELECT coalesce(sum(kept), 0) FROM (SELECT * FROM observed ANTI JOIN domain USING (c0, c1, c2, c3))"
        ).fetchone()[0]
    names = [schema.time, schema.province, schema.app, schema.radio]
    cells = pa.table([result.column(f"c{i}").cast(arrow_types[i]) for i in range(4)], names=names)
    total = {name: int(pc.sum(observed.column(name)).as_py() or 0) for name in OBSERVED_COLUMNS}
    rows, rows_dropped = total["rows"], total["rows_dropped"]
    return CellCounts(
        cells=cells,
        counts=result.column("n").to_numpy().astype(np.int64),
        bound=bound,
        unbounded=result.column("u").to_numpy().astype(np.int64),
        loss={
            "subscribers": total["first_pairs"],
            "subscribers_over_bound": total["pairs_at_bound"],
            "subscriber_cell_pairs": total["pairs"],
            "pairs_dropped_by_bound": total["pairs"] - total["kept"],
            "rows": rows,
            "rows_dropped_by_bound": rows_dropped,
            "share_of_rows_dropped": rows_dropped / rows if rows else 0.0,
            "pairs_outside_public_domain": int(outside),
        },
    )


def bounded_cell_counts(
    source_path: str | os.PathLike,
    config: DpCountsConfig,
    schema: Schema,
    secrets: Secrets,
    book: DigestBook,
    public_domain: Mapping[str, Sequence] | None = None,
) -> CellCounts:
    """Distinct subscribers per cell after bounding each subscriber to ``config.max_cells_per_subscriber`` cells,
    on the embedded engine."""
    observed = bound_ranked_cells(source_path, config, schema, secrets, book)
    return counts_over_domain(observed, config.max_cells_per_subscriber, schema, public_domain)


def noisy_counts_table(cell_counts: CellCounts, config: DpCountsConfig) -> tuple[pa.Table, dict]:
    """Draw the noise (spends ``config.counts_epsilon``) and post-process; the table and its public metadata."""
    epsilon = config.counts_epsilon
    scale = laplace_scale(config.sensitivity, epsilon)
    noisy = np.maximum(discrete_laplace(cell_counts.counts, scale), 0)
    keep = noisy >= (config.threshold or 0)
    table = cell_counts.cells.append_column(NOISY_COUNT, pa.array(noisy, pa.int64())).filter(pa.array(keep))
    public = {
        "table": "dp_counts",
        "config_id": config.id,
        "definition_hash": config.definition_hash(),
        "mechanism": MECHANISM,
        "privacy_unit": "subscriber",
        "epsilon": epsilon,
        "sensitivity_l1": config.sensitivity,
        "max_cells_per_subscriber": config.max_cells_per_subscriber,
        "scale": scale,
        "opendp_epsilon": float(opendp_measurement(scale).map(config.sensitivity)),
        "accuracy_95": discrete_laplace_half_width(scale),
        "accuracy_note": ("each published count is within accuracy_95 of the bounded true count with "
                          "probability >= 0.95 (exact discrete Laplace tail; clamping at 0 only shrinks errors)"),
        "expected_abs_error": discrete_laplace_mae(scale),
        "cells": len(noisy),
        "cells_published": int(keep.sum()),
        "threshold": config.threshold,
        "time_coarsen": config.time_coarsen,
        "domain": ("cross product of time values, provinces, apps and radios; category lists treated as "
                   "public; absent cells get noisy counts too"),
        "post_processing": "clamped at 0; cells with noisy count below threshold not published",
    }
    return table, public


# -- Elina's Q2: share of slow 5G downloads per app --------------------------------------------

@dataclass(frozen=True)
class SlowCounts:
    apps: tuple[str, ...]
    slow: np.ndarray
    """Bounded subscribers with a slow download on the radio, per app (truth, never published)."""
    on_radio: np.ndarray
    """Bounded subscribers with a download measurement on the radio, per app."""
    bound: int
    loss: dict = field(default_factory=dict)


SLOW_COLUMNS = ("on_radio", "slow", "first_pairs", "pairs", "rows", "rows_dropped")
"""The engine's per-app figures of Q2, besides the app: bounded subscribers with a download on the radio, those
with a slow one, pairs ranked first (one per subscriber), all (subscriber, app) pairs, their source rows, and the
source rows of the pairs dropped by the bound."""


def slow_ranked_apps(source_path, schema: Schema, secrets: Secrets, max_apps_per_subscriber: int,
                     slow_threshold: float, radio: str = FIVE_G) -> pa.Table:
    """One row per app of the source with its SLOW_COLUMNS, streamed by DuckDB from Parquet.

    The engine's part of ``slow_download_counts`` (core.spark.dp has the Spark one): (subscriber, app)
    pairs on ``radio`` with a download measurement, ranked per subscriber by SHA-256(key, subscriber, app).
    """
    bound = max_apps_per_subscriber
    with duck.connect() as connection:
        return connection.sql(
            f"WITH per AS (SELECT \"{schema.subscriber}\" AS s, \"{schema.app}\" AS app, "
            f"bool_or(\"{schema.download}\" <= ?) AS slow, count(*) AS n_rows FROM read_parquet(?) "
            f"WHERE \"{schema.radio}\" = ? AND \"{schema.download}\" IS NOT NULL GROUP BY ALL), "
            f"pairs AS (SELECT *, row_number() OVER (PARTITION BY s ORDER BY "
            f"sha256(concat_ws(chr(31), ?, s, app)), app) AS r FROM per) "
            f"SELECT a.app, count(p.s) FILTER (WHERE p.r <= ?) AS on_radio, "
            f"count(p.s) FILTER (WHERE p.r <= ? AND p.slow) AS slow, count(p.s) FILTER (WHERE p.r = 1) AS first_pairs, "
            f"count(p.s) AS pairs, coalesce(sum(p.n_rows), 0) AS rows, "
            f"coalesce(sum(p.n_rows) FILTER (WHERE p.r > ?), 0) AS rows_dropped "
            f"FROM (SELECT DISTINCT \"{schema.app}\" AS app FROM read_parquet(?)) a LEFT JOIN pairs p USING (app) "
            f"GROUP BY a.app",
            params=[float(slow_threshold), str(source_path), radio, bound_key(secrets, SLOW_PURPOSE),
                    bound, bound, bound, str(source_path)],
        ).to_arrow_table()


def slow_counts_of(per_app: pa.Table, max_apps_per_subscriber: int) -> SlowCounts:
    """The SlowCounts of an engine's ``slow_ranked_apps`` table (shared by the engines), apps in name order."""
    per_app = per_app.sort_by("app")
    column = {name: per_app.column(name).cast(pa.int64()).to_numpy() for name in SLOW_COLUMNS}
    total = {name: int(values.sum()) for name, values in column.items()}
    return SlowCounts(
        apps=tuple(per_app.column("app").to_pylist()),
        on_radio=column["on_radio"],
        slow=column["slow"],
        bound=max_apps_per_subscriber,
        loss={"subscribers_on_radio": total["first_pairs"], "subscriber_app_pairs": total["pairs"],
              "pairs_dropped_by_bound": total["pairs"] - total["on_radio"], "rows": total["rows"],
              "rows_dropped_by_bound": total["rows_dropped"]},
    )


def slow_download_counts(source_path, schema: Schema, secrets: Secrets, max_apps_per_subscriber: int,
                         slow_threshold: float, radio: str = FIVE_G) -> SlowCounts:
    """Per app: subscribers on ``radio`` with a download measurement, and those with one <= threshold.

    Each subscriber counts in at most ``max_apps_per_subscriber`` apps (smallest keyed hash of
    (seed, subscriber, app)), in both vectors, so the concatenated vector has L1 sensitivity
    2 x bound. The app list is every app of the source (treated as public), not only apps seen
    on the radio.
    """
    per_app = slow_ranked_apps(source_path, schema, secrets, max_apps_per_subscriber, slow_threshold, radio)
    return slow_counts_of(per_app, max_apps_per_subscriber)


MIN_SUBSCRIBERS_HALF_WIDTHS = 5


def _noisy_slow_table(counts: SlowCounts, epsilon: float, min_subscribers: int | None) -> tuple[pa.Table, dict]:
    sensitivity = 2 * counts.bound
    scale = laplace_scale(sensitivity, epsilon)
    if min_subscribers is None:
        min_subscribers = max(1, MIN_SUBSCRIBERS_HALF_WIDTHS * discrete_laplace_half_width(scale))
    noisy = np.maximum(discrete_laplace(np.concatenate([counts.slow, counts.on_radio]), scale), 0)
    slow, on_radio = noisy[: len(counts.apps)], noisy[len(counts.apps):]
    shares = [float(min(s, n) / n) if n >= min_subscribers else None for s, n in zip(slow, on_radio)]
    table = pa.table({
        "app": pa.array(counts.apps, pa.string()),
        "noisy_slow_subscribers": pa.array(slow, pa.int64()),
        "noisy_subscribers": pa.array(on_radio, pa.int64()),
        "share": pa.array(shares, pa.float64()),
    })
    public = {
        "table": "dp_slow_download_shares",
        "mechanism": MECHANISM,
        "privacy_unit": "subscriber",
        "epsilon": epsilon,
        "max_apps_per_subscriber": counts.bound,
        "sensitivity_l1": sensitivity,
        "scale": scale,
        "opendp_epsilon": float(opendp_measurement(scale).map(sensitivity)),
        "accuracy_95": discrete_laplace_half_width(scale),
        "apps": len(counts.apps),
        "min_subscribers": min_subscribers,
        "min_subscribers_rule": (f"{MIN_SUBSCRIBERS_HALF_WIDTHS} x accuracy_95 unless configured: a shown share's "
                                 "denominator is within 20% of its true value with probability >= 0.95"),
        "share_definition": ("noisy subscribers with a download <= threshold on the radio / noisy subscribers "
                             "with a download on the radio, per app; both clamped at 0, numerator at most the "
                             "denominator; unavailable (null) below min_subscribers"),
    }
    return table, public


def dp_slow_download_shares(source_path, schema: Schema, secrets: Secrets, epsilon: float,
                            max_cells_per_subscriber: int, slow_threshold: float, *, radio: str = FIVE_G,
                            min_subscribers: int | None = None) -> dict[str, float | None]:
    """Noisy share of subscribers with a slow ``radio`` download, per app (None: too few subscribers).

    ``max_cells_per_subscriber`` bounds the apps a subscriber counts in (1 is the best choice
    on the default source: the top six is right in about 98% of draws at epsilon 0.25, against
    about 83% with 4, because the noise scale grows with the bound and most 5G subscribers use
    one or two apps). ``min_subscribers`` None: 5 x the noise's 95% half-width.

    EVERY CALL DRAWS FRESH NOISE AND SPENDS ``epsilon``. Publish through
    ``publish_dp_slow_shares`` (ledger, once per period); call this directly only on data that
    is never released (tests, the lab).
    """
    counts = slow_download_counts(source_path, schema, secrets, max_cells_per_subscriber, slow_threshold, radio)
    table, _ = _noisy_slow_table(counts, epsilon, min_subscribers)
    return dict(zip(table.column("app").to_pylist(), table.column("share").to_pylist()))


def top_apps(shares: Mapping[str, float | None], n: int = 6) -> list[str]:
    """The ``n`` apps with the largest available share (ties by name)."""
    available = [(share, app) for app, share in shares.items() if share is not None]
    return [app for share, app in sorted(available, key=lambda x: (-x[0], x[1]))[:n]]


# -- the engine's part ------------------------------------------------------------------------

class Counting(Protocol):
    """The steps of the DP tables that read the source, on one engine. The noise, the tables, the ledger and the
    writes after them are shared, so both engines publish the same table from the same counts."""

    def cell_counts(self, source_path: str | os.PathLike, config: DpCountsConfig, schema: Schema, secrets: Secrets,
                    public_domain=None) -> CellCounts: ...

    def cells_per_subscriber(self, source_path: str | os.PathLike, config: DpCountsConfig,
                             schema: Schema) -> tuple[np.ndarray, int]: ...

    def slow_download_counts(self, source_path: str | os.PathLike, schema: Schema, secrets: Secrets,
                             max_apps_per_subscriber: int, slow_threshold: float) -> SlowCounts: ...


@dataclass(frozen=True)
class EmbeddedCounting:
    """The counting steps on DuckDB, in this process; what they count of a source is kept in ``book``."""

    book: DigestBook

    def cell_counts(self, source_path, config, schema, secrets, public_domain=None):
        return bounded_cell_counts(source_path, config, schema, secrets, self.book, public_domain)

    def cells_per_subscriber(self, source_path, config, schema):
        return bound_choice.cells_per_subscriber(source_path, config, schema, self.book)

    def slow_download_counts(self, source_path, schema, secrets, max_apps_per_subscriber, slow_threshold):
        return slow_download_counts(source_path, schema, secrets, max_apps_per_subscriber, slow_threshold)


# -- the once-per-period protocol -------------------------------------------------------------

@dataclass(frozen=True)
class DpOutcome:
    path: Path
    sha256: str
    reused: bool
    """True: the stored table was returned; no new draw and no new debit."""
    reservation: int
    """Ledger row of the publication (the stored one when reused)."""
    epsilon_spent: float
    """Debited by this call (0 when reused)."""
    metadata: dict
    """Public mechanism parameters (also stored in the file's footer)."""
    bounding: dict | None
    """Contribution-bounding loss: internal, not differentially private, not in the file."""
    budget: dict
    """Ledger status of the period after this call."""

    def to_metadata(self) -> dict:
        flat = {f"dp_{key}": value for key, value in self.metadata.items() if value is not None}
        flat.update({"sha256": self.sha256, "reused": self.reused, "ledger_reservation": self.reservation,
                     "epsilon_spent": self.epsilon_spent})
        flat.update({f"bounding_{key}": value for key, value in (self.bounding or {}).items()})
        flat.update({f"budget_{key}": value for key, value in self.budget.items()})
        return flat


def written_for(path: Path, token: str) -> bool:
    """Was the Parquet file at ``path`` written for the reservation ``token``? (Ledger.recover's check.)"""
    try:
        metadata = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowInvalid):
        return False
    return metadata.get(TOKEN_KEY) == token.encode()


def read_public_metadata(path: str | os.PathLike) -> dict:
    metadata = pq.read_schema(path).metadata or {}
    return json.loads(metadata[FOOTER_KEY]) if FOOTER_KEY in metadata else {}


def publish_once(*, ledger: Ledger, key: str, period: str, epsilon: float, out_path, now, republish: bool,
                 definition_hash: str, prepare: Callable[[], object],
                 draw: Callable[[object], tuple[pa.Table, dict]], bounding_of: Callable[[object], dict],
                 book: DigestBook) -> DpOutcome:
    """Draw and write one DP table of ``key`` for ``period`` once: the stored table when the ledger published these
    bytes (unless ``republish``), else ``epsilon`` reserved before the draw and settled when the file is in place.

    ``prepare`` (deterministic, no privacy cost) runs before the reservation; ``draw`` turns what it prepared
    into the table and its public metadata; ``bounding_of`` gives what the contribution bound dropped. ``book``
    keeps the table's SHA-256 for the steps that verify it next."""
    out_path = Path(out_path)
    period = str(period)
    ledger.recover(now, verify=written_for)
    if not republish:
        stored = ledger.latest_published(key, period)
        if stored is not None and out_path.is_file() and book.sha256(out_path) == stored["sha256"]:
            public = read_public_metadata(out_path)
            public["definition_matches"] = public.get("definition_hash") == definition_hash
            return DpOutcome(path=out_path, sha256=stored["sha256"], reused=True, reservation=stored["id"],
                             epsilon_spent=0.0, metadata=public, bounding=(stored["details"] or {}).get("bounding"),
                             budget=ledger.status(period, now))
    prepared = prepare()  # deterministic, no privacy cost: before the reservation, to keep it short
    token = uuid.uuid4().hex
    reservation = ledger.reserve(key, period, epsilon, now, out_path, token)  # BudgetExceeded: nothing written
    bounding = bounding_of(prepared)
    try:
        table, public = draw(prepared)
        public.update({"period": period, "ledger_key": key})
        footer = {FOOTER_KEY: json.dumps(public, sort_keys=True).encode(), TOKEN_KEY: token.encode()}
        table = table.replace_schema_metadata(footer)
        strings = [f.name for f in table.schema if pa.types.is_string(f.type)]
        with atomic_path(out_path) as temporary:
            pq.write_table(table, temporary, compression="snappy", use_dictionary=strings)
    except BaseException:
        if written_for(out_path, token):  # interrupted after the rename: the table is out, keep the debit
            ledger.complete(reservation, book.sha256(out_path), out_path, now, {"bounding": bounding})
        else:
            ledger.roll_back(reservation, now, note="the draw or the write failed; nothing published")
        raise
    digest = book.sha256(out_path, own_write=True)  # renamed into place by this very call: kept at once
    ledger.complete(reservation, digest, out_path, now, {"bounding": bounding})
    public["definition_matches"] = True
    return DpOutcome(path=out_path, sha256=digest, reused=False, reservation=reservation, epsilon_spent=float(epsilon),
                     metadata=public, bounding=bounding, budget=ledger.status(period, now))


def publish_dp_counts(
    source_path: str | os.PathLike,
    out_path: str | os.PathLike,
    config: DpCountsConfig,
    schema: Schema,
    secrets: Secrets,
    ledger: Ledger,
    period: str,
    *,
    republish: bool = False,
    now: dt.datetime | None = None,
    public_domain: Mapping[str, Sequence] | None = None,
    counting: Counting,
    book: DigestBook,
) -> DpOutcome:
    """Publish the period's noisy count table once, debiting ``config.counts_epsilon``.

    1. ``ledger.recover``: finish or roll back reservations orphaned by a crash.
    2. Without ``republish``: if the ledger holds a publication of (config.id, period) and
       ``out_path`` holds that file (same SHA-256), return it: no draw, no debit, ``reused``.
    3. Else reserve epsilon (atomic check against both caps; ``BudgetExceeded`` writes
       nothing), draw, write atomically, complete the reservation with the file's SHA-256.
    The Parquet columns are the schema's time, province, app and radio columns and ``noisy_count``.
    """
    return publish_once(
        ledger=ledger, key=config.id, period=period, epsilon=config.counts_epsilon, out_path=out_path, now=now,
        republish=republish, definition_hash=config.definition_hash(),
        prepare=lambda: counting.cell_counts(source_path, config, schema, secrets, public_domain),
        draw=lambda counts: noisy_counts_table(counts, config),
        bounding_of=lambda counts: counts.loss, book=book,
    )


def publish_dp_slow_shares(
    source_path: str | os.PathLike,
    out_path: str | os.PathLike,
    config: DpCountsConfig,
    schema: Schema,
    secrets: Secrets,
    ledger: Ledger,
    period: str,
    *,
    republish: bool = False,
    now: dt.datetime | None = None,
    counting: Counting,
    book: DigestBook,
) -> DpOutcome:
    """Elina's Q2 table (app, noisy slow and 5G subscriber counts, share), once per period.

    Debits ``config.slow_share_epsilon`` under the ledger key ``config.id + ".slow_5g"``; the
    bound is ``config.slow_max_apps_per_subscriber`` apps per subscriber (sensitivity 2 x bound).
    """
    if not config.slow_share_epsilon > 0:
        raise ConfigError(f"DP configuration {config.id!r}: slow_share_epsilon is 0, so it has no Q2 table")

    def draw(counts: SlowCounts):
        table, public = _noisy_slow_table(counts, config.slow_share_epsilon, config.slow_min_subscribers)
        public.update({"config_id": config.id, "definition_hash": config.definition_hash(),
                       "slow_threshold_kbps": config.slow_threshold_kbps, "radio": FIVE_G})
        return table, public

    return publish_once(
        ledger=ledger, key=config.slow_ledger_key, period=period, epsilon=config.slow_share_epsilon,
        out_path=out_path, now=now, republish=republish, definition_hash=config.definition_hash(),
        prepare=lambda: counting.slow_download_counts(source_path, schema, secrets,
                                                      config.slow_max_apps_per_subscriber, config.slow_threshold_kbps),
        draw=draw,
        bounding_of=lambda counts: counts.loss, book=book,
    )


def publish_dp_bound(
    source_path: str | os.PathLike,
    out_path: str | os.PathLike,
    config: DpCountsConfig,
    schema: Schema,
    ledger: Ledger,
    period: str,
    *,
    republish: bool = False,
    now: dt.datetime | None = None,
    counting: Counting,
    book: DigestBook,
) -> tuple[DpCountsConfig, DpOutcome]:
    """For ``max_cells_per_subscriber = "auto"``: the period's bound, from a DP histogram published once.

    Debits ``config.bound_epsilon`` under ``config.id + ".bound"`` (see ``dp.bound``); the noisy
    cells-per-subscriber histogram, the expected-error curve and the chosen bound are in the
    table's footer, so a re-run returns the same bound without a new draw. Returns the
    configuration with its bound resolved, and the publication.
    """
    if not config.auto_bound:
        raise ConfigError(f"DP configuration {config.id!r} has a configured bound; nothing to choose")

    def draw(prepared):
        histogram, cells = prepared
        noisy, public = bound_choice.noisy_histogram(histogram, config.bound_epsilon)
        curve = bound_choice.expected_total_error(noisy, cells, config.counts_epsilon)
        public.update({"table": "dp_cells_per_subscriber", "config_id": config.id,
                       "definition_hash": config.definition_hash(), "cells": cells,
                       "counts_epsilon": config.counts_epsilon, "chosen_bound": bound_choice.choose_bound(curve),
                       "curve": {str(b): v for b, v in curve.items()}})
        return bound_choice.histogram_table(noisy), public

    outcome = publish_once(
        ledger=ledger, key=config.bound_ledger_key, period=period, epsilon=config.bound_epsilon, out_path=out_path,
        now=now, republish=republish, definition_hash=config.definition_hash(),
        prepare=lambda: counting.cells_per_subscriber(source_path, config, schema),
        draw=draw, bounding_of=lambda prepared: {}, book=book,
    )
    return config.with_bound(outcome.metadata["chosen_bound"]), outcome
