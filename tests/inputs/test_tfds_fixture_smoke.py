"""The TFDS fixture (tests/tfds_fixture.py) builds a prepared dataset that TFDS reads back."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

pytest.importorskip(
    "tensorflow_datasets", reason="tensorflow-datasets is not installed (pip install tensorflow-datasets)"
)

import numpy as np
from tfds_fixture import (
    DATASET_NAME,
    LABEL_NAMES,
    NUM_SHARDS,
    SPLITS,
    build_tfds_dataset,
    expected_example,
    tfds_read_back,
)


def _index(split: str, row: dict[str, Any]) -> int:
    return int(row["meta"]["id"]) - (1000 if split == "test" else 0)


def _check_row(split: str, row: dict[str, Any], *, extra: bool = False) -> None:
    i = _index(split, row)
    want = expected_example(split, i, extra_features=extra)
    np.testing.assert_array_equal(row["vec"], want["vec"])
    assert row["vec"].dtype == np.float32 and row["vec"].shape == (3,)
    assert row["count"] == want["count"]
    np.testing.assert_array_equal(row["image"], want["image"])  # PNG is lossless
    assert row["image"].dtype == np.uint8
    assert row["label"] == LABEL_NAMES.index(want["label"])
    assert row["caption"] == want["caption"].encode("utf-8")
    assert row["meta"]["score"] == want["meta"]["score"]
    np.testing.assert_array_equal(row["tokens"], np.array(want["tokens"], dtype=np.int64))
    if want["maybe"] is None:
        assert row["maybe"] == np.iinfo(np.int64).min  # what TFDS decodes a missing optional to
    else:
        assert row["maybe"] == want["maybe"]
    np.testing.assert_array_equal(row["bbox"], want["bbox"])
    if extra:
        assert row["objects"]["bbox"].shape == (len(want["objects"]["bbox"]), 4)
        assert row["ragged"].to_list() == want["ragged"]


def test_fixture_builds_and_reads_back(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TFDS_DATA_DIR", str(tmp_path / "tfds_home"))
    ds_dir = build_tfds_dataset(tmp_path / "data")

    assert ds_dir == tmp_path / "data" / DATASET_NAME / "1.0.0"
    names = sorted(p.name for p in ds_dir.iterdir())
    shards = [f"{DATASET_NAME}-{s}.tfrecord-{k:05d}-of-{NUM_SHARDS:05d}" for s in sorted(SPLITS) for k in range(3)]
    assert names == sorted(["dataset_info.json", "features.json", "label.labels.txt", *shards])
    assert (ds_dir / "label.labels.txt").read_text() == "".join(f"{n}\n" for n in LABEL_NAMES)
    info = json.loads((ds_dir / "dataset_info.json").read_text())
    assert {s["name"]: s["shardLengths"] for s in info["splits"]} == {"train": ["10"] * 3, "test": ["4"] * 3}

    back = tfds_read_back(ds_dir)
    assert {split: len(rows) for split, rows in back.items()} == SPLITS
    for split, rows in back.items():
        assert sorted(_index(split, r) for r in rows) == list(range(SPLITS[split]))
        for row in rows:
            _check_row(split, row)


def test_fixture_extra_features_in_generation_order(tmp_path: pathlib.Path) -> None:
    ds_dir = build_tfds_dataset(tmp_path, extra_features=True, shuffle=False)
    assert (ds_dir / "objects-kind.labels.txt").read_text() == "small\nlarge\n"
    assert json.loads((ds_dir / "dataset_info.json").read_text())["disableShuffling"] is True
    back = tfds_read_back(ds_dir)
    for split, rows in back.items():
        assert [_index(split, r) for r in rows] == list(range(SPLITS[split]))
        for row in rows:
            _check_row(split, row, extra=True)
