"""catalog.inputs.jsonl: JSON Lines rows as inference reads them, and the message for one JSON document."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog.errors import AppendError
from catalog.inputs.files import InputOptions
from catalog.inputs.jsonl import infer_jsonl, json_rows
from catalog.schema.features import Feature
from catalog.schema.inference import RowInference


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text(text)
    return path


def test_rows_skip_blank_lines_and_infer(tmp_path: Path) -> None:
    path = _file(tmp_path, '{"a": 1, "b": "x"}\n\n   \n{"a": 2}\n')
    assert list(json_rows(path)) == [{"a": 1, "b": "x"}, {"a": 2}]
    tally = RowInference()
    assert infer_jsonl(path, InputOptions(), tally) == []
    assert sorted(tally.features(), key=lambda f: f.name) == [
        Feature("a", "int64"),
        Feature("b", "string", optional=True),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1}\n{"a": \n', "line 2: not valid JSON: "),
        ('{"a": 1}\n[1]\n', "line 2: a JSON row is an object, got list"),
        ('{"a": 1e400}\n', "line 1: number 1e400 is out of float32 range"),
        ('[{"a": 1},\n {"a": 2}]\n', "holds one JSON document (an array), not JSON Lines (one object per line): "
                                     "write one row per line, e.g. with `jq -c '.[]'`"),
        ('{\n "a": 1\n}\n', "holds one JSON document (one object over several lines), not JSON Lines"),
    ],
)  # fmt: skip
def test_bad_lines_are_named(tmp_path: Path, text: str, message: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(AppendError) as e:
        list(json_rows(path))
    assert str(e.value).startswith(f"{path}: {message}")
