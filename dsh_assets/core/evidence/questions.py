"""Elina's three questions for the report: each answer in words, and a chart of the base data beside each release.

Input: config id -> the numbers `elina_answers` recorded (`details["answers"]`: Q1 5G median radio latency
per app, Q2 slow-download shares of the top six, Q3 overloaded stations), plain values, no Dagster.
The base data is the same source for every configuration of a period, so it is drawn once.
"""

from __future__ import annotations

from dsh_assets.core.evidence.charts import legend_beside, new_figure, png

BASE = "base data"
UNAVAILABLE_STATION = "unavailable: the station identifier is removed on purpose"


def _numbers(details: dict[str, dict]) -> dict[str, dict]:
    return {config_id: detail.get("answers") or {} for config_id, detail in details.items()}


def _base(numbers: dict[str, dict], key: str):
    return next((answers[key] for answers in numbers.values() if key in answers), None)


def q1_words(answers: dict, side: str) -> str | None:
    """"Gaming (5G median radio latency 114.0 ms vs 72.0 ms for Streaming)" from one side's medians."""
    gaming, streaming = answers.get(f"q1_{side}_gaming_ms"), answers.get(f"q1_{side}_streaming_ms")
    if gaming is None or streaming is None:
        return None
    if gaming == streaming:
        return f"a tie: 5G median radio latency {gaming:,.1f} ms for both Gaming and Streaming"
    worse, better = ("Gaming", "Streaming") if gaming > streaming else ("Streaming", "Gaming")
    high, low = max(gaming, streaming), min(gaming, streaming)
    return (f"focus on {worse}: it is the worse-served experience (5G median radio latency {high:,.1f} ms vs "
            f"{low:,.1f} ms for {better})")


def ranked(shares) -> dict[str, float] | None:
    """App -> share in Q2's order (share descending, then name); recorded metadata does not keep the order."""
    if not isinstance(shares, dict) or not shares:
        return None
    return dict(sorted(shares.items(), key=lambda pair: (-pair[1], pair[0])))


def q2_words(shares) -> str | None:
    shares = ranked(shares)
    if shares is None:
        return None
    listed = ", ".join(f"{app} ({share:.1%})" for app, share in shares.items())
    return f"prioritise, by share of slow 5G downloads: {listed}"


def q3_words(answer) -> str | None:
    if isinstance(answer, str):
        return UNAVAILABLE_STATION if "station identifier removed" in answer else answer
    if not isinstance(answer, dict):
        return None
    stations = answer.get("stations") or []
    if not stations:
        return "no station is overloaded under the rule"
    listed = ", ".join(f"{s['station']} (load {s['load_ratio']:,.1f} x the median, latency "
                       f"{s['latency_ratio']:,.1f} x)" for s in stations)
    return f"{len(stations):,} overloaded: {listed}"


def _finished(figure, axes, title: str, grid_axis: str) -> bytes:
    """Title, the legend beside the plot (so it never covers a bar), a light grid; the PNG."""
    axes.set_title(title)
    legend_beside(axes, fontsize=7)
    axes.grid(axis=grid_axis, alpha=0.3)
    return png(figure)


def q1_png(numbers: dict[str, dict]) -> bytes | None:
    """5G median radio latency of Gaming and Streaming: the base data beside each release that answers."""
    base = (_base(numbers, "q1_base_gaming_ms"), _base(numbers, "q1_base_streaming_ms"))
    if None in base:
        return None
    series = [(BASE, base)] + [(config_id, (a["q1_release_gaming_ms"], a["q1_release_streaming_ms"]))
                               for config_id, a in numbers.items()
                               if "q1_release_gaming_ms" in a and "q1_release_streaming_ms" in a]
    figure, axes = new_figure(7.6, 3.6)
    width = 0.8 / len(series)
    for index, (name, values) in enumerate(series):
        bars = axes.bar([position + index * width for position in (0, 1)], values, width, label=name,
                        color="#555" if name == BASE else None)
        axes.bar_label(bars, labels=[f"{v:,.0f}" for v in values], fontsize=7)
    axes.set_xticks([width * (len(series) - 1) / 2, 1 + width * (len(series) - 1) / 2], ["Gaming", "Streaming"])
    axes.set_ylabel("5G median radio latency (ms)")
    return _finished(figure, axes, "Q1: 5G median radio latency per app, base data and each release", "y")


def q2_png(numbers: dict[str, dict]) -> bytes | None:
    """Share of slow 5G downloads of the base top six (and any app a release ranks instead), rank on each bar."""
    base = ranked(_base(numbers, "q2_base_shares"))
    if base is None:
        return None
    series = [(BASE, base)] + [(config_id, ranked(a["q2_release_shares"])) for config_id, a in numbers.items()
                               if ranked(a.get("q2_release_shares"))]
    apps = list(base) + [app for _, shares in series for app in shares if app not in base]
    apps = list(dict.fromkeys(apps))
    figure, axes = new_figure(7.6, 0.9 + 0.42 * len(apps) * max(1, len(series) / 2))
    height = 0.8 / len(series)
    for index, (name, shares) in enumerate(series):
        ranks = {app: rank for rank, app in enumerate(shares, start=1)}
        positions = [row + index * height for row in range(len(apps))]
        values = [shares.get(app, 0.0) for app in apps]
        bars = axes.barh(positions, values, height, label=name, color="#555" if name == BASE else None)
        labels = [f"#{ranks[app]} {shares[app]:.1%}" if app in shares else "n/a: not in its top six"
                  for app in apps]
        axes.bar_label(bars, labels=labels, fontsize=6, padding=2)
    axes.set_yticks([row + height * (len(series) - 1) / 2 for row in range(len(apps))], apps, fontsize=8)
    axes.invert_yaxis()
    axes.set_xlim(0, max(max(s.values()) for _, s in series) * 1.45)
    axes.set_xlabel("share of the app's 5G downloads that are slow (#: rank)")
    return _finished(figure, axes, "Q2: share of slow 5G downloads, top six and their ranks", "x")


def q3_png(numbers: dict[str, dict]) -> bytes | None:
    """Load of each overloaded station (x the median station load): base data beside releases that keep stations."""
    base = _base(numbers, "q3_base")
    if not isinstance(base, dict):
        return None
    series = [(BASE, base)] + [(config_id, a["q3_release"]) for config_id, a in numbers.items()
                               if isinstance(a.get("q3_release"), dict)]
    stations = sorted({s["station"] for _, answer in series for s in answer.get("stations") or []})
    figure, axes = new_figure(7.6, 3.4)
    if stations:
        width = 0.8 / len(series)
        for index, (name, answer) in enumerate(series):
            ratios = {s["station"]: s["load_ratio"] for s in answer.get("stations") or []}
            bars = axes.bar([column + index * width for column in range(len(stations))],
                            [ratios.get(station, 0.0) for station in stations], width, label=name,
                            color="#555" if name == BASE else None)
            axes.bar_label(bars, labels=[f"{ratios[s]:.1f}x" if s in ratios else "not flagged" for s in stations],
                           fontsize=6)
        axes.set_xticks([column + width * (len(series) - 1) / 2 for column in range(len(stations))],
                        [str(s) for s in stations], fontsize=8)
    else:
        axes.text(0.5, 0.5, "no station is overloaded in the base data", ha="center", va="center")
    unavailable = [config_id for config_id, a in numbers.items() if isinstance(a.get("q3_release"), str)]
    if unavailable:
        axes.text(0.0, -0.28, "unavailable (station identifier removed on purpose): " + ", ".join(unavailable),
                  transform=axes.transAxes, fontsize=7, va="top")
    axes.set_xlabel("base station")
    axes.set_ylabel("load / median station load")
    return _finished(figure, axes, "Q3: the overloaded stations, base data and releases that keep the station", "y")


QUESTION_PLOTS = {
    "q1_latency": (q1_png, "Q1: 5G median radio latency of Gaming and Streaming, base data beside each release."),
    "q2_slow_downloads": (q2_png, "Q2: share of slow 5G downloads of the top six apps, with each side's rank."),
    "q3_overloaded_stations": (q3_png, "Q3: load of each overloaded station, base data beside each release that "
                                      "keeps the station identifier."),
}
"""Plot name -> (how it is drawn, its caption); the question it answers is the name's prefix."""


def question_plots(details: dict[str, dict]) -> dict[str, tuple[bytes, str]]:
    """Plot name -> (PNG, caption) for each question with a base answer to draw."""
    numbers = _numbers(details)
    plots = {}
    for name, (draw, caption) in QUESTION_PLOTS.items():
        drawn = draw(numbers)
        if drawn is not None:
            plots[name] = (drawn, caption)
    return plots
