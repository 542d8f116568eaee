"""Release configurations, declared in a TOML data file (the packaged one, or one the settings name)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tomllib
from dataclasses import asdict, dataclass, replace
from importlib import resources
from pathlib import Path
from typing import ClassVar

from dsh_assets.core.release.schema import Schema
from dsh_assets.core.release.synthetic_config import DP_SYNTHETIC, parse_dp_synthetic_config

DEFAULT_RELEASES_FILE = "releases.toml"
TIME_COARSENINGS = ("window", "hour")
ALIAS_SCOPES = ("period", "forever")
ROW_RELEASE = "rows"
DP_COUNTS = "dp_counts"
ROLE_GROUPS = ("identifiers", "station")
SLOW_SUFFIX = ".slow_5g"
Q1_SUFFIX = ".q1"
BOUND_SUFFIX = ".bound"
AUTO = "auto"
SWEEP_TABLE = "sweep"
_CONFIG_ID = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


class ConfigError(ValueError):
    """A release configuration is malformed or cannot be applied to this source."""


def _definition_hash(config) -> str:
    """SHA-256 of a configuration's canonical definition: a changed operation changes the hash (an operation left
    unset is not part of the definition, so adding an operation to the language changes no existing hash; when it is
    evaluated, every period or on request, is not part of it either)."""
    definition = {key: value for key, value in asdict(config).items()
                  if not (key in (*VALUE_OPERATIONS, "sweep") and not value) and key != "every_period"}
    if definition.get("microaggregate", {}).get("by") == BY_ROW:
        del definition["microaggregate"]["by"]  # MDAV, the grouping every configuration had before `by` existed
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


SHUFFLE_WITHIN_CELL = "cell"
MEDIAN, MEAN = "median", "mean"
STATISTICS = (MEDIAN, MEAN)
BY_ROW, BY_COLUMN = "row", "column"
GROUPINGS = (BY_ROW, BY_COLUMN)
WITHIN_CELL, WITHIN_APP_RADIO = "cell", "app_radio"
CODING_GROUPS = (WITHIN_CELL, WITHIN_APP_RADIO)
VALUE_OPERATIONS = ("microaggregate", "rank_swap", "shuffle", "keep_rank_correlation", "top_code", "bottom_code",
                    "round")
"""The operations on measurement values besides noise (core/release/values.py): those that move values between rows
or blur them over a group, then those that coarsen each value. Left out of a configuration's definition (and hash)
where unset, so adding one to the language changes no existing hash."""


@dataclass(frozen=True)
class Microaggregation:
    size: int
    """Values per group, at least (MDAV sessions of a cell, or consecutive sorted values of a column of a cell)."""
    statistic: str
    """What replaces a group's values: "median" (the default) or "mean"."""
    by: str = BY_ROW
    """"row": MDAV groups of whole sessions; "column": each measurement's sorted values grouped on their own."""


@dataclass(frozen=True)
class Coding:
    """Top or bottom coding: within each group, the values beyond a bound set to the bound."""

    within: str
    """The group the bound is taken over: "cell" (the released cell) or "app_radio" (the released app and radio)."""
    quantile: float | None = None
    """The bound is the group's nearest-rank q-quantile: of its n non-null values in ascending order, the one at rank
    ceil(q x n) (q = 0.99 for top coding, 0.01 for bottom coding), a value the group holds."""
    rank: int | None = None
    """The bound is the group's rank-th most extreme value: the rank most extreme values all become it."""


@dataclass(frozen=True)
class Rounding:
    """Each released value put on a grid: ``significant`` digits, or the geometric grid ``ratio`` ** k."""

    significant: int | None = None
    ratio: float | None = None


KEEP_RANK_CORRELATION = "rank_correlation"


@dataclass(frozen=True)
class RankCorrelationShuffle:
    """A shuffle within the cell that keeps the rank correlations between measurements (core/release/copula.py)."""

    min_cell_rows: int = 0
    """A cell of fewer rows gets the plain keyed permutation: the extremes of a small cell would line up."""
    shrink: float = 0.0
    """The correlations aimed at are the source's times (1 - shrink): 0 keeps them, 1 is the plain shuffle."""


@dataclass(frozen=True)
class RankSwap:
    percent: float
    """A value is exchanged with another of its (app, radio) group at most this share of the group's ranks away."""


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
    alias_scope: str = "period"
    """"period": a key derived per release period, so aliases do not link periods; "forever": one key."""
    microaggregate: Microaggregation | None = None
    rank_swap: RankSwap | None = None
    shuffle: bool = False
    """Each measurement permuted within its released cell (``shuffle = "cell"``)."""
    keep_rank_correlation: RankCorrelationShuffle | None = None
    """The shuffle hands each cell's values out in the rank order of keyed correlated draws (``shuffle = { within =
    "cell", keep = "rank_correlation" }``), so that the measurements' rank correlations are kept."""
    top_code: Coding | None = None
    bottom_code: Coding | None = None
    round: Rounding | None = None
    sweep: str | None = None
    """The [sweep.NAME] this configuration is a point of: evaluated on request (``dsh sweep``), not every period."""
    every_period: bool = True
    """False: a candidate evaluated on request (``dsh run --config ID``, or as the base of a sweep), not every period;
    it costs the daily job nothing."""
    kind: ClassVar[str] = ROW_RELEASE

    def operations(self) -> dict:
        """What the release does, in the order it does it (for metadata and the report)."""
        def declared(operation) -> dict | None:
            return {key: value for key, value in asdict(operation).items() if value is not None} if operation else None

        shuffle = {"within": SHUFFLE_WITHIN_CELL, "keep": KEEP_RANK_CORRELATION,
                   **declared(self.keep_rank_correlation)} if self.keep_rank_correlation else SHUFFLE_WITHIN_CELL
        moves = {"microaggregate": declared(self.microaggregate), "rank_swap": declared(self.rank_swap),
                 "shuffle": shuffle if self.shuffle else None}
        coarsens = {"top_code": declared(self.top_code), "bottom_code": declared(self.bottom_code),
                    "round": declared(self.round)}
        return {"drop_fields": list(self.drop_fields), "time_coarsen": self.time_coarsen,
                "app_coarsen": self.app_coarsen, "k": self.k,
                **{name: value for name, value in moves.items() if value}, "noise_scale": self.noise_scale,
                **{name: value for name, value in coarsens.items() if value},
                "pseudonym": self.pseudonym, **({"alias_scope": self.alias_scope} if self.pseudonym else {})}

    def definition_hash(self) -> str:
        return _definition_hash(self)

    @property
    def moves_values(self) -> bool:
        """Whether an operation moves measurement values between rows (the evaluator's truth follows them)."""
        return bool(self.rank_swap or self.shuffle)

    @property
    def has_value_operations(self) -> bool:
        """Whether an operation besides noise acts on the measurement values (``VALUE_OPERATIONS``): the release then
        puts every value in place, in release order, before it writes (``transform.ValueStage``)."""
        return any(getattr(self, name) for name in VALUE_OPERATIONS)

    @property
    def cell_minimum(self) -> int:
        """Rows a released cell must hold: k, and the microaggregation's group size (a group of g sessions of one
        cell needs g of them)."""
        return max(self.k, self.microaggregate.size if self.microaggregate else 0)

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


def releases_document(path: str | os.PathLike | None = None) -> dict:
    """The parsed release configurations file: ``path``, else the packaged one."""
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
    synthetic: "BudgetCaps | None" = None
    """``[budget.dp_synthetic]``: the DP synthetic tables' own slice, with its own ledger and caps."""


def parse_budget_caps(document: dict) -> BudgetCaps:
    """The ``[budget]`` table of a parsed releases file."""
    budget = document.get("budget", {})
    caps = _caps(budget, "[budget]")
    synthetic = budget.get(DP_SYNTHETIC)
    if synthetic is None:
        return caps
    if not isinstance(synthetic, dict) or set(synthetic) - {"period_cap", "year_cap"}:
        raise ConfigError(f"[budget.{DP_SYNTHETIC}] holds period_cap and year_cap, not {synthetic!r}")
    return replace(caps, synthetic=_caps(synthetic, f"[budget.{DP_SYNTHETIC}]"))


def _caps(table: dict, where: str) -> BudgetCaps:
    caps = BudgetCaps(float(table.get("period_cap", 1.0)), float(table.get("year_cap", 366.0)))
    if not 0 < caps.period_cap <= caps.year_cap:
        raise ConfigError(f"{where}: need 0 < period_cap <= year_cap, not {caps.period_cap}, {caps.year_cap}")
    return caps


def load_configs(path: str | os.PathLike | None = None, schema: Schema | None = None) -> dict:
    """All configurations of the file (ReleaseConfig, or DpCountsConfig for kind = "dp_counts"), validated."""
    return parse_configs(releases_document(path), schema)


def parse_configs(document: dict, schema: Schema | None = None) -> dict:
    """``load_configs`` of a parsed releases file."""
    groupings = document.get("app_groups", {})
    configs = {}
    for config_id, fields in document.get("configs", {}).items():
        kind = fields.get("kind", ROW_RELEASE)
        if kind == ROW_RELEASE:
            configs[config_id] = _parse_config(config_id, {k: v for k, v in fields.items() if k != "kind"},
                                               groupings, schema)
        elif kind == DP_COUNTS:
            configs[config_id] = parse_dp_config(config_id, fields)
        elif kind == DP_SYNTHETIC:
            if not _CONFIG_ID.match(config_id):
                raise ConfigError(f"release configuration {config_id!r}: id must be lowercase letters, digits and "
                                  f"underscores, starting with a letter")
            configs[config_id] = parse_dp_synthetic_config(config_id, fields, ConfigError)
        else:
            raise ConfigError(f"release configuration {config_id!r}: kind must be {ROW_RELEASE!r}, {DP_COUNTS!r} or "
                              f"{DP_SYNTHETIC!r}")
    if not configs:
        raise ConfigError("release configurations file declares no [configs.*] table")
    for name, sweep in document.get(SWEEP_TABLE, {}).items():
        for point_id, fields in _sweep_points(name, sweep, document.get("configs", {})):
            if point_id in configs:
                raise ConfigError(f"[{SWEEP_TABLE}.{name}]: point {point_id!r} is also a configuration's id")
            configs[point_id] = replace(_parse_config(point_id, fields, groupings, schema), sweep=name)
    return configs


def period_configs(configs: dict) -> dict:
    """The configurations evaluated every period: all but the points of a sweep and those declared
    ``every_period = false`` (evaluated on request)."""
    return {config_id: config for config_id, config in configs.items()
            if getattr(config, "sweep", None) is None and getattr(config, "every_period", True)}


def publishable_configs(configs: dict) -> dict:
    """Every configuration but the points of a sweep (which are never published): those evaluated every period and
    those made on request."""
    return {config_id: config for config_id, config in configs.items() if getattr(config, "sweep", None) is None}


def sweep_configs(configs: dict) -> dict:
    """The points of every sweep of the file."""
    return {config_id: config for config_id, config in configs.items() if getattr(config, "sweep", None)}


def _sweep_points(name: str, sweep, declared: dict) -> list[tuple[str, dict]]:
    """The points of ``[sweep.NAME]``: its base configuration's table with one field (``noise_scale``, or a
    dotted ``microaggregate.size``) set in turn to each value of its list; ids ``sweep_NAME_VALUE``."""
    where = f"[{SWEEP_TABLE}.{name}]"
    if not isinstance(sweep, dict) or len(set(sweep) - {"base"}) != 1:
        raise ConfigError(f"{where} must name a base configuration and one field with its list of values")
    base = sweep.get("base")
    if base not in declared or declared[base].get("kind", ROW_RELEASE) != ROW_RELEASE:
        raise ConfigError(f"{where} base {base!r} is not a row-level configuration of the file")
    [(field_name, values)] = [(key, value) for key, value in sweep.items() if key != "base"]
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{where} {field_name} must be a non-empty list of values, not {values!r}")
    points = []
    for value in values:
        fields = {key: (dict(item) if isinstance(item, dict) else item) for key, item in declared[base].items()
                  if key != "kind"}
        table, _, leaf = field_name.rpartition(".")
        (fields.setdefault(table, {}) if table else fields)[leaf] = value
        fields["description"] = f"{base} with {field_name} = {value} (a point of the sweep {name})"
        fields.pop("every_period", None)  # a point is evaluated on request whatever its base
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        points.append((f"sweep_{name}_{shown.replace('.', 'p').replace('-', 'm')}", fields))
    return points


def _checked_common_fields(config_id: str, fields: dict, known: set[str], fail) -> str:
    """What every kind of configuration checks alike: its id, no unknown field, the time coarsening."""
    if not _CONFIG_ID.match(config_id):
        raise fail("id must be lowercase letters, digits and underscores, starting with a letter")
    unknown = set(fields) - known
    if unknown:
        raise fail(f"unknown fields {sorted(unknown)}; known: {sorted(known)}")
    time_coarsen = fields.get("time_coarsen", "window")
    if time_coarsen not in TIME_COARSENINGS:
        raise fail(f"time_coarsen must be one of {TIME_COARSENINGS}, not {time_coarsen!r}")
    return time_coarsen


def _parse_config(config_id: str, fields: dict, groupings: dict, schema: Schema | None) -> ReleaseConfig:
    def fail(message: str) -> ConfigError:
        return ConfigError(f"release configuration {config_id!r}: {message}")

    known = {"description", "drop_fields", "time_coarsen", "app_coarsen", "noise_scale", "k", "pseudonym",
             "alias_scope", "every_period", *VALUE_OPERATIONS}
    time_coarsen = _checked_common_fields(config_id, fields, known, fail)
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
    alias_scope = fields.get("alias_scope", "period")
    if alias_scope not in ALIAS_SCOPES:
        raise fail(f"alias_scope must be one of {ALIAS_SCOPES}, not {alias_scope!r}")
    every_period = fields.get("every_period", True)
    if not isinstance(every_period, bool):
        raise fail(f"every_period must be true or false, not {every_period!r}")
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
        alias_scope=alias_scope,
        every_period=every_period,
        **_value_operations(fields, drop_fields, schema, fail),
    )


def _value_operations(fields: dict, drop_fields: tuple[str, ...], schema: Schema | None, fail) -> dict:
    """``shuffle``, ``microaggregate`` and ``rank_swap`` of a configuration's table, checked."""
    operations: dict = {}
    if "shuffle" in fields:
        keep = _shuffle(fields["shuffle"], fail)
        cell = set(schema.categorical_qis) if schema is not None else set()
        if cell and cell <= set(drop_fields):
            raise fail("shuffle needs a released cell, and the release drops every field of it: "
                       + ", ".join(sorted(cell)))
        if keep is not None:
            operations["keep_rank_correlation"] = keep
        operations["shuffle"] = True
    if "microaggregate" in fields:
        table = fields["microaggregate"]
        if not isinstance(table, dict) or set(table) - {"size", "statistic", "by"}:
            raise fail(f'microaggregate must be a table {{ size = g, statistic = "median", by = "row" }}, '
                       f'not {table!r}')
        size, statistic, by = table.get("size"), table.get("statistic", MEDIAN), table.get("by", BY_ROW)
        if isinstance(size, bool) or not isinstance(size, int) or size < 2:
            raise fail(f"microaggregate size must be an integer >= 2 (values per group), not {size!r}")
        if statistic not in STATISTICS:
            raise fail(f"microaggregate statistic must be one of {STATISTICS}, not {statistic!r}")
        if by not in GROUPINGS:
            raise fail(f"microaggregate by must be one of {GROUPINGS} (MDAV sessions, or each column's sorted "
                       f"values), not {by!r}")
        operations["microaggregate"] = Microaggregation(size, statistic, by)
    for name, default_quantile in (("top_code", 0.99), ("bottom_code", 0.01)):
        if name in fields:
            operations[name] = _coding(name, fields[name], default_quantile, fail)
    if "round" in fields:
        operations["round"] = _rounding(fields["round"], fail)
    if "rank_swap" in fields:
        if "keep_rank_correlation" in operations:
            raise fail("rank_swap and a shuffle that keeps rank correlations cannot be combined: the shuffle sets "
                       "where every value of a cell goes")
        table = fields["rank_swap"]
        percent = table.get("percent") if isinstance(table, dict) and set(table) == {"percent"} else None
        if isinstance(percent, bool) or not isinstance(percent, (int, float)) or not 0 < percent <= 100:
            raise fail(f"rank_swap must be a table {{ percent = p }} with p in (0, 100], not {table!r}")
        operations["rank_swap"] = RankSwap(float(percent))
    return operations


def _shuffle(value, fail) -> RankCorrelationShuffle | None:
    """``shuffle``: "cell" (a plain keyed permutation of each measurement), or ``{ within = "cell", keep =
    "rank_correlation", min_cell_rows = m, shrink = s }`` (the rank correlations kept; None without ``keep``)."""
    shape = (f'shuffle must be "{SHUFFLE_WITHIN_CELL}" or a table {{ within = "{SHUFFLE_WITHIN_CELL}", keep = '
             f'"{KEEP_RANK_CORRELATION}", min_cell_rows = 0, shrink = 0.0 }}, not {value!r}')
    if value == SHUFFLE_WITHIN_CELL:
        return None
    if not isinstance(value, dict) or value.get("within") != SHUFFLE_WITHIN_CELL or \
            set(value) - {"within", "keep", "min_cell_rows", "shrink"}:
        raise fail(shape)
    if "keep" not in value:
        if set(value) != {"within"}:
            raise fail(f'shuffle min_cell_rows and shrink need keep = "{KEEP_RANK_CORRELATION}", not {value!r}')
        return None
    if value["keep"] != KEEP_RANK_CORRELATION:
        raise fail(f'shuffle keep must be "{KEEP_RANK_CORRELATION}", not {value["keep"]!r}')
    rows, shrink = value.get("min_cell_rows", 0), value.get("shrink", 0.0)
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0:
        raise fail(f"shuffle min_cell_rows must be an integer >= 0, not {rows!r}")
    if isinstance(shrink, bool) or not isinstance(shrink, (int, float)) or not 0 <= shrink <= 1:
        raise fail(f"shuffle shrink must be a number in [0, 1], not {shrink!r}")
    return RankCorrelationShuffle(rows, float(shrink))


def _coding(name: str, table, example_quantile: float, fail) -> Coding:
    """``top_code`` / ``bottom_code``: ``{ quantile = q, within = ... }`` or ``{ rank = t, within = ... }``."""
    shape = (f'{name} must be a table {{ quantile = {example_quantile}, within = "app_radio" }} or {{ rank = t, '
             f'within = "cell" }}, not {table!r}')
    if not isinstance(table, dict) or set(table) - {"quantile", "rank", "within"} or \
            len({"quantile", "rank"} & set(table)) != 1:
        raise fail(shape)
    within = table.get("within")
    if within not in CODING_GROUPS:
        raise fail(f"{name} within must be one of {CODING_GROUPS} (the group its bound is taken over), "
                   f"not {within!r}")
    if "rank" in table:
        rank = table["rank"]
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
            raise fail(f"{name} rank must be an integer >= 1 (the rank-th most extreme value), not {rank!r}")
        return Coding(within, rank=rank)
    quantile = table["quantile"]
    if isinstance(quantile, bool) or not isinstance(quantile, (int, float)) or not 0 < quantile < 1:
        raise fail(f"{name} quantile must be a number in (0, 1), not {quantile!r}")
    return Coding(within, quantile=float(quantile))


def _rounding(table, fail) -> Rounding:
    """``round``: ``{ significant = d }`` (1 to 15 digits) or ``{ ratio = r }`` (a geometric grid, r > 1)."""
    if not isinstance(table, dict) or len(table) != 1 or set(table) - {"significant", "ratio"}:
        raise fail(f"round must be a table {{ significant = 2 }} or {{ ratio = 1.1 }}, not {table!r}")
    if "significant" in table:
        digits = table["significant"]
        if isinstance(digits, bool) or not isinstance(digits, int) or not 1 <= digits <= 15:
            raise fail(f"round significant must be an integer from 1 to 15, not {digits!r}")
        return Rounding(significant=digits)
    ratio = table["ratio"]
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not math.isfinite(ratio) or ratio <= 1:
        raise fail(f"round ratio must be a number above 1 (the grid's step factor), not {ratio!r}")
    return Rounding(ratio=float(ratio))


@dataclass(frozen=True)
class DpCountsConfig:
    id: str
    description: str
    epsilon: float
    """Epsilon per period of the two count tables (counts table + Q2 table); Q1 and the bound's estimate
    are further declared slices (``q1_epsilon``, ``bound_epsilon``): the period's total is ``total_epsilon``."""
    max_cells_per_subscriber: int | str
    """Contribution bound; the L1 sensitivity of the count vector. "auto": chosen per period from a DP
    estimate of the cells-per-subscriber distribution that spends ``bound_epsilon`` (``with_bound``)."""
    threshold: int | None
    """Publish only cells whose noisy count is >= threshold (post-processing); None or 0 = all."""
    time_coarsen: str = "window"
    slow_share_epsilon: float = 0.0
    """Part of ``epsilon`` spent on Elina's Q2 table (0 = no Q2 table); the counts get the rest."""
    slow_threshold_kbps: float = 1000.0
    """A 5G row is a slow download when its download throughput is <= this public constant."""
    slow_max_apps_per_subscriber: int = 1
    """Q2 contribution bound: apps a subscriber counts in (the Q2 vectors' L1 sensitivity is 2 x this)."""
    slow_min_subscribers: int | None = None
    """Q2 share unavailable (None) for an app whose noisy 5G subscriber count is below this;
    None = 5 x the 95% half-width of the Q2 noise, so a shown share's denominator is within 20%."""
    q1_epsilon: float = 0.0
    """Epsilon of Elina's Q1 table (DP medians of 5G radio latency, Gaming and Streaming; 0 = none), debited
    under ``id + ".q1"``, on top of ``epsilon``."""
    q1_max_rows_per_subscriber: int = 1
    """Q1 contribution bound: rows a subscriber contributes to each app's median."""
    bound_epsilon: float = 0.0
    """With max_cells_per_subscriber = "auto": epsilon of the noisy cells-per-subscriber histogram the bound
    is chosen from, debited under ``id + ".bound"``, on top of ``epsilon``; 0 otherwise."""
    kind: str = DP_COUNTS

    @property
    def auto_bound(self) -> bool:
        return self.max_cells_per_subscriber == AUTO

    def with_bound(self, bound: int) -> "DpCountsConfig":
        """This configuration with its contribution bound resolved (what an "auto" one publishes with)."""
        return replace(self, max_cells_per_subscriber=int(bound))

    @property
    def total_epsilon(self) -> float:
        """Everything this configuration debits per period: counts, Q2, Q1 and the bound's estimate."""
        return float(sum(self.ledger_debits().values()))

    @property
    def q1_ledger_key(self) -> str:
        return self.id + Q1_SUFFIX

    @property
    def bound_ledger_key(self) -> str:
        return self.id + BOUND_SUFFIX

    @property
    def app_groups(self) -> tuple:
        """No app coarsening (lets ``cells.cell_expressions`` build the cell)."""
        return ()

    @property
    def sensitivity(self) -> int:
        if self.auto_bound:
            raise ValueError(f"DP configuration {self.id!r}: the bound is chosen per period; use with_bound(b)")
        return self.max_cells_per_subscriber

    @property
    def counts_epsilon(self) -> float:
        return float(self.epsilon - self.slow_share_epsilon)

    @property
    def slow_ledger_key(self) -> str:
        return self.id + SLOW_SUFFIX

    def operations(self) -> dict:
        """The mechanism's parameters (for metadata and the report)."""
        return {"kind": self.kind, "epsilon": self.epsilon, "counts_epsilon": self.counts_epsilon,
                "max_cells_per_subscriber": self.max_cells_per_subscriber, "threshold": self.threshold,
                "time_coarsen": self.time_coarsen, "slow_share_epsilon": self.slow_share_epsilon,
                "q1_epsilon": self.q1_epsilon, "bound_epsilon": self.bound_epsilon}

    def ledger_debits(self) -> dict[str, float]:
        """Ledger key -> epsilon debited per period, for each table this configuration publishes."""
        debits = {self.id: self.counts_epsilon}
        if self.slow_share_epsilon > 0:
            debits[self.slow_ledger_key] = float(self.slow_share_epsilon)
        if self.q1_epsilon > 0:
            debits[self.q1_ledger_key] = float(self.q1_epsilon)
        if self.bound_epsilon > 0:
            debits[self.bound_ledger_key] = float(self.bound_epsilon)
        return debits

    def definition_hash(self) -> str:
        return _definition_hash(self)


def _number(value, name: str, fail) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise fail(f"{name} must be a finite number, not {value!r}")
    return float(value)


def _integer(value, name: str, fail) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(f"{name} must be an integer, not {value!r}")
    return value


def _at_least(fields: dict, name: str, minimum: int, fail, *, default=None, parse=None):
    """``fields[name]`` (``default`` where absent; with no default an absent field stays None), parsed (an integer
    unless ``parse`` says otherwise) and at least ``minimum``."""
    value = fields.get(name, default)
    if value is None:
        return None
    value = (parse or _integer)(value, name, fail)
    if value < minimum:
        raise fail(f"{name} must be >= {minimum}{'' if default is not None else ' or absent'}, not {value}")
    return value


def parse_dp_config(config_id: str, fields: dict) -> DpCountsConfig:
    """A ``kind = "dp_counts"`` table of the releases file (``kind`` may be left out)."""
    def fail(message: str) -> ConfigError:
        return ConfigError(f"DP configuration {config_id!r}: {message}")

    fields = dict(fields)
    kind = fields.pop("kind", DP_COUNTS)
    if kind != DP_COUNTS:
        raise fail(f"kind must be {DP_COUNTS!r}, not {kind!r}")
    known = {"description", "epsilon", "max_cells_per_subscriber", "threshold", "time_coarsen",
             "slow_share_epsilon", "slow_threshold_kbps", "slow_max_apps_per_subscriber", "slow_min_subscribers",
             "q1_epsilon", "q1_max_rows_per_subscriber", "bound_epsilon"}
    time_coarsen = _checked_common_fields(config_id, fields, known, fail)
    for required in ("epsilon", "max_cells_per_subscriber"):
        if required not in fields:
            raise fail(f"{required} is required")
    epsilon = _number(fields["epsilon"], "epsilon", fail)
    if not epsilon > 0:
        raise fail(f"epsilon must be > 0, not {epsilon}")
    bound = fields["max_cells_per_subscriber"]
    bound_epsilon = _number(fields.get("bound_epsilon", 0.0), "bound_epsilon", fail)
    if bound == AUTO:
        if not bound_epsilon > 0:
            raise fail('max_cells_per_subscriber = "auto" needs bound_epsilon > 0 (the DP estimate it is chosen from)')
    else:
        bound = _integer(bound, "max_cells_per_subscriber", fail)
        if bound < 1:
            raise fail(f"max_cells_per_subscriber must be >= 1 or \"auto\", not {bound}")
        if bound_epsilon != 0:
            raise fail('bound_epsilon is only for max_cells_per_subscriber = "auto"')
    q1_epsilon = _at_least(fields, "q1_epsilon", 0, fail, default=0.0, parse=_number)
    q1_rows = _at_least(fields, "q1_max_rows_per_subscriber", 1, fail, default=1)
    threshold = _at_least(fields, "threshold", 0, fail)
    slow_epsilon = _number(fields.get("slow_share_epsilon", 0.0), "slow_share_epsilon", fail)
    if not 0 <= slow_epsilon < epsilon:
        raise fail(f"slow_share_epsilon must be >= 0 and < epsilon ({epsilon}), not {slow_epsilon}")
    slow_threshold = _at_least(fields, "slow_threshold_kbps", 0, fail, default=1000.0, parse=_number)
    slow_bound = _at_least(fields, "slow_max_apps_per_subscriber", 1, fail, default=1)
    min_subscribers = _at_least(fields, "slow_min_subscribers", 1, fail)
    return DpCountsConfig(
        id=config_id,
        description=str(fields.get("description", "")),
        epsilon=epsilon,
        max_cells_per_subscriber=bound,
        threshold=threshold,
        time_coarsen=time_coarsen,
        slow_share_epsilon=slow_epsilon,
        slow_threshold_kbps=slow_threshold,
        slow_max_apps_per_subscriber=slow_bound,
        slow_min_subscribers=min_subscribers,
        q1_epsilon=q1_epsilon,
        q1_max_rows_per_subscriber=q1_rows,
        bound_epsilon=bound_epsilon,
    )
