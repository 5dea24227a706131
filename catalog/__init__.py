"""TFRecord Catalog: a manifest for TFRecord datasets.

The format layer (framing, Example codec, schema) is importable without TensorFlow
and byte-compatible with it.
"""

from catalog.api import Catalog, Dataset
from catalog.commit.values import Commit, DatasetInfo, ShardInfo
from catalog.errors import (
    CatalogError,
    CodecError,
    CorruptRecordError,
    SchemaError,
    ValidationError,
)
from catalog.schema import Schema
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
    "read_record_batches",
    "read_records",
]
