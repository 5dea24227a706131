"""catalog.inputs.tfds without tensorflow-datasets: hand-written TFDS metadata (features.json,
dataset_info.json, labels files) mapped to a schema and splits, and metadata that lies refused by name.
(tests/inputs/test_tfds.py checks directories TFDS itself built.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from catalog.errors import AppendError
from catalog.inputs.tfds import FEATURES_FILE, INFO_FILE, is_tfds_dir, read_tfds

FEATURES = {
    "featuresDict": {
        "features": {
            "image": {"image": {"shape": {"dimensions": ["-1", "-1", "3"]}, "dtype": "uint8", "encodingFormat": "png"}},
            "label": {"classLabel": {"numClasses": "2"}},
            "meta": {"featuresDict": {"features": {"id": {"tensor": {"shape": {}, "dtype": "int64"}}}}},
            "words": {"sequence": {"feature": {"text": {}}, "length": "-1"}},
            "box": {"boundingBox": {}},
            "raw": {"tensor": {"shape": {"dimensions": ["2", "2"]}, "dtype": "float64", "encoding": "bytes"}},
        }
    }
}


def _prepared(folder: Path, info: dict[str, Any] | None = None, features: dict[str, Any] | None = None) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / FEATURES_FILE).write_text(json.dumps(FEATURES if features is None else features))
    default = {
        "name": "toy",
        "splits": [{"name": "train", "shardLengths": ["2", "1"]}, {"name": "test", "numShards": 1}],
    }
    (folder / INFO_FILE).write_text(json.dumps(default if info is None else info))
    (folder / "label.labels.txt").write_text("cat\ndog\n")
    for name in (
        "toy-train.tfrecord-00000-of-00002",
        "toy-train.tfrecord-00001-of-00002",
        "toy-test.tfrecord-00000-of-00001",
    ):
        (folder / name).write_bytes(b"")
    return folder


def test_metadata_maps_to_a_schema_and_splits(tmp_path: Path) -> None:
    folder = _prepared(tmp_path / "toy")
    assert is_tfds_dir(folder) and not is_tfds_dir(tmp_path)
    ds = read_tfds(folder)
    assert ds.schema.to_json()["features"] == {
        "image": {"dtype": "bytes", "encoding": "image", "format": "png", "shape": [None, None, 3]},
        "label": {"dtype": "int64", "names": ["cat", "dog"]},
        "meta/id": {"dtype": "int64"},
        "words": {"dtype": "string", "shape": [None]},
        "box": {"dtype": "float32", "shape": [4]},
        "raw": {"dtype": "float64", "shape": [2, 2], "encoding": "tensor"},
    }
    assert [(p.name, split) for p, split in ds.inputs()] == [
        ("toy-train.tfrecord-00000-of-00002", "train"),
        ("toy-train.tfrecord-00001-of-00002", "train"),
        ("toy-test.tfrecord-00000-of-00001", "test"),
    ]
    assert sorted(ds.expected().values()) == [1, 2]  # the test split says no lengths


@pytest.mark.parametrize(
    ("info", "message"),
    [
        (
            {"name": "toy", "fileFormat": "array_record", "splits": []},
            f"{INFO_FILE}: the shards are array_record, not TFRecord",
        ),
        ({"name": "toy", "splits": {}}, f"{INFO_FILE}: splits is not a list"),
        ({"name": "toy", "splits": []}, f"{INFO_FILE}: no splits listed"),
        ({"name": "toy", "splits": [{"numShards": 1}]}, f"{INFO_FILE}: a split without a name: "),
        (
            {"name": "toy", "splits": [{"name": "train", "shardLengths": ["x"]}]},
            "split 'train': shard lengths are not numbers",
        ),
        (
            {"name": "toy", "splits": [{"name": "train", "numShards": 10**9}]},
            "split 'train' lists 1000000000 shards but the folder holds",
        ),
        (
            {"name": "toy", "splits": [{"name": "train"}]},
            "split 'train' lists no shards (no shardLengths or numShards)",
        ),
        (
            {"name": "toy", "splits": [{"name": "train", "numShards": 2, "filepathTemplate": "x"}]},
            "split 'train': its filepathTemplate names one file for several shards",
        ),
        (
            {"name": "toy", "splits": [{"name": "train", "numShards": 1, "filepathTemplate": "../{SPLIT}"}]},
            "split 'train': shard names outside the folder",
        ),
        (
            {"name": "toy", "splits": [{"name": "valid", "numShards": 1}]},
            "toy-valid.tfrecord-00000-of-00001: missing: ",
        ),
    ],
)
def test_metadata_that_cannot_be_read_is_named(tmp_path: Path, info: dict[str, Any], message: str) -> None:
    folder = _prepared(tmp_path / "toy", info=info)
    with pytest.raises(AppendError) as e:
        read_tfds(folder)
    assert message in str(e.value)


@pytest.mark.parametrize(
    ("features", "message"),
    [
        ({"features": {}}, "the top level is not a FeaturesDict"),
        (
            {"featuresDict": {"features": {"v": {"video": {}, "pythonClassName": "tfds.features.Video"}}}},
            "feature 'v': TFDS Video is not a feature the catalog can map",
        ),
        (
            {"featuresDict": {"features": {"t": {"tensor": {"dtype": "int64", "encoding": "zlib"}}}}},
            "feature 't': TFDS tensors encoded as 'zlib' are not supported",
        ),
        (
            {
                "featuresDict": {
                    "features": {
                        "t": {"tensor": {"dtype": "int64", "encoding": "bytes", "shape": {"dimensions": ["-1"]}}}
                    }
                }
            },
            "feature 't': TFDS tensors encoded as 'bytes' of unknown dimensions (shape [None]) are not supported",
        ),
        (
            {
                "featuresDict": {
                    "features": {"i": {"image": {"dtype": "float32", "shape": {"dimensions": ["2", "2", "3"]}}}}
                }
            },
            "feature 'i': a TFDS float32 image has one channel, not 3",
        ),
    ],
)
def test_features_the_catalog_cannot_map_are_named(tmp_path: Path, features: dict[str, Any], message: str) -> None:
    folder = _prepared(tmp_path / "toy", features=features)
    with pytest.raises(AppendError) as e:
        read_tfds(folder)
    assert str(e.value) == f"{folder / FEATURES_FILE}: {message}"


def test_metadata_that_is_not_json(tmp_path: Path) -> None:
    folder = _prepared(tmp_path / "toy")
    (folder / INFO_FILE).write_bytes(b"\xff")
    with pytest.raises(AppendError, match=r"dataset_info.json: cannot read it as JSON: not UTF-8 text \(byte 0\)$"):
        read_tfds(folder)
    (folder / INFO_FILE).write_text("[1]")
    with pytest.raises(AppendError, match=r"dataset_info.json: a JSON object expected$"):
        read_tfds(folder)
    (folder / INFO_FILE).write_text('{"splits": [{"name": "train", "numShards": {"a": 1}}]}')
    with pytest.raises(AppendError, match=r"dataset_info.json: split 'train': shard lengths are not numbers$"):
        read_tfds(folder)
