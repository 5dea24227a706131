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

import pytest
from typer.testing import CliRunner

from catalog.cli import app

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


@pytest.mark.parametrize(("target", "kind"), [("dir", "a directory"), ("/dev/zero", "a character device")])
def test_inspect_of_a_directory_or_device(tmp_path: Path, target: str, kind: str) -> None:
    path = tmp_path if target == "dir" else Path(target)
    result = run("inspect", str(path))
    assert result.exit_code == 1
    assert result.stderr == f"error: {path}: not a regular file ({kind})\n"


@pytest.mark.parametrize("target", ["fifo", "dir", "/dev/zero", "link-to-fifo"])
@pytest.mark.parametrize("fmt", ["auto", "tfrecord", "jsonl"])
def test_append_of_what_is_not_a_regular_file(root: Path, fifo: Path, tmp_path: Path, target: str, fmt: str) -> None:
    kinds = {"fifo": "a FIFO", "dir": "a directory", "/dev/zero": "a character device", "link-to-fifo": "a FIFO"}
    path = {"fifo": fifo, "dir": tmp_path, "/dev/zero": Path("/dev/zero"), "link-to-fifo": tmp_path / "l"}[target]
    if target == "link-to-fifo":
        path.symlink_to(fifo)
    result = run("-C", str(root), "append", "d", str(path), "--format", fmt)
    assert result.exit_code == 1
    assert result.stderr == f"error: {path}: not a regular file ({kinds[target]})\n"
    assert_nothing_registered(root)


def test_reading_records_from_a_fifo_path_is_refused(fifo: Path) -> None:
    from catalog import read_records
    from catalog.errors import CatalogError

    with pytest.raises(CatalogError, match="not a regular file"):
        list(read_records(fifo))


@pytest.mark.parametrize("target", ["fifo", "dir", "/dev/zero"])
def test_register_with_a_schema_that_is_not_a_regular_file(
    root: Path, fifo: Path, tmp_path: Path, target: str
) -> None:
    kinds = {"fifo": "a FIFO", "dir": "a directory", "/dev/zero": "a character device"}
    path = {"fifo": fifo, "dir": tmp_path, "/dev/zero": Path("/dev/zero")}[target]
    result = run("-C", str(root), "register", "e", "--schema", str(path))
    assert result.exit_code == 1
    assert result.stderr == f"error: {path}: not a regular file ({kinds[target]})\n"
    assert "e" not in run("-C", str(root), "list").stdout.split()
