"""The data area is the catalog's own: init refuses what is not, gc deletes only its own files
there, and no path from the manifest or a link in the data area leads outside it."""

from __future__ import annotations

import os
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli import app
from catalog.demo import DEMO_SCHEMA, demo_rows
from catalog.storage import OWNER_FILE

runner = CliRunner()
OLD = 10 * 3600  # seconds: older than gc's default grace of an hour
SHARD_NAME = "0123456789abcdef0123456789ab-00000.tfrecord"  # named as the catalog names shards


def run(*args: str, ok: bool = True) -> Any:
    result = runner.invoke(app, list(args))
    if ok:
        assert result.exit_code == 0, (args, result.output, result.exception)
    return result


def age(path: Path) -> None:
    """Make ``path`` look written long ago (gc's grace has passed)."""
    t = os.stat(path, follow_symlinks=False).st_mtime - OLD
    os.utime(path, (t, t), follow_symlinks=False)


def demo_catalog(root: Path, versions: int = 1) -> Catalog:
    cat = Catalog.init(root)
    ds = cat.register("demo", DEMO_SCHEMA)
    for v in range(versions):
        ds.append_rows(demo_rows(5, start=5 * v))
    return cat


pytestmark = pytest.mark.usefixtures("sqlite_only")


# --------------------------------------------------------------------------- (a) empty --storage


def test_empty_storage_is_refused_and_nothing_is_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run("init", str(tmp_path / "c"), "--storage", "", ok=False)
    assert result.exit_code == 1
    assert result.stderr == "error: --storage is empty: name a directory or URL (or leave it out for DIR/data)\n"
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- (b) a directory with user files


def test_non_empty_foreign_directory_is_refused(tmp_path: Path) -> None:
    user = tmp_path / "userdir"
    (user / "docs").mkdir(parents=True)
    (user / "docs" / "thesis.tex").write_text("years of work")
    result = run("init", str(tmp_path / "c"), "--storage", str(user), ok=False)
    assert result.stderr == (
        f"error: {user}: not empty and not a catalog's data area; give --storage a new or empty directory\n"
    )
    assert not (tmp_path / "c").exists() and not (user / OWNER_FILE).exists()


def test_an_empty_directory_is_accepted_and_marked(tmp_path: Path) -> None:
    area = tmp_path / "area"
    area.mkdir()
    cat = Catalog.init(tmp_path / "c", storage=area)
    assert (area / OWNER_FILE).read_text().strip() == cat.catalog_id


def test_gc_deletes_only_files_the_catalog_names(tmp_path: Path) -> None:
    cat = demo_catalog(tmp_path / "c")
    folder = cat.data_root / "demo"
    mine = folder / SHARD_NAME
    theirs = [folder / "thesis.tex", folder / "notes.tfrecord", cat.data_root / "demo" / ".hidden.tmp"]
    for p in [mine, *theirs]:
        p.write_text("x")
        age(p)
    report = cat.gc()
    assert report.removed == [str(mine)]
    assert all(p.exists() for p in theirs)


# --------------------------------------------------------------------------- (c) two catalogs, one data area


def test_a_second_catalog_on_the_same_data_area_is_refused(tmp_path: Path) -> None:
    area = tmp_path / "shared"
    first = Catalog.init(tmp_path / "a", storage=area)
    result = run("init", str(tmp_path / "b"), "--storage", str(area), ok=False)
    assert result.stderr == (
        f"error: {area}: already the data area of catalog {first.catalog_id}; each catalog needs its own\n"
    )
    assert not (tmp_path / "b").exists()


def test_gc_refuses_a_data_area_it_does_not_own(tmp_path: Path) -> None:
    cat = demo_catalog(tmp_path / "c")
    stray = cat.data_root / "demo" / SHARD_NAME
    stray.write_text("x")
    age(stray)
    marker = cat.data_root / OWNER_FILE
    marker.write_text("ffffffffffffffffffffffffffff\n")
    result = run("-C", str(tmp_path / "c"), "gc", "--grace", "0", ok=False)
    assert result.stderr == (
        f"error: {cat.data_root}: the data area of catalog ffffffffffffffffffffffffffff, not of this one "
        f"({cat.catalog_id}); gc deletes only in its own data area\n"
    )
    marker.unlink()
    result = run("-C", str(tmp_path / "c"), "gc", "--grace", "0", ok=False)
    assert result.stderr == (
        f"error: {cat.data_root}: no {OWNER_FILE} naming this catalog ({cat.catalog_id}); gc deletes only in "
        f"its own data area (if this is it, write {cat.catalog_id} into {marker})\n"
    )
    assert stray.exists()
    marker.write_text(cat.catalog_id + "\n")
    assert run("-C", str(tmp_path / "c"), "gc", "--grace", "0").exit_code == 0
    assert not stray.exists()


def test_a_manifest_without_an_id_gets_one_at_gc(tmp_path: Path) -> None:
    cat = demo_catalog(tmp_path / "c")
    with sqlite3.connect(tmp_path / "c" / "catalog.db") as db:
        db.execute("delete from catalog_meta where key = 'catalog_id'")
    (cat.data_root / OWNER_FILE).unlink()
    again = Catalog.open(tmp_path / "c")
    assert again.catalog_id is None
    again.gc()
    cid = Catalog.open(tmp_path / "c").catalog_id
    assert cid is not None and (cat.data_root / OWNER_FILE).read_text().strip() == cid


def test_copy_manifest_carries_the_id(tmp_path: Path) -> None:
    cat = demo_catalog(tmp_path / "c")
    cat.copy_manifest(f"sqlite:///{tmp_path / 'copy.db'}")
    copy = Catalog.open(tmp_path / "c")  # the directory now uses the copy (the source is fenced)
    assert copy.catalog_id == cat.catalog_id
    assert copy.gc(grace=timedelta(0)).removed == []


# --------------------------------------------------------------------------- (d) links in the data area


def test_gc_never_follows_a_symlinked_folder_or_file(tmp_path: Path) -> None:
    cat = demo_catalog(tmp_path / "c")
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / SHARD_NAME
    victim.write_text("precious")
    age(victim)
    (cat.data_root / "evil").symlink_to(outside, target_is_directory=True)
    link = cat.data_root / "demo" / SHARD_NAME.replace("-00000", "-00001")
    link.symlink_to(victim)
    age(link)
    report = cat.gc()
    assert report.removed == [] and victim.read_text() == "precious" and link.is_symlink()
    assert report.links == [str(cat.data_root / "demo" / link.name), str(cat.data_root / "evil")]
    text = run("-C", str(tmp_path / "c"), "gc").stdout
    assert f"left alone (a symbolic link, never followed) {cat.data_root / 'evil'}\n" in text
    problems = {(p.problem, p.path) for p in cat.verify().problems}
    assert ("link", str(link)) in problems and ("link", str(cat.data_root / "evil")) in problems


def test_a_symlinked_shard_is_not_read(tmp_path: Path) -> None:
    cat = demo_catalog(tmp_path / "c")
    shard = Path(cat.dataset("demo").files()[0])
    real = tmp_path / "real.tfrecord"
    shard.rename(real)
    shard.symlink_to(real)
    result = run("-C", str(tmp_path / "c"), "cat", "demo", ok=False)
    assert result.stderr == (
        f"error: {shard}: a symbolic link; the catalog reads only regular files in its data area\n"
    )
    problems = {(p.problem, p.path, p.detail) for p in cat.verify().problems}
    assert problems == {
        ("unreadable", str(shard), f"{shard}: a symbolic link; the catalog reads only regular files in its data area"),
        ("link", str(shard), "symbolic link in the data area: never followed"),
    }


# --------------------------------------------------------------------------- (e) paths in the manifest


def _edit_path(root: Path, new: str, retired: bool) -> str:
    """Give the first retired (or live) shard the path ``new``; returns its path before."""
    with sqlite3.connect(root / "catalog.db") as db:
        where = "removed_version is not null" if retired else "removed_version is null"
        sid, old = db.execute(f"select id, path from shards where {where} order by id limit 1").fetchone()
        db.execute("update shards set path = ? where id = ?", (new, sid))
    return str(old)


def test_a_manifest_path_outside_the_data_area_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "c"
    cat = demo_catalog(root, versions=2)
    cat.dataset("demo").compact()
    victim = tmp_path / "x"
    victim.write_text("not a shard")
    before = _edit_path(root, "../../x", retired=True)
    result = run("-C", str(root), "gc", "--keep-versions", "1", ok=False)
    assert result.stderr == (
        "error: the manifest names a shard '../../x' outside the data area (a shard is <dataset>/<file>)\n"
    )
    assert victim.exists()
    with sqlite3.connect(root / "catalog.db") as db:  # nothing was marked collected before the check
        assert db.execute("select count(*) from shards where collected_at is not null").fetchone() == (0,)
        db.execute("update shards set path = ? where path = '../../x'", (before,))
    _edit_path(root, "/etc/passwd", retired=False)
    for args in (["cat", "demo"], ["verify"], ["export", "demo", str(tmp_path / "out.tfrecord")]):
        result = run("-C", str(root), *args, ok=False)
        assert result.stderr == (
            "error: the manifest names a shard '/etc/passwd' outside the data area (a shard is <dataset>/<file>)\n"
        ), args
    with pytest.raises(Exception, match="outside the data area"):
        list(Catalog.open(root).dataset("demo").batches(2))


def test_restore_never_links_to_a_file_outside(tmp_path: Path) -> None:
    root = tmp_path / "c"
    cat = demo_catalog(root, versions=2)
    ds = cat.dataset("demo")
    old = Path(ds.files(version=2)[0])
    ds.compact()
    outside = tmp_path / "outside.tfrecord"
    old.rename(outside)
    old.symlink_to(outside)
    result = run("-C", str(root), "restore", "demo", "--version", "2", ok=False)
    assert result.stderr == f"error: {old}: not a regular file; the catalog links only regular files\n"
    assert outside.stat().st_nlink == 1  # no hard link to it was made in the data area
    assert Catalog.open(root).dataset("demo").info().version == 4
