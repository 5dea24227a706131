"""The data area's implementation from its root (catalog/storage/factory.py)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from catalog.storage.factory import store_for
from catalog.storage.local import LocalStore
from catalog.storage.remote import FsspecStore


@pytest.mark.parametrize("root", ["s3://bucket/prefix", "memory://bucket/area/", "gs://b/p"])
def test_a_url_is_an_object_store(root: str) -> None:
    store = store_for(root)
    assert isinstance(store, FsspecStore) and store.remote
    assert store.root == root.rstrip("/")


def test_a_path_is_a_local_directory_and_pickles_as_its_root(tmp_path: Path) -> None:
    store = store_for(tmp_path / "area")
    assert type(store) is LocalStore and not store.remote
    assert store.root == str(tmp_path / "area")
    again = pickle.loads(pickle.dumps(store))
    assert type(again) is LocalStore and again.root == store.root
    assert type(store_for("relative/dir")) is LocalStore
