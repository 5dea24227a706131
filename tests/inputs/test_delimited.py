"""catalog.inputs.delimited: CSV/TSV rows read by a schema or guessed, and every way a cell or line can be wrong."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import pytest

from catalog.errors import AppendError, ValidationError
from catalog.inputs.delimited import DelimitedRows, finite_float, looks_like_csv
from catalog.schema.model import Schema

SCHEMA = Schema.from_json({"features": {
    "id": {"dtype": "int64"},
    "score": {"dtype": "float32", "default": 0.0},
    "raw": {"dtype": "bytes", "optional": True},
    "v": {"dtype": "int64", "shape": [2], "optional": True},
}})  # fmt: skip


def _rows(text: str, schema: Schema | None = SCHEMA, name: str = "in.csv", sep: str | None = None) -> list[Any]:
    return list(DelimitedRows(io.BytesIO(text.encode()), Path(name), schema, sep))


def test_rows_by_the_schema() -> None:
    text = 'id,score,raw,v\n1,0.5,AP8=,"[1, 2]"\n\n2,,,\n'
    assert _rows(text) == [(2, {"id": 1, "score": 0.5, "raw": b"\x00\xff", "v": [1, 2]}), (4, {"id": 2})]
    assert _rows("id\tscore\n3\tnan\n", name="in.tsv")[0][1]["id"] == 3
    assert math.isnan(_rows("id;score\n3;NaN\n")[0][1]["score"])  # the separator the header uses most


def test_batches_are_columns_with_each_rows_line() -> None:
    source = DelimitedRows(io.BytesIO(b'id,score\n1,2\n"2",\n'), Path("in.csv"), SCHEMA, None)
    assert list(source.batches()) == [({"id": [1, 2], "score": [2.0, None]}, [2, 3])]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("id,id\n1,2\n", "line 1: column 'id' appears twice in the header"),
        ("id,\n1,2\n", "line 1: column 2 has no name in the header"),
        ("id,x\n1,2\n", "line 1: column 2 'x' is not a feature of the schema"),
        ("score\n1\n", "line 1: no column 'id', and the feature has no default"),
        ("id,score\n1\n", "line 2: 1 cell, the header has 2 columns"),
        ("id,score\n1,2\n,3\n", "line 3: column 'id': empty cell, and the feature has no default"),
        ("id\n1\n0x10\n", "line 3: column 'id': expected an integer, got '0x10'"),
        ("id\n1_000\n", "line 2: column 'id': expected an integer, got '1_000'"),
        ("id,score\n1,1e400\n", "line 2: column 'score': expected a number, got '1e400': number 1e400 is out of"),
        ("id,raw\n1,%%%\n", "line 2: column 'raw': expected base64 text, got '%%%'"),
        ('id,v\n1,"[1,"\n', "line 2: column 'v': expected a JSON array, got '[1,'"),
        ('id,score\n1,"2\n', "line 2: not valid CSV: unexpected end of data"),
    ],
)
def test_bad_input_names_the_line_and_column(text: str, message: str) -> None:
    with pytest.raises(AppendError) as e:
        _rows(text)
    assert str(e.value).startswith(f"in.csv: {message}")


def test_bad_bytes_and_delimiters() -> None:
    with pytest.raises(AppendError, match=r"^in.csv: line 2: not UTF-8 text \(byte 1 of the line\)$"):
        list(DelimitedRows(io.BytesIO(b"id\n1\xff\n"), Path("in.csv"), SCHEMA, None))
    with pytest.raises(AppendError, match=r"^in.csv: the delimiter must be one character, got '::'$"):
        _rows("id\n1\n", sep="::")
    assert _rows("") == []


def test_guessed_cells_without_a_schema() -> None:
    [(_, row)] = _rows('a,b,c,d,e,f\n7,07,1.5,"[1,2]",1e39,x\n', schema=None)
    assert row == {"a": 7, "b": "07", "c": 1.5, "d": [1, 2], "e": "1e39", "f": "x"}  # 1e39: no float32 holds it


def test_sniffing_and_finite_floats() -> None:
    assert looks_like_csv(b"id,name\n1,x")
    assert looks_like_csv("\ufeffa;b\n".encode()[:-1])
    assert not looks_like_csv(b"no separator here\n")
    assert not looks_like_csv(b"\x1f\x8b\x08,")
    assert finite_float("-Infinity") == -math.inf
    with pytest.raises(ValidationError, match=r"^number 1e400 is out of float32 range$"):
        finite_float(" 1e400 ")
