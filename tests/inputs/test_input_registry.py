"""The input format table (catalog.inputs.registry) and the compression names
(catalog.tfrecord.compression) are the one place each is spelled: every format in the table
has its detection, reader and inference; the CLI's --format and --compression choices are the
library's names; and a format added to the table alone is appended, detected and inferred."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import typing
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import IO, Any

import pytest
import typer
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli import app
from catalog.errors import AppendError, CatalogError
from catalog.inputs import InputOptions, check_format, detect, expand, format_of
from catalog.inputs.infer import check_options, infer_inputs
from catalog.inputs.registry import AUTO, FALLBACK, INPUT_FORMATS, InputFormat, Ref, format_names
from catalog.schema import Feature, Schema
from catalog.schema.inference import RowInference
from catalog.tfrecord import framing
from catalog.tfrecord.compression import COMPRESSIONS, NONE
from catalog.tfrecord.framing import normalize_compression, unknown_compression

runner = CliRunner()


def _choices(verb: str, option: str) -> tuple[str, ...]:
    """The values the CLI's ``verb`` takes for ``option``, as click checks them."""
    command = typer.main.get_command(app).commands[verb]  # type: ignore[attr-defined]  # a group
    param = next(p for p in command.params if option in getattr(p, "opts", ()))
    return tuple(param.type.choices)


def test_every_format_has_detection_a_reader_and_inference() -> None:
    assert INPUT_FORMATS and AUTO not in INPUT_FORMATS and FALLBACK in INPUT_FORMATS
    option_fields = {f.name for f in fields(InputOptions)}
    for name, spec in INPUT_FORMATS.items():
        assert spec.name == name and spec.label, name
        assert spec.suffixes or spec.magic or spec.sniff or spec.folder, f"{name}: nothing detects it"
        assert all(s.startswith(".") and s == s.lower() for s in spec.suffixes), name
        if spec.reads == "rows":
            assert spec.rows is not None, f"{name}: a row format without a reader"
        if spec.reads != "records":  # TFRecord's schema comes from its wire kinds, not a tally
            assert spec.infer is not None, f"{name}: no inference"
        if spec.option is not None:
            assert spec.option[0].startswith("--") and spec.option[1] in option_fields, name
        for part in (spec.sniff, spec.folder, spec.rows, spec.infer):
            if isinstance(part, Ref):  # a reader module's function, imported on use: it exists
                assert callable(getattr(importlib.import_module(part.module), part.name)), (name, part)
    suffixes = [s for spec in INPUT_FORMATS.values() for s in spec.suffixes]
    assert len(suffixes) == len(set(suffixes)), "a suffix names two formats"
    magic = [m for spec in INPUT_FORMATS.values() for m in spec.magic]
    assert not [(a, b) for a in magic for b in magic if a != b and b.startswith(a)], "first bytes claimed twice"


def test_cli_choices_are_the_library_names() -> None:
    assert format_names() == (AUTO, *INPUT_FORMATS)
    assert _choices("append", "--format") == format_names()
    assert _choices("inspect", "--format") == format_names()
    for verb in ("register", "export", "compact", "migrate"):
        assert _choices(verb, "--compression") == COMPRESSIONS, verb


def test_compression_names_in_one_place() -> None:
    assert COMPRESSIONS[0] == NONE
    assert typing.get_args(typing.get_args(framing.Compression)[0]) == COMPRESSIONS[1:]  # the typed spelling
    for name in COMPRESSIONS:
        assert (normalize_compression(name) or NONE) == name
    assert str(unknown_compression("lz4")) == "unknown compression 'lz4': use none, gzip or zlib"
    from catalog.readers.tfdata import TF_COMPRESSION  # TensorFlow's names for each of ours

    assert tuple(TF_COMPRESSION) == COMPRESSIONS


@pytest.mark.parametrize(
    ("name", "head", "expected"),
    [
        ("x.pq", b"", "parquet"),
        ("x", b"PAR1rest", "parquet"),
        ("x", b"\x93NUMPY\x01\x00", "npy"),
        ("x", b"PK\x03\x04", "npz"),
        ("x", b'{"a": 1}\n', "jsonl"),
        ("x", b"   ", "jsonl"),
        ("x", b"a,b\n1,2\n", "csv"),
        ("x", b"\x1f\x8b\x08\x00\xff\xfe", FALLBACK),
    ],
)
def test_detection_follows_the_table(name: str, head: bytes, expected: str) -> None:
    assert format_of(Path(name), head) == expected


# ---- a format added to the table alone: "lines", one text row per line of a .lines file


class _LineRows:
    unit = "line"

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        for lineno, raw in enumerate(self.stream, 1):
            yield lineno, {"text": raw.decode().rstrip("\n")}


def _line_rows(path: Path, schema: Schema | None, options: InputOptions, stream: IO[bytes] | None) -> _LineRows:
    assert stream is not None
    return _LineRows(stream)


def _infer_lines(path: Path, options: InputOptions, tally: RowInference) -> list[Feature]:
    with open(path, "rb") as f:
        for _, row in _LineRows(f):
            tally.add(row)
    return []


LINES = InputFormat("lines", "line", "rows", (".lines",), rows=_line_rows, infer=_infer_lines)


@pytest.fixture
def lines_format(monkeypatch: pytest.MonkeyPatch) -> InputFormat:
    monkeypatch.setitem(INPUT_FORMATS, "lines", LINES)
    return LINES


def _lines_file(tmp_path: Path) -> Path:
    path = tmp_path / "words.lines"
    path.write_text("alpha\nbeta\n")
    return path


def test_a_new_format_is_appended_through_the_cli(tmp_path: Path, lines_format: InputFormat) -> None:
    root = tmp_path / "cat"
    Catalog.init(root).register("d", {"features": {"text": {"dtype": "string"}}})
    path = _lines_file(tmp_path)
    for args in (["--format", "LINES"], []):  # named (any case, as every --format value), then told by its suffix
        result = runner.invoke(app, ["-C", str(root), "append", "d", str(path), "--allow-duplicate", *args])
        assert result.exit_code == 0, (result.output, result.exception)
    assert [r["text"] for r in Catalog.open(root).dataset("d").read()] == ["alpha", "beta"] * 2


def test_a_new_format_is_inferred_and_checked(tmp_path: Path, lines_format: InputFormat) -> None:
    path = _lines_file(tmp_path)
    assert check_format("lines") == "lines" and detect(path, AUTO) == "lines"
    inferred = infer_inputs(expand([path], AUTO), InputOptions())
    assert inferred.schema.to_json() == {"features": {"text": {"dtype": "string"}}}
    assert inferred.counts == [(str(path), 2)]
    with pytest.raises(AppendError, match=r"^--delimiter applies to CSV inputs, and none is given$"):
        check_options(expand([path], AUTO), InputOptions(delimiter=","))
    root = tmp_path / "cat"
    Catalog.init(root)
    result = runner.invoke(app, ["-C", str(root), "register", "words", str(path), "--infer", "--json"])
    assert result.exit_code == 0, (result.output, result.exception)
    assert json.loads(result.stdout)["commit"]["records"] == 2


def test_an_unknown_format_is_refused_with_the_table_names() -> None:
    with pytest.raises(CatalogError) as e:
        check_format("xml")
    assert (
        str(e.value) == "unknown input format 'xml': use one of auto, tfrecord, jsonl, csv, parquet, npy, npz, images"
    )


def test_format_help_loads_no_reader() -> None:
    """`append --help` shows --format's choices from the table, not from the readers: no
    NumPy, pyarrow or Pillow, and no input module but the table's."""
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.stderr.write('LOADED ' + ' '.join(sys.modules) + '\\n'))\n"
        "from catalog.cli import main\nsys.argv[0] = 'catalog'\nsys.exit(main())\n"
    )
    env = {**os.environ, "COLUMNS": "300"}  # the choices on one line
    args = [sys.executable, "-c", code, "append", "--help"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "<auto|tfrecord|jsonl|csv|parquet|npy|npz|images>" in proc.stdout
    modules = set(proc.stderr.rpartition("LOADED ")[2].split())
    assert {m for m in modules if m.startswith("catalog.inputs")} == {"catalog.inputs", "catalog.inputs.registry"}
    assert not {m for m in modules if m.split(".")[0] in ("numpy", "pyarrow", "PIL")}
