"""catalog.readers.picking: some rows of a plan for people (`cat`, the viewer), by position or in order."""

from __future__ import annotations

import pytest

from catalog import Catalog
from catalog.api import Dataset
from catalog.commit.plans import ReadPlan, plan
from catalog.readers.picking import in_order, rows_at, window

N = 10


@pytest.fixture(scope="module", params=["none", "gzip"])
def dataset(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    cat = Catalog.init(tmp_path_factory.mktemp("picking") / "cat")
    ds = cat.register("d", {"features": {"id": {"dtype": "int64"}}}, compression=request.param)
    ds.append_rows([{"id": i} for i in range(N)], shard_records=3)
    return cat.dataset("d")


def _ids(found: object) -> list[int]:
    return [r["id"] for r in found]  # type: ignore[attr-defined]


def test_window_narrows_a_plan_to_its_records(dataset: Dataset) -> None:
    pinned = plan(dataset)
    narrowed = window(pinned, 2, 7)
    assert [(s.start, s.stop) for s in narrowed.shards] == [(2, 3), (0, 3), (0, 1)]
    assert [s.path for s in narrowed.shards] == [s.path for s in pinned.shards[:3]]
    empty = window(pinned, 5, 5)
    assert len(empty.shards) == 1 and empty.shards[0].start == empty.shards[0].stop  # none, from its first shard


def test_rows_by_range_and_by_choice(dataset: Dataset) -> None:
    pinned: ReadPlan = plan(dataset)
    assert _ids(rows_at(dataset, pinned, None, None, offset=4, limit=3)) == [4, 5, 6]
    assert _ids(rows_at(dataset, pinned, None, None, offset=8)) == [8, 9]
    assert _ids(rows_at(dataset, pinned, ["id"], [0, 5, 9])) == [0, 5, 9]
    assert _ids(rows_at(dataset, pinned, None, None, offset=20, limit=5)) == []
    assert _ids(in_order(pinned, None, 3, 5)) == [3, 4]
