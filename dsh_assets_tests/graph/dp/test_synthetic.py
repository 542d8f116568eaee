"""The DP synthetic table in the graph: drawn once through its own budget slice, attacked by anonymeter, judged by the
row-level gate when the DPO lists it."""

import json

import pyarrow.parquet as pq

from dsh_assets.cli import main as dsh
from dsh_assets.core.dp.ledger import Ledger
from dsh_assets.core.dp.publish import read_public_metadata
from dsh_assets.core.privacy.synthetic import BY_CONSTRUCTION
from dsh_assets.graph import runner
from dsh_assets.graph.partitions import release_key
from dsh_assets_tests.conftest import (
    PERIOD,
    Harness,
    check_results,
    materialization_metadata,
    releases_text,
    step_failure_messages,
)
from dsh_assets_tests.tables import sha256_file

SYNTHETIC = "dp_synthetic_eps1"


def listed_releases(folder) -> str:
    """The test tier's configurations with the synthetic table first in the DPO's publication list."""
    text = releases_text()
    listing = 'config = ["c24_hour_k5_copula_code10_round3", "c22_hour_k5_shuffle_code10_round3",\n'
    assert listing in text, "the packaged [publication] list no longer starts with c24, c22"
    path = folder / "releases.toml"
    path.write_text(text.replace(listing, f'config = ["{SYNTHETIC}", "c24_hour_k5_copula_code10_round3", '
                                          f'"c22_hour_k5_shuffle_code10_round3",\n'))
    return path


def test_a_synthetic_table_is_drawn_once_through_its_own_slice_attacked_and_judged_by_the_row_level_gate(
        tmp_path, build_harness, source_file, monkeypatch, capsys):
    harness = build_harness(tmp_path / "home", source_file, listed_releases(tmp_path))
    harness.source()
    first = harness.release(SYNTHETIC)
    assert first.success and all(check_results(first).values()), check_results(first)
    drawn = {k: v.value for k, v in materialization_metadata(first, "dp_synthetic_release").items()}
    assert drawn["epsilon_debited"] == 1.0 and drawn["figures"]["budget"]["period_used"] == 1.0
    layout = harness.defs.resources["home"].layout
    assert layout.synthetic_ledger.exists()
    assert not layout.ledger.exists() or Ledger(layout.ledger, 1.1, 402.6).status(PERIOD)["period_used"] == 0
    path = harness.released_path(SYNTHETIC)
    table = pq.read_table(path)
    schema = harness.defs.resources["home"].schema()
    assert schema.subscriber not in table.column_names and schema.station not in table.column_names
    assert table.num_rows == drawn["rows_released"] > 0
    public = read_public_metadata(path)
    assert public["epsilon_at_delta"] <= 1.0 + 1e-9 and len(public["tree"]) == len(schema.measurements) - 1

    privacy = harness.recorded("dp_synthetic_privacy", release_key(SYNTHETIC, PERIOD))[0]["figures"]
    assert {key: privacy[key] for key in BY_CONSTRUCTION} == BY_CONSTRUCTION
    assert privacy["synthetic_epsilon"] == 1.0
    assert privacy["anonymeter"]["strength"] == "full"  # listed: the gate reads a full-strength evaluation
    quality = harness.recorded("dp_synthetic_quality_groups", release_key(SYNTHETIC, PERIOD))[0]["figures"]
    assert quality["groups_total"] > 0 and quality["median_quantile_error"] is not None
    answers = harness.recorded("dp_synthetic_elina_answers", release_key(SYNTHETIC, PERIOD))[0]["figures"]
    assert answers["q3"]["available"] is False  # no station in a synthetic table

    published = harness.publication(publish=SYNTHETIC)
    refusals = " ".join(step_failure_messages(published))
    assert not published.success
    assert "median_quantile_error" in refusals  # the row-level gate's own criteria, on the synthetic table's figures
    assert "no release" not in refusals and "dp_published" not in refusals

    again = harness.release_only(SYNTHETIC)
    reused = {k: v.value for k, v in materialization_metadata(again, "dp_synthetic_release").items()}
    assert reused["epsilon_debited"] == 0.0 and reused["sha256"] == drawn["sha256"]
    # A second draw of the period would cross the slice's cap (1.0): refused, the stored table left as it was.
    redrawn = runner.launch_release(harness.defs, harness.instance, harness.config(SYNTHETIC), PERIOD,
                                    republish=True)
    assert not redrawn.success
    assert any("refused" in message for message in step_failure_messages(redrawn)), step_failure_messages(redrawn)
    assert sha256_file(path) == drawn["sha256"]

    monkeypatch.setenv("DSH_RELEASES", str(tmp_path / "releases.toml"))
    capsys.readouterr()
    assert dsh(["budget", "--home", str(layout.home), "--period", PERIOD, "--slice", "dp_synthetic", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["ledger"] == str(layout.synthetic_ledger) and printed["status"]["period_used"] == 1.0
    assert [(e["config"], e["status"]) for e in printed["entries"]][0] == (SYNTHETIC, "published")
