"""What the reader tests share: a small multi-shard dataset whose ``id`` is its dataset
position, and the orders and partitions every reader must give, computed independently of
catalog.readers (torch.utils.data.DistributedSampler's rules, written out)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from catalog import Catalog
from catalog.api import Dataset
from catalog.commit.changes import APPEND, Change, NewShard, adding
from catalog.commit.intents import Intent
from catalog.commit.protocol import commit
from catalog.readers.order import Permutation
from catalog.storage import ShardFile, file_checksum, shard_name
from catalog.tfrecord import RecordWriter

SCHEMA: dict[str, Any] = {
    "features": {
        "id": {"dtype": "int64"},
        "vec": {"dtype": "float32", "shape": [2]},
        "name": {"dtype": "string"},
        "var": {"dtype": "int64", "shape": [None]},
        "img": {"dtype": "uint8", "shape": [2, 3], "encoding": "tensor"},
        "blob": {"dtype": "float32", "shape": [None, 2], "encoding": "tensor"},
    }
}
# 101 records (a prime) in 10 shards of unequal sizes: 13,13,13,13,8 then 9,9,9,9,5.
APPENDS = ((60, 13), (41, 9))
N = sum(n for n, _ in APPENDS)


def row(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "vec": [float(i), -float(i)],
        "name": f"r{i}",
        "var": list(range(i % 3)),
        "img": np.full((2, 3), i % 256, dtype=np.uint8),
        "blob": np.full((i % 4, 2), i, dtype=np.float32),
    }


def make_dataset(root: Path, name: str = "d") -> Dataset:
    return make_dataset_at(root, None, name)


def make_dataset_at(root: Path, db_url: str | None, name: str = "d", storage: str | None = None) -> Dataset:
    cat = Catalog.init(root, db_url, storage)
    ds = cat.register(name, SCHEMA)
    start = 0
    for n, per_shard in APPENDS:
        ds.append_rows([row(i) for i in range(start, start + n)], shard_records=per_shard)
        start += n
    return cat.dataset(name)


def epoch_order(n: int, shuffle: bool, seed: int = 0, epoch: int = 0) -> list[int]:
    """The positions of an epoch, in order (the permutation is checked a bijection elsewhere)."""
    return Permutation(n, seed, epoch)(np.arange(n)).tolist() if shuffle else list(range(n))


def rank_share(order: list[int], world: int, rank: int, drop_last: bool = False, start: int = 0) -> list[int]:
    """DistributedSampler's share of ``rank`` of ``order`` from sample ``start`` on: the rest
    padded from the start of the order (cyclically) to a multiple of ``world``, or cut."""
    rest = order[start:]
    if drop_last:
        rest = rest[: len(rest) // world * world]
    else:
        pad = math.ceil(len(rest) / world) * world - len(rest)
        rest = rest + [order[k % len(order)] for k in range(pad)] if pad else rest
    return rest[rank::world]


def interleave(shares: list[list[int]]) -> list[int]:
    """Rank 0's first, rank 1's first, ..., rank 0's second...: the global sequence."""
    return [share[j] for j in range(len(shares[0])) for share in shares]


def add_gzip_shard(ds: Dataset, rows: list[dict[str, Any]]) -> None:
    """Register a gzip shard through the commit protocol (the catalog writes none itself)."""
    with Intent.of(ds) as intent:
        rel = f"{ds.name}/{shard_name(intent.prefix(0), 0)}"
        path = ds.catalog.shard_path(rel)
        with RecordWriter(path, compression="gzip") as w:
            for r in rows:
                w.write(ds.schema.encode(r))
        size, checksum = file_checksum(path)
        shard = ShardFile(rel, len(rows), size, checksum, "gzip")
        commit(ds, Change(APPEND, ds.version, ds.schema_version, "gz", "test", intent.id, (adding([NewShard(shard)]),)))


def canon(value: Any) -> Any:
    """``value`` (a row, a batch, arrays) as plain comparable data: arrays by dtype, shape and values."""
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.str, value.shape, canon(value.tolist()))
    if isinstance(value, (list, tuple)):
        return [canon(v) for v in value]
    if isinstance(value, dict):
        return {k: canon(v) for k, v in value.items()}
    return value.item() if isinstance(value, np.generic) else value


def exact(value: Any) -> Any:
    """``value`` as comparable data that keeps every type (``int`` is not ``np.int64``, a list
    not a tuple) and a dict's key order: for "the same as ``src[i]`` gives", not merely equal."""
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, [exact(v) for v in value.reshape(-1).tolist()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [exact(v) for v in value])
    if isinstance(value, dict):
        return ("dict", [(k, exact(v)) for k, v in value.items()])
    return (type(value).__name__, value)
