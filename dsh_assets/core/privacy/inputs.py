"""A release under attack, with the evaluator's truth (which source row and subscriber each released row is).

The truth is rebuilt from the source and the release plan (its moved columns kept in a private temporary folder
while the plan lives, ``StoredColumns``); it never reaches a published file or metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core.files import DigestBook
from dsh_assets.core.release.configs import ReleaseConfig
from dsh_assets.core.release.schema import ROW_ID, Schema
from dsh_assets.core.secrets import Secrets
from dsh_assets.core.release.transform import ReleasePlan, stored_plan
from dsh_assets.core.release.values import cell_runs


@dataclass(frozen=True)
class ReleaseUnderTest:
    source_path: Path
    """The ingested source (canonical types, row_id = position)."""
    released_path: Path
    config: ReleaseConfig
    schema: Schema
    plan: ReleasePlan
    """The release's plan (transform.plan_release): which rows it keeps and in which order."""
    book: DigestBook
    """Where the attacks keep what they count of the source for this plan (the definitions' ``digests`` in a run):
    singling out, inference and the pair evidence each need the subscribers it releases."""

    @classmethod
    def of_stored(cls, source_path: Path, released_path: Path, config: ReleaseConfig, schema: Schema,
                  secrets: Secrets, period: str, book: DigestBook) -> ReleaseUnderTest:
        """The release of a stored source, its plan made once per process while that source is unchanged (the
        release step of the run has made it already)."""
        return cls(source_path, released_path, config, schema, stored_plan(source_path, config, schema, secrets,
                                                                           period), book)

    @property
    def keep(self) -> np.ndarray:
        """Boolean per source row id: released or withheld."""
        return self.plan.keep

    def released_row_ids(self) -> np.ndarray:
        """The source row id of each released row, in release order (rows are shuffled within cells)."""
        return self.plan.order

    def cell_starts(self) -> np.ndarray:
        """The first release position of each released cell, and the end (a release lists its cells as runs)."""
        return cell_runs(self.plan.cell_sizes, self.plan.k)

    def rows_of_cells(self, cells: np.ndarray) -> np.ndarray:
        """The source row ids of these released cells (numbers of ``cell_starts``' runs), cell after cell, each in
        release order."""
        starts, order = self.cell_starts(), self.released_row_ids()
        return np.concatenate([order[starts[c]:starts[c + 1]] for c in cells]
                              or [np.empty(0, dtype=np.int64)]).astype(np.int64)

    def positions_of(self, row_ids: np.ndarray) -> np.ndarray:
        """The position in the release of each source row id; -1 where the row is withheld."""
        return self.plan.position_of_row()[np.asarray(row_ids, dtype=np.int64)]

    def value_origins(self, positions: np.ndarray, column: str) -> np.ndarray:
        """The source row whose value of ``column`` the release holds at each position (the plan's truth)."""
        return self.plan.value_origins(positions, column)

    def source_table(self, columns: list[str]) -> pa.Table:
        """Raw source columns (with row_id), what an attacker's auxiliary knowledge is drawn from."""
        wanted = list(dict.fromkeys([*columns, ROW_ID]))
        return pq.read_table(self.source_path, columns=wanted)
