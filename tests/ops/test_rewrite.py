"""catalog.ops.rewrite: which shards a compaction merges (plan_compaction), and compact and restore themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog import Catalog
from catalog.commit.handles import LiveShard
from catalog.errors import SplitNotFoundError, VersionNotFoundError
from catalog.ops.rewrite import compact, plan_compaction, restore


def _shard(seq: int, size: int, split: str = "train", schema_version: int = 1, compression: str = "none") -> LiveShard:
    return LiveShard(seq, f"/d/{seq}", 1, size, "c", compression, schema_version, seq, f"d/{seq}", split)


def _seqs(groups: list[list[LiveShard]]) -> list[list[int]]:
    return [[s.seq for s in g] for g in groups]


def test_runs_of_small_shards_merge_up_to_the_target() -> None:
    shards = [_shard(0, 40), _shard(1, 40), _shard(2, 40), _shard(3, 200), _shard(4, 10), _shard(5, 10)]
    assert _seqs(plan_compaction(shards, 100)) == [[0, 1], [4, 5]]  # 2 alone, 3 large enough
    assert _seqs(plan_compaction(shards, 100, compression="gzip")) == [[0, 1], [2], [3], [4, 5]]  # all rewritten


def test_runs_never_span_splits_schemas_or_compressions() -> None:
    shards = [
        _shard(0, 10),
        _shard(1, 10, split="test"),
        _shard(2, 10),
        _shard(3, 10, split="test"),
        _shard(4, 10, schema_version=2),
        _shard(5, 10, compression="gzip"),
        _shard(6, 10, compression="gzip"),
    ]
    assert _seqs(plan_compaction(shards, 100)) == [[0, 2], [1, 3], [5, 6]]
    assert _seqs(plan_compaction(shards, 100, split="test")) == [[1, 3]]


def test_compact_then_restore(tmp_path: Path) -> None:
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("d", {"features": {"id": {"dtype": "int64"}}})
    ds.append_rows([{"id": i} for i in range(9)], shard_records=2)
    report = compact(cat.dataset("d"), 1 << 20)
    ds = cat.dataset("d")
    out = report.to_json()
    assert (out["groups"], out["shards_before"], out["shards_after"], out["version"]) == (1, 5, 1, 3)
    assert (len(ds.shards()), ds.version) == (1, 3)
    assert [r["id"] for r in ds.read()] == list(range(9))
    restore(ds, 2)
    ds = cat.dataset("d")
    assert (len(ds.shards()), ds.version, [r["id"] for r in ds.read()]) == (5, 4, list(range(9)))
    with pytest.raises(VersionNotFoundError):
        restore(ds, 99)
    with pytest.raises(SplitNotFoundError, match=r"^no split 'test' in dataset 'd' \(splits: train\)$"):
        compact(ds, 1 << 20, split="test")
