"""catalog.schema.model: Schema's JSON form and loading, equality, diff, validation, the TF spec as data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from catalog.errors import SchemaError, ValidationError
from catalog.schema.model import Schema, SchemaDiff, json_problem

DOC = {"features": {"id": {"dtype": "int64"}, "v": {"dtype": "float32", "shape": [2], "default": [0.0, 1.0]}}}


def test_json_round_trip_equality_and_fingerprint() -> None:
    schema = Schema.from_json(DOC)
    assert schema.to_json() == DOC
    reordered = Schema.from_json(
        '{"features": {"v": {"default": [0.0, 1.0], "shape": [2], "dtype": "float32"}, "id": {"dtype": "int64"}}}'
    )
    assert schema.fingerprint == reordered.fingerprint  # canonical JSON: keys sorted
    assert (
        schema.fingerprint != Schema.from_json({"features": {"id": {"dtype": "int64", "optional": True}}}).fingerprint
    )
    assert Schema.from_json(schema.to_json()) == schema and hash(Schema.from_json(DOC)) == hash(schema)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("{", "schema is not valid JSON: "),
        ("[" * 100_000 + "]" * 100_000, "schema is not valid JSON: nested too deeply"),
        ({"feature": {}}, 'a schema is an object {"features": {...}}'),
        ({"features": {}, "extra": 1}, "unknown top-level key(s) ['extra']"),
        ({"features": []}, '"features" (and "sequence_features") map names to feature specs'),
        ({"features": {"t": {"dtype": "uint8", "shape": [None], "encoding": "tensor"}, "t/shape": {"dtype": "int64"}}},
         "feature 't/shape': name is reserved for the stored shape of a tensor"),
    ],
)  # fmt: skip
def test_bad_documents_are_one_schema_error(doc: object, message: str) -> None:
    with pytest.raises(SchemaError) as e:
        Schema.from_json(doc)
    assert str(e.value).startswith(message)


def test_load_names_the_file_in_every_error(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_bytes(b'{"features": {"a": {"dtype": "int64"}}}')
    assert Schema.load(path) == Schema.from_json({"features": {"a": {"dtype": "int64"}}})
    path.write_bytes(b"\xff")
    with pytest.raises(SchemaError, match=rf"^{path}: not UTF-8 text \(byte 0\)$"):
        Schema.load(path)
    path.write_text('{"features": {"a": {"dtype": "int8"}}}')
    with pytest.raises(SchemaError, match=rf"^{path}: feature 'a': unknown dtype 'int8'"):
        Schema.load(path)
    with pytest.raises(SchemaError, match="cannot read schema"):
        Schema.load(tmp_path / "absent.json")


def test_diff_names_added_removed_and_changed() -> None:
    old = Schema.from_json(DOC)
    new = Schema.from_json({"features": {"id": {"dtype": "float32"}, "w": {"dtype": "string"}}})
    diff = old.diff(new)
    assert diff == SchemaDiff(
        added=["w"], removed=["v"], changed={"id": {"from": {"dtype": "int64"}, "to": {"dtype": "float32"}}}
    )
    assert diff and not old.diff(old)


def test_validate_fills_defaults_and_refuses_strangers() -> None:
    schema = Schema.from_json(DOC)
    row = schema.validate({"id": np.int64(4)})
    assert row["id"] == 4 and list(row["v"]) == [0.0, 1.0]
    with pytest.raises(ValidationError, match=r"^feature 'x': not in the schema$"):
        schema.validate({"id": 1, "x": 1})
    with pytest.raises(ValidationError, match=r"^a row is a mapping of feature name to value, got int$"):
        schema.validate(3)  # type: ignore[arg-type]


def test_feature_spec_as_plain_data() -> None:
    schema = Schema.from_json({"features": {
        "id": {"dtype": "int64"}, "s": {"dtype": "string", "default": "x"}, "tags": {"dtype": "bytes", "shape": [None]},
        "t": {"dtype": "uint8", "shape": [None, 3], "encoding": "tensor"},
    }})  # fmt: skip
    spec = schema.feature_spec()
    assert spec["id"] == {"kind": "FixedLenFeature", "shape": [], "dtype": "int64"}
    assert spec["s"]["default_value"] == b"x"
    assert spec["tags"] == {"kind": "VarLenFeature", "dtype": "string"}
    assert spec["t/shape"] == {"kind": "FixedLenFeature", "shape": [2], "dtype": "int64"}
    assert spec["t"]["decode_raw"] == {"dtype": "uint8", "shape": [None, 3], "little_endian": True}


def test_infer_refuses_what_it_cannot_read() -> None:
    with pytest.raises(SchemaError, match=r"^Schema.infer takes records, rows, .* got int$"):
        Schema.infer(3)
    assert Schema.infer([]) == Schema([])
    assert json_problem(RecursionError()) == "not valid JSON: nested too deeply"
