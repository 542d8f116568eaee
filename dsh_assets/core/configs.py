"""Release configurations, declared in a TOML data file (packaged default or $DSH_RELEASES)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tomllib
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from dsh_assets.core.schema import Schema

RELEASES_ENV = "DSH_RELEASES"
DEFAULT_RELEASES_FILE = "releases.toml"
TIME_COARSENINGS = ("window", "hour")
ROW_RELEASE = "rows"
DP_COUNTS = "dp_counts"
ROLE_GROUPS = ("identifiers", "station")
_CONFIG_ID = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


class ConfigError(ValueError):
    """A release configuration is malformed or cannot be applied to this source."""


@dataclass(frozen=True)
class ReleaseConfig:
    id: str
    description: str
    drop_fields: tuple[str, ...]
    time_coarsen: str
    app_coarsen: str
    noise_scale: float
    k: int
    pseudonym: bool
    app_groups: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(group, apps) pairs of the grouping named by app_coarsen; empty when apps are kept."""

    def definition_hash(self) -> str:
        """SHA-256 of the canonical definition: a changed operation changes the hash."""
        canonical = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()

    def app_group_of(self) -> dict[str, str]:
        return {app: group for group, apps in self.app_groups for app in apps}

    def dropped_columns(self, schema: Schema) -> tuple[str, ...]:
        columns: list[str] = []
        for field in self.drop_fields:
            if field == "identifiers":
                columns.extend(schema.identifiers)
            elif field == "station":
                columns.append(schema.station)
            else:
                columns.append(field)
        return tuple(dict.fromkeys(columns))

    def released_qis(self, schema: Schema) -> tuple[str, ...]:
        """The categorical quasi-identifiers this release keeps (enb_id included where kept)."""
        dropped = set(self.dropped_columns(schema))
        return tuple(c for c in (*schema.categorical_qis, schema.station) if c not in dropped)

    def unmapped_apps(self, apps_in_source: set[str]) -> list[str]:
        if not self.app_groups:
            return []
        return sorted(apps_in_source - set(self.app_group_of()))


def _document(path: str | os.PathLike | None) -> dict:
    path = path or os.environ.get(RELEASES_ENV)
    if path:
        text = Path(path).read_text()
    else:
        text = resources.files("dsh_assets").joinpath(DEFAULT_RELEASES_FILE).read_text()
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"release configurations file is not valid TOML: {error}") from error


@dataclass(frozen=True)
class BudgetCaps:
    """Epsilon caps of the privacy-budget ledger, per release period and per calendar year."""

    period_cap: float
    year_cap: float


def load_budget_caps(path: str | os.PathLike | None = None) -> BudgetCaps:
    budget = _document(path).get("budget", {})
    caps = BudgetCaps(float(budget.get("period_cap", 1.0)), float(budget.get("year_cap", 366.0)))
    if not 0 < caps.period_cap <= caps.year_cap:
        raise ConfigError(f"[budget]: need 0 < period_cap <= year_cap, not {caps.period_cap}, {caps.year_cap}")
    return caps


def load_configs(path: str | os.PathLike | None = None, schema: Schema | None = None) -> dict:
    """All configurations of the file (ReleaseConfig, or DpCountsConfig for kind = "dp_counts"), validated."""
    document = _document(path)
    groupings = document.get("app_groups", {})
    configs = {}
    for config_id, fields in document.get("configs", {}).items():
        kind = fields.get("kind", ROW_RELEASE)
        if kind == ROW_RELEASE:
            configs[config_id] = _parse_config(config_id, {k: v for k, v in fields.items() if k != "kind"},
                                               groupings, schema)
        elif kind == DP_COUNTS:
            from dsh_assets.core.dp import parse_dp_config  # dp builds on this module

            configs[config_id] = parse_dp_config(config_id, fields)
        else:
            raise ConfigError(f"release configuration {config_id!r}: kind must be {ROW_RELEASE!r} or {DP_COUNTS!r}")
    if not configs:
        raise ConfigError("release configurations file declares no [configs.*] table")
    return configs


def _parse_config(config_id: str, fields: dict, groupings: dict, schema: Schema | None) -> ReleaseConfig:
    def fail(message: str) -> ConfigError:
        return ConfigError(f"release configuration {config_id!r}: {message}")

    if not _CONFIG_ID.match(config_id):
        raise fail("id must be lowercase letters, digits and underscores, starting with a letter")
    known = {"description", "drop_fields", "time_coarsen", "app_coarsen", "noise_scale", "k", "pseudonym"}
    unknown = set(fields) - known
    if unknown:
        raise fail(f"unknown fields {sorted(unknown)}; known: {sorted(known)}")
    time_coarsen = fields.get("time_coarsen", "window")
    if time_coarsen not in TIME_COARSENINGS:
        raise fail(f"time_coarsen must be one of {TIME_COARSENINGS}, not {time_coarsen!r}")
    app_coarsen = fields.get("app_coarsen", "none")
    app_groups: tuple = ()
    if app_coarsen != "none":
        if app_coarsen not in groupings:
            raise fail(f"app_coarsen {app_coarsen!r} names no [app_groups.{app_coarsen}] table")
        app_groups = tuple((group, tuple(apps)) for group, apps in groupings[app_coarsen].items())
        seen: dict[str, str] = {}
        for group, apps in app_groups:
            for app in apps:
                if app in seen:
                    raise fail(f"app {app!r} is in two groups: {seen[app]!r} and {group!r}")
                seen[app] = group
    noise_scale = float(fields.get("noise_scale", 0.0))
    if not 0.0 <= noise_scale <= 10.0:
        raise fail(f"noise_scale must be in [0, 10], not {noise_scale}")
    k = fields.get("k", 0)
    if not isinstance(k, int) or k < 0:
        raise fail(f"k must be a non-negative integer, not {k!r}")
    drop_fields = tuple(fields.get("drop_fields", ("identifiers",)))
    if schema is not None:
        for field in drop_fields:
            if field not in ROLE_GROUPS and field not in schema.columns:
                raise fail(f"drop_fields entry {field!r} is neither {ROLE_GROUPS} nor a source column")
    pseudonym = fields.get("pseudonym", False)
    if not isinstance(pseudonym, bool):
        raise fail(f"pseudonym must be true or false, not {pseudonym!r}")
    return ReleaseConfig(
        id=config_id,
        description=str(fields.get("description", "")),
        drop_fields=drop_fields,
        time_coarsen=time_coarsen,
        app_coarsen=app_coarsen,
        noise_scale=noise_scale,
        k=k,
        pseudonym=pseudonym,
        app_groups=app_groups,
    )
