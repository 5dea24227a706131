"""Migration operations: what a migration script's ``operations = [...]`` is built from.

    from catalog.migrate import AddField, CastField, DropField, RenameField, Transform

    operations = [
        AddField("height", {"dtype": "int64"}, default=256),
        RenameField("text", "caption"),
    ]

Each operation evolves the schema (:meth:`Operation.evolve`) and rewrites rows
(:meth:`Operation.apply`). AddField with a constant, DropField and RenameField also work
on the serialized bytes (see :func:`compile_steps`), with no decoding: a serialized Example
is a list of map entries, so adding, dropping or renaming a feature is splicing entries.
"""

from __future__ import annotations

import copy
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from catalog.errors import MigrationError, SchemaError, ValidationError
from catalog.schema import SHAPE_SUFFIX, Feature, Schema, unknown_fields_within, zero
from catalog.schema.features import same_declaration
from catalog.tfrecord import proto
from catalog.tfrecord.example import (
    append_entries,
    beyond_features,
    features_body,
    features_field,
    rekey_entry,
    split_entries,
)
from catalog.words import counted

Row = dict[str, Any]
# A schema's features in order, by name: its "features" object, then its "sequence_features",
# each of those marked {"sequence": true} (one namespace: operations name features alike).
Features = dict[str, dict[str, Any]]
SEQUENCE = "sequence"

_NO_DEFAULT = object()


class Operation(ABC):
    """One step of a migration."""

    #: True when the step can run on serialized records without decoding them.
    byte_level = False

    @abstractmethod
    def evolve(self, features: Features) -> Features:
        """The schema's features after this step."""

    @abstractmethod
    def apply(self, row: Row, before: Schema, after: Schema) -> Row:
        """One decoded row after this step (``before``/``after``: the schemas around it)."""

    def to_json(self) -> dict[str, Any] | None:
        """The operation as data (quick migrations); None when it carries a function."""
        return None

    def describe(self) -> str:
        return type(self).__name__


def _need(features: Features, name: str, op: str) -> dict[str, Any]:
    if name not in features:
        raise MigrationError(f"{op}: no feature {name!r} in the schema (it has {', '.join(features) or 'none'})")
    return features[name]


def _check_spec(op: str, name: Any, spec: Any) -> None:
    """A script's operation arguments, checked where it is built: a name, and a feature's JSON
    form (a dict), never a bare dtype that would fail later with a Python error."""
    if not isinstance(name, str) or not name:
        raise MigrationError(f"{op}: a feature name is a non-empty string, got {name!r}")
    if not isinstance(spec, Mapping):
        raise MigrationError(f"{op}({name!r}, ...): the feature is given by its JSON form, e.g. "
                             f"{{'dtype': 'float32'}}, got {spec!r}")  # fmt: skip


def _fresh(features: Features, name: str, op: str) -> None:
    if not isinstance(name, str) or not name:
        raise MigrationError(f"{op}: a feature name is a non-empty string, got {name!r}")
    if name in features:
        raise MigrationError(f"{op}: feature {name!r} already exists")


class ReadOnlyRow(dict[str, Any]):
    """A row as AddField's function gets it: a dict to read as any other (JSON, repr, pickle
    and copies give a plain dict), whose changes raise."""

    def _refuse(self, *_args: Any, **_kwargs: Any) -> Any:
        raise TypeError("AddField's function reads the row, it cannot change it (a Transform changes rows)")

    __setitem__ = __delitem__ = __ior__ = _refuse
    pop = popitem = setdefault = update = clear = _refuse

    def copy(self) -> dict[str, Any]:
        return dict(self)

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return copy.deepcopy(dict(self), memo)

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


@dataclass(frozen=True)
class AddField(Operation):
    """A new feature, filled for existing records with ``default`` or computed by ``fn(row)``.

    ``spec`` is the feature's JSON form. Without a ``"default"`` of its own, the spec takes
    ``default`` too, so rows appended later may leave the feature out; with ``fn`` and no
    default the feature is required from then on. ``fn`` reads the row (a dict whose changes
    raise, :class:`ReadOnlyRow`; the arrays of the features the migration leaves as they are
    read-only): changing other features is a :class:`Transform`'s work.
    """

    name: str
    spec: Mapping[str, Any]
    default: Any = _NO_DEFAULT
    fn: Callable[[Row], Any] | None = None

    def __post_init__(self) -> None:
        _check_spec("AddField", self.name, self.spec)
        if self.fn is not None and not callable(self.fn):
            raise MigrationError(f"AddField({self.name!r}, ...): fn is a function of the row, got {self.fn!r}")

    @property
    def byte_level(self) -> bool:  # type: ignore[override]
        return self.fn is None and not self.spec.get(SEQUENCE)

    def target_spec(self) -> dict[str, Any]:
        spec = dict(self.spec)
        if spec.get(SEQUENCE):  # a feature list: existing records get default's steps (none by default)
            return spec
        if self.fn is None and self.default is _NO_DEFAULT and "default" not in spec:
            raise MigrationError(
                f"AddField {self.name!r}: give default= (a constant for every existing record) or fn= (computed "
                "from each row)"
            )
        if self.default is not _NO_DEFAULT and "default" not in spec:
            if not _text_safe(self.default):
                raise MigrationError(
                    f"AddField {self.name!r}: a bytes default must be UTF-8 text to be kept in the schema (JSON has "
                    "no bytes); fill existing records with fn=lambda row: b'...' instead"
                )
            spec["default"] = _jsonable(self.default)
        return spec

    def fill(self) -> Any:
        if self.default is _NO_DEFAULT and self.spec.get(SEQUENCE):
            return []  # zero steps
        return self.spec.get("default") if self.default is _NO_DEFAULT else self.default

    def value_for(self, feat: Feature) -> Any:
        """The fill value in the feature's own types: a bytes feature's text default is its UTF-8."""
        value = self.fill()
        if feat.dtype == "bytes":
            if isinstance(value, str):
                return value.encode("utf-8")
            if isinstance(value, list):
                return [v.encode("utf-8") if isinstance(v, str) else v for v in value]
        return value

    def evolve(self, features: Features) -> Features:
        _fresh(features, self.name, "AddField")
        if not isinstance(self.spec, Mapping):
            raise MigrationError(f"AddField {self.name!r}: spec is a feature's JSON form, e.g. {{'dtype': 'int64'}}")
        return {**features, self.name: self.target_spec()}

    def apply(self, row: Row, before: Schema, after: Schema) -> Row:
        # fn reads the row, never changes it (a Transform does): the features it leaves are the
        # source's, whose statistics a migration carries over (``untouched``)
        value = self.fn(ReadOnlyRow(row)) if self.fn is not None else self.value_for(after.all_features[self.name])
        row[self.name] = value
        return row

    def to_json(self) -> dict[str, Any] | None:
        if self.fn is not None:
            return None
        out: dict[str, Any] = {"op": "add", "name": self.name, "spec": dict(self.spec)}
        if self.default is not _NO_DEFAULT:
            out["default"] = _jsonable(self.default)
        return out

    def describe(self) -> str:
        how = "computed" if self.fn is not None else f"= {self.fill()!r}"
        return f"add {self.name} ({self.spec.get('dtype')}) {how}"


@dataclass(frozen=True)
class DropField(Operation):
    name: str
    byte_level = True

    def evolve(self, features: Features) -> Features:
        _need(features, self.name, "DropField")
        return {k: v for k, v in features.items() if k != self.name}

    def apply(self, row: Row, before: Schema, after: Schema) -> Row:
        row.pop(self.name, None)
        return row

    def to_json(self) -> dict[str, Any] | None:
        return {"op": "drop", "name": self.name}

    def describe(self) -> str:
        return f"drop {self.name}"


@dataclass(frozen=True)
class RenameField(Operation):
    old: str
    new: str
    byte_level = True

    def evolve(self, features: Features) -> Features:
        _need(features, self.old, "RenameField")
        _fresh(features, self.new, "RenameField")
        return {(self.new if k == self.old else k): v for k, v in features.items()}

    def apply(self, row: Row, before: Schema, after: Schema) -> Row:
        row[self.new] = row.pop(self.old)
        return row

    def to_json(self) -> dict[str, Any] | None:
        return {"op": "rename", "old": self.old, "new": self.new}

    def describe(self) -> str:
        return f"rename {self.old} -> {self.new}"


@dataclass(frozen=True)
class CastField(Operation):
    """A feature's dtype or shape changed: int64 <-> float32, string <-> bytes, fixed <-> variable
    length, a tensor's dtype or shape. A value that would change (1.5 to int64, 2**40 + 1 to
    float32, non-UTF-8 bytes to string, 3 values into shape [2]) stops the migration naming its
    record, unless ``lossy=True`` (then: truncation toward zero, nearest float32, U+FFFD for bad
    bytes, cut or zero-padded lists)."""

    name: str
    spec: Mapping[str, Any]
    lossy: bool = False

    def __post_init__(self) -> None:
        _check_spec("CastField", self.name, self.spec)

    def evolve(self, features: Features) -> Features:
        old = _need(features, self.name, "CastField")
        new = dict(self.spec)
        if bool(old.get(SEQUENCE)) != bool(new.get(SEQUENCE)):
            raise MigrationError(f"CastField {self.name!r}: cannot cast between a context and a sequence feature")
        before, after = _feature(self.name, old), _feature(self.name, new)
        if before.tensor != after.tensor:
            raise MigrationError(f"CastField {self.name!r}: cannot cast between a tensor and a list feature")
        if not before.tensor and {before.dtype, after.dtype} not in _LIST_CASTS:
            raise MigrationError(f"CastField {self.name!r}: cannot cast {before.dtype} to {after.dtype}")
        return {k: (new if k == self.name else v) for k, v in features.items()}

    def apply(self, row: Row, before: Schema, after: Schema) -> Row:
        src, dst = before.all_features[self.name], after.all_features[self.name]
        value = row[self.name]
        if value is None:  # an absent optional feature stays absent (the target schema judges it)
            return row
        if self.name in after.sequence:  # every step cast as a list feature's value is
            row[self.name] = [_cast_list(dst, step, self.lossy) for step in value]
            return row
        row[self.name] = _cast_tensor(src, dst, value, self.lossy) if dst.tensor else _cast_list(dst, value, self.lossy)
        return row

    def to_json(self) -> dict[str, Any] | None:
        return {"op": "cast", "name": self.name, "spec": dict(self.spec), "lossy": self.lossy}

    def describe(self) -> str:
        return f"cast {self.name} to {dict(self.spec)}" + (" (lossy)" if self.lossy else "")


@dataclass(frozen=True)
class Transform(Operation):
    """Any row-to-row function; ``schema`` is the schema its rows follow (a Schema, its JSON form or
    a path). Every output row is validated against it."""

    fn: Callable[[Row], Row]
    schema: Schema | Mapping[str, Any] | str | os.PathLike[str]

    def __post_init__(self) -> None:
        if not callable(self.fn):
            raise MigrationError(f"Transform: its first argument is a function of the row, got {self.fn!r}")

    def target(self) -> Schema:
        if isinstance(self.schema, Schema):
            return self.schema
        if isinstance(self.schema, Mapping):
            return Schema.from_json(dict(self.schema))
        return Schema.load(self.schema)

    def evolve(self, features: Features) -> Features:
        return flat_features(self.target())

    def apply(self, row: Row, before: Schema, after: Schema) -> Row:
        out = self.fn(row)
        if not isinstance(out, Mapping):
            raise ValidationError(f"Transform returned {type(out).__name__}, not a row (a dict)")
        return dict(out)

    def describe(self) -> str:
        return f"transform {getattr(self.fn, '__name__', 'fn')}"


_LIST_CASTS = [{"int64"}, {"float32"}, {"string"}, {"bytes"}, {"int64", "float32"}, {"string", "bytes"}]


def _feature(name: str, spec: Mapping[str, Any]) -> Feature:
    try:
        return schema_of({name: dict(spec)}).all_features[name]
    except SchemaError as e:
        raise MigrationError(str(e)) from e


def flat_features(schema: Schema) -> Features:
    """A schema's features by name, its sequence features marked (see ``Features``)."""
    doc = schema.to_json()
    out: Features = dict(doc["features"])
    out.update((name, {**spec, SEQUENCE: True}) for name, spec in doc.get("sequence_features", {}).items())
    return out


def schema_of(features: Features) -> Schema:
    """The Schema of a ``Features`` object: the marked ones its sequence features."""
    context = {k: v for k, v in features.items() if not v.get(SEQUENCE)}
    steps = {k: {f: x for f, x in v.items() if f != SEQUENCE} for k, v in features.items() if v.get(SEQUENCE)}
    return Schema.from_json({"features": context, "sequence_features": steps} if steps else {"features": context})


def _text_safe(value: Any) -> bool:
    """Whether bytes in ``value`` survive the schema's JSON form (text, read back as UTF-8)."""
    if isinstance(value, bytes):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True
    if isinstance(value, (list, tuple)):
        return all(_text_safe(v) for v in value)
    return True


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


# --------------------------------------------------------------------------- casts


def _values(value: Any) -> list[Any]:
    if isinstance(value, np.ndarray):
        return list(value.reshape(-1).tolist()) if value.dtype != object else list(value.reshape(-1))
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _cast_value(dst: Feature, v: Any, lossy: bool) -> Any:
    dtype = dst.dtype
    if dtype == "int64":
        if isinstance(v, int):
            return v
        f = float(v)
        if math.isfinite(f) and f == int(f) and -(2**63) <= f < 2**63:
            return int(f)
        if lossy and math.isfinite(f):
            return max(-(2**63), min(2**63 - 1, int(f)))
        raise ValidationError(
            f"value {f!r} cannot be cast to int64 without loss (CastField(..., lossy=True))", dst.name
        )
    if dtype == "float32":
        f32 = float(np.float32(v))
        if f32 == v or lossy or (isinstance(v, float) and math.isnan(v)):
            return f32
        raise ValidationError(
            f"value {v!r} cannot be cast to float32 without loss (CastField(..., lossy=True))", dst.name
        )
    if dtype == "bytes":
        return v.encode("utf-8") if isinstance(v, str) else v
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError as e:
            if lossy:
                return v.decode("utf-8", errors="replace")
            raise ValidationError(
                f"bytes are not UTF-8 text (byte {e.start}); lossy=True replaces them", dst.name
            ) from e
    return v


def _cast_list(dst: Feature, value: Any, lossy: bool) -> Any:
    values = [_cast_value(dst, v, lossy) for v in _values(value)]
    want = 1 if dst.is_scalar else dst.size
    if want is not None and len(values) != want:
        if not lossy:
            raise ValidationError(
                f"{counted(len(values), 'value')} {'does' if len(values) == 1 else 'do'} not fit shape "
                f"{list(dst.shape)} (CastField(..., lossy=True) cuts or pads)",
                dst.name,
            )
        values = (values + [zero(dst.dtype)] * want)[:want]
    if dst.is_scalar:
        return values[0]
    return values


def _cast_tensor(src: Feature, dst: Feature, value: Any, lossy: bool) -> np.ndarray:
    arr = np.asarray(value)
    out = arr.astype(dst.np_dtype)
    if not lossy and arr.size:
        back = out.astype(arr.dtype)
        same = np.array_equal(back, arr, equal_nan=arr.dtype.kind in "fc" and out.dtype.kind in "fc")
        if not same:
            raise ValidationError(
                f"values do not survive a cast from {src.dtype} to {dst.dtype} (CastField(..., lossy=True))", dst.name
            )
    fits = out.ndim == len(dst.shape) and all(d is None or d == a for d, a in zip(dst.shape, out.shape, strict=False))
    if not fits:
        shape = tuple(-1 if d is None else d for d in dst.shape)
        try:
            out = out.reshape(shape)
        except ValueError as e:
            raise ValidationError(f"shape {list(arr.shape)} cannot be reshaped to {list(dst.shape)}", dst.name) from e
    return out


# --------------------------------------------------------------------------- quick operations as data


def from_json(obj: Mapping[str, Any]) -> Operation:
    """An operation from :meth:`Operation.to_json` data (quick migrations, work units)."""
    kind = obj.get("op")
    if kind == "add":
        return AddField(obj["name"], obj["spec"], obj.get("default", _NO_DEFAULT))
    if kind == "drop":
        return DropField(obj["name"])
    if kind == "rename":
        return RenameField(obj["old"], obj["new"])
    if kind == "cast":
        return CastField(obj["name"], obj["spec"], bool(obj.get("lossy", False)))
    raise MigrationError(f"unknown operation {obj!r}")


def check_operations(ops: Any, where: str) -> list[Operation]:
    if not isinstance(ops, (list, tuple)) or not ops:
        raise MigrationError(f"{where}: `operations` must be a non-empty list of catalog.migrate operations")
    for op in ops:
        if not isinstance(op, Operation):
            raise MigrationError(f"{where}: {op!r} is not a catalog.migrate operation")
    return list(ops)


def evolve(schema: Schema, ops: Sequence[Operation]) -> list[Schema]:
    """The schema after each operation (first: ``schema``)."""
    chain = [schema]
    features = flat_features(schema)
    for op in ops:
        features = op.evolve(features)
        try:
            chain.append(schema_of(features))
        except SchemaError as e:
            raise MigrationError(f"{op.describe()}: the resulting schema is invalid: {e}") from e
    return chain


# --------------------------------------------------------------------------- applying


RecordFn = Callable[[bytes, int], bytes]
# A source record (and its index) to the target record and the row it was encoded from.
RowFn = Callable[[bytes, int], tuple[bytes, dict[str, Any]]]


def compile_steps(ops: Sequence[Operation], chain: Sequence[Schema]) -> RecordFn:
    """One function from a source record (and its index) to the target record."""
    if all(op.byte_level for op in ops) and not any(s.sequence for s in chain):
        return _byte_plan(ops, chain)  # feature lists (SequenceExample schemas) take the row path
    with_row = _row_plan(ops, chain)
    return lambda record, index: with_row(record, index)[0]


def compile_row_steps(ops: Sequence[Operation], chain: Sequence[Schema]) -> RowFn | None:
    """``compile_steps``' function for a row-level plan, giving each target record with the row
    it was encoded from (the statistics take the rows, not the records decoded again); None
    for a byte-level plan, which has no rows."""
    if all(op.byte_level for op in ops) and not any(s.sequence for s in chain):
        return None
    return _row_plan(ops, chain)


def untouched(ops: Sequence[Operation], chain: Sequence[Schema]) -> dict[str, str]:
    """The target's features whose values a row-level plan writes as it read them, by their
    source feature's name (through renames), with the same declaration: neither cast nor
    computed, and none at all after a Transform or in SequenceExamples. Only features whose
    decoded values cannot change in place: numbers and texts, and arrays (the row plan makes
    them read-only); not lists of texts (Python lists). Their statistics are the source's."""
    known = (AddField, DropField, RenameField, CastField)
    if any(s.sequence for s in chain) or not all(type(op) in known for op in ops):
        return {}
    same = {name: name for name in chain[0].features}
    for op in ops:
        if isinstance(op, RenameField):
            if op.old in same:
                same[op.new] = same.pop(op.old)
        else:
            same.pop(op.name, None)  # type: ignore[attr-defined]  # (added, dropped or cast)
    source, target = chain[0].features, chain[-1].features
    return {
        name: old
        for name, old in same.items()
        if name in target and same_declaration(source[old], target[name]) and _fixed_values(target[name])
    }


def _fixed_values(feat: Feature) -> bool:
    """Whether a feature's decoded values are immutable (or arrays, made read-only)."""
    return feat.is_scalar or feat.tensor or feat.dtype in ("int64", "float32")


def _arrays(feat: Feature) -> bool:
    return feat.tensor or not feat.is_scalar


def _row_plan(ops: Sequence[Operation], chain: Sequence[Schema]) -> RowFn:
    source, target = chain[0], chain[-1]
    carry = not source.sequence and not target.sequence  # feature lists the schemas do not describe
    # arrays an AddField's function could change in place: read-only (their statistics are carried)
    computes = any(isinstance(op, AddField) and op.fn is not None for op in ops)
    frozen = [name for name in untouched(ops, chain).values() if _arrays(source.features[name])] if computes else []

    def by_row(record: bytes, index: int) -> tuple[bytes, dict[str, Any]]:
        row = source.decode(record)
        for name in frozen:
            value = row.get(name)
            if type(value) is np.ndarray:
                value.flags.writeable = False
        if unknown_fields_within(record):
            raise ValidationError(
                "holds protobuf fields a tf.train.Example does not define: a row-level step would drop them"
            )
        for op, before, after in zip(ops, chain[:-1], chain[1:], strict=True):
            row = op.apply(row, before, after)
        # the row is the features; feature_lists no schema describes go along untouched
        return target.encode(row) + (beyond_features(record) if carry else b""), row

    return by_row


def _byte_plan(ops: Sequence[Operation], chain: Sequence[Schema]) -> RecordFn:
    if all(isinstance(op, AddField) for op in ops):
        extra = b"".join(_constant_entry(op, after) for op, after in zip(ops, chain[1:], strict=True))  # type: ignore[arg-type]
        return lambda record, _i: append_entries(record, extra)
    edits: dict[bytes, bytes | None] = {}  # a record's own key -> its new key (None: drop)
    added: dict[str, bytes] = {}  # features added by this plan -> their entry, under their current name
    for op, before, after in zip(ops, chain[:-1], chain[1:], strict=True):
        if isinstance(op, AddField):
            added[op.name] = _constant_entry(op, after)
        elif isinstance(op, DropField):
            if added.pop(op.name, None) is None:
                _edit(edits, op.name, None, before.features[op.name])
        elif isinstance(op, RenameField):
            if op.old in added:
                entry = added.pop(op.old)
                added[op.new] = rekey_entry(entry, op.new.encode())
            else:
                _edit(edits, op.old, op.new, before.features[op.old])
    extra = b"".join(added.values())
    # A valid record holds other keys only as Features with no list type, absent to TF; they
    # are dropped, or one renamed or added onto could hide the new value (protobuf keeps the last).
    known = {name.encode("utf-8") for name in chain[0].record_keys}

    def by_entries(record: bytes, _index: int) -> bytes:
        entries = split_entries(record)
        if entries is None:
            return _edit_message(record, edits, extra)
        kept = []
        for key, entry in entries:
            if key not in known:
                continue
            if key in edits:
                new = edits[key]
                if new is None:
                    continue
                entry = rekey_entry(entry, new)
            kept.append(entry)
        return features_field(b"".join(kept) + extra)

    return by_entries


def _edit(edits: dict[bytes, bytes | None], old: str, new: str | None, feat: Feature) -> None:
    # Earlier edits chain: rename a -> b, then drop b, drops a.
    sources = [k for k, v in edits.items() if v == old.encode()] or [old.encode()]
    targets = [(s, None if new is None else new.encode()) for s in sources]
    if feat.stores_shape:  # the stored shape of a tensor goes with it
        sfx = SHAPE_SUFFIX.encode()
        targets += [(s + sfx, None if new is None else new.encode() + sfx) for s, _ in targets]
    for s, t in targets:
        edits[s] = t


def _constant_entry(op: AddField, after: Schema) -> bytes:
    feat = after.features[op.name]
    entries = features_body(Schema([feat]).encode({op.name: op.value_for(feat)}))
    assert entries is not None  # the codec writes the usual layout
    return entries


def _edit_message(record: bytes, edits: Mapping[bytes, bytes | None], extra: bytes) -> bytes:
    """The protobuf route for records whose layout split_entries does not take."""
    try:
        ex = proto.Example.FromString(record)
    except Exception as e:
        raise ValidationError(f"not a valid serialized tf.train.Example: {e}") from e
    features = ex.features.feature
    moved = {}  # every edit reads the record as it was: renames may swap names
    for old in edits:
        key = old.decode("utf-8", errors="surrogateescape")
        if key in features:
            moved[old] = proto.Feature()
            moved[old].CopyFrom(features[key])
            del features[key]
    for old, value in moved.items():
        new = edits[old]
        if new is not None:
            features[new.decode()].CopyFrom(value)
    if extra:
        ex.MergeFromString(features_field(extra))
    return bytes(ex.SerializeToString())
