"""Migrations at the library level: every operation's values record by record, the byte-level
path against the row-level one, TensorFlow on both ends, refusals that register nothing,
script bookkeeping (edited, out of order, --to, dry run), time travel, restore, compact,
export and parallel workers.

Expected values are always computed here from the rows read at the old version, never
taken from the code under test.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import textwrap
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from catalog import Catalog, Dataset, RecordWriter, Schema, decode_example, encode_example
from catalog import manifest as mf
from catalog.manifest import INTENTS
from catalog.migrate import MigrationError
from catalog.ops.migrations.scripts import load_operations, sha256_of
from catalog.schema import SHAPE_SUFFIX, to_tf_feature_spec

pytestmark = pytest.mark.usefixtures("backend")  # the same suite on SQLite and PostgreSQL

Row = dict[str, Any]

BASE: dict[str, Any] = {
    "features": {
        "id": {"dtype": "int64"},
        "x": {"dtype": "float32"},
        "s": {"dtype": "string"},
        "b": {"dtype": "bytes"},
        "v": {"dtype": "float32", "shape": [3]},
        "tags": {"dtype": "string", "shape": [None]},
        "img": {"dtype": "uint8", "shape": [None, 3], "encoding": "tensor"},
    }
}
HEADER = (
    "import os\n\nimport numpy as np\n\n"
    "from catalog.migrate import AddField, CastField, DropField, RenameField, Transform\n\n"
)


def base_rows(n: int, start: int = 0) -> list[Row]:
    rng = np.random.default_rng(start + 11)
    return [
        {
            "id": i,
            "x": (i - 10) / 4,
            "s": f"row {i} ü",
            "b": bytes([i % 256, 255 - i % 256]),
            "v": [i, -i / 2, i * 1.5],
            "tags": [f"t{j}" for j in range(i % 4)],
            "img": rng.integers(0, 256, (i % 3, 3), dtype=np.uint8),
        }
        for i in range(start, start + n)
    ]


def canon(value: Any) -> Any:
    """A comparable form of a decoded value: arrays keep their dtype and shape."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, value.tolist())
    if isinstance(value, (list, tuple)):
        return [canon(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def canon_rows(rows: Any) -> list[dict[str, Any]]:
    return [{k: canon(v) for k, v in r.items()} for r in rows]


def write_script(mdir: Path, name: str, number: int, body: str, slug: str = "step") -> Path:
    folder = mdir / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{number:04d}_{slug}.py"
    path.write_text(HEADER + textwrap.dedent(body))
    return path


def next_number(mdir: Path, name: str) -> int:
    folder = mdir / name
    return len(list(folder.glob("*.py"))) + 1 if folder.is_dir() else 1


def migrate_body(cat: Catalog, mdir: Path, name: str, body: str, **kw: Any) -> Dataset:
    """Write the next migration of ``name`` with ``body`` (defining ``operations``), apply it,
    return a fresh handle."""
    write_script(mdir, name, next_number(mdir, name), body)
    cat.dataset(name).migrate(mdir, workers=kw.pop("workers", 1), **kw)
    return cat.dataset(name)


def data_files(cat: Catalog, name: str) -> list[str]:
    folder = cat.data_root / name
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def intents(cat: Catalog) -> list[str]:
    with mf.read_txn(cat.engine) as conn:
        return list(conn.execute(select(INTENTS.c.id)).scalars())


def raw_keys(schema: Schema) -> set[str]:
    """The feature keys every record of ``schema`` holds (tensors with unknown dims store a shape)."""
    keys = set(schema.features)
    keys |= {n + SHAPE_SUFFIX for n, f in schema.features.items() if f.stores_shape}
    return keys


def shard_of(ds: Dataset, index: int, version: int | None = None) -> tuple[str, int]:
    """(shard path, index inside the shard) of the record at global ``index``."""
    for s in ds.shards(version):
        if index < s.records:
            return s.path, index
        index -= s.records
    raise AssertionError("index past the end")


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    return Catalog.init(tmp_path / "cat")


@pytest.fixture
def mdir(tmp_path: Path) -> Path:
    return tmp_path / "migrations"


def make(cat: Catalog, name: str, schema: dict[str, Any], rows: list[Row], shard_records: int = 7) -> Dataset:
    cat.register(name, schema).append_rows(rows, shard_records=shard_records)
    return cat.dataset(name)


# --------------------------------------------------------------------------- byte-level operations


def _drop(row: Row, *names: str) -> Row:
    return {k: v for k, v in row.items() if k not in names}


def _rename(row: Row, pairs: dict[str, str]) -> Row:
    return {pairs.get(k, k): v for k, v in row.items()}


def _add_constants(row: Row) -> Row:
    return {
        **row,
        "n": -7,
        "f": 0.25,
        "t": "héllo ✓",
        "r": b"ab\x00c",
        "k": np.array([1.0, -2.5, 3.0], np.float32),
    }


BYTE_CASES: dict[str, Any] = {
    "add_constants": (
        """
        operations = [
            AddField("n", {"dtype": "int64"}, default=-7),
            AddField("f", {"dtype": "float32"}, default=0.25),
            AddField("t", {"dtype": "string"}, default="héllo ✓"),
            AddField("r", {"dtype": "bytes"}, default=b"ab\\x00c"),
            AddField("k", {"dtype": "float32", "shape": [3]}, default=[1.0, -2.5, 3.0]),
        ]
        """,
        _add_constants,
    ),
    "drop_tensor_with_unknown_dims": (
        'operations = [DropField("img"), DropField("b")]\n',
        lambda r: _drop(r, "img", "b"),
    ),
    "rename_tensor_with_unknown_dims": (
        'operations = [RenameField("img", "picture"), RenameField("s", "text")]\n',
        lambda r: _rename(r, {"img": "picture", "s": "text"}),
    ),
    "rename_then_drop": (
        'operations = [RenameField("s", "text"), DropField("text"), RenameField("img", "i2"), DropField("i2")]\n',
        lambda r: _drop(r, "s", "img"),
    ),
    "rename_twice": (
        'operations = [RenameField("img", "a"), RenameField("a", "b2")]\n',
        lambda r: _rename(r, {"img": "b2"}),
    ),
    "swap_names": (
        'operations = [RenameField("s", "tmp"), RenameField("b", "s"), RenameField("tmp", "b")]\n',
        lambda r: _rename(r, {"s": "b", "b": "s"}),
    ),
    "drop_then_add_same_name": (
        'operations = [DropField("x"), AddField("x", {"dtype": "string"}, default="new")]\n',
        lambda r: {**r, "x": "new"},
    ),
    "rename_then_add_old_name": (
        'operations = [RenameField("s", "text"), AddField("s", {"dtype": "int64"}, default=3)]\n',
        lambda r: {**_rename(r, {"s": "text"}), "s": 3},
    ),
    "add_drop_rename_mixed": (
        'operations = [AddField("n", {"dtype": "int64"}, default=1), DropField("tags"), RenameField("v", "vec")]\n',
        lambda r: {**_rename(_drop(r, "tags"), {"v": "vec"}), "n": 1},
    ),
}
BYTE_CASES_ADDED: dict[str, Any] = {  # later operations act on an added entry
    "add_then_rename": (
        'operations = [AddField("c", {"dtype": "int64"}, default=5), RenameField("c", "e")]\n',
        lambda r: {**r, "e": 5},
        "AddField('c', default=5) then RenameField('c', 'e') writes records holding 'c' instead of 'e'",
    ),
    "add_then_drop": (
        'operations = [AddField("c", {"dtype": "int64"}, default=5), DropField("c")]\n',
        lambda r: dict(r),
        "AddField('c', default=5) then DropField('c') writes records still holding 'c'",
    ),
}


@pytest.mark.parametrize(
    "case",
    [
        *BYTE_CASES,
        *BYTE_CASES_ADDED,
    ],
)
def test_byte_level_operation_matches_row_level_and_expected(cat: Catalog, mdir: Path, case: str) -> None:
    body, expect = {**BYTE_CASES, **BYTE_CASES_ADDED}[case][:2]
    rows = base_rows(30)
    byte_ds = make(cat, "bytes", BASE, rows)
    row_ds = make(cat, "rows", BASE, rows)
    old = list(byte_ds.read())
    old_records = list(byte_ds.records())
    old_version = byte_ds.version

    script = write_script(mdir, "bytes", 1, body)
    assert all(op.byte_level for op in load_operations(script, sha256_of(script.read_bytes())))
    # the same operations, then an identity cast: the whole plan goes through decoded rows
    twin = write_script(mdir, "rows", 1, body + 'operations.append(CastField("id", {"dtype": "int64"}))\n')
    assert not all(op.byte_level for op in load_operations(twin, sha256_of(twin.read_bytes())))
    byte_ds.migrate(mdir, workers=1)
    row_ds.migrate(mdir, workers=1)
    by_bytes, by_rows = cat.dataset("bytes"), cat.dataset("rows")
    assert by_bytes.schema == by_rows.schema
    schema = by_bytes.schema

    records = list(by_bytes.records())
    assert len(records) == len(old)
    for rec in records:
        schema.validate_record(rec)  # a valid Example of the new schema
        assert set(decode_example(rec)) == raw_keys(schema)  # nothing left over (e.g. a stale '/shape')
    expected = canon_rows(expect(r) for r in old)
    assert canon_rows(schema.decode(r) for r in records) == expected
    assert canon_rows(by_bytes.read()) == expected
    assert canon_rows(by_rows.read()) == expected
    # the old version still reads back as it was
    assert list(by_bytes.records(version=old_version)) == old_records
    assert canon_rows(by_bytes.read(version=old_version)) == canon_rows(old)


def test_added_constants_are_the_default_of_later_appends(cat: Catalog, mdir: Path) -> None:
    make(cat, "d", BASE, base_rows(5))
    ds = migrate_body(cat, mdir, "d", BYTE_CASES["add_constants"][0])
    later = base_rows(2, start=100)
    ds.append_rows(later)
    got = canon_rows(ds.read())
    assert got[5:] == canon_rows(ds.schema.decode(ds.schema.encode(_add_constants(r))) for r in later)
    assert [r["n"] for r in got] == [-7] * 7 and [r["r"] for r in got] == [b"ab\x00c"] * 7


def test_non_utf8_bytes_default_is_refused_not_mangled(cat: Catalog, mdir: Path) -> None:
    # the schema's JSON form keeps bytes defaults as text: b"\xff" cannot be the default of later appends
    ds = make(cat, "d", {"features": {"id": {"dtype": "int64"}}}, [{"id": 0}])
    write_script(mdir, "d", 1, 'operations = [AddField("r", {"dtype": "bytes"}, default=b"\\xff")]\n')
    with pytest.raises(MigrationError, match="a bytes default must be UTF-8 text"):
        ds.migrate(mdir, workers=1)
    assert cat.dataset("d").schema_version == 1 and [r["id"] for r in cat.dataset("d").read()] == [0]


def test_bytes_feature_added_with_a_text_default(cat: Catalog, mdir: Path) -> None:
    make(cat, "d", {"features": {"id": {"dtype": "int64"}}}, [{"id": 0}, {"id": 1}])
    cat.dataset("d").migrate(mdir, add=["raw:bytes=abc"], workers=1)
    assert [r["raw"] for r in cat.dataset("d").read()] == [b"abc", b"abc"]


def test_swap_on_records_in_an_unusual_layout(cat: Catalog, tmp_path: Path, mdir: Path) -> None:
    ds = cat.register("d", {"features": {"id": {"dtype": "int64"}, "a": {"dtype": "string"}, "n": {"dtype": "int64"}}})
    src = tmp_path / "in.tfrecord"
    with RecordWriter(src) as w:  # messages merge when concatenated: a valid Example, laid out unusually
        w.write_many([encode_example({"id": i}) + encode_example({"a": f"a{i}", "n": i * 10}) for i in range(3)])
    ds.append_files([src])
    new = migrate_body(
        cat, mdir, "d", 'operations = [RenameField("a", "tmp"), RenameField("n", "a"), RenameField("tmp", "n")]\n'
    )
    assert list(new.read()) == [{"id": i, "n": f"a{i}", "a": i * 10} for i in range(3)]


def test_plain_edits_on_records_in_an_unusual_layout(cat: Catalog, tmp_path: Path, mdir: Path) -> None:
    schema = {"features": {"id": {"dtype": "int64"}, "a": {"dtype": "string"}, "n": {"dtype": "int64"}}}
    ds = cat.register("d", schema)
    src = tmp_path / "in.tfrecord"
    with RecordWriter(src) as w:
        w.write_many([encode_example({"id": i}) + encode_example({"a": f"a{i}", "n": i * 10}) for i in range(4)])
    ds.append_files([src])
    new = migrate_body(
        cat,
        mdir,
        "d",
        'operations = [RenameField("a", "text"), DropField("n"), AddField("z", {"dtype": "int64"}, default=4)]\n',
    )
    for rec in new.records():
        new.schema.validate_record(rec)
    assert list(new.read()) == [{"id": i, "text": f"a{i}", "z": 4} for i in range(4)]


# --------------------------------------------------------------------------- row-level operations


def test_add_field_computed_with_fn(cat: Catalog, mdir: Path) -> None:
    make(cat, "d", BASE, base_rows(25))
    old = list(cat.dataset("d").read())
    new = migrate_body(
        cat,
        mdir,
        "d",
        """
        operations = [
            AddField("slen", {"dtype": "int64"}, fn=lambda row: len(row["s"])),
            AddField("x2", {"dtype": "float32"}, fn=lambda row: row["x"] * 2 + 1),
            AddField("stats", {"dtype": "float32", "shape": [2]}, fn=lambda row: [row["v"].sum(), row["v"].max()]),
            AddField("ntags", {"dtype": "int64"}, fn=lambda row: len(row["tags"])),
            AddField("pixels", {"dtype": "int64", "shape": [None]}, fn=lambda row: row["img"].reshape(-1).tolist()),
        ]
        """,
    )
    expected = [
        {
            **r,
            "slen": len(r["s"]),
            "x2": float(np.float32(r["x"] * 2 + 1)),
            "stats": np.array([r["v"].sum(), r["v"].max()], np.float32),
            "ntags": len(r["tags"]),
            "pixels": np.array([int(p) for p in r["img"].reshape(-1)], np.int64),
        }
        for r in old
    ]
    assert canon_rows(new.read()) == canon_rows(expected)
    assert new.schema.features["slen"].has_default is False  # computed: required from now on


CastCase = tuple[dict[str, Any], list[Any], dict[str, Any], Callable[[Any], Any]]
U8 = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
CAST_CASES: dict[str, CastCase] = {
    "int64_to_float32": ({"dtype": "int64"}, [0, 5, -3, 2**24, -(2**20)], {"dtype": "float32"}, float),
    "float32_to_int64": ({"dtype": "float32"}, [0.0, 2.0, -3.0, 1e6, -17.0], {"dtype": "int64"}, int),
    "string_to_bytes": ({"dtype": "string"}, ["", "héllo", "✓ ok"], {"dtype": "bytes"}, lambda v: v.encode()),
    "bytes_to_string": ({"dtype": "bytes"}, [b"", b"abc", "ü".encode()], {"dtype": "string"}, lambda v: v.decode()),
    "fixed_to_varlen": (
        {"dtype": "float32", "shape": [3]},
        [[1, 2, 3], [0.5, -1, 7]],
        {"dtype": "float32", "shape": [None]},
        lambda v: np.asarray(v, np.float32),
    ),
    "varlen_to_fixed": (
        {"dtype": "int64", "shape": [None]},
        [[1, 2, 3], [4, 5, 6]],
        {"dtype": "int64", "shape": [3]},
        lambda v: np.asarray(v, np.int64),
    ),
    "string_varlen_to_bytes_varlen": (
        {"dtype": "string", "shape": [None]},
        [["a", "é"], []],
        {"dtype": "bytes", "shape": [None]},
        lambda v: [s.encode() for s in v],
    ),
    "int64_fixed_to_float32_fixed": (
        {"dtype": "int64", "shape": [2]},
        [[1, -2], [3, 4]],
        {"dtype": "float32", "shape": [2]},
        lambda v: np.asarray(v, np.float32),
    ),
    "tensor_uint8_to_int16": (
        {"dtype": "uint8", "shape": [4, 4, 3], "encoding": "tensor"},
        [U8, 255 - U8],
        {"dtype": "int16", "shape": [4, 4, 3], "encoding": "tensor"},
        lambda v: np.asarray(v).astype(np.int16),
    ),
    "tensor_shape_16x3": (
        {"dtype": "uint8", "shape": [4, 4, 3], "encoding": "tensor"},
        [U8, 255 - U8],
        {"dtype": "uint8", "shape": [16, 3], "encoding": "tensor"},
        lambda v: np.asarray(v).reshape(16, 3),
    ),
    "tensor_shape_48": (
        {"dtype": "uint8", "shape": [4, 4, 3], "encoding": "tensor"},
        [U8, 255 - U8],
        {"dtype": "uint8", "shape": [48], "encoding": "tensor"},
        lambda v: np.asarray(v).reshape(48),
    ),
    "tensor_dtype_and_shape": (
        {"dtype": "uint8", "shape": [4, 4, 3], "encoding": "tensor"},
        [U8, 255 - U8],
        {"dtype": "int16", "shape": [48], "encoding": "tensor"},
        lambda v: np.asarray(v).astype(np.int16).reshape(48),
    ),
}


@pytest.mark.parametrize("case", list(CAST_CASES))
def test_cast_field(cat: Catalog, mdir: Path, case: str) -> None:
    spec, values, target, convert = CAST_CASES[case]
    schema = {"features": {"id": {"dtype": "int64"}, "val": spec, "keep": {"dtype": "string"}}}
    rows = [{"id": i, "val": v, "keep": f"k{i}"} for i, v in enumerate(values * 3)]
    make(cat, "d", schema, rows, shard_records=2)
    old_version = cat.dataset("d").version
    old = list(cat.dataset("d").read())
    new = migrate_body(cat, mdir, "d", f'operations = [CastField("val", {target!r})]\n')
    assert (
        new.schema.features["val"].to_json()
        == Schema.from_json({"features": {"val": target}}).features["val"].to_json()
    )
    expected = [{**r, "val": convert(r["val"])} for r in old]
    assert canon_rows(new.read()) == canon_rows(expected)
    for rec in new.records():
        new.schema.validate_record(rec)
    assert canon_rows(new.read(version=old_version)) == canon_rows(old)


def test_transform_with_target_schema(cat: Catalog, mdir: Path) -> None:
    make(cat, "d", BASE, base_rows(20))
    old = list(cat.dataset("d").read())
    target = {
        "features": {
            "id": {"dtype": "int64"},
            "label": {"dtype": "string"},
            "mean": {"dtype": "float32"},
            "pixels": {"dtype": "int64", "shape": [None]},
            "img": {"dtype": "int16", "shape": [3, None], "encoding": "tensor"},
        }
    }
    new = migrate_body(
        cat,
        mdir,
        "d",
        f"""
        def reshape(row):
            return {{
                "id": row["id"],
                "label": row["s"].upper(),
                "mean": float(np.mean(row["v"])),
                "pixels": [int(p) for p in row["img"].reshape(-1)],
                "img": row["img"].T.astype(np.int16),
            }}

        operations = [Transform(reshape, schema={target!r})]
        """,
    )
    assert new.schema == Schema.from_json(target)
    expected = [
        {
            "id": r["id"],
            "label": r["s"].upper(),
            "mean": float(np.float32(np.mean(r["v"]))),
            "pixels": np.array(r["img"].reshape(-1), np.int64),
            "img": np.ascontiguousarray(r["img"].T).astype(np.int16),
        }
        for r in old
    ]
    assert canon_rows(new.read()) == canon_rows(expected)


# --------------------------------------------------------------------------- TensorFlow's records


def _tf_example(tf: Any, row: Row) -> bytes:
    f = tf.train.Feature
    img = np.asarray(row["img"], np.uint8)
    ex = tf.train.Example(
        features=tf.train.Features(
            feature={
                "id": f(int64_list=tf.train.Int64List(value=[row["id"]])),
                "s": f(bytes_list=tf.train.BytesList(value=[row["s"].encode()])),
                "v": f(float_list=tf.train.FloatList(value=row["v"])),
                "img": f(bytes_list=tf.train.BytesList(value=[img.tobytes()])),
                "img/shape": f(int64_list=tf.train.Int64List(value=list(img.shape))),
            }
        )
    )
    return bytes(ex.SerializeToString())


def test_tf_written_records_migrated_byte_level_then_parsed_by_tf(
    tf: Any, cat: Catalog, mdir: Path, tmp_path: Path
) -> None:
    schema = {
        "features": {
            "id": {"dtype": "int64"},
            "s": {"dtype": "string"},
            "v": {"dtype": "float32", "shape": [3]},
            "img": {"dtype": "uint8", "shape": [None, 3], "encoding": "tensor"},
        }
    }
    rows = base_rows(40)
    src = tmp_path / "by_tf.tfrecord"
    with tf.io.TFRecordWriter(str(src)) as w:
        for r in rows:
            w.write(_tf_example(tf, r))
    ds = cat.register("d", schema)
    ds.append_files([src], shard_records=9)
    first = write_script(mdir, "d", 1, 'operations = [AddField("n", {"dtype": "int64"}, default=9)]\n')
    second = write_script(
        mdir, "d", 2, 'operations = [RenameField("img", "pic"), DropField("v"), RenameField("s", "text")]\n'
    )
    for script in (first, second):
        assert all(op.byte_level for op in load_operations(script, sha256_of(script.read_bytes())))
    ds.migrate(mdir, workers=1)
    new = cat.dataset("d")

    spec = to_tf_feature_spec(new.schema.feature_spec(), tf)
    assert set(spec) == {"id", "text", "n", "pic", "pic/shape"}
    parsed = [tf.io.parse_example(batch, spec) for batch in tf.data.TFRecordDataset(new.files()).batch(16)]
    ids = [int(i) for p in parsed for i in p["id"].numpy()]
    texts = [t.decode() for p in parsed for t in p["text"].numpy()]
    ns = [int(n) for p in parsed for n in p["n"].numpy()]
    pics = [
        np.frombuffer(raw, np.uint8).reshape(shape)
        for p in parsed
        for raw, shape in zip(p["pic"].numpy(), p["pic/shape"].numpy(), strict=True)
    ]
    assert ids == [r["id"] for r in rows]
    assert texts == [r["s"] for r in rows]
    assert ns == [9] * len(rows)
    assert [canon(p) for p in pics] == [canon(np.asarray(r["img"], np.uint8)) for r in rows]
    # and the catalog agrees with TensorFlow
    assert canon_rows(new.read()) == canon_rows(
        {"id": r["id"], "text": r["s"], "n": 9, "pic": np.asarray(r["img"], np.uint8)} for r in rows
    )


# --------------------------------------------------------------------------- refusals


LossyCase = tuple[dict[str, Any], list[Any], list[int], dict[str, Any], Callable[[Any], Any]]
LOSSY_CASES: dict[str, LossyCase] = {
    "float_1.5_to_int64": (
        {"dtype": "float32"},
        [0.0, 2.0, -3.0, 1.0, 4.0, 1.5, -2.75, 6.0],
        [5, 6],
        {"dtype": "int64"},
        math.trunc,
    ),
    "int_2**40+1_to_float32": (
        {"dtype": "int64"},
        [0, 1, 2, 3, 2**40 + 1, 5],
        [4],
        {"dtype": "float32"},
        lambda v: float(np.float32(v)),
    ),
    "bytes_ff_to_string": (
        {"dtype": "bytes"},
        [b"a", b"b", b"c", b"\xff", b"ok"],
        [3],
        {"dtype": "string"},
        lambda v: v.decode("utf-8", errors="replace"),
    ),
    "3_values_to_shape_2": (
        {"dtype": "float32", "shape": [None]},
        [[1, 2], [3, 4], [5, 6], [7, 8], [9, 10], [1, 2, 3], [4.5]],
        [5, 6],
        {"dtype": "float32", "shape": [2]},
        lambda v: np.asarray([*v, 0.0, 0.0][:2], np.float32),
    ),
}


@pytest.mark.parametrize(
    ("case", "workers"), [(c, 1) for c in LOSSY_CASES] + [("float_1.5_to_int64", 2), ("3_values_to_shape_2", 2)]
)
def test_lossy_cast_refused_then_allowed(cat: Catalog, mdir: Path, case: str, workers: int) -> None:
    spec, values, bad, target, lossy = LOSSY_CASES[case]
    schema = {"features": {"id": {"dtype": "int64"}, "x": spec}}
    ds = make(cat, "d", schema, [{"id": i, "x": v} for i, v in enumerate(values)], shard_records=3)
    old = list(ds.read())
    shards_before = [(s.relpath, s.checksum, s.removed_version) for s in ds.shards()]
    files_before = data_files(cat, "d")
    history_before = len(ds.history())
    # in order with one worker: the first bad record; with two, the shard that failed first
    candidates = [shard_of(ds, i) for i in (bad[:1] if workers == 1 else bad)]

    script = write_script(mdir, "d", 1, f'operations = [CastField("x", {target!r})]\n')
    with pytest.raises(MigrationError) as err:
        ds.migrate(mdir, workers=workers)
    message = str(err.value)
    assert any(f"{path}: record {local}: feature 'x': " in message for path, local in candidates), message
    assert "lossy=True" in message
    after = cat.dataset("d")
    assert (after.version, after.schema_version) == (ds.version, ds.schema_version)
    assert after.schema == ds.schema
    assert [(s.relpath, s.checksum, s.removed_version) for s in after.shards()] == shards_before
    assert len(after.history()) == history_before
    assert data_files(cat, "d") == files_before  # the failed rewrite left no file behind
    assert intents(cat) == []
    assert [m.status for m in after.migrations(mdir)] == ["pending"]
    assert after.verify().problems == []

    script.write_text(HEADER + f'operations = [CastField("x", {target!r}, lossy=True)]\n')  # still pending
    after.migrate(mdir, workers=workers)
    new = cat.dataset("d")
    assert new.schema_version == ds.schema_version + 1
    assert canon_rows(new.read()) == canon_rows({**r, "x": lossy(r["x"])} for r in old)


def test_refusals_before_any_work(cat: Catalog, mdir: Path) -> None:
    make(cat, "d", BASE, base_rows(5))
    ds = cat.dataset("d")
    files = data_files(cat, "d")
    cases = {
        'operations = [DropField("nope")]\n': "DropField: no feature 'nope' in the schema",
        'operations = [RenameField("s", "x")]\n': "RenameField: feature 'x' already exists",
        'operations = [AddField("h", {"dtype": "int64"})]\n': "AddField 'h': give default=",
        'operations = [CastField("s", {"dtype": "int64"})]\n': "CastField 's': cannot cast string to int64",
        'operations = [CastField("img", {"dtype": "int64"})]\n': "cannot cast between a tensor and a list feature",
        "operations = []\n": "`operations` must be a non-empty list",
        "operations = [print]\n": "is not a catalog.migrate operation",
    }
    for body, fragment in cases.items():
        script = write_script(mdir, "d", 1, body)
        with pytest.raises(MigrationError) as err:
            ds.migrate(mdir, workers=1)
        assert fragment in str(err.value), (body, str(err.value))
        script.unlink()
    assert cat.dataset("d").version == ds.version and data_files(cat, "d") == files
    assert intents(cat) == []


# --------------------------------------------------------------------------- scripts and their order


def test_edited_script_is_refused(cat: Catalog, mdir: Path) -> None:
    make(cat, "d", BASE, base_rows(10))
    first = write_script(mdir, "d", 1, 'operations = [AddField("n", {"dtype": "int64"}, default=1)]\n', "add_n")
    cat.dataset("d").migrate(mdir, workers=1)
    applied = cat.dataset("d")
    statuses = applied.migrations(mdir)
    assert [(m.id, m.status) for m in statuses] == [("0001_add_n", "applied")]
    assert statuses[0].checksum == sha256_of(first.read_bytes())

    first.write_text(first.read_text().replace("default=1", "default=2"))
    write_script(mdir, "d", 2, 'operations = [DropField("b")]\n', "drop_b")
    files = data_files(cat, "d")
    with pytest.raises(MigrationError) as err:
        applied.migrate(mdir, workers=1)
    assert str(first) in str(err.value) and "edited" in str(err.value)
    statuses = cat.dataset("d").migrations(mdir)
    assert [(m.id, m.status) for m in statuses] == [("0001_add_n", "edited"), ("0002_drop_b", "pending")]
    assert statuses[0].file_checksum == sha256_of(first.read_bytes()) != statuses[0].checksum
    assert cat.dataset("d").version == applied.version and data_files(cat, "d") == files
    assert [r["n"] for r in cat.dataset("d").read()] == [1] * 10  # nothing re-ran


def test_out_of_order_pending_is_refused(cat: Catalog, mdir: Path) -> None:
    make(cat, "d", BASE, base_rows(6))
    write_script(mdir, "d", 2, 'operations = [DropField("b")]\n', "second")
    cat.dataset("d").migrate(mdir, workers=1)
    late = write_script(mdir, "d", 1, 'operations = [DropField("tags")]\n', "first")
    version = cat.dataset("d").version
    with pytest.raises(MigrationError) as err:
        cat.dataset("d").migrate(mdir, workers=1)
    assert str(late) in str(err.value) and "0002_second is already applied" in str(err.value)
    assert cat.dataset("d").version == version
    assert [(m.id, m.status) for m in cat.dataset("d").migrations(mdir)] == [
        ("0002_second", "applied"),
        ("0001_first", "pending"),
    ]


def test_to_applies_only_up_to_that_number(cat: Catalog, mdir: Path) -> None:
    make(cat, "d", BASE, base_rows(8))
    old = list(cat.dataset("d").read())
    write_script(mdir, "d", 1, 'operations = [AddField("n", {"dtype": "int64"}, default=1)]\n', "one")
    write_script(mdir, "d", 2, 'operations = [RenameField("s", "text")]\n', "two")
    write_script(mdir, "d", 3, 'operations = [DropField("b")]\n', "three")
    report = cat.dataset("d").migrate(mdir, to=2, workers=1)
    assert [m.id for m in report.migrations] == ["0001_one", "0002_two"]
    ds = cat.dataset("d")
    assert [(m.id, m.status) for m in ds.migrations(mdir)] == [
        ("0001_one", "applied"),
        ("0002_two", "applied"),
        ("0003_three", "pending"),
    ]
    assert [c.kind for c in ds.history()] == ["create", "append", "migrate", "migrate"]  # one commit each
    assert ds.schema_version == 3 and "b" in ds.schema.features and "text" in ds.schema.features
    assert canon_rows(ds.read()) == canon_rows({**_rename(r, {"s": "text"}), "n": 1} for r in old)
    with pytest.raises(MigrationError, match="no migration numbered 0009"):
        ds.migrate(mdir, to=9, workers=1)
    assert [m.id for m in ds.migrate(mdir, workers=1).migrations] == ["0003_three"]
    assert canon_rows(cat.dataset("d").read()) == canon_rows(
        {**_rename(_drop(r, "b"), {"s": "text"}), "n": 1} for r in old
    )
    assert cat.dataset("d").migrate(mdir, workers=1).migrations == []  # nothing left


def test_dry_run_writes_nothing_and_reports_the_diff(cat: Catalog, mdir: Path) -> None:
    make(cat, "d", BASE, base_rows(12))
    ds = cat.dataset("d")
    write_script(
        mdir,
        "d",
        1,
        'operations = [AddField("n", {"dtype": "int64"}, default=1), DropField("b"),\n'
        '              CastField("x", {"dtype": "int64"}, lossy=True)]\n',
    )
    write_script(mdir, "d", 2, 'operations = [RenameField("n", "m")]\n')
    files, shards = data_files(cat, "d"), ds.shards()
    report = ds.migrate(mdir, dry_run=True, workers=1)
    assert report.dry_run is True
    assert (report.version, report.schema_version) == (ds.version, ds.schema_version)
    one, two = report.migrations
    assert one.diff.to_json() == {
        "added": ["n"],
        "removed": ["b"],
        "changed": {"x": {"from": {"dtype": "float32"}, "to": {"dtype": "int64"}}},
    }
    assert two.diff.to_json() == {"added": ["m"], "removed": ["n"], "changed": {}}
    assert (one.from_schema_version, one.to_schema_version, two.to_schema_version) == (1, 2, 3)
    assert (one.version, one.records, one.shards) == (None, 12, len(shards))
    fresh = cat.dataset("d")
    assert (fresh.version, fresh.schema_version, fresh.schema) == (ds.version, ds.schema_version, ds.schema)
    assert data_files(cat, "d") == files and fresh.shards() == shards
    assert [m.status for m in fresh.migrations(mdir)] == ["pending", "pending"]
    real = fresh.migrate(mdir, workers=1)
    assert [m.diff.to_json() for m in real.migrations] == [one.diff.to_json(), two.diff.to_json()]


# --------------------------------------------------------------------------- versions


def test_time_travel_across_two_migrations(cat: Catalog, mdir: Path) -> None:
    rows = base_rows(15)
    ds = make(cat, "d", BASE, rows, shard_records=4)
    v_before, schema_before = ds.version, ds.schema
    old = list(ds.read())
    shards_before = ds.shards()
    mid = migrate_body(
        cat, mdir, "d", 'operations = [RenameField("s", "text"), AddField("n", {"dtype": "int64"}, default=5)]\n'
    )
    v_mid = mid.version
    mid.append_rows([{**_rename(r, {"s": "text"}), "n": 6} for r in base_rows(3, start=50)])
    v_mid_append = cat.dataset("d").version
    after = migrate_body(
        cat, mdir, "d", 'operations = [CastField("x", {"dtype": "int64"}, lossy=True), DropField("img")]\n'
    )
    v_after = after.version
    assert v_before < v_mid < v_mid_append < v_after

    expected_mid = [{**_rename(r, {"s": "text"}), "n": 5} for r in old]
    appended = [{**_rename(r, {"s": "text"}), "n": 6} for r in base_rows(3, start=50)]
    appended = [mid.schema.decode(mid.schema.encode(r)) for r in appended]
    assert canon_rows(after.read(version=v_before)) == canon_rows(old)
    assert canon_rows(after.read(version=v_mid)) == canon_rows(expected_mid)
    assert canon_rows(after.read(version=v_mid_append)) == canon_rows(expected_mid + appended)
    final = [{**_drop(r, "img"), "x": math.trunc(r["x"])} for r in expected_mid + appended]
    assert canon_rows(after.read(version=v_after)) == canon_rows(final)
    assert canon_rows(after.read()) == canon_rows(final)

    assert after.schema_at(v_before) == schema_before
    assert after.schema_at(v_mid) == after.schema_at(v_mid_append) == mid.schema
    assert "text" in mid.schema.features and "s" not in mid.schema.features
    assert after.schema_at(v_after) == after.schema and after.schema.features["x"].dtype == "int64"

    assert [s.relpath for s in after.shards(version=v_before)] == [s.relpath for s in shards_before]
    assert all(s.removed_version == v_mid for s in after.shards(version=v_before))
    assert all(s.schema_version == 1 for s in after.shards(version=v_before))
    assert {s.schema_version for s in after.shards(version=v_mid_append)} == {2}
    assert {s.schema_version for s in after.shards()} == {3}
    assert after.files(version=v_before) == [s.path for s in shards_before]
    # shards are rewritten 1:1
    assert [s.records for s in after.shards(version=v_mid)] == [s.records for s in shards_before]
    assert after.verify().ok


def test_restore_brings_back_version_n_and_migrations_become_pending(cat: Catalog, mdir: Path) -> None:
    ds = make(cat, "d", BASE, base_rows(12), shard_records=5)
    v2 = ds.version
    old_records, old_schema = list(ds.records()), ds.schema
    write_script(mdir, "d", 1, 'operations = [AddField("n", {"dtype": "int64"}, default=1)]\n', "one")
    write_script(mdir, "d", 2, 'operations = [RenameField("s", "text"), DropField("b")]\n', "two")
    ds.migrate(mdir, workers=1)
    migrated = cat.dataset("d")
    v_migrated, migrated_records = migrated.version, list(migrated.records())
    history_before = migrated.history()

    commit = migrated.restore(v2, message="back")
    assert commit.kind == "restore" and commit.version == v_migrated + 1 and commit.message == "back"
    restored = cat.dataset("d")
    assert restored.version == commit.version
    assert restored.schema == old_schema
    assert list(restored.records()) == old_records
    assert canon_rows(restored.read()) == canon_rows(restored.read(version=v2))
    history = restored.history()
    assert [c.version for c in history] == [*(c.version for c in history_before), commit.version]
    assert list(restored.records(version=v_migrated)) == migrated_records  # old versions still read
    assert list(restored.records(version=v2)) == old_records
    assert [(m.id, m.status) for m in restored.migrations(mdir)] == [("0001_one", "pending"), ("0002_two", "pending")]
    assert restored.verify().ok

    report = restored.migrate(mdir, workers=1)
    assert [m.id for m in report.migrations] == ["0001_one", "0002_two"]
    again = cat.dataset("d")
    assert [m.status for m in again.migrations(mdir)] == ["applied", "applied"]
    assert again.schema.to_json() == restored.schema_at(v_migrated).to_json()
    assert canon_rows(again.read()) == canon_rows(restored.read(version=v_migrated))
    assert canon_rows(again.read(version=commit.version)) == canon_rows(restored.read(version=v2))


def test_compact_preserves_order_and_counts(cat: Catalog) -> None:
    ds = cat.register("d", BASE)
    for k in range(5):
        ds.append_rows(base_rows(24, start=k * 24), shard_records=3)
    ds = cat.dataset("d")
    before_records = list(ds.records())
    before_info = ds.info()
    before_version = ds.version
    size = max(s.bytes for s in ds.shards())
    report = ds.compact(target_size=size * 4 + 1, workers=1)
    assert report.commit is not None and report.shards_after < report.shards_before == before_info.shard_count
    after = cat.dataset("d")
    assert list(after.records()) == before_records
    assert len(after.shards()) == report.shards_after < before_info.shard_count
    assert all(s.bytes <= size * 4 + 1 for s in after.shards())  # the target size holds
    assert after.history()[-1].kind == "compact"
    info = after.info()
    assert (info.records, info.bytes, info.schema_version) == (
        before_info.records,
        before_info.bytes,
        before_info.schema_version,
    )
    assert list(after.records(version=before_version)) == before_records
    assert after.verify().ok

    # appends after a compaction land after it; compacting again keeps their place
    after.append_rows(base_rows(10, start=500), shard_records=2)
    after.append_rows(base_rows(4, start=600), shard_records=1)
    expected = list(after.records())
    assert expected[: len(before_records)] == before_records
    second = after.compact(target_size=size * 4 + 1, workers=1)
    assert second.commit is not None
    final = cat.dataset("d")
    assert list(final.records()) == expected
    assert [r["id"] for r in final.read()] == [*range(120), *range(500, 510), *range(600, 604)]
    assert final.info().records == len(expected) and final.verify().ok
    assert len(final.shards()) < len(after.shards(version=second.commit.version - 1))
    # nothing left to merge
    assert final.compact(target_size=size * 4 + 1, workers=1).commit is None


def test_compact_dry_run_and_workers(cat: Catalog) -> None:
    ds = cat.register("d", BASE)
    ds.append_rows(base_rows(40), shard_records=2)
    ds = cat.dataset("d")
    records = list(ds.records())
    plan = ds.compact(target_size=1 << 20, dry_run=True)
    assert plan.commit is None and plan.shards_after == 1 and cat.dataset("d").version == ds.version
    files = data_files(cat, "d")
    assert len(files) == 20
    size = max(s.bytes for s in ds.shards())
    report = ds.compact(target_size=size * 3 + 1, workers=2)
    assert report.commit is not None and list(cat.dataset("d").records()) == records
    merged = cat.dataset("d").shards()
    assert len(merged) == report.shards_after < 20 and all(s.bytes <= size * 3 + 1 for s in merged)


@pytest.mark.parametrize(("compression", "tf_name"), [("none", ""), ("gzip", "GZIP"), ("zlib", "ZLIB")])
def test_export_read_back_by_tensorflow(
    tf: Any, cat: Catalog, mdir: Path, tmp_path: Path, compression: str, tf_name: str
) -> None:
    ds = make(cat, "d", BASE, base_rows(20), shard_records=6)
    ds.append_rows(base_rows(7, start=100), shard_records=3)
    old_version, old_records = cat.dataset("d").version, list(ds.records())
    new = migrate_body(
        cat, mdir, "d", 'operations = [DropField("img"), AddField("n", {"dtype": "int64"}, default=2)]\n'
    )
    out = tmp_path / f"now.{compression}.tfrecord"
    report = new.export(out, compression=compression)
    assert (report.records, report.version, report.compression) == (27, new.version, compression)
    assert report.bytes == out.stat().st_size
    got = [t.numpy() for t in tf.data.TFRecordDataset(str(out), compression_type=tf_name)]
    assert got == list(new.records())
    old_out = tmp_path / f"old.{compression}.tfrecord"
    new.export(old_out, version=old_version, compression=compression)
    got_old = [t.numpy() for t in tf.data.TFRecordDataset(str(old_out), compression_type=tf_name)]
    assert got_old == old_records
    with pytest.raises(Exception, match="already exists"):
        new.export(out, compression=compression)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temp left


# --------------------------------------------------------------------------- workers


ROW_AND_BYTE_MIGRATIONS = [
    'operations = [AddField("n", {"dtype": "int64"}, default=3), RenameField("s", "text")]\n',
    """
    operations = [
        AddField("slen", {"dtype": "int64"}, fn=lambda row: len(row["text"]) * 10 + row["id"]),
        CastField("v", {"dtype": "float32", "shape": [None]}),
        CastField("img", {"dtype": "int16", "shape": [None, 3], "encoding": "tensor"}),
    ]
    """,
]


def test_two_workers_give_the_same_result_as_one(cat: Catalog, mdir: Path) -> None:
    rows = base_rows(64)
    for name in ("one", "two"):
        make(cat, name, BASE, rows, shard_records=5)
        for i, body in enumerate(ROW_AND_BYTE_MIGRATIONS, start=1):
            write_script(mdir, name, i, body)
    cat.dataset("one").migrate(mdir, workers=1)
    cat.dataset("two").migrate(mdir, workers=2)
    one, two = cat.dataset("one"), cat.dataset("two")
    assert one.schema == two.schema
    assert list(one.records()) == list(two.records())
    assert [s.records for s in one.shards()] == [s.records for s in two.shards()] == [5] * 12 + [4]
    assert [r["slen"] for r in two.read()] == [len(r["s"]) * 10 + r["id"] for r in rows]


def test_lambda_script_runs_in_worker_processes(cat: Catalog, mdir: Path) -> None:
    make(cat, "d", {"features": {"id": {"dtype": "int64"}}}, [{"id": i} for i in range(40)], shard_records=4)
    write_script(mdir, "d", 1, 'operations = [AddField("pid", {"dtype": "int64"}, fn=lambda row: os.getpid())]\n')
    cat.dataset("d").migrate(mdir, workers=2)
    pids = {r["pid"] for r in cat.dataset("d").read()}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2


def test_lambda_script_with_spawned_workers(cat: Catalog, mdir: Path) -> None:
    """Spawned workers share no memory with the parent: they import the script themselves."""
    make(cat, "d", {"features": {"id": {"dtype": "int64"}}}, [{"id": i} for i in range(12)], shard_records=3)
    write_script(
        mdir,
        "d",
        1,
        """
        OFFSET = 1000
        operations = [
            AddField("pid", {"dtype": "int64"}, fn=lambda row: os.getpid()),
            AddField("y", {"dtype": "int64"}, fn=lambda row: row["id"] * 2 + OFFSET),
        ]
        """,
    )
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        cat.dataset("d").migrate(mdir, executor=ex)
    rows = list(cat.dataset("d").read())
    assert [r["y"] for r in rows] == [i * 2 + 1000 for i in range(12)]
    assert os.getpid() not in {r["pid"] for r in rows}
