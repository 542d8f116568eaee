"""The one resource every asset uses: where the home folder is and what the source is."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from dsh_assets.core.dp.ledger import Ledger
from dsh_assets.core.release.configs import ReleaseConfig, load_budget_caps, load_configs
from dsh_assets.core.layout import Layout
from dsh_assets.core.release.schema import Schema, load_schema
from dsh_assets.core.secrets import Secrets, load_secrets
from dsh_assets.core.release.synth import DEFAULT_ROWS, DEFAULT_SEED, DEFAULT_SUBSCRIBERS


class DshSettings(dg.ConfigurableResource):
    """Home folder, source file (empty: the synthetic default) and the configuration files."""

    home: str
    source_path: str = ""
    synthetic_rows: int = DEFAULT_ROWS
    synthetic_subscribers: int = DEFAULT_SUBSCRIBERS
    synthetic_seed: int = DEFAULT_SEED
    columns_file: str = ""
    releases_file: str = ""
    cadence: str = "daily"

    @property
    def layout(self) -> Layout:
        return Layout(Path(self.home).resolve())

    def schema(self) -> Schema:
        return load_schema(self.columns_file or None)

    def configs(self) -> dict[str, ReleaseConfig]:
        return load_configs(self.releases_file or None, self.schema())

    def secrets(self) -> Secrets:
        return load_secrets(self.layout.home)

    def ledger(self) -> Ledger:
        caps = load_budget_caps(self.releases_file or None)
        return Ledger(self.layout.ledger, caps.period_cap, caps.year_cap, self.cadence)
