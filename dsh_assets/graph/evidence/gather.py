"""The figures each configuration's evidence assets recorded, gathered in one shape for the CLI and the scorecard."""

import dagster as dg

from dsh_assets.graph.history import recorded_metadata
from dsh_assets.graph.partitions import release_key

ATTACK_ASSETS = ("singling_out", "numeric_fingerprint", "linkage", "cross_release_linkage", "inference")
EVIDENCE_ASSETS = ("released", *ATTACK_ASSETS, "quality_groups", "elina_answers", "dp_accuracy_lab")


def evidence_from_figures(figures: dict[str, dict]) -> dict:
    """{"privacy", "utility", "answers"} and, for a DP release, {"dp", "budget"}; None where not applicable."""
    privacy = {}
    for name in ATTACK_ASSETS:
        privacy.update(figures.get(name) or {})
    evidence = {
        "privacy": privacy or None,
        "utility": figures.get("quality_groups") or None,
        "answers": figures.get("elina_answers") or None,
    }
    released = figures.get("released") or {}
    if "dp" in released:
        evidence["dp"] = {**released["dp"], **(figures.get("dp_accuracy_lab") or {})}
        evidence["budget"] = released["budget"]
    return evidence


def recorded_evidence(instance: dg.DagsterInstance, config_id: str, period: str) -> tuple[dict, dict[str, dict]]:
    """(the latest `released` metadata, asset name -> latest metadata) of one configuration and period."""
    key = str(release_key(config_id, period))
    latest = {}
    for name in EVIDENCE_ASSETS:
        history = recorded_metadata(instance, dg.AssetKey(name), key, limit=1)
        if history:
            latest[name] = history[0]
    return latest.get("released", {}), latest
