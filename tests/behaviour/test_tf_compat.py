"""Compatibility with TensorFlow: files and Examples written by either side are read by the other.

Every test takes the session ``tf`` fixture (conftest.py), which skips when TensorFlow is
missing and fails under CI=true; TensorFlow is never imported at module level.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.tfrecord import (
    RecordWriter,
    decode_example,
    decode_sequence_example,
    encode_example,
    encode_sequence_example,
    read_record_batches,
    read_records,
)

# TF's spelling of the compression type -> ours
COMPRESSIONS = {"": None, "GZIP": "gzip", "ZLIB": "zlib"}

# Framed b"" and b"hello", computed by hand in test_framing.py (crc32c_bitwise).
GOLDEN = bytes.fromhex("000000000000000029039807d8ea82a20500000000000000eab2043e68656c6c6fbb1f1c19")


@pytest.fixture(scope="module")
def records() -> list[bytes]:
    rng = random.Random(2024)
    out = [rng.randbytes(rng.randrange(0, 2000)) for _ in range(200)]
    out.insert(0, b"")
    out.insert(100, rng.randbytes(1 << 10) * ((3 << 20) >> 10))  # 3 MiB, crosses the direct-read size
    out.append(b"\x00" * 7)
    return out


def _tf_write(tf: Any, path: Path, records: list[bytes], compression: str) -> None:
    options = tf.io.TFRecordOptions(compression_type=compression)
    with tf.io.TFRecordWriter(str(path), options=options) as w:
        for r in records:
            w.write(r)


def _tf_read(tf: Any, path: Path, compression: str) -> list[bytes]:
    return [t.numpy() for t in tf.data.TFRecordDataset(str(path), compression_type=compression)]


def test_tf_writes_the_golden_bytes(tf: Any, tmp_path: Path) -> None:
    path = tmp_path / "golden.tfrecord"
    _tf_write(tf, path, [b"", b"hello"], "")
    assert path.read_bytes() == GOLDEN


@pytest.mark.parametrize("compression", list(COMPRESSIONS))
def test_files_written_by_tf_are_read_here(tf: Any, tmp_path: Path, records: list[bytes], compression: str) -> None:
    path = tmp_path / "by_tf.tfrecord"
    _tf_write(tf, path, records, compression)
    assert list(read_records(path)) == records
    assert list(read_records(path, compression=COMPRESSIONS[compression])) == records
    assert list(read_records(path.read_bytes(), compression=compression or None)) == records
    assert [r for b in read_record_batches(path) for r in b] == records


@pytest.mark.parametrize("compression", list(COMPRESSIONS))
def test_files_written_here_are_read_by_tf(tf: Any, tmp_path: Path, records: list[bytes], compression: str) -> None:
    path = tmp_path / "by_us.tfrecord"
    with RecordWriter(path, COMPRESSIONS[compression]) as w:
        w.write_many(records)
    assert _tf_read(tf, path, compression) == records


@pytest.mark.parametrize("compression", ["GZIP", "ZLIB"])
def test_flushed_compressed_file_is_read_by_tf(tf: Any, tmp_path: Path, compression: str) -> None:
    path = tmp_path / "flushed.tfrecord"
    with RecordWriter(path, compression) as w:
        w.write(b"one")
        w.flush()
        w.write(b"two")
        w.flush()
        w.write(b"three")
    assert _tf_read(tf, path, compression) == [b"one", b"two", b"three"]


@pytest.mark.parametrize("compression", list(COMPRESSIONS))
def test_output_is_byte_identical_to_tf(tf: Any, tmp_path: Path, records: list[bytes], compression: str) -> None:
    theirs, ours = tmp_path / "tf.tfrecord", tmp_path / "ours.tfrecord"
    _tf_write(tf, theirs, records, compression)
    with RecordWriter(ours, COMPRESSIONS[compression]) as w:
        for r in records:
            w.write(r)
    tf_bytes = theirs.read_bytes()
    assert ours.read_bytes() == tf_bytes
    assert w.file_bytes == len(tf_bytes)


def test_empty_files_agree(tf: Any, tmp_path: Path) -> None:
    for compression, ours in COMPRESSIONS.items():
        theirs_path, ours_path = tmp_path / f"tf{compression}", tmp_path / f"ours{compression}"
        _tf_write(tf, theirs_path, [], compression)
        RecordWriter(ours_path, ours).close()
        assert ours_path.read_bytes() == theirs_path.read_bytes()
        assert list(read_records(theirs_path)) == []
        assert _tf_read(tf, ours_path, compression) == []


# --------------------------------------------------------------------------- Examples


def _tf_values(feature: Any) -> list[Any]:
    kind = feature.WhichOneof("kind")
    return [] if kind is None else list(getattr(feature, kind).value)


def _tf_example_dict(tf: Any, data: bytes) -> dict[str, list[Any]]:
    ex = tf.train.Example.FromString(data)
    return {name: _tf_values(f) for name, f in ex.features.feature.items()}


FEATURES: dict[str, Any] = {
    "id": 42,
    "neg": -(2**63),
    "label": "chat ☃",
    "raw": b"\x00\x01\xff",
    "score": 0.75,
    "flag": True,
    "vec": np.array([0.5, -1.25, 3.0], dtype=np.float32),
    "ids": np.array([1, 2, 3, 2**40], dtype=np.int64),
    "tags": [b"a", b"bb", b""],
    "empty": [],
}
EXPECTED: dict[str, list[Any]] = {
    "id": [42],
    "neg": [-(2**63)],
    "label": ["chat ☃".encode()],
    "raw": [b"\x00\x01\xff"],
    "score": [0.75],
    "flag": [1],
    "vec": [0.5, -1.25, 3.0],
    "ids": [1, 2, 3, 2**40],
    "tags": [b"a", b"bb", b""],
    "empty": [],
}


def test_encoded_example_parses_in_tf(tf: Any) -> None:
    data = encode_example(FEATURES)
    assert _tf_example_dict(tf, data) == EXPECTED
    ex = tf.train.Example.FromString(data)
    assert ex.features.feature["id"].WhichOneof("kind") == "int64_list"
    assert ex.features.feature["score"].WhichOneof("kind") == "float_list"
    assert ex.features.feature["label"].WhichOneof("kind") == "bytes_list"
    assert ex.features.feature["empty"].WhichOneof("kind") is None


def test_encoded_examples_through_tf_parse_example(tf: Any) -> None:
    rows = [
        {"id": i, "score": i / 4, "label": f"row {i}", "vec": np.full(3, i, dtype=np.float32), "var": list(range(i))}
        for i in range(5)
    ]
    spec = {
        "id": tf.io.FixedLenFeature([], tf.int64),
        "score": tf.io.FixedLenFeature([], tf.float32),
        "label": tf.io.FixedLenFeature([], tf.string),
        "vec": tf.io.FixedLenFeature([3], tf.float32),
        "var": tf.io.VarLenFeature(tf.int64),
    }
    parsed = tf.io.parse_example(tf.constant([encode_example(r) for r in rows]), spec)
    assert parsed["id"].numpy().tolist() == [0, 1, 2, 3, 4]
    assert parsed["score"].numpy().tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert parsed["label"].numpy().tolist() == [f"row {i}".encode() for i in range(5)]
    assert parsed["vec"].numpy().tolist() == [[float(i)] * 3 for i in range(5)]
    var = parsed["var"]
    assert var.values.numpy().tolist() == [v for i in range(5) for v in range(i)]
    assert var.indices.numpy()[:, 0].tolist() == [i for i in range(5) for _ in range(i)]


def test_tf_serialized_example_decodes_here(tf: Any) -> None:
    feature = tf.train.Feature
    ex = tf.train.Example(
        features=tf.train.Features(
            feature={
                "ints": feature(int64_list=tf.train.Int64List(value=[1, -2, 2**63 - 1])),
                "floats": feature(float_list=tf.train.FloatList(value=[0.1, 2.5])),
                "bytes": feature(bytes_list=tf.train.BytesList(value=[b"x", "ü".encode()])),
                "nothing": feature(),
                "empty_ints": feature(int64_list=tf.train.Int64List()),
            }
        )
    )
    decoded = decode_example(ex.SerializeToString())
    assert decoded == {
        "ints": [1, -2, 2**63 - 1],
        "floats": [float(np.float32(0.1)), 2.5],
        "bytes": [b"x", "ü".encode()],
        "nothing": [],
        "empty_ints": [],
    }
    # and back: what we decoded, re-encoded, holds the same values for TF
    assert _tf_example_dict(tf, encode_example(decoded)) == _tf_example_dict(tf, ex.SerializeToString())


_tf_values_strategy = st.one_of(
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5),
    st.lists(st.floats(width=32, allow_nan=False), max_size=5),
    st.lists(st.binary(max_size=10), max_size=5),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(features=st.dictionaries(st.text(max_size=8), _tf_values_strategy, max_size=5))
def test_random_examples_agree_with_tf(tf: Any, features: dict[str, list[Any]]) -> None:
    ours = encode_example(features)
    assert _tf_example_dict(tf, ours) == features
    # TF serializes the same message; we decode it to the same values
    ex = tf.train.Example()
    for name, values in features.items():
        f = ex.features.feature[name]
        if values and isinstance(values[0], bytes):
            f.bytes_list.value.extend(values)
        elif values and isinstance(values[0], float):
            f.float_list.value.extend(values)
        elif values:
            f.int64_list.value.extend(values)
    assert decode_example(ex.SerializeToString()) == features


# --------------------------------------------------------------------------- SequenceExample

CONTEXT = {"id": 7, "lang": "fr"}
LISTS = {"tokens": [[1, 2, 3], [4], []], "scores": [[0.5, 1.5], [2.5, 3.5], [4.5, 5.5]], "words": [[b"le"], [b"chat"]]}


def test_encoded_sequence_example_parses_in_tf(tf: Any) -> None:
    data = encode_sequence_example(CONTEXT, LISTS)
    seq = tf.train.SequenceExample.FromString(data)
    assert {k: _tf_values(v) for k, v in seq.context.feature.items()} == {"id": [7], "lang": [b"fr"]}
    got = {k: [_tf_values(f) for f in v.feature] for k, v in seq.feature_lists.feature_list.items()}
    assert got == LISTS
    context, sequence = tf.io.parse_single_sequence_example(
        data,
        context_features={"id": tf.io.FixedLenFeature([], tf.int64), "lang": tf.io.FixedLenFeature([], tf.string)},
        sequence_features={
            "tokens": tf.io.VarLenFeature(tf.int64),
            "scores": tf.io.FixedLenSequenceFeature([2], tf.float32),
            "words": tf.io.FixedLenSequenceFeature([], tf.string),
        },
    )
    assert int(context["id"]) == 7 and context["lang"].numpy() == b"fr"
    assert sequence["scores"].numpy().tolist() == LISTS["scores"]
    assert sequence["words"].numpy().tolist() == [b"le", b"chat"]
    tokens = tf.sparse.to_dense(sequence["tokens"]).numpy().tolist()
    assert tokens == [[1, 2, 3], [4, 0, 0], [0, 0, 0]]


def test_tf_serialized_sequence_example_decodes_here(tf: Any) -> None:
    seq = tf.train.SequenceExample()
    seq.context.feature["id"].int64_list.value.append(7)
    seq.context.feature["lang"].bytes_list.value.append(b"fr")
    for name, steps in LISTS.items():
        fl = seq.feature_lists.feature_list[name]
        for step in steps:
            f = fl.feature.add()
            if name == "tokens":
                f.int64_list.value.extend(step)
            elif name == "scores":
                f.float_list.value.extend(step)
            else:
                f.bytes_list.value.extend(step)
    context, lists = decode_sequence_example(seq.SerializeToString())
    assert context == {"id": [7], "lang": [b"fr"]}
    assert lists == LISTS


# --------------------------------------------------------------------------- import order

_SCRIPT = """
{imports}
from catalog.tfrecord import decode_example, encode_example, proto
data = encode_example({{"a": [1, 2], "b": b"x", "c": 0.5}})
ex = tensorflow.train.Example.FromString(data)
assert list(ex.features.feature["a"].int64_list.value) == [1, 2], ex
assert list(ex.features.feature["b"].bytes_list.value) == [b"x"], ex
theirs = tensorflow.train.Example()
theirs.features.feature["d"].float_list.value.append(0.25)
assert decode_example(theirs.SerializeToString()) == {{"d": [0.25]}}
assert proto.Example.DESCRIPTOR.full_name == tensorflow.train.Example.DESCRIPTOR.full_name
assert proto.Example.DESCRIPTOR.file.pool is not tensorflow.train.Example.DESCRIPTOR.file.pool
assert proto.Example is not tensorflow.train.Example
print("IMPORT-ORDER-OK")
"""


def test_import_order_does_not_matter(tf: Any) -> None:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    orders = ["import catalog, tensorflow", "import tensorflow, catalog"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(_SCRIPT.format(imports=imports))],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        for imports in orders
    ]
    for imports, proc in zip(orders, procs, strict=True):
        try:
            out, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail(f"{imports!r}: subprocess timed out")
        assert proc.returncode == 0, f"{imports!r} failed:\n{err[-3000:]}"
        assert "IMPORT-ORDER-OK" in out


def test_to_tf_feature_spec_is_exported_from_catalog(tf: Any, tmp_path: Path) -> None:
    """issue 30: what make_batched_features_dataset needs, from `catalog` itself (was only in catalog.schema)."""
    import catalog
    from catalog import Catalog, to_tf_feature_spec

    assert "to_tf_feature_spec" in catalog.__all__
    cat = Catalog.init(tmp_path / "c")
    ds = cat.register("d", {"features": {"x": {"dtype": "float32"}, "y": {"dtype": "int64", "default": -1}}})
    ds.append_rows([{"x": 0.5, "y": 1}, {"x": 1.5}])
    spec = to_tf_feature_spec(ds.schema.feature_spec(), tf)
    batches = tf.data.experimental.make_batched_features_dataset(ds.files(), 2, spec, num_epochs=1, shuffle=False)
    batch = next(iter(batches))
    assert batch["x"].numpy().tolist() == [0.5, 1.5] and batch["y"].numpy().tolist() == [1, -1]


_WITHOUT_TF = """
import sys
sys.modules["tensorflow"] = None  # any `import tensorflow` now raises ImportError
from catalog import Catalog
from catalog.tfrecord import read_records
root = sys.argv[1]
schema = {"features": {"id": {"dtype": "int64"}, "v": {"dtype": "float32", "shape": [2]},
                       "m": {"dtype": "uint8", "shape": [2, 2], "encoding": "tensor"}}}
for compression in ("none", "gzip", "zlib"):
    ds = Catalog.init(f"{root}/{compression}").register("d", schema, compression=compression)
    ds.append_rows([{"id": i, "v": [i, -i], "m": [[i, 0], [0, i]]} for i in range(50)])
    assert [row["id"] for row in ds.read()] == list(range(50))
    assert not ds.verify().problems
    ds.export(f"{root}/{compression}.tfrecord", compression=compression)
    assert len(list(read_records(f"{root}/{compression}.tfrecord"))) == 50
print("NO-TF-OK")
"""


def test_the_format_needs_no_tensorflow(tmp_path: Path) -> None:
    """Registering, appending, reading, verifying and exporting, in every compression, in a
    process where ``import tensorflow`` fails: the format is this package's own."""
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_TF, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and "NO-TF-OK" in done.stdout, done.stderr[-3000:]
