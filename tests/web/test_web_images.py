"""catalog.web.images: values as the viewer shows them, pictures inline within a byte budget, the rest folded."""

from __future__ import annotations

import base64

import numpy as np
import pytest

from catalog.schema.features import parse_feature
from catalog.web.images import IMAGE_BYTES, VALUE_BYTES, Budget, json_size, preview, shown_value, sniff, value_bytes

PNG = b"\x89PNG\r\n\x1a\n" + bytes(16)


@pytest.mark.parametrize(
    ("data", "mime"),
    [
        (PNG, "image/png"),
        (b"\xff\xd8\xff\xe0", "image/jpeg"),
        (b"GIF89a", "image/gif"),
        (b"BM....", "image/bmp"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"RIFF\x00\x00\x00\x00WAVE", None),
        (b"plain", None),
    ],
)
def test_sniff_tells_pictures_by_their_first_bytes(data: bytes, mime: str | None) -> None:
    assert sniff(data) == mime


def test_pictures_go_inline_while_the_page_budget_lasts() -> None:
    image = parse_feature("img", {"dtype": "bytes", "encoding": "image"})
    budget = Budget(images=len(PNG) + 1)
    cell = shown_value(image, PNG, base64.b64encode(PNG).decode(), "/full", budget)
    assert cell == {"image": "data:image/png;base64," + base64.b64encode(PNG).decode()}
    assert budget.images == 1
    folded = shown_value(image, PNG, base64.b64encode(PNG).decode(), "/full", budget)  # the budget is spent
    assert "image" not in folded and folded["folded"] is False
    assert Budget().picture(bytes(IMAGE_BYTES + 1), "image/png") is None  # one picture too large


def test_uint8_tensors_render_as_png() -> None:
    pytest.importorskip("PIL.Image", reason="Pillow is not installed (pip install '.[test]')")
    feat = parse_feature("t", {"dtype": "uint8", "shape": [2, 3, 1], "encoding": "tensor"})
    cell = shown_value(feat, np.zeros((2, 3, 1), np.uint8), [[[0]] * 3] * 2, "/full", Budget())
    assert base64.b64decode(cell["image"].removeprefix("data:image/png;base64,")).startswith(b"\x89PNG")
    floats = np.zeros((2, 3), np.float32)  # not pixels: shown as text
    assert "image" not in shown_value(feat, floats, floats.tolist(), "/full", Budget())


def test_long_values_are_folded_with_a_link_and_labels_named() -> None:
    feat = parse_feature("s", {"dtype": "string"})
    text = "y" * (VALUE_BYTES + 1)
    cell = shown_value(feat, text, text, "/full/s", Budget())
    assert cell == {"text": "y" * 120 + "…", "folded": True, "href": "/full/s", "bytes": VALUE_BYTES + 1}
    label = parse_feature("label", {"dtype": "int64", "names": ["cat", "dog"]})
    assert shown_value(label, 1, 1, "/x", Budget()) == {"text": "dog (1)", "folded": False}
    assert json_size("ab", "ab") == 4 and json_size(bytes(VALUE_BYTES + 1), "") is None
    assert value_bytes(b"abc", "YWJj") == 3 and value_bytes("é", "é") == 2 and value_bytes([1, 2], [1, 2]) == 6
    assert preview(bytes(5000), "") == "<bytes 5,000: 00000000…>"
