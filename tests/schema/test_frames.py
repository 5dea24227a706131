"""append_rows of DataFrames, Arrow tables and record batches, and dicts of columns: the very
records the row path writes, errors naming the row; and schema metadata through migrations."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog import Catalog
from catalog.errors import ValidationError
from catalog.schema import frames

pd = pytest.importorskip("pandas", reason="pandas is not installed (pip install '.[test]')")
pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install '.[test]')")

SCHEMA = {
    "features": {
        "id": {"dtype": "int64"},
        "score": {"dtype": "float32", "default": 0.0},
        "name": {"dtype": "string", "optional": True},
        "blob": {"dtype": "bytes", "default": ""},
        "vec": {"dtype": "float32", "shape": [2]},
        "tags": {"dtype": "int64", "shape": [None]},
        "img": {"dtype": "uint8", "shape": [2, 2], "encoding": "tensor"},
    }
}

ROW = st.fixed_dictionaries(
    {
        "id": st.integers(-(2**63), 2**63 - 1),
        "score": st.floats(width=32, allow_nan=False),
        "name": st.one_of(st.none(), st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=5)),
        "blob": st.binary(max_size=6),
        "vec": st.lists(st.floats(width=32, allow_nan=False), min_size=2, max_size=2),
        "tags": st.lists(st.integers(-5, 5), max_size=3),
        "img": st.lists(st.integers(0, 255), min_size=4, max_size=4),
    }
)


def _rows(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**r, "img": np.array(r["img"], np.uint8).reshape(2, 2)} for r in raw]


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    return Catalog.init(tmp_path / "cat")


def records(cat: Catalog, name: str) -> list[bytes]:
    return list(cat.dataset(name).records())


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.lists(ROW, min_size=1, max_size=8))
def test_columnar_inputs_write_the_records_the_row_path_writes(cat: Catalog, raw: list[dict[str, Any]]) -> None:
    rows = _rows(raw)
    names = [f"t{len(cat.list())}_{k}" for k in ("rows", "frame", "arrow", "batch", "dict")]
    for n in names:
        cat.register(n, SCHEMA)
    cat.dataset(names[0]).append_rows(rows)
    frame = pd.DataFrame(rows)
    cat.dataset(names[1]).append_rows(frame)
    arrow = {k: [r[k].tolist() if k == "img" else r[k] for r in rows] for k in rows[0]}
    cat.dataset(names[2]).append_rows(pa.table(arrow))
    cat.dataset(names[3]).append_rows([pa.record_batch(arrow)])
    columns = {k: [r[k] for r in rows] for k in rows[0]}
    columns["id"] = np.array(columns["id"], dtype=np.int64)
    cat.dataset(names[4]).append_rows(columns)
    expected = records(cat, names[0])
    for n in names[1:]:
        assert records(cat, n) == expected, n


def test_pandas_missing_values(cat: Catalog) -> None:
    cat.register("d", {"features": {"id": {"dtype": "int64"}, "s": {"dtype": "string", "optional": True},
                                    "f": {"dtype": "float32"}}})  # fmt: skip
    frame = pd.DataFrame({"id": [1.0, 2.0], "s": ["a", np.nan], "f": [np.nan, 1.5]})  # pandas' floats for ints
    cat.dataset("d").append_rows(frame)
    got = list(cat.dataset("d").read())
    assert [(r["id"], r["s"]) for r in got] == [(1, "a"), (2, None)]
    assert np.isnan(got[0]["f"]) and got[1]["f"] == 1.5  # a float's NaN is a value


def test_errors_name_the_row_over_the_whole_call(cat: Catalog) -> None:
    cat.register("d", {"features": {"id": {"dtype": "int64"}, "score": {"dtype": "float32"}}})
    batches = [pd.DataFrame({"id": range(700), "score": [0.5] * 700}),
               pd.DataFrame({"id": [1, 2], "score": [0.5, "high"]})]  # fmt: skip
    with pytest.raises(ValidationError) as e:
        cat.dataset("d").append_rows(batches)
    assert str(e.value) == "row 701: feature 'score': expected float32, got str 'high'"
    with pytest.raises(ValidationError, match=r"row 0: feature 'x': not in the schema: add it with `catalog migrate"):
        cat.dataset("d").append_rows(pd.DataFrame({"id": [1], "score": [1.0], "x": [3]}))
    with pytest.raises(ValidationError, match="columns of different lengths: id 2, score 1"):
        cat.dataset("d").append_rows({"id": [1, 2], "score": [1.0]})
    assert cat.dataset("d").version == 1


def test_a_large_dict_of_tensors_is_written_in_batches(cat: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dict whose arrays exceed a batch's bytes is encoded a batch at a time (frames.BATCH_BYTES):
    the same records as one row at a time, in order, and errors still name the row of the call."""
    monkeypatch.setattr(frames, "BATCH_BYTES", 4 * 4 * 4 * 100)  # 100 rows of 4x4 float32 a batch
    cat.register("t", {"features": {"x": {"dtype": "float32", "shape": [4, 4], "encoding": "tensor"},
                                    "n": {"dtype": "int64"}}})  # fmt: skip
    cat.register("rows", cat.dataset("t").schema)
    x = np.random.default_rng(1).random((350, 4, 4), dtype=np.float32)
    batches = list(frames.column_batches({"x": x, "n": list(range(350))}, cat.dataset("t").schema.features))
    assert [n for _, n in batches] == [100, 100, 100, 50]
    cat.dataset("t").append_rows({"x": x, "n": np.arange(350)})
    cat.dataset("rows").append_rows([{"x": x[i], "n": i} for i in range(350)])
    assert records(cat, "t") == records(cat, "rows")
    with pytest.raises(ValidationError, match=r"^row 321: feature 'n': expected int64, got str"):
        cat.dataset("t").append_rows({"x": x, "n": [*range(321), "bad", *range(28)]})
    assert cat.dataset("t").version == 2


def test_a_dict_is_read_once_and_its_lists_of_arrays_are_batched_by_bytes(
    cat: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Mapping whose values are made on access (loaded from files) is read once; images given
    as a list of arrays count toward a batch's bytes as an array column does; a 0-d array is
    not a column, said in one line."""
    monkeypatch.setattr(frames, "BATCH_BYTES", 4 * 4 * 4 * 100)

    class Loaded(Mapping[str, Any]):
        reads = 0

        def __init__(self, columns: dict[str, Any]) -> None:
            self.columns = columns

        def __iter__(self) -> Iterator[str]:
            return iter(self.columns)

        def __len__(self) -> int:
            return len(self.columns)

        def __getitem__(self, key: str) -> Any:
            Loaded.reads += 1
            return self.columns[key]

    x = np.random.default_rng(2).random((250, 4, 4), dtype=np.float32)
    cat.register("t", {"features": {"x": {"dtype": "float32", "shape": [4, 4], "encoding": "tensor"}}})
    cat.dataset("t").append_rows(Loaded({"x": x}))
    assert Loaded.reads == 1
    batches = list(frames.column_batches({"x": list(x)}, cat.dataset("t").schema.features))
    assert [n for _, n in batches] == [100, 100, 50]
    with pytest.raises(ValidationError, match=r"^feature 'x': a column is a list or array of the rows' values"):
        cat.dataset("t").append_rows({"x": np.array(3.0)})


def test_metadata_is_kept_through_migrations(cat: Catalog) -> None:
    cat.register(
        "d",
        {"features": {"label": {"dtype": "int64", "names": ["cat", "dog"]},
                      "image": {"dtype": "bytes", "encoding": "image", "format": "png", "shape": [None, None, 3]}}},
    )  # fmt: skip
    cat.dataset("d").append_rows([{"label": 1, "image": b"\x89PNG"}])
    cat.dataset("d").migrate(add=["h:int64=1"], rename=["label:y"])
    features = cat.dataset("d").schema.to_json()["features"]
    assert features["y"] == {"dtype": "int64", "names": ["cat", "dog"]}
    assert features["image"] == {"dtype": "bytes", "encoding": "image", "format": "png", "shape": [None, None, 3]}


@settings(max_examples=150, deadline=None)
@given(
    names=st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True, max_size=4),
    rows=st.lists(
        st.dictionaries(st.sampled_from(["a", "b", "c", "e"]), st.one_of(st.none(), st.integers(), st.text())),
        max_size=6,
    ),
)
def test_rows_columns_is_a_column_a_name_with_none_where_a_row_lacks_it(names, rows):
    got = frames.rows_columns(rows, names)
    assert list(got) == names
    for name in names:  # each value by itself: the fast pick must not shift a row or a name
        assert got[name] == [row.get(name) for row in rows]
