"""Inferred schemas with defaults (issue 30 item 3.7): a CSV column with empty cells became
`optional`, so it reached `tf_dataset` ragged and Keras could not take it. `register --infer`
and `inspect --schema-out` take `--default FEATURE=VALUE` and `--fill-missing`, and the
inference summary says which features became optional and why."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli import app
from catalog.tfrecord import RecordWriter, encode_example


def run(*args: Any) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    return Catalog.init(tmp_path / "cat")


@pytest.fixture
def sales(tmp_path: Path) -> Path:
    path = tmp_path / "sales.csv"
    path.write_text("region,price,units,note\nnorth,1.5,3,a\nsouth,,4,\neast,2.5,,c\n")
    return path


def test_the_summary_says_which_features_are_optional_and_why(cat: Catalog, sales: Path) -> None:
    result = run("-C", cat.root, "register", "s", "--infer", sales)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    said = [line for line in lines if line.startswith("optional: ")]
    assert said == [
        f"optional: {name!r} (no value in 1 of 3 records): it reads as None, and ragged in tf_dataset; "
        f"--default {name}=VALUE or --fill-missing gives it a default"
        for name in ("price", "units", "note")
    ]
    doc = json.loads(run("-C", cat.root, "register", "t", "--infer", sales, "--json").stdout)
    assert doc["optional"] == {"price": 1, "units": 1, "note": 1}


def test_default_gives_a_feature_its_value_where_a_record_has_none(cat: Catalog, sales: Path) -> None:
    result = run("-C", cat.root, "register", "s", "--infer", sales, "--default", "price=-1", "--default", "note=none")
    assert result.exit_code == 0, result.output
    schema = cat.dataset("s").schema.to_json()["features"]
    assert schema["price"] == {"dtype": "float32", "default": -1.0}
    assert schema["note"] == {"dtype": "string", "default": "none"}
    assert schema["units"] == {"dtype": "int64", "optional": True}  # not asked: still optional, and said
    said = [line for line in result.stdout.splitlines() if line.startswith("optional:")]
    assert len(said) == 1 and said[0].startswith("optional: 'units' (no value in 1 of 3 records)")
    rows = list(cat.dataset("s").read())
    assert [(r["price"], r["note"], r["units"]) for r in rows] == [(1.5, "a", 3), (-1.0, "none", 4), (2.5, "c", None)]


def test_fill_missing_gives_every_optional_feature_its_zero(cat: Catalog, sales: Path) -> None:
    result = run("-C", cat.root, "register", "s", "--infer", sales, "--fill-missing", "--default", "units=-1")
    assert result.exit_code == 0, result.output
    assert "optional:" not in result.stdout
    features = cat.dataset("s").schema.features
    assert {n: (f.default, f.optional) for n, f in features.items()} == {
        "region": (None, False), "price": (0.0, False), "units": (-1, False), "note": ("", False),
    }  # fmt: skip
    commit = cat.register_inferred("py", [sales], defaults={"price": -1.0}, fill_missing=True)
    assert commit.records == 3 and cat.dataset("py").schema.features["price"].default == -1.0


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ("nope=1", "error: feature 'nope': --default names no inferred feature (features: region, price, units, note)"),
        ("price=abc", "error: feature 'price': bad default 'abc': not a float32 value"),
        ("units=1.5", "error: feature 'units': bad default"),
    ],
)
def test_a_bad_default_is_one_line_and_registers_nothing(cat: Catalog, sales: Path, option: str, said: str) -> None:
    result = run("-C", cat.root, "register", "s", "--infer", sales, "--default", option)
    assert result.exit_code == 1 and result.stderr.startswith(said) and result.stderr.count("\n") == 1, result.output
    assert cat.list() == []


def test_default_without_a_value_or_with_a_schema_is_refused(cat: Catalog, sales: Path, tmp_path: Path) -> None:
    assert run("-C", cat.root, "register", "s", "--infer", sales, "--default", "price").exit_code == 2
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"features": {"x": {"dtype": "int64"}}}))
    refused = run("-C", cat.root, "register", "s", "--schema", schema, "--default", "x=1")
    words = " ".join(refused.output.replace("│", " ").split())  # the usage error's box, unwrapped
    assert refused.exit_code == 2 and "--default/--fill-missing apply to --infer's schema" in words
    assert cat.list() == []


def test_inspect_schema_out_takes_defaults(sales: Path, tmp_path: Path) -> None:
    out = tmp_path / "schema.json"
    result = run("inspect", sales, "--schema-out", out, "--default", "price=-1")
    assert result.exit_code == 0, result.output
    written = json.loads(out.read_text())["features"]
    assert written["price"] == {"dtype": "float32", "default": -1.0}
    assert "optional: 'units' (no value in 1 of 3 records)" in result.stdout
    doc = json.loads(run("inspect", sales, "--fill-missing", "--json").stdout)
    assert doc["optional"] == {} and doc["schema"]["features"]["units"] == {"dtype": "int64", "default": 0}


def test_tfrecord_inputs_say_their_optional_features_and_take_defaults(tmp_path: Path) -> None:
    path = tmp_path / "part.tfrecord"
    with RecordWriter(path) as w:
        w.write(encode_example({"id": 1, "score": 0.5, "tags": [b"a", b"b"]}))
        w.write(encode_example({"id": 2}))
        w.write(encode_example({"id": 3, "tags": [b"c"]}))  # lists of two lengths: variable-length
    result = run("inspect", path)
    assert result.exit_code == 0, result.output
    assert "optional: 'score' (absent from some records)" in result.stdout
    out = tmp_path / "schema.json"
    assert run("inspect", path, "--fill-missing", "--schema-out", out).exit_code == 0
    features = json.loads(out.read_text())["features"]
    assert features["score"] == {"dtype": "float32", "default": 0.0}
    assert features["tags"]["default"] == []  # a list feature reads as empty where it is absent, as TF's VarLen


def test_a_default_makes_the_column_dense_for_keras(cat: Catalog, sales: Path, tf: Any) -> None:
    """What the seed-002 user wanted: `default_value=-1`, a dense float column, not a ragged one."""
    cat.register_inferred("s", [sales], defaults={"price": "-1"})
    batch = next(iter(cat.dataset("s").tf_dataset(3, columns=["price"])))
    assert not isinstance(batch["price"], tf.RaggedTensor) and not isinstance(batch["price"], tf.SparseTensor)
    assert batch["price"].numpy().tolist() == [1.5, -1.0, 2.5]


@pytest.mark.parametrize(
    ("dtype", "text", "stored"),
    [
        ("string", '["a", "b"]', ["a", "b"]),
        ("bytes", '["a", "b"]', [b"a", b"b"]),
        ("int64", "[1, 2]", [1, 2]),
    ],
)
def test_a_default_of_a_list_is_json_whatever_its_dtype(dtype: str, text: str, stored: list[Any]) -> None:
    """A text list's default is JSON, as a number list's is (README: lists as JSON)."""
    from catalog.inputs.infer import with_default
    from catalog.schema.features import parse_feature

    feat = parse_feature("tags", {"dtype": dtype, "shape": [None], "optional": True})
    assert with_default(feat, text).default == stored


def test_a_number_default_too_large_for_any_float_is_refused() -> None:
    from catalog.errors import CatalogError
    from catalog.inputs.infer import with_default
    from catalog.schema.features import parse_feature

    with pytest.raises(CatalogError, match="out of float32 range"):
        with_default(parse_feature("x", {"dtype": "float32", "optional": True}), "1e400")
