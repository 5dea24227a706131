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
# zlib's fastest level: most of the blob is base64 of sketches, which level 6 shrank only 6%
# more, for 4 times the CPU (every append compresses its shards' statistics before its commit)
STATS_LEVEL = 1


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
        see :func:`feature_range`."""
        counts = ("records", "missing", "nans", "infs")
        return {
            name: feature_range({"kind": fs.kind, "values": fs.values.to_json(), **{k: getattr(fs, k) for k in counts}})
            for name, fs in self.features.items()
        }

    def to_bytes(self) -> bytes:
        features = {name: f.to_json() for name, f in self.features.items()}
        body = {"format": STATS_FORMAT, "records": self.records, "features": features}
        text = json.dumps(body, separators=(",", ":"), allow_nan=False).encode("utf-8")
        return zlib.compress(text, STATS_LEVEL)

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


def feature_range(obj: dict[str, Any]) -> Range:
    """(min, max, records without a value, records) of one feature's statistics (their JSON
    form, ``FeatureStats.to_json``). min and max are kept only where they bound every value
    exactly: one finite number a record (a scalar with no NaN or infinity among its values,
    which the range leaves out); else None (unknown)."""
    v, records, missing = obj["values"], int(obj["records"]), int(obj.get("missing", 0))
    numeric = obj["kind"] in ("int", "float") and not (obj.get("nans", 0) or obj.get("infs", 0))
    exact = numeric and int(v["count"]) == records - missing and v["count"] > 0
    return (v["min"], v["max"], missing, records) if exact else (None, None, missing, records)


def stored_ranges(data: bytes, records: int) -> dict[str, Range] | None:
    """:meth:`DatasetStats.ranges` of stored statistics, read without building their sketches
    (most of what reading them costs: a delete looks at every shard's); None when they do not
    read back, or do not count ``records`` (as the manifest's readers treat them)."""
    try:
        body: dict[str, Any] = json.loads(zlib.decompress(data))
        if body.get("format") != STATS_FORMAT or int(body["records"]) != records:
            return None
        return {name: feature_range(f) for name, f in body["features"].items()}
    except (ValueError, KeyError, TypeError, AttributeError, zlib.error):
        return None
