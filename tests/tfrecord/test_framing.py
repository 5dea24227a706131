"""TFRecord framing: golden vectors, writer/reader round trips, damage detection, memory bounds.

CRCs are checked against a small CRC32C written here from the polynomial (not the crc32c
package the library uses), so a wrong table, seed, reflection or mask in the library shows up.
"""

from __future__ import annotations

import gzip
import io
import itertools
import os
import random
import struct
import time
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import pytest
from crc32c import crc32c as crc32c_package
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.errors import CatalogError, CorruptRecordError
from catalog.tfrecord import (
    RecordWriter,
    detect_compression,
    framing,
    masked_crc32c,
    read_record_batches,
    read_records,
)
from catalog.tfrecord.framing import detect_file_compression, frame_header, normalize_compression

MIB = 1 << 20

# --------------------------------------------------------------------------- independent CRC32C

_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected


def crc32c_bitwise(data: bytes) -> int:
    """CRC32C one bit at a time, straight from the definition."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (_POLY if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ (_POLY if c & 1 else 0)
        table.append(c)
    return table


_TABLE = _table()


def crc32c_table(data: bytes, crc: int = 0) -> int:
    """The same CRC a byte at a time (for the few-KB inputs of the property tests)."""
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc = (crc >> 8) ^ _TABLE[(crc ^ byte) & 0xFF]
    return crc ^ 0xFFFFFFFF


def mask(c: int) -> int:
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) % 2**32


def frame(data: bytes) -> bytes:
    """One record framed by hand: u64 length, masked crc of it, data, masked crc of data."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", mask(crc32c_table(length))) + data + struct.pack("<I", mask(crc32c_table(data)))


def frame_all(records: list[bytes]) -> bytes:
    return b"".join(frame(r) for r in records)


class ReadOnlyStream:
    """A stream with nothing but read(): not seekable, size unknown, like a pipe."""

    def __init__(self, data: bytes | IO[bytes]) -> None:
        self._f = io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data

    def read(self, n: int = -1) -> bytes:
        return self._f.read(n)


class TrickleStream(io.RawIOBase):
    """A non-seekable raw stream that returns at most 64 KiB per read (short reads, like a pipe)."""

    def __init__(self, data: bytes) -> None:
        self._buf = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        chunk = self._buf.read(min(len(b), 1 << 16))
        b[: len(chunk)] = chunk
        return len(chunk)


# --------------------------------------------------------------------------- golden vectors

# Framed b"" and b"hello", worked out with crc32c_bitwise by hand (TensorFlow writes the same
# bytes: see test_tf_compat.py).
GOLDEN_EMPTY = bytes.fromhex("000000000000000029039807d8ea82a2")
GOLDEN_HELLO = bytes.fromhex("0500000000000000eab2043e68656c6c6fbb1f1c19")


def test_crc32c_reference_check_values() -> None:
    # The catalogue check value for CRC-32C, and the RFC 3720 (iSCSI) test vectors.
    assert crc32c_bitwise(b"123456789") == 0xE3069283
    assert crc32c_bitwise(bytes(32)) == 0x8A9136AA
    assert crc32c_bitwise(b"\xff" * 32) == 0x62A8AB43
    assert crc32c_bitwise(bytes(range(32))) == 0x46DD794E
    assert crc32c_table(b"123456789") == 0xE3069283


def test_mask_of_known_crcs() -> None:
    assert mask(0) == 0xA282EAD8  # the CRC of b"" is 0: the mask is just the delta
    assert masked_crc32c(b"") == 0xA282EAD8
    assert masked_crc32c(b"123456789") == mask(0xE3069283)
    # rotate right by 15 then add the delta, by hand: 0xE3069283 -> 0x2507C60D, + delta = 0xC78AB0E5
    assert mask(0xE3069283) == 0xC78AB0E5 == (0x2507C60D + 0xA282EAD8) % 2**32


def test_golden_frames_match_hand_computation() -> None:
    for data, golden in ((b"", GOLDEN_EMPTY), (b"hello", GOLDEN_HELLO)):
        length = struct.pack("<Q", len(data))
        by_hand = (
            length
            + struct.pack("<I", mask(crc32c_bitwise(length)))
            + data
            + struct.pack("<I", mask(crc32c_bitwise(data)))
        )
        assert by_hand == golden
        assert frame_header(len(data)) == golden[:12]


def test_writer_emits_golden_bytes_and_reader_accepts_them() -> None:
    buf = io.BytesIO()
    with RecordWriter(buf) as w:
        w.write(b"")
        w.write(b"hello")
    assert buf.getvalue() == GOLDEN_EMPTY + GOLDEN_HELLO
    assert list(read_records(GOLDEN_EMPTY + GOLDEN_HELLO)) == [b"", b"hello"]


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_masked_crc_matches_independent_implementation(data: bytes) -> None:
    assert masked_crc32c(data) == mask(crc32c_bitwise(data))
    assert masked_crc32c(bytearray(data)) == masked_crc32c(memoryview(data)) == masked_crc32c(data)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(max_size=64), max_size=20))
def test_uncompressed_writer_output_is_exact_framing(records: list[bytes]) -> None:
    buf = io.BytesIO()
    with RecordWriter(buf) as w:
        w.write_many(records)
    assert buf.getvalue() == frame_all(records)


# --------------------------------------------------------------------------- compression names / detection


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [(None, None), ("", None), ("none", None), ("NONE", None), ("gzip", "gzip"), ("GZIP", "gzip"), ("ZLib", "zlib")],
)
def test_normalize_compression(spelling: str | None, expected: str | None) -> None:
    assert normalize_compression(spelling) == expected


@pytest.mark.parametrize("bad", ["bz2", "gz", "auto2", "lz4"])
def test_unknown_compression_is_rejected(bad: str) -> None:
    with pytest.raises(CatalogError, match="unknown compression"):
        normalize_compression(bad)
    with pytest.raises(CatalogError):
        RecordWriter(io.BytesIO(), bad)
    with pytest.raises(CatalogError):
        list(read_records(frame(b"x"), compression=bad))


def test_detect_compression_signatures() -> None:
    assert detect_compression(frame(b"abc")) is None
    assert detect_compression(gzip.compress(frame(b"abc"))) == "gzip"
    for level in (0, 1, 6, 9):
        assert detect_compression(zlib.compress(frame(b"abc"), level)) == "zlib"
    assert detect_compression(b"") is None
    assert detect_file_compression(gzip.compress(b"x")) == "gzip"


@pytest.mark.parametrize("length", [0x9C78, 0x8B1F, 0x0178])
def test_raw_record_whose_length_looks_like_a_signature_is_read_raw(length: int) -> None:
    # 0x9c78 stored little-endian starts with 78 9c (a zlib header), 0x8b1f with 1f 8b (gzip).
    record = random.Random(length).randbytes(length)
    data = frame(record) + frame(b"tail")
    assert data[:2] in (b"\x78\x9c", b"\x1f\x8b", b"\x78\x01")
    assert detect_compression(data) is None
    assert list(read_records(data)) == [record, b"tail"]


# --------------------------------------------------------------------------- round trips

_COMPRESSIONS = [None, "gzip", "zlib"]


def _write(records: list[bytes], compression: str | None, target: Any) -> RecordWriter:
    with RecordWriter(target, compression) as w:
        for r in records:
            w.write(r)
    return w


def _decompress(data: bytes, compression: str | None) -> bytes:
    if compression is None:
        return data
    return zlib.decompress(data, 31 if compression == "gzip" else 15)


def _check_counters(w: RecordWriter, records: list[bytes], file_data: bytes) -> None:
    assert w.records == len(records)
    assert w.bytes == sum(len(r) + 16 for r in records)
    assert w.file_bytes == len(file_data)
    assert w.checksum == crc32c_table(file_data)


_records = st.lists(st.binary(max_size=300), max_size=25)
_counter = itertools.count()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=_records, compression=st.sampled_from(_COMPRESSIONS))
def test_round_trip_through_a_path(
    tmp_path_factory: pytest.TempPathFactory, records: list[bytes], compression: str | None
) -> None:
    path = tmp_path_factory.getbasetemp() / f"rt-{next(_counter)}.tfrecord"
    w = _write(records, compression, path)
    file_data = path.read_bytes()
    _check_counters(w, records, file_data)
    assert _decompress(file_data, compression) == frame_all(records)
    assert list(read_records(path)) == records
    assert list(read_records(str(path), compression=compression)) == records
    assert list(read_records(path, compression=(compression or "none").upper())) == records
    batches = list(read_record_batches(path))
    assert all(isinstance(b, list) and b for b in batches)
    assert [r for b in batches for r in b] == records
    with open(path, "rb") as f:
        assert list(read_records(f)) == records
    path.unlink()


@settings(max_examples=60, deadline=None)
@given(records=_records, compression=st.sampled_from(_COMPRESSIONS))
def test_round_trip_through_memory(records: list[bytes], compression: str | None) -> None:
    buf = io.BytesIO()
    w = _write(records, compression, buf)
    assert not buf.closed  # the writer does not close a stream it was given
    data = buf.getvalue()
    _check_counters(w, records, data)
    for source in (data, bytearray(data), memoryview(data), io.BytesIO(data), ReadOnlyStream(data)):
        assert list(read_records(source)) == records
    assert list(read_records(data, compression=compression)) == records
    assert [r for b in read_record_batches(io.BytesIO(data), compression=compression) for r in b] == records


@settings(max_examples=40, deadline=None)
@given(records=st.lists(st.binary(max_size=50), min_size=1, max_size=10), compression=st.sampled_from(["gzip", "zlib"]))
def test_flush_makes_written_records_decodable(records: list[bytes], compression: str) -> None:
    buf = io.BytesIO()
    w = RecordWriter(buf, compression)
    w.write_many(records)
    w.flush()
    # Everything written so far must inflate to exactly the framed records (sync point).
    d = zlib.decompressobj(31 if compression == "gzip" else 15)
    assert d.decompress(buf.getvalue()) == frame_all(records)
    assert not d.eof
    w.write(b"after flush")
    w.close()
    assert list(read_records(buf.getvalue())) == [*records, b"after flush"]
    _check_counters(w, [*records, b"after flush"], buf.getvalue())


def test_writer_accepts_bytes_like_and_rejects_others() -> None:
    buf = io.BytesIO()
    w = RecordWriter(buf)
    w.write(bytearray(b"ab"))
    w.write(memoryview(b"cd"))
    w.write(memoryview(bytes(range(12))).cast("B", (3, 4)))
    w.write(memoryview(b"a-b-c")[::2])  # not contiguous: copied in order
    w.write(np.arange(4, dtype="<u2"))  # any buffer: its raw bytes
    bad_values: list[Any] = [
        "text",
        12,
        None,
        [1, 2],
        object(),
        np.array([b"x", 1], dtype=object),  # a buffer of object pointers, not data
        np.array(["2020-01-01"], dtype="datetime64[D]"),  # no buffer export (ValueError)
    ]
    for bad in bad_values:
        with pytest.raises(CatalogError, match="a record must be bytes"):
            w.write(bad)
    w.close()
    assert list(read_records(buf.getvalue())) == [
        b"ab",
        b"cd",
        bytes(range(12)),
        b"abc",
        b"\x00\x00\x01\x00\x02\x00\x03\x00",
    ]
    assert w.records == 5


def test_writer_after_close() -> None:
    buf = io.BytesIO()
    w = RecordWriter(buf, "gzip")
    w.write(b"x")
    w.close()
    size = len(buf.getvalue())
    w.close()  # idempotent, writes nothing more
    assert len(buf.getvalue()) == size
    with pytest.raises(CatalogError, match="closed"):
        w.write(b"y")
    with pytest.raises(CatalogError, match="closed"):
        w.write_many([b"y"])
    with pytest.raises(CatalogError, match="closed"):
        w.flush()
    assert list(read_records(buf.getvalue())) == [b"x"]


def test_writer_closes_a_file_it_opened(tmp_path: Path) -> None:
    path = tmp_path / "owned.tfrecord"
    w = RecordWriter(str(path))
    w.write(b"abc")
    w.close()
    assert w._file.closed
    assert path.read_bytes() == frame(b"abc")


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
@pytest.mark.parametrize("level", [0, 1, 9])
def test_compression_levels_round_trip(compression: str, level: int) -> None:
    records = [bytes([i % 7]) * (i * 37) for i in range(60)]
    buf = io.BytesIO()
    with RecordWriter(buf, compression, level=level) as w:
        w.write_many(records)
    assert _decompress(buf.getvalue(), compression) == frame_all(records)
    assert list(read_records(buf.getvalue())) == records


def test_empty_files_hold_zero_records(tmp_path: Path) -> None:
    path = tmp_path / "empty.tfrecord"
    path.write_bytes(b"")
    assert list(read_records(path)) == []
    assert list(read_record_batches(path)) == []
    for source in (b"", bytearray(), memoryview(b""), io.BytesIO(), ReadOnlyStream(b"")):
        assert list(read_records(source)) == []
    for compression in ("gzip", "zlib"):
        buf = io.BytesIO()
        w = _write([], compression, buf)
        assert w.records == 0 and w.bytes == 0 and w.file_bytes == len(buf.getvalue()) > 0
        assert list(read_records(buf.getvalue())) == []
        assert list(read_records(buf.getvalue(), compression=compression)) == []


def _big(n: int, seed: int) -> bytes:
    # Cheap but not constant, so a misplaced byte changes the CRC.
    block = random.Random(seed).randbytes(4096)
    return (block * (n // 4096 + 1))[:n]


_EDGE_SIZES = [MIB - 17, MIB - 16, MIB - 14, MIB - 13, MIB - 12, MIB, MIB + 17, 5 * MIB + 3]


@pytest.fixture(scope="module")
def large_records() -> list[bytes]:
    out: list[bytes] = []
    for i, n in enumerate(_EDGE_SIZES):
        out.append(b"small-%d" % i)
        out.append(_big(n, i))
    out.append(b"")
    return out


@pytest.mark.parametrize("compression", _COMPRESSIONS)
def test_large_records_round_trip(tmp_path: Path, large_records: list[bytes], compression: str | None) -> None:
    path = tmp_path / "large.tfrecord"
    w = _write(large_records, compression, path)
    data = path.read_bytes()
    assert w.records == len(large_records)
    assert w.bytes == sum(len(r) + 16 for r in large_records)
    assert w.file_bytes == len(data)
    assert w.checksum == crc32c_package(data)  # MiBs: too slow for the pure-Python CRC here
    assert _decompress(data, compression) == b"".join(
        frame_header(len(r)) + r + struct.pack("<I", masked_crc32c(r)) for r in large_records
    )
    sources: list[Callable[[], Any]] = [
        lambda: path,
        lambda: str(path),
        lambda: data,
        lambda: ReadOnlyStream(data),
        lambda: TrickleStream(data),
    ]
    for make in sources:
        got = list(read_records(make()))
        assert len(got) == len(large_records)
        assert got == large_records
    assert [r for b in read_record_batches(path, compression=compression) for r in b] == large_records


@pytest.mark.parametrize("size", [MIB - 16, MIB - 15, MIB - 14, MIB - 13, MIB - 12, MIB - 11])
@pytest.mark.parametrize("compression", _COMPRESSIONS)
def test_record_whose_footer_straddles_the_first_chunk(size: int, compression: str | None) -> None:
    # A first record of about 1 MiB puts its 4-byte data CRC across the end of the first chunk.
    records = [_big(size, size), b"next"]
    buf = io.BytesIO()
    _write(records, compression, buf)
    data = buf.getvalue()
    for source in (data, ReadOnlyStream(data), TrickleStream(data)):
        assert list(read_records(source)) == records


# --------------------------------------------------------------------------- damage

R0, R1, R2 = b"first record " * 3, bytes(range(256)) + b"middle", b"last one"
OFF1 = 16 + len(R0)  # byte offset of R1
OFF2 = OFF1 + 16 + len(R1)
VALID = frame_all([R0, R1, R2])


def _flip(data: bytes, index: int, bit: int = 0) -> bytes:
    out = bytearray(data)
    out[index] ^= 1 << bit
    return bytes(out)


DAMAGE: dict[str, tuple[bytes, int]] = {
    "payload bit": (_flip(VALID, OFF1 + 12 + 100, 3), OFF1),
    "length bit": (_flip(VALID, OFF1 + 1, 0), OFF1),
    "length high bit": (_flip(VALID, OFF1 + 7, 7), OFF1),
    "length crc bit": (_flip(VALID, OFF1 + 9, 5), OFF1),
    "data crc bit": (_flip(VALID, OFF2 - 2, 6), OFF1),
    "last payload bit": (_flip(VALID, OFF2 + 12, 0), OFF2),
    "cut inside header": (VALID[: OFF1 + 5], OFF1),
    "cut after header": (VALID[: OFF1 + 12], OFF1),
    "cut inside payload": (VALID[: OFF1 + 40], OFF1),
    "cut inside data crc": (VALID[: OFF2 - 1], OFF1),
    "trailing 5 bytes": (VALID + b"\x00abcd", len(VALID)),
    "trailing 11 bytes": (VALID + b"x" * 11, len(VALID)),
    "trailing 12 bytes": (VALID + bytes(12), len(VALID)),
    "trailing 40 bytes": (VALID + b"garbage after the end of the file!!!!!!!", len(VALID)),
}


def _raises_corrupt(source: Any, **kwargs: Any) -> CorruptRecordError:
    with pytest.raises(CorruptRecordError) as info:
        for _ in read_records(source, **kwargs):
            pass
    return info.value


def test_undamaged_file_reads() -> None:
    assert list(read_records(VALID)) == [R0, R1, R2]


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damage_is_reported_at_the_bad_record(tmp_path: Path, kind: str) -> None:
    data, offset = DAMAGE[kind]
    path = tmp_path / "damaged.tfrecord"
    path.write_bytes(data)
    for source in (str(path), path):
        err = _raises_corrupt(source)
        assert err.path == str(path)
        assert err.offset == offset
        assert not err.compressed
        assert str(path) in str(err) and f"byte {offset}" in str(err)
    with open(path, "rb") as f:
        err = _raises_corrupt(f)
    assert (err.path, err.offset) == (str(path), offset)
    for mem in (data, bytearray(data), memoryview(data), io.BytesIO(data), ReadOnlyStream(data)):
        err = _raises_corrupt(mem)
        assert err.path is None
        assert err.offset == offset
    assert _raises_corrupt(path, compression=None).offset == offset


@pytest.mark.parametrize("kind", list(DAMAGE))
@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_damage_inside_a_valid_compressed_stream(tmp_path: Path, kind: str, compression: str) -> None:
    data, offset = DAMAGE[kind]
    packed = gzip.compress(data) if compression == "gzip" else zlib.compress(data)
    path = tmp_path / f"damaged.{compression}"
    path.write_bytes(packed)
    err = _raises_corrupt(path)
    assert err.path == str(path)
    assert err.offset == offset  # offset in the decompressed stream
    assert err.compressed
    assert _raises_corrupt(packed, compression=compression).offset == offset


@pytest.mark.parametrize("where", ["payload", "data crc", "cut payload"])
def test_damage_in_a_large_record(tmp_path: Path, where: str) -> None:
    big = _big(3 * MIB, 7)
    good = frame(b"a" * 10) + frame(b"b" * 20)
    start = len(good)
    data = good + frame_header(len(big)) + big + struct.pack("<I", masked_crc32c(big)) + frame(b"z")
    if where == "payload":
        data = _flip(data, start + 12 + 2 * MIB, 4)
    elif where == "data crc":
        data = _flip(data, start + 12 + len(big) + 3, 1)
    else:
        data = data[: start + 12 + MIB + 5]
    path = tmp_path / "big.tfrecord"
    path.write_bytes(data)
    for source in (path, data, ReadOnlyStream(data), gzip.compress(data, 1)):
        err = _raises_corrupt(source)
        assert err.offset == start
    assert _raises_corrupt(path).path == str(path)


@pytest.mark.parametrize("length", [2**31, 2**40, 2**64 - 1])
def test_lying_length_raises_fast_without_allocating(tmp_path: Path, length: int) -> None:
    data = frame_header(length) + b"abc"  # 15 bytes: a valid header, then almost nothing
    assert len(data) == 15
    path = tmp_path / "liar.tfrecord"
    path.write_bytes(data)
    sources: list[Callable[[], Any]] = [
        lambda: path,
        lambda: data,
        lambda: ReadOnlyStream(data),
        lambda: io.BytesIO(gzip.compress(data)),
        lambda: zlib.compress(data),
    ]
    for make in sources:
        for verify in (True, False):
            source = make()
            tracemalloc.start()
            t0 = time.perf_counter()
            try:
                err = _raises_corrupt(source, verify=verify)
                elapsed = time.perf_counter() - t0
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert err.offset == 0
            assert peak < 50 * MIB, f"peak {peak} bytes for a {length}-byte claim"
            assert elapsed < 2.0


def test_lying_length_of_middle_record_with_verify_off() -> None:
    # Length says 1000 bytes more than the file holds; header CRC recomputed so it is "valid".
    liar = frame_header(len(R1) + 1000) + R1 + struct.pack("<I", masked_crc32c(R1))
    data = frame(R0) + liar
    for verify in (True, False):
        err = _raises_corrupt(data, verify=verify)
        assert err.offset == OFF1
    assert _raises_corrupt(ReadOnlyStream(data), verify=False).offset == OFF1


def test_verify_false_skips_crc_checks() -> None:
    payload_flipped = _flip(VALID, OFF1 + 12 + 5, 2)
    assert list(read_records(payload_flipped, verify=False)) == [R0, _flip(R1, 5, 2), R2]
    data_crc_flipped = _flip(VALID, OFF2 - 1, 0)
    assert list(read_records(data_crc_flipped, verify=False)) == [R0, R1, R2]
    length_crc_flipped = _flip(VALID, OFF1 + 8, 0)
    assert list(read_records(length_crc_flipped, verify=False)) == [R0, R1, R2]
    # ... but they are all errors with verify on
    for damaged in (payload_flipped, data_crc_flipped, length_crc_flipped):
        assert _raises_corrupt(damaged).offset == OFF1
    # a truncated file is still an error
    assert _raises_corrupt(VALID[:-3], verify=False).offset == OFF2


def test_verify_false_on_large_record() -> None:
    big = _big(2 * MIB, 3)
    data = frame(b"x") + frame_header(len(big)) + big + struct.pack("<I", masked_crc32c(big) ^ 1)
    assert list(read_records(data, verify=False)) == [b"x", big]
    assert _raises_corrupt(data).offset == 17


@pytest.mark.parametrize(
    "junk",
    [
        b"this is a text file, not a TFRecord file at all\n" * 5,
        b"PK\x03\x04" + bytes(100),
        bytes(range(256)),
        b"short",
    ],
)
def test_not_a_tfrecord_file(tmp_path: Path, junk: bytes) -> None:
    path = tmp_path / "junk.bin"
    path.write_bytes(junk)
    err = _raises_corrupt(path)
    assert err.path == str(path)
    assert err.offset == 0
    assert _raises_corrupt(path, compression=None).offset == 0


def _compressed(compression: str) -> bytes:
    buf = io.BytesIO()
    _write([_big(5000, i) for i in range(20)], compression, buf)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("compression", "damage"),
    [
        ("gzip", "body byte"),
        ("gzip", "method byte"),
        ("gzip", "trailer crc"),
        ("gzip", "truncated"),
        ("gzip", "truncated trailer"),
        ("gzip", "trailing garbage"),
        ("zlib", "body byte"),
        ("zlib", "header"),
        ("zlib", "truncated"),
        ("zlib", "adler"),
        ("zlib", "trailing garbage"),
    ],
)
def test_damaged_compressed_stream(tmp_path: Path, compression: str, damage: str) -> None:
    data = _compressed(compression)
    assert len(list(read_records(data))) == 20
    if damage == "body byte":
        bad = bytearray(data)
        for i in range(len(data) // 3, len(data) // 3 + 8):
            bad[i] ^= 0x5A
        damaged = bytes(bad)
    elif damage == "method byte":
        damaged = data[:2] + b"\x07" + data[3:]
    elif damage == "header":
        damaged = b"\x78\x9d" + data[2:]  # header check bits no longer valid
    elif damage == "trailer crc":
        damaged = _flip(data, len(data) - 5, 0)  # last byte of the gzip CRC32
    elif damage == "adler":
        damaged = _flip(data, len(data) - 2, 0)  # inside the zlib Adler-32
    elif damage == "truncated":
        damaged = data[: len(data) // 2]
    elif damage == "truncated trailer":
        damaged = data[:-3]
    else:
        damaged = data + b"\x00junk"
    path = tmp_path / f"damaged.{compression}"
    path.write_bytes(damaged)
    err = _raises_corrupt(path, compression=compression)
    assert err.path == str(path)
    assert 0 <= err.offset <= max(len(damaged), 20 * (5000 + 16))
    if damage not in ("method byte", "header"):  # auto-detection still sees the signature
        err = _raises_corrupt(path)
        assert err.path == str(path)


def test_concatenated_gzip_members_are_one_stream() -> None:
    a, b = frame_all([b"one", b"two"]), frame_all([b"three"])
    assert list(read_records(gzip.compress(a) + gzip.compress(b))) == [b"one", b"two", b"three"]


def test_bad_sources(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="cannot open"):
        list(read_records(tmp_path / "missing.tfrecord"))
    with pytest.raises(CatalogError):
        list(read_records(tmp_path))  # a directory
    with pytest.raises(CatalogError, match="cannot read records"):
        list(read_records(12345))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- memory


def _peak_while(fn: Callable[[], Any]) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_many_records_are_read_in_bounded_memory(tmp_path: Path) -> None:
    records = [os.urandom(8) + bytes([i]) * 1016 for i in range(256)]  # 1 KiB each
    block = frame_all(records)
    path = tmp_path / "many.tfrecord"
    repeats = 200_000_000 // len(block) + 1
    with open(path, "wb") as f:
        for _ in range(repeats):
            f.write(block)
    assert path.stat().st_size >= 200_000_000

    def count() -> tuple[int, int]:
        n = total = 0
        for i, r in enumerate(read_records(path)):
            if i < 256:
                assert r == records[i]
            n += 1
            total += len(r)
        return n, total

    try:
        (n, total), peak = _peak_while(count)
    finally:
        path.unlink()
    assert n == 256 * repeats
    assert total == 1024 * n
    assert peak < 30 * MIB, f"peak {peak / MIB:.1f} MiB"


@pytest.fixture(scope="module")
def huge_record_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, int]]:
    size = 64 * MIB
    base = tmp_path_factory.mktemp("huge")
    raw, packed = base / "one.tfrecord", base / "one.tfrecord.gz"
    record = _big(size, 64)
    crc = masked_crc32c(record)
    for path, compression in ((raw, None), (packed, "gzip")):
        with RecordWriter(path, compression, level=1) as w:
            w.write(record)
        assert w.records == 1 and w.bytes == size + 16
    del record
    yield raw, packed, crc
    raw.unlink()
    packed.unlink()


def test_single_huge_record_read_with_about_one_copy(huge_record_file: tuple[Path, Path, int]) -> None:
    raw, _packed, crc = huge_record_file
    size = 64 * MIB
    records, peak = _peak_while(lambda: list(read_records(raw)))
    assert len(records) == 1 and len(records[0]) == size and masked_crc32c(records[0]) == crc
    assert size <= peak < 1.25 * size, f"peak {peak / size:.2f}x the record size"


@pytest.mark.parametrize("source", ["gzip", "stream"])
def test_single_huge_record_from_stream_at_most_two_copies(
    huge_record_file: tuple[Path, Path, int], source: str
) -> None:
    raw, packed, crc = huge_record_file
    size = 64 * MIB

    def read() -> list[bytes]:
        if source == "gzip":
            return list(read_records(packed))
        with open(raw, "rb") as f:
            return list(read_records(ReadOnlyStream(f)))

    records, peak = _peak_while(read)
    assert len(records) == 1 and len(records[0]) == size and masked_crc32c(records[0]) == crc
    assert size <= peak < 2.25 * size, f"peak {peak / size:.2f}x the record size"


# --------------------------------------------------------------------------- claims vs bytes present

_CLAIM = 2**62


def _compressed_liar(compression: str, zeros: int) -> bytes:
    """A header claiming 2**62 bytes, then ``zeros`` real (decompressed) zero bytes: a few
    hundred KiB on disk that inflate to far more than any record the file really holds."""
    c = zlib.compressobj(6, zlib.DEFLATED, 31 if compression == "gzip" else 15)
    out = [c.compress(frame_header(_CLAIM))]
    block = bytes(4 * MIB)
    out += [c.compress(block) for _ in range(zeros // len(block))]
    return b"".join(out) + c.flush()


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
@pytest.mark.parametrize("seekable", [True, False])
def test_lying_length_over_a_long_compressed_stream_is_memory_bounded(
    tmp_path: Path, compression: str, seekable: bool
) -> None:
    zeros = 128 * MIB
    data = _compressed_liar(compression, zeros)
    assert len(data) < 2 * MIB
    path = tmp_path / f"liar.{compression}"
    path.write_bytes(data)

    def read() -> CorruptRecordError:
        if seekable:
            return _raises_corrupt(path)
        with open(path, "rb") as f:
            return _raises_corrupt(ReadOnlyStream(f))

    err, peak = _peak_while(read)
    assert peak < 16 * MIB, f"peak {peak / MIB:.1f} MiB for {zeros / MIB:.0f} MiB of a record that is not there"
    assert err.offset == 0 and err.compressed
    assert err.reason == f"record length {_CLAIM} runs past the end of the stream ({zeros} bytes left)"


@pytest.fixture
def small_lookahead(monkeypatch: pytest.MonkeyPatch) -> int:
    """Prove records from 2 MiB up before holding them, so small files walk that path."""
    from catalog.tfrecord import framing

    monkeypatch.setattr(framing, "LOOKAHEAD", 2 * MIB)
    return 2 * MIB


def _members(records: list[bytes], compression: str) -> bytes:
    """Records written as two gzip members (or one zlib stream)."""
    if compression == "zlib":
        return zlib.compress(frame_all(records), 1)
    half = len(records) // 2
    return gzip.compress(frame_all(records[:half]), 1) + gzip.compress(frame_all(records[half:]), 1)


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
@pytest.mark.parametrize("seekable", [True, False])
def test_proven_large_records_read_back_exactly(
    tmp_path: Path, small_lookahead: int, compression: str, seekable: bool
) -> None:
    records = [b"a", _big(3 * MIB + 5, 1), b"b" * 100, _big(5 * MIB, 2), _big(2 * MIB + 1, 3), b""]
    path = tmp_path / "big.tfrecord"
    path.write_bytes(_members(records, compression))
    if seekable:
        assert list(read_records(path)) == records
    else:
        with open(path, "rb") as f:
            assert list(read_records(ReadOnlyStream(f))) == records


@pytest.mark.parametrize("seekable", [True, False])
def test_proven_large_record_damage_and_truncation(tmp_path: Path, small_lookahead: int, seekable: bool) -> None:
    big = _big(3 * MIB, 4)
    framed = bytearray(frame_all([b"x", big]))
    at = len(frame(b"x"))
    framed[at + 12 + MIB] ^= 1  # a flipped byte inside the large record's payload

    def read(data: bytes) -> CorruptRecordError:
        return _raises_corrupt(gzip.compress(data, 1) if seekable else ReadOnlyStream(gzip.compress(data, 1)))

    err = read(bytes(framed))
    assert (err.offset, err.reason) == (at, "corrupt record: data CRC mismatch")
    cut = bytes(framed[: at + 12 + 2 * MIB])
    err = read(cut)
    left = f"record length {len(big)} runs past the end of the stream ({2 * MIB} bytes left)"
    assert (err.offset, err.reason) == (at, left)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 300), min_size=1, max_size=200),
    st.sampled_from([0, 1 << 15, (1 << 16) - 301, 1 << 16, 1 << 40, -(1 << 20)]),
    st.booleans(),
)
def test_distinct_inverse_is_np_unique(values: list[int], shift: int, spread: bool) -> None:
    """Counted (small spread) or sorted (wide), the distinct values and the inverse are
    np.unique's; and the header CRCs built on them are each length's own."""
    a = np.array(values, dtype=np.int64) + shift
    if spread:
        a[0] += 1 << 17  # past the counted path's reach
    distinct, inverse = framing.distinct_inverse(a)
    want_distinct, want_inverse = np.unique(a, return_inverse=True)
    assert distinct.tolist() == want_distinct.tolist()
    assert inverse.tolist() == want_inverse.tolist()
    lengths = np.abs(a)
    crcs = framing._header_crcs(lengths, {})
    assert crcs.tolist() == [masked_crc32c(int(n).to_bytes(8, "little")) for n in lengths.tolist()]
