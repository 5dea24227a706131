"""Inputs to an append besides TFRecord and JSON Lines (which ``ingest`` reads itself): CSV/TSV,
Parquet, NumPy ``.npy``/``.npz`` and image folders, each read as a stream of rows that the
dataset's schema then encodes; plus what names an input (formats, directories, globs, ``-``).

Every format is an entry of one table, ``registry.INPUT_FORMATS``: its name, detection, reader,
inference and the option only it takes. A row source is iterable as ``(where, row)``: ``where``
is the line (``unit == "line"``) or the row index (``unit == "row"``) that error messages name.

The names below load on first use (PEP 562): the CLI reads ``--format``'s choices from the
table without loading a reader (NumPy, pyarrow, Pillow).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from catalog.lazy import exports

if TYPE_CHECKING:
    from catalog.inputs.files import STDIN, InputOptions, given_paths, open_input
    from catalog.inputs.formats import FORMATS, ROW_FORMATS, check_format, detect, expand, format_of
    from catalog.inputs.images import IMAGE_SUFFIXES, is_image_folder
    from catalog.inputs.jsonl import check_json_document
    from catalog.inputs.registry import (
        INPUT_FORMATS,
        ColumnSource,
        InputFormat,
        RowSource,
        format_names,
        input_format,
        reads_folders,
        row_source,
    )

# Public name -> the module that defines it.
_HOMES = {
    "FORMATS": "catalog.inputs.formats",
    "ROW_FORMATS": "catalog.inputs.formats",
    "check_format": "catalog.inputs.formats",
    "detect": "catalog.inputs.formats",
    "expand": "catalog.inputs.formats",
    "format_of": "catalog.inputs.formats",
    "STDIN": "catalog.inputs.files",
    "InputOptions": "catalog.inputs.files",
    "given_paths": "catalog.inputs.files",
    "open_input": "catalog.inputs.files",
    "IMAGE_SUFFIXES": "catalog.inputs.images",
    "is_image_folder": "catalog.inputs.images",
    "check_json_document": "catalog.inputs.jsonl",
    "INPUT_FORMATS": "catalog.inputs.registry",
    "ColumnSource": "catalog.inputs.registry",
    "InputFormat": "catalog.inputs.registry",
    "RowSource": "catalog.inputs.registry",
    "format_names": "catalog.inputs.registry",
    "input_format": "catalog.inputs.registry",
    "reads_folders": "catalog.inputs.registry",
    "row_source": "catalog.inputs.registry",
}

__all__ = [
    "FORMATS",
    "IMAGE_SUFFIXES",
    "INPUT_FORMATS",
    "ROW_FORMATS",
    "STDIN",
    "ColumnSource",
    "InputFormat",
    "InputOptions",
    "RowSource",
    "check_format",
    "check_json_document",
    "detect",
    "expand",
    "format_names",
    "format_of",
    "given_paths",
    "input_format",
    "is_image_folder",
    "open_input",
    "reads_folders",
    "row_source",
]

__getattr__, __dir__ = exports(__name__, _HOMES)
