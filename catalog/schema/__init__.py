"""A dataset's feature schema and everything that reads or writes rows by it.

Layered inside, each module importing only the ones before it:

- ``features``: one feature, its JSON declaration and the rules its values follow;
- ``encoders``: per-feature encoders, a fast path for common values over those rules;
- ``codec``: the compiled row codec (encode, check, decode one record) and inference;
- ``columnar``: batch decoding into numpy columns, a batch at a time;
- ``model``: :class:`Schema` (JSON form, validation, the TensorFlow spec);
- ``jsonrows``: rows as JSON, both ways.

The names below are what the rest of the package and users import.
"""

from catalog.errors import CodecError
from catalog.schema.codec import Kinded, decode_kinds, unknown_fields_within
from catalog.schema.columnar import Ragged
from catalog.schema.features import SHAPE_SUFFIX, Feature, zero
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

__all__ = [
    "SHAPE_SUFFIX",
    "CodecError",
    "Feature",
    "Kinded",
    "Ragged",
    "Schema",
    "SchemaDiff",
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
