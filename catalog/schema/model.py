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

``"sequence_features"`` (optional) makes the records ``tf.train.SequenceExample``s: the
``features`` are their context, and each sequence feature declares one step of a feature
list (see ``sequences.py``)::

    {"features": {"id": {"dtype": "int64"}},
     "sequence_features": {"tokens": {"dtype": "int64"}, "frames": {"dtype": "float32", "shape": [4]}}}
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from catalog.errors import CatalogError, SchemaError, ValidationError
from catalog.schema.canonical import fingerprint
from catalog.schema.codec import ColumnValues, Entries, FilledRows, RowCodec, decode_kinds, infer_features
from catalog.schema.columnar import Ragged, decode_batch, decode_spans, spans_pad
from catalog.schema.features import (
    MAX_SCHEMA_BYTES,
    SHAPE_SUFFIX,
    Feature,
    check_feature_name,
    convert,
    default_as_json,
    parse_feature,
)
from catalog.schema.frames import is_columnar
from catalog.schema.inference import RowInference, infer_columns
from catalog.schema.sequences import SequenceCodec, StepInference, parse_step, sequence_spec, split_record
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

    def __init__(self, features: Iterable[Feature], sequence: Iterable[Feature] = ()) -> None:
        self.features: dict[str, Feature] = {f.name: f for f in features}
        # SequenceExample datasets: the features above are the context; these, one step each
        self.sequence: dict[str, Feature] = {f.name: f for f in sequence}
        for name in [*self.features, *self.sequence]:  # (inferred ones too: '' is a key a row can have)
            check_feature_name(name)
        shape_names = {f.name + SHAPE_SUFFIX for f in self.features.values() if f.stores_shape}
        clash = shape_names & set(self.features)
        if clash:
            raise SchemaError("name is reserved for the stored shape of a tensor", sorted(clash)[0])
        both = set(self.features) & set(self.sequence)
        if both:
            raise SchemaError("both a context feature and a sequence feature", sorted(both)[0])
        self._codec = RowCodec(self.features)  # the compiled fast paths, built once
        self._seq = SequenceCodec(self.sequence)
        if self.sequence:
            self.encode = self._encode_sequence  # type: ignore[method-assign]
        else:
            self.encode = self._codec.encode  # type: ignore[method-assign]  # hot path: skip one call layer

    def check_new(self) -> None:
        """What a schema registered now must meet beyond what every stored one reads as: a
        ``min``/``max`` check is for numbers (one stored on a text feature, before this was
        refused, is ignored, and kept by migrations)."""
        for name, feat in self.all_features.items():
            text = feat.dtype == "string" or (feat.dtype == "bytes" and not feat.tensor)
            if text and any(key in ("min", "max") for key, _limit in feat.checks or ()):
                raise SchemaError('checks "min" and "max" are for numbers (texts and bytes have no range)', name)

    # ---- JSON form
    @classmethod
    def from_json(cls, obj: Any) -> Schema:
        """A schema from its JSON form (a dict, or the JSON text); docs/reference/schema.md
        describes every key.

        >>> schema = Schema.from_json({"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string"}}})
        >>> schema.decode(schema.encode({"id": 7, "text": "hi"}))
        {'id': 7, 'text': 'hi'}
        """
        if isinstance(obj, (str, bytes)):
            try:
                obj = json.loads(obj)
            except json.JSONDecodeError as e:
                raise SchemaError(f"schema is not valid JSON: {e}") from e
            except (RecursionError, ValueError) as e:
                raise SchemaError(f"schema is {json_problem(e)}") from e
        if not isinstance(obj, dict) or "features" not in obj:
            raise SchemaError('a schema is an object {"features": {...}}')
        unknown = set(obj) - {"features", "sequence_features"}
        if unknown:
            raise SchemaError(f"unknown top-level key(s) {sorted(unknown)}")
        feats, steps = obj["features"], obj.get("sequence_features", {})
        if not isinstance(feats, dict) or not isinstance(steps, dict):
            raise SchemaError('"features" (and "sequence_features") map names to feature specs')
        context = [parse_feature(name, spec) for name, spec in feats.items()]
        return cls(context, [parse_step(name, spec) for name, spec in steps.items()])

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
        out: dict[str, Any] = {"features": {name: f.to_json() for name, f in self.features.items()}}
        if self.sequence:  # absent otherwise: an Example schema's JSON (and fingerprint) as before
            out["sequence_features"] = {name: f.to_json() for name, f in self.sequence.items()}
        return out

    @property
    def all_features(self) -> dict[str, Feature]:
        """Context and sequence features by name (a row's keys)."""
        return {**self.features, **self.sequence} if self.sequence else self.features

    @property
    def record_keys(self) -> frozenset[str]:
        """The map keys a record may hold: the features, and the stored shape of each tensor
        of unknown dimensions (``<name>/shape``)."""
        return self._codec.allowed

    @cached_property
    def fingerprint(self) -> str:
        """sha256 of the canonical JSON form: equal schemas, equal fingerprints."""
        return fingerprint(self.to_json())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and self.fingerprint == other.fingerprint

    def __hash__(self) -> int:
        return hash(self.fingerprint)

    def __repr__(self) -> str:
        return f"Schema({json.dumps(self.to_json())})"

    def diff(self, other: Schema) -> SchemaDiff:
        """Features added, removed and changed going from ``self`` to ``other``."""
        mine, theirs = self._declared(), other._declared()
        changed = {
            name: {"from": mine[name], "to": theirs[name]}
            for name in mine
            if name in theirs and mine[name] != theirs[name]
        }
        return SchemaDiff(
            added=[n for n in theirs if n not in mine], removed=[n for n in mine if n not in theirs], changed=changed
        )

    def _declared(self) -> dict[str, dict[str, Any]]:
        """Each feature's JSON form, a sequence feature's marked so (for diff)."""
        out = {name: f.to_json() for name, f in self.features.items()}
        out.update((name, {**f.to_json(), "sequence": True}) for name, f in self.sequence.items())
        return out

    # ---- rows
    def validate(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """Check a row (dict of Python/numpy values); return it normalised, defaults filled."""
        if not isinstance(row, Mapping):
            raise ValidationError(f"a row is a mapping of feature name to value, got {type(row).__name__}")
        extra = [k for k in row if k not in self.features and k not in self.sequence]
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
        if self.sequence:
            out.update(self._seq.validate(row))
        return out

    def _encode_sequence(self, row: Mapping[str, Any], filled: list[str] | None = None) -> bytes:
        """A row as a tf.train.SequenceExample: its context as an Example's features, then its feature lists."""
        if not isinstance(row, Mapping):
            raise ValidationError(f"a row is a mapping of feature name to value, got {type(row).__name__}")
        context = {k: v for k, v in row.items() if k not in self.sequence}
        return self._codec.encode(context, filled) + self._seq.encode(row)

    def encode(self, row: Mapping[str, Any], filled: list[str] | None = None) -> bytes:
        """Validate a row and serialize it to a tf.train.Example; ``filled``, when given,
        receives the features whose default went in."""
        return self._codec.encode(row, filled)

    def encode_columns(
        self,
        columns: ColumnValues,
        n: int,
        filled: FilledRows | None = None,
        entries: Entries | None = None,
        framed: list[bytes] | None = None,
    ) -> Sequence[bytes]:
        """Validate and serialize ``n`` rows given as columns (one sequence of ``n`` values per
        feature, None where a value is missing); a ValidationError's ``record`` is the row.
        ``filled``, when given, receives per feature the rows whose default went in;
        ``entries`` (Example schemas only: a sequence's are not kept) each feature's encoded
        map entries, one a row; ``framed`` (Example schemas only) the records framed as
        TFRecord, in parts, when they were laid out with their framing (else nothing): the
        records returned may then be views of those bytes (a sequence, not a list)."""
        if not self.sequence:
            return self._codec.encode_columns(columns, n, filled, entries, framed)
        out = []
        names: list[str] = []
        for i in range(n):  # sequences are ragged: a row at a time
            try:
                out.append(self.encode({k: c[i] for k, c in columns.items() if c[i] is not None}, names))
            except ValidationError as e:
                e.record = i
                raise
            if filled is not None:
                for name in names:
                    filled.setdefault(name, []).append(i)
            names.clear()
        return out

    # ---- records
    def validate_record(self, data: bytes | Mapping[str, list[Any]]) -> None:
        """Check a serialized Example (or its decoded dict) against the schema."""
        if self.sequence and not isinstance(data, Mapping):
            self.decode(data)
            return
        # decoded with the wire kinds: an empty list keeps its type
        self._codec.check_decoded(data if isinstance(data, Mapping) else decode_kinds(data))

    def decode(self, data: bytes) -> dict[str, Any]:
        """Decode one record to a row: scalars as scalars, fixed shapes as arrays."""
        if not self.sequence:
            return self._codec.decode(data)
        context, lists = split_record(data)
        row = self._codec.decode(context)
        row.update(self._seq.decode(lists))
        return row

    def decode_batch(
        self,
        records: Iterable[bytes],
        absent: dict[str, np.ndarray] | None = None,
        ragged: Ragged | None = None,
        columns: Collection[str] | None = None,
    ) -> dict[str, np.ndarray]:
        """Decode records into columnar numpy arrays (one array per feature); a sequence
        feature's column holds each record's steps (an object array: ragged). ``absent``,
        when given, receives for each feature with a default which records lacked it;
        ``ragged``, when given, receives instead of their columns (not in the result) some
        variable-length int64 and float32 features: all their values in one array and each
        record's count (columnar.decode_batch). ``columns``: only these features' columns,
        the others not extracted (nor checked: columnar.decode_batch)."""
        if not self.sequence:
            return decode_batch(self._codec, records, absent, ragged, columns)
        parts = [split_record(r) for r in records]
        out = decode_batch(self._codec, [c for c, _l in parts], absent, ragged, columns)
        if columns is not None and not any(name in columns for name in self.sequence):
            return out  # no steps wanted: none decoded
        rows = []
        for i, (_c, lists) in enumerate(parts):
            try:
                rows.append(self._seq.decode(lists))
            except ValidationError as e:
                e.record = i  # the batch's record: callers name it in its file
                raise
        for name in self.sequence:
            column = np.empty(len(rows), dtype=object)
            column[:] = [r[name] for r in rows] if rows else []
            out[name] = column
        return out

    def decode_spans(
        self,
        raw: bytes,
        starts: np.ndarray,
        lengths: np.ndarray,
        columns: Collection[str] | None = None,
        absent: dict[str, np.ndarray] | None = None,
        ragged: Ragged | None = None,
    ) -> dict[str, np.ndarray]:
        """``decode_batch`` of the records ``raw[starts[i] : starts[i] + lengths[i]]``, parsed
        where they lie (other bytes may lie between them: a read of a shard, its framing
        included); ``raw`` should end with ``spans_pad`` zero bytes after every record, else
        the records are copied out first. ``columns``, ``absent``, ``ragged``: as decode_batch's."""
        if self.sequence:
            view = memoryview(raw)  # ragged steps have no fast path: each record parsed on its own
            spans = zip(starts.tolist(), lengths.tolist(), strict=True)
            return self.decode_batch([bytes(view[a : a + n]) for a, n in spans], absent, ragged, columns)
        return decode_spans(self._codec, raw, starts, lengths, columns, absent, ragged)

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

    def sequence_feature_spec(self) -> dict[str, dict[str, Any]]:
        """The ``tf.io.parse_sequence_example`` spec of the sequence features as plain data:
        ``FixedLenSequenceFeature`` for fixed steps (missing lists: zero steps), ``RaggedFeature``
        for variable-length ones (see :func:`to_tf_feature_spec`)."""
        return sequence_spec(self.sequence)

    # ---- inference
    @classmethod
    def infer(cls, records: Iterable[bytes | Mapping[str, Any]] | Any) -> Schema:
        """Infer a schema from every record given: serialized Examples (or their decoded
        ``{name: (kind, values)}``, see decode_kinds), rows of Python values, or a DataFrame,
        an Arrow Table or RecordBatch, or a dict of columns. Features missing from some
        records are optional; nothing else is assumed (see schema.inference)."""
        iterable = isinstance(records, Iterable) and not isinstance(records, (str, bytes, os.PathLike))
        if not (is_columnar(records) or iterable):
            kinds = "records, rows, a DataFrame, an Arrow table or a dict of columns"
            raise SchemaError(f"Schema.infer takes {kinds}, got {type(records).__name__}")
        try:
            return cls._infer(records)
        except TypeError as e:  # a value of a kind no feature holds, met deep inside: one error all the same
            raise SchemaError(f"cannot infer a schema from these values ({e})") from e

    @classmethod
    def _infer(cls, records: Iterable[bytes | Mapping[str, Any]] | Any) -> Schema:
        if is_columnar(records) or isinstance(records, Mapping):
            return cls(infer_columns(records))
        items = iter(records)
        first = next(items, None)
        if first is None:
            return cls([])
        rest = itertools.chain([first], items)
        if isinstance(first, (bytes, bytearray, memoryview)) or _is_kinded(first):
            steps = StepInference()  # a SequenceExample's feature lists, tallied as the records pass
            context = infer_features(_tee(rest, steps.add))
            return cls(context, steps.features())
        tally = RowInference()
        for row in rest:
            tally.add(row)
        return cls(tally.features())


def _tee(items: Iterable[Any], see: Callable[[Any], None]) -> Iterator[Any]:
    for item in items:
        see(item)
        yield item


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
        elif s["kind"] == "FixedLenSequenceFeature":
            out[name] = tf.io.FixedLenSequenceFeature(s["shape"], dtype, allow_missing=True)
        elif s["kind"] == "RaggedFeature":
            out[name] = tf.io.RaggedFeature(dtype)
        elif "default_value" in s:
            out[name] = tf.io.FixedLenFeature(s["shape"], dtype, default_value=s["default_value"])
        else:
            out[name] = tf.io.FixedLenFeature(s["shape"], dtype)
    return out
