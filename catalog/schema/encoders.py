"""Per-feature encoders: a row value -> the serialized Features map entry (or entries).

Each encoder has a fast path for the value types rows usually hold (a Python int for
an int64 scalar, a float32 array of the right shape...) that builds wire bytes with as
few Python operations as possible, and falls back to the general, fully checked path
(:func:`features.convert`) for everything else, including every error.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from catalog.schema.features import SHAPE_SUFFIX, Feature, convert, list_feature_bytes
from catalog.tfrecord import example as wire

Encoder = Callable[[Any], bytes]
PREFIX_CACHE_LIMIT = 4096
_F32_MAX = wire.FLOAT32_MAX
_I64_MIN, _I64_MAX = wire.INT64_MIN, wire.INT64_MAX
_LE_F32 = np.dtype("<f4")
_NUMBER_TYPES = {float, int}  # what a float32 list may hold (bool is excluded: the set compares types)
_SHORT = 126  # strings up to this length have a one-byte length at both nesting levels


class EntryPrefix:
    """Wraps a serialized Feature into a map entry, caching the prefix by feature length."""

    def __init__(self, name: str) -> None:
        self.key_part = wire.length_delimited(wire.TAG_1, name.encode("utf-8"))
        self.cache: dict[int, bytes] = {}

    def prefix(self, n: int) -> bytes:
        prefix = self.cache.get(n)
        if prefix is None:
            flen = wire.varint(n)
            inner = len(self.key_part) + 1 + len(flen) + n
            prefix = wire.TAG_1 + wire.varint(inner) + self.key_part + wire.TAG_2 + flen
            if len(self.cache) < PREFIX_CACHE_LIMIT:
                self.cache[n] = prefix
        return prefix

    def __call__(self, feature: bytes) -> bytes:
        return self.prefix(len(feature)) + feature


def _general(feat: Feature, entry: EntryPrefix) -> Encoder:
    """The checked path: normalise with convert, then serialize."""
    if feat.tensor:
        shape_entry = EntryPrefix(feat.name + SHAPE_SUFFIX)

        def enc_tensor(value: Any) -> bytes:
            arr = convert(feat, value)
            out = entry(wire.bytes_feature([arr.tobytes()]))
            if feat.stores_shape:
                out += shape_entry(wire.int64_feature(list(arr.shape)))
            return out

        return enc_tensor

    def enc(value: Any) -> bytes:
        return entry(list_feature_bytes(feat, value))

    return enc


def _int64_scalar(entry: EntryPrefix, slow: Encoder) -> Encoder:
    # The entry bytes depend only on the varint's length: precompute all ten prefixes.
    consts = [b""] + [entry(bytes([0x1A, k + 2, 0x0A, k]) + b"\x00" * k)[:-k] for k in range(1, 11)]
    varint = wire.varint

    small = [consts[1] + bytes((v,)) for v in range(128)]  # whole entries for 0..127

    def enc(value: Any) -> bytes:
        if type(value) is int:
            if 0 <= value < 128:
                return small[value]
            if _I64_MIN <= value <= _I64_MAX:
                v = varint(value)
                return consts[len(v)] + v
        return slow(value)

    return enc


def _float32_fixed(feat: Feature, entry: EntryPrefix, slow: Encoder) -> Encoder:
    n = feat.size or 0
    payload = wire.length_delimited(wire.TAG_1, b"\x00" * 4 * n)
    feature = wire.length_delimited(wire.TAG_2, payload)
    const = entry(feature)[: -4 * n] if n else entry(b"\x12\x00")
    pack = struct.Struct(f"<{n}f").pack
    shapes = {feat.shape, (n,)}

    def enc(value: Any) -> bytes:
        t = type(value)
        if t is float and n == 1 and -_F32_MAX <= value <= _F32_MAX:
            return const + pack(value)
        if t is np.ndarray and value.dtype == _LE_F32 and value.shape in shapes:
            return const + value.tobytes()
        if t is list and len(value) == n and set(map(type, value)) <= _NUMBER_TYPES:
            try:
                return const + pack(*value)
            except (struct.error, OverflowError):
                pass  # out of float32 range: the general path names the problem
        return slow(value)

    return enc


def _string_scalar(entry: EntryPrefix, slow: Encoder) -> Encoder:
    ld = wire.length_delimited
    # For short strings the entry's bytes before the text depend only on its length.
    prefixes = [entry(bytes((0x0A, n + 2, 0x0A, n)) + b"\x00" * n)[: -n or None] for n in range(_SHORT)]

    def enc(value: Any) -> bytes:
        if type(value) is str:
            try:
                b = value.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate: the checked path names it
                return slow(value)
            if len(b) < _SHORT:
                return prefixes[len(b)] + b
            return entry(ld(wire.TAG_1, ld(wire.TAG_1, b)))
        return slow(value)

    return enc


def _bytes_scalar(entry: EntryPrefix, slow: Encoder) -> Encoder:
    """One ``bytes`` value (an encoded image, say): framed as it is, no check to make."""
    ld = wire.length_delimited

    def enc(value: Any) -> bytes:
        if type(value) is bytes:
            return entry(ld(wire.TAG_1, ld(wire.TAG_1, value)))
        return slow(value)

    return enc


def _tensor(feat: Feature, entry: EntryPrefix, slow: Encoder) -> Encoder:
    target = feat.np_dtype
    shape = feat.shape

    def enc(value: Any) -> bytes:
        if type(value) is np.ndarray and value.dtype == target and value.shape == shape:
            return entry(wire.bytes_feature([value.tobytes()]))
        return slow(value)

    return enc


def feature_encoder(feat: Feature) -> Encoder:
    """The encoder for one feature: fast path where one exists, else the checked path."""
    entry = EntryPrefix(feat.name)
    slow = _general(feat, entry)
    if feat.tensor:
        return slow if feat.stores_shape else _tensor(feat, entry, slow)
    if feat.is_scalar and feat.dtype == "int64":
        return _int64_scalar(entry, slow)
    if feat.dtype == "float32" and not feat.is_varlen:
        return _float32_fixed(feat, entry, slow)
    if feat.is_scalar and feat.dtype == "string":
        return _string_scalar(entry, slow)
    if feat.is_scalar and feat.dtype == "bytes":
        return _bytes_scalar(entry, slow)
    return slow
