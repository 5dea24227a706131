"""What an input is: its format (named, or told from its name and first bytes, as the format
table ``registry`` says) and the files a directory, a glob or ``-`` (standard input) stands for."""

from __future__ import annotations

import glob
import io
import os
from pathlib import Path
from typing import IO

from catalog.errors import AppendError
from catalog.inputs.files import STDIN, InputOptions, given_paths, open_input
from catalog.inputs.images import IMAGE_SUFFIXES, is_image_folder
from catalog.inputs.jsonl import DOCUMENT_LIMIT, check_json_document
from catalog.inputs.registry import AUTO, FALLBACK, INPUT_FORMATS, folder_format, format_names

# The table's names when this module was imported (the functions below read the table itself).
FORMATS = format_names()
ROW_FORMATS = tuple(f.name for f in INPUT_FORMATS.values() if f.reads == "rows")  # encoded by the schema
HEAD = 64  # bytes read to tell an input's format
_GLOB_CHARS = frozenset("*?[")


def check_format(fmt: str) -> str:
    names = format_names()
    if fmt not in names:
        raise AppendError(f"unknown input format {fmt!r}: use one of {', '.join(names)}")
    return fmt


def detect(path: Path, fmt: str, stream: IO[bytes] | None = None) -> str:
    """``fmt``, or the format an input's kind (a folder: images), name and first bytes tell
    (peeked from ``stream`` when it is open already, so nothing is read twice)."""
    if check_format(fmt) != AUTO:
        return fmt
    if str(path) != STDIN and path.is_dir():
        return folder_format(path).name
    if isinstance(stream, io.BufferedReader):
        return format_of(path, stream.peek(HEAD)[:HEAD])
    with open_input(path) as f:
        return format_of(path, f.read(HEAD))


def format_of(path: Path, head: bytes) -> str:
    """The format of a file from its name, else from its first bytes (``head``): the table's
    suffixes, then its magic first bytes, then its content tests in table order."""
    suffix = path.suffix.lower()
    table = INPUT_FORMATS.values()
    for spec in table:
        if suffix in spec.suffixes:
            return spec.name
    for spec in table:
        if spec.magic and head.startswith(spec.magic):
            return spec.name
    for spec in table:
        if spec.sniff is not None and spec.sniff(head):
            return spec.name
    return FALLBACK  # compressed, or its reader names what is wrong with the bytes


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
            folder = _folder_as_one(p, fmt)
            if folder is not None:
                out.append((p, folder))
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


def _folder_as_one(folder: Path, fmt: str) -> str | None:
    """The format that reads ``folder`` as one input (an image folder), or None: its files are
    the inputs."""
    if fmt == AUTO:
        return next((f.name for f in INPUT_FORMATS.values() if f.folder is not None and f.folder(folder)), None)
    return fmt if INPUT_FORMATS[fmt].folder is not None else None


def _files_under(folder: Path) -> list[Path]:
    """The files in a folder and its sub-folders, hidden ones left out, sorted by their path
    in the folder (so "a/x" comes before "b", as `ls -R | sort` would have them)."""
    found: list[Path] = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found.extend(Path(top) / f for f in files if not f.startswith("."))
    return sorted(found, key=lambda p: p.relative_to(folder).parts)


__all__ = [  # the names moved to files, images and jsonl are still importable from here
    "DOCUMENT_LIMIT",
    "FORMATS",
    "HEAD",
    "IMAGE_SUFFIXES",
    "ROW_FORMATS",
    "STDIN",
    "InputOptions",
    "check_format",
    "check_json_document",
    "detect",
    "expand",
    "format_of",
    "given_paths",
    "is_image_folder",
    "open_input",
]
