"""Counter-based multiplicative noise: a pure function of (seed, column, stable row id).

Row ``i`` of column ``c`` always gets the ``i``-th 64-bit word of the Philox4x64 stream keyed
by SHA-256(seed, c). Because the word is addressed by the row id, not drawn in sequence, the
noise does not depend on batch size, on the order rows arrive in, or on how work is split.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa

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
    consecutive = len(words) == len(row_ids) and bool(np.all(np.diff(row_ids) == 1))
    if not consecutive:  # a whole source batch has consecutive ids: a slice of the stream, no gather
        words = words[row_ids - first]
    words >>= np.uint64(11)
    u = words.astype(np.float64)
    u += 0.5
    u *= 1.0 / (1 << 53)
    return u


def laplace_factors(key: np.ndarray, row_ids: np.ndarray, scale: float) -> np.ndarray:
    """exp(Laplace(0, scale)) per row, by inverse CDF of the row's uniform u.

    L = scale * log(2u) below one half and -scale * log(2 - 2u) above: one branch-free pass as
    log(min(2u, 2 - 2u)) * copysign(scale, 0.5 - u), in place.
    """
    u = uniforms(key, row_ids)
    sign = np.copysign(scale, 0.5 - u)
    u *= 2.0
    np.minimum(u, 2.0 - u, out=u)
    np.log(u, out=u)
    u *= sign
    return np.exp(u, out=u)


def jitter(column: pa.Array, key: np.ndarray, row_ids: np.ndarray, scale: float, clip_max: float) -> pa.Array:
    """A float64 column multiplied by exp(Laplace(0, scale)) and clipped to [0, clip_max]; nulls stay null.

    Works on the column's data buffer and keeps its validity bitmap (no NaN round trip); values
    under a null slot are computed but never read.
    """
    if column.offset:
        column = pa.concat_arrays([column])  # realign to offset 0 so the buffers line up
    validity, data = column.buffers()
    values = np.frombuffer(data, dtype=np.float64, count=len(column))
    with np.errstate(invalid="ignore", over="ignore"):
        noisy = values * laplace_factors(key, row_ids, scale)
        np.clip(noisy, 0.0, clip_max, out=noisy)
    return pa.Array.from_buffers(pa.float64(), len(column), [validity, pa.py_buffer(noisy)],
                                 null_count=column.null_count)
