"""anonymeter, run unmodified in its own environment: on tables whose answer follows from their construction, on a
real release, its counts pooled over blocks, what the gate reads of it, and without its environment."""

import dataclasses
import os
import sys

import numpy as np
import pyarrow as pa
import pytest

from dsh_assets.core.evidence.metrics import Evidence
from dsh_assets.core.files import DigestBook
from dsh_assets.core.privacy import anonymeter
from dsh_assets.core.privacy.attacker import AnonymeterSettings, AttackerModel
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.publication.gate import check_candidate, gate_values, load_publication
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
    ori, control = sessions(2000, 1), sessions(2000, 2)
    result = anonymeter.evaluate_blocks([anonymeter.Block(ori, ori, control)], ["cell"], KNOWN, ATTACKER, tmp_path)
    figures = result.figures()
    assert figures["anonymeter_inference_risk"] > 0.8
    assert figures["anonymeter_linkability_risk"] > 0.8
    assert figures["anonymeter"]["singling_out_univariate"]["risk"] > 0.8  # exact values single their rows out
    assert figures["anonymeter_singling_out_risk"] == max(figures["anonymeter"][mode]["risk"] for mode in
                                                          ("singling_out", "singling_out_univariate"))
    assert set(figures["anonymeter"]["inference"]) == {"m2", "m3", "m4"}  # each measurement not known is a secret
    for values in figures["anonymeter"]["inference"].values():
        assert set(values) == {*anonymeter.ENTRY_KEYS, "targets"}
        assert values["n_attacks"] == 400 and values["attack"] > 0.9 and values["targets"] == "every session"
    assert figures["anonymeter"]["version"] == "1.1.0"
    assert list(tmp_path.iterdir()) == []  # the evaluation's files are removed


def test_values_drawn_independently_per_cell_give_anonymeter_no_inference(tmp_path):
    ori, control = sessions(3000, 3), sessions(3000, 4)
    blocks = [anonymeter.Block(ori, drawn_per_cell(ori, 5), control)]
    inference = anonymeter.evaluate_blocks(blocks, ["cell"], KNOWN, ATTACKER, tmp_path).figures()["anonymeter"][
        "inference"]
    for secret, values in inference.items():
        assert values["risk_ci"][0] == 0.0, (secret, values)  # the interval contains 0


def in_a_fresh_worker(*arguments) -> dict:
    """anonymeter's figures from a worker process started for them: polars hashes with a state drawn per process."""
    with anonymeter.Worker() as worker:
        return anonymeter.evaluate_blocks(*arguments, worker=worker).figures()


def test_the_same_inputs_give_the_same_figures_in_any_process_but_the_random_linker(tmp_path):
    ori, control = sessions(1500, 6), sessions(1500, 7)
    blocks = [anonymeter.Block(ori, drawn_per_cell(ori, 8), control)]
    first, second = (in_a_fresh_worker(blocks, ["cell"], KNOWN, ATTACKER, tmp_path) for _ in range(2))
    # linkability's random baseline draws from a generator anonymeter makes without a seed
    for figures in (first, second):
        figures["anonymeter"]["linkability"].pop("baseline")
    assert first == second


def answer(inference: dict, multivariate=(0.02, 0.045), univariate=(0.0, 0.01), linkability=(0.01, 0.03)) -> dict:
    def entry(risk, upper):
        return {"attack": risk, "control": 0.0, "baseline": 0.0, "risk": risk, "risk_ci": [0.0, upper],
                "n_attacks": 1000, "n_success": 10, "n_control": 0.0, "blocks": 2}

    return {"version": "1.1.0", "singling_out": {"multivariate": entry(*multivariate),
                                                 "univariate": entry(*univariate)},
            "linkability": entry(*linkability),
            "inference": {secret: entry(*values) for secret, values in inference.items()},
            "rows": {}, "seconds": {}, "cpu_seconds": 0.0, "warnings": []}


def test_the_point_figures_are_the_worst_risks_and_the_upper_ends_the_largest_upper_ends():
    # m2 has the larger risk, m3 the larger upper end: the upper end the gate reads is m3's, not m2's
    result = anonymeter.AnonymeterResult(answer({"m2": (0.04, 0.046), "m3": (0.01, 0.07), "m4": (0.0, 0.02)}),
                                         ("m0",), anonymeter.FULL, 2, 10, 1000, {})
    figures = result.figures()
    assert figures["anonymeter_inference_risk"] == 0.04
    assert figures["anonymeter_inference_risk_upper"] == 0.07
    assert figures["anonymeter_singling_out_risk"] == 0.02 and figures["anonymeter_singling_out_risk_upper"] == 0.045
    univariate_worse = anonymeter.AnonymeterResult(answer({"m2": (0.0, 0.01)}, univariate=(0.03, 0.06)),
                                                   ("m0",), anonymeter.FULL, 2, 10, 1000, {}).figures()
    assert univariate_worse["anonymeter_singling_out_risk"] == 0.03
    assert univariate_worse["anonymeter_singling_out_risk_upper"] == 0.06
    assert figures["anonymeter_linkability_risk_upper"] == 0.03


def test_the_packaged_gate_reads_the_upper_ends_and_refuses_a_light_evaluation():
    policy = load_publication(None, load_configs())
    named = {criterion.name for criterion in policy.gates["rows"]}
    assert {"anonymeter_singling_out_risk_upper", "anonymeter_linkability_risk_upper",
            "anonymeter_inference_risk_upper"} <= named
    assert not {"anonymeter_singling_out_risk", "anonymeter_linkability_risk", "anonymeter_inference_risk"} & named
    assert policy.maxima(anonymeter.GATE_NAMES.values()) == LIMITS  # the limits its evaluation narrows around
    # every point risk is under 0.05, an upper end is not: the gate refuses on the upper end
    result = anonymeter.AnonymeterResult(answer({"m2": (0.01, 0.06)}), ("m0",), anonymeter.FULL, 2, 10, 1000, {})
    evidence = Evidence(privacy=result.figures())
    assert gate_values(evidence)["anonymeter_inference_risk_upper"] == 0.06
    _, refused = check_candidate(policy, evidence)
    assert "anonymeter_inference_risk_upper 0.06 > max 0.05" in refused
    assert not any(reason.startswith("anonymeter_inference_risk ") for reason in refused)
    light = dataclasses.replace(result, answer=answer({"m2": (0.0, 0.01)}), strength=anonymeter.LIGHT, blocks=1)
    _, refused = check_candidate(policy, Evidence(privacy=light.figures()))
    assert any("anonymeter's evaluation is light (1 block)" in reason for reason in refused)


def test_a_mostly_constant_secret_is_attacked_on_its_other_values(tmp_path):
    assert anonymeter.common_values([pa.table({"stalls": [0.0] * 8 + [1.0, 2.0], "even": [0.0, 1.0] * 5}),
                                     pa.table({"stalls": [0.0, 0.0], "even": [2.0, 3.0]})],
                                    ["stalls", "even"], 0.5) == {"stalls": 0.0}  # 10 of 12 are 0; "even": 5 of 12
    ori, control = sessions(3000, 9), sessions(3000, 10)
    ori, control = (table.set_column(5, "m4", pa.array(np.where(np.arange(3000) % 10, 0.0, table.column("m4"))))
                    for table in (ori, control))
    result = anonymeter.evaluate_blocks([anonymeter.Block(ori, ori, control)], ["cell"], KNOWN, ATTACKER, tmp_path,
                                        common_values={"m4": 0.0})
    stalls = result.figures()["anonymeter"]["inference"]["m4"]
    assert stalls["targets"] == "sessions whose value is not 0 (the common value)"
    assert stalls["n_attacks"] == 300  # a tenth of the 3,000 rows are not 0


def test_the_stretched_tests_run_on_more_blocks_than_the_others():
    assert (anonymeter.MULTIVARIATE_STRETCH, anonymeter.COMMON_VALUE_STRETCH) == (3, 3)  # the expectations below
    secrets = ["m2", "m3"]
    tests = [anonymeter.block_tests(index, 2, secrets, {"m3": 0.0}) for index in range(7)]
    every = ["singling_out:univariate", "linkability", "inference:m2", "inference:m3", "singling_out:multivariate"]
    assert tests[0] == tests[1] == every
    assert tests[2] == tests[3] == tests[4] == tests[5] == ["inference:m3", "singling_out:multivariate"]
    assert tests[6] == []
    assert anonymeter.block_tests(5, 2, secrets, {}) == ["singling_out:multivariate"]


def test_a_budget_buys_blocks_at_the_reference_cost():
    settings = AnonymeterSettings(known=("m0",), attacks=500, block_rows=6000, cpu_seconds=90, light_cpu_seconds=5)
    assert anonymeter.block_cpu_seconds(settings) == anonymeter.REFERENCE_BLOCK_CPU_SECONDS
    assert anonymeter.FIRST_PASS_SHARE == 2 / 3  # the first pass plans 60 of the 90 s: 3 blocks of 19 s
    assert anonymeter.plan(settings, anonymeter.FULL) == (3, 500)
    # a quarter of the rows x attacks: the fixed share, and a quarter of the rest (19 x (0.15 + 0.85 / 4) = 6.89)
    quarter = dataclasses.replace(settings, block_rows=3000, attacks=250)
    assert anonymeter.block_cpu_seconds(quarter) == pytest.approx(19 * (0.15 + 0.85 / 4))
    assert anonymeter.plan(quarter, anonymeter.FULL) == (8, 250)  # 60 / 6.89
    # under one block: one block, the attacks that fit: (5 - 19 x 0.15) / (19 x 0.85 / 500) = 66
    assert anonymeter.plan(settings, anonymeter.LIGHT) == (1, 66)
    assert anonymeter.plan(dataclasses.replace(settings, light_cpu_seconds=1), anonymeter.LIGHT) == (
        1, anonymeter.MIN_ATTACKS)


LIMITS = {name: 0.05 for name in anonymeter.GATE_NAMES.values()}


def test_a_test_whose_interval_holds_its_limit_is_undecided():
    held = answer({"m2": (0.03, 0.07), "m3": (0.0, 0.02)}, multivariate=(0.02, 0.051), linkability=(0.0, 0.05))
    # m2's and multivariate singling out's intervals hold 0.05; linkability's upper end is the limit: it passes
    assert anonymeter.undecided(held, LIMITS) == ["singling_out:multivariate", "inference:m2"]
    assert anonymeter.undecided(held, {"anonymeter_inference_risk_upper": 0.05}) == ["inference:m2"]
    assert anonymeter.undecided(held, {}) == []  # a gate without anonymeter's criteria decides nothing on them
    # m2's interval lies above the limit: the gate refuses whatever more blocks show, so nothing is narrowed
    refused = answer({"m2": (0.06, 0.07)}, multivariate=(0.02, 0.051))
    refused["inference"]["m2"]["risk_ci"] = [0.055, 0.07]
    assert anonymeter.undecided(refused, LIMITS) == []


def test_the_rest_of_the_budget_buys_further_blocks_of_the_undecided_tests():
    settings = AnonymeterSettings(known=("m0",), attacks=500, block_rows=6000, cpu_seconds=90)
    # 3 blocks of 19 s leave 33 s; a further block of one inference costs (0.05 + 0.04) x 19 = 1.71 s: 19 blocks
    assert anonymeter.further_blocks(settings, 3, ["inference:m2"]) == 19
    # with multivariate singling out too: (0.05 + 0.15 + 0.04) x 19 = 4.56 s, 7 blocks
    assert anonymeter.further_blocks(settings, 3, ["singling_out:multivariate", "inference:m2"]) == 7
    assert anonymeter.further_blocks(settings, 3, []) == 0
    assert anonymeter.further_blocks(dataclasses.replace(settings, cpu_seconds=50), 3, ["inference:m2"]) == 0


def test_narrowing_on_further_blocks_pools_as_one_evaluation_of_every_block(tmp_path):
    first, further = (anonymeter.Block(ori, drawn_per_cell(ori, seed + 1), sessions(1500, seed + 2))
                      for ori, seed in ((sessions(1500, 11), 11), (sessions(1500, 21), 21)))
    alone = anonymeter.evaluate_blocks([first], ["cell"], KNOWN, ATTACKER, tmp_path)
    narrowed = anonymeter.narrow(alone, [further], ["inference:m2"], ["cell"], ATTACKER, tmp_path, first_block=1)
    both = anonymeter.evaluate_blocks([first, further], ["cell"], KNOWN, ATTACKER, tmp_path)
    detail, both_detail, alone_detail = (result.figures()["anonymeter"] for result in (narrowed, both, alone))
    # the further block is block 1 of its evaluation: m2's counts are those of one request over both blocks
    assert detail["inference"]["m2"] == both_detail["inference"]["m2"]
    assert detail["inference"]["m2"]["blocks"] == 2 and detail["inference"]["m2"]["n_attacks"] == 800
    assert detail["inference"]["m3"] == alone_detail["inference"]["m3"]  # the others keep their first pass
    assert (detail["narrowed"], detail["further_blocks"], detail["blocks"]) == (["inference:m2"], 1, 1)
    assert narrowed.answer["rows"]["ori"] == 3000


def test_a_release_is_evaluated_on_whole_cells_split_in_two_equal_halves_of_its_subscribers(tmp_path):
    schema = load_schema()
    source = synthetic_stored(tmp_path, 20_000, 4_000, 9)
    config = load_configs(schema=schema)["c15_window_k5_noise5"]
    out = tmp_path / "released.parquet"
    secrets = Secrets(b"seed", b"key", "test")
    plan = release(source, out, config, schema, secrets, distinct_apps(source, schema), period=RELEASE_PERIOD,
                   book=DigestBook())
    settings = AnonymeterSettings(known=("dl_throughput_kbps", "radio_latency_ms"), attacks=100, block_rows=1500,
                                  light_cpu_seconds=1)
    model = dataclasses.replace(ATTACKER, anonymeter=settings)
    under = ReleaseUnderTest(source, out, config, schema, plan, book=DigestBook())
    drawn = anonymeter._blocks(under, settings, 3)
    assert drawn.count == 3
    later = anonymeter._blocks(under, settings, 3, first=2)  # the draw goes on in the same order
    assert later.count == 1
    assert later.training.column(schema.subscriber).to_pylist() == drawn.training.filter(
        pa.array(drawn.training_block == 2)).column(schema.subscriber).to_pylist()
    for block in range(3):
        training, held = (np.flatnonzero(rows == block) for rows in (drawn.training_block, drawn.held_out_block))
        assert 1500 <= len(training) + len(held)
        assert 0.35 < len(held) / (len(training) + len(held)) < 0.65  # half of the subscribers are the control
    training_subscribers = set(drawn.training.column(schema.subscriber).to_pylist())
    assert not training_subscribers & set(drawn.held_out.column(schema.subscriber).to_pylist())
    result = anonymeter.evaluate(under, secrets, model, distinct_apps(source, schema), tmp_path / "scratch",
                                 anonymeter.LIGHT)
    metadata = result.metadata()
    assert metadata["anonymeter"]["strength"] == anonymeter.LIGHT and metadata["anonymeter"]["blocks"] == 1
    assert metadata["anonymeter"]["singling_out"]["blocks"] == anonymeter.MULTIVARIATE_STRETCH
    assert metadata["anonymeter_budget_cpu_seconds"] == 1 and metadata["anonymeter_cpu_seconds"] > 0
    assert set(metadata["anonymeter"]["inference"]) <= set(schema.measurements) - {"dl_throughput_kbps",
                                                                                    "radio_latency_ms"}
    assert list((tmp_path / "scratch").iterdir()) == []
    # at full strength, a test whose interval holds the gate's limit is run again on the blocks the budget has left
    full = dataclasses.replace(model, anonymeter=dataclasses.replace(settings, cpu_seconds=12))
    first = anonymeter.evaluate(under, secrets, full, distinct_apps(source, schema), tmp_path / "scratch")
    assert first.narrowed == () and first.further_blocks == 0  # no limits: nothing to decide
    secret, test = max(first.figures()["anonymeter"]["inference"].items(),
                       key=lambda item: item[1]["risk_ci"][1] - item[1]["risk_ci"][0])
    limit = sum(test["risk_ci"]) / 2
    narrowed = anonymeter.evaluate(under, secrets, full, distinct_apps(source, schema), tmp_path / "scratch",
                                   limits={"anonymeter_inference_risk_upper": limit})
    assert f"inference:{secret}" in narrowed.narrowed and narrowed.further_blocks > 0
    assert narrowed.figures()["anonymeter"]["inference"][secret]["blocks"] == first.blocks + narrowed.further_blocks
    # linkability, not narrowed, keeps its first pass (but its random baseline, drawn without a seed)
    assert ({**narrowed.figures()["anonymeter"]["linkability"], "baseline": None}
            == {**first.figures()["anonymeter"]["linkability"], "baseline": None})


def test_a_missing_environment_names_the_command_that_builds_it(tmp_path):
    with pytest.raises(anonymeter.AnonymeterUnavailable, match="build it with: make anonymeter"):
        anonymeter.check_environment(tmp_path / "nowhere" / "python")


def test_a_broken_environment_names_the_command_that_rebuilds_it(tmp_path):
    ori = sessions(200, 1)
    with pytest.raises(anonymeter.AnonymeterUnavailable, match=r"broken .*No module named 'anonymeter'.*make "
                                                                r"anonymeter"):
        with anonymeter.Worker(sys.executable) as worker:  # the project's Python: no anonymeter in it
            anonymeter.evaluate_blocks([anonymeter.Block(ori, ori, ori)], ["cell"], KNOWN, ATTACKER, tmp_path,
                                       worker=worker)


def anonymeter_workers_of_this_process() -> list[int]:
    workers = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat, open(f"/proc/{entry}/cmdline", "rb") as command:
                if int(stat.read().rsplit(")", 1)[1].split()[1]) == os.getpid() and \
                        anonymeter.WORKER.name.encode() in command.read():
                    workers.append(int(entry))
        except (OSError, ValueError):
            continue
    return workers


def test_an_evaluation_leaves_no_worker_behind(tmp_path):
    """Idle, a worker would hold anonymeter's imports through every later step of the candidate's process."""
    ori, control = sessions(400, 1), sessions(400, 2)
    with anonymeter.Worker() as worker:
        anonymeter.evaluate_blocks([anonymeter.Block(ori, ori, control)], ["cell"], KNOWN, ATTACKER, tmp_path,
                                   worker=worker)
        assert len(anonymeter_workers_of_this_process()) == 1  # the caller's worker serves on
    assert anonymeter_workers_of_this_process() == []
    anonymeter.evaluate_blocks([anonymeter.Block(ori, ori, control)], ["cell"], KNOWN, ATTACKER, tmp_path)
    assert anonymeter_workers_of_this_process() == []


def test_a_cell_larger_than_a_block_enters_it_as_a_part_of_its_subscribers():
    """A cell of 10,000 rows and a block of 1,000: about a tenth of its subscribers, each with all their rows; a
    cell within the block's size whole; another seed, another part."""
    subscribers = [f"s{i % 5_000}" for i in range(10_000)]  # two rows each
    kept = anonymeter.in_part(subscribers, np.full(10_000, 10_000), 1_000, seed=3)
    assert 850 < kept.sum() < 1_150
    by_subscriber = {}
    for subscriber, inside in zip(subscribers, kept):
        by_subscriber.setdefault(subscriber, set()).add(bool(inside))
    assert all(len(decisions) == 1 for decisions in by_subscriber.values())
    assert anonymeter.in_part(subscribers[:500], np.full(500, 500), 1_000, seed=3).all()
    assert (anonymeter.in_part(subscribers, np.full(10_000, 10_000), 1_000, seed=4) != kept).any()


def test_blocks_stay_near_block_rows_on_a_day_of_few_large_cells(tmp_path):
    """Hour cells of a few hundred rows against blocks of 60: each block holds a part of about 60 rows (whole cells
    made a block of one whole cell, however large), and its halves are still two halves of its subscribers."""
    schema = load_schema()
    source = synthetic_stored(tmp_path, 20_000, 4_000, 9)
    config = load_configs(schema=schema)["c17_hour_groups_k5_noise10"]
    plan = release(source, tmp_path / "released.parquet", config, schema, Secrets(b"seed", b"key", "test"),
                   distinct_apps(source, schema), period=RELEASE_PERIOD, book=DigestBook())
    assert plan.cell_sizes.max() > 300
    settings = AnonymeterSettings(known=("dl_throughput_kbps",), attacks=10, block_rows=60)
    under = ReleaseUnderTest(source, tmp_path / "released.parquet", config, schema, plan, book=DigestBook())
    drawn = anonymeter._blocks(under, settings, 8)
    assert drawn.count == 8
    for block in range(8):
        rows = int((drawn.training_block == block).sum() + (drawn.held_out_block == block).sum())
        assert 30 <= rows <= 180, rows
    assert not (set(drawn.training.column(schema.subscriber).to_pylist())
                & set(drawn.held_out.column(schema.subscriber).to_pylist()))
