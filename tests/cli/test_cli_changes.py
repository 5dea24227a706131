"""`catalog delete` and `catalog update` (catalog/cli/changes.py): what they print, their JSON,
and one line with exit 1 for every bad request, nothing registered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli import app

NAMES_HINT = "(`catalog list` names the datasets there are)"  # a name no dataset has, where others exist

runner = CliRunner()
SCHEMA = {
    "features": {
        "id": {"dtype": "int64", "shape": []},
        "label": {"dtype": "int64", "shape": [], "names": ["cat", "dog"]},
        "name": {"dtype": "string", "shape": []},
    }
}


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("pets", SCHEMA)
    for start in (0, 4):
        ds.append_rows([{"id": i, "label": i % 2, "name": f"p{i}"} for i in range(start, start + 4)])
    monkeypatch.setenv("CATALOG_ROOT", str(tmp_path / "cat"))
    return tmp_path / "cat"


def _run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_delete_dry_run_then_delete_then_nothing_left_to_match(root: Path) -> None:
    assert _run("delete", "pets", "--where", "label = 'dog'", "--dry-run") == (
        0, "pets: would delete 4 rows in 2 of 2 shards (version 3); nothing written\n", "",
    )  # fmt: skip
    assert _run("delete", "pets", "--where", "label = 'dog'", "-m", "labelling fix") == (
        0, "pets: deleted 4 rows in 2 of 2 shards: version 4 (4 records)\n", "",
    )  # fmt: skip
    assert _run("delete", "pets", "--where", "label = 'dog'") == (
        0, "pets: no row matches label = 'dog': nothing committed\n", "",
    )  # fmt: skip
    ds = Catalog.open(root).dataset("pets")
    assert [r["id"] for r in ds.read()] == [0, 2, 4, 6]
    assert ds.history()[-1].message == "labelling fix" and ds.history()[-1].kind == "delete"


def test_update_sets_values_given_as_text_and_says_what_it_did(root: Path) -> None:
    code, out, err = _run("update", "pets", "--set", "name=renamed", "--set", "label=dog", "--where", "id >= 6")
    assert (code, out, err) == (0, "pets: updated 2 rows in 1 of 2 shards: version 4 (8 records)\n", "")
    rows = list(Catalog.open(root).dataset("pets").read())
    assert [(r["id"], r["label"], r["name"]) for r in rows[5:]] == [(5, 1, "p5"), (6, 1, "renamed"), (7, 1, "renamed")]


def test_json_and_tokens(root: Path) -> None:
    code, out, _ = _run("delete", "pets", "--where", "id = 1", "--token", "t-1", "--json")
    doc = json.loads(out)
    assert code == 0 and (doc["rows"], doc["shards"], doc["version"], doc["duplicate"]) == (1, 1, 4, False)
    code, out, _ = _run("delete", "pets", "--where", "id = 1", "--token", "t-1")
    assert (code, out) == (0, "pets: already committed (token seen before) as version 4\n")


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["delete", "pets", "--where", "nme = 'x'"],
         "error: where \"nme = 'x'\": at character 1: no feature 'nme' in the schema (it has id, label, name)"),
        (["delete", "pets", "--where", "id = "],
         "error: where 'id = ': at character 6: expected a value (a number, a 'quoted' text, true or false), "
         "found the end"),
        (["delete", "pets", "--where", "label = 'cow'"],
         "error: where \"label = 'cow'\": at character 9: 'cow' is not a class name of label (cat, dog)"),
        (["delete", "nosuch", "--where", "id = 1"], "error: no dataset named 'nosuch' " + NAMES_HINT),
        (["delete", "pets", "--where", "id = 1", "--split", "test"],
         "error: dataset 'pets' has no split 'test' (splits: train)"),
        (["update", "pets", "--set", "id=x", "--where", "id = 1"],
         "error: update: feature 'id': 'x' is not an int64 value"),
        (["update", "pets", "--set", "age=3", "--where", "id = 1"],
         "error: update: no feature 'age' to set (the schema has id, label, name)"),
        (["update", "pets", "--set", "name=x", "--where", "id = 1", "--split", "b@d"], None),
    ],
)  # fmt: skip
def test_bad_requests_are_one_line_and_register_nothing(root: Path, args: list[str], line: str | None) -> None:
    code, out, err = _run(*args)
    assert code in (1, 2) and out == ""
    if line is not None:
        assert (code, err) == (1, line + "\n")
    assert Catalog.open(root).dataset("pets").info().version == 3


def test_update_needs_a_set_and_a_where(root: Path) -> None:
    code, _out, err = _run("update", "pets", "--where", "id = 1")
    assert code == 2 and "Missing option '--set'" in err
    code, _out, err = _run("delete", "pets")
    assert code == 2 and "Missing option '--where'" in err


def test_a_feature_set_twice_is_refused(root: Path) -> None:
    before = Catalog.open(root).dataset("pets").info().version
    code, _out, err = _run("update", "pets", "--set", "id=1", "--set", "id=2", "--where", "id = 1")
    assert code == 2 and "'id' is given twice ('1' and '2'): give it once" in " ".join(err.split())
    assert Catalog.open(root).dataset("pets").info().version == before


def test_the_lines_say_what_a_report_holds() -> None:
    from catalog.cli.changes import _derived, _text
    from catalog.ops.derive import DeriveReport
    from catalog.ops.rowchanges import RowChangeReport

    erased = RowChangeReport("d", "delete", "id = 1", False, 4, 5, rows=1, shards=2, shards_total=3, purge=True)
    erased.erased, erased.files_removed, erased.records_after = 3, 2, 9
    assert list(_text(erased)) == [
        "d: erased 3 rows (1 in the current version) from 2 of 3 shards: version 5 (9 records); 2 old files deleted"
    ]
    made = DeriveReport("dst", "src", 7, "filter where id > 1", 2, records_read=10, records=4, shards=1)
    assert list(_derived(made)) == [
        "dst: made version 2: 4 records in 1 shard from 10 records of src version 7 (filter where id > 1)"
    ]


def test_update_takes_lists_of_text_as_json_and_refuses_a_number_too_large(root: Path) -> None:
    schema = {
        "features": {
            "id": {"dtype": "int64", "shape": []},
            "tags": {"dtype": "string", "shape": [None]},
            "pair": {"dtype": "bytes", "shape": [2]},
            "score": {"dtype": "float32", "shape": []},
            "raw": {"dtype": "bytes", "shape": []},
        }
    }
    cat = Catalog.open(root)
    row = {"id": 1, "tags": [], "pair": [b"a", b"b"], "score": 0.5, "raw": b""}
    cat.register("tagged", schema).append_rows([row])
    code, _out, err = _run("update", "tagged", "--set", 'tags=["x", "y z"]', "--set", 'pair=["q", "r"]',
                          "--set", "raw=é", "--where", "id = 1")  # fmt: skip
    assert (code, err) == (0, "")
    row = next(iter(cat.dataset("tagged").read()))
    assert (row["tags"], list(row["pair"]), row["raw"]) == (["x", "y z"], [b"q", b"r"], "é".encode())  # bytes: UTF-8
    assert _run("update", "tagged", "--set", "score=1e400", "--where", "id = 1") == (
        1, "", "error: update: feature 'score': number 1e400 is out of float32 range\n",
    )  # fmt: skip
    assert _run("update", "tagged", "--set", "tags=x", "--where", "id = 1") == (
        1, "", "error: update: feature 'tags': 'x' is not a JSON list of string values\n",
    )  # fmt: skip
    assert _run("update", "tagged", "--set", "score=Infinity", "--where", "id = 1")[0] == 0  # written as one: kept


def test_update_of_a_label_with_a_name_it_does_not_have_lists_the_names(root: Path) -> None:
    assert _run("update", "pets", "--set", "label=horse", "--where", "id = 1") == (
        1, "", "error: update: feature 'label': 'horse' is neither a class name of label (cat, dog) "
        "nor an int64 value\n",
    )  # fmt: skip


def test_a_long_predicate_matching_nothing_is_shown_cut(tmp_path: Path) -> None:
    from catalog import Catalog

    root = tmp_path / "long"
    Catalog.init(root).register("d", {"features": {"id": {"dtype": "int64"}}}).append_rows([{"id": 1}])
    where = "id IN (" + ", ".join(str(i) for i in range(2, 5000)) + ")"
    result = runner.invoke(app, ["-C", str(root), "delete", "d", "--where", where])
    assert result.exit_code == 0, result.output
    line = result.stdout.strip()
    assert line.startswith("d: no row matches id IN (2, 3, ") and line.endswith("…: nothing committed")
    assert len(line) < 260


def test_update_sets_an_optional_number_to_null_given_as_null(tmp_path: Path) -> None:
    cat = Catalog.init(tmp_path / "cat")
    schema = {"features": {"id": {"dtype": "int64"}, "score": {"dtype": "float32", "optional": True}}}
    cat.register("s", schema).append_rows([{"id": i, "score": i / 2} for i in range(3)])
    code, out, err = _run("-C", str(tmp_path / "cat"), "update", "s", "--set", "score=null", "--where", "id = 1")
    assert (code, out, err) == (0, "s: updated 1 row in 1 of 1 shard: version 3 (3 records)\n", "")
    assert [r["score"] for r in cat.dataset("s").read()] == [0.0, None, 1.0]
