"""catalog.load (issue 33, §3): the catalog found in its order, the dataset pinned to a
version and a split slice, ready for every reader; (features, label) with as_supervised."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import catalog
from catalog import Catalog
from catalog.errors import (
    CatalogNotFoundError,
    DatasetNotFoundError,
    SplitError,
    SplitNotFoundError,
    UsageError,
    VersionNotFoundError,
)
from catalog.loading import Loaded, find_catalog, user_catalog_dir

SCHEMA = {
    "features": {
        "id": {"dtype": "int64"},
        "x": {"dtype": "float32", "shape": [2]},
        "label": {"dtype": "int64", "names": ["cat", "dog"]},
    }
}


def rows(lo: int, hi: int) -> list[dict[str, Any]]:
    return [{"id": i, "x": [i, -i], "label": i % 2} for i in range(lo, hi)]


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("CATALOG_ROOT", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)  # no catalog above it
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("flowers", SCHEMA)
    ds.append_rows(rows(0, 10))
    ds.append_rows(rows(10, 20), split="test")
    return tmp_path / "cat"


def ids(loaded: Loaded) -> list[int]:
    return [r["id"] for r in loaded.read()]


def test_load_pins_the_version_and_the_split(root: Path) -> None:
    loaded = catalog.load("flowers", split="train[:50%]", root=root)
    assert (len(loaded), loaded.version, loaded.split) == (5, 3, "train[:50%]")
    Catalog.open(root).dataset("flowers").append_rows(rows(20, 30))  # a later commit: not seen
    assert ids(loaded) == [0, 1, 2, 3, 4]
    assert [b["id"].tolist() for b in loaded.batches(2)] == [[0, 1], [2, 3], [4]]
    assert loaded.source()[4]["id"] == 4
    assert sum(1 for _ in loaded.records()) == 5
    assert ids(catalog.load("flowers", root=root)) == list(range(30))
    assert ids(catalog.load("flowers", version=2, root=root)) == list(range(10))


def test_a_tag_is_resolved_when_loading(root: Path) -> None:
    ds = Catalog.open(root).dataset("flowers")
    ds.tag("v1")
    loaded = catalog.load("flowers", version="v1", split="test", root=root)
    ds.append_rows(rows(20, 22), split="test")
    ds.untag("v1")
    ds.tag("v1")  # now naming the newer version: the loaded one keeps its own
    assert (loaded.version, ids(loaded)) == (3, list(range(10, 20)))


def test_the_catalog_is_found_in_order(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CatalogNotFoundError, match=r"no catalog found: give root=.*catalog init"):
        find_catalog()
    Catalog.init(user_catalog_dir())  # the user's own: the last resort
    assert find_catalog() == user_catalog_dir().resolve()
    assert user_catalog_dir() == tmp_path / "xdg" / "tfrecord-catalog"
    monkeypatch.chdir(root / "data")  # inside a catalog: found searching up
    assert find_catalog() == root.resolve()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CATALOG_ROOT", str(root))
    assert find_catalog() == root.resolve()
    assert len(catalog.load("flowers")) == 20
    monkeypatch.setenv("CATALOG_ROOT", str(tmp_path / "nowhere"))  # named but missing: no fallback
    with pytest.raises(CatalogNotFoundError, match="nowhere: not a catalog"):
        catalog.load("flowers")


def test_without_xdg_data_home_the_user_catalog_is_under_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert user_catalog_dir() == Path.home() / ".local" / "share" / "tfrecord-catalog"


def test_a_missing_name_lists_what_exists(root: Path) -> None:
    with pytest.raises(DatasetNotFoundError) as e:
        catalog.load("flower", root=root)
    assert str(e.value) == f"no dataset named 'flower' in {root.resolve()} (did you mean 'flowers'?): it has flowers"


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"split": "tran"}, SplitNotFoundError, "no split .tran. in .tran. \\(splits: test, train\\)"),
        ({"split": "train[:x]"}, SplitError, "bad split"),
        ({"version": 9}, VersionNotFoundError, "9"),
        ({"label_key": "nope"}, UsageError, "label_key 'nope' is no feature"),
    ],
)
def test_a_bad_load_is_refused_at_once(root: Path, kw: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        catalog.load("flowers", root=root, **kw)


def test_a_loaded_dataset_refuses_another_version_or_split(root: Path) -> None:
    loaded = catalog.load("flowers", split="test", root=root)
    for kw in ({"version": 2}, {"split": "train"}):
        with pytest.raises(UsageError, match="was loaded at version 3, split 'test': load it again"):
            loaded.batches(4, **kw)


def test_as_supervised_picks_the_label_with_class_names(root: Path) -> None:
    assert catalog.load("flowers", root=root, as_supervised=True).label_key == "label"
    assert catalog.load("flowers", root=root, label_key="id").label_key == "id"
    cat = Catalog.open(root)
    labels = {"a": {"dtype": "int64", "names": ["x"]}, "b": {"dtype": "int64", "names": ["y"]}}
    cat.register("two", {"features": labels})
    with pytest.raises(UsageError, match="2 features have class names \\(a, b\\): give label_key="):
        catalog.load("two", root=root, as_supervised=True)
    cat.register("plain", {"features": {"label": {"dtype": "int64"}}})
    assert catalog.load("plain", root=root, as_supervised=True).label_key == "label"


def test_tf_dataset_yields_features_and_label(root: Path) -> None:
    pytest.importorskip("tensorflow", reason="TensorFlow is not installed")
    loaded = catalog.load("flowers", split="train", root=root, as_supervised=True)
    features, label = next(iter(loaded.tf_dataset(4)))
    assert sorted(features) == ["id", "x"]
    assert label.numpy().tolist() == [0, 1, 0, 1]
    assert np.asarray(features["x"]).shape == (4, 2)
    plain = next(iter(loaded.tf_dataset(4, label_key=None)))
    assert sorted(plain) == ["id", "label", "x"]


def test_torch_reads_the_pinned_slice(root: Path) -> None:
    pytest.importorskip("torch", reason="torch is not installed")
    loaded = catalog.load("flowers", split="test[:3]", root=root)
    batches = list(loaded.torch(batch_size=2))
    assert [b["id"].tolist() for b in batches] == [[10, 11], [12]]
