"""Shard files one at a time: reading one safely, checksumming it, publishing it durably.

A shard is written under a temporary name while its record count and whole-file CRC32C
are computed, fsynced, renamed to its final, never-reused name, and its directory fsynced;
only then may a manifest transaction register it (see ARCHITECTURE.md).
"""

from __future__ import annotations

import builtins
import io
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from crc32c import crc32c

# The record framing (NumPy) through the package's lazy names: a Store names and checksums shards
# without it (`catalog show` lists shards and loads it only to parse the schema).
from catalog import tfrecord
from catalog.errors import CorruptRecordError, CorruptShardError, ObjectMissingError, VersionNotFoundError
from catalog.storage.fileio import facts_size, file_io
from catalog.words import counted

CHECKSUM_ALGO = "crc32c"
CHECKSUM_CHUNK = 4 << 20
# A shard's fingerprint (storage.content): a file the catalog wrote and alone names.
OWNED = "owned"


@dataclass(frozen=True)
class ShardFile:
    """A written shard file's facts, as it is published and before it is registered: what the
    storage layer knows of it (its ``rel``, facts, provenance, statistics), nothing of a
    dataset's versions. A commit registers it as a ``commit.changes.NewShard``; once
    registered it is read back as a ``LiveShard`` or a public ``ShardInfo`` (ARCHITECTURE.md,
    "Shards: one vocabulary")."""

    rel: str  # "<dataset>/<file>", relative to the data area, "/"-separated
    records: int
    bytes: int
    checksum: str  # "crc32c:" + 8 hex digits of the whole file
    compression: str = "none"
    index_checksum: str | None = None  # its record index (storage.index), when one was written
    source: str | None = None  # where its records came from (see the manifest's shards.source)
    linked: bool = False  # the input file itself, hard linked (append --link), not a copy
    location: str | None = None  # adopted in place: the file's own path or URL (``rel`` names no file)
    fingerprint: str = OWNED  # what the content check compares its file with (storage.content)
    # Its records' statistics (catalog.stats.DatasetStats.to_bytes), None: not computed.
    stats: builtins.bytes | None = field(default=None, repr=False)


def format_checksum(crc: int) -> str:
    return f"{CHECKSUM_ALGO}:{crc:08x}"


def shard_missing(path: str) -> VersionNotFoundError:
    """A registered shard that is not there: the one line for every reader that finds one gone."""
    return VersionNotFoundError(f"{path}: shard file is missing (collected by gc, or deleted by hand)")


def size_mismatch(path: str, registered: int, found: int | None) -> CorruptShardError:
    """A shard that is not the size the manifest registered (``found`` None: larger, by how
    much unknown): every reader's one line for it."""
    if found is None or found > registered:
        text = f"{path}: more than the {counted(registered, 'byte')} registered; run `catalog verify`"
    else:
        text = f"{path}: {counted(found, 'byte')}, {registered} registered; run `catalog verify`"
    shown = f"more than {counted(registered, 'byte')}" if found is None else counted(found, "byte")
    return CorruptShardError(path, "size", counted(registered, "byte"), shown, text)


def content_changed(path: str, registered: str, found: str) -> CorruptShardError:
    """A shard whose bytes are not the registered ones (same size, other checksum): an adopted
    or linked file rewritten, or a damaged one; every reader's one line for it."""
    text = (
        f"{path}: its content changed after it was registered (checksum {found}, {registered} registered): "
        "run `catalog verify`; if the file was adopted or linked and its new content is wanted, adopt it again"
    )
    return CorruptShardError(path, "checksum", registered, found, text)


def damaged_shard(path: str, e: CorruptRecordError, start: int = 0) -> CorruptShardError:
    """A damaged record in a registered shard (found reading from byte ``start`` on): the shard
    is not what was committed."""
    where = f"byte {start + e.offset}" + (" of its decompressed stream" if e.compressed else "")
    return CorruptShardError(path, where, "an intact record", e.reason, f"{path}: {where}: {e.reason}")


class _Sized(io.RawIOBase):
    """A shard read no further than its registered size, and found to be exactly that long:
    a file grown or cut since it was registered is one line, never extra or missing records."""

    def __init__(self, f: IO[bytes], path: str, size: int) -> None:
        super().__init__()
        self._f, self.name, self._size, self._pos = f, path, size, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        want = min(len(view), self._size - self._pos)
        if want <= 0:
            if want == 0 and len(view) and self._f.read(1):
                raise size_mismatch(self.name, self._size, self._actual_size())
            return 0
        n = self._f.readinto(view[:want])  # type: ignore[attr-defined]  # FileIO and RemoteFile have it
        if not n:
            raise size_mismatch(self.name, self._size, self._pos)
        self._pos += n
        return int(n)

    def _actual_size(self) -> int | None:
        try:
            return os.fstat(self._f.fileno()).st_size
        except (OSError, io.UnsupportedOperation, AttributeError):  # an object store's file: unknown
            return None

    def seekable(self) -> bool:
        return bool(self._f.seekable())

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = (0, self._pos, self._size)[whence]  # the end is the registered end
        self._pos = self._f.seek(base + offset)
        return self._pos

    def close(self) -> None:
        self._f.close()
        super().close()


def open_shard(path: str, size: int | None = None) -> IO[bytes]:
    """Open a shard for reading: a URL, or a regular local file reached without following a
    symbolic link at the file or at its dataset folder (the data area itself may be a link:
    the user chose it). A FIFO, device or link is refused in one line, before any read. With
    ``size`` (the registered size), reads stop there and a longer or shorter file is one line."""
    if size is not None:
        return _Sized(open_shard(path), path, size)  # type: ignore[return-value]
    return file_io(path).open(path)


def location_size(location: str) -> int | None:
    """The size of an adopted shard's own file now, opened as open_shard opens it (a regular
    file, no link); None when it is not there. An object store's file: -1 (not asked)."""
    try:
        reader = file_io(location)
        with reader.open(location) as f:  # (open_shard's open)
            return -1 if reader.remote else facts_size(reader.stat(location, f))
    except (FileNotFoundError, ObjectMissingError):
        return None


def location_exists(location: str) -> bool:
    """Whether an adopted shard's own file (a path or URL) is there to read, as open_shard reads it."""
    return location_size(location) is not None


def shard_batches(path: str, size: int | None = None) -> Iterator[list[bytes]]:
    """The record batches of a shard, opened as :func:`open_shard` does (one gone: the
    readers' one line, not a FileNotFoundError from a worker)."""
    with open_registered(path, size) as f:
        yield from tfrecord.read_record_batches(f)


def open_registered(path: str, size: int | None = None) -> IO[bytes]:
    """:func:`open_shard` of a registered shard: a file that is not there is shard_missing."""
    try:
        return open_shard(path, size)
    except (FileNotFoundError, ObjectMissingError) as e:
        raise shard_missing(path) from e


def file_checksum(
    path: str | os.PathLike[str], limit: int | None = None, tap: Callable[[memoryview], object] | None = None
) -> tuple[int, str]:
    """(size, "crc32c:xxxxxxxx") of a whole shard (or URL), read in large chunks; with ``limit``
    (the registered size) at most one byte more is read: enough to know the size is wrong.
    ``tap`` sees every chunk as it is read (verify checks a record index in the same read)."""
    crc = 0
    size = 0
    buf = bytearray(CHECKSUM_CHUNK)  # one buffer refilled: no 4 MiB allocation per chunk
    view = memoryview(buf)
    end = None if limit is None else limit + 1
    with open_shard(os.fspath(path)) as f:
        while n := f.readinto(view if end is None else view[: min(len(buf), end - size)]):  # type: ignore[attr-defined]  # FileIO and RemoteFile both have it
            crc = crc32c(view[:n], crc)
            if tap is not None:
                tap(view[:n])
            size += n
    return size, format_checksum(crc)


def copy_verified(path: str, size_registered: int, checksum: str, out: Any, crc: int, buf: bytearray) -> int:
    """Append the shard at ``path`` to ``out``, checking its registered size and checksum on the
    way; returns ``crc`` extended over its bytes."""
    view = memoryview(buf)
    mine = 0
    size = 0
    f: Any = open_registered(path)  # a FileIO, or an fsspec file: both have readinto
    end = size_registered + 1  # never read past the registered size: one byte more tells it is wrong
    with f:
        while n := f.readinto(view[: min(len(buf), end - size)]):
            chunk = view[:n]
            mine = crc32c(chunk, mine)
            crc = crc32c(chunk, crc)
            out.write(chunk)
            size += n
    if size != size_registered:
        raise CorruptShardError(
            path,
            message=f"{path}: checksum {format_checksum(mine)} ({counted(size, 'byte')}), {checksum} "
            f"({counted(size_registered, 'byte')}) "
            "registered: the shard is damaged (run `catalog verify`); nothing was written",
        )
    if format_checksum(mine) != checksum:
        raise content_changed(path, checksum, format_checksum(mine))
    return crc
