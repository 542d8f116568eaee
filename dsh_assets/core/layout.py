"""Where things live under the home folder (the settings' home, by default .dsh_home in the checkout)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

RELEASED_FILE = "released.parquet"
DP_COUNTS_FILE = "dp_counts.parquet"
"""A published DP count table's name: a DP release is published beside the period's release, never as it."""
DP_Q2_FILE = "q2_slow_5g.parquet"
QUARANTINE_NOTE = "quarantine.json"
CHECKOUT = Path(__file__).resolve().parents[2]


DEFAULT_HOME = CHECKOUT / ".dsh_home"


def partition_file(partition, suffix: str) -> str:
    """The file name of one asset partition's file: the key quoted, as a multi-partition key holds a "|"."""
    return f"{quote(str(partition), safe='')}{suffix}"


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

    def candidate_dir(self, config_id: str, period: str) -> Path:
        """Every configuration's release of a period is a candidate, kept apart from what is published."""
        return self.home / "candidates" / config_id / period

    def released(self, config_id: str, period: str) -> Path:
        """The candidate release of a configuration for a period (the `released` or `dp_release` asset)."""
        return self.candidate_dir(config_id, period) / RELEASED_FILE

    def dp_q2(self, config_id: str, period: str) -> Path:
        """The DP release's second table: Elina's Q2 (slow 5G download shares per app)."""
        return self.candidate_dir(config_id, period) / DP_Q2_FILE

    @property
    def records(self) -> Path:
        """What each asset partition's latest materialisation recorded (core/records.py)."""
        return self.home / "records"

    def handed_over(self, asset: str, partition: str) -> Path:
        """An asset partition's output, kept for the assets downstream of it (``graph/resources.HandOver``)."""
        return self.home / "handed_over" / asset / partition_file(partition, ".pickle")

    @property
    def duckdb_spill(self) -> Path:
        """Where DuckDB spills what does not fit its memory limit (scratch: deleted when the connection closes)."""
        return self.home / "scratch" / "duckdb"

    def published_dir(self, period: str) -> Path:
        """The period's publication: the one release analysts pick up."""
        return self.home / "published" / period

    def published(self, period: str) -> Path:
        return self.published_dir(period) / RELEASED_FILE

    def also_published_dir(self, config_id: str, period: str) -> Path:
        """A further publication of the period, allowed explicitly (`dsh run --also-publish`)."""
        return self.published_dir(period) / "also" / config_id

    def dp_published(self, config_id: str, period: str) -> Path:
        """A DP configuration's published count table; its Q1 and Q2 tables and publication.json beside it."""
        return self.published_dir(period) / "dp" / config_id / DP_COUNTS_FILE

    def quarantine_dir(self, config_id: str, period: str) -> Path:
        """Where a candidate that failed a blocking check goes (with a note), out of the candidates."""
        return self.home / "quarantine" / config_id / period

    def quarantined(self) -> list[tuple[str, str, Path]]:
        """(config id, period, folder) of every quarantined candidate, sorted."""
        root = self.home / "quarantine"
        return sorted((p.parent.parent.name, p.parent.name, p.parent) for p in root.glob(f"*/*/{QUARANTINE_NOTE}"))

    def dp_q1(self, config_id: str, period: str) -> Path:
        """The DP release's Q1 table: DP medians of 5G radio latency for Gaming and Streaming."""
        return self.candidate_dir(config_id, period) / "q1_latency_medians.parquet"

    def dp_bound(self, config_id: str, period: str) -> Path:
        """The DP cells-per-subscriber histogram an "auto" bound is chosen from."""
        return self.candidate_dir(config_id, period) / "bound_histogram.parquet"

    def report_dir(self, period: str) -> Path:
        return self.home / "reports" / period

    @property
    def ledger(self) -> Path:
        return self.home / "budget.sqlite"

    @property
    def synthetic_ledger(self) -> Path:
        """The DP synthetic tables' own budget slice ([budget.dp_synthetic])."""
        return self.home / "budget.dp_synthetic.sqlite"

    def released_files(self) -> list[tuple[str, str, Path]]:
        """(config id, period, path) of every stored candidate release, sorted."""
        root = self.home / "candidates"
        found = [(p.parent.parent.name, p.parent.name, p) for p in root.glob(f"*/*/{RELEASED_FILE}")]
        return sorted(found)
