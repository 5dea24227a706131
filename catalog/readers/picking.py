"""Some rows of a read plan, for people looking at data (`catalog cat`, the viewer): a range
or a sample, read by position where every shard is uncompressed (record indexes, built on
the fly where missing by the caller's ``indexer``: building them is an operation, a layer
above the readers), else read in order with the others decoded and passed over."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

from catalog.commit.handles import DatasetHandle
from catalog.commit.plans import PlannedShard, ReadPlan
from catalog.readers.batches import rows
from catalog.readers.source import DataSource


def rows_at(
    ds: DatasetHandle,
    plan: ReadPlan,
    columns: list[str] | None,
    chosen: list[int] | None,
    offset: int = 0,
    limit: int | None = None,
    indexer: Callable[[DatasetHandle, ReadPlan], ReadPlan] | None = None,
) -> Iterator[dict[str, Any]]:
    """The rows numbered ``chosen`` (ascending), or, when None, ``offset`` to ``offset + limit``.
    ``indexer`` builds the record indexes shards lack (``catalog cat``: ops.indexing's
    ensure_indexes); without one (the viewer, which changes nothing) shards without an index
    are read in order."""
    write = indexer is not None
    if chosen is None:
        stop = plan.records if limit is None else min(offset + limit, plan.records)
        if offset == 0 or not _positional(plan, write):
            return in_order(plan, columns, offset, stop)
        chosen = list(range(offset, stop))
    if _positional(plan, write):
        source = DataSource(indexer(ds, plan) if indexer is not None else plan, columns)
        return (source[i] for i in chosen)
    return _picked(in_order(plan, columns, 0, None), set(chosen))


def _positional(plan: ReadPlan, write: bool) -> bool:
    """Whether every shard can be read by position (uncompressed; indexed, or allowed to be)."""
    return all(s.compression == "none" and (write or s.index_checksum is not None) for s in plan.shards)


def in_order(plan: ReadPlan, columns: list[str] | None, start: int, stop: int | None) -> Iterator[dict[str, Any]]:
    """Rows ``start`` to ``stop`` in dataset order: the shards before ``start`` are passed over
    by their record counts, the records before it in its shard framed but not decoded (as a
    split's slice is read). The reader starts even for none (its errors, a missing shard, say,
    are reported all the same)."""
    yield from rows(window(plan, start, plan.records if stop is None else stop), columns)


def window(plan: ReadPlan, start: int, stop: int) -> ReadPlan:
    """``plan`` narrowed to its records ``start`` to ``stop``; with none, to its first shard's none."""
    shards: list[PlannedShard] = []
    first = 0  # the plan's record number at the start of each shard
    for s in plan.shards:
        lo, hi = max(start - first, 0), min(stop - first, s.count)
        if lo < hi:
            shards.append(replace(s, start=s.start + lo, stop=s.start + hi))
        first += s.count
    if not shards and plan.shards:
        shards.append(replace(plan.shards[0], stop=plan.shards[0].start))
    return replace(plan, shards=tuple(shards))


def _picked(found: Iterable[dict[str, Any]], wanted: set[int]) -> Iterator[dict[str, Any]]:
    last = max(wanted, default=-1)
    for i, row in enumerate(found):
        if i > last:
            break
        if i in wanted:
            yield row
