"""catalog.schema.jsonrows: rows as JSON both ways (base64 bytes, float32 digits, NaN, shaped empties), folding."""

from __future__ import annotations

import math

import numpy as np
import pytest

from catalog.errors import ValidationError
from catalog.schema.jsonrows import (
    class_name,
    float32_json,
    folded_bytes,
    folded_value,
    row_from_json,
    row_to_json,
    value_from_json,
)
from catalog.schema.model import Schema

SCHEMA = Schema.from_json({"features": {
    "f": {"dtype": "float32"},
    "b": {"dtype": "bytes"},
    "t": {"dtype": "float32", "shape": [None, 3], "encoding": "tensor"},
    "c": {"dtype": "complex64", "shape": [2], "encoding": "tensor"},
    "label": {"dtype": "int64", "names": ["cat", "dog"]},
}})  # fmt: skip


def test_a_row_round_trips_through_json() -> None:
    row = {
        "f": float(np.float32(0.1)),
        "b": b"\x00\xff",
        "t": np.zeros((0, 3), dtype=np.float32),
        "c": np.array([1 + 2j, math.inf], dtype=np.complex64),
        "label": 1,
    }
    obj = row_to_json(SCHEMA, row)
    assert obj["f"] == 0.1 and obj["b"] == "AP8=" and obj["t"] == {"shape": [0, 3], "values": []}
    assert obj["c"] == [[1.0, 2.0], ["Infinity", 0.0]]
    back = row_from_json(SCHEMA, obj)
    assert back["b"] == b"\x00\xff" and back["t"].shape == (0, 3) and back["c"] == [1 + 2j, complex(math.inf, 0)]
    assert SCHEMA.encode(back) == SCHEMA.encode(row)


def test_float32_json_is_shortest_digits_and_names_specials() -> None:
    assert float32_json(float(np.float32(0.1))) == 0.1
    assert [float32_json(v) for v in (math.nan, math.inf, -math.inf)] == ["NaN", "Infinity", "-Infinity"]
    assert math.isnan(value_from_json(SCHEMA.features["f"], "NaN"))


def test_bad_json_values_are_validation_errors() -> None:
    with pytest.raises(
        ValidationError, match=r"^feature 'b': bytes are written as base64 text in JSON; this is not base64$"
    ):
        value_from_json(SCHEMA.features["b"], "not base64!")
    with pytest.raises(ValidationError, match=r"^feature 't': 2 values do not fill shape \[1, 3\]$"):
        value_from_json(SCHEMA.features["t"], {"shape": [1, 3], "values": [1, 2]})
    with pytest.raises(
        ValidationError, match=r"^feature 't': a tensor's \{\"shape\", \"values\"\} form needs a list of integers"
    ):
        value_from_json(SCHEMA.features["t"], {"shape": [True], "values": []})
    with pytest.raises(ValidationError, match=r"^a JSON row is an object, got list$"):
        row_from_json(SCHEMA, [1])


def test_folding_and_class_names() -> None:
    assert folded_bytes(b"\x89PNG" + bytes(2000)) == "<bytes 2,004: 89504e47…>"
    assert folded_value(np.arange(12, dtype=np.uint8).reshape(3, 4)) == "<uint8[3,4]: 0, 1, 2, 3, 4, 5, 6, 7, …>"
    label = SCHEMA.features["label"]
    assert [class_name(label, v) for v in (0, np.int64(1), 2, -1, True)] == ["cat", "dog", None, None, None]
