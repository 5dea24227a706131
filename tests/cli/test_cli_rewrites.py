"""Verbs that rewrite or copy a dataset's shards (catalog/cli/rewrites.py) through typer's
CliRunner: migrate and its migrations, restore, compact and export; their lines and errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog import Catalog, read_records
from catalog.cli.commands import app
from catalog.cli.rewrites import compact, export, migrate, migrations_list, migrations_new, restore

runner = CliRunner()
SCHEMA = {"features": {"x": {"dtype": "int64"}}}


def run(*args: str, code: int = 0) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (args, result.output, result.exception)
    return result


@pytest.fixture
def c(tmp_path: Path) -> list[str]:
    root = tmp_path / "cat"
    cat = Catalog.init(root)
    d = cat.register("d", SCHEMA)
    for i in range(3):  # three small shards: versions 2, 3, 4
        d.append_rows([{"x": i}])
    return ["-C", str(root)]


def test_the_verbs_of_this_module_are_named_so() -> None:
    names = [f.__name__ for f in (migrate, migrations_new, migrations_list, restore, compact, export)]
    assert names == ["migrate", "migrations_new", "migrations_list", "restore", "compact", "export"]


def test_restore_brings_back_a_version_as_a_new_one(c: list[str]) -> None:
    run(*c, "tag", "d", "two")
    assert run(*c, "restore", "d", "--version", "2").stdout == (
        "restored d to version 2 as version 5 (schema version 1): 1 record in 1 shard\n"
    )
    assert run(*c, "restore", "d", "--version", "two").stdout == (
        "restored d to version 4 (tag two) as version 6 (schema version 1): 3 records in 3 shards\n"
    )
    bad = run(*c, "restore", "d", "--version", "0", code=2)
    assert "'0' is not a version: versions are numbered from 1" in " ".join(bad.output.replace("│", " ").split())


def test_compact_merges_small_shards_once(c: list[str]) -> None:
    assert run(*c, "compact", "d", "--dry-run").stdout.startswith("would merge 3 shards into 1 (")
    done = run(*c, "compact", "d").stdout
    assert done.startswith("merged 3 shards into 1 (") and done.endswith(": 3 -> 1 shard as version 5\n")
    assert run(*c, "compact", "d").stdout == "d: nothing to compact (1 shard)\n"


def test_export_writes_one_file_and_refuses_to_replace_it(c: list[str], tmp_path: Path) -> None:
    out = tmp_path / "d.tfrecord"
    text = run(*c, "export", "d", str(out), "--version", "3").stdout
    assert text.startswith(f"exported d version 3: 2 records to {out} (") and text.endswith(", compression none)\n")
    assert len(list(read_records(out))) == 2
    refused = run(*c, "export", "d", str(out), code=1)
    assert refused.stderr == f"error: {out}: already exists; use --force to replace it\n"


def test_migrations_new_list_and_a_quick_dry_run(c: list[str], tmp_path: Path) -> None:
    mig = tmp_path / "migrations"
    assert run(*c, "migrations", "list", "d", "--migrations", str(mig)).stdout == f"d: no migrations in {mig / 'd'}\n"
    wrote = run(*c, "migrations", "new", "d", "add_y", "--migrations", str(mig)).stdout
    assert wrote.startswith(f"wrote {mig / 'd'}/0001_add_y") and wrote.endswith("`catalog migrate d --dry-run`\n")
    missing = run(*c, "migrate", "d", "--migrations", str(tmp_path / "none"), code=1)
    assert missing.stderr == (
        f"error: {tmp_path / 'none'}: no such folder (--migrations DIR holds one folder of scripts per dataset)\n"
    )
    (tmp_path / "empty").mkdir()
    assert run(*c, "migrate", "d", "--migrations", str(tmp_path / "empty")).stdout == (
        "d: no pending migrations (schema version 1)\n"
    )
    dry = run(*c, "migrate", "d", "--migrations", str(tmp_path / "empty"), "--add", "y:int64=7", "--dry-run")
    lines = dry.stdout.splitlines()
    assert lines[0].startswith("would apply ") and lines[0].endswith(": schema v1 -> v2, 3 records in 3 shards")
    assert "  added: y" in lines
