"""anonymeter as a second opinion: the peer library's three evaluators, run unmodified on an evaluation release.

anonymeter 1.1.0 pins numpy < 1.27 and pyarrow < 22, so it lives in an environment of its own (``make
anonymeter`` builds ``.venv-anonymeter`` beside ``.venv``) and runs in a worker process of that environment
(``anonymeter_worker.py``), started once per process and fed Parquet files.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import tempfile
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsh_assets.core.files import DigestBook
from dsh_assets.core.layout import CHECKOUT
from dsh_assets.core.privacy.attacker import AttackerModel
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.privacy.stats import FULL, LIGHT, AttackResult
from dsh_assets.core.release.cells import coarsen_app, coarsen_time
from dsh_assets.core.release.schema import ROW_ID
from dsh_assets.core.release.source import stored_rows
from dsh_assets.core.release.transform import ALIAS_COLUMN, plan_release, release as write_release
from dsh_assets.core.release.values import released_measurements
from dsh_assets.core.secrets import Secrets

DEFAULT_PYTHON = CHECKOUT / ".venv-anonymeter" / "bin" / "python"
"""anonymeter's environment, unless the home names another (``DshHome.anonymeter_python``)."""
BUILD_COMMAND = "make anonymeter"
WORKER = Path(__file__).with_name("anonymeter_worker.py")
EVALUATION_LABEL = "anonymeter"
"""Label of the derived secrets of the evaluation release (never published, never stored)."""
NAME = "anonymeter"
"""The asset's name, the key of its detailed figures and the prefix of its figures' keys."""
SINGLING_OUT_COLUMNS = 3
"""anonymeter's default number of columns per multivariate singling-out predicate."""
MAX_QUERY_ATTEMPTS_PER_ATTACK = 200
"""anonymeter stops looking for singling-out predicates after this many attempts per requested attack."""

ASSUMPTIONS = (
    "anonymeter (the peer library, run unmodified in its own environment) as a second opinion, on its three tests "
    "(singling out in both modes, linkability, inference of each measurement), as its authors intend: its ori and "
    "its control are two samples of one population and one size. The evaluation draws blocks of cells the "
    "release keeps, at random (anonymeter's own seed) until each block holds block_rows source rows, so its cost "
    "grows neither with the source nor with its largest cell; no cell is in two blocks. A cell of more than "
    "block_rows rows enters its block as a part: the rows of the subscribers that a keyed hash (the seed's, its "
    "own label) puts in a block_rows / cell rows share of them. That hash is independent of every value, so a "
    "part is a random sample of the cell's sessions, and the evaluation release takes it as the cell: fewer rows "
    "to hide among than the whole cell gives, so a part's risk is if anything the higher. Each block's "
    "subscribers are split in two halves by a keyed hash of the subscriber (the seed's, never random per run): "
    "the training half and the control. A hash of the subscriber is independent of every value, so the two halves "
    "are two random samples of the block's subscribers with all their rows, drawn alike: their difference is "
    "chance, which anonymeter's interval measures. The evaluation release is the configuration applied, with "
    "secrets derived for evaluation, to the training halves of every block (never published, never stored; its "
    "rows are written to a private scratch folder for the worker and removed). Per block anonymeter's ori is the "
    "training rows, shown as the release shows them (time and application coarsened as released, dropped columns "
    "left out, measurements raw), its syn is the evaluation release's rows of the block's cells, and its control "
    "the other half, shown the same way; the larger of ori and control is cut to the other's size by a seeded "
    "random draw of rows, so anonymeter needs no correction for a smaller control. Within the block anonymeter's "
    "nearest-neighbour searches compare every row; since every target's cell (or its part) is there, the rows the "
    "attacker would most likely pick are present, and only rows of cells outside the block, which differ in at "
    "least one categorical field, are out of reach. A singling-out predicate is checked against the block's rows "
    "only: for singling out the figure is an upper bound. Each evaluator sees the rows complete in the columns "
    "it uses (anonymeter's distances do not take nulls). The time and station are categorical; an alias column "
    "is left out (alias chaining measures aliases). Tests: SinglingOutEvaluator univariate (predicates on one "
    "column's extreme or rare values: the test that sees exact values) and multivariate (3 columns per "
    "predicate); LinkabilityEvaluator (the attacker holds the cell and the known measurements in one dataset, "
    "the cell and the other released measurements in another, and links them through the release; 1 "
    "neighbour); InferenceEvaluator with each released measurement outside the known set as the secret (the cell "
    "and the known measurements as auxiliary columns; regression with anonymeter's default tolerance, a guess "
    "within 5%). A secret whose most common value holds at least common_value_share of the blocks' source rows "
    "(a count that is mostly zero) is attacked on the sessions whose value is another one: on all sessions the "
    "control guesses the common value right and anonymeter's risk, which divides by 1 - control, keeps a wide "
    "interval; the entry names the value left out. Every test runs on every block; its attacks and the "
    "successes of the attack, the control and the random baseline are summed over the blocks, and anonymeter's "
    "own statistics turn the sums into its rates, its risk = (attack - control) / (1 - control) and the risk's "
    "95% interval. At full strength the first pass plans two thirds of the budget; a test whose interval then "
    "holds the gate's limit (its lower end at most the limit, its upper end above) runs on further blocks of the "
    "same seeded draw (their own evaluation release, made from their training halves alike), as many as the rest "
    "of the budget buys, pooled with its first pass; none is narrowed when "
    "an interval lies wholly above its limit, since the gate refuses whatever the rest shows. The point figure of singling out is the larger of its two modes' risks, its upper end the "
    "larger upper end; inference's are the largest over the secrets. The gate reads the upper ends. The seeds of "
    "every sample are fixed, and the worker has polars keep the order of first appearance in group_by and unique "
    "(anonymeter lists its univariate queries and its random predicates' values in that order before its seeded "
    "shuffle, and polars' hash order changes from process to process), so every figure repeats in any process but "
    "one baseline: linkability's random links come from a generator anonymeter makes without a seed, so that rate "
    "differs a little between runs. The attacks, the controls and the risks repeat exactly."
)
REFERENCE_BLOCK_CPU_SECONDS = 19.0
"""What one block costs in CPU seconds at 6,000 source rows and 500 attacks per test, its share of the stretched
tests' further blocks included (measured on this workplace's 2-core machines: every test, about 10 s; the further
blocks' multivariate singling out and common-value inference, about 3 s; the evaluation release and its files,
about 1 s; and 10% spread from run to run)."""
REFERENCE_BLOCK_ROWS, REFERENCE_ATTACKS = 6_000, 500
FIXED_SHARE = 0.15
"""The share of the reference cost a block pays whatever its size (reading its files, each evaluator's set-up); the
rest grows with its rows times its attacks (the nearest-neighbour searches, the predicates' checks): 3,000 rows and
500 attacks measured 9.6 to 12.1 CPU s a block (three seeds, 9 blocks each), against 10.9 by this model."""
MULTIVARIATE_STRETCH = 3
"""Multivariate singling out runs on this many times the blocks the other tests run on: its control singles out a
row about as often as its attack (a fifth of the time), so its interval is the widest of the three tests'."""
COMMON_VALUE_STRETCH = 3
"""A secret with a common value is attacked on the sessions whose value is another one, a few per block (a tenth of
them for video stalls): its inference runs on this many times the blocks the other tests run on."""
MIN_ATTACKS = 50
"""The fewest attacks a test makes on a block, whatever the budget."""
FIRST_PASS_SHARE = 2 / 3
"""A full evaluation plans its first pass on this share of its budget and spends the rest narrowing the tests whose
interval still holds the gate's limit (``undecided``): over the first pass's blocks alone, a candidate whose risk
lies near a limit passed under one seed and failed under another (c22's inference upper end on 2026-12-03: 0.053
under seed 2029, 0.027-0.031 under four others)."""
TEST_SHARES = {"singling_out:univariate": 0.04, "singling_out:multivariate": 0.15, "linkability": 0.09,
               "inference": 0.04}
"""What one test costs on one block, as a share of a block's reference cost (``block_cpu_seconds``): c22's full
evaluation on 2026-12-05 spent 0.38 s a block on univariate singling out, 1.66 on multivariate, 1.02 on linkability
and 0.42 on each secret's inference, against 11.9 s a block in all (rounded up)."""
FURTHER_BLOCK_SHARE = 0.05
"""What a further block costs whatever its tests, as a share of the reference cost: its rows read, its evaluation
release and its files."""
GATE_NAMES = {"singling_out": "anonymeter_singling_out_risk_upper",
              "linkability": "anonymeter_linkability_risk_upper", "inference": "anonymeter_inference_risk_upper"}
"""The figure of the gate each kind of test counts towards (its upper end, the largest over modes or secrets)."""


class AnonymeterUnavailable(RuntimeError):
    """anonymeter's environment is missing or broken: the message names the command that builds it."""


ENTRY_KEYS = ("attack", "control", "baseline", "risk", "risk_ci", "n_attacks", "n_success", "n_control", "blocks")
"""What each test's entry of the figures holds: anonymeter's rates and risk from the counts pooled over the blocks."""
SINGLING_OUT_ENTRIES = {"singling_out": "multivariate", "singling_out_univariate": "univariate"}
"""The figures' entry of each singling-out mode (``singling_out`` is the multivariate one, as it always was)."""


@dataclass(frozen=True)
class AnonymeterResult(AttackResult):
    answer: dict
    """The worker's answer: version, singling_out {mode: ...}, linkability, inference {secret: ...}, rows, seconds,
    cpu_seconds, warnings."""
    known: tuple[str, ...]
    strength: str
    blocks: int
    block_cells: int
    block_rows: int
    common_values: dict
    """Secret -> the common value its attacks leave out (a mostly-constant secret), for the secrets that have one."""
    budget_cpu_seconds: float = 0.0
    """The budget of this strength, which bought ``blocks`` and ``further_blocks``."""
    narrowed: tuple[str, ...] = ()
    """The tests whose first-pass interval held the gate's limit, run again on ``further_blocks`` blocks and pooled."""
    further_blocks: int = 0
    own_cpu_seconds: float = 0.0
    """CPU this process spent on the evaluation besides the worker's (the blocks, the evaluation release, files)."""

    def _entry(self, test: dict, **extra) -> dict:
        return {**{key: test[key] for key in ENTRY_KEYS}, **extra}

    def figures(self) -> dict:
        singling = {name: self.answer["singling_out"][mode] for name, mode in SINGLING_OUT_ENTRIES.items()}
        linkability, inference = self.answer["linkability"], self.answer["inference"]
        return {
            NAME: {
                "version": self.answer["version"], "strength": self.strength, "blocks": self.blocks,
                "narrowed": list(self.narrowed), "further_blocks": self.further_blocks,
                **{name: self._entry(test) for name, test in singling.items()},
                "linkability": self._entry(linkability),
                "inference": {secret: self._entry(test, targets=_targets(self.common_values.get(secret)))
                              for secret, test in inference.items()},
            },
            "anonymeter_singling_out_risk": max(test["risk"] for test in singling.values()),
            "anonymeter_singling_out_risk_upper": max(test["risk_ci"][1] for test in singling.values()),
            "anonymeter_linkability_risk": linkability["risk"],
            "anonymeter_linkability_risk_upper": linkability["risk_ci"][1],
            "anonymeter_inference_risk": max((test["risk"] for test in inference.values()), default=None),
            "anonymeter_inference_risk_upper": max((test["risk_ci"][1] for test in inference.values()), default=None),
        }

    def warnings(self) -> list[str]:
        return list(self.answer.get("warnings") or [])

    def metadata(self) -> dict:
        return {**self.figures(), "anonymeter_known": list(self.known),
                "anonymeter_rows": self.answer["rows"], "anonymeter_block_cells": self.block_cells,
                "anonymeter_block_rows": self.block_rows, "anonymeter_seconds": self.answer["seconds"],
                "anonymeter_cpu_seconds": self.answer["cpu_seconds"] + self.own_cpu_seconds,
                "anonymeter_budget_cpu_seconds": self.budget_cpu_seconds, "assumptions": ASSUMPTIONS,
                **({"warning": "; ".join(self.warnings())} if self.warnings() else {})}


def _targets(common) -> str:
    return "every session" if common is None else f"sessions whose value is not {common:g} (the common value)"


def check_environment(python: str | os.PathLike = DEFAULT_PYTHON) -> None:
    """Refuse in one line, naming the command that builds it, when anonymeter's environment is missing."""
    python = Path(python)
    if not python.is_file():
        raise AnonymeterUnavailable(f"anonymeter's environment is missing ({python} does not exist); "
                                    f"build it with: {BUILD_COMMAND}")


class Worker:
    """anonymeter's worker process for the requests of one evaluation: started on the first request, stopped (its
    stdin closed) when the evaluation leaves it. It is not kept between candidates: idle, it would hold its imports
    (about 390 MB) through every other step of the run, and a start costs about 1.6 s (benchmarks/README.md)."""

    def __init__(self, python: str | os.PathLike = DEFAULT_PYTHON):
        self._python = Path(python)
        self._process: subprocess.Popen | None = None
        self._errors = None

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def ask(self, request: dict) -> dict:
        process = self._started()
        process.stdin.write(json.dumps(request) + "\n")
        process.stdin.flush()
        line = process.stdout.readline()
        if not line:
            self._errors.seek(0)
            tail = self._errors.read().decode(errors="replace").strip().splitlines()[-1:]
            self.close()
            raise AnonymeterUnavailable(f"anonymeter's worker stopped ({': '.join(tail) or 'no message'}); "
                                        f"rebuild its environment with: {BUILD_COMMAND}")
        answer = json.loads(line)
        if "error" in answer:
            if answer["error"].startswith(("ModuleNotFoundError", "ImportError")):
                raise AnonymeterUnavailable(f"anonymeter's environment is broken ({answer['error']}); "
                                            f"rebuild it with: {BUILD_COMMAND}")
            raise RuntimeError(f"anonymeter failed: {answer['error']}")
        return answer

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.stdin.close()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
        if self._errors is not None:
            self._errors.close()
            self._errors = None

    def _started(self) -> subprocess.Popen:
        if self._process is None:
            check_environment(self._python)
            self._errors = tempfile.TemporaryFile()
            environment = {**os.environ, "NUMBA_DISABLE_PERFORMANCE_WARNINGS": "1"}
            self._process = subprocess.Popen([str(self._python), "-I", str(WORKER)], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=self._errors, text=True,
                                             env=environment)
        return self._process


@dataclass(frozen=True)
class Block:
    """One block's three tables as anonymeter takes them: ori (training rows as released, measurements raw), syn
    (the evaluation release's rows of the block's cells) and control (the other half, shown as ori)."""

    ori: pa.Table
    syn: pa.Table
    control: pa.Table


def block_tests(index: int, count: int, secrets: list[str], common: dict) -> list[str]:
    """The tests block ``index`` of an evaluation of ``count`` blocks runs: every test on the first ``count``; the
    multivariate singling out on MULTIVARIATE_STRETCH times as many, the inference of a secret with a common value
    on COMMON_VALUE_STRETCH times as many."""
    tests = []
    if index < count:
        tests += ["singling_out:univariate", "linkability", *(f"inference:{secret}" for secret in secrets)]
    elif index < COMMON_VALUE_STRETCH * count:
        tests += [f"inference:{secret}" for secret in secrets if secret in common]
    if index < MULTIVARIATE_STRETCH * count:
        tests.append("singling_out:multivariate")
    return tests


def evaluate_blocks(blocks: list[Block], categorical: list[str], known: list[str], attacker: AttackerModel,
                    scratch: str | os.PathLike, common_values: dict | None = None, strength: str = FULL,
                    block_cells: int = 0, worker: Worker | None = None,
                    count: int | None = None, attacks: int | None = None) -> AnonymeterResult:
    """anonymeter's tests on the blocks, pooled (see ASSUMPTIONS). The tables of a block share their columns:
    ``categorical`` ones, the rest numerical; ``known`` is the attacker's auxiliary measurements (the others are the
    inference secrets); ``common_values``: secret -> the common value its attacks leave out. Every test runs on the
    first ``count`` blocks (default: all of them), some on more (``block_tests``); each makes ``attacks`` attacks a
    block (default: the settings'). ``worker`` answers (default: one of anonymeter's environment, for this call)."""
    if not blocks:
        raise ValueError("anonymeter needs at least one block")
    count = len(blocks) if count is None else count
    secrets = [name for name in blocks[0].syn.column_names if name not in categorical and name not in known]
    common_values = {secret: value for secret, value in (common_values or {}).items() if secret in secrets}
    tests = [block_tests(index, count, secrets, common_values) for index in range(len(blocks))]
    with _asking(worker) as asked:
        answer = _ask(blocks, tests, categorical, known, attacker.anonymeter, scratch, common_values, asked, attacks)
    rows = sum(block.ori.num_rows + block.control.num_rows for block in blocks[:count])
    return AnonymeterResult(answer, tuple(known), strength, count, block_cells, rows, common_values)


def _asking(worker: Worker | None) -> AbstractContextManager[Worker]:
    """The caller's worker, left running; else one started for this call and stopped after it."""
    return nullcontext(worker) if worker is not None else Worker()


def narrow(result: AnonymeterResult, blocks: list[Block], tests: list[str], categorical: list[str],
           attacker: AttackerModel, scratch: str | os.PathLike, first_block: int,
           worker: Worker | None = None, attacks: int | None = None) -> AnonymeterResult:
    """``result`` with ``tests`` run again on further ``blocks`` (numbered on from ``first_block``, so their seeds
    are their own), each test's counts pooled with its earlier ones."""
    with _asking(worker) as asked:
        further = _ask(blocks, [tests] * len(blocks), categorical, list(result.known), attacker.anonymeter, scratch,
                       result.common_values, asked, attacks, first_block, result.answer["block_counts"])
    earlier = result.answer
    answer = {**further, "cpu_seconds": earlier["cpu_seconds"] + further["cpu_seconds"],
              "rows": {name: earlier["rows"][name] + further["rows"][name] for name in earlier["rows"]},
              "seconds": {label: earlier["seconds"].get(label, 0.0) + further["seconds"].get(label, 0.0)
                          for label in {*earlier["seconds"], *further["seconds"]}},
              "warnings": sorted({*earlier["warnings"], *further["warnings"]})}
    return dataclasses.replace(result, answer=answer, narrowed=tuple(tests), further_blocks=len(blocks))


def _ask(blocks: list[Block], tests: list[list[str]], categorical: list[str], known: list[str], settings,
         scratch: str | os.PathLike, common_values: dict, worker: Worker, attacks: int | None, first_block: int = 0,
         pooled_with: dict | None = None) -> dict:
    """The worker's answer on the blocks, each running its ``tests`` (a block with none is not sent)."""
    columns = blocks[0].syn.column_names
    numerical = [name for name in columns if name not in categorical]
    secrets = [name for name in numerical if name not in known]
    attacks = attacks or settings.attacks
    with tempfile.TemporaryDirectory(dir=scratch, prefix="anonymeter-") as folder:
        requested = []
        for index, (block, named) in enumerate(zip(blocks, tests)):
            if not named:
                continue
            requested.append({"tests": named})
            for name in ("ori", "syn", "control"):
                requested[-1][name] = str(Path(folder) / f"{name}-{index}.parquet")
                pq.write_table(getattr(block, name).select(columns), requested[-1][name])
        return worker.ask({
            "blocks": requested, "categorical": categorical, "numerical": numerical, "known": known,
            "secrets": {secret: common_values.get(secret) for secret in secrets},
            "linkability": [categorical + known, categorical + secrets],
            "attacks": attacks, "seed": settings.seed, "jobs": -1,
            "singling_out_columns": SINGLING_OUT_COLUMNS,
            "max_attempts": MAX_QUERY_ATTEMPTS_PER_ATTACK * attacks,
            "first_block": first_block, "pooled_with": pooled_with or {},
        })


def evaluate(release: ReleaseUnderTest, secrets: Secrets, attacker: AttackerModel, apps,
             scratch: str | os.PathLike, strength: str = FULL,
             python: str | os.PathLike = DEFAULT_PYTHON, limits: dict[str, float] | None = None) -> AnonymeterResult:
    """anonymeter, run by the worker of ``python``'s environment, on the evaluation release of ``release``'s
    configuration (see ASSUMPTIONS), over the blocks of ``strength``; its rows are written under a private folder
    of ``scratch`` for the worker and removed. At full strength, the tests whose interval holds their limit in
    ``limits`` (gate figure name -> its maximum) are narrowed on further blocks with the rest of the budget."""
    started = time.process_time()
    settings = attacker.anonymeter
    count, attacks = plan(settings, strength)
    measured = [m for m in released_measurements(release.config, release.schema) if m not in settings.known]
    # every block a stretched test runs on, drawn once; the common values are those of the first ``count`` blocks
    drawn = _blocks(release, settings, count * max(MULTIVARIATE_STRETCH, COMMON_VALUE_STRETCH))
    common = common_values([drawn.training.filter(pa.array(drawn.training_block < count)),
                            drawn.held_out.filter(pa.array(drawn.held_out_block < count))],
                           measured, settings.common_value_share)
    Path(scratch).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch, prefix="anonymeter-") as folder, Worker(python) as worker:
        os.chmod(folder, 0o700)
        blocks, categorical, known = _evaluation_blocks(release, secrets, drawn, settings, apps, Path(folder))
        result = evaluate_blocks(blocks, categorical, known, attacker, folder, common, strength, drawn.cells, worker,
                                 count=min(count, len(blocks)), attacks=attacks)

        def more_blocks(extra: int) -> tuple[list[Block], int]:
            further = _blocks(release, settings, drawn.count + extra, first=drawn.count)
            if not further.count:
                return [], drawn.count
            return _evaluation_blocks(release, secrets, further, settings, apps, Path(folder))[0], drawn.count

        result = narrowed(result, count, strength, limits, more_blocks, categorical, attacker, folder, worker, attacks)
    return budgeted(result, settings, strength, started)


def narrowed(result: AnonymeterResult, count: int, strength: str, limits: dict[str, float] | None,
             more_blocks: Callable[[int], tuple[list[Block], int]], categorical: list[str], attacker: AttackerModel,
             scratch: str | os.PathLike, worker: Worker, attacks: int) -> AnonymeterResult:
    """At full strength, ``result`` with the tests whose interval holds their limit in ``limits`` run again on the
    further blocks the rest of the budget buys after a first pass of ``count`` blocks; ``more_blocks(extra)``: up
    to ``extra`` further blocks and the number of the first. As it is otherwise."""
    tests = undecided(result.answer, limits or {}) if strength == FULL else []
    if extra := further_blocks(attacker.anonymeter, count, tests):
        blocks, first = more_blocks(extra)
        if blocks:
            return narrow(result, blocks, tests, categorical, attacker, scratch, first, worker, attacks)
    return result


def budgeted(result: AnonymeterResult, settings, strength: str, started: float) -> AnonymeterResult:
    """``result`` with the CPU budget of its strength and the CPU this process spent since ``started``."""
    budget = settings.cpu_seconds if strength == FULL else settings.light_cpu_seconds
    return dataclasses.replace(result, budget_cpu_seconds=budget, own_cpu_seconds=time.process_time() - started)


def _evaluation_blocks(release: ReleaseUnderTest, secrets: Secrets, drawn: "DrawnBlocks", settings, apps,
                       folder: Path) -> tuple[list[Block], list[str], list[str]]:
    """The evaluation release of the blocks' training halves, and each block's three tables (see ASSUMPTIONS); the
    categorical columns and the attacker's known measurements the release holds."""
    schema, config = release.schema, release.config
    source, released = folder / "source.parquet", folder / "released.parquet"
    pq.write_table(drawn.training, source)
    derived = secrets.derived(EVALUATION_LABEL)
    plan = plan_release(source, config, schema, drawn.training.num_rows, derived, release.plan.period)
    write_release(source, released, config, schema, derived, apps, period=release.plan.period, plan=plan,
                  book=DigestBook())  # a scratch file: its digests are not wanted again
    syn = pq.read_table(released)
    if ALIAS_COLUMN in syn.column_names:
        syn = syn.drop_columns([ALIAS_COLUMN])
    categorical = [name for name in syn.column_names if name not in schema.measurements]
    known = [name for name in settings.known if name in syn.column_names]
    syn = categorical_as_text(syn, categorical)
    ori = _as_released(drawn.training, release, syn.schema)
    control = _as_released(drawn.held_out, release, syn.schema)
    syn_block = drawn.training_block[plan.order]
    blocks = [Block(ori.filter(pa.array(drawn.training_block == b)), syn.filter(pa.array(syn_block == b)),
                    control.filter(pa.array(drawn.held_out_block == b))) for b in range(drawn.count)]
    return blocks, categorical, known


def block_cpu_seconds(settings, attacks: int | None = None) -> float:
    """The reference cost of one block of these settings (``attacks`` a test, default the settings'):
    ``REFERENCE_BLOCK_CPU_SECONDS``, its fixed share and the rest scaled by rows x attacks."""
    attacks = settings.attacks if attacks is None else attacks
    scale = (settings.block_rows / REFERENCE_BLOCK_ROWS) * (attacks / REFERENCE_ATTACKS)
    return REFERENCE_BLOCK_CPU_SECONDS * (FIXED_SHARE + (1 - FIXED_SHARE) * scale)


def plan(settings, strength: str) -> tuple[int, int]:
    """(blocks, attacks a test and block) a budget buys: the full one's first pass (FIRST_PASS_SHARE of it) or the
    light one, over a block's reference cost. A budget under one block's cost buys one block with as many attacks
    as it fits (at least MIN_ATTACKS). A plan, not a measurement, so the same settings give the same blocks (and
    figures) on any machine."""
    budget = settings.cpu_seconds * FIRST_PASS_SHARE if strength == FULL else settings.light_cpu_seconds
    if budget >= block_cpu_seconds(settings):
        return int(budget // block_cpu_seconds(settings)), settings.attacks
    fixed, one_attack = block_cpu_seconds(settings, 0), block_cpu_seconds(settings, 1) - block_cpu_seconds(settings, 0)
    return 1, min(settings.attacks, max(MIN_ATTACKS, int((budget - fixed) / one_attack)))


def undecided(answer: dict, limits: dict[str, float]) -> list[str]:
    """The tests of the worker's ``answer`` whose 95% interval holds their limit (lower end <= limit < upper end),
    which further blocks may decide; none when a test's lower end is above its limit, since the gate refuses the
    candidate whatever the others show. ``limits``: gate figure name (GATE_NAMES) -> its maximum."""
    intervals = {f"singling_out:{mode}": test["risk_ci"] for mode, test in answer["singling_out"].items()}
    intervals["linkability"] = answer["linkability"]["risk_ci"]
    intervals.update({f"inference:{secret}": test["risk_ci"] for secret, test in answer["inference"].items()})
    held = []
    for test, (lower, upper) in intervals.items():
        limit = limits.get(GATE_NAMES[test.partition(":")[0]])
        if limit is None or upper <= limit:
            continue
        if lower > limit:
            return []
        held.append(test)
    return held


def further_blocks(settings, count: int, tests: list[str]) -> int:
    """How many further blocks running ``tests`` the full budget has left after a first pass of ``count`` blocks
    (the plan's reference costs: TEST_SHARES and FURTHER_BLOCK_SHARE of a block's)."""
    if not tests:
        return 0
    left = settings.cpu_seconds - count * block_cpu_seconds(settings)
    share = FURTHER_BLOCK_SHARE + sum(TEST_SHARES.get(test, TEST_SHARES.get(test.partition(":")[0], 0.0))
                                      for test in tests)
    return max(0, int(left // (share * block_cpu_seconds(settings))))


def common_values(tables: list[pa.Table], columns: list[str], share: float) -> dict[str, float]:
    """Per column whose most common non-null value holds at least ``share`` of its non-null values over ``tables``,
    that value (ties: the smallest)."""
    common = {}
    for name in columns:
        values = np.concatenate([table.column(name).drop_null().to_numpy() for table in tables])
        if not len(values):
            continue
        distinct, counts = np.unique(values, return_counts=True)
        top = int(np.argmax(counts))
        if counts[top] >= share * len(values):
            common[name] = float(distinct[top])
    return common


@dataclass(frozen=True)
class DrawnBlocks:
    """The source rows of the blocks: the training halves (row ids renumbered in stored order, the evaluation
    release's source) and the control halves, with each row's block."""

    training: pa.Table
    held_out: pa.Table
    training_block: np.ndarray
    held_out_block: np.ndarray
    count: int
    cells: int


def _blocks(release: ReleaseUnderTest, settings, count: int, first: int = 0) -> DrawnBlocks:
    """Blocks ``first`` to ``count`` - 1 of released cells, drawn at random (seeded) without a cell in two blocks,
    each until it holds block_rows rows, a cell of more rows than that as a part of about block_rows rows
    (``in_part``), split by a keyed hash of the subscriber (see ASSUMPTIONS); fewer blocks where the release has too
    few cells. The draw is one seeded order of the cells, so the blocks of a larger ``count`` begin with those of a
    smaller one.

    The cells are the release's own (runs of its plan's order), so no pass over the source is needed: only the
    row groups that hold the chosen rows are read."""
    sizes = np.diff(release.cell_starts())
    counted = np.minimum(sizes, settings.block_rows)  # a larger cell enters a block as a part of this many rows
    drawn = np.random.default_rng([settings.seed, 2]).permutation(len(sizes))
    reached = np.cumsum(counted[drawn])
    cuts, taken = [0], 0
    while len(cuts) <= count and cuts[-1] < len(drawn):
        end = int(np.searchsorted(reached, taken + settings.block_rows)) + 1
        cuts.append(min(end, len(drawn)))
        taken = int(reached[cuts[-1] - 1])
    block_of_cell = np.full(len(sizes), -1, dtype=np.int64)
    for block, (start, end) in enumerate(zip(cuts[:-1], cuts[1:])):
        if block >= first:
            block_of_cell[drawn[start:end]] = block - first
    chosen = np.flatnonzero(block_of_cell >= 0)
    row_ids = release.rows_of_cells(chosen)
    block_of_row = np.repeat(block_of_cell[chosen], sizes[chosen])
    cell_size_of_row = np.repeat(sizes[chosen], sizes[chosen])
    order = np.argsort(row_ids)
    row_ids, block_of_row, cell_size_of_row = row_ids[order], block_of_row[order], cell_size_of_row[order]
    rows = stored_rows(release.source_path, row_ids)
    subscriber = release.schema.subscriber
    kept = in_part(rows.column(subscriber).to_pylist(), cell_size_of_row, settings.block_rows, settings.seed)
    rows, block_of_row = rows.filter(pa.array(kept)), block_of_row[kept]
    held = control_half(rows.column(subscriber).to_pylist(), settings.seed)
    training = rows.filter(pa.array(~held))
    training = training.set_column(training.schema.get_field_index(ROW_ID), ROW_ID,
                                   pa.array(np.arange(training.num_rows, dtype=np.int64)))
    return DrawnBlocks(training, rows.filter(pa.array(held)), block_of_row[~held], block_of_row[held],
                       max(0, len(cuts) - 1 - first), len(chosen))


def in_part(subscribers: list[str], cell_rows: np.ndarray, block_rows: int, seed: int) -> np.ndarray:
    """Whether each row (its subscriber, its cell's rows) is in its cell's part: every row of a cell of at most
    ``block_rows`` rows; of a larger cell, the rows of the subscribers whose keyed hash (the anonymeter seed's, with
    its own label) falls in the first block_rows / cell_rows of the hash's range, so about block_rows rows, each
    subscriber's rows together."""
    kept = np.asarray(cell_rows) <= block_rows
    for index in np.flatnonzero(~kept):
        kept[index] = _keyed_word(f"dsh-anonymeter-part-{seed}", subscribers[index]) < (
            (block_rows << 64) // int(cell_rows[index]))
    return kept


def control_half(subscribers: list[str], seed: int) -> np.ndarray:
    """Whether each subscriber is in the control half: a keyed hash (the anonymeter seed's, not a secret) splits
    subscribers, never rows, so a subscriber's rows are all on one side."""
    return np.array([_keyed_word(f"dsh-anonymeter-control-{seed}", subscriber) < 1 << 63
                     for subscriber in subscribers], dtype=bool)


def _keyed_word(label: str, subscriber: str) -> int:
    """A 64-bit word of the subscriber under ``label`` (the first 8 bytes of the MD5 of "label:subscriber"): a
    label's words are independent of every value and of another label's."""
    return int.from_bytes(hashlib.md5(f"{label}:{subscriber}".encode()).digest()[:8], "big")


def _as_released(rows: pa.Table, release: ReleaseUnderTest, released: pa.Schema) -> pa.Table:
    """Source rows as the release shows them: its columns, time and application coarsened, measurements raw."""
    schema, config = release.schema, release.config
    columns = {}
    for field in released:
        column = rows.column(field.name)
        if field.name == schema.time:
            column = coarsen_time(column, config)
        elif field.name == schema.app:
            column = coarsen_app(column, config)
        columns[field.name] = column
    return categorical_as_text(pa.table(columns), [n for n in released.names if n not in schema.measurements])


def categorical_as_text(table: pa.Table, categorical: list[str]) -> pa.Table:
    """Categorical columns as strings (anonymeter compares them by equality), the rest as they are."""
    for name in categorical:
        index = table.schema.get_field_index(name)
        table = table.set_column(index, name, pc.cast(table.column(name), pa.string()))
    return table
