"""A local cache of remote shards: readers given ``cache_dir=`` read each shard on an object
store from a whole copy fetched once into that directory (issue 33 §4).

- One entry per (location, registered checksum), named from both: a manifest whose checksum
  for a location changed names another entry, fetched and verified anew.
- Fetched atomically: into a temporary name in the cache directory, its crc32c computed as it
  arrives and compared with the manifest's (a mismatch is refused in one line and not kept),
  then renamed into place.
- Once per host: an exclusive ``flock`` on the entry's lock file while it is fetched, so
  DataLoader workers and ranks wanting the same shard wait for one download, then read it.
- Checked when used: its size each time it is opened, its whole checksum the first time this
  process uses that file (a copy damaged on disk is fetched again, never read).
- Record indexes too: a cached shard's index (storage.index.read_index) is an entry of its
  own, so a later epoch's readers ask the store for nothing.
- Bounded: after a fetch, entries beyond ``limit`` bytes are evicted least recently used
  first (its access time, set at each use); an entry open for reading holds a shared
  ``flock`` on its file, and is never evicted.

Local locations are not cached: :func:`cached` returns their FileIO as it is.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, ClassVar

from crc32c import crc32c

from catalog.errors import CorruptShardError, ObjectMissingError, StorageError, UsageError
from catalog.storage.fileio import Facts, FileIO, ForwardingFileIO
from catalog.storage.files import CHECKSUM_CHUNK, format_checksum
from catalog.words import counted

try:
    import fcntl
except ImportError:  # Windows: no flock; the cache still works, without cross-process guards
    fcntl = None  # type: ignore[assignment]

ENTRY_SUFFIX = ".tfrecord"
INDEX_SUFFIX = ".idx"  # a shard's record index (storage.index), kept beside its shard
LOCK_SUFFIX = ".lock"
PART_SUFFIX = ".part"

# (entry path, inode, size, mtime ns) whose whole checksum this process found as registered.
_VERIFIED: set[tuple[str, int, int, int]] = set()


class CacheMismatchError(CorruptShardError, StorageError):
    """A shard's bytes fetched into the cache are not the ones the manifest registered (the
    object changed after its commit): refused, not kept."""


def forget() -> None:
    """Forget which cached files this process verified (tests; a long-lived process may too)."""
    _VERIFIED.clear()


@dataclass(frozen=True)
class ShardCache:
    """A cache directory on this host and its size limit in bytes (None: no limit). A plain
    value: it pickles into DataLoader workers, which share the directory."""

    directory: str
    limit: int | None = None

    @classmethod
    def at(cls, directory: str | os.PathLike[str], limit: int | None = None) -> ShardCache:
        """The cache at ``directory`` (made if missing), checked usable now: a directory this
        process can write. A bad one is one line, before any read starts."""
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
            raise UsageError(f"cache_limit must be a number of bytes (an int >= 0), not {limit!r}")
        path = Path(directory).expanduser().absolute()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except FileExistsError as e:  # a file of that name
            raise StorageError(f"{path}: cannot use as the shard cache: not a directory") from e
        except OSError as e:
            raise StorageError(f"{path}: cannot use as the shard cache: {e.strerror or e}") from e
        if not os.access(path, os.W_OK | os.X_OK):
            raise StorageError(f"{path}: cannot use as the shard cache: not writable")
        return cls(str(path), limit)

    def entry(self, location: str, checksum: str) -> Path:
        """Where the copy of ``location`` with ``checksum`` ("crc32c:xxxxxxxx") is kept."""
        key = hashlib.sha256(location.encode()).hexdigest()[:32]
        crc = checksum.partition(":")[2] or checksum
        suffix = INDEX_SUFFIX if location.endswith(INDEX_SUFFIX) else ENTRY_SUFFIX
        return Path(self.directory) / f"{key}-{crc}{suffix}"

    def open(self, remote: FileIO, location: str, checksum: str, size: int) -> IO[bytes]:
        """The cached copy of ``location`` open for reading (fetched through ``remote`` when
        missing or damaged), holding a shared lock that keeps it from eviction until closed."""
        path = self.entry(location, checksum)
        f = _open_valid(path, size, checksum)
        if f is None:
            with _locked(path.with_name(path.name + LOCK_SUFFIX)):
                f = _open_valid(path, size, checksum)  # another process may have fetched it meanwhile
                if f is None:
                    _fetch(remote, location, checksum, size, path)
                    f = _open_valid(path, size, checksum)
            if f is None:  # changed under us right after its fetch: nothing sane to retry
                raise StorageError(f"{path}: the cached copy of {location} changed as it was fetched")
            self.evict(keep=path)
        return f

    def evict(self, keep: Path | None = None) -> list[Path]:
        """Remove entries, least recently used first, until those left fit the limit; an entry
        in use (open, or being fetched) and ``keep`` stay. Returns what was removed."""
        if self.limit is None:
            return []
        entries = []
        for path in Path(self.directory).iterdir():
            if path.name.endswith(PART_SUFFIX):
                _sweep_part(path)
            elif path.name.endswith((ENTRY_SUFFIX, INDEX_SUFFIX)):
                with contextlib.suppress(FileNotFoundError):
                    st = path.stat()
                    entries.append((st.st_atime_ns, st.st_size, path))
        total = sum(size for _, size, _ in entries)
        removed = []
        for _atime, size, path in sorted(entries):
            if total <= self.limit:
                break
            if path != keep and _remove_unused(path):
                total -= size
                removed.append(path)
        return removed


class CachedFileIO(ForwardingFileIO):
    """One remote shard read from its cached copy (``location``, as the manifest registered
    it); other locations are read by ``inner`` as they are. Its reads are local (``remote``
    False), and the copy was checked against the registered checksum (``verified``)."""

    remote: ClassVar[bool] = False
    verified: ClassVar[bool] = True

    def __init__(self, inner: FileIO, cache: ShardCache, location: str, checksum: str, size: int) -> None:
        super().__init__(inner)
        self.cache = cache
        self.location, self.checksum, self.size = location, checksum, size

    def open(self, location: str) -> IO[bytes]:
        if location != self.location:
            return self.inner.open(location)
        return self.cache.open(self.inner, location, self.checksum, self.size)

    def open_input(self, location: str) -> IO[bytes]:
        return self.open(location)

    def stat(self, location: str, f: IO[bytes] | None = None) -> Facts:
        if location != self.location:
            return self.inner.stat(location, f)
        if f is not None:
            return os.fstat(f.fileno())
        with self.open(location) as opened:
            return os.fstat(opened.fileno())

    def lstat(self, location: str) -> Facts:
        return self.stat(location)

    def read_ranges(self, locations: Sequence[str], starts: Sequence[int], ends: Sequence[int]) -> list[bytes]:
        if any(location != self.location for location in locations):
            return self.inner.read_ranges(locations, starts, ends)
        with self.open(self.location) as f:
            return [os.pread(f.fileno(), end - start, start) for start, end in zip(starts, ends, strict=True)]

    def real(self, location: str) -> str:
        return self.inner.real(location)

    def local_copy(self) -> str:
        """The path of the shard's copy, fetched now when missing (for a library that opens
        files by name: TensorFlow). Not held open: an eviction may remove it later."""
        with self.open(self.location):
            return str(self.cache.entry(self.location, self.checksum))


def cached(io: FileIO, cache: ShardCache | None, location: str, checksum: str, size: int) -> FileIO:
    """``io``, reading ``location`` (registered with ``checksum`` and ``size``) from ``cache``
    when there is one and ``io`` reads from an object store."""
    if cache is None or not io.remote:
        return io
    return CachedFileIO(io, cache, location, checksum, size)


# --------------------------------------------------------------------------- entries


def _open_valid(path: Path, size: int, checksum: str) -> IO[bytes] | None:
    """``path`` open and share-locked when it is a whole, intact copy (its size, and once per
    process its checksum); None when it is missing or damaged (then left for a fetch to
    replace). Its access time is set: it was used now."""
    try:
        f = open(path, "rb", buffering=0)  # noqa: SIM115  # returned open
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StorageError(f"{path}: cannot open the cached shard: {e.strerror or e}") from e
    try:
        if fcntl is not None:
            fcntl.flock(f.fileno(), fcntl.LOCK_SH)
        st = os.fstat(f.fileno())
        seen = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
        if st.st_size != size or (seen not in _VERIFIED and _checksum(f) != checksum):
            f.close()
            return None
        _VERIFIED.add(seen)
        f.seek(0)
        with contextlib.suppress(OSError):  # another user's entry in a shared cache: its order stays
            os.utime(f.fileno(), ns=(time.time_ns(), st.st_mtime_ns))  # used now: last in line for eviction
    except BaseException:
        f.close()
        raise
    return f


def _checksum(f: IO[bytes]) -> str:
    crc = 0
    while chunk := f.read(CHECKSUM_CHUNK):
        crc = crc32c(chunk, crc)
    return format_checksum(crc)


def _fetch(remote: FileIO, location: str, checksum: str, size: int, path: Path) -> None:
    """The whole object at ``location`` into ``path``: written to a temporary name, checked
    (size and checksum, computed as it arrives) against the manifest, then renamed."""
    part = path.with_name(f"{path.name}.{os.getpid()}.{os.urandom(4).hex()}{PART_SUFFIX}")
    crc = got = 0
    try:
        with remote.open(location) as src, open(part, "wb") as out:
            while chunk := src.read(min(CHECKSUM_CHUNK, size + 1 - got)):  # a byte more tells it grew
                crc = crc32c(chunk, crc)
                got += len(chunk)
                out.write(chunk)
        if got != size:
            wanted = counted(size, "byte")
            found = f"more than {wanted}" if got > size else counted(got, "byte")
            raise CacheMismatchError(location, "size fetched into the cache", wanted, found)
        if format_checksum(crc) != checksum:
            raise CacheMismatchError(location, "checksum fetched into the cache", checksum, format_checksum(crc))
        os.replace(part, path)
    except ObjectMissingError:
        raise
    except OSError as e:
        raise StorageError(f"{path}: cannot write the cached copy of {location}: {e.strerror or e}") from e
    finally:
        with contextlib.suppress(FileNotFoundError):
            part.unlink()


@contextlib.contextmanager
def _locked(lock: Path) -> Iterator[None]:
    """An exclusive flock on the file ``lock`` (made if missing) for the block: one holder per
    host. The lock file an eviction removed while we waited is not the lock: taken again."""
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise StorageError(f"{lock}: cannot lock the shard cache: {e.strerror or e}") from e
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            if _same_file(fd, lock):
                break
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        yield
    finally:
        os.close(fd)  # the lock goes with it


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _try_lock(path: Path, flags: int) -> int | None:
    """``path`` open and exclusively locked, or None: missing, or someone holds a lock on it."""
    try:
        fd = os.open(path, flags | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    if fcntl is None:
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return None
        raise
    return fd


def _remove_unused(path: Path) -> bool:
    """Remove the entry ``path`` (and its lock file) when no one reads or fetches it."""
    lock = path.with_name(path.name + LOCK_SUFFIX)
    lock_fd = _try_lock(lock, os.O_RDWR | os.O_CREAT)
    if lock_fd is None:
        return False  # being fetched
    try:
        fd = _try_lock(path, os.O_RDONLY)
        if fd is None:
            return False  # open for reading (or gone already)
        try:
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)
        lock.unlink(missing_ok=True)
        return True
    finally:
        os.close(lock_fd)


def _sweep_part(part: Path) -> None:
    """A temporary file whose fetch ended without removing it (the process was killed): its
    entry's lock is free. A fetch under way holds it."""
    entry = part.name.rsplit(".", 3)[0]  # _fetch's name: <entry>.<pid>.<random>.part
    lock = part.with_name(entry + LOCK_SUFFIX)
    if not lock.exists():  # a fetch takes the lock before it makes its temporary file
        part.unlink(missing_ok=True)
        return
    fd = _try_lock(lock, os.O_RDWR)
    if fd is None:
        return
    try:
        part.unlink(missing_ok=True)
    finally:
        os.close(fd)
