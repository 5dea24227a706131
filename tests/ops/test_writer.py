"""catalog.ops.writer: a Writer's options checked before anything is written, its block, one commit."""

from __future__ import annotations

from pathlib import Path

import datasketches as dsk
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

NO_FALSE_POSITIVES = dsk.frequent_items_error_type.NO_FALSE_POSITIVES

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


RICH = {
    "features": {
        "id": {"dtype": "int64"},
        "score": {"dtype": "float32"},
        "text": {"dtype": "string"},
        "blob": {"dtype": "bytes"},
        "vec": {"dtype": "float32", "shape": [3]},
        "ids": {"dtype": "int64", "shape": [None]},
        "tag": {"dtype": "string", "default": "none"},
        "note": {"dtype": "string", "optional": True},
    }
}


def rich_rows(n: int) -> list[dict[str, object]]:
    """Rows with every feature's key (what append_rows writes a column at a time), a default
    and an optional feature given None in some, floats that round to float32, texts not ASCII."""
    return [
        {
            "id": i * 7919 - 40, "score": i / 3, "text": f"é{i}" * (i % 4), "blob": bytes([i % 256]) * (i % 5),
            "vec": [i, i / 7, -1e-3], "ids": list(range(i % 6)), "tag": None if i % 4 == 0 else f"t{i % 3}",
            "note": None if i % 2 else f"n{i}",
        }
        for i in range(n)
    ]  # fmt: skip


def _digits(moments: dict[str, object]) -> dict[str, object]:
    return {k: float(f"{v:.12g}") if isinstance(v, float) else v for k, v in moments.items()}


def full_stats(cat: Catalog, name: str) -> list[tuple[bytes, dict[str, dict[str, object]]]]:
    """Each shard's bytes and every figure of its statistics: counts, moments (to float64's
    last bits: batches of other sizes sum in another order), quantiles (exact at these counts),
    distinct estimates and top values."""
    with mf.read_txn(cat.engine) as conn:
        blobs = dict(conn.execute(select(SHARD_STATS.c.path, SHARD_STATS.c.data)).all())
    out = []
    for s in cat.dataset(name).shards():
        features = {}
        for key, fs in DatasetStats.from_bytes(blobs[s.rel]).features.items():
            doc = fs.to_json()
            figures = {k: v for k, v in doc.items() if k not in ("quantiles", "length_quantiles", "distinct", "top")}
            figures["values"] = _digits(doc["values"])
            if "lengths" in doc:
                figures["lengths"] = _digits(doc["lengths"])
                figures["length_quantiles"] = fs.length_quantiles.get_quantiles([0, 0.25, 0.5, 0.75, 1])
            if not fs.quantiles.is_empty():
                figures["quantiles"] = fs.quantiles.get_quantiles([0, 0.25, 0.5, 0.75, 1])
            if fs.distinct is not None:
                figures["distinct"] = fs.distinct.get_estimate()
            if fs.top is not None:
                figures["top"] = sorted(map(tuple, fs.top.get_frequent_items(NO_FALSE_POSITIVES)))
            features[key] = figures
        out.append((Path(s.path).read_bytes(), features))
    return out


@pytest.mark.parametrize("shard_records", [7, 1000])
def test_rows_with_every_key_go_a_column_at_a_time_as_rows_one_by_one(
    cat: Catalog, monkeypatch: pytest.MonkeyPatch, shard_records: int
) -> None:
    """Rows that each hold exactly the schema's keys are encoded a column at a time (no row
    encoder called), and make the shards, bytes and statistics that w.write of each makes."""
    rows = rich_rows(50)
    for name in ("columns", "one_by_one"):
        cat.register(name, RICH)
    with Writer(cat.dataset("one_by_one"), WriteOptions(shard_records=shard_records)) as w:
        for row in rows:
            w.write(row)
    calls: list[int] = []
    encode = Writer._encode
    monkeypatch.setattr(Writer, "_encode", lambda self, row, at: calls.append(at) or encode(self, row, at))
    monkeypatch.setattr(writer, "ROW_CHUNK", 16)  # several chunks, shards rolling inside them
    cat.dataset("columns").append_rows(rows, shard_records=shard_records)
    assert calls == []
    columns, one_by_one = full_stats(cat, "columns"), full_stats(cat, "one_by_one")
    assert len(columns) == (8 if shard_records == 7 else 1)
    assert columns == one_by_one
    assert [r["id"] for r in cat.dataset("columns").read()] == [r["id"] for r in rows]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda rows: rows[5].update(extra=1), "row 5: feature 'extra': not in the schema"),
        (lambda rows: rows[6].pop("id"), "row 6: feature 'id': missing (the feature has no default)"),
        # two bad rows, the later one in an earlier feature: the first row is named, as row by row
        (lambda rows: (rows[9].update(text=3), rows[8].update(vec=[1.0])), "row 8: feature 'vec'"),
        (lambda rows: rows[3].update(id=None), "row 3: feature 'id': missing (the feature has no default)"),
        (lambda rows: rows[12].update(id=1.5), "row 12: feature 'id': expected int64"),
    ],
)
def test_rows_the_column_path_refuses_are_named_as_row_by_row(
    cat: Catalog, monkeypatch: pytest.MonkeyPatch, change: object, message: str
) -> None:
    monkeypatch.setattr(writer, "ROW_CHUNK", 10)
    cat.register("r", RICH)
    rows = rich_rows(20)
    change(rows)  # type: ignore[operator]
    with pytest.raises(ValidationError) as e:
        cat.dataset("r").append_rows(rows)
    assert str(e.value).startswith(message), str(e.value)
    assert cat.dataset("r").version == 1 and list((cat.root / "data" / "r").glob("*")) == []
