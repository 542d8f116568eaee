"""Elina's three questions, answered from the base data (the source) and from the release.

Q1  Where to focus product development, gaming or streaming? The app with the higher median
    radio latency on 5G (``quantile_cont`` 0.5 over the valid 5G records of each app) is the
    worse-served one and the focus ("tie" on exactly equal medians); the answers carry both
    medians and record counts. The release cannot answer when it groups apps (Gaming and
    Streaming lose their names), lacks the app, radio or latency column, or has no 5G record
    with a radio latency for either app.

Q2  Which apps to prioritise for network-quality improvements? Apps ranked by their share of
    slow 5G downloads: among an app's valid 5G download records, the share with download <= the
    raw file's p10 of download over the whole source (the fixed threshold of quality groups,
    computed once from the source and applied to both files). Only apps with at least
    ``min_records`` (30) valid 5G downloads on that side are ranked, so a rare app cannot top the
    list on a handful of rows; ties are broken by app name. The answer is the top six (fewer if
    fewer apps qualify). ``same_answer``: the same six in the same order. ``same_decision``: the release supports
    the same decision, the apps the base data separates (``q2_same_decision``): each app's share of slow 5G
    downloads has its 95% Wilson interval over sessions in the base data; over the apps in the base or the release
    top six, every app whose base interval lies wholly above the base 7th app's is in the release's top six, every
    app whose base interval lies wholly below the base 6th app's is not, and any two apps of the base top six whose
    intervals do not overlap keep their order in the release's ranking. Apps the base data cannot separate are
    interchangeable (a swap of 0.0143 and 0.0142 is the same decision). With six apps or fewer ranked in the base,
    every one of them must be in the release's top six.
    ``rank_correlation``: Spearman's rho between the base and the release slow shares over every
    app ranked on both sides (each side's shares ranked among those common apps, ties given
    their average rank, then Pearson's correlation of the ranks); None when fewer than two apps
    are common, a side is constant, or the release cannot answer. The release cannot answer when
    it groups apps or lacks the app, radio or download column.

Q3  Which base stations are overloaded? The rule (``OverloadRule``, applied to one file, one
    release period): a station's load is its number of rows; the median station load is the
    median over the stations with at least one row. A station is overloaded when its load is at
    least ``load_ratio`` (5) times the median station load AND the median radio latency of its
    rows is at least ``latency_ratio`` (1.8) times the median radio latency over all rows of the
    file. On the default synthetic source the planted stations (``synth.overloaded_stations``)
    carry about 7-9x the median load and 2-3x the median latency (50k to 1.1M rows, several
    periods), while no ordinary station has both: the busiest ordinary ones (up to about 7x)
    have ordinary latency, and the slow ordinary ones (mostly legacy-radio sites) carry under
    4.5x the median load. A looser 3x / 1.5x rule flags ordinary stations too. The release answer applies the
    same rule to the release where it carries the station column, else it is
    "unavailable: station identifier removed". ``same_answer``: the same set of stations.

A base answer that cannot be computed (e.g. a real source without 5G Gaming records) is an
"unavailable: ..." string too, and ``same_answer`` is then False.
"""

from __future__ import annotations

import itertools
import os
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only
    import pandas as pd

from dsh_assets.core.evidence.metrics import QUESTION_TEXT
from dsh_assets.core.release.configs import ReleaseConfig
from dsh_assets.core.utility.quality_groups import (
    DEFAULT_MIN_RECORDS, HIGH, LOW, Aggregations, CellStats, Measure, QualityResult, parquet_columns,
    aggregations_or_embedded,
)
from dsh_assets.core.release.schema import Schema
from dsh_assets.core.statistics import wilson_interval

GAMING, STREAMING = "Gaming", "Streaming"
FIVE_G = "5G"
TOP = 6
STATION_REMOVED = "unavailable: station identifier removed"


@dataclass(frozen=True)
class OverloadRule:
    """Overloaded: load >= load_ratio x median station load AND median latency >= latency_ratio x the file's."""

    load_ratio: float = 5.0
    latency_ratio: float = 1.8

    def __post_init__(self):
        if self.load_ratio <= 0 or self.latency_ratio <= 0:
            raise ValueError(f"overload rule ratios must be positive: {self}")

    def describe(self) -> str:
        return (f"station load = rows per station in the period; overloaded when load >= {self.load_ratio:g} x the "
                f"median station load (over stations with a row) AND the station's median radio latency >= "
                f"{self.latency_ratio:g} x the median radio latency over all rows")


DEFAULT_OVERLOAD_RULE = OverloadRule()


def _unavailable(reason: str) -> str:
    return f"unavailable: {reason}"


def _is_answer(value) -> bool:
    return not isinstance(value, str)


@dataclass
class ElinaAnswers:
    """The three answers on both sides; answers are structures, or "unavailable: <reason>" strings."""

    config_id: str
    slow_threshold: float | None
    min_records: int
    rule: OverloadRule
    q1_base: dict | str
    q1_release: dict | str
    q2_base: list[dict] | str
    q2_release: list[dict] | str
    q2_base_ranking: list[dict]
    """Every app the base data ranks (with its slow sessions and sessions), for the decision's intervals."""
    q2_release_ranking: list[dict]
    """Every app the release ranks, in its order (empty where it cannot answer)."""
    rank_correlation: float | None
    rank_correlation_apps: int
    q3_base: dict | str
    q3_release: dict | str

    # -- comparisons -------------------------------------------------------------------------
    @property
    def q1_same(self) -> bool:
        return _is_answer(self.q1_base) and _is_answer(self.q1_release) \
            and self.q1_base["focus"] == self.q1_release["focus"]

    @property
    def q2_same(self) -> bool:
        return _is_answer(self.q2_base) and _is_answer(self.q2_release) \
            and _names(self.q2_base) == _names(self.q2_release)

    @property
    def q2_same_decision(self) -> bool:
        return _is_answer(self.q2_base) and _is_answer(self.q2_release) \
            and q2_same_decision(self.q2_base_ranking, [entry["app"] for entry in self.q2_release_ranking])

    @property
    def q3_available(self) -> bool:
        return _is_answer(self.q3_release)

    @property
    def q3_same(self) -> bool:
        return _is_answer(self.q3_base) and _is_answer(self.q3_release) \
            and _stations(self.q3_base) == _stations(self.q3_release)

    # -- outputs -----------------------------------------------------------------------------
    def figures(self) -> dict:
        """The short answers, plain Python values: Q1 focus app, Q2 six app names, Q3 station ids."""
        return {
            "q1": {"base": _focus(self.q1_base), "release": _focus(self.q1_release), "same_answer": self.q1_same},
            "q2": {"base": _names(self.q2_base), "release": _names(self.q2_release),
                   "same_answer": self.q2_same, "same_decision": self.q2_same_decision,
                   "rank_correlation": self.rank_correlation},
            "q3": {"available": self.q3_available, "base": _stations(self.q3_base),
                   "release": _stations(self.q3_release), "same_answer": self.q3_same},
        }

    def details(self) -> dict:
        """The answers with their numbers: latencies, shares, loads, and the definitions."""
        return {
            "q1": {"question": QUESTION_TEXT["q1"],
                   "definition": f"higher median {FIVE_G} radio latency = worse served = focus",
                   "base": self.q1_base, "release": self.q1_release, "same_answer": self.q1_same},
            "q2": {"question": QUESTION_TEXT["q2"],
                   "definition": (f"share of an app's valid {FIVE_G} downloads <= the whole-source p10 of download "
                                  f"({self.slow_threshold}); apps with >= {self.min_records} valid {FIVE_G} "
                                  f"downloads; top {TOP}"),
                   "slow_threshold": self.slow_threshold,
                   "base": self.q2_base, "release": self.q2_release, "same_answer": self.q2_same,
                   "same_decision": self.q2_same_decision, "same_decision_definition": SAME_DECISION_DEFINITION,
                   "rank_correlation": self.rank_correlation,
                   "rank_correlation_definition": RANK_CORRELATION_DEFINITION,
                   "rank_correlation_apps": self.rank_correlation_apps},
            "q3": {"question": QUESTION_TEXT["q3"],
                   "rule": self.rule.describe(), "available": self.q3_available,
                   "base": self.q3_base, "release": self.q3_release, "same_answer": self.q3_same},
        }

    def metadata(self) -> dict:
        """Plain values for Dagster: every answer with its numbers, the Q2 threshold and the Q3 rule."""
        figures = self.figures()
        meta = {
            "config_id": self.config_id,
            "q1_base_focus": figures["q1"]["base"],
            "q1_release_focus": figures["q1"]["release"],
            "q1_same_answer": self.q1_same,
            "q2_base_top6": figures["q2"]["base"],
            "q2_release_top6": figures["q2"]["release"],
            "q2_same_answer": self.q2_same,
            "q2_same_decision": self.q2_same_decision,
            "q2_same_decision_definition": SAME_DECISION_DEFINITION,
            "q2_base_intervals": {entry["app"]: list(slow_share_interval(entry)) for entry in self.q2_base_ranking},
            "q2_rank_correlation": self.rank_correlation,
            "q2_rank_correlation_apps": self.rank_correlation_apps,
            "q2_rank_correlation_definition": RANK_CORRELATION_DEFINITION,
            "q2_slow_threshold": self.slow_threshold,
            "q2_min_records": self.min_records,
            "q2_base_shares": _shares(self.q2_base),
            "q2_release_shares": _shares(self.q2_release),
            "q3_available": self.q3_available,
            "q3_rule": self.rule.describe(),
            "q3_rule_parameters": asdict(self.rule),
            "q3_base_stations": figures["q3"]["base"],
            "q3_release_stations": figures["q3"]["release"],
            "q3_same_answer": self.q3_same,
            "q3_base": self.q3_base,
            "q3_release": self.q3_release,
        }
        for side, answer in (("base", self.q1_base), ("release", self.q1_release)):
            if _is_answer(answer):
                meta[f"q1_{side}_gaming_ms"] = answer["gaming_ms"]
                meta[f"q1_{side}_streaming_ms"] = answer["streaming_ms"]
        return meta

    def table(self) -> pd.DataFrame:
        """One row per question: the short base and release answers and whether they agree."""
        import pandas as pd  # on first use: 0.3 s of every dsh start-up otherwise
        figures = self.figures()
        return pd.DataFrame([
            {"question": q, "base": str(figures[q]["base"]), "release": str(figures[q]["release"]),
             "same_answer": figures[q]["same_answer"]}
            for q in ("q1", "q2", "q3")
        ])


RANK_CORRELATION_DEFINITION = (
    "Spearman's rho between base and release slow-download shares over every app ranked on both sides "
    "(average ranks for ties); None with fewer than two common apps or a constant side"
)


SAME_DECISION_DEFINITION = (
    "The same decision: each app's share of slow 5G downloads has its 95% Wilson interval over sessions in the base "
    "data; over the apps in the base or the release top six, every app whose base interval lies wholly above the "
    "base 7th app's is in the release top six, every app whose base interval lies wholly below the base 6th app's "
    "is not, and any two apps of the base top six whose intervals do not overlap keep their order in the release"
)


def slow_share_interval(entry: Mapping) -> tuple[float, float]:
    """The 95% Wilson interval of an app's share of slow 5G downloads (its slow sessions among its sessions)."""
    return wilson_interval(entry["slow"], entry["n"])


def q2_same_decision(base_ranking: list[dict], release_order: list[str]) -> bool:
    """Whether the release's ranking (app names, best first) supports the decision the base data supports (see
    SAME_DECISION_DEFINITION); ``base_ranking``: every app the base ranks, with its slow sessions and sessions. An
    app the base does not rank has no interval: in the release's top six it is a decision the base cannot
    support."""
    interval = {entry["app"]: slow_share_interval(entry) for entry in base_ranking}
    base_top, release_top = [entry["app"] for entry in base_ranking[:TOP]], release_order[:TOP]
    sixth = interval[base_top[-1]] if len(base_top) == TOP else None
    seventh = interval[base_ranking[TOP]["app"]] if len(base_ranking) > TOP else None
    for app in dict.fromkeys([*base_top, *release_top]):
        if app not in interval:
            return False
        low, high = interval[app]
        above_seventh = seventh is None or low > seventh[1]  # with no 7th app, every ranked app is above it
        if above_seventh and app not in release_top:
            return False
        if sixth is not None and high < sixth[0] and app in release_top:
            return False
    place = {app: index for index, app in enumerate(release_order)}
    for upper, lower in itertools.combinations(base_top, 2):  # in base order: upper ranks above lower
        separated = interval[upper][0] > interval[lower][1]
        if separated and not (upper in place and lower in place and place[upper] < place[lower]):
            return False
    return True


def _focus(answer) -> str:
    return answer if isinstance(answer, str) else answer["focus"]


def _names(answer):
    return answer if isinstance(answer, str) else [entry["app"] for entry in answer]


def _shares(answer):
    return answer if isinstance(answer, str) else {entry["app"]: entry["share"] for entry in answer}


def _stations(answer):
    return answer if isinstance(answer, str) else sorted(entry["station"] for entry in answer["stations"])


# -- the answers from per-app 5G statistics --------------------------------------------------------

def q1_answer(five_g: Mapping[str, dict], latency: str, where: str) -> dict | str:
    """Focus from {app: {column: stats}} of the 5G cells (stats from quality_groups.cell_statistics)."""
    values = {}
    for app in (GAMING, STREAMING):
        stats = five_g.get(app, {}).get(latency)
        if not stats or not stats["n"] or stats["p50"] is None:
            return _unavailable(f"no {FIVE_G} {app} records with a radio latency {where}")
        values[app] = stats
    gaming, streaming = values[GAMING]["p50"], values[STREAMING]["p50"]
    focus = GAMING if gaming > streaming else STREAMING if streaming > gaming else "tie"
    return {"focus": focus, "gaming_ms": gaming, "streaming_ms": streaming,
            "gaming_n": values[GAMING]["n"], "streaming_n": values[STREAMING]["n"]}


def q2_ranking(five_g: Mapping[str, dict], download: str, min_records: int) -> list[dict]:
    """Every app with >= min_records valid 5G downloads, by slow share (descending), then name."""
    ranked = []
    for app, per_column in five_g.items():
        stats = per_column.get(download)
        if stats and stats["n"] >= min_records and stats["tail"] is not None:
            ranked.append({"app": app, "share": stats["tail"] / stats["n"], "slow": stats["tail"], "n": stats["n"]})
    return sorted(ranked, key=lambda entry: (-entry["share"], entry["app"]))


def spearman(base: Mapping[str, float], release: Mapping[str, float]) -> tuple[float | None, int]:
    """Spearman's rho over the keys of both mappings (average ranks for ties) and how many there were."""
    common = sorted(set(base) & set(release))
    if len(common) < 2:
        return None, len(common)
    import pandas as pd  # on first use: 0.3 s of every dsh start-up otherwise
    ranks = pd.DataFrame({"base": [base[a] for a in common], "release": [release[a] for a in common]}).rank()
    if ranks["base"].nunique() < 2 or ranks["release"].nunique() < 2:
        return None, len(common)
    return float(ranks["base"].corr(ranks["release"])), len(common)


# -- Q3 ------------------------------------------------------------------------------------------

def q3_answer(stations: pd.DataFrame, overall_latency: float | None, rule: OverloadRule, where: str) -> dict | str:
    if stations.empty:
        return _unavailable(f"no rows {where}")
    if overall_latency is None or overall_latency <= 0:
        return _unavailable(f"no radio latency {where}")
    median_load = float(statistics.median(stations["load"].tolist()))
    load_ratio = stations["load"] / median_load
    latency_ratio = stations["median_latency"] / overall_latency
    overloaded = stations[(load_ratio >= rule.load_ratio) & (latency_ratio >= rule.latency_ratio)]
    entries = [
        {"station": int(s.station), "load": int(s.load), "load_ratio": float(s.load) / median_load,
         "median_latency_ms": float(s.median_latency), "latency_ratio": float(s.median_latency) / overall_latency}
        for s in overloaded.sort_values("station").itertuples()
    ]
    return {"stations": entries, "median_station_load": median_load, "median_latency_ms": overall_latency,
            "stations_with_rows": int(len(stations))}


# -- entry point ---------------------------------------------------------------------------------

def _five_g(stats: CellStats) -> dict[str, dict]:
    return {app: per_column for (app, radio), per_column in stats.rows.items() if radio == FIVE_G}


def _reusable(quality: QualityResult | None, source_path, released_path, schema: Schema) -> bool:
    if quality is None or quality.source_stats is None:
        return False
    columns = {m.column: m.tail for m in quality.measures}
    same_files = (Path(quality.source_path).resolve() == Path(source_path).resolve()
                  and Path(quality.released_path).resolve() == Path(released_path).resolve())
    return same_files and columns.get(schema.download) == LOW and schema.latency in columns


def _not_per_app(config: ReleaseConfig, schema: Schema, released_columns) -> tuple[str | None, str | None]:
    """Why the release cannot answer Q1 and Q2 per app (None where it can): the app or radio removed, or apps
    grouped."""
    missing = [c for c in (schema.app, schema.radio) if c not in released_columns]
    if missing:
        reason = _unavailable(f"column {', '.join(missing)} removed")
        return reason, reason
    if not config.app_groups:
        return None, None
    group_of = config.app_group_of()
    gaming, streaming = group_of.get(GAMING), group_of.get(STREAMING)
    return (_unavailable(f"apps grouped ({GAMING} and {STREAMING} are both in {gaming})" if gaming == streaming
                         else f"apps grouped ({GAMING} in {gaming}, {STREAMING} in {streaming})"),
            _unavailable(f"apps grouped (the release has {len(config.app_groups)} app groups, not per-app shares)"))


def _q2_release(base_ranking: list[dict], release_5g: dict, schema: Schema, min_records: int):
    """Q2 on the release: its top apps (or why there are none), its full ranking, and the ranking's Spearman
    correlation with the base's over the apps both rank, with their number."""
    release_ranking = q2_ranking(release_5g, schema.download, min_records)
    top = release_ranking[:TOP] if release_ranking else _unavailable(
        f"no app with >= {min_records} valid {FIVE_G} downloads released")
    correlation, common = spearman({e["app"]: e["share"] for e in base_ranking},
                                   {e["app"]: e["share"] for e in release_ranking})
    return top, release_ranking, correlation, common


def answer(source_path: str | os.PathLike, released_path: str | os.PathLike, config: ReleaseConfig, schema: Schema,
           *, overload_rule: OverloadRule = DEFAULT_OVERLOAD_RULE, min_records: int = DEFAULT_MIN_RECORDS,
           quality: QualityResult | None = None, aggregations: Aggregations | None = None) -> ElinaAnswers:
    """Elina's three questions on ``source_path`` (base) and ``released_path`` (see the module docstring).

    ``quality``: the quality_groups result of the same two files, if at hand; its thresholds and
    5G cell statistics are reused instead of scanning again (the answers are the same).
    ``aggregations``: the engine's passes over the two files (default: embedded, DuckDB).
    """
    released_columns = parquet_columns(released_path)
    q1_reason, q2_reason = _not_per_app(config, schema, released_columns)
    measures = (Measure(schema.download, LOW), Measure(schema.latency, HIGH))

    with aggregations_or_embedded(aggregations) as passes:
        if _reusable(quality, source_path, released_path, schema):
            threshold = quality.thresholds[schema.download]
            base_5g = _five_g(quality.source_stats)
            release_5g = _five_g(quality.release_stats) if quality.release_stats is not None else None
        else:
            threshold = passes.tail_thresholds(source_path, measures[:1])[schema.download]
            thresholds = {schema.download: threshold}
            base_5g = _five_g(passes.cell_statistics(source_path, schema.app, schema.radio, measures, thresholds,
                                                     only_radio=FIVE_G))
            release_5g = None
            if q1_reason is None:
                release_5g = _five_g(passes.cell_statistics(released_path, schema.app, schema.radio, measures,
                                                            thresholds, only_radio=FIVE_G))
        base_stations, base_latency = passes.station_statistics(source_path, schema.station, schema.latency)
        release_stations = None
        if schema.station in released_columns and schema.latency in released_columns:
            release_stations = passes.station_statistics(released_path, schema.station, schema.latency)

    # Q1
    q1_base = q1_answer(base_5g, schema.latency, "in the source")
    q1_release = q1_reason or (_unavailable(f"column {schema.latency} removed")
                               if schema.latency not in released_columns
                               else q1_answer(release_5g or {}, schema.latency, "released"))

    # Q2
    base_ranking = q2_ranking(base_5g, schema.download, min_records)
    q2_base = base_ranking[:TOP] if base_ranking else _unavailable(
        f"no app with >= {min_records} valid {FIVE_G} downloads in the source")
    release_ranking: list[dict] = []
    if q2_reason is not None:
        q2_release, rank_correlation, common = q2_reason, None, 0
    elif schema.download not in released_columns:
        q2_release, rank_correlation, common = _unavailable(f"column {schema.download} removed"), None, 0
    else:
        q2_release, release_ranking, rank_correlation, common = _q2_release(base_ranking, release_5g or {}, schema,
                                                                             min_records)

    # Q3
    q3_base = q3_answer(base_stations, base_latency, overload_rule, "in the source")
    q3_release = (STATION_REMOVED if schema.station not in released_columns
                  else _unavailable(f"column {schema.latency} removed") if release_stations is None
                  else q3_answer(*release_stations, overload_rule, "released"))

    return ElinaAnswers(
        config_id=config.id, slow_threshold=threshold, min_records=min_records, rule=overload_rule,
        q1_base=q1_base, q1_release=q1_release, q2_base=q2_base, q2_release=q2_release,
        q2_base_ranking=base_ranking, q2_release_ranking=release_ranking, rank_correlation=rank_correlation, rank_correlation_apps=common, q3_base=q3_base, q3_release=q3_release,
    )


def base_q2_ranking(source_path: str | os.PathLike, schema: Schema, min_records: int = DEFAULT_MIN_RECORDS,
                    aggregations: Aggregations | None = None) -> list[dict]:
    """Q2's full ranking on the base data alone (for releases that answer Q2 with their own table)."""
    measure = Measure(schema.download, LOW)
    with aggregations_or_embedded(aggregations) as passes:
        threshold = passes.tail_thresholds(source_path, (measure,))[schema.download]
        base_5g = _five_g(passes.cell_statistics(source_path, schema.app, schema.radio, (measure,),
                                                 {schema.download: threshold}, only_radio=FIVE_G))
    return q2_ranking(base_5g, schema.download, min_records)


def q2_from_shares(base_ranking: list[dict], shares: Mapping[str, float | None]) -> dict:
    """Q2 as `figures()` states it, when the release gives a share per app (None: unavailable for that app)."""
    released = sorted(((app, share) for app, share in shares.items() if share is not None),
                      key=lambda pair: (-pair[1], pair[0]))
    base_top = [entry["app"] for entry in base_ranking[:TOP]]
    release_top = [app for app, _ in released[:TOP]]
    rank_correlation, _ = spearman({e["app"]: e["share"] for e in base_ranking}, dict(released))
    return {"base": base_top, "release": release_top, "same_answer": base_top == release_top,
            "same_decision": bool(base_ranking) and bool(released) and q2_same_decision(
                base_ranking, [app for app, _ in released]),
            "rank_correlation": rank_correlation}
