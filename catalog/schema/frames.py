"""Columnar inputs from Python: pandas DataFrames, pyarrow Tables and RecordBatches, and dicts of
equal-length columns (lists or numpy arrays), as batches of ``{feature: list of values}`` with
None where a value is missing, for ``Schema.encode_columns``.

Missing values: None, pandas' NA and NaT, and Arrow nulls. A float NaN is a value (TensorFlow
stores it) in a float feature, and missing elsewhere: pandas turns the missing cells of an
integer or text column into NaN, and an integer feature takes such a column's integral floats
(``3.0`` -> ``3``), since pandas made them floats only to hold the NaNs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from catalog.errors import ValidationError
from catalog.schema.features import Feature

BATCH = 65536  # rows per batch taken from a large table: bounds the Python objects alive at once
BATCH_BYTES = 7 << 20  # and the bytes of a dict's array columns per batch (tensors: see _dict_batches)
Columns = dict[str, list[Any]]


def _module(obj: Any) -> str:
    return type(obj).__module__.split(".", 1)[0]


def is_columnar(obj: Any) -> bool:
    """A DataFrame, an Arrow Table or RecordBatch: what ``append_rows`` takes as a batch."""
    return _module(obj) in ("pandas", "pyarrow") and hasattr(obj, "columns")


def column_batches(obj: Any, features: Mapping[str, Feature], arrays: bool = False) -> Iterator[tuple[Columns, int]]:
    """``obj`` (columnar, or a dict of columns) as batches of (columns, rows); ``features``
    (a schema's, or none when inferring one) decide how pandas' NaNs read (see above).
    ``arrays``: a dict's 1-D signed integer, float and object arrays are kept as they are, not
    made lists of Python values (what ``Schema.encode_columns`` and the statistics take as
    they are: a batched map's columns; see packing)."""
    if _module(obj) == "pandas":
        yield from _pandas(obj, features)
    elif _module(obj) == "pyarrow":
        unique_names(list(obj.column_names))  # to_pydict keeps the last of two columns of a name
        batches = obj.to_batches(max_chunksize=BATCH) if hasattr(obj, "to_batches") else [obj]
        for b in batches:
            yield b.to_pydict(), b.num_rows
    elif isinstance(obj, Mapping):
        yield from _dict_batches(obj, arrays)
    else:
        raise ValidationError(f"not a table of columns: {type(obj).__name__}")


def unique_names(names: list[str]) -> None:
    """Refuse a table with two columns of one name: its rows would silently keep only one."""
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise ValidationError("the table has two columns of this name", str(name))
        seen.add(name)


def _dict_batches(obj: Mapping[Any, Any], arrays: bool = False) -> Iterator[tuple[Columns, int]]:
    """A dict of columns in batches of at most BATCH rows and about BATCH_BYTES of array data:
    a batch is encoded and written before the next is encoded, so a large table's records are
    never all alive at once, and the statistics of one batch (computed on a thread) overlap the
    encoding of the next instead of all waiting at the end."""
    columns, n = _dict_of_columns(obj, arrays)
    step = max(1, min(BATCH, BATCH_BYTES // max(sum(map(_row_bytes, columns.values())), 1)))
    if n <= step:
        yield columns, n
        return
    for lo in range(0, n, step):
        yield {name: c[lo : lo + step] for name, c in columns.items()}, min(step, n - lo)


def _row_bytes(column: Any) -> int:
    """About the bytes of a row of ``column`` that are arrays (tensors): an array's rows, or a
    list's first value when it is an array (images given one array a row)."""
    if isinstance(column, np.ndarray):
        return column.nbytes // max(len(column), 1) if column.ndim > 1 else 0
    return column[0].nbytes if column and isinstance(column[0], np.ndarray) else 0


def _dict_of_columns(obj: Mapping[Any, Any], arrays: bool = False) -> tuple[Columns, int]:
    columns: Columns = {}
    for name, col in obj.items():
        if isinstance(col, np.ndarray):
            if col.ndim == 0:
                what = f"a 0-d {col.dtype} array"
                raise ValidationError(f"a column is a list or array of the rows' values, got {what}", str(name))
            # numbers as Python scalars (the encoders' fast path); a batch of tensors stays one
            # array (it iterates as its rows; the statistics take it whole, not decoded again)
            if col.ndim > 1 or (arrays and kept_array(col)):
                columns[name] = col  # type: ignore[assignment]
            else:
                columns[name] = col.tolist() if col.dtype.kind in "biuf" else list(col)
        elif isinstance(col, (list, tuple)):
            columns[name] = list(col)
        else:
            raise ValidationError(
                f"a dict given to append_rows is one column per feature (a list or array), got {type(col).__name__}",
                str(name),
            )
    lengths = {name: len(c) for name, c in columns.items()}
    if len(set(lengths.values())) > 1:
        raise ValidationError("columns of different lengths: " + ", ".join(f"{k} {n:,}" for k, n in lengths.items()))
    return columns, next(iter(lengths.values()), 0)


def kept_array(col: np.ndarray) -> bool:
    """Whether a 1-D array is one the encoders take as it is (``column_batches(arrays=True)``):
    signed integers, floats of up to 8 bytes, objects. Others (unsigned, bool...) are made
    lists, whose values' types the encoders judge."""
    return (col.dtype.kind in "if" and col.dtype.itemsize <= 8) or col.dtype == object


def as_lists(columns: Mapping[str, Any]) -> dict[str, Any]:
    """``columns`` with every 1-D array made a list of Python values, as ``column_batches``
    makes them without ``arrays``."""
    return {
        name: (c.tolist() if c.dtype.kind in "biuf" else list(c)) if isinstance(c, np.ndarray) and c.ndim == 1 else c
        for name, c in columns.items()
    }


def _pandas(df: Any, features: Mapping[str, Feature]) -> Iterator[tuple[Columns, int]]:
    if df.columns.has_duplicates:
        dup = df.columns[df.columns.duplicated()][0]
        raise ValidationError("the DataFrame has two columns of this name", str(dup))
    for lo in range(0, len(df), BATCH):
        part = df.iloc[lo : lo + BATCH]
        yield {str(name): _series(part[name], features.get(str(name))) for name in part.columns}, len(part)


def _series(s: Any, feat: Feature | None) -> list[Any]:
    """One pandas column as Python values, None where missing (see the module's rules)."""
    dtype = s.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biu":
        return list(s.to_numpy().tolist())
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        values = s.to_numpy().tolist()
        if feat is None or feat.tensor or feat.dtype == "float32":
            return list(values)
        return [None if math.isnan(v) else int(v) if v.is_integer() else v for v in values]
    return list(s.to_numpy(dtype=object, na_value=None).tolist())
