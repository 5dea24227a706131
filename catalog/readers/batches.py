"""One rank's (and one worker's) share of an epoch as decoded columnar batches, the engine of
``ds.batches()`` (NumPy/JAX) and ``ds.torch()``; and the plain sequential reads
``ds.read()`` and ``ds.records()``.

Dataset order on one rank and one worker streams the shards front to back (no index
needed, compressed shards too); any other share (shuffled, several ranks or workers) reads
its records by position (see positions.py). Both give the same records in the same order.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from catalog.commit.plans import ReadPlan
from catalog.errors import UsageError
from catalog.keywords import Unpack, check_keywords
from catalog.readers.decoding import Decoder, Where
from catalog.readers.files import stream_shard
from catalog.readers.order import ROW_CHUNK, EpochOrder, OrderKeywords, check_samples, worker_chunks
from catalog.readers.positions import RecordReader

Chunk = tuple[list[bytes], Where]
AHEAD = 16  # batches (or row chunks) whose positions are computed together


def stream_plan(plan: ReadPlan, start: int = 0) -> Iterator[tuple[str, int, list[bytes]]]:
    """The plan's records from dataset position ``start`` on, read front to back, as
    (shard location, index within the shard of the first record, records) batches."""
    first = 0
    for shard in plan.shards:
        if first + shard.count > start:
            for index, batch in stream_shard(shard, max(start - first, 0)):
                yield shard.path, index, batch
        first += shard.count


def records(plan: ReadPlan) -> Iterator[bytes]:
    for _url, _index, batch in stream_plan(plan):
        yield from batch


def rows(
    plan: ReadPlan, columns: str | Iterable[str] | None, decode_images: bool = False, channels: int | None = None
) -> Iterator[dict[str, Any]]:
    """Rows (dicts per the plan's schema), in dataset order; checked eagerly, read lazily.
    ``decode_images``, ``channels``: image features as pixels (images.py)."""
    decoder = Decoder(plan, columns, decode_images, channels)
    return _rows(plan, decoder)


def _rows(plan: ReadPlan, decoder: Decoder) -> Iterator[dict[str, Any]]:
    for url, index, batch in stream_plan(plan):
        where = _where_pieces([0], [(url, index)])
        for i, rec in enumerate(batch):
            yield decoder.row(rec, where, i)


def _rebatch(stream: Iterator[tuple[str, int, list[bytes]]], size: int) -> Iterator[Chunk]:
    """Streamed batches regrouped in chunks of ``size`` records (the last may be smaller)."""
    pending: list[bytes] = []
    rows_at: list[int] = []  # the chunk's row where each piece starts
    pieces: list[tuple[str, int]] = []  # (shard, index within it) of each piece's first record
    for url, index, batch in stream:
        at = 0
        while at < len(batch):
            take = min(size - len(pending), len(batch) - at)
            rows_at.append(len(pending))
            pieces.append((url, index + at))
            pending.extend(batch[at : at + take])
            at += take
            if len(pending) == size:
                yield pending, _where_pieces(rows_at, pieces)
                pending, rows_at, pieces = [], [], []
    if pending:
        yield pending, _where_pieces(rows_at, pieces)


def _where_pieces(rows_at: list[int], pieces: list[tuple[str, int]]) -> Where:
    def where(i: int) -> tuple[str, int]:
        k = bisect.bisect_right(rows_at, i) - 1
        url, index = pieces[k]
        return url, index + i - rows_at[k]

    return where


def decoded(
    reader: RecordReader, decoder: Decoder, order: EpochOrder, batch_size: int | None, worker: int = 0, workers: int = 1
) -> Iterator[dict[str, np.ndarray]]:
    """A worker's records of ``order`` decoded: one batch per output batch, or per ROW_CHUNK
    rows. Read by position, they are parsed where the read left them (Decoder.spans)."""
    if order.sequential and workers == 1:
        for recs, where in _rebatch(stream_plan(reader.plan, order.start), batch_size or ROW_CHUNK):
            yield decoder.batch(recs, where)
        return
    for positions in _positioned(order, worker_chunks(order.per_rank, batch_size, worker, workers)):
        yield decoder.spans(reader.read_spans(positions, decoder.pad), reader.where_of(positions))


def _positioned(order: EpochOrder, chunks: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
    """Each chunk's dataset positions, AHEAD chunks' computed in one go: the permutation is a
    few dozen numpy calls whatever their length, a sixth of a batch's time when paid per batch."""
    while group := list(itertools.islice(chunks, AHEAD)):
        flat = order.positions(np.concatenate(group))
        yield from np.split(flat, np.cumsum([len(g) for g in group[:-1]]))


def check_batch_size(batch_size: int | None, optional: bool = False) -> None:
    if batch_size is None and optional:
        return
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise UsageError(f"batch_size must be a whole number >= 1, not {batch_size!r}")


def batches(
    plan: ReadPlan,
    batch_size: int,
    columns: str | Iterable[str] | None = None,
    decode_images: bool = False,
    channels: int | None = None,
    **order: Unpack[OrderKeywords],
) -> Iterator[dict[str, np.ndarray]]:
    """Columnar NumPy batches of one rank's share of an epoch (see order.py); arguments are
    checked now, records read as the batches are taken. ``samples`` is trusted to be a
    position of this very read (the arguments are all there is to check it against): only
    its range is checked. ``decode_images``, ``channels``: image features as pixels
    (images.py), ``(rows, H, W, C)`` when the schema fixes their shape, else ragged."""
    check_keywords("batches", order, OrderKeywords)
    check_batch_size(batch_size)
    samples = check_samples(order.get("samples", 0), plan.records)
    shuffle, seed, epoch = order.get("shuffle", False), order.get("seed", 0), order.get("epoch", 0)
    rank, world_size, drop_last = order.get("rank", 0), order.get("world_size", 1), order.get("drop_last", False)
    epoch_order = EpochOrder(plan.records, shuffle, seed, epoch, samples, rank, world_size, drop_last)
    decoder = Decoder(plan, columns, decode_images, channels)
    return decoded(RecordReader(plan), decoder, epoch_order, batch_size)
