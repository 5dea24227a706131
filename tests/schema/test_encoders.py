"""catalog.schema.encoders: every fast path writes the bytes of the checked path, and leaves every error to it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from catalog.errors import ValidationError
from catalog.schema.encoders import PREFIX_CACHE_LIMIT, EntryPrefix, feature_encoder
from catalog.schema.features import list_feature_bytes, parse_feature
from catalog.tfrecord import example as wire
from catalog.tfrecord import proto


def _checked(name: str, raw: dict[str, Any], value: Any) -> bytes:
    """The general path's entry: convert, then one serialized Feature, framed as a map entry."""
    return EntryPrefix(name)(list_feature_bytes(parse_feature(name, raw), value))


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ({"dtype": "int64"}, 0),
        ({"dtype": "int64"}, 127),
        ({"dtype": "int64"}, 128),
        ({"dtype": "int64"}, -1),
        ({"dtype": "int64"}, 2**63 - 1),
        ({"dtype": "int64"}, -(2**63)),
        ({"dtype": "float32"}, 1.5),
        ({"dtype": "float32", "shape": [3]}, [1, 2.5, -3]),
        ({"dtype": "float32", "shape": [2, 2]}, np.arange(4, dtype="<f4").reshape(2, 2)),
        ({"dtype": "float32", "shape": [0]}, []),
        ({"dtype": "string"}, ""),
        ({"dtype": "string"}, "héllo"),
        ({"dtype": "string"}, "x" * 125),
        ({"dtype": "string"}, "x" * 126),
        ({"dtype": "string"}, "x" * 5000),
        ({"dtype": "bytes"}, b"\x00\xff" * 200),
    ],
)
def test_fast_paths_write_the_checked_paths_bytes(raw: dict[str, Any], value: Any) -> None:
    got = feature_encoder(parse_feature("f", raw))(value)
    assert got == _checked("f", raw, value)
    parsed = proto.Example.FromString(wire.features_field(got))  # and protobuf reads it as one feature
    assert list(parsed.features.feature) == ["f"]


def test_a_fixed_tensor_is_its_little_endian_bytes() -> None:
    feat = parse_feature("t", {"dtype": "int16", "shape": [2, 3], "encoding": "tensor"})
    arr = np.arange(6, dtype="<i2").reshape(2, 3)
    entry = feature_encoder(feat)(arr)
    parsed = proto.Example.FromString(wire.features_field(entry))
    assert parsed.features.feature["t"].bytes_list.value == [arr.tobytes()]
    big_endian = feature_encoder(feat)(arr.astype(">i2"))  # converted, not written as it is
    assert big_endian == entry


def test_a_tensor_of_unknown_shape_stores_its_shape_beside_it() -> None:
    feat = parse_feature("t", {"dtype": "float32", "shape": [None, 2], "encoding": "tensor"})
    entries = feature_encoder(feat)(np.zeros((3, 2), dtype=np.float32))
    parsed = proto.Example.FromString(wire.features_field(entries))
    assert list(parsed.features.feature["t/shape"].int64_list.value) == [3, 2]


@pytest.mark.parametrize(
    ("raw", "value", "message"),
    [
        ({"dtype": "int64"}, 2**63, "integer 9223372036854775808 is out of int64 range"),
        ({"dtype": "int64"}, True, "expected int64, got bool True"),
        ({"dtype": "float32", "shape": [2]}, [1e39, 0.0], "float 1e+39 is out of float32 range"),
        ({"dtype": "float32", "shape": [2]}, [1.0], "expected shape [2], got [1]"),
        ({"dtype": "string"}, "a\ud800", "not encodable as UTF-8: lone surrogate"),
        ({"dtype": "bytes"}, "text", "expected bytes, got str"),
    ],
)
def test_errors_come_from_the_checked_path(raw: dict[str, Any], value: Any, message: str) -> None:
    with pytest.raises(ValidationError) as e:
        feature_encoder(parse_feature("f", raw))(value)
    assert e.value.feature == "f"
    assert e.value.reason.startswith(message)


def test_entry_prefix_cache_is_bounded() -> None:
    entry = EntryPrefix("k")
    for n in range(PREFIX_CACHE_LIMIT + 10):
        entry.prefix(n)
    assert len(entry.cache) == PREFIX_CACHE_LIMIT
    assert entry(b"\x0a\x00") == entry.prefix(2) + b"\x0a\x00"  # uncached lengths still frame right
    assert entry.prefix(PREFIX_CACHE_LIMIT + 5) == EntryPrefix("k").prefix(PREFIX_CACHE_LIMIT + 5)
