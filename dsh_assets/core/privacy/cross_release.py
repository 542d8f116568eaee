"""Cross-release linkage: relink rows (and aliases) between two releases of the same source, and across periods.

Two evaluators, each a class whose docstring states its attacker model:

* ``RowRelinking``: two independent releases of one source and configuration (the stored one and
  an evaluation-only second release with a derived noise seed and alias key, never published nor
  written: its rows are computed for the released cells the probe touches, which are the only
  rows of it the relinking can pick).
  Sampled rows of the first are matched to the second by their measurements; where an alias is
  released, aliases are mapped by the majority of their rows' matches.
* ``PeriodAliasLinkage``: the release and the previous period's release of the same
  configuration; where an alias is released, the share of this period's aliases found again.

The evaluator's truth (which source row and subscriber each released row is) decides success; it
is used in memory only and never reaches the result's figures or metadata.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections import Counter
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsh_assets.core import duck
from dsh_assets.core.duck import sql_identifier, sql_literal
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.privacy.stats import FULL, LIGHT, AttackResult, SampledRate, plain_values
from dsh_assets.core.release.schema import ROW_ID
from dsh_assets.core.release.source import stored_rows
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.release.transform import (
    ALIAS_COLUMN,
    DEFAULT_BATCH_ROWS,
    ReleasePlan,
    RowTransform,
    ValueStage,
    check_app_coverage,
    column_maxima,
    noisy_columns,
    plan_release,
)

ASSUMPTIONS = (
    "Row relinking between two releases (the stored release A and an evaluation-only second release B of the "
    "same source and configuration, with a noise seed and alias key derived for evaluation; B is never published "
    "and never written: its rows are computed, as its release would write them, for the released cells the "
    "sampled rows of A fall in). Both releases hold the same source rows, so the attacker is assumed "
    "to hold both tables, e.g. a re-release after a re-run with a new seed. For each of 1,000 rows of A drawn "
    "at random (seeded), the attacker takes the rows of B in the same released cell (every categorical "
    "quasi-identifier the release keeps: window or hour, province, app or app group, radio, and the station "
    "where kept) and picks the one with the nearest measurement vector in log space, since the noise is "
    "multiplicative: distance = sum over the released measurements of |ln(a + 1e-6) - ln(b + 1e-6)|, a "
    "measurement null on either side being skipped; ties go to a fixed pseudo-random order of B's rows (not "
    "their position). Success: the pick is the same source row (evaluator truth). Baseline: the chance that a "
    "uniformly random row of the same cell of B is the right one, mean of 1/cell size over the sample; risk is "
    "success above that chance. Where an alias is released, 200 aliases of A drawn at random (seeded) have "
    "every one of their rows relinked and are mapped to the alias of B that most of their picks carry (ties "
    "to the smallest alias); success: it is the same subscriber's alias (no baseline is computed for it). "
    "Row order carries nothing here: each release lists a cell's rows in its own keyed order, so aligning the two "
    "files by position is no better than the chance baseline; this evaluator measures what the measurements give "
    "away. "
    "Across periods (where the previous period's release of the same configuration exists): rows differ from one "
    "period to the next, so rows are not relinked. Where an alias is released in both periods, the figure is the "
    "share of this period's aliases that appear in the previous period's release AND belong to the same "
    "subscriber there (exact, every alias; evaluator truth). With aliases keyed per period (alias_scope = "
    "\"period\", the default) it is 0; with one alias key for every period (\"forever\") it is the share of "
    "returning subscribers whose history the alias links, which is what an alias costs over time. "
    "Without an alias it is not computed: linking periods through measurement habits is not modelled. "
    "A light evaluation (a candidate the publication does not try) probes the attacker's light_sample_size rows "
    "and aliases in the same proportion, against a second release made from the rows of the probed cells alone: "
    "each cell whole, so every operation within a cell is as a whole second release makes it, while an operation "
    "over a whole (app, radio) group (coding bounds, the copula's correlations) takes its statistics from those "
    "rows."
)

DEFAULT_SAMPLE_SIZE = 1000
DEFAULT_SAMPLE_SEED = 1000
DEFAULT_ALIAS_SAMPLE_SIZE = 200
"""Aliases whose every row is relinked (about 5.5 rows each): the probe, hence the work, stays near 2,000 rows."""
EPS = 1e-6
"""Added before the logarithm so that a zero measurement (which the noise keeps at zero) has a finite log."""
SECOND_RELEASE_OF = {
    FULL: "evaluation-only, derived noise seed and alias key, computed for the probed cells, never written",
    LIGHT: ("light: evaluation-only, derived noise seed and alias key, made from the probed cells' rows alone (an "
            "operation over a whole (app, radio) group takes its statistics from those rows), removed after the "
            "step"),
}
SECOND_RELEASE_LABEL = "cross-release"
"""Label of the derived secrets of the evaluation-only second release."""

# Tie-break: a fixed bijection of B's row position (multiplier coprime to a prime modulus above 2^32),
# so ties do not go to the lowest position, which the identical row order of A and B would favour.
_TIE_MULTIPLIER, _TIE_OFFSET, _TIE_MODULUS = 2654435761, 40503, 4294967311

_ROW_SAMPLE, _ALIAS_SAMPLE = 0, 1
_FEW_ROWS = 16
"""``SecondRelease.rows`` of at most one row in this many of the source reads them through DuckDB."""

BOUND_GROUPS = 4
"""Relinking compares rows by a bound first (``distance_bound``): the measurements fall in this many groups."""
BOUND_SLACK = 1e-9
"""Relative and absolute slack on the distance a row's bound must stay within: far above the rounding of sums of a
few dozen logarithms, so no row the full distance would find as near is left out."""


@dataclass(frozen=True)
class SecondRelease:
    """The evaluation-only second release of a stored release: its plan and row transform, never a file.

    A row of it is what its release would write (the transform is a pure function of the row, keyed
    per release), at the position its plan gives; ``rows`` computes the rows asked for.
    """

    source_path: Path
    plan: ReleasePlan
    transform: RowTransform
    stage: ValueStage | None = None
    """Where the configuration moves values between rows: its measurements at each position."""
    source_row_ids: np.ndarray | None = None
    """Made from part of the source (``light_second_release``): the stored source's row id of each of its rows,
    which it numbers from 0; every row id in and out is the stored source's."""

    @property
    def names(self) -> list[str]:
        return self.transform.target.names

    def released_row_ids(self) -> np.ndarray:
        return self.plan.order if self.source_row_ids is None else self.source_row_ids[self.plan.order]

    @cached_property
    def position_of_row(self) -> np.ndarray:
        """Per row id of its own source, its position in this release: an array of that source's length, made
        once."""
        return self.plan.position_of_row()

    def positions_of(self, row_ids: np.ndarray) -> np.ndarray:
        return self.position_of_row[self._own(row_ids)]

    def _own(self, row_ids: np.ndarray) -> np.ndarray:
        """The stored source's row ids as its own source numbers them (a part of the source: their ranks)."""
        row_ids = np.asarray(row_ids, dtype=np.int64)
        if self.source_row_ids is None:
            return row_ids
        own = np.searchsorted(self.source_row_ids, row_ids)
        if len(row_ids) and not np.array_equal(self.source_row_ids[np.minimum(own, len(self.source_row_ids) - 1)],
                                               row_ids):
            raise ValueError("the light second release holds only the probed cells' rows; a row outside them was "
                             "asked for")
        return own

    def rows(self, row_ids: np.ndarray, alias: bool = True) -> pa.RecordBatchReader:
        """Its rows of the given source row ids, in row id order: the released columns (the alias only with
        ``alias``: it costs a keyed hash per subscriber) and position ``pos``.

        Streamed: each batch of the source is read, filtered to the rows asked for and transformed, so
        memory follows a batch, not the rows asked for (the probe's cells can hold most of the release). A few
        rows (the probe's twins) are read by DuckDB, which decodes the other columns only where a row is asked
        for (a third of the time of reading every batch, at 1,000 rows of 11M).
        """
        transform = self.transform
        if not alias and ALIAS_COLUMN in transform.target.names:
            transform = dataclasses.replace(transform, target=pa.schema(
                [field for field in transform.target if field.name != ALIAS_COLUMN]), alias_key=None)
        schema = transform.target.append(pa.field("pos", pa.int64()))
        row_ids = self._own(row_ids)
        position = self.position_of_row

        def released(source_batches):
            aliaser = transform.aliaser()
            for batch in source_batches:
                positions = position[batch.column(ROW_ID).to_numpy()]
                columns = transform.released_columns(batch, aliaser)
                if self.stage is not None:
                    moved = self.stage.columns_at(positions.astype(np.int64))
                    columns = [moved.get(name, column) for name, column in zip(transform.target.names, columns)]
                yield pa.RecordBatch.from_arrays([*columns, pa.array(positions, pa.int64())], schema=schema)

        if len(row_ids) * _FEW_ROWS <= len(self.plan.keep):
            return pa.RecordBatchReader.from_batches(schema, released(self._few_source_rows(row_ids, transform)))
        wanted = np.zeros(len(self.plan.keep), dtype=bool)
        wanted[row_ids] = True

        def asked_batches():
            parquet = pq.ParquetFile(self.source_path, pre_buffer=False)
            for batch in parquet.iter_batches(batch_size=DEFAULT_BATCH_ROWS, columns=transform.read_columns):
                asked = wanted[batch.column(ROW_ID).to_numpy()]
                if asked.any():
                    yield batch.filter(pa.array(asked))

        return pa.RecordBatchReader.from_batches(schema, released(asked_batches()))

    def _few_source_rows(self, row_ids: np.ndarray, transform: RowTransform):
        """The source's rows of these row ids, in row id order, in batches (columns as the transform reads them)."""
        columns = ", ".join(sql_identifier(name) for name in transform.read_columns)
        with duck.connect() as connection:
            connection.register("asked_rows", pa.table({ROW_ID: pa.array(row_ids, pa.int64())}))
            reader = connection.sql(
                f"SELECT {columns} FROM read_parquet({sql_literal(str(self.source_path))}) "
                f"SEMI JOIN asked_rows USING ({ROW_ID}) ORDER BY {ROW_ID}").to_arrow_reader(DEFAULT_BATCH_ROWS)
            yield from reader

    def aliases(self, positions: np.ndarray) -> pa.Table:
        """The alias of its rows at these positions (``pos``, ``alias``), computed from the subscriber alone."""
        aliaser = self.transform.aliaser()
        subscriber = self.transform.schema.subscriber
        row_ids = np.sort(self.plan.order[np.asarray(positions, dtype=np.int64)])
        rows = pq.read_table(self.source_path, columns=[ROW_ID, subscriber],
                             filters=pc.field(ROW_ID).isin(pa.array(row_ids, pa.int64())))
        return pa.table({"pos": pa.array(self.position_of_row[rows.column(ROW_ID).to_numpy()], pa.int64()),
                         "alias": aliaser(rows.column(subscriber).combine_chunks())})


def make_second_release(release: ReleaseUnderTest, secrets: Secrets, apps) -> SecondRelease:
    """The evaluation-only second release of ``release``: derived seed and key, the same source rows in its own
    order (a mismatch raises)."""
    check_app_coverage(release.config, apps)
    second = _second_release(release, secrets, release.source_path, len(release.keep))
    if not np.array_equal(second.plan.keep, release.keep):
        raise ValueError(f"second release of {release.config.id}: its rows differ from the stored release's plan")
    return second


def evaluate_light(release: ReleaseUnderTest, secrets: Secrets, apps, scratch: str | os.PathLike, sample_size: int,
                   *, previous_period: ReleaseUnderTest | None = None) -> CrossReleaseResult:
    """``evaluate``'s light evaluation: a probe of ``sample_size`` rows (and aliases in the full probe's
    proportion) against ``light_second_release``, made in a private folder of ``scratch`` removed after it."""
    alias_sample_size = max(1, sample_size * DEFAULT_ALIAS_SAMPLE_SIZE // DEFAULT_SAMPLE_SIZE)
    Path(scratch).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch, prefix="cross-release-") as folder:
        second = light_second_release(release, secrets, apps, Path(folder), sample_size, alias_sample_size)
        return evaluate(release, second, previous_period=previous_period, sample_size=sample_size,
                        alias_sample_size=alias_sample_size, strength=LIGHT)


def light_second_release(release: ReleaseUnderTest, secrets: Secrets, apps, folder: Path, sample_size: int,
                         alias_sample_size: int, sample_seed: int = DEFAULT_SAMPLE_SEED) -> SecondRelease:
    """The second release of a light evaluation: made as ``make_second_release`` but from the rows of the released
    cells the probe of these sizes touches alone, written to ``folder``. A cell is released
    whole, so it keeps the same rows; what an operation takes over a whole (app, radio) group (coding bounds, the
    copula's correlations) comes from those cells' rows."""
    check_app_coverage(release.config, apps)
    aliases = _alias_first_rows(release.released_path)
    positions, alias_sample = probe_draw(int(release.keep.sum()), aliases, sample_size, sample_seed,
                                         alias_sample_size)
    if alias_sample:
        with duck.connect() as connection:
            connection.register("probe_aliases", pa.table({"alias": pa.array(alias_sample, pa.string())}))
            alias_rows = connection.sql(
                f"SELECT file_row_number AS pos FROM read_parquet({sql_literal(release.released_path)}, "
                f'file_row_number = true) WHERE "{ALIAS_COLUMN}" IN (SELECT alias FROM probe_aliases)'
            ).fetchnumpy()["pos"].astype(np.int64)
        positions = np.union1d(positions, alias_rows)
    cells = np.unique(np.searchsorted(release.cell_starts(), positions, side="right") - 1)
    row_ids = np.sort(release.rows_of_cells(cells))
    rows = stored_rows(release.source_path, row_ids)
    part = folder / "probed_cells.parquet"
    pq.write_table(rows.set_column(rows.schema.get_field_index(ROW_ID), ROW_ID,
                                   pa.array(np.arange(len(row_ids), dtype=np.int64))), part)
    second = _second_release(release, secrets, part, len(row_ids), source_row_ids=row_ids)
    if not second.plan.keep.all():
        raise ValueError(f"light second release of {release.config.id}: a probed cell was not released whole")
    return second


def _second_release(release: ReleaseUnderTest, secrets: Secrets, source_path: Path, rows: int,
                    source_row_ids: np.ndarray | None = None) -> SecondRelease:
    """A second release of ``release``'s configuration over ``source_path`` (the stored source or a part of it),
    with secrets derived for it; clipped at the stored source's maxima, as the release is."""
    derived = secrets.derived(SECOND_RELEASE_LABEL)
    # Not stored_plan: this plan serves this step alone, and a cached one would hold its arrays through the run.
    plan = plan_release(source_path, release.config, release.schema, rows, derived, release.plan.period)
    maxima = column_maxima(release.source_path, noisy_columns(release.config, release.schema))
    return SecondRelease(source_path, plan,
                         RowTransform.of(release.config, release.schema, derived, release.plan.period, maxima),
                         ValueStage.of(source_path, plan, release.config, release.schema, derived,
                                       release.plan.period), source_row_ids)


@dataclass(frozen=True)
class PeriodLinkage:
    """This period's aliases found again, with the same subscriber, in the previous period's release."""

    share: float | None
    aliases: int
    linked: int
    returning_subscribers: int
    """Subscribers of this release also present in the previous release (truth): what an alias could link at most."""
    reason: str


@dataclass(frozen=True)
class CrossReleaseResult(AttackResult):
    config_id: str
    relinked: SampledRate
    """Successes over the sampled rows; baseline = expected successes of a random pick in the cell (a sum of 1/size)."""
    mean_cell_size: float
    cell_columns: tuple[str, ...]
    measurement_columns: tuple[str, ...]
    aliases_relinked: SampledRate | None
    """Sampled aliases mapped to the same subscriber's alias; no baseline is computed (see ASSUMPTIONS)."""
    period: PeriodLinkage
    sample_size: int
    sample_seed: int
    strength: str = FULL
    """Light: a smaller probe, against a second release made for its cells alone (``light_second_release``)."""

    def figures(self) -> dict:
        return {
            "cross_release_relinked": float(self.relinked.rate),
            "cross_release_relinked_ci": [float(v) for v in self.relinked.interval],
            "cross_release_relinked_baseline": float(self.relinked.baseline),
            "cross_release_relinked_risk": float(self.relinked.risk),
            "cross_release_n": int(self.relinked.trials),
            "cross_release_aliases_relinked": (None if self.aliases_relinked is None
                                               else float(self.aliases_relinked.rate)),
            "cross_period_aliases_relinked": None if self.period.share is None else float(self.period.share),
            "cross_release_strength": self.strength,
        }

    def warnings(self) -> list[str]:
        if not self.relinked.baseline_as_good_as_attack:
            return []
        low, high = self.relinked.interval
        return [f"row relinking: the chance of a random pick in the cell ({self.relinked.baseline:.4f}) is as good "
                f"as the attack (95% interval {low:.4f}-{high:.4f}); the measurements add nothing measurable"]

    def metadata(self) -> dict:
        metadata = dict(self.figures())
        metadata.update({
            "cross_release_relinked_detail": plain_values(self.relinked.to_dict()),
            "cross_release_mean_cell_size": float(self.mean_cell_size),
            "cross_release_cell": ", ".join(self.cell_columns),
            "cross_release_measurements": len(self.measurement_columns),
            "baseline": "chance: a uniformly random row of the same released cell of the second release",
            "sample_size": self.sample_size,
            "sample_seed": self.sample_seed,
            "second_release": SECOND_RELEASE_OF[self.strength],
        })
        if self.aliases_relinked is not None:
            metadata.update({
                "cross_release_aliases_n": self.aliases_relinked.trials,
                "cross_release_aliases_relinked_successes": self.aliases_relinked.successes,
                "cross_release_aliases_relinked_ci": [float(v) for v in self.aliases_relinked.interval],
            })
        else:
            metadata["cross_release_aliases_note"] = "no alias released"
        metadata.update({
            "cross_period_aliases": self.period.aliases,
            "cross_period_aliases_linked": self.period.linked,
            "cross_period_returning_subscribers": self.period.returning_subscribers,
            "cross_period_note": self.period.reason,
        })
        metadata["assumptions"] = ASSUMPTIONS
        if self.warnings():
            metadata["warning"] = "; ".join(self.warnings())
        return metadata


def evaluate(release: ReleaseUnderTest, second: SecondRelease, *,
             previous_period: ReleaseUnderTest | None = None, sample_size: int = DEFAULT_SAMPLE_SIZE,
             sample_seed: int = DEFAULT_SAMPLE_SEED, alias_sample_size: int = DEFAULT_ALIAS_SAMPLE_SIZE,
             strength: str = FULL) -> CrossReleaseResult:
    """Rows (and aliases) relinked against the ``second`` release; aliases linked to ``previous_period``.

    See ASSUMPTIONS. The caller makes the second release (``make_second_release``).
    """
    if sample_size < 1 or alias_sample_size < 1:
        raise ValueError("sample_size and alias_sample_size must be positive")
    aliases = _alias_first_rows(release.released_path)
    rows = RowRelinking(release, second, sample_size, sample_seed, alias_sample_size,
                        aliases).evaluate()
    period = PeriodAliasLinkage(release, previous_period, aliases).evaluate()
    return CrossReleaseResult(
        config_id=release.config.id,
        relinked=rows.relinked,
        mean_cell_size=rows.mean_cell_size,
        cell_columns=rows.cell_columns,
        measurement_columns=rows.measurement_columns,
        aliases_relinked=rows.aliases,
        period=period,
        sample_size=sample_size,
        sample_seed=sample_seed,
        strength=strength,
    )


def _alias_first_rows(path: Path) -> pa.Table | None:
    """Every alias of a release with the position of its first row, in order of first appearance; None without alias."""
    if ALIAS_COLUMN not in pq.read_schema(path).names:
        return None
    with duck.connect() as connection:
        return connection.sql(
            f'SELECT "{ALIAS_COLUMN}" AS alias, min(file_row_number) AS pos '
            f"FROM read_parquet({sql_literal(path)}, file_row_number = true) GROUP BY alias ORDER BY pos"
        ).to_arrow_table()


@dataclass(frozen=True)
class _RowOutcome:
    relinked: SampledRate
    mean_cell_size: float
    cell_columns: tuple[str, ...]
    measurement_columns: tuple[str, ...]
    aliases: SampledRate | None


class RowRelinking:
    """Attacker model: holds two releases of the same source rows with independent noise (and alias keys).

    For a row of release A they take the rows of release B with the same released categorical
    quasi-identifiers and claim the one with the nearest measurements in log space (the noise is
    multiplicative) as the same row; with an alias, they map each alias of A to the alias of B most
    of its rows were matched to. Baseline: a random row of the same cell of B.
    """

    def __init__(self, release: ReleaseUnderTest, second: SecondRelease, sample_size: int, sample_seed: int,
                 alias_sample_size: int = DEFAULT_ALIAS_SAMPLE_SIZE, aliases: pa.Table | None = None):
        self.release, self.second = release, second
        self.sample_size, self.sample_seed, self.alias_sample_size = sample_size, sample_seed, alias_sample_size
        self.aliases = aliases if aliases is not None else _alias_first_rows(release.released_path)

    def evaluate(self) -> _RowOutcome:
        release, schema = self.release, self.release.schema
        names = pq.read_schema(release.released_path).names
        if self.second.names != names:
            raise ValueError(f"{release.released_path}: the second release is not of the same configuration "
                             f"(columns differ)")
        rows = int(release.keep.sum())
        if pq.ParquetFile(release.released_path).metadata.num_rows != rows:
            raise ValueError(f"{release.released_path}: {pq.ParquetFile(release.released_path).metadata.num_rows} "
                             f"rows, the plan keeps {rows}")
        cell = tuple(c for c in release.config.released_qis(schema) if c in names)
        measurements = tuple(m for m in schema.measurements if m in names)
        alias = ALIAS_COLUMN in names
        row_ids = release.released_row_ids()

        positions, alias_sample = probe_draw(rows, self.aliases if alias else None, self.sample_size,
                                             self.sample_seed, self.alias_sample_size)
        with duck.connect() as connection:
            picks = _relink(connection, release, self.second, cell, measurements, alias, positions, alias_sample)
            if alias:  # truth: the alias in B of the same source row (B's twin), looked up by B's own order
                twins = self.second.positions_of(row_ids[picks.column("a_pos").to_numpy()])
                picks = picks.append_column("twin_alias", _aliases_at(connection, twins))

        # Truth: position p of a release is source row released_row_ids()[p]; each release has its own order.
        sampled = picks.filter(pc.is_in(picks.column("a_pos"), pa.array(positions, pa.int64())))
        a_pos, b_pos = sampled.column("a_pos").to_numpy(), sampled.column("b_pos").to_numpy()
        sizes = sampled.column("cell_size").to_numpy().astype(np.float64)
        b_row_ids = self.second.released_row_ids()
        correct = int((row_ids[a_pos] == b_row_ids[b_pos]).sum()) if len(a_pos) else 0
        relinked = SampledRate(correct, len(positions), float((1.0 / sizes).sum()), len(positions))
        aliases = _alias_share(picks, alias_sample) if alias else None
        return _RowOutcome(relinked=relinked, mean_cell_size=float(sizes.mean()) if len(sizes) else 0.0,
                           cell_columns=cell, measurement_columns=measurements, aliases=aliases)


def probe_draw(rows: int, aliases: pa.Table | None, sample_size: int, sample_seed: int,
               alias_sample_size: int) -> tuple[np.ndarray, list[str]]:
    """The probe: ``sample_size`` release positions of ``rows`` drawn at random (seeded, sorted) and, where an alias
    is released (``aliases``, from ``_alias_first_rows``), ``alias_sample_size`` of its aliases."""
    positions = np.sort(np.random.default_rng([sample_seed, _ROW_SAMPLE]).choice(
        rows, size=min(sample_size, rows), replace=False)) if rows else np.empty(0, np.int64)
    alias_sample: list[str] = []
    if aliases is not None and aliases.num_rows:
        drawn = np.random.default_rng([sample_seed, _ALIAS_SAMPLE]).choice(
            aliases.num_rows, size=min(alias_sample_size, aliases.num_rows), replace=False)
        alias_sample = aliases.column("alias").take(pa.array(np.sort(drawn))).to_pylist()
    return positions, alias_sample


def group_sums(logs: list[str]) -> list[str]:
    """Per row, the sum of the log measurements ``logs`` (SQL) of each of BOUND_GROUPS groups, h0.. (NULL where one
    is null): the row's side of ``distance_bound``."""
    if not logs:
        return []
    groups = np.array_split(np.arange(len(logs)), min(BOUND_GROUPS, len(logs)))
    return [" + ".join(logs[i] for i in group) + f" AS h{g}" for g, group in enumerate(groups)]


def distance_bound(left: str, right: str, measurements: int) -> str:
    """A lower bound on the distance in log space between rows ``left`` and ``right`` (with their ``group_sums``):
    per group, the difference of their sums (the triangle inequality), 0 where either has a null in the group
    (the distance skips those terms). Far cheaper than the distance, and never above it but for rounding."""
    return " + ".join(f"coalesce(abs({left}.h{g} - {right}.h{g}), 0)"
                      for g in range(min(BOUND_GROUPS, measurements))) or "0"


def within_bound(bound: str, distance: str) -> str:
    """``bound`` within ``distance`` up to BOUND_SLACK: what the full distance could still find as near."""
    return f"{bound} <= {distance} * {1 + BOUND_SLACK} + {BOUND_SLACK}"


def log_measurement(column: str) -> str:
    """A measurement as every relinking compares it: its log after EPS (null stays null). The one expression, so
    a row's ``group_sums`` over raw measurements equal the sums of its log columns bit for bit."""
    return f"ln({sql_identifier(column)} + {EPS})"


def relinking_columns(cell, measurements, alias: bool) -> str:
    """Cell columns c0.., log measurements l0.. (null stays null) and the alias, from a release's own columns."""
    columns = [f"{sql_identifier(c)} AS c{i}" for i, c in enumerate(cell)]
    columns += [f"{log_measurement(m)} AS l{i}" for i, m in enumerate(measurements)]
    if alias:
        columns.append(f"{sql_identifier(ALIAS_COLUMN)} AS alias")
    return ", ".join(columns)


def _relink(connection, release: ReleaseUnderTest, second: SecondRelease, cell, measurements, alias: bool,
            positions: np.ndarray, alias_sample: list[str]) -> pa.Table:
    """Per probed row of A: the nearest row of B in its cell (b_pos) and the cell size; with aliases, a_alias,
    b_alias (the pick's alias) and twin_alias (the alias in B of the same source row, the truth).

    Probed rows: the sampled positions and every row of the sampled aliases, filtered before their
    logarithms are taken. B's rows are computed for the probe's cells only and streamed through the join
    with the probe (``b_rows``): a row of B in another cell never joins the probe, so the picks are those
    against the whole of B. B's aliases (a keyed hash per subscriber) are computed for the picks and the
    twins alone (``b_aliases``).
    """
    a = release.released_path
    _make_probe(connection, a, cell, measurements, positions, alias_sample if alias else None)
    keys = [f"c{i}" for i in range(len(cell))]
    in_probed_cells = (f"SEMI JOIN (SELECT DISTINCT {', '.join(keys)} FROM probe) p ON "
                       + " AND ".join(f'r."{c}" = p.c{i}' for i, c in enumerate(cell)) if cell else "")
    released_a = f"read_parquet({sql_literal(a)}, file_row_number = true) r {in_probed_cells}"
    cell_rows = connection.sql(f"SELECT file_row_number AS pos FROM {released_a}").fetchnumpy()["pos"].astype(np.int64)
    # B holds the same source rows with the same cells as A (the plans keep the same rows): its cell sizes are A's.
    cell_columns = ", ".join(f'r."{c}" AS c{i}' for i, c in enumerate(cell)) or "NULL AS c"
    connection.execute(f"CREATE TEMP TABLE cell_sizes AS SELECT {cell_columns}, count(*) AS cell_size "
                       f"FROM {released_a} GROUP BY ALL")
    sums = group_sums([f"l{i}" for i in range(len(measurements))])
    narrow = ", ".join(["*", *sums])
    on = " AND ".join(f"p.c{i} = b.c{i}" for i in range(len(cell))) or "TRUE"
    distance = " + ".join(f"coalesce(abs(p.l{i} - b.l{i}), 0)" for i in range(len(measurements))) or "0"
    tie = f"(b.pos * {_TIE_MULTIPLIER} + {_TIE_OFFSET}) % {_TIE_MODULUS}"
    row_ids = release.released_row_ids()
    # The twin (B's row of the probed row's source row: the truth) bounds the pick's distance, so only rows of B
    # whose bound is within the twin's distance can be the pick; without a twin in its cell, every row can.
    probed = connection.sql("SELECT pos FROM probe").fetchnumpy()["pos"].astype(np.int64)
    connection.register("probe_twins", pa.table({
        "pos": pa.array(probed, pa.int64()), "twin": pa.array(second.positions_of(row_ids[probed]), pa.int64())}))
    connection.register("twin_rows", second.rows(row_ids[probed], alias=False).read_all())
    connection.execute(
        f"CREATE TEMP TABLE bounded_probe AS SELECT p.*, w.twin_d FROM (SELECT {narrow} FROM probe) p "
        f"LEFT JOIN (SELECT p.pos, {distance} AS twin_d FROM probe p JOIN probe_twins t USING (pos) "
        f"JOIN (SELECT pos, {relinking_columns(cell, measurements, False)} FROM twin_rows) b ON b.pos = t.twin AND {on}) w "
        f"USING (pos)")
    # B's rows of the probe's cells are streamed through the join, never stored: only the candidates are kept
    # (at 11M rows c17's probed cells hold nearly every row of B, 2 GB of logs that spilled past DuckDB's limit).
    # The probe is the hash table and the stream probes it: DuckDB cannot size a stream, and would build on it.
    connection.register("b_rows", second.rows(row_ids[cell_rows], alias=False))
    connection.execute("SET disabled_optimizers = 'join_order,build_side_probe_side'")
    try:
        connection.execute(
            f"CREATE TEMP TABLE candidates AS SELECT b.pos AS b_pos, p.pos AS a_pos, {distance} AS d, {tie} AS t "
            f"FROM (SELECT {narrow} FROM (SELECT pos, {relinking_columns(cell, measurements, False)} FROM b_rows)) b "
            f"JOIN bounded_probe p ON {on} "
            f"WHERE p.twin_d IS NULL OR {within_bound(distance_bound('p', 'b', len(measurements)), 'p.twin_d')}")
    finally:
        connection.execute("RESET disabled_optimizers")
    on_cell = " AND ".join(f"p.c{i} = n.c{i}" for i in range(len(cell))) or "TRUE"
    connection.execute(
        f"CREATE TEMP TABLE picks AS SELECT k.a_pos, k.b_pos, n.cell_size FROM (SELECT a_pos, "
        f"arg_min(b_pos, (d, t)) AS b_pos FROM candidates GROUP BY a_pos) k "
        f"JOIN probe p ON p.pos = k.a_pos JOIN cell_sizes n ON {on_cell}")
    if not alias:
        return connection.sql("SELECT a_pos, b_pos, cell_size FROM picks ORDER BY a_pos").to_arrow_table()
    return _picks_with_aliases(connection, release, second)


def _make_probe(connection, released_path, cell, measurements, positions: np.ndarray,
                alias_sample: list[str] | None) -> None:
    """The temporary table ``probe``: A's rows at ``positions`` and, with aliases, every row of the sampled
    aliases, as relinking compares them (filtered before their logarithms are taken)."""
    connection.register("probe_positions", pa.table({"pos": pa.array(positions, pa.int64())}))
    alias_filter = ""
    if alias_sample is not None:
        connection.register("probe_aliases", pa.table({"alias": pa.array(alias_sample, pa.string())}))
        alias_filter = f' OR "{ALIAS_COLUMN}" IN (SELECT alias FROM probe_aliases)'
    connection.execute(
        f"CREATE TEMP TABLE probe AS SELECT pos, "
        f"{relinking_columns(cell, measurements, alias_sample is not None)} FROM ("
        f"  SELECT file_row_number AS pos, * FROM read_parquet({sql_literal(released_path)}, file_row_number = true)"
        f"  WHERE file_row_number IN (SELECT pos FROM probe_positions){alias_filter})")


def _picks_with_aliases(connection, release: ReleaseUnderTest, second: SecondRelease) -> pa.Table:
    """The picks with A's alias and the pick's alias in B. B's aliases are computed only for the positions
    involved, the picks' and the twins' (the truth), in ``b_aliases``."""
    picked = connection.sql("SELECT a_pos, b_pos FROM picks").fetchnumpy()
    twins = second.positions_of(release.released_row_ids()[picked["a_pos"].astype(np.int64)])
    connection.register("b_aliases", second.aliases(np.union1d(picked["b_pos"].astype(np.int64), twins)))
    return connection.sql(
        "SELECT k.a_pos, k.b_pos, k.cell_size, p.alias AS a_alias, pick.alias AS b_alias "
        "FROM picks k JOIN probe p ON p.pos = k.a_pos JOIN b_aliases pick ON pick.pos = k.b_pos ORDER BY k.a_pos"
    ).to_arrow_table()


def _aliases_at(connection, positions: np.ndarray) -> pa.Array:
    """The alias of B at each position (in the given order), from ``b_aliases`` (made by ``_relink``)."""
    connection.register("wanted_positions", pa.table({"pos": pa.array(positions, pa.int64()),
                                                      "i": pa.array(np.arange(len(positions)), pa.int64())}))
    found = connection.sql(
        "SELECT w.i, b.alias FROM wanted_positions w JOIN b_aliases b USING (pos) ORDER BY w.i").to_arrow_table()
    return found.column("alias")


def _alias_share(picks: pa.Table, alias_sample: list[str]) -> SampledRate:
    """Map each sampled alias of A to the alias of B most of its rows were matched to; score against the twin's alias.

    The twin row (B's row of the same source row) carries the same subscriber's alias in B: the
    evaluator's truth. No baseline (baseline_successes = baseline_trials = 0).
    """
    wanted = set(alias_sample)
    votes: dict[str, Counter] = {}
    truth: dict[str, str] = {}
    for a_alias, b_alias, twin in zip(picks.column("a_alias").to_pylist(), picks.column("b_alias").to_pylist(),
                                      picks.column("twin_alias").to_pylist()):
        if a_alias not in wanted:
            continue
        votes.setdefault(a_alias, Counter())[b_alias] += 1
        truth[a_alias] = twin
    correct = 0
    for a_alias, counter in votes.items():
        top = max(counter.values())
        mapped = min(b for b, n in counter.items() if n == top)
        correct += mapped == truth[a_alias]
    return SampledRate(successes=correct, trials=len(alias_sample), baseline_successes=0, baseline_trials=0)


class PeriodAliasLinkage:
    """Attacker model: holds this period's and the previous period's release of the same configuration.

    Rows differ across periods, so only a released alias links them: the attacker joins the two
    releases on the alias. Success (exact, over every alias): the alias is found in the previous
    release and belongs to the same subscriber there. Without an alias nothing is computed.
    """

    def __init__(self, release: ReleaseUnderTest, previous: ReleaseUnderTest | None, aliases: pa.Table | None = None):
        self.release, self.previous, self.aliases = release, previous, aliases

    def evaluate(self) -> PeriodLinkage:
        if self.previous is None:
            return PeriodLinkage(None, 0, 0, 0, "no previous period release of this configuration")
        if self.previous.config.id != self.release.config.id:
            raise ValueError(f"previous period is a release of {self.previous.config.id!r}, "
                             f"not of {self.release.config.id!r}")
        current = self.aliases if self.aliases is not None else _alias_first_rows(self.release.released_path)
        earlier = _alias_first_rows(self.previous.released_path)
        if current is None or earlier is None:
            return PeriodLinkage(None, 0, 0, 0, "no alias released in both periods: rows differ across periods and "
                                                "nothing else links them in this evaluator")
        with duck.connect() as connection:
            connection.register("cur", _with_subscriber(current, self.release))
            connection.register("prev", _with_subscriber(earlier, self.previous))
            # An alias is a keyed hash of one subscriber, so each table has one row per alias and per subscriber.
            aliases, linked = connection.execute(
                "SELECT (SELECT count(*) FROM cur), count(*) FROM cur c JOIN prev p USING (alias) WHERE c.sub = p.sub"
            ).fetchone()
            returning = connection.execute("SELECT count(*) FROM cur JOIN prev USING (sub)").fetchone()[0]
        share = linked / aliases if aliases else 0.0
        return PeriodLinkage(share, int(aliases), int(linked), int(returning),
                             "exact over every alias of this period's release")


def _with_subscriber(aliases: pa.Table, release: ReleaseUnderTest) -> pa.Table:
    """(alias, sub): each alias with the subscriber of its first released row (evaluator truth, in memory only)."""
    first_rows = pa.table({"alias": aliases.column("alias"),
                           "rid": pa.array(release.released_row_ids()[aliases.column("pos").to_numpy()], pa.int64())})
    with duck.connect() as connection:
        connection.register("first_rows", first_rows)
        return connection.sql(
            f'SELECT f.alias, s."{release.schema.subscriber}" AS sub '
            f"FROM read_parquet({sql_literal(release.source_path)}) s JOIN first_rows f ON s.{ROW_ID} = f.rid"
        ).to_arrow_table()
