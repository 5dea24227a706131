"""Foreign Example files adopted with an inferred schema read back through every reader
(``read``, ``batches``, ``source``, ``torch``, ``tf_dataset``) as TensorFlow's own
``parse_example`` reads them with the spec the inferred schema implies: ``VarLenFeature`` for
a variable-length or optional feature, ``FixedLenFeature`` for a fixed one (issue 30)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog import Catalog, RecordWriter
from catalog.tfrecord import example as wire

KINDS = ("int64", "float", "bytes")
VALUES = {
    "int64": st.integers(-(2**63), 2**63 - 1),
    "float": st.floats(width=32, allow_nan=False),
    "bytes": st.one_of(st.binary(max_size=3), st.text(max_size=3).map(lambda s: s.encode("utf-8"))),
}


@st.composite
def _files(draw: st.DrawFn) -> tuple[list[dict[str, tuple[str, list[Any]]]], bool]:
    """Records as {name: (kind, values)}, each feature fixed or variable in length, always or
    sometimes present (each present at least once), and which writer writes them."""
    n = draw(st.integers(1, 5))
    records: list[dict[str, tuple[str, list[Any]]]] = [{} for _ in range(n)]
    for i in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(KINDS))
        fixed = draw(st.sampled_from([None, 0, 1, 2]))  # None: each record its own length
        present = draw(st.lists(st.booleans(), min_size=n, max_size=n).filter(any))
        for record, here in zip(records, present, strict=True):
            if here:
                size = fixed if fixed is not None else draw(st.integers(0, 3))
                record[f"f{i}"] = (kind, draw(st.lists(VALUES[kind], min_size=size, max_size=size)))
    return records, draw(st.booleans())


def _write_tf(tf: Any, path: Path, records: list[dict[str, tuple[str, list[Any]]]]) -> list[bytes]:
    out = []
    with tf.io.TFRecordWriter(str(path)) as w:
        for record in records:
            ex = tf.train.Example()
            for name, (kind, values) in record.items():
                lst = getattr(ex.features.feature[name], f"{kind}_list")
                lst.SetInParent()  # an empty list keeps its kind
                lst.value.extend(values)
            data = ex.SerializeToString()
            w.write(data)
            out.append(data)
    return out


def _write_ours(path: Path, records: list[dict[str, tuple[str, list[Any]]]]) -> list[bytes]:
    arrays = {"int64": np.int64, "float": np.float32}
    out = []
    with RecordWriter(path) as w:
        for record in records:
            row: dict[str, Any] = {}
            for name, (kind, values) in record.items():
                if kind in arrays:
                    row[name] = np.array(values, arrays[kind])
                else:  # a list of bytes keeps trailing NULs; an empty one needs an array for its kind
                    row[name] = values if values else np.array([], "S")
            data = wire.encode_example(row)
            w.write(data)
            out.append(data)
    return out


def _tf_truth(tf: Any, ds: Any, records: list[bytes]) -> dict[str, list[list[Any]]]:
    """Each feature's values per record as parse_example gives them."""
    spec = {}
    for name, f in ds.schema.features.items():
        dtype = tf.string if f.dtype in ("string", "bytes") else getattr(tf, f.dtype)
        spec[name] = tf.io.VarLenFeature(dtype) if f.is_varlen or f.optional else tf.io.FixedLenFeature(f.shape, dtype)
    parsed = tf.io.parse_example(tf.constant(records), spec)
    out = {}
    for name, value in parsed.items():
        rows = tf.RaggedTensor.from_sparse(value).to_list() if isinstance(value, tf.SparseTensor) else value.numpy()
        out[name] = [_flat(r) for r in rows]
    return out


def _flat(value: Any) -> list[Any]:
    """A record's value (None, scalar, array, nested lists) as its flat list of values, text as
    UTF-8 bytes (as tf.string gives it)."""
    if value is None:
        return []
    if hasattr(value, "numpy"):  # a torch tensor
        value = value.numpy()
    if isinstance(value, (np.ndarray, np.generic)):
        value = value.tolist()  # a 0-d array: its scalar
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    return [value.encode("utf-8") if isinstance(value, str) else value]


def _columns(batches: Any) -> dict[str, list[list[Any]]]:
    out: dict[str, list[list[Any]]] = {}
    for batch in batches:
        for name, column in batch.items():
            out.setdefault(name, []).extend(_flat_rows(column))
    return out


def _flat_rows(column: Any) -> list[list[Any]]:
    if hasattr(column, "to_list"):  # a tf.RaggedTensor
        return [_flat(r) for r in column.to_list()]
    if hasattr(column, "numpy"):
        column = column.numpy()
    return [_flat(r) for r in column]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_files())
def test_every_reader_gives_what_parse_example_gives(tf: Any, case: Any) -> None:
    records, with_tf = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "in.tfrecord"
        serialized = _write_tf(tf, path, records) if with_tf else _write_ours(path, records)
        cat = Catalog.init(Path(tmp) / "cat")
        cat.adopt("d", [path])
        ds = cat.dataset("d")
        truth = _tf_truth(tf, ds, serialized)
        rows = list(ds.read())
        assert {n: [_flat(r.get(n)) for r in rows] for n in truth} == truth
        for name in truth:  # None where the record lacks it: read tells absent from empty
            assert [r[name] is not None for r in rows] == [name in r for r in records], name
        assert _columns(ds.batches(2)) == truth
        src = ds.source()
        assert {n: [_flat(src[i][n]) for i in range(len(src))] for n in truth} == truth
        assert {n: [_flat(row[n]) for row in ds.torch()] for n in truth} == truth
        assert _columns(ds.tf_dataset(batch_size=2)) == truth
