"""Ctrl-C at every step of every commit path: nothing registered, or the whole commit kept.

A SIGINT is real here: the child process raises it (``signal.raise_signal``) from a profile
hook right before, or right after, the k-th I/O call (a C function: a database driver's
execute or commit, an fsync, a rename, an unlink...) once the operation's commit path has
begun. Python runs its handler at once, so KeyboardInterrupt surfaces exactly where a
Ctrl-C arriving during that call would. The child sweeps k over every I/O call of the path,
checking after each: verify finds nothing wrong, the records read match the manifest's
totals, no intent is left, the message says what happened, and a rerun completes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from probes import interruptible

from catalog import Catalog

pytestmark = pytest.mark.usefixtures("backend")  # the same suite on SQLite and PostgreSQL

NAME = "events"
SCHEMA = {"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string"}}}
TIMEOUT = 900

SWEEP = r"""
import json, signal, sys
from pathlib import Path

from catalog import Catalog, faults

root, name, op, when = sys.argv[1:5]
# The C functions that do I/O: SQLite's and psycopg's calls, and the file system's.
IO = {
    "execute", "executemany", "commit", "rollback", "fetchone", "fetchall", "fetchmany", "close", "cursor",
    "connect", "send_query", "send_query_params", "send_query_prepared", "send_prepare", "exec_params", "exec_",
    "get_result", "consume_input", "is_busy", "flush", "wait_c", "wait",
    "fsync", "fdatasync", "rename", "replace", "link", "unlink", "remove", "open", "write", "readinto",
    "read", "scandir", "listdir", "stat", "lstat", "mkdir", "rmdir",
}


DIALECT_IO = {"do_execute", "do_executemany", "do_commit", "do_rollback"}
PY_EVENT = {"c_call": "call", "c_return": "return"}


class Inject:
    # SIGINT at the k-th I/O call (before it: "c_call"; after it: "c_return") once armed.
    def __init__(self):
        self.k = self.n = 0
        self.armed = self.fired = False

    def __call__(self, frame, event, arg):
        # psycopg's calls are Python (or Cython) code: SQLAlchemy's dialect hooks mark them.
        python_io = event == PY_EVENT[when] and frame.f_code.co_name in DIALECT_IO
        if self.armed and (python_io or (event == when and getattr(arg, "__name__", None) in IO)):
            self.n += 1
            if self.n == self.k:
                self.fired = True
                signal.raise_signal(signal.SIGINT)


inject = Inject()


def arm(name, info):
    # The commit paths: an append's from the publishing of its shards on; a rewrite's from
    # its commit on (its files are all published by then).
    if name in ("append.closing", "commit.before"):
        inject.armed = True


faults.install(arm)

cat = Catalog.open(root)
scripts = Path(root) / "scripts"


def state():
    ds = cat.dataset(name)
    info = ds.info()
    report = cat.verify()
    with cat.engine.connect() as conn:
        intents = conn.exec_driver_sql("SELECT count(*) FROM write_intents").scalar()
    return {
        "version": info.version,
        "records": info.records,
        "read": sum(1 for _ in ds.records()),
        "problems": [p.to_json() for p in report.problems],
        "intents": intents,
    }


def prepare(k):
    ds = cat.dataset(name)
    if op == "compact":  # something to merge: two small shards
        ds.append_rows([{"id": k, "text": "a"}], token=f"pre-{k}-1")
        ds.append_rows([{"id": k, "text": "b"}], token=f"pre-{k}-2")
    if op == "file":
        (scripts / name).mkdir(parents=True, exist_ok=True)
        (scripts / name / f"{k:04d}_add_g{k}.py").write_text(
            "from catalog.migrate import AddField\n"
            f"operations = [AddField('g{k}', {{'dtype': 'int64'}}, fn=lambda row: len(row['text']))]\n"
        )


def run(k):
    ds = cat.dataset(name)  # a fresh handle: it pins the schema version
    if op == "append":
        ds.append_rows([{"id": 10 * k + i, "text": "x" * i} for i in range(3)], token=f"t{k}", shard_records=2)
    elif op == "quick":
        ds.migrate(add=[f"f{k}:int64={k}"], workers=1)
    elif op == "file":
        ds.migrate(scripts, workers=1)
    elif op == "compact":
        ds.compact(workers=1)
    elif op == "restore":
        ds.restore(2)


out = []
k = 0
while True:
    k += 1
    prepare(k)
    before = state()
    inject.k, inject.n, inject.armed, inject.fired = k, 0, False, False
    caught = None
    sys.setprofile(inject)
    try:
        run(k)
    except KeyboardInterrupt as e:
        caught = e
    finally:
        sys.setprofile(None)
        inject.armed = False
    if not inject.fired:
        break  # k passed the last I/O call of the path: the sweep is complete
    after = state()
    rerun = None
    if caught is None or after["version"] == before["version"] or op == "append":
        run(k)  # the same append (same token), or the rewrite that registered nothing
        rerun = state()
    out.append({
        "k": k, "caught": None if caught is None else [type(caught).__name__, str(caught)],
        "before": before, "after": after, "rerun": rerun,
    })
print(json.dumps({"calls": k - 1, "runs": out}))
"""


def sweep(root: Path, op: str, when: str) -> dict[str, Any]:
    res = subprocess.run(
        [sys.executable, "-c", interruptible(SWEEP), str(root), NAME, op, when],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    doc: dict[str, Any] = json.loads(res.stdout)
    return doc


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "cat"
    with Catalog.init(r) as cat:
        ds = cat.register(NAME, SCHEMA)
        ds.append_rows([{"id": i, "text": f"row {i}"} for i in range(5)], shard_records=2)  # version 2
        ds.append_rows([{"id": 99, "text": "later"}])  # version 3: restore goes back to 2
    return r


def check_run(op: str, run: dict[str, Any]) -> None:
    """One interrupted operation: the state and the message agree, nothing is lost or left."""
    before, after, rerun = run["before"], run["after"], run["rerun"]
    where = f"{op} interrupted at I/O call {run['k']}"
    assert run["caught"] is not None, f"{where}: the SIGINT was swallowed"
    kind, message = run["caught"]
    assert kind == "Interrupted", f"{where}: {kind}: {message}"
    for s in (after, rerun):
        if s is not None:  # no missing or damaged shard, no leftover file, no stale intent
            assert s["problems"] == [] and s["intents"] == 0, f"{where}: {s}"
            assert s["read"] == s["records"], f"{where}: {s}"
    if after["version"] == before["version"]:
        assert message == "interrupted: nothing was registered", where
        assert after["records"] == before["records"], where
        assert rerun is not None and rerun["version"] == before["version"] + 1, where
    else:
        assert after["version"] == before["version"] + 1, where
        assert message == f"interrupted after the commit: version {after['version']} is complete", where
        if op == "append":  # the retry with the same token: already committed, nothing added
            assert rerun is not None and rerun["version"] == after["version"], where
            assert rerun["records"] == after["records"], where
    if op == "append":
        assert rerun is not None and rerun["records"] == before["records"] + 3, where


@pytest.mark.parametrize("when", ["c_call", "c_return"])
@pytest.mark.parametrize("op", ["append", "restore"])
def test_sigint_at_every_io_call_of_the_commit_path(op: str, when: str, root: Path) -> None:
    check_sweep(root, op, when)


# The rewrites' sweeps run on SQLite only: on PostgreSQL each takes minutes (every statement
# of a migration is a point), and the cleanup code under test is the same on both.
@pytest.mark.sqlite_only
@pytest.mark.parametrize("when", ["c_call", "c_return"])
@pytest.mark.parametrize("op", ["quick", "file", "compact"])
def test_sigint_at_every_io_call_of_a_rewrite_commit_path(op: str, when: str, root: Path) -> None:
    check_sweep(root, op, when)


def check_sweep(root: Path, op: str, when: str) -> None:
    found = sweep(root, op, when)
    runs = found["runs"]
    assert found["calls"] >= 10 and len(runs) == found["calls"]  # the hook really saw the path
    for run in runs:
        check_run(op, run)
    # The sweep crossed the commit: some interrupts came before it, some after.
    outcomes = {r["after"]["version"] == r["before"]["version"] for r in runs}
    assert outcomes == {True, False}
    with Catalog.open(root) as cat:
        assert cat.verify().problems == []


# --------------------------------------------------------------------------- the rest of trust


def test_copy_manifest_fences_a_writer_in_flight(root: Path, tmp_path: Path) -> None:
    from catalog.errors import ManifestError

    target = f"sqlite:///{tmp_path / 'copy.db'}"
    with Catalog.open(root) as cat:
        ds = cat.dataset(NAME)
        before = ds.info().version
        with pytest.raises(ManifestError, match=r"moved to .*nothing was registered"), ds.writer() as w:
            w.write({"id": 1000, "text": "in flight"})
            with Catalog.open(root) as other:
                other.copy_manifest(target)  # switches this directory to the copy
        leftovers = [p for p in cat.data_root.rglob("*") if p.is_file() and p.name.endswith((".tfrecord", ".tmp"))]
        assert len(leftovers) == 4  # the base shards only: nothing of the fenced writer
    with Catalog.open(root) as cat:  # the copy
        assert cat.dataset(NAME).info().version == before
        with cat.engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM write_intents").scalar() == 0
        assert cat.verify().problems == []


def test_gc_takes_the_files_of_a_killed_local_writer_at_once(root: Path) -> None:
    from datetime import timedelta

    child = (
        "import os, signal, sys\nfrom catalog import Catalog\n"
        "ds = Catalog.open(sys.argv[1]).dataset(sys.argv[2])\n"
        "w = ds.writer().__enter__()\nw.write({'id': 7, 'text': 'doomed'})\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    res = subprocess.run([sys.executable, "-c", child, str(root), NAME], capture_output=True, timeout=TIMEOUT)
    assert res.returncode == -9, res.stderr
    with Catalog.open(root) as cat:
        temp = [p for p in cat.data_root.rglob("*.tmp")]
        assert len(temp) == 1  # the killed writer's open shard
        report = cat.gc(grace=timedelta(0))
        assert [Path(p).name for p in report.removed] == [temp[0].name]
        with cat.engine.connect() as conn:
            assert conn.exec_driver_sql("SELECT count(*) FROM write_intents").scalar() == 0


def test_a_retried_token_is_answered_after_its_shards_were_collected(root: Path) -> None:
    from datetime import timedelta

    with Catalog.open(root) as cat:
        first = cat.dataset(NAME).append_rows([{"id": 500, "text": "t"}], token="load-7")
        cat.dataset(NAME).compact()
        cat.gc(grace=timedelta(0), keep_versions=1)  # the token's version is no longer readable
        again = cat.dataset(NAME).append_rows([{"id": 500, "text": "t"}], token="load-7")
        assert again.duplicate and again.version == first.version
        assert [s.relpath for s in again.shards] == [s.relpath for s in first.shards]
        assert cat.dataset(NAME).info().records == 7
