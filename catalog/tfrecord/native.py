"""The optional C extension (``_native.c``) behind the loops Python pays for per record,
with pure-Python equivalents giving the same results where it is not built.

``setup.py`` builds the extension where the installing machine has a C compiler and skips
it where not (``optional=True``): a wheel-less platform still installs. ``CATALOG_NATIVE=0``
turns it off (the fallbacks' own tests run that way, and a user can rule it out when
something looks wrong). Only the CPython C API and the buffer protocol are used.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np
from crc32c import crc32c

Kinded = dict[str, tuple[str | None, list[Any]]]


def _load() -> ModuleType | None:
    if os.environ.get("CATALOG_NATIVE", "1") == "0":
        return None
    try:  # by name: the import checker sees no module in a compiled file
        return importlib.import_module("catalog.tfrecord._native")
    except ImportError:  # not built on this machine (no C compiler at install)
        return None


NATIVE: ModuleType | None = _load()


def crc32c_ranges(buf: Any, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The CRC32C (unmasked) of each ``buf[starts[i]:ends[i]]`` (int64 arrays), as uint32s."""
    buf = flat(buf)
    if NATIVE is not None:
        return np.frombuffer(NATIVE.crc32c_ranges(buf, _int64(starts), _int64(ends)), dtype=np.uint32)
    # slices of bytes: the cheapest way to call crc32c a record; of a memoryview once records
    # are long enough (1 KiB on average) that copying them costs more than the view
    whole = memoryview(buf).cast("B") if int((ends - starts).sum()) >= 1024 * len(starts) else bytes(buf)
    spans = zip(starts.tolist(), ends.tolist(), strict=True)
    return np.array([crc32c(whole[a:b]) for a, b in spans], dtype=np.uint32)


def slices(buf: Any, starts: np.ndarray, ends: np.ndarray) -> list[bytes]:
    """Each ``buf[starts[i]:ends[i]]`` as bytes."""
    buf = flat(buf)
    if NATIVE is not None:
        return NATIVE.slices(buf, _int64(starts), _int64(ends))
    data = bytes(buf)
    return [data[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


def float32_figures(values: np.ndarray) -> tuple[int, float, float, float, float] | None:
    """Zeros, minimum, maximum, mean and sum of squared deviations of a nonempty flat float32
    array, in one pass that lets go of the GIL (half NumPy's passes' time); None when one
    value is a NaN or an infinity, or without the extension (the caller uses NumPy)."""
    if NATIVE is None:
        return None
    return NATIVE.float32_figures(np.ascontiguousarray(values))


def digest_sums(values: Sequence[bytes], coefficients: np.ndarray) -> np.ndarray | None:
    """Each bytes value's multilinear sum (catalog.stats.digest) over its little-endian 32-bit
    words with ``coefficients`` (uint64, at least a word of the longest), in one C loop; None
    without the extension, or when a value is not bytes (the caller's NumPy path then)."""
    if NATIVE is None:
        return None
    sums = NATIVE.digest_sums(values, np.ascontiguousarray(coefficients, dtype=np.uint64))
    return None if sums is None else np.frombuffer(sums, dtype=np.uint64)


def header_fault(buf: bytes, at: np.ndarray, lengths: np.ndarray) -> int | None:
    """The position of the first record whose header at ``buf[at[i]]`` does not frame
    ``lengths[i]`` bytes (its length and masked CRC32C, the record and its footer within
    ``buf``), -1 when none; None without the extension (the caller checks with NumPy)."""
    if NATIVE is None:
        return None
    return int(NATIVE.header_fault(buf, _int64(at), _int64(lengths)))


def join_ranges(buf: bytes, starts: np.ndarray, ends: np.ndarray) -> bytes:
    """The ranges ``buf[starts[i]:ends[i]]`` back to back, in one bytes object."""
    if NATIVE is not None:
        return NATIVE.join_ranges(buf, _int64(starts), _int64(ends))
    return b"".join(map(buf.__getitem__, map(slice, starts.tolist(), ends.tolist())))


def pread_ranges(fds: np.ndarray, starts: np.ndarray, ends: np.ndarray, pad: int) -> bytes | None:
    """Bytes ``starts[k]`` to ``ends[k]`` of open file descriptor ``fds[k]``, for each k, in
    one bytes object followed by ``pad`` zero bytes: one call, the GIL released, no join.
    None when a read fails or comes back short, and always without the extension: the caller
    then reads the ranges its own way, which says which one and why."""
    if NATIVE is None:
        return None
    return NATIVE.pread_ranges(_int64(fds), _int64(starts), _int64(ends), pad)


def texts(buf: Any, starts: np.ndarray, ends: np.ndarray) -> list[str] | None:
    """Each ``buf[starts[i]:ends[i]]`` decoded as UTF-8; None when one of them is not UTF-8."""
    buf = flat(buf)
    if NATIVE is not None:
        return NATIVE.texts(buf, _int64(starts), _int64(ends))
    data = bytes(buf)
    try:
        return [data[a:b].decode("utf-8") for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    except UnicodeDecodeError:
        return None


def texts_joined(values: Any) -> tuple[bytes, np.ndarray] | None:
    """The UTF-8 of ``values`` (exactly ``str`` each) back to back, and each one's size (int64):
    :func:`texts` of the spans makes the same texts again. None when a value is not exactly a
    str or has no UTF-8, and always without the extension."""
    if NATIVE is None:
        return None
    got = NATIVE.texts_joined(values)
    return None if got is None else (got[0], np.frombuffer(got[1], dtype=np.int64))


def texts_from_joined(data: bytes, sizes: np.ndarray) -> list[str] | None:
    """The texts :func:`texts_joined` gave ``data`` and ``sizes`` for."""
    ends = np.cumsum(sizes)
    return texts(data, ends - sizes, ends)


def scalar_columns(
    buf: bytes, starts: np.ndarray, ends: np.ndarray, keys: tuple[bytes, ...], kinds: bytes
) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]] | None:
    """The int64 (kind 1), float32 (kind 2) and bytes (kind 3) scalars of the Examples
    ``buf[starts[i]:ends[i]]``, one pass in C: which records are not laid out as serializers
    write them (a bool array: the caller's general parse takes those), and for each extracted
    key (``kinds`` nonzero, in order) where it was found (bools) and its values (a writable
    int64 array, a float32's bits in the low half; for bytes, an (n, 2) array of each value's
    start and end in ``buf``). ``keys``: every key a record may hold (another one makes it
    irregular). None without the extension."""
    if NATIVE is None:
        return None
    slow, found, values = NATIVE.scalar_columns(buf, _int64(starts), _int64(ends), keys, kinds)
    n = len(starts)
    has = np.frombuffer(found, dtype=np.bool_).reshape(len(values), n)
    arrays = [np.frombuffer(v, dtype=np.int64) for v in values]
    extracted = [kind for kind in kinds if kind]
    arrays = [a.reshape(n, 2) if kind == 3 else a for a, kind in zip(arrays, extracted, strict=True)]
    return np.frombuffer(slow, dtype=np.bool_), has, arrays


def parse_example(data: Any) -> Kinded | None:
    """A tf.train.Example laid out as serializers write it, as ``{name: (kind, values)}``
    (a Feature with no list set left out); None for any other layout (unknown or repeated
    fields, repeated keys, unpacked numbers, invalid bytes), which protobuf's own parse
    then judges. Without the extension: always None."""
    if NATIVE is None:
        return None
    return NATIVE.parse_example(data)


def flat(buf: Any) -> Any:
    """``buf`` itself, or a copy in its logical order when it is a view that is not C-contiguous
    (a strided memoryview or array), which the buffer protocol cannot hand over as one span."""
    if isinstance(buf, bytes):
        return buf
    view = memoryview(buf)
    return buf if view.c_contiguous else view.tobytes()


def _int64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)
