"""One rank's (and one worker's) share of an epoch as decoded columnar batches, the engine of
``ds.batches()`` (NumPy/JAX) and ``ds.torch()``; and the plain sequential reads
``ds.read()`` and ``ds.records()``.

Dataset order on one rank and one worker streams the shards front to back when some shard
has no registered index, is compressed or is read from an object store; any other share
(shuffled, several ranks or workers, or in order over local indexed shards) reads its
records by position (see positions.py). Both give the same records in the same order.

Either way several batches are read and decoded together (a group: GROUP_BATCHES of them,
about GROUP_BYTES at most) and then cut into batches: the columnar decoder's cost is some
hundred NumPy calls a call whatever its row count, which at 256 rows a batch was most of the
time (issue 34). A group whose read or decode fails is done again a batch at a time, so the
batches before the bad record are yielded and the error is the one its own batch raises.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from catalog.commit.plans import ReadPlan
from catalog.errors import CatalogError, UsageError
from catalog.keywords import Unpack, check_keywords
from catalog.readers.decoding import Decoder, Where
from catalog.readers.files import stream_shard
from catalog.readers.order import ROW_CHUNK, EpochOrder, OrderKeywords, check_samples, worker_chunks
from catalog.readers.positions import RecordReader

Chunk = tuple[list[bytes], Where]
Columns = dict[str, np.ndarray]
GROUP_BATCHES = 16  # batches (or row chunks) read, decoded, and their positions computed, together
GROUP_BYTES = 16 << 20  # at most about this many bytes of records in a group (the plan's average record)


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
) -> Iterator[Columns]:
    """A worker's records of ``order`` decoded: one batch per output batch, or per ROW_CHUNK
    rows. Read by position, they are parsed where the read left them (Decoder.spans); a
    group of batches at a time either way (see the module docstring)."""
    size = batch_size or ROW_CHUNK
    per_group = group_batches(reader.plan, size)
    if order.sequential and workers == 1 and not by_position(reader.plan):
        for recs, where in _rebatch(stream_plan(reader.plan, order.start), size * per_group):
            whole = functools.partial(decoder.batch, recs, where)
            yield from _cut(whole, _sizes(len(recs), size), functools.partial(_streamed, decoder, recs, where, size))
        return
    for group in _positioned(order, worker_chunks(order.per_rank, batch_size, worker, workers), per_group):
        flat = group[0] if len(group) == 1 else np.concatenate(group)
        whole = functools.partial(_read_decode, reader, decoder, flat)
        yield from _cut(whole, [len(g) for g in group], functools.partial(_positioned_one, reader, decoder, group))


def by_position(plan: ReadPlan) -> bool:
    """Whether a read in dataset order takes the plan's records by position: every shard
    local, uncompressed and with a registered index (no scan to find its records)."""
    return all(
        s.compression == "none" and s.index_checksum is not None and s.cache is None and not s.io.remote
        for s in plan.shards
    )


def group_batches(plan: ReadPlan, size: int) -> int:
    """How many batches of ``size`` records go in a group: GROUP_BATCHES, fewer when their
    records (at the plan's average size) would come to over GROUP_BYTES."""
    records = sum(s.records for s in plan.shards)
    average = sum(s.bytes for s in plan.shards) / records if records else 0.0
    return max(1, min(GROUP_BATCHES, int(GROUP_BYTES // max(average * size, 1.0))))


def _read_decode(reader: RecordReader, decoder: Decoder, positions: np.ndarray) -> Columns:
    return decoder.spans(reader.read_spans(positions, decoder.pad), reader.where_of(positions))


def _sizes(n: int, size: int) -> list[int]:
    return [min(size, n - at) for at in range(0, n, size)]


def _cut(decode: Callable[[], Columns], sizes: list[int], one: Callable[[int], Columns]) -> Iterator[Columns]:
    """The batches of ``sizes`` rows of a group: ``decode()``'s columns cut into them (views),
    or, when the group's read or decode fails, ``one(k)`` for each batch k in turn, which
    raises the error of the batch holding the bad record after yielding those before it."""
    if len(sizes) == 1:
        yield one(0)
        return
    try:
        columns = decode()
    except CatalogError:
        for k in range(len(sizes)):
            yield one(k)
        return
    at = 0
    for n in sizes:
        yield {name: column[at : at + n] for name, column in columns.items()}
        at += n


def _streamed(decoder: Decoder, recs: list[bytes], where: Where, size: int, k: int) -> Columns:
    """Batch k (of ``size`` records) of a streamed group, decoded alone."""
    return decoder.batch(recs[k * size : (k + 1) * size], lambda i: where(k * size + i))


def _positioned_one(reader: RecordReader, decoder: Decoder, group: list[np.ndarray], k: int) -> Columns:
    """Batch k of a group read by position, read and decoded alone."""
    return _read_decode(reader, decoder, group[k])


def _positioned(order: EpochOrder, chunks: Iterator[np.ndarray], per_group: int) -> Iterator[list[np.ndarray]]:
    """Each chunk's dataset positions, ``per_group`` chunks' computed in one go (the
    permutation is a few dozen NumPy calls whatever their length) and handed back together."""
    while group := list(itertools.islice(chunks, per_group)):
        flat = order.positions(np.concatenate(group))
        yield np.split(flat, np.cumsum([len(g) for g in group[:-1]]))


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
