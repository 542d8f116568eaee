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
import math
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core import duck
from dsh_assets.core.duck import sql_identifier, sql_literal
from dsh_assets.core.files import sha256_file
from dsh_assets.core.privacy.cross_release import _columns as log_measurement_columns
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.privacy.singling_out import count_subscribers
from dsh_assets.core.privacy.stats import AttackResult, SampledRate, plain_values
from dsh_assets.core.release.transform import cell_expressions, positions_of_rows

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
             sample_seed: int = DEFAULT_SAMPLE_SEED, max_comparisons: int = DEFAULT_MAX_COMPARISONS) -> PairResult:
    """Rows of B relinked to A (sampled) and the combined table's singling out (exact). See ASSUMPTIONS."""
    if sample_size < 1:
        raise ValueError("sample_size must be positive")
    _check_same_source(a, b)
    pair = _PairQuery(a, b)
    with duck.connect() as connection:
        pair.register(connection)
        comparisons = pair.comparisons(connection)
        relinked = pair.relink_sample(connection, sample_size, sample_seed)
        combined = pair.combined_singling_out(connection, comparisons, max_comparisons)
    return PairResult(config_a=a.config.id, config_b=b.config.id, relinked=relinked, combined=combined,
                      shared_cell=pair.shared_cell_description, measurement_columns=pair.measurements,
                      comparisons=comparisons, sample_size=sample_size, sample_seed=sample_seed)


def _check_same_source(a: ReleaseUnderTest, b: ReleaseUnderTest) -> None:
    """Both are releases of one source file: the same path, or the same bytes."""
    if Path(a.source_path).resolve() != Path(b.source_path).resolve() and \
            sha256_file(a.source_path) != sha256_file(b.source_path):
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
    hours, app groups where either groups apps (through ``transform.cell_expressions`` of that
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
    log measurements l0..), the distance between their rows and the attacker's pick."""

    def __init__(self, a: ReleaseUnderTest, b: ReleaseUnderTest):
        self.a, self.b = a, b
        self.rows_a, self.rows_b = _checked_row_count(a), _checked_row_count(b)
        names_a = set(pq.read_schema(a.released_path).names)
        names_b = set(pq.read_schema(b.released_path).names)
        self.cell_a, self.cell_b = _shared_cell(a, b, names_a, names_b)
        self.shared_cell_description = tuple(self.cell_a)
        self.measurements = tuple(m for m in a.schema.measurements if m in names_a and m in names_b)
        self.qis_a = tuple(c for c in a.config.released_qis(a.schema) if c in names_a)
        self.qis_b = tuple(c for c in b.config.released_qis(b.schema) if c in names_b)

    def _view(self, release: ReleaseUnderTest, cell: list[str], qis: tuple[str, ...]) -> str:
        columns = [f"{expression} AS k{i}" for i, expression in enumerate(cell)]
        columns += [f"{sql_identifier(c)} AS q{i}" for i, c in enumerate(qis)]
        logs = log_measurement_columns((), self.measurements, False)
        return (f"SELECT file_row_number AS pos, {', '.join([*columns, logs] if logs else columns)} "
                f"FROM read_parquet({sql_literal(release.released_path)}, file_row_number = true)")

    def register(self, connection: duckdb.DuckDBPyConnection) -> None:
        connection.execute(f"CREATE VIEW a AS {self._view(self.a, self.cell_a, self.qis_a)}")
        connection.execute(f"CREATE VIEW b AS {self._view(self.b, self.cell_b, self.qis_b)}")

    def _on(self, left: str) -> str:
        return " AND ".join(f"{left}.k{i} = a.k{i}" for i in range(len(self.cell_a))) or "TRUE"

    def _distance(self, left: str) -> str:
        return " + ".join(f"coalesce(abs({left}.l{i} - a.l{i}), 0)" for i in range(len(self.measurements))) or "0"

    def _pick_key(self, left: str) -> str:
        """The attacker's order on rows of A: distance, then A's released quasi-identifiers (content, not position)."""
        qis = "".join(f", q{i} := a.q{i}" for i in range(len(self.qis_a)))
        return f"struct_pack(d := {self._distance(left)}{qis})"

    def comparisons(self, connection: duckdb.DuckDBPyConnection) -> int:
        """Pairs of rows compared to relink every row of B: the sum over shared cells of rows of A x rows of B."""
        keys = ", ".join(f"k{i}" for i in range(len(self.cell_a)))
        group = f"GROUP BY {keys}" if keys else ""
        using = f"USING ({keys})" if keys else "ON TRUE"
        return int(connection.execute(
            f"SELECT coalesce(sum(na * nb), 0) FROM (SELECT {keys or 'NULL'}, count(*) AS na FROM a {group}) "
            f"JOIN (SELECT {keys or 'NULL'}, count(*) AS nb FROM b {group}) {using}").fetchall()[0][0])

    def relink_sample(self, connection: duckdb.DuckDBPyConnection, sample_size: int, seed: int) -> SampledRate:
        """Sampled rows of B relinked to A; expected successes (1/m over m indistinguishable picks) vs chance.

        The sample is drawn over B's source row ids in sorted order, so it is the same rows whatever
        the file's order. The probe (the sample) is the build side of the join; A streams past it. The
        full pick order is only computed where the twin (the row of A with the same source row: the
        truth) ties with another row at the smallest distance (at 11M rows a pass over the compatible
        rows of A compares about 1.5e8 pairs of rows).
        """
        row_ids_b = self.b.released_row_ids()
        by_source_row = np.argsort(row_ids_b, kind="stable")
        drawn = np.random.default_rng(seed).choice(self.rows_b, size=min(sample_size, self.rows_b), replace=False)
        positions = np.sort(by_source_row[np.sort(drawn)]) if self.rows_b else np.empty(0, np.int64)
        # Truth from released_row_ids() alone, as everywhere in a pair: A's position of each sampled row's source row.
        twins = positions_of_rows(self.a.released_row_ids(), len(self.a.keep))[row_ids_b[positions]]
        connection.register("probe_positions", pa.table({"pos": pa.array(positions, pa.int64()),
                                                         "twin": pa.array(twins, pa.int64())}))
        connection.execute("CREATE TEMP TABLE probe AS SELECT b.*, t.twin FROM b JOIN probe_positions t USING (pos)")
        # Pass 1, on distances alone: the two smallest and the twin's. A twin alone at the smallest distance is
        # the attacker's pick; farther, it is not; tied at it, the full order (distance, then A's released
        # quasi-identifiers) decides among the tied rows of A, in pass 2.
        connection.execute(
            f"CREATE TEMP TABLE nearest AS SELECT b_pos, compatible, smallest[1] AS d, twin_d IS NOT DISTINCT FROM "
            f"smallest[1] AS twin_nearest, len(smallest) = 2 AND smallest[2] = smallest[1] AS tie FROM ("
            f"SELECT b_pos, count(*) AS compatible, arg_min(d, d, 2) AS smallest, "
            f"min(d) FILTER (WHERE a_pos = twin) AS twin_d FROM (SELECT p.pos AS b_pos, p.twin, a.pos AS a_pos, "
            f"{self._distance('p')} AS d FROM probe p JOIN a ON {self._on('p')}) GROUP BY b_pos)")
        tied = connection.execute(
            f"SELECT b_pos, count(*) FILTER (WHERE pick IS NOT DISTINCT FROM best) AS tied, bool_or(a_pos = twin "
            f"AND pick IS NOT DISTINCT FROM best) AS twin_best FROM (SELECT n.b_pos, a.pos AS a_pos, p.twin, "
            f"{self._pick_key('p')} AS pick, min({self._pick_key('p')}) OVER (PARTITION BY n.b_pos) AS best "
            f"FROM nearest n JOIN probe p ON p.pos = n.b_pos JOIN a ON {self._on('p')} "
            f"AND {self._distance('p')} = n.d WHERE n.twin_nearest AND n.tie) GROUP BY b_pos").fetchall()
        nearest = connection.sql("SELECT compatible, twin_nearest AND NOT tie AS alone FROM nearest").fetchnumpy()
        # Sums by math.fsum (correctly rounded, so the same whatever order the rows come in).
        successes = math.fsum([*([1.0] * int(np.count_nonzero(nearest["alone"]))),
                               *(1.0 / count for _, count, twin_best in tied if twin_best)])
        chance = math.fsum(1.0 / n for n in nearest["compatible"].tolist())
        return SampledRate(successes, len(positions), chance, len(positions))

    def combined_singling_out(self, connection: duckdb.DuckDBPyConnection, comparisons: int,
                              max_comparisons: int) -> CombinedSinglingOut:
        """Exact: every row of B relinked; cells of B's quasi-identifiers alone and with the twin's of A."""
        released = count_subscribers(connection, self.b)
        own = [f"b.q{i}" for i in range(len(self.qis_b))]
        alone_in_b = self._alone(connection, "b", own)
        singled_out_in_b = count_subscribers(connection, self.b, alone_in_b)
        if comparisons > max_comparisons:
            return CombinedSinglingOut(released, singled_out_in_b, None,
                                       f"not measured: relinking every row of B compares {comparisons:,} pairs of "
                                       f"rows, over the bound of {max_comparisons:,}")
        connection.execute(f"CREATE TEMP TABLE twins AS SELECT b.pos, min({self._pick_key('b')}) AS pick "
                           f"FROM b JOIN a ON {self._on('b')} GROUP BY b.pos")
        alone = self._alone(connection, "b LEFT JOIN twins ON twins.pos = b.pos",
                            [*own, *(f"twins.pick.q{i}" for i in range(len(self.qis_a)))])
        return CombinedSinglingOut(released, singled_out_in_b, count_subscribers(connection, self.b, alone),
                                   "exact: every row of B relinked to its nearest compatible row of A")

    @staticmethod
    def _alone(connection: duckdb.DuckDBPyConnection, rows: str, columns: list[str]) -> np.ndarray:
        """Positions (``b.pos``) of the rows of ``FROM rows`` alone in their cell of ``columns``, sorted."""
        cell = ", ".join(f"{column} AS g{i}" for i, column in enumerate(columns)) or "NULL AS g0"
        keys = ", ".join(f"g{i}" for i in range(max(len(columns), 1)))
        alone = connection.execute(
            f"SELECT any_value(pos) AS pos FROM (SELECT b.pos AS pos, {cell} FROM {rows}) "
            f"GROUP BY {keys} HAVING count(*) = 1").fetchnumpy()["pos"]
        return np.sort(alone.astype(np.int64))
