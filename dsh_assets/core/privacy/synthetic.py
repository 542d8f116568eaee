"""What the attacks find in a DP synthetic table (core/dp/synthetic.py).

No row of a synthetic table is a session: each is drawn from a model of noisy marginals. The attacks whose success
is finding a session's own row or value through the evaluator's truth (singling out, the numeric fingerprint,
linkage, re-release, inference of the app, the informed attacker) therefore find none: their figures are 0 by
construction, recorded as such and named in ``BY_CONSTRUCTION``. What a synthetic table can still give away is what
its model learned of the people it was fitted on; that is anonymeter's question, the one it was written for. Its
three tests run here as on every row-level release (core/privacy/anonymeter.py): the subscribers split in two halves
by the same keyed hash, a synthetic table of the same configuration drawn from one half (an evaluation draw:
never published, no debit), the other half the control. A synthetic row belongs to no cell of the source, so a block
is not made of cells: it is block_rows rows of each table (the training half, the table drawn from it, the control)
in a seeded order. The rows are the bounded ones (at most max_rows_per_subscriber a subscriber, as the model sees
them), so the training half and the control are samples of one population. The evaluation draw's noise is OpenDP's,
unseeded: its figures vary a little between runs.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from dsh_assets.core.dp.synthetic import bounded_rows, sample_seed, synthesize
from dsh_assets.core.privacy import anonymeter
from dsh_assets.core.privacy.anonymeter import AnonymeterResult, Block
from dsh_assets.core.privacy.attacker import AttackerModel
from dsh_assets.core.privacy.stats import AttackResult
from dsh_assets.core.release.schema import Schema
from dsh_assets.core.release.synthetic_config import DpSyntheticConfig
from dsh_assets.core.secrets import Secrets

BY_CONSTRUCTION = {
    "singling_out_rate": 0.0, "fingerprint_correct": 0.0, "fingerprint_correct_ci": [0.0, 0.0],
    "fingerprint_correct_risk": 0.0, "linkage_correct": 0.0, "linkage_correct_ci": [0.0, 0.0],
    "linkage_correct_risk": 0.0, "cross_release_relinked": 0.0, "inference_rate": 0.0, "informed_match_risk": 0.0,
}
"""The truth-based attacks' figures on a synthetic table: no released row is a session's, so none is found."""
ASSUMPTIONS = __doc__.split("\n\n", 1)[1].strip()


@dataclass(frozen=True)
class SyntheticPrivacy(AttackResult):
    anonymeter: AnonymeterResult
    epsilon: float
    delta: float

    def figures(self) -> dict:
        return {**BY_CONSTRUCTION, **self.anonymeter.figures(), "synthetic_epsilon": self.epsilon}

    def metadata(self) -> dict:
        return {**self.anonymeter.metadata(), "figures": self.figures(), "by_construction": sorted(BY_CONSTRUCTION),
                "epsilon": self.epsilon, "delta": self.delta, "assumptions": ASSUMPTIONS}

    def warnings(self) -> list[str]:
        return self.anonymeter.warnings()


def evaluate(source_path, config: DpSyntheticConfig, schema: Schema, secrets: Secrets, period: str,
             attacker: AttackerModel, scratch, strength: str = anonymeter.FULL,
             python=anonymeter.DEFAULT_PYTHON, limits: dict[str, float] | None = None) -> SyntheticPrivacy:
    """anonymeter's three tests on an evaluation draw of ``config`` from half of the subscribers (see the module's
    docstring), over the blocks of ``strength``; at full strength, the tests whose interval holds their limit in
    ``limits`` (gate figure name -> its maximum) are narrowed on further blocks, as for a row-level release."""
    started = time.process_time()
    settings = attacker.anonymeter
    count, attacks = anonymeter.plan(settings, strength)
    measurements = list(schema.measurements)
    rows = bounded_rows(source_path, schema, measurements, config.max_rows_per_subscriber, secrets,
                        with_subscriber=True)
    held = anonymeter.control_half(rows.column(schema.subscriber).to_pylist(), settings.seed)
    rows = rows.drop_columns([schema.subscriber])
    training, control = rows.filter(pa.array(~held)), rows.filter(pa.array(held))
    evaluation = secrets.derived(anonymeter.EVALUATION_LABEL)
    syn = synthesize(training, schema, measurements, config, sample_seed(evaluation, config.id, period)).table
    categorical = [schema.time, schema.province, schema.app, schema.radio]
    tables = [anonymeter.categorical_as_text(t.select([*categorical, *measurements]), categorical)
              for t in (training, syn, control)]
    drawn = count * max(anonymeter.MULTIVARIATE_STRETCH, anonymeter.COMMON_VALUE_STRETCH)
    blocks = sampled_blocks(tables, settings.block_rows, settings.seed, drawn)
    if not blocks:
        raise ValueError(f"{source_path}: no rows to attack in the synthetic table's evaluation")
    known = [m for m in settings.known if m in measurements]
    first = min(count, len(blocks))
    secret_columns = [m for m in measurements if m not in known]
    common = anonymeter.common_values([b.ori for b in blocks[:first]] + [b.control for b in blocks[:first]],
                                      secret_columns, settings.common_value_share)
    Path(scratch).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch, prefix="anonymeter-") as folder:
        os.chmod(folder, 0o700)
        with anonymeter.Worker(python) as worker:
            result = anonymeter.evaluate_blocks(blocks, categorical, known, attacker, folder, common, strength, 0,
                                                worker, count=first, attacks=attacks)

            def more_blocks(extra: int) -> tuple[list[Block], int]:
                drawn_more = sampled_blocks(tables, settings.block_rows, settings.seed, len(blocks) + extra)
                return drawn_more[len(blocks):], len(blocks)

            result = anonymeter.narrowed(result, count, strength, limits, more_blocks, categorical, attacker, folder,
                                         worker, attacks)
    return SyntheticPrivacy(anonymeter.budgeted(result, settings, strength, started), config.epsilon, config.delta)


def sampled_blocks(tables: list[pa.Table], block_rows: int, seed: int, count: int) -> list[Block]:
    """Up to ``count`` blocks of (ori, syn, control), each ``block_rows`` rows of each table drawn without
    replacement in a seeded order (fewer where a table runs out). A synthetic row belongs to no cell of the source,
    so a block is a sample of each population, not of cells: the training half, the table drawn from it, the
    control."""
    rng = np.random.default_rng([seed, 3])
    orders = [rng.permutation(table.num_rows) for table in tables]
    blocks = min(count, *(table.num_rows // block_rows for table in tables))
    if blocks == 0 and all(table.num_rows for table in tables):  # a small table: one block of what there is
        block_rows, blocks = min(table.num_rows for table in tables), 1
    return [Block(*(table.take(pa.array(order[b * block_rows:(b + 1) * block_rows]))
                    for table, order in zip(tables, orders))) for b in range(blocks)]
