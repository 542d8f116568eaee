"""Elina's questions answered from the DP release: Q1 from its DP latency medians, Q2 from its own slow-download table.

Q1 compares the base focus (higher median 5G radio latency over all rows) with the focus of the
published DP medians, and says how often the focus is the same over repeated draws of the same
mechanism (evaluation draws, never published). Q3 needs station identifiers, which the DP release
does not hold: it is "unavailable" with the reason, and its base answer is still shown.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pyarrow.parquet as pq

from dsh_assets.core.release.configs import ReleaseConfig
from dsh_assets.core.release.schema import Schema
from dsh_assets.core.utility import elina
from dsh_assets.core.utility.quality_groups import Aggregations

AS_IS = ReleaseConfig(id="as_is", description="the base data itself", drop_fields=(), time_coarsen="window",
                      app_coarsen="none", noise_scale=0.0, k=0, pseudonym=False)
"""Answers the questions on the base data alone (the source read as if it were its own release)."""
NOTE = ("Q2 compares the base ranking (share of slow 5G download rows, slow = download <= the source's p10) "
        "with the DP ranking (share of 5G subscribers with a download <= the public slow threshold).")


def q1_from_medians(base_focus: str, q1_path: str | os.PathLike | None,
                    stability: Callable[[str], tuple[float | None, int]] | None = None) -> dict:
    """Q1 from the published DP medians table; ``stability(base_focus)`` -> (share of draws with the base focus, draws)."""
    if q1_path is None or not Path(q1_path).exists():
        return {"base": base_focus, "release": "unavailable: the DP release publishes no Q1 medians table",
                "same_answer": False}
    medians = {row["app"]: row["dp_median_radio_latency_ms"]
               for row in pq.read_table(q1_path, columns=["app", "dp_median_radio_latency_ms"]).to_pylist()}
    gaming, streaming = medians[elina.GAMING], medians[elina.STREAMING]
    focus = elina.GAMING if gaming > streaming else elina.STREAMING if streaming > gaming else "tie"
    answer = {"base": base_focus, "release": focus, "same_answer": focus == base_focus,
              "gaming_ms": gaming, "streaming_ms": streaming}
    if stability is not None:
        rate, draws = stability(base_focus)
        answer.update({"same_answer_rate": rate, "same_answer_draws": draws})
    return answer


def answers_from_dp_release(source_path: str | os.PathLike, q2_path: str | os.PathLike, schema: Schema,
                            q1_path: str | os.PathLike | None = None,
                            q1_stability: Callable[[str], tuple[float | None, int]] | None = None,
                            aggregations: Aggregations | None = None) -> dict:
    """`figures()` of Elina's answers, in the shape `elina.ElinaAnswers.figures` gives for a row-level release.

    ``aggregations``: the engine's passes over the source for the base answers (default: embedded, DuckDB).
    """
    base = elina.base_q2_ranking(source_path, schema, aggregations=aggregations)
    base_answers = elina.answer(source_path, source_path, AS_IS, schema, aggregations=aggregations).figures()
    if Path(q2_path).exists():
        table = pq.read_table(q2_path, columns=["app", "share"]).to_pylist()
        q2 = elina.q2_from_shares(base, {row["app"]: row["share"] for row in table})
    else:
        q2 = {"base": [e["app"] for e in base[:elina.TOP]], "release": "unavailable: no Q2 table in this release",
              "same_answer": False, "same_decision": False, "rank_correlation": None}
    return {
        "q1": q1_from_medians(base_answers["q1"]["base"], q1_path, q1_stability),
        "q2": q2,
        "q3": {"available": False, "base": base_answers["q3"]["base"], "release": elina.STATION_REMOVED,
               "same_answer": False},
    }
