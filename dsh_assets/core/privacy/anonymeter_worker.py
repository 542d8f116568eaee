"""anonymeter's evaluators, run unmodified in anonymeter's own environment (it pins numpy < 1.27, pyarrow < 22).

Started by ``dsh_assets.core.privacy.anonymeter`` with that environment's Python and this file's path, so it
imports nothing of dsh_assets. Each request is one JSON object on a line of stdin naming three Parquet files
(``ori``, ``syn``, ``control``) and the evaluation; each answer is one JSON object on a line of stdout. The
process serves requests until stdin closes, so anonymeter's import and numba's compilation happen once.
"""

import json
import sys
import time
import warnings
from importlib.metadata import version


def _result(results, risk) -> dict:
    """An evaluator's EvaluationResults and PrivacyRisk as plain values."""
    control = results.control_rate
    return {"attack": float(results.attack_rate.value), "attack_error": float(results.attack_rate.error),
            "control": None if control is None else float(control.value),
            "baseline": float(results.baseline_rate.value), "risk": float(risk.value),
            "risk_ci": [float(risk.ci[0]), float(risk.ci[1])], "n_attacks": int(results.n_attacks_ori)}


def _complete(frames, columns):
    """Each frame's rows that have a value in every one of ``columns`` (anonymeter's distances do not take nulls)."""
    return [frame[columns].dropna() for frame in frames]


def _attacks(requested: int, *frames) -> int:
    """The attacks an evaluator can make: at most one per row of its targets and of its control."""
    return min(requested, *(len(frame) for frame in frames))


def _evaluators():
    """anonymeter's evaluators, its two compiled kernels cached on disk (numba compiles them once per
    environment instead of once per process: 5 s of every worker's first evaluation)."""
    from anonymeter.evaluators import InferenceEvaluator, LinkabilityEvaluator, SinglingOutEvaluator
    from anonymeter.neighbors import mixed_types_kneighbors

    mixed_types_kneighbors.gower_distance.enable_caching()
    mixed_types_kneighbors._nearest_neighbors.enable_caching()
    return InferenceEvaluator, LinkabilityEvaluator, SinglingOutEvaluator


def _evaluate(request: dict) -> dict:
    import numpy as np
    import pandas as pd

    InferenceEvaluator, LinkabilityEvaluator, SinglingOutEvaluator = _evaluators()

    frames = [pd.read_parquet(request[name]) for name in ("ori", "syn", "control")]
    for frame in frames:
        for column in request["categorical"]:
            frame[column] = frame[column].astype(str)
    attacks, seed, jobs = request["attacks"], request["seed"], request["jobs"]
    cells, known = request["categorical"], request["known"]
    answer = {"version": version("anonymeter"), "rows": {name: int(len(frame)) for name, frame in
                                                         zip(("ori", "syn", "control"), frames)}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ori, syn, control = _complete(frames, cells + request["numerical"])
        singling = SinglingOutEvaluator(ori, syn, n_attacks=_attacks(attacks, ori, control), n_cols=request["singling_out_columns"],
                                        control=control, seed=seed, max_attempts=request["max_attempts"])
        started = time.perf_counter()
        singling.evaluate(mode="multivariate")
        answer["singling_out"] = _result(singling.results(), singling.risk())
        answer["seconds"] = {"singling_out": time.perf_counter() - started}
        started = time.perf_counter()
        linked = request["linkability"]
        ori, syn, control = _complete(frames, sorted(set(linked[0]) | set(linked[1])))
        np.random.seed(seed)
        linkability = LinkabilityEvaluator(ori, syn, aux_cols=(linked[0], linked[1]),
                                           n_attacks=_attacks(attacks, ori, control),
                                           control=control).evaluate(n_jobs=jobs)
        answer["linkability"] = _result(linkability.results(), linkability.risk())
        answer["seconds"]["linkability"] = time.perf_counter() - started
        started = time.perf_counter()
        answer["inference"] = {}
        for index, secret in enumerate(request["secrets"]):
            ori, syn, control = _complete(frames, cells + known + [secret])
            np.random.seed(seed + 1 + index)
            inference = InferenceEvaluator(ori, syn, aux_cols=cells + known, secret=secret, regression=True,
                                           n_attacks=_attacks(attacks, ori, control), control=control
                                           ).evaluate(n_jobs=jobs)
            answer["inference"][secret] = _result(inference.results(), inference.risk())
        answer["seconds"]["inference"] = time.perf_counter() - started
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
