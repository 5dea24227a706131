"""What an input is: its format (named, or told from its name and first bytes) and the files a
directory, a glob or ``-`` (standard input) stands for."""

from __future__ import annotations

import codecs
import glob
import io
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from catalog.errors import AppendError, CatalogError
from catalog.inputs.delimited import SEPARATORS
from catalog.tfrecord.framing import HEADER_SIZE, masked_crc32c
from catalog.tfrecord.sources import open_regular

FORMATS = ("auto", "tfrecord", "jsonl", "csv", "parquet", "npy", "npz", "images")
ROW_FORMATS = ("csv", "parquet", "npy", "npz", "images")  # read as rows, then encoded by the schema
STDIN = "-"
HEAD = 64  # bytes read to tell an input's format
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp")
_BY_SUFFIX = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".npy": "npy",
    ".npz": "npz",
    ".tfrecord": "tfrecord",
    ".tfrecords": "tfrecord",
    ".tfrec": "tfrecord",
}
_GLOB_CHARS = frozenset("*?[")
DOCUMENT_LIMIT = 64 << 20  # a .json file read whole to tell one document from JSON Lines


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


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise AppendError(f"unknown input format {fmt!r}: use one of {', '.join(FORMATS)}")
    return fmt


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


def detect(path: Path, fmt: str, stream: IO[bytes] | None = None) -> str:
    """``fmt``, or the format an input's kind (a folder: images), name and first bytes tell
    (peeked from ``stream`` when it is open already, so nothing is read twice)."""
    if check_format(fmt) != "auto":
        return fmt
    if str(path) != STDIN and path.is_dir():
        return "images"
    if isinstance(stream, io.BufferedReader):
        return format_of(path, stream.peek(HEAD)[:HEAD])
    with open_input(path) as f:
        return format_of(path, f.read(HEAD))


def format_of(path: Path, head: bytes) -> str:
    """The format of a file from its name, else from its first bytes (``head``)."""
    by_name = _BY_SUFFIX.get(path.suffix.lower())
    if by_name is not None:
        return by_name
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith(b"PK\x03\x04"):
        return "npz"
    # A valid CRC on the first length is decisive, so it goes first: a first record of 123
    # bytes starts the file with "{" (and of 91 with "[").
    if _tfrecord_head(head):
        return "tfrecord"
    # Nothing but blanks: no rows in any format; JSON Lines, which standard input takes too.
    if not head.strip() or head.lstrip().startswith((b"{", b"[")):
        return "jsonl"
    # Text before compression: a zlib header is any of some two-byte pairs, "H," among them
    # (a CSV whose first column is H), while compressed data is never 64 bytes of text.
    if _looks_like_csv(head):
        return "csv"
    return "tfrecord"  # compressed, or its reader names what is wrong with the bytes


def _tfrecord_head(head: bytes) -> bool:
    return len(head) >= HEADER_SIZE and masked_crc32c(head[:8]) == int.from_bytes(head[8:12], "little")


def _looks_like_csv(head: bytes) -> bool:
    """UTF-8 text whose first line, a header row, is printable and holds a separator. All of
    the head must decode: compressed or framed bytes never do, over 64 bytes."""
    try:
        # Incremental: the head may end inside a character, which is no error.
        text = codecs.getincrementaldecoder("utf-8-sig")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    line = text.split("\n", 1)[0].removesuffix("\r")
    return all(c.isprintable() or c == "\t" for c in line) and any(sep in line for sep in SEPARATORS)


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


def expand(paths: list[Path], fmt: str) -> list[tuple[Path, str]]:
    """Every input as (path, format): a directory is its files (sorted, hidden ones skipped),
    or one image folder; a pattern that names no file is expanded as a glob; ``-`` stays."""
    check_format(fmt)
    try:
        return _expand(paths, fmt)
    except OSError as e:  # a name too long, a folder that cannot be read: one line naming it
        where = e.filename if e.filename is not None else (paths[0] if paths else "")
        raise AppendError(f"{where}: {e.strerror or e}", str(where)) from e


def _expand(paths: list[Path], fmt: str) -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    for p in paths:
        if str(p) == STDIN:
            out.append((p, fmt))
        elif p.is_dir():
            if fmt == "images" or (fmt == "auto" and is_image_folder(p)):
                out.append((p, "images"))
            else:
                files = _files_under(p)
                if not files:
                    raise AppendError(f"{p}: an empty folder: no input files in it", str(p))
                out.extend((f, fmt) for f in files)
        elif not os.path.lexists(p) and _GLOB_CHARS & set(str(p)):
            matches = sorted(glob.glob(str(p), recursive=True))
            if not matches:
                raise AppendError(f"{p}: no file matches this pattern", str(p))
            out.extend(_expand([Path(m) for m in matches], fmt))
        else:
            out.append((p, fmt))
    return out


def _files_under(folder: Path) -> list[Path]:
    """The files in a folder and its sub-folders, hidden ones left out, sorted by their path
    in the folder (so "a/x" comes before "b", as `ls -R | sort` would have them)."""
    found: list[Path] = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found.extend(Path(top) / f for f in files if not f.startswith("."))
    return sorted(found, key=lambda p: p.relative_to(folder).parts)


def is_image_folder(folder: Path) -> bool:
    """``DIR/<class>/<image file>``: sub-folders only (hidden entries aside), with images in them."""
    entries = [e for e in os.scandir(folder) if not e.name.startswith(".")]
    if not entries or not all(e.is_dir() for e in entries):
        return False
    return any(f.name.lower().endswith(IMAGE_SUFFIXES) for e in entries for f in os.scandir(e.path) if f.is_file())


def check_json_document(path: Path, first: str, rest: IO[bytes]) -> None:
    """Raise the message for a file holding one JSON document (an array, or an object over
    several lines) where JSON Lines, one object per line, was expected; return otherwise."""
    if str(path) == STDIN and not first.lstrip().startswith("["):
        return  # standard input cannot be read twice: its first line's message stands
    text = first + rest.read(DOCUMENT_LIMIT).decode("utf-8", errors="replace")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        if not first.lstrip().startswith("["):
            return
        doc = []
    kind, jq = ("an array", "jq -c '.[]'") if isinstance(doc, list) else ("one object over several lines", "jq -c .")
    raise AppendError(
        f"{path}: holds one JSON document ({kind}), not JSON Lines (one object per line): "
        f"write one row per line, e.g. with `{jq}`",
        str(path),
        0,
    )
