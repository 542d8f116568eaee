"""The DPO's release gate: acceptance criteria declared as data in ``releases.toml``, checked against evidence.

```toml
[publication]
config = ["c22_hour_k5_shuffle_code10_round3", "c15_window_k5_noise5"]  # tried in order; the first that passes
[publication.gate]                           # every criterion must hold for a row-level candidate
singling_out_rate = { max = 0.001 }
fingerprint_correct_upper = { max = 0.05 }
[publication.gate.dp_counts]                 # a DP count release is judged by its own criteria
audit_claim_holds = { equals = true }
small_cells_total_error = { max = 8 }
[publication.pairs]                          # what a second publication of the period must keep
rows_relinked_upper = { max = 0.05 }
```

Each criterion names a value and one operator (``max``, ``min`` or ``equals``) with its limit.
The values come from a candidate's evidence (``gate_values`` for a row-level release,
``dp_gate_values`` for a DP one) or from a pair's figures (``pair_values``); see
``docs/publication.md`` for every name and how it is derived. A value that was not measured (None,
or absent) fails its criterion. Each kind of release has its own names: a DP release is never held
to a singling-out rate it cannot have, nor a row-level one to an audit of a mechanism it lacks.

Without a ``[publication]`` table nothing is publishable (``PublicationPolicy.declared`` is False
and ``check_candidate`` refuses with the reason): a gate is the DPO's decision, and a default
written in code would be a decision nobody made. For the same reason a DP release is not published
without ``[publication.gate.dp_counts]``, nor a second row-level release of a period without
``[publication.pairs]``.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Iterable

from dsh_assets.core.dp.ledger import within_caps
from dsh_assets.core.evidence.metrics import FIGURES, PRIVACY, QUESTIONS, UTILITY, Evidence, headline, published_as
from dsh_assets.core.privacy.anonymeter import LIGHT, NAME as ANONYMETER
from dsh_assets.core.release.configs import DP_COUNTS, ROW_RELEASE, ConfigError, releases_document

MAXIMUM, MINIMUM, EQUALS = "max", "min", "equals"
OPERATORS = (MAXIMUM, MINIMUM, EQUALS)
GATE_TABLE, PAIRS_TABLE = "gate", "pairs"
INTERVAL_BOUNDS = {"_lower": 0, "_upper": 1}
"""A figure ``X`` recorded with its 95% interval ``X_ci`` gives ``X_lower`` and ``X_upper``."""
UTILITY_KEPT = "utility_kept"
"""Quality groups kept / quality groups in the source."""
SAME_ANSWER = "_same"
"""``qN_same``: the released answer to question qN equals the base-data answer."""
SAME_DECISION = "q2_same_decision"
"""The release supports the decision the base data supports for Q2 (``answers.q2.same_decision``): the apps the base
data separates, in their order."""

DP_GATE_VALUES = {
    "audit_claim_holds": "the privacy audit's empirical lower bound on epsilon (95%) is at or below the claim",
    "audit_epsilon_lower": "the privacy audit's empirical lower bound on epsilon (95%)",
    "replication_ok": "the accuracy lab's draws replicate the discrete Laplace's theory",
    "q1_replication_ok": "Q1's DP medians replicate their stated accuracy",
    "small_cells_total_error": "mean |published - true distinct subscribers| per cell of fewer than 20 subscribers",
    "large_cells_total_error": "mean |published - true distinct subscribers| per cell of 20 subscribers or more",
    "budget_within_caps": "the ledger's period and year caps hold after every debit of the period",
}
"""Every name a [publication.gate.dp_counts] criterion may use (besides qN_same), and what it is."""

NOT_DECLARED = ("no release gate declared: nothing is publishable until the DPO adds a [publication] table with "
                "its [publication.gate] criteria to the release configurations file")
NO_KIND_GATE = ("no release gate declared for {kind} releases ([publication.gate.{kind}]): a DP table is published "
                "only on the DPO's own criteria for it")
NO_PAIR_CRITERIA = ("no pair criteria declared ([publication.pairs]): a second row-level publication of a period "
                    "is refused")


@dataclass(frozen=True)
class Criterion:
    """One acceptance criterion: the value called ``name`` must be at most / at least / equal to ``limit``."""

    name: str
    operator: str
    limit: float | bool

    def describe(self) -> str:
        return f"{self.operator} {_shown(self.limit)}"

    def failure(self, value) -> str | None:
        """Why ``value`` fails this criterion; None when it holds."""
        if value is None:
            return f"{self.name} not measured (needs {self.describe()})"
        if self.operator == EQUALS:
            return None if value == self.limit and type(value) is type(self.limit) else (
                f"{self.name} {_shown(value)} != {self.describe()}")
        if not _is_number(value):
            return f"{self.name} {value!r} is not a number (needs {self.describe()})"
        if self.operator == MAXIMUM:
            return None if value <= self.limit else f"{self.name} {_shown(value)} > {self.describe()}"
        return None if value >= self.limit else f"{self.name} {_shown(value)} < {self.describe()}"


@dataclass(frozen=True)
class PublicationPolicy:
    """The ``[publication]`` table: the configuration published each period, the gate and the pair criteria."""

    declared: bool
    """False when the file has no [publication] table: then nothing is publishable."""
    config_ids: tuple[str, ...]
    """The row-level configurations to publish, in the DPO's order: the first that passes is published."""
    gates: dict[str, tuple[Criterion, ...]]
    """Release kind -> its criteria: "rows" from [publication.gate], "dp_counts" from [publication.gate.dp_counts]."""
    pairs: tuple[Criterion, ...]

    def maxima(self, names: Iterable[str]) -> dict[str, float]:
        """The row-level gate's maximum of each of ``names`` it holds to one."""
        names = set(names)
        return {criterion.name: criterion.limit for criterion in self.gates.get(ROW_RELEASE, ())
                if criterion.operator == MAXIMUM and criterion.name in names}


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _shown(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if _is_number(value):
        return f"{value:g}"
    return repr(value)


def _sampled(figure) -> bool:
    """A sampled privacy figure: its headline is its risk above a baseline, so it has an interval and a baseline."""
    return figure.headline is not None and figure.headline != figure.key


def gate_value_names() -> frozenset[str]:
    """Every name a [publication.gate] criterion may use, derived from the registry of figures."""
    names = {UTILITY_KEPT, *_same_answer_names()}
    for figure in FIGURES:
        if figure.family == UTILITY:
            names.add(figure.key)
        elif figure.family == PRIVACY:
            names.add(figure.key)
            if _sampled(figure):
                names.update({figure.headline, figure.key + "_baseline",
                              *(figure.key + suffix for suffix in INTERVAL_BOUNDS)})
    return frozenset(names)


def _same_answer_names() -> tuple[str, ...]:
    return (*(question + SAME_ANSWER for question in QUESTIONS), SAME_DECISION)


def dp_gate_value_names() -> frozenset[str]:
    """Every name a [publication.gate.dp_counts] criterion may use."""
    return frozenset({*DP_GATE_VALUES, *_same_answer_names()})


def pair_value_names() -> frozenset[str]:
    """Every name a [publication.pairs] criterion may use: the pair's figures and their interval bounds."""
    from dsh_assets.core.privacy.pairs import PAIR_FIGURES, PAIR_INTERVALS

    return frozenset({*PAIR_FIGURES, *(key + suffix for key in PAIR_INTERVALS for suffix in INTERVAL_BOUNDS)})


def _with_interval_bounds(figures: dict) -> dict:
    """``figures`` plus ``X_lower`` / ``X_upper`` for each ``X_ci`` interval it holds."""
    values = dict(figures)
    for key, interval in figures.items():
        if key.endswith("_ci") and isinstance(interval, (list, tuple)) and len(interval) == 2:
            for suffix, index in INTERVAL_BOUNDS.items():
                values[key[:-3] + suffix] = interval[index]
    return values


def gate_values(evidence: Evidence) -> dict:
    """Every value a gate criterion may name, from a candidate's evidence.

    Privacy and utility figures by their own key; ``X_lower`` / ``X_upper`` from an interval ``X_ci``
    (``fingerprint_correct_upper`` is the upper end of ``fingerprint_correct_ci``); ``utility_kept`` =
    groups_kept / groups_total; ``qN_same`` = ``answers[qN]["same_answer"]``. What the evidence does not
    hold is absent, hence not measured.
    """
    values: dict = {}
    for family in (evidence.privacy, evidence.utility):
        values.update(_with_interval_bounds(family))
    kept, total = values.get("groups_kept"), values.get("groups_total")
    values[UTILITY_KEPT] = kept / total if _is_number(kept) and _is_number(total) and total > 0 else None
    return {**values, **_same_answers(evidence)}


def _same_answers(evidence: Evidence) -> dict:
    """``qN_same`` = ``answers[qN]["same_answer"]`` for each of Elina's questions, and ``q2_same_decision``."""
    same = {}
    for question in QUESTIONS:
        answer = evidence.answers.get(question)
        same[question + SAME_ANSWER] = answer.get("same_answer") if isinstance(answer, dict) else None
    q2 = evidence.answers.get("q2")
    same[SAME_DECISION] = q2.get("same_decision") if isinstance(q2, dict) else None
    return same


def dp_gate_values(evidence: Evidence) -> dict:
    """Every value a DP criterion may name (``DP_GATE_VALUES``), from a DP release's evidence: its audit, its
    accuracy lab's replication and errors, its Q1 medians' replication, the budget's status; and ``qN_same``."""
    dp, budget = evidence.dp or {}, evidence.budget
    audit, error = dp.get("audit") or {}, dp.get("error") or {}
    return {
        "audit_claim_holds": audit.get("ok"),
        "audit_epsilon_lower": audit.get("epsilon_lower"),
        "replication_ok": dp.get("replication_ok"),
        "q1_replication_ok": dp.get("q1_replication_ok"),
        "small_cells_total_error": (error.get("small") or {}).get("total"),
        "large_cells_total_error": (error.get("large") or {}).get("total"),
        "budget_within_caps": within_caps(budget) if budget else None,
        **_same_answers(evidence),
    }


def pair_values(pair_figures: dict) -> dict:
    """Every value a pair criterion may name, from ``PairResult.figures()`` (interval bounds added)."""
    return _with_interval_bounds(pair_figures)


def evaluate(criteria: Iterable[Criterion], values: dict) -> tuple[dict, list[str]]:
    """Check every criterion: ``(verdict, refused)``.

    ``verdict`` maps each criterion's name to ``{"value", "operator", "limit", "ok"}``; ``refused``
    lists one reason per failed criterion (its name, value and limit), empty when all hold. A value
    that is None or absent fails as not measured.
    """
    verdict, refused = {}, []
    for criterion in criteria:
        value = values.get(criterion.name)
        failure = criterion.failure(value)
        verdict[criterion.name] = {"value": value, "operator": criterion.operator, "limit": criterion.limit,
                                   "ok": failure is None}
        if failure is not None:
            refused.append(failure)
    return verdict, refused


VALUES_OF_KIND = {ROW_RELEASE: gate_values, DP_COUNTS: dp_gate_values}
NAMES_OF_KIND = {ROW_RELEASE: gate_value_names, DP_COUNTS: dp_gate_value_names}


def check_candidate(policy: PublicationPolicy, evidence: Evidence, kind: str = ROW_RELEASE) -> tuple[dict, list[str]]:
    """The gate of the candidate's kind over its evidence; refused outright when no gate is declared for it. A
    criterion on anonymeter's figures is judged on a full-strength evaluation only."""
    if not policy.declared:
        return {}, [NOT_DECLARED]
    kind = published_as(kind)
    if kind not in policy.gates:
        return {}, [NO_KIND_GATE.format(kind=kind)]
    verdict, refused = evaluate(policy.gates[kind], VALUES_OF_KIND[kind](evidence))
    return verdict, refused + _light_refusal(policy.gates[kind], evidence)


LIGHT_ATTACKS = {
    ANONYMETER: lambda privacy: (privacy.get(ANONYMETER) or {}).get("strength"),
    "informed_match": lambda privacy: privacy.get("informed_match_strength"),
    "cross_release": lambda privacy: privacy.get("cross_release_strength"),
}
"""The attacks with a light evaluation (their figures' prefix), and where their evidence says its strength."""


def light_evaluation(evidence: Evidence, figure: str) -> bool:
    """Whether ``figure`` comes from a light evaluation, on which the gate does not decide."""
    return _light_attack(evidence, figure) is not None


def _light_attack(evidence: Evidence, figure: str) -> str | None:
    return next((attack for attack, strength_of in LIGHT_ATTACKS.items()
                 if figure.startswith(attack + "_") and strength_of(evidence.privacy) == LIGHT), None)


def _light_refusal(criteria: tuple[Criterion, ...], evidence: Evidence) -> list[str]:
    """Why a light evaluation cannot decide the criteria on its figures (empty when none reads one)."""
    read: dict[str, list[str]] = {}
    for criterion in criteria:
        if (attack := _light_attack(evidence, criterion.name)) is not None:
            read.setdefault(attack, []).append(criterion.name)
    refusals = []
    for attack, names in read.items():
        blocks = (evidence.privacy.get(ANONYMETER) or {}).get("blocks") if attack == ANONYMETER else None
        size = f" ({blocks} block{'' if blocks == 1 else 's'})" if blocks is not None else ""
        refusals.append(f"{', '.join(names)}: {attack}'s evaluation is light{size}; the gate reads a full-strength "
                        f"one, made for the candidates [publication] config lists (or dsh run --publish names)")
    return refusals


def check_pair(policy: PublicationPolicy, pair_figures: dict) -> tuple[dict, list[str]]:
    """The pair criteria over a pair's figures (``PairResult.figures()``); refused when none are declared."""
    if not policy.declared:
        return {}, [NOT_DECLARED]
    if not policy.pairs:
        return {}, [NO_PAIR_CRITERIA]
    return evaluate(policy.pairs, pair_values(pair_figures))


def _criteria(table_name: str, table, known: frozenset[str]) -> tuple[Criterion, ...]:
    where = f"[publication.{table_name}]"
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table of criteria, not {table!r}")
    if not table:
        raise ConfigError(f"{where} declares no criterion: declare at least one, or remove the table")
    criteria = []
    for name, rule in table.items():
        if name not in known:
            raise ConfigError(f"{where} {name}: unknown criterion; known: {', '.join(sorted(known))}")
        if not isinstance(rule, dict) or len(rule) != 1:
            raise ConfigError(f"{where} {name}: write one operator and its limit, e.g. {{ max = 0.05 }}, "
                              f"not {rule!r}")
        [(operator, limit)] = rule.items()
        if operator not in OPERATORS:
            raise ConfigError(f"{where} {name}: unknown operator {operator!r}; known: {', '.join(OPERATORS)}")
        if operator in (MAXIMUM, MINIMUM) and not _is_number(limit):
            raise ConfigError(f"{where} {name}: {operator} must be a finite number, not {limit!r}")
        if operator == EQUALS and not (isinstance(limit, bool) or _is_number(limit)):
            raise ConfigError(f"{where} {name}: equals must be true, false or a number, not {limit!r}")
        criteria.append(Criterion(name, operator, limit))
    return tuple(criteria)


def _gates(table) -> dict[str, tuple[Criterion, ...]]:
    """[publication.gate]: its criteria are the row-level gate; a sub-table named by another kind, that kind's."""
    if not isinstance(table, dict):
        raise ConfigError(f"[publication.gate] must be a table of criteria, not {table!r}")
    kinds = [kind for kind in NAMES_OF_KIND if kind != ROW_RELEASE and kind in table]
    row_level = {name: rule for name, rule in table.items() if name not in kinds}
    gates = {ROW_RELEASE: _criteria(GATE_TABLE, row_level, gate_value_names())}
    for kind in kinds:
        gates[kind] = _criteria(f"{GATE_TABLE}.{kind}", table[kind], NAMES_OF_KIND[kind]())
    return gates


def parse_publication(document: dict, known_configs: Iterable[str] | None = None) -> PublicationPolicy:
    """The ``[publication]`` table of a parsed releases file; ``known_configs`` (ids) checks its ``config``."""
    publication = document.get("publication")
    if publication is None:
        return PublicationPolicy(declared=False, config_ids=(), gates={}, pairs=())
    if not isinstance(publication, dict):
        raise ConfigError(f"[publication] must be a table, not {publication!r}")
    unknown = set(publication) - {"config", GATE_TABLE, PAIRS_TABLE}
    if unknown:
        raise ConfigError(f"[publication]: unknown entries {sorted(unknown)}; known: config, gate, pairs")
    config_ids = _config_list(publication.get("config"), known_configs)
    if GATE_TABLE not in publication:
        raise ConfigError("[publication] declares no [publication.gate]: the acceptance criteria are required")
    pairs = _criteria(PAIRS_TABLE, publication[PAIRS_TABLE], pair_value_names()) if PAIRS_TABLE in publication else ()
    return PublicationPolicy(declared=True, config_ids=config_ids, gates=_gates(publication[GATE_TABLE]), pairs=pairs)


def _config_list(named, known_configs: Iterable[str] | None) -> tuple[str, ...]:
    """``[publication] config``: one configuration id, or the DPO's ordered list of them (none: nothing named)."""
    if named is None:
        return ()
    listed = [named] if isinstance(named, str) else named
    if not isinstance(listed, list) or not listed or not all(isinstance(item, str) for item in listed):
        raise ConfigError(f"[publication] config must be a configuration id or a non-empty list of them, "
                          f"not {named!r}")
    if len(set(listed)) != len(listed):
        raise ConfigError(f"[publication] config names a configuration twice: {listed!r}")
    known = None if known_configs is None else sorted(known_configs)
    unknown = [item for item in listed if known is not None and item not in known]
    if unknown:
        raise ConfigError(f"[publication] config {', '.join(map(repr, unknown))} is not a known configuration; "
                          f"known: {', '.join(known)}")
    return tuple(listed)


def load_publication(path: str | os.PathLike | None = None,
                     known_configs: Iterable[str] | None = None) -> PublicationPolicy:
    """The ``[publication]`` table of the releases file (``path``, else the packaged one)."""
    return parse_publication(releases_document(path), known_configs)


def closest_risk(policy: PublicationPolicy, evidence: Evidence) -> tuple[str, float, float] | None:
    """The privacy criterion of the row-level gate nearest its limit (the largest value / limit) with its value and
    limit: the worst risk the gate decided on; None when no privacy criterion was measured."""
    values, privacy = gate_values(evidence), {figure.key for figure in FIGURES if figure.family == PRIVACY}
    read = [(criterion.name, values.get(criterion.name), criterion.limit)
            for criterion in policy.gates.get(ROW_RELEASE, ()) if criterion.operator == MAXIMUM
            and (criterion.name in privacy or criterion.name.rsplit("_", 1)[0] in privacy)]
    measured = [(name, value, limit) for name, value, limit in read if _is_number(value) and limit > 0]
    return max(measured, key=lambda item: item[1] / item[2], default=None)


def frontier_point(policy: PublicationPolicy, evidence: Evidence, failures: list[str]) -> dict:
    """A candidate as the frontier shows it: its worst risk and the attack behind it, the utility it keeps, the
    joint figure's worst error, which answers hold, and the gate's verdict over its evidence (``failures``: its
    failed checks and steps, which refuse it too)."""
    gate, refused = check_candidate(policy, evidence)
    risk, attack = headline(evidence.privacy)
    utility, answers = evidence.utility, evidence.answers
    total = utility.get("groups_total")
    refused = [*failures, *refused]
    return {"worst_risk": risk, "worst_attack": attack,
            "utility_kept": utility["groups_kept"] / total if total else None,
            "joint_max_error_pp": utility.get("joint_max_error_pp"),
            **{f"{q}_same": (answers.get(q) or {}).get("same_answer") for q in QUESTIONS},
            "gate": gate, "refused": refused, "publishable": not refused}
