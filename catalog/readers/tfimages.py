"""``ds.tf_dataset(decode_images=True)``: image features decoded inside the graph, by
``tf.io.decode_image(..., expand_animations=False)``, with images.py's rules in TensorFlow's ops
(the same pixels as the other readers'; to_channels' conversions, as TensorFlow's decoders do
not convert every format to every count), so that ``model.fit`` gets uint8 tensors:
``[batch, H, W, C]`` with a static shape when the schema fixes it (and ``channels`` or the
schema the channels), else a RaggedTensor ``[batch, (H), (W), C]``.

Bounded as the other readers are: each image's header (width and height, read by a few string
ops; JPEG's by ``tf.io.extract_jpeg_shape``) is checked against the pixel limit and the
schema's height and width before ``decode_image`` allocates anything. A graph cannot name a
record's shard: its errors (``InvalidArgumentError``) name the dataset and the feature.
"""

from __future__ import annotations

from typing import Any

from catalog.readers.images import LUMA, ImageDecoding, pixel_limit
from catalog.schema import Feature

_PAD = 32  # zero bytes after a file, so a header read past a short file's end reads zeros


def image_column(tf: Any, feat: Feature, decoding: ImageDecoding, value: Any, where: str) -> Any:
    """A parsed batch's column of ``feat`` (encoded images: ``[n]`` strings, or ragged
    ``[n, (0 or 1)]`` for an optional feature) decoded, per the module docstring."""
    fixed, target = decoding.fixed(feat), decoding.target(feat)
    limit = pixel_limit()

    def one(data: Any) -> Any:
        return decode(tf, data, feat, target, limit, where)

    if fixed is not None:
        return tf.map_fn(one, value, fn_output_signature=tf.TensorSpec(fixed, tf.uint8))
    spec = tf.RaggedTensorSpec([None, None, target], tf.uint8, ragged_rank=1)
    flat = value.values if isinstance(value, tf.RaggedTensor) else value

    def ragged(data: Any) -> Any:
        return tf.RaggedTensor.from_tensor(one(data), ragged_rank=1)

    images = tf.map_fn(ragged, flat, fn_output_signature=spec)
    if isinstance(value, tf.RaggedTensor):  # an optional image: [n, (0 or 1), (H), (W), C]
        return tf.RaggedTensor.from_row_lengths(images, value.row_lengths())
    return images


def decode(tf: Any, data: Any, feat: Feature, target: int | None, limit: int | None, where: str) -> Any:
    """One image ``H x W x C`` (uint8), its header checked first."""
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
        pixels = tf.io.decode_image(data, channels=0, dtype=tf.uint8, expand_animations=False)
    if target is not None:
        pixels = to_channels(tf, pixels, target)
    pixels.set_shape([shape[0], shape[1], target])
    return pixels


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


def header_size(tf: Any, data: Any) -> tuple[Any, Any]:
    """(width, height) an encoded image's header declares, as int64 scalars; (0, 0) for a file
    of none of the formats (decode_image then says what it is not)."""
    padded = tf.strings.join([data, tf.constant(b"\0" * _PAD)])

    def u(at: int, n: int, little: bool = True) -> Any:
        raw = tf.cast(tf.io.decode_raw(tf.strings.substr(padded, at, n), tf.uint8), tf.int64)
        weights = tf.constant([256**k for k in (range(n) if little else reversed(range(n)))], tf.int64)
        return tf.reduce_sum(raw * weights)

    def starts(magic: bytes, at: int = 0) -> Any:
        return tf.equal(tf.strings.substr(padded, at, len(magic)), magic)

    def negated(v: Any) -> Any:  # a BMP's height is negative for rows stored top down
        return tf.where(v >= 1 << 31, (1 << 32) - v, v)

    def jpeg() -> Any:
        shape = tf.cast(tf.io.extract_jpeg_shape(data), tf.int64)
        return tf.stack([shape[1], shape[0]])

    def vp8l() -> Any:
        bits = u(21, 4)
        return tf.stack([bits % (1 << 14) + 1, (bits // (1 << 14)) % (1 << 14) + 1])

    cases = [
        (starts(b"\x89PNG"), lambda: tf.stack([u(16, 4, False), u(20, 4, False)])),
        (starts(b"GIF8"), lambda: tf.stack([u(6, 2), u(8, 2)])),
        (starts(b"BM"), lambda: tf.stack([negated(u(18, 4)), negated(u(22, 4))])),
        (starts(b"\xff\xd8\xff"), jpeg),
        (starts(b"VP8 ", 12), lambda: tf.stack([u(26, 2) % (1 << 14), u(28, 2) % (1 << 14)])),
        (starts(b"VP8L", 12), vp8l),
        (starts(b"VP8X", 12), lambda: tf.stack([u(24, 3) + 1, u(27, 3) + 1])),
    ]
    size = tf.case(cases, default=lambda: tf.zeros([2], tf.int64), exclusive=False)
    return size[0], size[1]
