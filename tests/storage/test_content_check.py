"""A shard file whose content is not what was registered is refused by every reader.

An adopted file (or a ``--link``ed one, through its other name) can be rewritten in place
with valid records of the same total size: the size check and the records' CRCs pass. The
manifest keeps a fingerprint of such files (storage.content); a reader that finds it changed
checksums the file before it serves a record.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog import Catalog, RecordWriter
from catalog.cli import app
from catalog.errors import CorruptShardError, MigrationError
from catalog.storage import content
from catalog.tfrecord.example import encode_example

SCHEMA = {"features": {"id": {"dtype": "int64"}, "x": {"dtype": "float32", "shape": [2]}}}
runner = CliRunner()


def run(*args: Any) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def write_part(path: Path, ids: range) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with RecordWriter(path) as w:
        for i in ids:
            w.write(encode_example({"id": [i], "x": [i / 2, -i / 4]}))
    return path


def rewrite_same_size(path: Path, ids: range) -> None:
    """Other valid records of the same total size, written in place (same inode)."""
    size = path.stat().st_size
    fresh = write_part(path.with_suffix(".new"), ids)
    data = fresh.read_bytes()
    fresh.unlink()
    assert len(data) == size and data != path.read_bytes()
    with open(path, "r+b") as f:  # in place: the inode stays, as an editor's save may keep it
        f.write(data)


def aged(path: Path) -> None:
    """Let the file's last change (its ctime, which nothing sets back) age past RACY_NS, so its
    adoption records a fingerprint (a file changed within the clock's tick of its adoption is
    checksummed instead)."""
    while time.time_ns() - path.stat().st_ctime_ns < content.RACY_NS:
        time.sleep(0.01)


@pytest.fixture(autouse=True)
def fresh_process_cache() -> None:
    content.forget()  # what this process verified before belongs to other tests' files


@pytest.fixture
def adopted(tmp_path: Path) -> tuple[Catalog, Path]:
    cat = Catalog.init(tmp_path / "cat")
    cat.register("d", SCHEMA)
    part = write_part(tmp_path / "ext" / "part-0.tfrecord", range(10))
    other = write_part(tmp_path / "ext" / "part-1.tfrecord", range(10, 20))  # compaction needs two
    aged(other)
    aged(part)
    cat.dataset("d").adopt([part, other])
    return cat, part


READERS: dict[str, Callable[[Any], object]] = {
    "read": lambda ds: next(iter(ds.read())),
    "records": lambda ds: next(iter(ds.records())),
    "batches": lambda ds: next(iter(ds.batches(batch_size=4))),
    "source": lambda ds: ds.source()[3],
    "source_batch": lambda ds: ds.source().__getitems__([1, 2]),
    "torch": lambda ds: next(iter(ds.torch(batch_size=4))),
    "tf_dataset": lambda ds: next(iter(ds.tf_dataset(batch_size=4))),
    "export": lambda ds: ds.export(ds.catalog.root.parent / "out.tfrecord"),
    "compact": lambda ds: ds.compact(),
    "migrate": lambda ds: ds.migrate(add=["h:int64=1"]),
    "compute_stats": lambda ds: ds.compute_stats(),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_an_adopted_file_rewritten_with_the_same_size_is_refused(adopted: tuple[Catalog, Path], reader: str) -> None:
    cat, part = adopted
    if reader == "torch":
        pytest.importorskip("torch") if os.environ.get("CI") != "true" else __import__("torch")
    if reader == "tf_dataset":
        pytest.importorskip("tensorflow") if os.environ.get("CI") != "true" else __import__("tensorflow")
    ds = cat.dataset("d")
    rewrite_same_size(part, range(50, 60))
    if reader == "compute_stats":  # a shard adopted before format 8 had no statistics
        with sqlite3.connect(cat.root / "catalog.db") as db:
            db.execute("DELETE FROM shard_stats")
    error = CorruptShardError if reader != "migrate" else MigrationError  # a migration names itself first
    with pytest.raises(error, match=rf"{part}: its content changed after it was registered"):
        READERS[reader](ds)
    assert cat.dataset("d").version == ds.version  # nothing committed by a rewrite that read it


def test_cat_names_the_file_and_what_to_do(adopted: tuple[Catalog, Path]) -> None:
    cat, part = adopted
    rewrite_same_size(part, range(50, 60))
    result = run("-C", cat.root, "cat", "d", "--limit", "1")
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: {part}: its content changed after it was registered")
    assert "catalog verify" in result.stderr and "adopt" in result.stderr


def test_a_racy_adoption_is_checked_too(tmp_path: Path) -> None:
    """A file written just before its adoption (as in a script) has no trusted fingerprint:
    its rewrite in the same clock tick would keep every stat field. It is checksummed instead."""
    cat = Catalog.init(tmp_path / "cat")
    cat.register("d", SCHEMA)
    part = write_part(tmp_path / "part-0.tfrecord", range(10))
    cat.dataset("d").adopt([part])
    rewrite_same_size(part, range(50, 60))
    with pytest.raises(CorruptShardError, match="its content changed after it was registered"):
        list(cat.dataset("d").read())


def test_a_file_touched_but_unchanged_still_reads(adopted: tuple[Catalog, Path], monkeypatch: Any) -> None:
    cat, part = adopted
    calls: list[str] = []
    real = content.checksum_of
    monkeypatch.setattr(content, "checksum_of", lambda url: calls.append(url) or real(url))
    os.utime(part)  # a new mtime and ctime, the same bytes: checksummed once in this process, then read
    assert [r["id"] for r in cat.dataset("d").read()] == list(range(20))
    assert [r["id"] for r in cat.dataset("d").read()] == list(range(20))
    assert calls == [str(part)]


def test_a_fingerprint_that_matches_costs_no_read(adopted: tuple[Catalog, Path], monkeypatch: Any) -> None:
    cat, _part = adopted
    calls: list[str] = []
    real = content.checksum_of
    monkeypatch.setattr(content, "checksum_of", lambda *a: calls.append("x") or real(*a))
    assert [r["id"] for r in cat.dataset("d").read()] == list(range(20))
    assert calls == []


def test_a_linked_shard_edited_through_its_other_name_is_refused(tmp_path: Path) -> None:
    cat = Catalog.init(tmp_path / "cat")
    cat.register("d", SCHEMA)
    part = write_part(tmp_path / "part-0.tfrecord", range(10))
    aged(part)
    commit = cat.dataset("d").adopt([part], link=True)
    assert os.stat(commit.shards[0].path).st_ino == part.stat().st_ino
    rewrite_same_size(part, range(50, 60))
    with pytest.raises(CorruptShardError, match="its content changed after it was registered"):
        list(cat.dataset("d").read())
    result = run("-C", cat.root, "cat", "d", "--limit", "1")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1


def test_a_file_changed_during_its_adoption_is_checksummed_by_readers(tmp_path: Path, monkeypatch: Any) -> None:
    """Its fingerprint after the scan vouches for nothing (the checksum may cover two contents)."""
    cat = Catalog.init(tmp_path / "cat")
    cat.register("d", SCHEMA)
    part = write_part(tmp_path / "part-0.tfrecord", range(10))
    aged(part)
    from catalog.ops import adopt as adopt_module

    # records checked one by one, a window at a time, or a window handed to the statistics helper
    for owner, seam in ((adopt_module, "check_batch"), (adopt_module, "check_spans"), (adopt_module._Spans, "offer")):
        checked = getattr(owner, seam)

        def change_it(*args: Any, real: Any = checked) -> Any:
            os.utime(part)  # as a writer that touched it mid-read would
            return real(*args)

        monkeypatch.setattr(owner, seam, change_it)
    cat.dataset("d").adopt([part])
    with sqlite3.connect(cat.root / "catalog.db") as db:
        assert db.execute("SELECT fingerprint FROM shards").fetchall() == [("unchecked",)]
    aged(part)
    rewrite_same_size(part, range(50, 60))
    with pytest.raises(CorruptShardError, match="its content changed after it was registered"):
        list(cat.dataset("d").read())
