"""Images decoded on read (every reader's ``decode_images=True``): each ``"encoding": "image"``
feature's encoded file becomes a uint8 array ``H x W x C``, the array
``tf.io.decode_image(data, channels, expand_animations=False)`` gives, so that a model sees
the same pixels from ``ds.torch()``, ``ds.batches()`` and ``ds.tf_dataset()``.

- Formats: PNG, JPEG, GIF (its first frame), BMP, WebP, decoded by Pillow (the ``images``
  extra), imported when an image is decoded. The pixels are TensorFlow's exactly for PNG, GIF
  and BMP (also where TensorFlow differs from Pillow: a GIF's transparent pixels are 0, a
  32-bit BMP keeps its fourth byte, an 8-bit BMP gives its palette indices), and for JPEG
  within the tolerance the tests measure (two libjpeg builds' rounding: JPEG_TOLERANCE).
- Channels: ``channels=`` (1, 3 or 4) when given, else the schema's image shape's third
  dimension, else the file's own (as TensorFlow: a GIF 3, a grey PNG with alpha 2...). Between
  counts (:func:`to_channels`, the same in tf_dataset's graph): grey repeated into RGB, an
  opaque alpha (255) added, alpha dropped, RGB to grey as libpng (TensorFlow's PNG decoder)
  computes it, ``(9797 R + 19234 G + 3737 B) >> 15``.
- Bounded: an image's header (its declared width and height) is read before any pixel; past
  ``PIL.Image.MAX_IMAGE_PIXELS`` pixels (Pillow's decompression-bomb limit, 89,478,485 unless
  set otherwise) the image is refused, as are a header that contradicts the schema's fixed
  height or width, a file that is not one of the formats, and a corrupt one: one line naming
  the shard, the record and the feature (:class:`ImageError`, which the readers name).
"""

from __future__ import annotations

import io
import struct
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from catalog.commit.plans import CacheKeywords
from catalog.errors import DependencyError, UsageError
from catalog.keywords import check_keywords
from catalog.schema import Feature, Schema

IMAGES_EXTRA = "pip install 'tfrecord-catalog[images]'"
FORMATS = ("PNG", "JPEG", "GIF", "BMP", "WEBP")  # Pillow's names; no other plugin is tried
CHANNELS = (1, 3, 4)
DEFAULT_PIXEL_LIMIT = 1024 * 1024 * 1024 // 4 // 3  # Pillow's own MAX_IMAGE_PIXELS default
# Decoded JPEG pixels differ from tf.io.decode_image's by at most this much (Pillow's libjpeg
# and TensorFlow's round the inverse DCT and the chroma upsampling differently): measured in
# tests/readers/test_images.py over its corpus (4 at most), with some margin.
JPEG_TOLERANCE = 8
# libpng's RGB-to-grey weights in 1/32768 (TensorFlow's decode_png(channels=1)): exact there.
LUMA = (9797, 19234, 3737)


class ImageError(Exception):
    """Why one image was not decoded; the reader names its shard, record and feature."""


@dataclass(frozen=True)
class ImageDecoding:
    """What ``decode_images=True, channels=...`` asked for: the features to decode and the
    channels each one gets (None: the file's own)."""

    features: tuple[Feature, ...]
    channels: int | None = None

    def target(self, feat: Feature) -> int | None:
        """The channels ``feat``'s images are given: ``channels=``, else the schema's, else None."""
        if self.channels is not None:
            return self.channels
        shape = feat.image_shape
        return shape[2] if shape is not None and len(shape) == 3 else None

    def fixed(self, feat: Feature) -> tuple[int, int, int] | None:
        """The whole shape every decoded image of ``feat`` has, when the schema and ``channels`` fix it."""
        shape, c = feat.image_shape, self.target(feat)
        if shape is None or shape[0] is None or shape[1] is None or c is None or feat.optional:
            return None
        return shape[0], shape[1], c


class ReadKeywords(CacheKeywords, total=False):
    """Every reader's keywords beyond its own (``**read: Unpack[ReadKeywords]``): the cache's
    (:class:`~catalog.commit.plans.CacheKeywords`), ``decode_images`` (image features as uint8
    ``H x W x C`` arrays; default False: their bytes) and ``channels`` (1, 3 or 4 forced;
    default None: the schema's, else the file's own)."""

    decode_images: bool
    channels: int | None


def reading(reader: str, read: ReadKeywords) -> tuple[CacheKeywords, bool, int | None]:
    """``reader``'s (a method's name) keywords checked, as (its cache's, decode_images, channels)."""
    check_keywords(reader, read, ReadKeywords)
    cache = CacheKeywords()
    if "cache_dir" in read:
        cache["cache_dir"] = read["cache_dir"]
    if "cache_limit" in read:
        cache["cache_limit"] = read["cache_limit"]
    return cache, read.get("decode_images", False), read.get("channels")


def image_decoding(
    schema: Schema, columns: tuple[str, ...] | None, decode_images: bool, channels: int | None
) -> ImageDecoding | None:
    """The readers' ``decode_images``/``channels`` arguments checked: None when nothing is decoded."""
    if not isinstance(decode_images, bool):
        raise UsageError(f"decode_images is True or False, not {decode_images!r}")
    if channels is not None and (isinstance(channels, bool) or channels not in CHANNELS):
        raise UsageError(f"channels is 1, 3 or 4 (or None: the file's own), not {channels!r}")
    if channels is not None and not decode_images:
        raise UsageError("channels= says how images are decoded: give decode_images=True with it")
    if not decode_images:
        return None
    names = schema.features if columns is None else columns
    feats = tuple(schema.features[n] for n in names if n in schema.features and schema.features[n].image)
    return ImageDecoding(feats, channels)


def pixel_limit() -> int | None:
    """The most pixels an image may have: Pillow's MAX_IMAGE_PIXELS as it is set now (None: no
    limit), or its default where Pillow is not installed (tf_dataset decodes without it)."""
    try:
        from PIL import Image
    except ImportError:
        return DEFAULT_PIXEL_LIMIT
    limit = Image.MAX_IMAGE_PIXELS
    return None if limit is None else int(limit)


def pillow() -> Any:
    """PIL.Image, or a DependencyError naming the extra."""
    try:
        from PIL import Image
    except ImportError as e:
        raise DependencyError(f"decode_images=True decodes images with Pillow ({e}): {IMAGES_EXTRA}") from e
    return Image


def decode_image(data: Any, feat: Feature, decoding: ImageDecoding) -> np.ndarray:
    """One encoded image as a uint8 ``H x W x C`` array (see the module docstring); ImageError
    says why not."""
    if not isinstance(data, bytes):
        raise ImageError(f"an encoded image is bytes, not {type(data).__name__}")
    image = pillow()
    with warnings.catch_warnings():
        # past MAX_IMAGE_PIXELS Pillow warns (a line on stderr): the limit is checked below instead
        warnings.simplefilter("ignore", image.DecompressionBombWarning)
        try:
            img = image.open(io.BytesIO(data), formats=FORMATS)
        except image.DecompressionBombError as e:  # past twice the limit: Pillow opens no more
            raise ImageError(_too_large(image, f"more than {2 * image.MAX_IMAGE_PIXELS:,}")) from e
        except image.UnidentifiedImageError as e:  # (its message shows a BytesIO's address)
            raise ImageError(f"not a png, jpeg, gif, bmp or webp image (its first bytes: {data[:8].hex()})") from e
        except (OSError, ValueError, EOFError, SyntaxError, struct.error) as e:
            raise ImageError(f"a corrupt image ({_reason(e)})") from e
    with img:
        width, height = img.size
        limit = image.MAX_IMAGE_PIXELS
        if limit and width * height > limit:
            raise ImageError(_too_large(image, f"{width}x{height}"))
        _check_size(feat, width, height)
        try:
            pixels = native(img, data)
        except (OSError, ValueError, EOFError, SyntaxError, struct.error) as e:
            raise ImageError(f"a corrupt {img.format.lower()} image ({_reason(e)})") from e
    target = decoding.target(feat)
    return pixels if target is None else to_channels(pixels, target)


def _reason(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return lines[0] if lines else type(e).__name__


def _too_large(image: Any, claim: str) -> str:
    limit = f"PIL.Image.MAX_IMAGE_PIXELS ({image.MAX_IMAGE_PIXELS:,})"
    return f"its header claims {claim} pixels, past {limit}: not decoded (a decompression bomb?)"


def _check_size(feat: Feature, width: int, height: int) -> None:
    """The header's size against the schema's known height and width, before any pixel."""
    shape = feat.image_shape
    if shape is None:
        return
    want_h, want_w = shape[0], shape[1]
    if (want_h is not None and want_h != height) or (want_w is not None and want_w != width):
        raise ImageError(f"{height}x{width} pixels (height x width), the schema's shape is {_shape(shape)}")


def _shape(shape: tuple[int | None, ...]) -> str:
    return "[" + ", ".join("null" if d is None else str(d) for d in shape) + "]"


def native(img: Any, data: bytes) -> np.ndarray:
    """``img``'s pixels as TensorFlow's ``decode_image(channels=0)`` gives them (``data``: its file)."""
    fmt, mode = img.format, img.mode
    if fmt == "GIF":
        return _gif(img)
    if fmt == "BMP" and mode == "RGB" and _bmp_bits(data) == (32, 0):
        return _bmp32(data, *img.size)
    if mode == "P" and fmt != "BMP":  # TensorFlow's BMP decoder gives an 8-bit BMP's indices
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
    elif mode == "1":
        img = img.convert("L")
    elif mode in ("CMYK", "YCbCr", "LAB", "HSV"):
        img = img.convert("RGB")
    arr = np.asarray(img)
    if arr.dtype != np.uint8:  # 16-bit grey (I;16, I): its high byte, as TensorFlow converts it
        arr = (arr.astype(np.uint32) >> 8).astype(np.uint8)
    width, height = img.size
    return arr.reshape(height, width, -1)


def _gif(img: Any) -> np.ndarray:
    """A GIF's first frame as RGB; its transparent pixels 0, as TensorFlow's decoder leaves them."""
    rgb = np.array(img.convert("RGB"))
    clear = img.info.get("transparency")
    if isinstance(clear, int) and img.mode in ("P", "L"):
        rgb[np.asarray(img) == clear] = 0
    return rgb


def _bmp_bits(data: bytes) -> tuple[int, int]:
    """A BMP's bits per pixel and compression, from its info header."""
    bits, compression = struct.unpack_from("<HI", data, 28)
    return bits, compression


def _bmp32(data: bytes, width: int, height: int) -> np.ndarray:
    """An uncompressed 32-bit BMP with its fourth byte (Pillow drops it; TensorFlow keeps it)."""
    offset = struct.unpack_from("<I", data, 10)[0]
    top_down = struct.unpack_from("<i", data, 22)[0] < 0
    size = width * height * 4
    if offset + size > len(data):
        raise ValueError(f"{len(data)} bytes, its pixels end at byte {offset + size}")
    bgra = np.frombuffer(data, np.uint8, size, offset).reshape(height, width, 4)
    rows = bgra if top_down else bgra[::-1]
    return np.ascontiguousarray(rows[:, :, [2, 1, 0, 3]])


def to_channels(pixels: np.ndarray, channels: int) -> np.ndarray:
    """``pixels`` (1 to 4 channels) with ``channels`` (1, 3 or 4) instead (module docstring)."""
    have = pixels.shape[2]
    if have == channels:
        return pixels
    wide = pixels.astype(np.uint32)
    if channels == 1:
        if have < 3:
            return pixels[:, :, :1].copy()
        r, g, b = (wide[:, :, i] for i in range(3))
        return ((LUMA[0] * r + LUMA[1] * g + LUMA[2] * b) >> 15).astype(np.uint8)[:, :, None]
    color = pixels[:, :, :3] if have >= 3 else np.repeat(pixels[:, :, :1], 3, axis=2)
    if channels == 3:
        return np.ascontiguousarray(color)
    opaque = np.full((*pixels.shape[:2], 1), 255, np.uint8)
    alpha = pixels[:, :, have - 1 :] if have in (2, 4) else opaque
    return np.concatenate([color, alpha], axis=2)


def decode_column(values: Any, feat: Feature, decoding: ImageDecoding, name_error: Any) -> np.ndarray:
    """A batch's column of encoded images decoded: ``(rows, H, W, C)`` when the schema fixes the
    shape, else an object array of each row's array (None for an absent optional image).
    ``name_error(i, reason)``: the exception for row ``i``'s image."""
    out: list[Any] = []
    for i, data in enumerate(values):
        out.append(None if data is None else decode_one(data, feat, decoding, lambda r, i=i: name_error(i, r)))
    fixed = decoding.fixed(feat)
    if fixed is not None:
        return np.stack(out) if out else np.zeros((0, *fixed), np.uint8)
    column = np.empty(len(out), dtype=object)
    column[:] = out
    return column


def decode_one(data: Any, feat: Feature, decoding: ImageDecoding, name_error: Any) -> np.ndarray:
    """One image decoded and checked against the schema; ``name_error(reason)`` on a failure."""
    try:
        pixels = decode_image(data, feat, decoding)
    except ImageError as e:
        raise name_error(str(e)) from None
    return pixels
