"""RecordWriter's batch paths (write_many of a list, write_framed of records framed already)
and framing_fault (catalog/tfrecord/framing.py): the bytes, offsets and checksums are those
of the records written one by one, in every compression; a damaged record is found."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest

from catalog.tfrecord.framing import RecordWriter, frame_header, framing_fault, masked_crc32c


def _one_by_one(records: list[bytes], compression: str | None = None) -> tuple[bytes, RecordWriter]:
    out = io.BytesIO()
    w = RecordWriter(out, compression, index=compression is None)
    for r in records:
        w.write(r)
    w.close()
    return out.getvalue(), w


def _framed(records: list[bytes]) -> bytes:
    return b"".join(frame_header(len(r)) + r + masked_crc32c(r).to_bytes(4, "little") for r in records)


def _records(n: int, seed: int = 0, big: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    out = [rng.randbytes(rng.randrange(0, 300)) for _ in range(n)]
    for i in range(big):  # a few large ones among them: framed as they come
        out.insert(rng.randrange(len(out) + 1), rng.randbytes((2 << 20) + i))
    return out


@pytest.mark.parametrize("compression", [None, "gzip", "zlib"])
@pytest.mark.parametrize(("n", "big"), [(0, 0), (1, 0), (10_000, 0), (50, 2)])
def test_write_many_of_a_list_writes_what_write_does(compression: str | None, n: int, big: int) -> None:
    records = _records(n, big=big)
    out = io.BytesIO()
    w = RecordWriter(out, compression, index=compression is None)
    w.write_many(records[:7])
    w.write(b"between")
    w.write_many(records[7:])
    w.close()
    want, one = _one_by_one([*records[:7], b"between", *records[7:]], compression)
    assert out.getvalue() == want
    assert (w.records, w.bytes, w.file_bytes, w.checksum) == (one.records, one.bytes, one.file_bytes, one.checksum)
    if compression is None:
        assert np.array_equal(w.offsets(), one.offsets())


def test_write_many_of_other_buffers_and_a_closed_writer() -> None:
    out = io.BytesIO()
    w = RecordWriter(out)
    w.write_many([b"a", bytearray(b"b"), memoryview(b"c")])  # not all bytes: record by record
    w.close()
    assert out.getvalue() == _one_by_one([b"a", b"b", b"c"])[0]
    with pytest.raises(Exception, match="closed"):
        w.write_many([b"x"])


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_write_framed_writes_the_bytes_and_index_of_the_records(compression: str | None) -> None:
    records = _records(500, seed=1)
    out = io.BytesIO()
    w = RecordWriter(out, compression, index=compression is None)
    w.write(records[0])  # queued: goes first
    w.write_framed(_framed(records[1:300]), [len(r) for r in records[1:300]])
    w.write_many(records[300:])
    w.write_framed(b"", [])
    w.close()
    want, one = _one_by_one(records, compression)
    assert out.getvalue() == want and (w.records, w.bytes, w.checksum) == (one.records, one.bytes, one.checksum)
    if compression is None:
        assert np.array_equal(w.offsets(), one.offsets())


def test_framing_fault_finds_the_first_damaged_record() -> None:
    records = _records(200, seed=2)
    buf = _framed(records)
    lengths = np.array([len(r) for r in records], dtype=np.int64)
    at = np.concatenate(([0], np.cumsum(lengths + 16)[:-1])).astype(np.int64)
    assert framing_fault(buf, at, lengths, {}) is None
    assert framing_fault(b"", at[:0], lengths[:0], {}) is None
    data = bytearray(buf)
    data[int(at[120]) + 12] ^= 1  # (record 120 is not empty: seed 2)
    assert len(records[120]) > 0 and framing_fault(bytes(data), at, lengths, {}) == (120, False)
    data[int(at[57]) + 9] ^= 1  # the CRC of record 57's length
    assert framing_fault(bytes(data), at, lengths, {}) == (57, True)
    data = bytearray(buf)
    data[int(at[3])] ^= 1  # its length
    assert framing_fault(bytes(data), at, lengths, {}) == (3, True)
