"""catalog.ops.writer: a Writer's options checked before anything is written, its block, one commit."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from catalog import Catalog
from catalog import manifest as mf
from catalog.errors import DatasetNotFoundError, SplitError, UsageError, ValidationError
from catalog.manifest import SHARD_STATS
from catalog.ops import writer
from catalog.ops.options import WriteOptions
from catalog.ops.writer import Writer
from catalog.stats.dataset import DatasetStats

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


FILLED = {"features": {"id": {"dtype": "int64"}, "tag": {"dtype": "string", "default": "none"}}}


def shard_facts(cat: Catalog, name: str) -> list[tuple[bytes, dict[str, tuple[int, int, int]]]]:
    """Each shard's bytes and, per feature, its statistics' (records, present, filled)."""
    with mf.read_txn(cat.engine) as conn:
        blobs = dict(conn.execute(select(SHARD_STATS.c.path, SHARD_STATS.c.data)).all())
    out = []
    for s in cat.dataset(name).shards():
        stats = DatasetStats.from_bytes(blobs[s.rel])
        counts = {k: (f.records, f.present, f.filled) for k, f in stats.features.items()}
        out.append((Path(s.path).read_bytes(), counts))
    return out


@pytest.mark.parametrize("shard_records", [3, 1000])
def test_append_rows_writes_what_rows_one_by_one_write(cat: Catalog, shard_records: int) -> None:
    """append_rows writes its rows a chunk at a time: the same shards, rolled at the same
    records, with the same statistics (defaults filled in counted as filled) as w.write of each."""
    rows = [{"id": i} if i % 3 else {"id": i, "tag": f"t{i}"} for i in range(10)]
    for name in ("chunked", "one_by_one"):
        cat.register(name, FILLED)
    cat.dataset("chunked").append_rows(rows, shard_records=shard_records)
    with Writer(cat.dataset("one_by_one"), WriteOptions(shard_records=shard_records)) as w:
        for row in rows:
            w.write(row)
    chunked, one_by_one = shard_facts(cat, "chunked"), shard_facts(cat, "one_by_one")
    assert len(chunked) == (4 if shard_records == 3 else 1)
    assert chunked == one_by_one
    assert sum(facts["tag"][2] for _, facts in chunked) == 6  # the rows without a tag


def test_append_rows_names_the_bad_row_of_a_later_chunk(cat: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer, "ROW_CHUNK", 4)
    rows: list[dict[str, object]] = [{"id": i} for i in range(10)]
    rows[9] = {"id": "nine"}
    with pytest.raises(ValidationError, match=r"^row 9: feature 'id'"):
        cat.dataset("d").append_rows(rows)
    assert cat.dataset("d").version == 1 and list((cat.root / "data" / "d").glob("*")) == []
