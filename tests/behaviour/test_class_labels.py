"""Class names where numbers are stored (issue 33, §2): an append from rows, a DataFrame,
JSON Lines or CSV takes a label's class name and stores its number; a name that is no
class is one line naming the input, the record and the feature, and nothing is committed.
Readers keep the numbers, as TFDS's do; ``Feature.int2str`` gives the names back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli import app
from catalog.errors import ValidationError

SCHEMA = {"features": {"id": {"dtype": "int64"}, "label": {"dtype": "int64", "names": ["cat", "dog", "bird"]}}}
runner = CliRunner()


@pytest.fixture
def ds(tmp_path: Path) -> Any:
    return Catalog.init(tmp_path / "cat").register("d", SCHEMA)


def labels(ds: Any) -> list[int]:
    return [r["label"] for r in ds.read()]


def test_rows_and_columns_take_class_names(ds: Any) -> None:
    pd = pytest.importorskip("pandas")
    ds.append_rows([{"id": 0, "label": "bird"}, {"id": 1, "label": 1}])
    ds.append_rows(pd.DataFrame({"id": [2, 3], "label": ["cat", "dog"]}))
    ds.append_rows({"id": [4], "label": ["bird"]})  # a dict of columns
    assert labels(ds) == [2, 1, 0, 1, 2]
    feat = ds.schema.features["label"]
    assert [feat.int2str(v) for v in labels(ds)] == ["bird", "dog", "cat", "dog", "bird"]


def test_a_name_that_is_no_class_commits_nothing(ds: Any) -> None:
    with pytest.raises(ValidationError) as e:
        ds.append_rows([{"id": 0, "label": "cat"}, {"id": 1, "label": "cow"}])
    assert "no class 'cow' (the classes are cat, dog, bird)" in str(e.value)
    assert "label" in str(e.value) and e.value.record == 1
    assert ds.catalog.dataset("d").info().records == 0


def test_json_lines_and_csv_take_class_names(ds: Any, tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"id": 1, "label": "bird"}\n{"id": 2, "label": 0}\n')
    (tmp_path / "b.csv").write_text("id,label\n3,dog\n4,2\n")
    root = str(tmp_path / "cat")
    for name in ("a.jsonl", "b.csv"):
        result = runner.invoke(app, ["-C", root, "append", "d", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
    assert labels(ds) == [2, 0, 1, 2]


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        ("c.csv", "id,label\n5,cat\n6,horse\n", "c.csv: line 3: column 'label': expected an integer or a class name, "
         "got 'horse': no class 'horse' (the classes are cat, dog, bird)"),
        ("d.jsonl", '{"id": 6, "label": "Bird"}\n', "d.jsonl: record 0 (line 1): feature 'label': no class 'Bird' "
         "(the classes are cat, dog, bird)"),
    ],
)  # fmt: skip
def test_an_input_naming_no_class_is_one_line(ds: Any, tmp_path: Path, name: str, text: str, line: str) -> None:
    (tmp_path / name).write_text(text)
    result = runner.invoke(app, ["-C", str(tmp_path / "cat"), "append", "d", str(tmp_path / name)])
    assert result.exit_code == 1
    assert result.stderr.strip() == f"error: {tmp_path / name}: {line.split(': ', 1)[1]}"
    assert ds.catalog.dataset("d").info().records == 0


def test_parquet_arrow_and_numpy_columns_take_class_names(ds: Any, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import numpy as np
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": [0, 1], "label": ["dog", "cat"]}), tmp_path / "p.parquet")
    ds.append_files([tmp_path / "p.parquet"])
    ds.append_rows(pa.table({"id": [2], "label": ["bird"]}))
    ds.append_rows({"id": np.array([3]), "label": np.array(["dog"])})
    assert labels(ds) == [1, 0, 2, 1]
