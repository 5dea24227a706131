"""User inputs that are not what they claim (FIFOs, devices, hostile schemas and JSON Lines):
each is one error line and exit 1 (2 where the argument parser rejects it), in bounded
memory and time, with nothing registered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from catalog import Catalog, Schema
from catalog.cli import app
from catalog.errors import CatalogError, SchemaError

runner = CliRunner()
SCHEMA = {"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string", "default": ""}}}


def run(*args: str) -> Any:
    return runner.invoke(app, list(args))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "cat"
    assert run("init", str(r)).exit_code == 0
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    assert run("-C", str(r), "register", "d", "--schema", str(tmp_path / "schema.json")).exit_code == 0
    return r


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def assert_nothing_registered(root: Path) -> None:
    show = json.loads(run("-C", str(root), "show", "d", "--json").stdout)
    assert (show["version"], show["records"], show["shards"]) == (1, 0, [])


# --------------------------------------------------------------------------- not regular files


def test_inspect_of_a_fifo_says_so_and_does_not_block(fifo: Path) -> None:
    # A subprocess, so a regression is a timeout, not a hung suite.
    result = subprocess.run(
        [sys.executable, "-m", "catalog", "inspect", str(fifo)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert result.stderr == f"error: {fifo}: not a regular file (a FIFO)\n"


@pytest.mark.parametrize(
    ("target", "kind"),
    [("dir", "an empty folder: no input files in it"), ("/dev/zero", "not a regular file (a character device)")],
)
def test_inspect_of_an_empty_directory_or_a_device(tmp_path: Path, target: str, kind: str) -> None:
    path = tmp_path if target == "dir" else Path(target)  # a folder is its files: here, none
    result = run("inspect", str(path))
    assert result.exit_code == 1
    assert result.stderr == f"error: {path}: {kind}\n"


@pytest.mark.parametrize("target", ["fifo", "dir", "/dev/zero", "link-to-fifo"])
@pytest.mark.parametrize("fmt", ["auto", "tfrecord", "jsonl"])
def test_append_of_what_is_not_a_regular_file(root: Path, fifo: Path, tmp_path: Path, target: str, fmt: str) -> None:
    kinds = {"fifo": "a FIFO", "dir": "a directory", "/dev/zero": "a character device", "link-to-fifo": "a FIFO"}
    path = {"fifo": fifo, "dir": tmp_path, "/dev/zero": Path("/dev/zero"), "link-to-fifo": tmp_path / "l"}[target]
    if target == "link-to-fifo":
        path.symlink_to(fifo)
    result = run("-C", str(root), "append", "d", str(path), "--format", fmt)
    assert result.exit_code == 1
    if target == "dir":  # a folder is its files: the FIFO in it is named
        assert (fifo.parent, kinds[target]) == (tmp_path, "a directory")
        assert result.stderr == f"error: {fifo}: not a regular file (a FIFO)\n"
    else:
        assert result.stderr == f"error: {path}: not a regular file ({kinds[target]})\n"
    assert_nothing_registered(root)


def test_reading_records_from_a_fifo_path_is_refused(fifo: Path) -> None:
    from catalog import read_records
    from catalog.errors import CatalogError

    with pytest.raises(CatalogError, match="not a regular file"):
        list(read_records(fifo))


@pytest.mark.parametrize("target", ["fifo", "dir", "/dev/zero"])
def test_register_with_a_schema_that_is_not_a_regular_file(root: Path, fifo: Path, tmp_path: Path, target: str) -> None:
    kinds = {"fifo": "a FIFO", "dir": "a directory", "/dev/zero": "a character device"}
    path = {"fifo": fifo, "dir": tmp_path, "/dev/zero": Path("/dev/zero")}[target]
    result = run("-C", str(root), "register", "e", "--schema", str(path))
    assert result.exit_code == 1
    assert result.stderr == f"error: {path}: not a regular file ({kinds[target]})\n"
    assert "e" not in run("-C", str(root), "list").stdout.split()


# --------------------------------------------------------------------------- hostile schemas


def _feature(spec: dict[str, Any]) -> str:
    return json.dumps({"features": {"a": spec}})  # ASCII: a lone surrogate is written as JSON's escape


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('{"features": ' + "[" * 100_000 + "]" * 100_000 + "}", "not valid JSON: nested too deeply"),
        (
            _feature({"dtype": "int64", "shape": [1_000_000_000_000]}),
            "feature 'a': shape [1000000000000] declares 1,000,000,000,000 values; at most 134,217,728 per feature",
        ),
        (
            _feature({"dtype": "int64", "shape": [2**70]}),
            f"feature 'a': shape [{2**70}] declares {2**70:,} values; at most 134,217,728 per feature",
        ),
        (
            _feature({"dtype": "uint8", "encoding": "tensor", "shape": [0, 2**70]}),
            f"feature 'a': shape dimension {2**70} is larger than 134,217,728",
        ),
        (
            _feature({"dtype": "uint8", "encoding": "tensor", "shape": [None, 2**20, 2**20]}),
            f"feature 'a': shape [null, {2**20}, {2**20}] declares {2**40:,} values; at most 134,217,728 per feature",
        ),
        (
            _feature({"dtype": "uint8", "encoding": "tensor", "shape": [1] * 33}),
            "feature 'a': shape has 33 dimensions; at most 32",
        ),
        (
            _feature({"dtype": "int64", "shape": [50_000, 50_000], "default": 0}),
            "feature 'a': shape [50000, 50000] declares 2,500,000,000 values; at most 134,217,728 per feature",
        ),
        (
            _feature({"dtype": "int64", "shape": [2048, 1024], "default": 0}),
            "feature 'a': a default fills 2,097,152 values; at most 1,048,576",
        ),
        (
            _feature({"dtype": "int64", "shape": [None], "default": [0] * (2**20 + 1)}),
            "feature 'a': a default fills 1,048,577 values; at most 1,048,576",
        ),
        ('{"features": {"a\\ud800": {"dtype": "int64"}}}', "feature names must be UTF-8 text, got 'a\\ud800'"),
        (
            _feature({"dtype": "string", "default": "\ud800"}),
            "feature 'a': bad default: not encodable as UTF-8: lone surrogate '\\ud800' at character 0",
        ),
        (
            _feature({"dtype": "bytes", "default": "x\ud800"}),
            "feature 'a': bad default: not encodable as UTF-8: lone surrogate '\\ud800' at character 1",
        ),
        (_feature({"dtype": "int64", "description": "\udfff"}), "feature 'a': description must be UTF-8 text"),
    ],
    ids=[
        "deep",
        "huge-shape",
        "2**70",
        "huge-dim-of-empty-tensor",
        "huge-unknown-tensor",
        "rank",
        "huge-default",
        "large-default",
        "long-varlen-default",
        "surrogate-name",
        "surrogate-default",
        "surrogate-bytes-default",
        "surrogate-description",
    ],
)
def test_register_refuses_a_hostile_schema_in_one_line(root: Path, tmp_path: Path, text: str, reason: str) -> None:
    path = tmp_path / "hostile.json"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    result = run("-C", str(root), "register", "e", "--schema", str(path))
    assert result.exit_code == 1, result.exception
    assert result.stderr == f"error: {path}: {reason}\n"
    assert "e" not in run("-C", str(root), "list").stdout.split()


def test_schema_file_that_is_not_utf8_or_too_large(root: Path, tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes('{"features": {"a": {"dtype": "int64", "description": "caf\u00e9"}}}'.encode("latin-1"))
    result = run("-C", str(root), "register", "e", "--schema", str(path))
    assert (result.exit_code, result.stderr) == (1, f"error: {path}: not UTF-8 text (byte 57)\n")
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate((16 << 20) + 1)
    result = run("-C", str(root), "register", "e", "--schema", str(big))
    assert (result.exit_code, result.stderr) == (1, f"error: {big}: larger than 16 MiB; not a schema\n")


def test_schema_caps_also_hold_from_python() -> None:
    from catalog import Schema
    from catalog.errors import SchemaError

    with pytest.raises(SchemaError, match="nested too deeply"):
        Schema.from_json("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SchemaError, match="at most 134,217,728 per feature"):
        Schema.from_json({"features": {"a": {"dtype": "float32", "shape": [2**27 + 1]}}})
    at_the_cap = Schema.from_json({"features": {"a": {"dtype": "float32", "shape": [2**27]}}})
    assert at_the_cap.features["a"].size == 2**27


# --------------------------------------------------------------------------- hostile JSON Lines


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"id": ' + "[" * 100_000 + "]" * 100_000 + "}", "line 2: not valid JSON: nested too deeply"),
        ('{"id": ' + "7" * 5000 + "}", "line 2: not valid JSON here: an integer of more than 4300 digits"),
        (
            '{"id": 1, "text": "ok\\ud800"}',
            "record 1 (line 2): feature 'text': not encodable as UTF-8: lone surrogate '\\ud800' at character 2",
        ),
        (
            '{"id": 1, "text": "\\udfff is short"}',  # a short string: the encoder's fast path
            "record 1 (line 2): feature 'text': not encodable as UTF-8: lone surrogate '\\udfff' at character 0",
        ),
        ('{"id": ' + "[" * 700 + "]" * 700 + "}", "record 1 (line 2): values nested too deeply"),
    ],
    ids=["deep", "long-int", "surrogate", "short-surrogate", "deep-but-parsed"],
)
def test_append_of_hostile_json_lines(root: Path, tmp_path: Path, line: str, reason: str) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"id": 0}\n' + line + "\n")
    result = run("-C", str(root), "append", "d", str(path))
    assert result.exit_code == 1, result.exception
    assert result.stderr == f"error: {path}: {reason}\n"
    assert_nothing_registered(root)


@pytest.mark.parametrize("bad_line", [1, 2, 9856, 10001, 30000])
def test_invalid_utf8_is_reported_on_its_own_line(root: Path, tmp_path: Path, bad_line: int) -> None:
    path = tmp_path / "rows.jsonl"
    lines = [b'{"id": %d, "text": "row %d \xc3\xa9t\xc3\xa9"}\n' % (i, i) for i in range(1, 30001)]
    lines[bad_line - 1] = b'{"id": 1, "text": "caf\xe9"}\n'  # latin-1, not UTF-8
    path.write_bytes(b"".join(lines))
    result = run("-C", str(root), "append", "d", str(path))
    assert result.exit_code == 1, result.exception
    assert result.stderr == f"error: {path}: line {bad_line}: not UTF-8 text (byte 22 of the line)\n"
    assert_nothing_registered(root)


# --------------------------------------------------------------------------- closed option values


@pytest.mark.parametrize(
    ("args", "option", "value"),
    [
        (["append", "d", "IN", "--format", "xml"], "--format", "xml"),
        (["append", "d", "IN", "--executor", "spark"], "--executor", "spark"),
        (["verify", "--executor", "ray"], "--executor", "ray"),
        (["compact", "d", "--executor", "ray"], "--executor", "ray"),
        (["migrate", "d", "--add", "h:int64=1", "--executor", "ray"], "--executor", "ray"),
        (["export", "d", "OUT", "--compression", "lz4"], "--compression", "lz4"),
    ],
)
def test_values_outside_an_options_set_are_usage_errors(
    root: Path, tmp_path: Path, args: list[str], option: str, value: str
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": 1}\n')
    args = [str(rows) if a == "IN" else str(tmp_path / "out.tfrecord") if a == "OUT" else a for a in args]
    result = run("-C", str(root), *args)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.stderr and f"'{value}' is not one of" in result.stderr
    assert_nothing_registered(root)
    assert not (tmp_path / "out.tfrecord").exists()


def test_option_values_are_case_insensitive(root: Path, tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": 1}\n')
    assert run("-C", str(root), "append", "d", str(rows), "--format", "JSONL", "--executor", "Local").exit_code == 0
    result = run("-C", str(root), "export", "d", str(tmp_path / "o.tfrecord.gz"), "--compression", "GZIP")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o.tfrecord.gz").read_bytes()[:2] == b"\x1f\x8b"


# --------------------------------------------------------------------------- lying headers


def test_a_gzip_header_claiming_2_62_bytes_costs_little_to_append_or_inspect(root: Path, tmp_path: Path) -> None:
    import tracemalloc
    import zlib

    from catalog.tfrecord.framing import frame_header

    zeros = 96 << 20  # inflated; about 100 KiB on disk
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    parts = [c.compress(frame_header(2**62))] + [c.compress(bytes(4 << 20)) for _ in range(zeros >> 22)]
    path = tmp_path / "liar.tfrecord.gz"
    path.write_bytes(b"".join(parts) + c.flush())
    line = (
        f"error: {path}: byte 0 (offset in the decompressed stream): "
        f"record length {2**62} runs past the end of the stream ({zeros} bytes left)\n"
    )
    for args in (["inspect", str(path)], ["-C", str(root), "append", "d", str(path)]):
        tracemalloc.start()
        try:
            result = run(*args)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert (result.exit_code, result.stderr) == (1, line)
        assert peak < 24 << 20, f"{args[-2]}: peak {peak / 2**20:.0f} MiB"
    assert_nothing_registered(root)


@pytest.mark.parametrize("kind", ["fifo", "dir"])
def test_a_migration_file_that_is_not_a_regular_file(root: Path, tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "migrations" / "d"
    folder.mkdir(parents=True)
    path = folder / "0001_x.py"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    command = [sys.executable, "-m", "catalog", "-C", str(root), "migrations", "list", "d"]
    result = subprocess.run(
        [*command, "--migrations", str(tmp_path / "migrations")], capture_output=True, text=True, timeout=60
    )
    what = "a FIFO" if kind == "fifo" else "a directory"
    assert (result.returncode, result.stderr) == (1, f"error: {path}: not a regular file ({what})\n")


def test_an_error_naming_a_file_is_one_line(tmp_path: Path) -> None:
    """A file name holding a newline made the error two lines, the second a plausible fake
    'error:' line; an escape sequence in it reached the terminal."""
    root = tmp_path / "cat"
    Catalog.init(root).register("d", {"features": {"id": {"dtype": "int64"}}})
    bad = tmp_path / "x\nerror: fake.csv\x1b[2J"
    bad.write_text("id\nnot a number\n")
    result = CliRunner().invoke(app, ["-C", str(root), "append", "d", str(bad)])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    assert "\x1b" not in result.stderr and "\\u000a" in result.stderr


@pytest.mark.parametrize("name", ["", "\ud800"])
def test_a_schema_never_holds_a_name_it_could_not_read_back(tmp_path: Path, name: str) -> None:
    """Inference took a key '' (or a lone surrogate) as a feature name: register stored the
    dataset, then could not read its schema back (every verify, drop and gc failed)."""
    cat = Catalog.init(tmp_path / "cat")
    with pytest.raises(SchemaError):
        Schema.infer([{name: 1, "ok": 2}])
    with pytest.raises(SchemaError):
        Schema.infer({name: [1], "ok": [2]})
    (tmp_path / "k.jsonl").write_text(json.dumps({name: 1, "ok": 2}) + "\n")
    root = str(tmp_path / "cat")
    result = CliRunner().invoke(app, ["-C", root, "register", "x", "--infer", str(tmp_path / "k.jsonl")])
    assert result.exit_code == 1 and result.stderr.startswith("error: "), result.output
    assert cat.list() == []
    verified = CliRunner().invoke(app, ["-C", root, "verify"])
    assert verified.exit_code == 0, verified.output


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda ds: ds.append_rows([{"id": 1}], message=None), None),
        (lambda ds: ds.append_rows([{"id": 1}], message=5), "message must be text, got int"),
        (lambda ds: ds.append_rows([{"id": 1}], author=3), "author must be text, got int"),
        (lambda ds: ds.append_rows([{"id": 1}], message="\ud800"), "message is not UTF-8 text"),
        (lambda ds: ds.append_rows([{"id": 1}], token="\ud800"), "token is not UTF-8 text"),
        (lambda ds: ds.append_rows([{"id": 1}], author="\ud800"), "author is not UTF-8 text"),
        (lambda ds: ds.append_rows([{"id": 1}], shard_records=0), "shard_records must be a whole number above 0"),
        (lambda ds: ds.append_rows([{"id": 1}], shard_records=2.5), "shard_records must be a whole number above 0"),
        (lambda ds: ds.append_rows([{"id": 1}], shard_size=-1), "shard_size must be a whole number above 0"),
        (lambda ds: ds.catalog.register("x", {"features": {"a": {"dtype": "int64"}}}, description=None), None),
        (
            lambda ds: ds.catalog.register("x", {"features": {"a": {"dtype": "int64"}}}, description="\udcff"),
            "description is not UTF-8 text",
        ),
        (lambda ds: ds.migrate(add=["z:int64=0"], message="\ud800"), "message is not UTF-8 text"),
        (lambda ds: ds.tag("t", author="\ud800"), "author is not UTF-8 text"),
    ],
)
def test_commit_texts_and_sizes_are_checked(tmp_path: Path, call: Any, error: str | None) -> None:
    """message=None was retried as a commit conflict 100 times, description=None said the
    dataset already existed (a NOT NULL violation taken for a race), a lone surrogate was a
    UnicodeEncodeError from the database driver, and shard_records=0 was taken: now each is
    one CatalogError before anything is written (None: no message, no description)."""
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("d", {"features": {"id": {"dtype": "int64"}}})
    if error is None:
        call(ds)
        return
    with pytest.raises(CatalogError, match=error):
        call(ds)
    assert [d.name for d in cat.list()] == ["d"] and cat.dataset("d").version == 1
    assert not [p for p in (tmp_path / "cat" / "data").rglob("*") if p.is_file() and ".tmp" in p.name]


@pytest.mark.parametrize(
    "value", [10**400, -(10**400), "longdouble"], ids=["huge int", "huge negative int", "finite longdouble"]
)
def test_a_number_beyond_float_range_is_refused_for_a_float_feature(tmp_path: Path, value: Any) -> None:
    """An integer too large for a float was an OverflowError from float() on every path, and a
    finite np.longdouble beyond float64 was stored as infinity; both are out of float32 range."""
    if value == "longdouble":
        value = np.longdouble(10) ** 4000
        if not np.isfinite(value):
            pytest.skip("this platform's long double is float64")  # (not x86: the case cannot arise)
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("d", {"features": {"id": {"dtype": "int64"}, "score": {"dtype": "float32"}}})
    calls = [
        lambda: ds.append_rows([{"id": 1, "score": value}]),
        lambda: ds.append_rows({"id": [1], "score": [value]}),
        lambda: ds.append_rows([{"id": 1, "score": [value]}]),
    ]
    for call in calls:
        with pytest.raises(CatalogError, match="out of float32 range"):
            call()
    if isinstance(value, int):
        (tmp_path / "b.jsonl").write_text(f'{{"id": 1, "score": {value}}}\n')
        result = CliRunner().invoke(app, ["-C", str(tmp_path / "cat"), "append", "d", str(tmp_path / "b.jsonl")])
        assert result.exit_code == 1 and "out of float32 range" in result.stderr and "score" in result.stderr
        with pytest.raises(CatalogError, match="out of float32 range"):
            cat.register("e", {"features": {"x": {"dtype": "float32", "default": value}}})
    assert cat.dataset("d").version == 1


@pytest.mark.parametrize("rows", [None, 5, "id", b"id"])
def test_rows_that_are_no_rows(tmp_path: Path, rows: Any) -> None:
    """append_rows(None) was a TypeError ('not iterable'), append_rows("id") a row error on 'i'."""
    ds = Catalog.init(tmp_path / "cat").register("d", {"features": {"id": {"dtype": "int64"}}})
    with pytest.raises(CatalogError, match="rows are an iterable of rows"):
        ds.append_rows(rows)


def test_one_path_given_as_text_is_one_input(tmp_path: Path) -> None:
    """append_files("a.csv") read the characters 'a', '.', ... as file names."""
    ds = Catalog.init(tmp_path / "cat").register("d", {"features": {"id": {"dtype": "int64"}}})
    (tmp_path / "a.csv").write_text("id\n1\n2\n")
    assert ds.append_files(str(tmp_path / "a.csv")).records == 2
    assert ds.append_files(tmp_path / "a.csv", allow_duplicate=True).records == 2
    for bad in (None, [None], [1]):
        with pytest.raises(CatalogError, match="input"):
            ds.append_files(bad)
    with pytest.raises(CatalogError, match="'': an empty name names no file"):
        ds.append_files([""])


def test_a_file_name_that_is_not_utf8_is_recorded_with_escapes(tmp_path: Path) -> None:
    """A name's non-UTF-8 bytes (os.fsdecode's surrogates) went to the manifest as the shard's
    source: the driver's UnicodeEncodeError, a traceback."""
    root = tmp_path / "cat"
    Catalog.init(root).register("d", {"features": {"id": {"dtype": "int64"}}})
    name = os.fsdecode(os.fsencode(str(tmp_path)) + b"/f\xff.csv")
    Path(name).write_text("id\n1\n")
    result = CliRunner().invoke(app, ["-C", str(root), "append", "d", name])
    assert result.exit_code == 0, result.output
    shown = json.loads(CliRunner().invoke(app, ["-C", str(root), "show", "d", "--json"]).stdout)
    assert [s["source"] for s in shown["shards"]] == [str(tmp_path) + "/f\\xff.csv"]


def test_no_rows_commit_nothing(tmp_path: Path) -> None:
    """append_rows of nothing committed an empty version (files with no records say so and
    commit nothing: now rows too)."""
    import pandas as pd

    ds = Catalog.init(tmp_path / "cat").register("d", {"features": {"id": {"dtype": "int64"}}})
    for empty in ([], iter([]), pd.DataFrame({"id": []}), {"id": []}, [pd.DataFrame({"id": []})]):
        with pytest.raises(CatalogError, match="no rows in the input: nothing committed"):
            ds.append_rows(empty)
    assert ds.catalog.dataset("d").version == 1


def test_inferring_from_a_bad_record_names_its_file_and_record(tmp_path: Path) -> None:
    """register --infer and adopt of a new name said only 'not a protobuf message: ...'."""
    from catalog.tfrecord import RecordWriter, encode_example

    root = tmp_path / "cat"
    Catalog.init(root)
    bad = tmp_path / "bad.tfrecord"
    with RecordWriter(bad) as w:
        w.write(encode_example({"a": [1]}))
        w.write(encode_example({"a": [2]}))
        w.write(b"\x0a\xff")  # a map entry whose length never comes
    for args in (["register", "x", "--infer", str(bad)], ["adopt", "new", str(bad)]):
        result = CliRunner().invoke(app, ["-C", str(root), *args])
        assert result.exit_code == 1 and result.stderr.startswith(f"error: {bad}: record 2: "), result.stderr
    assert Catalog.open(root).list() == []


@pytest.mark.parametrize(
    "call",
    [
        lambda cat, ds: cat.register("n", None),
        lambda cat, ds: cat.register("n", []),
        lambda cat, ds: Schema.infer(None),
        lambda cat, ds: Schema.infer(5),
        lambda cat, ds: Schema.infer(Path(".")),
        lambda cat, ds: Schema.infer({"a": np.array(3)}),
        lambda cat, ds: Schema.infer([b"", {"a": 1}]),
        lambda cat, ds: ds.append_rows([{"id": 1}], split=None),
        lambda cat, ds: ds.append_rows([{"id": 1}], max_linf="0.1"),
        lambda cat, ds: ds.append_files(["x.csv"], delimiter=1),
        lambda cat, ds: cat.adopt("n", None),
    ],
)
def test_wrong_kinds_of_arguments_are_catalog_errors(tmp_path: Path, call: Any) -> None:
    """Each was a TypeError from deep inside (not iterable, no len(), '<=' between int and str)."""
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("d", {"features": {"id": {"dtype": "int64"}}})
    with pytest.raises(CatalogError):
        call(cat, ds)
    assert [d.name for d in cat.list()] == ["d"] and cat.dataset("d").version == 1


def test_a_zero_dimensional_array_is_a_scalar(tmp_path: Path) -> None:
    """np.array(1.5) for a scalar feature was a TypeError (len() of unsized object)."""
    schema = {"features": {"x": {"dtype": "float32"}, "i": {"dtype": "int64"}}}
    ds = Catalog.init(tmp_path / "cat").register("d", schema)
    ds.append_rows([{"x": np.array(1.5), "i": np.array(3)}, {"x": np.float32(2.5), "i": 4}])
    assert list(ds.read()) == [{"x": 1.5, "i": 3}, {"x": 2.5, "i": 4}]


def test_inferring_from_records_without_values_says_so(tmp_path: Path) -> None:
    """Records whose every value is null said 'no records in the inputs'."""
    root = tmp_path / "cat"
    Catalog.init(root)
    (tmp_path / "nulls.jsonl").write_text('{"a": null}\n{}\n')
    result = CliRunner().invoke(app, ["-C", str(root), "register", "x", "--infer", str(tmp_path / "nulls.jsonl")])
    assert result.exit_code == 1
    assert result.stderr == "error: 2 records, none with a value: no schema to infer, nothing registered\n"


@pytest.mark.parametrize(
    ("line", "feature", "shown"),
    [
        ('{"id": 1, "score": 1e400, "scores": []}', "score", "1e400"),
        ('{"id": 1, "score": 1.5, "scores": [2.5, -1E+999]}', "scores", "-1E+999"),
    ],
)
def test_a_json_number_beyond_float_range_names_its_feature(
    tmp_path: Path, line: str, feature: str, shown: str
) -> None:
    """JSON Lines' 1e400 said 'number 1e400 is out of float32 range' without the feature."""
    root = tmp_path / "cat"
    features = {
        "id": {"dtype": "int64"},
        "score": {"dtype": "float32"},
        "scores": {"dtype": "float32", "shape": [None]},
    }
    Catalog.init(root).register("d", {"features": features})
    (tmp_path / "b.jsonl").write_text(line + "\n")
    result = CliRunner().invoke(app, ["-C", str(root), "append", "d", str(tmp_path / "b.jsonl")])
    where = f"{tmp_path / 'b.jsonl'}: record 0 (line 1): feature {feature!r}"
    assert (result.exit_code, result.stderr) == (1, f"error: {where}: number {shown} is out of float32 range\n")


def test_a_dataset_whose_schema_cannot_be_read_can_be_dropped(tmp_path: Path) -> None:
    """A schema stored unreadable (as the '' feature name left them before inference refused
    it) made drop fail too: the dataset could not be removed. drop reads no schema now."""
    import sqlite3

    root = tmp_path / "cat"
    cat = Catalog.init(root)
    cat.register("keep", {"features": {"x": {"dtype": "int64"}}})
    cat.register("bad", {"features": {"x": {"dtype": "int64"}}}).append_rows([{"x": 1}])
    with sqlite3.connect(root / "catalog.db") as conn:
        bad = "(SELECT id FROM datasets WHERE name = 'bad')"
        unreadable = '{"features": {"": {}}}'
        conn.execute(f"UPDATE schema_versions SET schema_json = ? WHERE dataset_id = {bad}", (unreadable,))
    verified = CliRunner().invoke(app, ["-C", str(root), "verify"])
    assert verified.exit_code == 1 and "dataset 'bad': its schema does not read" in verified.output  # not a stop
    dropped = CliRunner().invoke(app, ["-C", str(root), "drop", "bad"])
    assert dropped.exit_code == 0, dropped.output
    assert [d.name for d in Catalog.open(root).list()] == ["keep"]
    assert CliRunner().invoke(app, ["-C", str(root), "verify"]).exit_code == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]", "catalog.json: not a JSON object"),
        ('{"db_url": 5}', "catalog.json: db_url is not a string: 5"),
        ('{"db_url": ["x"]}', "catalog.json: db_url is not a string: ['x']"),
        ("[" * 100_000 + "]" * 100_000, "catalog.json: unreadable: not valid JSON: nested too deeply"),
        ('{"db_url": "' + "x" * (2 << 20) + '"}', "catalog.json: unreadable: larger than 1 MiB"),
        ("\xff", "catalog.json: unreadable"),
    ],
)
def test_a_damaged_catalog_json_is_one_line(root: Path, content: str, message: str) -> None:
    """catalog.json is read from outside (edited by hand, synced): a list, a db_url that is no
    string, or nesting deeper than the parser recurses gave AttributeError or RecursionError tracebacks."""
    (root / "catalog.json").write_bytes(content.encode("utf-8") if content != "\xff" else b"\xff")
    result = run("-C", str(root), "list")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1, repr(result.exception)
    assert message in result.stderr, result.stderr


@pytest.mark.parametrize("verb", ["cat", "export"])
def test_a_split_bound_of_5000_digits_is_one_line(root: Path, tmp_path: Path, verb: str) -> None:
    """Python refuses int() of more than 4,300 digits: `cat --split 'train[:999...]'` was a
    ValueError traceback; `export` and the readers share the parser."""
    with Catalog.open(root) as cat:
        cat.dataset("d").append_rows([{"id": 1}])
    spec = "train[:" + "9" * 5000 + "]"
    args = ["cat", "d"] if verb == "cat" else ["export", "d", str(tmp_path / "out.tfrecord")]
    result = run("-C", str(root), *args, "--split", spec)
    assert result.exit_code == 1, result.output
    shown = "'train[:" + "9" * 33 + "…'"
    assert result.stderr == (
        f"error: bad split {shown}: cannot read {shown} at character 8: a number of 5,000 digits (at most 18)\n"
    )
    assert not (tmp_path / "out.tfrecord").exists()
