"""The ``stats`` and ``serve`` verbs (catalog/cli/statistics.py): the table's helpers, what the
statistics are of, --compute, --compare, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli.commands import app
from catalog.cli.statistics import SPARKS, _short, num, sparkline

runner = CliRunner()
SCHEMA = {"features": {"x": {"dtype": "int64"}, "s": {"dtype": "string", "default": ""}}}


def run(*args: str, code: int = 0) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (args, result.output, result.exception)
    return result


def test_sparkline_num_and_short() -> None:
    assert sparkline([]) == "" and sparkline([0, 0]) == ""
    assert sparkline([0, 1, 8]) == SPARKS[0] + SPARKS[1] + SPARKS[8]
    assert sparkline([4, 8]) == SPARKS[4] + SPARKS[8]
    assert (num(None), num(1234567), num(3.14159265)) == ("-", "1,234,567", "3.142")
    assert _short("abc") == "'abc'"
    assert _short("x" * 30, most=4) == "'xxxx'…"


@pytest.fixture
def c(tmp_path: Path) -> list[str]:
    root = tmp_path / "cat"
    cat = Catalog.init(root)
    d = cat.register("d", SCHEMA)
    d.append_rows([{"x": 1, "s": "a"}, {"x": 2, "s": "b"}])
    cat.statistics = False
    d.append_rows([{"x": 30, "s": "c"}], split="test")
    return ["-C", str(root)]


def test_stats_say_what_they_are_of_and_compute_what_is_missing(c: list[str]) -> None:
    lines = run(*c, "stats", "d").stdout.splitlines()
    assert lines[0] == "dataset d version 3 (splits: test, train): 3 records in 2 shards"
    assert lines[1] == "not computed: 1 shard (1 record) is left out; run `catalog stats d --compute`"
    computed = run(*c, "stats", "d", "--compute", "--json")
    assert computed.stderr == "computed the statistics of 1 shard (1 record)\n"
    doc = json.loads(computed.stdout)
    assert doc["not_computed"] == {"shards": 0, "records": 0, "damaged": 0}
    [x] = [f for f in doc["features"] if f["feature"] == "x"]
    assert (x["records"], x["values"]["min"], x["values"]["max"], x["values"]["mean"]) == (3, 1, 30, 11.0)
    assert not any(line.startswith("not computed") for line in run(*c, "stats", "d").stdout.splitlines())


def test_compare_marks_drift_and_unknown_splits_are_one_line(c: list[str]) -> None:
    run(*c, "stats", "d", "--compute")
    lines = run(*c, "stats", "d", "--compare", "train", "test").stdout.splitlines()
    assert lines[0] == "dataset d: A = version 3 split train (2 records), B = version 3 split test (1 record)"
    assert lines[-1] == "! marks an L-infinity distance above 0.1 (drift between A and B)"
    cells = {row[0]: row for row in ([cell.strip() for cell in line.split("│")[1:-1]] for line in lines) if row}
    assert cells["x"][:5] == ["x", "1.000 !", "0.00%→0.00%", "1→30", "2→30"]
    assert cells["s"][6] == "'c'" and set(cells["s"][7].split(", ")) == {"'a'", "'b'"}  # new, vanished
    bad = run(*c, "stats", "d", "--split", "validation", code=1)
    assert bad.stderr == "error: no split 'validation' in dataset 'd' version 3 (splits: test, train)\n"
    assert run("-C", "/nonexistent-catalog", "serve", code=1).stderr.startswith("error: ")
