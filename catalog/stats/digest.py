"""A 64-bit digest of each of many bytes values, computed for all of them at once in NumPy:
what the distinct-count sketch counts of values too long to be top values (documents,
images, 1 KiB payloads), where a Python call a value cost more than writing the value.

Each value is read as little-endian 32-bit words ``x_k`` (the last one zero-padded) and
digested by multilinear hashing with 64-bit coefficients, ``c(len) + sum_k a_k * x_k mod 2**64``
(Lemire and Kaser, "Strongly universal string hashing is fast": its top 32 bits are strongly
universal), then mixed (splitmix64's finalizer). Two values collide with probability at most
2**-33 (words differing in their top bit alone), about 2**-64 for most differences: far below
the distinct-count sketch's error, which is what this digest feeds. Values of different
lengths get different constants ``c(len)``; zero words add nothing, so a value padded with
zeros to any width has the same sum. The coefficients are fixed (a splitmix64 sequence), so a
value has the same digest in every process and shard, and the sketches of shards merge.
Every byte of every value is read (no prefix): no two values are taken for one because they
begin alike.

The sums are one C loop a value where the optional extension is built
(``native.digest_sums``: 17x NumPy's widened copies on 1 KiB values); else, in NumPy,
values of one length, a multiple of 4 (fixed-size payloads), are one 2-D view of their
joined bytes; others are padded with zeros to a width of their size class (at most an
eighth more), a 2-D block a class. Either way a block's sums are one ``einsum``
(tests/stats/test_digest.py holds a value's digest the same alone and in any batch).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from catalog.tfrecord.native import digest_sums

_SEED = 0x243F6A8885A308D3  # (pi's fraction: any fixed constant would do)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_ZEROS = memoryview(bytes(1 << 16))  # padding, sliced without copies
_coefficients = np.zeros(0, dtype=np.uint64)


def _splitmix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer of each of ``x`` (uint64, wrapping)."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(30))
        x = x * np.uint64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _coefficient_row(words: int) -> np.ndarray:
    """The first ``words`` coefficients (the sequence grown as needed, the same every time)."""
    global _coefficients
    if len(_coefficients) < words:
        n = max(words, 2 * len(_coefficients), 256)
        with np.errstate(over="ignore"):
            _coefficients = _splitmix(np.arange(1, n + 1, dtype=np.uint64) * _GOLDEN + np.uint64(_SEED))
    return _coefficients[:words]


def digests(values: Sequence[bytes]) -> np.ndarray:
    """Each value's 64-bit digest (as int64: the sketch takes a Python int in that range)."""
    n = len(values)
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=n)
    if not n:
        return np.zeros(0, dtype=np.int64)
    sums = digest_sums(values, _coefficient_row((int(lengths.max()) + 3) // 4 or 1))
    if sums is None:
        width = int(lengths[0])
        fixed = width % 4 == 0 and (lengths == width).all()
        sums = _block_sums(b"".join(values), n, width) if fixed else _classed_sums(values, lengths)
    with np.errstate(over="ignore"):
        lengths_mixed = _splitmix(lengths.astype(np.uint64) * _GOLDEN + np.uint64(_SEED ^ 0x5BD1E995))
        return _splitmix(sums + lengths_mixed).view(np.int64)


def _block_sums(joined: bytes, n: int, width: int) -> np.ndarray:
    """The multilinear sums of ``n`` values joined, each ``width`` bytes (a multiple of 4)."""
    if not width:
        return np.zeros(n, dtype=np.uint64)
    words = np.frombuffer(joined, dtype="<u4").reshape(n, width // 4).astype(np.uint64)  # (einsum casts slower)
    return np.einsum("ij,j->i", words, _coefficient_row(width // 4))


def _size_class(lengths: np.ndarray) -> np.ndarray:
    """A width of at least each length, a multiple of 4, at most an eighth more above 32 bytes
    (2**e + m * 2**(e-3)): few classes, little padding."""
    padded = (lengths + 3) // 4 * 4
    step = np.maximum(4, 1 << np.maximum(np.log2(np.maximum(padded, 1)).astype(np.int64) - 3, 2))
    return (padded + step - 1) // step * step


def _classed_sums(values: Sequence[bytes], lengths: np.ndarray) -> np.ndarray:
    sums = np.zeros(len(values), dtype=np.uint64)
    widths = _size_class(lengths)
    for width in np.unique(widths).tolist():
        rows = np.flatnonzero(widths == width)
        parts: list[bytes | memoryview] = []
        for i in rows.tolist():
            v = values[i]
            parts.append(v)
            pad = width - len(v)
            while pad > len(_ZEROS):
                parts.append(_ZEROS)
                pad -= len(_ZEROS)
            parts.append(_ZEROS[:pad])
        sums[rows] = _block_sums(b"".join(parts), len(rows), width)
    return sums
