"""encode_plain (catalog/schema/packing.py), the vectorised fast path of Schema.encode_columns:
the records are byte for byte those the per-value encoders make (framed: what the writer makes
of them), and any batch that is not plain (a None, another type, a negative number, NaN, a bad
text) is left to the generic path, which raises its exact error."""

from __future__ import annotations

import io
import math
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.errors import ValidationError
from catalog.schema import Schema
from catalog.schema.packing import CHUNK, MIN_ROWS, encode_plain
from catalog.tfrecord import native
from catalog.tfrecord.example import FLOAT32_MAX
from catalog.tfrecord.framing import Packed, RecordWriter, record_sizes

F32 = st.floats(width=32, allow_nan=False, allow_infinity=False) | st.floats(-FLOAT32_MAX, FLOAT32_MAX)
INTS = st.integers(0, 2**63 - 1) | st.sampled_from([0, 127, 128, 16383, 16384, 2**56 - 1, 2**56, 2**63 - 1])
TEXTS = st.text(max_size=20) | st.sampled_from(["", "é", "猫" * 50, "a" * 125, "b" * 126, "c" * 200])


def _schema(key: str) -> Schema:
    return Schema.from_json(
        {"features": {"id": {"dtype": "int64"}, key: {"dtype": "string"}, "score": {"dtype": "float32"}}}
    )


def _one_by_one(schema: Schema, columns: dict[str, list[Any]], n: int) -> list[bytes]:
    return [schema.encode({k: v[i] for k, v in columns.items()}) for i in range(n)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    some=st.lists(st.tuples(INTS, TEXTS, F32), min_size=1, max_size=12),
    key=st.sampled_from(["text", "k" * 120, "ключ"]),
)
def test_plain_batches_are_the_records_the_encoders_make(some: list[tuple[int, str, float]], key: str) -> None:
    rows = (some * MIN_ROWS)[: MIN_ROWS + len(some)]  # (hypothesis generates few; the fast path takes many)
    schema = _schema(key)
    columns = {"id": [r[0] for r in rows], key: [r[1] for r in rows], "score": [r[2] for r in rows]}
    got = encode_plain(schema._codec, columns, len(rows))
    assert got is not None and got == _one_by_one(schema, columns, len(rows))
    assert schema.encode_columns(columns, len(rows)) == got


def test_long_records_and_floats_that_round() -> None:
    schema = _schema("text")
    n = 100
    texts = ["x" * (20_000 if i == 3 else i) for i in range(n)]  # a body over 16 KiB: a 3-byte length
    scores = [0.1, -0.0, 1e-45, FLOAT32_MAX, -FLOAT32_MAX, 1 / 3] * 16 + [2.5] * 4
    columns = {"id": list(range(n)), "text": texts, "score": scores}
    got = encode_plain(schema._codec, columns, n)
    assert got == _one_by_one(schema, columns, n)
    assert struct.unpack("<f", got[2][-4:])[0] == pytest.approx(1e-45, abs=1e-45)
    columns["text"] = ["y" * (3 << 20), *texts[1:]]  # a record over 2 MiB: NumPy's layout leaves it
    got = encode_plain(schema._codec, columns, n)  # to the generic path; the C extension takes it
    assert got is None if native.NATIVE is None else got == _one_by_one(schema, columns, n)


@pytest.mark.parametrize(
    ("feature", "value", "error"),
    [
        ("id", None, "feature 'id': missing"),
        ("id", -1, None),
        ("id", True, "expected int64, got bool"),
        ("id", 2**63, "out of int64 range"),
        ("id", np.int64(5), None),
        ("id", 1.5, "int64"),
        ("score", math.nan, None),
        ("score", math.inf, None),
        ("score", 1e39, "float32"),
        ("score", 3, None),
        ("text", "\ud800", "text"),
        ("text", b"bytes", None),
        ("text", np.str_("a str subclass"), None),
    ],
)
def test_a_value_that_is_not_plain_goes_to_the_generic_path(feature: str, value: Any, error: str | None) -> None:
    schema = _schema("text")
    n = MIN_ROWS + 3
    columns = {"id": list(range(n)), "text": ["t"] * n, "score": [0.5] * n}
    columns[feature][n - 2] = value
    assert encode_plain(schema._codec, columns, n) is None
    if error is None:
        assert schema.encode_columns(columns, n) == _one_by_one(schema, columns, n)
    else:
        with pytest.raises(ValidationError, match=error) as e:
            schema.encode_columns(columns, n)
        assert e.value.record == n - 2


def test_schemas_and_batches_it_does_not_take() -> None:
    n = MIN_ROWS
    optional = Schema.from_json({"features": {"id": {"dtype": "int64", "optional": True}}})
    listed = Schema.from_json({"features": {"id": {"dtype": "int64", "shape": [2]}}})
    raw = Schema.from_json({"features": {"id": {"dtype": "bytes"}}})
    assert encode_plain(optional._codec, {"id": list(range(n))}, n) is None
    assert encode_plain(listed._codec, {"id": [[1, 2]] * n}, n) is None
    assert encode_plain(raw._codec, {"id": [b"x"] * n}, n) is None
    plain = Schema.from_json({"features": {"id": {"dtype": "int64"}, "d": {"dtype": "int64", "default": 3}}})
    assert encode_plain(plain._codec, {"id": list(range(n))}, n) is None  # a default to fill in
    assert encode_plain(plain._codec, {"id": list(range(n - 1)), "d": [1] * (n - 1)}, n - 1) is None  # few rows
    assert encode_plain(plain._codec, {"id": np.arange(n).reshape(n, 1), "d": [1] * n}, n) is None  # not 1-D
    filled: dict[str, list[int]] = {}
    entries: dict[str, Any] = {}
    columns = {"id": list(range(n)), "d": [1] * n}
    records = plain.encode_columns(columns, n, filled, entries)
    assert records == _one_by_one(plain, columns, n) and filled == {"d": []}
    assert list(entries["id"]) == [plain._codec.encoders["id"](i) for i in range(n)] and len(entries["d"]) == n


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(some=st.lists(st.tuples(INTS, TEXTS, F32), min_size=1, max_size=12))
def test_array_columns_are_the_records_their_values_as_lists_make(some: list[tuple[int, str, float]]) -> None:
    rows = (some * MIN_ROWS)[: MIN_ROWS + len(some)]
    schema = _schema("text")
    lists = {"id": [r[0] for r in rows], "text": [r[1] for r in rows], "score": [r[2] for r in rows]}
    texts = np.empty(len(rows), dtype=object)
    texts[:] = lists["text"]
    for score in (np.array(lists["score"], dtype=np.float32), np.array(lists["score"], dtype=np.float64)):
        arrays = {"id": np.array(lists["id"], dtype=np.int64), "text": texts, "score": score}
        expected = encode_plain(schema._codec, {**lists, "score": score.tolist()}, len(rows))
        assert expected is not None and encode_plain(schema._codec, arrays, len(rows)) == expected
        assert schema.encode_columns(arrays, len(rows)) == expected


@pytest.mark.parametrize(
    ("feature", "array", "error"),
    [
        ("id", np.array([5, -1] * (MIN_ROWS // 2)), None),  # negative: ten bytes, the encoder's
        ("id", np.array([5, 2**63] * (MIN_ROWS // 2), dtype=np.uint64), "out of int64 range"),
        ("id", np.array([5, 6] * (MIN_ROWS // 2), dtype=np.uint8), None),  # unsigned: as a list
        ("id", np.ones(MIN_ROWS, dtype=bool), "expected int64, got bool"),
        ("id", np.arange(MIN_ROWS, dtype=np.float64) + 0.5, "int64"),
        ("score", np.array([0.5, math.nan] * (MIN_ROWS // 2)), None),
        ("score", np.array([0.5, 1e39] * (MIN_ROWS // 2)), "float32"),
        ("score", np.arange(MIN_ROWS, dtype=np.int32), None),  # integers in a float feature: as a list
        ("text", np.array(["t", b"x"] * (MIN_ROWS // 2), dtype=object), None),
        ("text", np.array(["t", "u"] * (MIN_ROWS // 2)), None),  # a numpy str array: as a list
    ],
)
def test_an_array_that_is_not_plain_encodes_as_its_values_as_a_list(
    feature: str, array: Any, error: str | None
) -> None:
    schema = _schema("text")
    n = MIN_ROWS
    texts = np.empty(n, dtype=object)
    texts[:] = ["t"] * n
    arrays: dict[str, Any] = {"id": np.arange(n), "text": texts, "score": np.full(n, 0.5, dtype=np.float32)}
    arrays[feature] = array
    lists = {k: v.tolist() if v.dtype.kind in "biuf" else list(v) for k, v in arrays.items()}
    if feature in ("id", "score") and error is None and array.dtype.kind in "if":
        assert encode_plain(schema._codec, arrays, n) is None
    if error is None:
        assert schema.encode_columns(arrays, n) == schema.encode_columns(lists, n) == _one_by_one(schema, lists, n)
    else:
        with pytest.raises(ValidationError, match=error) as e:
            schema.encode_columns(arrays, n)
        with pytest.raises(ValidationError) as as_list:
            schema.encode_columns(lists, n)
        assert str(e.value) == str(as_list.value) and e.value.record == as_list.value.record


def test_a_batch_is_laid_out_a_chunk_at_a_time() -> None:
    schema = _schema("text")
    n = CHUNK * 2 + 5
    columns = {"id": list(range(n)), "text": [f"t{i % 300}" for i in range(n)], "score": [i / 7 for i in range(n)]}
    assert encode_plain(schema._codec, columns, n) == _one_by_one(schema, columns, n)
    columns["score"][CHUNK + 1] = math.nan  # in the second chunk: the whole batch goes generic
    assert encode_plain(schema._codec, columns, n) is None


def _framed_one_by_one(records: list[bytes]) -> bytes:
    """What RecordWriter.write of each record writes."""
    out = io.BytesIO()
    with RecordWriter(out) as w:
        for r in records:
            w.write(r)
        w.flush()
        return out.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    some=st.lists(st.tuples(INTS, TEXTS, F32), min_size=1, max_size=12),
    key=st.sampled_from(["text", "k" * 120, "ключ"]),
    extra=st.integers(0, CHUNK + 3),
)
def test_framed_batches_are_the_bytes_the_writer_frames_the_records_into(
    some: list[tuple[int, str, float]], key: str, extra: int
) -> None:
    rows = (some * (MIN_ROWS + extra))[: MIN_ROWS + extra]  # up to two chunks: two parts
    schema = _schema(key)
    columns = {"id": [r[0] for r in rows], key: [r[1] for r in rows], "score": [r[2] for r in rows]}
    framed: list[bytes] = []
    records = schema.encode_columns(columns, len(rows), None, None, framed)
    assert records == _one_by_one(schema, columns, len(rows))
    parts = 1 if native.NATIVE is not None else -(-len(rows) // CHUNK)  # (the C loop: one at once)
    assert len(framed) == parts and b"".join(framed) == _framed_one_by_one(records)


def test_a_batch_the_fast_path_does_not_take_frames_nothing() -> None:
    schema = _schema("text")
    n = CHUNK + 5
    columns = {"id": list(range(n)), "text": ["t"] * n, "score": [0.5] * n}
    columns["score"][CHUNK + 1] = math.nan  # in the second chunk, after the first was framed
    framed: list[bytes] = []
    assert schema.encode_columns(columns, n, None, None, framed) == _one_by_one(schema, columns, n)
    assert framed == []
    long = {"id": list(range(MIN_ROWS)), "text": ["y" * (3 << 20)] * MIN_ROWS, "score": [0.5] * MIN_ROWS}
    got = encode_plain(schema._codec, long, MIN_ROWS, framed)
    if native.NATIVE is None:
        assert got is None and framed == []
    else:  # the C extension takes records of any length, framed as the writer frames them
        assert got == _one_by_one(schema, long, MIN_ROWS) and b"".join(framed) == _framed_one_by_one(got)


def test_framed_records_are_views_of_the_framed_bytes() -> None:
    """With ``framed``, the C loop's records are a Packed view of the framed bytes: a sequence
    that indexes, slices, iterates, compares and measures as the list of its records does."""
    schema = _schema("text")
    n = MIN_ROWS + 7
    columns = {"id": list(range(n)), "text": [f"t{i}" * (i % 5) for i in range(n)], "score": [0.5] * n}
    framed: list[bytes] = []
    records = schema.encode_columns(columns, n, None, None, framed)
    want = _one_by_one(schema, columns, n)
    if native.NATIVE is None:
        assert type(records) is list and records == want
        return
    assert isinstance(records, Packed) and len(records) == n and records == want and want == records
    assert records[0] == want[0] and records[-1] == want[-1] and list(records[3:9]) == want[3:9]
    assert isinstance(records[3:9], Packed) and records[3:9][2] == want[5] and records != want[:-1]
    assert record_sizes(records).tolist() == [len(r) for r in want] == record_sizes(want).tolist()
    assert b"".join(framed) == _framed_one_by_one(want)
    with pytest.raises(TypeError):
        hash(records)
