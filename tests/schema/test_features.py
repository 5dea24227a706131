"""catalog.schema.features: one feature's declaration (parse_feature), its rules (convert), inference's tally."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from catalog.errors import SchemaError, ValidationError
from catalog.schema.features import (
    MAX_RANK,
    Feature,
    ListTally,
    check_feature_name,
    convert,
    default_as_json,
    parse_feature,
    zero,
)
from catalog.tfrecord import example as wire


def test_a_declaration_parses_and_its_json_form_round_trips() -> None:
    raw = {"dtype": "float32", "shape": [3], "default": [1.0, 2.0, 3.0], "description": "xyz"}
    feat = parse_feature("v", raw)
    assert (feat.dtype, feat.shape, feat.size, feat.has_default, feat.may_be_absent) == ("float32", (3,), 3, True, True)
    assert feat.to_json() == raw
    assert parse_feature("v", feat.to_json()) == feat
    tensor = parse_feature("t", {"dtype": "uint8", "shape": [None, 2], "encoding": "tensor"})
    assert tensor.stores_shape and tensor.size is None and tensor.wire_kind == wire.BYTES
    assert tensor.np_dtype == np.dtype("<u1")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"dtype": "int32"}, "feature 'f': unknown dtype 'int32': use int64, float32, string or bytes"),
        ({"dtype": "int64", "shape": 3}, "feature 'f': shape must be a list, got 3"),
        ({"dtype": "int64", "shape": [2, None]}, "feature 'f': a list feature's shape is [k, ...] (fixed) or [null]"),
        (
            {"dtype": "int64", "shape": [-1]},
            "feature 'f': shape dimensions must be non-negative integers or null, got -1",
        ),
        (
            {"dtype": "int64", "shape": [1] * (MAX_RANK + 1)},
            f"feature 'f': shape has {MAX_RANK + 1} dimensions; at most",
        ),
        ({"dtype": "int64", "colour": 1}, "feature 'f': unknown key(s) ['colour']"),
        ({"shape": [1]}, "feature 'f': missing 'dtype'"),
        (
            {"dtype": "int64", "default": 0, "optional": True},
            "feature 'f': a feature with a default is optional already",
        ),
        ({"dtype": "string", "names": ["a"]}, "feature 'f': \"names\" are class names of an int64 label feature"),
        ({"dtype": "int64", "names": ["a", "a"]}, "feature 'f': \"names\" lists 'a' twice"),
        ({"dtype": "int64", "checks": {"min": 2, "max": 1}}, 'feature \'f\': check "min" (2) is above "max" (1)'),
        (
            {"dtype": "int64", "checks": {"max_missing": 2}},
            "feature 'f': check \"max_missing\" is a share between 0 and 1",
        ),
        ({"dtype": "int64", "default": "x"}, "feature 'f': bad default: expected int64, got str 'x'"),
        (
            {"dtype": "object", "encoding": "tensor"},
            "feature 'f': a tensor needs a fixed-size numeric dtype, not 'object'",
        ),
        ({"dtype": "int64", "format": "png"}, "feature 'f': \"format\" describes an encoded image"),
    ],
)
def test_bad_declarations_say_what_is_wrong(raw: dict[str, object], message: str) -> None:
    with pytest.raises(SchemaError) as e:
        parse_feature("f", raw)
    assert str(e.value).startswith(message)
    assert e.value.feature == "f"


def test_feature_names_must_be_nonempty_text() -> None:
    check_feature_name("ok")
    for bad in ("", 3, None):
        with pytest.raises(SchemaError, match="feature names must be non-empty strings"):
            check_feature_name(bad)
    with pytest.raises(SchemaError, match="feature names must be UTF-8 text"):
        check_feature_name("a\ud800")


def test_convert_checks_ranges_and_shapes() -> None:
    scalar = parse_feature("n", {"dtype": "int64"})
    assert convert(scalar, [5]) == 5
    assert convert(scalar, np.array(7)) == 7
    with pytest.raises(ValidationError, match=r"^feature 'n': integer 9223372036854775808 is out of int64 range$"):
        convert(scalar, 2**63)
    with pytest.raises(ValidationError, match=r"^feature 'n': expected int64, got bool True$"):
        convert(scalar, True)
    with pytest.raises(ValidationError, match=r"^feature 'n': expected one value, got 2$"):
        convert(scalar, [1, 2])
    fixed = parse_feature("v", {"dtype": "float32", "shape": [2, 2]})
    assert convert(fixed, [[1, 2], [3, 4]]) == [1.0, 2.0, 3.0, 4.0]
    assert convert(fixed, [1, 2, 3, 4]) == [1.0, 2.0, 3.0, 4.0]  # the flat form of the shape
    with pytest.raises(ValidationError, match=r"^feature 'v': expected shape \[2, 2\], got \[3\]$"):
        convert(fixed, [1, 2, 3])
    with pytest.raises(ValidationError, match=r"^feature 'v': float 1e\+39 is out of float32 range$"):
        convert(fixed, [1e39, 0, 0, 0])
    text = parse_feature("s", {"dtype": "string"})
    with pytest.raises(ValidationError, match="lone surrogate '\\\\ud800' at character 1"):
        convert(text, "a\ud800")


def test_list_tally_infers_dtype_and_shape_and_refuses_mixed_kinds() -> None:
    tally = ListTally()
    tally.add(wire.BYTES, [b"abc"])
    tally.add(wire.BYTES, [b"\xff"])
    assert tally.feature("x").dtype == "bytes"  # one value that is not UTF-8: bytes, not string
    assert tally.feature("x").shape == ()
    counts = ListTally()
    counts.add(wire.INT64, [1, 2])
    counts.add(wire.INT64, [1, 2, 3])
    assert counts.feature("y", optional=True) == parse_feature(
        "y", {"dtype": "int64", "shape": [None], "optional": True}
    )
    counts.add(wire.FLOAT, [1.0])
    with pytest.raises(
        SchemaError, match=r"^feature 'y': stored with different kinds across records: \['float_list', 'int64_list'\]$"
    ):
        counts.feature("y")


def test_zeros_and_defaults_in_json() -> None:
    assert [zero(d) for d in ("int64", "float32", "string", "bytes")] == [0, 0.0, "", b""]
    assert default_as_json(np.arange(4).reshape(2, 2)) == [[0, 1], [2, 3]]
    assert default_as_json(b"a\xff") == "a\\xff"


# ---- class labels (issue 33, §2): a feature with names behaves as TFDS's ClassLabel


def label_feature(names: list[str] | None = None) -> Feature:
    raw: dict[str, Any] = {"dtype": "int64"}
    if names is not None:
        raw["names"] = names
    return parse_feature("label", raw)


def test_a_label_counts_and_names_its_classes() -> None:
    f = label_feature(["cat", "dog", "bird"])
    assert f.num_classes == 3
    assert [f.int2str(i) for i in range(3)] == ["cat", "dog", "bird"]
    assert [f.str2int(n) for n in ("cat", "dog", "bird")] == [0, 1, 2]
    assert f.int2str(np.int64(1)) == "dog"  # a value as the readers give it


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda f: f.int2str(3), "feature 'label': no class 3: the classes are 0 to 2"),
        (lambda f: f.int2str(-1), "feature 'label': no class -1: the classes are 0 to 2"),
        (lambda f: f.int2str(True), "feature 'label': a class label is an integer, got bool True"),
        (lambda f: f.str2int("Cat"), "feature 'label': no class 'Cat' (the classes are cat, dog, bird)"),
    ],
)
def test_a_label_refuses_what_is_no_class(call: Any, message: str) -> None:
    with pytest.raises(ValidationError) as e:
        call(label_feature(["cat", "dog", "bird"]))
    assert str(e.value) == message


def test_a_feature_without_names_has_no_classes() -> None:
    f = label_feature()
    assert f.num_classes is None
    with pytest.raises(ValidationError, match="has no class names"):
        f.int2str(0)
    with pytest.raises(ValidationError, match="has no class names"):
        f.str2int("cat")


def test_a_class_name_is_stored_as_its_number() -> None:
    f = label_feature(["cat", "dog"])
    assert convert(f, "dog") == 1
    assert convert(f, np.str_("cat")) == 0
    with pytest.raises(ValidationError, match="no class 'cow'"):
        convert(f, "cow")
    with pytest.raises(ValidationError, match="expected int64, got str"):
        convert(label_feature(), "dog")  # no names: text is no label
