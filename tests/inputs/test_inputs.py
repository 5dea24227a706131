"""Inputs to `append` besides TFRecord and JSON Lines: CSV/TSV, Parquet, .npy/.npz, image folders;
folders, globs and standard input; format detection by content; one commit for all inputs.

Every expected row here is written out by hand or computed from what the test generated, never
taken from the library's own output. Errors are one `error:` line naming the file and the line
(CSV) or row (Parquet, NumPy), exit 1, with nothing registered."""

from __future__ import annotations

import base64
import csv
import io
import itertools
import json
import math
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from catalog import Catalog, RecordWriter, Schema
from catalog.cli import app
from catalog.errors import AppendError

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install '.[test]')")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (pip install '.[test]')")
Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed (pip install '.[test]')")

runner = CliRunner()
INT64 = (-(2**63), 2**63 - 1)
# One schema for the CSV error cases: a required int, and optional features of each kind.
CSV_FEATURES = {
    "id": {"dtype": "int64"},
    "score": {"dtype": "float32", "default": 0.0},
    "raw": {"dtype": "bytes", "optional": True},
    "v": {"dtype": "float32", "shape": [None], "default": []},
    "blobs": {"dtype": "bytes", "shape": [None], "optional": True},
}
ID_TEXT = {"id": {"dtype": "int64"}, "text": {"dtype": "string", "default": ""}}


def run(*args: Any, input: str | bytes | None = None) -> Any:
    return runner.invoke(app, [str(a) for a in args], input=input)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An empty catalog; datasets are registered by each test (see `register`)."""
    r = tmp_path / "cat"
    assert run("init", r).exit_code == 0
    return r


def register(root: Path, features: dict[str, Any], name: str = "d") -> None:
    path = root.parent / f"{name}.schema.json"
    path.write_text(json.dumps({"features": features}))
    result = run("-C", root, "register", name, "--schema", path)
    assert result.exit_code == 0, result.output


def append(root: Path, *args: Any, name: str = "d", input: str | bytes | None = None) -> Any:
    return run("-C", root, "append", name, *args, input=input)


def cat_rows(root: Path, name: str = "d") -> list[dict[str, Any]]:
    """The dataset's rows as `catalog cat` prints them (its JSON form)."""
    result = run("-C", root, "cat", name)
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


def read_rows(root: Path, name: str = "d") -> list[dict[str, Any]]:
    """The dataset's rows as the Python API decodes them (numpy arrays for numeric lists)."""
    return list(Catalog.open(root).dataset(name).read())


def appended(root: Path, *args: Any, name: str = "d", input: str | bytes | None = None) -> list[dict[str, Any]]:
    """Append, check it committed as one new version, and return `cat`'s rows."""
    before = json.loads(run("-C", root, "show", name, "--json", "--no-shards").stdout)["version"]
    result = append(root, *args, name=name, input=input)
    assert result.exit_code == 0, (result.stdout, result.stderr, result.exception)
    assert result.stdout.startswith(f"committed: {name} version {before + 1}: "), result.stdout
    return cat_rows(root, name)


def assert_nothing_registered(root: Path, name: str = "d") -> None:
    show = json.loads(run("-C", root, "show", name, "--json").stdout)
    assert (show["version"], show["records"], show["shards"]) == (1, 0, [])
    # and the failed append left no shard file behind
    assert not list((root / "data" / name).rglob("*.tfrecord")), "shard files left by a failed append"


def assert_fails(root: Path, *args: Any, error: str, name: str = "d", input: str | bytes | None = None) -> None:
    """One `error:` line, exit 1, no traceback, and the dataset untouched."""
    result = append(root, *args, name=name, input=input)
    assert isinstance(result.exception, SystemExit), result.exception  # no traceback: a clean exit
    assert (result.exit_code, result.stderr, result.stdout) == (1, f"error: {error}\n", "")
    assert_nothing_registered(root, name)


def assert_usage_error(root: Path, *args: Any, option: str, name: str = "d") -> None:
    result = append(root, *args, name=name)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for {option}" in result.stderr
    assert_nothing_registered(root, name)


def write_csv(path: Path, rows: list[list[Any]], **kwargs: Any) -> Path:
    """Rows written by the standard library's writer (quoting as it sees fit, CRLF line ends)."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, **kwargs).writerows(rows)
    return path


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def same_float(a: float, b: float) -> bool:
    """Equal as float32 values: NaN equals NaN (its sign is not kept), zeros keep their sign."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


# --------------------------------------------------------------------------- CSV: round trip

PROPERTY_FEATURES = {
    "i": {"dtype": "int64"},
    "f": {"dtype": "float32"},
    "s": {"dtype": "string", "default": ""},  # "" is an empty cell: the default gives it back
    "b": {"dtype": "bytes", "default": ""},
    "v": {"dtype": "float32", "shape": [None]},
    "o": {"dtype": "int64", "optional": True},
}
_awkward = st.sampled_from([",", ";", "\t", "|", '"', "'", "\n", "\r", " ", "é", "€", "\u2028", "😀", "\x00"])
_text = st.text(st.one_of(_awkward, st.characters(codec="utf-8")), max_size=12)
_float32 = st.floats(width=32)  # NaN and both infinities included
_row = st.fixed_dictionaries(
    {
        "i": st.integers(*INT64),
        "f": _float32,
        "s": _text,
        "b": st.binary(max_size=12),
        "v": st.lists(_float32, max_size=5),
        "o": st.none() | st.integers(*INT64),
    }
)


@pytest.fixture(scope="module")
def api_catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    return Catalog.init(tmp_path_factory.mktemp("property") / "cat")


_datasets = itertools.count()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rows=st.lists(_row, max_size=6),
    order=st.permutations(list(PROPERTY_FEATURES)),
    sep=st.sampled_from([",", ";", "\t", "|"]),
    suffix=st.sampled_from([".csv", ".tsv", ".txt"]),
    terminator=st.sampled_from(["\r\n", "\n"]),
    quoting=st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC]),
    bom=st.booleans(),
    explicit=st.booleans(),
)
def test_csv_round_trip(
    api_catalog: Catalog,
    rows: list[dict[str, Any]],
    order: list[str],
    sep: str,
    suffix: str,
    terminator: str,
    quoting: int,
    bom: bool,
    explicit: bool,
) -> None:
    """Rows written by csv.writer (bytes as base64, lists as json.dumps, None as an empty cell)
    read back through ds.read() as exactly those rows, whatever the column order, separator,
    quoting, line ends, BOM, and whether the separator is given or told from the name or the
    content (a .txt)."""
    if suffix == ".tsv" and sep != "\t":
        suffix = ".csv"  # a .tsv is tab-separated by definition
    # csv.writer quotes a cell holding a character of its line terminator: with "\n" alone, a
    # cell holding "\r" goes out unquoted, which no CSV reader reads back (the csv module's
    # own refuses it): the writer's limit, not the reader's.
    assume(not (terminator == "\n" and quoting == csv.QUOTE_MINIMAL and any("\r" in r["s"] for r in rows)))
    n = next(_datasets)
    ds = api_catalog.register(f"p{n}", {"features": PROPERTY_FEATURES})
    cells = {
        "i": lambda r: r["i"],
        "f": lambda r: repr(r["f"]),
        "s": lambda r: r["s"],
        "b": lambda r: b64(r["b"]),
        "v": lambda r: json.dumps(r["v"]),  # NaN and infinities as JSON's NaN/Infinity tokens
        "o": lambda r: "" if r["o"] is None else r["o"],
    }
    buf = io.StringIO(newline="")
    writer = csv.writer(buf, delimiter=sep, lineterminator=terminator, quoting=quoting)
    writer.writerow(order)
    writer.writerows([[cells[k](r) for k in order] for r in rows])
    path = api_catalog.root.parent / f"rows{n}{suffix}"
    path.write_bytes(("\ufeff" if bom else "").encode() + buf.getvalue().encode("utf-8"))

    delimiter = sep if explicit else None
    if not rows:
        with pytest.raises(AppendError, match="no records in the input: nothing committed"):
            ds.append_files([path], delimiter=delimiter)
        assert ds.info().version == 1
        return
    commit = ds.append_files([path], delimiter=delimiter)
    assert (commit.version, commit.records) == (2, len(rows))
    got = list(ds.read())
    assert len(got) == len(rows)
    for want, have in zip(rows, got, strict=True):
        assert set(have) == set(PROPERTY_FEATURES)
        assert (have["i"], have["s"], have["b"], have["o"]) == (want["i"], want["s"], want["b"], want["o"])
        assert same_float(have["f"], want["f"]), (have["f"], want["f"])
        v = np.asarray(have["v"])
        assert v.dtype == np.float32 and len(v) == len(want["v"])
        assert all(same_float(float(a), b) for a, b in zip(v, want["v"], strict=True)), (v, want["v"])


def test_csv_cells_in_cats_json_form(root: Path, tmp_path: Path) -> None:
    """Every kind of feature as `cat` prints it: lists and tensors as JSON arrays (NaN as
    "NaN"), bytes as base64, a tensor of unknown shape in its {"shape", "values"} form; what
    cat prints of the result is what was written, and cat's output appends back unchanged."""
    features = {
        "id": {"dtype": "int64"},
        "score": {"dtype": "float32"},
        "name": {"dtype": "string"},
        "raw": {"dtype": "bytes"},
        "tags": {"dtype": "string", "shape": [None]},
        "blobs": {"dtype": "bytes", "shape": [None]},
        "vec": {"dtype": "float32", "shape": [3]},
        "ids": {"dtype": "int64", "shape": [None]},
        "grid": {"dtype": "uint8", "shape": [2, 2], "encoding": "tensor"},
        "ragged": {"dtype": "int32", "shape": [None, 2], "encoding": "tensor"},
        "z": {"dtype": "complex64", "shape": [2], "encoding": "tensor"},
    }
    register(root, features)
    rows = [
        {
            "id": -(2**63),
            "score": "NaN",
            "name": 'a, "quoted"\nname é',
            "raw": b64(b"\x00\xff\n"),
            "tags": ["x,y", "", "ü"],
            "blobs": [b64(b"\x01"), ""],
            "vec": [0.5, "-Infinity", "Infinity"],
            "ids": [2**63 - 1, 0, -1],
            "grid": [[0, 255], [7, 8]],
            "ragged": [[1, 2], [3, 4], [5, 6]],
            "z": [[1.5, -2.0], [0.0, 0.25]],
        },
        {
            "id": 2,
            "score": -0.0,
            "name": "second",
            "raw": b64(b"bytes"),
            "tags": [],
            "blobs": [],
            "vec": [1.0, 2.0, 3.0],
            "ids": [],
            "grid": [[1, 1], [1, 1]],
            "ragged": {"shape": [0, 2], "values": []},
            "z": [[0.0, 0.0], [1.0, 1.0]],
        },
    ]
    order = list(features)
    as_cell = lambda v: v if isinstance(v, (str, int, float)) else json.dumps(v)  # noqa: E731
    path = write_csv(tmp_path / "rows.csv", [order] + [[as_cell(r[k]) for k in order] for r in rows])
    got = appended(root, path)
    assert json.dumps(got, sort_keys=True) == json.dumps(rows, sort_keys=True)  # -0.0 and "NaN" exactly

    # cat's output, as CSV, appends back to the very same records
    again = write_csv(tmp_path / "again.csv", [order] + [[as_cell(r[k]) for k in order] for r in got])
    assert appended(root, again, "--allow-duplicate") == got + got  # the same bytes: a duplicate unless told
    ds = Catalog.open(root).dataset("d")
    records = list(ds.records())
    assert records[:2] == records[2:]


# --------------------------------------------------------------------------- CSV: separators, BOM, layout


def test_tsv_by_extension(root: Path, tmp_path: Path) -> None:
    # A feature name with two ';' makes ';' the header's most frequent separator: only the
    # .tsv name makes it tab-separated.
    register(root, {"id": {"dtype": "int64"}, "a;b;c": {"dtype": "string"}})
    content = 'id\ta;b;c\n1\tx,y;z\n2\t"q""uote"\n'
    (tmp_path / "rows.tsv").write_text(content)
    assert appended(root, tmp_path / "rows.tsv") == [{"id": 1, "a;b;c": "x,y;z"}, {"id": 2, "a;b;c": 'q"uote'}]
    (tmp_path / "rows.csv").write_text(content)  # the same text named .csv: ';' is told from the header
    first = "id\ta"
    result = append(root, tmp_path / "rows.csv")
    error = f"{tmp_path / 'rows.csv'}: line 1: column 1 {first!r} is not a feature of the schema"
    assert (result.exit_code, result.stderr) == (1, f"error: {error}\n")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('id;text\n1;a,b\n2;"c;d"\n', [{"id": 1, "text": "a,b"}, {"id": 2, "text": "c;d"}]),
        ("id|text\n1|a,b;c\n", [{"id": 1, "text": "a,b;c"}]),
        ("id\ttext\n1\ta,b|c\n", [{"id": 1, "text": "a,b|c"}]),
        ("id,text\n1,a;b|c\td\n", [{"id": 1, "text": "a;b|c\td"}]),
        ("id\n1\n2\n", [{"id": 1, "text": ""}, {"id": 2, "text": ""}]),  # one column: no separator at all
    ],
    ids=["semicolon", "pipe", "tab-in-csv", "comma", "one-column"],
)
def test_separator_told_from_the_header(root: Path, tmp_path: Path, text: str, expected: list[dict[str, Any]]) -> None:
    register(root, ID_TEXT)
    (tmp_path / "rows.csv").write_text(text)
    assert appended(root, tmp_path / "rows.csv") == expected


@pytest.mark.parametrize(("option", "sep"), [("|", "|"), (";", ";"), ("\\t", "\t"), ("tab", "\t"), (",", ",")])
def test_delimiter_option(root: Path, tmp_path: Path, option: str, sep: str) -> None:
    # The header's own count says ',' (a feature name holds two) and the .tsv name says tab:
    # --delimiter overrides both.
    register(root, {"id": {"dtype": "int64"}, "a,b,c": {"dtype": "string"}})
    path = tmp_path / "rows.tsv"
    path.write_text(f'id{sep}"a,b,c"\n1{sep}"x{sep}y"\n2{sep}plain\n')
    if sep != "\t":
        result = append(root, path)  # without the option: tab, from the name
        assert result.exit_code == 1 and "is not a feature of the schema" in result.stderr
    got = appended(root, path, "--delimiter", option)
    assert got == [{"id": 1, "a,b,c": f"x{sep}y"}, {"id": 2, "a,b,c": "plain"}]


def test_delimiter_through_the_api(tmp_path: Path) -> None:
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("d", {"features": ID_TEXT})
    path = tmp_path / "rows.csv"
    path.write_text("id|text\n1|a,b\n")
    assert ds.append_files([path], delimiter="|").records == 1
    assert list(ds.read()) == [{"id": 1, "text": "a,b"}]
    with pytest.raises(AppendError, match=r"rows.csv: the delimiter must be one character, got '\|\|'"):
        ds.append_files([path], delimiter="||")
    assert ds.info().version == 2


@pytest.mark.parametrize("value", ["ab", "", "\\n"])
def test_bad_delimiter_is_a_usage_error(root: Path, tmp_path: Path, value: str) -> None:
    register(root, ID_TEXT)
    (tmp_path / "rows.csv").write_text("id\n1\n")
    assert_usage_error(root, tmp_path / "rows.csv", "--delimiter", value, option="--delimiter")


@pytest.mark.parametrize("name", ["rows.csv", "rows.txt", "rows"])
def test_utf8_bom(root: Path, tmp_path: Path, name: str) -> None:
    """Excel's BOM is no part of the first column's name (and a .txt with one is still CSV)."""
    register(root, ID_TEXT)
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + "id,text\r\n1,caf\u00e9\r\n2,\ufeffkept\r\n".encode())
    assert appended(root, path) == [{"id": 1, "text": "caf\u00e9"}, {"id": 2, "text": "\ufeffkept"}]


def test_blank_lines_and_multiline_cells(root: Path, tmp_path: Path) -> None:
    register(root, ID_TEXT)
    path = tmp_path / "rows.csv"
    lines = [
        b"id,text\r\n",
        b"\r\n",
        b'1,"two\nlines"\r\n',
        b"\n",
        b'2,"crlf\r\ninside, and ""quotes"""\r\n',
        b'3,"\r\n\r\n"\n',
        b"4,no final newline",
    ]
    path.write_bytes(b"".join(lines))
    assert appended(root, path) == [
        {"id": 1, "text": "two\nlines"},
        {"id": 2, "text": 'crlf\r\ninside, and "quotes"'},
        {"id": 3, "text": "\r\n\r\n"},
        {"id": 4, "text": "no final newline"},
    ]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        # after a cell over two lines, lines still count from the file's first
        ('id,text\n1,"a\nb"\n\nx,c\n', "line 5: column 'id': expected an integer, got 'x'"),
        # an error in a record over several lines names the line it starts on
        ('id,text\n1,a\nx,"b\nc\nd"\n', "line 3: column 'id': expected an integer, got 'x'"),
        ('id,text\n1,a\n2,"b\nc",extra\n', "line 3: 3 cells, the header has 2 columns"),
        # a quote left open: named where it opened, not at the end of the file it ran to
        ('id,text\n1,a\n2,"open\n3,b\n4,c\n', "line 3: not valid CSV: unexpected end of data"),
    ],
    ids=["after-multiline", "in-multiline", "cells-in-multiline", "unclosed-quote"],
)
def test_lines_named_around_multiline_cells(root: Path, tmp_path: Path, text: str, error: str) -> None:
    register(root, ID_TEXT)
    path = tmp_path / "rows.csv"
    path.write_text(text)
    assert_fails(root, path, error=f"{path}: {error}")


def test_empty_cells_are_missing_values(root: Path, tmp_path: Path) -> None:
    register(
        root,
        {
            "id": {"dtype": "int64"},
            "n": {"dtype": "int64", "default": 7},
            "s": {"dtype": "string", "optional": True},
            "v": {"dtype": "float32", "shape": [None], "default": [1.5]},
            "t": {"dtype": "string", "default": "dflt"},
            "r": {"dtype": "bytes", "optional": True},
        },
    )
    path = write_csv(
        tmp_path / "rows.csv",
        [["id", "n", "s", "v", "t", "r"], [1, "", "", "", "", ""], [2, 3, "x", "[2.5]", "y", "AA=="]],
    )
    assert appended(root, path) == [
        {"id": 1, "n": 7, "s": None, "v": [1.5], "t": "dflt", "r": None},
        {"id": 2, "n": 3, "s": "x", "v": [2.5], "t": "y", "r": "AA=="},
    ]


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("id,text\n1,a\n,b\n", "line 3: column 'id': empty cell, and the feature has no default"),
        ('id,text\n1,a\n"",b\n', "line 3: column 'id': empty cell, and the feature has no default"),
        ("text,id\na,\n", "line 2: column 'id': empty cell, and the feature has no default"),
    ],
    ids=["empty", "quoted-empty", "last-column"],
)
def test_empty_cell_of_a_required_feature(root: Path, tmp_path: Path, text: str, error: str) -> None:
    register(root, ID_TEXT)
    path = tmp_path / "rows.csv"
    path.write_text(text)
    assert_fails(root, path, error=f"{path}: {error}")


def test_required_text_cannot_be_empty_in_csv(root: Path, tmp_path: Path) -> None:
    """An empty cell is a missing value, so a required string feature cannot be "" in CSV (quoted
    or not: the csv module reads both the same), while JSON Lines can say it."""
    register(root, {"id": {"dtype": "int64"}, "name": {"dtype": "string"}})
    path = tmp_path / "rows.csv"
    path.write_text('id,name\n1,""\n')
    assert_fails(root, path, error=f"{path}: line 2: column 'name': empty cell, and the feature has no default")
    (tmp_path / "rows.jsonl").write_text('{"id": 1, "name": ""}\n')
    assert appended(root, tmp_path / "rows.jsonl") == [{"id": 1, "name": ""}]


_LONG = "x" * 100
CSV_ERRORS = [
    ("unknown-column", "id,extra\n1,2\n", "line 1: column 2 'extra' is not a feature of the schema"),
    ("missing-column", "score\n1.5\n", "line 1: no column 'id', and the feature has no default"),
    ("duplicated-column", "id,score,id\n1,2,3\n", "line 1: column 'id' appears twice in the header"),
    ("too-many-cells", "id,score\n1,2\n3,4,5\n", "line 3: 3 cells, the header has 2 columns"),
    ("too-few-cells", "id,score\n1,2\n\n3\n", "line 4: 1 cell, the header has 2 columns"),
    ("float-as-int", "id\n1\n1.5\n", "line 3: column 'id': expected an integer, got '1.5'"),
    ("int-underscore", "id\n1_000\n", "line 2: column 'id': expected an integer, got '1_000'"),
    ("int-other-digits", "id\n\u0661\u0662\n", "line 2: column 'id': expected an integer, got '\u0661\u0662'"),
    ("float-underscore", "id,score\n1,1_0.5\n", "line 2: column 'score': expected a number, got '1_0.5'"),
    ("float-text", "id,score\n1,abc\n", "line 2: column 'score': expected a number, got 'abc'"),
    ("long-cell", f"id,score\n1,{_LONG}\n", f"line 2: column 'score': expected a number, got {repr(_LONG)[:60]}"),
    ("base64", "id,raw\n1,AA==\n2,!!\n", "line 3: column 'raw': expected base64 text, got '!!'"),
    ("base64-padding", "id,raw\n1,AAA\n", "line 2: column 'raw': expected base64 text, got 'AAA'"),
    ("json", 'id,v\n1,"[1,"\n', "line 2: column 'v': expected a JSON array, got '[1,'"),
    (
        "json-base64",
        'id,blobs\n1,"[""!!""]"\n',
        "line 2: column 'blobs': expected a JSON array, got '[\"!!\"]': "
        "bytes are written as base64 text in JSON; this is not base64",
    ),
    ("json-type", 'id,v\n1,"[""a""]"\n', "record 0 (line 2): feature 'v': expected float32, got str 'a'"),
    ("json-scalar", "id,v\n1,5\n", "record 0 (line 2): feature 'v': expected a list or array, got int"),
    (
        "int64-range",
        "id\n1\n9223372036854775808\n",
        "record 1 (line 3): feature 'id': integer 9223372036854775808 is out of int64 range",
    ),
    ("float32-range", "id,score\n1,1e39\n", "record 0 (line 2): feature 'score': float 1e+39 is out of float32 range"),
    ("quote-in-cell", 'id,raw\n1,"AA"==\n', "line 2: not valid CSV: ',' expected after '\"'"),
    ("quote-in-header", 'id,"raw"x\n1,AA==\n', "line 1: not valid CSV: ',' expected after '\"'"),
    ("header-over-lines", '"i\nd",raw\n1,AA==\n', "line 1: not valid CSV: unexpected end of data"),
    (
        "mac-line-ends",  # a lone "\r" ends no line: the whole file is one header line
        "id,raw\r1,AA==\r",
        "line 1: not valid CSV: new-line character seen in unquoted field - "
        "do you need to open the file in universal-newline mode?",
    ),
]


@pytest.mark.parametrize(("text", "error"), [c[1:] for c in CSV_ERRORS], ids=[c[0] for c in CSV_ERRORS])
def test_csv_errors(root: Path, tmp_path: Path, text: str, error: str) -> None:
    register(root, CSV_FEATURES)
    path = tmp_path / "rows.csv"
    path.write_bytes(text.encode("utf-8"))  # as written: no newline translation
    assert_fails(root, path, error=f"{path}: {error}")


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"id,raw\n1,AA==\n2,caf\xe9\n", "line 3: not UTF-8 text (byte 5 of the line)"),
        (b"id,caf\xe9\n1,2\n", "line 1: not UTF-8 text (byte 6 of the line)"),
        (b'id,raw\n1,"AA\n\xff=="\n', "line 3: not UTF-8 text (byte 0 of the line)"),  # inside a quoted cell
    ],
    ids=["row", "header", "multiline"],
)
def test_csv_that_is_not_utf8(root: Path, tmp_path: Path, data: bytes, error: str) -> None:
    register(root, CSV_FEATURES)
    path = tmp_path / "rows.csv"
    path.write_bytes(data)
    assert_fails(root, path, error=f"{path}: {error}")


def test_csv_numbers(root: Path, tmp_path: Path) -> None:
    """Integers at int64's ends; floats in any form float() and `cat` write (NaN, Infinity)."""
    register(root, {"id": {"dtype": "int64"}, "x": {"dtype": "float32"}})
    cells = [
        (str(-(2**63)), "NaN", "NaN"),
        (str(2**63 - 1), "nan", "NaN"),
        ("+3", "inf", "Infinity"),
        ("-4", "-Infinity", "-Infinity"),
        ("5", "1e-3", 0.001),  # float32's nearest, printed in its shortest form
        ("6", "-0.0", -0.0),
        ("7", "3.4028234663852886e38", 3.4028235e38),  # float32's largest
    ]
    path = write_csv(tmp_path / "rows.csv", [["id", "x"]] + [[i, x] for i, x, _ in cells])
    got = appended(root, path)
    assert json.dumps(got) == json.dumps([{"id": int(i), "x": x} for i, _, x in cells])


def test_csv_cells_larger_than_the_csv_modules_default_limit(root: Path, tmp_path: Path) -> None:
    """The csv module refuses cells over 128 KiB unless told otherwise: a base64 image or a long
    list is larger."""
    register(root, {"raw": {"dtype": "bytes"}, "v": {"dtype": "float32", "shape": [None]}})
    rng = np.random.default_rng(0)
    blob = rng.bytes(300_000)
    values = rng.standard_normal(40_000).astype(np.float32)
    path = write_csv(tmp_path / "big.csv", [["raw", "v"], [b64(blob), json.dumps(values.tolist())]])
    ds = Catalog.open(root).dataset("d")
    assert ds.append_files([path]).records == 1
    [row] = ds.read()
    assert row["raw"] == blob
    np.testing.assert_array_equal(row["v"], values)


def test_explicit_format_overrides_the_name(root: Path, tmp_path: Path) -> None:
    register(root, ID_TEXT)
    path = tmp_path / "rows.jsonl"
    path.write_text("id,text\n1,csv in a .jsonl\n")
    result = append(root, path)
    assert result.exit_code == 1 and result.stderr.startswith(f"error: {path}: line 1: not valid JSON")
    assert appended(root, path, "--format", "csv") == [{"id": 1, "text": "csv in a .jsonl"}]


# --------------------------------------------------------------------------- Parquet

PARQUET_FEATURES = {
    "id": {"dtype": "int64"},
    "score": {"dtype": "float32", "default": 0.5},
    "name": {"dtype": "string", "optional": True},
    "raw": {"dtype": "bytes"},
    "tags": {"dtype": "string", "shape": [None]},
    "vals": {"dtype": "int64", "shape": [None], "default": []},
    "grid": {"dtype": "float32", "shape": [2, 2], "encoding": "tensor", "optional": True},
}


def parquet_table() -> Any:
    return pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int32()),  # widened to int64
            "score": pa.array([1.25, None, float("nan")], pa.float64()),
            "name": pa.array(["\u00e9", None, "x,y"], pa.large_string()),
            "raw": pa.array([b"\x00\xff", b"", b"abc"], pa.binary()),
            "tags": pa.array([["a", "b"], [], ["c"]], pa.list_(pa.string())),
            "vals": pa.array([[1, 2**62], None, []], pa.list_(pa.int64())),
            "grid": pa.array([[[1, 2], [3, 4]], None, [[5, 6], [7, 8.5]]], pa.list_(pa.list_(pa.float32()))),
        }
    )


def test_parquet_rows(root: Path, tmp_path: Path) -> None:
    register(root, PARQUET_FEATURES)
    pq.write_table(parquet_table(), tmp_path / "t.parquet")
    assert appended(root, tmp_path / "t.parquet") == [
        {
            "id": 1,
            "score": 1.25,
            "name": "\u00e9",
            "raw": "AP8=",
            "tags": ["a", "b"],
            "vals": [1, 2**62],
            "grid": [[1.0, 2.0], [3.0, 4.0]],
        },
        {"id": 2, "score": 0.5, "name": None, "raw": "", "tags": [], "vals": [], "grid": None},
        {
            "id": 3,
            "score": "NaN",
            "name": "x,y",
            "raw": "YWJj",
            "tags": ["c"],
            "vals": [],
            "grid": [[5.0, 6.0], [7.0, 8.5]],
        },
    ]


def test_parquet_across_row_groups_and_batches(root: Path, tmp_path: Path) -> None:
    """Rows keep their order across row groups and read batches, and an error counts rows
    from the file's first."""
    register(root, {"id": {"dtype": "int64"}, "half": {"dtype": "float32"}})
    n = 20_000
    table = pa.table({"id": pa.array(range(n), pa.int64()), "half": pa.array([i / 2 for i in range(n)])})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=3_000)
    ds = Catalog.open(root).dataset("d")
    assert ds.append_files([tmp_path / "t.parquet"]).records == n
    assert [(r["id"], r["half"]) for r in ds.read()] == [(i, i / 2) for i in range(n)]

    ids = list(range(n))
    ids[17_001] = None  # type: ignore[call-overload]
    pq.write_table(pa.table({"id": ids, "half": [0.0] * n}), tmp_path / "bad.parquet", row_group_size=3_000)
    result = append(root, tmp_path / "bad.parquet")
    assert (result.exit_code, result.stderr) == (
        1,
        f"error: {tmp_path / 'bad.parquet'}: row 17001: feature 'id': missing (the feature has no default)\n",
    )
    assert ds.info().version == 2


def _without(table: Any, column: str) -> Any:
    return table.drop_columns([column])


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda t: _without(t, "raw"), "no column 'raw', and the feature has no default"),
        (lambda t: t.append_column("extra", pa.array([1, 2, 3])), "column 'extra' is not a feature of the schema"),
        (
            lambda t: t.set_column(0, "id", pa.array([1, None, 3])),
            "row 1: feature 'id': missing (the feature has no default)",
        ),
        (
            lambda t: t.set_column(3, "raw", pa.array([b"", b"", None])),
            "row 2: feature 'raw': missing (the feature has no default)",
        ),
        (
            lambda t: t.set_column(4, "tags", pa.array([["a", None], [], []])),
            "row 0: feature 'tags': expected string, got NoneType",
        ),
        (
            lambda t: t.set_column(6, "grid", pa.array([None, [[1.0, 2.0]], None])),
            "row 1: feature 'grid': expected shape [2, 2], got [1, 2]",
        ),
    ],
    ids=["missing-column", "unknown-column", "null-required", "null-bytes", "null-in-list", "tensor-shape"],
)
def test_parquet_errors(root: Path, tmp_path: Path, make: Any, error: str) -> None:
    register(root, PARQUET_FEATURES)
    path = tmp_path / "t.parquet"
    pq.write_table(make(parquet_table()), path)
    assert_fails(root, path, error=f"{path}: {error}")


def test_not_a_parquet_file(root: Path, tmp_path: Path) -> None:
    register(root, PARQUET_FEATURES)
    path = tmp_path / "t.parquet"
    path.write_bytes(b"PAR1 but nothing a reader can use")
    result = append(root, path)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert result.stderr.startswith(f"error: {path}: not a Parquet file pyarrow can read: ")
    assert result.stderr.count("\n") == 1
    assert_nothing_registered(root)


# --------------------------------------------------------------------------- NumPy


@pytest.mark.parametrize(
    ("spec", "dtype"),
    [
        ({"dtype": "float32", "shape": [3]}, np.float32),
        ({"dtype": "float32", "shape": [3], "encoding": "tensor"}, np.float32),
        ({"dtype": "float64", "shape": [3], "encoding": "tensor"}, np.float64),
    ],
    ids=["float-list", "float32-tensor", "float64-tensor"],
)
def test_npy_rows_of_a_vector_feature(root: Path, tmp_path: Path, spec: dict[str, Any], dtype: Any) -> None:
    register(root, {"x": spec})
    array = np.array([[0.1, -1.0, np.nan], [np.inf, 0.0, 1e-30], [3.0, 2.0, 1.0], [-0.0, 7.0, -np.inf]], dtype)
    np.save(tmp_path / "x.npy", array)
    appended(root, tmp_path / "x.npy")
    got = np.stack([r["x"] for r in read_rows(root)])
    assert got.dtype == dtype and got.shape == (4, 3)
    np.testing.assert_array_equal(got, array)  # NaN where NaN; 0.1 exactly as the array held it
    assert np.signbit(got[3, 0])


def test_npy_rows_of_a_tensor_feature(root: Path, tmp_path: Path) -> None:
    register(root, {"image": {"dtype": "uint8", "shape": [2, 2, 3], "encoding": "tensor"}})
    array = np.random.default_rng(1).integers(0, 256, (5, 2, 2, 3), dtype=np.uint8)
    np.save(tmp_path / "images.npy", array)
    appended(root, tmp_path / "images.npy")
    got = [r["image"] for r in read_rows(root)]
    assert all(g.dtype == np.uint8 and g.shape == (2, 2, 3) for g in got)
    np.testing.assert_array_equal(np.stack(got), array)


def test_npy_with_feature_and_defaults(root: Path, tmp_path: Path) -> None:
    register(
        root,
        {
            "x": {"dtype": "float32", "shape": [3]},
            "y": {"dtype": "int64", "default": -1},
            "s": {"dtype": "string", "optional": True},
        },
    )
    np.save(tmp_path / "x.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    assert appended(root, tmp_path / "x.npy", "--feature", "x") == [
        {"x": [0.0, 1.0, 2.0], "y": -1, "s": None},
        {"x": [3.0, 4.0, 5.0], "y": -1, "s": None},
    ]


def test_npz_with_several_features(root: Path, tmp_path: Path) -> None:
    register(
        root,
        {
            "x": {"dtype": "float32", "shape": [2, 2], "encoding": "tensor"},
            "y": {"dtype": "int64"},
            "s": {"dtype": "string", "optional": True},
            "w": {"dtype": "float32", "default": 0.25},
        },
    )
    x = np.arange(12, dtype=np.float32).reshape(3, 2, 2) / 4
    y = np.array([7, -8, 2**40], np.int64)
    s = np.array(["ab", "\u00e9t\u00e9", ""])
    np.savez_compressed(tmp_path / "a.npz", x=x, y=y, s=s)
    assert appended(root, tmp_path / "a.npz") == [
        {"x": x[i].tolist(), "y": int(y[i]), "s": str(s[i]), "w": 0.25} for i in range(3)
    ]
    np.savez(tmp_path / "b.npz", y=np.array([1, 2], np.int16), x=x[:2])  # member order is no matter
    assert appended(root, tmp_path / "b.npz")[3:] == [
        {"x": x[0].tolist(), "y": 1, "s": None, "w": 0.25},
        {"x": x[1].tolist(), "y": 2, "s": None, "w": 0.25},
    ]


class _Tripwire:
    """Unpickling this runs os.mkdir: what a pickled array could do on load."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (self.path,))


TWO = {"x": {"dtype": "float32", "shape": [2]}, "y": {"dtype": "int64"}}  # both required
ONE = {"x": {"dtype": "float32", "shape": [2]}}
_x2 = np.zeros((2, 2), np.float32)  # two rows of shape [2]
NUMPY_ERRORS = [
    ("lengths", TWO, "a.npz", {"x": _x2, "y": np.arange(3)}, [], "arrays of different lengths: x 2, y 3"),
    (
        "unknown-array",
        TWO,
        "a.npz",
        {"x": _x2, "y": np.arange(2), "w": np.arange(2)},
        [],
        "array 'w' is not a feature of the schema",
    ),
    ("missing-array", TWO, "a.npz", {"x": _x2}, [], "no array for feature 'y', and the feature has no default"),
    (
        "npz-row-shape",
        TWO,
        "a.npz",
        {"x": np.zeros((2, 3)), "y": np.arange(2)},
        [],
        "row 0: feature 'x': expected shape [2], got [3]",
    ),
    ("no-feature", TWO, "a.npy", _x2, [], "a .npy file fills one feature: name it with --feature (one of x, y)"),
    ("unknown-feature", TWO, "a.npy", _x2, ["--feature", "z"], "--feature 'z' is not a feature of the schema (x, y)"),
    (
        "required-left",
        TWO,
        "a.npy",
        _x2,
        ["--feature", "x"],
        "no array for feature 'y', and the feature has no default",
    ),
    ("0-d", ONE, "a.npy", np.float32(1), [], "array 'x' is 0-dimensional: rows are along the first axis"),
    ("npy-row-shape", ONE, "a.npy", np.zeros((2, 3)), [], "row 0: feature 'x': expected shape [2], got [3]"),
]


@pytest.mark.parametrize(
    ("features", "name", "arrays", "args", "error"), [c[1:] for c in NUMPY_ERRORS], ids=[c[0] for c in NUMPY_ERRORS]
)
def test_numpy_errors(
    root: Path, tmp_path: Path, features: dict[str, Any], name: str, arrays: Any, args: list[str], error: str
) -> None:
    register(root, features)
    path = tmp_path / name
    if isinstance(arrays, dict):
        np.savez(path, **arrays)
    else:
        np.save(path, arrays)
    assert_fails(root, path, *args, error=f"{path}: {error}")


@pytest.mark.parametrize("kind", ["npy", "npz"])
def test_pickled_object_arrays_are_refused_unloaded(root: Path, tmp_path: Path, kind: str) -> None:
    register(root, {"x": {"dtype": "string"}})
    marker = tmp_path / "pickle-ran"
    objects = np.array([_Tripwire(marker), "text"], dtype=object)
    path = tmp_path / f"a.{kind}"
    if kind == "npy":
        np.save(path, objects, allow_pickle=True)
    else:
        np.savez(path, x=objects)
    assert pickle.loads(pickle.dumps(_Tripwire(tmp_path / "check"))) is None  # the tripwire works...
    assert (tmp_path / "check").is_dir()
    result = append(root, path)
    assert not marker.exists(), "loading the input ran code from its pickle"  # ...and was not tripped
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    expected = "not a NumPy array file numpy can read without pickle: " if kind == "npy" else "cannot read an array: "
    assert result.stderr.startswith(f"error: {path}: {expected}")
    assert result.stderr.count("\n") == 1
    assert_nothing_registered(root)


def npy_claiming(shape: tuple[int, ...], dtype: str = "<f8", data: bytes = b"\0" * 64) -> bytes:
    """A .npy file whose header claims ``shape``, followed by ``data`` (not that many bytes)."""
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": dtype, "fortran_order": False, "shape": shape})
    return out.getvalue() + data


HUGE_SHAPE = (10**10, 10**10)
HUGE_CLAIM = "its header claims shape (10000000000, 10000000000) of float64: 800,000,000,000,000,000,000 bytes"


@pytest.mark.filterwarnings("error::RuntimeWarning")  # NumPy's overflow warnings: lines on stderr
@pytest.mark.parametrize(
    ("kind", "shape", "error"),
    [
        ("npy", HUGE_SHAPE, f"{HUGE_CLAIM}, the file holds 64 after its header"),
        ("npz", HUGE_SHAPE, f"array 'x': {HUGE_CLAIM}, the member holds 64 after its header"),
        # 8 GB claimed in a 200-byte member: np.load allocates the claim before it reads
        ("npz", (10**9,), "array 'x': its header claims shape (1000000000,) of float64: 8,000,000,000 bytes, "
                          "the member holds 64 after its header"),
        ("npy", (9,), "its header claims shape (9,) of float64: 72 bytes, the file holds 64 after its header"),
    ],
)  # fmt: skip
def test_a_numpy_header_claiming_more_than_its_file_holds(
    root: Path, tmp_path: Path, kind: str, shape: tuple[int, ...], error: str
) -> None:
    """A .npy claiming (1e10, 1e10) printed five lines of NumPy overflow warnings before the error."""
    import zipfile

    register(root, {"x": {"dtype": "float32"}})
    path = tmp_path / f"a.{kind}"
    if kind == "npy":
        path.write_bytes(npy_claiming(shape))
    else:
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("x.npy", npy_claiming(shape))
    assert_fails(root, path, error=f"{path}: {error}")


def test_a_huge_npy_header_is_exactly_one_line_on_stderr(tmp_path: Path) -> None:
    """Through the real CLI: warnings are printed to stderr, where CliRunner does not look."""
    import subprocess
    import sys

    path = tmp_path / "a.npy"
    path.write_bytes(npy_claiming(HUGE_SHAPE))
    done = subprocess.run(
        [sys.executable, "-m", "catalog", "inspect", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert done.stderr == f"error: {path}: {HUGE_CLAIM}, the file holds 64 after its header\n"


def test_npy_and_npz_swapped(root: Path, tmp_path: Path) -> None:
    register(root, {"x": {"dtype": "float32"}})
    np.savez(tmp_path / "a.npz", x=np.zeros(2, np.float32))
    np.save(tmp_path / "a.npy", np.zeros(2, np.float32))
    assert_fails(
        root,
        tmp_path / "a.npz",
        "--format",
        "npy",
        error=f"{tmp_path / 'a.npz'}: holds several arrays (an .npz archive?), not one",
    )
    assert_fails(
        root,
        tmp_path / "a.npy",
        "--format",
        "npz",
        error=f"{tmp_path / 'a.npy'}: holds one array, not an .npz archive of one array per feature",
    )


# --------------------------------------------------------------------------- image folders

IMAGE_FEATURES = {"image": {"dtype": "bytes"}, "label": {"dtype": "int64"}, "filename": {"dtype": "string"}}


def save_image(path: Path, array: np.ndarray, **kwargs: Any) -> Path:
    """An image file in the format its name says (Pillow's choice), of exactly these pixels."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(array).save(path, **kwargs)
    return path


def pixels(h: int, w: int, c: int, seed: int) -> np.ndarray:
    shape = (h, w) if c == 1 else (h, w, c)
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


@pytest.fixture
def image_folder(tmp_path: Path) -> Path:
    """Classes made out of order; a hidden file and a hidden folder that must be skipped."""
    folder = tmp_path / "images"
    save_image(folder / "dog" / "b.jpg", pixels(4, 5, 3, 1), quality=90)
    save_image(folder / "cat" / "c.png", pixels(4, 5, 3, 2))
    save_image(folder / "cat" / "a.png", pixels(4, 5, 3, 3))
    save_image(folder / "ant" / "z.bmp", pixels(4, 5, 3, 4))
    save_image(folder / "ant" / "y.gif", pixels(4, 5, 1, 5))
    (folder / "cat" / ".DS_Store").write_bytes(b"not an image")
    (folder / ".cache").mkdir()
    (folder / ".cache" / "junk.txt").write_text("junk")
    return folder


EXPECTED_FILES = [("ant/y.gif", 0), ("ant/z.bmp", 0), ("cat/a.png", 1), ("cat/c.png", 1), ("dog/b.jpg", 2)]


def test_image_folder_rows(root: Path, image_folder: Path) -> None:
    register(root, IMAGE_FEATURES)
    appended(root, image_folder)
    got = read_rows(root)
    assert [(r["filename"], r["label"]) for r in got] == EXPECTED_FILES
    assert [r["image"] for r in got] == [(image_folder / f).read_bytes() for f, _ in EXPECTED_FILES]


def test_image_folder_with_fewer_features(root: Path, image_folder: Path) -> None:
    register(
        root, {"image": {"dtype": "bytes"}, "label": {"dtype": "int64"}, "note": {"dtype": "string", "default": "-"}}
    )
    appended(root, image_folder, "--format", "images")
    got = read_rows(root)
    assert [(r["label"], r["note"]) for r in got] == [(label, "-") for _, label in EXPECTED_FILES]
    assert [r["image"] for r in got] == [(image_folder / f).read_bytes() for f, _ in EXPECTED_FILES]


@pytest.mark.parametrize(("channels", "mode"), [(3, "RGB"), (1, "L"), (4, "RGBA")])
def test_image_shape_decodes_as_pillow_does(root: Path, tmp_path: Path, channels: int, mode: str) -> None:
    register(
        root,
        {"image": {"dtype": "uint8", "shape": [4, 5, channels], "encoding": "tensor"}, "label": {"dtype": "int64"}},
    )
    folder = tmp_path / "images"
    files = [
        save_image(folder / "a" / "p.png", pixels(4, 5, channels, 7)),
        save_image(folder / "a" / "w.webp", pixels(4, 5, 3, 8), lossless=True),
        save_image(folder / "b" / "j.jpeg", pixels(4, 5, 3, 9)),
    ]
    appended(root, folder, "--image-shape", f"4,5,{channels}")
    got = read_rows(root)
    assert [r["label"] for r in got] == [0, 0, 1]
    for row, path in zip(got, files, strict=True):
        with Image.open(path) as img:
            want = np.asarray(img.convert(mode)).reshape(4, 5, channels)
        assert row["image"].dtype == np.uint8 and row["image"].shape == (4, 5, channels)
        np.testing.assert_array_equal(row["image"], want)
    # a PNG holds its pixels exactly: the decoded tensor is the array that was saved
    np.testing.assert_array_equal(got[0]["image"], pixels(4, 5, channels, 7).reshape(4, 5, channels))


def test_image_of_the_wrong_size(root: Path, tmp_path: Path) -> None:
    register(root, {"image": {"dtype": "uint8", "shape": [4, 5, 3], "encoding": "tensor"}})
    folder = tmp_path / "images"
    save_image(folder / "a" / "ok.png", pixels(4, 5, 3, 1))
    save_image(folder / "a" / "wide.png", pixels(4, 6, 3, 2))  # never resized
    assert_fails(
        root,
        folder,
        "--image-shape",
        "4,5,3",
        error=f"{folder / 'a' / 'wide.png'}: 6x4 pixels, --image-shape wants 5x4 (width x height)",
    )


def png_claiming(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height RGB pixels, with one compressed row of data:
    a decompression bomb's header (Pillow judges an image by its header, before any pixel)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    row = zlib.compress(b"\0" * (1 + 3 * width))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", row) + chunk(b"IEND", b"")


@pytest.mark.filterwarnings("error::PIL.Image.DecompressionBombWarning")  # a line on stderr
@pytest.mark.parametrize(
    ("width", "says"),
    [
        # past twice Pillow's MAX_IMAGE_PIXELS: its DecompressionBombError was a traceback
        (30000, "its header claims more pixels than Pillow decodes (178,956,970)"),
        # past Pillow's MAX_IMAGE_PIXELS: its DecompressionBombWarning was two more lines on stderr
        (10000, "10000x10000 pixels"),
    ],
)
def test_a_png_bomb_is_one_line(root: Path, tmp_path: Path, width: int, says: str) -> None:
    register(root, {"image": {"dtype": "uint8", "shape": [4, 5, 3], "encoding": "tensor"}})
    folder = tmp_path / "images"
    (folder / "a").mkdir(parents=True)
    bomb = folder / "a" / "bomb.png"
    bomb.write_bytes(png_claiming(width, width))
    wants = "--image-shape wants 5x4 (width x height)"
    assert_fails(root, folder, "--image-shape", "4,5,3", error=f"{bomb}: {says}, {wants}")


def test_file_named_png_that_is_not_one(root: Path, image_folder: Path) -> None:
    register(root, IMAGE_FEATURES)
    bad = image_folder / "cat" / "b.png"
    bad.write_bytes((image_folder / "dog" / "b.jpg").read_bytes())  # a JPEG by another name
    assert_fails(root, image_folder, error=f"{bad}: not a png file (its first bytes say otherwise)")
    bad.write_text("plain text")
    assert_fails(root, image_folder, error=f"{bad}: not a png file (its first bytes say otherwise)")


def test_png_that_does_not_decode(root: Path, tmp_path: Path) -> None:
    register(root, {"image": {"dtype": "uint8", "shape": [4, 5, 3], "encoding": "tensor"}})
    folder = tmp_path / "images"
    bad = folder / "a" / "cut.png"
    save_image(bad, pixels(4, 5, 3, 1))
    bad.write_bytes(bad.read_bytes()[:20])  # the signature, then too little
    result = append(root, folder, "--image-shape", "4,5,3")
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert result.stderr.startswith(f"error: {bad}: cannot decode the image: ")
    assert result.stderr.count("\n") == 1
    assert_nothing_registered(root)


def test_file_in_a_class_folder_that_is_no_image(root: Path, image_folder: Path) -> None:
    register(root, IMAGE_FEATURES)
    (image_folder / "dog" / "notes.txt").write_text("a dog")
    assert_fails(
        root,
        image_folder,
        error=f"{image_folder / 'dog' / 'notes.txt'}: not an image file (.png, .jpg, .jpeg, .gif, .bmp, .webp)",
    )


@pytest.mark.parametrize("target", ["file", "missing"])
def test_format_images_of_what_is_no_folder(root: Path, image_folder: Path, target: str) -> None:
    register(root, IMAGE_FEATURES)
    path = image_folder / "cat" / "a.png" if target == "file" else image_folder / "nothing"
    what = "not a folder" if target == "file" else "no such folder"
    assert_fails(root, path, "--format", "images", error=f"{path}: {what}: an image folder is DIR/<class>/<image file>")


@pytest.mark.parametrize("value", ["4,5", "0,5,3", "a,b,c", "4,5,3,1", "-4,5,3"])
def test_bad_image_shape_is_a_usage_error(root: Path, image_folder: Path, value: str) -> None:
    register(root, {"image": {"dtype": "uint8", "shape": [4, 5, 3], "encoding": "tensor"}, "label": {"dtype": "int64"}})
    assert_usage_error(root, image_folder, f"--image-shape={value}", option="--image-shape")


def test_image_shape_that_cannot_apply(root: Path, image_folder: Path) -> None:
    register(root, {"image": {"dtype": "uint8", "shape": [4, 5, 2], "encoding": "tensor"}, "label": {"dtype": "int64"}})
    assert_fails(
        root,
        image_folder,
        "--image-shape",
        "4,5,2",
        error=f"{image_folder}: --image-shape: 2 channels; images have 1, 3 or 4",
    )
    register(root, IMAGE_FEATURES, name="e")
    assert_fails(
        root,
        image_folder,
        "--image-shape",
        "4,5,3",
        name="e",
        error=f"{image_folder}: --image-shape decodes images into uint8 tensors: feature 'image' must be one",
    )


# --------------------------------------------------------------------------- folders, globs, standard input


def test_folder_of_inputs_in_several_formats(root: Path, tmp_path: Path) -> None:
    register(root, ID_TEXT)
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / ".hidden").mkdir()
    write_csv(folder / "a.csv", [["id", "text"], [1, "csv"]])
    (folder / "b.jsonl").write_text('{"id": 2, "text": "jsonl"}\n')
    pq.write_table(pa.table({"id": [3], "text": ["parquet"]}), folder / "c.parquet")
    np.savez(folder / "sub" / "d.npz", id=np.array([4, 5]))
    (folder / ".e.csv").write_text("not,a,valid\nfile\n")  # hidden: skipped
    (folder / ".hidden" / "f.csv").write_text("id\nx\n")
    assert appended(root, folder) == [
        {"id": 1, "text": "csv"},
        {"id": 2, "text": "jsonl"},
        {"id": 3, "text": "parquet"},
        {"id": 4, "text": ""},
        {"id": 5, "text": ""},
    ]
    history = json.loads(run("-C", root, "history", "d", "--json").stdout)
    assert [c["version"] for c in history] == [1, 2]


def test_folder_files_in_the_order_of_their_paths(root: Path, tmp_path: Path) -> None:
    register(root, ID_TEXT)
    folder = tmp_path / "in"
    (folder / "a").mkdir(parents=True)
    (folder / "b.jsonl").write_text('{"id": 2}\n')
    (folder / "a" / "z.jsonl").write_text('{"id": 1}\n')  # "a/z" sorts before "b", though deeper
    (folder / "c.jsonl").write_text('{"id": 3}\n')
    assert [r["id"] for r in appended(root, folder)] == [1, 2, 3]


def test_globs(root: Path, tmp_path: Path) -> None:
    register(root, ID_TEXT)
    folder = tmp_path / "in"
    (folder / "deep").mkdir(parents=True)
    (folder / "x1.csv").write_text("id\n1\n")
    (folder / "x2.csv").write_text("id\n2\n")
    (folder / "y.jsonl").write_text('{"id": 99}\n')
    (folder / "deep" / "x3.csv").write_text("id\n3\n")
    literal = folder / "x[1].csv"  # a name with glob characters that exists is that file
    literal.write_text("id\n4\n")
    assert [r["id"] for r in appended(root, folder / "x*.csv")] == [1, 2, 4]  # sorted: "2" < "["
    assert [r["id"] for r in appended(root, folder / "**" / "x3.csv")][3:] == [3]
    assert [r["id"] for r in appended(root, literal, "--allow-duplicate")][4:] == [4]  # appended above
    result = append(root, folder / "z*.csv")
    assert (result.exit_code, result.stderr) == (1, f"error: {folder / 'z*.csv'}: no file matches this pattern\n")
    (tmp_path / "empty").mkdir()
    result = append(root, tmp_path / "empty")
    assert (result.exit_code, result.stderr) == (
        1,
        f"error: {tmp_path / 'empty'}: an empty folder: no input files in it\n",
    )
    assert json.loads(run("-C", root, "show", "d", "--json", "--no-shards").stdout)["version"] == 4


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ('{"id": 1, "text": "json"}\n\n{"id": 2}\n', []),
        ("id,text\n1,json\n2,\n", []),
        ("id;text\n1;json\n2;\n", ["--format", "csv"]),
        ("id|text\n1|json\n2|\n", ["--delimiter", "|"]),
    ],
    ids=["jsonl", "csv", "csv-format", "csv-delimiter"],
)
def test_standard_input(root: Path, text: str, args: list[str]) -> None:
    register(root, ID_TEXT)
    assert appended(root, "-", *args, input=text) == [{"id": 1, "text": "json"}, {"id": 2, "text": ""}]


def test_standard_input_errors(root: Path, tmp_path: Path) -> None:
    register(root, ID_TEXT)
    assert_fails(root, "-", input="id,text\nx,1\n", error="-: line 2: column 'id': expected an integer, got 'x'")
    (tmp_path / "a.csv").write_text("id\n1\n")
    assert_fails(
        root, "-", tmp_path / "a.csv", "-", input="", error="standard input (-) can be read once: name it once"
    )
    buf = io.BytesIO()
    np.save(buf, np.arange(3))
    said = "standard input takes JSON Lines or CSV (its first bytes do not say JSON Lines or CSV): name it with"
    said += " --format"
    assert_fails(root, "-", input=buf.getvalue(), error=said)
    assert_fails(root, "-", input="", error="-: no records in the input: nothing committed")


@pytest.mark.parametrize(
    ("text", "kind", "jq"),
    [
        ('[\n  {"id": 1},\n  {"id": 2}\n]\n', "an array", "jq -c '.[]'"),
        ('[{"id": 1}, {"id": 2}]', "an array", "jq -c '.[]'"),
        ('{\n  "id": 1,\n  "text": "x"\n}\n', "one object over several lines", "jq -c ."),
    ],
    ids=["array", "array-one-line", "object"],
)
def test_json_document_says_so(root: Path, tmp_path: Path, text: str, kind: str, jq: str) -> None:
    register(root, ID_TEXT)
    path = tmp_path / "rows.json"
    path.write_text(text)
    assert_fails(
        root,
        path,
        error=f"{path}: holds one JSON document ({kind}), not JSON Lines (one object per line): "
        f"write one row per line, e.g. with `{jq}`",
    )
    if kind == "an array":  # standard input, read once, says it too
        message = "-: holds one JSON document (an array), not JSON Lines (one object per line): "
        assert_fails(root, "-", input=text, error=message + f"write one row per line, e.g. with `{jq}`")


def test_json_lines_in_a_json_file(root: Path, tmp_path: Path) -> None:
    register(root, ID_TEXT)
    (tmp_path / "rows.json").write_text('{"id": 1}\n{"id": 2, "text": "b"}\n')
    assert appended(root, tmp_path / "rows.json") == [{"id": 1, "text": ""}, {"id": 2, "text": "b"}]


def _empty_parquet(path: Path) -> None:
    pq.write_table(pa.table({"id": pa.array([], pa.int64())}), path)


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("empty.csv", lambda p: p.write_bytes(b"")),
        ("header.csv", lambda p: p.write_text("id,text\n")),
        ("blank.csv", lambda p: p.write_text("id,text\r\n\r\n\n")),
        ("empty.jsonl", lambda p: p.write_bytes(b"")),
        ("blank.jsonl", lambda p: p.write_text("\n  \n\n")),
        ("empty.parquet", _empty_parquet),
        ("empty.npy", lambda p: np.save(p, np.zeros(0, np.int64))),
        ("empty.tfrecord", lambda p: p.write_bytes(b"")),
    ],
)
def test_empty_input_commits_nothing(root: Path, tmp_path: Path, name: str, make: Any) -> None:
    register(root, ID_TEXT)
    path = tmp_path / name
    make(path)
    extra = ["--feature", "id"] if name.endswith(".npy") else []
    assert_fails(root, path, *extra, error=f"{path}: no records in the input: nothing committed")


def test_several_empty_inputs_are_named(root: Path, tmp_path: Path) -> None:
    register(root, ID_TEXT)
    paths = [tmp_path / f"{i}.csv" for i in range(5)]
    for p in paths:
        p.write_text("id\n")
    listed = ", ".join(str(p) for p in paths[:3])
    assert_fails(root, *paths, error=f"{listed}, ...: no records in the input: nothing committed")
    ds = Catalog.open(root).dataset("d")
    with pytest.raises(AppendError, match="no records in the input: nothing committed"):
        ds.append_files(paths[:1])


def test_no_inputs_at_all_commit_nothing(root: Path) -> None:
    """``append_files([])`` (a list a program built, left empty) said IndexError; adoption
    said what it was."""
    register(root, ID_TEXT)
    ds = Catalog.open(root).dataset("d")
    version = ds.version
    for call in (ds.append_files, ds.adopt):
        with pytest.raises(AppendError, match=r"^no input files: nothing committed$"):
            call([])
    assert Catalog.open(root).dataset("d").version == version
    with pytest.raises(AppendError, match=r"^no input files: nothing registered$"):
        Catalog.open(root).register_inferred("e", [])
    assert [d.name for d in Catalog.open(root).list()] == ["d"]


# --------------------------------------------------------------------------- several formats, one commit


def write_mixed_inputs(folder: Path, schema: Schema) -> list[Path]:
    folder.mkdir(exist_ok=True)
    write_csv(folder / "a.csv", [["id", "text"], [1, "csv"]])
    (folder / "b.jsonl").write_text('{"id": 2, "text": "jsonl"}\n')
    pq.write_table(pa.table({"id": [3], "text": ["parquet"]}), folder / "c.parquet")
    np.savez(folder / "d.npz", id=np.array([4]), text=np.array(["npz"]))
    with RecordWriter(folder / "e.tfrecord") as w:
        w.write(schema.encode({"id": 5, "text": "tfrecord"}))
    np.save(folder / "f.npy", np.array([6]))
    return [folder / n for n in ("a.csv", "b.jsonl", "c.parquet", "d.npz", "e.tfrecord", "f.npy")]


MIXED_ROWS = [
    {"id": 1, "text": "csv"},
    {"id": 2, "text": "jsonl"},
    {"id": 3, "text": "parquet"},
    {"id": 4, "text": "npz"},
    {"id": 5, "text": "tfrecord"},
    {"id": 6, "text": ""},
]


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["in-process", "workers"])
def test_inputs_in_several_formats_are_one_commit(root: Path, tmp_path: Path, workers: list[str]) -> None:
    register(root, ID_TEXT)
    inputs = write_mixed_inputs(tmp_path / "in", Schema.from_json({"features": ID_TEXT}))
    assert appended(root, *inputs, "--feature", "id", *workers) == MIXED_ROWS
    history = json.loads(run("-C", root, "history", "d", "--json").stdout)
    assert [(c["version"], c["records"]) for c in history] == [(1, 0), (2, 6)]


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["in-process", "workers"])
def test_a_bad_last_input_registers_nothing(root: Path, tmp_path: Path, workers: list[str]) -> None:
    register(root, ID_TEXT)
    inputs = write_mixed_inputs(tmp_path / "in", Schema.from_json({"features": ID_TEXT}))
    bad = tmp_path / "in" / "z.csv"
    bad.write_text("id,text\n7,fine\n8,fine\nnine,bad\n")
    named = bad if not workers else bad.absolute()  # jobs name inputs by absolute path
    assert_fails(
        root,
        *inputs,
        bad,
        "--feature",
        "id",
        *workers,
        error=f"{named}: line 4: column 'id': expected an integer, got 'nine'",
    )


def test_one_commit_through_the_api(tmp_path: Path) -> None:
    ds = Catalog.init(tmp_path / "cat").register("d", {"features": ID_TEXT})
    inputs = write_mixed_inputs(tmp_path / "in", ds.schema)
    commit = ds.append_files(inputs, feature="id", message="mixed")
    assert (commit.version, commit.records, commit.message) == (2, 6, "mixed")
    assert list(ds.read()) == MIXED_ROWS
    (tmp_path / "in" / "bad.npz").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(AppendError, match=r"bad\.npz: cannot read as NumPy"):
        ds.append_files([*inputs, tmp_path / "in" / "bad.npz"], feature="id")
    assert ds.info().version == 2 and ds.info().records == 6


# --------------------------------------------------------------------------- format told by content

LONG_NAME = "\u00e9" * 40  # "id," then this: the 64 bytes read to tell a format end inside an é
DETECT_FEATURES = {
    "id": {"dtype": "int64"},
    "H": {"dtype": "int64", "optional": True},
    "text": {"dtype": "string", "optional": True},
    LONG_NAME: {"dtype": "string", "optional": True},
}


def _text_for_length(schema: Schema, n: int, id_: int) -> str:
    """A text that makes the record of {"id": id_, "text": ...} exactly ``n`` bytes long."""
    for k in range(200):
        if len(schema.encode({"id": id_, "text": "t" * k})) == n:
            return "t" * k
    raise AssertionError(f"no record of {n} bytes")


def _make(kind: str, path: Path) -> list[dict[str, Any]]:
    """Write an input of ``kind`` at ``path``; return the rows it holds."""
    schema = Schema.from_json({"features": DETECT_FEATURES})
    row = {"id": 0, "H": None, "text": None, LONG_NAME: None}
    if kind == "parquet":
        pq.write_table(pa.table({"id": [1, 2]}), path)
        return [{**row, "id": 1}, {**row, "id": 2}]
    if kind in ("csv-lf", "csv-crlf"):
        write_csv(path, [["id", "text"], [1, "a"], [2, "b"]], lineterminator="\n" if kind == "csv-lf" else "\r\n")
        return [{**row, "id": 1, "text": "a"}, {**row, "id": 2, "text": "b"}]
    if kind == "tsv":
        path.write_text("id\ttext\n1\ta\n")
        return [{**row, "id": 1, "text": "a"}]
    if kind == "csv-H":  # "H," is also a valid zlib header (RFC 1950: CM 8, CINFO <= 7, FCHECK)
        assert b"H"[0] & 0x0F == 8 and b"H"[0] >> 4 <= 7 and int.from_bytes(b"H,", "big") % 31 == 0
        path.write_text("H,id\n5,1\n")
        return [{**row, "id": 1, "H": 5}]
    if kind == "csv-cut-char":  # the first 64 bytes end inside a two-byte character
        path.write_text(f"id,{LONG_NAME}\n1,\u00e9\n")
        assert path.read_bytes()[63:65] == "\u00e9".encode()
        return [{**row, "id": 1, LONG_NAME: "\u00e9"}]
    if kind == "jsonl":
        path.write_text('{"id": 1}\n{"id": 2}\n')
        return [{**row, "id": 1}, {**row, "id": 2}]
    if kind in ("tfrecord", "tfrecord-123", "tfrecord-91"):
        # a first record of 123 bytes starts the file with "{", of 91 with "["
        length = {"tfrecord": None, "tfrecord-123": 123, "tfrecord-91": 91}[kind]
        texts = [("a" if length is None else _text_for_length(schema, length, i)) for i in (1, 2)]
        with RecordWriter(path) as w:
            for i, t in zip((1, 2), texts, strict=True):
                w.write(schema.encode({"id": i, "text": t}))
        assert length is None or path.read_bytes()[:1] == {123: b"{", 91: b"["}[length]
        return [{**row, "id": i, "text": t} for i, t in zip((1, 2), texts, strict=True)]
    if kind == "tfrecord-gzip":
        with RecordWriter(path, compression="gzip") as w:
            w.write(schema.encode({"id": 1}))
        return [{**row, "id": 1}]
    with open(path, "wb") as f:  # np.save would add its own suffix to a path
        if kind == "npy":
            np.save(f, np.array([1, 2]))
            return [{**row, "id": 1}, {**row, "id": 2}]
        assert kind == "npz"
        np.savez(f, id=np.array([3]), H=np.array([4]))
        return [{**row, "id": 3, "H": 4}]


@pytest.mark.parametrize(
    ("kind", "name"),
    [
        ("parquet", "x.bin"),
        ("csv-lf", "x.txt"),
        ("csv-crlf", "x.txt"),
        ("tsv", "x.txt"),
        ("csv-H", "data"),
        ("csv-cut-char", "x.txt"),
        ("jsonl", "x.data"),
        ("tfrecord", "mnist-train.tfrecord-00000-of-00001"),
        ("tfrecord-123", "x.bin"),
        ("tfrecord-91", "x.bin"),
        ("tfrecord-gzip", "part-0.gz"),
        ("npy", "x.dat"),
        ("npz", "x.zip"),
    ],
)
def test_format_told_by_content(root: Path, tmp_path: Path, kind: str, name: str) -> None:
    register(root, DETECT_FEATURES)
    path = tmp_path / name
    expected = _make(kind, path)
    args = ["--feature", "id"] if kind == "npy" else []
    ds = Catalog.open(root).dataset("d")
    appended(root, path, *args)
    assert list(ds.read()) == expected
