"""Elina's questions answered from the DP release: Q2 from its own slow-download table.

Q1 and Q3 need latency medians and station identifiers, which a table of noisy subscriber counts
does not hold: they are "unavailable" with the reason, and their base answers are still shown.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq

from dsh_assets.core.release.configs import ReleaseConfig
from dsh_assets.core.release.schema import Schema
from dsh_assets.core.utility import elina

AS_IS = ReleaseConfig(id="as_is", description="the base data itself", drop_fields=(), time_coarsen="window",
                      app_coarsen="none", noise_scale=0.0, k=0, pseudonym=False)
"""Answers the questions on the base data alone (the source read as if it were its own release)."""
NOTE = ("Q2 compares the base ranking (share of slow 5G download rows, slow = download <= the source's p10) "
        "with the DP ranking (share of 5G subscribers with a download <= the public slow threshold).")


def answers_from_dp_release(source_path: str | os.PathLike, q2_path: str | os.PathLike, schema: Schema) -> dict:
    """`figures()` of Elina's answers, in the shape `elina.ElinaAnswers.figures` gives for a row-level release."""
    base = elina.base_q2_ranking(source_path, schema)
    base_answers = elina.answer(source_path, source_path, AS_IS, schema).figures()
    if Path(q2_path).exists():
        table = pq.read_table(q2_path, columns=["app", "share"]).to_pylist()
        q2 = elina.q2_from_shares(base, {row["app"]: row["share"] for row in table})
    else:
        q2 = {"base": [e["app"] for e in base[:elina.TOP]], "release": "unavailable: no Q2 table in this release",
              "same_answer": False, "rank_correlation": None}
    return {
        "q1": {"base": base_answers["q1"]["base"],
               "release": "unavailable: the DP release publishes counts, not latency medians", "same_answer": False},
        "q2": q2,
        "q3": {"available": False, "base": base_answers["q3"]["base"], "release": elina.STATION_REMOVED,
               "same_answer": False},
    }
