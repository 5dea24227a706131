"""`catalog adopt NAME DIR` of a TFDS prepared directory built by tensorflow-datasets itself
(tests/tfds_fixture.py): its schema, splits and records read back equal to TFDS's own reading."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "tensorflow_datasets", reason="tensorflow-datasets is not installed (pip install tensorflow-datasets)"
)

import numpy as np
from PIL import Image
from tfds_fixture import KIND_NAMES, LABEL_NAMES, build_tfds_dataset, tfds_read_back
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli import app
from catalog.errors import AppendError

runner = CliRunner()


def run(*args: Any) -> Any:
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tfds_dataset(tmp_path_factory.mktemp("tfds"), extra_features=True)


@pytest.fixture
def tfds_dir(built: Path, tmp_path: Path) -> Path:
    """A private copy of the built directory, which a test may damage."""
    return Path(shutil.copytree(built, tmp_path / "prepared"))


@pytest.fixture(scope="module")
def theirs(built: Path) -> dict[str, list[dict[str, Any]]]:
    return tfds_read_back(built)


def digests(folder: Path) -> dict[str, tuple[str, int]]:
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_ino) for p in folder.iterdir()}


def flat(row: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """TFDS's nested dicts as the schema names their leaves ("meta/id")."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}/"))
        else:
            out[f"{prefix}{k}"] = v
    return out


def assert_same(mine: dict[str, Any], tfds_row: dict[str, Any]) -> None:
    """One record as the catalog decodes it against the same record as TFDS decodes it."""
    want = flat(tfds_row)
    image = np.asarray(Image.open(io.BytesIO(mine["image"])))  # the encoded file, as stored
    np.testing.assert_array_equal(image, want["image"])
    assert mine["caption"] == want["caption"].decode("utf-8")
    int64_min = np.iinfo(np.int64).min  # TFDS's value for an optional feature left out
    assert mine["maybe"] == (None if want["maybe"] == int64_min else int(want["maybe"]))
    np.testing.assert_array_equal(mine["objects/bbox"], np.asarray(want["objects/bbox"]).reshape(-1))
    ragged = want["ragged"]
    np.testing.assert_array_equal(mine["ragged/ragged_flat_values"], ragged.flat_values.numpy())
    np.testing.assert_array_equal(mine["ragged/ragged_row_lengths_0"], ragged.row_lengths().numpy())
    for key in ("vec", "count", "label", "meta/id", "meta/score", "tokens", "bbox", "objects/kind"):
        np.testing.assert_array_equal(mine[key], want[key], err_msg=key)
        if isinstance(mine[key], np.ndarray):  # arrays keep TFDS's dtype (scalars are Python numbers)
            assert mine[key].dtype == np.asarray(want[key]).dtype, key


def test_a_tfds_directory_is_adopted_in_place_and_reads_back_as_tfds_reads_it(
    tmp_path: Path, tfds_dir: Path, theirs: dict[str, list[dict[str, Any]]]
) -> None:
    before = digests(tfds_dir)
    cat = Catalog.init(tmp_path / "cat")
    result = run("-C", cat.root, "adopt", "mnistish", tfds_dir)
    assert result.exit_code == 0, result.stderr
    assert "adopted 6 files in place" in result.stdout
    ds = cat.dataset("mnistish")
    assert ds.info().description == "TFRecord Catalog test fixture."
    info = ds.info().to_json()
    assert {s: t["records"] for s, t in info["splits"].items()} == {"train": 30, "test": 12}
    assert {s: t["shards"] for s, t in info["splits"].items()} == {"train": 3, "test": 3}
    for split in ("train", "test"):
        mine = list(ds.read(split=split))
        assert len(mine) == len(theirs[split])
        for a, b in zip(mine, theirs[split], strict=True):
            assert_same(a, b)
    assert digests(tfds_dir) == before  # not a byte moved
    assert cat.verify().ok


def test_the_schema_keeps_what_tfds_records(tmp_path: Path, tfds_dir: Path) -> None:
    cat = Catalog.init(tmp_path / "cat")
    cat.adopt("d", [tfds_dir])
    features = cat.dataset("d").schema.to_json()["features"]
    assert features["label"] == {"dtype": "int64", "names": list(LABEL_NAMES)}
    assert features["objects/kind"]["names"] == list(KIND_NAMES)
    assert features["image"] == {"dtype": "bytes", "encoding": "image", "format": "png", "shape": [8, 8, 3]}
    assert features["vec"] == {"dtype": "float32", "shape": [3]}
    assert features["caption"] == {"dtype": "string"}
    assert features["maybe"] == {"dtype": "int64", "optional": True}
    assert features["tokens"] == {"dtype": "int64", "shape": [None]}
    assert features["bbox"] == {"dtype": "float32", "shape": [4]}
    names = run("-C", cat.root, "cat", "d", "--names", "--limit", "1", "--split", "test")
    assert json.loads(names.stdout)["label"] in LABEL_NAMES


def test_random_access_and_slicing_over_adopted_tfds_shards(tmp_path: Path, tfds_dir: Path) -> None:
    cat = Catalog.init(tmp_path / "cat")
    cat.adopt("d", [tfds_dir])
    ds = cat.dataset("d")
    everything = list(ds.read(split="train"))
    src = ds.source(split="train[10:20]")
    assert len(src) == 10
    assert [src[i]["meta/id"] for i in range(10)] == [r["meta/id"] for r in everything[10:20]]
    assert all(s.index_checksum is not None for s in ds.shards())


def test_shard_lengths_that_disagree_with_the_files_register_nothing(tmp_path: Path, tfds_dir: Path) -> None:
    info = json.loads((tfds_dir / "dataset_info.json").read_text())
    info["splits"][1]["shardLengths"] = ["4", "5", "3"]
    (tfds_dir / "dataset_info.json").write_text(json.dumps(info))
    cat = Catalog.init(tmp_path / "cat")
    result = run("-C", cat.root, "adopt", "d", tfds_dir)
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "tfds_fixture-test.tfrecord-00001-of-00003: 4 records, but dataset_info.json says 5" in result.stderr
    assert run("-C", cat.root, "list", "--json").stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("missing shard", "tfds_fixture-train.tfrecord-00002-of-00003: missing: dataset_info.json lists 3 shards"),
        ("zlib tensor", "feature 'vec': TFDS tensors encoded as 'zlib' are not supported"),
        ("array_record", "the shards are array_record, not TFRecord"),
        ("bad json", "features.json: cannot read it as JSON"),
    ],
)
def test_a_damaged_tfds_directory_is_one_line(tmp_path: Path, tfds_dir: Path, damage: str, message: str) -> None:
    if damage == "missing shard":
        (tfds_dir / "tfds_fixture-train.tfrecord-00002-of-00003").unlink()
    elif damage == "zlib tensor":
        doc = json.loads((tfds_dir / "features.json").read_text())
        doc["featuresDict"]["features"]["vec"]["tensor"]["encoding"] = "zlib"
        (tfds_dir / "features.json").write_text(json.dumps(doc))
    elif damage == "array_record":
        info = json.loads((tfds_dir / "dataset_info.json").read_text())
        (tfds_dir / "dataset_info.json").write_text(json.dumps({**info, "fileFormat": "array_record"}))
    else:
        (tfds_dir / "features.json").write_text("{not json")
    cat = Catalog.init(tmp_path / "cat")
    result = run("-C", cat.root, "adopt", "d", tfds_dir)
    assert result.exit_code == 1 and message in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_split_is_refused_for_a_tfds_directory(tmp_path: Path, tfds_dir: Path) -> None:
    cat = Catalog.init(tmp_path / "cat")
    with pytest.raises(AppendError, match="splits come from its files"):
        cat.adopt("d", [tfds_dir], split="train")


def test_copy_keeps_the_splits_and_leaves_the_directory_alone(
    tmp_path: Path, tfds_dir: Path, theirs: dict[str, list[dict[str, Any]]]
) -> None:
    before = digests(tfds_dir)
    cat = Catalog.init(tmp_path / "cat")
    commit = cat.adopt("d", [tfds_dir], copy=True)
    assert all(s.location is None for s in commit.shards)
    assert sorted({s.split for s in commit.shards}) == ["test", "train"]
    mine = list(cat.dataset("d").read(split="test"))
    for a, b in zip(mine, theirs["test"], strict=True):
        assert_same(a, b)
    assert digests(tfds_dir) == before


def test_gc_after_compaction_leaves_the_tfds_files(tmp_path: Path, tfds_dir: Path) -> None:
    before = digests(tfds_dir)
    cat = Catalog.init(tmp_path / "cat")
    cat.adopt("d", [tfds_dir])
    cat.dataset("d").compact()
    report = cat.gc(keep_versions=1)
    assert len(report.forgotten) == 6 and report.removed == []
    assert digests(tfds_dir) == before
    assert sorted(s.split for s in cat.dataset("d").shards()) == ["test", "train"]
