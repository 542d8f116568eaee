"""Informed match: an attacker who knows the mechanism finds a session's row from a few of its measurements.

The strongest attacker the project tries (Kerckhoffs): it has read the code and the configuration
file, so it knows every operation and parameter of the release, but none of its secrets (noise
seed, alias key, permutation keys). For a target session it knows the released categorical fields
and the values of one knowledge set of measurements, as a phone's speed test or an app's log records
them, and ranks the rows of the target's released cell by the mechanism's likelihood.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core import duck
from dsh_assets.core.duck import sql_identifier, sql_literal
from dsh_assets.core.privacy.attacker import AttackerModel
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.privacy.stats import FULL, LIGHT, AttackResult, SampledRate, plain_values
from dsh_assets.core.release.schema import ROW_ID

LAPLACE = "multiplicative Laplace"
EQUALITY = "equality"
NEAREST = "nearest neighbour in log space"
EPS = 1e-6
"""Added before the logarithm of the nearest-neighbour distance, so that a zero has a finite log."""
_BATCH_ROWS = 1 << 17

ASSUMPTIONS = (
    "Informed match (sampled; the attacker knows the mechanism). The attacker has read the code and the "
    "configuration file: it knows every operation and parameter of the release (noise scale, k, coarsening, "
    "grouping, and any operation that moves or blurs values), but none of the secrets (noise seed, alias key, "
    "permutation keys). Targets are a seeded uniform sample of RELEASED sessions (a withheld session has no row "
    "to find; the withheld share is reported apart). For a target the attacker knows its released categorical "
    "fields (time as coarsened, province, application as released, radio type, and the station where released) "
    "and the values of one declared knowledge set of its measurements: exact, or each within a declared "
    "relative error (the known value is the true one times 1 + e, e uniform in [-error, error], seeded). "
    "Candidates are the released rows of the target's cell. The attacker ranks them by the mechanism's "
    "likelihood of the known values and picks the most likely, ties at random (a seeded pseudo-random order). "
    "Likelihoods: multiplicative Laplace noise exp(Laplace(0, b)) clipped to [0, column max] gives, per known "
    "measurement, the Laplace density of ln(released) - ln(known) (ln(2b) + |log ratio| / b), or, for a value "
    "at the released column's maximum (the clip bound the release reveals), the probability that the noise "
    "pushed the value to it; with a knowledge error the true log value is uniform over the known one's band "
    "and both are averaged over it (closed forms). Zeros stay zero and nulls stay null under noise, so a "
    "mismatch there rules a row out. Without noise the likelihood is equality (within the band of a knowledge "
    "error). Where an operation moves values between rows or replaces them by group statistics, no row-level "
    "likelihood exists and the attacker takes the nearest row in log space (sum of |ln(released + 1e-6) - "
    "ln(known + 1e-6)|, nulls skipped); the metadata names which rule was used. Known measurements the release "
    "drops give no information. Success, from evaluator truth: what the attacker wants is the target's values "
    "of the released measurements it did not know, so a target scores the share of those whose value in the "
    "picked row is the target's own (where rows keep their values together: 1 for the target's own row, 0 "
    "otherwise; where an operation moves values, the truth follows each value to the row that holds it; a "
    "value replaced by a group statistic stands for its own row). Baseline: the expected score of a uniformly "
    "random row of the cell, from the same truth (1 / cell size where rows keep their values together). "
    "Risk = (correct - baseline) / (1 - baseline), clipped to [0, 1]; the 95% Wilson interval is taken at the "
    "mean score (conservative for scores in [0, 1], whose variance is at most p(1 - p))."
)


@dataclass(frozen=True)
class KnowledgeOutcome:
    """What one knowledge set gives the attacker, over the sampled targets."""

    known: tuple[str, ...]
    used: tuple[str, ...]
    """The known measurements the release holds (the others give no information)."""
    scored: tuple[str, ...]
    """The released measurements the attacker did not know: what a target's score is the share of."""
    correct: SampledRate
    """Sum of the targets' scores over the targets; baseline: the sum of their random-pick expectations."""

    def entry(self, knowledge_error: float) -> dict:
        low, high = self.correct.interval
        return {"known": list(self.known), "knowledge_error": float(knowledge_error),
                "correct": float(self.correct.rate), "correct_ci": [float(low), float(high)],
                "baseline": float(self.correct.baseline), "risk": float(self.correct.risk),
                "n": int(self.correct.trials)}


@dataclass(frozen=True)
class InformedMatchResult(AttackResult):
    outcomes: tuple[KnowledgeOutcome, ...]
    knowledge_error: float
    likelihood: str
    rows_in: int
    rows_released: int
    mean_candidates: float
    sample_seed: int
    quasi_identifiers: tuple[str, ...]
    strength: str = FULL
    """Light: the attacker's light_sample_size targets, for a candidate the publication does not try."""

    @property
    def worst(self) -> KnowledgeOutcome | None:
        return max(self.outcomes, key=lambda outcome: outcome.correct.risk, default=None)

    def figures(self) -> dict:
        worst = self.worst
        return {
            "informed_match": [outcome.entry(self.knowledge_error) for outcome in self.outcomes],
            "informed_match_risk": None if worst is None else float(worst.correct.risk),
            "informed_match_withheld": (self.rows_in - self.rows_released) / self.rows_in if self.rows_in else 0.0,
            "informed_match_rule": self.likelihood,
            "informed_match_strength": self.strength,
        }

    def warnings(self) -> list[str]:
        return [f"informed match knowing {', '.join(outcome.known)}: the random pick in the cell "
                f"({outcome.correct.baseline:.4f}) is as good as the attack" for outcome in self.outcomes
                if outcome.correct.trials and outcome.correct.baseline_as_good_as_attack]

    def metadata(self) -> dict:
        return {
            **self.figures(),
            "informed_match_detail": [{**outcome.entry(self.knowledge_error), "used": list(outcome.used),
                                       "scored": list(outcome.scored),
                                       **{f"rate_{k}": v for k, v in plain_values(outcome.correct.to_dict()).items()}}
                                      for outcome in self.outcomes],
            "mean_candidates": float(self.mean_candidates),
            "sample_seed": int(self.sample_seed),
            "quasi_identifiers": list(self.quasi_identifiers),
            "assumptions": ASSUMPTIONS,
            **({"warning": "; ".join(self.warnings())} if self.warnings() else {}),
        }


def likelihood_of(config) -> str:
    """The rule the informed attacker ranks rows by, for a configuration's operations (see ASSUMPTIONS)."""
    if config.has_value_operations:
        return NEAREST
    return LAPLACE if config.noise_scale > 0 else EQUALITY


@dataclass(frozen=True)
class Matches:
    """Per knowledge set and target: the attacker's pick and its score, from evaluator truth (in memory only)."""

    target_rows: np.ndarray
    picks: np.ndarray
    """(knowledge sets, targets): the release position picked."""
    scores: np.ndarray
    """(knowledge sets, targets): the share of the scored measurements whose value in the pick is the target's."""
    expected: np.ndarray
    """(knowledge sets, targets): the expected score of a uniformly random row of the target's cell."""
    candidates: np.ndarray
    """Per target, the rows of its released cell."""
    used: tuple[tuple[str, ...], ...]
    scored: tuple[tuple[str, ...], ...]
    likelihood: str


def evaluate(release: ReleaseUnderTest, attacker: AttackerModel, strength: str = FULL) -> InformedMatchResult:
    """The informed attacker against ``release``, each knowledge set's success summed over the targets (the
    attacker's light sample in a ``LIGHT`` evaluation)."""
    if strength == LIGHT:
        attacker = dataclasses.replace(attacker, sample_size=attacker.light_sample_size)
    matches = match(release, attacker)
    outcomes = tuple(
        KnowledgeOutcome(known, matches.used[index], matches.scored[index],
                         SampledRate(float(matches.scores[index].sum()), len(matches.target_rows),
                                     float(matches.expected[index].sum()), len(matches.target_rows)))
        for index, known in enumerate(attacker.knowledge_sets))
    return InformedMatchResult(
        outcomes=outcomes, knowledge_error=attacker.knowledge_error, likelihood=matches.likelihood,
        rows_in=release.plan.rows_in, rows_released=release.plan.rows_released,
        mean_candidates=float(matches.candidates.mean()) if len(matches.candidates) else 0.0,
        sample_seed=attacker.sample_seed, strength=strength, quasi_identifiers=tuple(
            q for q in release.config.released_qis(release.schema) if q in pq.read_schema(release.released_path).names))


def match(release: ReleaseUnderTest, attacker: AttackerModel) -> Matches:
    """Each target's pick under each knowledge set (see ASSUMPTIONS), scored by evaluator truth.

    Memory follows the sample. DuckDB streams the release through a join with the targets' cells that keeps
    only the rows that could be picked: the target's own row is a candidate, so its likelihood bounds the best
    one's, and a row can only beat it when each of its known measurements lies within a band around the known
    value (``_Likelihood.reach``); rows whose value the bound does not cover (null, zero, at the clip bound)
    always pass. Each batch of (target, candidate) pairs updates every knowledge set's running best pick.
    """
    schema, config, sets = release.schema, release.config, attacker.knowledge_sets
    names = pq.read_schema(release.released_path).names
    rows_released = pq.ParquetFile(release.released_path).metadata.num_rows
    if rows_released != release.plan.rows_released:
        raise ValueError(f"{release.released_path}: {rows_released} rows, the plan releases {release.plan.rows_released}")
    measurements = [m for m in schema.measurements if m in names]
    qis = [q for q in config.released_qis(schema) if q in names]
    used = tuple(tuple(m for m in known if m in measurements) for known in sets)
    scored = tuple(tuple(m for m in measurements if m not in known) or tuple(measurements) for known in sets)
    columns = sorted({m for u in used for m in u}, key=measurements.index)
    positions = _targets(rows_released, attacker)
    target_rows = release.released_row_ids()[positions].astype(np.int64)
    known = _known_values(release, target_rows, columns, attacker)
    rule = likelihood_of(config)
    with duck.connect() as connection:
        own = _target_rows(connection, release.released_path, positions, qis, columns)
        likelihood = _Likelihood(rule, config.noise_scale, attacker.knowledge_error,
                                 _released_maxima(connection, release.released_path, columns))
        reach = np.stack([likelihood.reach(sum((likelihood.nll(m, known[:, columns.index(m)], own[m]) for m in u),
                                               np.zeros(len(positions))), len(u)) for u in used])
        candidates = _cell_sizes(connection, release.released_path, qis)
        search = _Search(len(sets), len(positions), attacker.sample_seed)
        for batch in _pairs(connection, release.released_path, qis, columns, used, likelihood, known, reach):
            order = np.argsort(batch["t"], kind="stable")
            target, pos = batch["t"][order], batch["pos"][order]
            starts = np.flatnonzero(np.concatenate([[True], target[1:] != target[:-1]]))
            for index, u in enumerate(used):
                nll = sum((likelihood.nll(m, known[target, columns.index(m)], batch[m][order]) for m in u),
                          np.zeros(len(pos)))
                search.offer(index, target, starts, pos, nll)
        holders = _holders_in_cell(connection, release, target_rows, measurements, qis)
    picks = search.best_position
    scores = np.array([np.mean([release.value_origins(picks[index], m) == target_rows for m in scored[index]], axis=0)
                       for index in range(len(sets))]).reshape(len(sets), len(positions))
    expected = np.array([np.mean([holders[m] for m in scored[index]], axis=0) for index in range(len(sets))]
                        ).reshape(len(sets), len(positions)) / np.maximum(candidates, 1)
    return Matches(target_rows, picks, scores, expected, candidates, used, scored, rule)


def _targets(rows_released: int, attacker: AttackerModel) -> np.ndarray:
    """The sampled targets' release positions (sorted): a seeded uniform sample of released rows."""
    if not rows_released:
        return np.empty(0, dtype=np.int64)
    rng = np.random.default_rng([attacker.sample_seed, 0])
    return np.sort(rng.choice(rows_released, size=min(attacker.sample_size, rows_released), replace=False))


def _known_values(release: ReleaseUnderTest, target_rows: np.ndarray, columns: list[str],
                  attacker: AttackerModel) -> np.ndarray:
    """What the attacker knows of ``columns`` of each target's source row: the raw values (NaN for null), each
    times 1 + e, e seeded and uniform in [-knowledge_error, knowledge_error]."""
    values = _raw_values(release, target_rows, columns)
    if attacker.knowledge_error > 0 and values.size:
        values *= 1.0 + np.random.default_rng([attacker.sample_seed, 1]).uniform(
            -attacker.knowledge_error, attacker.knowledge_error, size=values.shape)
    return values


def _raw_values(release: ReleaseUnderTest, target_rows: np.ndarray, columns: list[str]) -> np.ndarray:
    values = np.full((len(target_rows), len(columns)), np.nan)
    if not len(target_rows) or not columns:
        return values
    select = ", ".join(f"{sql_identifier(m)}::DOUBLE AS m{i}" for i, m in enumerate(columns))
    with duck.connect() as connection:
        connection.register("target_rows", pa.table({ROW_ID: pa.array(np.unique(target_rows), pa.int64())}))
        found = connection.sql(
            f"SELECT {ROW_ID}, {select} FROM read_parquet({sql_literal(release.source_path)}) "
            f"SEMI JOIN target_rows USING ({ROW_ID})").fetchnumpy()
    row_ids = found[ROW_ID].astype(np.int64)
    order = np.argsort(row_ids)
    at = order[np.searchsorted(row_ids[order], target_rows)]
    for i in range(len(columns)):
        values[:, i] = _floats(found[f"m{i}"])[at]
    return values


def _floats(values) -> np.ndarray:
    """A fetched numeric column as float64 with NaN for null."""
    return np.ma.filled(np.ma.asarray(values, dtype=np.float64), np.nan)


def _target_rows(connection, released_path, positions: np.ndarray, qis: list[str], columns: list[str]) -> dict:
    """The ``targets`` table (t, the released cell q0..) and each target's own released values of ``columns``."""
    connection.register("target_positions", pa.table({"pos": pa.array(positions, pa.int64()),
                                                      "t": pa.array(np.arange(len(positions)), pa.int64())}))
    cell = "".join(f", {sql_identifier(q)} AS q{i}" for i, q in enumerate(qis))
    values = "".join(f", {sql_identifier(m)}::DOUBLE AS m{i}" for i, m in enumerate(columns))
    connection.execute(
        f"CREATE TEMP TABLE targets AS SELECT p.t{cell}{values} FROM (SELECT file_row_number AS pos, * FROM "
        f"read_parquet({sql_literal(released_path)}, file_row_number = true)) r JOIN target_positions p USING (pos) "
        f"ORDER BY p.t")
    found = connection.sql(f"SELECT t{''.join(f', m{i}' for i in range(len(columns)))} FROM targets ORDER BY t"
                           ).fetchnumpy()
    return {m: _floats(found[f"m{i}"]) for i, m in enumerate(columns)}


def _released_maxima(connection, released_path, columns: list[str]) -> dict[str, float]:
    """Each column's largest released value: the clip bound the release reveals (NaN for an all-null column)."""
    if not columns:
        return {}
    select = ", ".join(f"max({sql_identifier(m)})::DOUBLE" for m in columns)
    values = connection.execute(f"SELECT {select} FROM read_parquet(?)", [str(released_path)]).fetchall()[0]
    return {m: math.nan if v is None else float(v) for m, v in zip(columns, values)}


def _cell_sizes(connection, released_path, qis: list[str]) -> np.ndarray:
    """Rows of each target's released cell: the candidates a random pick chooses from."""
    keys = [f"q{i}" for i in range(len(qis))]
    cell = ", ".join(f"{sql_identifier(q)} AS q{i}" for i, q in enumerate(qis)) or "NULL AS q"
    join = f"JOIN sizes USING ({', '.join(keys)})" if keys else "CROSS JOIN sizes"
    found = connection.sql(
        f"WITH sizes AS (SELECT {', '.join(keys) or 'q'}, count(*) AS n FROM (SELECT {cell} FROM "
        f"read_parquet({sql_literal(released_path)})) GROUP BY ALL) SELECT t, n FROM targets {join} ORDER BY t"
    ).fetchnumpy()
    return found["n"].astype(np.int64)


def _pairs(connection, released_path, qis, columns, used, likelihood: "_Likelihood", known, reach):
    """Batches of (target ``t``, candidate position ``pos``, the candidate's released ``columns``, NaN for null):
    the rows of each target's cell that could beat its own row under at least one knowledge set."""
    bounds = {"t": pa.array(np.arange(len(known)), pa.int64())}
    for i, m in enumerate(columns):
        bounds[f"c{i}"] = pa.array(likelihood.centre(known[:, i]))
    for k in range(len(used)):
        bounds[f"r{k}"] = pa.array(reach[k])
    connection.register("target_bounds", pa.table(bounds))
    logs = "".join(f", {likelihood.log_sql(m)} AS l{i}, {likelihood.bounded_sql(m)} AS b{i}"
                   for i, m in enumerate(columns))
    values = "".join(f", {sql_identifier(m)}::DOUBLE AS {sql_identifier(m)}" for m in columns)
    on = " AND ".join(f"r.{sql_identifier(q)} = t.q{i}" for i, q in enumerate(qis)) or "TRUE"
    within = " OR ".join(
        "(" + (" AND ".join(f"(NOT r.b{columns.index(m)} OR abs(r.l{columns.index(m)} - t.c{columns.index(m)}) "
                            f"<= t.r{k})" for m in ms) or "TRUE") + ")"
        for k, ms in enumerate(used)) or "TRUE"
    reader = connection.sql(
        f"SELECT t.t, r.pos{''.join(f', r.{sql_identifier(m)}' for m in columns)} FROM "
        f"(SELECT file_row_number AS pos{values}{logs}{''.join(f', {sql_identifier(q)}' for q in qis)} "
        f"FROM read_parquet({sql_literal(released_path)}, file_row_number = true)) r "
        f"JOIN (SELECT * FROM targets JOIN target_bounds USING (t)) t ON {on} WHERE {within}"
    ).to_arrow_reader(_BATCH_ROWS)
    for batch in reader:
        yield {name: (_floats(batch.column(name).to_numpy(zero_copy_only=False)) if name in columns
                      else batch.column(name).to_numpy()) for name in batch.schema.names}


def _holders_in_cell(connection, release: ReleaseUnderTest, target_rows, measurements, qis) -> dict:
    """Per measurement and target, how many rows of the target's released cell hold the target's own value (the
    evaluator's truth the random pick's expectation is made of): 1 where rows keep their values together."""
    if not release.plan.moves_values:
        return dict.fromkeys(measurements, np.ones(len(target_rows)))
    everywhere = np.arange(release.plan.rows_released, dtype=np.int64)
    by_row = np.argsort(target_rows)
    same_cell = " AND ".join(f"r.{sql_identifier(q)} = g.q{i}" for i, q in enumerate(qis)) or "TRUE"
    holders = {}
    for m in measurements:
        origins = release.value_origins(everywhere, m)
        held = np.flatnonzero(np.isin(origins, target_rows))
        connection.register("holder_positions", pa.table({
            "pos": pa.array(held, pa.int64()),
            "t": pa.array(by_row[np.searchsorted(target_rows[by_row], origins[held])], pa.int64())}))
        found = connection.sql(
            f"SELECT h.t, count(*) AS n FROM holder_positions h JOIN (SELECT file_row_number AS pos, * FROM "
            f"read_parquet({sql_literal(release.released_path)}, file_row_number = true)) r USING (pos) "
            f"JOIN targets g ON g.t = h.t WHERE {same_cell} GROUP BY h.t").fetchnumpy()
        counts = np.zeros(len(target_rows))
        counts[found["t"].astype(np.int64)] = found["n"].astype(np.float64)
        holders[m] = counts
    return holders


class _Search:
    """Per knowledge set and target: the most likely candidate so far, ties to a seeded pseudo-random word."""

    def __init__(self, sets: int, targets: int, seed: int):
        self.seed = np.uint64(seed)
        self.best_nll = np.full((sets, targets), np.inf)
        self.best_tie = np.full((sets, targets), np.iinfo(np.uint64).max, dtype=np.uint64)
        self.best_position = np.full((sets, targets), -1, dtype=np.int64)

    def offer(self, index: int, target: np.ndarray, starts: np.ndarray, pos: np.ndarray, nll: np.ndarray) -> None:
        """Candidates (sorted by target, each target's run starting at ``starts``) and their negative
        log-likelihoods: each target's most likely one, ties to the smallest keyed word, replaces the best so far
        when it is more likely (or as likely with a smaller word)."""
        sizes = np.diff(np.append(starts, len(nll)))
        at_best = nll == np.repeat(np.minimum.reduceat(nll, starts), sizes)
        tie = np.where(at_best, self._tie(index, target, pos), np.iinfo(np.uint64).max)
        chosen = np.flatnonzero(at_best & (tie == np.repeat(np.minimum.reduceat(tie, starts), sizes)))
        t, n, w = target[chosen], nll[chosen], tie[chosen]
        better = (n < self.best_nll[index, t]) | ((n == self.best_nll[index, t]) & (w < self.best_tie[index, t]))
        t = t[better]
        self.best_nll[index, t], self.best_tie[index, t] = n[better], w[better]
        self.best_position[index, t] = pos[chosen][better]

    def _tie(self, index: int, target: np.ndarray, pos: np.ndarray) -> np.ndarray:
        """A keyed pseudo-random word per (knowledge set, target, candidate): ties go to the smallest."""
        with np.errstate(over="ignore"):
            salt = _mix64(np.array([self.seed, index], dtype=np.uint64)).sum(dtype=np.uint64)
            return _mix64(_mix64(target.astype(np.uint64) ^ salt) + pos.astype(np.uint64))


def _mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a fixed bijection of 64-bit words that scatters consecutive inputs."""
    x = x.astype(np.uint64)
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


_LOG_HALF = math.log(0.5)


@dataclass(frozen=True)
class _Likelihood:
    """The negative log-likelihood of each candidate's released value given the target's known one, per rule
    (see ASSUMPTIONS): ``nll(column, known, released)`` over arrays of pairs, +inf where the rule rules it out."""

    rule: str
    scale: float
    error: float
    maxima: dict[str, float]

    def nll(self, column: str, known: np.ndarray, released: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            if self.rule == NEAREST:
                distance = np.abs(np.log(released + EPS) - np.log(known + EPS))
                return np.where(np.isnan(distance), 0.0, distance)
            out = np.full(len(known), np.inf)
            known_null, released_null = np.isnan(known), np.isnan(released)
            out[known_null & released_null] = 0.0
            out[(known == 0) & (released == 0)] = 0.0
            live = (known > 0) & (released > 0)
            if self.rule == EQUALITY:
                low, high = known / (1 + self.error), known / (1 - self.error)
                out[live & (released >= low) & (released <= high)] = 0.0
                return out
            x, y = np.log(known[live]), np.log(released[live])
            values = -self._log_density(x, y)
            bound = self.maxima.get(column, math.nan)
            clipped = released[live] >= bound
            if clipped.any():
                values[clipped] = -self._log_clip_mass(x[clipped], math.log(bound))
            out[live] = values
            return out

    def centre(self, known: np.ndarray) -> pa.Array:
        """Per target, the log value a candidate's distance is measured from (null: the column bounds nothing)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.rule == NEAREST:
                return pa.array(np.log(known + EPS), mask=np.isnan(known))
            shift = (math.log1p(self.error) + math.log1p(-self.error)) / 2
            return pa.array(np.where(known > 0, np.log(known) - shift, np.nan))

    def log_sql(self, column: str) -> str:
        name = sql_identifier(column)
        if self.rule == NEAREST:
            return f"ln({name} + {EPS})"
        return f"CASE WHEN {name} > 0 THEN ln({name}) END"

    def bounded_sql(self, column: str) -> str:
        """SQL: whether a released value's term grows with its distance from the centre (the reach applies); a
        null, a zero or a value at the clip bound is never ruled out by the reach."""
        name = sql_identifier(column)
        if self.rule == NEAREST:
            return f"({name} IS NOT NULL)"
        bound = self.maxima.get(column, math.nan)
        below = f" AND {name} < {bound!r}" if math.isfinite(bound) else ""
        return f"coalesce({name} > 0{below}, false)"

    def reach(self, own: np.ndarray, terms: int) -> np.ndarray:
        """Per target, how far (in log) from the centre a bounded value may lie for its row to be at least as likely
        as the target's own row, whose total term is ``own``: every other term is at least the smallest a term can
        be, so this one is at most ``own`` less theirs; inverted through the term's growth with distance."""
        slack = lambda r: r * (1 + 1e-9) + 1e-9  # noqa: E731 - rounding of sums of a few logarithms
        with np.errstate(invalid="ignore", over="ignore"):
            if self.rule == NEAREST:
                return slack(own)
            half = (math.log1p(self.error) - math.log1p(-self.error)) / 2
            if self.rule == EQUALITY:
                return np.full(len(own), slack(half))
            b = self.scale
            if self.error == 0:
                smallest = min(math.log(2 * b), 0.0)
                return slack(b * (own - (terms - 1) * smallest - math.log(2 * b)))
            width = 2 * half
            centre_term = -math.log(-math.expm1(-half / b)) + math.log(width)
            smallest = min(centre_term, 0.0)
            edge = math.log(0.5) + math.log1p(-math.exp(-width / b)) - math.log(width)
            return slack(np.maximum(half, half + b * (own - (terms - 1) * smallest + edge)))

    def _band(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """The band [a, c] of the true log value given the known one's, and its width (0 without an error)."""
        a, c = x - math.log1p(self.error), x - math.log1p(-self.error)
        return a, c, math.log1p(self.error) - math.log1p(-self.error)

    def _log_density(self, x: np.ndarray, t: np.ndarray) -> np.ndarray:
        """log density of the released log value t: Laplace(x, b), averaged over the band of x with an error."""
        b = self.scale
        if self.error == 0:
            return -math.log(2 * b) - np.abs(t - x) / b
        a, c, width = self._band(x)
        u1, u2 = t - a, t - c
        tail = math.log1p(-math.exp(-width / b))
        inside = np.log(-0.5 * np.expm1(-np.maximum(u1, 0) / b) - 0.5 * np.expm1(np.minimum(u2, 0) / b))
        mass = np.where(u2 >= 0, _LOG_HALF - u2 / b + tail, np.where(u1 <= 0, _LOG_HALF + u1 / b + tail, inside))
        return mass - math.log(width)

    def _log_clip_mass(self, x: np.ndarray, bound: float) -> np.ndarray:
        """log P(noise takes the value to the clip bound or above), averaged over the band of x with an error."""
        b = self.scale
        if self.error == 0:
            u = bound - x
            return np.where(u >= 0, _LOG_HALF - u / b, np.log1p(-0.5 * np.exp(np.minimum(u, 0) / b)))
        a, c, width = self._band(x)
        u1, u2 = bound - a, bound - c  # the mass is 1 - (G(u1) - G(u2)) / width, G the integral of the CDF
        above = _LOG_HALF + math.log(b) - u2 / b + math.log1p(-math.exp(-width / b)) - math.log(width)

        def integral(u):
            return np.where(u <= 0, 0.5 * b * np.exp(np.minimum(u, 0) / b), u + 0.5 * b * np.exp(-np.maximum(u, 0) / b))

        direct = np.log(np.maximum(1 - (integral(u1) - integral(u2)) / width, 1e-300))
        return np.where(u2 >= 0, above, direct)
