"""anonymeter's worker: the pieces that need only pandas run in this process; those that need anonymeter run in
anonymeter's own environment, in a subprocess (the worker imports nothing of dsh_assets)."""

import io
import json
import subprocess
import sys

import pandas as pd
import pytest

from dsh_assets.core.privacy import anonymeter
from dsh_assets.core.privacy import anonymeter_worker as worker
from dsh_assets.core.statistics import Z_95


def test_the_larger_of_ori_and_control_is_cut_to_the_others_size_by_a_seeded_draw():
    six, four = pd.DataFrame({"x": range(6)}), pd.DataFrame({"x": range(10, 14)})
    ori, control = worker._equal_samples(six, four, seed=3)
    assert control is four and len(ori) == 4
    assert set(ori["x"]) < set(range(6)) and ori["x"].is_unique  # rows of ori, drawn without replacement
    assert worker._equal_samples(six, four, seed=3)[0].equals(ori)
    ori, control = worker._equal_samples(four, six, seed=3)
    assert ori is four and len(control) == 4 and set(control["x"]) < set(range(6))
    assert worker._equal_samples(four, four.copy(), seed=3)[0] is four


def test_an_evaluator_sees_the_rows_complete_in_its_own_columns_only():
    # rows 0, 1 and 4 are ("a", 1.0); row 2 has no cell, row 3 no x; "other" is not asked for, so its null in
    # row 0 does not count
    frame = pd.DataFrame({"cell": ["a", "a", None, "b", "a"], "x": [1.0, 1.0, 2.0, None, 1.0],
                          "other": [None, 1.0, 2.0, 3.0, 4.0]})
    (kept,) = worker._complete([frame], ["cell", "x"])
    assert kept.columns.tolist() == ["cell", "x"] and kept.index.tolist() == [0, 1, 4]
    (unique,) = worker._complete([frame], ["cell", "x"], unique=True)
    assert unique.index.tolist() == [0]


def test_each_block_and_test_draws_a_seed_of_its_own_the_same_every_time():
    seeds = {(block, test): worker._block_seed(2029, block, test) for block in range(3) for test in (0, 1, 20, 100)}
    assert len(set(seeds.values())) == len(seeds)
    assert worker._block_seed(2029, 1, 20) == seeds[1, 20] != worker._block_seed(2030, 1, 20)
    assert all(0 <= seed < 2**32 for seed in seeds.values())  # what np.random.seed and pandas' random_state take


def test_every_request_line_is_answered_even_a_failing_one_and_blank_lines_are_skipped(monkeypatch, capsys):
    """An error is answered, not raised: the caller names it and the worker serves on."""
    monkeypatch.setattr(sys, "argv", ["anonymeter_worker.py"])
    monkeypatch.setattr(sys, "stdin", io.StringIO("not json\n\n{}\n"))
    assert worker.main() == 0
    answers = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(answers) == 2 and answers[0]["error"].startswith("JSONDecodeError: ")
    assert answers[1] == {"error": "KeyError: 'blocks'"}


def in_anonymeter_environment(code: str, argument=None):
    """What ``code`` prints, as JSON, run in anonymeter's environment with the worker as ``worker`` and ``argument``
    (through JSON) as ``argument``."""
    prelude = ("import importlib.util, json, sys\n"  # by path: its folder holds a module named anonymeter too
               f"spec = importlib.util.spec_from_file_location('worker', {str(anonymeter.WORKER)!r})\n"
               "worker = importlib.util.module_from_spec(spec)\n"
               "spec.loader.exec_module(worker)\n"
               "argument = json.loads(sys.argv[1])\n")
    done = subprocess.run([str(anonymeter.DEFAULT_PYTHON), "-I", "-c", prelude + code, json.dumps(argument)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def wilson_centre(successes: float, trials: int) -> float:
    """anonymeter's rate: the centre of the Wilson interval, (k + z^2 / 2) / (n + z^2)."""
    return (successes + Z_95 ** 2 / 2) / (trials + Z_95 ** 2)


@pytest.mark.e2e
def test_blocks_are_pooled_by_summing_their_counts_then_taking_anonymeters_risk():
    def counts(attacks, success, control):
        return {"n_attacks": attacks, "n_baseline_attacks": attacks, "n_control_attacks": attacks,
                "n_success": success, "n_baseline": 0, "n_control": float(control)}

    pooled = in_anonymeter_environment("print(json.dumps(worker._pooled(argument)))",
                                       [counts(100, 30, 10), counts(300, 10, 10)])
    assert (pooled["n_attacks"], pooled["n_success"], pooled["n_control"], pooled["blocks"]) == (400, 40, 20.0, 2)
    attack, control = wilson_centre(40, 400), wilson_centre(20, 400)
    assert pooled["risk"] == pytest.approx((attack - control) / (1 - control), abs=1e-12)  # 0.0521, by hand
    assert pooled["risk_ci"][0] <= pooled["risk"] <= pooled["risk_ci"][1]
    # the mean of the two blocks' risks (0.22 and 0) would be 0.11: summing the counts weighs each attack once
    assert pooled["risk"] == pytest.approx(0.0521, abs=1e-3)


@pytest.mark.e2e
def test_one_blocks_counts_pool_back_to_anonymeters_own_figures_for_them():
    code = """
from anonymeter.stats.confidence import EvaluationResults
results = EvaluationResults(n_attacks=(500, 499, 498), n_success=40, n_baseline=3, n_control=7.5)
risk = results.risk()
print(json.dumps({"counts": worker._counts(results), "pooled": worker._pooled([worker._counts(results)]),
                  "own": {"attack": results.attack_rate.value, "control": results.control_rate.value,
                          "baseline": results.baseline_rate.value, "risk": risk.value, "risk_ci": list(risk.ci)}}))
"""
    answer = in_anonymeter_environment(code)
    assert answer["counts"] == {"n_attacks": 500, "n_baseline_attacks": 499, "n_control_attacks": 498,
                                "n_success": 40, "n_baseline": 3, "n_control": 7.5}
    assert {key: answer["pooled"][key] for key in answer["own"]} == answer["own"]
    assert answer["pooled"]["blocks"] == 1


@pytest.mark.e2e
def test_polars_keeps_the_order_of_first_appearance_once_patched_and_is_patched_once():
    """anonymeter lists its queries in polars' order before its seeded shuffle: the order must not depend on the
    process's hash state. 2,000 shuffled names: polars' own order (by hash) would not be theirs."""
    code = """
import random
import polars as pl
values = [f"v{i}" for i in range(2000)]
random.Random(1).shuffle(values)
worker._order_preserving_polars()
patched = (pl.DataFrame.group_by, pl.Series.unique)
worker._order_preserving_polars()
print(json.dumps({"unique": pl.Series(values * 2).unique().to_list() == values,
                  "group_by": pl.DataFrame({"k": values * 2}).group_by("k").agg(pl.len())["k"].to_list() == values,
                  "patched_once": (pl.DataFrame.group_by, pl.Series.unique) == patched}))
"""
    assert in_anonymeter_environment(code) == {"unique": True, "group_by": True, "patched_once": True}


@pytest.mark.e2e
def test_a_request_runs_the_tests_its_block_names_and_pools_them_with_earlier_counts(tmp_path):
    """One block, numbered on from an earlier answer, narrows two inferences: m1 is its common value everywhere, so
    the block has no target for it; m2's counts join the earlier block's; the other tests keep the earlier counts."""
    ori = pd.DataFrame({"cell": ["a", "b"] * 15 + ["a"], "k0": [float(i) for i in range(30)] + [None],
                        "m1": [0.0] * 31, "m2": [float(i % 7) for i in range(31)]})
    control = pd.DataFrame({"cell": ["a", "b"] * 10, "k0": [i + 0.5 for i in range(20)], "m1": [0.0] * 20,
                            "m2": [float(i % 5) for i in range(20)]})
    for name, frame in (("ori", ori), ("syn", ori), ("control", control)):
        frame.to_parquet(tmp_path / f"{name}.parquet")
    earlier = {"n_attacks": 100, "n_baseline_attacks": 100, "n_control_attacks": 100, "n_success": 10,
               "n_baseline": 1, "n_control": 5.0}
    request = {"categorical": ["cell"], "numerical": ["k0", "m1", "m2"], "known": ["k0"],
               "secrets": {"m1": 0.0, "m2": None}, "seed": 5, "attacks": 50, "jobs": 1, "first_block": 1,
               "pooled_with": {test: [earlier] for test in ("singling_out:univariate", "singling_out:multivariate",
                                                            "linkability", "inference:m2")},
               "blocks": [{**{name: str(tmp_path / f"{name}.parquet") for name in ("ori", "syn", "control")},
                           "tests": ["inference:m1", "inference:m2"]}]}
    done = subprocess.run([str(anonymeter.DEFAULT_PYTHON), "-I", str(anonymeter.WORKER)],
                          input=json.dumps(request) + "\n", capture_output=True, text=True, check=True)
    answer = json.loads(done.stdout)
    assert "error" not in answer, answer
    assert set(answer["inference"]) == {"m2"} and "inference:m1" not in answer["block_counts"]
    earlier_m2, block_m2 = answer["block_counts"]["inference:m2"]
    assert earlier_m2 == earlier
    # 30 of ori's 31 rows have k0; cut to control's 20, 20 attacks (fewer than the 50 asked); syn is ori, so every
    # target's nearest row is its own and every guess is right
    assert (block_m2["n_attacks"], block_m2["n_success"]) == (20, 20)
    assert (answer["inference"]["m2"]["n_attacks"], answer["inference"]["m2"]["blocks"]) == (120, 2)
    assert (answer["linkability"]["n_attacks"], answer["linkability"]["blocks"]) == (100, 1)
    assert answer["rows"] == {"ori": 31, "syn": 31, "control": 20} and set(answer["seconds"]) == {"inference"}


@pytest.mark.e2e
def test_the_environments_check_prints_anonymeters_version():
    """`make anonymeter` ends with this check: anonymeter imports and its kernels compile."""
    done = subprocess.run([str(anonymeter.DEFAULT_PYTHON), "-I", str(anonymeter.WORKER), "--check"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "anonymeter 1.1.0 ready\n"
