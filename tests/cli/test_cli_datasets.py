"""Verbs on datasets (catalog/cli/datasets.py): their option parsers and text forms, and
register, append, list, show, history, tag, tags and drop through typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from catalog.cli.commands import app
from catalog.cli.datasets import _delimiter, _feature_text, _image_shape, _list_text

runner = CliRunner()
SCHEMA = {"features": {"x": {"dtype": "int64"}, "s": {"dtype": "string", "default": ""}}}


def run(*args: str, code: int = 0) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (args, result.output, result.exception)
    return result


def said(result: Any) -> str:
    """A usage error's words, out of rich's box (its borders and line breaks)."""
    return " ".join(result.output.replace("│", " ").split())


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "cat"
    run("init", str(root))
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    (tmp_path / "rows.jsonl").write_text('{"x": 1, "s": "a"}\n{"x": 2}\n')
    return root


def test_delimiter_and_image_shape_options() -> None:
    assert _delimiter(None) is None and _delimiter(";") == ";"
    assert _delimiter("\\t") == "\t" and _delimiter("tab") == "\t"
    for bad in ("ab", '"', ""):
        with pytest.raises(typer.BadParameter) as e:
            _delimiter(bad)
        assert e.value.message == f"one character (or \\t), got {bad!r}"
    assert _image_shape(None) is None
    assert _image_shape("28x28x1") == (28, 28, 1) and _image_shape("4,5,3") == (4, 5, 3)
    for bad in ("28x28", "0x1x1", "axbxc", "-1,2,3"):
        with pytest.raises(typer.BadParameter) as e:
            _image_shape(bad)
        assert e.value.message == f"three positive integers H,W,C, got {bad!r}"


def test_a_feature_is_shown_in_one_line() -> None:
    assert _feature_text({"dtype": "int64"}) == "int64"
    assert _feature_text({"dtype": "float32", "shape": [None, 3], "optional": True}) == "float32[null, 3] optional"
    assert _feature_text({"dtype": "string", "default": "n/a"}) == 'string = "n/a"'
    image = {"dtype": "uint8", "shape": [28, 28, 1], "encoding": "image", "format": "png"}
    assert _feature_text(image) == "uint8 (image png [28, 28, 1])"
    names = {"dtype": "int64", "names": [f"c{i}" for i in range(12)]}
    assert _feature_text(names) == "int64 names: c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, ... 12 in all"
    assert list(_list_text([])) == ["no datasets"]


def test_register_append_list_show_and_history(root: Path, tmp_path: Path) -> None:
    c = ["-C", str(root)]
    registered = run(*c, "register", "d", "--schema", str(tmp_path / "schema.json"), "--description", "demo")
    assert registered.stdout == "registered d (version 1, schema version 1)\n"
    appended = run(*c, "append", "d", str(tmp_path / "rows.jsonl"), "--split", "test")
    assert appended.stdout == "committed: d version 2: 2 records in 1 shard\n"
    listed = run(*c, "list").stdout.splitlines()
    assert listed[0].split() == ["NAME", "VERSION", "SCHEMA", "SHARDS", "RECORDS", "SIZE"]
    assert listed[1].split()[:5] == ["d", "2", "1", "1", "2"]
    [doc] = json.loads(run(*c, "list", "--json").stdout)
    assert (doc["name"], doc["records"], doc["splits"]["test"]["records"]) == ("d", 2, 2)
    shown = run(*c, "show", "d", "--no-shards").stdout.splitlines()
    assert shown[:5] == [
        "dataset:        d",
        "description:    demo",
        "version:        2",
        "schema version: 1",
        "records:        2",
    ]
    assert "  x: int64" in shown and '  s: string = ""' in shown
    history = run(*c, "history", "d").stdout.splitlines()
    assert len(history) == 2 and history[1].startswith("v2") and "+2 -0 records, +1 -0 shards" in history[1]


def test_tags_and_drop_and_their_errors(root: Path, tmp_path: Path) -> None:
    c = ["-C", str(root)]
    run(*c, "register", "d", "--schema", str(tmp_path / "schema.json"))
    assert run(*c, "tags", "d").stdout == "d: no tags\n"
    assert run(*c, "tag", "d", "first").stdout == "tagged d version 1 as first\n"
    assert run(*c, "tags", "d").stdout.splitlines()[1].split()[:2] == ["first", "1"]
    bad = run(*c, "tag", "d", "first", "--delete", "--version", "1", code=2)
    assert "--delete takes no --version" in said(bad)
    assert run(*c, "tag", "d", "first", "--delete").stdout == "deleted tag first of d (version 1)\n"
    both = run(*c, "register", "e", "--schema", str(tmp_path / "schema.json"), "--infer", "x.jsonl", code=2)
    assert "give --schema FILE, or --infer and inputs (not both)" in said(both)
    assert run(*c, "drop", "d").stdout == "dropped d; run `catalog gc` to remove its files\n"
    gone = run(*c, "show", "d", code=1)
    assert gone.stderr.startswith("error: ") and "'d'" in gone.stderr and gone.stderr.count("\n") == 1


def edit_schema(root: Path, text: str) -> None:
    """Change the stored schema's JSON and not its fingerprint (a hand edit, a damaged row)."""
    import sqlite3

    with sqlite3.connect(root / "catalog.db") as conn:
        conn.execute("UPDATE schema_versions SET schema_json = ?", (text,))


def test_show_parses_a_stored_schema_its_fingerprint_no_longer_vouches_for(root: Path, tmp_path: Path) -> None:
    """show prints a stored schema as it is while its fingerprint matches (no NumPy loaded);
    one edited since is parsed: normalised as every reader sees it, or refused in one line."""
    c = ["-C", str(root)]
    run(*c, "register", "d", "--schema", str(tmp_path / "schema.json"))
    assert json.loads(run(*c, "show", "d", "--json").stdout)["schema"] == SCHEMA
    edit_schema(root, '{"features": {"x": {"dtype": "int64", "encoding": null, "optional": false, "shape": []}}}')
    assert json.loads(run(*c, "show", "d", "--json").stdout)["schema"] == {"features": {"x": {"dtype": "int64"}}}
    edit_schema(root, '{"features": {"": {}}}')
    refused = run(*c, "show", "d", code=1)
    assert refused.stderr == "error: feature names must be non-empty strings, got ''\n"
