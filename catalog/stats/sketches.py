"""Statistics of one feature over some records: exact counts and moments, plus mergeable
sketches from Apache DataSketches (KLL quantiles, HLL distinct counts, frequent items).

Every field merges: a shard's statistics are kept in the manifest, and a version's or a
split's are the merge of its shards' (no data read). Counts, minimum, maximum, zeros, NaNs
and infinities are exact; mean and standard deviation are exact up to float64 rounding
(Chan's parallel update); quantiles, histograms, distinct counts and top values are
approximate, within the sketches' documented bounds (:data:`KLL_K`, :data:`HLL_LG_K`).
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from typing import Any

import datasketches as dsk
import numpy as np

# KLL with k=200: normalized rank error about 1.33% (99% confidence; DataSketches' figure),
# about 3 KB per numeric feature of a large shard.
KLL_K = 200
# HLL with 2^11 buckets (4-bit): relative error about 2.3% (one standard deviation), 1 KB.
HLL_LG_K = 11
# Frequent items: a map of 2^6 slots, so the up to 48 most frequent values are tracked.
TOP_LG_MAP = 6
# Longer string/bytes values (images, documents) are counted for distinct values (by a
# digest), never kept as top values: a sketch of 48 JPEGs would weigh more than the shard's index.
TOP_MAX_BYTES = 128
# Top values are those surely frequent: of all-distinct values (ids, captions) none is shown,
# rather than any 48 of them with counts that are only the sketch's error.
_NO_FALSE_POSITIVES = dsk.frequent_items_error_type.NO_FALSE_POSITIVES

Number = int | float
# FeatureStats' plain counts: summed by a merge, stored as they are
COUNTS = ("records", "present", "filled", "missing", "zeros", "nans", "infs", "long_values", "top_rest")
CHUNK = 1 << 20  # numbers a Moments.add works on at once
# Numbers a pass of Moments.add works on at once: NumPy's var of a million float32 values makes
# float64 temporaries the size of the whole (four passes over memory); parts of PASS values
# copied to float64 once (2 MiB, in the CPU's last-level cache), then summed, centred and
# squared where they lie, cost a third (bench_stats: `big`, large float32 tensors). Not
# smaller: on the counting thread each NumPy call takes the GIL back from the writer, and parts
# of 16k values made 500 such calls a batch (the writer waited on its switch interval).
PASS = 1 << 18


@dataclass
class Moments:
    """Count, mean, sum of squared deviations, minimum and maximum of some numbers. Finite
    float64 numbers can have a sum of squares beyond float64 (1e200 and -1e200): ``m2`` is
    then infinite (stored as null) and ``std`` None; the mean, within their range, is kept."""

    count: int = 0
    mean: float = 0.0
    m2: float = 0.0
    min: Number | None = None
    max: Number | None = None

    def add(self, values: np.ndarray, bounds: tuple[Number, Number] | None = None) -> None:
        """Add finite numbers (any numeric dtype, flat), a million at a time: var's float64
        temporaries stay small (a batch of images holds tens of millions). ``bounds``: their
        minimum and maximum when the caller has them (two passes fewer)."""
        if values.size > CHUNK:
            for start in range(0, values.size, CHUNK):
                self.add(values[start : start + CHUNK], bounds)  # (the merge keeps the whole's)
            return
        n = int(values.size)
        if not n:
            return
        lo, hi = bounds if bounds is not None else (values.min().item(), values.max().item())
        with np.errstate(over="ignore", invalid="ignore"):
            mean, m2 = _mean_m2(values)
            if not (math.isfinite(mean) and math.isfinite(m2)):  # a sum overflowed: on the values scaled down
                scale = max(abs(float(lo)), abs(float(hi)))
                scaled = values / scale
                mean = float(scaled.mean(dtype=np.float64)) * scale
                m2 = float(scaled.var(dtype=np.float64)) * n * scale * scale
        self.merge(Moments(n, mean, m2 if math.isfinite(m2) else math.inf, lo, hi))

    def merge(self, other: Moments) -> None:
        if not other.count:
            return
        if not self.count:
            self.count, self.mean, self.m2, self.min, self.max = other.count, other.mean, other.m2, other.min, other.max
            return
        n = self.count + other.count
        share = other.count / n
        with np.errstate(over="ignore", invalid="ignore"):
            delta = other.mean - self.mean
            mean = self.mean + delta * share
            m2 = self.m2 + other.m2 + delta * delta * self.count * share
        if not math.isfinite(mean):  # means near float64's limits: weighed instead, never beyond them
            mean = self.mean * (self.count / n) + other.mean * share
        self.mean, self.m2 = mean, m2 if math.isfinite(m2) else math.inf
        self.count = n
        self.min = min(self.min, other.min)  # type: ignore[type-var]
        self.max = max(self.max, other.max)  # type: ignore[type-var]

    @property
    def std(self) -> float | None:
        """The population standard deviation (numpy's ``std``, ddof 0); None without values,
        or when it is beyond float64."""
        std = math.sqrt(self.m2 / self.count) if self.count else math.inf
        return std if math.isfinite(std) else None

    def to_json(self) -> dict[str, Any]:
        m2 = self.m2 if math.isfinite(self.m2) else None  # beyond float64: JSON has no infinity
        return {"count": self.count, "mean": self.mean, "m2": m2, "min": self.min, "max": self.max}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Moments:
        m2 = math.inf if obj["m2"] is None else float(obj["m2"])
        return cls(int(obj["count"]), float(obj["mean"]), m2, obj["min"], obj["max"])


def _mean_m2(values: np.ndarray) -> tuple[float, float]:
    """The mean and the sum of squared deviations of finite numbers (flat, nonempty), in
    float64: of parts of PASS values, each centred on its own mean, merged as Chan's parallel
    update does (as exact as one var of the whole). Never a dot product: np.dot hands long
    vectors to a threaded BLAS, 80 times slower on a busy 2-core machine; einsum sums itself."""
    n = int(values.size)
    if n <= PASS:
        return float(values.mean(dtype=np.float64)), float(values.var(dtype=np.float64)) * n
    parts = range(0, n, PASS)
    counts, sums, m2s = np.empty(len(parts)), np.empty(len(parts)), np.empty(len(parts))
    buf = np.empty(PASS, dtype=np.float64)
    for i, start in enumerate(parts):
        part = buf[: min(PASS, n - start)]
        np.copyto(part, values[start : start + PASS], casting="unsafe")  # (uint64 and int64 as NumPy's mean casts them)
        counts[i] = part.size
        sums[i] = np.add.reduce(part)
        np.subtract(part, sums[i] / part.size, out=part)
        m2s[i] = np.einsum("i,i->", part, part)
    mean = float(sums.sum()) / n
    spread = float(np.einsum("i,i,i->", counts, sums / counts - mean, sums / counts - mean))
    return mean, float(m2s.sum()) + spread


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def new_kll() -> dsk.kll_doubles_sketch:
    return dsk.kll_doubles_sketch(KLL_K)


def new_hll() -> dsk.hll_sketch:
    return dsk.hll_sketch(HLL_LG_K, dsk.HLL_4)


def new_top() -> dsk.frequent_strings_sketch:
    return dsk.frequent_strings_sketch(TOP_LG_MAP)


@dataclass
class FeatureStats:
    """What is known of one feature over some records (see the module's docstring).

    ``kind`` is ``int``, ``float``, ``string`` or ``bytes``. A record has the feature
    (``present``), lacks it and read a default (``filled``: filled where it was written, or
    where it is read), or has no value at all (``missing``: an optional feature's None).
    ``values`` are the numbers (numeric kinds, finite ones, every element of a list or
    tensor) or the value lengths (strings and bytes); ``lengths`` the values per record of
    a variable-length feature.
    """

    name: str
    kind: str
    records: int = 0
    present: int = 0
    filled: int = 0
    missing: int = 0
    values: Moments = field(default_factory=Moments)
    zeros: int = 0
    nans: int = 0
    infs: int = 0
    quantiles: Any = field(default_factory=new_kll)  # of ``values``
    lengths: Moments | None = None
    length_quantiles: Any = None
    distinct: Any = None  # HLL: strings and bytes, and labelled ints
    top: Any = None  # frequent items: the same
    long_values: int = 0  # values too long to be top values (TOP_MAX_BYTES)
    # values the top-values sketch was not shown: seen once in a batch of many distinct values,
    # so never frequent enough to be reported (their weight still counts in shares: top_weight)
    top_rest: int = 0

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "float")

    def merge(self, other: FeatureStats) -> None:
        """Add ``other``'s records (statistics of the same feature, other records)."""
        for name in COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.values.merge(other.values)
        self.quantiles.merge(other.quantiles)
        if other.lengths is not None:
            if self.lengths is None:
                self.lengths, self.length_quantiles = Moments(), new_kll()
            self.lengths.merge(other.lengths)
            self.length_quantiles.merge(other.length_quantiles)
        if other.distinct is not None:
            union = dsk.hll_union(HLL_LG_K)
            for each in (self.distinct, other.distinct):
                if each is not None:
                    union.update(each)
            self.distinct = union.get_result(dsk.HLL_4)
        if other.top is not None:
            if self.top is None:
                self.top = new_top()
            self.top.merge(other.top)

    # ---- what readers of statistics ask
    def distinct_estimate(self) -> int | None:
        """Distinct values (an estimate); an empty string or bytes, which the sketch ignores,
        counts as one more when there was one (``zeros`` counts them)."""
        if self.distinct is None:
            return None
        empty = 1 if self.zeros and not self.numeric else 0
        estimate = (0 if self.distinct.is_empty() else round(self.distinct.get_estimate())) + empty
        return min(estimate, self.values.count)  # never more distinct values than values (HLL's error)

    @property
    def top_weight(self) -> int:
        """The values the top-value shares are of (tracked, and passed over as never frequent)."""
        return (int(self.top.total_weight) if self.top is not None else 0) + self.top_rest

    def top_values(self, limit: int = 10) -> list[tuple[str, int]]:
        """The surely frequent values with their estimated counts, most first (exact while the
        feature has fewer distinct values than the sketch tracks)."""
        if self.top is None or self.top.is_empty():
            return []
        items = self.top.get_frequent_items(_NO_FALSE_POSITIVES)
        return [(item, int(estimate)) for item, estimate, _lo, _hi in items[:limit]]

    def quantile_values(self, ranks: list[float]) -> list[float] | None:
        if self.quantiles.is_empty():
            return None
        # the ends exactly (a KLL sketch past its first compaction answers 1.0 with a retained item)
        ends = {0.0: self.quantiles.get_min_value(), 1.0: self.quantiles.get_max_value()}
        return [float(ends.get(r, q)) for r, q in zip(ranks, self.quantiles.get_quantiles(ranks), strict=True)]

    def histogram(self, buckets: int = 10) -> list[tuple[float, float, float]] | None:
        """Equal-width buckets between minimum and maximum: (low, high, estimated count). The
        counts are of every value, the sketch's shares scaled up (a tensor's sketch holds a sample)."""
        lo, hi = self.values.min, self.values.max
        if self.quantiles.is_empty() or lo is None or hi is None:
            return None
        if lo == hi:
            return [(float(lo), float(hi), float(self.values.count))]
        if math.isfinite(float(hi) - float(lo)):
            edges = np.linspace(float(lo), float(hi), buckets + 1)
        else:  # a range wider than float64 holds: halved, spaced, doubled again (exactly)
            edges = np.linspace(float(lo) / 2, float(hi) / 2, buckets + 1) * 2
        # the PMF's buckets are [edge, next edge); the last one closes at the maximum
        pmf = self.quantiles.get_pmf(edges[1:-1].tolist())
        n = self.values.count
        return [(float(edges[i]), float(edges[i + 1]), float(p) * n) for i, p in enumerate(pmf)]

    # ---- storage
    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "values": self.values.to_json()}
        out.update((name, getattr(self, name)) for name in COUNTS)
        if not self.quantiles.is_empty():
            out["quantiles"] = _b64(self.quantiles.serialize())
        if self.lengths is not None:
            out["lengths"] = self.lengths.to_json()
            out["length_quantiles"] = _b64(self.length_quantiles.serialize())
        if self.distinct is not None:
            out["distinct"] = _b64(self.distinct.serialize_compact())
        if self.top is not None:
            out["top"] = _b64(self.top.serialize())
        return out

    @classmethod
    def from_json(cls, name: str, obj: dict[str, Any]) -> FeatureStats:
        fs = cls(name, obj["kind"])
        for key in COUNTS:
            setattr(fs, key, int(obj.get(key, 0)))
        fs.values = Moments.from_json(obj["values"])
        if "quantiles" in obj:
            fs.quantiles = dsk.kll_doubles_sketch.deserialize(_unb64(obj["quantiles"]))
        if "lengths" in obj:
            fs.lengths = Moments.from_json(obj["lengths"])
            fs.length_quantiles = dsk.kll_doubles_sketch.deserialize(_unb64(obj["length_quantiles"]))
        if "distinct" in obj:
            fs.distinct = dsk.hll_sketch.deserialize(_unb64(obj["distinct"]))
        if "top" in obj:
            fs.top = dsk.frequent_strings_sketch.deserialize(_unb64(obj["top"]))
        return fs
