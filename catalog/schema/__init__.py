"""A dataset's feature schema and everything that reads or writes rows by it.

Layered inside, each module importing only the ones before it:

- ``canonical``: a schema's fingerprint from its JSON form (the standard library only);
- ``features``: one feature, its JSON declaration and the rules its values follow;
- ``encoders``: per-feature encoders, a fast path for common values over those rules;
- ``codec``: the compiled row codec (encode, check, decode one record) and inference;
- ``columnar``: batch decoding into numpy columns, a batch at a time;
- ``model``: :class:`Schema` (JSON form, validation, the TensorFlow spec);
- ``jsonrows``: rows as JSON, both ways.

The names below are what the rest of the package and users import, each loaded on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from catalog.errors import CodecError
from catalog.lazy import exports

if TYPE_CHECKING:
    from catalog.schema.codec import Kinded, decode_kinds, unknown_fields_within
    from catalog.schema.columnar import Ragged
    from catalog.schema.features import SHAPE_SUFFIX, Feature, zero
    from catalog.schema.frames import batch_rows
    from catalog.schema.jsonrows import (
        class_name,
        float32_json,
        folded_bytes,
        folded_value,
        row_from_json,
        row_to_json,
        value_from_json,
    )
    from catalog.schema.model import Schema, SchemaDiff, json_problem, to_tf_feature_spec

# Public name -> its module, loaded on first use (PEP 562): the layers above may name the
# package at start-up (commit.handles) and pay for NumPy and protobuf only when they parse a schema.
_HOMES = {
    "Kinded": "catalog.schema.codec",
    "decode_kinds": "catalog.schema.codec",
    "unknown_fields_within": "catalog.schema.codec",
    "Ragged": "catalog.schema.columnar",
    "SHAPE_SUFFIX": "catalog.schema.features",
    "Feature": "catalog.schema.features",
    "zero": "catalog.schema.features",
    "batch_rows": "catalog.schema.frames",
    "class_name": "catalog.schema.jsonrows",
    "float32_json": "catalog.schema.jsonrows",
    "folded_bytes": "catalog.schema.jsonrows",
    "folded_value": "catalog.schema.jsonrows",
    "row_from_json": "catalog.schema.jsonrows",
    "row_to_json": "catalog.schema.jsonrows",
    "value_from_json": "catalog.schema.jsonrows",
    "Schema": "catalog.schema.model",
    "SchemaDiff": "catalog.schema.model",
    "json_problem": "catalog.schema.model",
    "to_tf_feature_spec": "catalog.schema.model",
}

__all__ = [
    "SHAPE_SUFFIX",
    "CodecError",
    "Feature",
    "Kinded",
    "Ragged",
    "Schema",
    "SchemaDiff",
    "batch_rows",
    "decode_kinds",
    "float32_json",
    "json_problem",
    "row_from_json",
    "row_to_json",
    "folded_bytes",
    "folded_value",
    "class_name",
    "to_tf_feature_spec",
    "unknown_fields_within",
    "value_from_json",
    "zero",
]

__getattr__, __dir__ = exports(__name__, _HOMES)
