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
from tfds_fixture import KIND_NAMES, LABEL_NAMES, build_tfds_dataset, build_tfds_features, tfds_read_back
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


# --------------------------------------------------------------------------- images of other dtypes, raw tensors


def _typed_features(tfds: Any) -> dict[str, Any]:
    f = tfds.features
    return {
        "fimg": f.Image(shape=(4, 4, 1), dtype=np.float32),  # stored as a 4-channel PNG of the float bytes
        "u16": f.Image(shape=(4, 4, 3), dtype=np.uint16, encoding_format="png"),
        "gray": f.Image(shape=(4, 4, 1)),
        "tb": f.Tensor(shape=(2, 3), dtype=np.float64, encoding="bytes"),  # the raw array as one bytes value
        "sc": f.Tensor(shape=(), dtype=np.int16, encoding="bytes"),
        "bo": f.Tensor(shape=(2,), dtype=np.bool_, encoding="bytes"),
        "u64": f.Tensor(shape=(2,), dtype=np.uint64, encoding="bytes"),
    }


def _typed_example(i: int) -> dict[str, Any]:
    rng = np.random.default_rng(i)
    return {
        "fimg": rng.standard_normal((4, 4, 1)).astype(np.float32),
        "u16": rng.integers(0, 1 << 16, (4, 4, 3), dtype=np.uint16),
        "gray": rng.integers(0, 256, (4, 4, 1), dtype=np.uint8),
        "tb": rng.standard_normal((2, 3)),
        "sc": np.int16(-i),
        "bo": np.array([True, i % 2 == 0]),
        "u64": np.array([2**64 - 1 - i, i], np.uint64),
    }


def _optional_features(tfds: Any) -> dict[str, Any]:
    return {"opt": tfds.features.Tensor(shape=(2,), dtype=np.int32, encoding="bytes", optional=True)}


def _optional_example(i: int) -> dict[str, Any]:
    return {"opt": None if i % 2 else np.array([i, -i], np.int32)}


@pytest.fixture(scope="module")
def typed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tfds_features(
        tmp_path_factory.mktemp("typed"), "typed", _typed_features, [_typed_example(i) for i in range(4)]
    )


@pytest.fixture
def typed_dir(typed: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(typed, tmp_path / "typed"))


def test_images_of_every_tfds_dtype_and_raw_tensors_read_back_as_tfds_reads_them(tmp_path: Path, typed: Path) -> None:
    import tensorflow as tf

    cat = Catalog.init(tmp_path / "cat")
    cat.adopt("d", [typed])
    ds = cat.dataset("d")
    features = ds.schema.to_json()["features"]
    assert features["fimg"]["shape"] == [4, 4, 4] and features["fimg"]["format"] == "png"  # 4 uint8 channels
    assert "float32" in features["fimg"]["description"]
    assert features["u16"] == {"dtype": "bytes", "encoding": "image", "format": "png", "shape": [4, 4, 3]}
    assert features["gray"] == {"dtype": "bytes", "encoding": "image", "shape": [4, 4, 1]}
    assert features["tb"] == {"dtype": "float64", "shape": [2, 3], "encoding": "tensor"}
    assert features["sc"] == {"dtype": "int16", "encoding": "tensor"}
    assert features["u64"] == {"dtype": "uint64", "shape": [2], "encoding": "tensor"}
    theirs = tfds_read_back(typed)["train"]
    mine = list(ds.read())
    assert len(mine) == len(theirs) == 4
    for a, b in zip(mine, theirs, strict=True):
        fimg = np.asarray(Image.open(io.BytesIO(a["fimg"])))  # [4, 4, 4] uint8: each pixel's float32 bytes
        np.testing.assert_array_equal(fimg.view(np.float32), b["fimg"])
        np.testing.assert_array_equal(tf.io.decode_png(a["u16"], dtype=tf.uint16).numpy(), b["u16"])
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(a["gray"])))[..., None], b["gray"])
        for key in ("tb", "sc", "bo", "u64"):
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
            assert np.asarray(a[key]).dtype.newbyteorder("=") == np.asarray(b[key]).dtype, key
    batch = next(iter(ds.tf_dataset(4, columns=["tb", "u64"])))
    np.testing.assert_array_equal(batch["tb"].numpy(), np.stack([b["tb"] for b in theirs]))
    np.testing.assert_array_equal(batch["u64"].numpy(), np.stack([b["u64"] for b in theirs]))


def test_an_optional_raw_tensor_reads_back_as_tfds_wrote_it(tmp_path: Path) -> None:
    """TFDS 4.9 cannot read an optional ``encoding="bytes"`` tensor back itself (``as_dataset``'s
    parse default is an int for a bytes feature; its numpy decoding refuses the None), so the
    records are checked against what its generator gave: None where the value was left out."""
    examples = [_optional_example(i) for i in range(4)]
    folder = build_tfds_features(tmp_path / "tfds", "optional", _optional_features, examples)
    cat = Catalog.init(tmp_path / "cat")
    cat.adopt("d", [folder])
    ds = cat.dataset("d")
    assert ds.schema.to_json()["features"]["opt"] == {
        "dtype": "int32",
        "shape": [2],
        "encoding": "tensor",
        "optional": True,
    }
    mine = list(ds.read())
    assert [r["opt"] is None for r in mine] == [e["opt"] is None for e in examples] == [False, True, False, True]
    for a, want in zip(mine, examples, strict=True):
        if want["opt"] is not None:
            np.testing.assert_array_equal(a["opt"], want["opt"])
            assert a["opt"].dtype.newbyteorder("=") == np.int32


@pytest.mark.parametrize(
    ("feature", "change", "message"),
    [
        ("tb", {"shape": {"dimensions": ["-1", "3"]}},
         "feature 'tb': TFDS tensors encoded as 'bytes' of unknown dimensions (shape [None, 3]) are not supported"),
        ("tb", {"encoding": "zlib"}, "feature 'tb': TFDS tensors encoded as 'zlib' are not supported"),
        ("tb", {"dtype": "string"}, "feature 'tb': TFDS dtype 'string' has no raw tensor encoding"),
        ("gray", {"dtype": "int8"}, "feature 'gray': TFDS images of dtype 'int8' are not supported"),
        ("fimg", {"shape": {"dimensions": ["4", "4", "3"]}},
         "feature 'fimg': a TFDS float32 image has one channel, not 3"),
    ],
)  # fmt: skip
def test_tfds_features_the_catalog_cannot_read_as_tfds_does_are_refused(
    tmp_path: Path, typed_dir: Path, feature: str, change: dict[str, Any], message: str
) -> None:
    doc = json.loads((typed_dir / "features.json").read_text())
    spec = doc["featuresDict"]["features"][feature]
    spec["tensor" if "tensor" in spec else "image"].update(change)
    (typed_dir / "features.json").write_text(json.dumps(doc))
    cat = Catalog.init(tmp_path / "cat")
    result = run("-C", cat.root, "adopt", "d", typed_dir)
    assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr


def test_raw_tensors_in_a_sequence_are_refused(tmp_path: Path, typed_dir: Path) -> None:
    original = json.loads((typed_dir / "features.json").read_text())
    for name, nested in (("tb", False), ("sc", True)):
        doc = json.loads(json.dumps(original))
        features = doc["featuresDict"]["features"]
        inner = {"sequence": {"feature": features[name]}} if nested else features[name]
        features[name] = {"sequence": {"feature": inner, "length": "-1"}}
        (typed_dir / "features.json").write_text(json.dumps(doc))
        cat = Catalog.init(tmp_path / name)
        result = run("-C", cat.root, "adopt", "d", typed_dir)
        assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.stderr
        assert f"feature '{name}': TFDS tensors encoded as 'bytes' in a Sequence are not supported" in result.stderr


def test_a_sequence_nested_three_deep_keeps_every_level_of_row_lengths(tmp_path: Path) -> None:
    """TFDS stores a Sequence of rank k as ragged_flat_values and ragged_row_lengths_0 .. k-2;
    only _0 was mapped, so a third level's lengths were not in the schema."""

    def features(tfds: Any) -> dict[str, Any]:
        seq = tfds.features.Sequence
        return {"deep": seq(seq(seq(np.int64))), "objects": seq({"ragged": seq(seq(np.int64))})}

    examples = [
        {"deep": [[[i], []], [[1, 2, 3]]][: i % 3], "objects": {"ragged": [[[i, i], [0]], []][: i % 3]}}
        for i in range(5)
    ]
    folder = build_tfds_features(tmp_path / "tfds", "deep", features, examples)
    cat = Catalog.init(tmp_path / "cat")
    cat.adopt("d", [folder])
    ds = cat.dataset("d")
    names = set(ds.schema.to_json()["features"])
    for key in ("deep", "objects/ragged"):
        assert {f"{key}/ragged_flat_values", f"{key}/ragged_row_lengths_0", f"{key}/ragged_row_lengths_1"} <= names
    theirs = tfds_read_back(folder)["train"]
    for mine, row in zip(ds.read(), theirs, strict=True):
        for key, value in (("deep", row["deep"]), ("objects/ragged", row["objects"]["ragged"])):
            np.testing.assert_array_equal(mine[f"{key}/ragged_flat_values"], value.flat_values.numpy())
            assert len(value.nested_row_lengths()) == 2, key
            for level, lengths in enumerate(value.nested_row_lengths()):
                np.testing.assert_array_equal(mine[f"{key}/ragged_row_lengths_{level}"], lengths.numpy(), err_msg=key)
