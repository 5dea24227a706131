"""A batch of rows given as columns, as the statistics' decoded columns, without decoding the
records the encoder just wrote.

``Schema.encode_columns`` hands over each feature's input column and its encoded map entries.
A column of plain numbers or texts becomes its decoded column directly (the same values
decoding gives: the encoder accepted every one of them, so they are in range); any other
feature (lists, tensors, bytes, optional features, columns with a missing value) is decoded
from its own entries alone, each row's framed as a one-feature Example. Either way the
columns are those decoding the records gives (tests/stats/test_stats.py holds the statistics of a
batch equal both ways); what is saved is decoding the rest of every record a second time.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from catalog.schema import Feature, Schema
from catalog.tfrecord import example as wire

_F64_EXACT = 1 << 53  # integers a float64 holds exactly


def decoded_columns(
    schema: Schema,
    columns: Mapping[str, Sequence[Any]],
    n: int,
    filled: Mapping[str, list[int]],
    entries: Mapping[str, Sequence[bytes]],
    skip: Collection[str] = (),
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None:
    """The columns ``Schema.decode_batch`` would give for the ``n`` records encoded from
    ``columns``, and per feature the rows its writer filled from the default (counted as
    filled, as a decoded record's absent feature is); None when a feature is neither taken
    directly nor has its ``entries``. Features in ``skip`` (whose statistics the tally was
    given whole) are left out."""
    out: dict[str, np.ndarray] = {}
    rest: list[Feature] = []
    arrays: Mapping[str, np.ndarray] = getattr(columns, "arrays", {})  # (frames.ColumnBatch)
    for name, feat in schema.all_features.items():
        if name in skip:
            continue
        column: Any = columns.get(name)
        array = arrays.get(name)
        if array is not None and feat.is_scalar and not feat.tensor and len(array) == n:
            column = array  # the numbers the list was made of: the same checks, no list made an array
        if column is None or filled.get(name):
            direct = None
        else:
            direct = _steps(feat, column) if name in schema.sequence else _direct(feat, column)
        if direct is None:
            rest.append(feat)
        else:
            out[name] = direct
    if rest and any(f.name not in entries for f in rest):
        return None  # (a SequenceExample's entries are not kept: its records are decoded instead)
    if rest:
        frame = wire.features_field
        parts = [entries[f.name] for f in rest]
        out.update(Schema(rest).decode_batch([frame(b"".join(row)) for row in zip(*parts, strict=True)]))
    absent = {}
    for name, rows in filled.items():
        if rows:
            mask = absent[name] = np.zeros(n, dtype=bool)
            mask[rows] = True
    return out, absent


def _direct(feat: Feature, column: Sequence[Any]) -> np.ndarray | None:
    """``column`` as decoding gives it, for a scalar int64, float32, string or bytes feature
    whose values are all plain numbers, texts or bytes, or a fixed-shape tensor feature given one array of
    its dtype; None otherwise (decode it)."""
    if feat.optional:
        return None
    if feat.tensor:
        if feat.stores_shape:
            return None
        if not isinstance(column, np.ndarray):
            return _stacked(feat, column)
        return column if column.dtype == feat.np_dtype and column.shape[1:] == feat.shape else None
    if feat.is_varlen and feat.dtype == "int64":
        return _rows(column, {list, tuple, np.ndarray})
    if feat.is_varlen and feat.dtype == "float32":  # float32 arrays alone: the encoder rounds others
        return _float32_rows(column)
    if not feat.is_scalar:
        return None
    if feat.dtype in ("string", "bytes"):  # (bytes stored as given: an image's file too)
        return _rows(column, {str} if feat.dtype == "string" else {bytes})
    if feat.dtype not in ("int64", "float32"):
        return None
    try:
        arr = np.asarray(column)
    except (ValueError, TypeError, OverflowError):
        return None
    if arr.ndim != 1 or arr.dtype.kind not in "biuf" or arr.dtype.itemsize > 8:
        return None  # (a long double: the encoder rounds it to float64 first, NumPy straight to float32)
    if feat.dtype == "int64":  # (a uint64 array: values past int64 are refused, but checked here)
        small = arr.dtype.kind in "bi" or (arr.dtype.kind == "u" and arr.dtype.itemsize < 8)
        return arr.astype(np.int64) if small else None
    if arr.dtype.kind != "f" and arr.size and int(np.abs(arr).max()) > _F64_EXACT:
        return None  # the encoder rounds such an integer twice (to float64, then float32), NumPy once
    return arr.astype(np.float32)


def _steps(feat: Feature, column: Sequence[Any]) -> np.ndarray | None:
    """A sequence feature's column as decoding gives it (each row's steps as one array) when
    every row is an array of the feature's dtype and step shape, a number a step or fixed-size
    steps; None otherwise (decode the records)."""
    if feat.dtype not in ("int64", "float32") or None in feat.shape or feat.tensor:
        return None
    want = np.dtype(feat.np_dtype)
    for row in column:
        if type(row) is not np.ndarray or row.dtype != want or row.shape[1:] != feat.shape:
            return None
    return np.fromiter(column, dtype=object, count=len(column))


def _stacked(feat: Feature, column: Sequence[Any]) -> np.ndarray | None:
    """A fixed-shape tensor feature's column given an array a row (a migration's decoded rows)
    as one array, when every row is an array of the feature's dtype and shape."""
    want = np.dtype(feat.np_dtype)
    for row in column:
        if type(row) is not np.ndarray or row.dtype != want or row.shape != feat.shape:
            return None
    return np.stack(column) if len(column) else None


def _float32_rows(column: Sequence[Any]) -> np.ndarray | None:
    """A float32 list feature's column as an object array when every value is a 1-D float32
    array (a migration's decoded rows, or an append's arrays): the values decoding gives."""
    for row in column:
        if type(row) is not np.ndarray or row.dtype != np.float32 or row.ndim != 1:
            return None
    return np.fromiter(column, dtype=object, count=len(column))


def _rows(column: Sequence[Any], kinds: set[type]) -> np.ndarray | None:
    """``column`` as an object array when each value's type is one of ``kinds`` (exactly):
    texts as they are; int64 lists as given, which the tally flattens to the integers decoding
    gives (the encoder took only integers in int64's range, in 1-D lists or arrays)."""
    if not set(map(type, column)) <= kinds:
        return None
    return np.fromiter(column, dtype=object, count=len(column))  # a list a row: never broadcast
