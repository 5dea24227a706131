"""A version's (or a split's) feature statistics, merged from its shards' in the manifest
(no data read), and statistics registered later for shards that had none."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, insert, select

from catalog import manifest as mf
from catalog.commit.handles import DatasetHandle, LiveShard, live_at, live_values, load_schema
from catalog.commit.values import SHARD_CHUNK, VersionRef
from catalog.errors import CatalogError, CheckError, SplitNotFoundError, UsageError
from catalog.manifest import COMMITS, SHARD_STATS, SHARDS
from catalog.schema import Feature, Schema
from catalog.schema.predicates import Range
from catalog.stats import DatasetStats, merged
from catalog.stats.dataset import stored_ranges
from catalog.stats.drift import Violation, measure
from catalog.storage import ShardFile


@dataclass
class VersionStats:
    """What is known of the records of ``version`` (of ``split``, None: all splits)."""

    dataset: str
    version: int
    schema_version: int
    schema: Schema
    split: str | None
    stats: DatasetStats
    shards: int = 0
    records: int = 0
    # shards (and their records) without statistics: registered before format 7, or with
    # statistics off; `catalog stats NAME --compute` fills them in
    missing_shards: int = 0
    missing_records: int = 0
    damaged: int = 0  # of the missing: statistics that do not read back (`--compute` replaces them)
    splits: list[str] = field(default_factory=list)  # every split of the version

    @property
    def complete(self) -> bool:
        return self.missing_shards == 0


# Merged statistics already worked out in this process, by (manifest, dataset, version, split):
# a version's shards never change, and merging KLL sketches flips coins (DataSketches' own
# generator, which cannot be seeded), so without this two looks at one version could show
# medians apart by up to the sketch's error. Complete ones only (a --compute adds to the rest).
_MERGED: OrderedDict[tuple[str, int, int, str | None, str], VersionStats] = OrderedDict()
_MERGED_KEPT = 64


def version_stats(ds: DatasetHandle, version: VersionRef = None, split: str | None = None) -> VersionStats:
    """The merged statistics of the shards live at ``version`` (in ``split``), streamed from
    the manifest in chunks: a million shards never sit in memory at once."""
    with mf.read_txn(ds.catalog.engine) as conn:
        v, sv = ds._resolve_version(conn, version)
        made = conn.execute(
            select(COMMITS.c.created_at).where(COMMITS.c.dataset_id == ds.id, COMMITS.c.version == v)
        ).scalar()  # in the key: a dataset dropped and registered again may get the same id
        key = (str(ds.catalog.engine.url), ds.id, v, split, str(made))
        if key in _MERGED:
            _MERGED.move_to_end(key)
            return _MERGED[key]
        live = live_at(conn, ds.id, v)
        splits = sorted(set(conn.execute(live.with_only_columns(SHARDS.c.split).order_by(None).distinct()).scalars()))
        if split is not None and split not in splits:
            have = ", ".join(splits) or "none"
            raise SplitNotFoundError(f"no split {split!r} in dataset {ds.name!r} version {v} (splits: {have})")
        query = live.with_only_columns(SHARDS.c.path, SHARDS.c.records, SHARD_STATS.c.data).join_from(
            SHARDS, SHARD_STATS, SHARD_STATS.c.path == SHARDS.c.path, isouter=True
        )
        if split is not None:
            query = query.where(SHARDS.c.split == split)
        out = VersionStats(ds.name, v, sv, load_schema(conn, ds.id, sv), split, merged(()), splits=splits)
        result = conn.execution_options(yield_per=SHARD_CHUNK).execute(query)
        for rows in result.partitions():
            for path, records, data in rows:
                out.shards += 1
                out.records += records
                found = readable(data, path, records)
                if found is None:
                    out.missing_shards += 1
                    out.missing_records += records
                    out.damaged += data is not None
                else:
                    out.stats.merge(found)
    if out.complete:
        _MERGED[key] = out
        while len(_MERGED) > _MERGED_KEPT:
            _MERGED.popitem(last=False)
    return out


def readable(data: bytes | None, path: str, records: int) -> DatasetStats | None:
    """A shard's stored statistics, None when there are none, or none that read back and
    count its records (a damaged row: left out, and replaced by `catalog stats --compute`)."""
    if data is None:
        return None
    try:
        found = DatasetStats.from_bytes(data, path)
    except CatalogError:
        return None
    return found if found.records == records else None


def shards_without_stats(ds: DatasetHandle, version: VersionRef = None) -> list[tuple[LiveShard, Schema]]:
    """The shards live at ``version`` that have no statistics (or damaged ones), each with
    the schema its records follow."""
    url = ds.catalog.store.shard_url
    with mf.read_txn(ds.catalog.engine) as conn:
        v, _sv = ds._live(conn, version)[:2]
        query = (
            live_at(conn, ds.id, v)
            .add_columns(SHARD_STATS.c.data)
            .join_from(SHARDS, SHARD_STATS, SHARD_STATS.c.path == SHARDS.c.path, isouter=True)
        )
        rows = [r for r in conn.execute(query) if readable(r.data, r.path, r.records) is None]
        schemas = {sv: load_schema(conn, ds.id, sv) for sv in {r.schema_version for r in rows}}
    return [(LiveShard(*live_values(url, r)), schemas[r.schema_version]) for r in rows]


def stored_stats(ds: DatasetHandle, paths: Iterable[str]) -> dict[str, DatasetStats]:
    """The stored statistics of the shards named, those that have some that read back (a
    damaged row is as good as none: a rewrite then leaves its shard's statistics to --compute)."""
    wanted = list(paths)
    out: dict[str, DatasetStats] = {}
    with mf.read_txn(ds.catalog.engine) as conn:
        for i in range(0, len(wanted), mf.ID_CHUNK):
            chunk = wanted[i : i + mf.ID_CHUNK]
            query = (
                select(SHARD_STATS.c.path, SHARD_STATS.c.data, SHARDS.c.records)
                .join_from(SHARD_STATS, SHARDS, SHARDS.c.path == SHARD_STATS.c.path)
                .where(SHARD_STATS.c.path.in_(chunk))
            )
            for path, data, records in conn.execute(query):
                found = readable(data, path, records)
                if found is not None:
                    out[path] = found
    return out


def stored_feature_ranges(ds: DatasetHandle, paths: Iterable[str]) -> dict[str, dict[str, Range]]:
    """:func:`stored_stats`' ranges (``DatasetStats.ranges``) alone, read without building any
    sketch: what a delete rules shards out by."""
    wanted = list(paths)
    out: dict[str, dict[str, Range]] = {}
    with mf.read_txn(ds.catalog.engine) as conn:
        for i in range(0, len(wanted), mf.ID_CHUNK):
            query = (
                select(SHARD_STATS.c.path, SHARD_STATS.c.data, SHARDS.c.records)
                .join_from(SHARD_STATS, SHARDS, SHARDS.c.path == SHARD_STATS.c.path)
                .where(SHARD_STATS.c.path.in_(wanted[i : i + mf.ID_CHUNK]))
            )
            for path, data, records in conn.execute(query):
                found = stored_ranges(data, records) if data is not None else None
                if found is not None:
                    out[path] = found
    return out


def register_stats(ds: DatasetHandle, computed: dict[str, bytes]) -> int:
    """Register statistics computed later (``catalog stats --compute``) for shards that still
    have none (or damaged ones) and are still registered: safe beside writers, idempotent.
    Returns how many."""
    if not computed:
        return 0

    def txn() -> int:
        with mf.write_txn(ds.catalog.engine) as conn:
            paths = list(computed)
            known = dict(conn.execute(select(SHARDS.c.path, SHARDS.c.records).where(SHARDS.c.path.in_(paths))).all())
            stored = select(SHARD_STATS.c.path, SHARD_STATS.c.data).where(SHARD_STATS.c.path.in_(paths))
            good = {p for p, d in conn.execute(stored) if p in known and readable(d, p, known[p]) is not None}
            fresh = [p for p in computed if p in known and p not in good]
            if fresh:
                conn.execute(delete(SHARD_STATS).where(SHARD_STATS.c.path.in_(fresh)))
                rows = [{"path": p, "dataset_id": ds.id, "data": computed[p]} for p in fresh]
                conn.execute(insert(SHARD_STATS), rows)
            return len(fresh)

    return mf.with_lock_retry(txn)


@dataclass(frozen=True)
class DriftCheck:
    """``append --check``: ``mode`` fail (refuse, nothing registered) or warn (commit, warn);
    ``max_linf``: the L-infinity limit of every feature without a ``linf`` check of its own."""

    mode: str = "fail"
    max_linf: float | None = None

    @classmethod
    def asked(cls, mode: str | None, max_linf: float | None) -> DriftCheck | None:
        """The check ``check=``/``max_linf=`` ask for (a limit alone implies fail); None: none."""
        return None if mode is None and max_linf is None else cls(mode or "fail", max_linf)

    def __post_init__(self) -> None:
        if self.mode not in ("fail", "warn"):
            raise UsageError(f"bad check mode {self.mode!r}: fail or warn")
        limit = self.max_linf
        number = isinstance(limit, (int, float)) and not isinstance(limit, bool)
        if limit is not None and not (number and 0 <= limit <= 1):
            raise UsageError(f"--max-linf is a distance between 0 and 1, got {self.max_linf}")


# `append --check` with no threshold anywhere (no "checks" in the schema that apply, no
# --max-linf) limits every feature's L-infinity distance to this: TFDV's usual threshold, and
# the distance `stats --compare` marks.
DEFAULT_MAX_LINF = 0.1
_NO_COMPARE = ("max_missing", "min", "max")  # checks of the new records alone


@dataclass(frozen=True)
class CheckReport:
    """What ``append --check`` compared: the new records' figures against their limits, and
    the statistics they were compared with (``version``, ``split``: None, all splits)."""

    version: int
    split: str | None
    records: int  # of the data compared with
    new_records: int
    measured: tuple[Violation, ...]

    @property
    def violations(self) -> list[Violation]:
        return [v for v in self.measured if v.broken]

    def lines(self) -> list[str]:
        where = f"split {self.split!r}" if self.split is not None else "all splits"
        against = f"version {self.version} ({where}, {self.records} records)"
        out = [f"checked {self.new_records} new records against {against}:"]
        features: dict[str, list[str]] = {}
        for v in self.measured:
            features.setdefault(v.feature, []).append(v.measured())
        out += [f"  feature {name!r}: {', '.join(figures)}" for name, figures in features.items()]
        return out

    def to_json(self) -> dict[str, Any]:
        against = {"version": self.version, "split": self.split, "records": self.records}
        return {"against": against, "records": self.new_records, "features": [v.to_json() for v in self.measured]}


def _applying(feat: Feature) -> dict[str, float]:
    """The feature's checks that apply to it (a range on text, stored by an earlier version, does not)."""
    numeric = feat.tensor or feat.dtype in ("int64", "float32")
    return {k: v for k, v in (feat.checks or ()) if numeric or k not in ("min", "max")}


def _limits(ds: DatasetHandle, spec: DriftCheck) -> tuple[float | None, bool]:
    """The L-infinity limit of features without their own, and whether it is the default."""
    if spec.max_linf is not None:
        return spec.max_linf, False
    if any(_applying(f) for f in ds.schema.all_features.values()):
        return None, False
    return DEFAULT_MAX_LINF, True


def _nothing_to_check(ds: DatasetHandle, why: str) -> CheckError:
    return CheckError(
        f"dataset {ds.name!r}: --check has nothing to check: {why}, and the schema sets no max_missing, min or "
        "max checks; append without --check, or declare checks in the schema"
    )


def check_possible(ds: DatasetHandle, spec: DriftCheck) -> None:
    """Refuse ``--check`` before anything is written when it could compare nothing: no records
    to compare with and no check of the new records alone."""
    if ds.info().records or any(set(_applying(f)) & set(_NO_COMPARE) for f in ds.schema.all_features.values()):
        return
    raise _nothing_to_check(ds, "no records to compare the new ones with")


def drift_check(ds: DatasetHandle, files: list[ShardFile], split: str, spec: DriftCheck) -> CheckReport:
    """The new shards' records against the schema's checks (else ``spec.max_linf``, else the
    default limit), compared with the dataset's current statistics (of ``split`` when it has
    records, else of every split)."""
    if any(f.stats is None for f in files):
        raise CheckError(f"dataset {ds.name!r}: --check needs statistics, and this catalog computes none")
    new = merged(DatasetStats.from_bytes(f.stats or b"", f.rel) for f in files)
    here = ds.info()  # the splits from the manifest's totals: one merge, of the split's or of all
    side = split if split in (here.splits or {}) else None
    current = version_stats(ds, here.version, side)
    max_linf, default = _limits(ds, spec)
    out: list[Violation] = []
    for name, feat in ds.schema.all_features.items():
        checks = _applying(feat)
        if (checks or max_linf is not None) and name in new.features:
            out += measure(name, new.features[name], current.stats.features.get(name), checks, max_linf, default)
    if not out:
        raise _nothing_to_check(ds, "no feature of the new records could be compared with the dataset's")
    return CheckReport(here.version, side, current.records, sum(f.records for f in files), tuple(out))


def refuse(ds: DatasetHandle, violations: list[Violation]) -> CheckError:
    """The one line for an append its checks refuse."""
    more = f" (and {len(violations) - 1} more)" if len(violations) > 1 else ""
    first = violations[0].message()
    return CheckError(f"dataset {ds.name!r}: append refused by --check: {first}{more}; nothing registered")
