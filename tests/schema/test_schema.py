"""Schema: JSON form, validation errors, row codec, batches, inference, diff, TF spec."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from catalog import Schema, SchemaError, ValidationError, encode_example
from catalog.errors import CodecError
from catalog.schema import to_tf_feature_spec

ISSUE_SCHEMA: dict[str, Any] = {
    "features": {
        "id": {"dtype": "int64"},
        "text": {"dtype": "string"},
        "score": {"dtype": "float32", "default": 0.0},
        "vec": {"dtype": "float32", "shape": [8]},
        "tags": {"dtype": "string", "shape": [None]},
        "raw": {"dtype": "bytes"},
        "image": {"dtype": "uint8", "shape": [32, 32, 3], "encoding": "tensor"},
    }
}


@pytest.fixture
def schema() -> Schema:
    return Schema.from_json(ISSUE_SCHEMA)


def make_row(i: int = 7) -> dict[str, Any]:
    rng = np.random.default_rng(i)
    return {
        "id": i,
        "text": f"héllo {i}",
        "score": 0.25 * i,
        "vec": rng.standard_normal(8).astype(np.float32),
        "tags": ["a", "bb"][: i % 3],
        "raw": bytes([i % 256, 0, 255]),
        "image": rng.integers(0, 256, size=(32, 32, 3), dtype=np.uint8),
    }


# ---------------------------------------------------------------- JSON form


def test_json_round_trip_and_fingerprint(schema: Schema) -> None:
    again = Schema.from_json(json.loads(json.dumps(schema.to_json())))
    assert again.to_json() == schema.to_json()
    assert again.fingerprint == schema.fingerprint
    assert len(schema.fingerprint) == 64
    reordered = Schema.from_json({"features": dict(reversed(list(ISSUE_SCHEMA["features"].items())))})
    assert reordered.fingerprint == schema.fingerprint
    changed = json.loads(json.dumps(ISSUE_SCHEMA))
    changed["features"]["vec"]["shape"] = [9]
    assert Schema.from_json(changed).fingerprint != schema.fingerprint


def test_load_from_file(tmp_path: Path, schema: Schema) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(ISSUE_SCHEMA))
    assert Schema.load(path) == schema
    path.write_text("{not json")
    with pytest.raises(SchemaError, match=r"s\.json: not valid JSON"):
        Schema.load(path)
    with pytest.raises(SchemaError, match="cannot read schema"):
        Schema.load(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"dtype": "int64", "colour": "red"}, r"feature 'f': unknown key\(s\) \['colour'\]"),
        ({"dtype": "int32"}, "feature 'f': unknown dtype 'int32'"),
        ({"dtype": "nonsense", "encoding": "tensor"}, "feature 'f': unknown numpy dtype"),
        ({"dtype": "object", "encoding": "tensor"}, "feature 'f': a tensor needs a fixed-size numeric dtype"),
        ({"dtype": "int64", "shape": [-1]}, "feature 'f': shape dimensions must be non-negative"),
        ({"dtype": "int64", "shape": "3"}, "feature 'f': shape must be a list"),
        ({"dtype": "int64", "shape": [None, 3]}, r"feature 'f': a list feature's shape is \[k, ...\]"),
        ({"dtype": "int64", "shape": [True]}, "feature 'f': shape dimensions must be"),
        ({"shape": [3]}, "feature 'f': missing 'dtype'"),
        ({"dtype": "int64", "encoding": "png"}, "feature 'f': unknown encoding 'png'"),
        ({"dtype": "int64", "default": "zero"}, "feature 'f': bad default: .*expected int64"),
        ({"dtype": "float32", "shape": [None], "default": 1.0}, "feature 'f': bad default"),
        ({"dtype": "uint8", "shape": [None], "encoding": "tensor", "default": 0}, "cannot have a default"),
        ("int64", "feature 'f': a feature is an object"),
    ],
)
def test_bad_feature_specs_name_the_feature(spec: Any, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        Schema.from_json({"features": {"f": spec}})


def test_bad_documents() -> None:
    with pytest.raises(SchemaError, match="a schema is an object"):
        Schema.from_json({"feature": {}})
    with pytest.raises(SchemaError, match="unknown top-level key"):
        Schema.from_json({"features": {}, "version": 2})
    with pytest.raises(SchemaError, match="reserved for the stored shape"):
        Schema.from_json(
            {
                "features": {
                    "img": {"dtype": "uint8", "shape": [None], "encoding": "tensor"},
                    "img/shape": {"dtype": "int64"},
                }
            }
        )


def test_scalar_default_fills_fixed_shape() -> None:
    s = Schema.from_json({"features": {"v": {"dtype": "float32", "shape": [2, 2], "default": 1.5}}})
    row = s.decode(encode_example({}))
    assert row["v"].shape == (2, 2)
    assert np.all(row["v"] == 1.5)


# ---------------------------------------------------------------- rows


def test_encode_decode_round_trip(schema: Schema) -> None:
    for i in range(5):
        row = make_row(i)
        got = schema.decode(schema.encode(row))
        assert set(got) == set(row)
        assert got["id"] == row["id"] and isinstance(got["id"], int)
        assert got["text"] == row["text"] and isinstance(got["text"], str)
        assert math.isclose(got["score"], row["score"], rel_tol=1e-6)
        assert got["vec"].dtype == np.float32 and np.array_equal(got["vec"], row["vec"])
        assert got["tags"] == row["tags"]
        assert got["raw"] == row["raw"]
        assert got["image"].dtype == np.uint8 and np.array_equal(got["image"], row["image"])


def test_default_fills_missing_optional(schema: Schema) -> None:
    row = make_row()
    del row["score"]
    assert schema.validate(row)["score"] == 0.0
    assert schema.decode(schema.encode(row))["score"] == 0.0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"id": None}, "feature 'id': missing"),
        ({"extra": 1}, "feature 'extra': not in the schema"),
        ({"id": "seven"}, "feature 'id': expected int64, got str"),
        ({"id": 2**63}, "feature 'id': integer 9223372036854775808 is out of int64 range"),
        ({"id": [1, 2]}, "feature 'id': expected one value, got 2"),
        ({"score": 1e39}, "feature 'score': float 1e\\+39 is out of float32 range"),
        ({"score": "x"}, "feature 'score': expected float32"),
        ({"text": b"\xff\xfe"}, "feature 'text': not valid UTF-8 text at byte 0"),
        ({"text": 5}, "feature 'text': expected string, got int"),
        ({"raw": "text"}, "feature 'raw': expected bytes, got str"),
        ({"vec": [1.0] * 7}, r"feature 'vec': expected shape \[8\], got \[7\]"),
        ({"vec": np.zeros((2, 4), np.float32)}, r"feature 'vec': expected shape \[8\], got \[2, 4\]"),
        ({"tags": "abc"}, "feature 'tags': expected a list or array, got str"),
        ({"tags": [["a"], ["b"]]}, "feature 'tags': expected a 1-D list"),
        ({"image": np.zeros((32, 32), np.uint8)}, r"feature 'image': expected shape \[32, 32, 3\], got \[32, 32\]"),
        ({"image": np.full((32, 32, 3), 300)}, "feature 'image': values out of uint8 range"),
        ({"image": np.full((32, 32, 3), "x")}, "feature 'image': cannot store <U1 as uint8"),
    ],
)
def test_row_errors_name_feature_and_reason(schema: Schema, change: dict[str, Any], message: str) -> None:
    row = make_row()
    for key, value in change.items():
        if value is None:
            del row[key]
        else:
            row[key] = value
    with pytest.raises(ValidationError, match=message):
        schema.validate(row)
    with pytest.raises(ValidationError, match=message):
        schema.encode(row)


def test_validate_normalises(schema: Schema) -> None:
    row = make_row()
    row["id"] = np.int32(3)
    row["text"] = b"bytes are fine if UTF-8"
    row["vec"] = list(range(8))
    out = schema.validate(row)
    assert out["id"] == 3 and type(out["id"]) is int
    assert out["text"] == "bytes are fine if UTF-8"
    assert out["vec"] == [float(x) for x in range(8)]


def test_non_mapping_row(schema: Schema) -> None:
    with pytest.raises(ValidationError, match="a row is a mapping"):
        schema.encode([1, 2])  # type: ignore[arg-type]


# ---------------------------------------------------------------- records


def test_validate_record_accepts_encoded_rows(schema: Schema) -> None:
    data = schema.encode(make_row())
    schema.validate_record(data)
    from catalog import decode_example

    schema.validate_record(decode_example(data))


@pytest.mark.parametrize(
    ("features", "message"),
    [
        ({"id": 1}, "feature 'text': missing"),
        ({"id": 1.5}, "feature 'id': stored as float_list, the schema wants int64_list"),
        ({"id": [1, 2]}, "feature 'id': expected exactly one value, got 2"),
        ({"vec": [1.0] * 3}, r"feature 'vec': expected 8 values for shape \[8\], got 3"),
        ({"text": b"\xc3"}, "feature 'text': not valid UTF-8"),
        ({"image": b"\x00" * 10}, r"feature 'image': tensor holds 10 bytes, shape \[32, 32, 3\] of uint8 needs 3072"),
        ({"surprise": 1}, "feature 'surprise': not in the schema"),
    ],
)
def test_validate_record_errors(schema: Schema, features: dict[str, Any], message: str) -> None:
    base = {
        "id": 1,
        "text": "t",
        "vec": [0.0] * 8,
        "tags": np.array([], dtype=object),  # an empty bytes_list: a bare [] is a Feature with no list, absent
        "raw": b"r",
        "image": b"\x00" * 3072,
    }
    base.update(features)
    if "text" not in features and features.get("id") == 1 and len(features) == 1:
        del base["text"]
    data = encode_example(base)
    with pytest.raises(ValidationError, match=message):
        schema.validate_record(data)
    with pytest.raises(ValidationError, match=message):
        schema.decode(data)


def test_validate_record_rejects_garbage(schema: Schema) -> None:
    with pytest.raises(CodecError, match=r"not a valid serialized tf\.train\.Example"):
        schema.validate_record(b"\xff\xff\xff")


def test_decode_batch_columns(schema: Schema) -> None:
    rows = [make_row(i) for i in range(6)]
    cols = schema.decode_batch([schema.encode(r) for r in rows])
    assert cols["id"].dtype == np.int64 and cols["id"].tolist() == list(range(6))
    assert cols["score"].dtype == np.float32 and cols["score"].shape == (6,)
    assert cols["vec"].shape == (6, 8) and np.array_equal(cols["vec"][3], rows[3]["vec"])
    assert cols["text"].dtype == object and cols["text"][2] == rows[2]["text"]
    assert cols["raw"][5] == rows[5]["raw"]
    assert [list(t) for t in cols["tags"]] == [r["tags"] for r in rows]
    assert cols["image"].shape == (6, 32, 32, 3) and cols["image"].dtype == np.uint8
    assert np.array_equal(cols["image"][4], rows[4]["image"])
    cols["image"][0, 0, 0, 0] = 1  # writable


def test_decode_batch_error_names_record(schema: Schema) -> None:
    good = schema.encode(make_row())
    bad = encode_example({"id": 1})
    with pytest.raises(ValidationError) as err:
        schema.decode_batch([good, good, bad])
    assert err.value.record == 2
    assert err.value.feature == "text"
    assert str(err.value).startswith("record 2, feature 'text': missing")


def test_tensor_with_unknown_dims_stores_shape() -> None:
    s = Schema.from_json({"features": {"m": {"dtype": "float64", "shape": [None, 3], "encoding": "tensor"}}})
    arrays = [np.arange(6, dtype=np.float64).reshape(2, 3), np.ones((4, 3))]
    records = [s.encode({"m": a}) for a in arrays]
    from catalog import decode_example

    assert decode_example(records[0])["m/shape"] == [2, 3]
    assert np.array_equal(s.decode(records[1])["m"], arrays[1])
    col = s.decode_batch(records)["m"]
    assert col.dtype == object and np.array_equal(col[0], arrays[0])
    with pytest.raises(ValidationError, match=r"expected shape \[null, 3\], got \[2, 2\]"):
        s.encode({"m": np.zeros((2, 2))})


# ---------------------------------------------------------------- inference and diff


def test_infer_from_records(schema: Schema) -> None:
    plain = Schema.from_json({"features": {k: v for k, v in ISSUE_SCHEMA["features"].items() if k != "image"}})
    rows = [make_row(i) for i in range(6)]
    for r in rows:
        del r["image"]
    records = [plain.encode(r) for r in rows]
    inferred = Schema.infer(records).to_json()["features"]
    assert inferred["id"] == {"dtype": "int64"}
    assert inferred["text"] == {"dtype": "string"}
    assert inferred["vec"] == {"dtype": "float32", "shape": [8]}
    assert inferred["tags"] == {"dtype": "string", "shape": [None]}
    assert inferred["raw"] == {"dtype": "bytes"}  # not valid UTF-8
    records.append(encode_example({"id": 1}))
    optional = Schema.infer(records).to_json()["features"]
    assert optional["id"] == {"dtype": "int64"}
    assert optional["text"] == {"dtype": "string", "optional": True}  # no made-up default


def test_infer_rejects_mixed_kinds() -> None:
    with pytest.raises(SchemaError, match="feature 'x': stored with different kinds"):
        Schema.infer([encode_example({"x": 1}), encode_example({"x": 1.5})])


def test_diff(schema: Schema) -> None:
    doc = json.loads(json.dumps(ISSUE_SCHEMA))
    del doc["features"]["raw"]
    doc["features"]["height"] = {"dtype": "int64", "default": 256}
    doc["features"]["vec"]["shape"] = [16]
    d = schema.diff(Schema.from_json(doc))
    assert d.added == ["height"] and d.removed == ["raw"]
    assert set(d.changed) == {"vec"} and d.changed["vec"]["to"]["shape"] == [16]
    assert bool(d) and not schema.diff(schema)


# ---------------------------------------------------------------- TensorFlow


def test_feature_spec_parses_with_tensorflow(schema: Schema, tf: Any) -> None:
    rows = [make_row(i) for i in range(4)]
    records = [schema.encode(r) for r in rows]
    spec = to_tf_feature_spec(schema.feature_spec(), tf)
    parsed = tf.io.parse_example(tf.constant(records), spec)
    cols = schema.decode_batch(records)
    assert np.array_equal(parsed["id"].numpy(), cols["id"])
    assert np.array_equal(parsed["vec"].numpy(), cols["vec"])
    assert np.array_equal(parsed["score"].numpy(), cols["score"])
    assert [t.decode() for t in parsed["text"].numpy()] == list(cols["text"])
    dense_tags = tf.sparse.to_dense(parsed["tags"], default_value=b"").numpy()
    for i, r in enumerate(rows):
        assert [t.decode() for t in dense_tags[i] if t] == r["tags"]
    raw_spec = schema.feature_spec()["image"]["decode_raw"]
    images = tf.io.decode_raw(parsed["image"], getattr(tf, raw_spec["dtype"])).numpy().reshape(-1, *raw_spec["shape"])
    assert np.array_equal(images, cols["image"])


def test_feature_spec_default_used_by_tensorflow(tf: Any) -> None:
    s = Schema.from_json({"features": {"id": {"dtype": "int64"}, "h": {"dtype": "int64", "default": 256}}})
    spec = to_tf_feature_spec(s.feature_spec(), tf)
    parsed = tf.io.parse_example(tf.constant([encode_example({"id": 1})]), spec)
    assert parsed["h"].numpy().tolist() == [256]


def test_string_list_default_decodes() -> None:
    s = Schema.from_json(
        {"features": {"id": {"dtype": "int64"}, "t": {"dtype": "string", "shape": [2], "default": ["x", "y"]}}}
    )
    data = encode_example({"id": 1})
    assert list(s.decode(data)["t"]) == ["x", "y"]
    col = s.decode_batch([data, s.encode({"id": 2, "t": ["a", "b"]})])["t"]
    assert col.shape == (2, 2) and col.tolist() == [["x", "y"], ["a", "b"]]
