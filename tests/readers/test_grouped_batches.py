"""ds.batches reads and decodes several batches together, then cuts them (readers/batches.py,
issue 34): every batch must be what the generic decoder makes of that batch's records, on
records of every layout, and an error must come where a batch at a time raised it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from readers_data import add_gzip_shard, canon

from catalog import Catalog
from catalog.api import Dataset
from catalog.commit.plans import plan
from catalog.errors import ValidationError
from catalog.readers import batches as grouping
from catalog.storage import content
from catalog.tfrecord import RecordWriter, read_records
from catalog.tfrecord import example as wire
from catalog.tfrecord.framing import frame_header, masked_crc32c

SCHEMA: dict[str, Any] = {
    "features": {
        "id": {"dtype": "int64"},
        "score": {"dtype": "float32"},
        "opt": {"dtype": "int64", "optional": True},
        "dflt": {"dtype": "float32", "default": 1.5},
        "toks": {"dtype": "int64", "shape": [None]},
        "names": {"dtype": "string", "shape": [None]},
        "img": {"dtype": "uint8", "shape": [2, 3], "encoding": "tensor"},
        "blob": {"dtype": "bytes"},
    }
}


def row(i: int) -> dict[str, Any]:
    """Row i: optional and defaulted features missing in some rows, empty lists in others,
    ints of every varint length (negatives: ten bytes), values long enough for two-byte lengths."""
    out: dict[str, Any] = {
        "id": i,
        "score": float(np.float32(i / 7)),
        "toks": [(-1) ** k * (i << (7 * (k % 9))) for k in range(i % 5)],
        "names": [f"n{i}"] * (i % 3),
        "img": np.full((2, 3), i % 256, dtype=np.uint8),
        "blob": bytes([i % 256]) * (i % 7 * 40),
    }
    if i % 4:
        out["opt"] = -i if i % 2 else i << 40
    if i % 3 == 0:
        out["dflt"] = float(np.float32(i / 3))
    return out


def entries(i: int) -> dict[str, Any]:
    """Row i as the wire's values (the tensor as its bytes), its features in reverse order."""
    values = {**row(i), "img": row(i)["img"].tobytes()}
    return dict(reversed(list(values.items())))


def tf_record(tf: Any, i: int) -> bytes:
    """Row i as TensorFlow's own Example serializer writes it."""
    feature = tf.train.Feature
    r = row(i)
    features = {
        "id": feature(int64_list=tf.train.Int64List(value=[r["id"]])),
        "score": feature(float_list=tf.train.FloatList(value=[r["score"]])),
        "toks": feature(int64_list=tf.train.Int64List(value=r["toks"])),
        "names": feature(bytes_list=tf.train.BytesList(value=[n.encode() for n in r["names"]])),
        "img": feature(bytes_list=tf.train.BytesList(value=[r["img"].tobytes()])),
        "blob": feature(bytes_list=tf.train.BytesList(value=[r["blob"]])),
    }
    if "opt" in r:
        features["opt"] = feature(int64_list=tf.train.Int64List(value=[r["opt"]]))
    if "dflt" in r:
        features["dflt"] = feature(float_list=tf.train.FloatList(value=[r["dflt"]]))
    return bytes(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    """A dataset of three layouts: the catalog's writer (ids 0-299), features in reverse order
    (300-399), and TensorFlow's serializer in a foreign file, adopted (400-499)."""
    tf = pytest.importorskip("tensorflow")
    root = tmp_path_factory.mktemp("grouped")
    ds = Catalog.init(root / "cat").register("d", SCHEMA)
    ds.append_rows([row(i) for i in range(300)], shard_records=120)
    reordered, foreign = root / "reordered.tfrecord", root / "foreign.tfrecord"
    with RecordWriter(reordered) as w:
        for i in range(300, 400):
            w.write(wire.encode_example(entries(i)))
    with tf.io.TFRecordWriter(str(foreign)) as tw:
        for i in range(400, 500):
            tw.write(tf_record(tf, i))
    ds.append_files([reordered])
    ds.adopt([foreign])
    return ds


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("size", [1, 3, 64, 500])
def test_each_batch_is_the_generic_decode_of_its_records(mixed: Dataset, size: int, shuffle: bool) -> None:
    by_id = {wire.decode_example(r)["id"][0]: r for r in mixed.records()}
    assert sorted(by_id) == list(range(500))
    codec = mixed.schema._codec
    got = list(mixed.batches(size, shuffle=shuffle, seed=5))
    assert [len(b["id"]) for b in got] == [min(size, 500 - at) for at in range(0, 500, size)]
    for batch in got:
        want = codec.decode_batch_generic([by_id[i] for i in batch["id"].tolist()])
        assert canon(batch) == canon(want)
    assert sorted(np.concatenate([b["id"] for b in got]).tolist()) == list(range(500))


def test_groups_hold_several_batches_and_at_most_about_group_bytes(mixed: Dataset) -> None:
    pinned = plan(mixed)
    assert grouping.group_batches(pinned, 3) == grouping.GROUP_BATCHES
    average = sum(s.bytes for s in pinned.shards) / pinned.records
    assert grouping.group_batches(pinned, int(grouping.GROUP_BYTES / average / 2)) == 2
    assert grouping.group_batches(pinned, 10**9) == 1


def test_an_in_order_read_goes_by_position_unless_a_shard_is_compressed(tmp_path: Path, mixed: Dataset) -> None:
    assert grouping.by_position(plan(mixed))
    ds = Catalog.init(tmp_path / "cat").register("d", SCHEMA)
    ds.append_rows([row(i) for i in range(10)])
    add_gzip_shard(ds, [row(i) for i in range(10, 20)])
    assert not grouping.by_position(plan(ds))
    assert np.concatenate([b["id"] for b in ds.batches(4)]).tolist() == list(range(20))


@pytest.mark.parametrize("shuffle", [False, True])
def test_a_bad_record_fails_its_own_batch_after_those_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shuffle: bool
) -> None:
    monkeypatch.setattr(content, "needs_check", lambda *a: False)  # the decoder's error, not the content check's
    ds = Catalog.init(tmp_path / "cat").register("d", SCHEMA)
    ds.append_rows([row(i) for i in range(40)])
    order = [b["id"].tolist() for b in ds.batches(4, shuffle=shuffle)]  # before the damage
    shard = Path(ds.files()[0])
    records = list(read_records(shard))
    target = 29
    bad = b"\xff" * len(records[target])  # framed with valid CRCs: not an Example
    with open(shard, "r+b") as f:
        f.seek(sum(len(r) + 16 for r in records[:target]))
        f.write(frame_header(len(bad)) + bad + masked_crc32c(bad).to_bytes(4, "little"))
    got: list[list[int]] = []
    with pytest.raises(ValidationError) as info:
        for batch in ds.batches(4, shuffle=shuffle):
            got.append(batch["id"].tolist())
    assert info.value.record == target and str(info.value).startswith(f"{shard}: record {target}: ")
    assert got == order[: next(k for k, ids in enumerate(order) if target in ids)]
    assert got  # the bad batch is not the first one
