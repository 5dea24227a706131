"""A data area in a local directory (catalog/storage/local.py): ownership, listing without
following links, temporary files beside their final name, links that never replace."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog.errors import CatalogError, ManifestError
from catalog.storage.local import LocalStore

SHARD = "0123456789abcdef0123456789ab-00000.tfrecord"


def test_a_new_area_is_claimed_once_and_refuses_another_catalog(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "area")
    store.check_new()  # not there yet: fine
    assert store.owner() is None
    assert store.claim("cat-a") == "cat-a"
    assert store.owner() == "cat-a"
    with pytest.raises(CatalogError) as e:
        store.check_new()
    assert str(e.value) == f"{tmp_path / 'area'}: already the data area of catalog cat-a; each catalog needs its own"
    (tmp_path / "file").write_text("x")
    with pytest.raises(CatalogError) as e:
        LocalStore(tmp_path / "file").check_new()
    assert str(e.value) == f"{tmp_path / 'file'}: not a directory; the data area must be a directory"
    with pytest.raises(CatalogError, match=r"not empty and not a catalog's data area"):
        LocalStore(tmp_path).check_new()


def test_a_shard_is_written_beside_its_name_and_listed_once_published(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.prepare("ds")
    rel = f"ds/{SHARD}"
    temp, f = store.open_temp(rel)
    assert temp == tmp_path / "ds" / f".{SHARD}.tmp"
    f.write(b"records")
    assert [s.rel for s in store.listing()] == [f"ds/.{SHARD}.tmp"]  # a leftover until published
    store.publish(f, temp, rel)
    store.sync_dir("ds")
    [found] = store.listing()
    assert (found.rel, found.size, found.name) == (rel, 7, SHARD)
    assert store.exists(rel) and store.checksum(rel)[0] == 7
    assert store.listing(datasets={"other"}) == [] and store.spool_files() == []
    assert store.remove(rel) and not store.remove(rel)
    store.tidy(keep=set())
    assert not (tmp_path / "ds").exists()  # an emptied dataset folder goes


def test_links_in_the_area_are_reported_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"s")
    area = tmp_path / "area"
    (area / "ds").mkdir(parents=True)
    (area / "ds" / "a").write_bytes(b"aa")
    (area / "ds" / "l").symlink_to(outside / "secret")
    (area / "linked").symlink_to(outside)
    (area / "not a dataset!").mkdir()
    links: list[str] = []
    found = LocalStore(area).listing(links=links)
    assert [(f.rel, f.size) for f in found] == [("ds/a", 2)]
    assert sorted(links) == ["ds/l", "linked"]
    with pytest.raises(CatalogError) as e:
        LocalStore(area).link("ds/l", "ds/b")
    assert str(e.value) == f"{area / 'ds' / 'l'}: not a regular file; the catalog links only regular files"


def test_link_and_adopt_never_replace_a_name_and_paths_stay_inside(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.prepare("ds")
    (tmp_path / "ds" / "a").write_bytes(b"a")
    assert store.link("ds/a", "ds/b") and (tmp_path / "ds" / "b").read_bytes() == b"a"
    with pytest.raises(CatalogError, match=r"ds/b: cannot write: File exists$"):
        store.link("ds/a", "ds/b")
    source = tmp_path / "input.tfrecord"
    source.write_bytes(b"in")
    assert store.adopt(source, "ds/c") and (tmp_path / "ds" / "c").samefile(source)
    with pytest.raises(CatalogError) as e:
        store.adopt(source, "ds/c")
    assert str(e.value) == f"{source}: cannot link into the catalog: File exists"
    with pytest.raises(ManifestError) as e2:
        store.url("../escape")
    assert str(e2.value) == (
        "the manifest names a shard '../escape' outside the data area (a shard is <dataset>/<file>)"
    )
    assert store.index_listing() == []
