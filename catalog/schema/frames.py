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
from collections.abc import Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from catalog.errors import ValidationError
from catalog.schema.features import Feature

BATCH = 65536  # rows per batch taken from a large table: bounds the Python objects alive at once
BATCH_BYTES = 7 << 20  # and the bytes of a dict's array columns per batch (tensors: see _dict_batches)
# and its values, a feature a value (100 scalar features: 5,242 rows): a wide table's batches
# small enough that the statistics helper tallies one while the next is encoded
BATCH_VALUES = 1 << 19
Columns = dict[str, list[Any]]


class ColumnBatch(dict[str, list[Any]]):
    """A batch's columns as the encoders take them, and ``arrays``: the 1-D NumPy arrays of
    numbers some of them were made from (``tolist``), for the statistics to take as they are
    (stats.columns) instead of making arrays of the lists again."""

    def __init__(self, columns: Columns, arrays: dict[str, np.ndarray]) -> None:
        super().__init__(columns)
        self.arrays = arrays


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
    """A dict of columns in batches of at most BATCH rows, BATCH_VALUES values and about
    BATCH_BYTES of array data: a batch is encoded and written before the next is encoded, so a
    large table's records are never all alive at once, and the statistics of one batch (on a
    thread, or in the statistics helper process) overlap the encoding of the next instead of
    all waiting at the end."""
    numbers: dict[str, np.ndarray] = {}
    columns, n = _dict_of_columns(obj, arrays, numbers)
    by_bytes = BATCH_BYTES // max(sum(map(_row_bytes, columns.values())), 1)
    step = max(1, min(BATCH, by_bytes, BATCH_VALUES // max(len(columns), 1)))
    if n <= step:
        yield ColumnBatch(columns, numbers), n
        return
    for lo in range(0, n, step):
        part = ColumnBatch({name: c[lo : lo + step] for name, c in columns.items()},
                           {name: a[lo : lo + step] for name, a in numbers.items()})  # fmt: skip
        yield part, min(step, n - lo)


def _numbers(col: Any) -> bool:
    """A 1-D NumPy array of numbers (given to the encoders as a list: see _dict_of_columns)."""
    return isinstance(col, np.ndarray) and col.ndim == 1 and col.dtype.kind in "biuf"


def _row_bytes(column: Any) -> int:
    """About the bytes of a row of ``column`` that are arrays (tensors): an array's rows, or a
    list's first value when it is an array (images given one array a row)."""
    if isinstance(column, np.ndarray):
        return column.nbytes // max(len(column), 1) if column.ndim > 1 else 0
    return column[0].nbytes if column and isinstance(column[0], np.ndarray) else 0


def _dict_of_columns(obj: Mapping[Any, Any], arrays: bool, numbers: dict[str, np.ndarray]) -> tuple[Columns, int]:
    """The columns as lists (and tensors' arrays; with ``arrays``, the 1-D arrays the encoders
    take as they are: kept_array), and into ``numbers`` the 1-D arrays of numbers made lists
    (ColumnBatch). ``obj`` is read once: a Mapping may load its values on access."""
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
                columns[name] = python_values(col)
                if _numbers(col):
                    numbers[name] = col
        elif isinstance(col, (list, tuple)):
            columns[name] = list(col)
        else:
            raise ValidationError(
                f"a dict of columns holds a list or array per feature, got {type(col).__name__}",
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
    return {name: python_values(c) for name, c in columns.items()}


def python_values(column: Any) -> Any:
    """A 1-D array's values as a list of Python values (numbers as Python numbers, the
    encoders' fast path); anything else as it is."""
    if not isinstance(column, np.ndarray) or column.ndim != 1:
        return column
    return column.tolist() if column.dtype.kind in "biuf" else list(column)


def batch_rows(columns: Mapping[str, np.ndarray], n: int) -> list[dict[str, Any]]:
    """The ``n`` rows of a decoded batch as ``Schema.decode`` gives each record: numbers as
    Python numbers, each array its own (a view would keep the whole batch alive), the rest
    (text, bytes, lists, None) as the column holds them."""
    if not columns:
        return [{} for _ in range(n)]
    names, values = list(columns), [_row_values(c) for c in columns.values()]
    return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]


def rows_columns(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> Columns:
    """``batch_rows`` the other way: rows as a column a name (None where a row lacks one). One
    C-level pick a row and a zip, not a ``dict.get`` a value: on 100 features this was a third
    of what statistics added to a row-level migration."""
    try:
        return _picked(rows, names)
    except KeyError:  # a row without an optional feature: the general path gives it None
        return {name: [row.get(name) for row in rows] for name in names}


def exact_columns(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> Columns | None:
    """``rows_columns`` of rows that are each a dict whose keys are exactly ``names`` (the
    columns then hold every value the rows held); None for any other rows."""
    if not names or any(type(row) is not dict or len(row) != len(names) for row in rows):
        return None
    try:  # (a row of the right length with another key lacks one of ``names``)
        return _picked(rows, names)
    except KeyError:
        return None


def _picked(rows: Sequence[Mapping[str, Any]], names: Sequence[str]) -> Columns:
    """Each of ``names`` as a column of the rows' values; a KeyError for a row without one."""
    if len(names) < 2 or not rows:  # (itemgetter of one name gives no tuple; of none, nothing)
        return {name: [row[name] for row in rows] for name in names}
    picked = list(map(itemgetter(*names), rows))
    return {name: list(column) for name, column in zip(names, zip(*picked, strict=True), strict=True)}


def _row_values(column: np.ndarray) -> list[Any]:
    if column.ndim > 1:  # a fixed shape: each row's array copied out
        return [a.copy() for a in column]
    if column.dtype != object:
        return column.tolist()
    # arrays of their own sizes: views of the batch's one buffer, copied
    return [v.copy() if isinstance(v, np.ndarray) and v.base is not None else v for v in column]


def _pandas(df: Any, features: Mapping[str, Feature]) -> Iterator[tuple[Columns, int]]:
    if df.columns.has_duplicates:
        dup = df.columns[df.columns.duplicated()][0]
        raise ValidationError("the DataFrame has two columns of this name", str(dup))
    for lo in range(0, len(df), BATCH):
        part = df.iloc[lo : lo + BATCH]
        columns, arrays = {}, {}
        for name in part.columns:
            series, feat = part[name], features.get(str(name))
            columns[str(name)] = _series(series, feat)
            values = series.to_numpy() if isinstance(series.dtype, np.dtype) else None
            if values is not None and _numbers(values) and (values.dtype.kind != "f" or _kept_floats(feat)):
                arrays[str(name)] = values  # the numbers _series gave as they are (see ColumnBatch)
        yield ColumnBatch(columns, arrays), len(part)


def _kept_floats(feat: Feature | None) -> bool:
    """Whether _series gives a float column's values as they are (NaN a value) for ``feat``."""
    return feat is None or feat.tensor or feat.dtype == "float32"


def _series(s: Any, feat: Feature | None) -> list[Any]:
    """One pandas column as Python values, None where missing (see the module's rules)."""
    dtype = s.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biu":
        return list(s.to_numpy().tolist())
    if isinstance(dtype, np.dtype) and dtype.kind == "f":
        values = s.to_numpy().tolist()
        if _kept_floats(feat):
            return list(values)
        return [None if math.isnan(v) else int(v) if v.is_integer() else v for v in values]
    return list(s.to_numpy(dtype=object, na_value=None).tolist())
