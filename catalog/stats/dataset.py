"""The statistics of a set of records (a shard, a version, a split): one FeatureStats per
feature, stored in the manifest as compressed JSON (sketches as base64)."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from catalog.errors import ManifestError
from catalog.schema.predicates import Range
from catalog.stats.sketches import FeatureStats

STATS_FORMAT = 1  # of the stored blob


@dataclass
class DatasetStats:
    """Per-feature statistics of ``records`` records."""

    features: dict[str, FeatureStats] = field(default_factory=dict)
    records: int = 0
    shards: int = 1  # how many shards' statistics were merged into these

    def merge(self, other: DatasetStats) -> None:
        """Add ``other``'s records: a feature only one side has (schemas differ across
        versions) keeps what is known of it."""
        self.records += other.records
        self.shards += other.shards
        for name, fs in other.features.items():
            mine = self.features.get(name)
            if mine is None or mine.kind != fs.kind:
                self.features[name] = FeatureStats.from_json(name, fs.to_json())  # a copy
            else:
                mine.merge(fs)

    def ranges(self) -> dict[str, Range]:
        """Per feature, what a predicate may rule these records out by (Predicate.may_match):
        (min, max, records without a value, records). min and max are kept only where they
        bound every value exactly: one finite number a record (a scalar with no NaN or
        infinity among its values, which the range leaves out); else None (unknown)."""
        out: dict[str, Range] = {}
        for name, fs in self.features.items():
            v = fs.values
            exact = fs.numeric and not (fs.nans or fs.infs) and v.count == fs.records - fs.missing
            lo, hi = (v.min, v.max) if exact and v.count else (None, None)
            out[name] = (lo, hi, fs.missing, fs.records)
        return out

    def to_bytes(self) -> bytes:
        features = {name: f.to_json() for name, f in self.features.items()}
        body = {"format": STATS_FORMAT, "records": self.records, "features": features}
        return zlib.compress(json.dumps(body, separators=(",", ":"), allow_nan=False).encode("utf-8"), 6)

    @classmethod
    def from_bytes(cls, data: bytes, where: str = "statistics") -> DatasetStats:
        try:
            body: dict[str, Any] = json.loads(zlib.decompress(data))
            if body.get("format") != STATS_FORMAT:
                raise ValueError(f"format {body.get('format')!r}, this catalog reads {STATS_FORMAT}")
            features = {name: FeatureStats.from_json(name, f) for name, f in body["features"].items()}
            return cls(features, int(body["records"]))
        except (ValueError, KeyError, TypeError, RuntimeError, zlib.error) as e:
            detail = f"{where}: damaged statistics in the manifest ({e}); run `catalog stats --compute`"
            raise ManifestError(detail) from e


def merged(parts: Iterable[DatasetStats]) -> DatasetStats:
    """One DatasetStats for all of ``parts`` (none: empty)."""
    out = DatasetStats(shards=0)
    for part in parts:
        out.merge(part)
    return out
