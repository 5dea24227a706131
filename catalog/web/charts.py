"""Charts as inline SVG (no script, no CDN: the viewer works offline), every text escaped."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from markupsafe import Markup, escape


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def histogram(buckets: Sequence[Sequence[float]], width: int = 320, height: int = 64) -> Markup:
    """Bars of ``[low, high, count]`` buckets, each with its range and count as a tooltip."""
    if not buckets:
        return Markup("")
    top = max(float(b[2]) for b in buckets) or 1.0
    step = width / len(buckets)
    parts = [f'<svg class="hist" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">']
    for i, (lo, hi, count) in enumerate(buckets):
        h = max(0.0, float(count) / top * (height - 2))
        tip = escape(f"[{_fmt(lo)}, {_fmt(hi)}): {count:,.0f}")
        parts.append(
            f'<rect x="{i * step:.2f}" y="{height - h:.2f}" width="{max(step - 1, 1):.2f}" height="{h:.2f}">'
            f"<title>{tip}</title></rect>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def bars(items: Sequence[dict[str, Any]], width: int = 320) -> Markup:
    """Horizontal bars of ``{"value", "count"}`` items (top values), labels escaped."""
    if not items:
        return Markup("")
    top = max(int(x["count"]) for x in items) or 1
    row = 18
    parts = [f'<svg class="bars" width="{width}" height="{row * len(items)}" role="img">']
    for i, x in enumerate(items):
        w = int(x["count"]) / top * (width * 0.55)
        label = str(x["value"])
        shown = escape(label if len(label) <= 24 else label[:24] + "…")
        parts.append(
            f'<rect x="{width * 0.42:.1f}" y="{i * row + 3}" width="{w:.1f}" height="{row - 6}">'
            f"<title>{escape(label)}: {int(x['count']):,}</title></rect>"
            f'<text x="0" y="{i * row + 13}">{shown}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))
