"""Every command that commits takes `-m` and `--token` (issue 30 item 5): register (with
--schema or --infer), append, adopt, migrate, compact, restore. A retry with the token of a
request that committed answers with that commit and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli import app

IMPORT = "from catalog.migrate import AddField\n"
SCHEMA = {"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string", "default": ""}}}


def run(root: Path, *args: Any) -> Any:
    return CliRunner().invoke(app, ["-C", str(root), *[str(a) for a in args]])


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("d", SCHEMA)
    for part in range(4):
        ds.append_rows([{"id": part * 10 + i, "text": f"r{i}"} for i in range(10)])
    return cat


def shard_files(cat: Catalog) -> set[str]:
    return {p.name for p in (cat.root / "data").rglob("*") if p.is_file()}


def test_compact_with_a_token_is_done_once(cat: Catalog) -> None:
    first = run(cat.root, "compact", "d", "-m", "fewer", "--token", "c1", "--json")
    assert first.exit_code == 0, first.output
    version = json.loads(first.stdout)["version"]
    assert (cat.dataset("d").last_commit().message, cat.dataset("d").last_commit().token) == ("fewer", "c1")
    files = shard_files(cat)
    again = run(cat.root, "compact", "d", "--token", "c1")
    assert (again.exit_code, again.stdout) == (0, f"d: already committed (token seen before) as version {version}\n")
    assert cat.dataset("d").version == version and shard_files(cat) == files  # nothing written
    report = cat.dataset("d").compact(token="c1")
    assert report.commit is not None and report.commit.duplicate and report.to_json()["duplicate"]


def test_restore_with_a_token_is_done_once(cat: Catalog) -> None:
    first = run(cat.root, "restore", "d", "--version", "2", "-m", "back", "--token", "r1")
    assert first.exit_code == 0, first.output
    assert cat.dataset("d").version == 6 and cat.dataset("d").info().records == 10
    cat.dataset("d").append_rows([{"id": 99}])  # the retry comes after another commit: still a retry
    again = run(cat.root, "restore", "d", "--version", "2", "--token", "r1")
    assert again.exit_code == 0 and again.stdout.startswith("already committed (token seen before): "), again.output
    assert "as version 6" in again.stdout
    assert cat.dataset("d").version == 7 and cat.dataset("d").info().records == 11
    commit = cat.dataset("d").restore(2, token="r1")
    assert commit.duplicate and (commit.version, commit.message, commit.token) == (6, "back", "r1")


def test_quick_migration_with_a_token_is_done_once(cat: Catalog) -> None:
    first = run(cat.root, "migrate", "d", "--add", "w:int64=3", "-m", "add w", "--token", "m1")
    assert first.exit_code == 0, first.output
    assert cat.dataset("d").last_commit().token == "m1"
    files = shard_files(cat)
    # a retry of a quick migration would otherwise fail (w exists) or, for a rename back and
    # forth, apply twice: the token answers with the commit
    again = run(cat.root, "migrate", "d", "--add", "w:int64=3", "--token", "m1", "--json")
    assert again.exit_code == 0, again.output
    doc = json.loads(again.stdout)
    assert (doc["duplicate"], doc["version"], doc["migrations"]) == (True, 6, [])
    assert shard_files(cat) == files and cat.dataset("d").schema_version == 2
    text = run(cat.root, "migrate", "d", "--add", "w:int64=3", "--token", "m1")
    assert text.stdout == "d: already committed (token seen before) as version 6\n"
    other = run(cat.root, "migrate", "d", "--add", "w:int64=3", "--token", "m2")
    assert other.exit_code == 1  # another request: w is there already


def test_migration_files_carry_the_token_and_its_id(cat: Catalog, tmp_path: Path) -> None:
    folder = tmp_path / "migrations" / "d"
    folder.mkdir(parents=True)
    (folder / "0001_add_a.py").write_text(IMPORT + 'operations = [AddField("a", {"dtype": "int64"}, default=1)]\n')
    (folder / "0002_add_b.py").write_text(IMPORT + 'operations = [AddField("b", {"dtype": "int64"}, default=2)]\n')
    done = run(cat.root, "migrate", "d", "--migrations", tmp_path / "migrations", "--token", "run-7")
    assert done.exit_code == 0, done.output
    tokens = [c.token for c in cat.dataset("d").history()[-2:]]
    assert sorted(tokens) == ["run-7:0001_add_a", "run-7:0002_add_b"]
    again = run(cat.root, "migrate", "d", "--migrations", tmp_path / "migrations", "--token", "run-7")
    assert (again.exit_code, again.stdout) == (0, "d: no pending migrations (schema version 3)\n")


def test_register_with_a_schema_takes_a_message_and_a_token(tmp_path: Path) -> None:
    cat = Catalog.init(tmp_path / "c")
    ds = cat.register("e", SCHEMA, "the description", message="first", token="reg-1")
    first = ds.history()[0]
    assert (first.message, first.token) == ("first", "reg-1")
    assert cat.register("e", SCHEMA, token="reg-1").name == "e"  # a retry: the same dataset
    assert cat.committed("e", "reg-1") is not None and cat.committed("e", "other") is None
    assert cat.register("f", SCHEMA, "described").history()[0].message == "described"  # as before
