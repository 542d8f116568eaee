"""A differentially private synthetic table (``kind = "dp_synthetic"``): every row drawn from a model whose only
contact with the source is a set of noisy marginals.

The mechanism is MST's (McKenna, Miklau and Sheldon 2021: measure marginals with Gaussian noise, pick a tree of
pairs by the exponential mechanism, fit a graphical model to the noisy marginals, sample it), with the structure
changed where MST loses what Elina asks: MST links the application and the radio to one measurement each, so every
(app, radio) group got the all-app distribution of the others (median rank-correlation change 0.29, one of six
slow-5G apps found, at epsilon 1 and at 4 alike). Here the (app, radio) pair is one attribute, G, and the
measured marginals are

* (G, hour) and (G, province): the cells, hour and province independent given G;
* (G, m) for every measurement m: each group's own distribution of each measurement;
* (m_i, m_j) for the pairs of a tree picked among the measurements, as MST picks it (the exponential mechanism on
  how far the pair's marginal is from the product of its two 1-way marginals).

The model (``mbi``, private-pgm's estimation engine: mirror descent over the junction tree of those cliques)
couples each tree pair within every group through the group's own 1-way marginals; rows are sampled from it along
that tree. Every marginal's noise is OpenDP's discrete Gaussian on integer counts and the selection OpenDP's noisy
max, each debited in zero-concentrated DP (rho) and composed; the whole is (epsilon, delta)-DP for one subscriber,
whose rows are bounded to ``max_rows_per_subscriber`` by a keyed hash. The categories (hours, provinces, apps,
radios) are the source's own values, treated as public as the DP counts treat them. OpenDP draws from the operating
system's CSPRNG (the floating-point attacks on seeded samplers are why), so a release is drawn once and published
through the budget ledger, as the DP counts are; the sampling of rows from the fitted model is seeded by the noise
seed.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core import duck
from dsh_assets.core.dp.ledger import Ledger
from dsh_assets.core.dp.publish import DpOutcome, publish_once
from dsh_assets.core.duck import sql_identifier
from dsh_assets.core.files import DigestBook
from dsh_assets.core.release.schema import Schema
from dsh_assets.core.release.synthetic_config import DpSyntheticConfig
from dsh_assets.core.secrets import Secrets

GROUP, HOUR, PROVINCE = "group", "hour", "province"
MECHANISM = ("MST-style synthetic table (mbi 2.0.0 mirror descent over the junction tree); OpenDP discrete Gaussian "
             "marginals and noisy-max selection, composed in zCDP")
BOUND_PURPOSE = b"dsh-dp-synthetic-bound\x00"
SAMPLE_PURPOSE = b"dsh-dp-synthetic-sample\x00"


@dataclass
class SyntheticResult:
    table: pa.Table
    """The synthetic rows: the hour, province, app, radio and every binned measurement, in cell order."""
    metadata: dict = field(default_factory=dict)
    """Public: the privacy accounting, the tree, the noise scales, the model's total. ``loss`` is the operator's
    (the bounding's true row counts, not DP)."""


def rho_of(epsilon: float, delta: float) -> float:
    """The largest zCDP rho whose (epsilon, delta) conversion (Canonne, Kamath and Steinke 2020, the one OpenDP's
    ``make_zCDP_to_approxDP`` takes) stays within epsilon at delta."""
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValueError(f"need epsilon > 0 and 0 < delta < 1, not {epsilon}, {delta}")
    low, high = 0.0, epsilon + 1.0
    for _ in range(200):
        middle = (low + high) / 2
        if delta_of(middle, epsilon) <= delta:
            low = middle
        else:
            high = middle
    return low


def delta_of(rho: float, epsilon: float) -> float:
    """delta of rho-zCDP at epsilon: the infimum over orders alpha > 1 of CKS's bound (by bisection on alpha)."""
    if rho <= 0:
        return 0.0
    low, high = 1.01, (epsilon + 1) / (2 * rho) + 2
    for _ in range(200):
        alpha = (low + high) / 2
        if (2 * alpha - 1) * rho - epsilon + math.log1p(-1.0 / alpha) < 0:
            low = alpha
        else:
            high = alpha
    alpha = (low + high) / 2
    log_bound = (alpha - 1) * (alpha * rho - epsilon) + alpha * math.log1p(-1 / alpha) - math.log(alpha - 1.0)
    return math.exp(min(log_bound, 0.0))


def bound_key(secrets: Secrets) -> str:
    return hashlib.sha256(BOUND_PURPOSE + secrets.noise_seed).hexdigest()


def sample_seed(secrets: Secrets, config_id: str, period: str) -> int:
    """The row sampler's seed: keyed, so the rows drawn from a published model cannot be replayed by others."""
    digest = hashlib.sha256(SAMPLE_PURPOSE + config_id.encode() + b"\x00" + period.encode() + b"\x00"
                            + secrets.noise_seed).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def bounded_rows(source_path, schema: Schema, measurements: list[str], bound: int, secrets: Secrets,
                 with_subscriber: bool = False) -> pa.Table:
    """At most ``bound`` rows per subscriber, chosen by SHA-256(key, subscriber, row id), with the hour as the
    release has it; the subscriber itself only ``with_subscriber`` (an evaluation's halves), never to the model."""
    kept, subscriber = (schema.subscriber,) if with_subscriber else (), sql_identifier(schema.subscriber)
    columns = ", ".join(sql_identifier(c) for c in (*kept, schema.province, schema.app, schema.radio, *measurements))
    with duck.connect() as connection:
        return connection.sql(
            f"SELECT time_bucket(INTERVAL 1 hour, {sql_identifier(schema.time)}) AS {sql_identifier(schema.time)}, "
            f"{columns} FROM read_parquet(?) QUALIFY row_number() OVER (PARTITION BY {subscriber} "
            f"ORDER BY sha256(concat_ws(chr(31), ?, {subscriber}, row_id::VARCHAR))) <= ? "
            f"ORDER BY row_id",
            params=[str(source_path), bound_key(secrets), bound],
        ).to_arrow_table()


def _categories(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """The observed values in order and each row's index among them."""
    values = np.asarray(column.to_numpy(zero_copy_only=False))
    levels, codes = np.unique(values, return_inverse=True)
    return levels, codes.astype(np.int64)


class _Noise:
    """OpenDP's discrete Gaussian and noisy max, each debit kept (rho at the subscriber's sensitivity)."""

    def __init__(self, sensitivity: int):
        import opendp.prelude as dp

        dp.enable_features("contrib")
        self.dp, self.sensitivity, self.debits = dp, sensitivity, []

    def gaussian(self, counts: np.ndarray, rho: float, what: str) -> tuple[np.ndarray, float]:
        """counts + discrete Gaussian noise whose rho at the sensitivity is at most ``rho``; and its scale."""
        dp = self.dp
        space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64")
        scale = self.sensitivity / math.sqrt(2 * rho)
        measurement = dp.m.make_gaussian(*space, scale=scale)
        while measurement.map(self.sensitivity) > rho:
            scale = math.nextafter(scale, math.inf)
            measurement = dp.m.make_gaussian(*space, scale=scale)
        self.debits.append((what, float(measurement.map(self.sensitivity))))
        vector = np.require(np.asarray(counts, dtype=np.int64).ravel(), requirements=["C_CONTIGUOUS", "WRITEABLE"])
        return np.asarray(measurement(vector), dtype=np.float64).reshape(np.shape(counts)), scale

    def noisy_max(self, scores: list[float], rho: float, what: str) -> int:
        """The index of the noisy largest score; a score's sensitivity is the subscriber's row bound."""
        dp = self.dp
        space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)

        def make(scale):
            return dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(), scale=scale)

        measurement = make(dp.binary_search_param(make, d_in=float(self.sensitivity), d_out=rho))
        self.debits.append((what, float(measurement.map(float(self.sensitivity)))))
        return int(measurement([float(s) for s in scores]))

    @property
    def rho(self) -> float:
        return float(sum(r for _, r in self.debits))


def _marginal(codes: list[np.ndarray], sizes: list[int]) -> np.ndarray:
    """Counts over the cross product of the attributes (row-major, as mbi lays a clique out)."""
    flat = np.ravel_multi_index(codes, sizes)
    return np.bincount(flat, minlength=int(np.prod(sizes))).astype(np.int64)


def synthesize(rows: pa.Table, schema: Schema, measurements: list[str], spec: DpSyntheticConfig,
               seed: int) -> SyntheticResult:
    """The DP synthetic table of the bounded ``rows`` (``bounded_rows``)."""
    import jax

    jax.config.update("jax_enable_x64", True)  # mbi's advice above 100K rows: float32 stalls the fit
    jax.config.update("jax_enable_compilation_cache", False)  # and its many small programs fill a cache
    from mbi import Domain, LinearMeasurement
    from mbi.estimation import MirrorDescent, minimum_variance_unbiased_total

    apps, app_codes = _categories(rows.column(schema.app))
    radios, radio_codes = _categories(rows.column(schema.radio))
    hours, hour_codes = _categories(rows.column(schema.time).cast(pa.int64()))
    provinces, province_codes = _categories(rows.column(schema.province))
    codes = {GROUP: app_codes * len(radios) + radio_codes, HOUR: hour_codes, PROVINCE: province_codes}
    sizes = {GROUP: len(apps) * len(radios), HOUR: len(hours), PROVINCE: len(provinces)}
    for m in measurements:
        codes[m] = spec.bins_of(m).codes(rows.column(m).to_numpy(zero_copy_only=False))
        sizes[m] = spec.bins_of(m).size
    noise = _Noise(spec.max_rows_per_subscriber)
    rho = rho_of(spec.epsilon, spec.delta)
    pairs = list(itertools.combinations(measurements, 2))
    tree_edges = max(len(measurements) - 1, 0)
    marginals = 2 + len(measurements) + tree_edges
    rho_selection = spec.selection_share * rho if tree_edges else 0.0
    rho_marginal = (rho - rho_selection) / marginals

    def measured(clique: tuple[str, ...]):
        counts = _marginal([codes[a] for a in clique], [sizes[a] for a in clique])
        noisy, scale = noise.gaussian(counts, rho_marginal, "x".join(clique))
        return LinearMeasurement(noisy, clique, stddev=scale), noisy

    first = [measured((GROUP, HOUR))[0], measured((GROUP, PROVINCE))[0]]
    one_way = {}
    for m in measurements:
        measurement, noisy = measured((GROUP, m))
        first.append(measurement)
        one_way[m] = np.clip(noisy.reshape(sizes[GROUP], sizes[m]).sum(axis=0), 0, None)
    chosen, component = [], {m: m for m in measurements}

    def root(m):
        while component[m] != m:
            m = component[m]
        return m

    for step in range(tree_edges):  # Kruskal's order, each edge by the noisy max
        open_pairs = [p for p in pairs if root(p[0]) != root(p[1])]
        scores = []
        for a, b in open_pairs:
            expected = np.outer(one_way[a], one_way[b]).ravel() / max(one_way[a].sum(), 1.0)
            scores.append(float(np.abs(_marginal([codes[a], codes[b]], [sizes[a], sizes[b]]) - expected).sum()))
        a, b = open_pairs[noise.noisy_max(scores, rho_selection / tree_edges, f"select{step}")]
        chosen.append((a, b))
        component[root(a)] = root(b)
    second = [measured(pair)[0] for pair in chosen]
    attributes = [GROUP, HOUR, PROVINCE, *measurements]
    domain = Domain(attributes, [sizes[a] for a in attributes])
    known = minimum_variance_unbiased_total(first + second)
    model = MirrorDescent().estimate(domain, first + second, known_total=known, iters=spec.iterations)
    count = max(int(round(float(known))), 0)
    rng = np.random.default_rng(seed)
    drawn = _drawn_rows(model, measurements, chosen, count, rng)
    table = pa.table({
        schema.time: pa.array(hours[drawn[HOUR]], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        schema.province: pa.array(provinces[drawn[PROVINCE]], pa.string()),
        schema.app: pa.array(apps[drawn[GROUP] // len(radios)], pa.string()),
        schema.radio: pa.array(radios[drawn[GROUP] % len(radios)], pa.string()),
        **{m: pa.array(spec.bins_of(m).values(drawn[m], rng.random(count)), pa.float64(), from_pandas=True)
           for m in measurements},
    })
    table = table.sort_by([(c, "ascending") for c in (schema.time, schema.province, schema.app, schema.radio)])
    spent = noise.rho
    return SyntheticResult(table, {
        "epsilon": spec.epsilon, "delta": spec.delta, "rho": rho, "rho_spent": spent,
        "epsilon_at_delta": epsilon_of(spent, spec.delta),
        "max_rows_per_subscriber": spec.max_rows_per_subscriber,
        "marginal_scale": noise.sensitivity / math.sqrt(2 * rho_marginal),
        "tree": [list(pair) for pair in chosen], "rows_released": count,
        "loss": {"rows_fitted": rows.num_rows},
    })


def _drawn_rows(model, measurements: list[str], tree: list[tuple[str, str]], count: int,
                rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``count`` rows sampled from the fitted model, exactly, along its junction tree: the group from its marginal;
    the hour, the province and the tree's first measurement given the group; every other measurement given the
    group and its parent in the tree. One uniform a row and attribute, in that fixed order (mbi's own sampler
    compiles a program per column: 26 s of 38 on 6,000 rows)."""
    from mbi import junction_tree, marginal_oracles

    tree_of_cliques, _ = junction_tree.make_junction_tree(model.domain, [tuple(c) for c in model.cliques])
    cliques = list(tree_of_cliques.nodes)
    found = marginal_oracles.message_passing_stable(model.potentials.expand(cliques), model.total)
    tables = {tuple(f.domain.attributes): np.asarray(f.values, dtype=np.float64) for f in found.tables.values()}

    def marginal_of(attributes: list[str]) -> np.ndarray:
        """The marginal over ``attributes`` (axes in that order), summed from a clique of the junction tree."""
        clique = next(c for c in tables if set(attributes) <= set(c))
        kept = np.sum(tables[clique], axis=tuple(i for i, a in enumerate(clique) if a not in attributes))
        left = [a for a in clique if a in attributes]
        return np.transpose(kept, [left.index(a) for a in attributes])

    drawn = {GROUP: _given(marginal_of([GROUP])[None, :], np.zeros(count, dtype=np.int64), rng)}
    for attribute in (HOUR, PROVINCE, *measurements[:1]):
        drawn[attribute] = _given(marginal_of([GROUP, attribute]), drawn[GROUP], rng)
    neighbours = {m: [] for m in measurements}
    for a, b in tree:
        neighbours[a].append(b)
        neighbours[b].append(a)
    queue = list(measurements[:1])
    while queue:
        parent = queue.pop(0)
        for child in (c for c in neighbours[parent] if c not in drawn):
            table = marginal_of([GROUP, parent, child])
            rows_of = drawn[GROUP] * table.shape[1] + drawn[parent]
            drawn[child] = _given(table.reshape(-1, table.shape[2]), rows_of, rng)
            queue.append(child)
    return drawn


def _given(weights: np.ndarray, parent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A value per row drawn from the row of ``weights`` (unnormalised, one row per parent value) its parent
    names: the inverse of the cumulative weights at one uniform a row."""
    cumulative = np.cumsum(np.clip(weights, 0, None), axis=1)
    uniform = rng.random(len(parent)) * cumulative[parent, -1]
    drawn = np.empty(len(parent), dtype=np.int64)
    order = np.argsort(parent, kind="stable")
    bounds = np.searchsorted(parent[order], np.arange(len(weights) + 1))
    for value in np.flatnonzero(np.diff(bounds)):
        rows = order[bounds[value]:bounds[value + 1]]
        drawn[rows] = np.searchsorted(cumulative[value], uniform[rows], side="right")
    return np.minimum(drawn, weights.shape[1] - 1)


def epsilon_of(rho: float, delta: float) -> float:
    """The smallest epsilon whose delta at ``rho`` is within ``delta``."""
    low, high = 0.0, 1.0
    while delta_of(rho, high) > delta:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        if delta_of(rho, middle) > delta:
            low = middle
        else:
            high = middle
    return high


def publish_dp_synthetic(source_path, out_path, config: DpSyntheticConfig, schema: Schema, secrets: Secrets,
                         ledger: Ledger, period: str, *, republish: bool = False, now=None,
                         book: DigestBook) -> DpOutcome:
    """Draw the period's synthetic table once through the ledger (``publish_once``: the stored table when the ledger
    holds these bytes, else ``config.epsilon`` reserved, drawn, written atomically, settled); its public metadata
    (the accounting, the tree, the noise scale) in the file's footer."""
    measurements = list(schema.measurements)

    def draw(rows: pa.Table) -> tuple[pa.Table, dict]:
        result = synthesize(rows, schema, measurements, config, sample_seed(secrets, config.id, period))
        public = {key: value for key, value in result.metadata.items() if key != "loss"}
        public.update({"config_id": config.id, "definition_hash": config.definition_hash(),
                       "mechanism": MECHANISM})
        return result.table, public

    source_rows = pq.ParquetFile(source_path).metadata.num_rows
    return publish_once(
        ledger=ledger, key=config.id, period=period, epsilon=config.epsilon, out_path=out_path, now=now,
        republish=republish, definition_hash=config.definition_hash(),
        prepare=lambda: bounded_rows(source_path, schema, measurements, config.max_rows_per_subscriber, secrets),
        draw=draw, bounding_of=lambda rows: {"rows": source_rows, "rows_fitted": rows.num_rows,
                                             "rows_dropped_by_bound": source_rows - rows.num_rows},
        book=book)
