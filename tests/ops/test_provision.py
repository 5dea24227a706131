"""catalog.ops.provision: creating a catalog directory (all or nothing) and backing up its manifest."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from catalog import Catalog
from catalog.errors import CatalogError, StorageError, UsageError
from catalog.ops.provision import backup, create


def test_create_makes_the_directory_its_manifest_and_data_area(tmp_path: Path) -> None:
    root, url = create(tmp_path / "cat")
    assert root == (tmp_path / "cat").resolve() and url == f"sqlite:///{root}/catalog.db"
    assert json.loads((root / "catalog.json").read_text())["db_url"] is None
    assert (root / "data").is_dir()
    with pytest.raises(UsageError, match=r"cat: already a catalog$"):
        create(tmp_path / "cat")


def test_create_refuses_and_leaves_nothing(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(StorageError, match=r"file: not a directory$"):
        create(tmp_path / "file")
    with pytest.raises(UsageError, match=r"^--storage is empty: name a directory or URL"):
        create(tmp_path / "new", storage=" ")
    assert not (tmp_path / "new").exists()


def test_backup_is_a_manifest_that_reads(tmp_path: Path) -> None:
    cat = Catalog.init(tmp_path / "cat")
    cat.register("d", {"features": {"id": {"dtype": "int64"}}})
    out = backup(cat, tmp_path / "m.db")
    with sqlite3.connect(out) as conn:
        assert conn.execute("SELECT name FROM datasets").fetchall() == [("d",)]
    with pytest.raises(CatalogError, match=r"m.db: already exists; use --force to replace it$"):
        backup(cat, out)
    with pytest.raises(StorageError, match=r"m.db: cannot write there: no such directory$"):
        backup(cat, tmp_path / "absent" / "m.db")
    assert backup(cat, out, force=True) == out
