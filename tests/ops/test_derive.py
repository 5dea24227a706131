"""filter and map into new datasets, lineage and refresh (catalog/ops/derive.py): the derived
rows equal those computed here from the source's rows, in order, whatever the worker count;
failures name the source shard and record and leave no dataset behind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from catalog import Catalog
from catalog.errors import DatasetNotFoundError, RowChangeError, SchemaError, UsageError
from catalog.ops import derive

SCHEMA = {
    "features": {
        "id": {"dtype": "int64", "shape": []},
        "label": {"dtype": "int64", "shape": [], "names": ["cat", "dog", "bird"]},
        "name": {"dtype": "string", "shape": []},
        "score": {"dtype": "float32", "shape": [], "optional": True},
    }
}


def _rows(start: int, n: int) -> list[dict[str, Any]]:
    return [
        {"id": i, "label": i % 3, "name": f"n{i}", "score": None if i % 4 == 0 else i / 10}
        for i in range(start, start + n)
    ]


def _source(tmp_path: Any, **kw: Any) -> tuple[Any, Any]:
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("src", SCHEMA, **kw)
    for k, split in enumerate(["train", "train", "test", "train"]):
        ds.append_rows(_rows(k * 10, 10), split=split)
    return cat, cat.dataset("src")


def with_length(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "label": row["label"], "length": len(row["name"])}


def doubled(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    keep = batch["id"] % 2 == 0  # fewer rows out than in: a batched map may
    return {"id": batch["id"][keep] * 2, "label": batch["label"][keep]}


def fails_on_13(row: dict[str, Any]) -> dict[str, Any]:
    if row["id"] == 13:
        raise KeyError("no such thing")
    return {"id": row["id"]}


def wrong_type(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "x": "text" if row["id"] == 21 else 1}


def test_filter_keeps_the_matching_rows_in_order_with_the_schema_and_splits(tmp_path, backend):
    cat, src = _source(tmp_path)
    read = list(src.read())
    report = src.filter("label = 'dog' OR score IS NULL", into="dogs")
    dogs = cat.dataset("dogs")
    expected = [r["id"] for r in read if r["label"] == 1 or r["score"] is None]
    assert [r["id"] for r in dogs.read()] == expected and report.records == len(expected)
    assert dogs.schema.to_json() == src.schema.to_json()  # class names and all
    assert [r["id"] for r in dogs.read(split="test")] == [i for i in expected if 20 <= i < 30]
    assert dogs.history()[-1].kind == "derive"


def test_worker_count_changes_nothing(tmp_path):
    cat, src = _source(tmp_path)
    src.filter("id > 3", into="one", workers=1)
    src.filter("id > 3", into="two", workers=2)
    one = [Path(s.path).read_bytes() for s in cat.dataset("one").shards()]
    two = [Path(s.path).read_bytes() for s in cat.dataset("two").shards()]
    assert one == two and [s.split for s in cat.dataset("one").shards()] == [
        s.split for s in cat.dataset("two").shards()
    ]


def test_filter_a_version_and_a_split(tmp_path):
    cat, src = _source(tmp_path)
    src.append_rows(_rows(100, 5))
    src.filter("id >= 0", into="old", version=5, split="train")
    assert [r["id"] for r in cat.dataset("old").read()] == [*range(20), *range(30, 40)]


def test_map_by_row_infers_the_schema_and_keeps_what_passes_through(tmp_path):
    cat, src = _source(tmp_path)
    report = src.map(with_length, into="lens", workers=2)
    lens = cat.dataset("lens")
    assert list(lens.read())[:2] == [{"id": 0, "label": 0, "length": 2}, {"id": 1, "label": 1, "length": 2}]
    assert lens.schema.features["label"].names == ("cat", "dog", "bird")
    assert report.records == 40 and [s.split for s in lens.shards()] == ["train", "train", "test", "train"]
    entry = lens.lineage()[0]
    assert (entry.operation, entry.function, entry.source, entry.source_version) == (
        "map", f"{__name__}:with_length", "src", 5,
    )  # fmt: skip
    assert entry.code_hash is not None and entry.code_hash.startswith("sha256:")


def test_map_batched_and_with_a_given_schema(tmp_path):
    cat, src = _source(tmp_path)
    given = {"features": {"id": {"dtype": "int64", "shape": []}, "label": {"dtype": "int64", "shape": []}}}
    src.map(doubled, into="dbl", batched=True, schema=given)
    assert [r["id"] for r in cat.dataset("dbl").read()] == [i * 2 for i in range(40) if i % 2 == 0]


def test_a_failing_function_names_shard_and_record_and_leaves_no_dataset(tmp_path):
    cat, src = _source(tmp_path)
    with pytest.raises(RowChangeError, match=r"\.tfrecord: record 3: map's function raised KeyError: 'no such thing'"):
        src.map(fails_on_13, into="bad", schema={"features": {"id": {"dtype": "int64", "shape": []}}})
    with pytest.raises(DatasetNotFoundError):
        cat.dataset("bad")
    two = {"features": {"id": {"dtype": "int64", "shape": []}, "x": {"dtype": "int64", "shape": []}}}
    with pytest.raises(RowChangeError, match=r"record 1: map's output: feature 'x': "):
        src.map(wrong_type, into="bad", schema=two)
    with pytest.raises(SchemaError, match=r"map's first outputs: feature 'x': values of different types.*give schema="):
        src.map(wrong_type, into="bad")
    with pytest.raises(DatasetNotFoundError):
        cat.dataset("bad")
    assert not list((tmp_path / "cat" / "data").glob("bad/*.tfrecord"))


def bad_output_then_raises(row: dict[str, Any]) -> dict[str, Any]:
    if row["id"] == 15:
        raise ValueError("late")
    return {"id": row["id"], "x": "text" if row["id"] in (13, 14) else 1}


def test_a_row_map_names_the_first_record_that_fails_however_it_fails(tmp_path):
    _cat, src = _source(tmp_path)
    two = {"features": {"id": {"dtype": "int64", "shape": []}, "x": {"dtype": "int64", "shape": []}}}
    with pytest.raises(RowChangeError, match=r"\.tfrecord: record 3: map's output: feature 'x': "):
        src.map(bad_output_then_raises, into="bad", schema=two, workers=1)
    with pytest.raises(RowChangeError, match=r"\.tfrecord: record 2: map's output: feature 'extra': not in the schema"):
        src.map(with_extra_at_12, into="bad", schema=two, workers=1)
    assert not list((tmp_path / "cat" / "data").glob("bad/*.tfrecord"))


def with_extra_at_12(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "x": 1} | ({"extra": 1} if row["id"] == 12 else {})


def test_bad_requests_are_one_line(tmp_path):
    _cat, src = _source(tmp_path)
    src.filter("id = 1", into="taken")
    with pytest.raises(Exception, match="dataset 'taken' already exists"):
        src.filter("id = 2", into="taken")
    with pytest.raises(UsageError, match="map takes a function of a row, not str"):
        src.map("id", into="x")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"--fn 'nomodule_zz:f': cannot import 'nomodule_zz'"):
        derive.load_function("nomodule_zz:f")
    with pytest.raises(UsageError, match="name a function as module:function"):
        derive.load_function("justaname")


def test_lineage_chains_back_and_refresh_applies_the_operation_to_appended_rows(tmp_path):
    cat, src = _source(tmp_path)
    src.filter("label = 'dog'", into="dogs", token="t-dogs")
    again = src.filter("label = 'dog'", into="dogs", token="t-dogs")
    assert again.duplicate and again.version == 2
    cat.dataset("dogs").map(with_length, into="dog_lens")
    chain = cat.dataset("dog_lens").lineage()
    assert [(e.dataset, e.operation, e.source) for e in chain] == [
        ("dog_lens", "map", "dogs"),
        ("dogs", "filter", "src"),
    ]

    src.append_rows(_rows(40, 6))
    dogs = cat.dataset("dogs")
    report = dogs.refresh()
    assert report.refreshed and report.records == 2
    assert [r["id"] for r in dogs.read()] == [i for i in range(46) if i % 3 == 1]
    assert dogs.refresh().version is None  # up to date: nothing committed
    assert dogs.lineage()[0].source_version == src.info().version


def test_lineage_says_when_its_source_was_dropped_or_its_name_reused(tmp_path):
    """The chain ends at a source that is gone; its entry says so, so that nobody takes a new
    dataset registered under the old name since for the rows this one came from."""
    cat, src = _source(tmp_path)
    read = src.info().version
    src.filter("id > 5", into="big")
    cat.dataset("big").filter("id > 9", into="bigger")
    assert [e.source_gone for e in cat.dataset("bigger").lineage()] == [False, False]
    cat.drop("src")
    chain = cat.dataset("bigger").lineage()
    assert [(e.source, e.source_gone) for e in chain] == [("big", False), ("src", True)]
    assert f"of src version {read} (that dataset has been dropped since): where id > 5" in chain[-1].describe()
    assert chain[-1].to_json()["source_gone"] is True
    cat.register("src", {"features": {"other": {"dtype": "int64"}}})  # a namesake, not the source
    assert [e.source_gone for e in cat.dataset("bigger").lineage()] == [False, True]


def test_refresh_is_refused_when_the_source_changed_otherwise_or_the_function_did(tmp_path, monkeypatch):
    cat, src = _source(tmp_path)
    src.filter("id > 5", into="big")
    src.map(with_length, into="lens")
    src.delete("id = 7")
    with pytest.raises(UsageError, match=r"changed more than by appends since version 5 .*derive it again"):
        cat.dataset("big").refresh()
    monkeypatch.setattr(derive, "code_hash", lambda fn: "sha256:other")
    with pytest.raises(UsageError, match=f"{__name__}:with_length changed since 'lens' was derived"):
        cat.dataset("lens").refresh()
    with pytest.raises(UsageError, match="'src' was not derived from another dataset"):
        src.refresh()


def test_compressed_sources_and_tensorflow_reads_the_derived_files(tmp_path, tf):
    cat, src = _source(tmp_path, compression="gzip")
    src.filter("id < 12", into="small")
    small = cat.dataset("small")
    assert {s.compression for s in small.shards()} == {"gzip"}
    ids = []
    for s in small.shards():
        for raw in tf.data.TFRecordDataset(s.path, compression_type="GZIP"):
            ids.append(tf.train.Example.FromString(raw.numpy()).features.feature["id"].int64_list.value[0])
    assert ids == list(range(12))


def test_a_lambda_runs_in_this_process_whatever_the_workers(tmp_path):
    cat, src = _source(tmp_path)
    report = src.map(lambda r: {"id": r["id"] + 1}, into="plus", workers=2)
    assert report.records == 40 and [r["id"] for r in cat.dataset("plus").read()][:3] == [1, 2, 3]
    assert src.delete(lambda r: r["id"] == 5, workers=2).rows == 1
    with pytest.raises(UsageError, match=r"refresh: .*<lambda> is a lambda or a nested function"):
        cat.dataset("plus").refresh()  # lineage names it, but a lambda cannot be imported again


def _program(schema: dict[str, Any]) -> Any:
    op = derive.Operation(derive.MAP, fn=with_length)
    return derive._Program(
        derive.DeriveJob(op, schema, schema, "src", 0, 0, "none", "", "dst", "p", False, "", None, False)
    )


def test_a_row_map_decodes_a_batch_into_the_rows_decode_makes_one_by_one():
    schema = {"features": {**SCHEMA["features"], "raw": {"dtype": "bytes", "optional": True}}}
    schema["features"]["kept"] = {"dtype": "int64", "default": 7}
    program = _program(schema)
    rows = [{**r, "raw": None if r["id"] % 3 else b"\x00x"} for r in _rows(0, 12)] + [
        {"id": 99, "label": 2, "name": "é"}
    ]
    records = [program.source.encode(r | ({"kept": 1} if r["id"] == 5 else {})) for r in rows]
    one_by_one = [program.source.decode(r) for r in records]
    batched = program.rows(records)
    assert batched == one_by_one
    assert [{k: type(v) for k, v in r.items()} for r in batched] == [
        {k: type(v) for k, v in r.items()} for r in one_by_one
    ]


def test_a_row_map_of_tensors_or_of_a_bad_batch_decodes_record_by_record():
    program = _program({"features": {"id": {"dtype": "int64"}, "vec": {"dtype": "float32", "shape": [2]}}})
    assert program.rows([program.source.encode({"id": 1, "vec": [0.5, 1.5]})]) is None
    program = _program(SCHEMA)
    assert program.rows([program.source.encode({"id": 1, "label": 0, "name": "a"}), b"not a record"]) is None
    steps = {"features": {"id": {"dtype": "int64"}}, "sequence_features": {"tok": {"dtype": "int64"}}}
    program = _program(steps)
    assert program.rows([program.source.encode({"id": 1, "tok": [[1], [2]]})]) is None


def test_a_maps_statistics_are_those_of_its_records_decoded(tmp_path):
    cat, src = _source(tmp_path)
    schema = {
        "features": {"id": {"dtype": "int64"}, "length": {"dtype": "int64"}, "d": {"dtype": "int64", "default": 4}}
    }
    src.map(with_length_only, into="row", schema=schema, workers=1)
    src.map(doubled_ids, into="batch", schema=schema, batched=True, workers=1)
    for name, n in (("row", 40), ("batch", 40)):
        features = {f["feature"]: f for f in cat.dataset(name).stats().to_json()["features"]}
        assert (features["d"]["present"], features["d"]["filled"]) == (n, 0)  # the default is in every record
        assert features["length"]["values"]["max"] == 3 and features["id"]["present"] == n


def with_length_only(row: dict[str, Any]) -> dict[str, Any]:
    return {"id": row["id"], "length": len(row["name"])}


def doubled_ids(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    return {"id": batch["id"] * 2, "length": np.array([len(t) for t in batch["name"]])}


def exits_on_13(row: dict[str, Any]) -> dict[str, Any]:
    if row["id"] == 13:
        raise SystemExit(4)  # sys.exit in the user's function: a failure of it like any other
    return {"id": row["id"]}


def exits_on_first(row: dict[str, Any]) -> dict[str, Any]:
    raise SystemExit("bye")


def test_a_function_that_exits_is_a_failure_naming_the_shard_and_record(tmp_path):
    cat, src = _source(tmp_path)
    one = {"features": {"id": {"dtype": "int64", "shape": []}}}
    for workers in (1, 2):
        with pytest.raises(RowChangeError, match=r"\.tfrecord: record 3: map's function raised SystemExit: 4$"):
            src.map(exits_on_13, into="bad", schema=one, workers=workers)
    with pytest.raises(RowChangeError, match=r"\.tfrecord: record 0: map's function raised SystemExit: bye$"):
        src.map(exits_on_first, into="bad")  # while its schema is inferred
    with pytest.raises(DatasetNotFoundError):
        cat.dataset("bad")


def test_a_function_failing_while_the_schema_is_inferred_names_the_shard_and_record(tmp_path):
    _cat, src = _source(tmp_path)
    third = src.shards()[1].path  # records 10-19: id 13 is its record 3
    with pytest.raises(RowChangeError) as e:
        src.map(fails_on_13, into="bad")
    assert str(e.value) == f"{third}: record 3: map's function raised KeyError: 'no such thing'"


def a_number_as_name(row: dict[str, Any]) -> dict[Any, Any]:
    return {"id": row["id"], 7: 1}


def test_a_feature_name_that_is_not_text_is_named_as_such(tmp_path):
    _cat, src = _source(tmp_path)
    said = r"record 0: map's function returned a feature name that is not text: 7 \(int\)$"
    with pytest.raises(RowChangeError, match=said):
        src.map(a_number_as_name, into="bad")
    one = {"features": {"id": {"dtype": "int64", "shape": []}}}
    with pytest.raises(RowChangeError, match=said):
        src.map(a_number_as_name, into="bad", schema=one, workers=1)


def test_a_process_builds_each_jobs_schema_once():
    first, again = _program(SCHEMA), _program(dict(SCHEMA))
    assert first.source is again.source and first.target is again.target
    reordered = {"features": dict(reversed(SCHEMA["features"].items()))}  # another record layout
    assert list(_program(reordered).source.features) == list(reversed(SCHEMA["features"]))


def ragged_batch(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    return {"id": batch["id"], "n": np.zeros(2, dtype=np.int64)}


def scalar_column(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    return {"id": batch["id"], "n": 5}


def test_a_batched_map_s_bad_first_output_names_the_shard_and_records(tmp_path):
    """Found while its schema is inferred, as in its jobs: where, and what, never append_rows'
    words (a batch's rows run on into the next shards: its first record and how many)."""
    cat, src = _source(tmp_path)
    first = src.shards()[0].path
    with pytest.raises(RowChangeError) as e:
        src.map(ragged_batch, into="bad", batched=True)
    said = "map's output: columns of different lengths: id 40, n 2"
    assert str(e.value) == f"{first}: records 0 on (the first 40 rows): {said}"
    with pytest.raises(RowChangeError) as e:
        src.map(scalar_column, into="bad", batched=True)
    said = "map's output: feature 'n': a dict of columns holds a list or array per feature, got int"
    assert str(e.value) == f"{first}: records 0 on (the first 40 rows): {said}"
    with pytest.raises(DatasetNotFoundError):
        cat.dataset("bad")


def test_a_row_map_keeps_the_sequence_features_it_passes_through(tmp_path, tf):
    """A SequenceExample dataset mapped (a feature added to its context) stays one: the steps that
    pass through keep their declaration, and TensorFlow reads SequenceExamples."""
    cat = Catalog.init(tmp_path / "cat")
    schema = {"features": {"id": {"dtype": "int64"}}, "sequence_features": {"tokens": {"dtype": "int64"}}}
    src = cat.register("seq", schema)
    src.append_rows([{"id": i, "tokens": [[i]] * (i % 3)} for i in range(6)])
    src.map(with_step_count, into="counted")
    out = cat.dataset("counted")
    assert out.schema.to_json() == {
        "features": {"id": {"dtype": "int64"}, "steps": {"dtype": "int64"}},
        "sequence_features": {"tokens": {"dtype": "int64"}},
    }
    rows = [(r["id"], r["steps"], list(r["tokens"])) for r in out.read()]
    assert rows[:3] == [(0, 0, []), (1, 1, [1]), (2, 2, [2, 2])]
    parsed = [tf.train.SequenceExample.FromString(raw.numpy()) for raw in tf.data.TFRecordDataset(out.files())]
    assert [len(p.feature_lists.feature_list["tokens"].feature) for p in parsed] == [0, 1, 2, 0, 1, 2]


def with_step_count(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "steps": len(row["tokens"])}


def test_refresh_of_a_lambda_s_map_says_it_cannot_be_found_again(tmp_path):
    cat, src = _source(tmp_path)
    src.map(lambda row: {"id": row["id"]}, into="ids")
    src.append_rows(_rows(40, 2))
    said = (
        f"refresh: the map's function {__name__}:test_refresh_of_a_lambda_s_map_says_it_cannot_be_found_again."
        "<locals>.<lambda> is a lambda or a nested function, which cannot be imported again: map again "
        "with a function defined at a module's top level"
    )
    with pytest.raises(UsageError) as e:
        cat.dataset("ids").refresh()
    assert str(e.value) == said


def identity(row: dict[str, Any]) -> dict[str, Any]:
    return row


def identity_batch(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    return batch


def negated(row: dict[str, Any]) -> dict[str, Any]:
    """The same features, new values of the same types."""
    return {"k": -row["k"], "t": row["t"] * 2, "id": row["id"]}


TENSORS = {
    "features": {
        "id": {"dtype": "int64"},
        "k": {"dtype": "int8", "shape": [], "encoding": "tensor"},
        "t": {"dtype": "float32", "shape": [2], "encoding": "tensor"},
        "m": {"dtype": "uint8", "shape": [None, 2], "encoding": "tensor"},
    }
}


@pytest.mark.parametrize("fn", [identity, identity_batch, negated])
def test_a_map_keeps_the_tensor_declarations_of_what_passes_through(tmp_path: Path, fn: Any) -> None:
    """Features whose outputs the source's declaration takes keep it (a tensor's encoding and
    dtype), as inference alone would not: it reads an int8 scalar as an int64."""
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("src", TENSORS)
    rows = [
        {"id": i, "k": i - 3, "t": np.array([i, -i], dtype=np.float32), "m": np.full((i % 3, 2), i, dtype=np.uint8)}
        for i in range(6)
    ]
    ds.append_rows(rows)
    ds.map(fn, into="out", batched=fn is identity_batch)
    out = cat.dataset("out").schema.to_json()["features"]
    declared = cat.dataset("src").schema.to_json()["features"]
    want = declared if fn is not negated else {k: declared[k] for k in ("k", "t", "id")}
    assert {name: out[name] for name in want} == want
    got = list(cat.dataset("out").read())
    assert [int(r["k"]) for r in got] == [(r["k"] if fn is not negated else -r["k"]) for r in rows]


def forgets_return(row: dict[str, Any]) -> Any:
    row["id"] > 3  # noqa: B015  (the bug under test: no return)


def says_yes(row: dict[str, Any]) -> Any:
    return "yes"


@pytest.mark.parametrize("fn", [forgets_return, says_yes])
def test_a_row_function_must_answer_with_a_bool(tmp_path: Path, fn: Any) -> None:
    """A filter (or delete) by a function that returns None or text is one line naming the
    record, nothing registered: it must not quietly keep nothing, or everything."""
    cat, src = _source(tmp_path)
    with pytest.raises(RowChangeError, match=r"record.*must return a bool .*got (NoneType|str)"):
        src.filter(fn, into="out")
    with pytest.raises(DatasetNotFoundError):
        cat.dataset("out")
    versions = src.info().version
    with pytest.raises(RowChangeError, match="must return a bool"):
        src.delete(fn)
    assert src.info().version == versions
