"""The record store: what each asset partition's latest materialisation recorded, kept as files under the home.

The latest value of a fact is read here: by the assets (one another's figures, checksums and
provenance), the gate, the runner (does the period have a source) and the release sensor (was this
partition released from these source bytes). Dagster's event log keeps the same values, made from the
same metadata, for the UI; it is read only where a materialisation is compared with the ones before it
(`checksum_drift`, `dsh verify`), and for the sensor's new source events. A record is one JSON file per
(asset, partition), replaced atomically when the partition is materialised again, so a reader sees the
previous record or the new one, never half of it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from dsh_assets.core.files import atomic_path
from dsh_assets.core.layout import partition_file


class RecordError(ValueError):
    """A record file that cannot be read back: the message names it."""


@dataclass(frozen=True)
class Record:
    """One materialisation of an asset partition: who made it, and the plain values it recorded."""

    asset: str
    partition: str
    run_id: str
    code_version: str | None
    values: dict

    def origin(self) -> dict:
        """Where figures come from, as the report shows them: the asset, the partition, the code version and
        the run."""
        return {"asset": self.asset, "partition": self.partition, "code_version": self.code_version,
                "run_id": self.run_id}


@dataclass(frozen=True)
class RecordStore:
    root: Path

    def path(self, asset: str, partition: str) -> Path:
        """One file per partition."""
        return self.root / asset / partition_file(partition, ".json")

    def write(self, record: Record) -> None:
        with atomic_path(self.path(record.asset, record.partition)) as temporary:
            temporary.write_text(json.dumps(asdict(record), sort_keys=True), encoding="utf-8")

    def latest(self, asset: str, partition: str) -> Record | None:
        """The partition's latest record; None when it was never materialised."""
        path = self.path(asset, partition)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            return Record(**json.loads(text))
        except (ValueError, TypeError) as error:
            raise RecordError(f"record {path} is not a record this version reads ({error}); "
                              f"re-materialise {asset} {partition}") from None
