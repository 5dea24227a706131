"""TFRecord Catalog: a manifest for TFRecord datasets.

The format layer (framing, Example codec, schema) is importable without TensorFlow
and byte-compatible with it.

The public names below are loaded on first use (PEP 562): ``import catalog`` costs
nothing, so the ``catalog`` command starts without SQLAlchemy, NumPy or protobuf unless
its verb needs them, and ``from catalog import Schema`` loads the schema layer only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from catalog.lazy import exports

if TYPE_CHECKING:
    from catalog.api import Catalog, Dataset
    from catalog.commit.values import Commit, DatasetInfo, ShardInfo
    from catalog.errors import (
        CatalogError,
        CodecError,
        CorruptRecordError,
        SchemaError,
        ValidationError,
    )
    from catalog.loading import load
    from catalog.schema import Schema, to_tf_feature_spec
    from catalog.tfrecord import (
        RecordWriter,
        decode_example,
        decode_sequence_example,
        encode_example,
        encode_sequence_example,
        read_record_batches,
        read_records,
    )

__version__ = "0.1.0"

# Public name -> the module that defines it.
_HOMES = {
    "Catalog": "catalog.api",
    "Commit": "catalog.commit.values",
    "Dataset": "catalog.api",
    "load": "catalog.loading",
    "DatasetInfo": "catalog.commit.values",
    "ShardInfo": "catalog.commit.values",
    "CatalogError": "catalog.errors",
    "CodecError": "catalog.errors",
    "CorruptRecordError": "catalog.errors",
    "SchemaError": "catalog.errors",
    "ValidationError": "catalog.errors",
    "Schema": "catalog.schema",
    "to_tf_feature_spec": "catalog.schema",  # Schema.feature_spec() as tf.io objects (make_batched_features_dataset)
    "RecordWriter": "catalog.tfrecord",
    "decode_example": "catalog.tfrecord",
    "decode_sequence_example": "catalog.tfrecord",
    "encode_example": "catalog.tfrecord",
    "encode_sequence_example": "catalog.tfrecord",
    "read_record_batches": "catalog.tfrecord",
    "read_records": "catalog.tfrecord",
}

__all__ = [
    "Catalog",
    "CatalogError",
    "Commit",
    "Dataset",
    "DatasetInfo",
    "ShardInfo",
    "CodecError",
    "CorruptRecordError",
    "RecordWriter",
    "Schema",
    "SchemaError",
    "ValidationError",
    "decode_example",
    "decode_sequence_example",
    "encode_example",
    "encode_sequence_example",
    "load",
    "read_record_batches",
    "read_records",
    "to_tf_feature_spec",
]


__getattr__, __dir__ = exports(__name__, _HOMES)
