"""The cross-configuration scorecard: what each release protects and what it keeps, side by side.

Headline risk of a row-level release, as the period's only publication = the largest of its
attack figures above their baselines (singling-out rate, fingerprint / linkage / alias-chain risk,
inference rate): the release is as weak as its weakest measured attack. What a second release of
the period would add is measured apart (re-release relinking, and the pairs of candidates). Utility kept = quality groups kept /
groups in the source. A DP release is bounded by its epsilon instead and has no headline risk.
"""

from __future__ import annotations

import io

import pandas as pd

from dsh_assets.core.evidence.metrics import (
    ANSWERS,
    ATTACK_FIGURES,
    DP,
    HEADLINE_FIGURES,
    PRIVACY,
    QUESTIONS,
    UTILITY,
    family_figures,
)

_ATTACK_COLUMNS = [figure.key for figure in ATTACK_FIGURES]
_UTILITY_COLUMNS = [figure.key for figure in family_figures(UTILITY, scorecard_only=True)]
COLUMNS = [
    "config", "kind", "rows_released", "rows_withheld", *_ATTACK_COLUMNS, "headline_risk", "weakest_against",
    *_UTILITY_COLUMNS[:2], "utility_kept", *_UTILITY_COLUMNS[2:], *(f"{q}_same" for q in QUESTIONS), "epsilon",
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
        privacy = figures.get(PRIVACY) or {}
        utility = figures.get(UTILITY) or {}
        answers = figures.get(ANSWERS) or {}
        risk, weakest = _headline(privacy)
        total, kept = utility.get("groups_total"), utility.get("groups_kept")
        meta = released.get(config_id, {})
        rows.append({
            "config": config_id,
            "kind": "dp_counts" if DP in figures else "rows",
            "rows_released": meta.get("rows_released"),
            "rows_withheld": meta.get("rows_withheld"),
            **{key: privacy.get(key) for key in _ATTACK_COLUMNS},
            "headline_risk": risk,
            "weakest_against": weakest,
            **{key: utility.get(key) for key in _UTILITY_COLUMNS},
            "utility_kept": kept / total if total else None,
            **{f"{q}_same": (answers.get(q) or {}).get("same_answer") for q in QUESTIONS},
            "epsilon": (figures.get(DP) or {}).get("epsilon"),
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

    attacks = _ATTACK_COLUMNS
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
