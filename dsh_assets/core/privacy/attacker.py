"""The attacker we assume, declared as data: the ``[attacker]`` table of the release configurations file.

Its knowledge sets (lists of measurements the attacker knows of a target session), the knowledge error, the
sample, and how anonymeter is run (``[attacker.anonymeter]``); ``releases.toml`` states every key with its
default, so a releases file without the table is judged by the same attacker. A name that is not a measurement
of the roles file, an empty knowledge set or an out-of-range number is a one-line ``ConfigError``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dsh_assets.core.release.configs import ConfigError
from dsh_assets.core.release.schema import Schema

ATTACKER_TABLE = "attacker"
ANONYMETER_TABLE = "anonymeter"
DEFAULT_KNOWN_MEASUREMENTS = (
    ("dl_throughput_kbps",),
    ("dl_throughput_kbps", "radio_latency_ms"),
    ("dl_throughput_kbps", "radio_latency_ms", "session_duration_s"),
    ("ul_volume_kb", "dl_volume_kb", "session_duration_s"),
)
DEFAULT_SAMPLE_SIZE = 1_000
DEFAULT_LIGHT_SAMPLE_SIZE = 200
DEFAULT_SAMPLE_SEED = 2028
"""Not a secret: it picks which released sessions are targets and breaks ties; it never touches the release."""
DEFAULT_ANONYMETER_ATTACKS = 500
DEFAULT_BLOCK_ROWS = 3_000
DEFAULT_CPU_SECONDS = 90.0
DEFAULT_LIGHT_CPU_SECONDS = 5.0
DEFAULT_ANONYMETER_SEED = 2029
"""Not a secret: it draws anonymeter's blocks, splits their subscribers and seeds its samples."""
DEFAULT_COMMON_VALUE_SHARE = 0.5
ANONYMETER_KEYS = ("known", "attacks", "block_rows", "cpu_seconds", "light_cpu_seconds", "seed",
                   "common_value_share")


@dataclass(frozen=True)
class AnonymeterSettings:
    """How anonymeter is run beside the informed attacker (``[attacker.anonymeter]``)."""

    known: tuple[str, ...]
    """The measurements its attacker knows besides the released cell (its inference and linkability aux columns)."""
    attacks: int = DEFAULT_ANONYMETER_ATTACKS
    """Attacks of each test on each block (at most one per row of its targets and of its control)."""
    block_rows: int = DEFAULT_BLOCK_ROWS
    """Source rows a block's cells hold, at least (a larger cell enters as a part of about this many): half of them
    the training rows, half the control."""
    cpu_seconds: float = DEFAULT_CPU_SECONDS
    """The CPU budget of a full-strength evaluation (the candidates the publication list tries), the same at every
    size: it buys as many blocks as a block's reference cost fits (``anonymeter.plan``), pooled."""
    light_cpu_seconds: float = DEFAULT_LIGHT_CPU_SECONDS
    """The budget of the light evaluation of the other candidates: one block, with fewer attacks where one block of
    ``attacks`` costs more."""
    seed: int = DEFAULT_ANONYMETER_SEED
    common_value_share: float = DEFAULT_COMMON_VALUE_SHARE
    """A secret whose most common value holds at least this share of the blocks' values is attacked on the other
    values' sessions (the rule for mostly-constant secrets, ``docs/privacy.md``)."""


@dataclass(frozen=True)
class AttackerModel:
    """What the strongest attacker tried knows: the mechanism (every configuration is public), the target's
    released categorical fields, and the values of one knowledge set of its measurements."""

    knowledge_sets: tuple[tuple[str, ...], ...]
    knowledge_error: float
    """Each known value is the true one times (1 + e), e uniform in [-knowledge_error, knowledge_error]."""
    sample_size: int
    sample_seed: int
    anonymeter: AnonymeterSettings
    light_sample_size: int = DEFAULT_LIGHT_SAMPLE_SIZE
    """The sample of a light evaluation (the candidates the publication does not try): the informed attacker's
    targets and the rows cross-release linkage probes."""


def _fail(message: str) -> ConfigError:
    return ConfigError(f"[{ATTACKER_TABLE}] {message}")


def _measurement_list(value, where: str, schema: Schema | None) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(name, str) for name in value):
        raise _fail(f"{where}: each knowledge set is a non-empty list of column names, not {value!r}")
    if len(set(value)) != len(value):
        raise _fail(f"{where}: {value!r} names a column twice")
    if schema is not None:
        unknown = [name for name in value if name not in schema.measurements]
        if unknown:
            raise _fail(f"{where}: {', '.join(map(repr, unknown))} is not a measurement of the roles file; "
                        f"measurements: {', '.join(schema.measurements)}")
    return tuple(value)


def _positive_integer(table: dict, key: str, default: int, where: str) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(f"{where}{key} must be a positive integer, not {value!r}")
    return value


def _share(table: dict, key: str, default: float, where: str, upper: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not 0 <= value < upper:
        raise _fail(f"{where}{key} must be a number in [0, {upper:g}), not {value!r}")
    return float(value)


def _seconds(table: dict, key: str, default: float, where: str) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise _fail(f"{where}{key} must be a positive number of CPU seconds, not {value!r}")
    return float(value)


def _anonymeter(table, knowledge_sets: tuple[tuple[str, ...], ...], schema: Schema | None) -> AnonymeterSettings:
    if not isinstance(table, dict):
        raise _fail(f"{ANONYMETER_TABLE} must be a table, not {table!r}")
    if "holdout_share" in table:
        raise _fail(f"{ANONYMETER_TABLE}.holdout_share is no longer a setting: the control is the other half of each "
                    f"block's subscribers, as large as the training half (anonymeter compares equal samples); "
                    f"remove the key")
    unknown = set(table) - set(ANONYMETER_KEYS)
    if unknown:
        raise _fail(f"{ANONYMETER_TABLE}: unknown keys {sorted(unknown)}; known: {', '.join(ANONYMETER_KEYS)}")
    default_known = max(knowledge_sets, key=len)
    known = _measurement_list(list(table.get("known", default_known)), f"{ANONYMETER_TABLE}.known", schema)
    where = f"{ANONYMETER_TABLE}."
    seed = table.get("seed", DEFAULT_ANONYMETER_SEED)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise _fail(f"{where}seed must be a non-negative integer, not {seed!r}")
    share = table.get("common_value_share", DEFAULT_COMMON_VALUE_SHARE)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
        raise _fail(f"{where}common_value_share must be a share in (0, 1], not {share!r}")
    return AnonymeterSettings(
        known=known,
        attacks=_positive_integer(table, "attacks", DEFAULT_ANONYMETER_ATTACKS, where),
        block_rows=_positive_integer(table, "block_rows", DEFAULT_BLOCK_ROWS, where),
        cpu_seconds=_seconds(table, "cpu_seconds", DEFAULT_CPU_SECONDS, where),
        light_cpu_seconds=_seconds(table, "light_cpu_seconds", DEFAULT_LIGHT_CPU_SECONDS, where),
        seed=seed,
        common_value_share=float(share),
    )


def parse_attacker(document: dict, schema: Schema | None = None) -> AttackerModel:
    """The ``[attacker]`` table of a parsed releases file (its defaults where absent), checked against the roles."""
    table = document.get(ATTACKER_TABLE, {})
    if not isinstance(table, dict):
        raise _fail(f"must be a table, not {table!r}")
    known_keys = ("known_measurements", "knowledge_error", "sample_size", "light_sample_size", "sample_seed",
                  ANONYMETER_TABLE)
    unknown = set(table) - set(known_keys)
    if unknown:
        raise _fail(f"unknown keys {sorted(unknown)}; known: {', '.join(known_keys)}")
    sets = table.get("known_measurements", [list(s) for s in DEFAULT_KNOWN_MEASUREMENTS])
    if not isinstance(sets, list) or not sets:
        raise _fail(f"known_measurements must be a non-empty list of knowledge sets, not {sets!r}")
    knowledge_sets = tuple(_measurement_list(s, "known_measurements", schema) for s in sets)
    seed = table.get("sample_seed", DEFAULT_SAMPLE_SEED)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise _fail(f"sample_seed must be a non-negative integer, not {seed!r}")
    return AttackerModel(
        knowledge_sets=knowledge_sets,
        knowledge_error=_share(table, "knowledge_error", 0.0, "", 1.0),
        sample_size=_positive_integer(table, "sample_size", DEFAULT_SAMPLE_SIZE, ""),
        sample_seed=seed,
        anonymeter=_anonymeter(table.get(ANONYMETER_TABLE, {}), knowledge_sets, schema),
        light_sample_size=_positive_integer(table, "light_sample_size", DEFAULT_LIGHT_SAMPLE_SIZE, ""),
    )
