"""A value as the viewer shows it: pictures as data URIs (encoded image bytes as they are,
uint8 tensors HxW, HxWx1 or HxWx3 rendered to PNG here), long values folded."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import numpy as np

from catalog.schema import Feature, folded_bytes

FOLD = 120  # characters of a value shown before it is folded
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


def shown_value(feat: Feature, value: Any) -> dict[str, Any]:
    """``{"image": data URI}`` for a picture, else ``{"text": ..., "folded": bool}``."""
    if isinstance(value, bytes):
        mime = sniff(value) if feat.image or len(value) > 8 else None
        if mime is not None:
            return {"image": f"data:{mime};base64,{base64.b64encode(value).decode('ascii')}"}
        if len(value) * 4 // 3 > FOLD:
            return {"text": folded_bytes(value), "folded": True}
        return {"text": base64.b64encode(value).decode("ascii"), "folded": False}
    if isinstance(value, np.ndarray) and _is_picture(value) and min(value.shape[:2]) > 0:
        png = _png(value)
        if png is not None:
            return {"image": "data:image/png;base64," + base64.b64encode(png).decode("ascii")}
    text = _text(value)
    if len(text) > FOLD:
        return {"text": text[:FOLD] + "…", "full": text, "folded": True}
    return {"text": text, "folded": False}


def _text(value: Any) -> str:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)
