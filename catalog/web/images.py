"""A value as the viewer shows it, bounded in bytes: pictures as data URIs (encoded image bytes
as they are, uint8 tensors HxW, HxWx1 or HxWx3 rendered to PNG here) up to IMAGE_BYTES each
and PAGE_IMAGE_BYTES a page; any other value as `catalog cat` prints it (``row_to_json``:
float32's shortest digits), whole up to VALUE_BYTES, else folded to a preview with a link to
the full value (``full_value``)."""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from catalog.schema import Feature, class_name, folded_value

PREVIEW = 120  # characters of a folded value shown
VALUE_BYTES = 2048  # a value's JSON text shown whole (page and twin); longer: folded, linked
IMAGE_BYTES = 256 << 10  # a picture inline in a page; larger: a link
PAGE_IMAGE_BYTES = 4 << 20  # the pictures inline in one page in all; past it: links
_MAGIC = {b"\x89PNG": "image/png", b"\xff\xd8\xff": "image/jpeg", b"GIF8": "image/gif", b"BM": "image/bmp"}


def sniff(data: bytes) -> str | None:
    """The image type of encoded bytes, from their first bytes (None: not a picture we know)."""
    for magic, mime in _MAGIC.items():
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _png(array: np.ndarray) -> bytes | None:
    """A uint8 HxW, HxWx1 or HxWx3 array as PNG (Pillow, the `images` extra); None without it."""
    try:
        from PIL import Image
    except ImportError:
        return None
    pixels = array[:, :, 0] if array.ndim == 3 and array.shape[2] == 1 else array
    out = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(pixels)).save(out, "PNG")
    return out.getvalue()


def _is_picture(value: np.ndarray) -> bool:
    return value.dtype == np.uint8 and (value.ndim == 2 or (value.ndim == 3 and value.shape[2] in (1, 3)))


def json_size(value: Any, as_json: Any) -> int | None:
    """The bytes of ``as_json`` as JSON text, None when past VALUE_BYTES; told from the value's
    size where it can be, so a 50 MB value is not encoded to be measured."""
    if isinstance(value, bytes) and len(value) > VALUE_BYTES:
        return None
    if isinstance(value, np.ndarray) and value.size > VALUE_BYTES:  # at least a byte an element
        return None
    if isinstance(as_json, str) and len(as_json) > VALUE_BYTES:  # at least a byte a character
        return None
    size = len(json.dumps(as_json, ensure_ascii=False).encode())
    return size if size <= VALUE_BYTES else None


def value_bytes(value: Any, as_json: Any) -> int:
    """A value's size as its full-value link serves it: raw bytes, UTF-8 text, else JSON."""
    if isinstance(value, bytes):
        return len(value)
    if isinstance(as_json, str):
        return len(as_json.encode("utf-8", "surrogatepass"))
    return len(json.dumps(as_json, ensure_ascii=False).encode())


def preview(value: Any, as_json: Any) -> str:
    """A folded value's one line: ``<bytes 1,717: 89504e47…>``, ``<uint8[32,32,3]: 12, …>``,
    or its text's first PREVIEW characters."""
    if isinstance(value, bytes | np.ndarray):
        return folded_value(value)
    text = as_json if isinstance(as_json, str) else json.dumps(as_json, ensure_ascii=False)
    return text[:PREVIEW] + "…"


@dataclass
class Budget:
    """What is left of one page's bytes of inline pictures."""

    images: int = PAGE_IMAGE_BYTES

    def picture(self, data: bytes, mime: str) -> dict[str, Any] | None:
        if len(data) > IMAGE_BYTES or len(data) > self.images:
            return None
        self.images -= len(data)
        return {"image": f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"}


def _picture(feat: Feature, value: Any, budget: Budget) -> dict[str, Any] | None:
    if isinstance(value, bytes):
        mime = sniff(value) if feat.image or len(value) > 8 else None
        return None if mime is None else budget.picture(value, mime)
    if isinstance(value, np.ndarray) and _is_picture(value) and min(value.shape[:2]) > 0:
        if value.nbytes > 4 * IMAGE_BYTES:  # not rendered: its PNG would not fit anyway
            return None
        png = _png(value)
        return None if png is None else budget.picture(png, "image/png")
    return None


def shown_value(feat: Feature, value: Any, as_json: Any, href: str, budget: Budget) -> dict[str, Any]:
    """A value's cell: ``{"image": data URI}``, else ``{"text": ..., "folded": bool}`` (folded:
    with ``href``, its full value, and ``bytes``, its size)."""
    picture = _picture(feat, value, budget)
    if picture is not None:
        return picture
    if json_size(value, as_json) is None:
        return {"text": preview(value, as_json), "folded": True, "href": href, "bytes": value_bytes(value, as_json)}
    text = as_json if isinstance(as_json, str) else json.dumps(as_json, ensure_ascii=False)
    name = class_name(feat, as_json)
    return {"text": text if name is None else f"{name} ({text})", "folded": False}
