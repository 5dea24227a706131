"""catalog.ops.writer: a Writer's options checked before anything is written, its block, one commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog import Catalog
from catalog.errors import DatasetNotFoundError, SplitError, UsageError, ValidationError
from catalog.ops.options import WriteOptions
from catalog.ops.writer import Writer

SCHEMA = {"features": {"id": {"dtype": "int64"}}}


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    cat = Catalog.init(tmp_path / "cat")
    cat.register("d", SCHEMA)
    return cat


def test_rows_in_a_block_are_one_commit(cat: Catalog) -> None:
    ds = cat.dataset("d")
    with Writer(ds, WriteOptions(split="test", shard_records=2, message="m")) as w:
        for i in range(5):
            w.write({"id": i})
        assert w.records == 5
    assert w.commit is not None and w.commit.version == 2
    fresh = cat.dataset("d")
    assert fresh.version == 2 and [r["id"] for r in fresh.read(split="test")] == [0, 1, 2, 3, 4]
    assert len(fresh.shards()) == 3


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (WriteOptions(split="all"), SplitError, "bad split name 'all'"),
        (WriteOptions(shard_records=0), UsageError, "shard_records must be a whole number above 0, got 0"),
        (WriteOptions(shard_size=-1), UsageError, "shard_size must be a whole number above 0, got -1"),
        (WriteOptions(message=3), UsageError, "message must be text, got int"),  # type: ignore[arg-type]
    ],
)
def test_bad_options_are_refused_before_an_intent(
    cat: Catalog, options: WriteOptions, error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        Writer(cat.dataset("d"), options)
    assert cat.dataset("d").version == 1


def test_a_bad_row_names_its_row_and_commits_nothing(cat: Catalog) -> None:
    ds = cat.dataset("d")
    with pytest.raises(ValidationError) as e, Writer(ds) as w:
        w.write({"id": 1})
        w.write({"id": 2, "x": 1})
    hint = "add it with `catalog migrate d --add x:DTYPE=DEFAULT`, or leave it out"
    assert str(e.value) == f"row 1: feature 'x': not in the schema: {hint}"
    assert cat.dataset("d").version == 1 and list((cat.root / "data" / "d").glob("*")) == []


def test_a_writer_outside_its_block_and_of_a_dropped_dataset(cat: Catalog) -> None:
    ds = cat.dataset("d")
    with pytest.raises(UsageError, match=r"^the writer is not open \(use it in a `with` block\)$"):
        Writer(ds).write({"id": 1})
    cat.drop("d")
    with pytest.raises(DatasetNotFoundError, match=r"^dataset 'd' was dropped$"), Writer(ds):
        pass
