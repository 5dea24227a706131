"""catalog.readers.batches: sequential reads of a plan (stream_plan, records, rows) and one rank's columnar batches."""

from __future__ import annotations

import numpy as np
import pytest

from catalog import Catalog
from catalog.commit.plans import ReadPlan, plan
from catalog.errors import CatalogError
from catalog.readers.batches import batches, check_batch_size, records, rows, stream_plan

N = 10  # in shards of 3, 3, 3, 1


@pytest.fixture(scope="module")
def pinned(tmp_path_factory: pytest.TempPathFactory) -> ReadPlan:
    cat = Catalog.init(tmp_path_factory.mktemp("batches") / "cat")
    ds = cat.register("d", {"features": {"id": {"dtype": "int64"}, "w": {"dtype": "string", "shape": [None]}}})
    ds.append_rows([{"id": i, "w": ["x"] * (i % 3)} for i in range(N)], shard_records=3)
    return plan(cat.dataset("d"))


def test_stream_plan_starts_anywhere(pinned: ReadPlan) -> None:
    assert [(index, len(batch)) for _url, index, batch in stream_plan(pinned)] == [(0, 3), (0, 3), (0, 3), (0, 1)]
    pieces = list(stream_plan(pinned, start=4))
    assert [(index, len(batch)) for _url, index, batch in pieces] == [(1, 2), (0, 3), (0, 1)]  # mid-shard, then whole
    assert pieces[0][0] == pinned.shards[1].path
    assert list(stream_plan(pinned, start=N)) == []
    assert len(list(records(pinned))) == N


def test_rows_decode_the_columns_asked(pinned: ReadPlan) -> None:
    got = list(rows(pinned, ["id"]))
    assert [r["id"] for r in got] == list(range(N)) and set(got[0]) == {"id"}
    assert [len(r["w"]) for r in rows(pinned, "w")] == [i % 3 for i in range(N)]


def test_batches_partition_an_epoch(pinned: ReadPlan) -> None:
    whole = [b["id"].tolist() for b in batches(pinned, 4, "id")]
    assert whole == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    # drop_last as DistributedSampler's: the ranks' shares cut to equal, not the last batch
    cut = [sum(len(b["id"]) for b in batches(pinned, 4, "id", rank=r, world_size=3, drop_last=True)) for r in range(3)]
    padded = [sum(len(b["id"]) for b in batches(pinned, 4, "id", rank=r, world_size=3)) for r in range(3)]
    assert (cut, padded) == ([3, 3, 3], [4, 4, 4])
    shuffled = np.concatenate([b["id"] for b in batches(pinned, 3, "id", shuffle=True, seed=7)])
    assert sorted(shuffled.tolist()) == list(range(N)) and shuffled.tolist() != list(range(N))
    ranks = [np.concatenate([b["id"] for b in batches(pinned, 2, "id", rank=r, world_size=2)]) for r in (0, 1)]
    assert sorted(np.concatenate(ranks).tolist()) == list(range(N))  # every record once across the ranks
    resumed = np.concatenate([b["id"] for b in batches(pinned, 4, "id", samples=6)])
    assert resumed.tolist() == [6, 7, 8, 9]


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, None])
def test_batch_size_must_be_a_whole_number(bad: object) -> None:
    with pytest.raises(CatalogError) as e:
        check_batch_size(bad)  # type: ignore[arg-type]
    assert str(e.value) == f"batch_size must be a whole number >= 1, not {bad!r}"
    check_batch_size(None, optional=True)
