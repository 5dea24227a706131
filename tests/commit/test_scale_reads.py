"""Reads that must not grow with the dataset (issue 34, "the manifest at scale"), on SQLite and
PostgreSQL: a read plan of one split fetches that split's shard rows only, `history --limit`
reads its window only, `show` lists a summary of the shards unless asked for all, `list` pages.
Checked by the statements sent and the rows they select, never by timings."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli import app
from catalog.commit.listing import list_datasets
from catalog.commit.plans import plan

pytestmark = pytest.mark.usefixtures("backend")  # the same suite on SQLite and PostgreSQL

runner = CliRunner()
SCHEMA = {"features": {"id": {"dtype": "int64"}}}


def run(*args: str, code: int = 0) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (args, result.output, result.exception)
    return result


@pytest.fixture
def cat(tmp_path: Path) -> Iterator[Catalog]:
    """``d``: 30 one-record train shards in 6 commits, and one test shard (version 8)."""
    with Catalog.init(tmp_path / "cat") as cat:
        ds = cat.register("d", SCHEMA)
        for c in range(6):
            ds.append_rows([{"id": c * 5 + i} for i in range(5)], shard_records=1)
        ds.append_rows([{"id": 100}], split="test")
        yield cat


@contextmanager
def statements(cat: Catalog) -> Iterator[list[str]]:
    """The SQL the catalog's engine sends meanwhile."""
    sent: list[str] = []

    def seen(_conn: Any, _cursor: Any, sql: str, *_: Any) -> None:
        sent.append(" ".join(sql.split()))

    event.listen(cat.engine, "before_cursor_execute", seen)
    try:
        yield sent
    finally:
        event.remove(cat.engine, "before_cursor_execute", seen)


def test_a_plan_of_one_split_selects_that_splits_shard_rows_only(cat: Catalog) -> None:
    ds = cat.dataset("d")
    with statements(cat) as sent:
        got = plan(ds, split="test")
    assert [(s.split, s.records) for s in got.shards] == [("test", 1)]
    rows = [s for s in sent if s.startswith("SELECT shards.id") and "shards.location" in s]  # whole shard rows
    assert rows and all("shards.split IN" in s for s in rows), rows
    # slices still resolve against every split's count, and the other split is read as before
    assert [s.start for s in plan(ds, split="train[-3:]").shards] == [0, 0, 0]
    assert [r["id"] for r in ds.read(split="train[28:]+test")] == [28, 29, 100]


def test_history_with_a_limit_is_the_tail_of_the_whole_history_and_reads_only_it(cat: Catalog) -> None:
    ds = cat.dataset("d")
    whole = ds.history()
    assert [c.version for c in whole] == list(range(1, 9))
    with statements(cat) as sent:
        tail = ds.history(3)
    assert tail == whole[-3:]
    assert ds.history(2, skip=3) == whole[-5:-3] and ds.history(5, skip=6) == whole[:2]
    assert ds.history(0) == [] and ds.history(3, skip=8) == []
    sums = [s for s in sent if "GROUP BY shards.added_version" in s or "GROUP BY shards.removed_version" in s]
    assert len(sums) == 2 and all("_version >=" in s for s in sums), sums  # the window's versions only
    lines = run("-C", str(cat.root), "history", "d", "--limit", "2").stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["v7", "v8"]


def test_show_lists_the_first_shards_and_how_many_more_unless_asked_for_all(cat: Catalog) -> None:
    c = ["-C", str(cat.root), "show", "d"]
    text = run(*c).stdout.splitlines()
    listed = [line for line in text if line.startswith("  ") and ".tfrecord" in line]
    assert len(listed) == 20 and text[-1] == "  ... 11 more shards (--all lists every shard, --limit N the first N)"
    every = run(*c, "--all").stdout.splitlines()
    assert len([line for line in every if ".tfrecord" in line]) == 31 and "more shard" not in every[-1]
    three = run(*c, "--limit", "3").stdout.splitlines()
    assert len([line for line in three if ".tfrecord" in line]) == 3 and "28 more shards" in three[-1]
    assert len(json.loads(run(*c, "--json").stdout)["shards"]) == 31  # the JSON lists every shard
    assert len(json.loads(run(*c, "--json", "--limit", "2").stdout)["shards"]) == 2
    assert "give --limit N or --all, not both" in " ".join(run(*c, "--all", "--limit", "2", code=2).output.split())
    with statements(cat) as sent:
        run(*c)
    assert not [s for s in sent if "shards.path" in s and "LIMIT" not in s]  # never the whole shard list


def test_list_pages_by_name(cat: Catalog) -> None:
    for name in ("b", "a", "c"):
        cat.register(name, SCHEMA)
    assert [i.name for i in list_datasets(cat.engine, limit=2)] == ["a", "b"]
    assert [i.name for i in list_datasets(cat.engine, limit=2, after="b")] == ["c", "d"]
    paged = list_datasets(cat.engine, splits=True, limit=1, after="c", schemas=False)
    assert [(i.name, i.schema, i.splits) for i in paged] == [
        ("d", {}, {"test": {"records": 1, "shards": 1, "bytes": paged[0].splits["test"]["bytes"]}, "train": {
            "records": 30, "shards": 30, "bytes": paged[0].bytes - paged[0].splits["test"]["bytes"]}})
    ]  # fmt: skip
    c = ["-C", str(cat.root), "list"]
    first = run(*c, "--limit", "2").stdout.splitlines()
    assert [line.split()[0] for line in first[1:]] == ["a", "b", "..."]
    assert first[-1] == "... more datasets: catalog list --after b"
    assert [line.split()[0] for line in run(*c, "--after", "b").stdout.splitlines()[1:]] == ["c", "d"]
    assert [d["name"] for d in json.loads(run(*c, "--json", "-n", "3", "--after", "a").stdout)] == ["b", "c", "d"]


def _summed(ds: Any, version: int | None = None) -> dict[str, dict[str, int]]:
    """Per split, the live shards' totals at ``version`` counted here from the shard list."""
    out: dict[str, dict[str, int]] = {}
    for s in ds.shards(version):
        t = out.setdefault(s.split, {"records": 0, "shards": 0, "bytes": 0})
        t["records"], t["shards"], t["bytes"] = t["records"] + s.records, t["shards"] + 1, t["bytes"] + s.bytes
    return dict(sorted(out.items()))


def test_each_commit_keeps_its_totals_per_split_and_show_reads_them_not_the_shards(cat: Catalog) -> None:
    ds = cat.dataset("d")
    with statements(cat) as sent:
        info = ds.info()
    assert info.splits == _summed(ds) and set(info.splits) == {"train", "test"}
    assert not [s for s in sent if "GROUP BY" in s]  # one commit row read, no pass over the shards
    assert all(ds.info(v).splits == _summed(ds, v) for v in range(1, 9))  # every version kept its own
    ds.compact(target_size=1 << 20)  # retires 31 shards, adds one a split
    ds.delete("id = 3", purge=True)  # an erasure: live and retired files replaced, earlier commits restated
    ds.append_rows([{"id": 200}], split="validation")
    latest = ds.info().version
    assert [ds.info(v).splits == _summed(ds, v) for v in range(1, latest + 1)] == [True] * latest
    assert ds.info().splits is not None and ds.info().splits["train"]["records"] == 29


def test_a_commit_row_without_kept_totals_is_summed_and_the_next_commit_keeps_them(cat: Catalog) -> None:
    """Commits of a manifest from before format 10 (and those an erasure restated) kept none."""
    from sqlalchemy import update

    from catalog import manifest as mf

    ds = cat.dataset("d")
    with mf.write_txn(cat.engine) as conn:
        conn.execute(update(mf.COMMITS).values(splits=None))
    assert ds.info().splits == _summed(ds) and [s.records for s in plan(ds, split="test").shards] == [1]
    ds.append_rows([{"id": 300}], split="test")
    with statements(cat) as sent:
        assert ds.info().splits == _summed(ds)
    assert not [s for s in sent if "GROUP BY" in s]
    with mf.write_txn(cat.engine) as conn:  # kept totals that disagree with the commit's are damage
        conn.execute(update(mf.COMMITS).where(mf.COMMITS.c.version == 9).values(splits='{"train": [1, 1, 1]}'))
    with pytest.raises(mf.ManifestError, match=r"version 9: its totals per split add up to 1 record, 1 byte"):
        ds.info()
