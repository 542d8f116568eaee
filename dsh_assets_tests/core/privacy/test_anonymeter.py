"""anonymeter, run unmodified in its own environment: on tables whose answer follows from their construction, on a
real release, and without its environment."""

import dataclasses
import sys

import numpy as np
import pyarrow as pa
import pytest

from dsh_assets.core.privacy import anonymeter
from dsh_assets.core.privacy.attacker import AnonymeterSettings, AttackerModel
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.release.configs import load_configs
from dsh_assets.core.release.schema import load_schema
from dsh_assets.core.release.source import distinct_apps
from dsh_assets.core.release.transform import release
from dsh_assets.core.secrets import Secrets
from dsh_assets_tests.tables import RELEASE_PERIOD, synthetic_stored

MEASUREMENTS = [f"m{i}" for i in range(5)]
KNOWN = ["m0", "m1"]
ATTACKER = AttackerModel(knowledge_sets=(("dl_throughput_kbps",),), knowledge_error=0.0, sample_size=100,
                         sample_seed=11, anonymeter=AnonymeterSettings(known=tuple(KNOWN), attacks=400))


def sessions(rows: int, seed: int) -> pa.Table:
    """Sessions in 20 cells, five measurements each drawn log-normal and independent of one another."""
    rng = np.random.default_rng(seed)
    return pa.table({"cell": pa.array([f"c{i % 20}" for i in range(rows)]),
                     **{m: rng.lognormal(4.0, 1.0, rows) for m in MEASUREMENTS}})


def drawn_per_cell(table: pa.Table, seed: int) -> pa.Table:
    """Each measurement of each row drawn with replacement from its cell's values: rows hold nobody's values."""
    rng = np.random.default_rng(seed)
    cells = table.column("cell").to_numpy(zero_copy_only=False)
    columns = {"cell": table.column("cell")}
    for m in MEASUREMENTS:
        values = table.column(m).to_numpy().copy()
        for cell in np.unique(cells):
            rows = np.flatnonzero(cells == cell)
            values[rows] = values[rng.choice(rows, size=len(rows))]
        columns[m] = values
    return pa.table(columns)


def test_a_release_that_copies_its_source_is_at_high_risk(tmp_path):
    ori, control = sessions(4000, 1), sessions(900, 2)
    result = anonymeter.evaluate_tables(ori, ori, control, ["cell"], KNOWN, ATTACKER, tmp_path)
    figures = result.figures()
    assert figures["anonymeter_inference_risk"] > 0.8
    assert figures["anonymeter_linkability_risk"] > 0.8
    assert figures["anonymeter_singling_out_risk"] > 0.5
    assert set(figures["anonymeter"]["inference"]) == {"m2", "m3", "m4"}  # each measurement not known is a secret
    for values in figures["anonymeter"]["inference"].values():
        assert set(values) == {"attack", "control", "baseline", "risk", "risk_ci", "n_attacks"}
        assert values["n_attacks"] == 400 and values["attack"] > 0.9
    assert figures["anonymeter"]["version"] == "1.1.0"
    assert list(tmp_path.iterdir()) == []  # the evaluation's files are removed


def test_values_drawn_independently_per_cell_give_anonymeter_no_inference(tmp_path):
    ori, control = sessions(4000, 3), sessions(900, 4)
    result = anonymeter.evaluate_tables(ori, drawn_per_cell(ori, 5), control, ["cell"], KNOWN, ATTACKER, tmp_path)
    inference = result.figures()["anonymeter"]["inference"]
    for secret, values in inference.items():
        assert values["risk_ci"][0] == 0.0, (secret, values)  # the interval contains 0


def test_the_same_inputs_give_the_same_figures_but_two_random_guessers(tmp_path):
    ori, control = sessions(3000, 6), sessions(700, 7)
    syn = drawn_per_cell(ori, 8)
    first, second = (anonymeter.evaluate_tables(ori, syn, control, ["cell"], KNOWN, ATTACKER, tmp_path).figures()
                     for _ in range(2))
    # anonymeter draws these two baselines without a seed it takes (polars' unique() order; a fresh generator).
    for figures in (first, second):
        for evaluator in ("singling_out", "linkability"):
            figures["anonymeter"][evaluator].pop("baseline")
    assert first == second


def test_a_release_is_evaluated_on_whole_cells_without_its_held_out_subscribers(tmp_path):
    schema = load_schema()
    source = synthetic_stored(tmp_path, 20_000, 4_000, 9)
    config = load_configs(schema=schema)["c15_window_k5_noise5"]
    out = tmp_path / "released.parquet"
    secrets = Secrets(b"seed", b"key", "test")
    plan = release(source, out, config, schema, secrets, distinct_apps(source, schema), period=RELEASE_PERIOD)
    model = dataclasses.replace(ATTACKER, anonymeter=AnonymeterSettings(
        known=("dl_throughput_kbps", "radio_latency_ms"), attacks=100, block_rows=1500))
    result = anonymeter.evaluate(ReleaseUnderTest(source, out, config, schema, plan), secrets, model,
                                 distinct_apps(source, schema), tmp_path / "scratch")
    metadata = result.metadata()
    rows = metadata["anonymeter_rows"]
    assert 1500 <= rows["ori"] + rows["control"] == metadata["anonymeter_block_rows"]
    assert 0.05 < rows["control"] / (rows["ori"] + rows["control"]) < 0.15  # a tenth of the subscribers held out
    assert rows["syn"] <= rows["ori"]  # cells under k of the evaluation release are withheld
    assert set(metadata["anonymeter"]["inference"]) == set(schema.measurements) - {"dl_throughput_kbps",
                                                                                    "radio_latency_ms"}
    assert list((tmp_path / "scratch").iterdir()) == []


def test_a_missing_environment_names_the_command_that_builds_it(tmp_path):
    with pytest.raises(anonymeter.AnonymeterUnavailable, match="build it with: make anonymeter"):
        anonymeter.check_environment(tmp_path / "nowhere" / "python")


def test_a_broken_environment_names_the_command_that_rebuilds_it(tmp_path):
    ori = sessions(200, 1)
    with pytest.raises(anonymeter.AnonymeterUnavailable, match=r"broken .*No module named 'anonymeter'.*make "
                                                                r"anonymeter"):
        # the project's Python: no anonymeter in it
        anonymeter.evaluate_tables(ori, ori, ori, ["cell"], KNOWN, ATTACKER, tmp_path, python=sys.executable)
