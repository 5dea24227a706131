"""A shard's record index: where each record starts, for random access (``Dataset.source``).

The index of ``<dataset>/<shard>.tfrecord`` is the object ``.index/<dataset>/<shard>.tfrecord.idx``
in the data area's index tree (names.index_rel): the byte offset of every record's header, as
little-endian uint64, nothing else (8 bytes per record). Like its shard it is immutable,
written before the commit that registers it (the shard row's ``index_checksum``: CRC32C of the
index), and removed by gc with its shard. Only uncompressed shards have one: offsets into a
gzip stream cannot be read without inflating everything before them.

An index is not fsynced, nor is its folder: it is a function of its shard's bytes (which are),
and every read of it is checked against the registered checksum. One lost or cut short by a
crash of the machine is rebuilt from its shard by the reader that finds it so (load_offsets:
the rebuilt one must have the registered checksum), reported by ``verify`` and written again
by ``catalog index``. Two fsyncs fewer made a 100-row append about 10% faster (0.38 ms).

A local shard of at most FILE_MIN_BYTES has its index registered (the checksum) but no file:
one read of the shard finds its offsets for about what opening an index file costs, and a
small append then creates one file, not two (a file created cost about 1 ms an append on
this project's ext4 disk, more than the rest of the disk's work). On an object store every
index has its file (a read there is a request).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from crc32c import crc32c

from catalog import faults
from catalog.errors import CorruptRecordError, CorruptShardError
from catalog.storage.base import Store
from catalog.storage.fileio import file_io, write_error
from catalog.storage.files import damaged_shard, format_checksum, open_shard, shard_batches
from catalog.storage.names import index_folder, index_rel
from catalog.tfrecord.framing import FRAMING
from catalog.words import counted

if TYPE_CHECKING:
    from catalog.storage.cache import ShardCache

OFFSET = np.dtype("<u8")
FILE_MIN_BYTES = 1 << 16  # a local shard this size or smaller keeps no index file (see above)
_LENGTH = struct.Struct("<Q")  # a record header's first field: the data's length
_SPAN = np.arange(_LENGTH.size)


def offsets_from_lengths(lengths: np.ndarray, start: int = 0) -> np.ndarray:
    """Record offsets of framed records of these data lengths, the first at ``start``."""
    ends = np.cumsum(lengths.astype(np.uint64) + np.uint64(FRAMING), dtype=np.uint64)
    out = np.empty(len(lengths), dtype=OFFSET)
    if len(lengths):
        out[0] = 0
        out[1:] = ends[:-1]
    return out + np.uint64(start)


def scan_offsets(url: str, size: int) -> np.ndarray:
    """The index of an uncompressed shard, from one sequential read of it (every CRC checked,
    the size as registered): for shards registered without one (before format 4, ``--link``)."""
    try:
        lengths = [np.fromiter(map(len, b), dtype=np.uint64, count=len(b)) for b in shard_batches(url, size)]
    except CorruptRecordError as e:  # a registered shard whose records break: not what was committed
        raise damaged_shard(url, e) from e
    return offsets_from_lengths(np.concatenate(lengths) if lengths else np.zeros(0, np.uint64))


def has_file(size: int, remote: bool) -> bool:
    """Whether the index of a shard of ``size`` bytes has a file of its own (see the module)."""
    return remote or size > FILE_MIN_BYTES


def index_bytes(offsets: np.ndarray) -> tuple[bytes, str]:
    """The index file's bytes and their checksum as the manifest records it."""
    data = np.ascontiguousarray(offsets, dtype=OFFSET).tobytes()
    return data, format_checksum(crc32c(data))


def parse_index(data: bytes, where: str, records: int, size: int, checksum: str) -> np.ndarray:
    """Index bytes read back, checked against what the manifest registered (its checksum, the
    shard's record count and size): a damaged or foreign index is a CorruptShardError, whose
    message says how to write it again (a crash of the machine can leave one so: see above)."""
    if len(data) != records * OFFSET.itemsize:
        want, got = counted(records * OFFSET.itemsize, "byte"), counted(len(data), "byte")
        raise _damaged(where, "record index size", want, got)
    found = format_checksum(crc32c(data))
    if found != checksum:
        raise _damaged(where, "record index checksum", checksum, found)
    offsets = np.frombuffer(data, dtype=OFFSET)
    steps = np.diff(offsets, append=np.uint64(size))
    if records and (offsets[0] != 0 or offsets[-1] > size - FRAMING or (steps < FRAMING).any()):
        raise _damaged(where, "record index", "offsets within the shard", "offsets outside it")
    return offsets


def _damaged(where: str, what: str, registered: object, found: object) -> CorruptShardError:
    hint = f"{where}: {what}: registered {registered}, found {found} (`catalog index` writes it again)"
    return CorruptShardError(where, what, registered, found, message=hint)


def read_index(where: str, records: int, size: int, checksum: str, cache: ShardCache | None = None) -> np.ndarray:
    """The registered index at ``where`` (Store.index_url: a path or URL), checked against its
    shard's registered facts (parse_index). With a ``cache``, an index on an object store is
    read from its copy there, fetched once and checked as a shard's is (storage.cache): the
    readers of a cached shard's later epochs ask the store for nothing."""
    try:
        if cache is not None and file_io(where).remote:
            with cache.open(file_io(where), where, checksum, records * OFFSET.itemsize) as f:
                data = f.read()
        else:
            with open_shard(where) as f:
                data = f.read(records * OFFSET.itemsize + 1)  # one byte more: a longer file shows
    except FileNotFoundError as e:  # the shard may be sound: the fix is to write its index again
        hint = f"{where}: record index: registered present, found missing (`catalog index` writes it again)"
        raise CorruptShardError(where, "record index", "present", "missing", message=hint) from e
    return parse_index(data, where, records, size, checksum)


def load_offsets(
    url: str, index_at: str, records: int, size: int, index_checksum: str | None, cache: ShardCache | None = None
) -> np.ndarray:
    """The record offsets of the shard at ``url``: its registered index (at ``index_at``; its
    copy in ``cache``, see read_index), else one sequential read of the shard."""
    if index_checksum is None:
        return _scanned(url, records, size)
    stored = stored_index(index_at, records, size, index_checksum, cache)
    if stored is not None:
        return stored
    found = _scanned(url, records, size)
    rebuilt = index_bytes(found)[1]
    if rebuilt != index_checksum:  # not the registered one: the shard changed since its commit
        raise CorruptShardError(url, "record index checksum", index_checksum, rebuilt)
    return found


def stored_index(
    where: str, records: int, size: int, checksum: str, cache: ShardCache | None = None
) -> np.ndarray | None:
    """The registered index's file, read and checked (read_index); None when the shard has no
    file (has_file), or it is missing or damaged (a crash of the machine: see the module)."""
    if not has_file(size, file_io(where).remote):
        return None
    try:
        return read_index(where, records, size, checksum, cache)
    except CorruptShardError:
        return None


def _scanned(url: str, records: int, size: int) -> np.ndarray:
    offsets = scan_offsets(url, size)
    if len(offsets) != records:
        raise CorruptShardError(url, "records", records, len(offsets))
    return offsets


def publish_index(
    store: Store,
    shard_rel: str,
    data: bytes,
    size: int,
    *,
    unique: bool = False,
    pending: list[Path] | None = None,
) -> None:
    """Put the index ``data`` of the shard ``shard_rel`` (of ``size`` bytes: a small local one
    gets no file, see the module) in the index tree the way shards are put in place, written
    under a temporary name, then renamed (or uploaded), but not fsynced (see the module: a
    lost index is rebuilt from its shard). ``unique``:
    a temporary name of this call's own (several indexers may race for one shard). While the
    temporary file exists its path is in ``pending``, for the caller's cleanup."""
    if not has_file(size, store.remote):
        return
    rel = index_rel(shard_rel)
    store.prepare(index_folder(shard_rel.split("/", 1)[0]))
    temp, f = store.open_temp(rel, unique)
    if pending is not None:
        pending.append(temp)
    try:
        f.write(data)
    except OSError as e:
        f.close()
        raise write_error(temp, e) from e
    faults.point("index.closing", temp=temp, shard=shard_rel, flush=f.flush)
    store.publish(f, temp, rel, sync=False)
    if pending is not None:
        pending.remove(temp)


class OffsetWalker:
    """The record offsets of an uncompressed shard's bytes, fed in chunks as a copy reads them
    (compaction of shards registered without an index: one read copies and indexes). Only the
    length fields are read; the copy checks the bytes themselves (the whole-file checksum)."""

    def __init__(self) -> None:
        self._found: list[int] = []
        self._pos = 0  # stream offset of the next chunk
        self._next = 0  # stream offset of the next record's header
        self._carry = b""  # the first bytes of a length field cut by a chunk's end

    def write(self, chunk: bytes | memoryview) -> None:
        data = memoryview(chunk)
        pos, nxt, found = self._pos, self._next, self._found
        end = pos + len(data)
        if self._carry:
            got = self._carry + bytes(data[: _LENGTH.size - len(self._carry)])
            if len(got) < _LENGTH.size:
                self._carry, self._pos = got, end
                return
            found.append(nxt)
            nxt += _LENGTH.unpack(got)[0] + FRAMING
            self._carry = b""
        while nxt + _LENGTH.size <= end:
            found.append(nxt)
            nxt += _LENGTH.unpack_from(data, nxt - pos)[0] + FRAMING
        if nxt < end:
            self._carry = bytes(data[nxt - pos :])
        self._pos, self._next = end, nxt

    def offsets(self, where: str, records: int) -> np.ndarray:
        """The offsets found, once the whole shard went through: they must end exactly at its end
        and be ``records`` many (the shard ``where`` is not the file registered otherwise)."""
        if self._next != self._pos or self._carry:
            raise CorruptShardError(where, message=f"{where}: its records do not end at its end (run `catalog verify`)")
        if len(self._found) != records:
            raise CorruptShardError(where, "records", records, len(self._found))
        return np.array(self._found, dtype=OFFSET)


class IndexCheck:
    """Whether a registered index matches its shard, from the shard's bytes in chunks as a read
    of it passes them (verify's own read): at each offset the index gives, the record's length
    field must lead exactly to the next offset (the last one to the end of the file). Starting
    at 0 (parse_index checks that), the offsets are then the framing's own."""

    def __init__(self, offsets: np.ndarray, size: int) -> None:
        self._offsets = offsets
        self._ends = np.append(offsets[1:], np.uint64(size)).astype(OFFSET)  # where each record must end
        self._pos = 0
        self._done = 0  # records checked
        self._carry = b""
        self.mismatch: int | None = None  # the first record whose offset the framing contradicts

    def __call__(self, chunk: memoryview) -> None:
        if self.mismatch is not None or self._done == len(self._offsets):
            return
        data = np.frombuffer(chunk, dtype=np.uint8)
        pos, end, i = self._pos, self._pos + len(data), self._done
        self._pos = end
        if self._carry:  # a length field cut by the last chunk's end
            got = self._carry + data[: _LENGTH.size - len(self._carry)].tobytes()
            if len(got) < _LENGTH.size:
                self._carry = got
                return
            self._carry = b""
            if not self._check(i, np.array([_LENGTH.unpack(got)[0]], dtype=OFFSET)):
                return
            i += 1
        offs = self._offsets
        last = end - _LENGTH.size  # the last offset whose length field this chunk holds whole
        whole = int(np.searchsorted(offs, np.uint64(last), side="right")) if last >= 0 else i
        if whole > i:  # every length field wholly in this chunk, at once
            at = (offs[i:whole] - np.uint64(pos)).astype(np.intp)
            if not self._check(i, data[at[:, None] + _SPAN].view(OFFSET).ravel()):
                return
            i = whole
        if i < len(offs) and int(offs[i]) < end:
            self._carry = data[int(offs[i]) - pos :].tobytes()
        self._done = i

    def _check(self, first: int, lengths: np.ndarray) -> bool:
        stop = first + len(lengths)
        bad = np.flatnonzero(self._offsets[first:stop] + lengths + np.uint64(FRAMING) != self._ends[first:stop])
        if bad.size:
            # Every offset up to this record's was proven right: the next one is wrong (or, after
            # the last record, the file does not end where the index says its records do).
            self.mismatch = min(first + int(bad[0]) + 1, len(self._offsets) - 1)
        return not bad.size

    def result(self) -> int | None:
        """After the whole shard: the first record whose registered offset is wrong, or None."""
        if self.mismatch is None and self._done < len(self._offsets):
            return self._done  # the file ended before the offsets did
        return self.mismatch
