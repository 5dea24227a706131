"""The TFRecord file format: where records come from (`sources`), record framing (`framing`)
and the tf.train.Example codec (`example`, over the private protobuf pool in `proto`)."""

from catalog.tfrecord.example import (
    decode_example,
    decode_sequence_example,
    encode_example,
    encode_sequence_example,
)
from catalog.tfrecord.framing import (
    RecordWriter,
    detect_compression,
    masked_crc32c,
    read_record_batches,
    read_records,
)

__all__ = [
    "RecordWriter",
    "decode_example",
    "decode_sequence_example",
    "detect_compression",
    "encode_example",
    "encode_sequence_example",
    "masked_crc32c",
    "read_record_batches",
    "read_records",
]
