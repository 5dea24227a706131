"""``Schema.decode_batch``: the vectorized fast path must equal the generic per-record path.

Equal means the same columns (dtype, shape, values, element types) for valid batches and
the same exception (class, message, record index, feature) for invalid ones. Records the
fast path does not handle itself go to the generic path, so the tests also check that
ordinary records really take the fast path.
"""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from catalog.errors import CodecError, SchemaError, ValidationError
from catalog.schema import Schema, to_tf_feature_spec
from catalog.schema import columnar as fastdecode
from catalog.schema.codec import kinds_by_protobuf
from catalog.tfrecord import example as wire
from catalog.tfrecord import native

# --------------------------------------------------------------------------- helpers


def same(a: Any, b: Any, where: str = "") -> None:
    """Exact equality of decoded values, including types, dtypes and shapes (NaN equals NaN)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        if a.dtype == object:
            for i, (x, y) in enumerate(zip(a.reshape(-1), b.reshape(-1), strict=True)):
                same(x, y, f"{where}[{i}]")
        else:
            assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), f"{where}: {a} != {b}"
    elif isinstance(a, list):
        assert len(a) == len(b), f"{where}: {a} != {b}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def outcome(fn: Callable[[], dict[str, np.ndarray]]) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except Exception as e:  # any exception: the fast path must raise exactly what the generic one does
        return "error", (type(e), str(e), getattr(e, "record", None), getattr(e, "feature", None))


def check_batch(schema: Schema, records: Sequence[bytes]) -> tuple[str, Any]:
    """Decode with both paths; assert they agree; return the outcome. Asked for ``ragged``,
    the fast path hands some list columns over joined instead: the same values."""
    fast = outcome(lambda: schema.decode_batch(list(records)))
    ragged: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    joined = outcome(lambda: schema.decode_batch(list(records), ragged=ragged))
    assert joined[0] == fast[0]
    if fast[0] != "error":
        assert list(joined[1]) == [name for name in fast[1] if name not in ragged]
        for name, (flat, counts) in ragged.items():
            arrays = list(fast[1][name])
            assert counts.tolist() == [len(a) for a in arrays], name
            whole = np.concatenate(arrays) if arrays else flat[:0]
            same(flat, whole, name)  # (NaN equals NaN: tolist() compared NaN objects unequal)
        for name in joined[1]:
            same(joined[1][name], fast[1][name], name)
    for record in records:
        if type(record) is bytes:
            check_row(schema, record)
    generic = outcome(lambda: schema._codec.decode_batch_generic(list(records)))
    others = [generic]
    if all(type(r) is bytes for r in records):  # records read from a shard, parsed where they lie
        others.append(outcome(lambda: schema.decode_spans(*laid_out(schema, records))))
    for other in others:
        assert fast[0] == other[0], (fast, other)
        if fast[0] == "error":
            assert fast[1] == other[1]
        else:
            assert list(fast[1]) == list(other[1])
            for name in other[1]:
                same(fast[1][name], other[1][name], name)
    return fast


def check_row(schema: Schema, record: bytes) -> None:
    """``Schema.decode`` (the C parse where it takes the record, the quick readers) against
    protobuf's own parse and every check: the same row, or the same error."""
    quick = outcome(lambda: schema.decode(record))
    checked = outcome(lambda: schema._codec._decode_checked(kinds_by_protobuf(record)))
    assert quick[0] == checked[0], (quick, checked)
    if quick[0] == "error":
        assert quick[1] == checked[1]
        return
    assert list(quick[1]) == list(checked[1])
    for name, value in quick[1].items():
        other = checked[1][name]
        if isinstance(value, float) and math.isnan(value):
            assert type(other) is float and math.isnan(other), name
        else:
            same(value, other, name)


def laid_out(schema: Schema, records: Sequence[bytes]) -> tuple[bytes, np.ndarray, np.ndarray]:
    """The records in one buffer as a shard read holds them: in another order (reversed), other
    bytes around them (stand-ins for the framing), the pad at the end; and where each is. The
    in-place decode must take its fast path here (no copies), and agree."""
    parts, starts, at = [], [0] * len(records), 0
    for i in reversed(range(len(records))):
        framing = bytes([0xFF, i % 256, 0x0A, 0x80])[: 1 + i % 4]  # non-zero junk, as a header is
        parts += [framing, records[i]]
        starts[i] = at + len(framing)
        at += len(framing) + len(records[i])
    parts += [b"\xa5\x5a", bytes(schema.spans_pad)]  # the last record's footer, then the pad
    return b"".join(parts), np.array(starts, dtype=np.int64), np.array([len(r) for r in records], dtype=np.int64)


def slow_records(schema: Schema, records: Sequence[bytes]) -> list[int]:
    """Which records the fast path hands to the generic path."""
    plan = fastdecode._plan(schema._codec)
    batch = fastdecode._Batch(list(records), plan.pad)
    fastdecode._fast_columns(batch, plan)
    return np.flatnonzero(batch.slow).tolist()


def entry(name: str, feature: bytes) -> bytes:
    return wire.map_entry(name.encode("utf-8"), feature)


def example(*entries: bytes) -> bytes:
    return wire.example_from_entries(entries)


def varint(v: int) -> bytes:
    return wire.varint(v)


def ld(tag: int, payload: bytes) -> bytes:
    return bytes([tag]) + varint(len(payload)) + payload


BASIC = Schema.from_json(
    {
        "features": {
            "id": {"dtype": "int64"},
            "label": {"dtype": "string"},
            "score": {"dtype": "float32"},
            "vec": {"dtype": "float32", "shape": [4]},
        }
    }
)


def basic_row(i: int) -> dict[str, Any]:
    return {"id": i * 977 - 300, "label": f"class {i % 7}", "score": i / 8, "vec": [i, -i, 0.5, 1e30]}


BASIC_RECORDS = [BASIC.encode(basic_row(i)) for i in range(12)]

RICH = Schema.from_json(
    {
        "features": {
            "i": {"dtype": "int64"},
            "iv": {"dtype": "int64", "shape": [None]},
            "i2": {"dtype": "int64", "shape": [2, 2]},
            "f": {"dtype": "float32", "default": 1.5},
            "fv": {"dtype": "float32", "shape": [None], "default": [0.25]},
            "s": {"dtype": "string", "default": "none"},
            "sv": {"dtype": "string", "shape": [None]},
            "s2": {"dtype": "string", "shape": [2]},
            "b": {"dtype": "bytes"},
            "bv": {"dtype": "bytes", "shape": [None], "default": []},
            "t": {"dtype": "uint16", "shape": [2, 3], "encoding": "tensor"},
            "td": {"dtype": "float64", "shape": [2], "encoding": "tensor", "default": [7, 8]},
            "tu": {"dtype": "int32", "shape": [None, 2], "encoding": "tensor"},
        }
    }
)


def rich_row(i: int) -> dict[str, Any]:
    row: dict[str, Any] = {
        "i": [5, -1, 1 << 40, -(1 << 63), (1 << 63) - 1, 300][i % 6],
        "iv": list(range(-2, i % 5)),
        "i2": [[i, 2], [3, 1 << 50]],
        "sv": ["é" * k for k in range(i % 3)],
        "s2": ["x", "y" * 200],
        "b": bytes(range(i % 256)) * 3,
        "t": np.arange(6, dtype=np.uint16).reshape(2, 3) + i,
        "tu": np.full((i % 3, 2), i, dtype=np.int32),
    }
    if i % 2:
        row.update(
            f=float(i), fv=[0.5] * (i % 4), s="text " * i, bv=[b"\x00", b""], td=np.array([i, -i], dtype=np.float64)
        )
    return row


RICH_RECORDS = [RICH.encode(rich_row(i)) for i in range(9)]


SCALARS = Schema.from_json(
    {
        "features": {
            "id": {"dtype": "int64"},
            "label": {"dtype": "string", "default": "none"},
            "raw": {"dtype": "bytes"},
            "score": {"dtype": "float32"},
            "note": {"dtype": "string", "optional": True},
        }
    }
)


def scalar_row(i: int) -> dict[str, Any]:
    row: dict[str, Any] = {"id": i - 3, "raw": bytes(range(i % 7)) * 40, "score": i / 3}
    if i % 3:
        row["label"] = ["cat", "é" * 90, ""][i % 3]
    if i % 2:
        row["note"] = f"note {i}"
    return row


SCALAR_RECORDS = [SCALARS.encode(scalar_row(i)) for i in range(80)]


# --------------------------------------------------------------------------- the common case


def test_scalar_tables_take_one_c_pass_with_their_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table of int64, float32, string and bytes scalars is read in one C pass (texts and
    bytes sliced where they lie); records it declines (a value that is not UTF-8, two values,
    a key twice, another kind) go to the generic path, which raises or reads what it always did."""
    if native.NATIVE is None:
        pytest.skip("the C extension is not built here (no C compiler?) or CATALOG_NATIVE=0")
    passes: list[bytes] = []
    real = native.scalar_columns

    def counted(buf: bytes, starts: Any, ends: Any, keys: Any, kinds: bytes) -> Any:
        passes.append(kinds)
        return real(buf, starts, ends, keys, kinds)

    monkeypatch.setattr(native, "scalar_columns", counted)
    kind, columns = check_batch(SCALARS, SCALAR_RECORDS)
    assert kind == "ok" and passes and all(3 in k for k in passes)
    assert slow_records(SCALARS, SCALAR_RECORDS) == []
    assert (
        columns["label"][1] == "é" * 90 and columns["label"][3] == "none" and columns["raw"][6] == bytes(range(6)) * 40
    )
    assert columns["note"][1] == "note 1" and columns["note"][2] is None

    def raw(i: int) -> bytes:
        return wire.bytes_feature([scalar_row(i)["raw"]])

    odd = {
        3: _replace_entry(SCALAR_RECORDS[3], "raw", raw(3), wire.bytes_feature([b"a", b"b"])),  # two values
        5: _replace_entry(SCALAR_RECORDS[5], "note", wire.bytes_feature([b"note 5"]), wire.bytes_feature([])),
        7: SCALAR_RECORDS[7] + ld(0x0A, entry("raw", wire.bytes_feature([b"again"]))),  # a key twice (merged)
        9: _replace_entry(SCALAR_RECORDS[9], "raw", raw(9), wire.int64_feature([1])),  # another kind
    }
    records = [odd.get(i, r) for i, r in enumerate(SCALAR_RECORDS)]
    check_batch(SCALARS, records)
    assert slow_records(SCALARS, records) == sorted(odd)
    for bad in (3, 40):  # not UTF-8: the generic path names the record and the feature
        records = list(SCALAR_RECORDS)
        made = SCALARS.encode({**scalar_row(bad), "label": "x"})
        records[bad] = _replace_entry(made, "label", wire.bytes_feature([b"x"]), wire.bytes_feature([b"\xff"]))
        kind, err = check_batch(SCALARS, records)
        assert kind == "error" and err[0] is ValidationError and err[2] == bad and err[3] == "label"


@pytest.mark.parametrize(("schema", "records"), [(BASIC, BASIC_RECORDS), (RICH, RICH_RECORDS)], ids=["basic", "rich"])
def test_encoded_rows_take_the_fast_path(schema: Schema, records: list[bytes]) -> None:
    check_batch(schema, records)
    assert slow_records(schema, records) == []


@pytest.mark.parametrize(("schema", "records"), [(BASIC, BASIC_RECORDS), (RICH, RICH_RECORDS)], ids=["basic", "rich"])
def test_spans_are_parsed_where_they_lie(schema: Schema, records: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    """decode_spans takes its fast path on a read's buffer (no record copied out), and gives
    decode_batch's columns; without the pad it copies the records out, with the same result."""
    expected = schema.decode_batch(records)
    raw, starts, lengths = laid_out(schema, records)
    for name, column in schema.decode_spans(raw[: -schema.spans_pad], starts, lengths).items():
        same(column, expected[name], name)

    def copied(*_args: Any) -> None:
        raise AssertionError("the records were copied out")

    monkeypatch.setattr(fastdecode, "decode_batch", copied)
    for name, column in schema.decode_spans(raw, starts, lengths).items():
        same(column, expected[name], name)


def test_columns_contract() -> None:
    cols = RICH.decode_batch(RICH_RECORDS)
    n = len(RICH_RECORDS)
    assert cols["i"].dtype == np.int64 and cols["i"].shape == (n,)
    assert cols["i2"].shape == (n, 2, 2) and cols["i2"][0, 1, 1] == 1 << 50
    assert cols["f"].dtype == np.float32 and cols["f"][0] == 1.5 and cols["f"][1] == 1.0
    assert cols["s"][0] == "none" and cols["s"][1] == "text "
    assert cols["s2"].dtype == object and cols["s2"].shape == (n, 2)
    assert cols["iv"].dtype == object and cols["iv"][3].dtype == np.int64 and list(cols["iv"][3]) == [-2, -1, 0, 1, 2]
    assert cols["sv"][2] == ["", "é"] and cols["bv"][0] == [] and cols["bv"][1] == [b"\x00", b""]
    assert cols["t"].shape == (n, 2, 3) and cols["t"].dtype == np.uint16 and cols["t"].flags.writeable
    assert cols["td"][0].tolist() == [7, 8] and cols["td"][1].tolist() == [1, -1]
    assert cols["tu"][2].shape == (2, 2) and cols["tu"][0].shape == (0, 2)
    for name, col in cols.items():  # every array handed out is the caller's to write
        parts = [col] if col.dtype != object else [v for v in col.reshape(-1) if isinstance(v, np.ndarray)]
        assert all(p.flags.writeable for p in parts), name
    cols["t"][0, 0, 0] = 9
    # each missing varlen value is its own object
    fv = cols["fv"]
    assert fv[0] is not fv[2] and fv[0].tolist() == [0.25]


@pytest.mark.parametrize(
    "values",
    [
        [0, 1, 5, 127],
        [0, 128, 16383, 16384, 1 << 21, 1 << 28, 1 << 35, 1 << 42, 1 << 49, (1 << 56) - 1],
        [1 << 56, (1 << 63) - 1, -1, -(1 << 63), 3],
    ],
    ids=["one-byte", "up-to-eight-bytes", "long"],
)
def test_scalar_int_widths(values: list[int]) -> None:
    schema = Schema.from_json({"features": {"i": {"dtype": "int64"}, "j": {"dtype": "int64", "shape": [2]}}})
    records = [schema.encode({"i": v, "j": [v, ~v]}) for v in values]
    cols = check_batch(schema, records)[1]
    assert cols["i"].tolist() == values and cols["j"][:, 0].tolist() == values
    assert slow_records(schema, records) == []
    # a payload with two varints for a scalar, or a truncated varint, is an error
    two = example(entry("i", ld(0x1A, ld(0x0A, b"\x01\x02"))), entry("j", wire.int64_feature([1, 2])))
    cut = example(entry("i", ld(0x1A, ld(0x0A, b"\x81\x82"))), entry("j", wire.int64_feature([1, 2])))
    for bad in (two, cut):
        assert check_batch(schema, [*records, bad])[0] == "error"


def test_list_ints_of_up_to_eight_bytes_read_a_word_each() -> None:
    """Packed lists whose varints all fit eight bytes (values below 2**56) are read a word a
    value; one longer value anywhere sends the batch's lists the byte-by-byte way: both as
    the generic path."""
    schema = Schema.from_json(
        {"features": {"v": {"dtype": "int64", "shape": [None]}, "f": {"dtype": "int64", "shape": [3]}}}
    )
    widths = [0, 1, 127, 128, 16383, 16384, 1 << 21, 1 << 28, 1 << 35, 1 << 42, 1 << 49, (1 << 56) - 1]
    rng = random.Random(34)
    rows = [{"v": rng.sample(widths, i % 6), "f": rng.sample(widths, 3)} for i in range(40)]
    records = [schema.encode(r) for r in rows]
    cols = check_batch(schema, records)[1]
    assert [list(v) for v in cols["v"]] == [r["v"] for r in rows] and cols["f"].tolist() == [r["f"] for r in rows]
    longer = [*records, schema.encode({"v": [1 << 56, -1], "f": [1, 2, 3]})]
    assert [list(v) for v in check_batch(schema, longer)[1]["v"]][-1] == [1 << 56, -1]
    assert slow_records(schema, records) == []


def test_empty_batch_and_iterables() -> None:
    check_batch(BASIC, [])
    cols = BASIC.decode_batch(iter(BASIC_RECORDS))
    same(cols["vec"], BASIC.decode_batch(BASIC_RECORDS)["vec"])
    check_batch(BASIC, [bytearray(r) for r in BASIC_RECORDS])
    check_batch(BASIC, [memoryview(r) for r in BASIC_RECORDS])


@pytest.mark.parametrize("odd", ["text", None, 5, np.frombuffer(BASIC_RECORDS[1], dtype=np.uint8)])
def test_non_bytes_records_fail_like_the_generic_path(odd: Any) -> None:
    kind, err = check_batch(BASIC, [BASIC_RECORDS[0], odd])
    assert kind == "error" and err[0] is CodecError


def test_other_buffers_agree_with_the_generic_path() -> None:
    even = next(r for r in BASIC_RECORDS if len(r) % 2 == 0)
    check_batch(BASIC, [BASIC_RECORDS[0], memoryview(even).cast("H")])  # len() counts 2-byte items
    check_batch(BASIC, [BASIC_RECORDS[0], np.bytes_(BASIC_RECORDS[1])])


def test_long_lengths_and_big_records() -> None:
    """Multi-byte length varints everywhere: long keys, long strings, long vectors, big records."""
    schema = Schema.from_json(
        {
            "features": {
                "k" * 300: {"dtype": "int64"},
                "v": {"dtype": "float32", "shape": [40]},
                "big": {"dtype": "float32", "shape": [5000]},
                "s": {"dtype": "string"},
            }
        }
    )
    rows = [{"k" * 300: i, "v": [i] * 40, "big": np.full(5000, i, np.float32), "s": "ü" * (i * 50)} for i in range(4)]
    records = [schema.encode(r) for r in rows]
    check_batch(schema, records)
    assert slow_records(schema, records) == []


def test_similar_long_keys_are_told_apart() -> None:
    names = ["feature_0001_value", "feature_0002_value", "feature_0001_valuf", "a" * 17, "a" * 16, "a" * 8, "a"]
    schema = Schema.from_json({"features": {n: {"dtype": "int64"} for n in names}})
    records = [schema.encode({n: i * 10 + k for k, n in enumerate(names)}) for i in range(3)]
    cols = check_batch(schema, records)[1]
    assert [cols[n][1] for n in names] == list(range(10, 17))
    assert slow_records(schema, records) == []


def test_repeated_texts() -> None:
    """Scalar text columns with few distinct values are decoded once per value."""
    schema = Schema.from_json({"features": {"s": {"dtype": "string"}, "b": {"dtype": "bytes"}}})
    labels = ["", "a", "a\x00", "\x00", "é" * 8, "x" * 16, "x" * 15, "y" * 15 + "\x00"]
    rows = [{"s": labels[i % len(labels)], "b": labels[i % 3].encode()} for i in range(300)]
    records = [schema.encode(r) for r in rows]
    cols = check_batch(schema, records)[1]
    assert cols["s"].tolist() == [r["s"] for r in rows]
    assert slow_records(schema, records) == []
    # invalid UTF-8 repeated in several records: the first one is reported
    bad = example(entry("s", wire.bytes_feature([b"\xff"])), entry("b", wire.bytes_feature([b""])))
    for at in (5, 250):
        batch = list(records)
        batch[at] = batch[at + 20] = bad
        kind, err = check_batch(schema, batch)
        assert kind == "error" and err[0] is ValidationError and err[2:] == (at, "s")
    longer = [schema.encode({"s": "x" * (16 + i % 2), "b": b""}) for i in range(100)]
    check_batch(schema, longer)
    # mostly distinct values: decoded one by one, batch after batch
    distinct = [schema.encode({"s": f"v{i}", "b": b""}) for i in range(300)]
    for _ in range(3):
        check_batch(schema, distinct)
        check_batch(schema, records)


# --------------------------------------------------------------------------- other valid encodings


def test_reordered_entries_are_fast() -> None:
    rng = random.Random(1)
    records = []
    for i in range(10):
        row = basic_row(i)
        items = list(row.items())
        rng.shuffle(items)
        records.append(BASIC.encode(dict(items)) if i % 2 else wire.encode_example(dict(items)))
    # wire.encode_example writes float lists for floats: same wire kinds as the schema here
    check_batch(BASIC, records)
    assert slow_records(BASIC, records) == []


def test_non_packed_encodings() -> None:
    ints = ld(0x1A, b"".join(b"\x08" + varint(v & ((1 << 64) - 1)) for v in (7,)))
    floats = ld(0x12, b"".join(b"\x0d" + struct.pack("<f", v) for v in (1.0, 2.0, 3.0, 4.0)))
    score = ld(0x12, b"\x0d" + struct.pack("<f", 0.5))
    label = entry("label", wire.bytes_feature([b"x"]))
    odd = example(entry("id", ints), label, entry("score", score), entry("vec", floats))
    # packed and non-packed chunks mixed in one list
    mixed = ld(
        0x12, ld(0x0A, struct.pack("<2f", 1, 2)) + b"\x0d" + struct.pack("<f", 3) + ld(0x0A, struct.pack("<f", 4))
    )
    odd2 = example(entry("id", ints), label, entry("score", score), entry("vec", mixed))
    records = [BASIC_RECORDS[0], odd, BASIC_RECORDS[1], odd2]
    cols = check_batch(BASIC, records)[1]
    assert cols["vec"][1].tolist() == [1, 2, 3, 4] and cols["vec"][3].tolist() == [1, 2, 3, 4]
    assert cols["id"][1] == 7 and slow_records(BASIC, records) == [1, 3]


def test_duplicates_merges_and_unknown_fields() -> None:
    first = entry("id", wire.int64_feature([1]))
    later = entry("id", wire.int64_feature([2]))
    rest = [entry("label", wire.bytes_feature([b"a"])), entry("score", wire.float_feature([1.0]))]
    vec = entry("vec", wire.float_feature([0.0] * 4))
    dup = example(first, *rest, vec, later)
    # two Example.features fields: protobuf merges them
    merged = wire.example_from_entries([first, rest[0]]) + wire.example_from_entries([rest[1], vec, later])
    unknown_example = BASIC_RECORDS[2] + b"\x10\x05"
    unknown_entry = example(wire.TAG_1 + varint(len(first[2:]) + 2) + first[2:] + b"\x18\x01", *rest, vec)
    unknown_feature = example(entry("id", wire.int64_feature([3]) + b"\x20\x01"), *rest, vec)
    # value before key inside the entry
    key, value = ld(0x0A, b"id"), ld(0x12, wire.int64_feature([4]))
    swapped = example(ld(0x0A, value + key), *rest, vec)
    # a second oneof member replaces the first
    two_kinds = example(entry("id", wire.float_feature([1.0]) + wire.int64_feature([5])), *rest, vec)
    records = [dup, merged, unknown_feature, swapped, two_kinds, BASIC_RECORDS[0]]
    cols = check_batch(BASIC, records)[1]
    assert cols["id"][:5].tolist() == [2, 2, 3, 4, 5]
    assert slow_records(BASIC, records) == [0, 1, 2, 3, 4]
    # a top-level field an Example does not have: not an Example (a TF event record looks so)
    kind, (error, message, _record, _feature) = check_batch(BASIC, [BASIC_RECORDS[0], unknown_example])
    assert (kind, error) == ("error", CodecError)
    at = len(BASIC_RECORDS[2])
    assert message == (
        f"not a tf.train.Example: its top-level field 2 at byte {at} is varint; an Example holds only field 1 "
        "(features, length-delimited)"
    )
    # upb drops a map entry holding an unknown field: whatever it does, both paths agree
    check_batch(BASIC, [BASIC_RECORDS[0], unknown_entry])


def test_overlong_varints_are_accepted() -> None:
    feature = ld(0x1A, b"\x0a\x82\x00" + b"\x85\x00")  # length 2 and value 5, each with a redundant byte
    rec = example(entry("id", feature), *[entry(n, f) for n, f in _basic_features(0) if n != "id"])
    cols = check_batch(BASIC, [rec, BASIC_RECORDS[0]])[1]
    assert cols["id"][0] == 5


def _basic_features(i: int) -> list[tuple[str, bytes]]:
    row = basic_row(i)
    return [
        ("id", wire.int64_feature([row["id"]])),
        ("label", wire.bytes_feature([row["label"].encode()])),
        ("score", wire.float_feature([row["score"]])),
        ("vec", wire.float_feature(row["vec"])),
    ]


def test_empty_feature_message() -> None:
    schema = Schema.from_json(
        {"features": {"v": {"dtype": "int64", "shape": [None]}, "s": {"dtype": "bytes", "shape": [None]}}}
    )
    records = [example(entry("v", b""), entry("s", b"")), example(entry("v", b"\x1a\x00"), entry("s", b"\x0a\x00"))]
    cols = check_batch(schema, records)[1]
    assert cols["v"][0].tolist() == [] and cols["s"][1] == []


# --------------------------------------------------------------------------- TensorFlow


def test_tensorflow_serialized_examples_match_parse_example(tf: Any) -> None:
    schema = Schema.from_json(
        {
            "features": {
                "id": {"dtype": "int64"},
                "label": {"dtype": "string"},
                "raw": {"dtype": "bytes", "shape": [2]},
                "score": {"dtype": "float32", "default": -1.0},
                "vec": {"dtype": "float32", "shape": [3]},
                "tags": {"dtype": "int64", "shape": [None]},
            }
        }
    )
    train = tf.train
    records = []
    for i in range(40):
        feature = {
            "id": train.Feature(int64_list=train.Int64List(value=[i - 20])),
            "label": train.Feature(bytes_list=train.BytesList(value=[f"l{i}é".encode()])),
            "raw": train.Feature(bytes_list=train.BytesList(value=[b"\xff" * i, b""])),
            "vec": train.Feature(float_list=train.FloatList(value=[i, 0.5, -i])),
            "tags": train.Feature(int64_list=train.Int64List(value=list(range(i % 4)))),
        }
        if i % 3:
            feature["score"] = train.Feature(float_list=train.FloatList(value=[i / 3]))
        items = list(feature.items())
        random.Random(i).shuffle(items)
        ex = train.Example(features=train.Features(feature=dict(items)))
        records.append(ex.SerializeToString(deterministic=i % 2 == 0))
    cols = check_batch(schema, records)[1]
    assert slow_records(schema, records) == []
    parsed = tf.io.parse_example(tf.constant(records), to_tf_feature_spec(schema.feature_spec(), tf))
    assert cols["id"].tolist() == parsed["id"].numpy().tolist()
    assert [s.encode() for s in cols["label"]] == parsed["label"].numpy().tolist()
    assert cols["raw"].tolist() == parsed["raw"].numpy().tolist()
    np.testing.assert_array_equal(cols["score"], parsed["score"].numpy())
    np.testing.assert_array_equal(cols["vec"], parsed["vec"].numpy())
    assert [t.tolist() for t in cols["tags"]] == tf.RaggedTensor.from_sparse(parsed["tags"]).to_list()


# --------------------------------------------------------------------------- errors


def _with(i: int, **features: bytes | None) -> bytes:
    """Basic record ``i`` with features replaced (bytes) or removed (None), plus extra ones."""
    base = dict(_basic_features(i))
    for name, value in features.items():
        if value is None:
            base.pop(name)
        else:
            base[name] = value
    return example(*[entry(n, f) for n, f in base.items()])


BAD_RECORDS = {
    "missing": (_with(0, score=None), ValidationError, "score"),
    "wrong kind": (_with(0, id=wire.float_feature([1.0])), ValidationError, "id"),
    "empty scalar": (_with(0, id=wire.int64_feature([])), ValidationError, "id"),
    "two scalars": (_with(0, label=wire.bytes_feature([b"a", b"b"])), ValidationError, "label"),
    "short vector": (_with(0, vec=wire.float_feature([1.0] * 3)), ValidationError, "vec"),
    "long vector": (_with(0, vec=wire.float_feature([1.0] * 5)), ValidationError, "vec"),
    "bad utf-8": (_with(0, label=wire.bytes_feature([b"ok\xff"])), ValidationError, "label"),
    "unknown feature": (_with(0, extra=wire.int64_feature([1])), ValidationError, "extra"),
    "no feature kind": (_with(0, score=b""), ValidationError, "score"),
    "truncated": (BASIC_RECORDS[0][:-3], CodecError, None),
    "float bytes": (_with(0, score=ld(0x12, ld(0x0A, b"\x00\x00\x80"))), CodecError, None),
    "bad key utf-8": (example(wire.map_entry(b"\xff", wire.int64_feature([1]))), CodecError, None),
    "garbage": (b"\xff\xff\xff", CodecError, None),
    "empty record": (b"", ValidationError, "id"),
    "huge length": (b"\x0a\xff\xff\xff\xff\x0f" + BASIC_RECORDS[0], CodecError, None),
}


@pytest.mark.parametrize("case", list(BAD_RECORDS))
@pytest.mark.parametrize("position", [0, 5, 11])
def test_errors_match_generic_path(case: str, position: int) -> None:
    bad, cls, feature = BAD_RECORDS[case]
    records = list(BASIC_RECORDS)
    records[position] = bad
    kind, err = check_batch(BASIC, records)
    assert kind == "error" and err[0] is cls and err[3] == feature
    if cls is ValidationError:
        assert err[2] == position


def test_first_bad_record_is_reported() -> None:
    records = list(BASIC_RECORDS)
    records[3] = BAD_RECORDS["bad utf-8"][0]
    records[7] = BAD_RECORDS["truncated"][0]
    records[9] = BAD_RECORDS["missing"][0]
    _, err = check_batch(BASIC, records)
    assert err[0] is ValidationError and err[2] == 3


def _replace_entry(record: bytes, name: str, old: bytes, new: bytes | None) -> bytes:
    """``record`` with one map entry's Feature replaced (or the entry removed), re-framed."""
    length, size = _read_varint(record, 1)
    body = record[1 + size :]
    assert record[0] == 0x0A and len(body) == length
    before = entry(name, old)
    assert before in body
    return wire.example_from_entries([body.replace(before, b"" if new is None else entry(name, new))])


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = size = 0
    while True:
        b = data[at + size]
        value |= (b & 0x7F) << shift
        shift += 7
        size += 1
        if b < 0x80:
            return value, size


def test_tensor_errors() -> None:
    row = {**rich_row(0), "tu": np.zeros((1, 2), np.int32)}
    good = RICH.encode(row)
    shape = wire.int64_feature([1, 2])
    bad = [
        _replace_entry(good, "tu/shape", shape, wire.int64_feature([2, 2])),  # size does not match the bytes
        _replace_entry(good, "tu/shape", shape, wire.int64_feature([1, 2, 1])),  # wrong rank
        _replace_entry(good, "tu/shape", shape, wire.int64_feature([2, 1])),  # fixed dimension differs
        _replace_entry(good, "tu/shape", shape, wire.int64_feature([-1, 2])),
        _replace_entry(good, "tu/shape", shape, wire.float_feature([1.0, 2.0])),
        _replace_entry(good, "tu/shape", shape, None),
        _replace_entry(good, "t", wire.bytes_feature([row["t"].tobytes()]), wire.bytes_feature([b"\x00" * 11])),
        _replace_entry(good, "t", wire.bytes_feature([row["t"].tobytes()]), wire.bytes_feature([b"", b""])),
    ]
    assert slow_records(RICH, [good]) == []
    for record in bad:
        kind, err = check_batch(RICH, [good, record, good])
        assert kind == "error" and err[0] is ValidationError and err[2] == 1, err
    # a "/shape" entry for a tensor whose shape is fixed is not in the schema
    extra = wire.example_from_entries([_replace_entry(good, "i", wire.int64_feature([5]), None)[2:]])
    assert check_batch(RICH, [extra])[0] == "error"


# --------------------------------------------------------------------------- generated schemas and rows

NAMES = st.text(alphabet="ab_/é9", min_size=1, max_size=10)
LIST_SHAPES = st.sampled_from([[], [1], [3], [None], [2, 2], [0]])
TENSOR_DTYPES = st.sampled_from(["uint8", "int16", "int64", "float32", "float64", "bool", "complex64", ">i4"])
TENSOR_SHAPES = st.lists(st.one_of(st.none(), st.integers(0, 3)), max_size=3)


def scalar_values(dtype: str) -> st.SearchStrategy[Any]:
    if dtype == "int64":
        return st.integers(-(1 << 63), (1 << 63) - 1)
    if dtype == "float32":
        return st.floats(width=32)
    if dtype == "string":
        return st.text(max_size=6)
    return st.binary(max_size=6)


def list_values(dtype: str, shape: list[int | None]) -> st.SearchStrategy[Any]:
    if not shape:
        return scalar_values(dtype)
    if shape == [None]:
        return st.lists(scalar_values(dtype), max_size=4)
    size = int(np.prod(shape))
    return st.lists(scalar_values(dtype), min_size=size, max_size=size)


@st.composite
def schemas_and_rows(draw: st.DrawFn) -> tuple[Schema, list[dict[str, Any]]]:
    names = draw(st.lists(NAMES, min_size=1, max_size=5, unique=True))
    spec: dict[str, Any] = {}
    makers: dict[str, st.SearchStrategy[Any]] = {}
    for name in names:
        if draw(st.integers(0, 4)) == 0:
            dtype, dims = draw(TENSOR_DTYPES), draw(TENSOR_SHAPES)
            spec[name] = {"dtype": dtype, "shape": dims, "encoding": "tensor"}
            makers[name] = st.tuples(*[st.integers(0, 3) if d is None else st.just(d) for d in dims]).flatmap(
                lambda s, dt=dtype: hnp.arrays(np.dtype(dt), s)
            )
            if None not in dims and draw(st.booleans()):
                spec[name]["default"] = draw(makers[name]).tolist()
        else:
            dtype, dims = draw(st.sampled_from(["int64", "float32", "string", "bytes"])), draw(LIST_SHAPES)
            spec[name] = {"dtype": dtype, "shape": dims}
            makers[name] = list_values(dtype, dims)
            if draw(st.booleans()):
                default = draw(makers[name])
                spec[name]["default"] = default.decode("latin-1") if isinstance(default, bytes) else default
    try:
        schema = Schema.from_json({"features": spec})
    except SchemaError:  # e.g. a name clashing with a tensor's "/shape" entry, or a NaN default
        assume(False)
    rows = []
    for _ in range(draw(st.integers(1, 6))):
        row = {}
        for name, feat in schema.features.items():
            if not feat.has_default or draw(st.booleans()):
                row[name] = draw(makers[name])
        rows.append(row)
    return schema, rows


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas_and_rows())
def test_generated_schemas_match_generic_path(case: tuple[Schema, list[dict[str, Any]]]) -> None:
    schema, rows = case
    try:
        records = [schema.encode(r) for r in rows]
    except (ValidationError, CodecError):  # a value the encoder refuses (e.g. float32 overflow)
        assume(False)
    kind, _ = check_batch(schema, records)
    assert kind == "ok"
    assert slow_records(schema, records) == []


EDITS = st.lists(
    st.tuples(st.sampled_from(["set", "insert", "delete"]), st.integers(0, 10_000), st.integers(0, 255)),
    min_size=1,
    max_size=3,
)
# a batch long enough for every fast-path shortcut (e.g. repeated texts decoded once)
LONG_BATCH = [RICH.encode(rich_row(i % 9)) for i in range(100)]


def _damage(record: bytes, edits: list[tuple[str, int, int]]) -> bytes:
    data = bytearray(record)
    for op, where, value in edits:
        at = where % (len(data) + 1)
        if op == "set" and at < len(data):
            data[at] = value
        elif op == "insert":
            data[at:at] = bytes([value])
        elif data and at < len(data):
            del data[at]
    return bytes(data)


@settings(max_examples=500, deadline=None)
@given(st.integers(0, len(LONG_BATCH) - 1), EDITS)
def test_corrupted_records_match_generic_path(index: int, edits: list[tuple[str, int, int]]) -> None:
    """Damaged bytes: either both paths decode the same columns or both raise the same error."""
    records = list(LONG_BATCH)
    records[index] = _damage(records[index], edits)
    check_batch(RICH, records)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(BASIC_RECORDS) - 1), EDITS)
def test_corrupted_basic_records_match_generic_path(index: int, edits: list[tuple[str, int, int]]) -> None:
    records = list(BASIC_RECORDS)
    records[index] = _damage(records[index], edits)
    check_batch(BASIC, records)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(range(len(BAD_RECORDS) + 4)), min_size=1, max_size=8))
def test_mixed_batches_match_generic_path(picks: list[int]) -> None:
    bad = [v[0] for v in BAD_RECORDS.values()]
    pool = bad + BASIC_RECORDS[:4]
    check_batch(BASIC, [pool[i] for i in picks])


def test_joined_lists_with_a_repeated_and_a_missing_key() -> None:
    """One record holds the list twice (protobuf keeps the last), another lacks it: as many
    entries as records, yet not one each. The columns asked with ``ragged`` are those without."""
    v = {"dtype": "int64", "shape": [None], "default": [4]}
    schema = Schema.from_json({"features": {"a": {"dtype": "int64"}, "v": v}})
    twice = schema.encode({"a": 9, "v": [1, 2]}) + schema.encode({"a": 9, "v": [7]})
    lacking = Schema.from_json({"features": {"a": {"dtype": "int64"}}}).encode({"a": 5})
    whole = schema.encode({"a": 1, "v": [3, 3, 3]})
    for records in ([twice, lacking], [whole, twice, lacking, whole], [lacking, twice]):
        check_batch(schema, records)
        absent: dict[str, np.ndarray] = {}
        columns = schema.decode_batch(records, absent, {})
        want = [[3, 3, 3] if r is whole else [7] if r is twice else [4] for r in records]
        assert [value.tolist() for value in columns["v"]] == want
        assert absent["v"].tolist() == [r is lacking for r in records]


# --------------------------------------------------------------------------- a projection (columns=)


def check_projection(schema: Schema, records: Sequence[bytes], columns: Sequence[str]) -> None:
    """decode_batch(columns=...) gives the full decode's columns of those features, in the
    schema's order; it raises only where the full decode raises (the other features are not
    looked at, so it may decode records the full decode refuses)."""
    full = outcome(lambda: schema.decode_batch(list(records)))
    part = outcome(lambda: schema.decode_batch(list(records), columns=columns))
    if part[0] == "error":
        assert full[0] == "error", part
    if full[0] == "ok":
        assert part[0] == "ok", part
        assert list(part[1]) == [name for name in full[1] if name in columns]
        for name in part[1]:
            same(part[1][name], full[1][name], name)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schemas_and_rows(), st.data())
def test_a_projection_decodes_the_full_decodes_columns(case: tuple[Schema, list[dict[str, Any]]], data: Any) -> None:
    schema, rows = case
    try:
        records = [schema.encode(r) for r in rows]
    except (ValidationError, CodecError):
        assume(False)
    columns = data.draw(st.lists(st.sampled_from(list(schema.features)), unique=True))
    check_projection(schema, records, columns)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, len(LONG_BATCH) - 1), EDITS, st.lists(st.sampled_from(list(RICH.features)), unique=True))
def test_a_projection_of_corrupted_records(index: int, edits: list[tuple[str, int, int]], columns: list[str]) -> None:
    records = list(LONG_BATCH)
    records[index] = _damage(records[index], edits)
    check_projection(RICH, records, columns)


def test_a_projection_does_not_look_at_the_other_features() -> None:
    """A long vector (another feature) fails the full decode, not a decode of ids and labels."""
    records = [*BASIC_RECORDS, _with(3, vec=wire.float_feature([1.0] * 5))]
    with pytest.raises(ValidationError, match="vec"):
        BASIC.decode_batch(records)
    got = BASIC.decode_batch(records, columns=["label", "id"])
    assert list(got) == ["id", "label"]  # the schema's order
    want = BASIC.decode_batch(BASIC_RECORDS[:12] + BASIC_RECORDS[3:4])
    same(got["id"], want["id"], "id")
    same(got["label"], want["label"], "label")
    assert BASIC.decode_batch(records, columns=[]) == {}


def test_decoded_rows_own_writable_arrays() -> None:
    """Schema.decode's quick path (every feature plain) hands out arrays a caller may change,
    not views of the record."""
    schema = Schema.from_json(
        {
            "features": {
                "t": {"dtype": "uint16", "shape": [2, 3], "encoding": "tensor"},
                "iv": {"dtype": "int64", "shape": [None]},
                "f2": {"dtype": "float32", "shape": [2]},
                "s": {"dtype": "string"},
            }
        }
    )
    assert schema._codec.quick is not None
    record = schema.encode({"t": np.ones((2, 3), dtype=np.uint16), "iv": [1, 2], "f2": [0.5, 1.5], "s": "é"})
    row = schema.decode(record)
    for name in ("t", "iv", "f2"):
        assert row[name].flags.writeable, name  # a view of the record bytes would be read-only
    check_row(schema, record)
