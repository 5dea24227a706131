"""`catalog dedup` (catalog/cli/changes.py): what it prints, its JSON, and one line with exit 1
for every bad request, nothing registered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from probes import interruptible
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli import app

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
    """Two sources merged: ids 0-3 in train, then ids 2-5 in test (2 and 3 twice)."""
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("pets", SCHEMA)
    ds.append_rows([{"id": i, "label": i % 2, "name": f"p{i}"} for i in range(4)])
    ds.append_rows([{"id": i, "label": i % 2, "name": f"p{i}"} for i in range(2, 6)], split="test")
    monkeypatch.setenv("CATALOG_ROOT", str(tmp_path / "cat"))
    return tmp_path / "cat"


def _run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _ids(root: Path, split: str | None = None) -> list[int]:
    return [r["id"] for r in Catalog.open(root).dataset("pets").read(split=split)]


def test_dedup_dry_run_then_dedup_then_nothing_left(root: Path) -> None:
    assert _run("dedup", "pets", "--key", "id", "--dry-run") == (
        0, "pets: would remove 2 duplicate rows in 1 of 2 shards (version 3); nothing written\n", "",
    )  # fmt: skip
    assert _ids(root) == [0, 1, 2, 3, 2, 3, 4, 5]
    assert _run("dedup", "pets", "--key", "id", "-m", "after the merge") == (
        0, "pets: removed 2 duplicate rows in 1 of 2 shards: version 4 (6 records)\n", "",
    )  # fmt: skip
    assert _ids(root) == [0, 1, 2, 3, 4, 5]
    assert _run("dedup", "pets", "--content") == (0, "pets: no duplicate rows (content): nothing committed\n", "")
    assert Catalog.open(root).dataset("pets").history()[-1].message == "after the merge"


def test_per_split_keys_of_several_features_and_json(root: Path) -> None:
    code, out, err = _run("dedup", "pets", "--key", "label,name", "--per-split", "--json")
    assert (code, err) == (0, "")
    got = json.loads(out)
    assert (got["operation"], got["rows"], got["key"], got["per_split"], got["content"]) == (
        "dedup", 0, ["label", "name"], True, False,
    )  # fmt: skip
    assert _run("dedup", "pets", "--key", "label", "--split", "test") == (
        0, "pets: removed 2 duplicate rows in 1 of 1 shard: version 4 (6 records)\n", "",
    )  # fmt: skip
    assert _ids(root, "test") == [2, 3]
    assert _run("dedup", "pets", "--key", "label", "--token", "t")[0] == 0
    assert _run("dedup", "pets", "--key", "label", "--token", "t") == (
        0, "pets: already committed (token seen before) as version 5\n", "",
    )  # fmt: skip
    assert _ids(root) == [0, 1]


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--key", "nope"], "error: dedup: no feature 'nope' in the schema (it has id, label, name)"),
        ([], "error: dedup: give a key (--key FEATURE[,FEATURE...]) or whole-record identity (--content)"),
        (
            ["--key", "id", "--content"],
            "error: dedup: give a key (--key FEATURE[,FEATURE...]) or content (--content), not both",
        ),
        (["--key", "id", "--split", "valid"], "error: dataset 'pets' has no split 'valid' (splits: test, train)"),
    ],
)
def test_bad_requests_are_one_line(root: Path, args: list[str], line: str) -> None:
    assert _run("dedup", "pets", *args) == (1, "", line + "\n")
    assert _ids(root) == [0, 1, 2, 3, 2, 3, 4, 5]


STOPPED = r"""
import os, signal, sys
from catalog import faults
from catalog.ops import dedup as dd

point, how = sys.argv[1:3]


def stop():
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    signal.raise_signal(signal.SIGINT)  # as a Ctrl-C arriving there


def on_point(name, info):
    if name == point:
        stop()


faults.install(on_point)
if point == "marking":  # phase 2: a duplicate marked, its shard's drop file written
    real = dd._append_drops

    def marking(*args):
        real(*args)
        stop()

    dd._append_drops = marking
sys.argv = ["catalog", "dedup", "pets", "--key", "id", "--workers", "1"]  # (1 worker: this process, the one stopped)
from catalog.cli import main

main()
"""
NOTHING = "interrupted: nothing was registered"
# dedup's own points, in its order: the hash entries spilled, duplicates being marked (both
# before any intent), its intent recorded, a new shard being written, just before and just
# after the commit.
POINTS = ["dedup.spilled", "marking", "intent.recorded", "shard.closing", "commit.before", "commit.after"]


@pytest.mark.parametrize("how", ["kill", "interrupt"])
@pytest.mark.parametrize("point", POINTS)
def test_a_kill_or_ctrl_c_anywhere_leaves_the_old_version_or_the_new_one(root: Path, point: str, how: str) -> None:
    import os
    import signal
    import subprocess
    import sys
    from datetime import timedelta

    before = Catalog.open(root).dataset("pets").info().version
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run(
        [sys.executable, "-c", interruptible(STOPPED), point, how], env=env, capture_output=True, text=True, timeout=120
    )
    done = point == "commit.after"
    if how == "kill":
        assert child.returncode == -signal.SIGKILL, child.stderr
    else:  # one line, exit 130, no traceback
        said = {f"interrupted after the commit: version {before + 1} is complete" if done else NOTHING}
        assert (child.returncode, child.stdout) == (130, "") and child.stderr.count("\n") == 1, child.stderr
        assert child.stderr.rstrip("\n") in said
    if how == "kill" and point in ("dedup.spilled", "marking"):
        assert any((root / ".spill").iterdir())  # the killed process's spill files, left to the next dedup
    ds = Catalog.open(root).dataset("pets")
    assert ds.info().version == (before + 1 if done else before)  # the old version or the new one
    assert _ids(root) == ([0, 1, 2, 3, 4, 5] if done else [0, 1, 2, 3, 2, 3, 4, 5])  # no stray file read as data
    assert _run("verify")[0] == 0
    with Catalog.open(root) as cat:
        cat.gc(grace=timedelta(0))  # a killed writer's files go at once
        registered = {
            s.path for v in range(1, cat.dataset("pets").info().version + 1) for s in cat.dataset("pets").shards(v)
        }
    assert {str(p) for p in (root / "data").rglob("*.tfrecord")} <= registered  # nothing half-done left
    code, out, err = _run("dedup", "pets", "--key", "id")  # a later dedup works
    assert (code, err) == (0, "") and _ids(root) == [0, 1, 2, 3, 4, 5], out
    assert not (root / ".spill").exists()  # the killed one's spill files went with it
    assert _run("verify")[0] == 0 and _run("gc", "--grace", "0s")[0] == 0
