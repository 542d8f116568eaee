"""Counter-based streams keyed per release: noise and row order as pure functions of the row id.

Row ``i`` of column ``c`` of the release of configuration ``k`` for period ``p`` always gets the
``i``-th 64-bit word of the Philox4x64 stream keyed by SHA-256(seed, k, p, c). Because the word is
addressed by the row id, not drawn in sequence, the noise does not depend on batch size, on the
order rows arrive in, or on how work is split. Because the key names the configuration and the
period, two releases never share a draw: an attacker holding c15 (scale 0.05) and c17 (scale
0.10) of one period cannot divide the noise out (with one shared draw, c15^2 / c17 was the
original value). The same construction, with its own purpose label, orders the rows of a release.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa

from dsh_assets.core.tables import cache_slices

_WORDS_PER_BLOCK = 4  # Philox4x64 yields four 64-bit words per counter value


def stream_key(seed: bytes, purpose: str, config_id: str, period: str, name: str = "") -> np.ndarray:
    """The 128-bit Philox key of one stream of one release: independent per purpose, configuration, period, name."""
    parts = [b"dsh-stream-v2", purpose.encode(), seed, config_id.encode(), period.encode(), name.encode()]
    digest = hashlib.sha256(b"\x00".join(len(part).to_bytes(4, "big") + part for part in parts)).digest()
    return np.frombuffer(digest[:16], dtype=np.uint64).copy()


def noise_key(seed: bytes, config_id: str, period: str, column: str) -> np.ndarray:
    """The key of one measurement column's noise in the release of ``config_id`` for ``period``."""
    return stream_key(seed, "noise", config_id, period, column)


def stream_words(key: np.ndarray, row_ids: np.ndarray) -> np.ndarray:
    """The 64-bit word of each row id in the stream of ``key`` (row ids need not be sorted)."""
    if len(row_ids) == 0:
        return np.empty(0, dtype=np.uint64)
    first, last = int(row_ids.min()), int(row_ids.max())
    if last - first + 1 > _SPARSE_SPAN * len(row_ids):
        return _words_by_block(key, row_ids)
    block = first // _WORDS_PER_BLOCK
    skip = first - block * _WORDS_PER_BLOCK
    generator = np.random.Philox(key=key, counter=np.array([block, 0, 0, 0], dtype=np.uint64))
    stream = generator.random_raw(skip + last - first + 1)[skip:]
    consecutive = len(stream) == len(row_ids) and bool(np.all(np.diff(row_ids) == 1))
    if not consecutive:  # a whole source batch has consecutive ids: a slice of the stream, no gather
        stream = stream[row_ids - first]
    return stream


_SPARSE_SPAN = 4096
"""Row ids spread over more than this many words each are generated block by block: a generator set at a block
costs about as much as a few thousand words of a stream (1,000 row ids spread over 11M: 23 ms, not 290)."""


def _words_by_block(key: np.ndarray, row_ids: np.ndarray) -> np.ndarray:
    """``stream_words`` of row ids far apart: only the four-word blocks that hold them, each at its counter."""
    blocks, inverse = np.unique(row_ids // _WORDS_PER_BLOCK, return_inverse=True)
    words = np.empty((len(blocks), _WORDS_PER_BLOCK), dtype=np.uint64)
    for index, block in enumerate(blocks.tolist()):
        counter = np.array([block, 0, 0, 0], dtype=np.uint64)
        words[index] = np.random.Philox(key=key, counter=counter).random_raw(_WORDS_PER_BLOCK)
    return words[inverse, row_ids % _WORDS_PER_BLOCK]


def uniforms(key: np.ndarray, row_ids: np.ndarray) -> np.ndarray:
    """Uniform doubles in the open interval (0, 1), one per row id."""
    if len(row_ids) == 0:
        return np.empty(0, dtype=np.float64)
    words = stream_words(key, row_ids)
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


def _noised(values: np.ndarray, key: np.ndarray, row_ids: np.ndarray, scale: float, clip_max: float) -> np.ndarray:
    """``values`` times their rows' exp(Laplace(0, scale)), clipped to [0, clip_max] (NaN stays NaN): a new array."""
    with np.errstate(invalid="ignore", over="ignore"):
        noisy = values * laplace_factors(key, row_ids, scale)
        return np.clip(noisy, 0.0, clip_max, out=noisy)


def jitter_values(values: np.ndarray, key: np.ndarray, scale: float, clip_max: float,
                  out: np.ndarray | None = None) -> np.ndarray:
    """``jitter`` of float64 values at release positions 0, 1, ... with NaN for null (a value stage's column): the
    same factors by position, a cache-sized chunk at a time, so no whole column of factors, words or row ids is
    held (at 11M rows each is 88 MB). ``out``: where the noisy values go (``values`` itself: in place); default a
    new array."""
    out = np.empty(len(values), dtype=np.float64) if out is None else out
    for part in cache_slices(len(values)):
        out[part] = _noised(values[part], key, np.arange(part.start, part.stop, dtype=np.int64), scale, clip_max)
    return out


def jitter(column: pa.Array, key: np.ndarray, row_ids: np.ndarray, scale: float, clip_max: float) -> pa.Array:
    """A float64 column multiplied by exp(Laplace(0, scale)) and clipped to [0, clip_max]; nulls stay null.

    Works on the column's data buffer and keeps its validity bitmap (no NaN round trip); values
    under a null slot are computed but never read.
    """
    if column.offset:
        column = pa.concat_arrays([column])  # realign to offset 0 so the buffers line up
    validity, data = column.buffers()
    noisy = _noised(np.frombuffer(data, dtype=np.float64, count=len(column)), key, row_ids, scale, clip_max)
    return pa.Array.from_buffers(pa.float64(), len(column), [validity, pa.py_buffer(noisy)],
                                 null_count=column.null_count)
