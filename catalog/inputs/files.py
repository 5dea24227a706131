"""An input's bytes and names: standard input (``-``) or a regular file, the paths a caller
gave, and the options that map row inputs to features. Below every reader and the format
table (``registry``), so each of them can use it."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from catalog.errors import AppendError, CatalogError
from catalog.tfrecord.sources import open_regular

STDIN = "-"


@dataclass(frozen=True)
class InputOptions:
    """How row inputs map to features, beyond what their content says."""

    delimiter: str | None = None  # CSV: the cell separator; None: from the file name or header
    feature: str | None = None  # .npy: the feature its rows fill (default: the schema's only one)
    image_shape: tuple[int, int, int] | None = None  # image folders: decode to uint8 HxWxC tensors

    def __post_init__(self) -> None:
        for what, value in (("delimiter", self.delimiter), ("feature", self.feature)):
            if value is not None and not isinstance(value, str):
                raise AppendError(f"{what} is text, got {type(value).__name__} {value!r:.40}")


def open_input(path: Path) -> IO[bytes]:
    """An input's bytes: standard input for ``-``, else a regular file (never a FIFO or device)."""
    if str(path) == STDIN:
        return io.BufferedReader(_StdinBytes())
    try:
        return io.BufferedReader(open_regular(path))
    except CatalogError as e:
        raise AppendError(str(e), str(path)) from e


class _StdinBytes(io.RawIOBase):
    """Standard input's bytes, left open when the reader over them closes."""

    def readable(self) -> bool:
        return True

    def readinto(self, buf: Any) -> int:
        return int(sys.stdin.buffer.readinto1(buf))  # type: ignore[union-attr]


def given_paths(paths: object) -> list[Path]:
    """The inputs a caller named: one path (text, bytes or path-like) or an iterable of them.
    One string is one path (not its characters); an empty name is refused, as Path("") is the
    working directory."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    if not isinstance(paths, Iterable):
        raise AppendError(f"inputs are files, folders or patterns, got {type(paths).__name__}")
    out = []
    for p in paths:
        if not isinstance(p, (str, bytes, os.PathLike)):
            raise AppendError(f"an input is a path, got {type(p).__name__} {p!r:.40}")
        name = os.fsdecode(os.fspath(p))
        if not name:
            raise AppendError("'': an empty name names no file", "")
        out.append(Path(name))
    return out
