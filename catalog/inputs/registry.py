"""Every input format an append reads, in one table (``INPUT_FORMATS``, as MosaicML Streaming's
``_readers``): its ``--format`` name, how an input is told to be in it (name suffixes, first
bytes, a folder's layout), how it is read, how a schema is inferred from it, and the option
only it takes. ``formats`` (detection, expansion), ``infer``, ``ingest``, ``api`` and the CLI's
``--format`` choices all consult the table: adding a format is adding its entry (and its reader
module), nothing else.

Cheap to import (the standard library only): the CLI reads ``--format``'s names from here, and
each reader module is imported when an input of its format is read (``Ref``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from catalog.inputs.files import InputOptions
    from catalog.schema import Feature, Schema
    from catalog.schema.inference import RowInference

AUTO = "auto"  # --format's default: each input's format told from its kind, name and first bytes
FALLBACK = "tfrecord"  # what an input nothing else claims is read as (compressed TFRecord, say)


class RowSource(Protocol, Iterable[tuple[int, dict[str, Any]]]):
    """A row format's reader: iterable as ``(where, row)``, ``where`` the line (``unit ==
    "line"``) or the row index (``unit == "row"``) that error messages name."""

    unit: str


@runtime_checkable
class ColumnSource(Protocol):
    """A source that also gives its rows a batch at a time, as columns (None: missing) with
    each row's line or row number, for Schema.encode_columns."""

    unit: str

    def batches(self) -> Iterator[tuple[dict[str, list[Any]], list[int]]]: ...


# (path, the dataset's schema, options, the open input or None for a folder) -> its rows
RowsReader = Callable[[Path, "Schema", "InputOptions", "IO[bytes] | None"], RowSource]
# (path, options, tally): the input's rows counted into the tally; returns the features whose
# metadata the rows' values cannot tell (an image folder's class names), else []
Inference = Callable[[Path, "InputOptions", "RowInference"], "list[Feature]"]


@dataclass(frozen=True)
class InputFormat:
    """One input format. ``reads``: "records" (TFRecord: validated, its bytes kept), "json"
    (JSON Lines: ``ingest``'s own line parser) or "rows" (``rows`` gives rows the schema
    encodes). Detection, in this order over the table: a name's ``suffixes``, then the
    ``magic`` first bytes, then ``sniff`` (a test of the first 64 bytes, tried in table
    order), else ``FALLBACK``; a folder given as one input is read by the format whose
    ``folder`` test takes it. ``option``: (the flag, the ``InputOptions`` field) that only this
    format takes; ``label``: what messages call it; ``stdin``: standard input may hold it."""

    name: str
    label: str
    reads: Literal["records", "json", "rows"]
    suffixes: tuple[str, ...] = ()
    magic: tuple[bytes, ...] = ()
    sniff: Callable[[bytes], bool] | None = None
    folder: Callable[[Path], bool] | None = None
    rows: RowsReader | None = None
    infer: Inference | None = None
    option: tuple[str, str] | None = None
    stdin: bool = False


@dataclass(frozen=True)
class Ref:
    """A function of a reader module, imported on its first call, as ``catalog.lazy`` imports
    public names: this module stays cheap, and the package imports below the CLI stay at
    module level (tests/test_quality.py)."""

    module: str
    name: str

    def __call__(self, *args: Any) -> Any:
        return getattr(importlib.import_module(self.module), self.name)(*args)


def _jsonl_head(head: bytes) -> bool:
    """Nothing but blanks (no rows in any format: JSON Lines, which standard input takes too),
    or an object or array first."""
    return not head.strip() or head.lstrip().startswith((b"{", b"["))


_DELIMITED, _ARRAYS, _IMAGES = "catalog.inputs.delimited", "catalog.inputs.arrays", "catalog.inputs.images"
_PARQUET = "catalog.inputs.parquet"

# The table. Its order is --format's order (after "auto") and the order of the content tests.
INPUT_FORMATS: dict[str, InputFormat] = {
    f.name: f
    for f in (
        # A valid CRC on the first length is decisive, so TFRecord's test goes first.
        InputFormat(
            "tfrecord", "TFRecord", "records", (".tfrecord", ".tfrecords", ".tfrec"),
            sniff=Ref("catalog.tfrecord.framing", "starts_framed"),
        ),
        InputFormat(
            "jsonl", "JSON Lines", "json", (".jsonl", ".ndjson", ".json"), sniff=_jsonl_head,
            infer=Ref("catalog.inputs.jsonl", "infer_jsonl"), stdin=True,
        ),
        # Text before compression: a zlib header is any of some two-byte pairs, "H," among them
        # (a CSV whose first column is H), while compressed data is never 64 bytes of text.
        InputFormat(
            "csv", "CSV", "rows", (".csv", ".tsv"), sniff=Ref(_DELIMITED, "looks_like_csv"),
            rows=Ref(_DELIMITED, "csv_rows"), infer=Ref(_DELIMITED, "infer_csv"), option=("--delimiter", "delimiter"),
            stdin=True,
        ),
        InputFormat(
            "parquet", "Parquet", "rows", (".parquet", ".pq"), (b"PAR1",), rows=Ref(_PARQUET, "parquet_rows"),
            infer=Ref(_PARQUET, "infer_parquet"),
        ),
        InputFormat(
            "npy", ".npy", "rows", (".npy",), (b"\x93NUMPY",), rows=Ref(_ARRAYS, "npy_rows"),
            infer=Ref(_ARRAYS, "infer_npy"), option=("--feature", "feature"),
        ),
        InputFormat(
            "npz", ".npz", "rows", (".npz",), (b"PK\x03\x04",), rows=Ref(_ARRAYS, "npz_rows"),
            infer=Ref(_ARRAYS, "infer_npz"),
        ),
        InputFormat(
            "images", "image folder", "rows", folder=Ref(_IMAGES, "is_image_folder"), rows=Ref(_IMAGES, "image_rows"),
            infer=Ref(_IMAGES, "image_features"), option=("--image-shape", "image_shape"),
        ),
    )
}  # fmt: skip


def format_names() -> tuple[str, ...]:
    """What ``--format`` (and ``format=``) takes: "auto", then every format in the table."""
    return (AUTO, *INPUT_FORMATS)


def input_format(name: str) -> InputFormat:
    """The entry of a format ``detect`` named (never "auto")."""
    return INPUT_FORMATS[name]


def reads_folders(fmt: str) -> bool:
    """Whether ``fmt`` (a name or "auto") reads a folder as one input."""
    spec = INPUT_FORMATS.get(fmt)
    return spec is not None and spec.folder is not None


def folder_format(path: Path) -> InputFormat:
    """The format a folder given as one input is read as: the first whose test takes it, else
    the first that reads folders (its reader then says what the folder lacks)."""
    readers = [f for f in INPUT_FORMATS.values() if f.folder is not None]
    return next((f for f in readers if f.folder(path)), readers[0])  # type: ignore[misc]  # not None: filtered


def stdin_formats() -> tuple[str, ...]:
    """The formats standard input may hold (it cannot be read twice: never a whole-file format)."""
    return tuple(f.name for f in INPUT_FORMATS.values() if f.stdin)


def stdin_labels() -> str:
    """Those formats as messages name them: "JSON Lines or CSV"."""
    return " or ".join(f.label for f in INPUT_FORMATS.values() if f.stdin)


def row_source(path: Path, fmt: str, schema: Schema, options: InputOptions, stream: IO[bytes] | None) -> RowSource:
    """The rows of one input in a row format (``stream``: the open file, for CSV)."""
    reader = INPUT_FORMATS[fmt].rows
    assert reader is not None, fmt
    return reader(path, schema, options, stream)
