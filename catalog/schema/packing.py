"""Columnar batch encoding: the vectorised fast path behind :meth:`Schema.encode_columns`.

The generic path calls a feature's encoder on each value and joins each record's entries in
Python, about a microsecond a record (most of a batched map's time). Here, for the plain
case, every record of a batch is laid out in one numpy buffer: each entry's bytes depend
only on a few numbers (an int64's varint length, a text's length), so a feature's entries
are written for all records at once, a few numpy operations per distinct kind of entry.

Only the plain case is handled: every feature a scalar int64, float32 or string, required,
its column a list of Python ints (non-negative), floats (finite, in float32's range) or
texts, or a 1-D array of such values (signed integers, floats, objects: a batched map's
columns, never made Python numbers). Anything else (None, another type, a negative number,
NaN, a text that does not encode) returns None and the generic path encodes the batch,
which also raises the exact error. So the fast path never reproduces an error: it only
makes the bytes the encoders would make (tests/schema/test_packing.py holds it to that).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from catalog.schema.encoders import EntryPrefix
from catalog.schema.features import Feature
from catalog.tfrecord import example as wire
from catalog.tfrecord import native
from catalog.tfrecord.framing import FOOTER_SIZE, HEADER_SIZE, Packed, distinct_inverse, frame_in_place


class RowCodec(Protocol):
    """What the fast path needs of a codec (codec.RowCodec, which imports this module)."""

    features: Mapping[str, Feature]


MIN_ROWS = 64  # fewer rows: the generic path (numpy's per-call cost would dominate)
CHUNK = 8192  # rows laid out at a time (62,500 at once took a third longer a row)
_F32_MAX = wire.FLOAT32_MAX
_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 9)], dtype=np.int64)  # 2**7 ... 2**56
_MAX_BODY = 1 << 21  # records' bodies up to this long: their length takes at most three bytes


class _Feature:
    """One feature's entry layout: constant bytes before the value, by the value's size."""

    def __init__(self, name: str, dtype: str) -> None:
        self.name = name
        self.key = name.encode("utf-8")
        self.kind = dtype
        self.entry = EntryPrefix(name)
        self.prefixes: dict[int, np.ndarray] = {}

    def prefix(self, size: int) -> np.ndarray:
        """The bytes of an entry before a value of ``size`` bytes (a varint's, a text's)."""
        found = self.prefixes.get(size)
        if found is None:
            if self.kind == "int64":  # as encoders._int64_scalar's
                whole = self.entry(bytes([0x1A, size + 2, 0x0A, size]) + bytes(size))
            elif self.kind == "float32":  # as encoders._float32_fixed's
                whole = self.entry(wire.length_delimited(wire.TAG_2, wire.length_delimited(wire.TAG_1, bytes(4))))
            else:  # as encoders._string_scalar's
                whole = self.entry(wire.length_delimited(wire.TAG_1, wire.length_delimited(wire.TAG_1, bytes(size))))
            found = self.prefixes[size] = np.frombuffer(whole[: len(whole) - size], dtype=np.uint8)
        return found


class _Plan:
    def __init__(self, codec: RowCodec) -> None:
        feats = codec.features.values()
        self.plain = bool(codec.features) and all(
            f.is_scalar and not f.tensor and not f.optional and f.dtype in ("int64", "float32", "string") for f in feats
        )
        self.features = [_Feature(f.name, f.dtype) for f in feats]


_PLANS: weakref.WeakKeyDictionary[RowCodec, _Plan] = weakref.WeakKeyDictionary()


def encode_plain(
    codec: RowCodec, columns: Mapping[str, Sequence[Any]], n: int, framed: list[bytes] | None = None
) -> Sequence[bytes] | None:
    """The records of ``n`` rows given as ``columns``, as the encoders make them; None when
    the schema or a value is not plain (see the module): the generic path's business then.
    ``framed``, when given and the records are made here, receives them framed as TFRecord
    (a bytes a part, in order): laid out with their framing, not framed again one by one;
    the records are then views of those bytes (a framing.Packed), not one object each."""
    plan = _PLANS.get(codec)
    if plan is None:
        plan = _PLANS[codec] = _Plan(codec)
    if not plan.plain or n < MIN_ROWS or len(columns) != len(plan.features):
        return None
    lists: list[list[Any] | np.ndarray] = []
    for feat in plan.features:
        column = columns.get(feat.name)
        if isinstance(column, np.ndarray) and column.ndim != 1:
            return None
        if not isinstance(column, (list, np.ndarray)) or len(column) != n:
            return None
        lists.append(column)
    if native.NATIVE is not None:
        return _encode_native(plan, lists, n, framed)
    out: list[bytes] = []
    parts: list[bytes] | None = [] if framed is not None else None
    for lo in range(0, n, CHUNK):  # a part at a time: its arrays stay in the CPU's caches
        values = []
        for feat, whole in zip(plan.features, lists, strict=True):
            got = _SIZED[feat.kind](whole[lo : lo + CHUNK])
            if got is None:
                return None
            values.append(got)
        records = _records(plan, values, len(values[0][1]), parts)
        if records is None:
            return None  # (``framed`` untouched: every part or none)
        out += records
    if framed is not None and parts is not None:
        framed += parts
    return out


def _int_values(column: list[Any] | np.ndarray) -> np.ndarray | None:
    """Python ints (or a signed integer array: the same values, not made Python ints first)
    from 0 to 2**63 - 1, as int64."""
    if isinstance(column, np.ndarray):
        if column.dtype.kind != "i":
            return None
        values = column.astype(np.int64)
    elif list(map(type, column)).count(int) != len(column):
        return None
    else:
        try:
            values = np.array(column, dtype=np.int64)
        except OverflowError:
            return None
    if values.min() < 0:  # ten bytes (protobuf's negative int64): the encoder's
        return None
    return values


def _float_values(column: list[Any] | np.ndarray) -> np.ndarray | None:
    """Python floats (or a float array of up to 8 bytes a value: what its values are as
    Python floats) within float32's range, as float32."""
    if isinstance(column, np.ndarray):
        if column.dtype.kind != "f" or column.dtype.itemsize > 8:
            return None
        values = column.astype(np.float64)
    elif list(map(type, column)).count(float) != len(column):
        return None
    else:
        values = np.array(column, dtype=np.float64)
    if not (np.abs(values) <= _F32_MAX).all():  # (NaN too: the encoder's)
        return None
    return values.astype("<f4")


def _str_column(column: list[Any] | np.ndarray) -> list[Any] | np.ndarray | None:
    """A list or object array, as it is: the C loop checks each value is a str and takes the
    UTF-8 Python keeps for it."""
    return None if isinstance(column, np.ndarray) and column.dtype != object else column


def _ints(column: list[Any] | np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(values, each varint's bytes)."""
    values = _int_values(column)
    return None if values is None else (values, np.searchsorted(_VARINT_LIMITS, values, side="right") + 1)


def _floats(column: list[Any] | np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(values as float32, 4 each)."""
    values = _float_values(column)
    return None if values is None else (values, np.full(len(values), 4, dtype=np.int64))


def _texts(column: list[Any] | np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(all the texts' UTF-8 bytes, each text's byte length) of Python strs (a list, or an
    object array of them)."""
    if _str_column(column) is None or list(map(type, column)).count(str) != len(column):
        return None
    try:
        joined = "".join(column)
        data = joined.encode("utf-8")
        if len(data) == len(joined):  # ASCII: each text's bytes are as many as its characters
            sizes = np.fromiter(map(len, column), dtype=np.int64, count=len(column))
        else:
            encoded = [t.encode("utf-8") for t in column]
            sizes = np.fromiter(map(len, encoded), dtype=np.int64, count=len(column))
    except UnicodeEncodeError:  # a lone surrogate: the encoder names it
        return None
    return np.frombuffer(data, dtype=np.uint8), sizes


_SIZED = {"int64": _ints, "float32": _floats, "string": _texts}  # NumPy's layout: values and sizes
_VALUES = {"int64": _int_values, "float32": _float_values, "string": _str_column}  # the C loop's


def _records(
    plan: _Plan, values: list[tuple[np.ndarray, np.ndarray]], n: int, framed: list[bytes] | None
) -> list[bytes] | None:
    """The records (and, with ``framed``, the records framed, appended to it), NumPy laying
    each kind of entry out for every record at once."""
    layouts = [_layout(feat, sizes) for feat, (_v, sizes) in zip(plan.features, values, strict=True)]
    body = np.zeros(n, dtype=np.int64)
    for (_v, sizes), (_t, before) in zip(values, layouts, strict=True):
        body += before + sizes
    if int(body.max()) >= _MAX_BODY:
        return None
    head = 2 + (body >= 1 << 7) + (body >= 1 << 14)  # the tag and the length's varint
    room, after = (HEADER_SIZE, FOOTER_SIZE) if framed is not None else (0, 0)  # for the framing
    ends = np.cumsum(room + head + body + after) - after
    starts = ends - head - body
    out = np.empty(int(ends[-1]) + after, dtype=np.uint8)
    out[starts] = 0x0A  # Example.features, around the entries
    _varint_bytes(out, starts + 1, body, head - 1)
    at = starts + head
    for feat, (v, sizes), (prefixes, before) in zip(plan.features, values, layouts, strict=True):
        _put_prefixes(out, at, prefixes, before)
        _put_values(out, feat.kind, v, sizes, at + before)
        at = at + before + sizes
    raw = out.tobytes()
    records = [raw[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    if framed is not None:
        framed.append(frame_in_place(out, starts, ends, records))
    return records


_KINDS = {"int64": 0, "float32": 1, "string": 3}  # encode_plain's (3: a sequence of str)


def _encode_native(
    plan: _Plan, lists: list[list[Any] | np.ndarray], n: int, framed: list[bytes] | None
) -> Sequence[bytes] | None:
    """Every byte written in one C loop, the framing and CRCs too (``framed``: the records are
    then a Packed view of the framed bytes); texts handed over as the str objects they are."""
    assert native.NATIVE is not None
    columns = []
    for feat, column in zip(plan.features, lists, strict=True):
        values = _VALUES[feat.kind](column)
        if values is None:
            return None
        columns.append((feat.key, _KINDS[feat.kind], values, None))
    made = native.NATIVE.encode_plain(columns, n, framed is not None)
    if made is None:  # a text that is no str, or has no UTF-8: the encoders say which
        return None
    buf, starts, ends = made
    at, to = np.frombuffer(starts, dtype=np.int64), np.frombuffer(ends, dtype=np.int64)
    if framed is None:
        return native.slices(buf, at, to)
    framed.append(buf)
    return Packed(buf, at, to)


def _layout(feat: _Feature, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each row's entry prefix, zero-padded, one row a record; each prefix's length)."""
    distinct, inverse = distinct_inverse(sizes)
    found = [feat.prefix(size) for size in distinct.tolist()]
    lengths = np.array([len(p) for p in found], dtype=np.int64)
    table = np.zeros((len(found), int(lengths.max())), dtype=np.uint8)
    for i, p in enumerate(found):
        table[i, : len(p)] = p
    return table[inverse], lengths[inverse]


def _put_prefixes(out: np.ndarray, at: np.ndarray, prefixes: np.ndarray, lengths: np.ndarray) -> None:
    width = prefixes.shape[1]
    if (lengths == width).all():  # one length (the usual): one write
        out[at[:, None] + np.arange(width)] = prefixes
        return
    for size in np.unique(lengths).tolist():
        rows = np.flatnonzero(lengths == size)
        out[at[rows][:, None] + np.arange(size)] = prefixes[rows, :size]


def _put_values(out: np.ndarray, kind: str, v: np.ndarray, sizes: np.ndarray, at: np.ndarray) -> None:
    if kind == "int64":
        _varint_bytes(out, at, v, sizes)
    elif kind == "float32":
        out[at[:, None] + np.arange(4)] = v.view(np.uint8).reshape(len(v), 4)
    elif len(v):  # texts: every byte to its place
        source_at = np.cumsum(sizes) - sizes
        out[np.repeat(at - source_at, sizes) + np.arange(len(v))] = v


def _varint_bytes(out: np.ndarray, at: np.ndarray, values: np.ndarray, sizes: np.ndarray) -> None:
    """Write each value's base-128 varint of ``sizes`` bytes at ``at``."""
    bits = values.astype(np.uint64)
    for j in range(int(sizes.max()) if len(sizes) else 0):
        rows = sizes > j
        byte = (bits[rows] >> np.uint64(7 * j)) & np.uint64(0x7F)
        more = (sizes[rows] > j + 1).astype(np.uint64) << np.uint64(7)
        out[at[rows] + j] = (byte | more).astype(np.uint8)
