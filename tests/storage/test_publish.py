"""Files the catalog writes outside its data area (export, backup): never half a file under the
final name, never over a file someone else made, no partial file left for ever by a kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog import Catalog, faults, read_records
from catalog.cli import app
from catalog.demo import DEMO_SCHEMA, demo_rows

runner = CliRunner()
WAIT = 60.0  # seconds a child may take to reach its step (only ever hit when something is broken)

# The child runs one verb with one step patched to announce itself (the marker file) and then
# sleep until the parent kills it with SIGKILL: a kill in the middle of writing the file.
CHILD = r"""
import os, sqlite3, sys, time
from pathlib import Path

from catalog import Catalog, faults

root, verb, out, marker = sys.argv[1:5]


def hold():
    Path(marker).write_text(str(os.getpid()))
    while True:
        time.sleep(60)


if verb == "backup":  # the backup's file has just been created: nothing copied into it yet
    real_connect = sqlite3.connect

    def connect(path, *args, **kwargs):
        conn = real_connect(path, *args, **kwargs)
        if Path(str(path)).name != "catalog.db":
            hold()
        return conn

    sqlite3.connect = connect
    Catalog.open(root).backup(out)
else:  # every record written, not yet published (export-force: over the file there)
    faults.install(lambda name, info: name == "export.written" and hold())
    Catalog.open(root).dataset("demo").export(out, force=verb == "export-force")
"""


def run(*args: str, ok: bool = True) -> Any:
    result = runner.invoke(app, list(args))
    if ok:
        assert result.exit_code == 0, (args, result.output, result.exception)
    return result


pytestmark = pytest.mark.usefixtures("sqlite_only")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    cat = Catalog.init(tmp_path / "c")
    cat.register("demo", DEMO_SCHEMA).append_rows(demo_rows(20))
    return tmp_path / "c"


def _kill_mid(verb: str, root: Path, out: Path, tmp_path: Path) -> None:
    marker = tmp_path / f"{verb}.reached"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(root), verb, str(out), str(marker)], env=env)
    try:
        deadline = time.monotonic() + WAIT
        while not marker.exists():
            assert child.poll() is None, f"the {verb} child exited with {child.returncode} before its step"
            assert time.monotonic() < deadline, f"the {verb} child never reached its step"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    assert child.returncode == -signal.SIGKILL


@pytest.mark.parametrize("verb", ["backup", "export"])
def test_a_killed_write_leaves_nothing_and_the_rerun_succeeds(root: Path, tmp_path: Path, verb: str) -> None:
    outdir = tmp_path / "out"
    outdir.mkdir()
    out = outdir / ("copy.db" if verb == "backup" else "demo.tfrecord")
    _kill_mid(verb, root, out, tmp_path)
    assert not out.exists()  # nothing, not half a file, under the final name
    assert len(list(outdir.iterdir())) == 1  # the killed process's partial file, until the next run
    args = ["backup", str(out)] if verb == "backup" else ["export", "demo", str(out)]
    run("-C", str(root), *args)
    assert [p.name for p in outdir.iterdir()] == [out.name]  # the dead process's partial file is gone
    if verb == "export":
        assert len(list(read_records(out))) == 20
    else:
        assert Catalog.open(root).list()[0].records == 20


@pytest.mark.parametrize("verb", ["backup", "export"])
def test_a_file_made_meanwhile_is_never_overwritten(
    root: Path, tmp_path: Path, verb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / ("copy.db" if verb == "backup" else "demo.tfrecord")

    def theirs_appears(name: str, info: dict[str, Any]) -> None:
        if name in ("backup.write", "export.written"):
            out.write_text("someone else's")  # while the catalog was writing its copy

    faults.install(theirs_appears)
    try:
        if verb == "backup":
            result = run("-C", str(root), "backup", str(out), ok=False)
        else:
            result = run("-C", str(root), "export", "demo", str(out), ok=False)
    finally:
        faults.install(None)
    assert result.exit_code == 1
    assert result.stderr == f"error: {out}: created by someone else meanwhile; left as it is, nothing written\n"
    assert out.read_text() == "someone else's"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["c", out.name])  # no partial file left


def test_backup_and_export_into_nowhere_are_one_line(root: Path) -> None:
    result = run("-C", str(root), "backup", "/nonexistent/x.db", ok=False)
    assert (result.exit_code, result.stderr) == (1, "error: /nonexistent/x.db: cannot write there: no such directory\n")
    result = run("-C", str(root), "export", "demo", "/proc/x.tfrecord", ok=False)
    assert result.exit_code == 1 and result.stderr.startswith("error: /proc/x.tfrecord: cannot write: ")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("verb", ["backup", "export"])
def test_an_existing_file_needs_force(root: Path, tmp_path: Path, verb: str) -> None:
    out = tmp_path / ("copy.db" if verb == "backup" else "demo.tfrecord")
    out.write_text("the old one")
    args = ["backup", str(out)] if verb == "backup" else ["export", "demo", str(out)]
    result = run("-C", str(root), *args, ok=False)
    assert (result.exit_code, result.stderr) == (1, f"error: {out}: already exists; use --force to replace it\n")
    assert out.read_text() == "the old one"
    run("-C", str(root), *args, "--force")
    if verb == "export":
        assert len(list(read_records(out))) == 20
    else:
        assert Catalog.open(root).list()[0].records == 20  # the copy is a manifest that opens
        assert out.read_bytes()[:16] == b"SQLite format 3\x00"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["c", out.name])  # no partial file left


def test_export_force_in_python(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "demo.tfrecord"
    out.write_text("the old one")
    ds = Catalog.open(root).dataset("demo")
    report = ds.export(out, force=True)
    assert report.records == 20 and len(list(read_records(out))) == 20
    with pytest.raises(Exception, match="already exists; use --force to replace it"):
        ds.export(out)


@pytest.mark.parametrize("verb", ["backup", "export"])
@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError])
def test_a_forced_write_that_fails_leaves_the_old_file(
    root: Path, tmp_path: Path, verb: str, failure: type[BaseException]
) -> None:
    out = tmp_path / ("copy.db" if verb == "backup" else "demo.tfrecord")
    out.write_text("the old one")

    def fail(name: str, info: dict[str, Any]) -> None:
        if name in ("backup.write", "export.written"):
            raise failure(28, "No space left on device")  # Ctrl-C, or the disk filling up

    faults.install(fail)
    try:
        if failure is KeyboardInterrupt:
            with pytest.raises(KeyboardInterrupt):
                if verb == "backup":
                    Catalog.open(root).backup(out, force=True)
                else:
                    Catalog.open(root).dataset("demo").export(out, force=True)
        else:
            args = ["backup", str(out)] if verb == "backup" else ["export", "demo", str(out)]
            result = run("-C", str(root), *args, "--force", ok=False)
            assert result.exit_code == 1 and result.stderr.startswith(f"error: {out}: cannot write")
            assert result.stderr.endswith("No space left on device\n") and len(result.stderr.splitlines()) == 1
    finally:
        faults.install(None)
    assert out.read_text() == "the old one"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["c", out.name])  # no partial file left


def test_a_killed_forced_export_leaves_the_old_file(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "demo.tfrecord"
    out.parent.mkdir()
    out.write_text("the old one")
    _kill_mid("export-force", root, out, tmp_path)
    assert out.read_text() == "the old one"  # never half a file where a good one was
    run("-C", str(root), "export", "demo", str(out), "--force")
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # the dead process's partial file is gone
    assert len(list(read_records(out))) == 20


@pytest.mark.parametrize("verb", ["backup", "export"])
def test_force_never_replaces_the_catalogs_own_files(root: Path, verb: str) -> None:
    shard = Catalog.open(root).dataset("demo").shards()[0].path
    before = Path(shard).read_bytes()
    for target in (shard, str(root / "catalog.db")):
        args = ["backup", target] if verb == "backup" else ["export", "demo", target]
        result = run("-C", str(root), *args, "--force", ok=False)
        assert (result.exit_code, result.stderr) == (
            1,
            f"error: {target}: a file of the catalog at {root}; --force replaces only files outside it\n",
        )
    assert Path(shard).read_bytes() == before
    # the manifest is still itself (opening it may touch its pages, so no byte comparison)
    assert Catalog.open(root).list()[0].records == 20 and Catalog.open(root).verify().ok
