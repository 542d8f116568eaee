"""Operations that move measurement values between the rows of a release or blur them over a group.

A release that keeps a session's values together in one row can be found from a few of them by an attacker
who knows the noise. None of the utility figures needs that: the quality groups, Elina's Q1 and Q2 are
per-measurement distributions inside an (app, radio) group. These operations keep each column's distribution
and loosen the tie between a row's measurements, in this order, on the raw values of the released rows in
release order:

* microaggregation: within each released cell, groups of at least ``size`` sessions close in log-measurement
  space (MDAV: maximum distance to the average vector), every value replaced by its group's statistic of that
  measurement; a group's rows then hold the same values, and a value stands for its own row;
* rank swapping: within each released (app, radio) group, each measurement's values are ranked, cut into blocks
  of ``percent``% of the group's values, and within a block paired at random (keyed), the two values of a pair
  exchanged: a value moves at most ``percent``% of the ranks;
* shuffle: within each released cell, each measurement's values permuted by a keyed permutation of their own.

Each permutation is keyed by the release's secret seed, its configuration, period and column (and never shared
with another release), and addressed by release position, so its bits do not depend on batches. Each keeps
the evaluator's truth: per moved column, the source row whose value each position holds.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsh_assets.core.release.cells import coarsen_app
from dsh_assets.core.release.configs import (
    BY_COLUMN, MEDIAN, WITHIN_APP_RADIO, WITHIN_CELL, Coding, ReleaseConfig, Rounding,
)
from dsh_assets.core.release.copula import rank_correlation_donors
from dsh_assets.core.release.noise import stream_key, stream_words
from dsh_assets.core.release.schema import ROW_ID, Schema
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.tables import CACHE_ROWS, cache_slices, narrowest_index

_CELL_BITS = 24
"""Runs (cells, blocks) are numbered in 24 bits when a keyed word orders the positions within them."""
CHUNK_ROWS = CACHE_ROWS
"""Rows ordered at a time where runs are ordered within themselves (a longer run alone): a chunk's sort stays in
the CPU's cache (half the time of chunks of 4M rows, on 11M rows in cells of a few thousand)."""


def stable_order(rank: np.ndarray) -> np.ndarray:
    """``np.argsort(rank, kind="stable")``, in about half its time on millions of 64-bit ranks: an unstable sort
    (numpy's introsort, vectorised where the CPU allows), then the rare runs of equal ranks put back in index
    order."""
    order = np.argsort(rank)
    ranked = rank[order]
    tie = np.flatnonzero(ranked[1:] == ranked[:-1])
    if len(tie):
        tied = np.union1d(tie, tie + 1)  # runs of equal ranks, each a stretch of consecutive places
        order[tied] = order[tied][np.lexsort((order[tied], ranked[tied]))]
    return order


def run_chunks(starts: np.ndarray):
    """(first run, end run) of consecutive runs of ``starts`` holding at most CHUNK_ROWS positions (a larger run
    alone): a run never straddles two chunks."""
    first = 0
    while first < len(starts) - 1:
        last = max(first + 1, int(np.searchsorted(starts, starts[first] + CHUNK_ROWS, side="right")) - 1)
        yield first, last
        first = last


def cell_runs(cell_sizes: np.ndarray, k: int) -> np.ndarray:
    """The first release position of each released cell, and the end: a release lists its cells as runs."""
    return np.concatenate([[0], np.cumsum(cell_sizes[cell_sizes >= k])]).astype(np.int64)


def run_numbers(starts: np.ndarray) -> np.ndarray:
    """Per release position, the number of the run of ``starts`` (the released cell) it lies in."""
    return np.repeat(np.arange(len(starts) - 1, dtype=np.int64), np.diff(starts))


def moved_origins(source_path: str | os.PathLike, order: np.ndarray, starts: np.ndarray, config: ReleaseConfig,
                  schema: Schema, secrets: Secrets, period: str) -> Iterator[tuple[str, np.ndarray]]:
    """The evaluator's truth of ``config``'s moves, a column at a time: per column an operation moves between rows,
    the source row id whose value each release position holds. Rank swapping pairs the values
    (``settled_columns``) within the released (app, radio) groups; the shuffle then permutes each column within the
    cell runs ``starts``; a shuffle that keeps rank correlations hands each cell's values out in the order of
    correlated keyed draws (core/release/copula.py) instead. A rank swap and that shuffle read values (their moves
    depend on them); a plain shuffle's permutation does not."""
    columns = released_measurements(config, schema)
    if config.keep_rank_correlation is not None:
        at = positions_in_file(source_path, order)
        donors = rank_correlation_donors(
            (settled for _, settled in settled_columns(source_path, at, starts, config, columns)), len(columns),
            run_numbers(starts).astype(np.int32), _app_radio_groups(source_path, at, config, schema),
            config.keep_rank_correlation, lambda purpose, index: _key(secrets, config, period, purpose, columns[index]))
        for m, donor in zip(columns, donors):
            yield m, order[donor]
        return
    if config.rank_swap is not None:
        at = positions_in_file(source_path, order)
        groups = _app_radio_groups(source_path, at, config, schema)
        settled = settled_columns(source_path, at, starts, config, columns)
    else:
        settled = ((m, None) for m in columns)
    for m, values in settled:
        donor = None if values is None else rank_swap_donors(values, groups, config.rank_swap.percent,
                                                             _key(secrets, config, period, "rank-swap", m))
        if config.shuffle:
            shuffle = shuffle_donors(starts, _key(secrets, config, period, "shuffle", m))
            donor = shuffle if donor is None else donor[shuffle]
        if donor is not None:
            yield m, order[donor]  # positions are 64-bit, row ids as narrow as the order's


def settled_columns(source_path: str | os.PathLike, at: np.ndarray, starts: np.ndarray, config: ReleaseConfig,
                    columns: list[str]) -> Iterator[tuple[str, np.ndarray]]:
    """The values the moves then take from, a column at a time: per measurement of ``columns``, the source's raw
    values of the rows at file positions ``at`` (``positions_in_file`` of the release order), microaggregated
    within the cell runs ``starts`` where ``config`` says so; float64, NaN for null. MDAV's distances take every
    column, so it reads them all at once; the others hold one column at a time."""
    operation = config.microaggregate
    if operation is not None and operation.by != BY_COLUMN:
        values = _raw_values(source_path, at, columns)
        microaggregate(values, starts, operation.size, operation.statistic)
        for m in columns:
            yield m, values.pop(m)
        return
    for m in columns:  # yielded, not held: the consumer owns each column and may work on it in place
        if operation is None:
            yield m, _raw_values(source_path, at, [m])[m]
        else:
            yield m, column_microaggregate(_raw_values(source_path, at, [m])[m], starts, operation.size,
                                           operation.statistic)


@dataclass(frozen=True)
class Coarsening:
    """A release's coarsening operations on one column's values in release order (after the moves and the noise):
    top coding, bottom coding (each bound taken over the group ``within`` names), then rounding, so that every
    released value, a coded bound too, lies on the grid. The groups are listed once for every column."""

    config: ReleaseConfig
    grouped: dict[str, "Grouped"]

    @classmethod
    def of(cls, source_path: str | os.PathLike, at: np.ndarray, starts: np.ndarray, config: ReleaseConfig,
           schema: Schema) -> "Coarsening":
        """``at``: the file position of each release position's source row (``positions_in_file``)."""
        groups = {WITHIN_CELL: lambda: run_numbers(starts),
                  WITHIN_APP_RADIO: lambda: _app_radio_groups(source_path, at, config, schema)}
        within = {coding.within for coding in (config.top_code, config.bottom_code) if coding}
        return cls(config, {name: Grouped.of(groups[name]()) for name in within})

    def __call__(self, values: np.ndarray) -> np.ndarray:
        """``values`` coarsened in place (a stage's column, which only the stage holds), and returned."""
        codings = [(coding, top) for coding, top in ((self.config.top_code, True), (self.config.bottom_code, False))
                   if coding]
        for within, steps in itertools.groupby(codings, key=lambda step: step[0].within):
            code_values(values, self.grouped[within], list(steps), out=values)
        return values if self.config.round is None else round_values(values, self.config.round, out=values)


def released_measurements(config: ReleaseConfig, schema: Schema) -> list[str]:
    dropped = set(config.dropped_columns(schema))
    return [m for m in schema.measurements if m not in dropped]


def _key(secrets: Secrets, config: ReleaseConfig, period: str, purpose: str, column: str) -> np.ndarray:
    """The key of one operation's permutation of one column: secret, and its own per configuration and period."""
    return stream_key(secrets.noise_seed, purpose, config.id, period, column)


def positions_in_file(source_path, order: np.ndarray) -> np.ndarray:
    """Where each row id of ``order`` lies in the source file (a stored source holds row id i at position i)."""
    row_ids = pq.read_table(source_path, columns=[ROW_ID]).column(ROW_ID).to_numpy()
    if np.array_equal(row_ids, np.arange(len(row_ids))):
        return order
    position = np.empty(len(row_ids), dtype=np.int64)
    position[row_ids] = np.arange(len(row_ids))
    return position[order]


def _raw_values(source_path, at: np.ndarray, columns: list[str]) -> dict[str, np.ndarray]:
    """The raw values of ``columns`` of the source rows at file positions ``at``, in that order, NaN for null."""
    parquet = pq.ParquetFile(source_path, pre_buffer=False)  # one column at a time: not the whole table at once
    return {m: pc.fill_null(parquet.read(columns=[m]).column(m), np.nan).to_numpy().astype(np.float64, copy=False)[at]
            for m in columns}


def _app_radio_groups(source_path, at: np.ndarray, config: ReleaseConfig, schema: Schema) -> np.ndarray:
    """Per release position (its source row at file position ``at``), a number for its released (app, radio)
    group: the app as released (grouped where the configuration groups apps), the radio type; a field the
    release drops does not split groups."""
    released = set(pq.read_schema(source_path).names) - set(config.dropped_columns(schema))
    key = np.zeros(len(at), dtype=np.int64)
    for name in (schema.app, schema.radio):
        if name in released:
            column = pq.read_table(source_path, columns=[name]).column(name).combine_chunks()
            column = coarsen_app(column, config) if name == schema.app else column
            encoded = pc.dictionary_encode(column)
            key = key * len(encoded.dictionary) + encoded.indices.to_numpy()[at]
    # numbered in the order of the (app, radio) pairs' codes, as a sort of the distinct pairs numbers them
    present = np.bincount(key) > 0
    return (np.cumsum(present) - 1).astype(narrowest_index(int(present.sum())))[key]


def shuffle_donors(starts: np.ndarray, key: np.ndarray) -> np.ndarray:
    """For each release position, the position whose value it takes: within each run of ``starts`` the positions
    ordered by their keyed words, a permutation of the run (ties, which 40-bit words almost never have, by
    position). A chunk of runs at a time: each chunk's order is its stretch of the whole one."""
    donors = np.empty(int(starts[-1]), dtype=np.int64)
    for first, last in run_chunks(starts):
        positions = np.arange(starts[first], starts[last], dtype=np.int64)
        run = np.repeat(np.arange(first, last, dtype=np.uint64), np.diff(starts[first:last + 1]))
        rank = (run << np.uint64(64 - _CELL_BITS)) | (stream_words(key, positions) >> np.uint64(_CELL_BITS))
        donors[starts[first]:starts[last]] = positions[stable_order(rank)]
    return donors


def rank_swap_donors(values: np.ndarray, groups: np.ndarray, percent: float, key: np.ndarray) -> np.ndarray:
    """For each release position, the position whose value it takes under rank swapping (see the module): within
    each group, the non-null values ranked (ties by position) and cut into blocks of floor(percent% of the group's
    values) ranks, the positions of a block paired in the order of their keyed words and each pair exchanged.
    A block of fewer than two ranks swaps nothing; nulls stay where they are."""
    donor = np.arange(len(values), dtype=np.int64)
    valid = np.flatnonzero(~np.isnan(values))
    if not len(valid):
        return donor
    ranked = valid[np.lexsort((valid, values[valid], groups[valid]))]
    group_of = groups[ranked]
    starts = np.flatnonzero(np.concatenate([[True], group_of[1:] != group_of[:-1]]))
    sizes = np.diff(np.append(starts, len(ranked)))
    block = np.floor(sizes * percent / 100.0).astype(np.int64)
    rank = np.arange(len(ranked)) - np.repeat(starts, sizes)
    width = np.repeat(block, sizes)
    swaps = width >= 2
    ranked, rank, width, group_of = ranked[swaps], rank[swaps], width[swaps], group_of[swaps]
    if not len(ranked):
        return donor
    # One id per (group, block): blocks of one group are consecutive runs of the ranked order.
    block_id = np.concatenate([[0], np.cumsum((group_of[1:] != group_of[:-1]) |
                                              (rank[1:] // width[1:] != rank[:-1] // width[:-1]))])
    order = np.lexsort((stream_words(key, ranked), block_id))
    paired, block_of = ranked[order], block_id[order]
    block_start = np.flatnonzero(np.concatenate([[True], block_of[1:] != block_of[:-1]]))
    lengths = np.diff(np.append(block_start, len(paired)))
    place = np.arange(len(paired)) - np.repeat(block_start, lengths)
    left = np.flatnonzero((place % 2 == 0) & (place + 1 < np.repeat(lengths, lengths)))
    donor[paired[left]], donor[paired[left + 1]] = paired[left + 1], paired[left]
    return donor


MDAV_BLOCK_ROWS = 1_000
"""MDAV runs within blocks of at most this many rows of a cell: its work is quadratic in the rows it groups, so a
cell of n rows costs n x this, not n squared (the cell's rows are in a keyed random order, so a block is a random
part of it)."""


def bounded_runs(starts: np.ndarray, most: int) -> np.ndarray:
    """The runs of ``starts``, each longer than ``most`` cut into the fewest consecutive pieces of at most ``most``
    rows, as equal as can be."""
    sizes = np.diff(starts)
    pieces = np.maximum(1, -(-sizes // most))
    cuts = [starts[:-1]]
    for run in np.flatnonzero(pieces > 1):
        within = np.arange(1, pieces[run]) * sizes[run] // pieces[run]
        cuts.append(starts[run] + within)
    return np.unique(np.concatenate([*cuts, starts[-1:]]))


def microaggregate(values: dict[str, np.ndarray], starts: np.ndarray, size: int, statistic: str) -> None:
    """MDAV within each run of ``starts`` (each cell, in blocks of at most ``MDAV_BLOCK_ROWS`` rows), in place:
    every value replaced by its group's statistic of its column (nulls stay null; a group's statistic is taken over
    its values that are not null). Distances are taken on each measurement's log(1 + value), scaled by its spread
    over the release; a null counts as the median."""
    columns = list(values)
    features = np.column_stack([np.log(np.maximum(values[m], 0.0) + 1.0) for m in columns])
    measured = ~np.isnan(features).all(axis=0)  # a column with no value anywhere takes no part in the distance
    centre, spread = np.zeros(len(columns)), np.ones(len(columns))
    centre[measured] = np.nanmedian(features[:, measured], axis=0)
    spread[measured] = np.nanstd(features[:, measured], axis=0)
    features = np.where(np.isnan(features), centre, features) / np.where(spread > 0, spread, 1.0)
    labels = mdav_labels(features, bounded_runs(starts, MDAV_BLOCK_ROWS), size)
    for m in columns:
        values[m] = group_statistic(values[m], labels, statistic)


_LOCKSTEP_ROWS = 1 << 19
"""Cells of one lockstep batch hold at most this many (padded) rows: their features stay a few tens of MB."""


def mdav_labels(features: np.ndarray, starts: np.ndarray, size: int) -> np.ndarray:
    """A group number per row: MDAV (``_mdav_lockstep``) within each run of ``starts``, the groups numbered run by
    run. Runs of similar size go through MDAV's steps together: one numpy call per step of a batch, not per step
    of a cell."""
    sizes = np.diff(starts)
    local = np.zeros(len(features), dtype=np.int64)
    groups = np.ones(len(sizes), dtype=np.int64)  # a run of fewer than 2 x size rows is one group
    big = np.flatnonzero(sizes >= 2 * size)
    big = big[np.argsort(sizes[big], kind="stable")]
    first = 0
    while first < len(big):
        width = int(sizes[big[first]])
        last = first + 1
        while last < len(big) and sizes[big[last]] <= 1.25 * width and (last - first + 1) * sizes[big[last]] \
                <= _LOCKSTEP_ROWS:
            last += 1
        batch = big[first:last]
        width = int(sizes[batch].max())
        index = starts[batch][:, None] + np.arange(width)[None, :]
        valid = np.arange(width)[None, :] < sizes[batch][:, None]
        labels, counts = _mdav_lockstep(features[np.where(valid, index, 0)], valid, size)
        local[index[valid]] = labels[valid]
        groups[batch] = counts
        first = last
    return local + np.repeat(np.cumsum(groups) - groups, sizes)


def _mdav_lockstep(features: np.ndarray, valid: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """MDAV (Domingo-Ferrer and Torra, 2005) in each of a batch of cells at once: ``features`` (cells, rows,
    dimensions), padded rows marked not ``valid``. In a cell, while at least 3 x size rows remain, the row r
    farthest from the remaining rows' mean and its size - 1 nearest rows form a group, then the row farthest
    from r and its nearest rows another; then one more group if 2 x size rows remain, and the rest (size to
    2 x size - 1 rows; a cell under 2 x size rows is one group) the last. Distances are Euclidean; ties go to
    the lower row. Returns each row's group number within its cell and each cell's number of groups."""
    cells = np.arange(len(features))
    alive = valid.copy()
    left = valid.sum(axis=1)
    labels = np.zeros(valid.shape, dtype=np.int64)
    made = np.zeros(len(features), dtype=np.int64)

    def squared(points: np.ndarray, among: np.ndarray) -> np.ndarray:
        return ((features[among] - points[:, None, :]) ** 2).sum(axis=2)

    def farthest(points: np.ndarray, among: np.ndarray) -> np.ndarray:
        distance = squared(points, among)
        distance[~alive[among]] = -np.inf
        return np.argmax(distance, axis=1)

    def group_around(rows: np.ndarray, among: np.ndarray) -> None:
        distance = squared(features[among, rows], among)
        distance[~alive[among]] = np.inf
        members = np.argsort(distance, axis=1, kind="stable")[:, :size]
        labels[among[:, None], members] = made[among][:, None]
        alive[among[:, None], members] = False
        made[among] += 1

    def centroids(among: np.ndarray) -> np.ndarray:
        kept = alive[among][:, :, None]
        return (features[among] * kept).sum(axis=1) / kept.sum(axis=1)

    while (among := cells[left >= 3 * size]).size:
        r = farthest(centroids(among), among)
        group_around(r, among)
        group_around(farthest(features[among, r], among), among)
        left[among] -= 2 * size
    if (among := cells[left >= 2 * size]).size:
        group_around(farthest(centroids(among), among), among)
        left[among] -= size
    rest = alive & (left > 0)[:, None]
    labels[rest] = np.broadcast_to(made[:, None], labels.shape)[rest]
    return labels, made + (left > 0)


def group_statistic(values: np.ndarray, labels: np.ndarray, statistic: str) -> np.ndarray:
    """Each non-null value replaced by the median (the mean of the two middle values of an even count, as
    numpy's median) or the mean of its group's non-null values; nulls stay null. Groups of MDAV hold fewer than
    2 x size rows, so each is sorted as one row of a padded table, all at once."""
    valid = ~np.isnan(values)
    out = values.copy()
    if not valid.any():
        return out
    groups = int(labels.max()) + 1
    counts = np.bincount(labels[valid], minlength=groups)
    if statistic == MEDIAN:
        order = np.argsort(labels, kind="stable")
        sizes = np.bincount(labels, minlength=groups)
        place = np.arange(len(order)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        table = np.full((groups, int(sizes.max())), np.inf)
        table[labels[order], place] = np.where(valid[order], values[order], np.inf)  # nulls sort last
        table.sort(axis=1)
        rows = np.arange(groups)
        low, high = np.maximum(counts - 1, 0) // 2, counts // 2
        stat = (table[rows, low] + table[rows, np.minimum(high, table.shape[1] - 1)]) / 2
    else:
        stat = np.bincount(labels[valid], weights=values[valid], minlength=groups) / np.maximum(counts, 1)
    out[valid] = stat[labels[valid]]
    return out


def column_microaggregate(values: np.ndarray, starts: np.ndarray, size: int, statistic: str) -> np.ndarray:
    """Per-column microaggregation within each run of ``starts``: the run's non-null values in ascending order
    (ties by position) cut into consecutive groups of ``size``, the last group taking the rest (``size`` to 2 x
    ``size`` - 1 values; a run of fewer than 2 x ``size`` values is one group), each value replaced by its group's
    statistic. Nulls stay null. One sort: O(n log n)."""
    if np.isnan(values).all():
        return values.copy()
    order = GroupOrder.of(values, run_numbers(starts))
    ranked, first, counts = order.ranked, order.first, order.counts
    rank = np.arange(len(ranked)) - np.repeat(first, counts)
    last_group = np.maximum(counts // size - 1, 0)
    local = np.minimum(rank // size, np.repeat(last_group, counts))
    label = np.repeat(np.cumsum(last_group + 1) - (last_group + 1), counts) + local
    out = values.copy()
    out[ranked] = group_statistic(values[ranked], label, statistic)
    return out


@dataclass(frozen=True)
class GroupOrder:
    """A column's non-null positions ordered by (group, value, position), with the first place of each group in that
    order and each group's count of non-null values."""

    ranked: np.ndarray
    first: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray, groups: np.ndarray) -> "GroupOrder":
        """Two stable sorts, by value then by group: a lexicographic sort's order, in half its time."""
        valid = np.flatnonzero(~np.isnan(values))
        by_value = valid[np.argsort(values[valid], kind="stable")]
        ranked = by_value[np.argsort(groups[by_value], kind="stable")]
        group_of = groups[ranked]
        first = np.flatnonzero(np.concatenate([[True], group_of[1:] != group_of[:-1]])) if len(ranked) else \
            np.empty(0, dtype=np.int64)
        return cls(ranked, first, np.diff(np.append(first, len(ranked))))


@dataclass(frozen=True)
class Grouped:
    """Positions listed group by group (ascending group number, then position), with each group's first place in
    that list and each position's group index (its group's place among the groups present): what a per-group order
    statistic needs, taken once for every column."""

    order: np.ndarray
    first: np.ndarray
    index: np.ndarray

    @classmethod
    def of(cls, groups: np.ndarray) -> "Grouped":
        """No sort where the groups are runs already (cells in release order); a radix sort where group numbers fit
        16 bits (the (app, radio) groups)."""
        groups = np.asarray(groups)
        positions = narrowest_index(len(groups))
        if len(groups) and np.all(groups[1:] >= groups[:-1]):
            order = np.arange(len(groups), dtype=positions)
        else:
            narrow = groups.astype(np.int16, copy=False) if len(groups) and groups.max() < 1 << 15 else groups
            order = np.argsort(narrow, kind="stable").astype(positions, copy=False)
        listed = groups[order]
        first = np.flatnonzero(np.concatenate([[True], listed[1:] != listed[:-1]])) if len(order) else \
            np.empty(0, dtype=np.int64)
        del listed
        if len(first) and groups.min() == 0 and groups.max() == len(first) - 1:
            index = groups  # numbered 0.. without gaps, as cells and (app, radio) groups are
        else:
            index = np.empty(len(groups), dtype=narrowest_index(len(first)))
            index[order] = np.repeat(np.arange(len(first)), np.diff(np.append(first, len(order))))
        return cls(order, first, index)


def _nearest_rank(quantile: float, counts: np.ndarray) -> np.ndarray:
    """ceil(q x n), at least 1: the nearest-rank quantile's rank; a product within 1e-9 of an integer counts as that
    integer (0.99 x 100 is 99, not 99.00000000000001)."""
    return np.maximum(np.ceil(quantile * counts - 1e-9), 1).astype(np.int64)


def _bound_place(coding: Coding, top: bool, count: int) -> int:
    """The place (0-based, ascending) of a coding's bound among a group's ``count`` non-null values."""
    if coding.rank is not None:
        return count - min(coding.rank, count) if top else min(coding.rank, count) - 1
    return int(_nearest_rank(coding.quantile, np.array([count]))[0]) - 1


def code_values(values: np.ndarray, groups: "Grouped | np.ndarray", codings: list[tuple[Coding, bool]],
                out: np.ndarray | None = None) -> np.ndarray:
    """Top (``top``) or bottom coding, each (coding, top) of ``codings`` in turn: within each group, the values above
    (below) its bound set to the bound. The bound is the group's nearest-rank ``coding.quantile`` or its
    ``coding.rank``-th most extreme value, over its non-null values as the codings before it left them (a group of
    fewer than ``rank`` values: its least extreme one). Nulls stay null. ``groups``: each value's group, or their
    ``Grouped``. ``out``: where the coded values go (``values`` itself codes them in place); default a new array.

    A selection per group, no sort of the values: O(n). Every bound is an order statistic of the raw values, clipped
    by the bounds before it: a clip keeps the order, so the j-th smallest clipped value is the clipped j-th smallest
    (one selection per group for every coding)."""
    grouped = groups if isinstance(groups, Grouped) else Grouped.of(groups)
    bounds = np.full((len(codings), len(grouped.first)), np.nan)
    for group, (start, end) in enumerate(zip(grouped.first, np.append(grouped.first[1:], len(values)))):
        held = values[grouped.order[start:end]]
        held = held[~np.isnan(held)]
        if not len(held):
            continue
        places = [_bound_place(coding, top, len(held)) for coding, top in codings]
        selected = np.partition(held, sorted(set(places)))
        for step, ((_, top), place) in enumerate(zip(codings, places)):
            bound = selected[place]
            for (_, earlier_top), earlier in zip(codings[:step], bounds[:step, group]):
                bound = min(bound, earlier) if earlier_top else max(bound, earlier)
            bounds[step, group] = bound
    out = np.empty(len(values), dtype=np.float64) if out is None else out
    for part in cache_slices(len(values)):
        chunk = values[part]
        for (_, top), bound in zip(codings, bounds):
            chunk = (np.minimum if top else np.maximum)(chunk, bound[grouped.index[part]])
        out[part] = chunk
    return out


_POWER_RANGE = 308
_POWERS_OF_TEN = np.array([float(f"1e{exponent}") if exponent >= 0 else 1.0 / float(f"1e{-exponent}")
                           for exponent in range(-_POWER_RANGE, _POWER_RANGE + 1)])
"""10 ** e for e = -308..308 at index e + 308: for e >= 0 the double nearest to it (exact up to 1e22), for e < 0 the
reciprocal of 10 ** -e (for comparisons only)."""


def round_values(values: np.ndarray, rounding: Rounding, out: np.ndarray | None = None) -> np.ndarray:
    """Each value on the grid: to ``significant`` digits (the double nearest to the decimal, halves away from zero),
    or to the nearest point ratio ** k of the geometric grid in log space. Zero, nulls (NaN) stay as they are. A
    cache-sized chunk at a time: its dozen elementwise steps then stay in the CPU's cache (2.4 times as fast on 11M
    values as chunks of 4M). ``out``: where the rounded values go (``values`` itself rounds them in place); default a
    new array."""
    out = np.empty(len(values), dtype=np.float64) if out is None else out
    for part in cache_slices(len(values)):
        out[part] = _rounded(values[part], rounding)
    return out


def _rounded(values: np.ndarray, rounding: Rounding) -> np.ndarray:
    out = values.copy()
    live = np.flatnonzero(np.isfinite(values) & (values != 0))
    if not len(live):
        return out
    magnitude, sign = np.abs(values[live]), np.sign(values[live])
    if rounding.ratio is not None:
        step = np.log(rounding.ratio)
        out[live] = sign * np.power(rounding.ratio, np.floor(np.log(magnitude) / step + 0.5))
        return out
    out[live] = sign * _round_significant(magnitude, rounding.significant)
    return out


def _round_significant(magnitude: np.ndarray, digits: int) -> np.ndarray:
    """Positive values to ``digits`` significant digits with correctly rounded single operations (a scaling by an
    exact power of ten and back), so the result does not depend on how a platform's log10 rounds."""
    exponent = np.floor(np.log10(magnitude)).astype(np.int64)
    exponent -= magnitude < _power(exponent)  # 10 ** e <= value < 10 ** (e + 1), whatever log10 rounded to
    exponent += magnitude >= _power(exponent + 1)
    shift = digits - 1 - exponent
    up = shift >= 0
    scale = _power(np.abs(shift))
    scaled = np.where(up, magnitude * scale, magnitude / scale)
    steps = np.floor(scaled + 0.5)
    return np.where(up, steps / scale, steps * scale)


def _power(exponent: np.ndarray) -> np.ndarray:
    """10 ** e per element (e may be negative: its reciprocal, for comparisons only)."""
    return _POWERS_OF_TEN[np.clip(exponent, -_POWER_RANGE, _POWER_RANGE) + _POWER_RANGE]
