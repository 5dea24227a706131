"""SequenceExample datasets: a schema's ``"sequence_features"``, each declaring one step of a
``feature_lists`` entry (TFX's sequence data, NLP tokens, video frames).

A ``tf.train.SequenceExample`` is ``context`` (field 1, the same ``Features`` message as an
Example's field 1: its bytes are an Example of the context features) and ``feature_lists``
(field 2: name -> a list of ``Feature`` steps). A sequence feature declares one step as a
list feature does (``dtype``, ``shape``: ``[]`` one value, ``[k, ...]`` fixed, ``[null]``
any number; ``names``, ``description``); a record holds any number of steps of it, zero when
the record has no such list. In a row a sequence feature is its steps: a scalar step makes a
1-D array (a list of str for strings), a fixed step an array ``(steps, *shape)``, a
variable-length step a list of 1-D arrays (lists for strings).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from catalog.errors import CodecError, SchemaError, ValidationError
from catalog.schema.features import Feature, ListTally, convert, list_feature_bytes, parse_feature
from catalog.tfrecord import example as wire
from catalog.tfrecord import proto
from catalog.words import counted

STEP_KEYS = {"dtype", "shape", "names", "description"}


def parse_step(name: str, raw: Any) -> Feature:
    """One sequence feature's declaration: a list feature's dtype and shape (per step)."""
    if isinstance(raw, dict):
        unknown = set(raw) - STEP_KEYS
        if unknown:
            raise SchemaError(
                f"a sequence feature declares one step ({', '.join(sorted(STEP_KEYS))}); "
                f"not {', '.join(sorted(unknown))}",
                name,
            )
    return parse_feature(name, raw)


def is_sequence_record(data: bytes) -> bool:
    """Whether a record has a top-level field 2 (feature_lists): a SequenceExample."""
    return wire.message_kind(data) == wire.SEQUENCE_EXAMPLE


def split_record(data: bytes) -> tuple[bytes, Any]:
    """A SequenceExample's context as Example bytes (its field-1 segments, which merge as an
    Example's features do) and its parsed ``FeatureLists``."""
    fields = wire.top_level_fields(data)
    for number, wtype, start, _end in fields:
        if wtype != 2 or number not in (1, 2):
            raise CodecError(f"not a tf.train.SequenceExample: top-level field {number} at byte {start}")
    context = b"".join(data[a:b] for number, _w, a, b in fields if number == 1)
    lists = proto.FeatureLists()
    try:
        for number, _w, a, b in fields:
            if number == 2:
                _n, at = wire.read_varint(data, a + 1)
                lists.MergeFromString(data[at:b])
    except Exception as e:  # protobuf's DecodeError, or a message nested past its limit
        raise CodecError(f"not a tf.train.SequenceExample: {e}") from e
    return context, lists


class SequenceCodec:
    """Encodes and decodes the feature_lists of one schema's sequence features."""

    def __init__(self, features: Mapping[str, Feature]) -> None:
        self.features = dict(features)
        self._keys = {name: wire.length_delimited(wire.TAG_1, name.encode("utf-8")) for name in self.features}

    # ---- encoding
    def encode(self, row: Mapping[str, Any]) -> bytes:
        """The ``feature_lists`` field of a row (nothing when it has no steps of any feature)."""
        entries = []
        for name, feat in self.features.items():
            steps = row.get(name)
            if steps is None:
                continue  # no such list: zero steps
            body = b"".join(wire.length_delimited(wire.TAG_1, list_feature_bytes(feat, s)) for s in _steps(feat, steps))
            entry = self._keys[name] + wire.length_delimited(wire.TAG_2, body)  # key, then the FeatureList
            entries.append(wire.length_delimited(wire.TAG_1, entry))
        return wire.length_delimited(wire.TAG_2, b"".join(entries)) if entries else b""

    def validate(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The sequence features of a row, checked, as :meth:`decode` gives them back."""
        return {name: _value(feat, [_check_step(feat, s) for s in _steps(feat, row.get(name))])
                for name, feat in self.features.items()}  # fmt: skip

    # ---- decoding
    def decode(self, lists: Any) -> dict[str, Any]:
        """Every sequence feature of a parsed FeatureLists: its steps, checked against the schema."""
        for name in lists.feature_list:
            if name not in self.features:
                raise ValidationError("a feature list not in the schema's sequence features", name)
        out = {}
        for name, feat in self.features.items():
            steps = lists.feature_list[name].feature if name in lists.feature_list else []
            out[name] = _value(feat, [_decoded_step(feat, f, i) for i, f in enumerate(steps)])
        return out


def _steps(feat: Feature, steps: Any) -> Iterable[Any]:
    if steps is None:
        return []
    if isinstance(steps, np.ndarray) and steps.ndim >= 1:
        return list(steps)
    if isinstance(steps, (list, tuple)):
        return steps
    raise ValidationError(f"a sequence feature's value is a list of steps, got {type(steps).__name__}", feat.name)


def _check_step(feat: Feature, value: Any) -> list[Any]:
    v = convert(feat, value)
    return [v] if feat.is_scalar else list(v)


def _decoded_step(feat: Feature, f: Any, index: int) -> list[Any]:
    kind = f.WhichOneof("kind")
    values = list(getattr(f, kind).value) if kind is not None else []
    if kind is not None and kind != feat.wire_kind:  # the oneof's name is the wire kind
        raise ValidationError(f"step {index}: expected {feat.dtype}, got {kind}", feat.name)
    if feat.dtype == "string":
        try:
            values = [v.decode("utf-8") for v in values]
        except UnicodeDecodeError as e:
            raise ValidationError(f"step {index}: not valid UTF-8 text at byte {e.start}", feat.name) from e
    want = 1 if feat.is_scalar else feat.size
    if not feat.is_varlen and want is not None and len(values) != want:  # (fixed: a size)
        raise ValidationError(f"step {index}: expected {counted(want, 'value')}, got {len(values)}", feat.name)
    return values


def _value(feat: Feature, steps: list[list[Any]]) -> Any:
    """A row's value of a sequence feature from its steps' flat values."""
    text = feat.dtype in ("string", "bytes")
    if feat.is_varlen:
        return [list(s) if text else np.array(s, dtype=feat.np_dtype) for s in steps]
    flat = [v for s in steps for v in s]
    if text:
        return flat if feat.is_scalar else [list(s) for s in steps]
    arr = np.array(flat, dtype=feat.np_dtype)
    return arr if feat.is_scalar else arr.reshape((len(steps), *feat.shape))


def sequence_spec(features: Mapping[str, Feature]) -> dict[str, dict[str, Any]]:
    """The ``tf.io.parse_sequence_example`` sequence spec as plain data (see model.to_tf_feature_spec)."""
    spec: dict[str, dict[str, Any]] = {}
    for name, f in features.items():
        tf_dtype = "string" if f.dtype in ("string", "bytes") else f.dtype
        if f.is_varlen:
            spec[name] = {"kind": "RaggedFeature", "dtype": tf_dtype}
        else:
            spec[name] = {"kind": "FixedLenSequenceFeature", "shape": list(f.shape), "dtype": tf_dtype}
    return spec


class StepInference:
    """The sequence features of SequenceExample records, inferred as they pass: each feature
    list's steps tallied as an Example's lists are (features.ListTally)."""

    def __init__(self) -> None:
        self.seen: dict[str, ListTally] = {}

    def add(self, record: Any) -> None:
        """Tally one record (bytes: only a SequenceExample has feature lists)."""
        if not isinstance(record, (bytes, bytearray, memoryview)) or not is_sequence_record(bytes(record)):
            return
        _context, lists = split_record(bytes(record))
        for name, flist in lists.feature_list.items():
            tally = self.seen.setdefault(name, ListTally())
            for f in flist.feature:
                kind = f.WhichOneof("kind")
                tally.add(kind, list(getattr(f, kind).value) if kind is not None else [])

    def features(self) -> list[Feature]:
        # by name: feature_lists is a protobuf map, in the writer's hash order (codec.infer_features)
        return [self.seen[name].feature(name, what="steps stored") for name in sorted(self.seen)]


LENGTH_SUFFIX = "/length"  # a padded sequence feature's steps per record (pad_batch)


def pad_batch(features: Mapping[str, Feature], batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A batch with each sequence feature's ragged column (one value per record) padded to the
    batch's most steps: ``(records, steps, *step)`` with zeros ("" or b"" for text; a
    variable-length step padded to the batch's longest too), and ``<name>/length`` beside it."""
    out = dict(batch)
    for name, column in batch.items():
        feat = features.get(name)
        if feat is None:
            continue
        steps = [_as_steps(feat, v) for v in column]
        lengths = np.array([len(s) for s in steps], dtype=np.int64)
        out[name] = _padded(feat, steps, int(lengths.max(initial=0)))
        out[name + LENGTH_SUFFIX] = lengths
    return out


def _as_steps(feat: Feature, value: Any) -> list[Any]:
    return list(value) if not isinstance(value, np.ndarray) else list(value) if value.ndim else []


def _padded(feat: Feature, steps: list[list[Any]], longest: int) -> np.ndarray:
    text = feat.dtype in ("string", "bytes")
    dtype = np.dtype(object) if text else feat.np_dtype
    fill = ("" if feat.dtype == "string" else b"") if text else 0
    inner: tuple[int, ...] = ()
    if feat.is_varlen:
        inner = (max((len(s) for record in steps for s in record), default=0),)
    elif not feat.is_scalar:
        inner = tuple(d for d in feat.shape if d is not None)
    out = np.full((len(steps), longest, *inner), fill, dtype=dtype)
    for i, record in enumerate(steps):
        for t, step in enumerate(record):
            if feat.is_varlen:
                out[i, t, : len(step)] = step
            else:
                out[i, t] = step
    return out
