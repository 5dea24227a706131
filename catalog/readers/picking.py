"""Some rows of a read plan, for people looking at data (`catalog cat`, the viewer): a range
or a sample, read by position where every shard is uncompressed (record indexes, built on
the fly where missing), else read in order with the others decoded and passed over."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from catalog.commit.handles import DatasetHandle
from catalog.commit.plans import ReadPlan
from catalog.indexing import ensure_indexes
from catalog.readers.batches import rows
from catalog.readers.source import DataSource


def rows_at(
    ds: DatasetHandle,
    plan: ReadPlan,
    columns: list[str] | None,
    chosen: list[int] | None,
    offset: int = 0,
    limit: int | None = None,
    write: bool = True,
) -> Iterator[dict[str, Any]]:
    """The rows numbered ``chosen`` (ascending), or, when None, ``offset`` to ``offset + limit``.
    ``write=False`` (the viewer, which changes nothing): no record index is built, so shards
    without one are read in order."""
    if chosen is None:
        stop = plan.records if limit is None else min(offset + limit, plan.records)
        if offset == 0 or not _positional(plan, write):
            return in_order(plan, columns, offset, stop)
        chosen = list(range(offset, stop))
    if _positional(plan, write):
        source = DataSource(ensure_indexes(ds, plan) if write else plan, columns)
        return (source[i] for i in chosen)
    return _picked(in_order(plan, columns, 0, None), set(chosen))


def _positional(plan: ReadPlan, write: bool) -> bool:
    """Whether every shard can be read by position (uncompressed; indexed, or allowed to be)."""
    return all(s.compression == "none" and (write or s.index_checksum is not None) for s in plan.shards)


def in_order(plan: ReadPlan, columns: list[str] | None, start: int, stop: int | None) -> Iterator[dict[str, Any]]:
    """Rows ``start`` to ``stop`` in dataset order; the reader starts even for none (its errors,
    a missing shard, say, are reported all the same)."""
    for i, row in enumerate(rows(plan, columns)):
        if stop is not None and i >= stop:
            break
        if i >= start:
            yield row


def _picked(found: Iterable[dict[str, Any]], wanted: set[int]) -> Iterator[dict[str, Any]]:
    last = max(wanted, default=-1)
    for i, row in enumerate(found):
        if i > last:
            break
        if i in wanted:
            yield row
