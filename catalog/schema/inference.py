"""Schemas inferred from rows of Python values (JSON Lines, CSV cells, Parquet, NumPy, frames).

Serialized records carry their wire kinds and are inferred in ``codec.infer_features``; rows
carry Python values, and what each feature held is tallied here, a value at a time, so memory
follows the number of features, never the number of rows. Nothing is made up: a feature
missing from some rows is optional (no default), a type that cannot be told (only empty lists,
or only missing values) is an error naming the feature, and the schema inferred from rows
always accepts those rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from catalog.errors import SchemaError
from catalog.schema.features import Feature
from catalog.schema.frames import column_batches
from catalog.tfrecord.example import FLOAT32_MAX

_LIST_KIND = {"int": "int64", "float": "float32", "str": "string", "bytes": "bytes"}
_SCALARS = (int, float, str, bytes, np.generic)


@dataclass
class _Tally:
    """What one feature's values looked like."""

    present: int = 0
    kinds: set[str] = field(default_factory=set)  # of the leaf values: int, float, str, bytes
    shapes: set[tuple[int, ...]] = field(default_factory=set)  # () for a scalar
    arrays: set[str] = field(default_factory=set)  # numpy dtypes of array values (tensors)
    typed: bool = False  # a value came from a typed source (JSON, Parquet, NumPy, Python), not CSV text


class RowInference:
    """Tally rows (or columns) of Python values, then tell each feature's declaration.

    Rows added with ``text`` are cells of a text file (CSV), converted where they look like
    numbers or JSON arrays: a feature whose values all came so, with any other text among
    them, is text as a whole (typed values of another kind beside them are an error)."""

    def __init__(self) -> None:
        self.rows = 0
        self.tallies: dict[str, _Tally] = {}

    def add(self, row: Mapping[str, Any], text: bool = False) -> None:
        if not isinstance(row, Mapping):
            raise SchemaError(f"a row is a mapping of feature name to value, got {type(row).__name__}")
        self.rows += 1
        for name, value in row.items():
            if value is not None:
                self._observe(str(name), value, text)

    def declare(self, names: Iterable[str]) -> None:
        """Features the input names (a CSV header, a table's columns) whether or not a value shows."""
        for name in names:
            self.tallies.setdefault(str(name), _Tally())

    def add_column(self, name: str, values: Iterable[Any]) -> None:
        """The values of one feature (None: missing); with :meth:`add_rows` for the count."""
        for value in values:
            if value is not None:
                self._observe(name, value, False)

    def add_rows(self, n: int) -> None:
        self.rows += n

    def _observe(self, name: str, value: Any, text: bool) -> None:
        t = self.tallies.get(name)
        if t is None:
            t = self.tallies[name] = _Tally()
        t.present += 1
        t.typed = t.typed or not text
        if _exact_array(value):
            t.arrays.add(value.dtype.newbyteorder("=").name)
            t.shapes.add(value.shape)
            return
        shape, leaves = _walk(name, value)
        t.shapes.add(shape)
        for leaf in leaves:
            t.kinds.add(_kind(name, leaf))

    def features(self) -> list[Feature]:
        return [self._feature(name, t) for name, t in self.tallies.items()]

    def _feature(self, name: str, t: _Tally) -> Feature:
        if not t.present:
            raise SchemaError("no value in any row: its type cannot be told (declare it in a schema)", name)
        optional = t.present < self.rows
        if t.arrays or "bool" in t.kinds:  # true/false values have no list type: a bool tensor holds them
            return _tensor(name, t, optional)
        if not t.typed and ("str" in t.kinds or (() in t.shapes and len(t.shapes) > 1)):
            return Feature(name, "string", optional=optional)  # a cell that is no number (or list): text
        dtype = self._dtype(name, t.kinds)
        return Feature(name, dtype, self._shape(name, t.shapes), optional=optional)

    def _dtype(self, name: str, kinds: set[str]) -> str:
        if not kinds:
            raise SchemaError("every value is an empty list: its type cannot be told (declare it in a schema)", name)
        if kinds <= {"int", "float"}:
            return "float32" if "float" in kinds else "int64"
        if len(kinds) > 1:
            raise SchemaError(f"values of different types: {', '.join(sorted(kinds))}", name)
        return _LIST_KIND[next(iter(kinds))]

    def _shape(self, name: str, shapes: set[tuple[int, ...]]) -> tuple[int | None, ...]:
        if shapes <= {(), (1,)}:
            return () if () in shapes else (1,)
        if len(shapes) == 1:
            return next(iter(shapes))
        if all(len(s) == 1 for s in shapes):
            return (None,)
        raise SchemaError(f"values of different shapes: {', '.join(str(list(s)) for s in sorted(shapes))}", name)


def _exact_array(value: Any) -> bool:
    """An array kept exactly, as a tensor of its dtype: numeric or bool, not int64/float32 (list types)."""
    return (
        isinstance(value, np.ndarray)
        and value.dtype.kind in "biufc"
        and value.ndim >= 1
        and value.dtype not in (np.int64, np.float32)
    )


def _walk(name: str, value: Any) -> tuple[tuple[int, ...], list[Any]]:
    """A value's shape (nested lists) and its leaves."""
    if isinstance(value, _SCALARS) and not isinstance(value, np.ndarray):
        return (), [value]
    if isinstance(value, np.ndarray):
        return value.shape, value.reshape(-1).tolist()
    if not isinstance(value, (list, tuple)):
        raise SchemaError(f"cannot store a {type(value).__name__} value", name)
    if not value or not isinstance(value[0], (list, tuple, np.ndarray)):
        if any(isinstance(v, (list, tuple, np.ndarray)) for v in value):
            raise SchemaError("a list mixing values and lists", name)
        return (len(value),), list(value)
    inner = [_walk(name, v) for v in value]
    shapes = {s for s, _ in inner}
    if len(shapes) != 1:
        raise SchemaError("nested lists of different lengths (ragged): no fixed shape holds them", name)
    return (len(value), *shapes.pop()), [leaf for _, leaves in inner for leaf in leaves]


def _kind(name: str, leaf: Any) -> str:
    if isinstance(leaf, (bool, np.bool_)):  # before int: a bool is an int to Python
        return "bool"
    if isinstance(leaf, (int, np.integer)):
        if not -(1 << 63) <= int(leaf) < (1 << 63):
            raise SchemaError(f"integer {int(leaf)} is out of int64 range", name)
        return "int"
    if isinstance(leaf, (float, np.floating)):
        if abs(leaf) > FLOAT32_MAX and not math.isinf(leaf):  # no float32 holds it: refused, not rounded
            raise SchemaError(f"float {float(leaf)!r} is out of float32 range (a float64 tensor holds it)", name)
        return "float"
    if isinstance(leaf, str):
        return "str"
    if isinstance(leaf, (bytes, bytearray, memoryview, np.bytes_)):
        return "bytes"
    raise SchemaError(f"cannot store a {type(leaf).__name__} value", name)


def _tensor(name: str, t: _Tally, optional: bool) -> Feature:
    """Arrays of one dtype, or true/false values (Python's, NumPy's, lists of them): a bool tensor."""
    dtypes = t.arrays | (t.kinds & {"bool"})
    others = t.kinds - {"bool"}
    if others or len(dtypes) > 1:
        what = "arrays and values" if t.arrays else "values"
        raise SchemaError(f"{what} of different types: {', '.join(sorted(dtypes | others))}", name)
    ranks = {len(s) for s in t.shapes}
    if len(ranks) > 1:
        raise SchemaError(f"arrays of different ranks: {', '.join(str(r) for r in sorted(ranks))}", name)
    dims = list(zip(*t.shapes, strict=True))
    shape = tuple(d[0] if len(set(d)) == 1 else None for d in dims)
    return Feature(name, dtypes.pop(), shape, tensor=True, optional=optional)


def infer_columns(obj: Any) -> list[Feature]:
    """Features of a DataFrame, an Arrow Table or RecordBatch, or a dict of columns."""
    tally = RowInference()
    for columns, n in column_batches(obj, {}):
        tally.add_rows(n)
        tally.declare(columns)
        for name, values in columns.items():
            tally.add_column(str(name), values)
    return tally.features()
