"""Where shard bytes live: new immutable files, published atomically.

A shard is written under a temporary name while its record count and whole-file
CRC32C are computed, fsynced, renamed to its final, never-reused name, and its directory
fsynced; only then may a manifest transaction register it. Every file a writer makes
starts with its intent id, so gc can tell the files of a live writer from leftovers.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from crc32c import crc32c

from catalog.errors import CatalogError
from catalog.tfrecord.framing import FOOTER_SIZE, HEADER_SIZE, RecordWriter

CHECKSUM_ALGO = "crc32c"
SHARD_SUFFIX = ".tfrecord"
TEMP_PREFIX = "."
TEMP_SUFFIX = ".tmp"
CHECKSUM_CHUNK = 4 << 20


@dataclass(frozen=True)
class ShardFile:
    """A published shard file, ready to be registered."""

    path: str  # relative to the data area, "/"-separated
    records: int
    bytes: int
    checksum: str  # "crc32c:" + 8 hex digits of the whole file
    compression: str = "none"


def format_checksum(crc: int) -> str:
    return f"{CHECKSUM_ALGO}:{crc:08x}"


def new_intent_id() -> str:
    """Time-ordered and unique: 12 hex digits of milliseconds, then 16 random hex digits."""
    return f"{int(time.time() * 1000):012x}{secrets.token_hex(8)}"


def intent_of(filename: str) -> str | None:
    """The intent id a data file was written under, if its name has one."""
    name = filename[len(TEMP_PREFIX) :] if filename.startswith(TEMP_PREFIX) else filename
    head = name.split("-", 1)[0]
    return head if len(head) == 28 else None


def file_checksum(path: str | os.PathLike[str]) -> tuple[int, str]:
    """(size, "crc32c:xxxxxxxx") of a whole file, read in large chunks."""
    crc = 0
    size = 0
    buf = bytearray(CHECKSUM_CHUNK)
    view = memoryview(buf)
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            crc = crc32c(view[:n], crc)
            size += n
    return size, format_checksum(crc)


def publish(f: IO[bytes], temp: Path, final: Path, sync: bool = True) -> None:
    """Close a written temporary file under its final name: flush, fsync (``sync``), rename.
    The caller fsyncs the directory (once for all the files it publishes there)."""
    f.flush()
    if sync:
        os.fsync(f.fileno())
    f.close()
    os.rename(temp, final)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ShardSink:
    """Writes records into new shard files of one dataset, rolling at size or count limits."""

    def __init__(
        self, data_root: Path, dataset: str, intent_id: str, shard_size: int, shard_records: int, sync: bool = True
    ) -> None:
        self.dir = data_root / dataset
        self.dataset = dataset
        self.intent_id = intent_id
        self.shard_size = shard_size
        self.shard_records = shard_records
        self.sync = sync
        self.shards: list[ShardFile] = []
        self.made: list[Path] = []  # every path created, for abort()
        self._file: IO[bytes] | None = None
        self._writer: RecordWriter | None = None
        self._temp: Path | None = None
        self._bytes = 0
        self._records = 0
        self.dir.mkdir(parents=True, exist_ok=True)

    @property
    def records(self) -> int:
        return sum(s.records for s in self.shards) + self._records

    def _final_name(self, index: int) -> str:
        return f"{self.intent_id}-{index:05d}{SHARD_SUFFIX}"

    def _open(self) -> RecordWriter:
        name = self._final_name(len(self.made))  # one index per file made: names never repeat
        self._temp = self.dir / f"{TEMP_PREFIX}{name}{TEMP_SUFFIX}"
        self.made.append(self._temp)
        self.dir.mkdir(parents=True, exist_ok=True)  # gc may have removed an empty folder meanwhile
        self._file = open(self._temp, "xb")  # noqa: SIM115 - closed in _finish
        self._writer = RecordWriter(self._file)
        return self._writer

    def write(self, record: bytes) -> None:
        size = len(record) + HEADER_SIZE + FOOTER_SIZE
        writer = self._writer
        if writer is None or (
            self._records and (self._bytes + size > self.shard_size or self._records >= self.shard_records)
        ):
            self._finish()
            writer = self._open()
        writer.write(record)
        self._bytes += size
        self._records += 1

    def write_many(self, records: Iterable[bytes]) -> None:
        for r in records:
            self.write(r)

    def adopt(self, source: Path, records: int) -> ShardFile | None:
        """Take an existing file as a shard by hard link; None when it cannot be linked."""
        self._finish()
        final = self.dir / self._final_name(len(self.made))
        try:
            os.link(source, final)
        except OSError as e:
            if e.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                return None
            raise CatalogError(f"{source}: cannot link into the catalog: {e.strerror}") from e
        self.made.append(final)
        size, checksum = file_checksum(final)
        shard = ShardFile(self._relative(final), records, size, checksum)
        self.shards.append(shard)
        return shard

    def _relative(self, path: Path) -> str:
        return f"{self.dataset}/{path.name}"

    def _finish(self) -> None:
        writer, f, temp = self._writer, self._file, self._temp
        if writer is None or f is None or temp is None:
            return
        self._writer = self._file = self._temp = None
        writer.close()
        final = temp.with_name(temp.name[len(TEMP_PREFIX) : -len(TEMP_SUFFIX)])
        publish(f, temp, final, self.sync)
        self.made[-1] = final  # the temp file is always the newest entry
        self.shards.append(
            ShardFile(self._relative(final), writer.records, writer.file_bytes, format_checksum(writer.checksum))
        )
        self._bytes = self._records = 0

    def close(self) -> list[ShardFile]:
        """Publish the last shard and make every rename durable."""
        self._finish()
        if self.sync and self.made:
            fsync_dir(self.dir)
        return self.shards

    def abort(self) -> None:
        """Remove every file this sink made (the caller registers nothing)."""
        if self._file is not None:
            self._file.close()
        self._writer = self._file = self._temp = None
        for path in self.made:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        self.made.clear()
        self.shards.clear()
