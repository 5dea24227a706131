"""Records of a read plan by position: random access through each shard's record index.

A batch's records are sorted by (shard, offset), read with positional reads (``os.pread``
on local files, ranged GETs on object stores), records close together in one read, and
handed back in the order asked. Every record's length CRC and data CRC is checked, and the
length in its header must be the one its index gives. Each shard is checked once per
process before its first read: its size (one fstat, or one HEAD) and its index's record
count against the manifest.

A gzip/zlib shard cannot be read at an offset: the first time a process needs one, it is
inflated once into a temporary uncompressed file in that process (removed when the reader
goes or the process ends, a DataLoader worker included; a killed process's by the next one
to inflate), indexed while it is written, and read like any other from then on.

The reader carries its plan alone across pickling; open files, indexes and inflated copies
belong to the process that made them (a forked child starts its own).
"""

from __future__ import annotations

import bisect
import contextlib
import os
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from multiprocessing.util import Finalize
from pathlib import Path
from typing import IO, Any

import numpy as np

from catalog.commit.plans import ReadPlan
from catalog.errors import CorruptRecordError, CorruptShardError
from catalog.readers import owned
from catalog.readers.files import check_file, open_checked, stream_shard
from catalog.storage import damaged_shard, open_shard
from catalog.storage.index import load_offsets
from catalog.tfrecord import native
from catalog.tfrecord.framing import FOOTER_SIZE, FRAMING, HEADER_SIZE, RecordWriter, framing_fault, masked_crc32c
from catalog.words import counted

GAP_LOCAL = 16 << 10  # one read spans needed records this close: cheaper than another syscall
# On an object store a request costs a round trip, but every byte of a hole read through is
# transferred: a hole is read through when no longer than the record after it, so a batch of
# scattered records fetches at most about twice their bytes (plus HOLE_FLOOR each), never the
# span of a whole shard; holes up to HOLE_FLOOR (a request's own headers cost about that
# much), and none over GAP_REMOTE.
HOLE_FLOOR = 4 << 10
GAP_REMOTE = 1 << 20
INFLATED = "catalog-inflated-"  # a process's folder of inflated copies, in the temporary folder
OWNER = ".owner"  # in that folder: locked (flock) by its process for as long as it lives
OPEN_FILES = 64  # local shards kept open per reader and process
INDEX_BUDGET = 256 << 20  # bytes of record offsets kept per reader and process


@dataclass
class _Shard:
    """A planned shard as this process reads it: where its bytes are, where each record starts."""

    path: str  # the shard, or its inflated copy
    bounds: np.ndarray  # int64: each record's offset, then the file's size
    remote: bool


class _Local:
    """What one process holds open for a reader."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.shards: OrderedDict[int, _Shard] = OrderedDict()
        self.index_bytes = 0
        self.files: OrderedDict[int, IO[bytes]] = OrderedDict()
        self.inflated: dict[int, _Shard] = {}
        self.temp: Path | None = None
        self.headers: dict[int, int] = {}  # data length -> its masked header CRC
        # One read at a time per process: threads (grain's prefetch, say) share the open files,
        # and one thread's LRU eviction must not close a file another is reading.
        self.lock = threading.RLock()
        self.retired: list[IO[bytes]] = []  # files out of the LRU, closed once the read using them ends

    def temp_dir(self) -> Path:
        if self.temp is None:
            _sweep_orphans()
            self.temp = Path(tempfile.mkdtemp(prefix=INFLATED))
            owner = owned.claim(self.temp / OWNER)
            # multiprocessing's Finalize, not weakref.finalize: a forked worker (a DataLoader's)
            # ends through os._exit, which runs only multiprocessing's exit finalizers.
            Finalize(self, _remove_temp, args=(self.temp, self.pid, owner), exitpriority=0)
        return self.temp


def _sweep_orphans() -> None:
    """Remove inflated copies no live process owns: one killed (the OOM killer's favourite, a
    DataLoader worker) ran no finalizer, and each copy is a whole shard."""
    if not owned.LOCKS:
        return
    for path in Path(tempfile.gettempdir()).glob(f"{INFLATED}*"):
        if _abandoned(path):
            shutil.rmtree(path, ignore_errors=True)


def _abandoned(folder: Path) -> bool:
    """Whether ``folder`` (a real folder, not a link) has an owner file no process holds; a
    folder without one, or not this user's to open, is left alone."""
    return not folder.is_symlink() and owned.abandoned(folder / OWNER)


def _remove_temp(path: Path, pid: int, owner: int) -> None:
    if os.getpid() == pid:  # a forked child inherits the finalizer, not the directory
        os.close(owner)  # first: Windows removes no open file
        shutil.rmtree(path, ignore_errors=True)


class RecordReader:
    """The records of ``plan`` by dataset position (0 .. plan.records - 1)."""

    def __init__(self, plan: ReadPlan) -> None:
        self.plan = plan
        self.shards = plan.shards
        counts = np.array([s.count for s in plan.shards], dtype=np.int64)
        self.firsts = np.concatenate([np.zeros(1, np.int64), np.cumsum(counts)])  # dataset position of each range
        self.starts = np.array([s.start for s in plan.shards], dtype=np.int64)
        self._firsts, self._starts = self.firsts.tolist(), self.starts.tolist()  # for read_one
        self.remote = any(s.io.remote for s in plan.shards)  # any shard on an object store: holes as for those
        self._local: _Local | None = None

    def __len__(self) -> int:
        return int(self.firsts[-1])

    def __getstate__(self) -> dict[str, Any]:
        return {"plan": self.plan}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["plan"])  # type: ignore[misc]

    @property
    def local(self) -> _Local:
        if self._local is None or self._local.pid != os.getpid():
            self._local = _Local()
        return self._local

    def locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(planned shard, record index within that shard) of each dataset position."""
        shard = np.searchsorted(self.firsts, positions, side="right") - 1
        return shard, positions - self.firsts[shard] + self.starts[shard]

    def read(self, positions: np.ndarray) -> list[bytes]:
        """The records at ``positions`` (int64, each in range), in that order (see read_spans)."""
        raw, starts, lengths = self.read_spans(positions)
        return [raw[a:b] for a, b in zip(starts.tolist(), (starts + lengths).tolist(), strict=True)]

    def read_spans(self, positions: np.ndarray, pad: int = 0) -> tuple[bytes, np.ndarray, np.ndarray]:
        """The records at ``positions`` where one buffer holds them: (buffer, each record's
        start in it, its length), in the order of ``positions``. Sorted by (shard, offset),
        records less than a gap apart are fetched in one read; every header and CRC is checked.
        The buffer ends with ``pad`` zero bytes (what Schema.decode_spans wants)."""
        if not len(positions):
            return bytes(pad), np.zeros(0, np.int64), np.zeros(0, np.int64)
        with self.local.lock, self._closing():
            return self._read(positions, pad)

    def _read(self, positions: np.ndarray, pad: int) -> tuple[bytes, np.ndarray, np.ndarray]:
        shard, rec = self.locate(positions)
        order = np.lexsort((rec, shard))
        shard, rec = shard[order], rec[order]
        starts, ends = np.empty(len(rec), np.int64), np.empty(len(rec), np.int64)
        cuts = (np.flatnonzero(np.diff(shard)) + 1).tolist()
        for lo, hi in zip([0, *cuts], [*cuts, len(rec)], strict=True):
            bounds = self._shard(int(shard[lo])).bounds
            starts[lo:hi], ends[lo:hi] = bounds[rec[lo:hi]], bounds[rec[lo:hi] + 1]
        new_run = np.ones(len(rec), dtype=bool)
        new_run[1:] = (shard[1:] != shard[:-1]) | ~self._read_through(starts, ends)
        first = np.flatnonzero(new_run)
        last = np.append(first[1:], len(rec)) - 1
        span_starts, span_ends = starts[first], ends[last]  # sorted within a shard: ends never decrease
        buf = self._fetch_joined(shard[first], span_starts, span_ends, pad)
        base = np.cumsum(span_ends - span_starts) - span_ends  # where each run's file offset 0 falls in buf
        at = starts + np.repeat(base, last - first + 1)
        lengths = ends - starts - FRAMING
        self._check(buf, at, lengths, shard, rec, starts)
        back = np.empty(len(order), dtype=np.int64)
        back[order] = np.arange(len(order))
        return buf, (at + HEADER_SIZE)[back], lengths[back]

    def _read_through(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Whether one read spans the hole between each record (sorted) and the next."""
        holes = starts[1:] - ends[:-1]
        if not self.remote:
            return holes <= GAP_LOCAL
        return holes <= np.clip(ends[1:] - starts[1:], HOLE_FLOOR, GAP_REMOTE)  # see HOLE_FLOOR

    def read_one(self, position: int) -> bytes:
        """The record at ``position``: ``read`` for one record, without its per-batch work."""
        local = self.local
        with local.lock:  # (no _closing context: a row's read is hot, and this is what it does)
            try:
                return self._read_one(position, local)
            finally:
                if local.retired:
                    self._close_retired(local)

    @contextlib.contextmanager
    def _closing(self) -> Iterator[None]:
        """Close the files evicted from the LRU during a read, after it (it may still use them)."""
        try:
            yield
        finally:
            self._close_retired(self.local)

    @staticmethod
    def _close_retired(local: _Local) -> None:
        retired, local.retired = local.retired, []
        for f in retired:
            f.close()

    def _read_one(self, position: int, local: _Local) -> bytes:
        i = bisect.bisect_right(self._firsts, position) - 1
        rec = position - self._firsts[i] + self._starts[i]
        shard = local.shards.get(i) or self._shard(i)
        start, end = int(shard.bounds[rec]), int(shard.bounds[rec + 1])
        f = None if shard.remote else local.files.get(i) or self._file(i, shard)
        data = os.pread(f.fileno(), end - start, start) if f is not None else b""
        if len(data) != end - start:  # remote, or cut since it was opened
            data = self._fetch(np.array([i]), np.array([start]), np.array([end]))[0]
        length = end - start - FRAMING
        known = local.headers
        header_crc = known.get(length)
        if header_crc is None:
            header_crc = known[length] = masked_crc32c(length.to_bytes(8, "little"))
        payload = data[HEADER_SIZE:-FOOTER_SIZE]
        if data[:HEADER_SIZE] != length.to_bytes(8, "little") + header_crc.to_bytes(4, "little"):
            raise self._damaged(i, rec, start, "a damaged record header")
        if masked_crc32c(payload) != int.from_bytes(data[-FOOTER_SIZE:], "little"):
            raise self._damaged(i, rec, start, "a data CRC mismatch")
        return payload

    def where_one(self, position: int) -> tuple[str, int]:
        """(shard location, index within the shard) of dataset position ``position``."""
        i = bisect.bisect_right(self._firsts, position) - 1
        return self.shards[i].path, position - self._firsts[i] + self._starts[i]

    def where_of(self, positions: np.ndarray) -> Callable[[int], tuple[str, int]]:
        """For decode errors: (shard location, index within the shard) of ``positions[i]``."""

        def where(i: int) -> tuple[str, int]:
            shard, rec = self.locate(positions[i : i + 1])
            return self.shards[int(shard[0])].path, int(rec[0])

        return where

    def _fetch_joined(self, shards: np.ndarray, starts: np.ndarray, ends: np.ndarray, pad: int) -> bytes:
        """The ranges of :meth:`_fetch` in one buffer, then ``pad`` zero bytes. Local files are
        read by one call of the C extension where it is built (a random batch is a few hundred
        reads: their Python calls and the join were a fifth of ``src[list]``); anything else,
        or a read that fails or comes back short, goes the general way, which says why."""
        if not self.remote and native.NATIVE is not None:
            opened = {i: self._shard(i) for i in set(shards.tolist())}
            numbers = {i: self._file(i, shard).fileno() for i, shard in opened.items()}
            fds = np.array([numbers[i] for i in shards.tolist()], dtype=np.int64)
            got = native.pread_ranges(fds, starts, ends, pad)
            if got is not None:
                return got
        return b"".join([*self._fetch(shards, starts, ends), bytes(pad)])

    def _fetch(self, shards: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> list[bytes]:
        """Bytes ``starts[k]`` to ``ends[k]`` of planned shard ``shards[k]``, for each k."""
        firsts, begins, stops = shards.tolist(), starts.tolist(), ends.tolist()
        opened = {i: self._shard(i) for i in set(firsts)}
        got: list[bytes] = [b""] * len(firsts)
        far = [k for k, i in enumerate(firsts) if opened[i].remote]
        if far:  # one request each, sent concurrently by fsspec's async stores (s3fs)
            paths = [opened[firsts[k]].path for k in far]
            reader = self.shards[firsts[far[0]]].io
            fetched = reader.read_ranges(paths, [begins[k] for k in far], [stops[k] for k in far])
            for k, data in zip(far, fetched, strict=True):
                got[k] = data
        if len(far) < len(firsts):
            pread = os.pread
            fds = {i: self._file(i, shard).fileno() for i, shard in opened.items() if not shard.remote}
            if not far:
                got = [pread(fds[i], e - s, s) for i, s, e in zip(firsts, begins, stops, strict=True)]
            for k, (i, s, e) in enumerate(zip(firsts, begins, stops, strict=True) if far else ()):
                if i in fds:
                    got[k] = pread(fds[i], e - s, s)
        for data, i, s, e in zip(got, firsts, begins, stops, strict=True):
            if len(data) != e - s:  # cut since it was opened
                planned = self.shards[i]
                short = f"{counted(s + len(data), 'byte')} (a read at byte {s} came back short)"
                raise CorruptShardError(planned.path, "size", counted(planned.bytes, "byte"), short)
        return got

    def _check(
        self, buf: bytes, at: np.ndarray, lengths: np.ndarray, shard: np.ndarray, recs: np.ndarray, offsets: np.ndarray
    ) -> None:
        """Check the framed records at ``at`` in ``buf`` (their data ``lengths``): every header
        and CRC; a mismatch names the shard, the record and its offset."""
        fault = framing_fault(buf, at, lengths, self.local.headers)
        if fault is not None:
            j, header = fault
            found = "a damaged record header" if header else "a data CRC mismatch"
            raise self._damaged(int(shard[j]), int(recs[j]), int(offsets[j]), found)

    def _damaged(self, i: int, rec: int, offset: int, found: str) -> CorruptShardError:
        return CorruptShardError(self.shards[i].path, f"record {rec} (byte {offset})", "an intact record", found)

    # ---- opening, checking, indexing (once per process)
    def _shard(self, i: int) -> _Shard:
        local = self.local
        shard = local.shards.get(i)
        if shard is not None:
            local.shards.move_to_end(i)
            return shard
        shard = local.shards[i] = self._inflated(i) if self.shards[i].compression != "none" else self._indexed(i)
        local.index_bytes += shard.bounds.nbytes
        while local.index_bytes > INDEX_BUDGET and len(local.shards) > 1:
            _j, old = local.shards.popitem(last=False)
            local.index_bytes -= old.bounds.nbytes
        return shard

    def _indexed(self, i: int) -> _Shard:
        """Uncompressed shard ``i``: its size checked, its record offsets loaded (its registered
        index, else one scan of it) and counted against the manifest."""
        planned = self.shards[i]
        remote = planned.io.remote
        if remote:
            check_file(planned)  # its size and content
        else:
            self._file(i, None)  # opened, its size and content checked
        try:
            offsets = load_offsets(
                planned.path, planned.index_path, planned.records, planned.bytes, planned.index_checksum, planned.cache
            )
        except CorruptRecordError as e:
            raise damaged_shard(planned.path, e) from e
        return _Shard(planned.path, np.append(offsets.astype(np.int64), np.int64(planned.bytes)), remote)

    def _file(self, i: int, shard: _Shard | None) -> IO[bytes]:
        """Local shard ``i`` (or its inflated copy) open for positional reads; a shard is
        opened with its size checked."""
        files = self.local.files
        f = files.get(i)
        if f is not None:
            files.move_to_end(i)
            return f
        if shard is not None and shard.path != self.shards[i].path:
            f = open_shard(shard.path)
        else:
            f = open_checked(self.shards[i])
        files[i] = f
        if len(files) > OPEN_FILES:
            self.local.retired.append(files.popitem(last=False)[1])
        return f

    def _inflated(self, i: int) -> _Shard:
        """Compressed shard ``i``, inflated once in this process into a temporary file."""
        local = self.local
        shard = local.inflated.get(i)
        if shard is not None:
            return shard
        planned = self.shards[i]
        path = local.temp_dir() / f"{i}.tfrecord"
        whole = replace(planned, start=0, stop=planned.records)
        with RecordWriter(path, index=True) as w:
            for _first, batch in stream_shard(whole):  # size, CRCs and count checked
                w.write_many(batch)
        offsets = w.offsets()
        if len(offsets) != planned.records:
            inflated = counted(len(offsets), "record")
            message = f"{planned.path}: inflated {inflated}, {planned.records} registered"
            raise CorruptShardError(planned.path, message=message)
        shard = local.inflated[i] = _Shard(str(path), np.append(offsets.astype(np.int64), np.int64(w.bytes)), False)
        return shard
