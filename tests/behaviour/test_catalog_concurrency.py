"""Concurrency: several processes appending (one dataset, or several), gc running beside
them, appends racing a schema change, and processes racing with the same token.

Workers are separate Python processes (subprocess) that wait at a file barrier so they
really overlap, then report what they saw as JSON on stdout.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select, update

from catalog import Catalog, Commit, Dataset, Schema
from catalog import manifest as mf
from catalog.errors import CommitConflictError
from catalog.manifest import COMMITS, DATASETS, INTENTS, SCHEMA_VERSIONS, SHARDS, utcnow

pytestmark = pytest.mark.usefixtures("backend")  # the same suite on SQLite and PostgreSQL

SCHEMA = {"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string"}}}
SCHEMA_V2 = {
    "features": {
        "id": {"dtype": "int64"},
        "text": {"dtype": "string"},
        "score": {"dtype": "float32", "default": 0.0},
    }
}
WAIT = 120.0

WORKER = r"""
import json, os, sys, time, traceback
from datetime import timedelta
from pathlib import Path

from catalog import Catalog

cfg = json.loads(sys.argv[1])
barrier = Path(cfg["barrier"])


def wait_for_go():
    (barrier / ("ready-" + cfg["tag"])).touch()
    deadline = time.monotonic() + 60
    while not (barrier / "go").exists():
        if time.monotonic() > deadline:
            sys.exit("no go signal")
        time.sleep(0.002)


def rows(first, n):
    return [{"id": i, "text": "row %d" % i} for i in range(first, first + n)]


def summary(c):
    return {"version": c.version, "token": c.token, "records": c.records, "duplicate": c.duplicate,
            "shards": sorted(s.relpath for s in c.shards)}


try:
    cat = Catalog.open(cfg["root"])
    mode = cfg["mode"]
    if mode == "append":  # appends with distinct ids (or the same rows for shared tokens), one token each
        ds = cat.dataset(cfg["dataset"])
        wait_for_go()
        out, seen = [], []
        for j, token in enumerate(cfg["tokens"]):
            first = cfg["first"] + j * cfg["rows"]
            out.append(summary(ds.append_rows(rows(first, cfg["rows"]), token=token, shard_records=cfg["shard"])))
            seen.append(ds.info().version)
        print(json.dumps({"commits": out, "seen": seen}))
    elif mode == "gc":  # gc with no grace and verify, over and over, until told to stop
        wait_for_go()
        runs = removed = 0
        problems = []
        while not (barrier / "stop").exists():
            removed += len(cat.gc(grace=timedelta(0)).removed)
            problems += [p.to_json() for p in cat.verify().problems]
            runs += 1
        print(json.dumps({"runs": runs, "removed": removed, "problems": problems}))
    elif mode == "held":  # start a writer (intent recorded, rows written), then commit on "go"
        ds = cat.dataset(cfg["dataset"])
        with ds.writer(token=cfg["tokens"][0], shard_records=cfg["shard"]) as w:
            assert not w.skipped
            for r in rows(cfg["first"], cfg["rows"]):
                w.write(r)
            wait_for_go()
        print(json.dumps({"commits": [summary(w.commit)]}))
    elif mode == "stale_handle":  # open the handle, wait (a schema change lands), then append
        ds = cat.dataset(cfg["dataset"])
        wait_for_go()
        try:
            ds.append_rows(rows(cfg["first"], cfg["rows"]), token=cfg["tokens"][0])
            print(json.dumps({"error": None}))
        except Exception as e:
            print(json.dumps({"error": type(e).__name__, "message": str(e)}))
    else:
        sys.exit("unknown mode " + mode)
except BaseException:
    traceback.print_exc()
    sys.exit(1)
"""


# --------------------------------------------------------------------------- helpers


class Workers:
    """Start worker processes, release them together, collect their JSON reports."""

    def __init__(self, root: Path, barrier: Path) -> None:
        self.root = root
        self.barrier = barrier
        barrier.mkdir()
        self.procs: dict[str, subprocess.Popen[str]] = {}

    def start(self, tag: str, mode: str, **cfg: Any) -> None:
        doc = {"root": str(self.root), "barrier": str(self.barrier), "tag": tag, "mode": mode, **cfg}
        self.procs[tag] = subprocess.Popen(
            [sys.executable, "-c", WORKER, json.dumps(doc)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def go(self) -> None:
        deadline = time.monotonic() + WAIT
        while not all((self.barrier / f"ready-{t}").exists() for t in self.procs):
            for tag, p in self.procs.items():
                if p.poll() is not None:
                    pytest.fail(f"worker {tag} exited early: {p.communicate()}")
            assert time.monotonic() < deadline, "workers never got ready"
            time.sleep(0.01)
        (self.barrier / "go").touch()

    def stop(self) -> None:
        (self.barrier / "stop").touch()

    def results(self, *tags: str) -> dict[str, Any]:
        out = {}
        for tag in tags or tuple(self.procs):
            p = self.procs[tag]
            stdout, stderr = p.communicate(timeout=WAIT)
            assert "locked" not in stderr.lower(), stderr
            assert p.returncode == 0, f"worker {tag}: {stderr}"
            out[tag] = json.loads(stdout)
        return out

    def kill_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.communicate()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    w = Workers(tmp_path / "cat", tmp_path / "barrier")
    yield w
    w.kill_all()


@pytest.fixture
def cat(tmp_path: Path) -> Iterator[Catalog]:
    with Catalog.init(tmp_path / "cat") as c:
        yield c


def rows(first: int, n: int) -> list[dict[str, Any]]:
    return [{"id": i, "text": f"row {i}"} for i in range(first, first + n)]


def data_files(cat: Catalog) -> set[str]:
    return {p.relative_to(cat.data_root).as_posix() for p in cat.data_root.glob("*/*") if p.is_file()}  # not the marker


def registered(cat: Catalog) -> set[str]:
    with mf.read_txn(cat.engine) as conn:
        return set(conn.execute(select(SHARDS.c.path)).scalars())


def intent_count(cat: Catalog) -> int:
    with mf.read_txn(cat.engine) as conn:
        return len(conn.execute(select(INTENTS.c.id)).all())


def assert_consistent(cat: Catalog, name: str) -> list[Commit]:
    """Versions gapless; each commit's counts and running totals match the shard rows; so do the dataset's."""
    hist = cat.dataset(name).history()
    assert [c.version for c in hist] == list(range(1, len(hist) + 1))
    with mf.read_txn(cat.engine) as conn:
        row = conn.execute(select(DATASETS).where(DATASETS.c.name == name)).one()
        shards = conn.execute(select(SHARDS).where(SHARDS.c.dataset_id == row.id)).all()
    assert row.version == hist[-1].version
    records = size = count = 0
    for c in hist:
        added = [s for s in shards if s.added_version == c.version]
        assert (c.records, c.shard_count) == (sum(s.records for s in added), len(added)), c
        records, size, count = records + c.records, size + sum(s.bytes for s in added), count + len(added)
        assert (c.total_records, c.total_bytes, c.total_shards) == (records, size, count), c
    assert (row.records, row.bytes, row.shard_count) == (records, size, count)
    return hist


def assert_clean(cat: Catalog) -> None:
    """Every file registered, no intent left, every shard verifies."""
    assert data_files(cat) == registered(cat)
    assert intent_count(cat) == 0
    report = cat.verify()
    assert report.ok and report.problems == [], report.to_json()
    assert report.checked == len(registered(cat))


def ids_of(ds: Dataset) -> Counter[int]:
    return Counter(int(r["id"]) for r in ds.read())


def change_schema(cat: Catalog, name: str, schema: dict[str, Any]) -> int:
    """What a schema migration will do (there is no command yet): one commit with a new schema version."""
    sch = Schema.from_json(schema)
    now = utcnow()
    with mf.write_txn(cat.engine) as conn:
        row = conn.execute(select(DATASETS).where(DATASETS.c.name == name)).one()
        version, sv = row.version + 1, row.schema_version + 1
        swapped = conn.execute(
            update(DATASETS)
            .where(DATASETS.c.id == row.id, DATASETS.c.version == row.version)
            .values(version=version, schema_version=sv)
        ).rowcount
        assert swapped == 1
        conn.execute(
            insert(SCHEMA_VERSIONS).values(
                dataset_id=row.id,
                version=sv,
                schema_json=json.dumps(sch.to_json()),
                fingerprint=sch.fingerprint,
                created_at=now,
                commit_version=version,
            )
        )
        conn.execute(
            insert(COMMITS).values(
                dataset_id=row.id,
                version=version,
                kind="schema",
                schema_version=sv,
                created_at=now,
                message="add score",
                author="test",
                read_version=row.version,
                token=None,
                records_added=0,
                shards_added=0,
                records=row.records,
                bytes=row.bytes,
                shard_count=row.shard_count,
            )
        )
    return sv


# --------------------------------------------------------------------------- appends


def test_four_processes_append_to_one_dataset_while_gc_runs(cat: Catalog, workers: Workers) -> None:
    procs, appends, per = 4, 20, 50
    cat.register("shared", SCHEMA)
    for p in range(procs):
        tokens = [f"p{p}-a{j}" for j in range(appends)]
        workers.start(f"p{p}", "append", dataset="shared", tokens=tokens, first=p * 100_000, rows=per, shard=20)
    workers.start("gc", "gc")
    workers.go()
    out = workers.results(*(f"p{p}" for p in range(procs)))
    workers.stop()
    gc = workers.results("gc")["gc"]

    # gc and verify ran beside the writers: never took a file, never saw a problem.
    assert gc["runs"] >= 1 and gc["removed"] == 0 and gc["problems"] == []

    hist = assert_consistent(cat, "shared")
    n = procs * appends
    assert [c.version for c in hist] == list(range(1, n + 2))  # create, then one commit per append
    by_token = {c.token: c for c in hist[1:]}
    assert len(by_token) == n
    for p in range(procs):
        commits = out[f"p{p}"]["commits"]
        assert [c["token"] for c in commits] == [f"p{p}-a{j}" for j in range(appends)]
        versions = [c["version"] for c in commits]
        assert versions == sorted(versions) and len(set(versions)) == appends  # a process's commits in order
        for c in commits:
            assert not c["duplicate"] and c["records"] == per
            landed = by_token[c["token"]]
            assert landed.version == c["version"] and landed.records == per and landed.shard_count == 3
        seen = out[f"p{p}"]["seen"]
        assert all(s >= v for s, v in zip(seen, versions, strict=True))  # reads see at least its own commit
    assert hist[-1].total_records == n * per and hist[-1].total_shards == n * 3
    ds = cat.dataset("shared")
    assert ds.info().records == n * per
    expected = [p * 100_000 + i for p in range(procs) for i in range(appends * per)]
    assert ids_of(ds) == Counter(expected)  # every id exactly once
    assert_clean(cat)


def test_processes_append_to_different_datasets(cat: Catalog, workers: Workers) -> None:
    procs, appends, per = 4, 10, 50
    for p in range(procs):
        cat.register(f"ds{p}", SCHEMA)
        tokens = [f"a{j}" for j in range(appends)]  # the same tokens in every dataset: tokens are per dataset
        workers.start(f"p{p}", "append", dataset=f"ds{p}", tokens=tokens, first=p * 100_000, rows=per, shard=1000)
    # and a fifth process appending to ds0 at the same time
    workers.start(
        "extra", "append", dataset="ds0", tokens=[f"x{j}" for j in range(appends)], first=900_000, rows=per, shard=1000
    )
    workers.go()
    out = workers.results()
    for p in range(procs):
        name = f"ds{p}"
        hist = assert_consistent(cat, name)
        extra = appends if p == 0 else 0
        assert len(hist) == 1 + appends + extra
        tokens = Counter(c.token for c in hist[1:])
        assert tokens == Counter([f"a{j}" for j in range(appends)] + [f"x{j}" for j in range(extra)])
        assert {c["version"] for c in out[f"p{p}"]["commits"]} <= {c.version for c in hist}
        ids = [p * 100_000 + i for i in range(appends * per)] + [900_000 + i for i in range(extra * per)]
        assert ids_of(cat.dataset(name)) == Counter(ids)
        assert cat.dataset(name).info().records == len(ids)
    assert_clean(cat)


# --------------------------------------------------------------------------- schema changes


def test_append_validated_against_an_old_schema_fails_at_commit(cat: Catalog) -> None:
    ds = cat.register("s", SCHEMA)
    ds.append_rows(rows(0, 10))
    before_files = data_files(cat)
    with pytest.raises(CommitConflictError) as err, ds.writer(shard_records=4) as w:
        for r in rows(100, 10):
            w.write(r)
        assert change_schema(cat, "s", SCHEMA_V2) == 2  # lands while the writer is busy
    msg = str(err.value)
    assert "schema version 2" in msg and "schema version 1" in msg and "nothing was registered" in msg
    hist = assert_consistent(cat, "s")
    assert [(c.version, c.kind, c.schema_version) for c in hist] == [
        (1, "create", 1),
        (2, "append", 1),
        (3, "schema", 2),
    ]
    assert data_files(cat) == before_files
    assert_clean(cat)

    # The same handle follows the schema at its next append's start (issue 30: no conflict
    # without a concurrent commit): its rows are validated against schema version 2 and land.
    again = ds.append_rows(rows(200, 5))
    assert (again.version, again.schema_version, ds.schema_version) == (4, 2, 2)
    assert_consistent(cat, "s")
    assert_clean(cat)

    # A fresh handle appends in the new schema; older versions still read with their own schema.
    fresh = cat.dataset("s")
    assert fresh.schema_version == 2
    commit = fresh.append_rows([{**r, "score": 1.5} for r in rows(300, 5)])
    assert (commit.version, commit.schema_version) == (5, 2)
    assert sorted(ids_of(fresh)) == list(range(10)) + list(range(200, 205)) + list(range(300, 305))
    assert all("score" not in r for r in fresh.read(version=2))
    assert sorted(r["score"] for r in fresh.read()) == [0.0] * 15 + [1.5] * 5
    assert_consistent(cat, "s")
    assert_clean(cat)


def test_handle_opened_in_another_process_before_a_schema_change_follows_it(cat: Catalog, workers: Workers) -> None:
    cat.register("s", SCHEMA).append_rows(rows(0, 10))
    workers.start("old", "stale_handle", dataset="s", tokens=["t1"], first=100, rows=10)
    deadline = time.monotonic() + WAIT
    while not (workers.barrier / "ready-old").exists():  # its handle is open: now change the schema
        assert time.monotonic() < deadline
        time.sleep(0.01)
    change_schema(cat, "s", SCHEMA_V2)
    workers.go()
    res = workers.results()["old"]
    # the change landed before the append began: no conflict, the rows are validated against
    # schema version 2 (issue 30; they fit it, its new feature has a default)
    assert res["error"] is None
    hist = assert_consistent(cat, "s")
    assert [(c.kind, c.schema_version) for c in hist] == [("create", 1), ("append", 1), ("schema", 2), ("append", 2)]
    assert hist[-1].token == "t1"
    assert sorted(ids_of(cat.dataset("s"))) == list(range(10)) + list(range(100, 110))
    assert_clean(cat)


# --------------------------------------------------------------------------- tokens


def test_processes_racing_inside_writers_with_one_token(cat: Catalog, workers: Workers) -> None:
    """Three writers pass the token check, write their shards, then commit at once: one lands."""
    cat.register("t", SCHEMA).append_rows(rows(0, 5))
    for p in range(3):
        workers.start(f"w{p}", "held", dataset="t", tokens=["same"], first=100, rows=30, shard=10)
    workers.go()
    commits = [r["commits"][0] for r in workers.results().values()]
    landed = [c for c in commits if not c["duplicate"]]
    assert len(landed) == 1
    winner = landed[0]
    assert all(c["version"] == winner["version"] == 3 and c["records"] == 30 for c in commits)
    assert all(c["shards"] == winner["shards"] and len(c["shards"]) == 3 for c in commits)
    hist = assert_consistent(cat, "t")
    assert [c.token for c in hist] == [None, None, "same"]
    assert registered(cat) >= set(winner["shards"])
    assert sorted(ids_of(cat.dataset("t"))) == list(range(5)) + list(range(100, 130))
    assert_clean(cat)  # the losers removed their files and their intents


def test_processes_racing_through_a_list_of_shared_tokens(cat: Catalog, workers: Workers) -> None:
    """Four processes run the same ten appends (same tokens, same rows): each lands exactly once."""
    cat.register("t", SCHEMA)
    tokens = [f"batch-{j}" for j in range(10)]
    for p in range(4):
        workers.start(f"p{p}", "append", dataset="t", tokens=tokens, first=0, rows=20, shard=1000)
    workers.go()
    out = workers.results()
    hist = assert_consistent(cat, "t")
    assert len(hist) == 11 and Counter(c.token for c in hist[1:]) == Counter(tokens)
    version_of = {c.token: c.version for c in hist[1:]}
    for j, token in enumerate(tokens):
        mine = [r["commits"][j] for r in out.values()]
        assert sum(not c["duplicate"] for c in mine) == 1, mine  # exactly one process made it
        assert {c["version"] for c in mine} == {version_of[token]}
    ids = ids_of(cat.dataset("t"))
    assert ids == Counter({i + j * 20: 1 for j in range(10) for i in range(20)})
    assert_clean(cat)
