"""SequenceExample datasets: context and sequence features, checked against TensorFlow's own
SequenceExample messages and parser both ways."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from catalog import Catalog, RecordWriter, Schema
from catalog.cli import app
from catalog.errors import AppendError, CodecError, SchemaError, ValidationError
from catalog.schema import to_tf_feature_spec
from catalog.schema.features import parse_feature
from catalog.schema.sequences import (
    LENGTH_SUFFIX,
    SequenceCodec,
    StepInference,
    is_sequence_record,
    pad_batch,
    parse_step,
    sequence_spec,
    split_record,
)

if os.environ.get("CI") == "true":
    import tensorflow as tf
else:
    tf = pytest.importorskip("tensorflow", reason="tensorflow is not installed (pip install tensorflow-cpu)")

SCHEMA = {
    "features": {"id": {"dtype": "int64"}, "lang": {"dtype": "string"}},
    "sequence_features": {
        "tokens": {"dtype": "int64"},
        "frames": {"dtype": "float32", "shape": [2]},
        "words": {"dtype": "string", "shape": [None]},
    },
}
runner = CliRunner()


def run(*args: Any) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def tf_record(row: dict[str, Any]) -> bytes:
    """The row as TensorFlow's own SequenceExample message writes it."""
    ex = tf.train.SequenceExample()
    ex.context.feature["id"].int64_list.value.append(row["id"])
    ex.context.feature["lang"].bytes_list.value.append(row["lang"].encode())
    for name in ("tokens", "frames", "words"):  # a list with no steps is kept as an empty list
        ex.feature_lists.feature_list.get_or_create(name)
    for t in row["tokens"]:
        ex.feature_lists.feature_list["tokens"].feature.add().int64_list.value.append(t)
    for f in row["frames"]:
        ex.feature_lists.feature_list["frames"].feature.add().float_list.value.extend(f)
    for w in row["words"]:
        ex.feature_lists.feature_list["words"].feature.add().bytes_list.value.extend(x.encode() for x in w)
    return bytes(ex.SerializeToString())


def rows_strategy() -> Any:
    word = st.text(alphabet="abcxyz\u00e9", max_size=4)
    floats = st.floats(width=32, allow_nan=False, allow_infinity=False)
    return st.fixed_dictionaries(
        {
            "id": st.integers(-(2**63), 2**63 - 1),
            "lang": st.text(max_size=5).filter(lambda s: not any("\ud800" <= c <= "\udfff" for c in s)),
            "tokens": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=6),
            "frames": st.lists(st.lists(floats, min_size=2, max_size=2), max_size=4),
            "words": st.lists(st.lists(word, max_size=3), max_size=4),
        }
    )


def assert_row(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got["id"] == want["id"] and got["lang"] == want["lang"]
    np.testing.assert_array_equal(got["tokens"], np.array(want["tokens"], dtype=np.int64))
    np.testing.assert_array_equal(got["frames"], np.array(want["frames"], dtype=np.float32).reshape(-1, 2))
    assert got["words"] == want["words"]


@settings(max_examples=60, deadline=None)
@given(rows_strategy())
def test_tensorflow_and_the_catalog_read_each_others_records(row: dict[str, Any]) -> None:
    schema = Schema.from_json(SCHEMA)
    mine = schema.encode(row)
    assert tf.train.SequenceExample.FromString(mine) == tf.train.SequenceExample.FromString(tf_record(row))
    assert_row(schema.decode(tf_record(row)), row)
    assert_row(schema.decode(mine), row)
    context, sequences = tf.io.parse_single_sequence_example(
        mine,
        to_tf_feature_spec(schema.feature_spec(), tf),
        to_tf_feature_spec(schema.sequence_feature_spec(), tf),
    )
    assert int(context["id"]) == row["id"]
    np.testing.assert_array_equal(sequences["tokens"].numpy(), np.array(row["tokens"], dtype=np.int64))
    np.testing.assert_array_equal(sequences["frames"].numpy(), np.array(row["frames"], dtype=np.float32).reshape(-1, 2))
    assert [[w.decode() for w in step] for step in sequences["words"].to_list()] == row["words"]


def test_the_schema_json_round_trips_and_plain_schemas_keep_their_form() -> None:
    schema = Schema.from_json(SCHEMA)
    assert Schema.from_json(schema.to_json()) == schema
    assert schema.to_json()["sequence_features"]["words"] == {"dtype": "string", "shape": [None]}
    plain = Schema.from_json({"features": {"id": {"dtype": "int64"}}})
    assert plain.to_json() == {"features": {"id": {"dtype": "int64"}}}  # fingerprints of old schemas unchanged


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"features": {"a": {"dtype": "int64"}}, "sequence_features": {"a": {"dtype": "int64"}}}, "both a context"),
        ({"features": {}, "sequence_features": {"s": {"dtype": "int64", "default": 0}}}, "declares one step"),
        ({"features": {}, "sequence_features": {"s": {"dtype": "int64", "optional": True}}}, "declares one step"),
        ({"features": {}, "sequence_features": {"s": {"dtype": "uint8", "encoding": "tensor"}}}, "declares one step"),
        ({"features": {}, "sequence_features": []}, "map names to feature specs"),
    ],
)
def test_bad_sequence_declarations_are_one_line(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        Schema.from_json(doc)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"id": 1, "lang": "x", "tokens": "abc"}, "feature 'tokens': a sequence feature's value is a list of steps"),
        ({"id": 1, "lang": "x", "frames": [[1.0, 2.0, 3.0]]}, "feature 'frames': expected shape"),
        ({"id": 1, "lang": "x", "tokens": [1.5]}, "feature 'tokens': expected int64"),
        ({"id": 1, "lang": "x", "other": [1]}, "feature 'other': not in the schema"),
    ],
)
def test_rows_that_break_the_sequence_schema_are_refused(row: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as e:
        Schema.from_json(SCHEMA).encode(row)
    assert message in f"feature {e.value.feature!r}: {e.value.reason}"


def test_records_that_break_the_sequence_schema_are_refused() -> None:
    schema = Schema.from_json(SCHEMA)
    ex = tf.train.SequenceExample.FromString(tf_record({"id": 1, "lang": "x", "tokens": [], "frames": [], "words": []}))
    ex.feature_lists.feature_list["frames"].feature.add().float_list.value.extend([1.0, 2.0, 3.0])
    with pytest.raises(ValidationError, match="step 0: expected 2 values, got 3"):
        schema.decode(ex.SerializeToString())
    ex = tf.train.SequenceExample.FromString(tf_record({"id": 1, "lang": "x", "tokens": [], "frames": [], "words": []}))
    ex.feature_lists.feature_list["tokens"].feature.add().bytes_list.value.append(b"a")
    with pytest.raises(ValidationError, match="expected int64, got bytes_list"):
        schema.validate_record(ex.SerializeToString())
    ex.feature_lists.feature_list["unknown"].feature.add()
    with pytest.raises(ValidationError, match="not in the schema"):
        schema.decode(ex.SerializeToString())


ROWS = [
    {"id": 1, "lang": "en", "tokens": [1, 2, 3], "frames": [[1, 2], [3, 4]], "words": [["a", "b"], [], ["c"]]},
    {"id": 2, "lang": "de", "tokens": [], "frames": [], "words": []},
    {"id": 3, "lang": "fr", "tokens": [9], "frames": [[0.5, 1.5]], "words": [["x"]]},
]


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    cat = Catalog.init(tmp_path / "cat")
    cat.register("s", SCHEMA).append_rows(ROWS)
    return cat


def test_a_dataset_of_sequences_reads_back_in_every_reader(cat: Catalog) -> None:
    ds = cat.dataset("s")
    for got, want in zip(ds.read(), ROWS, strict=True):
        assert_row(got, want)
    (batch,) = ds.batches(8)
    assert batch["tokens"].dtype == object and list(batch["tokens"][0]) == [1, 2, 3]
    (padded,) = ds.batches(8, pad=True)
    assert padded["tokens"].tolist() == [[1, 2, 3], [0, 0, 0], [9, 0, 0]]
    assert padded["tokens/length"].tolist() == [3, 0, 1]
    assert padded["frames"].shape == (3, 2, 2) and padded["words"].shape == (3, 3, 2)
    assert padded["words"][0].tolist() == [["a", "b"], ["", ""], ["c", ""]]
    src = ds.source()
    assert_row(src[2], ROWS[2])
    assert cat.verify().ok


def test_tf_dataset_gives_ragged_steps(cat: Catalog) -> None:
    (batch,) = cat.dataset("s").tf_dataset(batch_size=8)
    assert batch["tokens"].to_list() == [[1, 2, 3], [], [9]]
    assert batch["frames"].to_list() == [[[1.0, 2.0], [3.0, 4.0]], [], [[0.5, 1.5]]]
    assert batch["words"].to_list() == [[[b"a", b"b"], [], [b"c"]], [], [[b"x"]]]
    assert batch["id"].numpy().tolist() == [1, 2, 3]


def test_cat_prints_json_that_appends_back_equal(cat: Catalog, tmp_path: Path) -> None:
    out = run("-C", cat.root, "cat", "s")
    assert out.exit_code == 0, out.stderr
    lines = out.stdout.splitlines()
    assert json.loads(lines[0])["frames"] == [[1.0, 2.0], [3.0, 4.0]]
    (tmp_path / "again.jsonl").write_text(out.stdout)
    cat.register("t", SCHEMA).append_files([tmp_path / "again.jsonl"])
    assert list(cat.dataset("t").records()) == list(cat.dataset("s").records())


def test_schema_inferred_from_tensorflow_written_files(tmp_path: Path) -> None:
    path = tmp_path / "seq.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as w:
        for row in ROWS:
            w.write(tf_record(row))
    out = run("inspect", path, "--schema-out", tmp_path / "schema.json")
    assert out.exit_code == 0, out.stderr
    inferred = json.loads((tmp_path / "schema.json").read_text())
    assert inferred["sequence_features"] == {
        "frames": {"dtype": "float32", "shape": [2]},
        "tokens": {"dtype": "int64"},
        "words": {"dtype": "string", "shape": [None]},
    }
    cat = Catalog.init(tmp_path / "cat")
    cat.adopt("adopted", [path])  # a new name: the inferred schema
    for got, want in zip(cat.dataset("adopted").read(), ROWS, strict=True):
        assert_row(got, want)


def test_migrations_on_sequence_features(cat: Catalog, tmp_path: Path) -> None:
    ds = cat.dataset("s")
    ds.migrate(add=["chars:sequence:string"], rename=["tokens:ids"], drop=["frames"])
    ds = cat.dataset("s")
    assert set(ds.schema.sequence) == {"ids", "words", "chars"}
    first = next(iter(ds.read()))
    assert list(first["ids"]) == [1, 2, 3] and first["chars"] == [] and "frames" not in first
    scripts = tmp_path / "migrations" / "s"
    scripts.mkdir(parents=True)  # numbered after the quick migration above, 0001_quick
    (scripts / "0002_cast_ids.py").write_text(
        "from catalog.migrate import CastField\n"
        "operations = [CastField('ids', {'dtype': 'float32', 'sequence': True})]\n"
    )
    (scripts / "0003_add_n.py").write_text(
        "from catalog.migrate import AddField\n"
        "operations = [AddField('n', {'dtype': 'int64', 'sequence': True}, fn=lambda row: list(range(row['id'])))]\n"
    )
    cat.dataset("s").migrate(tmp_path / "migrations")
    ds = cat.dataset("s")
    assert ds.schema.sequence["ids"].dtype == "float32"
    assert [list(r["ids"]) for r in ds.read()] == [[1.0, 2.0, 3.0], [], [9.0]]
    assert [list(r["n"]) for r in ds.read()] == [[0], [0, 1], [0, 1, 2]]
    assert_row(next(iter(ds.read(version=2))), ROWS[0])  # the old version, in its schema


def test_a_sequence_feature_cannot_be_cast_to_context() -> None:
    from catalog.errors import MigrationError
    from catalog.migrate import CastField
    from catalog.ops.migrations.operations import evolve

    with pytest.raises(MigrationError, match="between a context and a sequence feature"):
        evolve(Schema.from_json(SCHEMA), [CastField("tokens", {"dtype": "int64"})])


def test_a_bad_sequence_record_in_an_input_names_it(tmp_path: Path) -> None:
    cat = Catalog.init(tmp_path / "cat")
    cat.register("s", SCHEMA)
    bad = tf.train.SequenceExample.FromString(tf_record(ROWS[0]))
    bad.feature_lists.feature_list["frames"].feature.add().float_list.value.append(1.0)
    path = tmp_path / "in.tfrecord"
    with RecordWriter(path) as w:
        w.write(tf_record(ROWS[1]))
        w.write(bad.SerializeToString())
    with pytest.raises(AppendError, match=r"record 1: feature 'frames': step 2: expected 2 values, got 1"):
        cat.dataset("s").append_files([path])
    assert cat.dataset("s").version == 1


# --------------------------------------------------------------------------- catalog.schema.sequences, unit by unit


def test_parse_step_refuses_what_a_step_cannot_declare() -> None:
    spec = {"dtype": "string", "shape": [None]}
    assert parse_step("w", spec) == parse_feature("w", spec)
    declares = r"a sequence feature declares one step \(description, dtype, names, shape\)"
    with pytest.raises(SchemaError, match=rf"^feature 'w': {declares}; not default, optional$"):
        parse_step("w", {"dtype": "int64", "default": 0, "optional": True})


def test_the_codec_round_trips_steps_and_split_record_finds_the_context() -> None:
    steps = {name: parse_step(name, spec) for name, spec in SCHEMA["sequence_features"].items()}
    codec = SequenceCodec(steps)
    row = {"tokens": [1, 2], "frames": [[0.5, 1.5]], "words": [["a"], []]}
    context = Schema.from_json({"features": SCHEMA["features"]}).encode({"id": 1, "lang": "x"})
    record = context + codec.encode(row)
    assert is_sequence_record(record) and not is_sequence_record(context)
    ctx, lists = split_record(record)
    assert ctx == context
    decoded = codec.decode(lists)
    assert decoded["tokens"].tolist() == [1, 2] and decoded["frames"].tolist() == [[0.5, 1.5]]
    assert decoded["words"] == [["a"], []]
    assert codec.encode({}) == b""  # no steps of any feature: no feature_lists field
    not_steps = r"^feature 'tokens': a sequence feature's value is a list of steps, got int$"
    with pytest.raises(ValidationError, match=not_steps):
        codec.encode({"tokens": 3})


def test_split_record_refuses_other_messages() -> None:
    with pytest.raises(CodecError, match=r"^not a tf.train.SequenceExample: top-level field 3 at byte 0$"):
        split_record(b"\x1a\x00")
    with pytest.raises(CodecError, match=r"^not a tf\.train\.SequenceExample: "):
        split_record(b"\x12\x03\x0a\xff\xff")


def test_spec_inference_and_padding() -> None:
    steps = {name: parse_step(name, spec) for name, spec in SCHEMA["sequence_features"].items()}
    assert sequence_spec(steps) == {
        "tokens": {"kind": "FixedLenSequenceFeature", "shape": [], "dtype": "int64"},
        "frames": {"kind": "FixedLenSequenceFeature", "shape": [2], "dtype": "float32"},
        "words": {"kind": "RaggedFeature", "dtype": "string"},
    }
    inference = StepInference()
    plain = Schema.from_json({"features": {"n": {"dtype": "int64"}}}).encode({"n": 1})  # an Example: no steps
    for record in (tf_record(ROWS[0]), tf_record(ROWS[1]), plain):
        inference.add(record)
    inferred = {f.name: f.dtype for f in inference.features()}
    assert inferred == {"tokens": "int64", "frames": "float32", "words": "string"}
    column = np.empty(2, dtype=object)
    column[:] = [np.array([1, 2, 3]), np.array([], dtype=np.int64)]
    padded = pad_batch({"tokens": steps["tokens"]}, {"tokens": column, "id": np.array([7, 8])})
    assert padded["tokens"].tolist() == [[1, 2, 3], [0, 0, 0]]
    assert padded["tokens" + LENGTH_SUFFIX].tolist() == [3, 0] and padded["id"].tolist() == [7, 8]
