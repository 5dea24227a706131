"""Records to rows and columns per a plan's schema, ``columns=`` selecting features, and
decode errors naming the shard and the record's index within it (never a batch index)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from catalog.commit.plans import ReadPlan
from catalog.errors import CatalogError, CodecError, FeatureNotFoundError, UsageError, ValidationError
from catalog.readers.images import ImageDecoding, decode_column, decode_one, image_decoding
from catalog.schema import Schema

# Where the record at a batch's row i came from: (shard location, index within the shard).
Where = Callable[[int], tuple[str, int]]


def check_columns(schema: Schema, columns: str | Iterable[str] | None) -> tuple[str, ...] | None:
    """``columns`` as a tuple of feature names (None: every feature), each in the schema."""
    if columns is None:
        return None
    names = (columns,) if isinstance(columns, str) else tuple(columns)
    known = list(schema.all_features)
    for name in names:
        if name not in schema.all_features:
            raise FeatureNotFoundError(f"columns: no feature {name!r} in the schema (it has {', '.join(known)})")
    if not names:
        raise UsageError(f"columns: name at least one feature (the schema has {', '.join(known)})")
    return names


class Decoder:
    """Decodes a plan's records (its schema version's schema), keeping ``columns``; with
    ``decode_images``, image features as pixels (images.py)."""

    def __init__(
        self, plan: ReadPlan, columns: str | Iterable[str] | None, decode_images: bool = False,
        channels: int | None = None,
    ) -> None:  # fmt: skip
        self.schema = plan.schema()
        self.columns = check_columns(self.schema, columns)
        self.images: ImageDecoding | None = image_decoding(self.schema, self.columns, decode_images, channels)

    def batch(self, records: Sequence[bytes], where: Where) -> dict[str, np.ndarray]:
        """The columns of ``records`` (Schema.decode_batch), the selected features only."""
        return self._columns(lambda: self.schema.decode_batch(list(records)), lambda: records, where)

    @property
    def pad(self) -> int:
        """Zero bytes ``spans`` wants after a read's last record (Schema.spans_pad)."""
        return self.schema.spans_pad

    def spans(self, read: tuple[bytes, np.ndarray, np.ndarray], where: Where) -> dict[str, np.ndarray]:
        """``batch`` of the records a RecordReader.read_spans gave, parsed where they lie."""
        raw, starts, lengths = read

        def records() -> list[bytes]:  # only for an error's message: copied out then
            return [raw[a : a + n] for a, n in zip(starts.tolist(), lengths.tolist(), strict=True)]

        return self._columns(lambda: self.schema.decode_spans(raw, starts, lengths), records, where)

    def _columns(
        self, decode: Callable[[], dict[str, np.ndarray]], records: Callable[[], Sequence[bytes]], where: Where
    ) -> dict[str, np.ndarray]:
        """``decode()``'s columns, the selected features only; its error names the shard and the
        record within it (``records()`` gives the batch's records to find which)."""
        try:
            out = decode()
        except (ValidationError, CodecError) as e:
            raise self._named(records(), e, where) from e
        out = out if self.columns is None else {name: out[name] for name in self.columns}
        if self.images is not None:
            for feat in self.images.features:
                out[feat.name] = decode_column(out[feat.name], feat, self.images, _image_error(feat.name, where))
        return out

    def row(self, record: bytes, where: Where, i: int = 0) -> dict[str, Any]:
        """One record (row ``i`` for ``where``) as a row (Schema.decode), the selected features only."""
        try:
            out = self.schema.decode(record)
        except (ValidationError, CodecError) as e:
            raise self._named([record], e, lambda _j: where(i)) from e
        out = out if self.columns is None else {name: out[name] for name in self.columns}
        if self.images is not None:
            for feat in self.images.features:
                if out[feat.name] is not None:  # an absent optional image stays None
                    named = _image_error(feat.name, lambda _j: where(i))
                    out[feat.name] = decode_one(out[feat.name], feat, self.images, functools.partial(named, 0))
        return out

    def _named(self, records: Sequence[bytes], e: CatalogError, where: Where) -> ValidationError:
        i = e.record if isinstance(e, ValidationError) and e.record is not None else self._first_bad(records)
        err = self._error_of(records[i]) or e  # the record's own error: no batch index in it
        path, index = where(i)
        if isinstance(err, ValidationError):
            text = (f"feature {err.feature!r}: " if err.feature else "") + err.reason
        else:
            text = str(err)  # a CodecError's message names its feature itself
        named = ValidationError(f"{path}: record {index}: {text}")
        named.feature, named.record = getattr(err, "feature", None), index
        return named

    def _first_bad(self, records: Sequence[bytes]) -> int:
        return next((i for i, r in enumerate(records) if self._error_of(r) is not None), 0)

    def _error_of(self, record: bytes) -> CatalogError | None:
        try:
            self.schema.decode(record)
        except (ValidationError, CodecError) as e:
            return e
        return None


def _image_error(feature: str, where: Where) -> Callable[[int, str], ValidationError]:
    """The error for row i's image of ``feature``: one line naming its shard, record and feature."""

    def named(i: int, reason: str) -> ValidationError:
        path, index = where(i)
        error = ValidationError(f"{path}: record {index}: feature {feature!r}: {reason}")
        error.feature, error.record = feature, index
        return error

    return named
