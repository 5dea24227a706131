"""Crash safety and races of the rewriting commits: migrate (and compact, restore).

- A migration SIGKILLed at each step (intent recorded, shards half written, all published,
  inside the commit transaction, after the commit): the manifest stays consistent, readers
  see exactly the old or exactly the migrated data, the migration can be run again, and gc
  collects what the killed run left once its intent is dead.
- Appends racing a migration or a compaction (the child's per-shard work is gated on files
  the parent creates after each append): nothing is lost, nothing doubled, order kept.
- gc with --keep-versions / --older-than never removes a live shard or one a kept version needs.

Children run as in tests/behaviour/test_catalog_faults.py: ``sys.executable -c CHILD`` with one hook
patched to announce the step through a marker file, then hold (until SIGKILL) or wait for a
"go" file from the parent.
"""

from __future__ import annotations

import json
import shutil
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
from sqlalchemy import select, update
from typer.testing import CliRunner

import catalog.commit.intents as intent_rules
import catalog.readers.files as reader_files
from catalog import Catalog, Commit, Dataset
from catalog import manifest as mf
from catalog.cli import app
from catalog.errors import CatalogError, ValidationError, VersionNotFoundError
from catalog.manifest import APPLIED_MIGRATIONS, COMMITS, DATASETS, INTENTS, SCHEMA_VERSIONS, SHARDS, utcnow
from catalog.storage import intent_of

pytestmark = pytest.mark.usefixtures("backend")  # the same suite on SQLite and PostgreSQL

NAME = "events"
SCHEMA = {"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string"}, "score": {"dtype": "float32"}}}
SHARD_RECORDS = 10
BASE_LOADS = [(0, 20), (20, 20), (40, 20)]  # three appends of two 10-record shards: 6 shards, 60 rows
BASE_IDS = [i for first, n in BASE_LOADS for i in range(first, first + n)]
BASE_SHARDS = sum(-(-n // SHARD_RECORDS) for _first, n in BASE_LOADS)
WAIT = 60.0  # seconds a child may take to reach a step (only ever hit when something is broken)
runner = CliRunner()

# Row-level (a computed field), so every value goes through decode -> apply -> encode.
MIGRATION_1 = (
    "0001_enrich",
    '''"""Rename text, add a computed field."""
from catalog.migrate import AddField, RenameField

operations = [
    RenameField("text", "caption"),
    AddField("double", {"dtype": "int64"}, fn=lambda row: row["id"] * 2),
]
''',
)
# Byte-level (no decoding).
MIGRATION_2 = (
    "0002_drop_score",
    '''"""Drop score."""
from catalog.migrate import DropField

operations = [DropField("score")]
''',
)


def old_row(i: int) -> dict[str, Any]:
    return {"id": i, "text": f"row {i}", "score": i / 4}  # quarters: exact in float32


def migrated(row: dict[str, Any]) -> dict[str, Any]:
    """What MIGRATION_1 must make of a row, computed here independently of the library."""
    return {"id": row["id"], "caption": row["text"], "score": row["score"], "double": row["id"] * 2}


# The child: open the catalog, patch the hooks cfg asks for, run one migrate or compact,
# print its report as JSON. "kill" holds forever at one step (the parent SIGKILLs it);
# "gates" wait at the n-th call of a hook until the parent creates the go file.
CHILD = r"""
import json, os, sys, time
from pathlib import Path

from sqlalchemy import event

import catalog.ops.migrations.runner as migrations
import catalog.ops.rewrite as rewrite
from catalog import Catalog, faults

cfg = json.loads(sys.argv[1])
marks = Path(cfg["marks"])
kill = cfg.get("kill")
gates = cfg.get("gates", {})
state = {"intents": 0, "jobs": 0, "commits": 0, "in_commit": False}


def announce(tag, info):
    info["pid"] = os.getpid()
    part = marks / ("at-" + tag + ".part")
    part.write_text(json.dumps(info))
    os.replace(part, marks / ("at-" + tag))


def hold(tag, info):
    announce(tag, info)
    while True:
        time.sleep(60)


def gate(tag, info):
    announce(tag, info)
    deadline = time.monotonic() + 60
    while not (marks / ("go-" + tag)).exists():
        if time.monotonic() > deadline:
            sys.exit("no go file for " + tag)
        time.sleep(0.005)


cat = Catalog.open(cfg["root"])
ds = cat.dataset(cfg["name"])



def intent_recorded(info):
    n = state["intents"]
    state["intents"] += 1
    if kill == "after_intent" and n == cfg.get("intent", 0):  # the intent row is committed; no file yet
        hold(kill, {"intent": info["intent"]})

job_module = migrations if cfg["op"] == "migrate" else rewrite
job_name = "migrate_shard" if cfg["op"] == "migrate" else "concat_job"
original_job = getattr(job_module, job_name)


def job(j):
    n = state["jobs"]
    state["jobs"] += 1
    if n in gates.get("job", []):
        gate("job-%d" % n, {"source": getattr(j, "source", None)})
    result = original_job(j)
    if kill == "mid_write" and n == 1:  # the 2nd job's shard is published; more jobs to go
        hold(kill, {"file": result.rel})
    return result


setattr(job_module, job_name, job)



def commit_before(ch):
    n = state["commits"]
    state["commits"] += 1
    if kill == "before_commit":  # every new shard published; no transaction yet
        hold(kill, {"files": [s.file.rel for s in ch.add]})
    if n in gates.get("commit", []):
        gate("commit-%d" % n, {"files": [s.file.rel for s in ch.add]})
    state["in_commit"] = kill == "in_commit"


def commit_after(commit):
    if kill == "after_commit":  # durable; the caller has not returned yet
        hold(kill, {"version": commit.version, "files": [s.relpath for s in commit.shards]})


def on_point(name, info):
    if name == "intent.recorded":
        intent_recorded(info)
    elif name == "shard.closing" and kill == "mid_shard" and state["jobs"] == 2:  # the 2nd job's shard, unpublished
        info["flush"]()
        hold(kill, {"temp": str(info["temp"])})
    elif name == "commit.before":
        commit_before(info["change"])
    elif name == "commit.after":
        commit_after(info["commit"])


faults.install(on_point)


@event.listens_for(cat.engine, "commit")
def on_commit(conn):
    if state["in_commit"]:  # every row written, COMMIT not sent
        hold("in_commit", {})


if cfg["op"] == "migrate":
    report = ds.migrate(cfg["migrations"], workers=1)
else:
    report = ds.compact(target_size=cfg["target"], workers=1)
print(json.dumps(report.to_json()))
"""


# --------------------------------------------------------------------------- helpers


class Child:
    """One CHILD process; the parent waits for its markers, opens its gates, kills or reaps it."""

    def __init__(self, root: Path, marks: Path, **cfg: Any) -> None:
        marks.mkdir(exist_ok=True)
        self.marks = marks
        doc = {"root": str(root), "name": NAME, "marks": str(marks), **cfg}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, json.dumps(doc)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    def wait_at(self, tag: str) -> dict[str, Any]:
        marker = self.marks / f"at-{tag}"
        deadline = time.monotonic() + WAIT
        while not marker.exists():
            if self.proc.poll() is not None:
                out, err = self.proc.communicate()
                pytest.fail(f"child exited ({self.proc.returncode}) before reaching {tag}: {out}{err}")
            if time.monotonic() > deadline:
                pytest.fail(f"child never reached {tag}")
            time.sleep(0.01)
        info: dict[str, Any] = json.loads(marker.read_text())
        assert info["pid"] == self.proc.pid
        return info

    def go(self, tag: str) -> None:
        (self.marks / f"go-{tag}").touch()

    def finish(self) -> dict[str, Any]:
        out, err = self.proc.communicate(timeout=WAIT)
        assert self.proc.returncode == 0, err
        doc: dict[str, Any] = json.loads(out)
        return doc

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.communicate(timeout=WAIT)


def write_migrations(directory: Path, *migrations: tuple[str, str]) -> Path:
    folder = directory / NAME
    folder.mkdir(parents=True, exist_ok=True)
    for stem, text in migrations:
        (folder / f"{stem}.py").write_text(text)
    return directory


def data_files(cat: Catalog) -> set[str]:
    """Every file in the data area, relative to it (temporary names included)."""
    return {p.relative_to(cat.data_root).as_posix() for p in cat.data_root.glob("*/*") if p.is_file()}  # not the marker


def registered(cat: Catalog) -> set[str]:
    """Every shard path the manifest names (live and retired, not collected)."""
    with mf.read_txn(cat.engine) as conn:
        return set(conn.execute(select(SHARDS.c.path).where(SHARDS.c.collected_at.is_(None))).scalars())


def shard_rows(cat: Catalog) -> list[Any]:
    with mf.read_txn(cat.engine) as conn:
        return list(conn.execute(select(SHARDS).order_by(SHARDS.c.id)).all())


def intents(cat: Catalog) -> list[Any]:
    with mf.read_txn(cat.engine) as conn:
        return list(conn.execute(select(INTENTS)).all())


def applied_count(cat: Catalog) -> int:
    with mf.read_txn(cat.engine) as conn:
        return len(conn.execute(select(APPLIED_MIGRATIONS.c.id)).all())


def rel(cat: Catalog, paths: Iterator[str] | list[str]) -> set[str]:
    return {Path(p).relative_to(cat.data_root).as_posix() for p in paths}


def backdate_intents(cat: Catalog) -> None:
    """Make every intent look silent for longer than INTENT_STALE (a writer that died)."""
    old = utcnow() - intent_rules.INTENT_STALE - timedelta(minutes=1)
    with mf.write_txn(cat.engine) as conn:
        conn.execute(update(INTENTS).values(heartbeat_at=old))


def assert_consistent(cat: Catalog) -> list[Commit]:
    """Versions gapless; dataset row, schema versions and every commit's totals agree with the
    shards table; every live shard file exists with its registered size; verify is ok."""
    ds = cat.dataset(NAME)
    hist = ds.history()
    assert [c.version for c in hist] == list(range(1, len(hist) + 1))
    with mf.read_txn(cat.engine) as conn:
        row = conn.execute(select(DATASETS).where(DATASETS.c.name == NAME)).one()
        shards = conn.execute(select(SHARDS).where(SHARDS.c.dataset_id == row.id)).all()
        schema_versions = list(
            conn.execute(select(SCHEMA_VERSIONS.c.version).where(SCHEMA_VERSIONS.c.dataset_id == row.id)).scalars()
        )
    assert row.version == hist[-1].version
    assert row.schema_version == hist[-1].schema_version == max(schema_versions)
    assert sorted(schema_versions) == list(range(1, row.schema_version + 1))
    for c in hist:
        live = [s for s in shards if s.added_version <= c.version and (s.removed_version or 1 << 62) > c.version]
        assert (c.total_records, c.total_bytes, c.total_shards) == (
            sum(s.records for s in live),
            sum(s.bytes for s in live),
            len(live),
        ), c
        added = [s for s in shards if s.added_version == c.version]
        assert c.shard_count == len(added), c
        if c.kind == "append":
            assert c.records == sum(s.records for s in added), c
    for s in shards:
        assert s.added_version <= row.version
        assert s.removed_version is None or s.added_version < s.removed_version <= row.version
    live_now = [s for s in shards if s.removed_version is None]
    assert (row.records, row.bytes, row.shard_count) == (
        sum(s.records for s in live_now),
        sum(s.bytes for s in live_now),
        len(live_now),
    )
    for s in live_now:
        assert cat.shard_path(s.path).stat().st_size == s.bytes
    assert len({s.path for s in shards}) == len(shards)
    report = cat.verify()
    assert report.ok, report.to_json()
    assert {p.problem for p in report.problems} <= {"unregistered"}, report.to_json()
    return hist


def what_readers_see(cat: Catalog, old: list[dict[str, Any]], new: list[dict[str, Any]]) -> str:
    """ "old" or "new": a fresh reader sees exactly one of them, schema and values alike."""
    ds = cat.dataset(NAME)
    got = list(ds.read())
    raw = list(ds.records())
    assert len(raw) == len(got)
    if ds.schema_version == 1:
        assert list(ds.schema.features) == ["id", "text", "score"]
        assert got == old
        return "old"
    assert list(ds.schema.features) == ["id", "caption", "score", "double"]
    assert got == new
    return "new"


def load(ds: Dataset, ids: list[int], shard_records: int = SHARD_RECORDS) -> Commit:
    return ds.append_rows([old_row(i) for i in ids], shard_records=shard_records)


def make_catalog(r: Path) -> Path:
    with Catalog.init(r) as cat:
        ds = cat.register(NAME, SCHEMA, "migration crash tests")
        for first, n in BASE_LOADS:
            load(ds, list(range(first, first + n)))
    return r


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_catalog(tmp_path / "cat")


@pytest.fixture
def mdir(tmp_path: Path) -> Path:
    return write_migrations(tmp_path / "migrations", MIGRATION_1)


def cli(*args: str) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (args, result.output, result.exception)
    return json.loads(result.stdout)


# --------------------------------------------------------------------------- SIGKILL at every step


# stage -> (committed by the kill?, files of the killed run left in the data area)
STAGES = {
    "after_intent": (False, 0),
    "mid_write": (False, 2),
    "mid_shard": (False, 2),  # the 1st job's shard published, the 2nd's temp file part-written
    "before_commit": (False, BASE_SHARDS),
    "in_commit": (False, BASE_SHARDS),
    "after_commit": (True, 0),
}
RERUN_BY_CLI = {"mid_write", "after_commit"}


@pytest.mark.parametrize("stage", list(STAGES))
def test_sigkilled_migration_is_all_or_nothing_and_reruns(stage: str, root: Path, mdir: Path, tmp_path: Path) -> None:
    committed, n_left = STAGES[stage]
    with Catalog.open(root) as cat:
        hist0 = assert_consistent(cat)
        before = data_files(cat)
        assert before == registered(cat) and len(before) == BASE_SHARDS
        old = list(cat.dataset(NAME).read())
    assert old == [old_row(i) for i in BASE_IDS]
    new = [migrated(r) for r in old]
    v0 = hist0[-1].version

    child = Child(root, tmp_path / "marks", op="migrate", migrations=str(mdir), kill=stage)
    seen: dict[str, Any] = {}
    try:
        info = child.wait_at(stage)
        # While the child sits at its step: a fresh reader sees the old data, or all of the new.
        with Catalog.open(root) as cat:
            seen["state"] = what_readers_see(cat, old, new)
            seen["files"] = data_files(cat)
    finally:
        child.kill()
    assert child.proc.returncode == -signal.SIGKILL
    with Catalog.open(root) as cat, mf.write_txn(cat.engine) as conn:
        # As a writer on another machine: only its heartbeat tells gc it died (a writer of
        # this machine is known dead at once: test_interrupts covers that).
        conn.execute(update(INTENTS).values(process=None))
    assert seen["state"] == ("new" if committed else "old")

    with Catalog.open(root) as cat:
        hist = assert_consistent(cat)
        assert data_files(cat) == seen["files"]  # the kill changed no file
        assert what_readers_see(cat, old, new) == seen["state"]
        leftovers = data_files(cat) - registered(cat)
        live = intents(cat)
        statuses = cat.dataset(NAME).migrations(mdir)
        if committed:
            assert [c.version for c in hist] == [*range(1, v0 + 2)] and hist[-1].kind == "migrate"
            assert hist[-1].version == info["version"] and hist[-1].schema_version == 2
            assert registered(cat) - before == set(info["files"]) and len(info["files"]) == BASE_SHARDS
            assert {s.path for s in shard_rows(cat) if s.removed_version == info["version"]} == before
            assert leftovers == set() and live == []
            assert [(s.id, s.status) for s in statuses] == [(MIGRATION_1[0], "applied")]
            assert list(cat.dataset(NAME).read(version=v0)) == old  # the old version stays readable
        else:
            assert hist == hist0
            assert registered(cat) == before
            assert len(live) == 1 and live[0].pid == child.proc.pid and live[0].dataset == NAME
            assert all(intent_of(Path(f).name) == live[0].id for f in leftovers), leftovers
            assert len(leftovers) == n_left, leftovers
            if stage == "after_intent":
                assert info["intent"] == live[0].id
            if stage == "mid_write":
                assert info["file"] in leftovers
            if stage == "mid_shard":
                temp = Path(info["temp"])
                assert temp.name.startswith(".") and temp.stat().st_size > 0
                assert f"{NAME}/{temp.name}" in leftovers
            if stage in ("before_commit", "in_commit"):
                assert not any(Path(f).name.startswith(".") for f in leftovers)  # all published
            if stage == "before_commit":
                assert leftovers == set(info["files"])
            assert [(s.id, s.status) for s in statuses] == [(MIGRATION_1[0], "pending")]
        assert applied_count(cat) == (1 if committed else 0)
        report = cat.verify()
        assert report.ok and report.problems == [], report.to_json()  # a live intent's files are no leftovers
        gc = cat.gc(grace=timedelta(0))  # the killed intent still looks live: its files stay
        assert gc.removed == [] and gc.kept_live == len(leftovers)

    # Run the migration again, through the CLI or the library.
    if stage in RERUN_BY_CLI:
        doc = cli("-C", str(root), "migrate", NAME, "--migrations", str(mdir), "--workers", "1", "--json")
    else:
        with Catalog.open(root) as cat:
            doc = cat.dataset(NAME).migrate(mdir, workers=1).to_json()
    final_version = v0 + 1
    assert doc["version"] == final_version and doc["schema_version"] == 2
    if committed:
        assert doc["migrations"] == []  # nothing pending: a rerun is a no-op
    else:
        assert [(m["id"], m["version"], m["records"], m["shards"]) for m in doc["migrations"]] == [
            (MIGRATION_1[0], final_version, len(old), BASE_SHARDS)
        ]

    with Catalog.open(root) as cat:
        hist = assert_consistent(cat)
        ds = cat.dataset(NAME)
        assert [c.kind for c in hist] == [c.kind for c in hist0] + ["migrate"]
        assert ds.schema_version == 2
        got = list(ds.read())
        assert len(got) == len(new)
        for i, (g, want) in enumerate(zip(got, new, strict=True)):
            assert g == want, f"record {i}"
        assert list(ds.read(version=v0)) == old
        assert {s.schema_version for s in ds.shards()} == {2}
        statuses = ds.migrations(mdir)
        assert [(s.id, s.status, s.version, s.rows) for s in statuses] == [
            (MIGRATION_1[0], "applied", final_version, len(old))
        ]
        assert applied_count(cat) == 1
        # The killed run's files are still there, under its intent, until that intent is dead.
        assert data_files(cat) - registered(cat) == leftovers
        assert len(intents(cat)) == (0 if committed else 1)
        backdate_intents(cat)  # ten minutes pass without a heartbeat
        report = cat.verify()
        assert report.ok
        assert {p.problem for p in report.problems} <= {"unregistered"}
        assert rel(cat, [p.path for p in report.problems]) == leftovers
        gc = cat.gc(grace=timedelta(0))
        assert rel(cat, gc.removed) == leftovers and gc.retired == []
        assert data_files(cat) == registered(cat) and intents(cat) == []
        assert cat.verify().problems == []
        assert list(ds.read()) == new and list(ds.read(version=v0)) == old
        assert_consistent(cat)


def test_sigkill_inside_the_migration_commit_releases_the_write_lock(root: Path, mdir: Path, tmp_path: Path) -> None:
    """Killed holding the write lock mid-commit: the lock dies with it; an append commits at once."""
    child = Child(root, tmp_path / "marks", op="migrate", migrations=str(mdir), kill="in_commit")
    locked: dict[str, bool] = {}
    try:
        child.wait_at("in_commit")
        with Catalog.open(root) as cat:
            locked["held"] = commit_lock_held(cat, NAME)
    finally:
        child.kill()
    assert locked["held"] is True  # the child really was inside its write transaction
    with Catalog.open(root) as cat:
        start = time.monotonic()
        commit = load(cat.dataset(NAME), [900, 901])
        assert time.monotonic() - start < 5
        assert commit.schema_version == 1  # the migration never happened
        assert_consistent(cat)


def test_sigkill_between_two_migrations_applies_each_exactly_once(root: Path, tmp_path: Path) -> None:
    """Killed after the 1st of two migrations committed (the 2nd has its intent): a rerun applies the 2nd only."""
    mdir = write_migrations(tmp_path / "migrations", MIGRATION_1, MIGRATION_2)
    with Catalog.open(root) as cat:
        v0 = cat.dataset(NAME).version
        old = list(cat.dataset(NAME).read())
    new1 = [migrated(r) for r in old]
    new2 = [{k: v for k, v in r.items() if k != "score"} for r in new1]
    child = Child(root, tmp_path / "marks", op="migrate", migrations=str(mdir), kill="after_intent", intent=1)
    try:
        info = child.wait_at("after_intent")
    finally:
        child.kill()
    with Catalog.open(root) as cat:
        hist = assert_consistent(cat)
        assert [c.kind for c in hist[v0:]] == ["migrate"]
        ds = cat.dataset(NAME)
        assert ds.schema_version == 2 and list(ds.read()) == new1
        assert [(s.id, s.status) for s in ds.migrations(mdir)] == [
            (MIGRATION_1[0], "applied"),
            (MIGRATION_2[0], "pending"),
        ]
        assert [i.id for i in intents(cat)] == [info["intent"]]
        assert data_files(cat) == registered(cat)  # the 2nd migration wrote nothing yet

    doc = cli("-C", str(root), "migrate", NAME, "--migrations", str(mdir), "--workers", "1", "--json")
    assert [(m["id"], m["version"]) for m in doc["migrations"]] == [(MIGRATION_2[0], v0 + 2)]
    with Catalog.open(root) as cat:
        hist = assert_consistent(cat)
        assert [(c.kind, c.schema_version) for c in hist[v0:]] == [("migrate", 2), ("migrate", 3)]
        ds = cat.dataset(NAME)
        assert list(ds.read()) == new2
        assert list(ds.read(version=v0 + 1)) == new1 and list(ds.read(version=v0)) == old
        assert [(s.id, s.status, s.version) for s in ds.migrations(mdir)] == [
            (MIGRATION_1[0], "applied", v0 + 1),
            (MIGRATION_2[0], "applied", v0 + 2),
        ]
        assert applied_count(cat) == 2
        backdate_intents(cat)
        gc = cat.gc(grace=timedelta(0))
        assert gc.removed == [] and intents(cat) == []
        assert cat.verify().problems == []


@pytest.mark.parametrize("stage", ["mid_write", "before_commit", "in_commit", "after_commit"])
def test_sigkilled_compaction_is_all_or_nothing(stage: str, root: Path, tmp_path: Path) -> None:
    committed = stage == "after_commit"
    with Catalog.open(root) as cat:
        v0 = cat.dataset(NAME).version
        old = list(cat.dataset(NAME).read())
        before = data_files(cat)
        # two shards' worth: three groups of two, so "mid_write" holds after the 2nd group
        target = 2 * max(s.bytes for s in cat.dataset(NAME).shards())
    child = Child(root, tmp_path / "marks", op="compact", target=target, kill=stage)
    try:
        child.wait_at(stage)
        with Catalog.open(root) as cat:
            assert list(cat.dataset(NAME).read()) == old
    finally:
        child.kill()
    with Catalog.open(root) as cat:
        hist = assert_consistent(cat)
        assert list(cat.dataset(NAME).read()) == old
        assert len(hist) == v0 + (1 if committed else 0)
        leftovers = data_files(cat) - registered(cat)
        assert len(leftovers) == {"mid_write": 2, "before_commit": 3, "in_commit": 3, "after_commit": 0}[stage]
        assert len(intents(cat)) == (0 if committed else 1)
        report = cat.dataset(NAME).compact(target, workers=1)
        assert (report.commit is None) == committed
        hist = assert_consistent(cat)
        assert [c.kind for c in hist[v0:]] == ["compact"]
        assert len(cat.dataset(NAME).shards()) == BASE_SHARDS // 2
        assert list(cat.dataset(NAME).read()) == old and list(cat.dataset(NAME).read(version=v0)) == old
        backdate_intents(cat)
        gc = cat.gc(grace=timedelta(0))
        assert rel(cat, gc.removed) == leftovers
        assert data_files(cat) == registered(cat) and intents(cat) == []
        assert {s.path for s in shard_rows(cat) if s.removed_version is not None} == before
        assert cat.verify().problems == []


# --------------------------------------------------------------------------- appends racing rewrites


def test_appends_racing_a_migration_are_all_migrated(root: Path, mdir: Path, tmp_path: Path) -> None:
    """Appends in the old schema commit before the 1st shard job, mid-way, after every job (before
    the commit) and before the catch-up round's commit: the migration migrates them all."""
    loads = {
        "job-0": list(range(100, 115)),
        "job-3": list(range(200, 207)),
        "commit-0": list(range(300, 321)),
        "commit-1": list(range(400, 403)),
    }
    with Catalog.open(root) as cat:
        handle = cat.dataset(NAME)  # opened before the migration: pins schema version 1
        v0 = handle.version
        child = Child(
            root, tmp_path / "marks", op="migrate", migrations=str(mdir), gates={"job": [0, 3], "commit": [0, 1]}
        )
        try:
            for tag, ids in loads.items():
                child.wait_at(tag)
                commit = load(handle, ids, shard_records=8)
                assert commit.schema_version == 1
                child.go(tag)
            report = child.finish()
        finally:
            child.kill()

        all_ids = BASE_IDS + [i for ids in loads.values() for i in ids]
        appended = len(all_ids) - len(BASE_IDS)
        [m] = report["migrations"]
        final = v0 + len(loads) + 1
        assert (m["id"], m["version"], m["records"]) == (MIGRATION_1[0], final, len(all_ids))
        assert report["version"] == final and report["schema_version"] == 2

        hist = assert_consistent(cat)
        assert [c.kind for c in hist[v0:]] == ["append"] * len(loads) + ["migrate"]
        ds = cat.dataset(NAME)
        assert ds.schema_version == 2
        got = list(ds.read())
        want = [migrated(old_row(i)) for i in all_ids]
        assert len(got) == len(want), (len(got), len(want))
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g == w, f"record {i}"
        assert {s.schema_version for s in ds.shards()} == {2}
        assert sum(s.records for s in ds.shards()) == len(BASE_IDS) + appended
        [status] = ds.migrations(mdir)
        assert (status.status, status.rows, status.version) == ("applied", len(all_ids), final)
        assert data_files(cat) == registered(cat) and intents(cat) == []
        assert cat.verify().problems == []
        # Each version before the migration still reads in the old schema.
        assert [r["id"] for r in ds.read(version=final - 1)] == all_ids
        assert all("text" in r for r in ds.read(version=final - 1))

        # The old handle's next append is validated against the schema now (issue 30: bad rows,
        # no conflict): its rows in the old schema are refused, naming both versions; nothing lands.
        files = data_files(cat)
        with pytest.raises(ValidationError) as err:
            load(handle, [999])
        msg = str(err.value)
        assert "schema version 1" in msg and "schema version 2" in msg, msg
        assert cat.dataset(NAME).version == final
        assert data_files(cat) == files == registered(cat) and intents(cat) == []
        # A fresh handle appends in the new schema.
        commit = cat.dataset(NAME).append_rows([migrated(old_row(999))])
        assert (commit.version, commit.schema_version) == (final + 1, 2)
        assert_consistent(cat)


def test_appends_racing_a_compaction_are_kept_in_order(root: Path, tmp_path: Path) -> None:
    with Catalog.open(root) as cat:
        handle = cat.dataset(NAME)
        v0 = handle.version
        before = data_files(cat)
        loads = {"job-0": list(range(100, 113)), "commit-0": list(range(200, 205))}
        child = Child(root, tmp_path / "marks", op="compact", target=1 << 20, gates={"job": [0], "commit": [0]})
        try:
            for tag, ids in loads.items():
                child.wait_at(tag)
                load(handle, ids, shard_records=5)
                child.go(tag)
            report = child.finish()
        finally:
            child.kill()
        final = v0 + len(loads) + 1
        assert report["version"] == final
        assert (report["groups"], report["shards_before"], report["shards_after"]) == (1, BASE_SHARDS, 1)

        hist = assert_consistent(cat)
        assert [c.kind for c in hist[v0:]] == ["append"] * len(loads) + ["compact"]
        all_ids = BASE_IDS + [i for ids in loads.values() for i in ids]
        assert list(cat.dataset(NAME).read()) == [old_row(i) for i in all_ids]
        shards = cat.dataset(NAME).shards()
        assert shards[0].records == len(BASE_IDS) and shards[0].added_version == final
        assert [s.added_version for s in shards[1:]] == sorted(s.added_version for s in shards[1:])
        assert len(shards) == 1 + sum(-(-len(ids) // 5) for ids in loads.values())
        retired = {s.path for s in shard_rows(cat) if s.removed_version == final}
        assert retired == before  # exactly the base shards were merged
        assert list(cat.dataset(NAME).read(version=final - 1)) == [old_row(i) for i in all_ids]
        assert data_files(cat) == registered(cat) and intents(cat) == []
        assert cat.verify().problems == []
        # A compaction changes no schema: the handle opened before it still appends.
        assert load(handle, [999]).version == final + 1
        assert list(cat.dataset(NAME).read())[-1] == old_row(999)


def test_a_reader_racing_a_migration_commit_sees_old_or_new(
    root: Path, mdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that starts before a migration commits and opens files after: one snapshot, not a mix."""
    with Catalog.open(root) as cat:
        old = list(cat.dataset(NAME).read())
    new = [migrated(r) for r in old]
    real_open = reader_files.open_checked  # where read() opens each shard of its read plan
    fired: list[int] = []

    def open_after_a_migration(shard: Any) -> Any:
        if not fired:
            fired.append(1)
            with Catalog.open(root) as other:  # another client's migration commits right now
                other.dataset(NAME).migrate(mdir, workers=1)
        return real_open(shard)

    with Catalog.open(root) as cat:
        reader = cat.dataset(NAME)
        monkeypatch.setattr(reader_files, "open_checked", open_after_a_migration)
        try:
            got: Any = list(reader.read())
        except CatalogError as e:
            got = f"{type(e).__name__}: {e}"
        monkeypatch.setattr(reader_files, "open_checked", real_open)
        assert fired and cat.dataset(NAME).schema_version == 2
        assert got in (old, new), got


# --------------------------------------------------------------------------- gc of retired shards


def build_history(root: Path, mdir: Path) -> None:
    """On the base data (v1..v4): migrate (v5), append (v6), migrate (v7), append (v8),
    compact (v9), restore to v6 (v10), append (v11)."""
    with Catalog.open(root) as cat:
        assert cat.dataset(NAME).migrate(mdir, to=1, workers=1).version == 5
        cat.dataset(NAME).append_rows([migrated(old_row(i)) for i in range(100, 112)], shard_records=5)
        assert cat.dataset(NAME).migrate(mdir, workers=1).version == 7
        cat.dataset(NAME).append_rows([{"id": i, "caption": f"c{i}", "double": -i} for i in range(200, 207)])
        assert cat.dataset(NAME).compact(workers=1).commit is not None
        assert cat.dataset(NAME).restore(6).version == 10
        cat.dataset(NAME).append_rows([migrated(old_row(i)) for i in range(300, 304)], shard_records=3)
        hist = assert_consistent(cat)
        assert [c.kind for c in hist] == ["create"] + ["append"] * 3 + [
            "migrate", "append", "migrate", "append", "compact", "restore", "append",
        ]  # fmt: skip


def snapshot_versions(cat: Catalog) -> tuple[dict[int, list[dict[str, Any]]], dict[int, set[str]]]:
    """Every version's rows and shard paths (relative to the data area)."""
    ds = cat.dataset(NAME)
    n = ds.version
    reads = {v: list(ds.read(version=v)) for v in range(1, n + 1)}
    shards = {v: {s.relpath for s in ds.shards(version=v)} for v in range(1, n + 1)}
    return reads, shards


def assert_versions_after_gc(
    cat: Catalog, reads: dict[int, list[dict[str, Any]]], shards: dict[int, set[str]], removed: set[str], keep: int
) -> None:
    ds = cat.dataset(NAME)
    n = len(reads)
    for v in range(1, n + 1):
        if v > n - keep or not shards[v] & removed:
            assert list(ds.read(version=v)) == reads[v], f"version {v}"
            continue
        with pytest.raises(VersionNotFoundError) as err:
            list(ds.read(version=v))
        assert f"version {v} " in str(err.value), str(err.value)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A catalog with build_history() applied, built once; tests take copies (see history_root)."""
    base = tmp_path_factory.mktemp("history")
    r = make_catalog(base / "cat")
    build_history(r, write_migrations(base / "migrations", MIGRATION_1, MIGRATION_2))
    return r


@pytest.fixture
def history_root(history: Path, tmp_path: Path) -> Path:
    """A fresh copy of the history catalog (manifest and data area; every connection to it is closed)."""
    return Path(shutil.copytree(history, tmp_path / "cat"))


@pytest.mark.parametrize("keep", range(1, 12))
def test_gc_keep_versions_never_takes_what_a_kept_version_needs(keep: int, history_root: Path) -> None:
    with Catalog.open(history_root) as cat:
        reads, shards = snapshot_versions(cat)
        n = len(reads)
        assert n == 11
        live = shards[n]
        retired = {s.path for s in shard_rows(cat) if s.removed_version is not None}
        assert retired and not retired & live
        assert data_files(cat) == registered(cat) == retired | live

        gc = cat.gc(keep_versions=keep, grace=timedelta(0))
        removed = rel(cat, gc.removed)
        needed = set().union(*(shards[v] for v in range(n - keep + 1, n + 1)))
        assert not removed & needed, f"gc removed shards versions {n - keep + 1}..{n} need: {removed & needed}"
        assert removed == retired - needed  # and everything no kept version needs
        assert rel(cat, gc.retired) == removed and gc.kept_retired == len(retired & needed)
        assert all(cat.shard_path(p).is_file() for p in needed)
        assert data_files(cat) == (retired | live) - removed
        assert_versions_after_gc(cat, reads, shards, removed, keep)
        report = cat.verify()
        assert report.ok and report.problems == [], report.to_json()
        assert report.checked == len((retired | live) - removed)
        assert list(cat.dataset(NAME).read()) == reads[n]
        # Again with the same K: nothing more to take. With K - 1: takes more, never a kept version's.
        assert cat.gc(keep_versions=keep, grace=timedelta(0)).removed == []
        if keep > 1:
            again = rel(cat, cat.gc(keep_versions=keep - 1, grace=timedelta(0)).removed)
            assert not again & set().union(*(shards[v] for v in range(n - keep + 2, n + 1)))
            assert_versions_after_gc(cat, reads, shards, removed | again, keep - 1)
        assert_consistent(cat)


def test_gc_older_than_keeps_recently_retired_shards(history_root: Path) -> None:
    root = history_root
    with Catalog.open(root) as cat:
        reads, shards = snapshot_versions(cat)
        n = len(reads)
        rows = shard_rows(cat)
        retired = {s.path for s in rows if s.removed_version is not None}
    gc_cmd = ("-C", str(root), "gc", "--grace", "0", "--json")

    # Everything was retired seconds ago: --older-than 1h takes nothing.
    doc = cli(*gc_cmd, "--older-than", "1h")
    assert doc["removed"] == [] and doc["retired_removed"] == [] and doc["kept_retired"] == len(retired)

    # The first migration's commit (v5) was two hours ago: exactly the shards it retired go.
    with Catalog.open(root) as cat:
        with mf.write_txn(cat.engine) as conn:
            conn.execute(update(COMMITS).where(COMMITS.c.version == 5).values(created_at=utcnow() - timedelta(hours=2)))
        by_v5 = {s.path for s in rows if s.removed_version == 5}
        assert by_v5 and by_v5 < retired
        doc = cli(*gc_cmd, "--older-than", "1h")
        assert rel(cat, doc["removed"]) == rel(cat, doc["retired_removed"]) == by_v5
        assert doc["kept_retired"] == len(retired - by_v5)
        assert_versions_after_gc(cat, reads, shards, by_v5, 1)
        assert list(cat.dataset(NAME).read(version=5)) == reads[5]  # v5 itself does not need them

        # --older-than 0: every retired shard goes; the current version and the live shards stay.
        doc = cli(*gc_cmd, "--older-than", "0")
        assert rel(cat, doc["removed"]) == retired - by_v5
        assert data_files(cat) == shards[n] == registered(cat)
        assert_versions_after_gc(cat, reads, shards, retired, 1)
        assert cat.verify().problems == []
        assert list(cat.dataset(NAME).read()) == reads[n]
        assert_consistent(cat)


def test_gc_after_restore_keeps_the_restored_shards(root: Path, mdir: Path) -> None:
    """A restore brings retired shards back under new names (hard links): collecting the old
    names, even with --keep-versions 1, must leave the restored data whole."""
    with Catalog.open(root) as cat:
        ds = cat.dataset(NAME)
        v0 = ds.version
        old = list(ds.read())
        ds.migrate(mdir, workers=1)
        migrated_version = v0 + 1
        restored = cat.dataset(NAME).restore(v0)
        assert restored.schema_version == 3 and restored.total_records == len(old)
        ds = cat.dataset(NAME)
        assert list(ds.read()) == old
        assert [(s.id, s.status) for s in ds.migrations(mdir)] == [(MIGRATION_1[0], "pending")]
        gc = cat.gc(keep_versions=1, grace=timedelta(0))
        assert len(gc.retired) == 2 * BASE_SHARDS  # the originals and the migrated shards
        assert list(ds.read()) == old
        assert cat.verify().problems == []
        assert_consistent(cat)
        # The migration can be applied again after the restore, on the restored shards.
        report = cat.dataset(NAME).migrate(mdir, workers=1)
        assert [m.id for m in report.migrations] == [MIGRATION_1[0]]
        assert list(cat.dataset(NAME).read()) == [migrated(r) for r in old]
        assert [(s.id, s.status, s.version) for s in cat.dataset(NAME).migrations(mdir)] == [
            (MIGRATION_1[0], "applied", report.version)
        ]
        assert report.version == restored.version + 1 != migrated_version
        assert applied_count(cat) == 2  # the reverted application stays in the table, marked reverted
        assert_consistent(cat)
