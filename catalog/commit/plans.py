"""What a reader reads: one pinned version's schema and the record ranges of its shards that
a split spec selects. A ReadPlan is a plain, picklable value: readers in DataLoader workers,
spawned processes or other machines carry it, never a connection to the manifest."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, TypedDict

from sqlalchemy import select

from catalog import manifest as mf
from catalog.commit.handles import DatasetHandle, LiveShard, live_values, load_schema
from catalog.commit.listing import splits_at
from catalog.commit.slicing import SplitSlice, resolve
from catalog.errors import UsageError
from catalog.keywords import check_keywords
from catalog.schema import Schema
from catalog.storage.cache import ShardCache, cached
from catalog.storage.fileio import FileIO


@dataclass(frozen=True, kw_only=True)
class PlannedShard(LiveShard):
    """What a reader reads of one live shard: records ``start`` to ``stop`` of it (a split
    spec may take part of it), and where its record index is. A LiveShard plus that range:
    picklable like the rest of a ReadPlan, so readers in other processes carry it."""

    index_path: str  # absolute: where its record index is (or will be): the data area's index tree
    start: int
    stop: int
    cache: ShardCache | None = None  # where a copy of a remote shard is kept on this host (storage.cache)

    @property
    def count(self) -> int:
        return self.stop - self.start

    @property
    def io(self) -> FileIO:
        """What reads its file (storage.fileio, chosen by ``path``), as a LiveShard's; with a
        ``cache``, a remote shard is read from its local copy (fetched once, checked whole)."""
        return cached(super().io, self.cache, self.path, self.checksum, self.bytes)


@dataclass(frozen=True)
class ReadPlan:
    dataset: str
    version: int
    schema_version: int
    schema_json: dict[str, Any]
    data_root: str  # where index sidecars are found (storage.store_for)
    shards: tuple[PlannedShard, ...]
    split: str | None  # the spec it was made for; None: every record of the version

    @property
    def records(self) -> int:
        return sum(s.count for s in self.shards)

    def schema(self) -> Schema:
        return Schema.from_json(self.schema_json)


def plan(ds: DatasetHandle, version: int | str | None = None, split: str | None = None) -> ReadPlan:
    """The plan for ``version`` (default: current) and ``split`` (a TFDS-style spec; default:
    all records, in dataset order), read from one manifest snapshot."""
    with mf.read_txn(ds.catalog.engine) as conn:
        v, sv, query = ds._live(conn, version)
        slices = None
        if split is not None:
            # The splits' record counts summed in SQL (from an index), then only the rows of the
            # splits the spec names: a 1% split of 100k shards reads 1k rows, not 100k.
            commit = conn.execute(select(mf.COMMITS).where(mf.COMMITS.c.dataset_id == ds.id, mf.COMMITS.c.version == v))
            totals = splits_at(conn, ds.name, commit.one(), query)
            slices = resolve(split, {name: t["records"] for name, t in totals.items()})
            query = query.where(mf.SHARDS.c.split.in_(sorted({sl.split for sl in slices})))
        rows = conn.execute(query).all()
        schema = json.loads(json.dumps(load_schema(conn, ds.id, sv).to_json()))
    store = ds.catalog.store
    shards = [
        PlannedShard(*live_values(store.shard_url, r), index_path=store.index_url(r.path), start=0, stop=r.records)
        for r in rows
    ]
    if slices is not None:
        shards = list(_select(shards, slices))
    return ReadPlan(ds.name, v, sv, schema, str(ds.catalog.store.root), tuple(shards), split)


class CacheKeywords(TypedDict, total=False):
    """Every reader's ``**cache`` keywords: shards on an object store are read from whole
    copies kept in ``cache_dir`` (at most ``cache_limit`` bytes of them), fetched once per
    host (storage/cache.py). Both None by default: read where they are."""

    cache_dir: str | os.PathLike[str] | None
    cache_limit: int | None


def with_cache(pinned: ReadPlan, cache: CacheKeywords, reader: str) -> ReadPlan:
    """``pinned`` reading its remote shards from copies kept in ``cache_dir`` (at most
    ``cache_limit`` bytes of them: storage.cache); as it is without a ``cache_dir``.
    ``cache``: the ``**cache`` keywords of ``reader`` (a method's name), checked here."""
    check_keywords(reader, cache, CacheKeywords)
    cache_dir, cache_limit = cache.get("cache_dir"), cache.get("cache_limit")
    if cache_dir is None:
        if cache_limit is not None:
            raise UsageError("cache_limit needs a cache_dir")
        return pinned
    kept = ShardCache.at(cache_dir, cache_limit)
    return replace(pinned, shards=tuple(replace(s, cache=kept) for s in pinned.shards))


def _select(shards: list[PlannedShard], slices: list[SplitSlice]) -> Iterator[PlannedShard]:
    """The shard ranges of each slice, slice after slice, each in its split's read order."""
    for sl in slices:
        first = 0  # the split's record number at the start of the shard
        for s in shards:
            if s.split != sl.split:
                continue
            start, stop = max(sl.start, first), min(sl.stop, first + s.records)
            if start < stop:  # whole (as planned: 0 to its records): no copy of the dataclass per shard
                whole = start == first and stop == first + s.records
                yield s if whole else replace(s, start=start - first, stop=stop - first)
            first += s.records
