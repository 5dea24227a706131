"""A derivation's jobs on this machine write their shards without fsync; the new files are
fsynced together as each job ends (derive.Syncs), then their folder, all before the commit;
a failed fsync registers nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from catalog import Catalog
from catalog.errors import DatasetNotFoundError, StorageError
from catalog.ops import derive
from catalog.storage.base import Store

SCHEMA = {"features": {"id": {"dtype": "int64"}, "name": {"dtype": "string"}}}


def _source(tmp_path: Path) -> Any:
    cat = Catalog.init(tmp_path / "cat")
    src = cat.register("src", SCHEMA)
    for k in range(3):
        src.append_rows([{"id": i, "name": f"n{i}"} for i in range(k * 100, k * 100 + 100)])
    return cat


def _events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    events: list[tuple[str, str]] = []
    sync_file, sync_dir, commit = Store.sync_file, Store.sync_dir, derive.commit
    monkeypatch.setattr(Store, "sync_file", lambda self, rel: events.append(("file", rel)) or sync_file(self, rel))
    monkeypatch.setattr(Store, "sync_dir", lambda self, d: events.append(("dir", d)) or sync_dir(self, d))
    monkeypatch.setattr(derive, "commit", lambda *a: events.append(("commit", "")) or commit(*a))
    return events


@pytest.mark.parametrize("workers", [1, 2])
def test_the_new_shards_files_are_synced_then_their_folders_then_the_commit(tmp_path, monkeypatch, workers):
    cat = _source(tmp_path)
    events = _events(monkeypatch)
    cat.dataset("src").filter("id >= 50", into="kept", workers=workers)
    shards = [s.path for s in cat.dataset("kept").shards()]
    files = sorted(rel for kind, rel in events if kind == "file")
    assert len(shards) == 3 and len(files) == 3  # each shard (its record index is not fsynced: storage.index)
    assert {Path(p).name for p in shards} == {Path(rel).name for rel in files if rel.startswith("kept/")}
    assert all(s.index_checksum is not None for s in cat.dataset("kept").shards())
    kinds = [kind for kind, _ in events]
    assert kinds == ["file"] * 3 + ["dir", "commit"]
    assert [r["id"] for r in cat.dataset("kept").read()] == list(range(50, 300))


def test_a_failed_sync_registers_nothing(tmp_path, monkeypatch):
    cat = _source(tmp_path)
    calls: list[str] = []

    def failing(self: Store, rel: str) -> None:
        calls.append(rel)
        if len(calls) == 2:
            raise StorageError(f"{rel}: cannot write: No space left on device")

    monkeypatch.setattr(Store, "sync_file", failing)
    with pytest.raises(StorageError, match="No space left"):
        cat.dataset("src").map(lambda r: r, into="copy", schema=SCHEMA, workers=1)
    with pytest.raises(DatasetNotFoundError):
        cat.dataset("copy")
