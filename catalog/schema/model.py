"""A dataset's feature schema: JSON form, validation, row codec, numpy batches, TF spec.

JSON form::

    {"features": {"id": {"dtype": "int64"},
                  "vec": {"dtype": "float32", "shape": [8]},
                  "tags": {"dtype": "string", "shape": [null]},
                  "image": {"dtype": "uint8", "shape": [32, 32, 3], "encoding": "tensor"}}}

``shape`` omitted or ``[]``: exactly one value; ``[k, ...]``: fixed; ``[null]``: variable
length. ``default`` makes a feature optional, filled with the default where a record lacks
it; ``"optional": true`` makes it optional with no default (absent: ``None`` in a row).
A ``"tensor"`` feature is one bytes value holding the array's little-endian ``tobytes()``;
where its shape has unknown dimensions the actual shape is also stored as an int64 feature ``<name>/shape``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from catalog.errors import CatalogError, SchemaError, ValidationError
from catalog.schema.codec import RowCodec, decode_kinds, infer_features
from catalog.schema.columnar import decode_batch, decode_spans, spans_pad
from catalog.schema.features import (
    MAX_SCHEMA_BYTES,
    SHAPE_SUFFIX,
    Feature,
    convert,
    default_as_json,
    parse_feature,
)
from catalog.schema.frames import is_columnar
from catalog.schema.inference import RowInference, infer_columns
from catalog.tfrecord.sources import open_regular


def json_problem(e: RecursionError | ValueError) -> str:
    """One line for the ways ``json.loads`` fails besides bad syntax (a JSONDecodeError): nesting
    beyond the parser's recursion limit, an integer longer than Python converts."""
    if isinstance(e, RecursionError):
        return "not valid JSON: nested too deeply"
    return f"not valid JSON here: an integer of more than {sys.get_int_max_str_digits()} digits"


# --------------------------------------------------------------------------- the schema


@dataclass(frozen=True)
class SchemaDiff:
    """What changed between two schemas."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def to_json(self) -> dict[str, Any]:
        return {"added": self.added, "removed": self.removed, "changed": self.changed}


class Schema:
    """A dataset's feature schema (see the module docstring for the JSON form)."""

    def __init__(self, features: Iterable[Feature]) -> None:
        self.features: dict[str, Feature] = {f.name: f for f in features}
        shape_names = {f.name + SHAPE_SUFFIX for f in self.features.values() if f.stores_shape}
        clash = shape_names & set(self.features)
        if clash:
            raise SchemaError("name is reserved for the stored shape of a tensor", sorted(clash)[0])
        self._codec = RowCodec(self.features)  # the compiled fast paths, built once
        self.encode = self._codec.encode  # type: ignore[method-assign]  # hot path: skip one call layer

    # ---- JSON form
    @classmethod
    def from_json(cls, obj: Any) -> Schema:
        if isinstance(obj, (str, bytes)):
            try:
                obj = json.loads(obj)
            except json.JSONDecodeError as e:
                raise SchemaError(f"schema is not valid JSON: {e}") from e
            except (RecursionError, ValueError) as e:
                raise SchemaError(f"schema is {json_problem(e)}") from e
        if not isinstance(obj, dict) or "features" not in obj:
            raise SchemaError('a schema is an object {"features": {...}}')
        unknown = set(obj) - {"features"}
        if unknown:
            raise SchemaError(f"unknown top-level key(s) {sorted(unknown)}")
        feats = obj["features"]
        if not isinstance(feats, dict):
            raise SchemaError('"features" must be an object mapping names to feature specs')
        return cls(parse_feature(name, spec) for name, spec in feats.items())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Schema:
        try:
            with open_regular(path, "cannot read schema") as f:
                data = f.read(MAX_SCHEMA_BYTES + 1)
        except CatalogError as e:
            raise SchemaError(str(e)) from e
        except OSError as e:
            raise SchemaError(f"{os.fspath(path)}: cannot read schema: {e.strerror or e}") from e
        if len(data) > MAX_SCHEMA_BYTES:
            raise SchemaError(f"{os.fspath(path)}: larger than {MAX_SCHEMA_BYTES >> 20} MiB; not a schema")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise SchemaError(f"{os.fspath(path)}: not UTF-8 text (byte {e.start})") from e
        try:
            return cls.from_json(json.loads(text))
        except json.JSONDecodeError as e:
            raise SchemaError(f"{os.fspath(path)}: not valid JSON: {e}") from e
        except (RecursionError, ValueError) as e:
            raise SchemaError(f"{os.fspath(path)}: {json_problem(e)}") from e
        except SchemaError as e:
            raise SchemaError(f"{os.fspath(path)}: {e}") from e

    def to_json(self) -> dict[str, Any]:
        return {"features": {name: f.to_json() for name, f in self.features.items()}}

    @property
    def record_keys(self) -> frozenset[str]:
        """The map keys a record may hold: the features, and the stored shape of each tensor
        of unknown dimensions (``<name>/shape``)."""
        return self._codec.allowed

    @cached_property
    def fingerprint(self) -> str:
        """sha256 of the canonical JSON form: equal schemas, equal fingerprints."""
        canon = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canon.encode("utf-8")).hexdigest()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return f"Schema({json.dumps(self.to_json())})"

    def diff(self, other: Schema) -> SchemaDiff:
        """Features added, removed and changed going from ``self`` to ``other``."""
        mine, theirs = self.features, other.features
        changed = {
            name: {"from": mine[name].to_json(), "to": theirs[name].to_json()}
            for name in mine
            if name in theirs and mine[name].to_json() != theirs[name].to_json()
        }
        return SchemaDiff(
            added=[n for n in theirs if n not in mine], removed=[n for n in mine if n not in theirs], changed=changed
        )

    # ---- rows
    def validate(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """Check a row (dict of Python/numpy values); return it normalised, defaults filled."""
        if not isinstance(row, Mapping):
            raise ValidationError(f"a row is a mapping of feature name to value, got {type(row).__name__}")
        extra = [k for k in row if k not in self.features]
        if extra:
            raise ValidationError("not in the schema", str(extra[0]))
        out: dict[str, Any] = {}
        for name, feat in self.features.items():
            if name in row and row[name] is not None:
                out[name] = convert(feat, row[name])
            elif feat.has_default:
                out[name] = feat.default
            elif feat.optional:
                out[name] = None
            else:
                raise ValidationError("missing (the feature has no default)", name)
        return out

    def encode(self, row: Mapping[str, Any]) -> bytes:
        """Validate a row and serialize it to a tf.train.Example."""
        return self._codec.encode(row)

    def encode_columns(self, columns: Mapping[str, Sequence[Any]], n: int) -> list[bytes]:
        """Validate and serialize ``n`` rows given as columns (one sequence of ``n`` values per
        feature, None where a value is missing); a ValidationError's ``record`` is the row."""
        return self._codec.encode_columns(columns, n)

    # ---- records
    def validate_record(self, data: bytes | Mapping[str, list[Any]]) -> None:
        """Check a serialized Example (or its decoded dict) against the schema."""
        # decoded with the wire kinds: an empty list keeps its type
        self._codec.check_decoded(data if isinstance(data, Mapping) else decode_kinds(data))

    def decode(self, data: bytes) -> dict[str, Any]:
        """Decode one record to a row: scalars as scalars, fixed shapes as arrays."""
        return self._codec.decode(data)

    def decode_batch(self, records: Iterable[bytes]) -> dict[str, np.ndarray]:
        """Decode records into columnar numpy arrays (one array per feature)."""
        return decode_batch(self._codec, records)

    def decode_spans(self, raw: bytes, starts: np.ndarray, lengths: np.ndarray) -> dict[str, np.ndarray]:
        """``decode_batch`` of the records ``raw[starts[i] : starts[i] + lengths[i]]``, parsed
        where they lie (other bytes may lie between them: a read of a shard, its framing
        included); ``raw`` should end with ``spans_pad`` zero bytes after every record, else
        the records are copied out first."""
        return decode_spans(self._codec, raw, starts, lengths)

    @property
    def spans_pad(self) -> int:
        """Zero bytes ``decode_spans`` wants after the last record in its buffer."""
        return spans_pad(self._codec)

    # ---- TensorFlow interop
    def feature_spec(self) -> dict[str, dict[str, Any]]:
        """The ``tf.io.parse_example`` spec as plain data (see :func:`to_tf_feature_spec`)."""
        spec: dict[str, dict[str, Any]] = {}
        for name, f in self.features.items():
            if f.tensor:
                # optional: FixedLenFeature needs a value or a default, VarLenFeature gives 0 or 1 per record
                entry: dict[str, Any] = {"kind": "FixedLenFeature", "shape": [], "dtype": "string"}
                if f.optional:
                    entry = {"kind": "VarLenFeature", "dtype": "string"}
                entry["decode_raw"] = {"dtype": f.dtype, "shape": list(f.shape), "little_endian": True}
                spec[name] = entry
                if f.stores_shape:
                    shape_entry = {"kind": "FixedLenFeature", "shape": [len(f.shape)], "dtype": "int64"}
                    if f.optional:
                        shape_entry = {"kind": "VarLenFeature", "dtype": "int64"}
                    spec[name + SHAPE_SUFFIX] = shape_entry
                continue
            tf_dtype = "string" if f.dtype in ("string", "bytes") else f.dtype
            if f.is_varlen or f.optional:  # optional: none or all of its values in each record
                spec[name] = {"kind": "VarLenFeature", "dtype": tf_dtype}
                continue
            entry = {"kind": "FixedLenFeature", "shape": list(f.shape), "dtype": tf_dtype}
            if f.has_default:
                d = f.default
                entry["default_value"] = d.encode() if isinstance(d, str) else default_as_json(d)
            spec[name] = entry
        return spec

    # ---- inference
    @classmethod
    def infer(cls, records: Iterable[bytes | Mapping[str, Any]] | Any) -> Schema:
        """Infer a schema from every record given: serialized Examples (or their decoded
        ``{name: (kind, values)}``, see decode_kinds), rows of Python values, or a DataFrame,
        an Arrow Table or RecordBatch, or a dict of columns. Features missing from some
        records are optional; nothing else is assumed (see schema.inference)."""
        if is_columnar(records) or isinstance(records, Mapping):
            return cls(infer_columns(records))
        items = iter(records)
        first = next(items, None)
        if first is None:
            return cls([])
        rest = itertools.chain([first], items)
        if isinstance(first, (bytes, bytearray, memoryview)) or _is_kinded(first):
            return cls(infer_features(rest))
        tally = RowInference()
        for row in rest:
            tally.add(row)
        return cls(tally.features())


def _is_kinded(record: Any) -> bool:
    """A decode_kinds dict: every value a (wire kind, values) pair."""
    return isinstance(record, Mapping) and all(isinstance(v, tuple) and len(v) == 2 for v in record.values())


def to_tf_feature_spec(spec: Mapping[str, Mapping[str, Any]], tf: Any) -> dict[str, Any]:
    """Turn :meth:`Schema.feature_spec` data into ``tf.io`` objects, given the ``tf`` module."""
    out: dict[str, Any] = {}
    for name, s in spec.items():
        dtype = getattr(tf, s["dtype"])
        if s["kind"] == "VarLenFeature":
            out[name] = tf.io.VarLenFeature(dtype)
        elif "default_value" in s:
            out[name] = tf.io.FixedLenFeature(s["shape"], dtype, default_value=s["default_value"])
        else:
            out[name] = tf.io.FixedLenFeature(s["shape"], dtype)
    return out
