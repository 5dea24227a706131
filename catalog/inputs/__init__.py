"""Inputs to an append besides TFRecord and JSON Lines (which ``ingest`` reads itself): CSV/TSV,
Parquet, NumPy ``.npy``/``.npz`` and image folders, each read as a stream of rows that the
dataset's schema then encodes; plus what names an input (formats, directories, globs, ``-``).

A row source is iterable as ``(where, row)``: ``where`` is the line (``unit == "line"``) or the
row index (``unit == "row"``) that error messages name.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Protocol, runtime_checkable

from catalog.inputs.arrays import NpyRows, NpzRows
from catalog.inputs.delimited import DelimitedRows
from catalog.inputs.formats import (
    FORMATS,
    IMAGE_SUFFIXES,
    ROW_FORMATS,
    STDIN,
    InputOptions,
    check_format,
    check_json_document,
    detect,
    expand,
    format_of,
    given_paths,
    is_image_folder,
    open_input,
)
from catalog.inputs.images import ImageFolderRows
from catalog.inputs.parquet import ParquetRows
from catalog.schema import Schema


class RowSource(Protocol, Iterable[tuple[int, dict[str, Any]]]):
    unit: str


@runtime_checkable
class ColumnSource(Protocol):
    """A source that also gives its rows a batch at a time, as columns (None: missing) with
    each row's line or row number, for Schema.encode_columns."""

    unit: str

    def batches(self) -> Iterator[tuple[dict[str, list[Any]], list[int]]]: ...


def row_source(path: Path, fmt: str, schema: Schema, options: InputOptions, stream: IO[bytes] | None) -> RowSource:
    """The rows of one input in a row format (``stream``: the open file, for CSV)."""
    if fmt == "csv":
        assert stream is not None
        return DelimitedRows(stream, path, schema, options.delimiter)
    if fmt == "parquet":
        return ParquetRows(path, schema)
    if fmt == "npy":
        return NpyRows(path, schema, options.feature)
    if fmt == "npz":
        return NpzRows(path, schema)
    assert fmt == "images", fmt
    return ImageFolderRows(path, schema, options.image_shape)


__all__ = [
    "FORMATS",
    "IMAGE_SUFFIXES",
    "ROW_FORMATS",
    "STDIN",
    "ColumnSource",
    "InputOptions",
    "RowSource",
    "check_format",
    "check_json_document",
    "detect",
    "expand",
    "given_paths",
    "format_of",
    "is_image_folder",
    "open_input",
    "row_source",
]
