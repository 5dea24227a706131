"""TensorFlow's reading of real-world records, matched here (issue 11, section 2).

A ``Feature`` with no list type set (``tf.train.Feature()``, how TFX writes a missing
value) is absent to TensorFlow: a default fills it, a required feature is missing.
Every test builds its records with TensorFlow and compares with ``tf.io.parse_example``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from typer.testing import CliRunner

from catalog import Catalog, RecordWriter, Schema, ValidationError
from catalog.cli import app
from catalog.migrate import AddField, CastField, RenameField, compile_steps, evolve
from catalog.ops.ingest import _encode_line
from catalog.schema import decode_kinds, row_to_json, to_tf_feature_spec
from catalog.tfrecord import decode_sequence_example, proto
from catalog.tfrecord import example as wire

runner = CliRunner()


def _example(tf: Any, **features: Any) -> bytes:
    """A serialized Example; a value of None is ``tf.train.Feature()`` (no list type)."""
    ex = tf.train.Example()
    for name, values in features.items():
        f = ex.features.feature[name]
        if values is None:
            f.SetInParent()
        elif isinstance(values, tuple):  # (kind, values): an explicitly typed, maybe empty, list
            getattr(f, values[0]).value.extend(values[1])
            getattr(f, values[0]).SetInParent()
        elif isinstance(values[0], bytes):
            f.bytes_list.value.extend(values)
        elif isinstance(values[0], float):
            f.float_list.value.extend(values)
        else:
            f.int64_list.value.extend(values)
    data: bytes = ex.SerializeToString()
    return data


def _tf_parse(tf: Any, schema: Schema, records: list[bytes]) -> dict[str, Any]:
    spec = to_tf_feature_spec(schema.feature_spec(), tf)
    parsed = tf.io.parse_example(tf.constant(records), spec)
    return {k: (v.values if isinstance(v, tf.SparseTensor) else v).numpy() for k, v in parsed.items()}


OPTIONAL = Schema.from_json({"features": {"a": {"dtype": "int64", "default": 7}, "b": {"dtype": "int64"}}})
REQUIRED = Schema.from_json({"features": {"a": {"dtype": "int64"}, "b": {"dtype": "int64"}}})


def test_featureless_entry_takes_the_default_as_in_tf(tf: Any) -> None:
    records = [_example(tf, a=None, b=[1]), _example(tf, a=[3], b=[2])] * 40  # enough for the batch path
    theirs = _tf_parse(tf, OPTIONAL, records)
    assert theirs["a"].tolist()[:2] == [7, 3]
    for rec in records[:2]:
        OPTIONAL.validate_record(rec)
    assert [OPTIONAL.decode(r)["a"] for r in records] == theirs["a"].tolist()
    batch = OPTIONAL.decode_batch(records)
    assert batch["a"].tolist() == theirs["a"].tolist()
    assert batch["b"].tolist() == theirs["b"].tolist()
    assert OPTIONAL._codec.decode_batch_generic(records)["a"].tolist() == theirs["a"].tolist()


def test_featureless_entry_is_missing_for_a_required_feature_as_in_tf(tf: Any) -> None:
    record = _example(tf, a=None, b=[1])
    with pytest.raises(tf.errors.InvalidArgumentError, match="required but could not be found"):
        _tf_parse(tf, REQUIRED, [record])
    for check in (REQUIRED.validate_record, REQUIRED.decode, lambda r: REQUIRED.decode_batch([r] * 3)):
        with pytest.raises(ValidationError, match="missing") as info:
            check(record)
        assert info.value.feature == "a"


def test_featureless_entry_of_a_name_outside_the_schema_is_accepted_as_in_tf(tf: Any) -> None:
    schema = Schema.from_json({"features": {"b": {"dtype": "int64"}}})
    record = _example(tf, b=[1], extra=None)
    assert _tf_parse(tf, schema, [record])["b"].tolist() == [1]
    schema.validate_record(record)
    assert schema.decode(record) == {"b": 1}


def test_inference_treats_a_featureless_entry_as_absent(tf: Any) -> None:
    records = [_example(tf, a=None, b=[1]), _example(tf, a=[3], b=[2]), _example(tf, b=[4], c=None)]
    schema = Schema.infer(records)
    assert set(schema.features) == {"a", "b"}  # c is never present
    assert schema.features["a"].dtype == "int64"
    assert schema.features["a"].shape == ()
    for rec in records:
        schema.validate_record(rec)
    _tf_parse(tf, schema, records)  # TF takes the inferred spec too


def test_renaming_onto_a_featureless_entry_keeps_the_value_as_in_tf(tf: Any) -> None:
    # c is absent (no list type) in the record, so the schema does not have it; renaming
    # a to c must give c = a's value, whatever the order of the entries.
    schema = Schema.from_json({"features": {"a": {"dtype": "int64"}}})
    ops = [RenameField("a", "c")]
    chain = evolve(schema, ops)
    step = compile_steps(ops, chain)
    for record in (_example(tf, a=[5], c=None), _example(tf, c=None, a=[5])):
        schema.validate_record(record)
        out = step(record, 0)
        assert chain[-1].decode(out) == {"c": 5}
        assert _tf_parse(tf, chain[-1], [out])["c"].tolist() == [5]


def test_empty_typed_list_keeps_its_type_as_in_tf(tf: Any) -> None:
    # an empty float_list is present (TF checks its type); a wrong type is an error
    record = _example(tf, a=("float_list", []), b=[1])
    with pytest.raises(tf.errors.InvalidArgumentError, match="Data types don't match"):
        _tf_parse(tf, OPTIONAL, [record])
    with pytest.raises(ValidationError, match="stored as float_list"):
        OPTIONAL.validate_record(record)
    shape0 = Schema.from_json({"features": {"a": {"dtype": "float32", "shape": [0]}, "b": {"dtype": "int64"}}})
    assert _tf_parse(tf, shape0, [record])["a"].shape == (1, 0)
    assert np.asarray(shape0.decode(record)["a"]).shape == (0,)


# --------------------------------------------------------------------------- inference invents nothing


def test_inferred_empty_float_list_stays_float(tf: Any) -> None:
    records = [_example(tf, v=("float_list", [])), _example(tf, v=("float_list", []))]
    schema = Schema.infer(records)
    assert schema.features["v"].to_json() == {"dtype": "float32", "shape": [0]}
    for rec in records:
        schema.validate_record(rec)
    assert _tf_parse(tf, schema, records)["v"].shape == (2, 0)


def test_inferred_sometimes_missing_scalar_is_optional_without_a_default(tf: Any) -> None:
    records = [_example(tf, x=[1.5], id=[1]), _example(tf, id=[2]), _example(tf, x=None, id=[3])] * 30
    schema = Schema.infer(records)
    assert schema.features["x"].to_json() == {"dtype": "float32", "optional": True}
    assert schema.feature_spec()["x"] == {"kind": "VarLenFeature", "dtype": "float32"}
    # the absent values are None, not a made-up 0.0
    assert [schema.decode(r)["x"] for r in records[:3]] == [1.5, None, None]
    for batch in (schema.decode_batch(records), schema._codec.decode_batch_generic(records)):
        assert batch["x"].dtype == object
        assert batch["x"].tolist() == [1.5, None, None] * 30
    theirs = tf.io.parse_example(tf.constant(records), to_tf_feature_spec(schema.feature_spec(), tf))["x"]
    assert tf.sparse.to_dense(theirs, default_value=-1.0).numpy()[:3].tolist() == [[1.5], [-1.0], [-1.0]]
    # and a row without it encodes to a record without it
    assert schema.encode({"id": 4}) == _example(tf, id=[4])
    assert schema.decode(schema.encode({"id": 4, "x": None})) == {"id": 4, "x": None}


def test_absent_variable_length_feature_reads_as_empty_as_in_tf(tf: Any) -> None:
    schema = Schema.from_json({"features": {"v": {"dtype": "int64", "shape": [None]}, "b": {"dtype": "int64"}}})
    records = [_example(tf, v=None, b=[1]), _example(tf, b=[2]), _example(tf, v=[4, 5], b=[3])] * 30
    theirs = tf.io.parse_example(tf.constant(records), to_tf_feature_spec(schema.feature_spec(), tf))["v"]
    assert theirs.values.numpy().tolist()[:2] == [4, 5]
    for rec in records[:3]:
        schema.validate_record(rec)
    want = [[], [], [4, 5]] * 30
    assert [schema.decode(r)["v"].tolist() for r in records] == want
    assert [v.tolist() for v in schema.decode_batch(records)["v"]] == want


# --------------------------------------------------------------------------- property: inference accepts its file

_KINDS = ("int64_list", "float_list", "bytes_list")
_VALUES = {
    "int64_list": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3),
    "float_list": st.lists(st.floats(width=32), max_size=3),
    "bytes_list": st.lists(st.one_of(st.binary(max_size=4), st.text(max_size=4).map(str.encode)), max_size=3),
}


@st.composite
def _files(draw: st.DrawFn) -> list[bytes]:
    """Records of a few features, each of one list type; any may be absent or a bare Feature()."""
    kinds = draw(st.dictionaries(st.sampled_from("abcdef"), st.sampled_from(_KINDS), max_size=4))
    records = []
    for _ in range(draw(st.integers(1, 6))):
        ex = proto.Example()
        for name, kind in kinds.items():
            how = draw(st.sampled_from(("values", "values", "absent", "bare")))
            if how == "bare":
                ex.features.feature[name].SetInParent()
            elif how == "values":
                lst = getattr(ex.features.feature[name], kind)
                lst.SetInParent()
                lst.value.extend(draw(_VALUES[kind]))
        records.append(ex.SerializeToString())
    return records


@settings(max_examples=150, deadline=None)
@given(records=_files())
def test_the_inferred_schema_accepts_its_own_file(records: list[bytes]) -> None:
    schema = Schema.infer(records)
    for rec in records:
        schema.validate_record(rec)
        row = schema.decode(rec)
        assert schema.decode(schema.encode(row)).keys() == row.keys()
    schema.decode_batch(records * 20)
    assert Schema.infer([decode_kinds(r) for r in records]) == schema  # inspect's route


def _write(path: Path, records: list[bytes]) -> Path:
    with RecordWriter(path) as w:
        for r in records:
            w.write(r)
    return path


def _inspect_json(path: Path) -> dict[str, Any]:
    result = runner.invoke(app, ["inspect", str(path), "--json"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_inspect_infers_what_the_file_holds(tmp_path: Path) -> None:
    ex = proto.Example()
    ex.features.feature["empty"].float_list.SetInParent()
    ex.features.feature["bare"].SetInParent()  # absent to TF: never a feature of its own
    ex.features.feature["id"].int64_list.value.append(1)
    other = proto.Example()
    other.features.feature["empty"].float_list.SetInParent()
    path = _write(tmp_path / "f.tfrecord", [ex.SerializeToString(), other.SerializeToString()])
    schema = _inspect_json(path)["schema"]
    assert schema == {
        "features": {"empty": {"dtype": "float32", "shape": [0]}, "id": {"dtype": "int64", "optional": True}}
    }
    Schema.from_json(schema).validate_record(ex.SerializeToString())


# --------------------------------------------------------------------------- records that are not Examples


def _sequence_examples(tf: Any, n: int) -> list[bytes]:
    out = []
    for i in range(n):
        seq = tf.train.SequenceExample()
        seq.context.feature["id"].int64_list.value.append(i)
        steps = seq.feature_lists.feature_list["tokens"].feature
        for t in range(i % 3 + 1):
            steps.add().int64_list.value.extend([t, t + 1])
        out.append(seq.SerializeToString())
    return out


def test_a_row_level_migration_keeps_feature_lists(tf: Any) -> None:
    records = _sequence_examples(tf, 6)
    schema = Schema.from_json({"features": {"id": {"dtype": "int64"}}})
    ops = [AddField("twice", {"dtype": "int64"}, fn=lambda row: row["id"] * 2)]
    chain = evolve(schema, ops)
    step = compile_steps(ops, chain)
    for record in records:
        schema.validate_record(record)
        out = step(record, 0)
        chain[-1].validate_record(out)
        context, lists = decode_sequence_example(out)
        assert lists == decode_sequence_example(record)[1]
        parsed = tf.io.parse_single_sequence_example(
            out,
            context_features={"twice": tf.io.FixedLenFeature([], tf.int64)},
            sequence_features={"tokens": tf.io.VarLenFeature(tf.int64)},
        )
        assert parsed[0]["twice"].numpy() == 2 * context["id"][0]


def _event_file(tf: Any, directory: Path) -> Path:
    writer = tf.summary.create_file_writer(str(directory))
    with writer.as_default():
        tf.summary.write("loss", tf.constant(0.5), step=1)  # the core op: TensorBoard is not needed
    writer.close()
    (path,) = directory.glob("events.out.tfevents.*")
    return path


def test_append_refuses_records_that_are_not_examples(tf: Any, tmp_path: Path) -> None:
    events = _event_file(tf, tmp_path / "logs")
    root = tmp_path / "cat"
    assert runner.invoke(app, ["init", str(root)]).exit_code == 0
    (tmp_path / "s.json").write_text('{"features": {}}')
    assert runner.invoke(app, ["-C", str(root), "register", "d", "--schema", str(tmp_path / "s.json")]).exit_code == 0
    result = runner.invoke(app, ["-C", str(root), "append", "d", str(events)])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"error: {events}: record 0: not a tf.train.Example: its top-level field 1 at byte 0 is fixed64; "
        "an Example holds only field 1 (features, length-delimited)"
    )
    show = json.loads(runner.invoke(app, ["-C", str(root), "show", "d", "--json"]).stdout)
    assert show["version"] == 1  # nothing registered


def test_inspect_names_the_message(tf: Any, tmp_path: Path) -> None:
    events = _inspect_json(_event_file(tf, tmp_path / "logs"))
    assert events["message"] is None
    assert events["schema"] is None
    assert events["note"].startswith("records are not tf.train.Example (record 0: not a tf.train.Example: its top")
    seq = _inspect_json(_write(tmp_path / "seq.tfrecord", _sequence_examples(tf, 4)))
    assert seq["message"] == "tf.train.SequenceExample"
    # the context as features, each feature list as a sequence feature (one step declared)
    assert seq["schema"] == {
        "features": {"id": {"dtype": "int64"}},
        "sequence_features": {"tokens": {"dtype": "int64", "shape": [2]}},
    }
    assert "sequence_features their feature lists" in seq["note"]
    plain = _inspect_json(_write(tmp_path / "ex.tfrecord", [_example(tf, id=[1])]))
    assert (plain["message"], plain["note"]) == ("tf.train.Example", "")


def test_a_row_level_migration_refuses_fields_it_cannot_keep() -> None:
    # an unknown field inside a Feature: TF and protobuf ignore it, a quick migration keeps it
    # (it moves entries as they are), a row-level one would drop it: it refuses instead
    feature = wire.int64_feature([3]) + b"\x20\x01"
    record = wire.example_from_entries([wire.map_entry(b"id", feature)])
    schema = Schema.from_json({"features": {"id": {"dtype": "int64"}}})
    assert schema.decode(record) == {"id": 3}
    quick = [RenameField("id", "key")]
    assert feature in compile_steps(quick, evolve(schema, quick))(record, 0)
    ops = [AddField("twice", {"dtype": "int64"}, fn=lambda row: row["id"] * 2)]
    with pytest.raises(ValidationError, match=r"^holds protobuf fields a tf\.train\.Example does not define"):
        compile_steps(ops, evolve(schema, ops))(record, 0)


# --------------------------------------------------------------------------- tensors: one rule with scalars


def _tensor_schema(dtype: str, shape: list[int | None]) -> Schema:
    return Schema.from_json({"features": {"t": {"dtype": dtype, "shape": shape, "encoding": "tensor"}}})


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_tensor_values_beyond_the_float_range_are_refused_like_scalars(dtype: str) -> None:
    big = float(np.finfo(dtype).max) * 4
    schema = _tensor_schema(dtype, [3])
    over = re.escape(repr(big))
    with pytest.raises(ValidationError, match=rf"^feature 't': value {over} at index \[1\] is out of {dtype} range$"):
        schema.encode({"t": np.array([1.0, big, 2.0])})
    with pytest.raises(ValidationError, match=rf"^feature 't': value -{over} at index \[0\] is out of {dtype} range"):
        schema.encode({"t": [-big, 0.0, 0.0]})  # a JSON row's list
    with pytest.raises(ValidationError, match=r"out of float16 range"):
        _tensor_schema("float16", [1]).encode({"t": np.array([70000])})  # an integer too
    scalar = Schema.from_json({"features": {"s": {"dtype": "float32"}}})
    with pytest.raises(ValidationError, match="out of float32 range"):
        scalar.encode({"s": float(np.finfo("float32").max) * 4})
    # infinities and NaN are values of every float dtype: kept, as for scalars
    row = schema.decode(schema.encode({"t": np.array([np.inf, -np.inf, np.nan])}))
    assert np.isinf(row["t"][:2]).all() and np.isnan(row["t"][2])


def test_floats_round_to_the_nearest_value_in_tensors_as_in_scalars() -> None:
    # the rule: within range, a float is stored as the nearest value of the feature's dtype
    scalar = Schema.from_json({"features": {"s": {"dtype": "float32"}}})
    assert scalar.decode(scalar.encode({"s": 0.1}))["s"] == float(np.float32(0.1))
    # float32's largest value as cat prints it (3.4028235e+38, above it in float64) rounds back to it
    top = float(np.finfo(np.float32).max)
    assert scalar.decode(scalar.encode({"s": 3.4028235e38}))["s"] == top
    assert _tensor_schema("float32", []).decode(_tensor_schema("float32", []).encode({"t": 3.4028235e38}))["t"] == top
    with pytest.raises(ValidationError, match="out of float16 range"):
        _tensor_schema("float16", []).encode({"t": 65520.0})  # halfway to the next power of two: inf
    assert _tensor_schema("float16", []).decode(_tensor_schema("float16", []).encode({"t": 65519.0}))["t"] == 65504
    for dtype in ("float16", "float32"):
        t = _tensor_schema(dtype, [1])
        assert t.decode(t.encode({"t": [0.1]}))["t"].tolist() == [float(np.dtype(dtype).type(0.1))]


def test_complex128_is_stored_as_complex64_by_the_same_rule() -> None:
    schema = _tensor_schema("complex64", [2])
    row = schema.decode(schema.encode({"t": np.array([1 + 2j, 0.1 - 0.5j])}))
    assert row["t"].tolist() == np.array([1 + 2j, 0.1 - 0.5j]).astype(np.complex64).tolist()
    with pytest.raises(ValidationError, match=r"value \(1e\+300\+0j\) at index \[1\] is out of complex64 range"):
        schema.encode({"t": np.array([0, 1e300 + 0j])})


def test_booleans_are_not_integers() -> None:
    scalar = Schema.from_json({"features": {"n": {"dtype": "int64"}, "v": {"dtype": "int64", "shape": [None]}}})
    with pytest.raises(ValidationError, match=r"^feature 'n': expected int64, got bool True$"):
        scalar.encode({"n": True, "v": []})
    with pytest.raises(ValidationError, match=r"^feature 'v': expected int64, got bool False$"):
        scalar.encode({"n": 1, "v": [1, False]})
    with pytest.raises(ValidationError, match=r"^feature 't': cannot store bool as int64$"):
        _tensor_schema("int64", [2]).encode({"t": [True, False]})
    flags = _tensor_schema("bool", [2])
    assert flags.decode(flags.encode({"t": [True, False]}))["t"].tolist() == [True, False]


def test_append_refuses_json_true_in_an_int64_field(tmp_path: Path) -> None:
    root = tmp_path / "cat"
    assert runner.invoke(app, ["init", str(root)]).exit_code == 0
    (tmp_path / "s.json").write_text('{"features": {"n": {"dtype": "int64"}}}')
    assert runner.invoke(app, ["-C", str(root), "register", "d", "--schema", str(tmp_path / "s.json")]).exit_code == 0
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"n": 1}\n{"n": true}\n')
    result = runner.invoke(app, ["-C", str(root), "append", "d", str(rows)])
    assert result.exit_code == 1
    assert result.stderr.strip().endswith("feature 'n': expected int64, got bool True")


# --------------------------------------------------------------------------- cat -> append round trip

_TENSOR_DTYPES = [
    "int8",
    "uint16",
    "int64",
    "uint64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "bool",
]
_LIST_VALUES = {
    "int64": st.integers(-(2**63), 2**63 - 1),
    "float32": st.floats(width=32, allow_nan=False),
    "string": st.text(max_size=4),
    "bytes": st.binary(max_size=4),
}


@st.composite
def _schema_and_rows(draw: st.DrawFn) -> tuple[Schema, list[dict[str, Any]]]:
    specs: dict[str, dict[str, Any]] = {}
    for i in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            shape = draw(st.lists(st.one_of(st.none(), st.integers(0, 2)), max_size=3))
            specs[f"t{i}"] = {"dtype": draw(st.sampled_from(_TENSOR_DTYPES)), "shape": shape, "encoding": "tensor"}
        else:
            shape = draw(st.sampled_from([[], [0], [2], [2, 1], [None]]))
            specs[f"l{i}"] = {"dtype": draw(st.sampled_from(sorted(_LIST_VALUES))), "shape": shape}
        if draw(st.booleans()):
            next(reversed(specs.values()))["optional"] = True
    schema = Schema.from_json({"features": specs})
    rows = []
    for _ in range(draw(st.integers(1, 3))):
        row: dict[str, Any] = {}
        for name, f in schema.features.items():
            if f.optional and draw(st.booleans()):
                continue
            dims = tuple(d if d is not None else draw(st.integers(0, 2)) for d in f.shape)
            if f.tensor:
                elements = None  # NaN payloads and signs are not JSON: "NaN" reads back as numpy's own NaN
                if f.np_dtype.kind == "f":
                    elements = st.floats(allow_nan=False, width=8 * f.np_dtype.itemsize)
                if f.np_dtype.kind == "c":
                    elements = st.complex_numbers(allow_nan=False, width=64 if f.dtype == "complex64" else 128)
                row[name] = draw(hnp.arrays(f.np_dtype, dims, elements=elements))
            else:
                count = dims[0] if f.is_varlen else (f.size if f.shape else 1)
                values = draw(st.lists(_LIST_VALUES[f.dtype], min_size=count, max_size=count))
                row[name] = values if f.shape else values[0]
        rows.append(row)
    return schema, rows


@settings(max_examples=200, deadline=None)
@given(case=_schema_and_rows())
def test_cat_output_appends_back_to_the_same_records(case: tuple[Schema, list[dict[str, Any]]]) -> None:
    schema, rows = case
    for i, row in enumerate(rows):
        record = schema.encode(row)
        line = json.dumps(row_to_json(schema, schema.decode(record)), ensure_ascii=False)  # what cat prints
        assert _encode_line(schema, line, Path("rows.jsonl"), i + 1, i) == record  # what append stores


def test_cat_then_append_complex_and_empty_tensors(tmp_path: Path) -> None:
    spec = {
        "c": {"dtype": "complex64", "shape": [2], "encoding": "tensor"},
        "e": {"dtype": "float32", "shape": [None, 2], "encoding": "tensor"},
        "u": {"dtype": "uint16", "shape": [None], "encoding": "tensor"},
    }
    root = tmp_path / "cat"
    assert runner.invoke(app, ["init", str(root)]).exit_code == 0
    (tmp_path / "s.json").write_text(json.dumps({"features": spec}))
    for name in ("a", "b"):
        assert (
            runner.invoke(app, ["-C", str(root), "register", name, "--schema", str(tmp_path / "s.json")]).exit_code == 0
        )
    catalog = Catalog.open(root)
    rows = [{"c": np.array([1 + 2j, -0.5j]), "e": np.zeros((0, 2)), "u": np.zeros(0, np.uint16)}]
    catalog.dataset("a").append_rows(rows)
    printed = runner.invoke(app, ["-C", str(root), "cat", "a"])
    assert printed.exit_code == 0, printed.output
    assert json.loads(printed.stdout) == {"c": [[1.0, 2.0], [0.0, -0.5]], "e": {"shape": [0, 2], "values": []}, "u": []}
    (tmp_path / "rows.jsonl").write_text(printed.stdout)
    result = runner.invoke(app, ["-C", str(root), "append", "b", str(tmp_path / "rows.jsonl")])
    assert result.exit_code == 0, result.output
    assert list(catalog.dataset("b").records()) == list(catalog.dataset("a").records())


def test_inspect_tells_text_from_bytes(tmp_path: Path) -> None:
    records = [wire.encode_example({"v": [b"base64:AP8="]}), wire.encode_example({"v": [b"\x00\xff"]})]
    path = _write(tmp_path / "f.tfrecord", records)
    examples = _inspect_json(path)["examples"]
    assert examples == [{"v": ["base64:AP8="]}, {"v": [{"base64": "AP8="}]}]
    text = runner.invoke(app, ["inspect", str(path)]).stdout
    assert 'example 0: {"v": ["base64:AP8="]}' in text
    assert 'example 1: {"v": [{"base64": "AP8="}]}' in text


def test_a_cast_keeps_an_absent_optional_feature_absent() -> None:
    schema = Schema.from_json({"features": {"x": {"dtype": "int64", "optional": True}, "id": {"dtype": "int64"}}})
    ops = [CastField("x", {"dtype": "float32", "optional": True})]
    chain = evolve(schema, ops)
    step = compile_steps(ops, chain)
    assert chain[-1].decode(step(schema.encode({"id": 1}), 0)) == {"id": 1, "x": None}
    assert chain[-1].decode(step(schema.encode({"id": 1, "x": 3}), 0)) == {"id": 1, "x": 3.0}
    required = [CastField("x", {"dtype": "float32"})]
    with pytest.raises(ValidationError, match=r"^feature 'x': missing"):
        compile_steps(required, evolve(schema, required))(schema.encode({"id": 1}), 0)
