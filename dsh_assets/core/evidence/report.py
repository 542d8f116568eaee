"""The human report: one self-contained HTML file per period, for the data protection officer and Elina.

Everything is inline (styles, plots as base64 PNG), so the file reads the same from a mail
attachment as from the home folder. An inline script counts the plots that decoded and renders
the count on the page (`data-plots-rendered` on <body>), which the headless-browser test reads.
"""

from __future__ import annotations

import base64
import html

import pandas as pd

from dsh_assets.core.evidence.metrics import ATTACK_FIGURES

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #1d2733; line-height: 1.45; }
h1 { margin-bottom: 0.2rem; } h2 { border-bottom: 1px solid #ccd; padding-bottom: 0.2rem; margin-top: 2.2rem; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.86rem; }
th, td { border: 1px solid #ccd; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #eef1f6; } .num { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #5b6675; } .bad { color: #a11; } .good { color: #17642e; } code { font-size: 0.85rem; }
.wide { overflow-x: auto; } figure { margin: 1rem 0; } img { max-width: 100%; border: 1px solid #dde; }
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
    if isinstance(value, float):
        return f"{value:.3f}"
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
                       f"<td>{_fmt(total)}</td></tr>" for b, total in (bound.get("candidates") or {}).items())
        parts.append(f"<p>Contribution bound {_fmt(bound.get('chosen'))} cells per subscriber "
                     f"({_e(bound.get('basis') or '')}); expected total error per cell (bias + noise) by bound:</p>"
                     f"<table><tr><th>bound</th><th>expected total error</th></tr>{rows}</table>")
    return "".join(parts)


def _config_section(config_id: str, description: str, operations: dict, figures: dict, released: dict) -> str:
    privacy, utility, answers = figures.get("privacy") or {}, figures.get("utility") or {}, figures.get("answers") or {}
    ops = ", ".join(f"{k} = {v}" for k, v in operations.items())
    parts = [f'<h3 id="{_e(config_id)}">{_e(config_id)}</h3>', f"<p>{_e(description)}<br>"
             f"<span class=\"muted\">Operations: {_e(ops)}</span></p>"]
    if privacy:
        rows = "".join(f"<tr><td>{_e(label)}</td><td>{_interval(privacy, key)}</td></tr>" for key, label in PROTECTS)
        parts.append(f"<h4>What it protects</h4><table><tr><th>attack</th><th>figure</th></tr>{rows}</table>")
    if "dp" in figures:
        dp, budget = figures["dp"], figures.get("budget") or {}
        parts.append(
            "<h4>What it protects</h4><p>Differential privacy per period: "
            f"epsilon {_fmt(dp.get('epsilon'))} (counts {_fmt(dp.get('counts_epsilon'))}), sensitivity "
            f"{_fmt(dp.get('sensitivity'))} cells per subscriber, discrete Laplace scale {_fmt(dp.get('scale'))}. "
            f"Budget used this period {_fmt(budget.get('period_used'))} of {_fmt(budget.get('period_cap'))}, "
            f"this year {_fmt(budget.get('year_used'))} of {_fmt(budget.get('year_cap'))}. Replication of the "
            f"mechanism's theory: {_fmt(dp.get('replication_ok'))}; mean absolute error on small cells "
            f"{_fmt(dp.get('mae_small_cells'))}, on large cells {_fmt(dp.get('mae_large_cells'))}.</p>")
        parts.append(_dp_evidence(dp))
    keeps = []
    if utility:
        lost = utility.get("lost_groups") or []
        keeps.append(f"<p>Quality groups kept: {_fmt(utility.get('groups_kept'))} of {_fmt(utility.get('groups_total'))}; "
                     f"median / worst quantile error {_fmt(utility.get('median_quantile_error'))} / "
                     f"{_fmt(utility.get('max_quantile_error'))} of the p10-p90 spread; worst tail-share error "
                     f"{_fmt(utility.get('max_tail_share_error_pp'))} pp. Lost or inexpressible: "
                     f"{_e(', '.join(lost[:12]) + (f' and {len(lost) - 12} more' if len(lost) > 12 else '')) or 'none'}.</p>")
    if answers:
        rows = "".join(
            f"<tr><td>{name.upper()}</td><td>{_fmt(answer.get('base'))}</td><td>{_fmt(answer.get('release'))}</td>"
            f"<td>{_fmt(answer.get('same_answer'))}{_stability(answer)}</td></tr>"
            for name, answer in answers.items())
        keeps.append("<table><tr><th>question</th><th>base data</th><th>release</th><th>same answer</th></tr>"
                     f"{rows}</table>")
    if keeps:
        parts.append("<h4>What it keeps</h4>" + "".join(keeps))
    cannot = [f"{name.upper()}: {answer.get('release')}" for name, answer in answers.items()
              if isinstance(answer.get("release"), str) and answer["release"].startswith("unavailable")]
    parts.append("<h4>What it cannot answer, and why</h4><p>" + (_e("; ".join(cannot)) or "Every question is answered from this release.") + "</p>")
    provenance = {k: released.get(k) for k in ("source_sha256", "sha256", "seed_id", "seed_kind", "code_version",
                                               "config_hash", "rows_in", "rows_released", "rows_withheld")}
    rows = "".join(f"<tr><td>{_e(k)}</td><td><code>{_fmt(v)}</code></td></tr>" for k, v in provenance.items())
    parts.append(f"<h4>Provenance</h4><table>{rows}</table>")
    return "\n".join(parts)


def _gate_rows(gate: dict) -> str:
    return "".join(f"<tr><td>{_e(name)}</td><td>{_fmt(c.get('value'))}</td><td>{_e(c.get('operator'))} "
                   f"{_fmt(c.get('limit'))}</td><td>{_fmt(c.get('ok'))}</td></tr>" for name, c in gate.items())


def _publication_section(period: str, verdicts: dict[str, dict], publication: dict | None) -> str:
    """The verdict first: what is published this period and why, then every other candidate and why not."""
    if publication:
        head = (f"<p><strong>Published for {_e(period)}: {_e(publication['config'])}</strong> "
                f"(<code>{_e(publication['path'])}</code>, SHA-256 <code>{_e(publication['sha256'])}</code>, "
                f"{_e(publication['published_at'])}).</p>")
    else:
        head = f"<p><strong>Nothing is published for {_e(period)}.</strong></p>"
    rows = []
    for config_id, verdict in verdicts.items():
        reasons = "; ".join(verdict["refused"]) or "every blocking check passed and every criterion holds"
        rows.append(f"<tr><td>{_e(config_id)}</td><td>{_e(verdict['status'])}</td>"
                    f"<td>{_fmt(verdict['publishable'])}</td><td>{_e(reasons)}</td></tr>")
    gates = "".join(
        f"<h4>Gate for {_e(config_id)}</h4><table><tr><th>criterion</th><th>value</th><th>limit</th><th>holds</th></tr>"
        f"{_gate_rows(verdict['gate'])}</table>" for config_id, verdict in verdicts.items() if verdict["gate"])
    return ("<h2>Publication</h2>" + head +
            "<table><tr><th>candidate</th><th>status</th><th>publishable</th><th>why</th></tr>"
            + "".join(rows) + "</table>" + gates)


def _pairs_section(pairs: dict[str, dict[str, dict]]) -> str:
    """What an attacker holding two candidates of the period gets, pair by pair."""
    if not pairs:
        return ""
    rows = "".join(
        f"<tr><td>{_e(b)}</td><td>{_e(a)}</td><td class=\"num\">{_fmt(figures.get('rows_relinked'))}</td>"
        f"<td>{_e(figures.get('rows_relinked_ci'))}</td><td class=\"num\">{_fmt(figures.get('rows_relinked_baseline'))}"
        f"</td><td class=\"num\">{_fmt(figures.get('combined_singling_out_rate'))}</td></tr>"
        for b, by_a in sorted(pairs.items()) for a, figures in sorted(by_a.items()))
    return ("<h2>Two candidates held together</h2><p>If two candidates of one period were both published, an "
            "attacker holding both relinks rows of B to A by their measurements within compatible cells, and "
            "B's rows then carry A's finer quasi-identifiers. This is why one release is published per period.</p>"
            "<table><tr><th>B (relinked)</th><th>A (held)</th><th>rows relinked</th><th>95% interval</th>"
            "<th>chance</th><th>combined singling out</th></tr>" + rows + "</table>")


def render_report(period: str, frame: pd.DataFrame, evidence: dict[str, dict], released: dict[str, dict],
                  configs: dict[str, tuple[str, dict]], plots: dict[str, tuple[bytes, str]], lab_table: str | None,
                  verdicts: dict[str, dict] | None = None, pairs: dict | None = None,
                  publication: dict | None = None) -> str:
    """The whole report. `configs`: id -> (description, operations); `plots`: name -> (png, caption);
    `verdicts`: id -> the gate's verdict; `pairs`: B -> A -> pair figures; `publication`: what is published."""
    sections = "\n".join(
        _config_section(config_id, *configs[config_id], evidence[config_id], released.get(config_id, {}))
        for config_id in evidence)
    toc = " · ".join(f'<a href="#{_e(c)}">{_e(c)}</a>' for c in evidence)
    lab = f"<h2>DP accuracy lab</h2><pre>{_e(lab_table)}</pre>" if lab_table else ""
    plots_html = "".join(_plot(name, png, caption) for name, (png, caption) in plots.items())
    verdict = _publication_section(period, verdicts, publication) if verdicts is not None else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>dsh_assets release report {_e(period)}</title>
<style>{STYLE}</style></head>
<body>
<h1>Release report, period {_e(period)}</h1>
<p class="muted">What each release configuration does, what it protects (attack figures with 95% intervals and
baselines), what it keeps (quality groups, Elina's questions), what it cannot answer and why, and where every
number comes from. <span id="plot-status">plots not rendered</span>.</p>
{verdict}
<h2>Scorecard</h2>
{_table(frame)}
{plots_html}
{_pairs_section(pairs or {})}
<h2>Configurations</h2>
<p>{toc}</p>
{sections}
{lab}
<p class="muted">Singled out is not identified; a measured attack is one attacker model, not every attacker.
Nothing here is a legal determination.</p>
<script>{SCRIPT}</script>
</body></html>
"""
