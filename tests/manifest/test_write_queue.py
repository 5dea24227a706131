"""SQLite's writers' queue (catalog/manifest/write_queue.py, _write_queue): writers take the write lock
in the order they asked for it, a writer killed holding or awaiting its turn blocks nobody,
and a commit's fsync comes after the write lock is let go. Not timed: the figures are
benchmarks/bench_load.py's."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from probes import interruptible
from sqlalchemy import Engine, insert, select

from catalog import Catalog
from catalog import manifest as mf
from catalog.manifest.write_queue import QUEUE_SUFFIX, _queue_fds, _queue_turn, _write_queue

pytestmark = pytest.mark.skipif(not mf.WRITE_QUEUE, reason="the writers' queue needs Linux OFD locks")

ROOT = Path(__file__).resolve().parents[2]
WAIT = 30.0  # far below the 60 s busy timeout a writer without a queue turn would fall back on

# A writer in a process of its own: inserts its key in a write transaction, says "holding"
# once it is in it, and lets go when told (a line on stdin), or when killed.
HOLDER = r"""
import sys
from sqlalchemy import insert
from catalog import manifest as mf

engine = mf.make_engine(sys.argv[1])
with mf.write_txn(engine) as conn:
    conn.execute(insert(mf.META).values(key=sys.argv[2], value=""))
    print("holding", flush=True)
    sys.stdin.readline()
print("done", flush=True)
"""


def manifest(tmp_path: Path) -> tuple[Engine, str]:
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    engine = mf.make_engine(url)
    mf.create_manifest(engine, str(tmp_path))
    return engine, url


def tickets(tmp_path: Path) -> int:
    """How many turns have been asked for: the queue's ticket counter."""
    raw = (tmp_path / ("catalog.db" + mf.QUEUE_SUFFIX)).read_bytes()[:8]
    return int.from_bytes(raw, "little")


def wait_for(what: str, condition: Any) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def holder(url: str, key: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", interruptible(HOLDER), url, key],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def write_within(engine: Engine, key: str, seconds: float = WAIT) -> None:
    """A write transaction that must finish within ``seconds`` (in a thread, so a hang fails)."""
    errors: list[BaseException] = []

    def write() -> None:
        try:
            with mf.write_txn(engine) as conn:
                conn.execute(insert(mf.META).values(key=key, value=""))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"write {key!r} still waiting after {seconds} s"
    assert not errors, errors


def keys(engine: Engine) -> set[str]:
    with mf.read_txn(engine) as conn:
        return set(conn.execute(select(mf.META.c.key)).scalars())


def test_a_waiting_writer_goes_before_the_holder_writes_again(tmp_path: Path) -> None:
    # SQLite's busy handler alone lets the holder, committing and starting again at once,
    # take the lock back while the waiter sleeps: the waiter went last (seen on the code
    # before the queue: order a1, a2, b).
    engine, _ = manifest(tmp_path)
    order: list[str] = []
    holding = threading.Event()

    def waiter() -> None:
        holding.wait()
        with mf.write_txn(engine) as conn:
            order.append("b")  # inside: the order the lock was taken in
            conn.execute(insert(mf.META).values(key="b", value=""))

    t = threading.Thread(target=waiter)
    t.start()
    with mf.write_txn(engine) as conn:
        order.append("a1")
        conn.execute(insert(mf.META).values(key="a1", value=""))
        holding.set()
        time.sleep(0.5)  # the waiter is waiting by now
    with mf.write_txn(engine) as conn:
        order.append("a2")
        conn.execute(insert(mf.META).values(key="a2", value=""))
    t.join(WAIT)
    assert order == ["a1", "b", "a2"]
    assert {"a1", "a2", "b"} <= keys(engine)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_writer_killed_holding_its_turn_blocks_nobody(tmp_path: Path, sig: int) -> None:
    engine, url = manifest(tmp_path)
    p = holder(url, "killed")
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "holding"
        p.send_signal(sig)
        p.wait(WAIT)
        write_within(engine, "after")
    finally:
        p.kill()
        p.wait()
    assert "after" in keys(engine) and "killed" not in keys(engine)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_a_writer_killed_awaiting_its_turn_blocks_nobody(tmp_path: Path, sig: int) -> None:
    # The one killed (or Ctrl-C'd) in line drops out; the one behind it still gets a turn.
    engine, url = manifest(tmp_path)
    first = holder(url, "first")
    waiting = None
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "holding"
        before = tickets(tmp_path)
        waiting = holder(url, "killed")
        wait_for("the second writer to queue", lambda: tickets(tmp_path) == before + 1)
        waiting.send_signal(sig)
        waiting.wait(WAIT)
        assert first.stdin is not None
        first.stdin.write("\n")
        first.stdin.flush()
        assert first.stdout.readline().strip() == "done"
        write_within(engine, "after")
    finally:
        for p in (first, waiting):
            if p is not None:
                p.kill()
                p.wait()
    assert {"first", "after"} <= keys(engine) and "killed" not in keys(engine)


FORKER = r"""
import os, sys, time
from sqlalchemy import insert
from catalog import manifest as mf

engine = mf.make_engine(sys.argv[1])
with mf.write_txn(engine) as conn:
    conn.execute(insert(mf.META).values(key="parent", value=""))
    child = os.fork()  # as a process pool started inside a transaction would
    if child == 0:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)  # the test reads our parent's output to its end
        os.dup2(null, 2)
        time.sleep(60)
        os._exit(0)
print(child, flush=True)
"""


def test_a_child_forked_in_a_transaction_does_not_hold_the_turn(tmp_path: Path) -> None:
    engine, url = manifest(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", FORKER, url], capture_output=True, text=True, env=env, check=True)
    child = int(out.stdout)
    try:
        write_within(engine, "after")
    finally:
        os.kill(child, signal.SIGKILL)
    assert {"parent", "after"} <= keys(engine)


def test_the_commit_is_synced_after_the_write_lock_is_let_go(tmp_path: Path, monkeypatch: Any) -> None:
    from catalog.manifest import transactions as mf  # where write_txn finds _sync_wal

    engine, _ = manifest(tmp_path)
    db = tmp_path / "catalog.db"
    synced: list[tuple[str, bool, bool]] = []
    real_sync = mf._sync_wal

    def sync(path: str) -> None:
        other = sqlite3.connect(db, timeout=0)  # the write lock free? and our rows visible?
        try:
            other.execute("BEGIN IMMEDIATE")
            seen = other.execute("SELECT count(*) FROM catalog_meta WHERE key = 'k'").fetchone()[0] == 1
            other.rollback()
            synced.append((path, True, seen))
        except sqlite3.OperationalError:
            synced.append((path, False, False))
        finally:
            other.close()
        real_sync(path)

    monkeypatch.setattr(mf, "_sync_wal", sync)
    with mf.write_txn(engine, durable=False) as conn:  # an intent's kind of row: not synced
        conn.execute(insert(mf.META).values(key="not-synced", value=""))
    assert synced == []
    with mf.write_txn(engine) as conn:
        conn.execute(insert(mf.META).values(key="k", value=""))
    assert synced == [(str(db) + "-wal", True, True)]
    with pytest.raises(ZeroDivisionError), mf.write_txn(engine) as conn:  # rolled back: nothing to sync
        conn.execute(insert(mf.META).values(key="rolled-back", value=""))
        raise ZeroDivisionError
    assert len(synced) == 1 and "rolled-back" not in keys(engine)


APPENDER = r"""
import json, sys
from catalog import Catalog

root, wid, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with Catalog.open(root) as cat:
    ds = cat.dataset("d")
    versions = [ds.append_rows([{"id": wid * 1000 + i}], token=f"w{wid}-{i}").version for i in range(n)]
print(json.dumps(versions))
"""


def test_concurrent_appenders_queue_and_all_commit(tmp_path: Path) -> None:
    procs, commits = 4, 15
    root = tmp_path / "c"
    with Catalog.init(root) as cat:
        cat.register("d", {"features": {"id": {"dtype": "int64"}}})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CATALOG_DB_URL", None)
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(root), str(w), str(commits)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for w in range(procs)
    ]
    got = [json.loads(p.communicate(timeout=300)[0]) for p in workers]
    assert all(p.returncode == 0 for p in workers)
    assert sorted(v for vs in got for v in vs) == list(range(2, procs * commits + 2))
    assert tickets(root) >= 2 * procs * commits  # every append took its turns (intent, commit)
    with Catalog.open(root) as cat:
        ds = cat.dataset("d")
        hist = ds.history()
        assert [c.version for c in hist] == list(range(1, procs * commits + 2))
        assert Counter(c.token for c in hist if c.kind == "append") == {
            f"w{w}-{i}": 1 for w in range(procs) for i in range(commits)
        }
        assert sorted(int(r["id"]) for r in ds.read()) == sorted(
            w * 1000 + i for w in range(procs) for i in range(commits)
        )


# The queue's own functions (catalog.manifest.write_queue), without a second process.


def test_each_turn_takes_one_ticket_and_a_nested_turn_none(tmp_path: Path) -> None:
    engine, _ = manifest(tmp_path)
    start = tickets(tmp_path)
    with _write_queue(engine):
        assert tickets(tmp_path) == start + 1
        with _write_queue(engine):  # this thread is in the queue already: it never waits in it again
            assert tickets(tmp_path) == start + 1
    with _write_queue(engine):
        assert tickets(tmp_path) == start + 2
    assert _queue_fds == set()  # every turn's descriptor closed when it ended


def test_a_database_without_a_file_has_no_queue(tmp_path: Path) -> None:
    engine = mf.make_engine("sqlite://")
    with _write_queue(engine):
        assert _queue_fds == set()
    assert list(tmp_path.iterdir()) == []


def test_a_queue_file_that_cannot_be_opened_means_no_queue(tmp_path: Path) -> None:
    assert _queue_turn(str(tmp_path / "no" / "such" / f"catalog.db{QUEUE_SUFFIX}")) is None
    assert _queue_fds == set()
