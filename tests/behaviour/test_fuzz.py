"""Fuzzing: damaged files, random bytes and odd values may only ever raise CatalogError.

No other exception type, no MemoryError, no hang: each call runs under a watchdog timer
and tracemalloc, and hypothesis' deadline flags anything slow.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import math
import random
import signal
import struct
import tracemalloc
import zlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from catalog.errors import CatalogError, CodecError, CorruptRecordError
from catalog.tfrecord import (
    RecordWriter,
    decode_example,
    decode_sequence_example,
    encode_example,
    encode_sequence_example,
    read_record_batches,
    read_records,
)
from catalog.tfrecord.framing import detect_compression, masked_crc32c

FUZZ = settings(
    max_examples=250,
    deadline=timedelta(seconds=2),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
MEMORY_LIMIT = 64 << 20


class Hang(BaseException):
    """Raised by the watchdog; a BaseException so no `except Exception` in the library can eat it."""


@contextlib.contextmanager
def guarded(seconds: float = 5.0) -> Iterator[None]:
    """Fail (instead of hanging) after ``seconds``, and fail if traced memory peaks too high."""
    if not hasattr(signal, "setitimer"):  # pragma: no cover - not on POSIX
        pytest.skip("needs signal.setitimer")

    def on_alarm(_signum: int, _frame: Any) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    tracemalloc.start()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
        assert peak < MEMORY_LIMIT, f"peak traced memory {peak} bytes"
    finally:
        tracemalloc.stop()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _framed(records: list[bytes]) -> bytes:
    buf = io.BytesIO()
    with RecordWriter(buf) as w:
        w.write_many(records)
    return buf.getvalue()


def _make_bases() -> dict[str, bytes]:
    rng = random.Random(7)
    records = [
        encode_example({"id": i, "x": [0.5 * i, 1.5], "name": f"r{i}"}) if i % 2 else rng.randbytes(rng.randrange(40))
        for i in range(8)
    ]
    raw = _framed(records)
    bases = {"raw": raw, "empty": b"", "one": _framed([b"only"])}
    for name in ("gzip", "zlib"):
        buf = io.BytesIO()
        with RecordWriter(buf, name) as w:
            w.write_many(records)
        bases[name] = buf.getvalue()
    bases["gzip-two-members"] = gzip.compress(raw[:40]) + gzip.compress(raw[40:])
    return bases


BASES = _make_bases()
MODES: list[str | None] = ["auto", None, "gzip", "zlib"]


@st.composite
def mutated_files(draw: st.DrawFn) -> bytes:
    data = bytearray(BASES[draw(st.sampled_from(sorted(BASES)))])
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "truncate", "insert", "delete", "length"]))
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "insert" or not data:
            data[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif op == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            data[pos] = draw(st.integers(0, 255))
        elif op == "truncate":
            del data[pos:]
        elif op == "delete":
            del data[pos : pos + draw(st.integers(1, 16))]
        else:  # write a (CRC-valid) header claiming some length, possibly huge
            length = draw(st.sampled_from([0, 1, 255, 1 << 20, (1 << 20) - 14, 1 << 31, 1 << 40, 2**64 - 1]))
            packed = struct.pack("<Q", length)
            data[pos : pos + 12] = packed + struct.pack("<I", masked_crc32c(packed))
    return bytes(data)


class ReadOnlyStream:
    def __init__(self, data: bytes) -> None:
        self._buf = io.BytesIO(data)

    def read(self, n: int = -1) -> bytes:
        return self._buf.read(n)


def _try_read(source: Any, compression: str | None, verify: bool) -> list[bytes] | None:
    """All records, or None if the library refused the input with a CatalogError."""
    try:
        out = list(read_records(source, compression=compression, verify=verify))
    except CorruptRecordError as e:
        assert e.offset >= 0
        assert isinstance(e.reason, str) and e.reason
        return None
    except CatalogError:
        return None
    assert all(type(r) is bytes for r in out)
    return out


def _check_reads(data: bytes) -> None:
    for compression in MODES:
        for verify in (True, False):
            with guarded():
                out = _try_read(data, compression, verify)
            raw = compression is None or (compression == "auto" and detect_compression(data) is None)
            if out is not None and verify and raw:
                # A raw file that reads cleanly is exactly the framing of what was read.
                assert _framed(out) == data
    with guarded():
        _try_read(ReadOnlyStream(data), "auto", True)
        with contextlib.suppress(CatalogError):
            for batch in read_record_batches(io.BytesIO(data)):
                assert isinstance(batch, list) and batch


@FUZZ
@given(mutated_files())
def test_mutated_files_only_raise_catalog_errors(data: bytes) -> None:
    _check_reads(data)


@FUZZ
@given(
    st.one_of(
        st.binary(max_size=2048),
        st.tuples(
            st.sampled_from([b"\x1f\x8b\x08", b"\x78\x9c", b"\x78\x01", b"\x1f\x8b"]), st.binary(max_size=512)
        ).map(b"".join),
    )
)
def test_random_bytes_only_raise_catalog_errors(data: bytes) -> None:
    _check_reads(data)
    with guarded():
        _try_decode(data)


def test_valid_bases_read_cleanly() -> None:
    # the fuzz bases themselves are valid, so mutations start from real files
    for name, data in BASES.items():
        assert _try_read(data, "auto", True) is not None, name


# --------------------------------------------------------------------------- decoding


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _try_decode(data: bytes) -> None:
    try:
        decoded = decode_example(data)
    except CodecError:
        pass
    else:
        assert all(type(k) is str and type(v) is list for k, v in decoded.items())
        assert all(type(x) in (int, float, bytes) for v in decoded.values() for x in v)
        # whatever decodes re-encodes, to the same values
        assert _same(decode_example(encode_example(decoded)), decoded)
    try:
        context, lists = decode_sequence_example(data)
    except CodecError:
        pass
    else:
        assert _same(decode_sequence_example(encode_sequence_example(context, lists)), (context, lists))


EXAMPLES = [
    encode_example({"id": 5, "f": [0.5, -2.0], "s": "héllo", "b": [b"\x00", b""], "e": []}),
    encode_example({"big": list(range(-3, 300, 7)), "neg": -(2**63)}),
    encode_sequence_example({"c": 1}, {"t": [[1, 2], [3]], "w": [[b"a"], [b"b", b"c"]], "f": [[0.5]]}),
    b"",
]


@st.composite
def mutated_examples(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(EXAMPLES)))
    for _ in range(draw(st.integers(1, 3))):
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        op = draw(st.sampled_from(["flip", "set", "truncate", "insert"]))
        if op == "insert" or not data:
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif op == "set":
            data[pos] = draw(st.integers(0, 255))
        else:
            del data[pos:]
    return bytes(data)


@FUZZ
@given(mutated_examples())
def test_mutated_examples_only_raise_codec_errors(data: bytes) -> None:
    with guarded():
        _try_decode(data)


# --------------------------------------------------------------------------- encoding

_DTYPES = [
    np.int8,
    np.int64,
    np.uint8,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.longdouble,
    np.bool_,
    np.complex64,
    np.dtype("U3"),
    np.dtype("S3"),
    np.dtype("datetime64[s]"),
]

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(),
    st.floats(width=32),
    st.binary(max_size=8),
    st.text(max_size=8),
    st.sampled_from(["\ud800", "ok\udfff", "\x00"]),
    st.complex_numbers(max_magnitude=10),
    st.builds(object),
    st.builds(bytearray, st.binary(max_size=4)),
    st.builds(memoryview, st.binary(max_size=4)),
    st.sampled_from(
        [np.int8(-1), np.uint64(2**64 - 1), np.float16(1.5), np.float64(1e300), np.bool_(True), np.bytes_(b"nb")]
    ),
    st.sampled_from([np.str_("ns"), np.datetime64("2020-01-01"), np.float32("nan"), np.longdouble(1e10)]),
)
_arrays = st.one_of(
    hnp.arrays(st.sampled_from(_DTYPES), hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3)),
    hnp.arrays(object, st.integers(0, 3), elements=_scalars),
)
_values = st.recursive(
    st.one_of(_scalars, _arrays),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=3), inner, max_size=2),
        st.frozensets(st.integers(), max_size=2),
    ),
    max_leaves=6,
)
_names = st.one_of(st.text(max_size=6), st.sampled_from(["\ud800", 1, b"b", None]))


@FUZZ
@given(st.dictionaries(_names, _values, max_size=4))
def test_encode_example_only_raises_codec_errors(features: dict[Any, Any]) -> None:
    with guarded():
        try:
            data = encode_example(features)
        except CodecError:
            return
    assert type(data) is bytes
    decoded = decode_example(data)
    assert set(decoded) == {k for k in features}  # every name was a str to get here
    for name, value in features.items():
        if isinstance(value, np.ndarray):
            assert len(decoded[name]) == value.size
        elif isinstance(value, (list, tuple)):
            assert len(decoded[name]) == len(value)
        else:
            assert len(decoded[name]) == 1


@FUZZ
@given(st.dictionaries(_names, _values, max_size=3), st.dictionaries(_names, _values, max_size=3))
def test_encode_sequence_example_only_raises_codec_errors(context: dict[Any, Any], lists: dict[Any, Any]) -> None:
    with guarded():
        try:
            data = encode_sequence_example(context, lists)
        except CodecError:
            return
    got_context, got_lists = decode_sequence_example(data)
    assert set(got_context) == set(context)
    assert set(got_lists) == set(lists)
    assert all(len(got_lists[k]) == len(v) for k, v in lists.items())


_records = st.one_of(
    _values,
    st.binary(max_size=16),
    _arrays,
    st.sampled_from([np.array([b"x"], dtype=object), np.array(["2020-01-01"], dtype="datetime64[D]")]),
)


@FUZZ
@given(st.lists(_records, max_size=6), st.sampled_from([None, "gzip", "zlib"]))
def test_writer_only_raises_catalog_errors(values: list[Any], compression: str | None) -> None:
    buf = io.BytesIO()
    accepted: list[Any] = []
    with guarded(), RecordWriter(buf, compression) as w:
        for value in values:
            try:
                w.write(value)
            except CatalogError:
                continue
            accepted.append(value)
    for value in accepted:
        # only buffers of plain data are records: no text, numbers, lists or object pointers
        assert not isinstance(value, (str, int, float, list, tuple, dict, frozenset, type(None)))
        assert not (isinstance(value, np.ndarray) and value.dtype.hasobject)
    assert w.records == len(accepted)
    expected = [
        bytes(value) if isinstance(value, (bytes, bytearray)) else np.asarray(value).tobytes() for value in accepted
    ]
    assert list(read_records(buf.getvalue())) == expected


def test_zlib_stream_with_trailing_member_is_rejected() -> None:
    # zlib has no members: bytes after the end of the stream are damage, not a second stream
    data = zlib.compress(_framed([b"a"]))
    with pytest.raises(CorruptRecordError):
        list(read_records(data + data))
