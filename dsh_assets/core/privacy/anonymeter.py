"""anonymeter as a second opinion: the peer library's three evaluators, run unmodified on an evaluation release.

anonymeter 1.1.0 pins numpy < 1.27 and pyarrow < 22, so it lives in an environment of its own (``make
anonymeter`` builds ``.venv-anonymeter`` beside ``.venv``) and runs in a worker process of that environment
(``anonymeter_worker.py``), started once per process and fed Parquet files.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dsh_assets.core.layout import CHECKOUT
from dsh_assets.core.privacy.attacker import AttackerModel
from dsh_assets.core.privacy.inputs import ReleaseUnderTest
from dsh_assets.core.privacy.stats import AttackResult
from dsh_assets.core.release.cells import coarsen_app, coarsen_time
from dsh_assets.core.release.schema import ROW_ID
from dsh_assets.core.release.transform import ALIAS_COLUMN, plan_release, release as write_release
from dsh_assets.core.release.values import cell_runs
from dsh_assets.core.secrets import Secrets

DEFAULT_PYTHON = CHECKOUT / ".venv-anonymeter" / "bin" / "python"
"""anonymeter's environment, unless the home names another (``DshHome.anonymeter_python``)."""
BUILD_COMMAND = "make anonymeter"
WORKER = Path(__file__).with_name("anonymeter_worker.py")
EVALUATION_LABEL = "anonymeter"
"""Label of the derived secrets of the evaluation release (never published, never stored)."""
SINGLING_OUT_COLUMNS = 3
"""anonymeter's default number of columns per multivariate singling-out predicate."""
MAX_QUERY_ATTEMPTS_PER_ATTACK = 200
"""anonymeter stops looking for singling-out predicates after this many attempts per requested attack."""

ASSUMPTIONS = (
    "anonymeter (the peer library, run unmodified in its own environment) as a second opinion. The evaluation "
    "release is the configuration applied, with secrets derived for evaluation, to the period's source without a "
    "seeded share of its subscribers (holdout_share, 10% by default; chosen by an MD5 of the subscriber, never "
    "random per run): it is never published and never stored, its rows are written to a private scratch folder "
    "for the worker and removed. anonymeter's ori is that release's source rows, shown as the release shows them "
    "(time and application coarsened as released, dropped columns left out, measurements raw), its syn is the "
    "release, and its control is the rows of the held-out subscribers, shown the same way. Blocking by cell: "
    "the evaluation takes whole cells the release keeps, drawn at random (seeded) until they hold block_rows source "
    "rows "
    "(at least one cell, however large), so its cost does not grow with the source. Within the block "
    "anonymeter's nearest-neighbour searches compare every row, as on a small table; since every target's whole "
    "cell is there, the rows the attacker would most likely pick are present, and only rows of cells outside "
    "the block, which differ in at least one categorical field, are out of reach. A singling-out predicate is "
    "checked against the block's rows only, so one that isolates a row of the block may match rows of other "
    "cells of the whole release: for singling out the figure is an upper bound. Each evaluator sees the rows "
    "complete in the columns it uses (anonymeter's distances do not take nulls). The time and station are "
    "categorical; an alias column is left out (alias chaining measures aliases). Evaluators: "
    "SinglingOutEvaluator (multivariate, 3 columns per predicate), LinkabilityEvaluator (the attacker holds the "
    "cell and the known measurements in one dataset, the cell and the other released measurements in another, "
    "and links them through the release; 1 neighbour), and InferenceEvaluator with each released measurement "
    "outside the known set as the secret (the cell and the known measurements as auxiliary columns; regression "
    "with anonymeter's default tolerance, a guess within 5%). Each reports anonymeter's attack, control and "
    "baseline rates and its risk = (attack - control) / (1 - control) with its 95% interval, as the library "
    "computes them. The seeds of its samples are fixed, so every figure repeats run after run but two baselines "
    "of random guessers, which anonymeter draws without a seed we can set: singling out's random predicates take "
    "values in polars' unique() order, which is not fixed, and linkability's random links use a fresh generator; "
    "those two rates differ a little between runs. The attacks, the controls and the risks repeat exactly."
)


class AnonymeterUnavailable(RuntimeError):
    """anonymeter's environment is missing or broken: the message names the command that builds it."""


@dataclass(frozen=True)
class AnonymeterResult(AttackResult):
    answer: dict
    """The worker's answer: version, rows, singling_out, linkability, inference {secret: ...}, warnings."""
    known: tuple[str, ...]
    block_cells: int
    block_rows: int
    holdout_share: float

    def figures(self) -> dict:
        inference = self.answer["inference"]
        keys = ("attack", "control", "baseline", "risk", "risk_ci", "n_attacks")
        return {
            "anonymeter": {"version": self.answer["version"],
                           **{name: {key: self.answer[name][key] for key in keys}
                              for name in ("singling_out", "linkability")},
                           "inference": {secret: {key: values[key] for key in keys}
                                         for secret, values in inference.items()}},
            "anonymeter_inference_risk": max((values["risk"] for values in inference.values()), default=None),
            "anonymeter_singling_out_risk": self.answer["singling_out"]["risk"],
            "anonymeter_linkability_risk": self.answer["linkability"]["risk"],
        }

    def warnings(self) -> list[str]:
        return list(self.answer.get("warnings") or [])

    def metadata(self) -> dict:
        return {**self.figures(), "anonymeter_known": list(self.known),
                "anonymeter_rows": self.answer["rows"], "anonymeter_block_cells": self.block_cells,
                "anonymeter_block_rows": self.block_rows, "anonymeter_holdout_share": self.holdout_share,
                "assumptions": ASSUMPTIONS,
                **({"warning": "; ".join(self.warnings())} if self.warnings() else {})}


def check_environment(python: str | os.PathLike = DEFAULT_PYTHON) -> None:
    """Refuse in one line, naming the command that builds it, when anonymeter's environment is missing."""
    python = Path(python)
    if not python.is_file():
        raise AnonymeterUnavailable(f"anonymeter's environment is missing ({python} does not exist); "
                                    f"build it with: {BUILD_COMMAND}")


class _Worker:
    """One worker process per process, started on first use and stopped at exit (its stdin closed)."""

    _lock = threading.Lock()
    _process: subprocess.Popen | None = None
    _python: Path | None = None
    _errors = None

    @classmethod
    def ask(cls, request: dict, python: Path) -> dict:
        with cls._lock:
            process = cls._started(python)
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            line = process.stdout.readline()
            if not line:
                cls._errors.seek(0)
                tail = cls._errors.read().decode(errors="replace").strip().splitlines()[-1:]
                cls._process = None
                raise AnonymeterUnavailable(f"anonymeter's worker stopped ({': '.join(tail) or 'no message'}); "
                                            f"rebuild its environment with: {BUILD_COMMAND}")
        answer = json.loads(line)
        if "error" in answer:
            if answer["error"].startswith(("ModuleNotFoundError", "ImportError")):
                raise AnonymeterUnavailable(f"anonymeter's environment is broken ({answer['error']}); "
                                            f"rebuild it with: {BUILD_COMMAND}")
            raise RuntimeError(f"anonymeter failed: {answer['error']}")
        return answer

    @classmethod
    def _started(cls, python: Path) -> subprocess.Popen:
        """The running worker of ``python``'s environment (a worker of another environment is stopped)."""
        if cls._process is not None and cls._process.poll() is None and cls._python == python:
            return cls._process
        if cls._process is not None:
            cls._stop(cls._process)
        check_environment(python)
        cls._python = python
        cls._errors = tempfile.TemporaryFile()
        environment = {**os.environ, "NUMBA_DISABLE_PERFORMANCE_WARNINGS": "1"}
        cls._process = subprocess.Popen([str(python), "-I", str(WORKER)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=cls._errors, text=True, env=environment)
        atexit.register(cls._stop, cls._process)
        return cls._process

    @staticmethod
    def _stop(process: subprocess.Popen) -> None:
        if process.poll() is None:
            process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


def evaluate_tables(ori: pa.Table, syn: pa.Table, control: pa.Table, categorical: list[str], known: list[str],
                    attacker: AttackerModel, scratch: str | os.PathLike, block_cells: int = 0,
                    python: str | os.PathLike = DEFAULT_PYTHON) -> AnonymeterResult:
    """anonymeter's three evaluators on ``ori`` (the evaluation release's source rows), ``syn`` (the release) and
    ``control`` (rows the release was not made from), which share their columns: ``categorical`` ones, the rest
    numerical; ``known`` is the attacker's auxiliary measurements (the others are the inference secrets)."""
    numerical = [name for name in syn.column_names if name not in categorical]
    settings = attacker.anonymeter
    with tempfile.TemporaryDirectory(dir=scratch, prefix="anonymeter-") as folder:
        paths = {}
        for name, table in (("ori", ori), ("syn", syn), ("control", control)):
            paths[name] = str(Path(folder) / f"{name}.parquet")
            pq.write_table(table.select(syn.column_names), paths[name])
        answer = _Worker.ask({
            **paths, "categorical": categorical, "numerical": numerical, "known": known,
            "secrets": [name for name in numerical if name not in known],
            "linkability": [categorical + known, categorical + [name for name in numerical if name not in known]],
            "attacks": settings.attacks, "seed": attacker.sample_seed, "jobs": -1,
            "singling_out_columns": SINGLING_OUT_COLUMNS,
            "max_attempts": MAX_QUERY_ATTEMPTS_PER_ATTACK * settings.attacks,
        }, Path(python))
    return AnonymeterResult(answer, tuple(known), block_cells, ori.num_rows + control.num_rows,
                            settings.holdout_share)


def evaluate(release: ReleaseUnderTest, secrets: Secrets, attacker: AttackerModel, apps,
             scratch: str | os.PathLike, python: str | os.PathLike = DEFAULT_PYTHON) -> AnonymeterResult:
    """anonymeter, run by the worker of ``python``'s environment, on the evaluation release of ``release``'s
    configuration (see ASSUMPTIONS); its rows are written under a private folder of ``scratch`` for the worker and
    removed."""
    schema, config = release.schema, release.config
    settings = attacker.anonymeter
    Path(scratch).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch, prefix="anonymeter-") as folder:
        os.chmod(folder, 0o700)
        training, held_out, cells = _block(release, attacker)
        source = Path(folder) / "source.parquet"
        pq.write_table(training, source)
        released = Path(folder) / "released.parquet"
        plan = plan_release(source, config, schema, training.num_rows, secrets.derived(EVALUATION_LABEL),
                            release.plan.period)
        write_release(source, released, config, schema, secrets.derived(EVALUATION_LABEL), apps,
                      period=release.plan.period, plan=plan)
        syn = pq.read_table(released)
        if ALIAS_COLUMN in syn.column_names:
            syn = syn.drop_columns([ALIAS_COLUMN])
        categorical = [name for name in syn.column_names if name not in schema.measurements]
        known = [name for name in settings.known if name in syn.column_names]
        shown = [_as_released(table, release, syn.schema) for table in (training, held_out)]
        return evaluate_tables(shown[0], _categorical_as_text(syn, categorical),
                               shown[1], categorical, known, attacker, folder, cells, python)


def _block(release: ReleaseUnderTest, attacker: AttackerModel) -> tuple[pa.Table, pa.Table, int]:
    """The source rows of whole released cells drawn at random (seeded) until they hold block_rows rows: the
    training rows (row ids renumbered in stored order, the evaluation release's source) and the held-out ones.

    The cells are the release's own (runs of its plan's order), so no pass over the source is needed: only the
    row groups that hold the chosen rows are read."""
    plan, settings = release.plan, attacker.anonymeter
    starts = cell_runs(plan.cell_sizes, plan.k)
    sizes = np.diff(starts)
    drawn = np.random.default_rng([attacker.sample_seed, 2]).permutation(len(sizes))
    chosen = np.sort(drawn[:max(1, int(np.searchsorted(np.cumsum(sizes[drawn]), settings.block_rows)) + 1)])
    row_ids = np.sort(np.concatenate([release.released_row_ids()[starts[c]:starts[c + 1]] for c in chosen]
                                     or [np.empty(0, dtype=np.int64)]).astype(np.int64))
    rows = _stored_rows(release.source_path, row_ids)
    label = f"dsh-holdout-{attacker.sample_seed}:".encode()
    share = settings.holdout_share
    held = np.array([int.from_bytes(hashlib.md5(label + subscriber.encode()).digest()[:8], "big") / 2 ** 64 < share
                     for subscriber in rows.column(release.schema.subscriber).to_pylist()], dtype=bool)
    training = rows.filter(pa.array(~held))
    training = training.set_column(training.schema.get_field_index(ROW_ID), ROW_ID,
                                   pa.array(np.arange(training.num_rows, dtype=np.int64)))
    return training, rows.filter(pa.array(held)), len(chosen)


def _stored_rows(source_path, row_ids: np.ndarray) -> pa.Table:
    """The rows of a stored source (row id i is its i-th row) with these sorted row ids, from the row groups that
    hold them."""
    parquet = pq.ParquetFile(source_path)
    group_rows = [parquet.metadata.row_group(i).num_rows for i in range(parquet.metadata.num_row_groups)]
    first_of = np.concatenate([[0], np.cumsum(group_rows)])
    group_of = np.searchsorted(first_of, row_ids, side="right") - 1
    groups = np.unique(group_of)
    read_first = np.concatenate([[0], np.cumsum([group_rows[g] for g in groups])])  # where each group lands
    index = read_first[np.searchsorted(groups, group_of)] + row_ids - first_of[group_of]
    rows = parquet.read_row_groups(groups.tolist()).take(pa.array(index))
    if not np.array_equal(rows.column(ROW_ID).to_numpy(), row_ids):
        raise ValueError(f"{source_path} is not a stored source: its row ids are not its row positions")
    return rows


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
    return _categorical_as_text(pa.table(columns), [n for n in released.names if n not in schema.measurements])


def _categorical_as_text(table: pa.Table, categorical: list[str]) -> pa.Table:
    """Categorical columns as strings (anonymeter compares them by equality), the rest as they are."""
    for name in categorical:
        index = table.schema.get_field_index(name)
        table = table.set_column(index, name, pc.cast(table.column(name), pa.string()))
    return table
