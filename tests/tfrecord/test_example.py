"""tf.train.Example / SequenceExample codec: wire bytes, round trips and encode errors."""

from __future__ import annotations

import math
import struct
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.errors import CatalogError, CodecError
from catalog.tfrecord import (
    decode_example,
    decode_sequence_example,
    encode_example,
    encode_sequence_example,
    proto,
)
from catalog.tfrecord.example import (
    EXAMPLE,
    SEQUENCE_EXAMPLE,
    append_entries,
    features_body,
    first_sequence,
    map_entry,
    message_kind,
    parse_example,
    plain_examples,
    rekey_entry,
    split_entries,
    varint,
)

F32_MAX = float(np.finfo(np.float32).max)


def f32(x: float) -> float:
    """x rounded to float32, as the wire stores it."""
    return float(struct.unpack("<f", struct.pack("<f", x))[0])


# --------------------------------------------------------------------------- wire bytes


def test_single_int_feature_wire_bytes() -> None:
    # Example{features{feature{key: "a" value{int64_list{value: [1]}}}}}, assembled by hand:
    int64_list = b"\x0a\x01\x01"  # value (field 1, packed): length 1, varint 1
    feature = b"\x1a\x03" + int64_list  # Feature.int64_list = field 3
    entry = b"\x0a\x01a" + b"\x12\x05" + feature  # map entry: key = 1, value = 2
    features = b"\x0a\x0a" + entry  # Features.feature = field 1
    example = b"\x0a\x0c" + features  # Example.features = field 1
    assert encode_example({"a": 1}) == example


def test_float_and_bytes_feature_wire_bytes() -> None:
    float_list = b"\x0a\x04" + struct.pack("<f", 0.5)  # FloatList.value = 1, packed, 4 bytes
    feature = b"\x12\x06" + float_list  # Feature.float_list = field 2
    entry = b"\x0a\x01f\x12\x08" + feature
    assert encode_example({"f": 0.5}) == b"\x0a\x0f\x0a\x0d" + entry
    bytes_list = b"\x0a\x02hi"  # BytesList.value = 1 (not packed)
    feature = b"\x0a\x04" + bytes_list  # Feature.bytes_list = field 1
    entry = b"\x0a\x01b\x12\x06" + feature
    assert encode_example({"b": b"hi"}) == b"\x0a\x0d\x0a\x0b" + entry


def test_varint_encoding() -> None:
    assert varint(0) == b"\x00"
    assert varint(1) == b"\x01"
    assert varint(127) == b"\x7f"
    assert varint(128) == b"\x80\x01"
    assert varint(300) == b"\xac\x02"
    assert varint(2**63 - 1) == b"\xff" * 8 + b"\x7f"
    assert varint(-1) == b"\xff" * 9 + b"\x01"  # negative int64: ten bytes, two's complement
    assert varint(-(2**63)) == b"\x80" * 9 + b"\x01"


def test_encoding_agrees_with_the_protobuf_runtime() -> None:
    ex = proto.Example()
    ex.features.feature["ints"].int64_list.value.extend([0, -1, 2**62, -(2**63)])
    ex.features.feature["floats"].float_list.value.extend([0.25, -3.5])
    ex.features.feature["bytes"].bytes_list.value.extend([b"", b"\x00\xff"])
    ours = parse_example(
        encode_example({"ints": [0, -1, 2**62, -(2**63)], "floats": [0.25, -3.5], "bytes": [b"", b"\x00\xff"]})
    )
    assert ours == ex
    assert ours.features.feature["ints"].WhichOneof("kind") == "int64_list"
    assert ours.features.feature["floats"].WhichOneof("kind") == "float_list"
    assert ours.features.feature["bytes"].WhichOneof("kind") == "bytes_list"


def test_private_pool_classes() -> None:
    assert proto.Example.DESCRIPTOR.full_name == "tensorflow.Example"
    assert proto.SequenceExample.DESCRIPTOR.full_name == "tensorflow.SequenceExample"
    from google.protobuf import descriptor_pool

    default = descriptor_pool.Default()
    assert proto.Example.DESCRIPTOR.file.pool is not default


# --------------------------------------------------------------------------- round trips


def test_scalar_and_list_round_trip() -> None:
    features: dict[str, Any] = {
        "int": 7,
        "neg": -5,
        "max": 2**63 - 1,
        "min": -(2**63),
        "float": 0.5,
        "inexact": 0.1,
        "true": True,
        "false": False,
        "bytes": b"\x00\xff",
        "str": "héllo ☃",
        "ints": [1, 2, 3],
        "floats": [0.25, -1.5, 1e-3],
        "bytes_list": [b"a", b""],
        "strs": ["x", "ÿ"],
        "promoted": [1, 2.5, True],
        "tuple": (4, 5),
        "empty": [],
        "inf": [math.inf, -math.inf],
        "bytearray": bytearray(b"ba"),
        "memoryview": memoryview(b"mv"),
    }
    assert decode_example(encode_example(features)) == {
        "int": [7],
        "neg": [-5],
        "max": [2**63 - 1],
        "min": [-(2**63)],
        "float": [0.5],
        "inexact": [f32(0.1)],
        "true": [1],
        "false": [0],
        "bytes": [b"\x00\xff"],
        "str": ["héllo ☃".encode()],
        "ints": [1, 2, 3],
        "floats": [0.25, -1.5, f32(1e-3)],
        "bytes_list": [b"a", b""],
        "strs": [b"x", "ÿ".encode()],
        "promoted": [1.0, 2.5, 1.0],
        "tuple": [4, 5],
        "empty": [],
        "inf": [math.inf, -math.inf],
        "bytearray": [b"ba"],
        "memoryview": [b"mv"],
    }


def test_nan_round_trip() -> None:
    (value,) = decode_example(encode_example({"nan": math.nan}))["nan"]
    assert math.isnan(value)


def test_float32_extremes_round_trip() -> None:
    tiny = float(np.finfo(np.float32).smallest_subnormal)
    decoded = decode_example(encode_example({"f": [F32_MAX, -F32_MAX, tiny]}))
    assert decoded == {"f": [F32_MAX, -F32_MAX, tiny]}


def test_numpy_round_trip() -> None:
    features = {
        "i32": np.arange(6, dtype=np.int32).reshape(2, 3),
        "u8": np.array([0, 255], dtype=np.uint8),
        "u64": np.array([2**63 - 1], dtype=np.uint64),
        "i64": np.array([-(2**63), 2**63 - 1], dtype=np.int64),
        "f32": np.array([0.5, -2.25], dtype=np.float32),
        "f64": np.array([[0.1, 3.0]], dtype=np.float64),
        "f16": np.array([1.5], dtype=np.float16),
        "bool": np.array([True, False, True]),
        "bytes": np.array([b"a", b"bc"]),
        "str": np.array(["a", "é"]),
        "obj": np.array([b"x", "y"], dtype=object),
        "empty": np.array([], dtype=np.float64),
        "zero_d": np.array(9),
        "np_int": np.int16(-3),
        "np_float": np.float32(1.25),
        "np_bool": np.bool_(True),
        "np_bytes": np.bytes_(b"nb"),
        "np_str": np.str_("ns"),
        "np_list": [np.int64(1), np.int8(2)],
    }
    assert decode_example(encode_example(features)) == {
        "i32": [0, 1, 2, 3, 4, 5],
        "u8": [0, 255],
        "u64": [2**63 - 1],
        "i64": [-(2**63), 2**63 - 1],
        "f32": [0.5, -2.25],
        "f64": [f32(0.1), 3.0],
        "f16": [1.5],
        "bool": [1, 0, 1],
        "bytes": [b"a", b"bc"],
        "str": [b"a", "é".encode()],
        "obj": [b"x", b"y"],
        "empty": [],
        "zero_d": [9],
        "np_int": [-3],
        "np_float": [1.25],
        "np_bool": [1],
        "np_bytes": [b"nb"],
        "np_str": [b"ns"],
        "np_list": [1, 2],
    }


def test_small_float_arrays_encode_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. "overflow encountered in cast" for float16
        data = encode_example({"h": np.array([1.5, np.inf, -65504.0], dtype=np.float16), "s": np.float32([3e38])})
    assert decode_example(data) == {"h": [1.5, math.inf, -65504.0], "s": [f32(3e38)]}


_names = st.text(min_size=0, max_size=12)
_int_values = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=8)
_float_values = st.lists(st.floats(width=32, allow_nan=False), max_size=8)
_bytes_values = st.lists(st.binary(max_size=20), max_size=8)
_values = st.one_of(_int_values, _float_values, _bytes_values)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_names, _values, max_size=8))
def test_hypothesis_example_round_trip(features: dict[str, list[Any]]) -> None:
    data = encode_example(features)
    assert decode_example(data) == features
    assert decode_example(bytearray(data)) == features
    assert decode_example(memoryview(data)) == features


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        _names,
        st.one_of(
            st.integers(-(2**63), 2**63 - 1),
            st.floats(width=32, allow_nan=False),
            st.binary(max_size=10),
            st.text(max_size=10),
            st.booleans(),
        ),
    )
)
def test_hypothesis_scalar_round_trip(features: dict[str, Any]) -> None:
    decoded = decode_example(encode_example(features))
    assert decoded.keys() == features.keys()
    for name, value in features.items():
        want = value.encode() if isinstance(value, str) else int(value) if isinstance(value, bool) else value
        assert decoded[name] == [want]
        assert type(decoded[name][0]) is type(want)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(allow_nan=False, min_value=-F32_MAX, max_value=F32_MAX), max_size=6))
def test_float64_values_are_rounded_to_float32(values: list[float]) -> None:
    assert decode_example(encode_example({"x": values})) == {"x": [f32(v) for v in values]}
    array = np.array(values, dtype=np.float64)
    assert decode_example(encode_example({"x": array})) == {"x": array.astype(np.float32).tolist()}


def test_sequence_example_round_trip() -> None:
    context = {"id": 3, "name": "seq", "weights": [0.5, 0.25]}
    lists = {
        "tokens": [[1, 2], [3], []],
        "scores": [[0.5], [0.25, 1.0]],
        "words": [[b"a"], ["b", "c"]],
        "arrays": [np.array([1, 2]), np.array([3])],
        "scalars": [1, 2, 3],
        "none": [],
    }
    got_context, got_lists = decode_sequence_example(encode_sequence_example(context, lists))
    assert got_context == {"id": [3], "name": [b"seq"], "weights": [0.5, 0.25]}
    assert got_lists == {
        "tokens": [[1, 2], [3], []],
        "scores": [[0.5], [0.25, 1.0]],
        "words": [[b"a"], [b"b", b"c"]],
        "arrays": [[1, 2], [3]],
        "scalars": [[1], [2], [3]],
        "none": [],
    }


def test_sequence_example_agrees_with_protobuf_runtime() -> None:
    seq = proto.SequenceExample()
    seq.context.feature["c"].int64_list.value.append(5)
    fl = seq.feature_lists.feature_list["steps"]
    fl.feature.add().float_list.value.extend([1.5, 2.5])
    fl.feature.add().float_list.value.extend([3.5])
    ours = proto.SequenceExample.FromString(encode_sequence_example({"c": 5}, {"steps": [[1.5, 2.5], [3.5]]}))
    assert ours == seq


def test_empty_messages() -> None:
    assert decode_example(b"") == {}
    assert decode_example(encode_example({})) == {}
    assert decode_sequence_example(encode_sequence_example({}, {})) == ({}, {})
    assert decode_sequence_example(b"") == ({}, {})


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(_names, _values, max_size=4),
    st.dictionaries(_names, st.lists(_values, max_size=4), max_size=4),
)
def test_hypothesis_sequence_example_round_trip(context: dict[str, Any], lists: dict[str, Any]) -> None:
    assert decode_sequence_example(encode_sequence_example(context, lists)) == (context, lists)


# --------------------------------------------------------------------------- errors

BAD_VALUES: list[tuple[str, Any, str]] = [
    ("int64 overflow", 2**63, "int64"),
    ("int64 underflow", -(2**63) - 1, "int64"),
    ("overflow in list", [1, 2**64], "int64"),
    ("uint64 array", np.array([2**63], dtype=np.uint64), "int64"),
    ("uint64 scalar", np.uint64(2**64 - 1), "int64"),
    ("float beyond float32", 3.5e38, "float32"),
    ("negative float beyond float32", -1e39, "float32"),
    ("float64 max", 1.7976931348623157e308, "float32"),
    ("float array beyond float32", np.array([1.0, 1e39]), "float32"),
    ("longdouble array beyond float32", np.array([-1e39], dtype=np.longdouble), "float32"),
    ("float in list beyond float32", [0.5, 1e300], "float32"),
    ("huge int promoted to float", [0.5, 2**1024], "float32"),
    ("mixed numbers and bytes", [1, b"x"], "mix"),
    ("mixed str and numbers", ["a", 2.0], "mix"),
    ("dict", {"a": 1}, "dict"),
    ("object", object(), "object"),
    ("None", None, "NoneType"),
    ("None in list", [1, None], "NoneType"),
    ("nested list", [[1, 2]], "list"),
    ("set", {1, 2}, "set"),
    ("complex", 1j, "complex"),
    ("complex array", np.array([1j]), "complex"),
    ("datetime array", np.array(["2020-01-01"], dtype="datetime64[D]"), "datetime64"),
    ("object array of ints", np.array([1, 2], dtype=object), "int"),
    ("lone surrogate", "\ud800", "UTF-8"),
    ("lone surrogate in array", np.array(["ok", "\udfff"]), "UTF-8"),
]


@pytest.mark.parametrize(("value", "words"), [(v, w) for _, v, w in BAD_VALUES], ids=[i for i, _, _ in BAD_VALUES])
def test_bad_values_raise_codec_error_naming_the_feature(value: Any, words: str) -> None:
    with pytest.raises(CodecError) as info:
        encode_example({"ok": 1, "the_feature": value})
    assert info.value.feature == "the_feature"
    assert "'the_feature'" in str(info.value)
    assert words in str(info.value)
    assert isinstance(info.value, CatalogError)
    # the same value inside a SequenceExample, as context or as a step
    with pytest.raises(CodecError) as info:
        encode_sequence_example({"the_feature": value}, {})
    assert info.value.feature == "the_feature"
    with pytest.raises(CodecError) as info:
        encode_sequence_example({}, {"the_feature": [[1], value]})
    assert info.value.feature == "the_feature"


def test_int64_bounds_are_exact() -> None:
    assert decode_example(encode_example({"x": [2**63 - 1, -(2**63)]})) == {"x": [2**63 - 1, -(2**63)]}
    for bad in (2**63, -(2**63) - 1):
        with pytest.raises(CodecError):
            encode_example({"x": bad})


def test_float32_bound_is_exact() -> None:
    assert decode_example(encode_example({"x": F32_MAX})) == {"x": [F32_MAX]}
    with pytest.raises(CodecError):
        encode_example({"x": math.nextafter(F32_MAX, math.inf)})


@pytest.mark.parametrize("name", [1, b"bytes", None, ("t",)])
def test_feature_names_must_be_str(name: Any) -> None:
    with pytest.raises(CodecError, match="names must be str"):
        encode_example({name: 1})
    with pytest.raises(CodecError, match="names must be str"):
        encode_sequence_example({name: 1}, {})
    with pytest.raises(CodecError, match="names must be str"):
        encode_sequence_example({}, {name: [[1]]})


def test_unencodable_feature_name() -> None:
    with pytest.raises(CodecError):
        encode_example({"bad\ud800": 1})
    with pytest.raises(CodecError):
        encode_sequence_example({}, {"bad\ud800": [[1]]})


@pytest.mark.parametrize("steps", [5, None, b"abc", "abc", {"a": 1}])
def test_feature_list_must_be_a_list_of_steps(steps: Any) -> None:
    with pytest.raises(CodecError) as info:
        encode_sequence_example({}, {"fl": steps})
    assert info.value.feature == "fl"


@pytest.mark.parametrize(
    "data",
    [
        b"\xff\xff\xff",  # not a valid tag
        b"\x0a\x05\x0a\x03",  # length runs past the end
        b"\x0a\x0c\x0a\x0a\x0a\x01a\x12\x05\x1a\x03\x0a\x01",  # a valid Example cut short
        b"\x0a\x07\x0a\x05\x0a\x01\xff\x12\x00",  # map key is not UTF-8
        b"\x0a\x04\x0a\x02\x12\x80",  # truncated varint length
    ],
)
def test_decode_rejects_invalid_bytes(data: bytes) -> None:
    with pytest.raises(CodecError, match=r"not a valid serialized tf\.train\.Example"):
        decode_example(data)
    with pytest.raises(CodecError):
        decode_sequence_example(data)


# --------------------------------------------------------------------------- splicing


def test_split_rekey_and_append_entries_match_protobuf() -> None:
    record = encode_example({"a": 1, "long": [b"x" * 200], "c": [1.5]})
    entries = split_entries(record)
    assert entries is not None and [key for key, _ in entries] == [b"a", b"long", b"c"]
    assert features_body(record) == b"".join(entry for _, entry in entries)
    renamed = rekey_entry(entries[1][1], b"b" * 130)  # a key whose length takes two bytes
    extra = map_entry(b"d", proto.Feature(int64_list=proto.Int64List(value=[7])).SerializeToString())
    spliced = append_entries(encode_example({}), b"".join([entries[0][1], renamed, extra]))
    assert decode_example(spliced) == {"a": [1], "b" * 130: [b"x" * 200], "d": [7]}
    unusual = encode_example({"a": 1}) + encode_example({"c": [1.5]})  # two features fields
    assert decode_example(append_entries(unusual, extra)) == {"a": [1], "c": [1.5], "d": [7]}


@pytest.mark.parametrize(
    "record",
    [
        b"\x12\x00",  # not a features field
        b"\x0a\x02\x0a\x00" + b"\x0a\x00",  # features, then more of them: protobuf merges the two
        b"\x0a\x02\x0a\x00",  # an empty entry (key "", no value): no key to read
        b"\x0a\x06\x0a\x04\x0a\x05abc",  # a key running past its entry
        b"\x0a\x04\x0a\x02\x12\x00",  # an entry holding its value but no key
    ],
)
def test_split_entries_leaves_other_layouts_to_protobuf(record: bytes) -> None:
    assert split_entries(record) is None


# --------------------------------------------------------------------------- fast paths


_VALUES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(width=32),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.booleans(),
    st.lists(st.integers(-(2**70), 2**70), max_size=4),
    st.lists(st.floats(allow_nan=True), max_size=4),
    st.lists(st.one_of(st.integers(-5, 5), st.floats(-5, 5), st.booleans()), max_size=4),
)


@settings(max_examples=400, deadline=None)
@given(value=_VALUES)
def test_encode_feature_fast_paths_equal_the_checked_path(value: Any) -> None:
    """Plain ints, floats, str, bytes and lists take shortcuts: same bytes, same errors."""
    from catalog.tfrecord.example import _encode_feature_checked, encode_feature

    try:
        expected: bytes | str = _encode_feature_checked("f", value)
    except CodecError as e:
        expected = str(e)
    try:
        got: bytes | str = encode_feature("f", value)
    except CodecError as e:
        got = str(e)
    assert got == expected


# --------------------------------------------------------------------------- SequenceExamples among records
_KINDS = [
    encode_example({"a": 1}),
    encode_example({}),  # empty: no field at all
    encode_example({"b": b"x" * 300}),  # a length of two varint bytes
    encode_sequence_example({"c": 1}, {"s": [[1.0]]}),
    encode_sequence_example({}, {"s": [[2]]}),  # feature lists only
    encode_example({"a": 2}) + encode_example({"a": 3}),  # two features fields: not plain, an Example
    b"\x12\x00",  # feature lists alone, empty
    b"\xff\xff",  # not a message
]


@given(st.lists(st.sampled_from(range(len(_KINDS))), max_size=30), st.integers(0, 7))
@settings(max_examples=200, deadline=None)
def test_the_first_sequence_example_is_found_as_message_kind_finds_it(picks: list[int], gap: int) -> None:
    """Records anywhere in a buffer (``gap`` bytes between them) give what message_kind gives one by one."""
    records = [_KINDS[i] for i in picks]
    buf = bytearray()
    starts = []
    for r in records:
        buf += b"\x0a" * gap  # bytes that would read as a tag, were they taken for the record's
        starts.append(len(buf))
        buf += r
    lens = np.array([len(r) for r in records], dtype=np.int64)
    plain = plain_examples(bytes(buf), np.array(starts, dtype=np.int64), lens)
    for r, p in zip(records, plain.tolist(), strict=True):
        assert not p or message_kind(r) == EXAMPLE  # plain is only ever said of an Example
    want = None
    for i, r in enumerate(records):
        try:
            if message_kind(r) == SEQUENCE_EXAMPLE:
                want = i
                break
        except CodecError:
            pass
    assert first_sequence(plain, records.__getitem__) == want
