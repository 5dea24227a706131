"""catalog.ops.describe: a version's statistics report, statistics computed for shards without, comparisons."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog import Catalog
from catalog.api import Dataset
from catalog.errors import FeatureNotFoundError, VersionNotFoundError
from catalog.ops.describe import compare_stats, compute_stats, side_of, stats


@pytest.fixture
def ds(tmp_path: Path) -> Dataset:
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("d", {"features": {"x": {"dtype": "float32"}, "s": {"dtype": "string"}}})
    ds.append_rows([{"x": float(i), "s": "a"} for i in range(10)], split="train")
    ds.append_rows([{"x": 100.0 + i, "s": "b"} for i in range(5)], split="test")
    return cat.dataset("d")


def test_a_report_of_a_split_and_some_features(ds: Dataset) -> None:
    report = stats(ds, split="test", features=["x", "x"])
    assert report.features == ["x"]  # asked twice, shown once
    out = report.to_json()
    assert (out["records"], out["split"], out["not_computed"]["shards"]) == (5, "test", 0)
    [x] = out["features"]
    assert (x["feature"], x["values"]["min"], x["values"]["max"]) == ("x", 100.0, 104.0)
    assert report.feature("s").records == 5
    with pytest.raises(FeatureNotFoundError) as e:
        stats(ds, features=["y"])
    assert str(e.value) == "dataset 'd' has no feature 'y' (features: x, s)"


def test_compute_registers_only_what_is_missing(ds: Dataset) -> None:
    assert compute_stats(ds).to_json() == {"dataset": "d", "computed": 0, "records": 0}  # written with their shards


def test_comparisons_by_split_version_and_split_at_version(ds: Dataset) -> None:
    assert side_of(ds, "test").records == 5
    assert side_of(ds, "2").records == 10  # a version number
    assert side_of(ds, "train@2").split == "train"
    comparison = compare_stats(ds, "train", "test", features=["x"])
    out = comparison.to_json()
    assert (out["a"]["records"], out["b"]["records"], [f["feature"] for f in out["features"]]) == (10, 5, ["x"])
    assert comparison.features[0].to_json()["linf"] == 1.0  # no value of either side in the other's range
    with pytest.raises(VersionNotFoundError) as e:
        side_of(ds, "valid")
    assert (
        str(e.value)
        == "dataset 'd' has no split, tag or version 'valid' (splits: test, train; no tags; versions: 1 to 3)"
    )
