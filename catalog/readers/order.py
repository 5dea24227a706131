"""The order of an epoch and its partition across ranks and DataLoader workers.

Positions: a read plan's records are numbered 0..N-1 in dataset order (shard after shard).
An epoch's *order* lists them once each: in dataset order, or shuffled by a keyed bijection
of [0, N) that depends on (seed, epoch) alone. Because the bijection is computed position
by position, a reader computes only the positions it reads (memory O(batch)), and resuming
at sample k skips nothing: position k of the order costs what position 0 does.

The partition is torch.utils.data.DistributedSampler's, applied to the order from sample k
on (the samples consumed so far, globally): the remaining sequence is padded by repeating
the epoch's order from its start to a multiple of the world size (or cut to one, with
``drop_last``), and rank r takes its items r, r + W, r + 2W... So the ranks' items,
interleaved, are the same sequence whatever W is (elastic determinism), and a job restarted
on another world size at sample k gets exactly the rest. Within a rank, batch j (or row j)
goes to DataLoader worker j % num_workers: DataLoader's round robin over its workers yields
them back in the rank's order.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import TypedDict

import numpy as np

from catalog.errors import CatalogError, UsageError

M64 = (1 << 64) - 1
ROUNDS = 6  # Feistel rounds: 4 already make a strong pseudo-random permutation (Luby-Rackoff)
ROW_CHUNK = 256  # rows read and decoded together when a reader yields rows one by one

_U64 = np.uint64


def _mix64(z: int) -> int:
    """splitmix64's finalizer on a Python int: a bijection of 64-bit words with full avalanche."""
    z &= M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _mix_array(z: np.ndarray) -> np.ndarray:
    """:func:`_mix64` over a uint64 array (numpy multiplies arrays modulo 2**64, silently)."""
    z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    return z ^ (z >> _U64(31))


class Permutation:
    """A pseudo-random bijection of [0, n) keyed by (seed, epoch): a balanced Feistel network
    over [0, 4**m), the smallest power of four >= n, with splitmix64 as its round function;
    values that land at n or beyond are sent through again (cycle walking) until they land
    inside, which keeps it a bijection of [0, n). 4**m < 4n, so fewer than 4 passes on
    average."""

    def __init__(self, n: int, seed: int, epoch: int) -> None:
        if n < 0:
            raise UsageError(f"a permutation of {n} items")
        self.n = n
        half = 0
        while (1 << (2 * half)) < n:
            half += 1
        self._half = _U64(half)
        self._mask = _U64((1 << half) - 1)
        state = _mix64(_mix64(seed & M64) ^ (epoch & M64) ^ 0x9E3779B97F4A7C15)
        keys = []
        for _ in range(ROUNDS):
            state = (state + 0x9E3779B97F4A7C15) & M64
            keys.append(_U64(_mix64(state)))
        self._keys = keys

    def _feistel(self, x: np.ndarray) -> np.ndarray:
        left, right = x >> self._half, x & self._mask
        for key in self._keys:
            left, right = right, left ^ (_mix_array(right ^ key) & self._mask)
        result: np.ndarray = (left << self._half) | right
        return result

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        """The permuted value of each position (any shape, each in [0, n)), as int64."""
        out = self._feistel(np.asarray(positions, dtype=np.uint64))
        outside = np.flatnonzero(out >= _U64(self.n))
        while outside.size:
            out[outside] = self._feistel(out[outside])
            outside = outside[out[outside] >= _U64(self.n)]
        return out.astype(np.int64)


class OrderKeywords(TypedDict, total=False):
    """Which records of an epoch a reader yields, in what order (``readers.batches``' keywords,
    each defaulting to a single rank's pass in dataset order): ``shuffle`` by ``seed`` and
    ``epoch``, rank ``rank`` of ``world_size``'s share (``drop_last``: each rank the same number,
    the remainder dropped), from ``samples`` of the epoch consumed on."""

    shuffle: bool
    seed: int
    epoch: int
    rank: int
    world_size: int
    drop_last: bool
    samples: int


@dataclass(frozen=True)
class EpochOrder:
    """One rank's items of one epoch, from sample ``start`` of the epoch's order on."""

    records: int  # N: the records of the read plan
    shuffle: bool
    seed: int
    epoch: int
    start: int  # samples of the epoch's order consumed already, globally
    rank: int
    world_size: int
    drop_last: bool

    def __post_init__(self) -> None:
        check_ranks(self.rank, self.world_size)
        if self.start < 0:
            raise UsageError(f"samples consumed must be >= 0, not {self.start}")

    @property
    def remaining(self) -> int:
        return max(self.records - self.start, 0)

    @property
    def per_rank(self) -> int:
        """Items each rank yields (DistributedSampler's num_samples, for the remaining sequence)."""
        if self.drop_last:
            return self.remaining // self.world_size
        return -(-self.remaining // self.world_size)

    @property
    def sequential(self) -> bool:
        """Whether this rank's items are the dataset's records in order, from ``start`` on."""
        return not self.shuffle and self.world_size == 1

    def positions(self, items: np.ndarray) -> np.ndarray:
        """Dataset positions (int64) of this rank's items ``items`` (indices < per_rank)."""
        g = np.asarray(items, dtype=np.int64) * self.world_size + self.rank  # in the padded remaining sequence
        t = np.where(g < self.remaining, g + self.start, (g - self.remaining) % max(self.records, 1))
        return self._permutation(t) if self._permutation is not None else t

    @cached_property
    def _permutation(self) -> Permutation | None:
        return Permutation(self.records, self.seed, self.epoch) if self.shuffle else None


def check_ranks(rank: int, world_size: int) -> None:
    if world_size < 1:
        raise UsageError(f"world_size must be at least 1, not {world_size}")
    if not 0 <= rank < world_size:
        raise UsageError(f"rank must be in [0, {world_size}), not {rank}")


def check_samples(
    samples: object, records: int, what: str = "samples", error: type[CatalogError] = CatalogError
) -> int:
    """A resume position (samples of an epoch's order consumed globally) as an int in
    [0, records]: past the end no read of these records has been."""
    if isinstance(samples, bool) or not isinstance(samples, numbers.Integral) or int(samples) < 0:
        raise error(f"{what} must be a whole number >= 0, not {samples!r}")
    if int(samples) > records:
        raise error(f"samples must be in [0, {records}], not {samples}")
    return int(samples)


def worker_chunks(per_rank: int, batch_size: int | None, worker: int, workers: int) -> Iterator[np.ndarray]:
    """The rank items a DataLoader worker yields, one array per output batch (``batch_size``)
    or per chunk of ROW_CHUNK rows (``batch_size`` None): batch j, or row j, is worker
    j % workers's."""
    if batch_size is not None:
        batches = -(-per_rank // batch_size)
        for j in range(worker, batches, workers):
            yield np.arange(j * batch_size, min((j + 1) * batch_size, per_rank), dtype=np.int64)
        return
    mine = np.arange(worker, per_rank, workers, dtype=np.int64)
    for i in range(0, len(mine), ROW_CHUNK):
        yield mine[i : i + ROW_CHUNK]


def output_count(per_rank: int, batch_size: int | None, worker: int = 0, workers: int = 1) -> int:
    """How many items (batches, or rows) a worker yields: what ``len()`` of a loader counts."""
    total = per_rank if batch_size is None else -(-per_rank // batch_size)
    return len(range(worker, total, workers))
