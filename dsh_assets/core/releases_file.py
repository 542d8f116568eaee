"""The release configurations file as one typed value: read and parsed once, each table by its own domain's
parser, so a settings change reaches every reader at once and no reader parses the file again."""

from __future__ import annotations

import os
from dataclasses import dataclass

from dsh_assets.core.privacy.attacker import AttackerModel, parse_attacker
from dsh_assets.core.publication.gate import PublicationPolicy, parse_publication
from dsh_assets.core.release.configs import (
    DP_SYNTHETIC,
    BudgetCaps,
    ConfigError,
    parse_budget_caps,
    parse_configs,
    releases_document,
)
from dsh_assets.core.release.schema import Schema
from dsh_assets.core.retention import RetentionPolicy, parse_retention
from dsh_assets.core.utility.quality_groups import UtilitySettings, parse_utility


@dataclass(frozen=True)
class ReleasesFile:
    """Every table of a releases file, validated against the column roles."""

    configs: dict
    """Config id -> ReleaseConfig or DpCountsConfig (``[configs.*]`` and the points of ``[sweep.*]``)."""
    budget_caps: BudgetCaps
    publication: PublicationPolicy
    retention: RetentionPolicy
    attacker: AttackerModel
    utility: UtilitySettings

    @classmethod
    def read(cls, path: str | os.PathLike | None = None, schema: Schema | None = None) -> "ReleasesFile":
        """``path``, else the packaged file."""
        document = releases_document(path)
        configs = parse_configs(document, schema)
        budget_caps = parse_budget_caps(document)
        synthetic = sorted(config_id for config_id, config in configs.items() if config.kind == DP_SYNTHETIC)
        if synthetic and budget_caps.synthetic is None:
            raise ConfigError(f"{', '.join(synthetic)}: a dp_synthetic configuration draws on its own budget slice; "
                              f"declare its caps in [budget.{DP_SYNTHETIC}] (period_cap, year_cap)")
        return cls(configs=configs, budget_caps=budget_caps,
                   publication=parse_publication(document, configs), retention=parse_retention(document),
                   attacker=parse_attacker(document, schema), utility=parse_utility(document))
