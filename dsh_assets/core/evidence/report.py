"""The human report: one self-contained HTML file per period, for the data protection officer and Elina.

Everything is inline (styles, plots as base64 PNG), so the file reads the same from a mail
attachment as from the home folder. An inline script counts the plots that decoded and renders
the count on the page (`data-plots-rendered` on <body>), which the headless-browser test reads.
"""

from __future__ import annotations

import base64
import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only
    import pandas as pd

from dsh_assets.core.evidence import questions
from dsh_assets.core.evidence.metrics import (
    ATTACK_FIGURES,
    FIGURES_BY_KEY,
    QUESTION_TEXT,
    QUESTIONS,
    Evidence,
    published_as,
)
from dsh_assets.core.evidence.scorecard import RELATIONSHIP_TOLERANCE
from dsh_assets.core.privacy.informed_match import NEAREST
from dsh_assets.core.release.configs import DP_SYNTHETIC, ROW_RELEASE

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #1d2733; line-height: 1.45; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 1px solid #ccd; padding-bottom: 0.2rem; margin-top: 2.2rem; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.86rem; }
th, td { border: 1px solid #ccd; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #eef1f6; } .num { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #5b6675; } .bad { color: #a11; } .good { color: #17642e; } code { font-size: 0.85rem; }
/* a long configuration name in a header may break anywhere rather than widen a table past the page */
.wide { overflow-x: auto; } .wide th { overflow-wrap: anywhere; } .wide td.num { white-space: nowrap; } figure { margin: 1rem 0; } img { max-width: 100%; border: 1px solid #dde; }
p, li, td { overflow-wrap: break-word; } code { overflow-wrap: anywhere; } .verdict { font-size: 1.05rem; } .question { font-weight: 600; }
"""
SCRIPT = """
window.addEventListener('load', function () {
  var plots = Array.prototype.slice.call(document.querySelectorAll('img[data-plot]'));
  var rendered = plots.filter(function (img) { return img.complete && img.naturalWidth > 0; }).length;
  document.body.setAttribute('data-plots-rendered', String(rendered));
  document.body.setAttribute('data-plots-total', String(plots.length));
  document.getElementById('plot-status').textContent = rendered + ' of ' + plots.length + ' plots rendered';
});
"""


def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def _fmt(value) -> str:
    if value is None:
        return '<span class="muted">n/a</span>'
    if isinstance(value, bool):
        return '<span class="good">yes</span>' if value else '<span class="bad">no</span>'
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 1000 else f"{value:.3f}"
    if isinstance(value, (list, tuple)):
        return _e(", ".join(str(v) for v in value))
    return _e(value)


def _table(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{_fmt(v)}</td>' if isinstance(v, (int, float)) and not isinstance(v, bool)
                         else f"<td>{_fmt(v)}</td>" for v in row) + "</tr>"
        for row in frame.itertuples(index=False, name=None)
    )
    return f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _plot(name: str, png: bytes, caption: str) -> str:
    data = base64.b64encode(png).decode()
    return (f'<figure><img data-plot="{_e(name)}" alt="{_e(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption class=\"muted\">{_e(caption)}</figcaption></figure>")


def _interval(privacy: dict, key: str) -> str:
    value = privacy.get(key)
    if value is None:
        return _fmt(None)
    parts = [f"{value:.3f}"]
    ci = privacy.get(f"{key}_ci")
    if ci:
        parts.append(f"95% CI {ci[0]:.3f}-{ci[1]:.3f}")
    baseline = privacy.get(f"{key}_baseline")
    if baseline is not None:
        parts.append(f"baseline {baseline:.3f}, risk {privacy.get(f'{key}_risk', 0):.3f}")
    return _e("; ".join(parts))


PROTECTS = tuple((figure.key, figure.explains) for figure in ATTACK_FIGURES)


def _stability(answer: dict) -> str:
    rate, draws = answer.get("same_answer_rate"), answer.get("same_answer_draws")
    return "" if rate is None else _e(f" (same in {round(rate * draws)} of {draws} draws)")


def _dp_evidence(dp: dict) -> str:
    """The DP release's audit, its errors against the true counts (total first) and the bound's curve."""
    parts = []
    audit = dp.get("audit")
    if audit:
        low, high = audit.get("epsilon_lower_ci") or (None, None)
        parts.append(f"<p>Privacy audit (an independent attack, {_fmt(audit.get('draws'))} draws per input, "
                     f"{_fmt(audit.get('target_cells'))} cells of a worst-case subscriber): epsilon is at least "
                     f"{_fmt(audit.get('epsilon_lower'))} (95% interval {_fmt(low)} to {_fmt(high)}) against a claim "
                     f"of {_fmt(audit.get('epsilon_claimed'))}; claim holds: {_fmt(audit.get('ok'))}.</p>")
    error = dp.get("error")
    if error:
        rows = "".join(f"<tr><td>{_e(size)} ({_fmt(e.get('cells'))} cells)</td><td>{_fmt(e.get('total'))}</td>"
                       f"<td>{_fmt(e.get('bias'))}</td><td>{_fmt(e.get('noise'))}</td></tr>"
                       for size, e in error.items())
        parts.append("<p>Error a planner sees, mean per cell against the true distinct subscribers "
                     "(small: fewer than 20):</p><table><tr><th>cells</th><th>total error</th>"
                     f"<th>bounding bias</th><th>noise</th></tr>{rows}</table>")
    bound = dp.get("bound")
    if bound:
        rows = "".join(f"<tr><td>{_e(b)}{' (used)' if str(b) == str(bound.get('chosen')) else ''}</td>"
                       f"<td>{_fmt(total)}</td></tr>"
                       for b, total in sorted((bound.get("candidates") or {}).items(), key=lambda item: float(item[0])))
        parts.append(f"<p>Contribution bound {_fmt(bound.get('chosen'))} cells per subscriber "
                     f"({_e(bound.get('basis') or '')}); expected total error per cell (bias + noise) by bound:</p>"
                     f"<table><tr><th>bound</th><th>expected total error</th></tr>{rows}</table>")
    return "".join(parts)


def _config_section(config_id: str, description: str, operations: dict, evidence: Evidence, released: dict,
                    details: dict | None = None) -> str:
    details = details or {}
    privacy, utility, answers = evidence.privacy, evidence.utility, evidence.answers
    ops = ", ".join(f"{k} = {v}" for k, v in operations.items())
    parts = [f'<h3 id="{_e(config_id)}">{_e(config_id)}</h3>', f"<p>{_e(description)}<br>"
             f"<span class=\"muted\">Operations: {_e(ops)}</span></p>"]
    if privacy:
        rows = "".join(f"<tr><td>{_e(label)}</td><td>{_interval(privacy, key)}</td></tr>" for key, label in PROTECTS)
        parts.append(f"<h4>What it protects</h4><table><tr><th>attack</th><th>figure</th></tr>{rows}</table>"
                     + _anonymeter_strength(privacy.get("anonymeter")) + _light_samples(privacy))
    if evidence.is_dp:
        dp, budget = evidence.dp, evidence.budget or {}
        parts.append(
            "<h4>What it protects</h4><p>Differential privacy per period: "
            f"epsilon {_fmt(dp.get('epsilon'))} (counts {_fmt(dp.get('counts_epsilon'))}), sensitivity "
            f"{_fmt(dp.get('sensitivity'))} cells per subscriber, discrete Laplace scale {_fmt(dp.get('scale'))}. "
            f"Replication of the mechanism's theory: {_fmt(dp.get('replication_ok'))}; mean absolute error on small "
            f"cells {_fmt(dp.get('mae_small_cells'))}, on large cells {_fmt(dp.get('mae_large_cells'))}.</p>")
        parts.append(_dp_release_in_words(dp, released))
        parts.append(_budget_in_words(dp, budget))
        parts.append(_dp_evidence(dp))
    keeps = []
    if utility:
        lost = utility.get("lost_groups") or []
        keeps.append(f"<p>Quality groups kept: {_fmt(utility.get('groups_kept'))} of {_fmt(utility.get('groups_total'))}; "
                     f"median / worst quantile error {_fmt(utility.get('median_quantile_error'))} / "
                     f"{_fmt(utility.get('max_quantile_error'))} of the p10-p90 spread; worst tail-share error "
                     f"{_fmt(utility.get('max_tail_share_error_pp'))} pp; in the large groups, worst quantile error "
                     f"{_fmt(utility.get('large_group_max_quantile_error'))} and worst tail-share error "
                     f"{_fmt(utility.get('large_group_max_tail_share_error_pp'))} pp. Lost or inexpressible: "
                     f"{_e(', '.join(lost[:12]) + (f' and {len(lost) - 12} more' if len(lost) > 12 else '')) or 'none'}.</p>")
    relationships = relationships_in_words(utility, details.get("relationships") or [])
    if relationships:
        keeps.append(f"<p>{_e(relationships)}</p>")
    if answers:
        rows = "".join(
            f"<tr><td>{name.upper()}</td><td>{_fmt(answer.get('base'))}</td><td>{_fmt(answer.get('release'))}</td>"
            f"<td>{_fmt(answer.get('same_answer'))}{_stability(answer)}</td>"
            f"<td>{_fmt(answer.get('same_decision')) if 'same_decision' in answer else ''}</td></tr>"
            for name, answer in answers.items())
        keeps.append("<table><tr><th>question</th><th>base data</th><th>release</th><th>same answer</th>"
                     f"<th>same decision</th></tr>{rows}</table>")
    if keeps:
        parts.append("<h4>What it keeps</h4>" + "".join(keeps))
    cannot = [f"{name.upper()}: {answer.get('release')}" for name, answer in answers.items()
              if isinstance(answer.get("release"), str) and answer["release"].startswith("unavailable")]
    joint = joint_verdict(utility)
    if joint:
        cannot.append(joint)
    parts.append("<h4>What it cannot answer, and why</h4><p>" + (_e("; ".join(cannot)) or "Every question is answered from this release.") + "</p>")
    provenance = {k: released.get(k) for k in ("source_sha256", "sha256", "seed_id", "seed_kind", "code_version",
                                               "config_hash", "rows_in", "rows_released", "rows_withheld")}
    rows = "".join(f"<tr><td>{_e(k)}</td><td><code>{_fmt(v)}</code></td></tr>" for k, v in provenance.items())
    parts.append(f"<h4>Provenance</h4><table>{rows}</table>")
    parts.append(_origins_table(details.get("origins") or {}))
    return "\n".join(parts)


def _light_samples(privacy: dict) -> str:
    """The sampled attacks evaluated lightly (a candidate the publication does not try), and how."""
    light = []
    if privacy.get("informed_match_strength") == "light":
        targets = max((entry.get("n") or 0 for entry in privacy.get("informed_match") or []), default=0)
        light.append(f"the informed attacker on {targets:,} targets")
    if privacy.get("cross_release_strength") == "light":
        light.append(f"cross-release linkage on {_fmt(privacy.get('cross_release_n'))} probed rows against a second "
                     f"release made for their cells alone")
    if not light:
        return ""
    return (f"<p class=\"muted\">Light evaluations, marked as such (the gate reads full-strength ones): "
            f"{_e('; '.join(light))}.</p>")


def _anonymeter_strength(anonymeter: dict | None) -> str:
    """How hard anonymeter looked: full strength (what the gate reads) or the light evaluation, and its attacks."""
    if not anonymeter or "strength" not in anonymeter:
        return ""
    attacks = {name: (anonymeter.get(name) or {}).get("n_attacks") for name in
               ("singling_out", "singling_out_univariate", "linkability")}
    what = ("full strength, what the gate reads" if anonymeter["strength"] == "full" else
            "a light evaluation, marked as such: the gate reads only a full-strength one")
    blocks, narrowed = anonymeter.get("blocks"), anonymeter.get("narrowed") or []
    further = (f"; {', '.join(narrowed)}, whose interval held the gate's limit, on "
               f"{_fmt(anonymeter.get('further_blocks'))} further blocks" if anonymeter.get("further_blocks") else "")
    return (f"<p class=\"muted\">anonymeter: {_e(what)}; {_fmt(blocks)} block{'' if blocks == 1 else 's'}, "
            f"{_fmt(attacks['singling_out_univariate'])} attacks of univariate singling out, "
            f"{_fmt(attacks['singling_out'])} of multivariate, {_fmt(attacks['linkability'])} of linkability"
            f"{_e(further)}, each upper end the 95% interval's.</p>")


def _error(value) -> str:
    """An error figure with two significant digits: errors of 0.0003 and 0.37 both say something."""
    return "n/a" if value is None else f"{value:.2g}"


def elinas_losses(utility: dict, answers: dict, details: dict) -> str | None:
    """What Elina loses, in her figures: her quantiles and tail shares where her decisions rest, Q1 and Q2."""
    if not utility:
        return None
    worst = details.get("large_groups") or {}
    parts = [f"her quantiles move by a median {_error(utility.get('median_quantile_error'))} of their p10-p90 "
             f"spread"]
    if utility.get("large_group_max_quantile_error") is not None:
        parts.append(f"in the large groups by at most {_error(utility['large_group_max_quantile_error'])} "
                     f"({worst.get('large_group_worst_quantile') or 'n/a'}), her tail shares by at most "
                     f"{_error(utility.get('large_group_max_tail_share_error_pp'))} pp "
                     f"({worst.get('large_group_worst_tail') or 'n/a'})")
    q1, q2 = answers.get("q1") or {}, answers.get("q2") or {}
    if q1:
        parts.append(f"Q1 {'keeps' if q1.get('same_answer') else 'loses'} its answer ({_fmt(q1.get('base'))} in the "
                     f"base data, {_fmt(q1.get('release'))} released)")
    if q2:
        parts.append(f"Q2 {'supports the same decision' if q2.get('same_decision') else 'supports another decision'}"
                     f" ({'the same six in the same order' if q2.get('same_answer') else 'not the same six in order'})")
    return "; ".join(parts)


def relationships_in_words(utility: dict, entries: list[dict]) -> str | None:
    """Which relationships between a session's measurements the release keeps, and which it loses: the strong pairs
    whose rank correlation moves by more than the picture's band in some large group, the worst first."""
    if not utility or "pair_correlation_max_error" not in utility:
        return None
    worst = utility.get("pair_correlation_max_error")
    if worst is None:
        return ("Relationships between measurements: not measured (the release groups apps or drops a measurement "
                "of a strong pair), so nothing is known of what it keeps of a session.")
    if not entries:
        return "Relationships between measurements: the base data has no strong pair in a large group."
    lost = lost_relationships(entries, RELATIONSHIP_TOLERANCE)
    pairs, groups = {(e["x"], e["y"]) for e in entries}, {(e["app"], e["radio"]) for e in entries}
    text = (f"Relationships between measurements: a strong pair's rank correlation moves by at most {worst:.2f} "
            f"(median {utility.get('pair_correlation_median_error'):.3f}) over {len(pairs)} strong pairs in "
            f"{len(groups)} large (app, radio) groups. ")
    if not lost:
        return text + "It keeps every relationship the base data shows within 0.1."
    named = "; ".join(f"{_pair_words(e)} ({e['app']} / {e['radio']}: {e['source']:.2f} in the base data, "
                      f"{e['release']:.2f} released)" for e in lost[:5])
    more = f", and {len(lost) - 5} more pairs" if len(lost) > 5 else ""
    return text + f"It loses {len(lost)} of them: {named}{more}."


def lost_relationships(entries: list[dict], limit: float) -> list[dict]:
    """The strong pairs whose worst error over ``entries`` (kept (strong pair, large group) entries, as the metadata's
    ``pair_correlation`` lists them) exceeds ``limit``, each with its worst entry, worst first: the relationships the
    release does not keep."""
    worst: dict[tuple[str, str], dict] = {}
    for entry in entries:
        pair = (entry["x"], entry["y"])
        if entry["error"] > limit and (pair not in worst or entry["error"] > worst[pair]["error"]):
            worst[pair] = entry
    return sorted(worst.values(), key=lambda e: (-e["error"], e["x"], e["y"]))


def _pair_words(entry: dict) -> str:
    return f"{MEASUREMENT_WORDS.get(entry['x'], entry['x'])} ~ {MEASUREMENT_WORDS.get(entry['y'], entry['y'])}"


JOINT_QUESTION = "which apps' 5G sessions are both slow and laggy"
JOINT_TOLERANCE_PP = 1.0
"""A joint share off by more than this (percentage points) for some app does not answer the joint question: the
shares are a few percent, so an error of this size already reorders apps."""


def joint_verdict(utility: dict) -> str | None:
    """Why the release cannot answer the joint question (a session's download and latency together), or None."""
    joint = utility.get("joint") or {}
    if not joint:
        return None
    if all(v.get("release") is None for v in joint.values()):
        return f"{JOINT_QUESTION}: unavailable (apps grouped, a column dropped, or too few sessions released)"
    worst = utility.get("joint_max_error_pp")
    if worst is not None and worst > JOINT_TOLERANCE_PP:
        app = max((a for a, v in joint.items() if v.get("error_pp") is not None), key=lambda a: joint[a]["error_pp"])
        return (f"{JOINT_QUESTION}: off by up to {worst:.1f} percentage points ({app}: {joint[app]['base']:.1%} in "
                f"the base data, {joint[app]['release']:.1%} released), since the release does not keep a session's "
                f"download and latency in one row")
    return None


def _origins_table(origins: dict[str, dict]) -> str:
    """Where each number of the configuration comes from: the asset and partition that recorded it, the code."""
    if not origins:
        return ""
    rows = "".join(f"<tr><td>{_e(o.get('asset'))}</td><td>{_e(o.get('partition'))}</td>"
                   f"<td><code>{_fmt(o.get('code_version'))}</code></td><td><code>{_fmt(o.get('run_id'))}</code></td></tr>"
                   for o in origins.values())
    return ("<p>Where its numbers come from (the latest materialisation of each Dagster asset):</p><table><tr>"
            "<th>asset</th><th>partition</th><th>code version</th><th>run</th></tr>" + rows + "</table>")


def _dp_release_in_words(dp: dict, released: dict) -> str:
    """The contribution bound: rows kept and dropped, and why."""
    bound = dp.get("sensitivity")
    return (f"<p>The DP release: of {_fmt(released.get('rows_in'))} source rows, {_fmt(released.get('rows_released'))} "
            f"were counted and {_fmt(released.get('rows_withheld'))} dropped by the contribution bound. Why: the "
            f"privacy unit is the subscriber, so each subscriber counts in at most {_fmt(bound)} cells; adding or "
            f"removing one subscriber then changes at most {_fmt(bound)} counts by one, which sets the noise scale. "
            "A subscriber's rows beyond that bound are dropped, not noised: they bias large cells down a little "
            "(the bounding bias below) instead of widening the noise for every cell.</p>")


def _budget_in_words(dp: dict, budget: dict) -> str:
    """The privacy budget and the DPO's decision in words, with the year's total epsilon."""
    return (f"<p>The budget, as the data protection officer decided it: at most {_fmt(budget.get('period_cap'))} "
            f"epsilon per period and {_fmt(budget.get('year_cap'))} per year. This period used "
            f"{_fmt(budget.get('period_used'))}; this year so far {_fmt(budget.get('year_used'))} in total. "
            f"<strong>A per-table epsilon repeated daily is not a strong annual protection:</strong> epsilons add up "
            f"over releases, so a subscriber present all year is protected by the year's total epsilon "
            f"({_fmt(budget.get('year_used'))} so far, up to {_fmt(budget.get('year_cap'))}), not by the "
            f"{_fmt(dp.get('epsilon'))} of one table. The ledger refuses a release that would pass either cap.</p>")


def _gate_rows(gate: dict) -> str:
    return "".join(f"<tr><td>{_e(name)}</td><td>{_fmt(c.get('value'))}</td><td>{_e(c.get('operator'))} "
                   f"{_fmt(c.get('limit'))}</td><td>{_fmt(c.get('ok'))}</td></tr>" for name, c in gate.items())


def _published_line(what: str, record: dict) -> str:
    return (f"<p><strong>{what}: {_e(record['config'])}</strong> (<code>{_e(record['path'])}</code>, SHA-256 "
            f"<code>{_e(record['sha256'])}</code>, {_e(record['published_at'])}).</p>")


def _why(verdict: dict) -> str:
    """Why a candidate is (not) published, in its kind's terms; for a DP release, what its tables cost."""
    kind = published_as(verdict.get("kind", ROW_RELEASE))
    table = f"[publication.gate{'' if kind == ROW_RELEASE else '.' + kind}]"
    why = "; ".join(verdict["refused"]) or f"every blocking check passed and every criterion of {table} holds"
    if verdict.get("kind") == DP_SYNTHETIC:
        why += (". A synthetic table: no row is a session, so the attacks that look for a session's own row score 0 "
                "by construction; anonymeter's tests and the epsilon are its evidence")
    spent = verdict.get("epsilon_spent")
    if spent is None:
        return why
    if not spent:
        return f"{why}. Its budget: nothing spent for this period"
    cost = "spent all the same: its tables were drawn before the gate" if verdict["refused"] else "spent"
    return f"{why}. Its budget: epsilon {spent:g} {cost}"


def _tried(listed: tuple[str, ...], verdicts: dict[str, dict], publication: dict | None) -> str:
    """The DPO's list in its order, up to the candidate published: why each one above it was refused."""
    if not listed:
        return ""
    items = []
    for config_id in listed:
        if publication and config_id == publication["config"]:
            items.append(f"<li>{_e(config_id)}: published.</li>")
            break
        verdict = verdicts.get(config_id)
        why = "; ".join(verdict["refused"]) if verdict else "no candidate of this period"
        items.append(f"<li>{_e(config_id)}: refused: {_e(why or 'not tried')}.</li>")
    return ("<p>The DPO's list ([publication] config), tried in its order until a candidate passes:</p><ol>"
            + "".join(items) + "</ol>")


def _publication_section(period: str, verdicts: dict[str, dict], publication: dict | None,
                         dp_publications: list[dict], listed: tuple[str, ...] = ()) -> str:
    """The verdict first: what is published this period and why (the DPO's list tried in order), then every other
    candidate and why not. A DP release is judged by its own criteria and published beside the period's release."""
    nothing = "No row-level release is" if dp_publications else "Nothing is"
    head = (_published_line(f"Published for {_e(period)}", publication) if publication
            else f"<p><strong>{nothing} published for {_e(period)}.</strong></p>")
    head += _tried(listed, verdicts, publication)
    head += "".join(_published_line(f"DP count tables published for {_e(period)}", record)
                    for record in dp_publications)
    rows = [f"<tr><td>{_e(config_id)}</td><td>{_e(verdict['status'])}</td><td>{_fmt(verdict['publishable'])}</td>"
            f"<td>{_e(_why(verdict))}</td></tr>" for config_id, verdict in verdicts.items()]
    gates = "".join(
        f"<h4>Gate for {_e(config_id)}</h4><table><tr><th>criterion</th><th>value</th><th>limit</th><th>holds</th></tr>"
        f"{_gate_rows(verdict['gate'])}</table>" for config_id, verdict in verdicts.items() if verdict["gate"])
    return ("<h2>Publication</h2>" + head +
            "<table><tr><th>candidate</th><th>status</th><th>publishable</th><th>why</th></tr>"
            + "".join(rows) + "</table>" + gates)


MEASUREMENT_WORDS = {
    "dl_throughput_kbps": "download speed", "ul_throughput_kbps": "upload speed", "radio_latency_ms": "latency",
    "core_latency_ms": "core latency", "jitter_ms": "jitter", "packet_loss_pct": "packet loss",
    "retransmission_pct": "retransmissions", "dl_volume_kb": "download volume", "ul_volume_kb": "upload volume",
    "session_duration_s": "duration", "tcp_handshake_ms": "handshake time", "dns_latency_ms": "DNS latency",
    "video_stall_count": "video stalls", "cqi": "channel quality",
}
"""The default measurement names in words (a source with other names shows its own)."""


def _listed(names) -> str:
    words = [MEASUREMENT_WORDS.get(name, name) for name in names]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def informed_sentence(config_id: str, entries: list[dict], rule: str | None) -> str:
    """What the strongest knowledge set gives the informed attacker, in one sentence."""
    worst = max(entries, key=lambda entry: entry["risk"])
    found = round(100 * worst["correct"])
    chance = round(100 * worst["baseline"])
    what = "finds the session's own values of its other measurements" if rule == NEAREST else "finds its row"
    return (f"{config_id}: someone who knows the {_listed(worst['known'])} of one of your sessions {what} in "
            f"{found} of 100 tries (a random pick in its cell: {chance} of 100).")


def _informed_section(evidence: dict[str, Evidence], plots: dict) -> str:
    """The attacker who knows the mechanism, in words per configuration, and its chart."""
    sentences = [informed_sentence(config_id, candidate.privacy["informed_match"],
                                   candidate.privacy.get("informed_match_rule"))
                 for config_id, candidate in evidence.items() if candidate.privacy.get("informed_match")]
    if not sentences:
        return ""
    return ("<h2>An attacker who knows the mechanism</h2><p>It has read the configuration file (every release's "
            "operations and parameters are public) but holds none of the secrets, and knows a few measurements of "
            "one session, as a phone's speed test or an app's log records them.</p><ul>"
            + "".join(f"<li>{_e(sentence)}</li>" for sentence in sentences) + "</ul>"
            + "".join(_plot(name, *plots[name]) for name in plots if name == "informed_match"))


def _range(interval) -> str | None:
    return None if not interval else f"{interval[0]:.3f} to {interval[1]:.3f}"


def _pairs_section(pairs: dict[str, dict[str, dict]]) -> str:
    """What an attacker holding two candidates of the period gets, pair by pair."""
    if not pairs:
        return ("<h2>Two candidates held together</h2><p>Computed for a candidate held with a release already "
                "published this period, when a further publication is asked for (dsh run --also-publish): none "
                "was.</p>")
    rows = "".join(
        f"<tr><td>{_e(b)}</td><td>{_e(a)}</td><td class=\"num\">{_fmt(figures.get('rows_relinked'))}</td>"
        f"<td>{_e(_range(figures.get('rows_relinked_ci')))}</td><td class=\"num\">{_fmt(figures.get('rows_relinked_baseline'))}"
        f"</td><td class=\"num\">{_fmt(figures.get('combined_singling_out_rate'))}</td></tr>"
        for b, by_a in sorted(pairs.items()) for a, figures in sorted(by_a.items()))
    return ("<h2>Two candidates held together</h2><p>If two candidates of one period were both published, an "
            "attacker holding both relinks rows of B to A by their measurements within compatible cells, and "
            "B's rows then carry A's finer quasi-identifiers. This is why one release is published per period.</p>"
            "<table><tr><th>B (relinked)</th><th>A (held)</th><th>rows relinked</th><th>95% interval</th>"
            "<th>chance</th><th>combined singling out</th></tr>" + rows + "</table>")


def _answer_words(question: str, numbers: dict, side: str, short) -> str:
    """One side's answer in words: from the recorded numbers where there are some, else the short answer."""
    if question == "q1":
        words = questions.q1_words(numbers, side)
    elif question == "q2":
        words = questions.q2_words(numbers.get(f"q2_{side}_shares"))
    else:
        words = questions.q3_words(numbers.get(f"q3_{side}", short))
    if words:
        return words
    if isinstance(short, str) and "station identifier removed" in short:
        return questions.UNAVAILABLE_STATION
    return ", ".join(str(v) for v in short) if isinstance(short, (list, tuple)) else str(short)


def _questions_section(evidence: dict[str, Evidence], details: dict[str, dict], plots: dict) -> str:
    """Elina's three questions in words: the base answer, each release's answer, a chart of base beside release."""
    parts = ["<h2>Elina's questions</h2><p>Three questions Elina, Elisa's product manager, cannot ask today, "
             "answered from the base data and from each release.</p>"]
    for question in QUESTIONS:
        answered = {c: f.answers.get(question) for c, f in evidence.items()}
        answered = {c: a for c, a in answered.items() if a}
        parts.append(f'<h3 class="question">{_e(question.upper())}: {_e(QUESTION_TEXT[question])}</h3>')
        base_config = next(iter(answered), None)
        if base_config is None:
            parts.append("<p>No release has answered it yet.</p>")
            continue
        numbers = (details.get(base_config) or {}).get("answers") or {}
        parts.append(f"<p>From the base data: "
                     f"{_e(_answer_words(question, numbers, 'base', answered[base_config].get('base')))}.</p>")
        rows = "".join(
            f"<tr><td>{_e(c)}</td><td>{_e(_answer_words(question, (details.get(c) or {}).get('answers') or {}, 'release', a.get('release')))}"
            f"</td><td>{_fmt(a.get('same_answer'))}</td></tr>" for c, a in answered.items())
        parts.append("<table><tr><th>release</th><th>its answer</th><th>same answer as the base data</th></tr>"
                     f"{rows}</table>")
        parts += [_plot(name, *plots[name]) for name in plots if name.startswith(question + "_")]
    return "".join(parts)


def _distorted(cell: dict) -> str:
    text = f"{cell['group']}: worst quantile error {_fmt(cell.get('max_quantile_error'))} of the p10-p90 spread"
    if cell.get("source") is not None and cell.get("release") is not None:
        text += f" ({cell['quantile']} {cell['source']:,.1f} in the base data, {cell['release']:,.1f} released)"
    if cell.get("tail_share_source") is not None and cell.get("tail_share_release") is not None:
        text += (f"; share beyond the fixed threshold {cell['tail_share_source']:.1%} in the base data, "
                 f"{cell['tail_share_release']:.1%} released")
    return text


SAMPLE_LIMITS = ("The source is the synthetic generator: times are fabricated (six ten-minute windows per period), "
                 "locations randomised, effects planted on purpose. No journey, real congestion event or causal "
                 "effect of an upgrade can be read from it; medians are in the generator's own units.")


def _gives_up_section(evidence: dict[str, Evidence], configs: dict[str, tuple[str, dict]], details: dict[str, dict],
                      source: dict) -> str:
    """What each configuration gives up: lost groups, the most distorted cells, subscriber grouping, sample limits."""
    parts = ["<h2>What each configuration gives up</h2>"]
    for config_id, candidate in evidence.items():
        operations = configs[config_id][1]
        utility, items = candidate.utility, []
        lost = utility.get("lost_groups") or []
        if utility:
            named = ", ".join(lost[:20]) + (f" and {len(lost) - 20:,} more" if len(lost) > 20 else "")
            items.append(f"Sparse groups lost: {_fmt(utility.get('groups_kept'))} of "
                         f"{_fmt(utility.get('groups_total'))} quality groups kept"
                         + (f"; lost: {_e(named)}." if lost else "; none lost."))
        losses = elinas_losses(utility, candidate.answers, details.get(config_id) or {})
        if losses:
            items.append(_e("Elina's figures: " + losses) + ".")
        if joint_verdict(utility):
            items.append(_e("Cannot answer " + joint_verdict(utility)) + ".")
        worst = [c for c in (details.get(config_id) or {}).get("worst_cells") or [] if c.get("max_quantile_error")]
        if utility and not worst:
            items.append("Numbers distorted: no kept quality group moved.")
        if worst:
            items.append("Numbers distorted most: " + "; ".join(_e(_distorted(c)) for c in worst[:3]) + ".")
        if candidate.is_dp:
            items.append("Counts only: no row-level data, no per-subscriber or per-station question.")
        elif not operations.get("pseudonym"):
            items.append("No subscriber grouping: no alias is released, so no heavy-user, churn or per-customer "
                         "question (by design).")
        parts.append(f"<h3>{_e(config_id)}</h3><ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>")
    if (source.get("origin") or {}).get("kind") == "synthetic":
        parts.append(f"<p><strong>Sample limits.</strong> {_e(SAMPLE_LIMITS)}</p>")
    return "".join(parts)


SUMMARY_HEADERS = {
    "config": "configuration", "status": "status", "gate": "gate verdict",
    "headline_risk": "headline risk (as the period's only publication)", "weakest_against": "weakest against",
    "groups_kept": FIGURES_BY_KEY["groups_kept"].label,
    **{f"{q}_same": f"{FIGURES_BY_KEY[q].label}: same answer" for q in QUESTIONS},
}
"""The scorecard's summary: one row per configuration, headers in words (figure labels from the registry)."""


def _scorecard_detail(frame: pd.DataFrame) -> str:
    """Every scorecard figure as a row and every configuration as a column, so the table fits the page however
    many figures the registry holds."""
    detail = frame.set_index("config").astype(object).T
    detail.index = [FIGURES_BY_KEY[key].label if key in FIGURES_BY_KEY else key for key in detail.index]
    return _table(detail.rename_axis("figure").reset_index())


def _scorecard_summary(frame: pd.DataFrame) -> str:
    columns = [c for c in SUMMARY_HEADERS if c in frame.columns]
    return _table(frame[columns].rename(columns=SUMMARY_HEADERS))


LAB_HEADERS = {
    "epsilon": "epsilon", "scale": "noise scale", "mae": "measured mean absolute error",
    "theory_mae": "theory's mean absolute error", "tolerance": "tolerance", "passed": "replicates the theory",
    "small_cells": "small cells (< 20)", "small_rel_error_published": "small cells: relative error published",
    "large_cells": "large cells", "large_rel_error_published": "large cells: relative error published",
    "accuracy_95": "95% half-width", "coverage_95": "share of draws within it",
}


def _lab_section(lab: list[dict] | None) -> str:
    """The DP accuracy lab as a table with headers in words."""
    if not lab or not isinstance(lab, list):
        return ""
    import pandas as pd  # on first use: 0.3 s of every dsh start-up otherwise
    frame = pd.DataFrame(lab)
    columns = [c for c in LAB_HEADERS if c in frame.columns]
    return ("<h2>DP accuracy lab</h2><p>Repeated draws of the DP mechanism on the period's true bounded counts "
            "(evaluation only: never published, no budget spent): does the measured error replicate the "
            "mechanism's own theory, per epsilon, with small cells apart?</p>"
            + _table(frame[columns].astype(object).rename(columns=LAB_HEADERS)))


def render_report(period: str, frame: pd.DataFrame, evidence: dict[str, Evidence], released: dict[str, dict],
                  configs: dict[str, tuple[str, dict]], plots: dict[str, tuple[bytes, str]], lab: list[dict] | None,
                  verdicts: dict[str, dict] | None = None, pairs: dict | None = None,
                  publication: dict | None = None, details: dict[str, dict] | None = None,
                  source: dict | None = None, dp_publications: list[dict] | None = None,
                  listed: tuple[str, ...] = ()) -> str:
    """The whole report. `configs`: id -> (description, operations); `plots`: name -> (png, caption), the
    question charts named "q1_...", "q2_...", "q3_..."; `lab`: the DP accuracy lab's rows; `verdicts`: id -> the
    gate's verdict; `pairs`: B -> A -> pair figures; `publication`: the period's row-level publication,
    `dp_publications`: each DP table published beside it; `details`: id -> the
    numbers behind the answers, the most distorted cells and where each asset's figures were recorded;
    `source`: the period's source as recorded; `listed`: the DPO's ordered publication list."""
    details, source = details or {}, source or {}
    sections = "\n".join(
        _config_section(config_id, *configs[config_id], evidence[config_id], released.get(config_id, {}),
                        details.get(config_id))
        for config_id in evidence)
    toc = " · ".join(f'<a href="#{_e(c)}">{_e(c)}</a>' for c in evidence)
    question_plots = {n: p for n, p in plots.items() if n.split("_")[0] in QUESTIONS}
    plots_html = "".join(_plot(name, png, caption) for name, (png, caption) in plots.items()
                         if name not in question_plots and name != "informed_match")
    verdict = (_publication_section(period, verdicts, publication, dp_publications or [], listed)
               if verdicts is not None else "")
    origin = source.get("origin") or {}
    source_line = (f"<p class=\"muted\">Source of {_e(period)}: {_e(origin.get('kind', 'unknown'))}, "
                   f"{_fmt(source.get('rows'))} rows, {_fmt(source.get('subscribers'))} subscribers, SHA-256 "
                   f"<code>{_e(source.get('sha256'))}</code>; recorded by asset {_e(source.get('asset'))}, partition "
                   f"{_e(source.get('partition'))}, code version <code>{_e(source.get('code_version'))}</code>.</p>"
                   if source else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>dsh_assets release report {_e(period)}</title>
<style>{STYLE}</style></head>
<body>
<h1>Release report, period {_e(period)}</h1>
<p class="muted">The verdict first; then Elina's questions, the scorecard, what each configuration gives up, and
each configuration in detail: what it does, protects (attack figures with 95% intervals and baselines), keeps and
cannot answer, and where every number comes from. <span id="plot-status">plots not rendered</span>.</p>
{source_line}
{verdict}
{_questions_section(evidence, details, question_plots)}
<h2>Scorecard</h2>
{_scorecard_summary(frame)}
{plots_html}
<h3>Scorecard in detail</h3>
{_scorecard_detail(frame)}
{_informed_section(evidence, plots)}
{_gives_up_section(evidence, configs, details, source)}
{_pairs_section(pairs or {})}
<h2>Configurations</h2>
<p>{toc}</p>
{sections}
{_lab_section(lab)}
<p class="muted">Singled out is not identified; a measured attack is one attacker model, not every attacker.
Nothing here is a legal determination.</p>
<script>{SCRIPT}</script>
</body></html>
"""
