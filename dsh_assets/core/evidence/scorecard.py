"""The cross-configuration scorecard: what each release protects and what it keeps, side by side.

Headline risk of a row-level release = the largest of its attack figures above their baselines
(singling-out rate, fingerprint / linkage / alias-chain / cross-release risk, inference rate):
the release is as weak as its weakest measured attack. Utility kept = quality groups kept /
groups in the source. A DP release is bounded by its epsilon instead and has no headline risk.
"""

from __future__ import annotations

import io

import pandas as pd

HEADLINE_FIGURES = (
    ("singling_out_rate", "singling out"),
    ("fingerprint_correct_risk", "numeric fingerprint"),
    ("linkage_correct_risk", "linkage"),
    ("alias_chain_correct_risk", "alias chaining"),
    ("cross_release_relinked_risk", "cross-release"),
    ("inference_rate", "inference"),
)
COLUMNS = [
    "config", "kind", "rows_released", "rows_withheld", "singling_out_rate", "fingerprint_correct",
    "linkage_correct", "alias_chain_correct", "cross_release_relinked", "inference_rate", "headline_risk",
    "weakest_against", "groups_kept", "groups_total", "utility_kept", "max_quantile_error",
    "max_tail_share_error_pp", "q1_same", "q2_same", "q3_same", "epsilon",
]


def _headline(privacy: dict) -> tuple[float | None, str | None]:
    measured = [(privacy.get(key), label) for key, label in HEADLINE_FIGURES if privacy.get(key) is not None]
    if not measured:
        return None, None
    return max(measured)


def scorecard_frame(evidence: dict[str, dict], released: dict[str, dict]) -> pd.DataFrame:
    """One row per configuration from `evidence.evidence_from_figures` shapes and `released` metadata."""
    rows = []
    for config_id, figures in evidence.items():
        privacy = figures.get("privacy") or {}
        utility = figures.get("utility") or {}
        answers = figures.get("answers") or {}
        risk, weakest = _headline(privacy)
        total, kept = utility.get("groups_total"), utility.get("groups_kept")
        meta = released.get(config_id, {})
        rows.append({
            "config": config_id,
            "kind": "dp_counts" if "dp" in figures else "rows",
            "rows_released": meta.get("rows_released"),
            "rows_withheld": meta.get("rows_withheld"),
            "singling_out_rate": privacy.get("singling_out_rate"),
            "fingerprint_correct": privacy.get("fingerprint_correct"),
            "linkage_correct": privacy.get("linkage_correct"),
            "alias_chain_correct": privacy.get("alias_chain_correct"),
            "cross_release_relinked": privacy.get("cross_release_relinked"),
            "inference_rate": privacy.get("inference_rate"),
            "headline_risk": risk,
            "weakest_against": weakest,
            "groups_kept": kept,
            "groups_total": total,
            "utility_kept": kept / total if total else None,
            "max_quantile_error": utility.get("max_quantile_error"),
            "max_tail_share_error_pp": utility.get("max_tail_share_error_pp"),
            "q1_same": (answers.get("q1") or {}).get("same_answer"),
            "q2_same": (answers.get("q2") or {}).get("same_answer"),
            "q3_same": (answers.get("q3") or {}).get("same_answer"),
            "epsilon": (figures.get("dp") or {}).get("epsilon"),
        })
    return pd.DataFrame(rows, columns=COLUMNS, dtype=object)


def _figure_png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return buffer.getvalue()


def risk_utility_png(frame: pd.DataFrame) -> bytes:
    """Headline risk (lower is better) against utility kept (higher is better), one point per configuration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plotted = frame[frame["headline_risk"].notna() & frame["utility_kept"].notna()]
    figure, axes = plt.subplots(figsize=(6.4, 4.4))
    axes.scatter(plotted["utility_kept"].astype(float), plotted["headline_risk"].astype(float), s=60, color="#3566a8")
    for _, row in plotted.iterrows():
        axes.annotate(row["config"], (float(row["utility_kept"]), float(row["headline_risk"])),
                      textcoords="offset points", xytext=(6, 4), fontsize=8)
    axes.set_xlim(-0.05, 1.1)
    axes.set_ylim(-0.05, 1.05)
    axes.set_xlabel("utility kept: quality groups kept / total")
    axes.set_ylabel("headline risk: weakest attack above baseline")
    axes.set_title("Risk vs utility per release configuration")
    axes.grid(alpha=0.3)
    png = _figure_png(figure)
    plt.close(figure)
    return png


def attacks_png(frame: pd.DataFrame) -> bytes:
    """Each attack's figure per configuration, grouped bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    attacks = ["singling_out_rate", "fingerprint_correct", "linkage_correct", "alias_chain_correct",
               "cross_release_relinked", "inference_rate"]
    rows = frame[frame["kind"] == "rows"]
    figure, axes = plt.subplots(figsize=(8.0, 4.2))
    width = 0.8 / max(len(rows), 1)
    positions = np.arange(len(attacks))
    for offset, (_, row) in enumerate(rows.iterrows()):
        values = [float(row[a]) if row[a] is not None else 0.0 for a in attacks]
        axes.bar(positions + offset * width, values, width, label=row["config"])
    axes.set_xticks(positions + width * (len(rows) - 1) / 2, [a.replace("_", " ") for a in attacks], rotation=20,
                    fontsize=8)
    axes.set_ylim(0, 1.05)
    axes.set_ylabel("share of targets / subscribers")
    axes.set_title("Attack success per configuration (absent alias: no bar)")
    axes.legend(fontsize=7)
    axes.grid(axis="y", alpha=0.3)
    png = _figure_png(figure)
    plt.close(figure)
    return png
