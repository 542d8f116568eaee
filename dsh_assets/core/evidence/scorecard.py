"""The cross-configuration scorecard: what each release protects and what it keeps, side by side.

Headline risk of a row-level release, as the period's only publication = the largest of its
attack figures above their baselines (singling-out rate, fingerprint / linkage / alias-chain risk,
inference rate): the release is as weak as its weakest measured attack. What a second release of
the period would add is measured apart (re-release relinking, and the pairs of candidates). Utility kept = quality groups kept /
groups in the source. A DP release is bounded by its epsilon instead and has no headline risk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only
    import pandas as pd

from dsh_assets.core.evidence.charts import legend_beside, new_figure, nothing_drawn, png
from dsh_assets.core.evidence.metrics import (
    ATTACK_FIGURES,
    FIGURES_BY_KEY,
    HEADLINE_FIGURES,
    QUESTIONS,
    UTILITY,
    Evidence,
    family_figures,
    headline,
)

_ATTACK_COLUMNS = [figure.key for figure in ATTACK_FIGURES]
_UTILITY_COLUMNS = [figure.key for figure in family_figures(UTILITY, scorecard_only=True)]
COLUMNS = [
    "config", "kind", "status", "gate", "rows_released", "rows_withheld", *_ATTACK_COLUMNS, "headline_risk", "weakest_against",
    *_UTILITY_COLUMNS[:2], "utility_kept", *_UTILITY_COLUMNS[2:], *(f"{q}_same" for q in QUESTIONS), "epsilon",
]


def gate_summary(verdict: dict | None) -> str | None:
    """The gate's verdict in a few words: "passes", or the failed criteria (quarantine and checks first)."""
    if not verdict:
        return None
    if not verdict["refused"]:
        return "passes"
    return "refused: " + "; ".join(verdict["refused"])


def scorecard_frame(evidence: dict[str, Evidence], released: dict[str, dict],
                    verdicts: dict[str, dict] | None = None) -> pd.DataFrame:
    """One row per configuration from its evidence, release metadata and the gate's verdicts (config id ->
    {"status", "refused", ...}; status and gate are None without them)."""
    verdicts = verdicts or {}
    rows = []
    for config_id, candidate in evidence.items():
        privacy, utility, answers = candidate.privacy, candidate.utility, candidate.answers
        risk, weakest = headline(privacy)
        total, kept = utility.get("groups_total"), utility.get("groups_kept")
        meta = released.get(config_id, {})
        rows.append({
            "config": config_id,
            "kind": "dp_counts" if candidate.is_dp else "rows",
            "status": (verdicts.get(config_id) or {}).get("status"),
            "gate": gate_summary(verdicts.get(config_id)),
            "rows_released": meta.get("rows_released"),
            "rows_withheld": meta.get("rows_withheld"),
            **{key: privacy.get(key) for key in _ATTACK_COLUMNS},
            "headline_risk": risk,
            "weakest_against": weakest,
            **{key: utility.get(key) for key in _UTILITY_COLUMNS},
            "utility_kept": kept / total if total else None,
            **{f"{q}_same": (answers.get(q) or {}).get("same_answer") for q in QUESTIONS},
            "epsilon": (candidate.dp or {}).get("epsilon"),
        })
    import pandas as pd  # on first use: 0.3 s of every dsh start-up otherwise
    return pd.DataFrame(rows, columns=COLUMNS, dtype=object)


def gate_region(criteria) -> tuple[float | None, float | None]:
    """(the least utility kept, the most headline risk) the gate's criteria allow, for the frontier's shading: its
    ``utility_kept`` minimum and the largest maximum it puts on a figure that counts toward headline risk."""
    headline_keys = {key for key, _ in HEADLINE_FIGURES}
    utility = [c.limit for c in criteria if c.name == "utility_kept" and c.operator == "min"]
    risks = [c.limit for c in criteria if c.name in headline_keys and c.operator == "max"]
    return (max(utility) if utility else None, max(risks) if risks else None)


def risk_utility_png(frame: pd.DataFrame, region: tuple[float | None, float | None] = (None, None),
                     published: str | None = None) -> bytes:
    """The risk-utility frontier: each candidate's worst risk (lower is better) against the utility it keeps
    (quality groups kept, higher is better) and, beside it, against how far it moves the kept groups' quantiles
    (lower is better), which tells candidates that keep the same groups apart. One mark per candidate, filled
    where the gate passes it; the region the gate's limits accept shaded; the published candidate ringed."""
    plotted = frame[frame["headline_risk"].notna() & frame["utility_kept"].notna()].reset_index(drop=True)
    figure, (kept_axes, error_axes) = new_figure(11.0, 4.6, columns=2)
    least_utility, most_risk = region
    ceiling = ((most_risk if most_risk is not None else 1.0) + 0.05) / 1.1
    if least_utility is not None or most_risk is not None:
        kept_axes.axvspan(least_utility if least_utility is not None else -0.05, 1.1, ymax=ceiling,
                          color="tab:green", alpha=0.12, label="the gate's utility and risk limits hold")
    if most_risk is not None:
        error_axes.axhspan(-0.05, most_risk, color="tab:green", alpha=0.12)
    errors = plotted["max_quantile_error"].astype(float)
    for index, row in plotted.iterrows():
        colour, marker = f"C{index % 10}", "osD^vP*X"[index % 8]
        passes = row["gate"] == "passes"
        for axes, x in ((kept_axes, float(row["utility_kept"])), (error_axes, errors[index])):
            axes.scatter([x], [float(row["headline_risk"])], s=70, marker=marker, zorder=3, edgecolors=colour,
                         facecolors=colour if passes else "none", linewidths=1.4,
                         label=row["config"] + ("" if passes else " (refused)") if axes is kept_axes else None)
            if row["config"] == published:
                axes.scatter([x], [float(row["headline_risk"])], s=330, facecolors="none", edgecolors="black",
                             linewidths=1.5, zorder=4, label=f"published: {published}" if axes is kept_axes else None)
    kept_axes.set_xlim(-0.05, 1.1)
    kept_axes.set_xlabel("utility kept: quality groups kept / total")
    error_axes.set_xlabel("worst quantile error of a kept group (share of its p10-p90 spread)")
    for axes in (kept_axes, error_axes):
        axes.set_ylim(-0.05, 1.05)
        axes.set_ylabel("worst risk: the strongest attack above its baseline")
        axes.grid(alpha=0.3)
    figure.suptitle("The risk-utility frontier of the period's candidates")
    if plotted.empty:
        nothing_drawn(kept_axes, "no row-level candidate with both figures")
    else:
        figure.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.99, 0.95),
                      title="candidate (hollow: refused by the gate)", title_fontsize=7)
    return png(figure)


def attacks_png(frame: pd.DataFrame) -> bytes:
    """Each attack's figure per configuration, grouped bars."""
    import numpy as np

    attacks = _ATTACK_COLUMNS
    rows = frame[frame["kind"] == "rows"]
    figure, axes = new_figure(8.4, 4.2)
    width = 0.8 / max(len(rows), 1)
    positions = np.arange(len(attacks))
    for offset, (_, row) in enumerate(rows.iterrows()):
        measured = [row[a] is not None and row[a] == row[a] for a in attacks]
        values = [float(row[a]) if ok else 0.0 for a, ok in zip(attacks, measured)]
        bars = axes.bar(positions + offset * width, values, width, label=row["config"])
        colour = bars.patches[0].get_facecolor() if bars.patches else None
        for position, ok, value in zip(positions + offset * width, measured, values):
            if not ok:  # not measured (e.g. no alias released): a hatched outline marked n/a, unlike a zero
                axes.bar(position, 0.06, width, fill=False, hatch="///", edgecolor=colour, linewidth=0.6)
                axes.text(position, 0.07, "n/a", ha="center", va="bottom", fontsize=6, rotation=90)
            elif value == 0.0:  # measured zero: a solid line on the axis and a 0
                axes.plot([position - width / 2, position + width / 2], [0.0, 0.0], color=colour, linewidth=2.5)
                axes.text(position, 0.01, "0", ha="center", va="bottom", fontsize=6)
    axes.set_xticks(positions + width * (len(rows) - 1) / 2, [FIGURES_BY_KEY[a].label for a in attacks], rotation=20,
                    fontsize=8)
    axes.set_ylim(0, 1.05)
    axes.set_ylabel("share of targets / subscribers")
    axes.set_title("Attack success per configuration (hatched n/a: not measured; 0: measured zero)")
    legend_beside(axes, fontsize=7)
    if rows.empty:
        nothing_drawn(axes, "no row-level candidate")
    axes.grid(axis="y", alpha=0.3)
    return png(figure)


def informed_match_png(evidence: dict[str, Evidence]) -> bytes | None:
    """The informed attacker's success against how many measurements of the session it knows, per configuration:
    a point per knowledge set, a line through the best at each count, the random pick dotted."""
    series = {config_id: candidate.privacy.get("informed_match") or []
              for config_id, candidate in evidence.items()}
    series = {config_id: entries for config_id, entries in series.items() if entries}
    if not series:
        return None
    figure, axes = new_figure(7.6, 4.4)
    for index, (config_id, entries) in enumerate(series.items()):
        counts = sorted({len(entry["known"]) for entry in entries})
        best = [max(entry["correct"] for entry in entries if len(entry["known"]) == count) for count in counts]
        line = axes.plot(counts, best, marker="osD^vP*X"[index % 8], label=config_id)[0]
        axes.scatter([len(entry["known"]) for entry in entries], [entry["correct"] for entry in entries],
                     color=line.get_color(), s=18, zorder=3)
        axes.plot(counts, [max(entry["baseline"] for entry in entries if len(entry["known"]) == count)
                           for count in counts], color=line.get_color(), linestyle=":", linewidth=1)
    counts = sorted({len(entry["known"]) for entries in series.values() for entry in entries})
    axes.set_xticks(counts)
    axes.set_xlim(min(counts) - 0.3, max(counts) + 0.3)
    axes.set_ylim(-0.03, 1.03)
    axes.set_xlabel("measurements of the session the attacker knows")
    axes.set_ylabel("share of targets: the session's other values found")
    axes.set_title("An attacker who knows the mechanism (dotted: a random pick in the cell)")
    legend_beside(axes, fontsize=8)
    axes.grid(alpha=0.3)
    return png(figure)


RELATIONSHIP_TOLERANCE = 0.10
"""The band drawn around the diagonal of the relationships picture: the default gate's worst pair-correlation
error."""


def relationships_png(relationships: dict[str, list[dict]]) -> bytes | None:
    """Per row-level candidate, a panel: each strong pair in each large (app, radio) group as a point, its rank
    correlation in the base data against the release's; on the diagonal a release keeps the relationship, the band
    is +-0.1. Candidates without the figure (apps grouped, a measurement dropped) are left out."""
    shown = {config_id: entries for config_id, entries in relationships.items() if entries}
    if not shown:
        return None
    columns = min(3, len(shown))
    rows = -(-len(shown) // columns)
    figure = new_figure(3.4 * columns, 3.3 * rows)[0]
    figure.clear()
    for index, (config_id, entries) in enumerate(shown.items()):
        axes = figure.add_subplot(rows, columns, index + 1)
        source = [entry["source"] for entry in entries]
        release = [entry["release"] for entry in entries]
        axes.fill_between([-1, 1], [-1 - RELATIONSHIP_TOLERANCE, 1 - RELATIONSHIP_TOLERANCE],
                          [-1 + RELATIONSHIP_TOLERANCE, 1 + RELATIONSHIP_TOLERANCE], color="#2a7", alpha=0.12)
        axes.plot([-1, 1], [-1, 1], color="#555", linewidth=0.8)
        axes.scatter(source, release, s=6, alpha=0.5)
        worst = max(abs(r - s) for s, r in zip(source, release))
        axes.set_title(f"{config_id}\nworst change {worst:.2f}", fontsize=8)
        axes.set_xlim(-1, 1)
        axes.set_ylim(-1, 1)
        axes.set_xticks([-1, -0.5, 0, 0.5, 1])
        axes.set_yticks([-1, -0.5, 0, 0.5, 1])
        axes.set_aspect("equal")
        axes.tick_params(labelsize=7)
        axes.set_xlabel("rank correlation, base data", fontsize=7)
        axes.set_ylabel("rank correlation, release", fontsize=7)
        axes.grid(alpha=0.3)
    figure.tight_layout()
    return png(figure)


def pairs_png(pairs: dict[str, dict[str, dict]]) -> bytes:
    """Heat map: rows of B (row) relinked to A (column) by an attacker holding both candidates."""
    import numpy as np

    names = sorted(pairs)
    values = np.full((len(names), len(names)), np.nan)
    for i, b in enumerate(names):
        for j, a in enumerate(names):
            value = (pairs[b].get(a) or {}).get("rows_relinked")
            if value is not None:
                values[i, j] = value
    figure, axes = new_figure(1.6 + 1.1 * len(names), 1.2 + 0.8 * len(names))
    image = axes.imshow(values, vmin=0.0, vmax=1.0, cmap="Reds")
    axes.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    axes.set_yticks(range(len(names)), names, fontsize=8)
    for i in range(len(names)):
        for j in range(len(names)):
            text = "-" if np.isnan(values[i, j]) else f"{values[i, j]:.2f}"
            axes.text(j, i, text, ha="center", va="center", fontsize=8)
    axes.set_xlabel("A: the candidate the attacker relinks to")
    axes.set_ylabel("B: the candidate whose rows are relinked")
    axes.set_title("Two candidates of one period held together")
    figure.colorbar(image, ax=axes, fraction=0.046, pad=0.04, label="rows of B relinked")
    return png(figure)


def dp_error_png(lab: list[dict]) -> bytes | None:
    """The accuracy lab's mean relative error of the published counts against epsilon (log-log), small and large
    cells apart: what a planner loses per cell at each epsilon the DPO could choose."""
    series = {label: [(row["epsilon"], row[key]) for row in lab if row.get(key) is not None and row.get("epsilon")]
              for label, key in (("small cells (< 20)", "small_rel_error_published"),
                                 ("large cells", "large_rel_error_published"))}
    series = {label: sorted(points) for label, points in series.items() if points}
    if not series:
        return None
    figure, axes = new_figure(7.6, 4.0)
    for (label, points), marker in zip(series.items(), "os"):
        axes.plot([e for e, _ in points], [v for _, v in points], marker=marker, label=label)
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("epsilon per release")
    axes.set_ylabel("mean relative error of the published count")
    axes.set_title("DP accuracy lab: error against epsilon")
    axes.legend(fontsize=8)
    axes.grid(alpha=0.3, which="both")
    return png(figure)
