"""Plain values as Dagster metadata: what the UI shows."""

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from dsh_assets.graph.metadata import as_metadata, markdown_table, preview


def test_containers_become_json_none_na_and_figures_their_own_key():
    metadata = as_metadata({"rows": 3, "cells": {"1": 2}, "note": None}, {"rate": 0.5})
    assert metadata["rows"] == 3
    assert metadata["cells"] == dg.MetadataValue.json({"1": 2})
    assert metadata["note"] == dg.MetadataValue.text("n/a")
    assert metadata["figures"] == dg.MetadataValue.json({"rate": 0.5})


def test_a_frame_as_a_markdown_table():
    frame = pd.DataFrame({"config": ["c15", "c|22"], "rate": [0.123456, None]})
    assert markdown_table(frame).value == "| config | rate |\n| --- | --- |\n| c15 | 0.1235 |\n| c/22 | - |"


def test_a_preview_holds_the_first_rows_as_text(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"app": ["Gaming", None, "IM"], "n": [1, 2, 3]}), path)
    table = preview(path, limit=2).value
    assert [record.data for record in table.records] == [{"app": "Gaming", "n": "1"}, {"app": "", "n": "2"}]
