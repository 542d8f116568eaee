"""The attacks on a DP synthetic table: what is 0 by construction, and anonymeter's blocks of samples."""

import numpy as np
import pyarrow as pa

from dsh_assets.core.evidence.metrics import ATTACK_FIGURES
from dsh_assets.core.privacy.synthetic import BY_CONSTRUCTION, sampled_blocks


def _table(rows: int, name: str) -> pa.Table:
    return pa.table({"x": pa.array([f"{name}{i}" for i in range(rows)])})


def test_blocks_are_equal_samples_of_each_table_without_a_row_in_two_blocks():
    tables = [_table(10, "o"), _table(7, "s"), _table(12, "c")]
    blocks = sampled_blocks(tables, block_rows=3, seed=5, count=5)
    assert len(blocks) == 2  # the synthetic table's 7 rows hold two blocks of 3
    for part in ("ori", "syn", "control"):
        rows = [getattr(b, part).column("x").to_pylist() for b in blocks]
        assert [len(r) for r in rows] == [3, 3]
        assert not set(rows[0]) & set(rows[1])
    again = sampled_blocks(tables, block_rows=3, seed=5, count=5)
    assert all(a.ori.equals(b.ori) and a.syn.equals(b.syn) for a, b in zip(blocks, again))
    more = sampled_blocks([_table(30, "o"), _table(30, "s"), _table(30, "c")], block_rows=3, seed=5, count=6)
    fewer = sampled_blocks([_table(30, "o"), _table(30, "s"), _table(30, "c")], block_rows=3, seed=5, count=4)
    assert all(a.ori.equals(b.ori) and a.control.equals(b.control) for a, b in zip(fewer, more))  # narrowing's
    other = sampled_blocks(tables, block_rows=3, seed=6, count=5)
    assert any(not a.ori.equals(b.ori) for a, b in zip(blocks, other))


def test_tables_smaller_than_a_block_give_one_block_as_large_as_the_smallest():
    (block,) = sampled_blocks([_table(10, "o"), _table(7, "s"), _table(12, "c")], block_rows=20, seed=1, count=3)
    assert (block.ori.num_rows, block.syn.num_rows, block.control.num_rows) == (7, 7, 7)
    assert sampled_blocks([_table(10, "o"), _table(0, "s"), _table(12, "c")], block_rows=20, seed=1, count=3) == []


def test_every_truth_based_attack_headline_is_zero_by_construction():
    """A new attack that looks for a session's own row must say what it finds in a synthetic table."""
    truth_based = {figure.headline for figure in ATTACK_FIGURES
                   if figure.headline and not figure.asset.startswith("anonymeter")
                   and figure.asset != "dp_synthetic_privacy" and figure.key != "alias_chain_correct"}
    assert truth_based <= set(BY_CONSTRUCTION), truth_based - set(BY_CONSTRUCTION)
    assert all(np.all(np.asarray(value) == 0) for value in BY_CONSTRUCTION.values())
