"""The relationships figure's exact sums: past 64 bits, still the exact integer."""

import numpy as np

from dsh_assets.core.utility import rank_sums


def test_exact_sums_carry_past_sixty_four_bits():
    """A group of millions of rows sums squared ranks past 2**63: the two-part sum stays the exact integer."""
    total = np.zeros(2, dtype=np.int64)
    added = [2**56 - 1] * 300 + [-(2**56 - 1)] * 700 + [12345]
    for value in added:
        rank_sums._add_exact(total, value)
    assert int(total[0]) * rank_sums.CARRY + int(total[1]) == sum(added)
