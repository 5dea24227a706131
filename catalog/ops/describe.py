"""`catalog stats`: a version's or split's feature statistics from the manifest, statistics
computed for shards that have none (one read each), and two versions or splits compared."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from catalog.commit.handles import DatasetHandle
from catalog.commit.statistics import VersionStats, register_stats, shards_without_stats, version_stats
from catalog.commit.values import Progress, VersionRef
from catalog.errors import CorruptShardError, FeatureNotFoundError
from catalog.jsonform import JsonReport
from catalog.schema import Feature
from catalog.stats import FeatureStats, Tally, feature_kind
from catalog.stats.drift import FeatureDrift, drift
from catalog.stats.summary import summary
from catalog.storage import shard_batches
from catalog.storage.content import check_named
from catalog.words import counted


@dataclass
class StatsReport:
    """The statistics of a version (of a split), for the features asked (default: all)."""

    at: VersionStats
    features: list[str]

    def feature(self, name: str) -> Any:
        return self.at.stats.features.get(name)

    def summaries(self) -> list[dict[str, Any]]:
        feats = self.at.schema.all_features
        out = []
        for name in self.features:
            fs = self.at.stats.features.get(name)
            if fs is not None:
                out.append(summary(fs, feats[name].names if name in feats else None))
        return out

    def to_json(self) -> dict[str, Any]:
        a = self.at
        return {
            "dataset": a.dataset, "version": a.version, "schema_version": a.schema_version, "split": a.split,
            "splits": a.splits, "records": a.records, "shards": a.shards,
            "not_computed": {"shards": a.missing_shards, "records": a.missing_records, "damaged": a.damaged},
            "features": self.summaries(),
        }  # fmt: skip


def _pick(schema_features: dict[str, Feature], wanted: Sequence[str] | None, dataset: str) -> list[str]:
    if not wanted:
        return list(schema_features)
    unknown = [f for f in wanted if f not in schema_features]
    if unknown:
        have = ", ".join(schema_features) or "none"
        raise FeatureNotFoundError(f"dataset {dataset!r} has no feature {unknown[0]!r} (features: {have})")
    return list(dict.fromkeys(wanted))


def stats(
    ds: DatasetHandle, version: VersionRef = None, split: str | None = None, features: Sequence[str] | None = None
) -> StatsReport:
    """The merged statistics of ``version`` (default: current), of ``split`` (default: all)."""
    at = version_stats(ds, version, split)
    return StatsReport(at, _pick(at.schema.all_features, features, ds.name))


@dataclass
class ComputeReport(JsonReport):
    dataset: str
    computed: int = 0  # shards whose statistics this run registered
    records: int = 0


def compute_stats(ds: DatasetHandle, version: VersionRef = None, progress: Progress | None = None) -> ComputeReport:
    """Statistics for the shards live at ``version`` that have none: one read of each (every
    record's CRC checked), registered a shard at a time, so an interruption keeps what is done."""
    report = ComputeReport(ds.name)
    for shard, schema in shards_without_stats(ds, version):
        tally = Tally(schema)
        check_named(shard.path, shard.checksum, shard.fingerprint, shard.adopted)
        for batch in shard_batches(shard.path, shard.bytes):
            tally.add_records(batch)
        result = tally.result(functools.partial(shard_batches, shard.path, shard.bytes))
        if result.records != shard.records:
            found = f"{counted(result.records, 'record')} read, {shard.records} registered"
            raise CorruptShardError(shard.path, message=f"{shard.path}: {found}; run `catalog verify`")
        if register_stats(ds, {shard.rel: result.to_bytes()}):
            report.computed += 1
            report.records += shard.records
        if progress is not None:
            progress(shard.bytes)
    return report


_AT = re.compile(r"^(?P<split>[^@]+)@(?P<version>.+)$")


@dataclass
class Comparison:
    """Feature by feature, how ``b`` differs from ``a`` (each a version, a tag or a split)."""

    a: VersionStats
    b: VersionStats
    features: list[FeatureDrift] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        def side(v: VersionStats) -> dict[str, Any]:
            return {"version": v.version, "split": v.split, "records": v.records, "not_computed": v.missing_shards}

        features = [f.to_json() for f in self.features]
        return {"dataset": self.a.dataset, "a": side(self.a), "b": side(self.b), "features": features}


def side_of(ds: DatasetHandle, spec: str, version: VersionRef = None) -> VersionStats:
    """``spec``: a version number, a tag, a split (at ``version``, default current) or SPLIT@VERSION."""
    m = _AT.match(spec)
    if m:
        at = m.group("version")
        return version_stats(ds, at, m.group("split"))  # digits or a tag: resolved by the catalog
    if spec.isascii() and spec.isdigit():
        return version_stats(ds, spec)
    here = ds.info(version)  # the splits from the manifest's totals, before merging anything
    if spec in (here.splits or {}):
        return version_stats(ds, here.version, spec)
    if all(t.name != spec for t in ds.tags()):  # no split, tag or version: one line naming what there is
        raise ds.unknown_name(spec, here.splits or {})
    return version_stats(ds, spec)  # a tag


def compare_stats(
    ds: DatasetHandle, a: str, b: str, features: Sequence[str] | None = None, version: VersionRef = None
) -> Comparison:
    """How the statistics of ``b`` differ from those of ``a``."""
    left, right = side_of(ds, a, version), side_of(ds, b, version)
    union = {**left.schema.all_features, **right.schema.all_features}
    names = _pick(union, features, ds.name)
    out = Comparison(left, right)
    for name in names:
        x, y = left.stats.features.get(name), right.stats.features.get(name)
        if x is None and y is None:  # no records (or none computed) on either side
            continue
        # a side whose schema has the feature but no records of it is empty, not without it
        x = x or _empty(name, left.schema.all_features.get(name))
        y = y or _empty(name, right.schema.all_features.get(name))
        out.features.append(drift(name, x, y))
    return out


def _empty(name: str, feat: Feature | None) -> FeatureStats | None:
    return None if feat is None else FeatureStats(name, feature_kind(feat))
