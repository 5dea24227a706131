"""Per-schema compiled row codec: encode rows, check and decode records, infer features.

Kept apart from ``features.py`` (the rules) and ``model.py`` (the JSON form) because this
is the hot path: each feature gets its own small encoder and decoder chosen once. The
per-record decoding here is the reference that the batch decoder (``columnar.py``) falls
back to for every record it does not take.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from catalog.errors import CodecError, ValidationError
from catalog.schema.encoders import feature_encoder
from catalog.schema.features import SHAPE_SUFFIX, Feature, ListTally
from catalog.schema.frames import as_lists, python_values
from catalog.schema.packing import encode_plain
from catalog.tfrecord import example as wire
from catalog.tfrecord import native, proto
from catalog.words import counted

# What columnar encoding takes: rows as one sequence per feature (None: missing); and fills
# in, per feature, the rows whose default went in and each row's encoded map entry.
ColumnValues = Mapping[str, Sequence[Any]]
FilledRows = dict[str, list[int]]
Entries = dict[str, Sequence[bytes]]

Kinded = dict[str, tuple[str | None, list[Any]]]


def decode_kinds(data: bytes) -> Kinded:
    """Parse a serialized Example to ``{name: (wire kind, values)}``.

    A ``Feature`` with no list type set (``tf.train.Feature()``, TFX's missing value) is
    left out: TensorFlow treats it as absent, so a default fills it.
    """
    fast = native.parse_example(data)  # the usual layout, in C; anything else goes to protobuf
    return fast if fast is not None else kinds_by_protobuf(data)


def kinds_by_protobuf(data: bytes) -> Kinded:
    """:func:`decode_kinds` by protobuf's own parse: any layout, and its errors."""
    try:
        ex = proto.Example.FromString(data)
    except Exception as e:  # upb raises DecodeError, but be safe against any runtime
        raise CodecError(f"not a valid serialized tf.train.Example: {e}") from e
    ex.DiscardUnknownFields()
    if ex.ByteSize() != len(data):  # not an Example as serializers write it: look closer
        check_message(data)
    out: Kinded = {}
    for name, feat in ex.features.feature.items():
        kind = feat.WhichOneof("kind")
        if kind is not None:
            out[name] = (kind, list(getattr(feat, kind).value))
    return out


def check_message(data: bytes) -> str:
    """EXAMPLE or SEQUENCE_EXAMPLE (its context is what the schema describes), by the
    top-level fields; CodecError for any other message (a TensorFlow event file parses as
    an empty Example). Unknown fields deeper down are protobuf's and TF's business: kept."""
    kind = wire.message_kind(data)
    if kind == wire.SEQUENCE_EXAMPLE:
        try:
            proto.SequenceExample.FromString(data)  # its feature_lists must parse too
        except Exception as e:
            raise CodecError(f"not a valid serialized {kind}: {e}") from e
    return kind


def unknown_fields_within(data: bytes) -> bool:
    """Whether an Example's features hold fields it does not define (beyond SequenceExample's)."""
    ex = proto.Example.FromString(data)
    size = ex.ByteSize()
    ex.DiscardUnknownFields()
    return size - ex.ByteSize() != len(wire.beyond_features(data))


def _encode_column(
    name: str, encoder: Any, default: bytes | None, column: Sequence[Any], filled: list[int] | None
) -> list[bytes]:
    out: list[bytes] = []
    append = out.append
    try:
        for value in column:
            if value is not None:
                append(encoder(value))
            elif default is not None:
                if filled is not None and default:  # a default's entry (b"": an optional feature, absent)
                    filled.append(len(out))
                append(default)
            else:
                raise ValidationError("missing (the feature has no default)", name)
    except ValidationError as e:
        raise ValidationError(e.reason, e.feature or name, record=len(out)) from None
    return out


class _Entries(Sequence[bytes]):
    """A feature's entries, a row's each, encoded the first time they are asked for (the
    statistics seldom ask: they take plain columns as they are)."""

    def __init__(self, encoder: Any, column: Sequence[Any]) -> None:
        self._encoder, self._column = encoder, column
        self._made: list[bytes] | None = None

    def _all(self) -> list[bytes]:
        if self._made is None:
            # Python values, as the generic path's
            self._made = list(map(self._encoder, python_values(self._column)))
        return self._made

    def __len__(self) -> int:
        return len(self._column)

    def __getitem__(self, i: Any) -> Any:
        return self._all()[i]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._all())


def kinds_from_values(decoded: Mapping[str, list[Any]]) -> Kinded:
    """Recover wire kinds from a ``decode_example`` dict (empty lists have no kind)."""
    out: Kinded = {}
    for name, values in decoded.items():
        vals = list(values)
        if not vals:
            out[name] = (None, vals)
        elif isinstance(vals[0], bytes):
            out[name] = (wire.BYTES, vals)
        elif isinstance(vals[0], float):
            out[name] = (wire.FLOAT, vals)
        else:
            out[name] = (wire.INT64, vals)
    return out


class RowCodec:
    """Encoders and decoders for one schema's features, built once."""

    def __init__(self, features: Mapping[str, Feature]) -> None:
        self.features = features
        self.encoders = {name: feature_encoder(f) for name, f in self.features.items()}
        self.default_entries: dict[str, bytes] = {
            name: self.encoders[name](f.default) for name, f in self.features.items() if f.has_default
        }
        for name, f in self.features.items():
            if f.optional:
                self.default_entries[name] = b""  # absent: no entry at all
        # (name, encoder, default entry or None), in schema order: the encode loop's plan
        self.plan = [(name, enc, self.default_entries.get(name)) for name, enc in self.encoders.items()]
        shapes = {f.name + SHAPE_SUFFIX for f in self.features.values() if f.stores_shape}
        self.allowed = frozenset(self.features) | shapes  # every key a record may hold
        # decode's quick path: a reader a feature, None where only the checked path will do
        readers = [(name, _quick_reader(f)) for name, f in self.features.items()]
        self.quick: list[tuple[str, Callable[[Any], Any]]] | None = (
            [(name, r) for name, r in readers if r is not None] if all(r for _, r in readers) else None
        )

    # ---- encoding
    def encode(self, row: Mapping[str, Any], filled: list[str] | None = None) -> bytes:
        """``row``'s record; ``filled``, when given, receives the features whose default went
        in (the statistics count them as filled, not present)."""
        if type(row) is not dict and not isinstance(row, Mapping):
            raise ValidationError(f"a row is a mapping of feature name to value, got {type(row).__name__}")
        get = row.get
        entries: list[bytes] = []
        append = entries.append
        present = 0
        for name, encoder, default in self.plan:
            value = get(name)
            if value is not None:
                append(encoder(value))
                present += 1
            elif default is not None:
                append(default)
                present += name in row
                if filled is not None and default:  # a default's entry (b"": an optional feature, absent)
                    filled.append(name)
            else:
                raise ValidationError("missing (the feature has no default)", name)
        if present != len(row):
            extra = next(k for k in row if k not in self.features)
            raise ValidationError("not in the schema", str(extra))
        return wire.features_field(b"".join(entries))

    def encode_columns(
        self,
        columns: ColumnValues,
        n: int,
        filled: FilledRows | None = None,
        entries: Entries | None = None,
        framed: list[bytes] | None = None,
    ) -> Sequence[bytes]:
        """Encode ``n`` rows given as one sequence per feature (None: missing), a feature at a
        time: each encoder runs over its whole column, then each record joins its entries. A
        ValidationError names the row (``record``) and the feature. ``filled``, when given,
        receives per feature the rows whose default went in; ``entries`` each feature's
        entries, a row's each (the statistics decode a few features from them, not records);
        ``framed`` the records framed as TFRecord, when the fast path made them (else nothing)."""
        for name in columns:
            if name not in self.features:
                raise ValidationError("not in the schema", str(name), record=0)
        plain = encode_plain(self, columns, n, framed)  # every value plain: numpy lays the records out
        if plain is not None:
            self._plain_extras(columns, filled, entries)
            return plain
        columns = as_lists(columns)  # the encoders judge Python values (arrays: see column_batches)
        per_feature: list[Sequence[bytes]] = []
        for name, encoder, default in self.plan:
            column = columns.get(name)
            rows = None if filled is None or not default else filled.setdefault(name, [])
            if column is None:
                if default is None:
                    raise ValidationError("missing (the feature has no default)", name, record=0)
                per_feature.append([default] * n)
                if rows is not None:
                    rows.extend(range(n))
            else:
                per_feature.append(_encode_column(name, encoder, default, column, rows))
            if entries is not None:
                entries[name] = per_feature[-1]
        frame = wire.features_field
        return [frame(b"".join(parts)) for parts in zip(*per_feature, strict=True)] if per_feature else [frame(b"")] * n

    def _plain_extras(self, columns: ColumnValues, filled: FilledRows | None, entries: Entries | None) -> None:
        """What encode_columns reports besides the records, for a batch encode_plain made: no
        default went in (every value was there); the entries, made when asked for."""
        for name, encoder, default in self.plan:
            if filled is not None and default:
                filled.setdefault(name, [])
            if entries is not None:
                entries[name] = _Entries(encoder, columns[name])

    # ---- checking records
    def check_decoded(self, decoded: Mapping[str, Any]) -> None:
        kinded = self._as_kinded(decoded)
        for feat in self.features.values():
            self._check_feature(feat, kinded)
        for name in kinded:
            if name not in self.allowed:
                raise ValidationError("not in the schema", name)

    @staticmethod
    def _as_kinded(decoded: Mapping[str, Any]) -> Kinded:
        first = next(iter(decoded.values()), None)
        if isinstance(first, tuple):
            return dict(decoded)
        return kinds_from_values(decoded)

    def _check_feature(self, feat: Feature, kinded: Kinded) -> list[Any] | None:
        """Check one feature of a record; return its values, or None when absent and defaulted."""
        got = kinded.get(feat.name)
        if got is None:
            if feat.may_be_absent or feat.is_varlen:  # TF's VarLenFeature reads an absent list as empty
                return None
            raise ValidationError("missing (the feature has no default)", feat.name)
        kind, values = got
        if kind is not None and kind != feat.wire_kind:
            raise ValidationError(f"stored as {kind}, the schema wants {feat.wire_kind} ({feat.dtype})", feat.name)
        if feat.tensor:
            self._check_tensor(feat, values, kinded)
            return values
        n = len(values)
        if feat.is_scalar and n != 1:
            raise ValidationError(f"expected exactly one value, got {n}", feat.name)
        if not feat.is_varlen and not feat.is_scalar and n != feat.size:
            want = counted(feat.size or 0, "value")  # (a fixed shape: its size is a number)
            raise ValidationError(f"expected {want} for shape {list(feat.shape)}, got {n}", feat.name)
        if feat.dtype == "string":
            for v in values:
                try:
                    v.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise ValidationError(f"not valid UTF-8 text at byte {e.start}", feat.name) from e
        return values

    def _check_tensor(self, feat: Feature, values: list[Any], kinded: Kinded) -> tuple[int, ...]:
        if len(values) != 1:
            raise ValidationError(f"a tensor is stored as one bytes value, got {len(values)}", feat.name)
        shape = self._tensor_shape(feat, kinded)
        expected = int(np.prod(shape, dtype=np.int64)) * feat.np_dtype.itemsize
        if len(values[0]) != expected:
            raise ValidationError(
                f"tensor holds {counted(len(values[0]), 'byte')}, shape {list(shape)} of {feat.dtype} needs {expected}",
                feat.name,
            )
        return shape

    @staticmethod
    def _tensor_shape(feat: Feature, kinded: Kinded) -> tuple[int, ...]:
        if not feat.stores_shape:
            return feat.shape  # type: ignore[return-value]
        got = kinded.get(feat.name + SHAPE_SUFFIX)
        if got is None or got[0] not in (wire.INT64, None):
            raise ValidationError(
                f"missing int64 feature '{feat.name}{SHAPE_SUFFIX}' for a tensor of unknown shape", feat.name
            )
        shape = tuple(got[1])
        if len(shape) != len(feat.shape) or any(d < 0 for d in shape):
            raise ValidationError(f"stored shape {list(shape)} does not fit {list(feat.shape)}", feat.name)
        if any(want is not None and want != d for want, d in zip(feat.shape, shape, strict=True)):
            raise ValidationError(f"stored shape {list(shape)} does not fit {list(feat.shape)}", feat.name)
        return shape

    # ---- decoding
    def decode(self, data: bytes) -> dict[str, Any]:
        kinded = decode_kinds(data)
        if self.quick is not None and kinded.keys() <= self.features.keys():
            row: dict[str, Any] = {}
            for name, read in self.quick:
                value = read(kinded.get(name))
                if value is _CHECK:
                    break
                row[name] = value
            else:
                return row
        return self._decode_checked(kinded)

    def _decode_checked(self, kinded: Kinded) -> dict[str, Any]:
        """decode's every rule, each error as the checks say it."""
        self.check_decoded(kinded)
        row: dict[str, Any] = {}
        for name, feat in self.features.items():
            got = kinded.get(name)
            if got is None and feat.optional:
                row[name] = None
            elif got is None:
                row[name] = feat.default.copy() if feat.tensor else _row_value(feat, _default_values(feat))
            elif feat.tensor:
                shape = self._tensor_shape(feat, kinded)
                row[name] = np.frombuffer(got[1][0], dtype=feat.np_dtype).reshape(shape).copy()
            else:
                row[name] = _row_value(feat, got[1])
        return row

    def decode_batch_generic(
        self, records: Iterable[bytes], indices: list[int] | None = None, absent: dict[str, np.ndarray] | None = None
    ) -> dict[str, np.ndarray]:
        """The per-record reference for :func:`columnar.decode_batch`; ``indices`` number the
        records in errors; ``absent`` receives, per feature with a default, which lacked it."""
        columns: dict[str, list[Any]] = {name: [] for name in self.features}
        shapes: dict[str, list[tuple[int, ...]]] = {name: [] for name, f in self.features.items() if f.stores_shape}
        count = 0
        for i, data in enumerate(records):
            kinded = decode_kinds(data)
            try:
                self.check_decoded(kinded)
            except ValidationError as e:
                raise ValidationError(e.reason, e.feature, i if indices is None else indices[i]) from e
            for name, feat in self.features.items():
                got = kinded.get(name)
                columns[name].append(got[1] if got is not None else None)
                if feat.stores_shape and got is not None:
                    shapes[name].append(self._tensor_shape(feat, kinded))
            count += 1
        if absent is not None:
            absent.update(
                (name, np.array([v is None for v in columns[name]], dtype=bool))
                for name, f in self.features.items()
                if f.has_default
            )
        return {name: build_column(f, columns[name], shapes.get(name), count) for name, f in self.features.items()}


_CHECK = object()  # a quick reader's "not mine: go the checked way"


def _quick_reader(feat: Feature) -> Callable[[Any], Any] | None:
    """A reader of one feature's ``(kind, values)`` (None: absent) into its row value, for
    values in the plain form only: present, of the kind and count wanted, text valid. It
    answers _CHECK for anything else, and decode then goes the checked way (which raises the
    error, fills a default, reads a stored shape). None: a feature only that way will do."""
    if feat.optional or feat.stores_shape:
        return None
    kind, size = feat.wire_kind, feat.size
    if feat.tensor:
        dtype, shape, nbytes = feat.np_dtype, feat.shape, (size or 0) * feat.np_dtype.itemsize

        def tensor(got: Any) -> Any:
            if got is None or got[0] != kind or len(got[1]) != 1 or len(got[1][0]) != nbytes:
                return _CHECK
            return np.frombuffer(got[1][0], dtype=dtype).reshape(shape).copy()

        return tensor
    if feat.dtype == "string":
        return _text_reader(feat)
    if not feat.is_scalar:
        return _list_reader(feat)

    def scalar(got: Any) -> Any:
        return got[1][0] if got is not None and got[0] == kind and len(got[1]) == 1 else _CHECK

    return scalar


def _text_reader(feat: Feature) -> Callable[[Any], Any] | None:
    kind, scalar = feat.wire_kind, feat.is_scalar
    if not (scalar or feat.is_varlen):
        return None

    def text(got: Any) -> Any:
        if got is None or got[0] != kind or (scalar and len(got[1]) != 1):
            return _CHECK
        try:
            return got[1][0].decode("utf-8") if scalar else [v.decode("utf-8") for v in got[1]]
        except UnicodeDecodeError:
            return _CHECK

    return text


def _list_reader(feat: Feature) -> Callable[[Any], Any]:
    kind, size, shape, dtype = feat.wire_kind, feat.size, feat.shape, feat.np_dtype
    numeric = dtype.kind != "O"

    def values(got: Any) -> Any:
        if got is None or got[0] != kind or (size is not None and len(got[1]) != size):
            return _CHECK
        if size is None:  # variable length
            return np.array(got[1], dtype=dtype) if numeric else got[1]
        return np.array(got[1], dtype=dtype if numeric else object).reshape(shape)

    return values


def _row_value(feat: Feature, values: list[Any]) -> Any:
    if feat.dtype == "string":
        values = [v.decode("utf-8") for v in values]
    if feat.is_scalar:
        return values[0]
    if feat.dtype in ("string", "bytes"):
        return values if feat.is_varlen else np.array(values, dtype=object).reshape(feat.shape)
    arr = np.array(values, dtype=feat.np_dtype)
    return arr if feat.is_varlen else arr.reshape(feat.shape)


def _default_values(feat: Feature) -> list[Any]:
    if not feat.has_default:
        return []  # a variable-length feature with no default: absent reads as empty
    d = feat.default
    if isinstance(d, np.ndarray):
        return list(d.reshape(-1).tolist())
    values = d if isinstance(d, list) else [d]
    return [v.encode("utf-8") if isinstance(v, str) else v for v in values]  # the wire form


def build_column(
    feat: Feature, values: list[list[Any] | None], shapes: list[tuple[int, ...]] | None, n: int
) -> np.ndarray:
    """The (n, ...) column of one feature from each record's wire values (None: absent),
    defaults filled, as ``decode_batch`` returns it; ``shapes``: the stored shapes of the
    present tensors of unknown dimensions, in order."""
    if feat.optional:  # one object per record, None where absent: no dtype holds "no value"
        out = np.empty(n, dtype=object)
        stored = iter(shapes or [])  # the shapes of the present tensors, in order
        for i, v in enumerate(values):
            if v is not None and feat.tensor:
                shape = next(stored) if feat.stores_shape else feat.shape
                out[i] = np.frombuffer(bytearray(v[0]), dtype=feat.np_dtype).reshape(shape)
            elif v is not None:
                out[i] = _row_value(feat, v)
        return out
    if feat.tensor:
        return _tensor_column(feat, values, shapes, n)
    fill = _default_values(feat) if feat.has_default else []
    filled = [v if v is not None else fill for v in values]
    if feat.dtype == "string":
        filled = [[s.decode("utf-8") for s in v] for v in filled]
    if feat.is_varlen:
        out = np.empty(n, dtype=object)
        dtype = feat.np_dtype
        for i, v in enumerate(filled):
            out[i] = np.array(v, dtype=dtype) if dtype.kind != "O" else v
        return out
    dtype = feat.np_dtype
    if feat.is_scalar:
        return np.array([v[0] for v in filled], dtype=dtype)
    flat = [x for v in filled for x in v]
    return np.array(flat, dtype=dtype).reshape((n, *feat.shape))


def _tensor_column(
    feat: Feature, values: list[list[Any] | None], shapes: list[tuple[int, ...]] | None, n: int
) -> np.ndarray:
    dtype = feat.np_dtype
    if shapes is None:
        default_raw = feat.default.tobytes() if feat.has_default else b""
        buf = bytearray().join([v[0] if v is not None else default_raw for v in values])
        return np.frombuffer(buf, dtype=dtype).reshape((n, *feat.shape))
    out = np.empty(n, dtype=object)
    for i, (v, shape) in enumerate(zip(values, shapes, strict=True)):
        out[i] = np.frombuffer(bytearray(v[0]) if v is not None else b"", dtype=dtype).reshape(shape)
    return out


# --------------------------------------------------------------------------- inference


def infer_features(records: Iterable[bytes | Mapping[str, Any]]) -> list[Feature]:
    """Infer features from sample records: dtype from the wire kind, shape from counts."""
    seen: dict[str, ListTally] = {}
    total = 0
    rows = False
    for rec in records:
        if isinstance(rec, (bytes, bytearray, memoryview)):
            kinded = decode_kinds(rec)
        else:
            rows = True
            kinded = RowCodec._as_kinded(rec)
        total += 1
        for name, (kind, values) in kinded.items():
            seen.setdefault(name, ListTally()).add(kind, values)
    # A row's keys have the order its author gave; an Example's features are a protobuf map,
    # whose order on the wire is the writer's hash order (TensorFlow's differs from run to
    # run): by name, so the same records always imply the same schema.
    names = list(seen) if rows else sorted(seen)
    # missing from some records: optional, never a made-up default (a 0 is not "no value")
    return [seen[name].feature(name, optional=seen[name].present < total) for name in names]
