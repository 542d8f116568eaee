"""Counter-based multiplicative noise: a pure function of (seed, column, stable row id).

Row ``i`` of column ``c`` always gets the ``i``-th 64-bit word of the Philox4x64 stream keyed
by SHA-256(seed, c). Because the word is addressed by the row id, not drawn in sequence, the
noise does not depend on batch size, on the order rows arrive in, or on how work is split.
"""

from __future__ import annotations

import hashlib

import numpy as np

_WORDS_PER_BLOCK = 4  # Philox4x64 yields four 64-bit words per counter value


def column_key(seed: bytes, column: str) -> np.ndarray:
    """The 128-bit Philox key of one column's stream; independent streams per column."""
    digest = hashlib.sha256(b"dsh-noise-v1\x00" + seed + b"\x00" + column.encode()).digest()
    return np.frombuffer(digest[:16], dtype=np.uint64).copy()


def uniforms(key: np.ndarray, row_ids: np.ndarray) -> np.ndarray:
    """Uniform doubles in the open interval (0, 1), one per row id."""
    if len(row_ids) == 0:
        return np.empty(0, dtype=np.float64)
    first, last = int(row_ids.min()), int(row_ids.max())
    block = first // _WORDS_PER_BLOCK
    skip = first - block * _WORDS_PER_BLOCK
    generator = np.random.Philox(key=key, counter=np.array([block, 0, 0, 0], dtype=np.uint64))
    words = generator.random_raw(skip + last - first + 1)[skip:]
    words = words[row_ids - first]
    return ((words >> np.uint64(11)).astype(np.float64) + 0.5) * (1.0 / (1 << 53))


def laplace_factors(key: np.ndarray, row_ids: np.ndarray, scale: float) -> np.ndarray:
    """exp(Laplace(0, scale)) per row, by inverse CDF of the row's uniform."""
    u = uniforms(key, row_ids)
    below = u < 0.5
    laplace = np.empty_like(u)
    laplace[below] = scale * np.log(2.0 * u[below])
    laplace[~below] = -scale * np.log(2.0 - 2.0 * u[~below])
    return np.exp(laplace)


def jitter(values: np.ndarray, key: np.ndarray, row_ids: np.ndarray, scale: float, clip_max: float) -> np.ndarray:
    """Multiply by exp(Laplace(0, scale)) and clip to [0, clip_max]; NaN (null) stays NaN."""
    noisy = values * laplace_factors(key, row_ids, scale)
    return np.clip(noisy, 0.0, clip_max, out=noisy)
