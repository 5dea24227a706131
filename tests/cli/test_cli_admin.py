"""Verbs on the catalog as a whole (catalog/cli/admin.py) through typer's CliRunner: init,
backup, copy-manifest, upgrade, verify and gc, their lines, JSON and exit codes."""

from __future__ import annotations

import inspect
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli.admin import backup, copy_manifest, gc, init, upgrade, verify
from catalog.cli.commands import app

runner = CliRunner()
FIXTURE = Path(__file__).parents[1] / "fixtures" / "manifest-format1"
SCHEMA = {"features": {"x": {"dtype": "int64"}}}


def run(*args: str, code: int = 0) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (args, result.output, result.exception)
    return result


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "cat"
    run("init", str(root))
    Catalog.open(root).register("d", SCHEMA).append_rows([{"x": 1}, {"x": 2}])
    return root


def test_the_verbs_are_the_commands_registered() -> None:
    commands = get_command(app).commands  # type: ignore[attr-defined]
    verbs = {"init": init, "backup": backup, "copy-manifest": copy_manifest, "upgrade": upgrade, "verify": verify}
    for name, fn in {**verbs, "gc": gc}.items():
        assert inspect.unwrap(commands[name].callback) is inspect.unwrap(fn), name


def test_init_says_where_and_a_second_init_is_one_line(tmp_path: Path) -> None:
    root = tmp_path / "cat"
    result = run("init", str(root))
    assert result.stdout == f"initialized catalog in {root.resolve()} (data area {root.resolve() / 'data'})\n"
    again = run("init", str(root), code=1)
    assert again.stderr.startswith("error: ") and again.stderr.count("\n") == 1


def test_backup_writes_a_copy_once_and_refuses_to_overwrite(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "backup.db"
    assert run("-C", str(root), "backup", str(out)).stdout == f"manifest backed up to {out}\n"
    refused = run("-C", str(root), "backup", str(out), code=1)
    assert refused.stderr == f"error: {out}: already exists; use --force to replace it\n"
    run("-C", str(root), "backup", str(out), "--force")


def test_an_older_manifest_is_backed_up_as_it_is_before_its_upgrade(tmp_path: Path) -> None:
    old = tmp_path / "old"
    shutil.copytree(FIXTURE, old)
    run("-C", str(old), "list", code=1)  # every other command asks for `catalog upgrade` first
    out = tmp_path / "format1.db"
    assert run("-C", str(old), "backup", str(out)).stdout == f"manifest backed up to {out}\n"
    with sqlite3.connect(out) as conn:  # the manifest as it was: the way back if the upgrade goes wrong
        assert conn.execute("SELECT value FROM catalog_meta WHERE key = 'format_version'").fetchall() == [("1",)]
    assert run("-C", str(old), "upgrade").stdout.startswith("manifest format 1 -> ")


def test_copy_manifest_counts_rows_and_switches(root: Path, tmp_path: Path) -> None:
    target = f"sqlite:///{tmp_path / 'copy.db'}"
    result = run("-C", str(root), "copy-manifest", target, "--json")
    doc = json.loads(result.stdout)
    assert (doc["ok"], doc["target"], doc["switched"], doc["rows"]["shards"]) == (True, target, True, 1)
    assert json.loads((root / "catalog.json").read_text())["db_url"] == target


def test_upgrade_reports_the_formats_and_verify_and_gc_report_a_clean_catalog(root: Path, tmp_path: Path) -> None:
    assert run("-C", str(root), "upgrade").stdout.startswith("manifest already at format ")
    old = tmp_path / "old"
    shutil.copytree(FIXTURE, old)
    assert run("-C", str(old), "upgrade").stdout.startswith("manifest format 1 -> ")
    checked = run("-C", str(root), "verify")
    assert checked.stdout == "" and checked.stderr.startswith("ok: 1 shard, ")
    assert checked.stderr.endswith(": 0 problems\n")
    leftover = root / "data" / "d" / "0123456789abcdef0123456789ab-00000.tfrecord"  # a name the catalog gives
    leftover.write_bytes(b"x")
    (root / "data" / "d" / "users-own.tfrecord").write_bytes(b"x")  # one it never gives: never removed
    assert run("-C", str(root), "verify").stderr.endswith(": 0 problems, 2 unregistered files\n")
    swept = run("-C", str(root), "gc", "--dry-run", "--grace", "0")
    assert swept.stdout.splitlines()[0] == f"would remove {leftover}"
    assert swept.stdout.splitlines()[1].startswith("would remove 1 file (1 B); kept 0 younger than the grace period")
    assert leftover.exists()
    bad = run("-C", str(root), "gc", "--grace", "soon", code=2)
    assert "'soon' is not a duration" in bad.output
