"""The JSON Schema of the schema's JSON form (catalog/schema/schema.schema.json, issue 35): it
accepts every schema the project writes or declares and agrees with ``Schema.from_json`` on
what it can say (generated documents, good and broken, go the same way through both)."""

from __future__ import annotations

import ast
import json
import sqlite3
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog import Catalog
from catalog.demo import DEMO_SCHEMA
from catalog.errors import SchemaError
from catalog.schema import Schema
from catalog.schema.canonical import fingerprint
from catalog.schema.features import FEATURE_KEYS, IMAGE_FORMATS
from catalog.schema.sequences import STEP_KEYS
from catalog.tfrecord import encode_example

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parent.parent.parent
DOCUMENT = json.loads((resources.files("catalog.schema") / "schema.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(DOCUMENT)


def valid(doc: Any) -> bool:
    return VALIDATOR.is_valid(doc)


def loads(doc: Any) -> bool:
    try:
        Schema.from_json(doc)
    except SchemaError:
        return False
    return True


def test_the_file_is_a_json_schema_shipped_with_the_package() -> None:
    jsonschema.Draft202012Validator.check_schema(DOCUMENT)
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"catalog.schema" = ["*.json"]' in pyproject  # package data: installed with the wheel


def test_it_declares_the_keys_from_json_takes_and_the_page_describes_each() -> None:
    assert set(DOCUMENT["properties"]) == {"features", "sequence_features"}
    assert set(DOCUMENT["$defs"]["feature"]["properties"]) == FEATURE_KEYS
    assert set(DOCUMENT["$defs"]["step"]["properties"]) == STEP_KEYS
    assert DOCUMENT["$defs"]["feature"]["properties"]["format"]["enum"][:-1] == list(IMAGE_FORMATS)
    page = (ROOT / "docs" / "reference" / "schema.md").read_text(encoding="utf-8")
    assert "](schema.schema.json)" in page
    assert not [k for k in FEATURE_KEYS if f"`{k}`" not in page and f'`"{k}"' not in page]


def declared_schemas() -> list[Any]:
    """Every literal schema the tests and the demo declare (``{"features": ...}``), good and bad."""
    found: list[Any] = [DEMO_SCHEMA]
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant) and k.value == "features" for k in node.keys
            ):
                try:
                    found.append(ast.literal_eval(node))
                except ValueError:
                    continue  # built from names: not a literal
    return found


def beyond_reach(doc: Any) -> bool:
    """Whether ``doc`` is refused for what JSON Schema cannot say (the file's description lists it)."""
    try:
        Schema.from_json(doc)
    except SchemaError as e:
        reasons = ("bad default", "default fills", "numpy dtype", "tensor needs", "declares", "reserved",
                   "both a context", "is above", "a tensor with unknown", "larger than", "UTF-8")  # fmt: skip
        return any(r in str(e) for r in reasons)
    return False


def test_every_schema_the_tests_and_the_demo_declare_is_judged_as_from_json_judges_it() -> None:
    docs = declared_schemas()
    assert len(docs) > 200, len(docs)
    refused_good = [d for d in docs if loads(d) and not valid(d)]
    assert not refused_good, refused_good[:3]
    passed_bad = [d for d in docs if valid(d) and not loads(d) and not beyond_reach(d)]
    assert not passed_bad, passed_bad[:3]
    assert sum(not loads(d) for d in docs) > 20  # the broken ones the schema tests use are in too


def test_inferred_schemas_are_valid() -> None:
    rows = [
        {"id": 1, "x": 0.5, "t": "a", "b": b"\xff", "v": [1, 2], "m": np.zeros((2, 3), np.float16), "f": True},
        {"id": 2, "x": 1.5, "t": "b", "b": b"\x00", "v": [1], "m": np.ones((2, 3), np.float16), "f": False},
        {"id": 3},
    ]
    records = [encode_example({"a": [1, 2], "b": [0.5], "c": [b"x"]}), encode_example({"a": [3]})]
    for schema in (Schema.infer(rows), Schema.infer(records)):
        VALIDATOR.validate(schema.to_json())


def test_stored_schemas_are_valid(tmp_path: Path) -> None:
    """What the manifest keeps (schema_versions.schema_json), after registering and migrating."""
    cat = Catalog.init(tmp_path / "cat")
    labels = {"id": {"dtype": "int64"}, "label": {"dtype": "int64", "names": ["cat", "dog"]}}
    ds = cat.register("things", {"features": {**labels, "image": {"dtype": "bytes", "encoding": "image"}}})
    ds.append_rows([{"id": 1, "label": "dog", "image": b"\x89PNG"}])
    ds.migrate(add=["score:float32=0.5"], rename=["id:key"])
    cat.register("clips", {"features": {"id": {"dtype": "int64"}}, "sequence_features": {"tok": {"dtype": "int64"}}})
    cat.register("demo", DEMO_SCHEMA)
    with sqlite3.connect(tmp_path / "cat" / "catalog.db") as db:
        stored = [json.loads(text) for (text,) in db.execute("SELECT schema_json FROM schema_versions")]
    with sqlite3.connect(ROOT / "tests" / "fixtures" / "manifest-format1" / "catalog.db") as db:
        stored += [json.loads(text) for (text,) in db.execute("SELECT schema_json FROM schema_versions")]
    assert len(stored) >= 5
    for doc in stored:
        VALIDATOR.validate(doc)


EDGES = [
    {"features": {}},
    {"features": {"id": {"dtype": "int64", "encoding": None}}},  # null: no encoding
    {"features": {"im": {"dtype": "bytes", "encoding": "image", "format": None, "shape": [None, None]}}},
    {"features": {"id": {"dtype": "int64", "default": 0, "optional": False}}},
    {"features": {"m": {"dtype": "float64", "encoding": "tensor", "shape": [None, 2, None]}}},
    {"features": {"label": {"dtype": "int64", "shape": [2], "names": ["a", "b"]}}},
    {"features": {"t": {"dtype": "string", "checks": {"min": 0}}}},  # stored before check_new refused it
    {"features": {}, "sequence_features": {"s": {"dtype": "string", "shape": [None], "description": "words"}}},
]


@pytest.mark.parametrize("doc", EDGES, ids=[json.dumps(d)[:60] for d in EDGES])
def test_schemas_at_the_edges_are_taken_by_both(doc: Any) -> None:
    assert loads(doc)
    VALIDATOR.validate(doc)


BROKEN = [
    {},
    {"features": {"id": {}}},  # no dtype
    {"features": {"id": {"dtype": 64}}},
    {"features": {"id": {"dtype": "int32"}}},  # a tensor's dtype, not a list's
    {"features": {"id": {"dtype": "int64", "shape": "3"}}},
    {"features": {"id": {"dtype": "int64", "shape": [-1]}}},
    {"features": {"id": {"dtype": "int64", "shape": [None, 2]}}},
    {"features": {"id": {"dtype": "int64", "optional": "yes"}}},
    {"features": {"id": {"dtype": "int64", "dflt": 0}}},
    {"features": {"id": {"dtype": "int64", "names": ["a", "a"]}}},
    {"features": {"id": {"dtype": "float32", "names": ["a"]}}},
    {"features": {"id": {"dtype": "int64", "checks": {"linf": 2}}}},
    {"features": {"id": {"dtype": "int64", "default": 0, "optional": True}}},
    {"features": {"im": {"dtype": "string", "encoding": "image"}}},
    {"features": {"im": {"dtype": "bytes", "format": "png"}}},
    {"features": {}, "sequence_features": {"s": {"dtype": "int64", "default": 0}}},
    {"features": [], "version": 1},
]


@pytest.mark.parametrize("doc", BROKEN, ids=[json.dumps(d)[:60] for d in BROKEN])
def test_broken_schemas_are_refused_by_both(doc: Any) -> None:
    assert not valid(doc)
    assert not loads(doc)


# Generated documents near the valid ones: a valid feature of each kind, then maybe one key set
# to a value of any kind (good, wrong, or a key no feature has). Defaults are left out (whether one
# fits its feature is the catalog's check alone), and so are numbers JSON Schema and Python tell
# apart (2.0 is an integer to JSON Schema, not to from_json).
DIMS = st.lists(st.one_of(st.none(), st.integers(0, 4)), max_size=3)
CHECKS = st.fixed_dictionaries(
    {}, optional={"max_missing": st.sampled_from([0, 0.5, 1]), "min": st.just(-1.0), "max": st.just(5.5)}
).filter(bool)
KINDS = st.one_of(
    st.fixed_dictionaries(
        {"dtype": st.sampled_from(["int64", "float32", "string", "bytes"])},
        optional={"shape": st.sampled_from([[], [3], [None], [2, 2]]), "optional": st.booleans(), "checks": CHECKS},
    ),
    st.fixed_dictionaries(
        {"dtype": st.sampled_from(["uint8", "float16", "bool", "complex64"]), "encoding": st.just("tensor")},
        optional={"shape": DIMS, "optional": st.booleans()},
    ),
    st.fixed_dictionaries(
        {"dtype": st.just("bytes"), "encoding": st.just("image")},
        optional={"format": st.sampled_from(["png", "jpeg"]), "shape": st.sampled_from([[8, 8], [None, None, 3]])},
    ),
    st.fixed_dictionaries({"dtype": st.just("int64"), "names": st.just(["cat", "dog"])}, optional={"shape": DIMS}),
)
VALUES = {
    "dtype": st.sampled_from(["int64", "bytes", "uint8", "string", 7]),
    "shape": st.one_of(DIMS, st.sampled_from(["[3]", -1, [-1], [True]])),
    "encoding": st.sampled_from(["tensor", "image", "jpeg", None]),
    "optional": st.sampled_from([True, False, "yes", 1]),
    "description": st.sampled_from(["a feature", "", 3]),
    "names": st.sampled_from([["cat", "dog"], ["cat", "cat"], [""], "cat", [1], []]),
    "format": st.sampled_from(["png", "tiff", None]),
    "checks": st.one_of(CHECKS, st.sampled_from([{}, [0.1], {"linf": 2}, {"max_missing": True}, {"p": 1}])),
    "unknown": st.just(1),
}
MUTATION = st.one_of(st.none(), st.sampled_from(sorted(VALUES)).flatmap(lambda k: st.tuples(st.just(k), VALUES[k])))
FEATURE = st.one_of(st.tuples(KINDS, MUTATION).map(lambda km: {**km[0], **dict([km[1]] if km[1] else [])}), st.just(1))
NAMES = st.sampled_from(["id", "x", "label", "image"])


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    features=st.dictionaries(NAMES, FEATURE, max_size=3),
    steps=st.one_of(st.none(), st.dictionaries(st.sampled_from(["tokens", "frames"]), FEATURE, max_size=2)),
)
def test_json_schema_and_from_json_agree(features: dict[str, Any], steps: dict[str, Any] | None) -> None:
    """Whatever ``from_json`` takes the JSON Schema takes, and what it refuses the JSON Schema
    refuses too, unless for a reason beyond JSON Schema (a tensor's NumPy dtype name)."""
    doc: dict[str, Any] = {"features": features}
    if steps is not None:
        doc["sequence_features"] = steps
    assert valid(doc) == loads(doc) or beyond_reach(doc), (doc, [e.message for e in VALIDATOR.iter_errors(doc)])


def test_a_stored_schema_is_its_own_json_form() -> None:
    """What `catalog show` relies on to print a stored schema unparsed (commit.handles.schema_doc):
    the JSON a Schema stores parses back to itself, and its fingerprint is that text's, for every
    schema the tests declare and every one the format-1 fixture (old code) stored."""
    docs = [json.loads(json.dumps(Schema.from_json(d).to_json())) for d in declared_schemas() if loads(d)]
    assert len(docs) > 200, len(docs)
    for doc in docs:
        schema = Schema.from_json(doc)
        assert (schema.to_json(), schema.fingerprint) == (doc, fingerprint(doc)), doc
    with sqlite3.connect(ROOT / "tests" / "fixtures" / "manifest-format1" / "catalog.db") as db:
        rows = db.execute("SELECT schema_json, fingerprint FROM schema_versions").fetchall()
    for text, stored in rows:
        assert (Schema.from_json(text).to_json(), fingerprint(json.loads(text))) == (json.loads(text), stored)
