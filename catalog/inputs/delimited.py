"""CSV and TSV inputs: a header row naming features, then one row per line, read with the
standard library's parser as a stream, every cell converted per its feature.

Cells: integers and floats as text (``NaN``, ``inf`` too), ``string`` as it is, ``bytes`` as
base64 (what ``catalog cat`` prints), and any feature with a shape (a list, a tensor) as a
JSON array, in ``cat``'s JSON form. An empty cell is a missing value: the feature's default,
``None`` for an optional one, else an error naming the line and column.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import csv
import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from catalog.errors import AppendError, ValidationError
from catalog.inputs.files import InputOptions, open_input
from catalog.schema import Feature, Schema, value_from_json
from catalog.schema.inference import RowInference
from catalog.tfrecord.example import FLOAT32_MAX
from catalog.words import counted

SEPARATORS = (",", "\t", ";", "|")
BATCH = 4096  # rows converted and encoded a column at a time
Cell = Callable[[str], Any]
# The csv module refuses cells over 128 KiB by default (a process-wide limit), and base64
# images or long JSON arrays are larger: the limit becomes a record's own (under 2 GiB).
# A line is read whole anyway, so the default bounded nothing here.
FIELD_LIMIT = (1 << 31) - 1


def _number(cell: str) -> str:
    # int() and float() take "1_000" and any script's digits ("١٢"); a CSV writer never meant them
    if "_" in cell or not cell.isascii():
        raise ValueError
    return cell


def _int(cell: str) -> int:
    return int(_number(cell))


_INFINITIES = frozenset(("inf", "infinity", "+inf", "+infinity", "-inf", "-infinity"))


def looks_like_csv(head: bytes) -> bool:
    """UTF-8 text whose first line, a header row, is printable and holds a separator. All of
    the head must decode: compressed or framed bytes never do, over 64 bytes."""
    try:
        # Incremental: the head may end inside a character, which is no error.
        text = codecs.getincrementaldecoder("utf-8-sig")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    line = text.split("\n", 1)[0].removesuffix("\r")
    return all(c.isprintable() or c == "\t" for c in line) and any(sep in line for sep in SEPARATORS)


def finite_float(text: str) -> float:
    """A number's text as a float; ValidationError for one too large for any float ("1e400"),
    which float() would quietly make infinite. An infinity written as such stays one."""
    value = float(text)
    if math.isinf(value) and text.strip().lower() not in _INFINITIES:
        raise ValidationError(f"number {text.strip()[:40]} is out of float32 range")
    return value


def _float(cell: str) -> float:
    return finite_float(_number(cell))


def _bytes(cell: str) -> bytes:
    return base64.b64decode(cell, validate=True)


def _json(feat: Feature) -> Cell:
    def parse(cell: str) -> Any:
        return value_from_json(feat, json.loads(cell, parse_float=finite_float))

    return parse


def _class(feat: Feature) -> Cell:
    """A label's cell: its number, or its class name (stored as the number)."""

    def parse(cell: str) -> int:
        try:
            return _int(cell)
        except ValueError:
            return feat.str2int(cell)

    return parse


def _converter(feat: Feature) -> tuple[Cell, str]:
    """The cell parser of a feature, and what it expects (for messages)."""
    if not feat.is_scalar or feat.tensor:
        return _json(feat), "a JSON array"
    if feat.dtype == "int64" and feat.names is not None:
        return _class(feat), "an integer or a class name"
    if feat.dtype == "int64":
        return _int, "an integer"
    if feat.dtype == "float32":
        return _float, "a number"
    if feat.dtype == "bytes":
        return _bytes, "base64 text"
    return str, "text"


def _guess(cell: str) -> Any:
    """A cell's value when no schema says: a canonical integer ("7", not "07" or "+7": those
    read back differently), a number, a JSON array, else the text itself."""
    if "_" not in cell:
        try:
            value = int(cell)
            return value if str(value) == cell else cell  # "07", "+7", " 7": text that reads back so
        except ValueError:
            pass
        try:
            number = finite_float(cell)
            return number if abs(number) <= FLOAT32_MAX or math.isinf(number) else cell  # no float32 holds it: text
        except (ValueError, ValidationError):
            pass
    if cell.startswith("["):
        try:
            parsed = json.loads(cell, parse_float=finite_float)
        except (ValueError, RecursionError, ValidationError):
            return cell
        if isinstance(parsed, list):
            return parsed
    return cell


class DelimitedRows:
    """Rows of a CSV/TSV stream, as (line number, row); a row leaves out its empty cells."""

    unit = "line"

    def __init__(self, stream: IO[bytes], path: Path, schema: Schema | None, delimiter: str | None) -> None:
        """``schema`` None: no schema yet (inferring one), each cell guessed (see _guess)."""
        self.stream = stream
        self.path = path
        self.schema = schema
        self.delimiter = delimiter
        self.lineno = 0  # lines read
        self.start = 1  # the first line of the record being read: a quoted cell may span lines

    def _lines(self) -> Iterator[str]:
        """Text lines, each decoded on its own so a bad byte is placed on its line."""
        for raw in self.stream:
            self.lineno += 1
            try:
                yield raw.decode("utf-8-sig" if self.lineno == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise self.error(f"not UTF-8 text (byte {e.start} of the line)", self.lineno) from e

    def error(self, reason: str, line: int | None = None) -> AppendError:
        """An error on ``line``, else on the record's first line (where an unclosed quote opened)."""
        return AppendError(f"{self.path}: line {self.start if line is None else line}: {reason}", str(self.path))

    def _separator(self, header: str) -> str:
        if self.delimiter is not None:
            return self.delimiter
        if self.path.suffix.lower() == ".tsv":
            return "\t"
        counts = [header.count(sep) for sep in SEPARATORS]
        return SEPARATORS[counts.index(max(counts))] if max(counts) else ","

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        columns = self._start()
        for start, cells in self._records(len(columns)):
            yield start, self._row(columns, cells)

    def batches(self) -> Iterator[tuple[dict[str, list[Any]], list[int]]]:
        """The rows ``BATCH`` at a time, as columns of converted cells (None where a cell is
        empty), with each row's first line: for Schema.encode_columns."""
        columns = self._start()
        rows: list[list[str]] = []
        starts: list[int] = []
        for start, cells in self._records(len(columns)):
            rows.append(cells)
            starts.append(start)
            if len(rows) == BATCH:
                yield self._columnar(columns, rows, starts), starts
                rows, starts = [], []
        if rows:
            yield self._columnar(columns, rows, starts), starts

    def _start(self) -> list[tuple[str, Cell, str]]:
        """Read the header: the columns' names and cell parsers."""
        self._lines_iter = self._lines()
        first = next(self._lines_iter, None)
        if first is None:
            self.header = []
            return []  # an empty file: no rows
        self._sep = sep = self._separator(first)
        if len(sep) != 1:
            raise AppendError(f"{self.path}: the delimiter must be one character, got {sep!r}", str(self.path))
        csv.field_size_limit(max(csv.field_size_limit(), FIELD_LIMIT))  # never lowers another user's
        try:
            # The header too: a lone "\r" in it (a file of old Mac line ends) is a csv.Error
            header = next(csv.reader([first], delimiter=sep, strict=True))
        except csv.Error as e:
            raise self.error(f"not valid CSV: {e}") from e
        columns = self._columns(header)
        self.header = [name for name, _, _ in columns]
        return columns

    def _records(self, width: int) -> Iterator[tuple[int, list[str]]]:
        """(first line, cells) of each record after the header; blank lines skipped."""
        if not width:
            return
        try:
            self.start = 2
            for cells in csv.reader(self._lines_iter, delimiter=self._sep, strict=True):
                if cells:  # a blank line has none
                    if len(cells) != width:
                        raise self.error(f"{counted(len(cells), 'cell')}, the header has {counted(width, 'column')}")
                    yield self.start, cells
                self.start = self.lineno + 1  # the reader reads no further than the record it returns
        except csv.Error as e:
            raise self.error(f"not valid CSV: {e}") from e

    def _columnar(
        self, columns: list[tuple[str, Cell, str]], rows: list[list[str]], starts: list[int]
    ) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for (name, parse, expected), cells in zip(columns, zip(*rows, strict=True), strict=True):
            try:
                out[name] = [parse(c) if c else None for c in cells]  # one comprehension a column: the fast path
            except (ValueError, binascii.Error, ValidationError, RecursionError):
                for cell, start in zip(cells, starts, strict=True):  # find the cell, for its line
                    self.start = start
                    self._cell(name, parse, expected, cell)
                raise
            if "" in cells and self.schema is not None and not self.schema.features[name].may_be_absent:
                self.start = starts[cells.index("")]
                raise self.error(f"column {name!r}: empty cell, and the feature has no default")
        return out

    def _columns(self, header: list[str]) -> list[tuple[str, Cell, str]]:
        for i, name in enumerate(header):
            if not name:
                raise self.error(f"column {i + 1} has no name in the header")
            if name in header[:i]:
                raise self.error(f"column {name!r} appears twice in the header")
        if self.schema is None:
            return [(name, _guess, "") for name in header]
        feats = self.schema.features
        for i, name in enumerate(header):
            if name not in feats:
                raise self.error(f"column {i + 1} {name!r} is not a feature of the schema")
        for name, feat in feats.items():
            if name not in header and not feat.may_be_absent:
                raise self.error(f"no column {name!r}, and the feature has no default")
        return [(name, *_converter(feats[name])) for name in header]

    def _row(self, columns: list[tuple[str, Cell, str]], cells: list[str]) -> dict[str, Any]:
        row: dict[str, Any] = {}
        for (name, parse, expected), cell in zip(columns, cells, strict=True):
            if not cell:
                if self.schema is not None and not self.schema.features[name].may_be_absent:
                    raise self.error(f"column {name!r}: empty cell, and the feature has no default")
                continue
            row[name] = self._cell(name, parse, expected, cell)
        return row

    def _cell(self, name: str, parse: Cell, expected: str, cell: str) -> Any:
        if not cell:
            return None
        try:
            return parse(cell)
        except (ValueError, binascii.Error, ValidationError, RecursionError) as e:
            detail = f": {e.reason}" if isinstance(e, ValidationError) else ""
            raise self.error(f"column {name!r}: expected {expected}, got {cell!r:.60}{detail}") from e


def csv_rows(path: Path, schema: Schema, options: InputOptions, stream: IO[bytes] | None) -> DelimitedRows:
    """The format table's reader (``stream``: the open input)."""
    assert stream is not None
    return DelimitedRows(stream, path, schema, options.delimiter)


def infer_csv(path: Path, options: InputOptions, tally: RowInference) -> list[Feature]:
    """The format table's inference: cells read as the numbers or lists they look like."""
    with open_input(path) as f:
        source = DelimitedRows(f, path, None, options.delimiter)
        for _, row in source:
            tally.add(row, text=True)
        tally.declare(source.header)  # a column whose every cell is empty too
    return []
