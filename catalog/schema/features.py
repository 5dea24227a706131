"""One feature of a schema: its declaration, the rules its values follow, and their checks.

A feature is declared in a schema's JSON form (see ``model.py``) with a dtype, a shape and
optionally a default, ``"optional"`` or ``"encoding": "tensor"``. :func:`parse_feature`
turns that declaration into an immutable :class:`Feature`; :func:`convert` checks one row
value against it and returns its normalised form, which every encoder writes. These are the
rules; the codecs above only make the common cases fast.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from catalog.errors import SchemaError, ValidationError
from catalog.tfrecord import example as wire

LIST_DTYPES = ("int64", "float32", "string", "bytes")
FEATURE_KEYS = {"dtype", "shape", "default", "optional", "encoding", "description", "names", "format", "checks"}
# What new data of a feature must meet (`append --check`, catalog.stats.drift): the share of
# records without a value, the L-infinity distance to the data there, and the value range.
CHECK_KEYS = ("max_missing", "linf", "min", "max")
IMAGE_FORMATS = ("png", "jpeg", "gif", "bmp", "webp")
MAX_NAMES = 1 << 20
SHAPE_SUFFIX = "/shape"
_WIRE_KIND = {"int64": wire.INT64, "float32": wire.FLOAT, "string": wire.BYTES, "bytes": wire.BYTES}
_NUMPY_DTYPE: dict[str, np.dtype[Any]] = {"int64": np.dtype(np.int64), "float32": np.dtype(np.float32)}
_ZEROS = {"int64": 0, "float32": 0.0, "string": "", "bytes": b""}
_BUILD: dict[str, Callable[[Any], bytes]] = {
    wire.INT64: wire.int64_feature,
    wire.FLOAT: wire.float_feature,
    wire.BYTES: wire.bytes_feature,
}
# What a schema may declare. A record is one protobuf message (under 2 GiB), so no feature
# holds more than 2^27 values (512 MiB of float32); a default is filled in memory and kept
# in full in the manifest's schema JSON, so it fills at most 2^20 values.
MAX_RANK = 32
MAX_VALUES = 1 << 27
MAX_DEFAULT_VALUES = 1 << 20
MAX_SCHEMA_BYTES = 16 << 20


@dataclass(frozen=True)
class Feature:
    """One feature of a schema (immutable; built by :func:`parse_feature`)."""

    name: str
    dtype: str
    shape: tuple[int | None, ...] = ()
    tensor: bool = False
    default: Any = None
    has_default: bool = False
    description: str = ""
    optional: bool = False  # may be absent, with no default: None in a row
    # Metadata, which changes no value: class names of an int64 label (value i is names[i]),
    # and, for ``"encoding": "image"`` (a bytes scalar: one encoded image file), its format
    # and the decoded image's shape (HxWxC, dimensions may be unknown), written as "shape".
    names: tuple[str, ...] | None = None
    image: bool = False
    image_format: str | None = None
    image_shape: tuple[int | None, ...] | None = None
    checks: tuple[tuple[str, float], ...] | None = None  # thresholds for new data, in CHECK_KEYS order

    @property
    def may_be_absent(self) -> bool:
        return self.has_default or self.optional

    # ---- class labels (a feature with ``names``), as TFDS's ClassLabel: values stay ints
    @property
    def num_classes(self) -> int | None:
        """How many classes a label has (None: the feature has no class names)."""
        return None if self.names is None else len(self.names)

    def int2str(self, value: int) -> str:
        """The class name of label ``value``."""
        names = self._class_names()
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            if 0 <= value < len(names):
                return names[int(value)]
            raise ValidationError(f"no class {value}: the classes are 0 to {len(names) - 1}", self.name)
        raise ValidationError(f"a class label is an integer, got {type(value).__name__} {value!r:.40}", self.name)

    def str2int(self, name: str) -> int:
        """The label value of class ``name``."""
        names = self._class_names()
        try:
            return names.index(name)
        except ValueError:
            listed = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
            raise ValidationError(f"no class {name!r:.60} (the classes are {listed})", self.name) from None

    def _class_names(self) -> tuple[str, ...]:
        if self.names is None:
            raise ValidationError('has no class names (a label\'s schema lists them as "names")', self.name)
        return self.names

    @property
    def is_scalar(self) -> bool:
        return self.shape == ()

    @property
    def is_varlen(self) -> bool:
        return not self.tensor and self.shape == (None,)

    @property
    def size(self) -> int | None:
        """Number of values for fixed shapes, None when a dimension is unknown."""
        if any(d is None for d in self.shape):
            return None
        return math.prod(self.shape)  # type: ignore[arg-type]

    @property
    def np_dtype(self) -> np.dtype[Any]:
        if self.tensor:
            return np.dtype(self.dtype).newbyteorder("<")
        return _NUMPY_DTYPE.get(self.dtype, np.dtype(object))

    @property
    def wire_kind(self) -> str:
        return wire.BYTES if self.tensor else _WIRE_KIND[self.dtype]

    @property
    def stores_shape(self) -> bool:
        return self.tensor and self.size is None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dtype": self.dtype}
        if self.shape:
            out["shape"] = list(self.shape)
        if self.tensor:
            out["encoding"] = "tensor"
        if self.image:
            out["encoding"] = "image"
            if self.image_format:
                out["format"] = self.image_format
            if self.image_shape is not None:
                out["shape"] = list(self.image_shape)
        if self.names is not None:
            out["names"] = list(self.names)
        if self.has_default:
            out["default"] = default_as_json(self.default)
        if self.optional:
            out["optional"] = True
        if self.description:
            out["description"] = self.description
        if self.checks is not None:
            out["checks"] = dict(self.checks)
        return out


def same_declaration(a: Feature, b: Feature) -> bool:
    """Whether two features are declared alike, whatever their names: their JSON forms (the
    dataclasses' own comparison raises on a tensor's default, an array)."""
    return a.to_json() == b.to_json()


def zero(dtype: str) -> Any:
    """The zero of a list feature's dtype (0, 0.0, "" or b""): what pads a list cut to a shape."""
    return _ZEROS[dtype]


def default_as_json(value: Any) -> Any:
    """A feature's default (or any value of it) in the schema's JSON form: an array as nested
    lists, bytes as text (JSON has no bytes)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="backslashreplace")
    return value


# --------------------------------------------------------------------------- parsing


def _parse_shape(name: str, raw: Any, tensor: bool) -> tuple[int | None, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SchemaError(f"shape must be a list, got {raw!r}", name)
    dims: list[int | None] = []
    for d in raw:
        if d is None:
            dims.append(None)
        elif isinstance(d, int) and not isinstance(d, bool) and d >= 0:
            dims.append(d)
        else:
            raise SchemaError(f"shape dimensions must be non-negative integers or null, got {d!r}", name)
    if not tensor and None in dims and dims != [None]:
        raise SchemaError("a list feature's shape is [k, ...] (fixed) or [null] (variable length)", name)
    if len(dims) > MAX_RANK:
        raise SchemaError(f"shape has {len(dims)} dimensions; at most {MAX_RANK}", name)
    known = [d for d in dims if d is not None]
    if any(d > MAX_VALUES for d in known) and 0 in known:  # no values, but no sane shape either
        raise SchemaError(f"shape dimension {max(known)} is larger than {MAX_VALUES:,}", name)
    values = math.prod(known)
    if values > MAX_VALUES:
        declared = f"shape {_shape_text(tuple(dims))} declares {values:,} values"
        raise SchemaError(f"{declared}; at most {MAX_VALUES:,} per feature", name)
    return tuple(dims)


def _parse_dtype(name: str, raw: Any, tensor: bool) -> str:
    if not isinstance(raw, str):
        raise SchemaError(f"dtype must be a string, got {raw!r}", name)
    if not tensor:
        if raw not in LIST_DTYPES:
            raise SchemaError(
                f"unknown dtype {raw!r}: use int64, float32, string or bytes (other numpy dtypes need "
                '"encoding": "tensor")',
                name,
            )
        return raw
    try:
        dt = np.dtype(raw)
    except TypeError as e:
        raise SchemaError(f"unknown numpy dtype {raw!r}", name) from e
    if dt.kind not in "biufc" or dt.itemsize == 0:
        raise SchemaError(f"a tensor needs a fixed-size numeric dtype, not {raw!r}", name)
    return dt.name


def is_utf8(v: bytes | str) -> bool:
    """Whether ``v`` is UTF-8 text: stored bytes that decode (inference: a bytes_list of text
    is a string feature), or a str that encodes (not one holding a lone surrogate, JSON's "\\ud800")."""
    try:
        v.encode("utf-8") if isinstance(v, str) else v.decode("utf-8")
    except UnicodeError:  # the decode's or the encode's
        return False
    return True


class ListTally:
    """What inference saw of one list feature (an Example's, or a feature list's steps): wire
    kinds, value counts, how often it was there, whether its bytes were all UTF-8 text."""

    def __init__(self) -> None:
        self.kinds: set[str] = set()
        self.counts: set[int] = set()
        self.present = 0
        self.utf8 = True

    def add(self, kind: str | None, values: list[Any]) -> None:
        self.present += 1
        self.counts.add(len(values))
        if kind is not None:
            self.kinds.add(kind)
        if kind == wire.BYTES and self.utf8:
            self.utf8 = all(map(is_utf8, values))

    def feature(self, name: str, optional: bool = False, what: str = "stored") -> Feature:
        """The feature these values make: dtype from the wire kind (an empty list's kept; bytes
        of text are a string), shape from the counts (one count k: ``[k]``, 1 a scalar; else
        ``[null]``). Never a made-up default: ``optional`` when it was missing somewhere."""
        if len(self.kinds) > 1:
            raise SchemaError(f"{what} with different kinds across records: {sorted(self.kinds)}", name)
        kind = next(iter(self.kinds)) if self.kinds else wire.BYTES  # only decoded dicts lose an empty list's kind
        dtype = {wire.INT64: "int64", wire.FLOAT: "float32"}.get(kind, "string" if self.utf8 else "bytes")
        shape: tuple[int | None, ...] = (None,)
        if len(self.counts) == 1:
            k = next(iter(self.counts))
            shape = () if k == 1 else (k,)
        return Feature(name, dtype, shape, optional=optional)


def list_feature_bytes(feat: Feature, value: Any) -> bytes:
    """A list feature's value, checked (:func:`convert`), as a serialized ``Feature`` message:
    the general path of every list encoder, and one step of a feature list."""
    v = convert(feat, value)
    values = [v] if feat.is_scalar else v
    if feat.dtype == "string":
        values = [s.encode("utf-8") for s in values]
    return _BUILD[feat.wire_kind](values)


def check_feature_name(name: Any) -> None:
    """A feature's name: a non-empty string UTF-8 can hold (the manifest stores it so)."""
    if not isinstance(name, str) or not name:
        raise SchemaError(f"feature names must be non-empty strings, got {name!r}")
    if not is_utf8(name):
        raise SchemaError(f"feature names must be UTF-8 text, got {name!r}")


def parse_feature(name: str, raw: Any) -> Feature:
    check_feature_name(name)
    if not isinstance(raw, dict):
        raise SchemaError(f"a feature is an object like {{'dtype': 'int64'}}, got {raw!r}", name)
    unknown = set(raw) - FEATURE_KEYS
    if unknown:
        raise SchemaError(f"unknown key(s) {sorted(unknown)}; allowed: {sorted(FEATURE_KEYS)}", name)
    if "dtype" not in raw:
        raise SchemaError("missing 'dtype'", name)
    encoding = raw.get("encoding")
    if encoding not in (None, "tensor", "image"):
        raise SchemaError(f"unknown encoding {encoding!r}: 'tensor' or 'image'", name)
    tensor = encoding == "tensor"
    dtype = _parse_dtype(name, raw["dtype"], tensor)
    image = _parse_image(name, raw, dtype) if encoding == "image" else {}
    if "format" in raw and not image:
        raise SchemaError('"format" describes an encoded image: it needs "encoding": "image"', name)
    shape = () if image else _parse_shape(name, raw.get("shape"), tensor)
    names = _parse_names(name, raw["names"], dtype, shape, tensor) if "names" in raw else None
    description = raw.get("description", "")
    if not isinstance(description, str):
        raise SchemaError("description must be a string", name)
    if not is_utf8(description):
        raise SchemaError("description must be UTF-8 text", name)
    optional = raw.get("optional", False)
    if not isinstance(optional, bool):
        raise SchemaError(f"optional must be true or false, got {optional!r}", name)
    if optional and "default" in raw:
        raise SchemaError('a feature with a default is optional already: give "default" or "optional", not both', name)
    checks = _parse_checks(name, raw["checks"]) if "checks" in raw else None
    meta: dict[str, Any] = {"names": names, "checks": checks, **image}
    feat = Feature(name, dtype, shape, tensor, description=description, optional=optional, **meta)
    if "default" in raw:
        feat = Feature(name, dtype, shape, tensor, _check_default(feat, raw["default"]), True, description, **meta)
    return feat


def _parse_checks(name: str, raw: Any) -> tuple[tuple[str, float], ...]:
    """``"checks"``: thresholds new data must meet; rates and distances between 0 and 1."""
    if not isinstance(raw, dict) or not raw:
        raise SchemaError(f'"checks" maps some of {", ".join(CHECK_KEYS)} to numbers', name)
    unknown = sorted(set(raw) - set(CHECK_KEYS))
    if unknown:
        raise SchemaError(f"unknown check(s) {unknown}; allowed: {', '.join(CHECK_KEYS)}", name)
    out = []
    for key in CHECK_KEYS:
        if key not in raw:
            continue
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SchemaError(f'check "{key}" must be a finite number, got {value!r}', name)
        if key in ("max_missing", "linf") and not 0 <= value <= 1:
            raise SchemaError(f'check "{key}" is a share between 0 and 1, got {value!r}', name)
        out.append((key, float(value)))
    if "min" in raw and "max" in raw and raw["min"] > raw["max"]:
        raise SchemaError(f'check "min" ({raw["min"]}) is above "max" ({raw["max"]})', name)
    return tuple(out)


def _parse_names(name: str, raw: Any, dtype: str, shape: tuple[int | None, ...], tensor: bool) -> tuple[str, ...]:
    """Class names of a label feature: distinct non-empty strings, value i naming names[i]."""
    if dtype != "int64" or tensor:
        raise SchemaError('"names" are class names of an int64 label feature', name)
    if not isinstance(raw, list) or not all(isinstance(n, str) and n and is_utf8(n) for n in raw):
        raise SchemaError('"names" is a list of non-empty strings', name)
    if len(set(raw)) != len(raw):
        dup = next(n for i, n in enumerate(raw) if n in raw[:i])
        raise SchemaError(f'"names" lists {dup!r} twice', name)
    if len(raw) > MAX_NAMES:
        raise SchemaError(f'"names" lists {len(raw):,} names; at most {MAX_NAMES:,}', name)
    return tuple(raw)


def _parse_image(name: str, raw: dict[str, Any], dtype: str) -> dict[str, Any]:
    """``"encoding": "image"``: a bytes scalar holding an encoded image file; its "format" and
    "shape" (the decoded image's, [H, W, C] with unknown dimensions null) are metadata."""
    if dtype != "bytes":
        raise SchemaError('an "encoding": "image" feature holds the encoded file: dtype bytes', name)
    fmt = raw.get("format")
    if fmt is not None and fmt not in IMAGE_FORMATS:
        raise SchemaError(f"unknown image format {fmt!r}: one of {', '.join(IMAGE_FORMATS)}", name)
    shape = raw.get("shape")
    if shape is not None:
        dims = _parse_shape(name, shape, True)
        if len(dims) not in (2, 3):
            raise SchemaError("an image's shape is [height, width] or [height, width, channels]", name)
        shape = dims
    return {"image": True, "image_format": fmt, "image_shape": shape}


def _check_default(feat: Feature, raw: Any) -> Any:
    if feat.tensor and feat.size is None:
        raise SchemaError("a tensor with unknown dimensions cannot have a default", feat.name)
    filled = len(raw) if feat.is_varlen and isinstance(raw, list) else (feat.size or 1)
    if filled > MAX_DEFAULT_VALUES:
        raise SchemaError(f"a default fills {filled:,} values; at most {MAX_DEFAULT_VALUES:,}", feat.name)
    try:
        if feat.dtype == "bytes" and isinstance(raw, str):
            raw = _scalar(Feature(feat.name, "string"), raw).encode("utf-8")  # JSON has no bytes: written as text
        if feat.is_scalar and not feat.tensor:
            return _scalar(feat, raw)
        if feat.is_varlen:
            if not isinstance(raw, list):
                raise ValidationError("the default of a variable-length feature is a list", feat.name)
            return convert(feat, raw)
        if isinstance(raw, (int, float, str, bytes)) and not isinstance(raw, bool):
            raw = np.full(tuple(d or 0 for d in feat.shape), raw).tolist()  # a scalar fills the shape, as in TF
        return convert(feat, raw)
    except ValidationError as e:  # (its reason alone: this error names the feature already)
        raise SchemaError(f"bad default: {e.reason}", feat.name) from e


# --------------------------------------------------------------------------- values


def _scalar(feat: Feature, v: Any) -> Any:
    """Check and normalise one value of a list feature to int, float, str or bytes."""
    dtype = feat.dtype
    if dtype == "int64":
        if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            iv = int(v)
            if not wire.INT64_MIN <= iv <= wire.INT64_MAX:
                raise ValidationError(f"integer {iv} is out of int64 range", feat.name)
            return iv
        if feat.names is not None and isinstance(v, (str, np.str_)):
            return feat.str2int(str(v))  # a class name where its number is stored
        raise ValidationError(f"expected int64, got {type(v).__name__} {v!r:.40}", feat.name)  # bool too
    if dtype == "float32":
        if isinstance(v, (float, int, np.floating, np.integer)) and not isinstance(v, (bool, np.bool_)):
            try:
                fv = float(v)
            except OverflowError:  # an int beyond float64
                raise ValidationError(f"integer {v!r:.40} is out of float32 range", feat.name) from None
            # infinity itself is a value; a finite number that rounds to it (a long double too) is not
            if abs(fv) >= wire.FLOAT32_OVERFLOW and not (math.isinf(fv) and bool(np.isinf(v))):
                shown = fv if math.isfinite(fv) else v
                raise ValidationError(f"float {shown!r:.40} is out of float32 range", feat.name)
            return fv
        raise ValidationError(f"expected float32, got {type(v).__name__} {v!r:.40}", feat.name)
    if dtype == "string":
        if isinstance(v, str):
            if not v.isascii() and not is_utf8(v):
                at = next(i for i, c in enumerate(v) if "\ud800" <= c <= "\udfff")
                raise ValidationError(f"not encodable as UTF-8: lone surrogate {v[at]!r} at character {at}", feat.name)
            return v
        if isinstance(v, (bytes, np.bytes_)):
            try:
                return bytes(v).decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValidationError(f"not valid UTF-8 text at byte {e.start}", feat.name) from e
        raise ValidationError(f"expected string, got {type(v).__name__}", feat.name)
    if isinstance(v, (bytes, bytearray, memoryview, np.bytes_)):
        return bytes(v)
    raise ValidationError(f"expected bytes, got {type(v).__name__}", feat.name)


def _flat(feat: Feature, value: Any) -> list[Any]:
    """Flatten a list feature's value and check its shape."""
    if isinstance(value, np.ndarray):
        shape = value.shape
        items = value.reshape(-1).tolist()
    elif isinstance(value, (list, tuple)):
        if value and isinstance(value[0], (list, tuple, np.ndarray)):
            arr = np.asarray(value, dtype=object)
            shape, items = arr.shape, arr.reshape(-1).tolist()
        else:
            shape, items = (len(value),), list(value)
    else:
        raise ValidationError(f"expected a list or array, got {type(value).__name__}", feat.name)
    if feat.is_varlen:
        if len(shape) != 1:
            raise ValidationError(f"expected a 1-D list, got shape {list(shape)}", feat.name)
    elif tuple(shape) != feat.shape and not (len(shape) == 1 and shape[0] == feat.size):
        raise ValidationError(f"expected shape {list(feat.shape)}, got {list(shape)}", feat.name)
    return items


def convert(feat: Feature, value: Any) -> Any:
    """Validate a row value; return its normalised form (scalar, list or ndarray)."""
    if feat.tensor:
        return _tensor(feat, value)
    if feat.is_scalar:
        if isinstance(value, np.ndarray) and value.ndim == 0:  # a 0-d array: its one value
            value = value[()]
        elif isinstance(value, (list, tuple, np.ndarray)):
            if len(value) != 1:
                raise ValidationError(f"expected one value, got {len(value)}", feat.name)
            value = value[0]
        return _scalar(feat, value)
    return [_scalar(feat, v) for v in _flat(feat, value)]


def _tensor(feat: Feature, value: Any) -> np.ndarray:
    target = feat.np_dtype
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as e:
        raise ValidationError(f"not an array: {e}", feat.name) from e
    if arr.dtype.kind == "f" and target.kind in "iu" and not isinstance(value, np.ndarray):
        arr = _exact_ints(feat, arr, value)
    src = arr.dtype
    if arr.size == 0:
        return _tensor_shape_checked(feat, arr).astype(target)  # no value to lose ([] reads as float64)
    if src.kind == "b" and target.kind != "b":  # true is not 1, as in list features
        raise ValidationError(f"cannot store bool as {target.name}", feat.name)
    if src != target and not np.can_cast(src, target, "safe"):
        if src.kind in "iu" and target.kind in "iu" and arr.size:
            info = np.iinfo(target)
            if arr.min() < info.min or arr.max() > info.max:
                raise ValidationError(f"values out of {target.name} range", feat.name)
        elif (src.kind in "iuf" and target.kind in "fc") or src.kind == target.kind == "c":
            _check_float_range(feat, arr, target)
        elif not (src.kind in "iu" and target.kind in "iu"):
            raise ValidationError(f"cannot store {src} as {target.name}", feat.name)
    return _tensor_shape_checked(feat, arr).astype(target, copy=False)


def _exact_ints(feat: Feature, arr: np.ndarray, value: Any) -> np.ndarray:
    """Python ints beyond int64 (a JSON uint64) make numpy choose float64, rounding them: keep
    them exact as Python ints, for the range check to judge."""
    obj = np.asarray(value, dtype=object)
    if obj.size == 0 or obj.shape != arr.shape or not all(type(v) is int for v in obj.flat):
        return arr
    lo, hi = min(obj.flat), max(obj.flat)
    if lo < wire.INT64_MIN or hi > 2**64 - 1 or (lo < 0 and hi > wire.INT64_MAX):
        raise ValidationError(f"values out of {feat.np_dtype.name} range", feat.name)
    return obj.astype(np.uint64 if lo >= 0 else np.int64)


def _tensor_shape_checked(feat: Feature, arr: np.ndarray) -> np.ndarray:
    if arr.ndim != len(feat.shape) or any(d is not None and d != a for d, a in zip(feat.shape, arr.shape, strict=True)):
        raise ValidationError(f"expected shape {_shape_text(feat.shape)}, got {list(arr.shape)}", feat.name)
    return arr


def _check_float_range(feat: Feature, arr: np.ndarray, target: np.dtype[Any]) -> None:
    """The rule for floats, scalars and tensors alike: a value is rounded to the nearest of
    the target dtype; a finite one that would round to infinity is refused (inf and NaN are kept)."""
    limit = wire.rounds_to_inf(target.char.lower() if target.kind == "c" else target)  # complex: its parts' float
    for part in (arr.real, arr.imag) if arr.dtype.kind == "c" else (arr,):
        values = part.astype(np.float64)
        over = np.isfinite(values) & (np.abs(values) >= limit)
        if over.any():
            at = tuple(int(i) for i in np.argwhere(over)[0])
            raise ValidationError(
                f"value {arr[at].item()!r} at index {list(at)} is out of {target.name} range", feat.name
            )


def _shape_text(shape: tuple[int | None, ...]) -> str:
    return "[" + ", ".join("null" if d is None else str(d) for d in shape) + "]"
