"""Schemas inferred from data: every input format, and the property that matters most, that the
schema inferred from a file always accepts that file (and reads it back as it was)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog import Catalog, Schema
from catalog.errors import CatalogError, SchemaError
from catalog.tfrecord.example import encode_example

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# Values a row may hold, by the feature's kind: what JSON, CSV and Parquet can all carry.
FLOAT32 = st.floats(width=32, allow_nan=False, allow_infinity=False)
TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
INT = st.integers(-(2**63), 2**63 - 1)
KINDS: dict[str, st.SearchStrategy[Any]] = {
    "int": INT,
    "float": FLOAT32,
    "text": TEXT,
    "ints": st.lists(INT, min_size=1, max_size=4),
    "floats": st.lists(FLOAT32, min_size=1, max_size=4),
}


@st.composite
def tables(draw: st.DrawFn) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Feature kinds, then rows of them; some features missing from some rows."""
    names = draw(st.lists(st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True), min_size=1, max_size=5, unique=True))
    kinds = {n: draw(st.sampled_from(sorted(KINDS))) for n in names}
    sometimes = {n for n in names if draw(st.booleans())}
    rows = []
    for _ in range(draw(st.integers(1, 12))):
        row = {n: draw(KINDS[k]) for n, k in kinds.items() if n not in sometimes or draw(st.booleans())}
        rows.append(row)
    return kinds, rows


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        a = a.tolist()
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=1e-6) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _check_round_trip(cat: Catalog, name: str, path: Path, rows: list[dict[str, Any]]) -> None:
    commit = cat.register_inferred(name, [path])
    assert commit.records == len(rows)
    back = list(cat.dataset(name).read())
    for want, got in zip(rows, back, strict=True):
        for key, value in want.items():
            assert _same(got[key], value), (key, value, got[key])
        for key in set(got) - set(want):
            assert got[key] is None  # missing from this row: optional, nothing made up


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    return Catalog.init(tmp_path / "cat")


@SETTINGS
@given(table=tables())
def test_inferred_from_json_lines_accepts_and_reads_back_the_file(cat: Catalog, tmp_path: Path, table: Any) -> None:
    kinds, rows = table
    path = tmp_path / f"rows{abs(hash(json.dumps(rows, default=str)))}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    if any(all(k not in r for r in rows) for k in kinds):
        return  # a feature no row holds is no feature
    _check_round_trip(cat, f"j{len(cat.list())}", path, rows)


@SETTINGS
@given(table=tables())
def test_inferred_from_csv_accepts_and_reads_back_the_file(cat: Catalog, tmp_path: Path, table: Any) -> None:
    kinds, rows = table
    path = tmp_path / f"rows{len(cat.list())}.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(list(kinds))
        for r in rows:
            writer.writerow([json.dumps(r[n]) if isinstance(r.get(n), list) else r.get(n, "") for n in kinds])
    name = f"c{len(cat.list())}"
    if any(all(r.get(k) in (None, "") for r in rows) for k in kinds):  # a column of empty cells only
        with pytest.raises(CatalogError, match="no value in any row: its type cannot be told"):
            cat.register_inferred(name, [path])
        assert name not in [d.name for d in cat.list()]
        return
    commit = cat.register_inferred(name, [path])  # whatever it infers, it takes the file
    assert commit.records == len(rows)
    back = list(cat.dataset(name).read())
    schema = cat.dataset(name).schema
    for want, got in zip(rows, back, strict=True):
        for key, value in want.items():
            cell = json.dumps(value) if isinstance(value, list) else str(value)
            dtype = schema.features[key].dtype
            if cell == "":
                assert got[key] is None  # an empty cell is a missing value
            elif dtype == "string":  # text as written: a number's text too
                assert got[key] == cell
            elif dtype == "int64" and not isinstance(value, list):  # text of digits reads as the number
                assert str(got[key]) == cell
            else:  # numbers, or lists of them, in their JSON form
                assert _same(got[key], json.loads(cell) if isinstance(value, list) else float(cell)), (key, cell)


@SETTINGS
@given(table=tables())
def test_inferred_from_parquet_accepts_and_reads_back_the_file(cat: Catalog, tmp_path: Path, table: Any) -> None:
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install '.[test]')")
    pq = pytest.importorskip("pyarrow.parquet")
    kinds, rows = table
    types = {"int": pa.int64(), "float": pa.float32(), "text": pa.string(), "ints": pa.list_(pa.int64()),
             "floats": pa.list_(pa.float32())}  # fmt: skip
    table_ = pa.table({n: pa.array([r.get(n) for r in rows], type=types[k]) for n, k in kinds.items()})
    path = tmp_path / f"rows{len(cat.list())}.parquet"
    pq.write_table(table_, path)
    if any(all(k not in r for r in rows) for k in kinds):
        return
    _check_round_trip(cat, f"p{len(cat.list())}", path, rows)


@SETTINGS
@given(table=tables())
def test_inferred_from_tfrecord_accepts_every_record(tmp_path: Path, table: Any) -> None:
    from catalog import RecordWriter

    _kinds, rows = table
    records = [encode_example({k: v for k, v in r.items()}) for r in rows]
    path = tmp_path / "r.tfrecord"
    with open(path, "wb") as f:
        w = RecordWriter(f)
        for rec in records:
            w.write(rec)
        w.close()
    try:
        schema = Schema.infer(records)
    except SchemaError:
        pytest.fail("records written by one encoder disagree")
    for rec in records:
        schema.validate_record(rec)


# --------------------------------------------------------------------------- by hand


def test_inference_never_invents(cat: Catalog) -> None:
    schema = Schema.infer([{"a": 1, "b": [1.5, 2.0]}, {"a": 2, "b": [], "c": "x"}])
    assert schema.to_json()["features"] == {
        "a": {"dtype": "int64"},
        "b": {"dtype": "float32", "shape": [None]},
        "c": {"dtype": "string", "optional": True},
    }
    with pytest.raises(SchemaError, match="'e': every value is an empty list"):
        Schema.infer([{"e": []}, {"e": []}])
    # true/false values: a bool tensor, as a hand-written schema holds them (issue 30; were refused)
    assert Schema.infer([{"t": True}]).to_json()["features"] == {"t": {"dtype": "bool", "encoding": "tensor"}}
    with pytest.raises(SchemaError, match="'m': values of different types: int, str"):
        Schema.infer([{"m": 1}, {"m": "x"}])


def test_inference_of_frames_and_arrays() -> None:
    pd = pytest.importorskip("pandas", reason="pandas is not installed (pip install '.[test]')")
    df = pd.DataFrame(
        {"i": [1, 2], "f": [0.5, float("nan")], "s": ["a", None], "img": [np.zeros((2, 3), np.uint8)] * 2}
    )
    assert Schema.infer(df).to_json()["features"] == {
        "i": {"dtype": "int64"},
        "f": {"dtype": "float32"},  # NaN is a float's value, not a missing one
        "s": {"dtype": "string", "optional": True},
        "img": {"dtype": "uint8", "shape": [2, 3], "encoding": "tensor"},
    }
    cols = {"x": np.zeros((3, 4), np.float32), "y": np.arange(3), "z": np.ones((3, 2, 2), np.float64)}
    assert Schema.infer(cols).to_json()["features"] == {
        "x": {"dtype": "float32", "shape": [4]},
        "y": {"dtype": "int64"},
        "z": {"dtype": "float64", "shape": [2, 2], "encoding": "tensor"},
    }


def test_csv_cells_that_only_look_like_numbers_stay_text(cat: Catalog, tmp_path: Path) -> None:
    path = tmp_path / "zip.csv"
    path.write_text("zip,n,x\n02139,1,1.5\n10001,2,2\n+7,3,x\n")
    cat.register_inferred("z", [path])
    schema = cat.dataset("z").schema.to_json()["features"]
    assert schema == {"zip": {"dtype": "string"}, "n": {"dtype": "int64"}, "x": {"dtype": "string"}}
    assert [r["zip"] for r in cat.dataset("z").read()] == ["02139", "10001", "+7"]


def test_register_infer_is_all_or_nothing(cat: Catalog, tmp_path: Path) -> None:
    good = tmp_path / "a.csv"
    good.write_text("a\n1\n")
    (tmp_path / "b.npy").write_bytes(b"")  # not NumPy at all
    with pytest.raises(CatalogError, match=r"b\.npy"):
        cat.register_inferred("d", [good, tmp_path / "b.npy"])
    assert cat.list() == []


def test_image_folder_inference_records_the_class_names(cat: Catalog, tmp_path: Path) -> None:
    image = pytest.importorskip("PIL.Image", reason="Pillow is not installed (pip install '.[test]')")
    for cls in ("zebra", "ant"):
        (tmp_path / "imgs" / cls).mkdir(parents=True)
        image.new("RGB", (2, 2)).save(tmp_path / "imgs" / cls / "0.png")
    cat.register_inferred("im", [tmp_path / "imgs"])
    features = cat.dataset("im").schema.to_json()["features"]
    assert features == {
        "image": {"dtype": "bytes", "encoding": "image", "format": "png"},
        "label": {"dtype": "int64", "names": ["ant", "zebra"]},
        "filename": {"dtype": "string"},
    }
    rows = list(cat.dataset("im").read())
    assert [(r["label"], r["filename"]) for r in rows] == [(0, "ant/0.png"), (1, "zebra/0.png")]
    assert rows[0]["image"] == (tmp_path / "imgs" / "ant" / "0.png").read_bytes()


# --------------------------------------------------------------------------- an adversary's finds


def test_a_table_with_two_columns_of_one_name_is_refused(cat: Catalog, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install '.[test]')")
    pq = pytest.importorskip("pyarrow.parquet")
    table = pa.table([pa.array([1, 2]), pa.array([3, 4])], names=["a", "a"])
    pq.write_table(table, tmp_path / "dup.parquet")
    ds = cat.register("d", {"features": {"a": {"dtype": "int64"}}})
    with pytest.raises(CatalogError, match="column 'a' appears twice"):
        ds.append_files([tmp_path / "dup.parquet"])
    with pytest.raises(CatalogError, match="column 'a' appears twice"):
        cat.register_inferred("e", [tmp_path / "dup.parquet"])
    with pytest.raises(CatalogError, match="'a': the table has two columns of this name"):
        ds.append_rows(table)
    with pytest.raises(CatalogError, match="two columns of this name"):
        Schema.infer(table)
    assert cat.dataset("d").version == 1 and [d.name for d in cat.list()] == ["d"]


def test_numbers_too_large_for_a_float_are_refused_not_made_infinite(cat: Catalog, tmp_path: Path) -> None:
    ds = cat.register("d", {"features": {"v": {"dtype": "float32"}, "l": {"dtype": "float32", "shape": [None]}}})
    (tmp_path / "a.csv").write_text("v,l\n1e400,[]\n")
    (tmp_path / "b.csv").write_text('v,l\n1,"[1e400]"\n')
    (tmp_path / "c.jsonl").write_text('{"v": 1e400, "l": []}\n')
    for name, said in (("a.csv", "column 'v'"), ("b.csv", "column 'l'"), ("c.jsonl", "record 0")):
        with pytest.raises(CatalogError, match=rf"{name}: .*{said}.*1e400 is out of float32 range"):
            ds.append_files([tmp_path / name])
    (tmp_path / "d.csv").write_text("v,l\ninf,[]\n-Infinity,[]\n")  # infinities written as such are kept
    ds.append_files([tmp_path / "d.csv"])
    assert [r["v"] for r in cat.dataset("d").read()] == [math.inf, -math.inf]
    (tmp_path / "e.csv").write_text("x\n1e400\n3.5e38\n2\n")  # no float32 holds them: the column is text
    cat.register_inferred("e", [tmp_path / "e.csv"])
    assert [r["x"] for r in cat.dataset("e").read()] == ["1e400", "3.5e38", "2"]
    with pytest.raises(SchemaError, match=r"'x': float 3\.5e\+38 is out of float32 range"):
        Schema.infer([{"x": 3.5e38}])


def test_csv_text_rules_apply_to_csv_cells_only(cat: Catalog, tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_text('tags\n"[""a""]"\n')
    (tmp_path / "m.jsonl").write_text('{"tags": ["a", "b"]}\n')
    cat.register_inferred("m", [tmp_path / "m.csv", tmp_path / "m.jsonl"])
    assert cat.dataset("m").schema.to_json()["features"] == {"tags": {"dtype": "string", "shape": [None]}}
    (tmp_path / "n.jsonl").write_text('{"id": 5}\n')
    (tmp_path / "n.csv").write_text("id\nhello\n")
    with pytest.raises(CatalogError, match="'id': values of different types: int, str"):
        cat.register_inferred("n", [tmp_path / "n.jsonl", tmp_path / "n.csv"])


def test_npz_inference_says_what_is_wrong(cat: Catalog, tmp_path: Path) -> None:
    np.savez(tmp_path / "obj.npz", v=np.array([[1], [1, 2]], dtype=object))
    np.save(tmp_path / "one.npy", np.arange(3))
    (tmp_path / "one.npz").write_bytes((tmp_path / "one.npy").read_bytes())
    with pytest.raises(CatalogError, match=r"obj\.npz: cannot read an array: Object arrays cannot be loaded"):
        cat.register_inferred("a", [tmp_path / "obj.npz"])
    with pytest.raises(CatalogError, match=r"one\.npz: holds one array, not an \.npz archive"):
        cat.register_inferred("b", [tmp_path / "one.npz"])


@pytest.mark.parametrize("dtype", ["float16", "float64"])
def test_json_lines_numbers_too_large_for_a_float_tensor(cat: Catalog, tmp_path: Path, dtype: str) -> None:
    ds = cat.register("d", {"features": {"t": {"dtype": dtype, "shape": [2], "encoding": "tensor"}}})
    (tmp_path / "a.jsonl").write_text('{"t": [1.5, 1e400]}\n')
    with pytest.raises(CatalogError, match=r"a\.jsonl: record 0 \(line 1\): feature 't': number 1e400 is out of"):
        ds.append_files([tmp_path / "a.jsonl"])
    (tmp_path / "b.jsonl").write_text('{"t": [1.5, "Infinity"]}\n')  # an infinity written as such
    ds.append_files([tmp_path / "b.jsonl"])
    assert [float(abs(v)) for v in next(iter(cat.dataset("d").read()))["t"]] == [1.5, math.inf]


# --------------------------------------------------------------------------- true/false values


BOOL_FEATURES = {
    "flag": {"dtype": "bool", "encoding": "tensor"},
    "mask": {"dtype": "bool", "shape": [3], "encoding": "tensor"},
}


def test_bool_arrays_and_scalars_are_inferred_as_bool_tensors(cat: Catalog) -> None:
    rows = [
        {"flag": np.bool_(True), "mask": np.array([True, False, True])},
        {"flag": False, "mask": np.array([False, False, True])},
    ]
    schema = Schema.infer(rows)
    assert schema.to_json()["features"] == BOOL_FEATURES  # what a hand-written bool tensor schema says
    ds = cat.register("b", schema.to_json())
    ds.append_rows(rows)
    back = list(cat.dataset("b").read())
    assert [bool(r["flag"]) for r in back] == [True, False]
    assert [r["mask"].tolist() for r in back] == [[True, False, True], [False, False, True]]
    ragged = Schema.infer([{"m": np.array([True])}, {"m": np.array([False, True])}])
    assert ragged.to_json()["features"] == {"m": {"dtype": "bool", "shape": [None], "encoding": "tensor"}}
    with pytest.raises(SchemaError, match="'m': values of different types: bool, int"):
        Schema.infer([{"m": True}, {"m": 1}])
    with pytest.raises(SchemaError, match="'m': arrays and values of different types: bool, int"):
        Schema.infer([{"m": np.array([True])}, {"m": 1}])


def test_bool_columns_of_frames_and_files_are_inferred_as_bool_tensors(cat: Catalog, tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas", reason="pandas is not installed (pip install '.[test]')")
    pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install '.[test]')")
    pq = pytest.importorskip("pyarrow.parquet")
    masks = np.array([[True, False, True], [False, False, True]])
    flags = np.array([True, False])
    df = pd.DataFrame({"flag": flags, "mask": list(masks)})
    assert Schema.infer(df).to_json()["features"] == BOOL_FEATURES
    assert Schema.infer({"flag": flags, "mask": masks}).to_json()["features"] == BOOL_FEATURES
    assert Schema.infer(pa.table({"flag": flags})).to_json()["features"] == {"flag": BOOL_FEATURES["flag"]}
    pq.write_table(pa.table({"flag": flags, "mask": masks.tolist()}), tmp_path / "b.parquet")
    np.savez(tmp_path / "b.npz", flag=flags, mask=masks)
    (tmp_path / "b.jsonl").write_text(
        '{"flag": true, "mask": [true, false, true]}\n{"flag": false, "mask": [false, false, true]}\n'
    )
    for fmt in ("parquet", "npz", "jsonl"):
        cat.register_inferred(fmt, [tmp_path / f"b.{fmt}"])
        assert cat.dataset(fmt).schema.to_json()["features"] == BOOL_FEATURES, fmt
        back = list(cat.dataset(fmt).read())
        assert [(bool(r["flag"]), r["mask"].tolist()) for r in back] == [(True, [1, 0, 1]), (False, [0, 0, 1])]
    ds = cat.register("frame", Schema.infer(df).to_json())
    ds.append_rows(df)
    assert [bool(r["flag"]) for r in cat.dataset("frame").read()] == [True, False]


def test_register_infer_takes_a_message_and_a_token(cat: Catalog, tmp_path: Path) -> None:
    """issue 30: the first day's load (`register --infer`) could carry neither -m nor --token."""
    from typer.testing import CliRunner

    from catalog.cli import app

    (tmp_path / "day1.csv").write_text("price,n\n1.5,1\n2.5,2\n")
    args = ["-C", str(cat.root), "register", "sales", "--infer", str(tmp_path / "day1.csv")]
    first = CliRunner().invoke(app, [*args, "-m", "day 1", "--token", "load-day1", "--json"])
    assert first.exit_code == 0, first.output
    commit = json.loads(first.stdout)["commit"]
    assert (commit["message"], commit["token"], commit["records"]) == ("day 1", "load-day1", 2)
    again = CliRunner().invoke(app, [*args, "--token", "load-day1", "--json"])  # a retry: the same commit
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["commit"]["version"] == commit["version"]
    assert cat.dataset("sales").info().records == 2
    other = CliRunner().invoke(app, [*args, "--token", "load-day2"])
    assert other.exit_code == 1 and other.stderr.startswith("error: dataset 'sales' already exists"), other.output
    done = cat.register_inferred("py", [tmp_path / "day1.csv"], token="t", message="m")
    assert (done.message, done.token) == ("m", "t")
    assert cat.register_inferred("py", [tmp_path / "day1.csv"], token="t").duplicate
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"features": {"n": {"dtype": "int64"}}}))
    plain = ["-C", str(cat.root), "register", "x", "--schema", str(schema), "-m", "m", "--token", "r1"]
    assert CliRunner().invoke(app, plain).exit_code == 0  # with --schema too: its first commit's
    assert (cat.dataset("x").history()[0].message, cat.dataset("x").history()[0].token) == ("m", "r1")
    again = CliRunner().invoke(app, plain)
    assert (again.exit_code, again.stdout) == (
        0,
        "already registered (token seen before): x (version 1, schema version 1)\n",
    )
