"""FeatureStats as plain data: what `catalog stats --json`, the viewer and tests read."""

from __future__ import annotations

import base64
from typing import Any

from catalog.stats.sketches import FeatureStats

QUANTILES = (0.0, 0.01, 0.25, 0.5, 0.75, 0.99, 1.0)
HISTOGRAM_BUCKETS = 20


def shown_value(fs: FeatureStats, key: str, names: tuple[str, ...] | None = None) -> str:
    """A top value as text: strings as they are, bytes as UTF-8 where they are that, else
    base64 (as `cat` prints bytes); a class label with its name."""
    if fs.kind == "bytes":
        raw = key.encode("latin-1")
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(raw).decode("ascii")
    if names is not None and key.lstrip("-").isdigit() and 0 <= int(key) < len(names):
        return f"{key} ({names[int(key)]})"
    return key


def summary(fs: FeatureStats, names: tuple[str, ...] | None = None, buckets: int = HISTOGRAM_BUCKETS) -> dict[str, Any]:
    """Every figure of ``fs`` a person reads (see FeatureStats for what each counts)."""
    v = fs.values
    out: dict[str, Any] = {
        "feature": fs.name,
        "kind": fs.kind,
        "records": fs.records,
        "present": fs.present,
        "filled": fs.filled,
        "missing": fs.missing,
        "missing_rate": (fs.missing + fs.filled) / fs.records if fs.records else 0.0,
    }
    figures = {"count": v.count, "min": v.min, "max": v.max, "mean": v.mean if v.count else None, "std": v.std}
    if fs.numeric:
        out["values"] = {**figures, "zeros": fs.zeros, "nans": fs.nans, "infs": fs.infs}
    else:  # the lengths of the strings or bytes values
        out["value_lengths"] = {**figures, "empty": fs.zeros}
    quantiles = fs.quantile_values(list(QUANTILES))
    out["quantiles"] = None if quantiles is None else dict(zip([str(q) for q in QUANTILES], quantiles, strict=True))
    out["histogram"] = [[lo, hi, round(c, 3)] for lo, hi, c in fs.histogram(buckets) or []]
    if fs.lengths is not None:
        n = fs.lengths
        out["list_lengths"] = {"min": n.min, "max": n.max, "mean": n.mean if n.count else None, "std": n.std}
    if fs.distinct is not None:
        out["distinct"] = fs.distinct_estimate() or 0
        out["top_values"] = [{"value": shown_value(fs, k, names), "count": c} for k, c in fs.top_values(10)]
        if fs.long_values:
            out["long_values"] = fs.long_values
    return out
