"""What is not a shard is never read as one, a shard is read no further than its registered
size, and a full, read-only or impossible place is one line with nothing half-made."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import catalog.storage.base as storage
from catalog import Catalog, RecordWriter, encode_example
from catalog.cli import app
from catalog.commit import intents
from catalog.errors import CatalogError

runner = CliRunner()
HANG = 60  # seconds: a verb still running then is hung (reading a FIFO, or /dev/zero)
SCHEMA = {"features": {"id": {"dtype": "int64"}}}


def run(*args: str, ok: bool = True) -> Any:
    result = runner.invoke(app, list(args))
    if ok:
        assert result.exit_code == 0, (args, result.output, result.exception)
    return result


def cli_process(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    return subprocess.run(
        [sys.executable, "-m", "catalog", *args], capture_output=True, text=True, timeout=HANG, env=env
    )


pytestmark = pytest.mark.usefixtures("sqlite_only")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    cat = Catalog.init(tmp_path / "c")
    ds = cat.register("demo", SCHEMA)
    ds.append_rows([{"id": i} for i in range(10)])
    ds.append_rows([{"id": i} for i in range(10, 20)])
    return tmp_path / "c"


def _first_shard(root: Path) -> Path:
    return Path(Catalog.open(root).dataset("demo").files()[0])


# --------------------------------------------------------------------------- special files


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_a_special_file_in_place_of_a_shard_is_refused_unread(root: Path, tmp_path: Path, kind: str) -> None:
    shard = _first_shard(root)
    shard.unlink()
    if kind == "fifo":
        os.mkfifo(shard)
        why = "not a regular file; the catalog reads only regular files in its data area"
    else:
        shard.symlink_to("/dev/zero")
        why = "a symbolic link; the catalog reads only regular files in its data area"
    verify = cli_process("-C", str(root), "verify")
    assert verify.returncode == 1 and f"unreadable: {shard}: {shard}: {why}\n" in verify.stdout
    for args in (["cat", "demo"], ["export", "demo", str(tmp_path / "out.tfrecord")]):
        result = cli_process("-C", str(root), *args)
        assert (result.returncode, result.stderr) == (1, f"error: {shard}: {why}\n"), args
    assert not (tmp_path / "out.tfrecord").exists()


def test_a_shard_is_read_no_further_than_its_registered_size(root: Path, tmp_path: Path) -> None:
    shard = _first_shard(root)
    size = shard.stat().st_size
    extra = tmp_path / "extra.tfrecord"
    with RecordWriter(extra) as w:
        w.write(encode_example({"id": 99}))  # a well-formed record: only the size tells
    with open(shard, "ab") as f:
        f.write(extra.read_bytes())
    line = f"error: {shard}: more than the {size} bytes registered; run `catalog verify`\n"
    result = run("-C", str(root), "cat", "demo", ok=False)
    assert (result.exit_code, result.stderr) == (1, line)
    report = json.loads(run("-C", str(root), "verify", "--json", ok=False).stdout)
    assert [(p["problem"], p["detail"]) for p in report["problems"]] == [
        ("size", f"more than {size} bytes on disk, {size} registered")
    ]
    result = run("-C", str(root), "export", "demo", str(tmp_path / "out.tfrecord"), ok=False)
    assert result.exit_code == 1 and result.stderr.startswith(f"error: {shard}: checksum ")
    with open(shard, "r+b") as f:
        f.truncate(size - 1)
    result = run("-C", str(root), "cat", "demo", ok=False)
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1 and str(shard) in result.stderr


# --------------------------------------------------------------------------- init in impossible places


def test_init_in_impossible_places_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    c = tmp_path / "c"
    result = run("init", str(c), "--storage", "/dev/null", ok=False)
    assert (result.exit_code, result.stderr) == (
        1,
        "error: /dev/null: not a directory; the data area must be a directory\n",
    )
    assert not c.exists()
    run("init", str(c))  # nothing half-made stands in the way
    afile = tmp_path / "afile"
    afile.write_text("mine")
    result = run("init", str(afile), ok=False)
    assert (result.exit_code, result.stderr) == (1, f"error: {afile}: not a directory\n")
    assert afile.read_text() == "mine"
    result = run("init", "/proc/catalog-test", ok=False)
    assert result.exit_code == 1 and result.stderr.startswith("error: /proc/catalog-test")
    assert len(result.stderr.splitlines()) == 1
    result = run("init", str(tmp_path / "d"), "--storage", "/proc/catalog-test-data", ok=False)
    assert result.exit_code == 1 and result.stderr.startswith("error: /proc/catalog-test-data")
    assert not (tmp_path / "d").exists()


# --------------------------------------------------------------------------- a full or read-only disk


def _no_space(*_args: Any) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _files(root: Path) -> set[str]:
    return {p.name for p in (root / "data" / "demo").iterdir()}


@pytest.mark.parametrize(
    "verb",
    [
        ["append", "demo", "ROWS"],
        ["migrate", "demo", "--add", "w:int64=1"],
        ["compact", "demo"],
        ["export", "demo", "OUT"],
        ["delete", "demo", "--where", "id < 12"],
        ["update", "demo", "--set", "id=1", "--where", "id > 3"],
    ],
    ids=lambda v: v[0],
)
def test_a_full_disk_is_one_line_and_registers_nothing(
    root: Path, tmp_path: Path, verb: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(5)))
    out = tmp_path / "out.tfrecord"
    args = [str(rows) if a == "ROWS" else str(out) if a == "OUT" else a for a in verb]
    before = _files(root)
    monkeypatch.setattr(os, "fsync", _no_space)
    result = run("-C", str(root), *args, ok=False)
    assert result.exit_code == 1, (result.output, result.exception)
    assert re.fullmatch(r"error: \S+: cannot write: No space left on device\n", result.stderr), result.stderr
    monkeypatch.undo()
    info = Catalog.open(root).dataset("demo").info()
    assert (info.version, info.records) == (3, 20)  # nothing registered
    assert _files(root) == before and not out.exists()  # nothing half-made
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_read_only_data_area_is_one_line(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": 1}\n')

    def read_only(*_args: Any, **_kwargs: Any) -> Any:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    with monkeypatch.context() as m:
        m.setattr(storage, "open", read_only, raising=False)  # where shards are created
        result = run("-C", str(root), "append", "demo", str(rows), ok=False)
    assert result.exit_code == 1
    assert re.fullmatch(
        rf"error: {re.escape(str(root / 'data' / 'demo'))}/\S+\.tfrecord: cannot write: Read-only file system\n",
        result.stderr,
    ), result.stderr
    assert Catalog.open(root).dataset("demo").info().version == 3


def test_gc_that_cannot_delete_is_one_line_and_the_next_gc_ends_it(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cat = Catalog.open(root)
    cat.dataset("demo").compact()
    retired = {p.name for p in (root / "data" / "demo").iterdir()} - {Path(p).name for p in cat.dataset("demo").files()}
    assert len(retired) == 2

    def read_only(path: Any, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    with monkeypatch.context() as m:
        m.setattr(os, "unlink", read_only)
        result = run("-C", str(root), "gc", "--keep-versions", "1", ok=False)
    assert result.exit_code == 1
    assert re.fullmatch(r"error: \S+\.tfrecord: cannot delete: Read-only file system\n", result.stderr)
    report = json.loads(run("-C", str(root), "gc", "--grace", "0", "--keep-versions", "1", "--json").stdout)
    assert {Path(p).name for p in report["removed"]} == retired
    assert retired.isdisjoint(p.name for p in (root / "data" / "demo").iterdir())
    assert len(list(cat.dataset("demo").read())) == 20


@pytest.mark.parametrize(
    "verb",
    [
        ["delete", "demo", "--where", "id < 12"],
        ["update", "demo", "--set", "id=1", "--where", "id > 3"],
        ["filter", "demo", "copy", "--where", "id > 3"],
        ["map", "demo", "copy", "--fn", "copy:copy"],
    ],
    ids=lambda v: v[0],
)
def test_a_disk_full_at_the_last_flush_of_a_rewrite_leaves_nothing(
    root: Path, verb: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The records wait in the writer's buffer: the disk fills when a shard is closed."""
    before = _files(root)
    monkeypatch.setattr(RecordWriter, "_write_out", _no_space)
    result = run("-C", str(root), *verb, "--workers", "1", ok=False)
    assert result.exit_code == 1, (result.output, result.exception)
    assert result.stderr.endswith(": cannot write: No space left on device\n") and result.stderr.count("\n") == 1
    monkeypatch.undo()
    cat = Catalog.open(root)
    assert [d.name for d in cat.list()] == ["demo"] and cat.dataset("demo").info().version == 3
    assert _files(root) == before and not [p for p in (root / "data").rglob("*copy*") if p.is_file()]


@pytest.mark.parametrize("verb", ["delete", "filter", "compact"])
def test_a_job_s_files_go_even_when_the_manifest_cannot_settle_its_intent(
    tmp_path: Path, verb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk fails the manifest's release of the intent too: the job's own abort is then
    all that removes its files (gzip shards: compaction re-frames them)."""
    ds = Catalog.init(tmp_path / "c").register("demo", SCHEMA, compression="gzip")
    for start in (0, 10):
        ds.append_rows([{"id": i} for i in range(start, start + 10)])
    before = {p for p in (tmp_path / "c" / "data").rglob("*") if p.is_file()}
    monkeypatch.setattr(RecordWriter, "_write_out", _no_space)
    monkeypatch.setattr(intents, "release_intent", lambda *_a: None)  # "the manifest could not be reached"
    with pytest.raises(CatalogError, match="No space left on device"):
        if verb == "delete":
            ds.delete("id > 3", workers=1)
        elif verb == "filter":
            ds.filter("id > 3", into="copy", workers=1)
        else:
            ds.compact(workers=1)
    assert {p for p in (tmp_path / "c" / "data").rglob("*") if p.is_file()} == before
