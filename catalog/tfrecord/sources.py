"""Where records come from: local paths, names the storage layer opens (URLs), bytes, streams.

Below the record framing: it opens what ``read_records`` is given, and refuses what is no
input file (a FIFO, a device, a directory) before a read can block or never end. A name (a
path or an object-store URL) is opened by the opener the storage layer registers
(catalog.storage.fileio, the one IO seam); a local path's own rules are here (open_regular).
"""

from __future__ import annotations

import importlib
import io
import os
import stat
from collections.abc import Callable
from typing import IO, Union

from catalog.errors import StorageError, UsageError

Source = Union[str, "os.PathLike[str]", IO[bytes], bytes, bytearray, memoryview]

# Who opens a file given by name (a path, or a URL such as s3://bucket/key): the storage layer
# (catalog.storage.fileio), which registers its opener when it is imported. The format layer
# tells no URL from a path and imports no object-store library.
_OPENER: Callable[[str], IO[bytes]] | None = None
_STORAGE = "catalog.storage.fileio"


def register_opener(opener: Callable[[str], IO[bytes]]) -> None:
    """Make ``opener`` the one that opens the names read_records is given (see _OPENER)."""
    global _OPENER
    _OPENER = opener


def open_named(name: str) -> IO[bytes]:
    """A file given by its name (a path or URL) open for reading, through the registered opener.
    The storage layer is above this one: loaded here by name, on the first name to open, so
    ``read_records("s3://...")`` works without importing it first."""
    if _OPENER is None:
        importlib.import_module(_STORAGE)  # registers its opener
    assert _OPENER is not None, f"{_STORAGE} registers no opener"
    return _OPENER(name)


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
            raise StorageError(f"{name}: {problem}") from e
        raise StorageError(f"{name}: {failure}: {e.strerror or e}") from e
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise StorageError(f"{name}: {_not_regular(mode)}")
        os.set_blocking(fd, True)
        return io.FileIO(fd, "rb", closefd=True)
    except BaseException:
        os.close(fd)
        raise


def open_source(source: Source) -> tuple[IO[bytes], str | None, bool]:
    """A binary stream over a path, URL, bytes or file object: (stream, path for messages,
    whether the caller owns the stream and closes it)."""
    if isinstance(source, str):
        return open_named(source), source, True
    if isinstance(source, os.PathLike):
        path = os.fspath(source)
        return open_regular(path), path, True
    if isinstance(source, (bytes, bytearray, memoryview)):
        if isinstance(source, memoryview) and not source.c_contiguous:
            source = source.tobytes()  # a strided view, copied in order: BytesIO takes one span
        return io.BytesIO(source), None, True
    if hasattr(source, "read"):
        name = getattr(source, "name", None)
        return source, name if isinstance(name, str) else None, False
    raise UsageError(f"cannot read records from a {type(source).__name__}")
