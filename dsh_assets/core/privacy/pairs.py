"""Pair evidence: what an attacker holding two candidates A and B of one period (two configurations of one source) gets.

Two figures, per DESIGN.md ("Cross-release"): the share of B's rows relinked to their own row in A
(sampled, with its interval and the chance baseline), and the singling-out rate of the combined
table, B's rows carrying the released quasi-identifiers of their relinked twins in A (exact). This is
the evidence a second row-level publication of a period must pass (``[publication.pairs]``).

The evaluator's truth (which source row and subscriber each released row is) comes from
``ReleaseUnderTest.released_row_ids()`` alone, never from row positions lining up: the two files may
list their rows in any order. It is used in memory only and never reaches figures or metadata.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core import duck
from dsh_assets.core.duck import sql_identifier, sql_literal
from dsh_assets.core.privacy.cross_release import (
    distance_bound,
    group_sums,
    log_measurement,
    relinking_columns,
    within_bound,
)
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.privacy.singling_out import count_subscribers
from dsh_assets.core.privacy.stats import AttackResult, SampledRate, plain_values
from dsh_assets.core.release.cells import cell_expressions
from dsh_assets.core.release.transform import positions_of_rows

ASSUMPTIONS = (
    "Pair of candidates (two row-level releases of the same source and period under different configurations, "
    "A and B), both assumed published: the attacker holds both tables and nothing else. A row of A can be a row "
    "of B only when A's released cell, coarsened to what both share (hour windows where either release keeps "
    "hours, B's or A's app groups where either groups apps, and province, radio and the station where both "
    "release them), equals B's. For a row of B the attacker takes those compatible rows of A and picks the one "
    "with the nearest measurement vector in log space over the measurements both release (the noise is "
    "multiplicative): distance = sum of |ln(a + 1e-6) - ln(b + 1e-6)|, a measurement null on either side being "
    "skipped. Ties go to the row of A with the smallest released quasi-identifiers (a rule on content, not on "
    "position); rows of A equal on both distance and quasi-identifiers are indistinguishable to the attacker, "
    "who picks one of them at random: success then counts 1/m when the true row is one of the m (an expected "
    "success, so the count of successes may be fractional). Rows relinked (sampled, 1,000 rows of B drawn at "
    "random with a fixed seed from B's rows ordered by source row, so the sample does not depend on file order): "
    "success = the pick is the same source row (evaluator truth). Baseline: chance, 1 / the number of compatible "
    "rows of A, averaged over the sample (0 where none is compatible); risk is success above that chance. "
    "Combined singling out (exact, every row of B relinked): each released row of B carries its own released "
    "quasi-identifiers plus every released quasi-identifier of its relinked twin in A (A's finer window, app or "
    "station where A releases them); a subscriber counts when one of their rows of B is alone in its cell of "
    "those combined quasi-identifiers; rate = such subscribers / subscribers with a row in B. Rows of B with no "
    "compatible row in A carry B's quasi-identifiers only. When relinking every row of B would compare more "
    "pairs of rows than a set bound, the combined rate is not measured (None, and the reason is given): a "
    "release gate then refuses it rather than pass on a partial count. Not modelled: averaging or dividing "
    "the two releases' noise, aliases, other periods."
)

PAIR_FIGURES = ("rows_relinked", "rows_relinked_ci", "rows_relinked_baseline", "rows_relinked_risk",
                "rows_relinked_n", "combined_singling_out_rate")
"""The keys of ``PairResult.figures()`` (what ``[publication.pairs]`` criteria may name)."""
PAIR_INTERVALS = ("rows_relinked",)
"""Figures recorded with a 95% interval (``X_ci``), so criteria may name ``X_upper`` / ``X_lower``."""

DEFAULT_SAMPLE_SIZE = 1000
DEFAULT_SAMPLE_SEED = 1009
DEFAULT_MAX_COMPARISONS = 30_000_000
"""Bound on the pairs of rows compared to relink every row of B (the sum over shared cells of rows of A x rows
of B); over it the combined rate is not measured (and the pair gate, which needs it, refuses). Measured: c15 x
c17 of a 100,000-row synthetic source compares 1.5e8 pairs in about 100 s on two busy cores; the pairs grow with
the square of the rows per cell. The bound keeps one pair under about 20 s, so the period's pairs (12 for four
row-level configurations) stay affordable in every run; the default 1.1M-row source's pairs are over it."""


@dataclass(frozen=True)
class CombinedSinglingOut:
    """Singling out in B alone and in B carrying its relinked twins' quasi-identifiers; counts only."""

    subscribers_released: int
    singled_out_in_b: int
    singled_out_combined: int | None
    """None when it was not measured (too many comparisons; see ``reason``)."""
    reason: str

    def rate(self, singled_out: int | None) -> float | None:
        if singled_out is None:
            return None
        return singled_out / self.subscribers_released if self.subscribers_released else 0.0


@dataclass(frozen=True)
class PairResult(AttackResult):
    config_a: str
    config_b: str
    relinked: SampledRate
    """Expected successes over the sampled rows of B; baseline = expected successes of a random compatible row."""
    combined: CombinedSinglingOut
    shared_cell: tuple[str, ...]
    """The cell both releases can be compared on (SQL over A's columns, as coarsened for the comparison)."""
    measurement_columns: tuple[str, ...]
    comparisons: int
    """Pairs of rows compared to relink every row of B."""
    sample_size: int
    sample_seed: int

    def figures(self) -> dict:
        return {
            "rows_relinked": float(self.relinked.rate),
            "rows_relinked_ci": [float(v) for v in self.relinked.interval],
            "rows_relinked_baseline": float(self.relinked.baseline),
            "rows_relinked_risk": float(self.relinked.risk),
            "rows_relinked_n": int(self.relinked.trials),
            "combined_singling_out_rate": self.combined.rate(self.combined.singled_out_combined),
        }

    def warnings(self) -> list[str]:
        if not self.relinked.baseline_as_good_as_attack:
            return []
        low, high = self.relinked.interval
        return [f"rows relinked: the chance of a random compatible row ({self.relinked.baseline:.4f}) is as good as "
                f"the attack (95% interval {low:.4f}-{high:.4f})"]

    def metadata(self) -> dict:
        metadata = dict(self.figures())
        metadata.update({
            "config_a": self.config_a,
            "config_b": self.config_b,
            "rows_relinked_detail": plain_values(self.relinked.to_dict()),
            "shared_cell": list(self.shared_cell),
            "measurements": len(self.measurement_columns),
            "comparisons": int(self.comparisons),
            "singling_out_rate_b_alone": self.combined.rate(self.combined.singled_out_in_b),
            "subscribers_singled_out_combined": self.combined.singled_out_combined,
            "subscribers_singled_out_b_alone": int(self.combined.singled_out_in_b),
            "subscribers_released_b": int(self.combined.subscribers_released),
            "combined_note": self.combined.reason,
            "baseline": "chance: a uniformly random compatible row of A",
            "sample_size": self.sample_size,
            "sample_seed": self.sample_seed,
            "assumptions": ASSUMPTIONS,
        })
        if self.warnings():
            metadata["warning"] = "; ".join(self.warnings())
        return metadata


def evaluate(a: ReleaseUnderTest, b: ReleaseUnderTest, *, sample_size: int = DEFAULT_SAMPLE_SIZE,
             sample_seed: int = DEFAULT_SAMPLE_SEED, max_comparisons: int = DEFAULT_MAX_COMPARISONS,
             probed: ProbedRelease | None = None) -> PairResult:
    """Rows of B relinked to A (sampled) and the combined table's singling out (exact). See ASSUMPTIONS.

    ``probed``: what B alone gives every pair (``ProbedRelease.of(b, sample_size, sample_seed)``), when
    the caller evaluates B against several candidates; made here otherwise.
    """
    _check_same_source(a, b)
    probed = probed or ProbedRelease.of(b, sample_size, sample_seed)
    if probed.release is not b or probed.sample_size != sample_size or probed.sample_seed != sample_seed:
        raise ValueError("the probed release is another release's, or another sample's")
    pair = _PairQuery(a, b)
    with duck.connect() as connection:
        pair.register(connection)
        comparisons = pair.comparisons(connection)
        relinked = pair.relink_sample(connection, probed)
        combined = pair.combined_singling_out(connection, probed, comparisons, max_comparisons)
    return PairResult(config_a=a.config.id, config_b=b.config.id, relinked=relinked, combined=combined,
                      shared_cell=pair.shared_cell_description, measurement_columns=pair.measurements,
                      comparisons=comparisons, sample_size=sample_size, sample_seed=sample_seed)


def evaluate_pairs(candidates: dict[str, ReleaseUnderTest], against: Iterable[str], *,
                   sample_size: int = DEFAULT_SAMPLE_SIZE, sample_seed: int = DEFAULT_SAMPLE_SEED,
                   max_comparisons: int = DEFAULT_MAX_COMPARISONS) -> dict[str, dict[str, PairResult]]:
    """The pairs that decide something: each candidate B held with each candidate A of ``against`` (those already
    published), as {B: {A: result}}; what B alone gives is computed once per B. With nothing published, nothing is
    computed: the work grows with the candidates, not with their square."""
    held = [a_id for a_id in against if a_id in candidates]
    results = {}
    for b_id, b in candidates.items():
        others = [a_id for a_id in held if a_id != b_id]
        if not others:
            continue
        probed = ProbedRelease.of(b, sample_size, sample_seed)
        results[b_id] = {a_id: evaluate(candidates[a_id], b, sample_size=sample_size, sample_seed=sample_seed,
                                        max_comparisons=max_comparisons, probed=probed) for a_id in others}
    return results


@dataclass(frozen=True)
class ProbedRelease:
    """B's side of its pairs, the same against every A: the sampled rows and the singling out in B alone."""

    release: ReleaseUnderTest
    sample_size: int
    sample_seed: int
    positions: np.ndarray
    """B's sampled rows, by position: drawn over B's source row ids in sorted order, so the same rows whatever
    the file's order."""
    rows: pa.Table
    """B's released columns at those positions (``pos``: the position)."""
    subscribers_released: int
    singled_out_in_b: int
    """Subscribers with a row alone in its cell of B's own released quasi-identifiers."""

    @classmethod
    def of(cls, b: ReleaseUnderTest, sample_size: int, sample_seed: int) -> "ProbedRelease":
        if sample_size < 1:
            raise ValueError("sample_size must be positive")
        rows_b = _checked_row_count(b)
        # B's positions in the order of their source row ids: the inverse of the plan's order, without a sort.
        position_of_row = positions_of_rows(b.released_row_ids(), len(b.keep))
        by_source_row = position_of_row[position_of_row >= 0].astype(np.int64)
        drawn = np.random.default_rng(sample_seed).choice(rows_b, size=min(sample_size, rows_b), replace=False)
        positions = np.sort(by_source_row[np.sort(drawn)]) if rows_b else np.empty(0, np.int64)
        released = sql_literal(b.released_path)
        names = set(pq.read_schema(b.released_path).names)
        released_qis = [c for c in b.config.released_qis(b.schema) if c in names]
        qis = [f"{sql_identifier(c)} AS g{i}" for i, c in enumerate(released_qis)]
        with duck.connect() as connection:
            connection.register("sampled", pa.table({"pos": pa.array(positions, pa.int64())}))
            rows = connection.sql(f"SELECT file_row_number AS pos, * FROM read_parquet({released}, file_row_number "
                                  f"= true) WHERE file_row_number IN (SELECT pos FROM sampled) ORDER BY pos"
                                  ).to_arrow_table()
            alone = _alone(connection, f"SELECT file_row_number AS pos, {', '.join(qis) or 'NULL AS g0'} "
                                       f"FROM read_parquet({released}, file_row_number = true)", max(len(qis), 1))
            return cls(b, sample_size, sample_seed, positions, rows, count_subscribers(connection, b),
                       count_subscribers(connection, b, alone))


def _check_same_source(a: ReleaseUnderTest, b: ReleaseUnderTest) -> None:
    """Both are releases of one source file: the same path, or the same bytes."""
    if Path(a.source_path).resolve() != Path(b.source_path).resolve() and \
            a.book.sha256(a.source_path) != b.book.sha256(b.source_path):
        raise ValueError(f"{a.config.id} and {b.config.id} are releases of different sources; a pair is two "
                         f"candidates of one source and period")


def _checked_row_count(release: ReleaseUnderTest) -> int:
    rows = len(release.released_row_ids())
    in_file = pq.ParquetFile(release.released_path).metadata.num_rows
    if in_file != rows:
        raise ValueError(f"{release.released_path}: {in_file} rows, the plan keeps {rows}")
    return rows


def _shared_cell(a: ReleaseUnderTest, b: ReleaseUnderTest, names_a, names_b) -> tuple[list[str], list[str]]:
    """The cell both releases can be compared on, as SQL over each release's columns: (A's, B's).

    Each quasi-identifier both release, coarsened to the coarser of the two: hours where either keeps
    hours, app groups where either groups apps (through ``cells.cell_expressions`` of that
    coarsening); province, radio and the station as they are.
    """
    schema = a.schema
    if a.config.app_groups and b.config.app_groups and a.config.app_group_of() != b.config.app_group_of():
        raise ValueError(f"{a.config.id} and {b.config.id} group apps differently: no shared app coarsening")
    shared = dataclasses.replace(
        a.config, time_coarsen="hour" if "hour" in (a.config.time_coarsen, b.config.time_coarsen) else "window",
        app_groups=a.config.app_groups or b.config.app_groups)
    coarsened = dict(zip(schema.categorical_qis, cell_expressions(shared, schema)))

    def expression(column: str, release: ReleaseUnderTest) -> str:
        if column == schema.time and release.config.time_coarsen != shared.time_coarsen:
            return coarsened[column]
        if column == schema.app and shared.app_groups and not release.config.app_groups:
            return coarsened[column]
        return sql_identifier(column)

    columns = [c for c in (*schema.categorical_qis, schema.station) if c in names_a and c in names_b]
    return [expression(c, a) for c in columns], [expression(c, b) for c in columns]


class _PairQuery:
    """The SQL of one pair: views ``a`` and ``b`` (position, shared cell k0.., released quasi-identifiers q0..,
    log measurements l0..) over ``a_raw`` and ``b_raw`` (the raw measurements), the distance between their rows
    and the attacker's pick."""

    def __init__(self, a: ReleaseUnderTest, b: ReleaseUnderTest):
        self.a, self.b = a, b
        _checked_row_count(a)
        names_a = set(pq.read_schema(a.released_path).names)
        names_b = set(pq.read_schema(b.released_path).names)
        self.cell_a, self.cell_b = _shared_cell(a, b, names_a, names_b)
        self.shared_cell_description = tuple(self.cell_a)
        self.measurements = tuple(m for m in a.schema.measurements if m in names_a and m in names_b)
        self.qis_a = tuple(c for c in a.config.released_qis(a.schema) if c in names_a)
        self.qis_b = tuple(c for c in b.config.released_qis(b.schema) if c in names_b)

    @functools.cached_property
    def twin_positions(self) -> np.ndarray:
        """Per row of B (by position), A's position of its source row, -1 where A withheld it: the evaluator's truth,
        from ``released_row_ids()`` alone, as everywhere in a pair."""
        return positions_of_rows(self.a.released_row_ids(), len(self.a.keep))[self.b.released_row_ids()]

    def _view(self, release: ReleaseUnderTest, cell: list[str], qis: tuple[str, ...], rows: str | None = None) -> str:
        """Position, shared cell k0.., released quasi-identifiers q0.. and the raw measurements (logs come later),
        of the release's file, or of ``rows`` (some of its rows, with their position as ``pos``)."""
        columns = [f"{expression} AS k{i}" for i, expression in enumerate(cell)]
        columns += [f"{sql_identifier(c)} AS q{i}" for i, c in enumerate(qis)]
        columns += [sql_identifier(m) for m in self.measurements]
        if rows is not None:
            return f"SELECT pos, {', '.join(columns)} FROM {rows}"
        return (f"SELECT file_row_number AS pos, {', '.join(columns)} "
                f"FROM read_parquet({sql_literal(release.released_path)}, file_row_number = true)")

    def _with_logs(self, rows: str) -> str:
        """``rows`` (a query over a raw view) with the log measurements l0.. instead of the raw ones: the logarithms
        are taken after ``rows`` has filtered, so only for the rows a query needs."""
        if not self.measurements:
            return rows
        raw = ", ".join(sql_identifier(m) for m in self.measurements)
        return f"SELECT * EXCLUDE ({raw}), {relinking_columns((), self.measurements, False)} FROM ({rows})"

    def register(self, connection: duckdb.DuckDBPyConnection) -> None:
        connection.execute(f"CREATE TEMP VIEW a_raw AS {self._view(self.a, self.cell_a, self.qis_a)}")
        connection.execute(f"CREATE TEMP VIEW b_raw AS {self._view(self.b, self.cell_b, self.qis_b)}")
        connection.execute(f"CREATE TEMP VIEW a AS {self._with_logs('SELECT * FROM a_raw')}")
        connection.execute(f"CREATE TEMP VIEW b AS {self._with_logs('SELECT * FROM b_raw')}")

    def _on(self, left: str) -> str:
        return " AND ".join(f"{left}.k{i} = a.k{i}" for i in range(len(self.cell_a))) or "TRUE"

    def _distance(self, left: str) -> str:
        return " + ".join(f"coalesce(abs({left}.l{i} - a.l{i}), 0)" for i in range(len(self.measurements))) or "0"

    def _group_sums(self, logs: bool) -> list[str]:
        """``cross_release.group_sums`` over the log columns l0.. (``logs``) or of the raw measurements."""
        return group_sums([f"l{i}" if logs else log_measurement(m) for i, m in enumerate(self.measurements)])

    def _pick_key(self, distance: str) -> str:
        """The attacker's order on rows of A: ``distance`` (SQL), then A's released quasi-identifiers (content, not
        position)."""
        qis = "".join(f", q{i} := a.q{i}" for i in range(len(self.qis_a)))
        return f"struct_pack(d := {distance}{qis})"

    def comparisons(self, connection: duckdb.DuckDBPyConnection) -> int:
        """Pairs of rows compared to relink every row of B: the sum over shared cells of rows of A x rows of B."""
        keys = ", ".join(f"k{i}" for i in range(len(self.cell_a)))
        group = f"GROUP BY {keys}" if keys else ""
        connection.execute(f"CREATE TEMP TABLE a_cells AS SELECT {keys or 'NULL AS k'}, count(*) AS compatible "
                           f"FROM a_raw {group}")
        return int(connection.execute(
            f"SELECT coalesce(sum(compatible * nb), 0) FROM a_cells JOIN (SELECT {keys or 'NULL'}, count(*) AS nb "
            f"FROM b_raw {group}) {self._cells_on()}").fetchall()[0][0])

    def _cells_on(self) -> str:
        """How a relation of rows of B joins ``a_cells``, the rows of A per shared cell (made by ``comparisons``)."""
        keys = ", ".join(f"k{i}" for i in range(len(self.cell_a)))
        return f"USING ({keys})" if keys else "ON TRUE"

    def relink_sample(self, connection: duckdb.DuckDBPyConnection, probed: ProbedRelease) -> SampledRate:
        """Sampled rows of B relinked to A; expected successes (1/m over m indistinguishable picks) vs chance.

        What decides a sampled row is whether a compatible row of A is nearer than its twin (the row of A
        with the same source row: the truth), or as near. So the twin's distance is taken first, and a
        join of the probe (the build side) with every row of A in its cells keeps the rows of A whose
        bound (``cross_release.distance_bound``) is within it (at 11M rows c15 against c17 joins about
        1.7e8 pairs of rows; a bound of two groups already keeps under 3% of them), and takes the full
        distance for those alone, in the same pass over A's file: no second pass fetches the kept rows (one
        costs about 0.25 s a pair at 1.1M rows). The full pick order is only computed where the twin ties with
        another row at the smallest distance. The figures are those of the full distance to every compatible
        row: the bound never exceeds the distance (slack over rounding).
        """
        positions = probed.positions
        twins = self.twin_positions[positions]
        connection.register("sampled_rows", probed.rows)
        connection.register("probe_twins", pa.table({"pos": pa.array(positions, pa.int64()),
                                                     "twin": pa.array(twins, pa.int64())}))
        sampled = self._view(self.b, self.cell_b, self.qis_b, "sampled_rows")
        connection.execute(f"CREATE TEMP TABLE probe AS "
                           f"{self._with_logs(f'SELECT * FROM ({sampled}) JOIN probe_twins USING (pos)')}")
        keys = [f"k{i}" for i in range(len(self.cell_a))]
        on, distance = self._on("p"), self._distance("p")
        # The twin's distance. Only rows of A as near as the twin decide whether the twin is the attacker's
        # pick (nearer: it is not; as near: a tie); the bound finds them without the full distance to every row.
        twin_of = "SELECT a.*, p.pos AS b_pos FROM a_raw a JOIN probe_twins p ON a.pos = p.twin"
        connection.execute(f"CREATE TEMP TABLE probe_twin AS SELECT p.*, {distance} AS twin_d FROM probe p "
                           f"JOIN ({self._with_logs(twin_of)}) a ON a.b_pos = p.pos AND {on}")
        in_probed_cells = (f"SELECT * FROM a_raw SEMI JOIN (SELECT DISTINCT {', '.join(keys)} FROM probe_twin) "
                           f"USING ({', '.join(keys)})" if keys else "SELECT * FROM a_raw")
        logs = relinking_columns((), self.measurements, False)
        bounded = (f"SELECT {', '.join(filter(None, ['pos', *keys, logs, *self._group_sums(False)]))} "
                   f"FROM ({in_probed_cells})")
        connection.execute(
            f"CREATE TEMP TABLE candidates AS SELECT p.pos AS b_pos, a.pos AS a_pos, {distance} AS d FROM "
            f"(SELECT *, {', '.join(self._group_sums(True)) or 'NULL'} FROM probe_twin) p JOIN ({bounded}) a ON {on} "
            f"WHERE {within_bound(distance_bound('p', 'a', len(self.measurements)), 'p.twin_d')}")
        connection.execute(
            f"CREATE TEMP TABLE nearest AS SELECT p.pos AS b_pos, compatible, t.twin_d AS d, "
            f"coalesce(t.closer = 0, false) AS twin_nearest, coalesce(t.level >= 2, false) AS tie "
            f"FROM probe p JOIN a_cells {self._cells_on()} LEFT JOIN (SELECT p.pos, any_value(p.twin_d) AS twin_d, "
            f"count(*) FILTER (WHERE c.d < p.twin_d) AS closer, count(*) FILTER (WHERE c.d = p.twin_d) AS level "
            f"FROM probe_twin p JOIN candidates c ON c.b_pos = p.pos GROUP BY p.pos) t USING (pos)")
        tied = []
        if connection.execute("SELECT count(*) FROM nearest WHERE twin_nearest AND tie").fetchall()[0][0]:
            tied = connection.execute(
                f"SELECT b_pos, count(*) FILTER (WHERE pick IS NOT DISTINCT FROM best) AS tied, bool_or(a_pos = twin "
                f"AND pick IS NOT DISTINCT FROM best) AS twin_best FROM (SELECT n.b_pos, c.a_pos, p.twin, "
                f"{self._pick_key('c.d')} AS pick, min({self._pick_key('c.d')}) OVER (PARTITION BY n.b_pos) AS best "
                f"FROM nearest n JOIN probe p ON p.pos = n.b_pos JOIN candidates c ON c.b_pos = n.b_pos AND c.d = n.d "
                f"JOIN a_raw a ON a.pos = c.a_pos WHERE n.twin_nearest AND n.tie) GROUP BY b_pos").fetchall()
        nearest = connection.sql("SELECT compatible, twin_nearest AND NOT tie AS alone FROM nearest").fetchnumpy()
        # Sums by math.fsum (correctly rounded, so the same whatever order the rows come in).
        successes = math.fsum([*([1.0] * int(np.count_nonzero(nearest["alone"]))),
                               *(1.0 / count for _, count, twin_best in tied if twin_best)])
        chance = math.fsum(1.0 / n for n in nearest["compatible"].tolist())
        return SampledRate(successes, len(positions), chance, len(positions))

    def combined_singling_out(self, connection: duckdb.DuckDBPyConnection, probed: ProbedRelease, comparisons: int,
                              max_comparisons: int) -> CombinedSinglingOut:
        """Exact: every row of B relinked; cells of B's quasi-identifiers alone and with the twin's of A."""
        released, singled_out_in_b = probed.subscribers_released, probed.singled_out_in_b
        if comparisons > max_comparisons:
            return CombinedSinglingOut(released, singled_out_in_b, None,
                                       f"not measured: relinking every row of B compares {comparisons:,} pairs of "
                                       f"rows, over the bound of {max_comparisons:,}")
        self._picks(connection)
        cell = [*(f"b.q{i}" for i in range(len(self.qis_b))), *(f"twins.pick.q{i}" for i in range(len(self.qis_a)))]
        grouped = ", ".join(f"{column} AS g{i}" for i, column in enumerate(cell)) or "NULL AS g0"
        alone = _alone(connection, f"SELECT b.pos AS pos, {grouped} FROM b LEFT JOIN twins ON twins.pos = b.pos",
                       max(len(cell), 1))
        return CombinedSinglingOut(released, singled_out_in_b, count_subscribers(connection, self.b, alone),
                                   "exact: every row of B relinked to its nearest compatible row of A")

    def _picks(self, connection: duckdb.DuckDBPyConnection) -> None:
        """Table ``twins``: per row of B (``pos``), the attacker's pick among the compatible rows of A (``pick``).

        The pick is no farther than the row's twin (A's row of its source row), when the twin is compatible: so
        a narrow join keeps, for such a row, only the rows of A whose bound (``cross_release.distance_bound``) is
        within the twin's distance, and the full pick key is taken for those alone (a row without a compatible
        twin keeps every compatible row). The picks are those of the full key over every compatible row: a row
        left out is farther than the twin, the bound never exceeding the distance (slack over rounding). At
        30,000 rows, hour groups against windows, the join keeps about 1.5% of 13 million pairs of rows.
        """
        has_twin = self.twin_positions >= 0
        connection.register("every_twin", pa.table({"pos": pa.array(np.flatnonzero(has_twin), pa.int64()),
                                                    "twin": pa.array(self.twin_positions[has_twin], pa.int64())}))
        sums = self._group_sums(True)
        connection.execute(
            f"CREATE TEMP TABLE b_twin AS SELECT b.*, {', '.join(sums) or 'NULL AS no_sums'}, t.twin_d FROM b "
            f"LEFT JOIN (SELECT p.pos, {self._distance('p')} AS twin_d FROM b p JOIN every_twin w ON w.pos = p.pos "
            f"JOIN a ON a.pos = w.twin AND {self._on('p')}) t USING (pos)")
        narrow = ", ".join(["pos", *(f"k{i}" for i in range(len(self.cell_a))), *(f"h{g}" for g in range(len(sums)))])
        bound = within_bound(distance_bound("p", "a", len(self.measurements)), "p.twin_d")
        connection.execute(
            f"CREATE TEMP TABLE nearer_than_twin AS SELECT p.pos AS b_pos, a.pos AS a_pos "
            f"FROM (SELECT {narrow}, twin_d FROM b_twin) p "
            f"JOIN (SELECT {narrow} FROM (SELECT *, {', '.join(sums) or 'NULL'} FROM a)) a ON {self._on('p')} "
            f"WHERE p.twin_d IS NULL OR {bound}")
        connection.execute(
            f"CREATE TEMP TABLE twins AS SELECT p.pos, min({self._pick_key(self._distance('p'))}) AS pick "
            f"FROM nearer_than_twin c JOIN b_twin p ON p.pos = c.b_pos JOIN a ON a.pos = c.a_pos GROUP BY p.pos")


def _alone(connection: duckdb.DuckDBPyConnection, rows: str, cell_columns: int) -> np.ndarray:
    """Positions of the rows of ``rows`` (``pos`` and its cell g0..) alone in their cell, sorted."""
    keys = ", ".join(f"g{i}" for i in range(cell_columns))
    alone = connection.execute(f"SELECT any_value(pos) AS pos FROM ({rows}) GROUP BY {keys} HAVING count(*) = 1"
                               ).fetchnumpy()["pos"]
    return np.sort(alone.astype(np.int64))
