"""The one IO seam: every read of a file by its location (a local path or an object-store URL)
goes through a :class:`FileIO` chosen by :func:`file_io` from the location.

One implementation for local files (:class:`LocalFileIO`) and one over fsspec
(:class:`FsspecFileIO`, s3fs for S3), as PyIceberg's ``FileIO``: open for a streamed read
(a shard: a regular file reached without a symbolic link; an input: any regular file),
ranged reads, stat (what the content check fingerprints, storage.content), and where a file's
bytes really are; and what a data area needs: listing, deleting, and writing under a temporary
name then publishing. A :class:`~catalog.storage.base.Store` is a data area's layout on top of
one FileIO, which does all of its file operations.

This is the only module that imports fsspec, and the only one that tells a URL from a path
(:func:`is_url`): readers, adopters and provisioners ask for a FileIO (or a shard's, through
``PlannedShard.io``) and never branch on a location's text. The format layer's
``read_records(path_or_url)`` opens names through :func:`open_input`, which this module
registers with :mod:`catalog.tfrecord.sources` when it is imported.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import io
import os
import stat
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

from catalog.errors import CatalogError, DependencyError, ObjectMissingError, StorageError, first_line
from catalog.tfrecord import sources
from catalog.tfrecord.sources import open_regular

# What to install for object stores: fsspec and s3fs are an optional extra.
S3_EXTRA = "pip install 'tfrecord-catalog[s3]'"

# A sequential read of an object (a shard read front to back, or fetched into the cache) asks
# for this many bytes beyond what it reads (fsspec's "readahead" cache): a few requests per
# shard, not one per read; the same for every fsspec store, whatever its own default.
READ_AHEAD = 16 << 20

# What os.link raises when this filesystem cannot link there (another device, no link support,
# too many links): the caller copies the bytes instead.
_CANNOT_LINK = (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP)

# What a stat (local: os.stat_result) or a HEAD (object store: fsspec's info()) tells of a file:
# its size (facts_size), and what the content check compares (storage.content).
Facts = os.stat_result | Mapping[str, Any]


def is_url(location: str) -> bool:
    """``s3://bucket/key`` and the like: a location fsspec opens, not a local path."""
    scheme, sep, _rest = location.partition("://")
    return bool(sep) and scheme.isidentifier() and scheme != "file"


def facts_size(facts: Facts) -> int:
    return facts.st_size if isinstance(facts, os.stat_result) else int(facts["size"])


def write_error(where: str | os.PathLike[str], e: OSError, what: str = "cannot write") -> StorageError:
    """A full disk, a read-only or unwritable data area: one line naming the place."""
    return StorageError(f"{os.fspath(where)}: {what}: {e.strerror or e}")


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


@dataclass(frozen=True)
class Listed:
    """A file found by :meth:`FileIO.list`: its path below the listed location ("/"-separated),
    size and modification time (seconds since the epoch). A symbolic link (local files only)
    is never followed: ``link`` True, no facts."""

    path: str
    size: int = 0
    mtime: float = 0.0
    link: bool = False


def require_fsspec(message: str) -> Any:
    """The fsspec module, imported on first use; DependencyError(``message``) when the extra is
    not installed (``message`` says what needed it, and should name :data:`S3_EXTRA`)."""
    try:
        import fsspec
    except ImportError as e:
        raise DependencyError(message) from e
    return fsspec


def _fsspec_for(url: str) -> Any:
    """fsspec, to read ``url`` (the one line naming the extra when it is missing)."""
    return require_fsspec(f"{url}: reading URLs needs fsspec ({S3_EXTRA})")


def remote_error(url: str, what: str, e: BaseException) -> StorageError:
    """An object store's failure as one line. botocore's and aiohttp's errors (an endpoint
    down, a timeout) share no base class below Exception, and are no OSError."""
    return StorageError(f"{url}: {what}: {first_line(e)}")


@contextlib.contextmanager
def remote_errors(url: str, what: str) -> Iterator[None]:
    """An object store's failures, other than a missing object, as one CatalogError line."""
    try:
        yield
    except (CatalogError, FileNotFoundError, io.UnsupportedOperation):
        raise
    except Exception as e:  # OSError, and botocore's and aiohttp's own (an endpoint down)
        raise remote_error(url, what, e) from e


def filesystem(root: str) -> Any:
    """The fsspec filesystem of a data area on an object store (credentials from their usual
    places), with no listings cache: a writer's exists() must see what another process just
    uploaded."""
    fsspec = require_fsspec(f"{root}: object storage needs `{S3_EXTRA}`")
    protocol = root.split("://", 1)[0]
    try:
        return fsspec.filesystem(protocol, use_listings_cache=False)
    except (ImportError, ValueError) as e:
        raise StorageError(f"{root}: no filesystem for {protocol}:// ({e})") from e


class RemoteFile(io.RawIOBase):
    """An fsspec file whose failures, at whichever read, are one CatalogError line."""

    def __init__(self, f: Any, url: str) -> None:
        super().__init__()
        self._f, self._url = f, url

    def _guard(self, fn: Any, *args: Any) -> Any:
        with remote_errors(self._url, "read failed"):
            return fn(*args)

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        return int(self._guard(self._f.readinto, b))

    def seekable(self) -> bool:
        return bool(self._f.seekable())

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return int(self._guard(self._f.seek, offset, whence))

    def tell(self) -> int:
        return int(self._f.tell())

    def close(self) -> None:
        try:
            self._guard(self._f.close)
        finally:
            super().close()


class FileIO(ABC):
    """Files by their location, of one kind (see the module docstring): an interface, which
    LocalFileIO and FsspecFileIO implement whole."""

    remote: ClassVar[bool]  # whether reads are requests to an object store (ranged GETs, HEADs)
    # Whether its files were checked whole against the registered checksum as it fetched them
    # (storage.cache): no content check (storage.content) is needed of what it opens.
    verified: ClassVar[bool] = False

    @abstractmethod
    def open(self, location: str) -> IO[bytes]:
        """A shard's file open for reading: a regular file reached without a symbolic link (see
        storage.files.open_shard). A missing one: FileNotFoundError or ObjectMissingError."""

    @abstractmethod
    def open_input(self, location: str) -> IO[bytes]:
        """A file given to read (``read_records``, an input): links followed, regular files only."""

    @abstractmethod
    def stat(self, location: str, f: IO[bytes] | None = None) -> Facts:
        """The file's facts now (``f``: it, open; else found by its name, links followed)."""

    @abstractmethod
    def lstat(self, location: str) -> Facts:
        """The facts of the entry at ``location`` itself (a link is not followed)."""

    @abstractmethod
    def read_ranges(self, locations: Sequence[str], starts: Sequence[int], ends: Sequence[int]) -> list[bytes]:
        """Bytes ``starts[k]`` to ``ends[k]`` of ``locations[k]``, for each k (short at a file's end)."""

    @abstractmethod
    def real(self, location: str) -> str:
        """Where the file's bytes are: a local path with every link resolved, a URL as it is."""

    # ---- finding and removing
    @abstractmethod
    def exists(self, location: str) -> bool: ...

    @abstractmethod
    def list(
        self, location: str, under: str = "", depth: int = 1, descend: Callable[[str], bool] | None = None
    ) -> builtins.list[Listed]:
        """The files whose path below ``location`` starts with ``under`` (a folder, ending in "/",
        or the start of a name in ``location``), at most ``depth`` levels below ``under``'s
        folder, into the folders ``descend`` accepts (given their path): paths relative to
        ``location``, sorted by folder, then name. A missing ``location``: none. ``location``
        itself may be a symbolic link (the user chose it); no link below it is followed."""

    @abstractmethod
    def is_empty(self, location: str) -> bool:
        """Whether nothing is under the folder or prefix ``location`` (a missing one: True)."""

    @abstractmethod
    def delete(self, location: str) -> bool:
        """Delete a file; one already gone is fine. Whether there was one to delete."""

    @abstractmethod
    def remove_empty_folders(self, location: str, keep: Callable[[str], bool]) -> None:
        """Remove the empty folders in ``location`` whose names ``keep`` rejects (where folders exist)."""

    @abstractmethod
    def reach(self, location: str) -> None:
        """Fail with one line now when the place of ``location`` cannot be reached."""

    # ---- writing
    @abstractmethod
    def read(self, location: str, limit: int | None = None) -> bytes:
        """A small file's bytes (at most ``limit``), opened as :meth:`open` does; FileNotFoundError
        when there is none."""

    @abstractmethod
    def write_new(self, location: str, data: bytes) -> bool:
        """Write a small file durably, never replacing one there (where the store can tell):
        False when one is there already."""

    @abstractmethod
    def make_folder(self, location: str) -> None:
        """Make room for files in the folder ``location`` (where folders exist)."""

    @abstractmethod
    def sync_folder(self, location: str) -> None:
        """Make the publications in the folder ``location`` durable."""

    @abstractmethod
    def sync_file(self, location: str) -> None:
        """Make the bytes of a file published without ``sync`` durable."""

    def sync_written(self, f: IO[bytes]) -> bool:
        """Make the bytes written to ``f`` (a file to publish) durable now, where publishing
        with ``sync`` would: whether it did (its publication then needs no ``sync``). False
        where publishing makes a file durable by itself (an upload)."""
        return False

    @abstractmethod
    def publish(self, f: IO[bytes], temp: Path, location: str, sync: bool = True) -> None:
        """Close ``f`` (written at the local ``temp``: beside ``location``, or in a local spool)
        and make it the file ``location`` at once: flush, fsync (``sync``) and rename (the
        caller syncs the folder, once for all), or one upload (the spool file is removed).
        A FileNotFoundError means the temporary file was taken (by gc)."""

    @abstractmethod
    def link(self, source: str, location: str, follow: bool = True) -> bool:
        """Make ``location`` hold the bytes of ``source`` without reading them here: a hard
        link (``follow``: a link at ``source`` followed), or a server-side copy. False when
        the filesystem cannot; a local failure other than that is its OSError, for the caller
        to word (a shard linked, or a user's file adopted)."""


class ForwardingFileIO(FileIO):
    """A FileIO that does what ``inner`` does: the base of one that changes a few operations
    (the cache of remote shards reads through its copies, writes and lists as ``inner``)."""

    def __init__(self, inner: FileIO) -> None:
        self.inner = inner

    def open(self, location: str) -> IO[bytes]:
        return self.inner.open(location)

    def open_input(self, location: str) -> IO[bytes]:
        return self.inner.open_input(location)

    def stat(self, location: str, f: IO[bytes] | None = None) -> Facts:
        return self.inner.stat(location, f)

    def lstat(self, location: str) -> Facts:
        return self.inner.lstat(location)

    def read_ranges(self, locations: Sequence[str], starts: Sequence[int], ends: Sequence[int]) -> list[bytes]:
        return self.inner.read_ranges(locations, starts, ends)

    def real(self, location: str) -> str:
        return self.inner.real(location)

    def exists(self, location: str) -> bool:
        return self.inner.exists(location)

    def list(
        self, location: str, under: str = "", depth: int = 1, descend: Callable[[str], bool] | None = None
    ) -> builtins.list[Listed]:
        return self.inner.list(location, under, depth, descend)

    def is_empty(self, location: str) -> bool:
        return self.inner.is_empty(location)

    def delete(self, location: str) -> bool:
        return self.inner.delete(location)

    def remove_empty_folders(self, location: str, keep: Callable[[str], bool]) -> None:
        self.inner.remove_empty_folders(location, keep)

    def reach(self, location: str) -> None:
        self.inner.reach(location)

    def read(self, location: str, limit: int | None = None) -> bytes:
        return self.inner.read(location, limit)

    def write_new(self, location: str, data: bytes) -> bool:
        return self.inner.write_new(location, data)

    def make_folder(self, location: str) -> None:
        self.inner.make_folder(location)

    def sync_folder(self, location: str) -> None:
        self.inner.sync_folder(location)

    def sync_file(self, location: str) -> None:
        self.inner.sync_file(location)

    def sync_written(self, f: IO[bytes]) -> bool:
        return self.inner.sync_written(f)

    def publish(self, f: IO[bytes], temp: Path, location: str, sync: bool = True) -> None:
        self.inner.publish(f, temp, location, sync)

    def link(self, source: str, location: str, follow: bool = True) -> bool:
        return self.inner.link(source, location, follow)


class LocalFileIO(FileIO):
    """Local files, by path."""

    remote: ClassVar[bool] = False

    def open(self, location: str) -> IO[bytes]:
        return _open_no_links(location)

    def open_input(self, location: str) -> IO[bytes]:
        return open_regular(location)

    def stat(self, location: str, f: IO[bytes] | None = None) -> Facts:
        return os.stat(location) if f is None else os.fstat(f.fileno())

    def lstat(self, location: str) -> Facts:
        return os.lstat(location)

    def read_ranges(self, locations: Sequence[str], starts: Sequence[int], ends: Sequence[int]) -> list[bytes]:
        out = []
        for location, start, end in zip(locations, starts, ends, strict=True):
            with self.open(location) as f:
                out.append(os.pread(f.fileno(), end - start, start))
        return out

    def real(self, location: str) -> str:
        return os.path.realpath(location)

    def exists(self, location: str) -> bool:
        return os.path.exists(location)

    def list(
        self, location: str, under: str = "", depth: int = 1, descend: Callable[[str], bool] | None = None
    ) -> builtins.list[Listed]:
        folder, _, start = under.rpartition("/")
        top = os.path.join(location, folder) if folder else location
        if (folder and os.path.islink(top)) or not os.path.isdir(top):
            return []  # a linked folder below the location could lead anywhere: never followed
        out: builtins.list[Listed] = []
        _walk(top, folder, start, depth, descend, out)
        return out

    def is_empty(self, location: str) -> bool:
        try:
            with os.scandir(location) as entries:
                return next(entries, None) is None
        except FileNotFoundError:
            return True
        except OSError as e:
            raise StorageError(f"{location}: cannot read: {e.strerror}") from e

    def delete(self, location: str) -> bool:
        try:
            os.unlink(location)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise write_error(location, e, "cannot delete") from e
        return True

    def remove_empty_folders(self, location: str, keep: Callable[[str], bool]) -> None:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for name in os.listdir(location):
                folder = os.path.join(location, name)
                if not keep(name) and os.path.isdir(folder) and not os.listdir(folder):
                    with contextlib.suppress(OSError):
                        os.rmdir(folder)

    def reach(self, location: str) -> None:
        """Nothing to reach: a directory that cannot be used is one line at its first use."""

    def read(self, location: str, limit: int | None = None) -> bytes:
        with self.open(location) as f:  # a link or a FIFO is refused
            return f.read(-1 if limit is None else limit)

    def write_new(self, location: str, data: bytes) -> bool:
        """A temporary file beside it, fsynced, then hard linked to its name (a link never
        replaces: of two writers racing for it, one gets it) and the folder fsynced."""
        folder = os.path.dirname(location)
        temp = f"{location}.{os.getpid()}.tmp"
        try:
            os.makedirs(folder, exist_ok=True)
            with open(temp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(temp, location)
            except FileExistsError:
                return False
            finally:
                os.unlink(temp)
            fsync_dir(Path(folder))
        except OSError as e:
            raise write_error(location, e) from e
        return True

    def make_folder(self, location: str) -> None:
        try:
            os.makedirs(location, exist_ok=True)
        except OSError as e:
            raise write_error(location, e) from e

    def sync_folder(self, location: str) -> None:
        try:
            fsync_dir(Path(location))
        except OSError as e:
            raise write_error(Path(location), e) from e

    def sync_written(self, f: IO[bytes]) -> bool:
        f.flush()
        os.fsync(f.fileno())
        return True

    def sync_file(self, location: str) -> None:
        try:
            fd = os.open(location, os.O_RDONLY)  # fsync flushes the file's pages, whoever wrote them
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise write_error(Path(location), e) from e

    def publish(self, f: IO[bytes], temp: Path, location: str, sync: bool = True) -> None:
        try:
            publish(f, temp, Path(location), sync)
        except OSError as e:
            f.close()
            if isinstance(e, FileNotFoundError):
                raise  # gc took the temporary file: the commit says the shard vanished
            raise write_error(temp, e) from e

    def link(self, source: str, location: str, follow: bool = True) -> bool:
        try:
            os.link(source, location, follow_symlinks=follow)
        except OSError as e:
            if e.errno in _CANNOT_LINK:
                return False
            raise
        return True


class FsspecFileIO(FileIO):
    """Objects behind URLs, through fsspec (its filesystems are cached by fsspec, and reset
    after a fork)."""

    remote: ClassVar[bool] = True

    def __init__(self, root: str | None = None) -> None:
        self._root = root  # a data area's (its Store's FileIO): what a missing extra's line names

    def _fs(self, location: str) -> Any:
        """The filesystem that writes and lists ``location`` (fsspec's cached instance)."""
        return filesystem(self._root or location)

    def open(self, location: str) -> IO[bytes]:
        fsspec = _fsspec_for(location)
        try:
            with remote_errors(location, "cannot open"):
                fs, path = fsspec.core.url_to_fs(location)
                f = fs.open(path, "rb", block_size=READ_AHEAD, cache_type="readahead")
        except FileNotFoundError as e:
            raise ObjectMissingError(f"{location}: no such object") from e
        return RemoteFile(f, location)  # type: ignore[return-value]

    def open_input(self, location: str) -> IO[bytes]:
        return self.open(location)

    def stat(self, location: str, f: IO[bytes] | None = None) -> Facts:
        """The object's fsspec ``info()`` as the store has it now (one HEAD; no cached listing)."""
        fsspec = _fsspec_for(location)
        try:
            with remote_errors(location, "cannot open"):
                fs, path = fsspec.core.url_to_fs(location)
                fs.invalidate_cache(path)
                return dict(fs.info(path))
        except FileNotFoundError as e:
            raise ObjectMissingError(f"{location}: no such object") from e

    def lstat(self, location: str) -> Facts:
        return self.stat(location)  # an object store has no links

    def read_ranges(self, locations: Sequence[str], starts: Sequence[int], ends: Sequence[int]) -> list[bytes]:
        """One request each, sent concurrently by fsspec's async stores (s3fs); a failure is one
        line naming the first location."""
        first = locations[0]
        fsspec = _fsspec_for(first)
        with remote_errors(first, "cannot open"):
            fs = fsspec.core.url_to_fs(first)[0]
        with remote_errors(first, "read failed"):
            fetched = fs.cat_ranges(list(locations), list(starts), list(ends))
        for data in fetched:
            if isinstance(data, Exception):
                raise remote_error(first, "read failed", data)
        return list(fetched)

    def real(self, location: str) -> str:
        return location

    def exists(self, location: str) -> bool:
        with remote_errors(location, "cannot check"):
            return bool(self._fs(location).exists(location))

    def list(
        self, location: str, under: str = "", depth: int = 1, descend: Callable[[str], bool] | None = None
    ) -> builtins.list[Listed]:
        """One listing of every key under ``under``'s folder (fsspec's find: paginated, not a
        request per folder), filtered here."""
        fs = self._fs(location)
        base = fs._strip_protocol(location).rstrip("/")
        folder = under.rpartition("/")[0]
        try:
            with remote_errors(location, "cannot list"):
                found = fs.find(f"{base}/{folder}".rstrip("/"), detail=True)
        except FileNotFoundError:
            return []
        levels = folder.count("/") + 1 if folder else 0  # the folders of ``under`` itself
        out = []
        for key, info in found.items():
            path = key[len(base) + 1 :]
            parts = path.split("/")
            if not path.startswith(under) or len(parts) - levels > depth:
                continue
            if descend is not None and not all(descend("/".join(parts[:n])) for n in range(levels + 1, len(parts))):
                continue
            modified = info.get("LastModified") or info.get("mtime")
            mtime = modified.timestamp() if hasattr(modified, "timestamp") else float(modified or 0)
            out.append(Listed(path, int(info.get("size", 0)), mtime))
        return sorted(out, key=lambda f: f.path)

    def is_empty(self, location: str) -> bool:
        fs = self._fs(location)
        try:
            with remote_errors(location, "cannot list"):
                return not fs.ls(fs._strip_protocol(location))
        except FileNotFoundError:
            return True

    def delete(self, location: str) -> bool:
        try:
            if not self.exists(location):  # S3's DELETE succeeds on a missing key
                return False
            with remote_errors(location, "cannot delete"):
                self._fs(location).rm_file(location)
        except FileNotFoundError:
            return False
        except OSError as e:  # what remote_errors lets through (io.UnsupportedOperation)
            raise write_error(location, e, "cannot delete") from e
        return True

    def remove_empty_folders(self, location: str, keep: Callable[[str], bool]) -> None:
        """Nothing to do: an object store has no folders to empty."""

    def reach(self, location: str) -> None:
        """Fail with one line when the object store is unreachable (no bucket, no credentials,
        no network)."""
        fs = self._fs(location)
        bucket = fs._strip_protocol(location).split("/", 1)[0]
        with remote_errors(location, "cannot reach the object store"):
            found = fs.exists(bucket)
        if not found:
            raise StorageError(f"{location}: no such bucket (create it first)")

    def read(self, location: str, limit: int | None = None) -> bytes:
        with remote_errors(location, "cannot read"):
            data = bytes(self._fs(location).cat_file(location))
        return data if limit is None else data[:limit]

    def write_new(self, location: str, data: bytes) -> bool:
        """One PUT. No exclusive create in S3: only writers racing on one key could both write."""
        with remote_errors(location, "cannot write"):
            self._fs(location).pipe_file(location, data)
        return True

    def make_folder(self, location: str) -> None:
        """Nothing to do: a key needs no folder."""

    def sync_folder(self, location: str) -> None:
        """Nothing to do: a PUT is durable when it returns."""

    def sync_file(self, location: str) -> None:
        """Nothing to do: a PUT is durable when it returns."""

    def publish(self, f: IO[bytes], temp: Path, location: str, sync: bool = True) -> None:
        """One upload of the spool file (a PUT, or a multipart upload that appears only when
        completed); the spool file is removed either way."""
        f.close()
        try:
            with remote_errors(location, "upload failed"):
                self._fs(location).put_file(str(temp), location)
        except FileNotFoundError as e:  # no such bucket: not a shard gone missing before its commit
            raise remote_error(location, "upload failed", e) from e
        finally:
            temp.unlink(missing_ok=True)

    def link(self, source: str, location: str, follow: bool = True) -> bool:
        with remote_errors(location, "server-side copy failed"):
            self._fs(location).copy(source, location)
        return True


LOCAL = LocalFileIO()
REMOTE = FsspecFileIO()


def file_io(location: str | os.PathLike[str]) -> FileIO:
    """The FileIO that reads ``location``: an fsspec URL (``s3://bucket/key``), else a local path."""
    return REMOTE if is_url(os.fspath(location)) else LOCAL


def open_input(location: str) -> IO[bytes]:
    """A named file to read (``catalog.tfrecord.read_records``'s path or URL): see FileIO.open_input."""
    return file_io(location).open_input(location)


def located(catalog_root: Path, data_root: str) -> str | Path:
    """Where a manifest's ``data_root`` is: a URL as it is, a local path relative to the
    catalog directory ``catalog_root`` (an absolute one as it is)."""
    return data_root if is_url(data_root) else catalog_root / data_root


def storage_root(storage: str | os.PathLike[str]) -> str:
    """A ``--storage`` given for a new catalog as its manifest keeps it: a URL without a
    trailing slash, a local directory absolute."""
    text = str(storage)
    return text.rstrip("/") if is_url(text) else str(Path(storage).resolve())


def _walk(top: str, rel: str, start: str, depth: int, descend: Callable[[str], bool] | None, out: list[Listed]) -> None:
    """LocalFileIO.list below the folder ``top`` (``rel`` below the location): its entries whose
    names begin with ``start``, sorted by name, links never followed; a file gone meanwhile is
    left out."""
    with os.scandir(top) as entries:
        found = sorted((e for e in entries if e.name.startswith(start)), key=lambda e: e.name)
    for entry in found:
        path = f"{rel}/{entry.name}" if rel else entry.name
        if entry.is_symlink():
            out.append(Listed(path, link=True))
        elif entry.is_dir(follow_symlinks=False):
            if depth > 1 and (descend is None or descend(path)):
                _walk(entry.path, path, "", depth - 1, descend, out)
        else:
            with contextlib.suppress(FileNotFoundError):
                if entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    out.append(Listed(path, st.st_size, st.st_mtime))


def _open_no_links(path: str) -> IO[bytes]:
    """A regular local file reached without following a symbolic link at the file or at its
    folder (the data area itself may be a link: the user chose it). A FIFO, device or link is
    refused in one line, before any read."""
    folder, name = os.path.split(path)
    nofollow = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        dir_fd = os.open(folder, nofollow | os.O_DIRECTORY)
        try:  # O_NONBLOCK: opening a FIFO would wait for a writer
            fd = os.open(name, nofollow | os.O_NONBLOCK, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR) and (os.path.islink(path) or os.path.islink(folder)):
            raise StorageError(f"{path}: a symbolic link; the catalog reads only regular files in its data area") from e
        if e.errno == errno.ENOENT:
            raise FileNotFoundError(e.errno, e.strerror, path) from e
        raise StorageError(f"{path}: cannot open: {e.strerror}") from e
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StorageError(f"{path}: not a regular file; the catalog reads only regular files in its data area")
    os.set_blocking(fd, True)
    f = os.fdopen(fd, "rb", buffering=0)
    f.name = path  # messages name the file, not its descriptor
    return f


sources.register_opener(open_input)
