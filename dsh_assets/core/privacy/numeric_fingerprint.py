"""Numeric fingerprint: find a known observation in the release by its categorical fields and measurements.

Sampled (seeded) targets drawn from every source row; a control of records the release does not
contain estimates how often the attack "finds" someone who is not there (the baseline).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core import duck
from dsh_assets.core.duck import sql_identifier
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.privacy.stats import AttackResult, SampledRate, plain_values
from dsh_assets.core.release.schema import ROW_ID
from dsh_assets.core.release.cells import cell_expressions
from dsh_assets.core.release.transform import released_schema

DEFAULT_SAMPLE_SIZE = 1_500
DEFAULT_SAMPLE_SEED = 1_500
"""Not a secret: it picks which source rows are targets, it does not touch the release's noise."""
TOLERANCE = 0.01
"""The attacker knows each measurement to +-1%: a released value matches in [raw * 0.99, raw * 1.01]."""
CONTROL_POOL_FACTOR = 20
"""Donors of control measurements come from a uniform pool of this many source rows per target."""

# The band join: released rows are bucketed by log(value) on one measurement, buckets as wide as
# the tolerance band, so a target meets only the rows of its cell in three or four nearby buckets
# (its band's and one either side, against rounding), never the whole cell. The exact +-1% test on
# every measurement is applied after the join.
_BUCKET_WIDTH = math.log(1.0 + TOLERANCE) - math.log(1.0 - TOLERANCE)
_NULL_BUCKET = -(2**62)
_ZERO_BUCKET = -(2**62) + 1

ASSUMPTIONS = (
    "Numeric fingerprint (sampled; prosecutor model, perfect auxiliary knowledge). Targets are a "
    "seeded uniform sample of ALL source rows, withheld rows included (a withheld row has no true "
    "row in the release, so it can only fail). For a target the attacker knows the categorical "
    "fields as the release shows them (time window as coarsened, province, application as "
    "released, radio type, and the station where released) and every released measurement to "
    "+-1% (a released value matches when it lies in [raw * 0.99, raw * 1.01]; a missing raw value "
    "matches a missing released value); measurements the release drops are not used, and the "
    "attacker does not know the noise seed. Candidates are the released rows with equal "
    "categorical fields and every measurement within tolerance. Reported: the share of targets "
    "with exactly one candidate (unique) and, from evaluator truth, the share whose single "
    "candidate is the target's own row (correct), each with a 95% Wilson interval. Control "
    "(baseline), anonymeter-style: as many records the release does not contain, each made of a "
    "sampled target's categorical fields and the complete measurement vector of a random source "
    "row with the same application and radio type but a different released cell; any unique "
    "match of a control is a false positive, and their share is the baseline. Risk = (correct - "
    "baseline) / (1 - baseline), clipped to [0, 1]. Why not a donor from the same cell: two rows "
    "of one cell have identical released categorical fields, so such a record is the donor's own "
    "released row, which the attack would rightly find; the baseline would then equal the "
    "attack's success and hide all risk. A donor from another cell keeps a real, plausible "
    "measurement vector (same application and radio) that no row of the target's cell carries, so "
    "only coincidence can match it. Donors come from a uniform pool of "
    f"{CONTROL_POOL_FACTOR} source rows per target; "
    "where the pool holds no row of the same application and radio in another cell, any pool row "
    "of another cell is used (counted as fallbacks). Unique is not identified: naming the person "
    "still needs outside knowledge of the observation."
)


@dataclass(frozen=True)
class FingerprintResult(AttackResult):
    """Sampled fingerprint rates (counts only; no row or subscriber id is kept)."""

    unique: SampledRate
    """Targets with exactly one candidate; baseline = controls with exactly one candidate."""
    correct: SampledRate
    """Targets whose single candidate is their own row; same baseline."""
    sample_size: int
    sample_seed: int
    targets_withheld: int
    control_fallbacks: int
    control_dropped: int
    pool_size: int
    band_column: str | None
    measurements: tuple[str, ...]
    quasi_identifiers: tuple[str, ...]

    @property
    def warning(self) -> str | None:
        """anonymeter's warning: the baseline is as good as the attack, so its success is no evidence."""
        if not self.correct.baseline_as_good_as_attack:
            return None
        low = self.correct.interval[0]
        return (f"Attack is as good or worse than the baseline: the control's false-positive rate "
                f"{self.correct.baseline:.4f} is at or above the lower 95% bound {low:.4f} of the "
                f"correct-match rate, so this sample shows no fingerprinting above chance.")

    def warnings(self) -> list[str]:
        return [] if self.warning is None else [self.warning]

    def figures(self) -> dict:
        return {
            "fingerprint_unique": float(self.unique.rate),
            "fingerprint_unique_ci": [float(x) for x in self.unique.interval],
            "fingerprint_correct": float(self.correct.rate),
            "fingerprint_correct_ci": [float(x) for x in self.correct.interval],
            "fingerprint_correct_baseline": float(self.correct.baseline),
            "fingerprint_correct_risk": float(self.correct.risk),
            "fingerprint_n": int(self.correct.trials),
        }

    def metadata(self) -> dict:
        return {
            **self.figures(),
            "fingerprint_unique_detail": plain_values(self.unique.to_dict()),
            "fingerprint_correct_detail": plain_values(self.correct.to_dict()),
            "sample_size_requested": int(self.sample_size),
            "sample_seed": int(self.sample_seed),
            "targets_withheld": int(self.targets_withheld),
            "control_n": int(self.correct.baseline_trials),
            "control_fallbacks": int(self.control_fallbacks),
            "control_dropped": int(self.control_dropped),
            "control_pool_size": int(self.pool_size),
            "tolerance": TOLERANCE,
            "band_column": self.band_column or "",
            "measurements_used": list(self.measurements),
            "quasi_identifiers": list(self.quasi_identifiers),
            "assumptions": ASSUMPTIONS,
            **({"warning": self.warning} if self.warning else {}),
        }


def draw_targets(rows: int, sample_size: int, seed: int) -> np.ndarray:
    """The sampled target row ids (sorted): a uniform sample without replacement of all source rows."""
    return _draw(np.random.default_rng(seed), rows, sample_size)


def _draw(rng: np.random.Generator, rows: int, sample_size: int) -> np.ndarray:
    return np.sort(rng.choice(rows, size=min(sample_size, rows), replace=False)).astype(np.int64)


def _choose_donors(rng, targets, pool, cell_of, group_of):
    """For each target, a pool row of the same group (application, radio) in another cell.

    Returns (probe target rows, donor rows, fallbacks, dropped).
    """
    pool_cells = cell_of(pool)
    pool_groups = group_of(pool)
    by_group: dict[int, np.ndarray] = {}
    order = np.argsort(pool_groups, kind="stable")
    groups, starts = np.unique(pool_groups[order], return_index=True)
    for group, chunk in zip(groups, np.split(order, starts[1:])):
        by_group[int(group)] = chunk
    target_cells, target_groups = cell_of(targets), group_of(targets)
    kept, donors, fallbacks, dropped = [], [], 0, 0
    for target, cell, group in zip(targets, target_cells, target_groups):
        same_group = by_group.get(int(group), np.empty(0, dtype=np.int64))
        choices = same_group[pool_cells[same_group] != cell]
        if len(choices) == 0:
            choices = np.flatnonzero(pool_cells != cell)
            if len(choices) == 0:  # every pooled row is in the target's cell: no control record
                dropped += 1
                continue
            fallbacks += 1
        kept.append(target)
        donors.append(pool[choices[rng.integers(len(choices))]])
    return np.array(kept, dtype=np.int64), np.array(donors, dtype=np.int64), fallbacks, dropped


def _checked_source_rows(release: ReleaseUnderTest) -> int:
    """The source's row count, once the release file and the plan agree on what is kept."""
    source_rows = pq.ParquetFile(release.source_path).metadata.num_rows
    released_rows = pq.ParquetFile(release.released_path).metadata.num_rows
    kept = int(np.count_nonzero(release.keep))
    if len(release.keep) != source_rows or kept != released_rows:
        raise ValueError(f"{release.released_path}: {released_rows} rows of {source_rows} source rows, "
                         f"the plan keeps {kept} of {len(release.keep)}")
    return source_rows


def _fetch_drawn(connection, source_path, row_ids: np.ndarray, select: list[str]) -> None:
    """The temporary table ``drawn``: the source rows ``row_ids`` (targets and the control pool), as ``select``
    shows them."""
    connection.register("wanted", pa.table({"row_id": row_ids}))
    columns = "".join(f", {expression}" for expression in select)
    connection.execute(f"CREATE TEMP TABLE drawn AS SELECT {ROW_ID} AS row_id{columns} "
                       f"FROM read_parquet(?) WHERE {ROW_ID} IN (SELECT row_id FROM wanted)", [str(source_path)])


def _drawn_codes(connection, cell_columns: list[str], group_columns: list[str]):
    """Lookups from drawn row ids to a number of their released cell and of their (app, radio) group."""
    cell_keys, group_keys = ", ".join(cell_columns) or "NULL", ", ".join(group_columns) or "NULL"
    codes = connection.execute(
        f"SELECT row_id, dense_rank() OVER (ORDER BY {cell_keys}) AS cell, "
        f"dense_rank() OVER (ORDER BY {group_keys}) AS grp FROM drawn ORDER BY row_id"
    ).fetchnumpy()
    drawn_ids = codes["row_id"].astype(np.int64)

    def lookup(name):
        values = codes[name].astype(np.int64)
        return lambda rows: values[np.searchsorted(drawn_ids, rows)]

    return lookup("cell"), lookup("grp")


def _make_probes(connection, cat_rows: np.ndarray, value_rows: np.ndarray, q: list[str], m: list[str]) -> None:
    """The temporary table ``probes``: probe i has the categorical fields of drawn row ``cat_rows[i]`` and the
    measurements of ``value_rows[i]`` (a target's own, or a control's donor's)."""
    connection.register("probe_map", pa.table({"probe": np.arange(len(cat_rows), dtype=np.int64),
                                               "cat_row": cat_rows, "value_row": value_rows}))
    connection.execute(
        "CREATE TEMP TABLE probes AS SELECT p.probe"
        + "".join(f", c.{a}" for a in q) + "".join(f", v.{a}" for a in m)
        + " FROM probe_map p JOIN drawn c ON c.row_id = p.cat_row JOIN drawn v ON v.row_id = p.value_row"
    )


def _per_probe(candidates: dict, probes: int) -> tuple[np.ndarray, np.ndarray]:
    """Per probe, its number of candidate released rows and the position of one (-1 where it has none)."""
    n_candidates = np.zeros(probes, dtype=np.int64)
    position = np.full(probes, -1, dtype=np.int64)
    probe_ids = candidates["probe"].astype(np.int64)
    n_candidates[probe_ids] = candidates["n"].astype(np.int64)
    position[probe_ids] = candidates["pos"].astype(np.int64)
    return n_candidates, position


def evaluate(release: ReleaseUnderTest, sample_size: int = DEFAULT_SAMPLE_SIZE,
             sample_seed: int = DEFAULT_SAMPLE_SEED) -> FingerprintResult:
    """Run the fingerprint attack on ``sample_size`` seeded targets and as many control records.

    Memory is bounded by the sample: DuckDB streams the source (to fetch the sampled rows) and the
    release (probing a hash table of the targets on categorical fields plus a log-bucket of one
    measurement); nothing per source row is held in Python except the release's keep mask.
    """
    if sample_size < 1:
        raise ValueError(f"sample_size must be at least 1, not {sample_size}")
    schema, config = release.schema, release.config
    source_rows = _checked_source_rows(release)
    qis = list(config.released_qis(schema))
    released_names = set(released_schema(config, schema).names)
    measurements = [m for m in schema.measurements if m in released_names]
    expression = dict(zip(schema.categorical_qis, cell_expressions(config, schema)))
    expression[schema.station] = sql_identifier(schema.station)
    group_columns = [q for q in qis if q in (schema.app, schema.radio)]

    rng = np.random.default_rng(sample_seed)
    targets = _draw(rng, source_rows, sample_size)
    pool = rng.integers(0, source_rows, size=CONTROL_POOL_FACTOR * len(targets)).astype(np.int64)

    q = [f"__q{i}" for i in range(len(qis))]
    m = [f"__m{i}" for i in range(len(measurements))]
    with duck.connect() as connection:
        _fetch_drawn(connection, release.source_path, np.union1d(targets, pool),
                     [f"{expression[c]} AS {a}" for c, a in zip(qis, q)]
                     + [f"{sql_identifier(c)}::DOUBLE AS {a}" for c, a in zip(measurements, m)])
        cell_of, group_of = _drawn_codes(connection, q, [a for c, a in zip(qis, q) if c in group_columns])
        control_targets, donors, fallbacks, dropped = _choose_donors(rng, targets, pool, cell_of, group_of)
        _make_probes(connection, np.concatenate([targets, control_targets]), np.concatenate([targets, donors]), q, m)
        band = _band_column(connection, measurements, m)
        candidates = _candidates(connection, release.released_path, qis, q, measurements, m, band)
    n_candidates, position = _per_probe(candidates, len(targets) + len(donors))
    n_targets, n_controls = len(targets), len(donors)
    unique = n_candidates[:n_targets] == 1
    # Correct: the single candidate is the target's own released row (its source row is the target),
    # i.e. the target is released and the candidate sits at the target's position in the release.
    correct = unique & release.keep[targets] & (position[:n_targets] == release.positions_of(targets))
    target_unique, target_correct = int(unique.sum()), int(correct.sum())
    control_unique = int((n_candidates[n_targets:] == 1).sum())
    return FingerprintResult(
        unique=SampledRate(target_unique, n_targets, control_unique, n_controls),
        correct=SampledRate(target_correct, n_targets, control_unique, n_controls),
        sample_size=sample_size,
        sample_seed=sample_seed,
        targets_withheld=int((~release.keep[targets]).sum()),
        control_fallbacks=fallbacks,
        control_dropped=dropped,
        pool_size=len(pool),
        band_column=None if band is None else measurements[band],
        measurements=tuple(measurements),
        quasi_identifiers=tuple(qis),
    )


def _band_column(connection, measurements, m) -> int | None:
    """Index of the measurement with the most distinct positive values among the probes (the band)."""
    if not measurements:
        return None
    counts = connection.execute(
        "SELECT " + ", ".join(f"count(DISTINCT {a}) FILTER (WHERE {a} > 0)" for a in m) + " FROM probes"
    ).fetchall()[0]
    return int(np.argmax(counts))


def _candidates(connection, released_path, qis, q, measurements, m, band) -> dict:
    """Per probe with at least one candidate: the number of candidates and the first one's file position."""
    low, high = repr(1.0 - TOLERANCE), repr(1.0 + TOLERANCE)
    width = repr(_BUCKET_WIDTH)
    if band is None:
        probe_bucket = released_bucket = "0"
    else:
        b = m[band]
        probe_bucket = (
            f"unnest(CASE WHEN {b} IS NULL THEN [{_NULL_BUCKET}] WHEN {b} <= 0 THEN [{_ZERO_BUCKET}] "
            f"ELSE range(floor(ln({b} * {low}) / {width})::BIGINT - 1, "
            f"floor(ln({b} * {high}) / {width})::BIGINT + 2) END)"
        )
        column = sql_identifier(measurements[band])
        released_bucket = (
            f"CASE WHEN {column} IS NULL THEN {_NULL_BUCKET} WHEN {column} <= 0 THEN {_ZERO_BUCKET} "
            f"ELSE floor(ln({column}) / {width})::BIGINT END"
        )
    bounds = "".join(f", {a} IS NULL AS {a}_null, {a} * {low} AS {a}_lo, {a} * {high} AS {a}_hi" for a in m)
    connection.execute(
        f"CREATE TEMP TABLE probe_keys AS SELECT probe{''.join(', ' + a for a in q)}{bounds}, "
        f"{probe_bucket} AS __bucket FROM probes"
    )
    released_columns = "".join(f', "{c}" AS {a}' for c, a in zip(qis, q)) + "".join(
        f', "{c}"::DOUBLE AS {a}' for c, a in zip(measurements, m))
    on = " AND ".join([f"k.{a} = r.{a}" for a in q] + ["k.__bucket = r.__bucket"])
    within = " AND ".join(
        f"((k.{a}_null AND r.{a} IS NULL) OR (r.{a} BETWEEN k.{a}_lo AND k.{a}_hi))" for a in m) or "true"
    return connection.execute(
        f"SELECT k.probe, count(*) AS n, min(r.file_row_number) AS pos FROM probe_keys k "
        f"JOIN (SELECT file_row_number{released_columns}, {released_bucket} AS __bucket "
        f"FROM read_parquet(?, file_row_number = true)) r ON {on} "
        f"WHERE {within} GROUP BY k.probe",
        [str(released_path)],
    ).fetchnumpy()
