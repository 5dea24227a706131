"""``Dataset.tf_dataset``: a tf.data pipeline over pinned shards that Keras trains on as it is,
whose batches are the catalog's own columnar decoding value for value.

Every test takes the session ``tf`` fixture (conftest.py): skipped, with the reason, where
TensorFlow is not installed (a failure under CI=true); TensorFlow is never imported at module level.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from catalog import Catalog, Dataset
from catalog.commit.changes import APPEND, Change, NewShard, adding
from catalog.commit.intents import Intent
from catalog.commit.plans import plan
from catalog.commit.protocol import commit
from catalog.errors import CatalogError, CorruptShardError, VersionNotFoundError
from catalog.storage import ShardFile, shard_batches, shard_name
from catalog.storage.index import scan_offsets
from catalog.tfrecord import RecordWriter, decode_example, encode_example

REPO = Path(__file__).resolve().parents[2]

RICH = {
    "features": {
        "id": {"dtype": "int64"},
        "name": {"dtype": "string"},
        "vec": {"dtype": "float32", "shape": [4]},
        "image": {"dtype": "uint8", "shape": [32, 32, 3], "encoding": "tensor"},
        "points": {"dtype": "float32", "shape": [None, 2], "encoding": "tensor"},  # stores "points/shape"
        "tags": {"dtype": "int64", "shape": [None]},
        "label": {"dtype": "int64"},
    }
}
RICH_ROWS = 120  # in 4 shards of 30


def rich_row(i: int) -> dict[str, Any]:
    rng = np.random.default_rng(i)
    return {
        "id": i,
        "name": f"row {i}",
        "vec": rng.standard_normal(4).astype(np.float32),
        "image": rng.integers(0, 256, (32, 32, 3), dtype=np.uint8),
        "points": rng.standard_normal((i % 5, 2)).astype(np.float32),
        "tags": list(range(i % 4)),
        "label": i % 3,
    }


@pytest.fixture(scope="module")
def cat(tmp_path_factory: pytest.TempPathFactory) -> Iterable[Catalog]:
    c = Catalog.init(tmp_path_factory.mktemp("tfdata") / "cat")
    yield c
    c.close()


@pytest.fixture(scope="module")
def rich(cat: Catalog) -> Dataset:
    ds = cat.register("rich", RICH)
    ds.append_rows((rich_row(i) for i in range(RICH_ROWS)), shard_records=30)
    return cat.dataset("rich")


# --------------------------------------------------------------------------- helpers


def register_shard(ds: Dataset, records: list[bytes], split: str = "train", compression: str = "none") -> None:
    """One shard written by hand and registered through the commit protocol: the way to a
    gzip/zlib shard or another split while appends cannot make one."""
    with Intent.of(ds) as intent:
        rel = f"{ds.name}/{shard_name(intent.id, 0)}"
        with RecordWriter(ds.catalog.store.url(rel), None if compression == "none" else compression) as w:
            w.write_many(records)
        size, checksum = ds.catalog.store.checksum(rel)
        now = ds.catalog.dataset(ds.name)
        shard = NewShard(ShardFile(rel, len(records), size, checksum, compression), split=split)
        commit(now, Change(APPEND, now.version, now.schema_version, "by hand", "test", intent.id, (adding([shard]),)))


def as_lists(tf: Any, value: Any) -> list[Any]:
    """A batch's feature (Tensor or RaggedTensor) as nested Python lists."""
    return value.to_list() if isinstance(value, tf.RaggedTensor) else value.numpy().tolist()


def column_lists(column: np.ndarray, optional: bool = False) -> list[Any]:
    """A decode_batch column as nested Python lists, text as UTF-8 bytes (as tf.string gives it);
    ``optional``: each value in a list of 0 or 1 (None: empty), as tf_dataset gives such a feature."""
    out = []
    for v in column:
        if isinstance(v, np.ndarray):
            v = v.tolist()
        elif isinstance(v, np.generic):
            v = v.item()
        v = v.encode() if isinstance(v, str) else v
        out.append(([] if v is None else [v]) if optional else v)
    return out


def ids_of(tf: Any, dataset: Any, key: str = "id") -> list[int]:
    out: list[int] = []
    for batch in dataset:
        features = batch[0] if isinstance(batch, tuple) else batch
        out.extend(features[key].numpy().tolist())
    return out


def plan_columns(ds: Dataset, version: int | None = None, split: str | None = None) -> dict[str, np.ndarray]:
    """The catalog's own decoding of exactly the records of a read plan, in its order."""
    rp = plan(ds, version, split)
    records: list[bytes] = []
    for s in rp.shards:
        shard = [r for batch in shard_batches(s.path, s.bytes) for r in batch]
        records.extend(shard[s.start : s.stop])
    return rp.schema().decode_batch(records)


# --------------------------------------------------------------------------- Keras


def test_keras_model_trains_for_an_epoch_with_no_other_code(tf: Any, cat: Catalog) -> None:
    ds = cat.register("keras", {"features": {"x": {"dtype": "float32", "shape": [8]}, "label": {"dtype": "int64"}}})
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((256, 8)).astype(np.float32)
    ds.append_rows({"x": x, "label": int(x.sum() > 0)} for x in xs)
    keras = tf.keras
    inputs = keras.Input(shape=(8,), name="x")
    model = keras.Model({"x": inputs}, keras.layers.Dense(1, activation="sigmoid")(inputs))
    model.compile(optimizer="sgd", loss="binary_crossentropy")
    history = model.fit(cat.dataset("keras").tf_dataset(64, label_key="label"), epochs=2, verbose=0)
    losses = history.history["loss"]
    assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
    assert losses[1] < losses[0]  # it learnt something from the labels it was given


# --------------------------------------------------------------------------- values


def test_batches_equal_the_catalogs_own_decoding(tf: Any, rich: Dataset) -> None:
    pipeline = rich.tf_dataset(64, label_key="label")
    ours = list(rich.batches(64))
    theirs = list(pipeline)
    assert len(theirs) == len(ours) == math.ceil(RICH_ROWS / 64) == int(pipeline.cardinality())
    for (features, label), columns in zip(theirs, ours, strict=True):
        assert set(features) == set(columns) - {"label"}
        assert as_lists(tf, label) == column_lists(columns["label"])
        for name, value in features.items():
            assert as_lists(tf, value) == column_lists(columns[name]), name
    features, _ = theirs[0]
    assert features["image"].dtype == tf.uint8 and features["image"].shape[1:] == (32, 32, 3)
    assert isinstance(features["points"], tf.RaggedTensor) and features["points"].shape[2] == 2
    assert isinstance(features["tags"], tf.RaggedTensor) and features["tags"].dtype == tf.int64
    assert features["name"].dtype == tf.string and features["vec"].shape[1:] == (4,)


EDGES = {
    "features": {
        "id": {"dtype": "int64"},
        "grid": {"dtype": "float32", "shape": [None, 3, None], "encoding": "tensor"},
        "wide": {"dtype": "uint32", "shape": [2], "encoding": "tensor"},
        "maybe": {"dtype": "float32", "optional": True},
        "maybe_vec": {"dtype": "int64", "shape": [3], "optional": True},
        "maybe_image": {"dtype": "int16", "shape": [2, 2], "encoding": "tensor", "optional": True},
        "maybe_blob": {"dtype": "uint8", "shape": [None], "encoding": "tensor", "optional": True},
        "filled": {"dtype": "uint8", "shape": [2], "encoding": "tensor", "default": [7, 9]},
        "nothing": {"dtype": "float64", "shape": [0, 3], "encoding": "tensor"},
    }
}


def edge_row(i: int) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": i,
        "grid": np.arange((i % 3) * 3 * (i % 2 + 1), dtype=np.float32).reshape(i % 3, 3, i % 2 + 1),
        "wide": np.array([i, 2**32 - 1 - i], dtype=np.uint32),
        "filled": np.array([i, 1], dtype=np.uint8),
        "nothing": np.zeros((0, 3)),
    }
    if i % 2:
        row["maybe"] = i / 2
    if i % 3:
        row["maybe_vec"] = [i, -i, 2 * i]
    if i % 4:
        row["maybe_image"] = np.full((2, 2), -i, dtype=np.int16)
    if i % 5:
        row["maybe_blob"] = np.arange(i % 7, dtype=np.uint8)
    return row


def test_optional_features_and_unusual_tensors_equal_the_catalogs_decoding(tf: Any, cat: Catalog) -> None:
    ds = cat.register("edges", EDGES)
    ds.append_rows(edge_row(i) for i in range(40))
    # a record without the tensor that has a default (written elsewhere): both sides fill the default
    lacking = {k: v for k, v in edge_row(40).items() if k != "filled"}
    register_shard(ds, [_without(ds, lacking, "filled")])
    ds = cat.dataset("edges")
    columns = plan_columns(ds)
    assert columns["filled"][40].tolist() == [7, 9]
    batch = next(iter(ds.tf_dataset(100)))
    for name, value in batch.items():
        assert as_lists(tf, value) == column_lists(columns[name], name.startswith("maybe")), name
    # optional features: [batch, (0 or 1), *shape]
    assert batch["maybe_image"].to_list()[1] == [[[-1, -1], [-1, -1]]] and batch["maybe_image"].to_list()[0] == []
    assert batch["wide"].dtype == tf.uint32


ZERO_SIZED = {
    "features": {
        "id": {"dtype": "int64"},
        "t": {"dtype": "float32", "shape": [2, 0], "encoding": "tensor", "optional": True},
        "u": {"dtype": "int16", "shape": [None, 0], "encoding": "tensor", "optional": True},
        "v": {"dtype": "int16", "shape": [None, 0], "encoding": "tensor"},
        "l": {"dtype": "int64", "shape": [2, 0], "optional": True},
    }
}


def test_an_empty_list_sometimes_absent_reads_as_tensorflow_parses_it(tf: Any, tmp_path: Path) -> None:
    """Inference's ``float32[0] optional`` (an empty float_list in some records, absent in the
    others) once failed a RaggedTensor assertion: a reshape to [-1, 0] took one row of nothing."""
    path = tmp_path / "empty.tfrecord"
    records = [encode_example({"e": np.zeros(0, np.float32), "id": i} if i % 2 == 0 else {"id": i}) for i in range(5)]
    with RecordWriter(path) as w:
        for r in records:
            w.write(r)
    cat = Catalog.init(tmp_path / "cat")
    cat.adopt("d", [path])
    ds = cat.dataset("d")
    assert ds.schema.to_json()["features"]["e"] == {"dtype": "float32", "shape": [0], "optional": True}
    batch = next(iter(ds.tf_dataset(5)))
    parsed = tf.io.parse_example(tf.constant(records), {"e": tf.io.VarLenFeature(tf.float32)})["e"]
    # present and absent parse alike (no values): each record reads as absent, as TF's parse gives
    assert batch["e"].to_list() == tf.RaggedTensor.from_sparse(parsed).to_list() == [[]] * 5
    assert batch["e"].shape.as_list() == [5, None, 0]


def test_tensors_and_lists_of_zero_sized_shapes_equal_the_catalogs_decoding(tf: Any, cat: Catalog) -> None:
    ds = cat.register("zeros", ZERO_SIZED)
    ds.append_rows(
        {"id": i, "v": np.zeros((i, 0), np.int16)}
        | ({"t": np.zeros((2, 0), np.float32), "u": np.zeros((i, 0), np.int16), "l": np.zeros((2, 0), np.int64)}
           if i % 2 else {})
        for i in range(6)
    )  # fmt: skip
    batch = next(iter(cat.dataset("zeros").tf_dataset(6)))
    columns = plan_columns(cat.dataset("zeros"))
    for name in ("id", "t", "u", "v"):  # a tensor's one bytes value tells a present record from an absent one
        assert as_lists(tf, batch[name]) == column_lists(columns[name], name in ("t", "u")), name
    assert batch["u"].to_list()[3] == [[[], [], []]] and batch["u"].shape.as_list() == [6, None, None, 0]
    assert batch["l"].to_list() == [[]] * 6  # a list of no values: present or not, TF's parse sees nothing


def _without(ds: Dataset, row: dict[str, Any], name: str) -> bytes:
    """``row`` encoded, then the Example's entry ``name`` removed (what another writer might send)."""
    full = decode_example(ds.schema.encode({**row, name: np.zeros(2, np.uint8)}))
    del full[name]
    return encode_example(full)


def test_columns_restrict_what_is_parsed(tf: Any, rich: Dataset) -> None:
    features, label = next(iter(rich.tf_dataset(10, label_key="label", columns=["points", "id"])))
    assert set(features) == {"id", "points"}
    assert label.numpy().tolist() == [i % 3 for i in range(10)]
    only = next(iter(rich.tf_dataset(10, columns=["image"])))
    assert set(only) == {"image"}
    with pytest.raises(CatalogError, match=r"no feature 'nope'.*features: id, name, vec, image"):
        rich.tf_dataset(10, columns=["nope"])
    with pytest.raises(CatalogError, match="no feature 'lbl'"):
        rich.tf_dataset(10, label_key="lbl")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"batch_size": 0}, "batch_size must be a positive integer"),
    ({"batch_size": 8, "num_epochs": 0}, "num_epochs must be a positive integer or None"),
    ({"batch_size": 8, "split": "train[:200%]"}, "200%"),
    ({"batch_size": 8, "split": "validation"}, "no split .validation.*splits: train"),
    ({"batch_size": 8, "version": 99}, "no version 99"),
])  # fmt: skip
def test_bad_arguments_are_one_line(tf: Any, rich: Dataset, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(CatalogError, match=message) as e:
        rich.tf_dataset(**kwargs)
    assert "\n" not in str(e.value)


# --------------------------------------------------------------------------- splits, versions, compression


@pytest.fixture(scope="module")
def splits(cat: Catalog) -> Dataset:
    ds = cat.register("splits", {"features": {"id": {"dtype": "int64"}, "label": {"dtype": "int64"}}})
    ds.append_rows(({"id": i, "label": i % 2} for i in range(100)), shard_records=30)  # train: 30+30+30+10
    test = [ds.schema.encode({"id": 1000 + i, "label": 0}) for i in range(20)]
    register_shard(cat.dataset("splits"), test, split="test")
    return cat.dataset("splits")


@pytest.mark.parametrize(("spec", "expected"), [
    ("train", list(range(100))),
    ("train[:50%]", list(range(50))),
    ("train[25%:75%]", list(range(25, 75))),
    ("train[10:37]", list(range(10, 37))),  # across a shard boundary
    ("train[-15:]", list(range(85, 100))),
    ("test[50%:]", list(range(1010, 1020))),
    ("train[:10%]+test[:3]", [*range(10), 1000, 1001, 1002]),
])  # fmt: skip
def test_split_slices_are_exact(tf: Any, splits: Dataset, spec: str, expected: list[int]) -> None:
    pipeline = splits.tf_dataset(7, split=spec, label_key="label")
    assert ids_of(tf, pipeline) == expected
    assert int(pipeline.cardinality()) == math.ceil(len(expected) / 7)
    labels = [x for _f, label in pipeline for x in label.numpy().tolist()]
    assert labels == column_lists(plan_columns(splits, split=spec)["label"])


def test_no_split_reads_every_split_and_a_version_stays_pinned(tf: Any, splits: Dataset, cat: Catalog) -> None:
    assert ids_of(tf, splits.tf_dataset(64)) == [*range(100), *range(1000, 1020)]
    ds = cat.register("pinned", {"features": {"id": {"dtype": "int64"}}})
    ds.append_rows({"id": i} for i in range(5))
    cat.dataset("pinned").append_rows({"id": i} for i in range(5, 9))
    assert ids_of(tf, cat.dataset("pinned").tf_dataset(4, version=2)) == list(range(5))
    assert ids_of(tf, cat.dataset("pinned").tf_dataset(4)) == list(range(9))


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_compressed_shards_are_read_with_their_compression(tf: Any, cat: Catalog, compression: str) -> None:
    ds = cat.register(f"packed_{compression}", RICH)
    ds.append_rows(rich_row(i) for i in range(10))
    register_shard(
        cat.dataset(ds.name), [ds.schema.encode(rich_row(i)) for i in range(10, 30)], compression=compression
    )
    ds.append_rows(rich_row(i) for i in range(30, 35))
    ds = cat.dataset(ds.name)
    assert [s.compression for s in ds.shards()] == ["none", compression, "none"]
    columns = plan_columns(ds)
    batch = next(iter(ds.tf_dataset(64)))
    for name, value in batch.items():
        assert as_lists(tf, value) == column_lists(columns[name]), name
    assert ids_of(tf, ds.tf_dataset(4, split="train[5:27]")) == list(range(5, 27))  # cut inside the gzip shard
    assert sorted(ids_of(tf, ds.tf_dataset(4, shuffle=True, seed=1))) == list(range(35))


# --------------------------------------------------------------------------- order, epochs, batches


def test_shuffle_with_a_seed_is_deterministic(tf: Any, splits: Dataset) -> None:
    pipeline = splits.tf_dataset(16, shuffle=True, seed=42)
    assert int(pipeline.cardinality()) == math.ceil(120 / 16)  # Keras knows the epoch's length
    first = ids_of(tf, pipeline)
    assert ids_of(tf, splits.tf_dataset(16, shuffle=True, seed=42)) == first
    assert sorted(first) == [*range(100), *range(1000, 1020)] and first != sorted(first)
    assert ids_of(tf, splits.tf_dataset(16, shuffle=True, seed=43)) != first
    two = ids_of(tf, splits.tf_dataset(16, shuffle=True, seed=42, num_epochs=2))
    assert two == ids_of(tf, splits.tf_dataset(16, shuffle=True, seed=42, num_epochs=2))
    assert Counter(two) == Counter(first + first) and two[:120] != two[120:]  # each epoch its own order
    assert ids_of(tf, splits.tf_dataset(16, shuffle=False, seed=42)) == sorted(first)


def test_num_epochs_and_drop_remainder(tf: Any, splits: Dataset) -> None:
    spec = "train"
    three = splits.tf_dataset(30, split=spec, num_epochs=3)
    ids = ids_of(tf, three)
    assert ids == list(range(100)) * 3 and int(three.cardinality()) == 10  # batches run across epochs
    sizes = [len(b["id"]) for b in splits.tf_dataset(30, split=spec)]
    assert sizes == [30, 30, 30, 10]
    dropped = splits.tf_dataset(30, split=spec, drop_remainder=True)
    assert [len(b["id"]) for b in dropped] == [30, 30, 30] and int(dropped.cardinality()) == 3
    assert dropped.element_spec["id"].shape == (30,)
    forever = splits.tf_dataset(30, split=spec, num_epochs=None)
    assert int(forever.cardinality()) == int(tf.data.INFINITE_CARDINALITY)
    assert ids_of(tf, forever.take(12)) == (list(range(100)) * 4)[:360]


# --------------------------------------------------------------------------- distribution


@pytest.mark.parametrize("pipelines", [2, 3, 8])
@pytest.mark.parametrize("shuffle", [False, True])
def test_input_pipelines_share_the_records_exactly_once(
    tf: Any, splits: Dataset, pipelines: int, shuffle: bool
) -> None:
    """Five shard ranges: by whole ranges for 2 or 3 pipelines, by record for 8."""
    seen: list[list[int]] = []
    for i in range(pipelines):
        context = tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=i)
        pipeline = splits.tf_dataset(8, shuffle=shuffle, seed=3, input_context=context)
        ids = ids_of(tf, pipeline)
        assert int(pipeline.cardinality()) == math.ceil(len(ids) / 8)
        seen.append(ids)
    assert sorted(x for ids in seen for x in ids) == [*range(100), *range(1000, 1020)]
    everything = [*range(100), *range(1000, 1020)]
    if pipelines == 8:  # record by record: every 8th record of the one order
        assert [sorted(ids) for ids in seen] == [sorted(everything[i::8]) for i in range(8)]
    elif pipelines == 2 and not shuffle:  # whole ranges, every other one
        assert seen[0] == [*range(30), *range(60, 90), *range(1000, 1020)]


def test_distribute_datasets_from_function(tf: Any, splits: Dataset) -> None:
    strategy = tf.distribute.get_strategy()  # the default strategy: one replica, one pipeline
    dist = strategy.distribute_datasets_from_function(
        lambda context: splits.tf_dataset(16, split="train", input_context=context)
    )
    assert sorted(x for batch in dist for x in batch["id"].numpy().tolist()) == list(range(100))


# --------------------------------------------------------------------------- shards changed behind the catalog


def _copy(tmp_path: Path, cat: Catalog, name: str) -> Dataset:
    """A dataset of its own, its shards ours to damage."""
    ds = cat.register(name, {"features": {"id": {"dtype": "int64"}}})
    ds.append_rows(({"id": i} for i in range(60)), shard_records=20)
    return cat.dataset(name)


@pytest.mark.parametrize("change", ["cut", "grown", "missing"])
def test_a_shard_changed_after_registration_is_a_corrupt_shard_error(
    tf: Any, cat: Catalog, tmp_path: Path, change: str
) -> None:
    ds = _copy(tmp_path, cat, f"damaged_{change}")
    shard = ds.shards()[1]
    path = Path(shard.path)
    if change == "cut":
        offsets = scan_offsets(shard.path, shard.bytes)
        os.truncate(path, int(offsets[-3]))  # three whole records fewer: framing alone cannot tell
    elif change == "grown":
        with path.open("ab") as f:
            f.write(path.read_bytes()[: int(scan_offsets(shard.path, shard.bytes)[1])])  # one more valid record
    else:
        path.unlink()
    error = VersionNotFoundError if change == "missing" else CorruptShardError
    with pytest.raises(error, match=str(path)) as e:
        ds.tf_dataset(8)
    if change != "missing":
        assert e.value.what == "size" and str(shard.bytes) in str(e.value)


@pytest.mark.parametrize("change", ["cut", "grown"])
def test_a_shard_changed_while_reading_fails_the_iteration(tf: Any, cat: Catalog, tmp_path: Path, change: str) -> None:
    """After the size check, the records are still counted: a shard cut at a record boundary or
    grown by a whole record (CRCs all fine) is an error, not a short or long epoch."""
    ds = _copy(tmp_path, cat, f"{change}_later")
    shard = ds.shards()[1]
    offsets = scan_offsets(shard.path, shard.bytes)
    splits = [None] if change == "grown" else [None, "train[25:35]", "train[:60%]"]  # cut: within these ranges
    pipelines = [
        ds.tf_dataset(8, shuffle=shuffle, seed=1, split=split, num_epochs=epochs, drop_remainder=drop)
        for shuffle in (False, True)
        for split in splits
        for epochs, drop in ((1, False), (2, False), (1, True))  # counted on the batches, or per record
    ]
    if change == "cut":
        os.truncate(shard.path, int(offsets[10]))  # records 20..29 left of 20..39
    else:
        data = Path(shard.path).read_bytes()
        Path(shard.path).write_bytes(data + data[: int(offsets[1])])  # one more valid record
    for pipeline in pipelines:
        with pytest.raises(tf.errors.OpError, match=r"other record counts than the manifest|expected to contain"):
            ids_of(tf, pipeline)


def test_tensorflow_is_imported_only_when_a_pipeline_is_built() -> None:
    code = "import sys, catalog, catalog.api; sys.exit('tensorflow' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    assert subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, check=False).returncode == 0


def test_shard_sizes_on_an_object_store_are_checked_before_building(tf: Any, s3_url: str, tmp_path: Path) -> None:
    """One HEAD per shard (TensorFlow itself reads s3:// only with tensorflow-io's file systems)."""
    fsspec = pytest.importorskip("fsspec", reason="fsspec is not installed (pip install '.[test]')")
    with Catalog.init(tmp_path / "c", storage=s3_url) as cat:
        ds = cat.register("remote", {"features": {"id": {"dtype": "int64"}}})
        ds.append_rows(({"id": i} for i in range(30)), shard_records=10)
        ds = cat.dataset("remote")
        ds.tf_dataset(8)  # sizes as registered
        fs = fsspec.filesystem("s3")
        cut, gone = ds.files()[1], ds.files()[2]
        whole = fs.cat(cut)
        fs.pipe(cut, whole[:-20])
        with pytest.raises(CorruptShardError, match=f"{cut}: size: registered {len(whole)} bytes"):
            ds.tf_dataset(8)
        fs.pipe(cut, whole)
        fs.rm(gone)
        with pytest.raises(VersionNotFoundError, match=f"{gone}: shard file is missing"):
            ds.tf_dataset(8)
