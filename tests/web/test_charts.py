"""catalog.web.charts: inline SVG charts, sized to their data, every text escaped."""

from __future__ import annotations

import re

from markupsafe import Markup

from catalog.web.charts import bars, histogram


def test_histogram_bars_scale_to_the_tallest() -> None:
    svg = histogram([[0.0, 1.0, 5], [1.0, 2.0, 10], [2.0, 3.0, 0]], width=300, height=52)
    assert isinstance(svg, Markup) and svg.startswith('<svg class="hist" width="300" height="52"')
    heights = [float(h) for h in re.findall(r'<rect [^>]*height="([0-9.]+)"', svg)]
    assert heights == [25.0, 50.0, 0.0]
    assert "<title>[1, 2): 10</title>" in svg
    assert histogram([]) == "" and histogram([[0.0, 1.0, 0]]).count("<rect") == 1  # all zero: no division by zero


def test_bars_escape_and_shorten_labels() -> None:
    svg = bars([{"value": "<script>alert(1)</script>", "count": 3}, {"value": "x" * 30, "count": 1234}])
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert "x" * 24 + "…</text>" in svg and "<title>" + "x" * 30 + ": 1,234</title>" in svg
    assert svg.count("<rect") == 2 and bars([]) == ""
