"""Linkage: find a known person's released row from one observation; chain a released alias over three.

Two evaluators on one release, each sampled and seeded, each with a control baseline:

* ``single-record linkage``: the attacker knows one raw observation of the target and looks for
  the released rows that match it;
* ``alias chaining`` (only where the release carries an alias): the attacker knows three raw
  observations and intersects the aliases of the released rows that match each.

The evaluator's truth (which subscriber each released row is) decides success; it is used in
memory only and never reaches the result's figures or metadata.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsh_assets.core import duck
from dsh_assets.core.duck import sql_identifier, sql_literal
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.privacy.stats import AttackResult, SampledRate, plain_values
from dsh_assets.core.release.schema import ROW_ID
from dsh_assets.core.release.cells import cell_expressions
from dsh_assets.core.release.transform import ALIAS_COLUMN

ASSUMPTIONS = (
    "Single-record linkage (prosecutor model): the attacker knows that the target is a subscriber of the "
    "source and knows ONE raw observation of them: the ten-minute window, province and application of one of "
    "their raw rows (drawn at random, seeded), mapped through the release's own coarsening (hour, app group) "
    "where it coarsens; fields the release drops are not matched. Candidates are the released rows with those "
    "released values (radio and station are not known to the attacker). Success: exactly one candidate and "
    "it is the target's row. 500 targets drawn at random (seeded) from every subscriber of the source, so a "
    "target whose rows were all withheld counts as a failure. "
    "Alias chaining (only where a subscriber alias is released): the attacker knows THREE distinct raw "
    "observations of the target (targets drawn among subscribers with at least three source rows), takes the "
    "aliases of the released rows matching each and intersects the three sets. Success: exactly one alias is "
    "left and it is the target's; the share left with exactly one alias (right or wrong) is reported too. "
    "Baseline (control, as anonymeter's): the same attack, scored against the same targets, on observations "
    "of nobody in the release: each control observation takes the window of one random source row and the "
    "province and application of another, independently drawn (seeded), so it is plausible but is nobody's "
    "observation in particular. It measures how often the attack 'succeeds' without true knowledge of the "
    "target; risk is success above it. Chance 1/candidates was not used: a random pick among the candidates "
    "uses the same observation and succeeds whenever the attack does, so it can never be beaten and would "
    "report risk 0 by construction. Controls from subscribers whose every row was withheld were not used "
    "either: they exist only where k suppresses (none under id_removal, about a hundred at k = 5 on the "
    "default source), so figures would not be comparable across configurations. "
    "Not modelled: an attacker who also knows the radio or the station, who uses the measurements, or who "
    "combines several releases; absence of an alias does not prove absence of linkage through other fields."
)

DEFAULT_SAMPLE_SIZE = 500
DEFAULT_SAMPLE_SEED = 500
DEFAULT_CHAIN_OBSERVATIONS = 3

# Independent random streams per purpose, so one evaluator's draws never shift another's.
_SINGLE_TARGETS, _SINGLE_PICKS, _SINGLE_CONTROL, _CHAIN_TARGETS, _CHAIN_PICKS, _CHAIN_CONTROL = range(6)


@dataclass(frozen=True)
class LinkageResult(AttackResult):
    config_id: str
    known_columns: tuple[str, ...]
    """The released columns the attacker's observation is matched on."""
    correct: SampledRate
    unique: SampledRate
    """Share with exactly one candidate row; its baseline is the control's share."""
    chain_correct: SampledRate | None
    chain_unique: SampledRate | None
    sample_size: int
    sample_seed: int
    chain_observations: int
    subscribers_in_source: int
    subscribers_eligible_for_chain: int
    alias_released: bool

    def figures(self) -> dict:
        def ci(rate: SampledRate | None):
            return None if rate is None else [float(v) for v in rate.interval]

        chain = self.chain_correct
        return {
            "linkage_unique": float(self.unique.rate),
            "linkage_unique_ci": ci(self.unique),
            "linkage_correct": float(self.correct.rate),
            "linkage_correct_ci": ci(self.correct),
            "linkage_correct_baseline": float(self.correct.baseline),
            "linkage_correct_risk": float(self.correct.risk),
            "linkage_n": int(self.correct.trials),
            "alias_chain_correct": None if chain is None else float(chain.rate),
            "alias_chain_correct_ci": ci(chain),
            "alias_chain_correct_baseline": None if chain is None else float(chain.baseline),
            "alias_chain_correct_risk": None if chain is None else float(chain.risk),
            "alias_chain_n": 0 if chain is None else int(chain.trials),
        }

    def warnings(self) -> list[str]:
        found = []
        named = [("single-record linkage", self.correct)]
        if self.chain_correct is not None:
            named.append(("alias chaining", self.chain_correct))
        for name, rate in named:
            if rate.baseline_as_good_as_attack:
                found.append(
                    f"{name}: the control baseline ({rate.baseline:.4f}) is as good as the attack "
                    f"(95% interval {rate.interval[0]:.4f}-{rate.interval[1]:.4f}); the attack shows no "
                    "measurable linkage on this sample"
                )
        return found

    def metadata(self) -> dict:
        metadata = dict(self.figures())
        metadata.update({
            "linkage_correct_detail": plain_values(self.correct.to_dict()),
            "linkage_unique_detail": plain_values(self.unique.to_dict()),
            "linkage_unique_control": float(self.unique.baseline),
            "known_observation": ", ".join(self.known_columns) or "nothing the release keeps",
            "sample_size": self.sample_size,
            "sample_seed": self.sample_seed,
            "subscribers_in_source": self.subscribers_in_source,
            "alias_released": self.alias_released,
            "baseline": "control: observations recombined from two random source rows (nobody's observation)",
        })
        if self.chain_correct is not None and self.chain_unique is not None:
            metadata.update({
                "alias_chain_observations": self.chain_observations,
                "alias_chain_unique": float(self.chain_unique.rate),
                "alias_chain_unique_ci": [float(v) for v in self.chain_unique.interval],
                "alias_chain_unique_control": float(self.chain_unique.baseline),
                "alias_chain_correct_detail": plain_values(self.chain_correct.to_dict()),
                "alias_chain_unique_detail": plain_values(self.chain_unique.to_dict()),
                "subscribers_eligible_for_chain": self.subscribers_eligible_for_chain,
            })
        else:
            metadata["alias_chain_note"] = "not run: the release carries no subscriber alias"
        metadata["assumptions"] = ASSUMPTIONS
        if self.warnings():
            metadata["warning"] = "; ".join(self.warnings())
        return metadata


def evaluate(release: ReleaseUnderTest, *, sample_size: int = DEFAULT_SAMPLE_SIZE,
             sample_seed: int = DEFAULT_SAMPLE_SEED,
             chain_observations: int = DEFAULT_CHAIN_OBSERVATIONS) -> LinkageResult:
    """Single-record linkage, and alias chaining where the release carries an alias (see ASSUMPTIONS)."""
    if sample_size < 1 or chain_observations < 1:
        raise ValueError("sample_size and chain_observations must be positive")
    rows_released = pq.ParquetFile(release.released_path).metadata.num_rows
    if int(release.keep.sum()) != rows_released:
        raise ValueError(f"{release.released_path}: {rows_released} rows, the plan keeps {int(release.keep.sum())}")
    alias_released = ALIAS_COLUMN in pq.read_schema(release.released_path).names
    with _Data(release, alias_released) as data:
        single = SingleRecordLinkage(data, sample_size, sample_seed).evaluate()
        chain = AliasChaining(data, sample_size, sample_seed, chain_observations).evaluate() if alias_released else None
        return LinkageResult(
            config_id=release.config.id,
            known_columns=data.known_columns,
            correct=single.correct,
            unique=single.unique,
            chain_correct=chain.correct if chain else None,
            chain_unique=chain.unique if chain else None,
            sample_size=sample_size,
            sample_seed=sample_seed,
            chain_observations=chain_observations,
            subscribers_in_source=data.population.size(1),
            subscribers_eligible_for_chain=data.population.size(chain_observations) if alias_released else 0,
            alias_released=alias_released,
        )


@dataclass(frozen=True)
class _Rates:
    correct: SampledRate
    unique: SampledRate


class SingleRecordLinkage:
    """Attacker model: knows one raw observation (window, province, app) of a named subscriber of the source.

    They look up the released rows with the same released values; with exactly one candidate they
    claim it as the target's row. Success: that row is the target's. Control: the same claim made
    from an observation recombined from two random source rows (nobody's), scored the same way.
    """

    def __init__(self, data: "_Data", sample_size: int, sample_seed: int):
        self.data, self.sample_size, self.sample_seed = data, sample_size, sample_seed

    def evaluate(self) -> _Rates:
        data, seed = self.data, self.sample_seed
        targets = data.population.sample(self.sample_size, 1, np.random.default_rng([seed, _SINGLE_TARGETS]))
        control_rows = data.draw_control(len(targets), 1, np.random.default_rng([seed, _SINGLE_CONTROL]))
        known = data.raw_rows(targets, control_rows)
        observed = known.observations(1, np.random.default_rng([seed, _SINGLE_PICKS]))
        control = known.control
        cells = data.cells(observed, control)
        rows_in_cell, first_position = data.released_counts(cells)

        def score(observations: pa.Table) -> tuple[int, int]:
            unique = correct = 0
            for tid, cid in zip(observations.column("tid").to_pylist(), data.cell_of(observations, cells).tolist()):
                if rows_in_cell.get(cid, 0) == 1:
                    unique += 1
                    correct += first_position[cid] in known.released_positions[tid]
            return unique, correct

        n = len(targets)
        (unique, correct), (unique_control, correct_control) = score(observed), score(control)
        return _Rates(correct=SampledRate(correct, n, correct_control, n),
                      unique=SampledRate(unique, n, unique_control, n))


class AliasChaining:
    """Attacker model: knows three raw observations of a named subscriber; the release carries an alias.

    For each observation they take the aliases of the released rows with the same released values
    and intersect the sets; with exactly one alias left they claim it as the target's (and with it
    every released row of the target). Success: it is the target's alias. Control: the same with
    three observations recombined from random source rows (nobody's), scored the same way.
    """

    def __init__(self, data: "_Data", sample_size: int, sample_seed: int, observations: int):
        self.data, self.sample_size, self.sample_seed = data, sample_size, sample_seed
        self.observations = observations

    def evaluate(self) -> _Rates:
        data, seed, m = self.data, self.sample_seed, self.observations
        targets = data.population.sample(self.sample_size, m, np.random.default_rng([seed, _CHAIN_TARGETS]))
        control_rows = data.draw_control(len(targets), m, np.random.default_rng([seed, _CHAIN_CONTROL]))
        known = data.raw_rows(targets, control_rows)
        observed = known.observations(m, np.random.default_rng([seed, _CHAIN_PICKS]))
        control = known.control
        cells = data.cells(observed, control)
        aliases_of_cell, true_alias = data.cell_aliases(cells, known.released_positions)

        def score(observations: pa.Table) -> tuple[int, int]:
            cells_of_target: list[list[int]] = [[] for _ in range(len(targets))]
            for tid, cid in zip(observations.column("tid").to_pylist(), data.cell_of(observations, cells).tolist()):
                cells_of_target[tid].append(cid)
            unique = correct = 0
            for tid, cids in enumerate(cells_of_target):
                left = functools.reduce(lambda a, b: np.intersect1d(a, b, assume_unique=True),
                                        (aliases_of_cell(c) for c in cids))
                if len(left) == 1:
                    unique += 1
                    correct += int(left[0]) == true_alias.get(tid)
            return unique, correct

        n = len(targets)
        (unique, correct), (unique_control, correct_control) = score(observed), score(control)
        return _Rates(correct=SampledRate(correct, n, correct_control, n),
                      unique=SampledRate(unique, n, unique_control, n))


@dataclass(frozen=True)
class _Population:
    """Every subscriber of the source, in order of first appearance (deterministic for a given file)."""

    subscribers: pa.Array
    rows: np.ndarray

    def size(self, min_rows: int) -> int:
        return int((self.rows >= min_rows).sum())

    def sample(self, size: int, min_rows: int, rng: np.random.Generator) -> pa.Array:
        """Up to ``size`` subscribers with at least ``min_rows`` source rows, drawn without replacement."""
        eligible = np.flatnonzero(self.rows >= min_rows)
        if len(eligible):
            eligible = np.sort(rng.choice(eligible, size=min(size, len(eligible)), replace=False))
        return self.subscribers.take(pa.array(eligible, pa.int64()))


@dataclass(frozen=True)
class _ControlDraw:
    """Per control observation (target-major, then observation index): the rows lending the window and the rest."""

    time_rows: np.ndarray
    rest_rows: np.ndarray
    per_target: int


@dataclass(frozen=True)
class _Known:
    """What the attacker knows about the sampled targets, and the control observations; plus the truth."""

    rows: pa.Table
    """tid, rid and the observed keys of every source row of every target, ordered by (tid, rid)."""
    released_positions: list[set[int]]
    """Per target: positions of its released rows (evaluator truth)."""
    control: pa.Table

    def observations(self, per_target: int, rng: np.random.Generator) -> pa.Table:
        """``per_target`` distinct raw rows of each target, chosen at random: tid, j and the observed keys."""
        tid = self.rows.column("tid").to_numpy()
        order = np.lexsort((rng.random(len(tid)), tid))
        rank = np.empty(len(tid), dtype=np.int64)
        rank[order] = np.arange(len(order)) - np.searchsorted(tid[order], tid[order], side="left")
        picked = np.flatnonzero(rank < per_target)
        observations = self.rows.drop_columns(["rid"]).take(pa.array(picked, pa.int64()))
        return observations.append_column("j", pa.array(rank[picked]))


class _Data:
    """One DuckDB connection over the source (attacker knowledge, truth) and the release (what is matched).

    ``src`` shows each source row's observation as the release would show it (o0, o1, o2: the
    window, province and app that the release keeps, coarsened as it coarsens); ``rel`` shows each
    released row's position and the same columns. Queries join small tables (targets, observed
    cells) to these views, so work is bounded by the sample times the rows of the cells it names.
    """

    def __init__(self, release: ReleaseUnderTest, alias_released: bool):
        self.release = release
        schema, config = release.schema, release.config
        released_qis = config.released_qis(schema)
        expressions = dict(zip(schema.categorical_qis, cell_expressions(config, schema)))
        known = [name for name in (schema.time, schema.province, schema.app) if name in released_qis]
        self.known_columns = tuple(known)
        self.time_known = schema.time in known
        self.keys = [f"o{i}" for i in range(len(known))]
        self.row_ids = release.released_row_ids()
        self.source_rows = pq.ParquetFile(release.source_path).metadata.num_rows
        self.connection = duck.connect()
        source_select = ", ".join(
            [f"{ROW_ID} AS rid", f"{sql_identifier(schema.subscriber)} AS sub"]
            + [f"{expressions[name]} AS {key}" for name, key in zip(known, self.keys)]
        )
        released_select = ", ".join(
            ["file_row_number AS pos"] + [f"{sql_identifier(name)} AS {key}" for name, key in zip(known, self.keys)]
            + ([f"{sql_identifier(ALIAS_COLUMN)} AS alias"] if alias_released else [])
        )
        self.connection.execute(
            f"CREATE TEMP VIEW src AS SELECT {source_select} FROM read_parquet({sql_literal(release.source_path)})")
        self.connection.execute(
            f"CREATE TEMP VIEW rel AS SELECT {released_select} "
            f"FROM read_parquet({sql_literal(release.released_path)}, file_row_number = true)")
        self._population: _Population | None = None

    def __enter__(self) -> "_Data":
        return self

    def __exit__(self, *exc) -> None:
        self.connection.close()

    def _arrow(self, query: str, **tables: pa.Table) -> pa.Table:
        for name, table in tables.items():
            self.connection.register(name, table)
        try:
            return self.connection.sql(query).to_arrow_table()
        finally:
            for name in tables:
                self.connection.unregister(name)

    def _on(self, left: str, right: str) -> str:
        return " AND ".join(f"{left}.{k} = {right}.{k}" for k in self.keys) or "TRUE"

    def _keys_of(self, alias: str) -> str:
        return "".join(f", {alias}.{k}" for k in self.keys)

    # -- the attacker's knowledge, drawn from the source ------------------------------------------

    @property
    def population(self) -> _Population:
        if self._population is None:
            table = duck.grouped(self.connection, "sub", "sub, count(*) AS n, min(rid) AS first", "FROM src",
                                 self.source_rows)
            order = np.argsort(table.column("first").to_numpy(), kind="stable")
            self._population = _Population(subscribers=table.column("sub").take(pa.array(order)).combine_chunks(),
                                           rows=table.column("n").to_numpy()[order])
        return self._population

    def draw_control(self, targets: int, per_target: int, rng: np.random.Generator) -> _ControlDraw:
        count = targets * per_target
        high = max(self.source_rows, 1)
        return _ControlDraw(rng.integers(0, high, size=count), rng.integers(0, high, size=count), per_target)

    def raw_rows(self, targets: pa.Array, control: _ControlDraw) -> _Known:
        """One pass over the source: every row of the targets, and the rows the control draws name."""
        wanted_subscribers = pa.table({"sub": targets, "tid": pa.array(np.arange(len(targets)), pa.int64())})
        wanted_rows = pa.table({"rid": _distinct(np.concatenate([control.time_rows, control.rest_rows]))})
        rows = self._arrow(
            f"SELECT w.tid, s.rid{self._keys_of('s')} FROM src s LEFT JOIN wanted_subscribers w USING (sub) "
            f"WHERE w.tid IS NOT NULL OR s.rid IN (SELECT rid FROM wanted_rows) ORDER BY w.tid NULLS LAST, s.rid",
            wanted_subscribers=wanted_subscribers, wanted_rows=wanted_rows)
        is_target = rows.column("tid").is_valid()
        target_rows = rows.filter(is_target)
        drawn = rows.filter(pc.invert(is_target)).drop_columns(["tid"])
        # A target's row may also be a drawn control row: look drawn rows up in every row read.
        every = pa.concat_tables([target_rows.drop_columns(["tid"]), drawn])
        by_rid = every.column("rid").to_numpy()
        order = np.argsort(by_rid, kind="stable")
        count = len(control.time_rows)
        columns = {"tid": np.repeat(np.arange(len(targets)), control.per_target),
                   "j": np.tile(np.arange(control.per_target), len(targets))}
        for i, key in enumerate(self.keys):
            lender = control.time_rows if (i == 0 and self.time_known) else control.rest_rows
            at = order[np.searchsorted(by_rid, lender, sorter=order)] if count else np.empty(0, np.int64)
            columns[key] = every.column(key).take(pa.array(at, pa.int64()))
        tid = target_rows.column("tid").to_numpy()
        rid = target_rows.column("rid").to_numpy()
        positions: list[set[int]] = [set() for _ in range(len(targets))]
        kept = self.release.keep[rid]
        for t, position in zip(tid[kept].tolist(), self.release.positions_of(rid[kept]).tolist()):
            positions[t].add(position)
        return _Known(rows=target_rows, released_positions=positions, control=pa.table(columns))

    # -- the release, looked up cell by cell -------------------------------------------------------

    def cells(self, *observations: pa.Table) -> pa.Table:
        """The distinct observed cells: the observed keys and a cell id."""
        if not self.keys:
            return pa.table({"cid": pa.array([0], pa.int64())})
        union = pa.concat_tables([o.select(self.keys) for o in observations])
        keys = ", ".join(self.keys)
        return self._arrow(f"SELECT {keys}, (row_number() OVER () - 1)::BIGINT AS cid "
                           f"FROM (SELECT DISTINCT {keys} FROM obs)", obs=union)

    def cell_of(self, observations: pa.Table, cells: pa.Table) -> np.ndarray:
        """The cell id of each observation, in the observations' order."""
        if not self.keys:
            return np.zeros(observations.num_rows, dtype=np.int64)
        numbered = observations.select(self.keys).append_column("n", pa.array(np.arange(observations.num_rows)))
        joined = self._arrow(f"SELECT o.n, c.cid FROM obs o JOIN cells c ON {self._on('o', 'c')} ORDER BY o.n",
                             obs=numbered, cells=cells)
        if joined.num_rows != observations.num_rows:
            raise ValueError("an observation has a null released value: the release's coarsening does not cover it")
        return joined.column("cid").to_numpy()

    def released_counts(self, cells: pa.Table) -> tuple[dict[int, int], dict[int, int]]:
        """Per observed cell: released rows in it, and the smallest position among them (absent: no row)."""
        counts = self._arrow(f"SELECT c.cid, count(*) AS n, min(r.pos) AS pos FROM rel r "
                             f"JOIN cells c ON {self._on('r', 'c')} GROUP BY c.cid", cells=cells)
        cids = counts.column("cid").to_pylist()
        return dict(zip(cids, counts.column("n").to_pylist())), dict(zip(cids, counts.column("pos").to_pylist()))

    def cell_aliases(self, cells: pa.Table, positions: list[set[int]]):
        """One pass over the release: the aliases of each observed cell, and each target's own alias (truth).

        Aliases travel as DuckDB's 64-bit hash of the alias string, not as strings: 16 bytes a row for
        the rows of the observed cells instead of about 40 (two aliases of one cell colliding has odds
        near 1e-12). Returns (cell id -> sorted alias hashes, target id -> hash of its released rows' alias).
        """
        wanted = pa.table({"pos": pa.array([p for found in positions for p in found], pa.int64()),
                           "tid": pa.array([t for t, found in enumerate(positions) for _ in found], pa.int64())})
        truth = self._arrow("SELECT DISTINCT w.tid, hash(r.alias) AS h FROM rel r JOIN wanted w USING (pos)",
                            wanted=wanted)
        true_alias: dict[int, int] = {}
        for tid, alias in zip(truth.column("tid").to_pylist(), truth.column("h").to_pylist()):
            if true_alias.setdefault(tid, alias) != alias:
                raise ValueError(f"{self.release.released_path}: one subscriber carries two aliases")
        rows = self._arrow(f"SELECT c.cid, hash(r.alias) AS h FROM rel r JOIN cells c ON {self._on('r', 'c')} "
                           f"ORDER BY c.cid, h", cells=cells)
        cid = rows.column("cid").to_numpy()
        alias = rows.column("h").to_numpy()
        del rows
        first = np.ones(len(cid), dtype=bool)
        first[1:] = (cid[1:] != cid[:-1]) | (alias[1:] != alias[:-1])
        cid, alias = cid[first], alias[first]
        starts = np.searchsorted(cid, np.arange(len(cells) + 1))

        def aliases_of_cell(cell: int) -> np.ndarray:
            return alias[starts[cell]:starts[cell + 1]]

        return aliases_of_cell, true_alias


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values (np.unique's hash path is two orders of magnitude slower here on 1M int64)."""
    values = np.sort(values)
    return values[np.concatenate([[True], values[1:] != values[:-1]])] if len(values) else values
