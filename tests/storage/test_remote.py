"""A data area on an object store (catalog/storage/remote.py), on fsspec's in-memory file
system: spooled locally, uploaded once, listed by key, failures one line naming the URL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

from catalog.errors import CatalogError
from catalog.storage.remote import FsspecStore

SHARD = "0123456789abcdef0123456789ab-00000.tfrecord"


@pytest.fixture
def store() -> Iterator[FsspecStore]:
    bucket = f"bucket-{uuid.uuid4().hex[:8]}"  # the memory file system is one per process
    area = FsspecStore(f"memory://{bucket}/area/")
    memory = fsspec.filesystem("memory")  # the bucket, made and removed outside the store
    memory.mkdir(bucket)
    yield area
    memory.rm(bucket, recursive=True)


def test_an_empty_prefix_is_new_and_claimed_once(store: FsspecStore) -> None:
    assert store.root.endswith("/area")  # no trailing slash
    store.check()
    assert store.owner() is None
    store.check_new()
    assert store.claim("cat-r") == "cat-r" and store.owner() == "cat-r"
    with pytest.raises(CatalogError) as e:
        FsspecStore(store.root).check_new()
    assert str(e.value) == f"{store.root}: already the data area of catalog cat-r; each catalog needs its own"


def test_a_shard_is_spooled_then_uploaded_and_the_spool_file_goes(store: FsspecStore) -> None:
    rel = f"ds/{SHARD}"
    store.prepare("ds")  # no folders on an object store
    temp, f = store.open_temp(rel)
    assert temp.name.startswith(store._spool_prefix + SHARD)
    assert [s.shard for s in store.spool_files()] == [temp.name[len(store._spool_prefix) :]]
    f.write(b"remote bytes")
    store.publish(f, temp, rel)
    assert not temp.exists() and store.spool_files() == []
    assert store.exists(rel)
    with store.open(rel) as g:
        assert g.read() == b"remote bytes"
    [found] = store.listing()
    assert (found.rel, found.size) == (rel, 12)
    assert store.listing(datasets={"other"}) == []


def test_copies_stay_on_the_store_and_removal_says_whether_there_was_a_key(store: FsspecStore) -> None:
    memory = fsspec.filesystem("memory")
    memory.pipe_file(store.url("ds/a"), b"aaa")
    memory.pipe_file(store.url(".index/ds/a.idx"), b"i")
    assert store.link("ds/a", "ds/b")
    assert sorted(f.rel for f in store.listing()) == ["ds/a", "ds/b"]  # the index tree is not a dataset
    assert [f.rel for f in store.index_listing()] == [".index/ds/a.idx"]
    assert not store.adopt(Path(os.devnull), "ds/c")  # a local file is uploaded instead
    assert store.remove("ds/b") and not store.remove("ds/b")
