"""tf.train.Example / SequenceExample codec without TensorFlow.

Encoding writes protobuf wire bytes directly (several times faster than building
message objects); decoding parses with the protobuf runtime (upb) from a private pool.
The wire layout (see ``proto.py``): Example.features = 1; Features.feature = map (entry
key = 1, value = 2); Feature oneof bytes_list = 1 | float_list = 2 | int64_list = 3;
each list's ``value = 1`` (float and int64 packed).

The same layout lets a feature be added, dropped or renamed by splicing map entries, with
no parse (see "splicing"); a migration's byte-level steps are built from those helpers.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from catalog.errors import CodecError
from catalog.tfrecord import proto

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
FLOAT32_MAX = float(np.finfo(np.float32).max)


def rounds_to_inf(dtype: Any) -> float:
    """The smallest magnitude a float dtype rounds to infinity: halfway from its largest value
    to the next power of two. Anything smaller is stored as its nearest value."""
    top = np.finfo(dtype).max
    step = top - np.nextafter(top, top.dtype.type(0))  # the spacing just below the top, as above it
    return float(top) + float(step) / 2


FLOAT32_OVERFLOW = rounds_to_inf(np.float32)

# Field tags (field_number << 3 | wire type 2).
TAG_1 = b"\x0a"  # bytes_list / Example.features / map key / list value
TAG_2 = b"\x12"  # float_list / map value / SequenceExample.feature_lists
TAG_3 = b"\x1a"  # int64_list

_SMALL_VARINTS = [bytes([i]) for i in range(128)]

BYTES, FLOAT, INT64 = "bytes_list", "float_list", "int64_list"


def varint(value: int) -> bytes:
    """Protobuf base-128 varint; negative int64 values take ten bytes, as protobuf does."""
    if 0 <= value < 128:
        return _SMALL_VARINTS[value]
    if 0 < value < 16384:  # two and three bytes (lengths, most ids) without the loop
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if 0 < value < 2097152:
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def length_delimited(tag: bytes, payload: bytes) -> bytes:
    n = len(payload)
    return tag + (_SMALL_VARINTS[n] if n < 128 else varint(n)) + payload


# --------------------------------------------------------------------------- features


def bytes_feature(values: Sequence[bytes]) -> bytes:
    """A serialized ``Feature`` holding a BytesList."""
    body = b"".join([length_delimited(TAG_1, v) for v in values])
    return length_delimited(TAG_1, body)


def float_feature(values: Sequence[float]) -> bytes:
    """A serialized ``Feature`` holding a packed FloatList (values must fit float32)."""
    if not values:
        return b"\x12\x00"
    packed = struct.pack(f"<{len(values)}f", *values)
    return length_delimited(TAG_2, length_delimited(TAG_1, packed))


def float_feature_from_array(array: np.ndarray) -> bytes:
    if array.size == 0:
        return b"\x12\x00"
    packed = np.ascontiguousarray(array, dtype="<f4").tobytes()
    return length_delimited(TAG_2, length_delimited(TAG_1, packed))


def int64_feature(values: Sequence[int]) -> bytes:
    """A serialized ``Feature`` holding a packed Int64List."""
    if not values:
        return b"\x1a\x00"
    packed = b"".join([varint(v) for v in values])
    return length_delimited(TAG_3, length_delimited(TAG_1, packed))


def map_entry(key: bytes, value: bytes) -> bytes:
    """One map entry (key = 1, value = 2) as it appears inside Features/FeatureLists."""
    return length_delimited(TAG_1, length_delimited(TAG_1, key) + length_delimited(TAG_2, value))


def features_field(body: bytes) -> bytes:
    """The field ``features`` (1) around serialized map entries: an Example by itself, and
    after another Example more features of it (protobuf merges a message field given twice)."""
    n = len(body)
    if n < 16384:  # the tag and a one- or two-byte length in one go: every row encode ends here
        return bytes((0x0A, n) if n < 128 else (0x0A, (n & 0x7F) | 0x80, n >> 7)) + body
    return TAG_1 + varint(n) + body


def example_from_entries(entries: Iterable[bytes]) -> bytes:
    """A serialized Example from already-serialized Features map entries."""
    return features_field(b"".join(entries))


# --------------------------------------------------------------------------- values


def _check_int(name: str, v: int) -> int:
    if not INT64_MIN <= v <= INT64_MAX:
        raise CodecError(f"integer {v} is out of int64 range", name)
    return v


def _check_float(name: str, v: float) -> float:
    if abs(v) > FLOAT32_MAX and not math.isinf(v):
        raise CodecError(f"float {v!r} is out of float32 range", name)
    return v


def _kind_of(name: str, v: Any) -> str:
    if isinstance(v, (bool, int, np.integer, np.bool_)):
        return INT64
    if isinstance(v, (float, np.floating)):
        return FLOAT
    if isinstance(v, (bytes, str, bytearray, memoryview, np.bytes_, np.str_)):
        return BYTES
    raise CodecError(f"unsupported value type {type(v).__name__}", name)


def _utf8(name: str | None, text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:  # lone surrogates
        raise CodecError(f"string is not encodable as UTF-8 ({e.reason})", name) from e


def _name_bytes(name: Any) -> bytes:
    if not isinstance(name, str):
        raise CodecError(f"feature names must be str, not {type(name).__name__}")
    return _utf8(name, name)


def _as_bytes(name: str, v: Any) -> bytes:
    if isinstance(v, str):
        return _utf8(name, v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v)
    raise CodecError(f"expected bytes or str, got {type(v).__name__}", name)


def _list_kind(name: str, values: Sequence[Any]) -> str | None:
    kinds = {_kind_of(name, v) for v in values}
    if not kinds:
        return None
    if kinds == {INT64, FLOAT}:
        return FLOAT  # ints in a float list are promoted, as numpy would
    if len(kinds) > 1:
        raise CodecError("list mixes numbers with bytes/str", name)
    return kinds.pop()


def _array_feature(name: str, array: np.ndarray) -> bytes:
    kind = array.dtype.kind
    flat = array.reshape(-1)
    if kind == "f":
        # float16/float32 always fit (comparing them to FLOAT32_MAX would overflow-warn)
        if flat.dtype.itemsize > 4 and flat.size and np.any(np.abs(flat[np.isfinite(flat)]) > FLOAT32_MAX):
            raise CodecError("array holds values out of float32 range", name)
        return float_feature_from_array(flat)
    if kind in "iub":
        if kind == "u" and flat.size and int(flat.max()) > INT64_MAX:
            raise CodecError("array holds values out of int64 range", name)
        return int64_feature(flat.astype(np.int64).tolist())
    if kind in "SUO":
        return bytes_feature([_as_bytes(name, v) for v in flat.tolist()])
    raise CodecError(f"unsupported array dtype {array.dtype}", name)


def encode_feature(name: str, value: Any) -> bytes:
    """Serialize one feature value (scalar, list or numpy array) to a ``Feature`` message."""
    # Fast paths for the plain Python values most rows hold, each with the same checks as the
    # general path below (exact types: a bool, a subclass, a NaN or infinity take that path).
    kind = type(value)
    if kind is int:
        if INT64_MIN <= value <= INT64_MAX:
            return int64_feature((value,))
    elif kind is float:
        if -FLOAT32_MAX <= value <= FLOAT32_MAX:
            return float_feature((value,))
    elif kind is bytes:
        return bytes_feature((value,))
    elif kind is str:
        if value.isascii():
            return bytes_feature((value.encode("ascii"),))
    elif kind is list and value:
        fast = _plain_list(value)
        if fast is not None:
            return fast
    return _encode_feature_checked(name, value)


def _plain_list(values: list[Any]) -> bytes | None:
    """A list of plain floats or plain ints in range, encoded; None for any other list."""
    first = type(values[0])
    if first is float and all(type(v) is float for v in values):
        if min(values) >= -FLOAT32_MAX and max(values) <= FLOAT32_MAX:
            return float_feature(values)
    elif first is int and all(type(v) is int for v in values) and min(values) >= INT64_MIN:
        return int64_feature(values) if max(values) <= INT64_MAX else None
    return None


def _encode_feature_checked(name: str, value: Any) -> bytes:
    if isinstance(value, np.ndarray):
        return _array_feature(name, value)
    if isinstance(value, (list, tuple)):
        values: Sequence[Any] = value
    else:
        values = [value]
    kind = _list_kind(name, values)
    if kind is None:
        return b""  # an empty Feature: no kind set, zero values
    if kind == INT64:
        return int64_feature([_check_int(name, int(v)) for v in values])
    if kind == FLOAT:
        try:
            floats = [_check_float(name, float(v)) for v in values]
        except OverflowError as e:  # an int promoted to float that no float can hold
            raise CodecError(f"value out of float32 range ({e})", name) from e
        return float_feature(floats)
    return bytes_feature([_as_bytes(name, v) for v in values])


_KEYS: dict[str, bytes] = {}  # feature names seen, encoded: rows repeat the same few
_MAX_KEYS = 4096


def _key(name: Any) -> bytes:
    key = _KEYS.get(name) if type(name) is str else None
    if key is None:
        key = _name_bytes(name)
        if type(name) is str and len(_KEYS) < _MAX_KEYS:
            _KEYS[name] = key
    return key


def _entries(features: Mapping[str, Any]) -> bytes:
    return b"".join([map_entry(_key(name), encode_feature(name, value)) for name, value in features.items()])


def encode_example(features: Mapping[str, Any]) -> bytes:
    """Serialize a mapping of feature name -> value(s) to a tf.train.Example.

    >>> data = encode_example({"label": 3, "score": [0.5, 1.5], "text": "hi"})
    >>> decode_example(data)
    {'label': [3], 'score': [0.5, 1.5], 'text': [b'hi']}
    """
    return features_field(_entries(features))


def encode_sequence_example(context: Mapping[str, Any], feature_lists: Mapping[str, Sequence[Any]]) -> bytes:
    """Serialize a tf.train.SequenceExample: context features plus per-step feature lists."""
    lists = []
    for name, steps in feature_lists.items():
        key = _name_bytes(name)
        if not isinstance(steps, (list, tuple, np.ndarray)) or (isinstance(steps, np.ndarray) and steps.ndim == 0):
            raise CodecError(f"a feature list must be a list of steps, not {type(steps).__name__}", name)
        body = b"".join([length_delimited(TAG_1, encode_feature(name, step)) for step in steps])
        lists.append(map_entry(key, body))
    return features_field(_entries(context)) + length_delimited(TAG_2, b"".join(lists))


# --------------------------------------------------------------------------- which message

EXAMPLE, SEQUENCE_EXAMPLE = "tf.train.Example", "tf.train.SequenceExample"
_WIRE_TYPES = {0: "varint", 1: "fixed64", 2: "length-delimited", 5: "fixed32"}


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it; CodecError when it is cut off by the
    end of ``data`` or runs over ten bytes."""
    try:
        b = data[pos]
    except IndexError:
        raise CodecError(f"not a protobuf message: truncated varint at byte {pos}") from None
    if b < 0x80:  # one byte: most tags and lengths
        return b, pos + 1
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise CodecError(f"not a protobuf message: truncated varint at byte {pos}")
        b = data[pos]
        value |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            return value, pos
        shift += 7


def top_level_fields(data: bytes) -> list[tuple[int, int, int, int]]:
    """(field number, wire type, start, end) of each top-level field of a protobuf message."""
    out = []
    pos, n = 0, len(data)
    while pos < n:
        start = pos
        tag, pos = read_varint(data, pos)
        number, wtype = tag >> 3, tag & 7
        if wtype == 0:
            _, pos = read_varint(data, pos)
        elif wtype in (1, 5):
            pos += 8 if wtype == 1 else 4
        elif wtype == 2:
            length, pos = read_varint(data, pos)
            pos += length
        else:
            raise CodecError(f"not a protobuf message this reads: wire type {wtype} at byte {start}")
        if pos > n:
            raise CodecError(f"not a protobuf message: the field at byte {start} runs past the end")
        out.append((number, wtype, start, pos))
    return out


def message_kind(data: bytes) -> str:
    """EXAMPLE or SEQUENCE_EXAMPLE by the top-level fields (Example: field 1 = features only;
    SequenceExample: 1 = context, 2 = feature_lists); CodecError for any other message."""
    kind = EXAMPLE
    for number, wtype, start, _end in top_level_fields(data):
        if wtype != 2 or number not in (1, 2):
            raise CodecError(
                f"not a tf.train.Example: its top-level field {number} at byte {start} is {_WIRE_TYPES.get(wtype)}; "
                "an Example holds only field 1 (features, length-delimited)"
            )
        if number == 2:
            kind = SEQUENCE_EXAMPLE
    return kind


_HEAD_BYTES = 6  # a tag, and up to 5 bytes of the features field's length


def plain_examples(buf: Any, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Whether each record ``buf[starts[i] : starts[i] + lengths[i]]`` is an Example as writers
    make it, one features field spanning the record, told for all at once from their first
    bytes (what lies past a record's end in ``buf`` is never taken for it)."""
    data = np.frombuffer(buf, dtype=np.uint8)
    lens = np.asarray(lengths, dtype=np.int64)
    if not len(lens) or not data.size:
        return np.zeros(len(lens), dtype=bool)
    head_lens = np.minimum(lens, _HEAD_BYTES)
    at = np.minimum(np.asarray(starts, dtype=np.int64)[:, None] + np.arange(_HEAD_BYTES), data.size - 1)
    heads = data[at].astype(np.int64)
    body = heads[:, 1:]  # the length's varint, and more
    more = (body & 0x80) != 0
    size = np.argmin(more, axis=1) + 1  # bytes of the varint (the first without the high bit)
    value = (((body & 0x7F) << (7 * np.arange(5))) * (np.arange(5) < size[:, None])).sum(axis=1)
    # field 1 (tag 0a), its length's varint ended within the record's head, and it spans the record
    return (heads[:, 0] == 0x0A) & ~more.all(axis=1) & (1 + size <= head_lens) & (1 + size + value == lens)


def first_sequence(plain: np.ndarray, record: Any) -> int | None:
    """The index of the first SequenceExample among records whose ``plain_examples`` is
    ``plain`` (``record(i)``: the i-th one's bytes); None when there is none. A record that
    is no Example at all is left to decoding, which says so."""
    for i in np.flatnonzero(~plain).tolist():
        try:
            kind = message_kind(record(i))
        except CodecError:
            continue
        if kind == SEQUENCE_EXAMPLE:
            return int(i)
    return None


def beyond_features(data: bytes) -> bytes:
    """The top-level fields of a record other than ``features`` (a SequenceExample's
    feature_lists), as they are: what a rewrite of the features must carry along."""
    if data[:1] == TAG_1:  # the usual layout, one features field spanning the record: nothing else
        n, pos = read_varint(data, 1)
        if pos + n == len(data):
            return b""
    return b"".join(data[a:b] for number, _w, a, b in top_level_fields(data) if number != 1)


# --------------------------------------------------------------------------- splicing
# An Example as every serializer writes it is one ``features`` field whose body is a run of
# map entries ``0a len (0a klen key) (12 vlen Feature)``: adding, dropping or renaming a
# feature is adding, dropping or rewriting entries, without parsing the values.


def features_body(record: bytes) -> bytes | None:
    """The map entries of an Example that is one ``features`` field spanning the record (as
    every serializer writes it); None for any other layout."""
    if not record:
        return b""
    if record[0] != 0x0A:
        return None
    try:
        n, start = read_varint(record, 1)
    except CodecError:
        return None
    return record[start:] if start + n == len(record) else None


def split_entries(record: bytes) -> list[tuple[bytes, bytes]] | None:
    """(key, whole map entry) of each entry of an Example, in order; None for a layout this
    does not take (not :func:`features_body`'s, or an entry that does not start with its key),
    which only protobuf's parse reads right."""
    body = features_body(record)
    if body is None:
        return None
    out = []
    pos, end = 0, len(body)
    try:
        while pos < end:
            n, p = read_varint(body, pos + 1)
            stop = p + n
            # the entry's tag, then its key's, inside the entry (an empty entry has no key)
            if body[pos] != 0x0A or not p < stop <= end or body[p] != 0x0A:
                return None
            kn, kp = read_varint(body, p + 1)
            if kp + kn > stop:
                return None
            out.append((body[kp : kp + kn], body[pos:stop]))
            pos = stop
    except CodecError:
        return None
    return out


def append_entries(record: bytes, entries: bytes) -> bytes:
    """An Example with serialized map entries added after its own."""
    body = features_body(record)
    if body is None:  # an unusual layout: a second features field merges into the first
        return record + features_field(entries)
    return features_field(body + entries)


def rekey_entry(entry: bytes, key: bytes) -> bytes:
    """A map entry (as :func:`split_entries` gives it) under another key, its value unchanged."""
    _n, p = read_varint(entry, 1)
    kn, kp = read_varint(entry, p + 1)
    return length_delimited(TAG_1, length_delimited(TAG_1, key) + entry[kp + kn :])


# --------------------------------------------------------------------------- decoding


def _parse(cls: Any, data: bytes, what: str) -> Any:
    try:
        return cls.FromString(bytes(data))
    except (DecodeError, RuntimeError, ValueError) as e:
        raise CodecError(f"not a valid serialized {what}: {e}") from e


def feature_values(feature: Any) -> list[Any]:
    kind = feature.WhichOneof("kind")
    if kind is None:
        return []
    return list(getattr(feature, kind).value)


def parse_example(data: bytes) -> Any:
    """The protobuf ``Example`` message (private pool) for serialized bytes."""
    return _parse(proto.Example, data, "tf.train.Example")


def decode_example(data: bytes) -> dict[str, list[Any]]:
    """Decode a serialized Example to ``{name: [values]}`` (bytes, float or int lists), by
    name: an Example's features are a protobuf map, whose iteration order is the parser's
    hash order. Text comes back as bytes: an Example does not say which bytes are text (a
    schema does).

    >>> decode_example(encode_example({"text": "hi", "id": 7}))
    {'id': [7], 'text': [b'hi']}
    """
    feature = parse_example(data).features.feature
    return {name: feature_values(feature[name]) for name in sorted(feature)}


def decode_sequence_example(data: bytes) -> tuple[dict[str, list[Any]], dict[str, list[list[Any]]]]:
    """Decode a serialized SequenceExample to ``(context, feature_lists)``, each by name."""
    seq = _parse(proto.SequenceExample, data, "tf.train.SequenceExample")
    context = {name: feature_values(seq.context.feature[name]) for name in sorted(seq.context.feature)}
    named = seq.feature_lists.feature_list  # by name, as decode_example's
    lists = {name: [feature_values(f) for f in named[name].feature] for name in sorted(named)}
    return context, lists
