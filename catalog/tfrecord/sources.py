"""Where records come from: local paths, object-store URLs (through fsspec), bytes, streams.

Below the record framing: it opens what ``read_records`` is given, refuses what is no input
file (a FIFO, a device, a directory) before a read can block or never end, and turns an
object store's failures, which share no base class, into one-line CatalogError messages.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
from collections.abc import Iterator
from typing import IO, Any, Union

from catalog.errors import CatalogError, ObjectMissingError, first_line

Source = Union[str, "os.PathLike[str]", IO[bytes], bytes, bytearray, memoryview]

# What to install for object stores: fsspec and s3fs are an optional extra.
S3_EXTRA = "pip install 'tfrecord-catalog[s3]'"


def require_fsspec(message: str) -> Any:
    """The fsspec module, imported on first use; CatalogError(``message``) when the extra is
    not installed (``message`` says what needed it, and should name :data:`S3_EXTRA`)."""
    try:
        import fsspec
    except ImportError as e:
        raise CatalogError(message) from e
    return fsspec


def is_url(path: str) -> bool:
    """``s3://bucket/key`` and the like: a location fsspec opens, not a local path."""
    scheme, sep, _rest = path.partition("://")
    return bool(sep) and scheme.isidentifier() and scheme != "file"


def remote_error(url: str, what: str, e: BaseException) -> CatalogError:
    """An object store's failure as one line. botocore's and aiohttp's errors (an endpoint
    down, a timeout) share no base class below Exception, and are no OSError."""
    return CatalogError(f"{url}: {what}: {first_line(e)}")


@contextlib.contextmanager
def remote_errors(url: str, what: str) -> Iterator[None]:
    """An object store's failures, other than a missing object, as one CatalogError line."""
    try:
        yield
    except (CatalogError, FileNotFoundError, io.UnsupportedOperation):
        raise
    except Exception as e:  # OSError, and botocore's and aiohttp's own (an endpoint down)
        raise remote_error(url, what, e) from e


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


def open_url(url: str) -> IO[bytes]:
    """A streaming read of an fsspec URL (s3fs for S3), errors as one CatalogError line."""
    fsspec = require_fsspec(f"{url}: reading URLs needs fsspec ({S3_EXTRA})")
    try:
        with remote_errors(url, "cannot open"):
            f = fsspec.open(url, "rb").open()
    except FileNotFoundError as e:
        raise ObjectMissingError(f"{url}: no such object") from e
    return RemoteFile(f, url)  # type: ignore[return-value]


def open_location(path: str) -> IO[bytes]:
    """A binary read of a local path (unbuffered) or of an fsspec URL (streamed)."""
    return open_url(path) if is_url(path) else open(path, "rb", buffering=0)


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(mode: int) -> str:
    kind = next((name for test, name in _KINDS if test(mode)), "a special file")
    return f"not a regular file ({kind})"


def regular_file_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` (symlinks followed) is no input file: "no such file", "not a regular file
    (a FIFO)"...; None for a regular file."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # ValueError: a NUL in the name
        return "no such file"
    return None if stat.S_ISREG(mode) else _not_regular(mode)


def open_regular(path: str | os.PathLike[str], failure: str = "cannot open") -> io.FileIO:
    """Open a local input for reading, refusing anything but a regular file: a FIFO blocks
    the open (and then every read), a device such as /dev/zero never ends, a directory is no
    input. O_NONBLOCK lets the open of a FIFO return so fstat can tell (regular files ignore
    it), and the check is on the opened file, so a swap after a check cannot slip through."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        problem = regular_file_problem(name)  # a socket cannot even be opened (ENXIO): say what it is
        if problem is not None and problem != "no such file":
            raise CatalogError(f"{name}: {problem}") from e
        raise CatalogError(f"{name}: {failure}: {e.strerror or e}") from e
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise CatalogError(f"{name}: {_not_regular(mode)}")
        os.set_blocking(fd, True)
        return io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def open_source(source: Source) -> tuple[IO[bytes], str | None, bool]:
    """A binary stream over a path, URL, bytes or file object: (stream, path for messages,
    whether the caller owns the stream and closes it)."""
    if isinstance(source, str) and is_url(source):
        return open_url(source), source, True
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        return open_regular(path), path, True
    if isinstance(source, (bytes, bytearray, memoryview)):
        return io.BytesIO(source), None, True
    if hasattr(source, "read"):
        name = getattr(source, "name", None)
        return source, name if isinstance(name, str) else None, False
    raise CatalogError(f"cannot read records from a {type(source).__name__}")
