"""Crash safety: a writer SIGKILLed at every step, clean errors, and gc beside live writers.

Each fault test runs the append in a child process that patches one hook to announce
(through a marker file) that it reached the step, then sleeps until the parent kills it
with SIGKILL. The parent then checks that the manifest, the shards, readers, verify and
gc all agree, and that the append can be run again.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from probes import commit_lock_held
from sqlalchemy import delete, select, update

import catalog.commit.intents as intent_rules
from catalog import Catalog, Commit, Dataset, RecordWriter, faults
from catalog import manifest as mf
from catalog.errors import AppendError, CatalogError, CommitConflictError, CorruptRecordError, ValidationError
from catalog.manifest import DATASETS, INTENTS, SHARDS, utcnow

pytestmark = pytest.mark.usefixtures("backend")  # the same suite on SQLite and PostgreSQL

SCHEMA = {"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string"}}}
NAME = "events"
BASE_IDS = list(range(10))  # committed before every fault: the data a crash must not disturb
CHILD_FIRST, CHILD_COUNT, CHILD_SHARD_RECORDS = 1000, 100, 40  # shards of 40, 40, 20 records
CHILD_IDS = list(range(CHILD_FIRST, CHILD_FIRST + CHILD_COUNT))
WAIT = 60.0  # seconds a child may take to reach its step (only ever hit when something is broken)

# The child: patch the hook of one step, append, print the commit as JSON. At the step it
# writes the marker (atomically) and sleeps until it is killed.
CHILD = r"""
import json, os, sys, time
from pathlib import Path

from sqlalchemy import event

import catalog.storage as storage
from catalog import Catalog, faults

root, name, stage, token, marker = sys.argv[1:6]
first, count, shard_records = (int(a) for a in sys.argv[6:9])


def hold(info):
    info["pid"] = os.getpid()
    Path(marker + ".part").write_text(json.dumps(info))
    os.replace(marker + ".part", marker)
    while True:
        time.sleep(60)


cat = Catalog.open(root)
ds = cat.dataset(name)
state = {"finishing": 0, "in_commit": False}

if stage == "after_intent":  # the intent is recorded, no file exists yet
    def on_point(name, info):
        if name == "intent.recorded":
            hold({"intent": info["intent"]})

    faults.install(on_point)
elif stage == "mid_write":  # the 2nd shard has records in its temp file, not fsynced, not renamed
    def on_point(name, info):
        if name == "shard.closing":
            state["finishing"] += 1
            if state["finishing"] == 2:
                info["flush"]()
                hold({"temp": str(info["temp"]), "size": os.path.getsize(info["temp"])})

    faults.install(on_point)
elif stage == "before_commit":  # every shard renamed and its directory fsynced; no transaction yet
    def on_point(name, info):
        if name == "commit.before":
            hold({"shards": [s.file.rel for s in info["change"].add]})

    faults.install(on_point)
elif stage == "in_commit":  # inside the commit transaction, every row written, COMMIT not yet sent
    def on_point(name, info):
        state["in_commit"] = state["in_commit"] or name == "commit.before"

    faults.install(on_point)

    @event.listens_for(cat.engine, "commit")
    def on_commit(conn):
        if state["in_commit"]:
            hold({})
elif stage == "after_commit":  # the commit is durable; the writer has not returned yet
    def on_point(name, info):
        if name == "commit.after":
            commit = info["commit"]
            hold({"version": commit.version, "shards": [s.relpath for s in commit.shards]})

    faults.install(on_point)
else:
    assert stage == "none", stage

rows = ({"id": i, "text": f"row {i}"} for i in range(first, first + count))
commit = ds.append_rows(rows, token=token or None, shard_records=shard_records)
print(json.dumps(commit.to_json()))
"""


# --------------------------------------------------------------------------- helpers


def rows(ids: list[int]) -> list[dict[str, Any]]:
    return [{"id": i, "text": f"row {i}"} for i in ids]


def child_args(root: Path, stage: str, token: str, marker: Path) -> list[str]:
    return [
        sys.executable,
        "-c",
        CHILD,
        str(root),
        NAME,
        stage,
        token,
        str(marker),
        str(CHILD_FIRST),
        str(CHILD_COUNT),
        str(CHILD_SHARD_RECORDS),
    ]


def run_child(root: Path, token: str) -> dict[str, Any]:
    """The same append in a fresh process, no hook: returns the commit's JSON."""
    res = subprocess.run(child_args(root, "none", token, root / "unused"), capture_output=True, text=True, timeout=WAIT)
    assert res.returncode == 0, res.stderr
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


def kill_at(root: Path, stage: str, token: str, tmp: Path, during: Any = None) -> tuple[int, dict[str, Any]]:
    """Run the child until it reaches ``stage``, call ``during()``, SIGKILL it: (pid, marker info)."""
    marker = tmp / f"marker-{stage}"
    proc = subprocess.Popen(
        child_args(root, stage, token, marker), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + WAIT
        while not marker.exists():
            if proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"child exited ({proc.returncode}) before reaching {stage}: {out}{err}")
            if time.monotonic() > deadline:
                pytest.fail(f"child never reached {stage}")
            time.sleep(0.01)
        info: dict[str, Any] = json.loads(marker.read_text())
        assert info["pid"] == proc.pid
        if during is not None:
            during()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=WAIT)
    assert proc.returncode == -signal.SIGKILL
    return proc.pid, info


def data_files(cat: Catalog) -> set[str]:
    """Every file in the data area, relative to it (temporary names included)."""
    return {p.relative_to(cat.data_root).as_posix() for p in cat.data_root.glob("*/*") if p.is_file()}  # not the marker


def registered(cat: Catalog) -> set[str]:
    with mf.read_txn(cat.engine) as conn:
        return set(conn.execute(select(SHARDS.c.path)).scalars())


def registered_paths(root: Path) -> set[str]:
    with Catalog.open(root) as cat:
        return registered(cat)


def intents(cat: Catalog) -> list[Any]:
    with mf.read_txn(cat.engine) as conn:
        return list(conn.execute(select(INTENTS)).all())


def dataset_version(cat: Catalog, name: str = NAME) -> int:
    with mf.read_txn(cat.engine) as conn:
        return int(conn.execute(select(DATASETS.c.version).where(DATASETS.c.name == name)).scalar_one())


def ids_of(ds: Dataset) -> list[int]:
    return sorted(int(r["id"]) for r in ds.read())


def assert_consistent(cat: Catalog, name: str = NAME) -> list[Commit]:
    """Versions gapless; every commit's counts and running totals match the shard rows; so do the dataset's."""
    ds = cat.dataset(name)
    hist = ds.history()
    assert [c.version for c in hist] == list(range(1, len(hist) + 1))
    assert hist[0].kind == "create"
    with mf.read_txn(cat.engine) as conn:
        row = conn.execute(select(DATASETS).where(DATASETS.c.name == name)).one()
        shards = conn.execute(select(SHARDS).where(SHARDS.c.dataset_id == row.id)).all()
    assert row.version == hist[-1].version
    records = size = count = 0
    for c in hist:
        added = [s for s in shards if s.added_version == c.version]
        assert c.records == sum(s.records for s in added), c
        assert c.shard_count == len(added), c
        records += c.records
        size += sum(s.bytes for s in added)
        count += len(added)
        assert (c.total_records, c.total_bytes, c.total_shards) == (records, size, count), c
    assert all(s.added_version <= row.version and s.removed_version is None for s in shards)
    assert (row.records, row.bytes, row.shard_count) == (records, size, count)
    info = ds.info()
    assert (info.version, info.records, info.bytes, info.shard_count) == (row.version, records, size, count)
    assert len({s.path for s in shards}) == len(shards)
    return hist


def backdate_intents(cat: Catalog) -> None:
    """Make every intent look silent for longer than INTENT_STALE (a writer that died)."""
    old = utcnow() - intent_rules.INTENT_STALE - timedelta(minutes=1)
    with mf.write_txn(cat.engine) as conn:
        conn.execute(update(INTENTS).values(heartbeat_at=old))


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    r = tmp_path / "cat"
    with Catalog.init(r) as cat:
        ds = cat.register(NAME, SCHEMA, "crash tests")
        ds.append_rows(rows(BASE_IDS), token="base", shard_records=4)
    yield r


# --------------------------------------------------------------------------- SIGKILL at every step


# How the killed writer's intent stops protecting its files: its heartbeat backdated in the
# manifest, a short INTENT_STALE in this (the gc's) process, or its row gone altogether.
STALE_BY = {"after_intent": "backdate", "mid_write": "backdate", "before_commit": "setting", "in_commit": "absent"}


@pytest.mark.parametrize("stage", ["after_intent", "mid_write", "before_commit", "in_commit", "after_commit"])
def test_sigkilled_append_is_all_or_nothing(
    stage: str, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = f"tok-{stage}"
    committed = stage == "after_commit"
    with Catalog.open(root) as cat:
        before_files = data_files(cat)
        before_hist = assert_consistent(cat)
    assert before_files == registered_paths(root) and len(before_hist) == 2

    seen: dict[str, Any] = {}

    def during() -> None:
        # While the child sits at its step: readers see the old version, except after the commit.
        with Catalog.open(root) as cat:
            seen["version"] = dataset_version(cat)
            seen["ids"] = ids_of(cat.dataset(NAME))
            seen["files"] = data_files(cat)

    pid, info = kill_at(root, stage, token, tmp_path, during)
    with Catalog.open(root) as cat, mf.write_txn(cat.engine) as conn:
        # As a writer on another machine: only its heartbeat tells gc it died (a writer of
        # this machine is known dead at once: test_interrupts covers that).
        conn.execute(update(INTENTS).values(process=None))
    assert seen["version"] == (3 if committed else 2)
    assert seen["ids"] == (BASE_IDS + CHILD_IDS if committed else BASE_IDS)

    with Catalog.open(root) as cat:
        hist = assert_consistent(cat)
        ds = cat.dataset(NAME)
        assert data_files(cat) == seen["files"]  # the kill changed no file
        leftovers = data_files(cat) - registered(cat)
        live = intents(cat)
        if committed:
            # Everything of the killed append is visible, nothing else is left over.
            assert [c.version for c in hist] == [1, 2, 3]
            assert hist[-1].token == token and hist[-1].records == CHILD_COUNT and hist[-1].shard_count == 3
            assert ids_of(ds) == BASE_IDS + CHILD_IDS
            assert sorted(registered(cat) - before_files) == sorted(info["shards"])
            assert leftovers == set() and live == []
        else:
            # Nothing of it is visible; its files are there, unregistered, under its live intent.
            assert hist == before_hist
            assert ids_of(ds) == BASE_IDS
            assert registered(cat) == before_files
            assert len(live) == 1 and live[0].pid == pid and live[0].dataset == NAME
            intent = live[0].id
            assert all(Path(f).name.lstrip(".").startswith(intent) for f in leftovers)
            expected = {
                "after_intent": 0,
                "mid_write": 2,  # the first shard, renamed, and the second one's temp file
                "before_commit": 3,
                "in_commit": 3,
            }[stage]
            assert len(leftovers) == expected, leftovers
            if stage == "mid_write":
                temp = Path(info["temp"])
                assert info["size"] > 0 and temp.stat().st_size == info["size"]
                assert temp.relative_to(cat.data_root).as_posix() in leftovers
            if stage == "before_commit":
                assert leftovers == set(info["shards"])

        # Every registered shard verifies; files of a live intent are not reported.
        report = cat.verify()
        assert report.ok and report.problems == [], report.to_json()
        assert report.checked == len(registered(cat))

        # gc leaves the files of an intent that is still live, whatever the grace.
        gc = cat.gc(grace=timedelta(0))
        assert gc.removed == [] and gc.kept_live == len(leftovers)
        assert data_files(cat) - registered(cat) == leftovers
        assert len(intents(cat)) == len(live)

        # Once the intent is stale: verify names the leftovers "unregistered", gc removes them all.
        how = STALE_BY.get(stage, "backdate")
        if how == "setting":
            monkeypatch.setattr(intent_rules, "INTENT_STALE", timedelta(milliseconds=200))
            time.sleep(0.3)
        elif how == "absent":
            with mf.write_txn(cat.engine) as conn:
                conn.execute(delete(INTENTS))
        else:
            backdate_intents(cat)
        report = cat.verify()
        assert report.ok, report.to_json()
        assert {p.problem for p in report.problems} <= {"unregistered"}
        assert {Path(p.path).relative_to(cat.data_root).as_posix() for p in report.problems} == leftovers
        gc = cat.gc(grace=timedelta(0))
        assert {Path(p).relative_to(cat.data_root).as_posix() for p in gc.removed} == leftovers
        assert gc.kept_live == 0
        assert data_files(cat) == registered(cat)
        assert intents(cat) == []  # gc also forgets the dead intent
        assert cat.verify().problems == []
        assert ids_of(ds) == (BASE_IDS + CHILD_IDS if committed else BASE_IDS)

    # Run the same append again, with the same token, in a fresh process.
    again = run_child(root, token)
    assert again["version"] == 3 and again["records"] == CHILD_COUNT and again["token"] == token
    assert again["duplicate"] is committed  # after a commit: a no-op that returns the earlier commit
    with Catalog.open(root) as cat:
        hist = assert_consistent(cat)
        assert [c.version for c in hist] == [1, 2, 3]
        assert [c.token for c in hist] == [None, "base", token]
        assert sorted(s["path"] for s in again["shards"]) == sorted(
            str(cat.shard_path(p)) for p in registered(cat) - before_files
        )
        assert ids_of(cat.dataset(NAME)) == BASE_IDS + CHILD_IDS
        assert data_files(cat) == registered(cat) and intents(cat) == []
        report = cat.verify()
        assert report.ok and report.problems == [] and report.checked == len(registered(cat))

    if committed:  # the same retry through the CLI: `catalog append --token` is a no-op too
        jsonl = tmp_path / "retry.jsonl"
        jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows(CHILD_IDS)))
        cli = [sys.executable, "-m", "catalog", "-C", str(root), "append", NAME, str(jsonl), "--token", token]
        res = subprocess.run([*cli, "--json"], capture_output=True, text=True, timeout=WAIT)
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        assert doc["duplicate"] is True and doc["version"] == 3 and doc["records"] == CHILD_COUNT
        with Catalog.open(root) as cat:
            assert [c.version for c in assert_consistent(cat)] == [1, 2, 3]
            assert data_files(cat) == registered(cat) and intents(cat) == []


def test_sigkill_inside_commit_holds_the_write_lock_and_releases_it(root: Path, tmp_path: Path) -> None:
    """Killed inside the commit transaction: the lock dies with it, the next writer commits at once."""
    locked: dict[str, bool] = {}

    def during() -> None:
        with Catalog.open(root) as cat:
            locked["held"] = commit_lock_held(cat, NAME)

    kill_at(root, "in_commit", "tok-lock", tmp_path, during)
    assert locked["held"] is True  # the child really was inside its write transaction
    with Catalog.open(root) as cat:
        start = time.monotonic()
        commit = cat.dataset(NAME).append_rows(rows([5000, 5001]))
        assert time.monotonic() - start < 5
        assert commit.version == 3
        assert_consistent(cat)


# --------------------------------------------------------------------------- clean errors


def write_tfrecord(path: Path, records: list[bytes]) -> None:
    with RecordWriter(path) as w:
        w.write_many(records)


def corrupt(path: Path, record_index: int) -> None:
    """Flip a data byte of one record (its data CRC no longer matches)."""
    data = bytearray(path.read_bytes())
    offset = 0
    for _ in range(record_index):
        length = int.from_bytes(data[offset : offset + 8], "little")
        offset += 12 + length + 4
    data[offset + 12] ^= 0xFF
    path.write_bytes(bytes(data))


def _fail_in_block(ds: Dataset, tmp: Path) -> None:
    with ds.writer(shard_records=10) as w:
        for r in rows(list(range(100, 125))):
            w.write(r)
        raise RuntimeError("boom")


def _fail_bad_row(ds: Dataset, tmp: Path) -> None:
    def gen() -> Iterator[dict[str, Any]]:
        yield from rows(list(range(100, 125)))
        yield {"id": "not a number", "text": "x"}

    ds.append_rows(gen(), shard_records=10)


def _fail_corrupt_tfrecord(ds: Dataset, tmp: Path, link: bool = False) -> None:
    good, bad = tmp / "good.tfrecord", tmp / "bad.tfrecord"
    write_tfrecord(good, [ds.schema.encode(r) for r in rows(list(range(100, 130)))])
    write_tfrecord(bad, [ds.schema.encode(r) for r in rows(list(range(200, 230)))])
    corrupt(bad, 25)
    ds.append_files([good, bad], shard_records=10, link=link)


def _fail_corrupt_tfrecord_linked(ds: Dataset, tmp: Path) -> None:
    _fail_corrupt_tfrecord(ds, tmp, link=True)


def _fail_tfrecord_breaking_schema(ds: Dataset, tmp: Path) -> None:
    good, bad = tmp / "good.tfrecord", tmp / "bad.tfrecord"
    write_tfrecord(good, [ds.schema.encode(r) for r in rows(list(range(100, 130)))])
    from catalog import encode_example

    write_tfrecord(bad, [encode_example({"id": 1, "text": "ok"}), encode_example({"id": [1, 2], "text": "x"})])
    ds.append_files([good, bad], shard_records=10)


def _fail_jsonl(ds: Dataset, tmp: Path) -> None:
    path = tmp / "rows.jsonl"
    lines = [json.dumps(r) for r in rows(list(range(100, 125)))]
    lines.append(json.dumps({"id": 125, "text": 7}))  # text must be a string
    path.write_text("\n".join(lines) + "\n")
    ds.append_files([path], shard_records=10)


FAILURES: dict[str, tuple[Any, type[BaseException], str]] = {
    "exception in writer": (_fail_in_block, RuntimeError, "boom"),
    "bad row": (_fail_bad_row, ValidationError, "id"),
    "corrupt tfrecord": (_fail_corrupt_tfrecord, CorruptRecordError, "bad.tfrecord"),
    "corrupt tfrecord after a linked file": (_fail_corrupt_tfrecord_linked, CorruptRecordError, "bad.tfrecord"),
    "tfrecord breaking the schema": (_fail_tfrecord_breaking_schema, AppendError, "record 1"),
    "jsonl line breaking the schema": (_fail_jsonl, AppendError, "line 26"),
}


@pytest.mark.parametrize("case", list(FAILURES))
def test_clean_error_leaves_nothing(case: str, root: Path, tmp_path: Path) -> None:
    fail, exc_type, text = FAILURES[case]
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    with Catalog.open(root) as cat:
        ds = cat.dataset(NAME)
        files, hist = data_files(cat), assert_consistent(cat)
        with pytest.raises(exc_type, match=text):
            fail(ds, inputs)
        assert data_files(cat) == files == registered(cat)  # every file the writer made is gone
        assert intents(cat) == []
        assert assert_consistent(cat) == hist
        assert ids_of(cat.dataset(NAME)) == BASE_IDS
        assert cat.verify().problems == []
        if "linked" in case:  # the adopted input is untouched and no longer linked into the catalog
            assert (inputs / "good.tfrecord").stat().st_nlink == 1
        # the dataset still takes appends
        assert ds.append_rows(rows([7000])).version == hist[-1].version + 1


def test_linked_append_commits_the_input_by_hard_link(root: Path, tmp_path: Path) -> None:
    with Catalog.open(root) as cat:
        ds = cat.dataset(NAME)
        src = tmp_path / "in.tfrecord"
        write_tfrecord(src, [ds.schema.encode(r) for r in rows(list(range(100, 130)))])
        commit = ds.append_files([src], link=True)
        assert commit.shard_count == 1 and src.stat().st_nlink == 2
        assert ids_of(ds) == BASE_IDS + list(range(100, 130))
        assert cat.verify().problems == []


# --------------------------------------------------------------------------- gc beside writers


def test_gc_leaves_a_live_writers_files_alone(root: Path) -> None:
    with Catalog.open(root) as cat:
        ds = cat.dataset(NAME)
        before = data_files(cat)
        with ds.writer(shard_records=10) as w:
            for r in rows(list(range(100, 125))):
                w.write(r)
            mine = data_files(cat) - before
            assert len(mine) == 3  # two renamed shards and the open temp file
            assert sum(1 for f in mine if Path(f).name.startswith(".")) == 1
            gc = cat.gc(grace=timedelta(0))
            assert gc.removed == [] and gc.kept_live == 3
            assert data_files(cat) - before == mine
            report = cat.verify()
            assert report.problems == []  # a live writer's files are not "unregistered"
        assert w.commit is not None and w.commit.records == 25 and w.commit.shard_count == 3
        assert ids_of(ds) == BASE_IDS + list(range(100, 125))
        assert data_files(cat) == registered(cat) and intents(cat) == []
        assert cat.verify().problems == []
        assert_consistent(cat)


def test_shard_deleted_before_commit_fails_and_registers_nothing(root: Path) -> None:
    with Catalog.open(root) as cat:
        ds = cat.dataset(NAME)
        before, hist = data_files(cat), assert_consistent(cat)
        with pytest.raises(CatalogError, match="vanished before commit"), ds.writer(shard_records=10) as w:
            for r in rows(list(range(100, 125))):
                w.write(r)
            assert w.sink is not None
            first = cat.shard_path(w.sink.shards[0].rel)
            first.unlink()
        assert assert_consistent(cat) == hist
        assert data_files(cat) == before == registered(cat)
        assert intents(cat) == []
        assert ids_of(ds) == BASE_IDS
        assert cat.verify().problems == []


def test_a_writer_that_keeps_writing_keeps_its_intent_alive(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows written through writer() (not only file ingests) refresh the heartbeat."""
    monkeypatch.setattr(intent_rules, "INTENT_STALE", timedelta(milliseconds=600))
    monkeypatch.setattr(intent_rules, "HEARTBEAT_EVERY", timedelta(milliseconds=50))
    with Catalog.open(root) as cat:
        ds = cat.dataset(NAME)
        before = data_files(cat)
        with ds.writer(shard_records=5) as w:
            for i in range(100, 120):
                w.write({"id": i, "text": f"row {i}"})
                time.sleep(0.06)  # 1.2 s of writing: twice INTENT_STALE
            gc = cat.gc(grace=timedelta(0))
            assert gc.removed == [], "gc took the files of a writer that was writing all along"
            assert gc.kept_live == 4
        assert w.commit is not None and w.commit.records == 20
        assert ids_of(ds) == BASE_IDS + list(range(100, 120))
        assert len(data_files(cat) - before) == 4
        assert cat.verify().problems == []


def test_a_writer_whose_intent_expired_cannot_commit(root: Path) -> None:
    """Once gc has declared an intent dead and collected its files, that writer's commit must fail."""
    with Catalog.open(root) as cat:
        ds = cat.dataset(NAME)
        hist = assert_consistent(cat)
        with pytest.raises(CatalogError, match="vanished before commit"), ds.writer(shard_records=10) as w:
            for r in rows(list(range(100, 125))):
                w.write(r)
            backdate_intents(cat)  # a writer silent for longer than INTENT_STALE
            gc = cat.gc(grace=timedelta(0))
            assert len(gc.removed) == 3 and intents(cat) == []
        assert assert_consistent(cat) == hist
        assert data_files(cat) == registered(cat)
        assert cat.verify().problems == []


def test_a_writer_whose_intent_expired_cannot_commit_even_if_its_files_are_young(root: Path) -> None:
    """gc forgets a dead intent even when the grace period spares its files; the writer must not commit then."""
    with Catalog.open(root) as cat:
        ds = cat.dataset(NAME)
        hist, before = assert_consistent(cat), data_files(cat)
        with pytest.raises(CommitConflictError, match="expired") as err, ds.writer(shard_records=10) as w:
            for r in rows(list(range(100, 125))):
                w.write(r)
            backdate_intents(cat)
            gc = cat.gc(grace=timedelta(hours=1))
            assert gc.removed == [] and gc.kept_young == 3 and intents(cat) == []
        assert "nothing was registered" in str(err.value)
        assert assert_consistent(cat) == hist
        assert data_files(cat) == before == registered(cat)  # the writer removed its own files
        assert intents(cat) == [] and ids_of(ds) == BASE_IDS


def test_commit_between_gc_snapshot_and_unlink_is_not_collected(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stalled writer (intent stale in gc's snapshot) that commits while gc runs keeps its shards."""
    with Catalog.open(root) as cat:
        ds = cat.dataset(NAME)
        w = ds.writer(shard_records=10)
        w.__enter__()
        for r in rows(list(range(100, 125))):
            w.write(r)
        backdate_intents(cat)

        def commit_after_gc_read(name: str, info: dict[str, Any]) -> None:
            if name == "gc.read" and w.commit is None:
                w.__exit__(None, None, None)  # the writer wakes up and commits right after gc's snapshot

        faults.install(commit_after_gc_read)
        try:
            gc = cat.gc(grace=timedelta(0))
        finally:
            faults.install(None)
        assert w.commit is not None and w.commit.shard_count == 3  # its intent was still there: it commits
        assert gc.removed == [] and gc.kept_live == 3
        report = cat.verify()
        assert report.ok and report.problems == [], report.to_json()
        assert ids_of(ds) == BASE_IDS + list(range(100, 125))
        assert_consistent(cat)


def test_verify_does_not_report_a_temp_file_renamed_by_a_commit(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit between verify's file listing and its manifest read is no "unregistered" file."""
    with Catalog.open(root) as cat:
        ds = cat.dataset(NAME)
        w = ds.writer(shard_records=10)
        w.__enter__()
        for r in rows(list(range(100, 125))):
            w.write(r)

        def commit_after_listing(name: str, info: dict[str, Any]) -> None:
            if name == "verify.listed" and w.commit is None:
                w.__exit__(None, None, None)

        faults.install(commit_after_listing)
        try:
            report = cat.verify()
            assert w.commit is not None
            assert report.problems == [], report.to_json()
            gc = cat.gc(grace=timedelta(0))
            assert gc.removed == []
        finally:
            faults.install(None)
        assert ids_of(ds) == BASE_IDS + list(range(100, 125))
        assert cat.verify().problems == []
