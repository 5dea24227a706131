"""A whole shard read as windows of its bytes, each record where it lies: what a rewrite of
every record (a filter, a map) reads when the shard is uncompressed and indexed.

Its registered record index says where each record starts, so the framing is checked a
window at a time with numpy (every header's length and CRC, every data CRC: as strictly as
the sequential reader, see framing.framing_fault) instead of walked record by record in
Python, and the records are decoded where they lie (Schema.decode_spans) and copied out,
framing and all, without being framed again (Window.framed).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from crc32c import crc32c

from catalog.errors import CorruptShardError
from catalog.storage.files import CHECKSUM_ALGO, content_changed, format_checksum, open_registered
from catalog.storage.index import load_offsets
from catalog.tfrecord import native
from catalog.tfrecord.framing import FRAMING, HEADER_SIZE, framing_fault

WINDOW_BYTES = 8 << 20  # bytes of a shard read and checked at a time (a larger record: alone)
# A shard up to this size whose whole-file checksum is known is read in one buffer and checked
# by that checksum instead of a CRC a record (it bounds the memory a job holds at once).
TRUST_BYTES = 64 << 20
SCRATCH_BYTES = 2 * WINDOW_BYTES  # the largest read buffer a thread keeps between reads


@dataclass(frozen=True)
class Window:
    """Records ``first`` to ``first + len(lengths)`` of a shard, checked: ``raw`` holds their
    framed bytes then ``pad`` zero bytes; ``at``, each record's header offset in it (int64);
    ``lengths``, its data length (int64)."""

    first: int
    raw: bytes
    at: np.ndarray
    lengths: np.ndarray

    @property
    def starts(self) -> np.ndarray:
        """Where each record's data starts in ``raw``."""
        return self.at + HEADER_SIZE

    def __len__(self) -> int:
        return len(self.at)

    def records(self, keep: np.ndarray | None = None) -> list[bytes]:
        """Each record's data as bytes (``keep``: the records at those positions only)."""
        starts, lengths = (self.starts, self.lengths) if keep is None else (self.starts[keep], self.lengths[keep])
        return list(map(self.raw.__getitem__, map(slice, starts.tolist(), (starts + lengths).tolist())))

    def framed(self, keep: np.ndarray) -> tuple[bytes, list[int]]:
        """The records at positions ``keep`` (increasing), framed as they are in the shard
        (header, data, CRC: what RecordWriter makes of each), and their data lengths. Runs
        of neighbouring records are copied as one slice."""
        if not len(keep):
            return b"", []
        lengths = self.lengths[keep]
        starts = self.at[keep]
        ends = starts + lengths + FRAMING
        new_run = np.ones(len(keep), dtype=bool)
        new_run[1:] = starts[1:] != ends[:-1]
        first = np.flatnonzero(new_run)
        last = np.append(first[1:], len(keep)) - 1
        return native.join_ranges(self.raw, starts[first], ends[last]), lengths.tolist()


def shard_windows(
    path: str,
    index_at: str,
    records: int,
    size: int,
    index_checksum: str,
    pad: int = 0,
    checksum: str | None = None,
) -> Iterator[Window]:
    """The records of the uncompressed shard at ``path`` (its registered ``records``, ``size``
    and index at ``index_at``, checksum ``index_checksum``), a window at a time, checked. A
    damaged record is a CorruptShardError naming the shard, the record and its byte offset;
    a file longer or shorter than registered, one naming its size. ``checksum``: the shard's
    registered whole-file checksum; a shard of up to TRUST_BYTES is then read whole and
    checked by it before any record is given out (see _whole)."""
    offsets = load_offsets(path, index_at, records, size, index_checksum).astype(np.int64)
    bounds = np.append(offsets, np.int64(size))
    with open_registered(path, size) as f:  # (one gone: shard_missing)
        if checksum is not None and checksum.startswith(CHECKSUM_ALGO + ":") and size <= TRUST_BYTES:
            yield from _whole(path, f, bounds, records, pad, checksum)
        else:
            yield from _windowed(path, f, bounds, records, pad)
        f.read(1)  # at the registered end: a longer file is one line here (open_shard's size check)


def _cuts(bounds: np.ndarray, records: int) -> Iterator[tuple[int, int]]:
    """The windows' first and end records: about WINDOW_BYTES each (a larger record alone)."""
    lo = 0
    while lo < records:
        hi = int(np.searchsorted(bounds, bounds[lo] + WINDOW_BYTES, side="right")) - 1
        hi = min(max(hi, lo + 1), records)
        yield lo, hi
        lo = hi


def _window(raw: bytes, bounds: np.ndarray, lo: int, hi: int, base: int) -> Window:
    return Window(lo, raw, bounds[lo:hi] - base, np.diff(bounds[lo : hi + 1]) - FRAMING)


def _windowed(path: str, f: object, bounds: np.ndarray, records: int, pad: int) -> Iterator[Window]:
    """The shard read a window at a time, every record's framing and data CRC checked."""
    known: dict[int, int] = {}
    for lo, hi in _cuts(bounds, records):
        base = int(bounds[lo])
        window = _window(_read(f, int(bounds[hi]) - base, pad), bounds, lo, hi, base)
        _check(path, window, base, known, True)
        yield window


def _whole(path: str, f: object, bounds: np.ndarray, records: int, pad: int, checksum: str) -> Iterator[Window]:
    """The shard read in one buffer and checked by its whole-file CRC32C (hardware speed: a
    CRC a record costs a Python call each, most of a filter's read), then cut into windows
    over that buffer. The headers are checked still (cheap, vectorised: the index and the file
    agree); when the checksum differs, every record is checked as _windowed does, to name the
    damaged one. No record is given out before the whole file is found intact."""
    size = int(bounds[-1])
    raw = _read(f, size, pad)
    found = format_checksum(crc32c(memoryview(raw)[:size]))
    intact = found == checksum
    windows = [_window(raw, bounds, lo, hi, 0) for lo, hi in _cuts(bounds, records)]
    known: dict[int, int] = {}
    for window in windows:
        _check(path, window, 0, known, not intact)
    if not intact:  # (every byte is a record's header, data or CRC: not reached while they are right)
        raise content_changed(path, checksum, found)
    yield from windows


def _check(path: str, window: Window, base: int, known: dict[int, int], data: bool) -> None:
    """Raise the CorruptShardError of the window's first damaged record (``base``: the window's
    offset in the file); ``data`` False: the headers alone."""
    fault = framing_fault(window.raw, window.at, window.lengths, known, data)
    if fault is not None:
        j, header = fault
        found = "a damaged record header" if header else "a data CRC mismatch"
        where = f"record {window.first + j} (byte {base + int(window.at[j])})"
        raise CorruptShardError(path, where, "an intact record", found)


def _read(f: object, n: int, pad: int) -> bytes:
    """``n`` bytes of ``f`` then ``pad`` zero bytes (a short file: open_shard's size check raises)."""
    view = _scratch(n + pad)
    got = 0
    while got < n:
        step = f.readinto(view[got:n])  # type: ignore[attr-defined]
        if not step:
            break  # (open_shard's size check raised already; a stream that ends early is caught here)
        got += step
    if got < n:
        raise CorruptShardError(str(getattr(f, "name", "?")), "size", f"at least {n} bytes", f"{got}")
    view[n:] = bytes(pad)
    return bytes(view)


_LOCAL = threading.local()


def _scratch(n: int) -> memoryview:
    """A buffer of ``n`` bytes to read into, the thread's own kept for the next read when it is
    at most SCRATCH_BYTES: a new one a window (zeroed, then copied into the bytes given out)
    cost ten times the read itself, in page faults, on a busy machine."""
    if n > SCRATCH_BYTES:
        return memoryview(bytearray(n))
    kept: bytearray | None = getattr(_LOCAL, "buffer", None)
    if kept is None or len(kept) < n:
        kept = _LOCAL.buffer = bytearray(max(n, WINDOW_BYTES))
    return memoryview(kept)[:n]
