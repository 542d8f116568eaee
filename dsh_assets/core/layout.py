"""Where things live under the home folder ($DSH_HOME, default .dsh_home in the checkout)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

HOME_ENV = "DSH_HOME"
CHECKOUT = Path(__file__).resolve().parents[2]


def default_home() -> Path:
    return Path(os.environ.get(HOME_ENV) or CHECKOUT / ".dsh_home").resolve()


@dataclass(frozen=True)
class Layout:
    home: Path

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster"

    def synthetic_input(self, period: str) -> Path:
        return self.home / "inputs" / f"synthetic_{period}.parquet"

    def source(self, period: str) -> Path:
        return self.home / "source" / period / "source.parquet"

    def released(self, config_id: str, period: str) -> Path:
        return self.home / "released" / config_id / period / "released.parquet"

    def dp_q2(self, config_id: str, period: str) -> Path:
        """The DP release's second table: Elina's Q2 (slow 5G download shares per app)."""
        return self.home / "released" / config_id / period / "q2_slow_5g.parquet"

    def dp_q1(self, config_id: str, period: str) -> Path:
        """The DP release's Q1 table: DP medians of 5G radio latency for Gaming and Streaming."""
        return self.home / "released" / config_id / period / "q1_latency_medians.parquet"

    def dp_bound(self, config_id: str, period: str) -> Path:
        """The DP cells-per-subscriber histogram an "auto" bound is chosen from."""
        return self.home / "released" / config_id / period / "bound_histogram.parquet"

    def report_dir(self, period: str) -> Path:
        return self.home / "reports" / period

    @property
    def ledger(self) -> Path:
        return self.home / "budget.sqlite"

    def released_files(self) -> list[tuple[str, str, Path]]:
        """(config id, period, path) of every stored release, sorted."""
        root = self.home / "released"
        found = [(p.parent.parent.name, p.parent.name, p) for p in root.glob("*/*/released.parquet")]
        return sorted(found)
