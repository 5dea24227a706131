"""The process pool's workers (catalog/executors.py) and Ctrl-C: a worker ends at once on a
SIGINT, without a traceback of its own, unless its process was started ignoring SIGINT (nohup,
a background job): then it ignores it too, as its parent does, instead of dying under it."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHILD = r"""
import os, signal, sys
from concurrent.futures.process import BrokenProcessPool

from catalog.executors import make_executor

# Set either way: this process would inherit a disposition the suite was started with.
signal.signal(signal.SIGINT, signal.SIG_IGN if sys.argv[1] == "ignored" else signal.default_int_handler)


def job(i):
    os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C reaching the worker as it works
    return i


pool = make_executor(2, 2)
try:
    print(sorted(pool.map(job, range(4))))
except BrokenProcessPool:
    print("broken")
finally:
    pool.shutdown()
"""


@pytest.mark.parametrize(("disposition", "said"), [("ignored", "[0, 1, 2, 3]"), ("default", "broken")])
def test_pool_workers_keep_the_sigint_disposition_they_were_started_with(disposition: str, said: str) -> None:
    res = subprocess.run([sys.executable, "-c", CHILD, disposition], capture_output=True, text=True, timeout=120)
    assert (res.returncode, res.stdout.strip()) == (0, said), res.stderr[-2000:]


def test_a_pool_broken_by_ctrl_c_prints_no_thread_traceback(monkeypatch) -> None:
    """Python < 3.12's pool manager thread dies of InvalidStateError when a Ctrl-C breaks the
    pool after run_jobs cancelled futures: quieted; any other thread's exception still shown."""
    import threading
    from concurrent.futures import InvalidStateError

    from catalog import executors

    seen: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append(args.exc_value))
    executors._quiet_broken_pool_race()
    executors._quiet_broken_pool_race()  # installed once

    manager = type("_ExecutorManagerThread", (threading.Thread,), {"__module__": "concurrent.futures.process"})()
    other = threading.Thread()
    race, unrelated = InvalidStateError("CANCELLED: <Future>"), ValueError("a bug elsewhere")
    for exc, thread in ((race, manager), (unrelated, manager), (race, other)):
        threading.excepthook(threading.ExceptHookArgs((type(exc), exc, None, thread)))
    assert seen == [unrelated, race]


UNLOADED = r"""
import sys

from catalog.executors import make_executor, run_jobs


def job(_i):
    before = "catalog.stats.helper" in sys.modules
    from catalog.stats import helper

    return before, helper.SLOT.enabled


pool = make_executor(2, 2)
with pool:
    print(run_jobs(job, [0, 1], pool, None), "catalog.stats.helper" in sys.modules)
"""


def test_pool_workers_tally_alone_without_loading_the_statistics_helper() -> None:
    """A worker turns the statistics helper off without importing it (NumPy: verify's jobs never
    tally, and its start-up counts in its GB/s); one that loads it later finds it off. (Forked
    from a process that loaded it: tests/stats/test_stats_helper.py.)"""
    res = subprocess.run([sys.executable, "-c", UNLOADED], capture_output=True, text=True, timeout=120)
    assert (res.returncode, res.stdout.strip()) == (0, "[(False, False), (False, False)] False"), res.stderr[-2000:]


FORKED = r"""
import os, signal, sys
from catalog import Catalog
from catalog.errors import Interrupted

signal.signal(signal.SIGINT, signal.default_int_handler)
ds = Catalog.open(sys.argv[1]).dataset("d")
# Ctrl-C landing while the pool forks its workers: in the fork's own hooks, where CPython prints
# "Exception ignored" for a KeyboardInterrupt and goes on.
os.register_at_fork(after_in_parent=lambda: os.kill(os.getpid(), signal.SIGINT))
try:
    ds.delete("id >= 0", workers=2)
    print("committed")
except (Interrupted, KeyboardInterrupt) as e:
    print("interrupted", type(e).__name__)
"""


def test_a_ctrl_c_while_the_workers_are_forked_is_not_lost(tmp_path) -> None:
    from catalog import Catalog

    ds = Catalog.init(tmp_path / "cat").register("d", {"features": {"id": {"dtype": "int64"}}})
    for start in (0, 5):
        ds.append_rows([{"id": i} for i in range(start, start + 5)])
    res = subprocess.run(
        [sys.executable, "-c", FORKED, str(tmp_path / "cat")], capture_output=True, text=True, timeout=120
    )
    assert res.stdout.startswith("interrupted"), (res.stdout, res.stderr[-2000:])
    assert "Exception ignored" not in res.stderr, res.stderr[-2000:]
    assert Catalog.open(tmp_path / "cat").dataset("d").info().version == 3  # nothing registered
