"""The datasets' summary (catalog/commit/listing.py): what `catalog list` shows, from the
manifest alone, with totals checked against each dataset's commit."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import update

from catalog import Catalog
from catalog import manifest as mf
from catalog.commit.listing import check_totals, list_datasets
from catalog.commit.values import ShardSum
from catalog.errors import ManifestError

SCHEMA = {"features": {"x": {"dtype": "int64"}}}


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    cat = Catalog.init(tmp_path / "cat")
    cat.register("b", SCHEMA, description="second").append_rows([{"x": 1}, {"x": 2}], split="test")
    d = cat.register("a", SCHEMA, compression="gzip")
    d.append_rows([{"x": 3}])
    d.append_rows([{"x": 4}, {"x": 5}], split="test")
    return cat


def test_every_dataset_by_name_with_its_totals_and_splits_on_request(cat: Catalog) -> None:
    infos = list_datasets(cat.engine)
    assert [(i.name, i.version, i.records, i.shard_count, i.splits) for i in infos] == [
        ("a", 3, 3, 2, None),
        ("b", 2, 2, 1, None),
    ]
    assert (infos[0].compression, infos[1].description) == ("gzip", "second")
    assert set(infos[0].schema["features"]) == {"x"}
    with_splits = list_datasets(cat.engine, splits=True)
    assert with_splits[0].splits is not None and with_splits[0].splits["train"]["records"] == 1
    assert {k: v["records"] for k, v in with_splits[0].splits.items()} == {"train": 1, "test": 2}
    assert with_splits[1].splits is not None and set(with_splits[1].splits) == {"test"}


def test_totals_that_disagree_with_the_commit_are_damage(cat: Catalog) -> None:
    size = list_datasets(cat.engine)[1].bytes
    with mf.write_txn(cat.engine) as conn:
        conn.execute(update(mf.DATASETS).where(mf.DATASETS.c.name == "b").values(records=7))
    with pytest.raises(ManifestError) as e:
        list_datasets(cat.engine)
    assert str(e.value).endswith(
        "the manifest is damaged: dataset 'b' version 2: the dataset row says "
        f"7 records, {size} bytes in 1 shard, its commit 2 records, {size} bytes in 1 shard{mf.VERIFY_HINT}"
    )


def test_check_totals_refuses_a_missing_commit_and_negative_totals(cat: Catalog) -> None:
    row = type("Row", (), {"name": "x", "version": 4, "shard_count": 1, "records": 2, "bytes": 3})()
    check_totals(cat.engine, row, ShardSum(1, 2, 3))  # agreeing: nothing to say
    check_totals(cat.engine, row, ShardSum(9, 9, 9), version=3)  # an older commit's totals differ
    with pytest.raises(ManifestError, match=r"dataset 'x' version 4: no commit row"):
        check_totals(cat.engine, row, ShardSum(None, None, None))  # type: ignore[arg-type]
    with pytest.raises(ManifestError, match=r"dataset 'x' version 3: its commit says"):
        check_totals(cat.engine, row, ShardSum(1, -2, 3), version=3)
