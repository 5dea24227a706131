"""Rows as JSON, per schema: what ``catalog cat`` prints and JSON Lines appends read.

Scalars as JSON scalars, fixed and variable lengths as (nested) arrays, ``string`` as
text, ``bytes`` as base64 text, float32 in its shortest round-trip form, NaN and the
infinities as the strings "NaN", "Infinity", "-Infinity", a complex number as the pair
``[real, imag]``, and ``null`` for an absent optional feature. A tensor whose shape its
nested arrays cannot show (an empty one of shape ``[0, 3]``) is the object
``{"shape": [0, 3], "values": []}``. The two directions are inverse, so ``catalog cat``
output can be appended again.
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

import numpy as np

from catalog.errors import ValidationError
from catalog.schema.features import Feature
from catalog.schema.model import Schema
from catalog.words import counted

_FLOAT32_PARTS = (np.dtype(np.float32), np.dtype("<c8"))  # values with float32 parts: shortest float32 digits
_SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def float32_json(v: float) -> float | str:
    """A float32 value in JSON: its shortest digits, or "NaN", "Infinity", "-Infinity"."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return float(str(np.float32(v)))  # float32's shortest digits that read back to the same value


def _value_to_json(feat: Feature, value: Any) -> Any:
    if isinstance(value, np.ndarray):
        nested = value.tolist()
        if feat.tensor and value.size == 0 and np.shape(nested) != value.shape:
            return {"shape": list(value.shape), "values": []}  # [] alone would lose the inner dimensions
        value = nested
    if isinstance(value, complex):
        return [_value_to_json(feat, value.real), _value_to_json(feat, value.imag)]
    if isinstance(value, list):
        return [_value_to_json(feat, v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, float) and feat.np_dtype in _FLOAT32_PARTS:
        return float32_json(value)
    if isinstance(value, float) and not math.isfinite(value):
        return float32_json(value)
    return value


def row_to_json(schema: Schema, row: dict[str, Any]) -> dict[str, Any]:
    """A row (all of the schema's features, or some: a reader's columns) in JSON's terms."""
    feats = schema.all_features
    return {name: _value_to_json(feats[name], value) for name, value in row.items()}


def folded_bytes(value: bytes) -> str:
    """Bytes too long to show a person, as their size and first four bytes: ``<bytes 1,717: 89504e47…>``."""
    return f"<bytes {len(value):,}: {value[:4].hex()}…>"


TENSOR_SHOWN = 8  # values of a folded tensor shown before the ellipsis


def folded_value(value: bytes | np.ndarray) -> str:
    """Bytes or an array too long to show a person, on one line: ``<bytes 1,717: 89504e47…>``,
    ``<uint8[32,32,3]: 12, 40, …>`` (`catalog cat` on a terminal, the viewer)."""
    if isinstance(value, bytes):
        return folded_bytes(value)
    head = ", ".join(str(v) for v in value.reshape(-1)[:TENSOR_SHOWN].tolist())
    shape = ",".join(map(str, value.shape))
    return f"<{value.dtype}[{shape}]: {head}, …>"


def class_name(feat: Feature, value: Any) -> str | None:
    """The class name of a label ``value`` (a feature with ``names``), None when it has none."""
    names = feat.names
    if names and isinstance(value, int | np.integer) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[int(value)]
    return None


def value_from_json(feat: Feature, value: Any) -> Any:
    if feat.tensor and isinstance(value, dict) and set(value) == {"shape", "values"}:
        return _shaped(feat, value["shape"], value_from_json(feat, value["values"]))
    if isinstance(value, list):
        if feat.np_dtype.kind == "c" and len(value) == 2 and not any(isinstance(v, list) for v in value):
            real, imag = (value_from_json(feat, v) for v in value)
            return complex(real, imag) if _is_number(real) and _is_number(imag) else [real, imag]
        return [value_from_json(feat, v) for v in value]
    if isinstance(value, str):
        if feat.dtype == "bytes":
            try:
                return base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError) as e:
                raise ValidationError("bytes are written as base64 text in JSON; this is not base64", feat.name) from e
        if feat.np_dtype.kind in "fc" and value in _SPECIAL:
            return _SPECIAL[value]
    return value


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _shaped(feat: Feature, shape: Any, values: Any) -> np.ndarray:
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        raise ValidationError('a tensor\'s {"shape", "values"} form needs a list of integers as shape', feat.name)
    arr = np.asarray(values)
    if arr.size != math.prod(shape) or any(d < 0 for d in shape):
        do = "does" if arr.size == 1 else "do"
        raise ValidationError(f"{counted(arr.size, 'value')} {do} not fill shape {shape}", feat.name)
    return arr.reshape(shape)


def row_from_json(schema: Schema, obj: Any) -> dict[str, Any]:
    """Undo :func:`row_to_json` (base64 bytes, "NaN" strings); unknown keys pass through to validation."""
    if not isinstance(obj, dict):
        raise ValidationError(f"a JSON row is an object, got {type(obj).__name__}")
    feats = schema.all_features
    return {k: value_from_json(feats[k], v) if k in feats else v for k, v in obj.items()}
