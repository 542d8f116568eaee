"""anonymeter's evaluators, run unmodified in anonymeter's own environment (it pins numpy < 1.27, pyarrow < 22).

Started by ``dsh_assets.core.privacy.anonymeter`` with that environment's Python and this file's path, so it
imports nothing of dsh_assets. Each request is one JSON object on a line of stdin naming, per block, three Parquet
files (``ori``, ``syn``, ``control``) and the evaluation; each answer is one JSON object on a line of stdout. The
process serves requests until stdin closes, so anonymeter's import and numba's compilation happen once.

Each block names the tests to run on it; a test's counts (attacks, successes of the attack, the baseline and the
control) are summed over the blocks it ran on, and anonymeter's own ``EvaluationResults`` turns the sums into its
rates, its risk and the risk's 95% interval, as it does for one evaluation. The answer keeps each test's counts per
block (``block_counts``), so that a later request that narrows some tests on further blocks pools them with these
(``pooled_with``; its blocks are numbered on from ``first_block``, so each block's seeds are its own).
"""

import json
import resource
import sys
import time
import warnings
from importlib.metadata import version

SINGLING_OUT_MODES = ("univariate", "multivariate")


def _cpu_seconds() -> float:
    """CPU time of this process, every thread included (anonymeter's neighbour searches run in threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _counts(results) -> dict:
    """An evaluator's EvaluationResults as the counts that pool over blocks."""
    return {"n_attacks": int(results.n_attacks_ori), "n_baseline_attacks": int(results.n_attacks_baseline),
            "n_control_attacks": int(results.n_attacks_control), "n_success": int(results.n_success),
            "n_baseline": int(results.n_baseline), "n_control": float(results.n_control)}


def _pooled(blocks: list[dict]) -> dict:
    """anonymeter's rates, risk and 95% interval from the counts summed over the blocks."""
    from anonymeter.stats.confidence import EvaluationResults

    total = {key: sum(block[key] for block in blocks) for key in blocks[0] if key != "n_control"}
    control = sum(block["n_control"] for block in blocks)
    results = EvaluationResults(n_attacks=(total["n_attacks"], total["n_baseline_attacks"],
                                           total["n_control_attacks"]),
                                n_success=total["n_success"], n_baseline=total["n_baseline"], n_control=control)
    risk = results.risk()
    return {"attack": float(results.attack_rate.value), "attack_error": float(results.attack_rate.error),
            "control": float(results.control_rate.value), "baseline": float(results.baseline_rate.value),
            "risk": float(risk.value), "risk_ci": [float(risk.ci[0]), float(risk.ci[1])],
            **{key: int(value) for key, value in total.items()}, "n_control": control, "blocks": len(blocks)}


def _equal_samples(ori, control, seed: int):
    """The two frames cut to one size, rows drawn at random (seeded) from the larger: anonymeter compares two
    samples of one population and one size (a smaller control biases singling out upwards)."""
    size = min(len(ori), len(control))
    return (ori if len(ori) == size else ori.sample(size, random_state=seed),
            control if len(control) == size else control.sample(size, random_state=seed + 1))


def _complete(frames, columns, unique: bool = False):
    """Each frame's rows that have a value in every one of ``columns`` (anonymeter's distances do not take nulls)."""
    frames = [frame[columns].dropna() for frame in frames]
    return [frame.drop_duplicates() for frame in frames] if unique else frames


def _order_preserving_polars() -> None:
    """polars' ``DataFrame.group_by`` and ``Series.unique`` keep the order of first appearance unless told
    otherwise. anonymeter lists its univariate singling-out queries (rare values, from ``group_by``) and its
    random baseline's values (from ``unique``) in that order before its seeded shuffle, and polars hashes with a
    random state per process: without this, the same inputs gave a different attack from run to run."""
    import polars as pl

    group_by, unique = pl.DataFrame.group_by, pl.Series.unique
    if getattr(group_by, "order_preserving", False):
        return

    def ordered_group_by(self, *by, maintain_order=True, **named_by):
        return group_by(self, *by, maintain_order=maintain_order, **named_by)

    def ordered_unique(self, *, maintain_order=True):
        return unique(self, maintain_order=maintain_order)

    ordered_group_by.order_preserving = True
    pl.DataFrame.group_by, pl.Series.unique = ordered_group_by, ordered_unique


def _evaluators():
    """anonymeter's evaluators, its two compiled kernels cached on disk (numba compiles them once per
    environment instead of once per process: 5 s of every worker's first evaluation), polars in an order that
    repeats; called before any test."""
    from anonymeter.evaluators import InferenceEvaluator, LinkabilityEvaluator, SinglingOutEvaluator
    from anonymeter.neighbors import mixed_types_kneighbors

    _order_preserving_polars()
    mixed_types_kneighbors.gower_distance.enable_caching()
    mixed_types_kneighbors._nearest_neighbors.enable_caching()
    return InferenceEvaluator, LinkabilityEvaluator, SinglingOutEvaluator


def _block_seed(seed: int, block: int, test: int) -> int:
    import numpy as np

    return int(np.random.SeedSequence([seed, block, test]).generate_state(1)[0])


def _singling_out(frames, request: dict, block: int, mode: str) -> dict:
    from anonymeter.evaluators import SinglingOutEvaluator

    index = SINGLING_OUT_MODES.index(mode)
    ori, syn, control = _complete(frames, request["categorical"] + request["numerical"], unique=True)
    ori, control = _equal_samples(ori, control, _block_seed(request["seed"], block, 10 + index))
    evaluator = SinglingOutEvaluator(ori, syn, n_attacks=request["attacks"], n_cols=request["singling_out_columns"],
                                     control=control, seed=_block_seed(request["seed"], block, index),
                                     max_attempts=request["max_attempts"]).evaluate(mode=mode)
    return _counts(evaluator.results())


def _linkability(frames, request: dict, block: int) -> dict:
    import numpy as np
    from anonymeter.evaluators import LinkabilityEvaluator

    linked = request["linkability"]
    ori, syn, control = _complete(frames, sorted(set(linked[0]) | set(linked[1])))
    ori, control = _equal_samples(ori, control, _block_seed(request["seed"], block, 20))
    np.random.seed(_block_seed(request["seed"], block, 21))
    evaluator = LinkabilityEvaluator(ori, syn, aux_cols=(linked[0], linked[1]),
                                     n_attacks=min(request["attacks"], len(ori), len(control)),
                                     control=control).evaluate(n_jobs=request["jobs"])
    return _counts(evaluator.results())


def _inference(frames, request: dict, block: int, secret: str) -> dict | None:
    """One secret's inference on one block; None when the block has no target for it."""
    import numpy as np
    from anonymeter.evaluators import InferenceEvaluator

    aux = request["categorical"] + request["known"]
    index = list(request["secrets"]).index(secret)
    common = request["secrets"][secret]
    ori, syn, control = _complete(frames, aux + [secret])
    if common is not None:  # a mostly-constant secret: attacked on the sessions whose value is another one
        ori, control = ori[ori[secret] != common], control[control[secret] != common]
    ori, control = _equal_samples(ori, control, _block_seed(request["seed"], block, 100 + index))
    if not len(ori):
        return None
    np.random.seed(_block_seed(request["seed"], block, 200 + index))
    evaluator = InferenceEvaluator(ori, syn, aux_cols=aux, secret=secret, regression=True,
                                   n_attacks=min(request["attacks"], len(ori)), control=control
                                   ).evaluate(n_jobs=request["jobs"])
    return _counts(evaluator.results())


def _evaluate_block(request: dict, block: dict, index: int) -> dict:
    """The tests a block names (``singling_out:<mode>``, ``linkability``, ``inference:<secret>``): each one's
    counts, and the seconds each kind of test took."""
    import pandas as pd

    _evaluators()
    frames = [pd.read_parquet(block[name]) for name in ("ori", "syn", "control")]
    for frame in frames:
        for column in request["categorical"]:
            frame[column] = frame[column].astype(str)
    counts, seconds = {}, {}
    for test in block["tests"]:
        kind, _, name = test.partition(":")
        started = time.perf_counter()
        if kind == "singling_out":
            counts[test] = _singling_out(frames, request, index, name)
        elif kind == "linkability":
            counts[test] = _linkability(frames, request, index)
        elif (found := _inference(frames, request, index, name)) is not None:
            counts[test] = found
        label = kind if kind != "singling_out" else test.replace(":", "_")
        seconds[label] = seconds.get(label, 0.0) + time.perf_counter() - started
    return {"counts": counts, "seconds": seconds,
            "rows": {name: int(len(frame)) for name, frame in zip(("ori", "syn", "control"), frames)}}


def _evaluate(request: dict) -> dict:
    """The tests of every block of the request, then each test's counts pooled over the blocks it ran on, those of
    ``pooled_with`` (an earlier answer's ``block_counts``) included."""
    started_cpu = _cpu_seconds()
    first = request.get("first_block", 0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        blocks = [_evaluate_block(request, block, first + index) for index, block in enumerate(request["blocks"])]
        pooled = {test: list(counts) for test, counts in request.get("pooled_with", {}).items()}
        for block in blocks:
            for test, counts in block["counts"].items():
                pooled.setdefault(test, []).append(counts)
        answer = {
            "version": version("anonymeter"),
            "singling_out": {mode: _pooled(pooled[f"singling_out:{mode}"]) for mode in SINGLING_OUT_MODES},
            "linkability": _pooled(pooled["linkability"]),
            "inference": {secret: _pooled(pooled[f"inference:{secret}"]) for secret in request["secrets"]
                          if f"inference:{secret}" in pooled},
            "rows": {name: sum(block["rows"][name] for block in blocks) for name in ("ori", "syn", "control")},
            "seconds": {label: sum(block["seconds"].get(label, 0.0) for block in blocks)
                        for label in {label for block in blocks for label in block["seconds"]}},
            "block_counts": pooled,
        }
    answer["cpu_seconds"] = _cpu_seconds() - started_cpu
    answer["warnings"] = sorted({str(warning.message) for warning in caught})
    return answer


def _check() -> int:
    """``--check``: import anonymeter, compile (and cache) its kernels on a tiny table, print its version."""
    import pandas as pd

    InferenceEvaluator = _evaluators()[0]
    table = pd.DataFrame({"cell": ["a", "b"] * 20, "x": [float(i) for i in range(40)],
                          "y": [float(i % 7) for i in range(40)]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        InferenceEvaluator(table, table.copy(), aux_cols=["cell", "x"], secret="y", regression=True, n_attacks=10,
                           control=table.iloc[:12]).evaluate(n_jobs=1)
    print(f"anonymeter {version('anonymeter')} ready")
    return 0


def main() -> int:
    if sys.argv[1:] == ["--check"]:
        return _check()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            answer = _evaluate(json.loads(line))
        except Exception as error:  # answered, not raised: the caller names it and the worker serves on
            answer = {"error": f"{type(error).__name__}: {error}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
