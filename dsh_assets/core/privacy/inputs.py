"""A release under attack, with the evaluator's truth (which source row and subscriber each released row is).

The truth is rebuilt in memory from the source and the release plan; it never reaches a file or metadata.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.core.release.configs import ReleaseConfig
from dsh_assets.core.release.schema import ROW_ID, Schema
from dsh_assets.core.release.transform import ReleasePlan

TRUE_ROW = "__true_row_id"
TRUE_SUBSCRIBER = "__true_subscriber"


@dataclass(frozen=True)
class ReleaseUnderTest:
    source_path: Path
    """The ingested source (canonical types, row_id = position)."""
    released_path: Path
    config: ReleaseConfig
    schema: Schema
    plan: ReleasePlan
    """The release's plan (transform.plan_release): which rows it keeps and in which order."""

    @property
    def keep(self) -> np.ndarray:
        """Boolean per source row id: released or withheld."""
        return self.plan.keep

    def released_row_ids(self) -> np.ndarray:
        """The source row id of each released row, in release order (rows are shuffled within cells)."""
        return self.plan.order

    def positions_of(self, row_ids: np.ndarray) -> np.ndarray:
        """The position in the release of each source row id; -1 where the row is withheld."""
        return self.plan.position_of_row()[np.asarray(row_ids, dtype=np.int64)]

    def released_with_truth(self, columns: list[str] | None = None) -> pa.Table:
        """Released columns plus the evaluator-only truth columns TRUE_ROW and TRUE_SUBSCRIBER."""
        released = pq.read_table(self.released_path, columns=columns)
        row_ids = self.released_row_ids()
        if len(row_ids) != released.num_rows:
            raise ValueError(f"{self.released_path}: {released.num_rows} rows, the plan keeps {len(row_ids)}")
        subscribers = pq.read_table(self.source_path, columns=[self.schema.subscriber]).column(0)
        return released.append_column(TRUE_ROW, pa.array(row_ids)).append_column(
            TRUE_SUBSCRIBER, subscribers.take(pa.array(row_ids))
        )

    def source_table(self, columns: list[str]) -> pa.Table:
        """Raw source columns (with row_id), what an attacker's auxiliary knowledge is drawn from."""
        wanted = list(dict.fromkeys([*columns, ROW_ID]))
        return pq.read_table(self.source_path, columns=wanted)
