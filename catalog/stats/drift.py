"""Comparing two sets of statistics of a feature (drift between versions, skew between
splits) and checking new data against a feature's thresholds, from the sketches alone.

The L-infinity distance is TensorFlow Data Validation's measure for drift and skew: the
largest difference, over the values, between the two normalized frequency distributions.
Values with top-value tracking (strings, bytes, class labels) compare per value (TFDV's
categorical distance). Numbers compare their cumulative distributions, the largest gap
between them at the percentiles of both sides together (the Kolmogorov-Smirnov statistic):
per-bucket frequencies would cap the distance at one bucket's share (two samples with no
value in common would be 0.1 apart over ten buckets), where this one reaches 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from catalog.jsonform import JsonReport
from catalog.stats.sketches import FeatureStats, new_kll

PERCENTILES = [i / 100 for i in range(1, 100)]


def missing_rate(fs: FeatureStats) -> float:
    """The share of records that did not bring a value (missing, or filled from the default)."""
    return (fs.missing + fs.filled) / fs.records if fs.records else 0.0


def linf(a: FeatureStats, b: FeatureStats) -> float | None:
    """The L-infinity distance between ``a``'s and ``b``'s value distributions (0 to 1);
    None when either side has no values."""
    if a.top is not None and b.top is not None:
        return _linf_values(a, b)
    if a.quantiles.is_empty() or b.quantiles.is_empty():
        return None
    both = new_kll()
    both.merge(a.quantiles)
    both.merge(b.quantiles)
    points = sorted({float(q) for q in both.get_quantiles(PERCENTILES)} | {both.get_min_value(), both.get_max_value()})
    ca = np.asarray(a.quantiles.get_cdf(points))[:-1]  # the last entry is 1 for both
    cb = np.asarray(b.quantiles.get_cdf(points))[:-1]
    return float(np.abs(ca - cb).max())


def _linf_values(a: FeatureStats, b: FeatureStats) -> float | None:
    wa, wb = a.top_weight, b.top_weight
    if not wa or not wb:
        return None
    keys = {k for k, _c in a.top_values(1 << 10)} | {k for k, _c in b.top_values(1 << 10)}
    if not keys:
        return 0.0
    return max(abs(a.top.get_estimate(k) / wa - b.top.get_estimate(k) / wb) for k in keys)


@dataclass
class FeatureDrift:
    """How feature ``name`` differs from ``a`` to ``b``."""

    name: str
    linf: float | None
    missing: tuple[float, float]
    range: tuple[Any, Any, Any, Any]  # min and max of a, then of b
    mean: tuple[float | None, float | None]
    new_values: list[str] = field(default_factory=list)  # frequent in b, not seen in a
    vanished_values: list[str] = field(default_factory=list)  # frequent in a, not seen in b
    only_in: str | None = None  # "a" or "b": the feature exists on one side alone

    def to_json(self) -> dict[str, Any]:
        return {
            "feature": self.name, "linf": self.linf, "missing_rate": list(self.missing),
            "min": [self.range[0], self.range[2]], "max": [self.range[1], self.range[3]], "mean": list(self.mean),
            "new_values": self.new_values, "vanished_values": self.vanished_values, "only_in": self.only_in,
        }  # fmt: skip


def drift(name: str, a: FeatureStats | None, b: FeatureStats | None) -> FeatureDrift:
    if a is None or b is None:
        one = b if a is None else a
        assert one is not None
        side = "b" if a is None else "a"
        rate = missing_rate(one)
        return FeatureDrift(name, None, (rate, rate), (None,) * 4, (None, None), only_in=side)
    mean_a = a.values.mean if a.values.count and a.numeric else None
    mean_b = b.values.mean if b.values.count and b.numeric else None
    new, vanished = _changed_values(a, b)
    return FeatureDrift(
        name,
        linf(a, b),
        (missing_rate(a), missing_rate(b)),
        (a.values.min, a.values.max, b.values.min, b.values.max) if a.numeric else (None,) * 4,
        (mean_a, mean_b),
        new,
        vanished,
    )


def _changed_values(a: FeatureStats, b: FeatureStats, limit: int = 10) -> tuple[list[str], list[str]]:
    if a.top is None or b.top is None:
        return [], []
    new = [k for k, _c in b.top_values(limit) if a.top.get_estimate(k) == 0]
    vanished = [k for k, _c in a.top_values(limit) if b.top.get_estimate(k) == 0]
    return new, vanished


_WHAT = {"max_missing": "missing rate", "linf": "L-infinity distance", "min": "minimum", "max": "maximum"}


@dataclass(frozen=True)
class Violation(JsonReport):
    """One figure of new data against one limit (``append --check``); ``broken``: beyond it.
    ``default``: the limit is the default one (the schema sets no checks, no --max-linf)."""

    feature: str
    check: str
    found: float
    limit: float
    broken: bool = True
    default: bool = False

    def message(self) -> str:
        if self.check == "finite":
            shown = f"{self.found:,.0f} NaN or infinite value" + ("" if self.found == 1 else "s")
            return f"feature {self.feature!r}: {shown} outside its range (min/max checks)"
        side = "above" if self.check in ("max_missing", "linf", "max") else "below"
        limit = f"{self.limit:g}" + (" (the default)" if self.default else "")
        return f"feature {self.feature!r}: {_WHAT[self.check]} {self.found:.6g} is {side} the limit {limit}"

    def measured(self) -> str:
        """What was compared, within its limit or not: "L-infinity distance 0.03 (limit 0.1)"."""
        if self.check == "finite":
            return f"{self.found:,.0f} NaN or infinite values (min/max checks: none allowed)"
        return f"{_WHAT[self.check]} {self.found:.6g} (limit {self.limit:g}{', the default' if self.default else ''})"


def check(
    name: str, new: FeatureStats, current: FeatureStats | None, checks: dict[str, float], max_linf: float | None
) -> list[Violation]:
    """What the new records of feature ``name`` break of its ``checks`` (and ``max_linf``,
    for a feature without a ``linf`` check of its own)."""
    return [v for v in measure(name, new, current, checks, max_linf) if v.broken]


def measure(
    name: str,
    new: FeatureStats,
    current: FeatureStats | None,
    checks: dict[str, float],
    max_linf: float | None,
    default: bool = False,
) -> list[Violation]:
    """Every figure of the new records of feature ``name`` that a check of it compares, broken
    or not (``default``: ``max_linf`` is the default limit, not one asked for)."""
    out: list[Violation] = []
    if "max_missing" in checks:
        rate = missing_rate(new)
        out.append(Violation(name, "max_missing", rate, checks["max_missing"], bool(rate > checks["max_missing"])))
    lo, hi = new.values.min, new.values.max
    if new.numeric and "min" in checks and lo is not None:
        out.append(Violation(name, "min", float(lo), checks["min"], bool(lo < checks["min"])))
    if new.numeric and "max" in checks and hi is not None:
        out.append(Violation(name, "max", float(hi), checks["max"], bool(hi > checks["max"])))
    if new.numeric and ("min" in checks or "max" in checks) and new.nans + new.infs:  # (min, max: finite values')
        out.append(Violation(name, "finite", float(new.nans + new.infs), 0.0))
    own = "linf" in checks
    limit = checks["linf"] if own else max_linf
    if limit is not None and current is not None and current.records:
        distance = linf(current, new)
        if distance is not None:
            out.append(Violation(name, "linf", distance, limit, distance > limit, default and not own))
    return out
