"""Columnar batch decoding: the vectorized fast path behind :meth:`Schema.decode_batch`.

The generic path parses each record into protobuf objects and checks it feature by
feature in Python, about ten microseconds a record. Here the records of a batch are
joined into one byte buffer and parsed *together*: every step (read a tag, read a
length, find a key, gather the values) is one numpy operation over all records, so
the Python cost is per batch, not per record.

Only the regular layout is handled: one ``Example.features`` field; map entries of
exactly ``key, value``; each ``Feature`` holding exactly the list kind the schema
wants; numbers packed into one field; no unknown fields, no repeated keys. A record
that deviates in any way (including every invalid record) is marked *slow* and
decoded by the generic path, which also raises the exact error. So the fast path
never has to reproduce an error message or protobuf's merge rules: it only has to be
sure that what it accepts is what the generic path would return.
"""

from __future__ import annotations

import itertools
import math
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import as_strided

from catalog.schema.codec import RowCodec, build_column
from catalog.schema.features import SHAPE_SUFFIX, Feature
from catalog.tfrecord import example as wire
from catalog.tfrecord import native

Arr = npt.NDArray[Any]
Values = Any  # of E entries: an (E, *shape) array, or a list of E per-record values (varlen)
# A variable-length numeric column as its decoder cut it: every value in record order, and each
# record's count (see decode_batch's ``ragged``)
Ragged = dict[str, tuple[Arr, Arr]]

# A length that fails every bounds check: stands in for length varints over five bytes.
_BAD_LENGTH = 1 << 40
_MAX_VARINT = 10  # protobuf's limit for an int64 varint
_TAG_1, _TAG_2 = 0x0A, 0x12
# _BYTE_MASKS[k] keeps the low k bytes of a little-endian uint64.
_BYTE_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(9)], dtype=np.uint64)
_HIGH_BITS = 0x8080808080808080
# _CONTINUED[k]: the high bits of a k-byte varint (set on all bytes but the last); none for k = 0
_CONTINUED = np.array([1] + [_HIGH_BITS & ((1 << (8 * (k - 1))) - 1) for k in range(1, 9)], dtype=np.uint64)
_LIST_TAG = {"int64": 0x1A, "shape": 0x1A, "float32": 0x12, "bytes": 0x0A}
_SCALAR_KINDS = {"int64": 1, "float32": 2, "bytes": 3}  # native.scalar_columns' kinds


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class _Column:
    """One map key the fast path understands: a schema feature or a tensor's ``/shape``."""

    key: bytes
    feat: Feature
    kind: str  # "int64" | "float32" | "bytes" (string too) | "tensor" | "shape"
    count: int | None  # values per record; None when variable
    shape: tuple[int, ...]  # of one record's values when count is fixed
    # batches to wait before trying again to decode repeated texts once (see _repeated_texts)
    dedupe_wait: list[int] = field(default_factory=lambda: [0], compare=False)


class _Plan:
    """What the fast path needs from a schema, worked out once per codec."""

    def __init__(self, codec: RowCodec) -> None:
        self.features = codec.features  # not the codec itself: _PLANS must not keep it alive
        columns: list[_Column] = []
        for feat in codec.features.values():
            columns.append(_column_of(feat))
            if feat.stores_shape:
                ndim = len(feat.shape)
                columns.append(_Column((feat.name + SHAPE_SUFFIX).encode("utf-8"), feat, "shape", ndim, (ndim,)))
        # Keys are matched as little-endian 8-byte chunks, zeroed past the key's end, and found
        # with searchsorted on a hash of them: columns are kept in hash order, so a column's
        # id is its position in the sorted hashes.
        self.width = max(len(c.key) for c in columns)
        self.chunks = -(-self.width // 8)
        words = np.array([_key_words(c.key, self.chunks) for c in columns], dtype=np.uint64)
        lens = np.array([len(c.key) for c in columns], dtype=np.uint64)
        hashes = _hash(words.T, lens)
        order = np.argsort(hashes)
        self.hashes, self.words, self.lens = hashes[order], words[order], lens[order]
        self.columns = [columns[i] for i in order.tolist()]
        self.index = {c.key: i for i, c in enumerate(self.columns)}
        self.keys = tuple(c.key for c in self.columns)
        self._kinds: dict[frozenset[str] | None, bytes | None] = {}
        # Each column's entry prefix ``0a len key 12`` as (offset, mask, word) 8-byte chunks.
        self.prefixes = [_entry_prefix(c.key) for c in self.columns]
        # zero bytes after the records: headers and key chunks read a little past a record's end
        self.pad = 8 * self.chunks + 48
        self._defaults: dict[str, tuple[bool, Any]] = {}

    def scalar_kinds(self, wanted: frozenset[str] | None) -> bytes | None:
        """native.scalar_columns' kinds for extracting ``wanted`` (None: every feature), or
        None when one of them is not an int64, float32, string or bytes scalar (the NumPy walk
        takes those)."""
        if wanted not in self._kinds:
            kinds = bytearray(len(self.columns))
            for i, c in enumerate(self.columns):
                if c.kind == "shape" or (wanted is not None and c.feat.name not in wanted):
                    continue
                if c.kind not in _SCALAR_KINDS or c.count != 1 or c.shape != ():
                    self._kinds[wanted] = None
                    break
                kinds[i] = _SCALAR_KINDS[c.kind]
            else:
                self._kinds[wanted] = bytes(kinds)
        return self._kinds[wanted]

    def default(self, feat: Feature) -> tuple[bool, Any]:
        """(usable, fill value) for records without ``feat``: the generic path's own column for one."""
        if feat.name not in self._defaults:
            try:
                self._defaults[feat.name] = (True, build_column(feat, [None], None, 1)[0])
            except Exception:  # the generic path fails on such records too: let it raise its error
                self._defaults[feat.name] = (False, None)
        return self._defaults[feat.name]


def _column_of(feat: Feature) -> _Column:
    key = feat.name.encode("utf-8")
    fixed: tuple[int, ...] = () if feat.size is None else feat.shape  # type: ignore[assignment]
    if feat.tensor:
        return _Column(key, feat, "tensor", 1, fixed)
    kind = "bytes" if feat.dtype in ("string", "bytes") else feat.dtype
    return _Column(key, feat, kind, feat.size, fixed)


def _key_words(key: bytes, chunks: int) -> list[int]:
    padded = key.ljust(8 * chunks, b"\0")
    return [int.from_bytes(padded[8 * c : 8 * c + 8], "little") for c in range(chunks)]


def _entry_prefix(key: bytes) -> tuple[int, list[tuple[int, int, int]]]:
    """A key's entry prefix ``0a len key 12``: its length and its (offset, mask, word) 8-byte chunks."""
    prefix = wire.length_delimited(wire.TAG_1, key) + wire.TAG_2
    chunks = []
    for offset in range(0, len(prefix), 8):
        chunk = prefix[offset : offset + 8]
        chunks.append((offset, (1 << (8 * len(chunk))) - 1, int.from_bytes(chunk, "little")))
    return len(prefix), chunks


_HASH_MUL = np.uint64(0x9E3779B97F4A7C15)  # odd: multiplication mod 2**64 mixes without losing bits


def _hash(words: Iterable[Arr], lens: Arr) -> Arr:
    """Mix a key's chunks and length into one uint64 (wrapping arithmetic), for searchsorted."""
    h = lens.astype(np.uint64)
    for w in words:
        h = h * _HASH_MUL + w
    return h


_PLANS: weakref.WeakKeyDictionary[RowCodec, _Plan] = weakref.WeakKeyDictionary()


def _plan(codec: RowCodec) -> _Plan:
    plan = _PLANS.get(codec)
    if plan is None:
        plan = _PLANS[codec] = _Plan(codec)
    return plan


# --------------------------------------------------------------------------- the batch buffer


class _Batch:
    """The records joined into one zero-padded uint8 buffer, and which records go slow."""

    def __init__(self, records: list[bytes], pad: int) -> None:
        raw = b"".join([*records, bytes(pad)])
        lens = np.fromiter(map(len, records), dtype=np.int64, count=len(records))
        ends = np.cumsum(lens)
        self._set(raw, ends - lens, ends)
        # len() of an odd buffer (a memoryview of non-bytes items) is not its byte size
        self.ok = int(ends[-1]) + pad == len(raw)

    @classmethod
    def spans(cls, raw: bytes, starts: Arr, ends: Arr) -> _Batch:
        """The records ``raw[starts[i]:ends[i]]`` where they lie, with other bytes between
        them (a shard's framing); ``raw`` ends with the pad: zero bytes after every record."""
        batch = cls.__new__(cls)
        batch._set(raw, starts, ends)
        batch.ok = True
        return batch

    def _set(self, raw: bytes, starts: Arr, ends: Arr) -> None:
        self.n = len(starts)
        self.raw = raw
        self.buf = np.frombuffer(raw, dtype=np.uint8)
        self.starts, self.ends = starts, ends
        self.slow = np.zeros(self.n, dtype=bool)
        self.absent: dict[str, Arr] | None = None  # filled in when a caller asks (see decode_batch)
        self.ragged: Ragged | None = None  # the same
        self.wanted: frozenset[str] | None = None  # the features to extract (None: all)
        # Unaligned little-endian words starting at every byte: one gather reads 4 or 8 bytes.
        self.w32 = np.ndarray((len(self.buf) - 3,), dtype="<u4", buffer=self.buf, strides=(1,))
        self.w64 = np.ndarray((len(self.buf) - 7,), dtype="<u8", buffer=self.buf, strides=(1,))

    def keep(self, ok: Arr, rec: Arr, *arrays: Arr) -> list[Arr]:
        """Mark the records of failed items slow; return the arrays restricted to the rest."""
        if ok.all():
            return [rec, *arrays]
        self.slow[rec[~ok]] = True
        return [a[ok] for a in (rec, *arrays)]

    def rows(self, starts: Arr, width: int) -> Arr:
        """``width`` bytes from each start, as an (len(starts), width) uint8 array."""
        if width == 0 or len(starts) == 0:
            return np.zeros((len(starts), width), dtype=np.uint8)
        view = as_strided(self.buf, (len(self.buf) - width + 1, width), (1, 1), writeable=False)
        return view[starts]

    def gather(self, starts: Arr, lens: Arr) -> Arr:
        """The byte ranges ``[start, start + len)`` concatenated."""
        total = int(lens.sum())
        out_starts = np.cumsum(lens) - lens
        return self.buf[np.arange(total, dtype=np.int64) + np.repeat(starts - out_starts, lens)]


def _varint(buf: Arr, pos: Arr) -> tuple[Arr, Arr]:
    """Read a length varint at each position: (value, position after it).

    A varint over five bytes (no record is that long) reads as ``_BAD_LENGTH``, so that
    the caller's bounds check fails; the position after it stays in the buffer.
    """
    b = buf[pos]
    more = b >= 0x80
    if not more.any():
        return b.astype(np.int64), pos + 1
    val = b.astype(np.int64) & 0x7F
    nxt = pos + 1
    for shift in (7, 14, 21, 28):
        b = buf[nxt]
        val += np.where(more, (b.astype(np.int64) & 0x7F) << shift, 0)
        nxt = nxt + more
        more &= b >= 0x80
        if not more.any():
            return val, nxt
    val[more] = _BAD_LENGTH
    return val, nxt


def _field(batch: _Batch, tag: int, rec: Arr, pos: Arr, end: Arr) -> list[Arr]:
    """One length-delimited field ``tag, len, payload`` that must fill ``[pos, end)`` exactly.

    Returns (rec, payload start, end) for the items where it does.
    """
    ok = batch.buf[pos] == tag
    length, start = _varint(batch.buf, pos + 1)
    ok &= start + length == end
    return batch.keep(ok, rec, start, end)


def _rounds(batch: _Batch, rec: Arr, item: Arr, pos: Arr, end: Arr) -> Iterator[tuple[Arr, Arr, Arr, Arr]]:
    """Split each ``[pos, end)`` into consecutive tag-1 length-delimited fields.

    All items advance in lockstep, one field per round, so a round costs a few numpy
    calls whatever the number of items. Yields (rec, item, start, end) of the fields of
    each round.
    """
    live = pos < end
    rec, item, pos, end = rec[live], item[live], pos[live], end[live]
    buf = batch.buf
    while len(pos):
        ok = buf[pos] == _TAG_1
        length, start = _varint(buf, pos + 1)
        stop = start + length
        ok &= stop <= end
        rec, item, start, stop, end = batch.keep(ok, rec, item, start, stop, end)
        if len(rec):
            yield rec, item, start, stop
        live = stop < end
        if not live.all():
            rec, item, stop, end = rec[live], item[live], stop[live], end[live]
        pos = stop


def _split(batch: _Batch, rec: Arr, item: Arr, pos: Arr, end: Arr) -> tuple[Arr, Arr, Arr, Arr]:
    """All the fields of :func:`_rounds` at once, round after round."""
    out = list(_rounds(batch, rec, item, pos, end))
    if len(out) == 1:
        return out[0]
    if not out:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty
    rec, item, start, stop = (np.concatenate(part) for part in zip(*out, strict=True))
    return rec, item, start, stop


# --------------------------------------------------------------------------- records and entries

Spans = tuple[Arr, Arr, Arr]  # (rec, Feature start, Feature end) of map entries


def _entries(batch: _Batch, plan: _Plan) -> list[list[Spans]]:
    """The map entries of every record, per column.

    Records written alike have the same key in the same place: each round of entries
    is first tried against the key of its first entry, which checks a whole round with
    a few word comparisons. Entries that do not match go through the general parse.
    """
    groups: list[list[Spans]] = [[] for _ in plan.columns]
    rec = np.arange(batch.n, dtype=np.int64)
    # Example = exactly one ``features`` field spanning the record (no repeats to merge).
    rec, body, end = _field(batch, _TAG_1, rec, batch.starts, batch.ends)
    rest: list[Spans] = []
    for r, _, es, ee in _rounds(batch, rec, rec, body, end):
        i = _first_key(batch, plan, int(es[0]))
        if i >= 0:
            ok, fs = _has_prefix(batch, plan.prefixes[i], es, ee)
            if ok.all():
                groups[i].append((r, fs, ee))
                continue
            groups[i].append((r[ok], fs[ok], ee[ok]))
            r, es, ee = r[~ok], es[~ok], ee[~ok]
        rest.append((r, es, ee))
    if rest:
        _general_entries(batch, plan, rest, groups)
    return groups


def _first_key(batch: _Batch, plan: _Plan, es: int) -> int:
    """The column of the entry at ``es`` when it starts with a one-byte-length key, else -1."""
    raw = batch.raw
    if raw[es] != _TAG_1 or raw[es + 1] >= 0x80:
        return -1
    return plan.index.get(raw[es + 2 : es + 2 + raw[es + 1]], -1)


def _has_prefix(batch: _Batch, prefix: tuple[int, list[tuple[int, int, int]]], es: Arr, ee: Arr) -> tuple[Arr, Arr]:
    """Which entries are ``0a len key 12 len Feature`` for one column's key: (ok, Feature start)."""
    size, chunks = prefix
    w64 = batch.w64
    offset, mask, word = chunks[0]
    ok = (w64[es] & mask) == word
    for offset, mask, word in chunks[1:]:
        ok &= (w64[es + offset] & mask) == word
    flen, fs = _varint(batch.buf, es + size)
    return ok & (fs + flen == ee), fs


def _general_entries(batch: _Batch, plan: _Plan, spans: list[Spans], groups: list[list[Spans]]) -> None:
    """Parse entries of any layout; add them to their column's group."""
    rec, es, ee = (np.concatenate(part) for part in zip(*spans, strict=True))
    buf = batch.buf
    # entry = key field then value field, nothing else
    ok = buf[es] == _TAG_1
    klen, ks = _varint(buf, es + 1)
    ke = np.minimum(ks + klen, ee)  # clamped: an absurd length must not index outside the buffer
    ok &= (ks + klen < ee) & (buf[ke] == _TAG_2)
    flen, fs = _varint(buf, ke + 1)
    ok &= fs + flen == ee
    rec, ks, klen, fs, ee = batch.keep(ok, rec, ks, klen, fs, ee)
    cid = _lookup(batch, plan, ks, klen)
    batch.slow[rec[cid < 0]] = True  # not in the schema: the generic path raises
    for i in np.unique(cid[cid >= 0]).tolist():
        mine = cid == i
        groups[i].append((rec[mine], fs[mine], ee[mine]))


def _lookup(batch: _Batch, plan: _Plan, ks: Arr, klen: Arr) -> Arr:
    """The column id of each key ``buf[ks:ks + klen]``, -1 when none.

    The hash picks a candidate; comparing every chunk and the length makes it exact.
    """
    ulen = klen.astype(np.uint64)
    words = [batch.w64[ks] & _BYTE_MASKS[np.minimum(klen, 8)]]
    words += [batch.w64[ks + 8 * c] & _BYTE_MASKS[np.clip(klen - 8 * c, 0, 8)] for c in range(1, plan.chunks)]
    h = _hash(words, ulen)
    j = np.minimum(np.searchsorted(plan.hashes, h), len(plan.hashes) - 1)
    hit = plan.lens[j] == ulen
    for c, w in enumerate(words):
        hit &= plan.words[j, c] == w
    return np.where(hit, j, -1)


# --------------------------------------------------------------------------- numbers


def _numbers(batch: _Batch, col: _Column, rec: Arr, fs: Arr, fe: Arr) -> tuple[Arr, Values]:
    """Values of an int64, float32 or ``/shape`` column from each Feature ``[fs, fe)``."""
    rec, ps, plen = _packed(batch, _LIST_TAG[col.kind], rec, fs, fe)
    if col.kind == "float32":
        return _floats(batch, col, rec, ps, plen)
    return _ints(batch, col, rec, ps, plen)


def _packed(batch: _Batch, tag: int, rec: Arr, fs: Arr, fe: Arr) -> tuple[Arr, Arr, Arr]:
    """Features holding a numeric list with the given tag, packed: (rec, payload start, payload length)."""
    quick = _quick(batch, tag, fs, fe)
    if quick.all():
        return rec, fs + 4, fe - fs - 4
    other = ~quick
    r, ps, plen = _packed_any(batch, tag, rec[other], fs[other], fe[other])
    fs, fe = fs[quick], fe[quick]
    return np.concatenate((rec[quick], r)), np.concatenate((fs + 4, ps)), np.concatenate((fe - fs - 4, plen))


def _quick(batch: _Batch, tag: int, fs: Arr, fe: Arr) -> Arr:
    """Which Features ``[fs, fe)`` are ``tag, d-2, 0x0a, d-4, payload`` (d = fe - fs < 130).

    That is the common layout (both lengths fit one byte) of a packed list and of a
    one-value BytesList; a single 4-byte read per Feature checks it.
    """
    d = fe - fs
    return (batch.w32[fs] == d * 0x01000100 + (tag + 0x0A0000 - 0x200 - 0x4000000)) & (d <= 129)


def _packed_any(batch: _Batch, tag: int, rec: Arr, fs: Arr, fe: Arr) -> tuple[Arr, Arr, Arr]:
    """:func:`_packed` for any length encoding, and for empty lists (payload length 0)."""
    rec, ls, fe = _field(batch, tag, rec, fs, fe)
    buf = batch.buf
    empty = ls == fe
    ok = empty | (buf[ls] == _TAG_1)
    plen, ps = _varint(buf, ls + 1)
    ok &= empty | (ps + plen == fe)
    plen = np.where(empty, 0, plen)
    rec, ps, plen = batch.keep(ok, rec, ps, plen)
    return rec, ps, plen


def _floats(batch: _Batch, col: _Column, rec: Arr, ps: Arr, plen: Arr) -> tuple[Arr, Values]:
    f32 = np.dtype("<f4")
    if col.count == 1:
        rec, ps = batch.keep(plen == 4, rec, ps)
        return rec, batch.w32[ps].view(f32).astype(np.float32, copy=False).reshape((len(rec), *col.shape))
    if col.count is not None:
        rec, ps = batch.keep(plen == 4 * col.count, rec, ps)
        flat = batch.rows(ps, 4 * col.count).view(f32).astype(np.float32, copy=False)
        return rec, flat.reshape((len(rec), *col.shape))
    rec, ps, plen = batch.keep(plen % 4 == 0, rec, ps, plen)
    flat = batch.gather(ps, plen).view(f32).astype(np.float32, copy=False)
    return rec, _Joined(flat, plen // 4)


def _ints(batch: _Batch, col: _Column, rec: Arr, ps: Arr, plen: Arr) -> tuple[Arr, Values]:
    if col.count == 1 and len(plen) and plen.min() >= 1 and plen.max() <= 8:
        rec, values = _small_scalar_ints(batch, rec, ps, plen)
        return rec, values.reshape((len(rec), *col.shape))
    rec, values, counts = _varints(batch, rec, ps, plen)
    if col.count is None:
        return rec, _Joined(values, counts)
    ok = counts == col.count
    if not ok.all():
        values = values[np.repeat(ok, counts)]
        rec = batch.keep(ok, rec)[0]
    return rec, values.reshape((len(rec), *col.shape))


def _small_scalar_ints(batch: _Batch, rec: Arr, ps: Arr, plen: Arr) -> tuple[Arr, Arr]:
    """One varint of 1 to 8 bytes per payload (non-negative values below 2**56): read as a word."""
    if plen.max() == 1:
        b = batch.buf[ps]
        rec, b = batch.keep(b < 0x80, rec, b)
        return rec, b.astype(np.int64)
    w = batch.w64[ps] & _BYTE_MASKS[plen]
    # exactly one varint: the high bit set on every byte but the last
    rec, w = batch.keep((w & _HIGH_BITS) == _CONTINUED[plen], rec, w)
    return rec, _squeeze(w)


def _squeeze(w: Arr) -> Arr:
    """Varints of 1 to 8 bytes, each read as a little-endian word zeroed past its last byte,
    as int64 values: the high bits squeezed out, 7-bit groups -> 14 -> 28 -> 56."""
    w = w & 0x7F7F7F7F7F7F7F7F
    w = (w & 0x007F007F007F007F) | ((w >> 1) & 0x3F803F803F803F80)
    w = (w & 0x00003FFF00003FFF) | ((w >> 2) & 0x0FFFC0000FFFC000)
    w = (w & 0x000000000FFFFFFF) | ((w >> 4) & 0x00FFFFFFF0000000)
    return w.view(np.int64)


def _varints(batch: _Batch, rec: Arr, ps: Arr, plen: Arr) -> tuple[Arr, Arr, Arr]:
    """Decode packed int64 payloads: (rec, all values concatenated, values per payload)."""
    while True:
        data = batch.gather(ps, plen)
        bad = _bad_varint_payloads(data, plen)
        if bad is None:
            break
        rec, ps, plen = batch.keep(~bad, rec, ps, plen)
    term = data < 0x80  # the last byte of each varint
    if term.all():  # all single-byte: the common small labels and ids
        return rec, data.astype(np.int64), plen
    ends = np.flatnonzero(term)
    starts = np.empty_like(ends)
    starts[:1] = 0
    starts[1:] = ends[:-1] + 1
    lens = ends + 1 - starts
    if int(lens.max()) <= 8:  # every value below 2**56: one word read a varint, not a step a byte
        padded = np.concatenate((data, np.zeros(8, dtype=np.uint8)))
        words = np.ndarray((len(data) + 1,), dtype="<u8", buffer=padded, strides=(1,))
        values = _squeeze(words[starts] & _BYTE_MASKS[lens])
        return rec, values, np.diff(np.searchsorted(ends, np.cumsum(plen)), prepend=0)
    shift = (np.arange(len(data), dtype=np.uint64) - np.repeat(starts, lens).astype(np.uint64)) * 7
    parts = (data & 0x7F).astype(np.uint64) << shift
    values = np.bitwise_or.reduceat(parts, starts).view(np.int64)
    before = np.concatenate(([0], np.cumsum(term)))
    seg_end = np.cumsum(plen)
    return rec, values, before[seg_end] - before[seg_end - plen]


def _bad_varint_payloads(data: Arr, plen: Arr) -> Arr | None:
    """Which payloads are not a clean run of varints of at most ten bytes; None when all are."""
    if not len(data):
        return None
    seg_end = np.cumsum(plen)
    term = data < 0x80
    # A payload must end on a varint's last byte, or its tail would run into the next one.
    bad = (plen > 0) & ~term[np.maximum(seg_end - 1, 0)]
    if bad.any():
        return bad
    ends = np.flatnonzero(term)
    lens = np.diff(ends, prepend=-1)
    # Over ten bytes is corrupt; a tenth byte above 1 overflows int64. Leave both to protobuf.
    long = (lens > _MAX_VARINT) | ((lens == _MAX_VARINT) & (data[ends] > 1))
    if not long.any():
        return None
    bad = np.zeros(len(plen), dtype=bool)
    bad[np.searchsorted(seg_end, ends[long], side="right")] = True
    return bad


@dataclass
class _Joined:
    """A variable-length numeric column's values: ``flat``, in runs of ``counts``, one a record."""

    flat: Arr
    counts: Arr

    def pieces(self) -> list[Arr]:
        """The runs, as views (one array per record: a view costs 0.3 us, more than decoding)."""
        bounds = np.concatenate(([0], np.cumsum(self.counts))).tolist()
        return [self.flat[a:b] for a, b in itertools.pairwise(bounds)]


# --------------------------------------------------------------------------- bytes and tensors


def _bytes(batch: _Batch, col: _Column, rec: Arr, fs: Arr, fe: Arr) -> tuple[Arr, Values]:
    """Values of a string or bytes column: one per record for scalars, else a list per record."""
    if col.count == 1:
        rec, vs, ve = _one_bytes_value(batch, rec, fs, fe)
        return rec, _one_value_each(batch, col, rec, vs, ve).reshape((len(rec), *col.shape))
    text = col.feat.dtype == "string"
    rec, ls, fe = _field(batch, _LIST_TAG["bytes"], rec, fs, fe)
    vrec, vitem, vs, ve = _split(batch, rec, np.arange(len(rec), dtype=np.int64), ls, fe)
    counts = np.bincount(vitem, minlength=len(rec))
    if col.count is not None:
        ok = counts == col.count
        if not ok.all():
            batch.slow[rec[~ok]] = True
            rec, counts = rec[ok], counts[ok]
            vrec, vitem, vs, ve = batch.keep(ok[vitem], vrec, vitem, vs, ve)
    # the values come round by round from _split: put each record's together, in order
    order = np.argsort(vitem, kind="stable")
    values = _slices(batch, vrec[order], vs[order], ve[order], text)
    if col.count is not None:
        return rec, _object_array(values, (len(rec), *col.shape))
    bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
    return rec, [values[a:b] for a, b in itertools.pairwise(bounds)]


def _one_value_each(batch: _Batch, col: _Column, rec: Arr, vs: Arr, ve: Arr) -> Arr:
    """The values ``raw[vs:ve]`` of a string or bytes column, a record's one each."""
    text = col.feat.dtype == "string"
    column = _repeated_texts(batch, col, vs, ve) if text else None
    return _object_array(_slices(batch, rec, vs, ve, text), (len(rec),)) if column is None else column


def _repeated_texts(batch: _Batch, col: _Column, vs: Arr, ve: Arr) -> Arr | None:
    """Texts of a scalar column decoded once per distinct value; None when not worth it.

    Labels and categories repeat a lot, and decoding is the per-value Python cost. Values
    of up to 16 bytes are told apart exactly by their length and two 8-byte words.
    """
    wait = col.dedupe_wait
    if wait[0] > 0:
        wait[0] -= 1
        return None
    lens = ve - vs
    if len(lens) < 64 or lens.max() > 16:
        return None
    w0 = batch.w64[vs] & _BYTE_MASKS[np.minimum(lens, 8)]
    w1 = batch.w64[vs + 8] & _BYTE_MASKS[np.maximum(lens - 8, 0)]
    _, first, inverse = np.unique(_hash([w0, w1], lens.astype(np.uint64)), return_index=True, return_inverse=True)
    if len(first) * 4 > len(lens):  # mostly distinct: skip the next batches, then look again
        wait[0] = 16
        return None
    rep = first[inverse]
    if not ((w0[rep] == w0) & (w1[rep] == w1) & (lens[rep] == lens)).all():  # a hash collision
        return None
    raw = batch.raw
    try:
        texts = [raw[a:b].decode("utf-8") for a, b in zip(vs[first].tolist(), ve[first].tolist(), strict=True)]
    except UnicodeDecodeError:  # the per-value path finds every record with it
        return None
    return _object_array(texts, (len(texts),))[inverse]


def _object_array(values: list[Any], shape: tuple[int, ...]) -> Arr:
    flat = np.empty(len(values), dtype=object)
    flat[:] = values  # element by element: numpy must not look inside the values
    return flat.reshape(shape)


def _slices(batch: _Batch, vrec: Arr, vs: Arr, ve: Arr, text: bool) -> list[Any]:
    """The values ``raw[vs:ve]``, decoded when ``text``; invalid UTF-8 sends its record slow."""
    raw = batch.raw
    if not text:
        return native.slices(raw, vs, ve)
    decoded = native.texts(raw, vs, ve)
    if decoded is not None:
        return decoded
    spans = list(zip(vs.tolist(), ve.tolist(), strict=True))
    out: list[Any] = []
    for r, (a, b) in zip(vrec.tolist(), spans, strict=True):
        try:
            out.append(raw[a:b].decode("utf-8"))
        except UnicodeDecodeError:  # the generic path raises the exact error for this record
            batch.slow[r] = True
            out.append("")
    return out


def _one_bytes_value(batch: _Batch, rec: Arr, fs: Arr, fe: Arr) -> tuple[Arr, Arr, Arr]:
    """Features holding a BytesList of exactly one value: (rec, value start, value end)."""
    quick = _quick(batch, _LIST_TAG["bytes"], fs, fe)  # the one value is laid out like a packed list
    if quick.all():
        return rec, fs + 4, fe
    other = ~quick
    r, ls, end = _field(batch, _LIST_TAG["bytes"], rec[other], fs[other], fe[other])
    r, vs, end = _field(batch, _TAG_1, r, ls, end)
    return np.concatenate((rec[quick], r)), np.concatenate((fs[quick] + 4, vs)), np.concatenate((fe[quick], end))


def _tensor(batch: _Batch, col: _Column, rec: Arr, fs: Arr, fe: Arr) -> tuple[Arr, Values]:
    feat = col.feat
    rec, vs, ve = _one_bytes_value(batch, rec, fs, fe)
    if feat.stores_shape:  # shapes vary: checked per record against the ``/shape`` column
        return rec, _slices(batch, rec, vs, ve, False)
    nbytes = math.prod(col.shape) * feat.np_dtype.itemsize
    rec, vs = batch.keep(ve - vs == nbytes, rec, vs)
    flat = batch.rows(vs, nbytes).view(feat.np_dtype)
    return rec, flat.reshape((len(rec), *col.shape))


_EXTRACT = {"int64": _numbers, "float32": _numbers, "shape": _numbers, "bytes": _bytes, "tensor": _tensor}


# --------------------------------------------------------------------------- columns


def _column_array(batch: _Batch, plan: _Plan, col: _Column, rec: Arr, values: Values) -> Arr | None:
    """The (n, ...) output column from the records' values, defaults filled in; None when the
    values went to ``batch.ragged`` instead (every record has the feature)."""
    n = batch.n
    seen = np.bincount(rec, minlength=n)
    batch.slow |= seen > 1  # a repeated key (protobuf keeps the last one): left to the generic path
    missing = seen == 0
    feat = col.feat
    if isinstance(values, _Joined):
        if batch.ragged is not None and not feat.optional and len(rec) == n and not missing.any():  # each once
            batch.ragged[feat.name] = _record_order(rec, values.flat, values.counts)
            return None
        values = values.pieces()
    if feat.optional:  # one object per record, None where absent (as the generic path)
        out = np.empty(n, dtype=object)
        if isinstance(values, np.ndarray) and values.ndim == 1:
            out[rec] = values  # numpy scalars become Python ones, as the generic path's
        else:
            for r, v in zip(rec.tolist(), values, strict=True):
                out[r] = v
        return out
    if isinstance(values, np.ndarray):
        if _in_order(rec, n):
            out = values  # every record once, in order: the common case, no copy
        else:
            out = np.empty((n, *col.shape), dtype=feat.np_dtype)
            out[rec] = values
    else:  # variable-length values: an array or a list per record
        out = np.empty(n, dtype=object)
        for r, v in zip(rec.tolist(), values, strict=True):
            out[r] = v
    if batch.absent is not None and feat.has_default:
        batch.absent[feat.name] = missing
    if missing.any():
        usable, default = plan.default(feat) if feat.has_default or feat.is_varlen else (False, None)
        if usable:
            _fill_default(out, missing, default, feat.is_varlen)
        else:
            batch.slow |= missing
    return out


def _in_order(rec: Arr, n: int) -> bool:
    """Whether the values' records ``rec`` are every record of ``n`` once, in order."""
    return len(rec) == n and (n < 2 or bool((rec[1:] > rec[:-1]).all()))


def _record_order(rec: Arr, flat: Arr, counts: Arr) -> tuple[Arr, Arr]:
    """Runs of ``counts`` values of ``flat``, one a record of ``rec`` (every record once),
    put in record order."""
    if _in_order(rec, len(rec)):
        return flat, counts
    order = np.argsort(rec, kind="stable")
    took = counts[order]
    starts = np.cumsum(counts) - counts  # where each run lies in ``flat``
    lands = np.cumsum(took) - took  # and where it goes
    return flat[np.repeat(starts[order] - lands, took) + np.arange(int(took.sum()))], took


def _fill_default(out: Arr, missing: Arr, default: Any, varlen: bool) -> None:
    if not varlen:
        out[missing] = default
        return
    for i in np.flatnonzero(missing).tolist():  # a fresh list or array per record, as the generic path
        out[i] = default.copy() if isinstance(default, np.ndarray) else list(default)


def _shaped_tensor_array(batch: _Batch, col: _Column, rec: Arr, data: list[bytes], shape_rec: Arr, shapes: Arr) -> Arr:
    """Tensors of unknown dimensions: one array per record, shaped by its ``/shape`` feature."""
    n = batch.n
    feat = col.feat
    for r in (rec, shape_rec):
        seen = np.bincount(r, minlength=n)
        batch.slow |= (seen > 1) | ((seen == 0) & (not feat.optional))  # repeated, or missing (no default allowed)
    dtype = feat.np_dtype
    shape_of = dict(zip(shape_rec.tolist(), shapes.tolist(), strict=True))
    out = np.empty(n, dtype=object)
    for r, value in zip(rec.tolist(), data, strict=True):
        shape = shape_of.get(r)
        if shape is None or not _fits(feat, shape, len(value)):
            batch.slow[r] = True
            continue
        out[r] = np.frombuffer(bytearray(value), dtype=dtype).reshape(shape)
    return out


def _fits(feat: Feature, shape: list[int], nbytes: int) -> bool:
    if any(d < 0 or want not in (None, d) for want, d in zip(feat.shape, shape, strict=True)):
        return False
    size = 1
    for d in shape:
        size *= d
    return size * feat.np_dtype.itemsize == nbytes


# --------------------------------------------------------------------------- entry point


def decode_batch(
    codec: RowCodec,
    records: Iterable[bytes],
    absent: dict[str, Arr] | None = None,
    ragged: Ragged | None = None,
    columns: Collection[str] | None = None,
) -> dict[str, Arr]:
    """The columns of ``records`` (one array per feature), as :meth:`RowCodec.decode_batch_generic`
    returns them, with the same errors, parsed a batch at a time. ``absent``, when given,
    receives for each feature with a default which records lacked it (and read the default);
    ``ragged``, when given, receives instead of their columns (left out of the result) some
    variable-length int64 and float32 features: all their values in one array, in record
    order, and each record's count (what the statistics take: no array made a record).

    ``columns``, when given, names the features wanted: only theirs are extracted (a
    predicate's few scalars, not a 2 KiB payload beside them). The values are those of a full
    decode; a record whose other features are malformed may then decode without the error
    a full decode raises (those features are not looked at), never with other values."""
    recs = records if isinstance(records, list) else list(records)
    if not recs or not codec.features or not _bytes_like(recs):
        return _only(codec.decode_batch_generic(recs, absent=absent), columns)
    plan = _plan(codec)
    batch = _Batch(recs, plan.pad)
    if not batch.ok:
        return _only(codec.decode_batch_generic(recs, absent=absent), columns)
    batch.absent, batch.ragged = absent, ragged
    batch.wanted = None if columns is None else frozenset(columns)
    return _with_slow(codec, batch, plan, recs.__getitem__)


def _only(out: dict[str, Arr], columns: Collection[str] | None) -> dict[str, Arr]:
    """The columns named (all: None) of a decode's result."""
    return out if columns is None else {name: out[name] for name in out if name in columns}


def spans_pad(codec: RowCodec) -> int:
    """Zero bytes :func:`decode_spans` needs at the end of its buffer, after every record."""
    return _plan(codec).pad if codec.features else 0


def decode_spans(
    codec: RowCodec,
    raw: bytes,
    starts: Arr,
    lengths: Arr,
    columns: Collection[str] | None = None,
    absent: dict[str, Arr] | None = None,
    ragged: Ragged | None = None,
) -> dict[str, Arr]:
    """:func:`decode_batch` of the records ``raw[starts[i] : starts[i] + lengths[i]]``, in that
    order, parsed where they lie (a read of a shard's bytes, its framing between them: no copy
    of each record, no join). ``raw`` must end with ``spans_pad(codec)`` zero bytes, after
    every record, or the records are copied out first. ``columns``, ``absent``, ``ragged``:
    as decode_batch's."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = starts + np.asarray(lengths, dtype=np.int64)

    def record(i: int) -> bytes:
        return raw[int(starts[i]) : int(ends[i])]

    pad = spans_pad(codec)
    tail = len(raw) - pad  # reads run past a record's end: into others' bytes, or this pad
    if not len(starts) or not pad or not isinstance(raw, bytes) or int(ends.max()) > tail or raw[tail:].count(0) != pad:
        return decode_batch(codec, [record(i) for i in range(len(starts))], absent, ragged, columns)
    batch = _Batch.spans(raw, starts, ends)
    batch.absent, batch.ragged = absent, ragged
    batch.wanted = None if columns is None else frozenset(columns)
    return _with_slow(codec, batch, _plan(codec), record)


def _with_slow(codec: RowCodec, batch: _Batch, plan: _Plan, record: Callable[[int], bytes]) -> dict[str, Arr]:
    """The fast path's columns, the records it could not take decoded one by one."""
    out = _fast_columns(batch, plan)
    slow = np.flatnonzero(batch.slow).tolist()
    if slow:
        for name, (flat, counts) in (batch.ragged or {}).items():  # columns after all: the slow records go in them
            out[name] = column = np.empty(batch.n, dtype=object)
            for i, piece in enumerate(_Joined(flat, counts).pieces()):
                column[i] = piece  # one by one: numpy must not make equal-length arrays one 2-D array
        if batch.ragged is not None:
            batch.ragged.clear()
            out = {name: out[name] for name in plan.features if name in out}  # in the schema's order, as ever
        lacked: dict[str, Arr] | None = None if batch.absent is None else {}
        redone = codec.decode_batch_generic([record(i) for i in slow], slow, absent=lacked)
        for name, column in out.items():
            column[slow] = redone[name]
        for name, mask in (lacked or {}).items():
            batch.absent.setdefault(name, np.zeros(batch.n, dtype=bool))[slow] = mask  # type: ignore[union-attr]
    return out


def _scalar_columns(batch: _Batch, plan: _Plan) -> dict[str, Arr] | None:
    """The columns in one C pass (native.scalar_columns) when every feature extracted is an
    int64, float32, string or bytes scalar (a predicate's, or a table of such columns); the
    records it declines go slow whole. None where it does not apply (other features, no
    extension)."""
    kinds = plan.scalar_kinds(batch.wanted)
    if kinds is None or type(batch.raw) is not bytes:
        return None
    got = native.scalar_columns(batch.raw, batch.starts, batch.ends, plan.keys, kinds)
    if got is None:
        return None
    slow, found, values = got
    batch.slow |= slow
    extracted = [i for i, kind in enumerate(kinds) if kind]
    out: dict[str, Arr] = {}
    for i, has, raw in zip(extracted, found, values, strict=True):
        col = plan.columns[i]
        every = bool(has.all())
        rec = np.arange(batch.n, dtype=np.int64) if every else np.flatnonzero(has)
        mine = raw if every else raw[has]
        if col.kind == "bytes":  # each value's (start, end) in the buffer
            v = _one_value_each(batch, col, rec, mine[:, 0], mine[:, 1])
        else:
            v = mine.astype(np.uint32).view(np.float32) if col.kind == "float32" else mine
        column = _column_array(batch, plan, col, rec, v)
        if column is not None:
            out[col.feat.name] = column
    return {name: out[name] for name in plan.features if name in out}  # in the schema's order


def _bytes_like(records: list[Any]) -> bool:
    """Whether every record is of a type protobuf parses (others: the generic path raises)."""
    if list(map(type, records)).count(bytes) == len(records):  # the usual case, checked quickly
        return True
    return all(isinstance(r, (bytes, bytearray, memoryview)) for r in records)


def _fast_columns(batch: _Batch, plan: _Plan) -> dict[str, Arr]:
    scalars = _scalar_columns(batch, plan)
    if scalars is not None:
        return scalars
    found: dict[int, tuple[Arr, Values]] = {}  # by column
    wanted = batch.wanted
    for i, (col, spans) in enumerate(zip(plan.columns, _entries(batch, plan), strict=True)):
        if wanted is not None and col.feat.name not in wanted:
            continue  # not extracted: its values are the costly part (a bytes object a record)
        if len(spans) == 1:
            rec, fs, fe = spans[0]
        elif spans:
            rec, fs, fe = (np.concatenate(part) for part in zip(*spans, strict=True))
        else:
            rec = fs = fe = np.zeros(0, dtype=np.int64)
        found[i] = _EXTRACT[col.kind](batch, col, rec, fs, fe)
    out: dict[str, Arr] = {}
    for name, feat in plan.features.items():
        if wanted is not None and name not in wanted:
            continue
        i = plan.index[name.encode("utf-8")]
        col = plan.columns[i]
        r, values = found[i]
        if feat.stores_shape:
            shapes = found[plan.index[(name + SHAPE_SUFFIX).encode("utf-8")]]
            out[name] = _shaped_tensor_array(batch, col, r, values, *shapes)
        else:
            column = _column_array(batch, plan, col, r, values)
            if column is not None:
                out[name] = column
    return out
