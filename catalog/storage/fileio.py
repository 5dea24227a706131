"""The one IO seam: every read of a file by its location (a local path or an object-store URL)
goes through a :class:`FileIO` chosen by :func:`file_io` from the location.

One implementation for local files (:class:`LocalFileIO`) and one over fsspec
(:class:`FsspecFileIO`, s3fs for S3), as PyIceberg's ``FileIO``: open for a streamed read
(a shard: a regular file reached without a symbolic link; an input: any regular file),
ranged reads, stat (what the content check fingerprints, storage.content), and where a file's
bytes really are. Writing (a temporary name, then publishing), listing and deleting inside a
data area are its :class:`~catalog.storage.base.Store`'s, whose object-store kind reaches its
bucket through :func:`filesystem` here.

This is the only module that imports fsspec, and the only one that tells a URL from a path
(:func:`is_url`): readers, adopters and provisioners ask for a FileIO (or a shard's, through
``PlannedShard.io``) and never branch on a location's text. The format layer's
``read_records(path_or_url)`` opens names through :func:`open_input`, which this module
registers with :mod:`catalog.tfrecord.sources` when it is imported.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, ClassVar

from catalog.errors import CatalogError, DependencyError, ObjectMissingError, StorageError, first_line
from catalog.tfrecord import sources
from catalog.tfrecord.sources import open_regular

# What to install for object stores: fsspec and s3fs are an optional extra.
S3_EXTRA = "pip install 'tfrecord-catalog[s3]'"

# What a stat (local: os.stat_result) or a HEAD (object store: fsspec's info()) tells of a file:
# its size (facts_size), and what the content check compares (storage.content).
Facts = os.stat_result | Mapping[str, Any]


def is_url(location: str) -> bool:
    """``s3://bucket/key`` and the like: a location fsspec opens, not a local path."""
    scheme, sep, _rest = location.partition("://")
    return bool(sep) and scheme.isidentifier() and scheme != "file"


def facts_size(facts: Facts) -> int:
    return facts.st_size if isinstance(facts, os.stat_result) else int(facts["size"])


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


class FsspecFileIO(FileIO):
    """Objects behind URLs, through fsspec (its filesystems are cached by fsspec, and reset
    after a fork)."""

    remote: ClassVar[bool] = True

    def open(self, location: str) -> IO[bytes]:
        fsspec = _fsspec_for(location)
        try:
            with remote_errors(location, "cannot open"):
                f = fsspec.open(location, "rb").open()
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
