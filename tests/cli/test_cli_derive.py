"""`catalog filter`, `map`, `lineage` and `refresh` (catalog/cli/changes.py): their lines, their
JSON, and one line with exit 1 for a bad request, nothing registered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli import app

NAMES_HINT = "(`catalog list` names the datasets there are)"  # a name no dataset has, where others exist

runner = CliRunner()
SCHEMA = {"features": {"id": {"dtype": "int64", "shape": []}, "name": {"dtype": "string", "shape": []}}}
MODULE = """
def shout(row):
    return {"id": row["id"], "name": row["name"].upper()}
"""


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cat = Catalog.init(tmp_path / "cat")
    cat.register("src", SCHEMA).append_rows([{"id": i, "name": f"n{i}"} for i in range(6)])
    monkeypatch.setenv("CATALOG_ROOT", str(tmp_path / "cat"))
    (tmp_path / "shouting.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)  # --fn imports from the working directory
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path / "cat"


def _run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_filter_map_lineage_and_refresh(root: Path) -> None:
    assert _run("filter", "src", "odd", "--where", "id % 2 = 1")[0] == 1  # no arithmetic: one line
    code, out, err = _run("filter", "src", "big", "--where", "id >= 3")
    assert (code, err) == (0, "")
    assert out == "big: made version 2: 3 records in 1 shard from 6 records of src version 2 (filter where id >= 3)\n"
    code, out, _ = _run("map", "big", "loud", "--fn", "shouting:shout", "--json")
    doc = json.loads(out)
    assert code == 0 and (doc["records"], doc["operation"], doc["source"]) == (3, "map shouting:shout", "big")
    code, out, _ = _run("lineage", "loud")
    assert (code, out) == (
        0,
        "loud version 2 <- map of big version 2: shouting:shout\n"
        "big version 2 <- filter of src version 2: where id >= 3\n",
    )
    Catalog.open(root).dataset("src").append_rows([{"id": 10, "name": "ten"}])
    code, out, _ = _run("refresh", "big")
    assert (code, out) == (
        0,
        "big: refreshed version 3: 1 record in 1 shard from 1 record of src version 3 (filter where id >= 3)\n",
    )
    assert _run("refresh", "big")[1] == "big: up to date with src version 3: nothing committed\n"
    assert [r["name"] for r in Catalog.open(root).dataset("loud").read()] == ["N3", "N4", "N5"]
    code, out, _ = _run("show", "big", "--no-shards")
    assert "derived:        filter of src version 3: where id >= 3 (catalog lineage big)" in out.splitlines()


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["filter", "src", "x", "--where", "nope = 1"],
         "error: where 'nope = 1': at character 1: no feature 'nope' in the schema (it has id, name)"),
        (["filter", "nosuch", "x", "--where", "id = 1"], "error: no dataset named 'nosuch' " + NAMES_HINT),
        (["filter", "src", "src", "--where", "id = 1"], "error: dataset 'src' already exists"),
        (["map", "src", "x", "--fn", "shouting:nope"], "error: --fn 'shouting:nope': module 'shouting' has no 'nope'"),
        (["map", "src", "x", "--fn", "shout"],
         "error: --fn 'shout': name a function as module:function (e.g. features:add_length)"),
        (["refresh", "src"], "error: refresh: 'src' was not derived from another dataset: nothing to refresh"),
        (["lineage", "nosuch"], "error: no dataset named 'nosuch' " + NAMES_HINT),
    ],
)  # fmt: skip
def test_bad_requests_are_one_line_and_register_nothing(root: Path, args: list[str], line: str) -> None:
    code, out, err = _run(*args)
    assert (code, out, err) == (1, "", line + "\n")
    assert [d.name for d in Catalog.open(root).list()] == ["src"]


@pytest.mark.parametrize(
    ("module", "fn", "line"),
    [
        ("broken_syntax", "def f(row:\n", "error: --fn 'broken_syntax:f': cannot import 'broken_syntax' "
         "(SyntaxError: '(' was never closed (broken_syntax.py, line 1))"),
        ("raises_at_import", "raise RuntimeError('at import')\n",
         "error: --fn 'raises_at_import:f': cannot import 'raises_at_import' (RuntimeError: at import)"),
        ("exits_at_import", "import sys\nsys.exit(3)\n",
         "error: --fn 'exits_at_import:f': cannot import 'exits_at_import' (SystemExit: 3)"),
        ("../up", "", "error: --fn '../up:f': cannot import '../up' (not a module name)"),
        (".rel", "", "error: --fn '.rel:f': cannot import '.rel' (not a module name)"),
    ],
)  # fmt: skip
def test_a_module_that_fails_to_import_is_one_line(root: Path, module: str, fn: str, line: str) -> None:
    if fn:
        (root.parent / f"{module}.py").write_text(fn)
    code, out, err = _run("map", "src", "x", "--fn", f"{module}:f")
    assert (code, out, err) == (1, "", line + "\n")
    assert [d.name for d in Catalog.open(root).list()] == ["src"]
