"""TFRecord framing: ``u64 length | u32 masked_crc32c(length) | data | u32 masked_crc32c(data)``.

The writer buffers records and frames them a batch at a time (the CRCs are masked with
numpy), which is what makes small records fast in pure Python. The reader parses whole
chunks, checks every CRC, and never allocates a length it has not proven is backed by
bytes in the file, so a lying header cannot exhaust memory. In a compressed stream the
size is unknown until the end, and a few KiB can inflate to GiBs: a record claiming more
than ``LOOKAHEAD`` bytes is first read through (CRC only, nothing kept) and then re-read,
so memory follows the largest record actually present, never what a header claims.

Where the bytes come from (paths, URLs, bytes, streams) is ``sources.py``'s business.
"""

from __future__ import annotations

import io
import os
import struct
import zlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, Any, Literal, cast, overload

import numpy as np
from crc32c import crc32c

from catalog.errors import CodecError, CorruptRecordError, StorageError, UsageError
from catalog.tfrecord import native
from catalog.tfrecord.compression import AUTO, COMPRESSIONS, NONE, SPELLED
from catalog.tfrecord.sources import Source, open_source
from catalog.words import counted

MASK_DELTA = 0xA282EAD8
HEADER_SIZE = 12  # u64 length + u32 masked crc of the length
FOOTER_SIZE = 4  # u32 masked crc of the data
FRAMING = HEADER_SIZE + FOOTER_SIZE  # bytes around each record's data
READ_CHUNK = 1 << 20  # bytes read per call while scanning small records
DIRECT_READ = 1 << 20  # records at least this large are read straight into their own buffer
STREAM_PIECE = 16 << 20  # a large record from a stream is gathered in pieces of this size
LOOKAHEAD = 64 << 20  # a compressed record claiming more is proven present before it is kept
WRITE_BATCH_BYTES = 1 << 20  # the writer frames pending records once they reach this size
WRITE_BATCH_RECORDS = 4096
HEADER_CACHE_LIMIT = 1 << 16  # distinct verified headers remembered by a reader
ZLIB_MEM_LEVEL = 9  # TensorFlow's default; with level -1 our output is byte-identical to TF's
GZIP_WBITS = 31
ZLIB_WBITS = 15

_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")

Compression = Literal["gzip", "zlib"] | None  # compression.COMPRESSIONS as a type (None: "none")


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """The CRC32C of ``data``, masked the way TFRecord stores it."""
    try:
        return _mask(crc32c(data))
    except BufferError:  # a strided view: its bytes in order (a try costs the usual call nothing)
        return _mask(crc32c(memoryview(data).tobytes()))


def _mask(c: int) -> int:
    return (((c >> 15) | (c << 17)) + MASK_DELTA) & 0xFFFFFFFF


def _mask_array(crcs: np.ndarray) -> np.ndarray:
    """Vectorised :func:`masked_crc32c` over an array of raw uint32 CRCs."""
    return ((crcs >> 15) | (crcs << 17)) + np.uint32(MASK_DELTA)


def frame_header(length: int) -> bytes:
    """The 12 bytes that precede a record of ``length`` bytes."""
    packed = _U64.pack(length)
    return packed + _U32.pack(masked_crc32c(packed))


def starts_framed(head: bytes) -> bool:
    """Whether ``head`` starts with a record's length and that length's valid CRC (uncompressed
    TFRecord): decisive, where a first record of 123 bytes starts the file with "{"."""
    return len(head) >= HEADER_SIZE and masked_crc32c(head[:8]) == int.from_bytes(head[8:12], "little")


def normalize_compression(compression: str | None) -> Compression:
    """Map user spellings (None, "", "none", "GZIP", "zlib"...) to None, "gzip" or "zlib"."""
    if compression is None:
        return None
    name = compression.lower()
    if name in ("", NONE):
        return None
    if name in COMPRESSIONS:
        return name  # type: ignore[return-value]
    raise unknown_compression(compression)


def stored_compression(compression: str | None) -> str:
    """A compression as the manifest records it: "none", "gzip" or "zlib"."""
    return normalize_compression(compression) or NONE


def unknown_compression(compression: object) -> UsageError:
    """The error for a compression name that is none of none, gzip and zlib."""
    return UsageError(f"unknown compression {compression!r}: use {SPELLED}")


# --------------------------------------------------------------------------- writing


class _ClosedQueue(list[bytes]):
    """Stands in for a closed writer's queue, so write() needs no "is closed" check."""

    def append(self, _item: object) -> None:
        raise UsageError("RecordWriter is closed")


class RecordWriter:
    """Writes TFRecord files that TensorFlow reads unchanged (gzip/zlib byte-identical to TF).

    ``records`` and ``bytes`` count records and bytes of the framed (uncompressed) stream;
    ``file_bytes`` and ``checksum`` (CRC32C) describe what actually went to the target.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | IO[bytes],
        compression: str | None = None,
        *,
        level: int = -1,
        index: bool = False,
    ) -> None:
        self.compression = normalize_compression(compression)
        if index and self.compression is not None:
            raise UsageError("a record index needs an uncompressed file (offsets in a gzip stream are not seekable)")
        # With ``index``: each record's data length, kept while framing (the lengths the headers
        # are made of, 8 bytes a record); offsets() turns them into offsets in one vectorised pass.
        self._lengths: array[int] | None = array("Q") if index else None
        if isinstance(target, (str, os.PathLike)):
            self._file: IO[bytes] = open(target, "wb")  # noqa: SIM115 - closed in close()
            self._owns_file = True
        else:
            self._file = target
            self._owns_file = False
        self._compressor = None
        if self.compression is not None:
            wbits = GZIP_WBITS if self.compression == "gzip" else ZLIB_WBITS
            self._compressor = zlib.compressobj(level, zlib.DEFLATED, wbits, ZLIB_MEM_LEVEL)
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._headers: dict[int, bytes] = {}
        self._closed = False
        self.records = 0
        self.bytes = 0
        self.file_bytes = 0
        self.checksum = 0

    def write(self, data: bytes) -> None:
        """Queue one record; it is framed with the next batch."""
        if type(data) is not bytes:
            data = self._as_bytes(data)
        pending = self._pending
        pending.append(data)
        self._pending_bytes += len(data)
        if self._pending_bytes >= WRITE_BATCH_BYTES or len(pending) >= WRITE_BATCH_RECORDS:
            self._drain()

    def write_many(self, records: Iterable[bytes]) -> None:
        """Queue many records (faster than calling :meth:`write` in a loop): a list of bytes
        joins the queue in one step and is framed in batches, as records written one by one
        would be (the same bytes: each record's framing depends on it alone)."""
        if (
            not isinstance(records, list)
            or list(map(type, records)).count(bytes) != len(records)
            or sum(map(len, records)) > len(records) * (WRITE_BATCH_BYTES // WRITE_BATCH_RECORDS)
        ):
            for data in records:  # (large records: framed as they come, never joined in thousands)
                self.write(data)
            return
        self._check_open()
        at = 0
        while at < len(records):
            room = WRITE_BATCH_RECORDS - len(self._pending)
            part = records[at : at + room]
            self._pending.extend(part)
            self._pending_bytes += sum(map(len, part))
            at += len(part)
            if self._pending_bytes >= WRITE_BATCH_BYTES or len(self._pending) >= WRITE_BATCH_RECORDS:
                self._drain()

    def write_framed(self, framed: bytes, lengths: list[int] | np.ndarray) -> None:
        """Write records already framed (their headers and CRCs checked by the reader that
        found them: a filter's kept records copied as they were); ``lengths``: their data
        lengths, in order. The bytes are what :meth:`write` of each record would make."""
        self._check_open()
        self._drain()  # records queued before these go first
        if self._lengths is not None:
            if isinstance(lengths, np.ndarray):
                self._lengths.frombytes(lengths.astype(np.uint64).tobytes())  # (native order, as "Q")
            else:
                self._lengths.fromlist(lengths)
        self.records += len(lengths)
        if framed:
            self._emit(framed)

    def offsets(self) -> np.ndarray:
        """The byte offset of every record written so far (a writer made with ``index=True``)."""
        if self._lengths is None:
            raise UsageError("this RecordWriter keeps no record index (index=False)")
        if not self._closed:
            self._drain()
        framed = np.frombuffer(self._lengths, dtype=np.uint64) + np.uint64(HEADER_SIZE + FOOTER_SIZE)
        out = np.zeros(len(framed), dtype="<u8")  # each record starts where the framing before it ends
        np.cumsum(framed[:-1], out=out[1:])
        return out

    def flush(self) -> None:
        """Frame everything queued and push it (and, compressed, a sync point) to the target."""
        self._check_open()
        self._drain()
        if self._compressor is not None:
            self._write_out(self._compressor.flush(zlib.Z_SYNC_FLUSH))
        self._file.flush()

    def close(self) -> None:
        if self._closed:
            return
        try:
            self._drain()
            if self._compressor is not None:
                self._write_out(self._compressor.flush(zlib.Z_FINISH))
            self._file.flush()
        finally:
            self._closed = True
            self._pending = _ClosedQueue()
            if self._owns_file:
                self._file.close()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError("RecordWriter is closed")

    @staticmethod
    def _as_bytes(data: Any) -> bytes:
        # numpy scalars expose a buffer too (a longdouble's with uninitialised padding), but a
        # number is not a record: only bytes-like buffers and arrays of plain data are.
        if isinstance(data, (np.generic, str, int, float)):
            raise CodecError(f"a record must be bytes, not {type(data).__name__}")
        try:
            view = memoryview(data)
        except (TypeError, ValueError) as e:  # ValueError: e.g. a datetime64 array
            raise CodecError(f"a record must be bytes, not {type(data).__name__}") from e
        if view.format == "O":  # an object array's buffer holds pointers, not data
            raise CodecError(f"a record must be bytes, not a buffer of Python objects ({type(data).__name__})")
        return view.tobytes()

    def _header(self, length: int) -> bytes:
        header = self._headers.get(length)
        if header is None:
            header = frame_header(length)
            if len(self._headers) < HEADER_CACHE_LIMIT:
                self._headers[length] = header
        return header

    def _drain(self) -> None:
        self._check_open()
        pending = self._pending
        if not pending:
            return
        self._pending = []
        self._pending_bytes = 0
        if len(pending) == 1 and len(pending[0]) >= DIRECT_READ:
            self._write_large(pending[0])
            return
        self._emit(self._frame(pending))

    def _frame(self, records: list[bytes]) -> bytes:
        if native.NATIVE is not None:  # one C loop: lengths, both CRCs and the copy (0.5 -> 0.05 us a record)
            framed, lengths = native.NATIVE.frame_records(records)
            if self._lengths is not None:
                self._lengths.frombytes(lengths)
            self.records += len(records)
            return framed
        n = len(records)
        crcs = np.fromiter(map(crc32c, records), dtype=np.uint32, count=n)
        footers = _mask_array(crcs).astype("<u4").tobytes()
        lengths = list(map(len, records))  # two C-level passes beat one comprehension calling len()
        pieces: list[bytes] = [b""] * (3 * n)
        known: list[bytes | None] = list(map(self._headers.get, lengths))  # no call a record
        pieces[0::3] = list(map(self._header, lengths)) if None in known else cast("list[bytes]", known)
        pieces[1::3] = records
        pieces[2::3] = [footers[i : i + 4] for i in range(0, 4 * n, 4)]
        if self._lengths is not None:
            self._lengths.fromlist(lengths)  # 3 ns a record; extend() takes twice as long
        self.records += n
        return b"".join(pieces)

    def _write_large(self, data: bytes) -> None:
        # A big record goes out in three writes so it is never copied into a joined buffer.
        if self._lengths is not None:
            self._lengths.append(len(data))
        self._emit(self._header(len(data)))
        self._emit(data)
        self._emit(_U32.pack(masked_crc32c(data)))
        self.records += 1

    def _emit(self, framed: bytes) -> None:
        self.bytes += len(framed)
        chunk = framed if self._compressor is None else self._compressor.compress(framed)
        self._write_out(chunk)

    def _write_out(self, chunk: bytes) -> None:
        if chunk:
            self._file.write(chunk)
            self.file_bytes += len(chunk)
            self.checksum = crc32c(chunk, self.checksum)


class Packed(Sequence[bytes]):
    """Records back to back in one buffer (record ``i`` is ``buf[starts[i]:ends[i]]``, framed
    or not), made into ``bytes`` objects only when asked for one: a batch encoded at once
    would otherwise be as many objects as records, made and freed for a count and a length."""

    __slots__ = ("buf", "ends", "starts")

    def __init__(self, buf: bytes, starts: np.ndarray, ends: np.ndarray) -> None:
        self.buf, self.starts, self.ends = buf, starts, ends

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, i: int) -> bytes: ...
    @overload
    def __getitem__(self, i: slice) -> Packed: ...
    def __getitem__(self, i: int | slice) -> bytes | Packed:
        if isinstance(i, slice):
            return Packed(self.buf, self.starts[i], self.ends[i])
        return self.buf[int(self.starts[i]) : int(self.ends[i])]

    def __iter__(self) -> Iterator[bytes]:
        return iter(native.slices(self.buf, self.starts, self.ends))

    def __eq__(self, other: object) -> bool:  # as the list of its records
        return list(self) == list(other) if isinstance(other, Sequence) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (a sequence that compares as a list: unhashable)

    def sizes(self) -> np.ndarray:
        return self.ends - self.starts


def record_sizes(records: Sequence[bytes]) -> np.ndarray:
    """Each record's length (int64), from a :class:`Packed`'s offsets without slicing it."""
    if isinstance(records, Packed):
        return records.sizes()
    return np.fromiter(map(len, records), dtype=np.int64, count=len(records))


def frame_in_place(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, records: list[bytes]) -> bytes:
    """The records laid out in ``buf`` (uint8) from ``starts`` to ``ends`` (int64), each with
    HEADER_SIZE bytes of room before it and FOOTER_SIZE after, framed there and returned as
    one buffer: the bytes ``write`` of each record would make, with no bytes object a record
    made for it. ``records``: the same records as bytes, which the CRCs are taken of (a
    call a record on bytes, the cheapest way found: a memoryview a record costs more)."""
    n = len(records)
    if not n:
        return b""
    distinct, inverse = distinct_inverse(ends - starts)
    headers = np.frombuffer(b"".join(map(frame_header, distinct.tolist())), dtype=np.uint8).reshape(-1, HEADER_SIZE)
    buf[(starts - HEADER_SIZE)[:, None] + np.arange(HEADER_SIZE)] = headers[inverse]
    crcs = np.fromiter(map(crc32c, records), dtype=np.uint32, count=n)
    footers = _mask_array(crcs).astype("<u4").view(np.uint8).reshape(n, FOOTER_SIZE)
    buf[ends[:, None] + np.arange(FOOTER_SIZE)] = footers
    return buf.tobytes()


def framing_fault(
    buf: bytes, at: np.ndarray, lengths: np.ndarray, known: dict[int, int], data: bool = True
) -> tuple[int, bool] | None:
    """Check the records framed in ``buf`` at ``at`` (int64 offsets of their headers) with
    these data ``lengths`` (int64), vectorised: every header's length and CRC, every data CRC
    (``data`` False: not those, when the caller checked every byte another way). Returns (the
    first damaged record's position in ``at``, whether its header is what is damaged); None
    when all are intact. ``known``: masked header CRCs by length, a cache the caller keeps
    (records have few distinct lengths)."""
    if not len(at):
        return None
    raw = np.frombuffer(buf, dtype=np.uint8)
    # Unaligned little-endian words starting at every byte: one gather reads each field.
    w32 = np.ndarray((len(raw) - 3,), dtype="<u4", buffer=raw, strides=(1,))
    first = native.header_fault(buf, at, lengths) if isinstance(buf, bytes) else None  # one C loop
    if first is None:
        w64 = np.ndarray((len(raw) - 7,), dtype="<u8", buffer=raw, strides=(1,))
        bad_header = (w64[at] != lengths.astype(np.uint64)) | (w32[at + 8] != _header_crcs(lengths, known))
        headers = np.flatnonzero(bad_header)
        first = int(headers[0]) if headers.size else -1
    if not data:
        return (first, True) if first >= 0 else None
    upto = first if first >= 0 else len(at)  # records after a damaged header: not the first fault
    payload_at = at[:upto] + HEADER_SIZE
    ends = payload_at + lengths[:upto]
    crcs = native.crc32c_ranges(buf, payload_at, ends)
    bad = np.flatnonzero(_mask_array(crcs) != w32[ends])
    if bad.size:
        return int(bad[0]), False
    return (first, True) if first >= 0 else None


def whole_records(raw: bytes, end: int) -> tuple[np.ndarray, np.ndarray, int]:
    """The records wholly in ``raw[:end]`` by their lengths (checked afterwards): their header
    offsets and data lengths (int64), and where the first record not wholly there starts."""
    if native.NATIVE is not None:
        at_bytes, lens_bytes, pos = native.NATIVE.walk_records(raw, end)
        return np.frombuffer(at_bytes, dtype=np.int64), np.frombuffer(lens_bytes, dtype=np.int64), pos
    unpack = _U64.unpack_from
    at: list[int] = []
    lens: list[int] = []
    pos = 0
    while pos + FRAMING <= end:
        n = unpack(raw, pos)[0]
        stop = pos + FRAMING + n
        if stop > end:
            break
        at.append(pos)
        lens.append(n)
        pos = stop
    return np.array(at, dtype=np.int64), np.array(lens, dtype=np.int64), pos


def _header_crcs(lengths: np.ndarray, known: dict[int, int]) -> np.ndarray:
    """The masked CRC each record's header holds for its length."""
    distinct, inverse = distinct_inverse(lengths)
    crcs = []
    for n in distinct.tolist():
        crc = known.get(n)
        if crc is None:
            crc = known[n] = masked_crc32c(n.to_bytes(8, "little"))
        crcs.append(crc)
    return np.array(crcs, dtype=np.uint32)[inverse]


def distinct_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` of int64s (a non-empty array), counted
    rather than sorted when they span less than 65,536 (record and value lengths, as a
    rule): np.unique's sort was most of a window's framing check."""
    lo = int(values.min())
    offsets = values - lo
    if int(offsets.max()) >= 1 << 16:
        return np.unique(values, return_inverse=True)
    seen = np.flatnonzero(np.bincount(offsets))
    lookup = np.zeros(int(seen[-1]) + 1, dtype=np.int64)
    lookup[seen] = np.arange(len(seen))
    return seen + lo, lookup[offsets]


# --------------------------------------------------------------------------- reading


class _Inflater:
    """A read(n) view of the decompressed bytes of a gzip or zlib stream, memory-bounded."""

    def __init__(self, raw: IO[bytes], head: bytes, kind: str, path: str | None) -> None:
        self._raw = raw
        self._kind = kind
        self._path = path
        self._wbits = GZIP_WBITS if kind == "gzip" else ZLIB_WBITS
        self._d = zlib.decompressobj(self._wbits)
        self._input = head  # compressed bytes not yet fed
        self._consumed = 0  # compressed bytes fed so far (for error offsets)
        self._eof_raw = False
        self._done = False
        self._log: list[bytes] | None = None  # raw chunks read since mark(), on an unseekable source
        self._replay: list[bytes] = []  # raw chunks to feed again after rewind(), oldest last

    def mark(self) -> tuple[Any, ...]:
        """The decompression state here, to come back to with :meth:`rewind`."""
        try:
            pos: int | None = self._raw.tell() if self._raw.seekable() else None
        except (AttributeError, OSError, ValueError):  # a duck-typed stream with only read()
            pos = None
        if pos is None:
            # Keep the compressed bytes instead: a small fraction of what they inflate to.
            self._log = []
        return (self._d.copy(), self._input, self._consumed, self._eof_raw, self._done, pos, list(self._replay))

    def rewind(self, mark: tuple[Any, ...]) -> None:
        d, self._input, self._consumed, self._eof_raw, self._done, pos, replay = mark
        self._d = d.copy()
        if pos is not None:
            self._raw.seek(pos)
            self._replay = replay
        else:
            assert self._log is not None
            self._replay = self._log[::-1] + replay  # replay's chunks come first
            self._log = None

    def _read_raw(self) -> bytes:
        if self._replay:
            return self._replay.pop()
        chunk = self._raw.read(READ_CHUNK)
        if self._log is not None:
            self._log.append(chunk)
        return chunk

    def read(self, n: int) -> bytes:
        out: list[bytes] = []
        want = n
        while want > 0 and not self._done:
            if not self._input and not self._d.unconsumed_tail:
                self._input = b"" if self._eof_raw else self._read_raw()
                if not self._input:
                    self._eof_raw = True
                    self._finish()
                    break
            piece = self._inflate(want)
            out.append(piece)
            want -= len(piece)
        return out[0] if len(out) == 1 else b"".join(out)

    def _inflate(self, want: int) -> bytes:
        data = self._d.unconsumed_tail or self._input
        fed_new = not self._d.unconsumed_tail
        try:
            piece = self._d.decompress(data, want)
        except zlib.error as e:
            raise self._error(f"corrupt {self._kind} stream ({e})") from e
        if fed_new:
            self._consumed += len(self._input)
            self._input = b""
        if self._d.eof:
            self._next_member()
        return piece

    def _next_member(self) -> None:
        # gzip allows concatenated members; anything after a zlib stream is damage.
        rest = self._d.unused_data
        if not rest:
            self._input = self._read_raw()
            if not self._input:
                self._done = True
                return
            rest = self._input
        if self._kind != "gzip":
            raise self._error("trailing bytes after the end of the zlib stream")
        self._d = zlib.decompressobj(self._wbits)
        self._input = rest

    def _finish(self) -> None:
        if not self._d.eof:
            raise self._error(f"{self._kind} stream is truncated")
        self._done = True

    def _error(self, reason: str) -> CorruptRecordError:
        return CorruptRecordError(reason + " (offset of compressed input read so far)", self._path, self._consumed)


def detect_compression(head: bytes) -> Compression:
    """Tell none/gzip/zlib apart from the first bytes of a file.

    A raw file is recognised by a valid CRC on its first length, so a raw record whose
    first byte happens to look like a zlib header is not mistaken for one.
    """
    if len(head) >= HEADER_SIZE and masked_crc32c(head[:8]) == _U32.unpack_from(head, 8)[0]:
        return None
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if len(head) >= 2 and head[0] & 0x0F == 8 and head[0] >> 4 <= 7 and ((head[0] << 8) | head[1]) % 31 == 0:
        return "zlib"
    return None


def _remaining_size(stream: IO[bytes]) -> int | None:
    """Bytes left in a seekable stream, or None when that cannot be known."""
    try:
        if not stream.seekable():
            return None
        here = stream.tell()
        end = stream.seek(0, os.SEEK_END)
        stream.seek(here)
        return end - here
    except (AttributeError, OSError, ValueError):  # AttributeError: a duck-typed stream with only read()
        return None


class _Scanner:
    """Walks the framed (decompressed) byte stream and yields verified batches of records."""

    def __init__(self, stream: IO[bytes], path: str | None, verify: bool, compressed: bool, size: int | None) -> None:
        self.stream = stream
        self.path = path
        self.verify = verify
        self.compressed = compressed
        self.size = size  # total bytes of the framed stream, when known (raw seekable files)
        self.good: dict[bytes, int] = {}
        self.auto_detected_raw = False

    def error(self, reason: str, offset: int) -> CorruptRecordError:
        return CorruptRecordError(reason, self.path, offset, compressed=self.compressed)

    def batches(self, buf: bytes) -> Iterator[list[bytes]]:
        base = 0  # stream offset of buf[0]
        pos = 0
        while True:
            records, pos, need = self.scan(buf, pos, base)
            if records:
                yield records
            have = len(buf) - pos
            if need >= DIRECT_READ and have >= HEADER_SIZE:
                yield [self.read_large(buf, pos, base, need - HEADER_SIZE - FOOTER_SIZE)]
                base = base + pos + need
                buf, pos = b"", 0
                continue
            chunk = self.stream.read(max(READ_CHUNK, need - have))
            if not chunk:
                self.check_clean_end(buf, pos, base)
                return
            buf = buf[pos:] + chunk
            base += pos
            pos = 0

    def scan(self, buf: bytes, pos: int, base: int) -> tuple[list[bytes], int, int]:
        """Parse every whole record in ``buf`` from ``pos``.

        Returns (records, position of the first unparsed byte, bytes that record needs).
        """
        if native.NATIVE is None:
            return self.scan_each(buf, pos, base)
        out, pos, cut, bad_header, bad_data = native.NATIVE.scan_records(buf, pos, self.verify)
        if bad_header >= 0:
            self.check_header(buf, bad_header, base)  # raises, naming the header as scan_each does
        need = HEADER_SIZE
        if cut >= 0:
            need = cut + HEADER_SIZE + FOOTER_SIZE
            self.check_fits(base + pos, need)
        if bad_data >= 0:
            raise self.error("corrupt record: data CRC mismatch", base + bad_data)
        return out, pos, need

    def scan_each(self, buf: bytes, pos: int, base: int) -> tuple[list[bytes], int, int]:
        """:meth:`scan` a record at a time in Python (without the C extension)."""
        out: list[bytes] = []
        stops: list[int] = []
        end = len(buf)
        verify = self.verify
        good = self.good
        need = HEADER_SIZE
        while pos + HEADER_SIZE <= end:
            hdr_end = pos + HEADER_SIZE
            length = good.get(buf[pos:hdr_end]) if verify else _U64.unpack_from(buf, pos)[0]
            if length is None:
                length = self.check_header(buf, pos, base)
            stop = hdr_end + length
            if stop + FOOTER_SIZE > end:
                need = length + HEADER_SIZE + FOOTER_SIZE
                self.check_fits(base + pos, need)
                break
            out.append(buf[hdr_end:stop])
            stops.append(stop)
            pos = stop + FOOTER_SIZE
        if verify and out:
            self.check_payloads(buf, out, stops, base)
        return out, pos, need

    def check_header(self, buf: bytes, pos: int, base: int) -> int:
        stored = _U32.unpack_from(buf, pos + 8)[0]
        if masked_crc32c(buf[pos : pos + 8]) != stored:
            if base + pos == 0 and self.auto_detected_raw:
                raise self.error("not a TFRecord file (no valid record header, gzip or zlib signature)", 0)
            raise self.error("corrupt record header: length CRC mismatch", base + pos)
        if len(self.good) >= HEADER_CACHE_LIMIT:
            self.good.clear()
        length: int = _U64.unpack_from(buf, pos)[0]
        self.good[buf[pos : pos + HEADER_SIZE]] = length
        return length

    def check_fits(self, offset: int, need: int) -> None:
        if self.size is not None and offset + need > self.size:
            length = need - HEADER_SIZE - FOOTER_SIZE
            left = self.size - offset - HEADER_SIZE
            raise self.error(
                f"record length {length} runs past the end of the file ({counted(max(left, 0), 'byte')} left)", offset
            )

    def check_payloads(self, buf: bytes, out: list[bytes], stops: list[int], base: int) -> None:
        crcs = np.fromiter(map(crc32c, out), dtype=np.uint32, count=len(out))
        at = np.asarray(stops, dtype=np.intp)
        raw = np.frombuffer(buf, dtype=np.uint8)
        stored = raw[at[:, None] + np.arange(4)].view("<u4").ravel()
        bad = np.flatnonzero(_mask_array(crcs) != stored)
        if bad.size:
            i = int(bad[0])
            offset = base + stops[i] - len(out[i]) - HEADER_SIZE
            raise self.error("corrupt record: data CRC mismatch", offset)

    def read_large(self, buf: bytes, pos: int, base: int, length: int) -> bytes:
        """Read one big record without copying it through the chunk buffer."""
        offset = base + pos
        head = buf[pos + HEADER_SIZE :]
        if self.size is not None and not self.compressed:
            # Raw seekable file whose size was checked: read the payload in one allocation.
            self.stream.seek(self.stream.tell() - len(head))
            data = self.stream.read(length)
            if len(data) < length:  # a short read (raw stream, or a read of 2 GiB or more)
                data = self.gather(data, length, offset)
            footer = self.read_exact(FOOTER_SIZE, offset, "record data CRC")
        else:
            proven = length > LOOKAHEAD and isinstance(self.stream, _Inflater)
            if proven:
                self.prove(head, length, offset)
            data = self.gather(head, length, offset)
            # The chunk may already hold the first bytes of the footer (not of the payload).
            early = head[length:]
            footer = early + self.read_exact(FOOTER_SIZE - len(early), offset, "record data CRC")
            if proven:
                return data  # its CRC was checked on the first pass
        if self.verify and masked_crc32c(data) != _U32.unpack(footer)[0]:
            raise self.error("corrupt record: data CRC mismatch", offset)
        return data

    def prove(self, head: bytes, length: int, offset: int) -> None:
        """Read a claimed record through, keeping only its CRC, then rewind the stream to it:
        a header's claim costs memory only once the bytes are known to be there."""
        stream = self.stream
        assert isinstance(stream, _Inflater)
        mark = stream.mark()
        got = min(len(head), length)
        crc = crc32c(head[:got])
        while got < length:
            piece = stream.read(min(length - got, READ_CHUNK))
            if not piece:
                raise self.error(f"record length {length} runs past the end of the stream ({_left(got)})", offset)
            crc = crc32c(piece, crc)
            got += len(piece)
        early = head[length:]
        footer = early + self.read_exact(FOOTER_SIZE - len(early), offset, "record data CRC")
        if self.verify and _mask(crc) != _U32.unpack(footer)[0]:
            raise self.error("corrupt record: data CRC mismatch", offset)
        stream.rewind(mark)

    def gather(self, head: bytes, length: int, offset: int) -> bytes:
        # Size unknown (compressed or unseekable): grow only as fast as real bytes arrive.
        # BytesIO hands its buffer over in getvalue(), so the record is not copied once more.
        out = io.BytesIO()
        got = out.write(head[:length])
        while got < length:
            piece = self.stream.read(min(length - got, STREAM_PIECE))
            if not piece:
                raise self.error(f"record length {length} runs past the end of the stream ({_left(got)})", offset)
            got += out.write(piece)
        return out.getvalue()

    def read_exact(self, n: int, offset: int, what: str) -> bytes:
        data = self.stream.read(n)
        if len(data) != n:
            raise self.error(f"file ends inside the {what}", offset)
        return data

    def check_clean_end(self, buf: bytes, pos: int, base: int) -> None:
        left = len(buf) - pos
        if left == 0:
            return
        if left < HEADER_SIZE:
            raise self.error(f"truncated record header or {counted(left, 'trailing byte')}", base + pos)
        raise self.error("file ends inside a record payload", base + pos)


def read_record_batches(source: Source, compression: str | None = "auto", verify: bool = True) -> Iterator[list[bytes]]:
    """Like :func:`read_records`, but yields lists of records (one per chunk read)."""
    stream, path, owned = open_source(source)
    try:
        yield from _batches(stream, path, compression, verify)
    finally:
        if owned:
            stream.close()


def _batches(stream: IO[bytes], path: str | None, compression: str | None, verify: bool) -> Iterator[list[bytes]]:
    auto = compression is not None and compression.lower() == AUTO
    kind = None if auto else normalize_compression(compression)
    size = _remaining_size(stream)
    try:
        head = stream.read(READ_CHUNK)
    except OSError as e:
        raise StorageError(f"{path or '<stream>'}: cannot read: {e}") from e
    if auto:
        kind = detect_compression(head)
    if kind is None:
        scanner = _Scanner(stream, path, verify, False, size)
        scanner.auto_detected_raw = auto
        yield from scanner.batches(head)
        return
    inflater = _Inflater(stream, head, kind, path)
    scanner = _Scanner(inflater, path, verify, True, None)  # type: ignore[arg-type]
    yield from scanner.batches(inflater.read(READ_CHUNK))


def read_records(source: Source, compression: str | None = "auto", verify: bool = True) -> Iterator[bytes]:
    """Yield every record of a TFRecord file, path, file object or bytes.

    ``compression``: "auto" (default), None/"none", "gzip" or "zlib". Every damage raises
    :class:`CorruptRecordError` naming the path and byte offset. ``verify=False`` skips
    the CRC checks, never the bounds checks.
    """
    for batch in read_record_batches(source, compression, verify):
        yield from batch


def detect_file_compression(source: Source) -> Compression:
    """The compression "auto" would pick for a file, path or bytes."""
    stream, _path, owned = open_source(source)
    try:
        here = stream.tell() if stream.seekable() else None
        head = stream.read(HEADER_SIZE)
        if here is not None:
            stream.seek(here)
        return detect_compression(head)
    finally:
        if owned:
            stream.close()


def _left(n: int) -> str:
    return f"{counted(n, 'byte')} left"
