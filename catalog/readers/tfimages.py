"""``ds.tf_dataset(decode_images=True)``: image features decoded inside the graph, by
``tf.io.decode_image(..., expand_animations=False)``, with images.py's rules in TensorFlow's ops
(the same pixels as the other readers'; to_channels' conversions, as TensorFlow's decoders do
not convert every format to every count), so that ``model.fit`` gets uint8 tensors:
``[batch, H, W, C]`` with a static shape when the schema fixes it (and ``channels`` or the
schema the channels), else a RaggedTensor ``[batch, (H), (W), C]`` (``[batch, (H), (W), (C)]``
when neither ``channels`` nor the schema gives the channels, so that each file keeps its own).

Each record's images are decoded apart, in a parallel map before the records are batched (as
TFDS decodes): a batch decoded in one ``map_fn`` kept one core busy for all its images. Each
image's ops are few: the header's size is read without a branch (a ``tf.cond`` or ``tf.case``
is a function call a record, and costs the pipeline's making and each iterator's start), by one
matrix product over its first bytes, picked by its format's magic bytes; 3 channels are asked
of the format's decoder itself. Optional image features (none or one a record) are decoded in
the batch, where the channels of a record without one need not be known.

Bounded as the other readers are: each image's header (width and height; JPEG's by
``tf.io.extract_jpeg_shape``) is checked against the pixel limit and the schema's height and
width before ``decode_image`` allocates anything. A graph cannot name a record's shard: its
errors (``InvalidArgumentError``) name the dataset and the feature.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from catalog.readers.images import LUMA, ImageDecoding, pixel_limit
from catalog.schema import Feature

HEAD = 32  # the bytes of a file its header's size is read from (zeros past a short file's end)
# Each format's magic bytes (offset, bytes), in the order of SIZES' pairs; JPEG last (its size
# is read by TensorFlow's op). No two formats' magic bytes can both match.
MAGIC = (
    ((0, b"\x89PNG"),),
    ((0, b"GIF8"),),
    ((0, b"BM"),),
    ((0, b"RIFF"), (8, b"WEBPVP8 ")),  # WebP: lossy
    ((0, b"RIFF"), (8, b"WEBPVP8L")),  # lossless
    ((0, b"RIFF"), (8, b"WEBPVP8X")),  # extended
    ((0, b"\xff\xd8\xff"),),
)
# (width, height) of each format but JPEG: (offset, bytes, little-endian) of the header field,
# then (divisor, modulus, addend): a VP8 size is 14 bits of 2 bytes, a VP8L's two 14-bit
# fields of 4 bytes less one, a VP8X's 3 bytes less one.
_WHOLE = (1, 1 << 40, 0)
SIZES = (
    ((16, 4, False), _WHOLE), ((20, 4, False), _WHOLE),
    ((6, 2, True), _WHOLE), ((8, 2, True), _WHOLE),
    ((18, 4, True), _WHOLE), ((22, 4, True), _WHOLE),
    ((26, 2, True), (1, 1 << 14, 0)), ((28, 2, True), (1, 1 << 14, 0)),
    ((21, 4, True), (1, 1 << 14, 1)), ((21, 4, True), (1 << 14, 1 << 14, 1)),
    ((24, 3, True), (1, 1 << 24, 1)), ((27, 3, True), (1, 1 << 24, 1)),
)  # fmt: skip
BMP = (4, 5)  # a BMP's fields are signed: its height is negative for rows stored top down
# The smallest header extract_jpeg_shape reads (start of image, a 1x1 frame, start of scan):
# what it is given in place of a file of another format, so that no branch is needed.
_STAND_IN_JPEG = (
    b"\xff\xd8"
    + b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, 1, 1, 1) + b"\x01\x11\x00"
    + b"\xff\xda" + struct.pack(">HB", 8, 1) + b"\x01\x00\x00\x3f\x00"
)  # fmt: skip


def record_decoder(tf: Any, decoding: ImageDecoding, spec: dict[str, Any], sequence: bool, where: str) -> Any:
    """A ``map`` function of one serialized record: {"record": it, "images": its image features
    that are not optional, decoded (:func:`image_value`)}. ``spec`` parses those features (a
    SequenceExample's context when ``sequence``); ``where``: the read, for errors."""

    def decoded(serialized: Any) -> dict[str, Any]:
        if sequence:
            parsed, _ = tf.io.parse_single_sequence_example(serialized, context_features=spec)
        else:
            parsed = tf.io.parse_single_example(serialized, spec)
        images = {f.name: image_value(tf, f, decoding, parsed[f.name], where) for f in per_record(decoding)}
        return {"record": serialized, "images": images}

    return tf.autograph.experimental.do_not_convert(decoded)


def per_record(decoding: ImageDecoding) -> list[Feature]:
    """The image features decoded per record: all but the optional ones (see optional_column)."""
    return [f for f in decoding.features if not f.optional]


def image_value(tf: Any, feat: Feature, decoding: ImageDecoding, data: Any, where: str) -> Any:
    """One record's encoded image of ``feat`` decoded, so that batching gives the module
    docstring's column: a fixed shape as it is, others as a RaggedTensor ``[H, (W), C]``
    (batched: ``[n, (H), (W), C]``)."""
    fixed, target = decoding.fixed(feat), decoding.target(feat)
    pixels = decode(tf, data, feat, target, pixel_limit(), where, fixed)
    return pixels if fixed is not None else tf.RaggedTensor.from_tensor(pixels, ragged_rank=_ragged_rank(target))


def _ragged_rank(target: int | None) -> int:
    """An image's ragged rank: ``[H, (W), C]`` when its channels are known; ``[H, (W), (C)]``
    when each file keeps its own (a grey and a colour image in one batch: batching needs the
    dimensions that vary between records ragged)."""
    return 1 if target is not None else 2


def optional_column(tf: Any, feat: Feature, decoding: ImageDecoding, value: Any, where: str) -> Any:
    """A batch's column of an optional ``feat`` (ragged ``[n, (0 or 1)]`` encoded images)
    decoded: ``[n, (0 or 1), (H), (W), C]``. Decoded in the batch, not per record: a record
    without the image would have to say its channels, which may be known from the others only."""
    target, limit = decoding.target(feat), pixel_limit()

    def one(data: Any) -> Any:
        return tf.RaggedTensor.from_tensor(
            decode(tf, data, feat, target, limit, where), ragged_rank=_ragged_rank(target)
        )

    spec = tf.RaggedTensorSpec([None, None, target], tf.uint8, ragged_rank=_ragged_rank(target))
    images = tf.map_fn(one, value.values, fn_output_signature=spec)
    return tf.RaggedTensor.from_row_lengths(images, value.row_lengths())


def decode(
    tf: Any,
    data: Any,
    feat: Feature,
    target: int | None,
    limit: int | None,
    where: str,
    fixed: tuple[int, int, int] | None = None,
) -> Any:
    """One image ``H x W x C`` (uint8), its header checked first; of static shape ``fixed``."""
    width, height = header_size(tf, data)
    named = f"{where}: feature {feat.name!r}"
    checks = []
    if limit:
        claim = f"{named}: an image's header claims more than {limit:,} pixels (PIL.Image.MAX_IMAGE_PIXELS)"
        checks.append(_check(tf, width * height <= limit, claim, [width, height]))
    shape = feat.image_shape or (None, None)
    for dim, found in ((shape[0], height), (shape[1], width)):
        if dim is not None:
            said = f"{named}: an image of another size than the schema's {list(feat.image_shape or ())}"
            checks.append(_check(tf, tf.equal(found, dim), said, [width, height]))
    with tf.control_dependencies(checks):
        if target == 3:
            pixels = traced(tf, "three_channels", _three_channels)(data)
        else:
            pixels = tf.io.decode_image(data, channels=0, dtype=tf.uint8, expand_animations=False)
    if target not in (None, 3):
        pixels = to_channels(tf, pixels, target)
    pixels.set_shape(fixed or [None, None, target])
    return pixels


def _three_channels(tf: Any, data: Any) -> Any:
    """An image decoded to 3 channels by its format's decoder, which converts as to_channels
    does (the tests hold them to it) with no op more; but WebP's, which refuses RGBA to 3."""

    def stored() -> Any:
        return to_channels(tf, tf.io.decode_image(data, channels=0, dtype=tf.uint8, expand_animations=False), 3)

    def converted() -> Any:
        return tf.io.decode_image(data, channels=3, dtype=tf.uint8, expand_animations=False)

    return tf.cond(tf.equal(tf.strings.substr(data, 0, 4), b"RIFF"), stored, converted)


def traced(tf: Any, name: str, ops: Callable[[Any, Any], Any]) -> Any:
    """``ops(tf, data)`` of a scalar string as a ``tf.function`` traced once a process, which
    each pipeline calls: tracing them anew took half of a pipeline's making."""
    if name not in _TRACED:
        spec = tf.TensorSpec([], tf.string)
        _TRACED[name] = tf.function(lambda data: ops(tf, data), input_signature=[spec], autograph=False)
    return _TRACED[name]


_TRACED: dict[str, Any] = {}


def _check(tf: Any, condition: Any, message: str, size: list[Any]) -> Any:
    """An Assert op: ``message`` and the header's width and height when ``condition`` fails."""
    return tf.raw_ops.Assert(condition=condition, data=[f"{message}; width, height:", *size], summarize=4)


def to_channels(tf: Any, pixels: Any, channels: int) -> Any:
    """images.to_channels in TensorFlow's ops (the decoded channels known at run time only)."""
    have = tf.shape(pixels)[2]
    wide = tf.cast(pixels, tf.int32)
    grey = wide[:, :, :1]
    color = tf.cond(have >= 3, lambda: wide[:, :, :3], lambda: tf.repeat(grey, 3, axis=2))
    if channels == 1:
        luma = (LUMA[0] * color[:, :, 0] + LUMA[1] * color[:, :, 1] + LUMA[2] * color[:, :, 2]) // 32768
        out = tf.cond(have >= 3, lambda: luma[:, :, None], lambda: grey)
    elif channels == 3:
        out = color
    else:
        opaque = tf.fill(tf.concat([tf.shape(pixels)[:2], [1]], 0), 255)
        alpha = tf.cond(tf.equal(have % 2, 0), lambda: wide[:, :, have - 1 :], lambda: opaque)
        out = tf.concat([color, alpha], axis=2)
    return tf.cast(out, tf.uint8)


def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The header's constants: (the magic bytes expected, where none is, the fields' weights
    over the header's bytes, the fields' divisors, moduli, addends, and the value from which
    a field is negative)."""
    expect = np.zeros((len(MAGIC), HEAD), np.uint8)
    ignored = np.ones((len(MAGIC), HEAD), bool)
    for i, parts in enumerate(MAGIC):
        for at, magic in parts:
            expect[i, at : at + len(magic)] = list(magic)
            ignored[i, at : at + len(magic)] = False
    weights = np.zeros((HEAD, len(SIZES)), np.float64)  # float64: exact below 2**53
    for j, ((at, n, little), _) in enumerate(SIZES):
        for k in range(n):
            weights[at + k, j] = 256.0 ** (k if little else n - 1 - k)
    divisor, modulus, addend = (np.array([s[1][i] for s in SIZES], np.float64) for i in range(3))
    negative = np.full(len(SIZES), 2.0**40)
    negative[list(BMP)] = 2.0**31
    return expect, ignored, weights, divisor, modulus, addend, negative


_TABLES = _tables()


def header_size(tf: Any, data: Any) -> tuple[Any, Any]:
    """(width, height) an encoded image's header declares, as int64 scalars; (0, 0) for a file
    of none of the formats (decode_image then says what it is not)."""
    size = traced(tf, "header_size", _header_size)(data)
    return size[0], size[1]


def _header_size(tf: Any, data: Any) -> Any:
    """header_size's ops, as a vector (width, height). No branch: every format's fields are
    read, and the one whose magic bytes match is kept."""
    expect, ignored, weights, divisor, modulus, addend, negative = _TABLES
    head = tf.io.decode_raw(data, tf.uint8, fixed_length=HEAD)  # zero padded
    match = tf.reduce_all(tf.logical_or(tf.equal(head, expect), ignored), axis=1)
    fields = tf.linalg.matvec(weights, tf.cast(head, tf.float64), transpose_a=True)
    fields = tf.where(fields >= negative, 2.0**32 - fields, fields)
    fields = tf.math.floormod(tf.math.floordiv(fields, divisor), modulus) + addend
    jpeg = tf.io.extract_jpeg_shape(tf.where(match[-1], data, _STAND_IN_JPEG))  # [H, W, C]
    sizes = tf.concat([tf.reshape(fields, [-1, 2]), tf.cast(jpeg[1::-1], tf.float64)[None]], 0)
    return tf.cast(tf.linalg.matvec(sizes, tf.cast(match, tf.float64), transpose_a=True), tf.int64)
