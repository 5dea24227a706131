"""Where per-shard jobs run: the local process pool, or a Dask cluster; and the job runner
(`run_jobs`) every operation hands its per-shard jobs to.

``--executor dask`` hands the jobs of migrate, compact, verify and large appends (picklable
descriptions run by module-level functions) to a ``dask.distributed`` cluster through
``Client.get_executor()``. The plan and the final commit stay in the calling process, so a
worker that dies changes nothing visible, and a rerun completes. Dask is an optional extra,
imported only here and only when asked for.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import (
    FIRST_EXCEPTION,
    BrokenExecutor,
    CancelledError,
    Executor,
    Future,
    InvalidStateError,
    ProcessPoolExecutor,
    wait,
)
from typing import Any, Protocol, TypeVar

from catalog.errors import CatalogError, ExecutorError, UsageError, first_line

J = TypeVar("J")
R = TypeVar("R")
WAIT_SLICE = 5.0  # seconds between checks on running jobs (and chances to beat)

EXECUTORS = ("local", "dask")
SCHEDULER_ENV = "CATALOG_DASK_SCHEDULER"
DASK_EXTRA = "the dask executor needs `pip install 'tfrecord-catalog[dask]'`"
CLOSE_TIMEOUT = 10.0  # seconds; closing a client whose scheduler is gone must not hang either


@contextlib.contextmanager
def open_executor(
    kind: str = "local", scheduler: str | None = None, workers: int | None = None, jobs: int | None = None
) -> Iterator[Executor | None]:
    """An executor for per-shard jobs, shut down on exit.

    ``local``: with ``jobs``, a process pool sized for them (None when one worker would do);
    without, None: the library then starts its own pool, sized to the work it finds (today's
    behaviour). ``dask``: an executor on the cluster at ``scheduler`` (else
    ``$CATALOG_DASK_SCHEDULER``), or on a LocalCluster of ``workers`` processes (default: the
    core count) started here and closed on exit.
    """
    check_executor(kind, scheduler)
    if kind == "local":
        if jobs is None:
            yield None
            return
        with executor_for(None, workers, jobs) as ex:
            yield ex
        return
    address = scheduler or os.environ.get(SCHEDULER_ENV) or None
    if address and workers:
        raise UsageError(f"--workers sizes a cluster started here; the one at {address} has its own workers")
    quiet = _Abandoned()
    with _filtered("tornado.application", quiet), _dask_client(address, workers) as client:
        # pure=False: two jobs with equal descriptions must both run (Dask would merge them).
        ex = client.get_executor(pure=False)
        try:
            yield ex
        finally:
            quiet.closing = True
            ex.shutdown(wait=False)  # cancels what a failed run left queued


def check_executor(kind: str, scheduler: str | None) -> None:
    """Refuse an unknown executor, or a scheduler address for the local one."""
    if kind not in EXECUTORS:
        raise UsageError(f"unknown executor {kind!r}: use local or dask")
    if kind == "local" and scheduler:
        raise UsageError("--scheduler needs --executor dask")


@contextlib.contextmanager
def _dask_client(address: str | None, workers: int | None) -> Iterator[Any]:
    distributed = _import_distributed()
    cluster = None
    if address is None:
        cluster = _local_cluster(distributed, workers or default_workers())
        address = cluster.scheduler_address
    try:
        client = _connect(distributed, address)
        try:
            yield client
        finally:
            with contextlib.suppress(Exception):
                client.close(timeout=CLOSE_TIMEOUT)
    finally:
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.close(timeout=CLOSE_TIMEOUT)


class _Abandoned(logging.Filter):
    """Drops what Dask's event loop logs about results nobody waits for any more.

    get_executor()'s futures get their results in a coroutine that can only log its errors:
    a job cancelled after a failure whose result was on its way (CancelledError), or a fetch
    cut off when the client closes. run_jobs has raised (or returned) by then."""

    def __init__(self) -> None:
        super().__init__()
        self.closing = False

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None:
            return True
        if isinstance(exc, CancelledError):
            return False
        return not (self.closing and _in_executor(exc))


def _in_executor(exc: BaseException) -> bool:
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "_cascade_future":  # distributed.cfexecutor's forwarding
            return True
        tb = tb.tb_next
    return False


@contextlib.contextmanager
def _filtered(logger_name: str, quiet: logging.Filter) -> Iterator[None]:
    logger = logging.getLogger(logger_name)
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)


def _import_distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise ExecutorError(DASK_EXTRA) from None
    return distributed


def _local_cluster(distributed: Any, workers: int) -> Any:
    try:
        # Quiet below CRITICAL: a worker logs every failed job with its traceback on our stderr,
        # and the caller reports that failure itself, as one line.
        return distributed.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            # No dashboard; the scheduler's small HTTP server (health checks) still starts, on a
            # free port: its default, 8787, prints a warning when another cluster holds it.
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            silence_logs=logging.CRITICAL,
        )
    except Exception as e:
        raise ExecutorError(f"cannot start a local Dask cluster: {first_line(e, named=True)}") from None


def _connect(distributed: Any, address: str) -> Any:
    """A client of the scheduler at ``address``, within Dask's connect timeout
    (``distributed.comm.timeouts.connect``: 30 s unless configured, e.g. by
    ``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=5s``)."""
    try:
        return distributed.Client(address, set_as_default=False)
    except Exception as e:  # refused, timed out, not an address, not a Dask scheduler...
        reason = first_line(e, named=True)
    # The half-made client still holds its event loop: finalize it now, while that loop
    # runs, or its __del__ at interpreter exit waits for a dead loop and prints a traceback.
    gc.collect()
    raise ExecutorError(f"cannot reach the Dask scheduler at {address}: {reason}")


# --------------------------------------------------------------------------- running jobs


class Heartbeat(Protocol):
    """What run_jobs keeps alive while jobs run: a write intent (catalog.commit.intents.Intent)."""

    def beat(self) -> None: ...


_PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent dies


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def make_executor(workers: int | None, jobs: int) -> Executor | None:
    """A process pool for ``jobs`` units of work; None (run inline) when one worker would do."""
    n = min(workers or default_workers(), jobs)
    if n <= 1:
        return None
    # fork, where there is one: spawn and forkserver re-run the caller's __main__ in every
    # worker, which breaks any script without an `if __name__ == "__main__"` guard. Workers
    # still get their jobs pickled, touch no database and import migration scripts themselves.
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    _quiet_broken_pool_race()
    return ProcessPoolExecutor(n, mp_context=context, initializer=_worker_setup, initargs=(os.getpid(),))


def _quiet_broken_pool_race() -> None:
    """Before Python 3.12, a process pool whose workers exit on a Ctrl-C (see _worker_setup)
    sets an exception on every job it had, also on the ones run_jobs cancelled meanwhile, and
    its manager thread dies of that InvalidStateError: a thread traceback printed after the
    one line the CLI says. Nothing is lost then (the jobs were given up); the thread's death
    is not reported. Installed once; any other thread's exception goes to the hook before."""
    before = threading.excepthook
    if getattr(before, "quiets_pool_race", False):
        return

    def hook(args: threading.ExceptHookArgs) -> None:
        if not (isinstance(args.exc_value, InvalidStateError) and type(args.thread).__module__ == PROCESS_MODULE):
            before(args)

    hook.quiets_pool_race = True  # type: ignore[attr-defined]
    threading.excepthook = hook


PROCESS_MODULE = "concurrent.futures.process"  # where the pool's manager thread's class lives


def _worker_setup(parent: int) -> None:
    """A pool worker dies with its parent (a SIGKILLed CLI leaves no worker waiting forever on
    its queue, holding its stdout), and Ctrl-C, which the terminal sends the whole process group,
    ends it at once without a traceback of its own: the parent reports the interrupt. A process
    started ignoring SIGINT (nohup, a background job) has workers that ignore it too: a Ctrl-C
    its parent does not heed must not break its pool."""
    if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
        signal.signal(signal.SIGINT, lambda _sig, _frame: os._exit(130))
    # The pool's workers take the cores already: a statistics helper each would only compete
    # with them (2 workers and 2 helpers on 2 cores adopted 30% slower than 2 workers alone).
    # Not imported here (NumPy): verify's jobs never tally; a worker that loads it later reads
    # the variable, one forked from a parent that loaded it has its slot turned off.
    helper = sys.modules.get("catalog.stats.helper")
    if helper is None:
        os.environ["CATALOG_STATS_HELPER"] = "0"
    else:
        helper.SLOT.enabled = False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: no such call; the queue's end stops it later
        return
    if os.getppid() != parent:  # the parent died before the call: nobody will signal us
        os._exit(1)


def run_jobs(
    fn: Callable[[J], R],
    jobs: Sequence[J],
    executor: Executor | None,
    intent: Heartbeat | None,
    on_done: Callable[[J, R], None] | None = None,
) -> list[R]:
    """Results of ``fn`` over ``jobs``, in job order. A failure cancels the jobs after it and
    raises the failure of the earliest job, as a run in order would (the first bad record)."""
    if executor is None:
        out = []
        with _beating(intent):
            for job in jobs:
                result = fn(job)
                out.append(result)
                if on_done:
                    on_done(job, result)
        return out
    with _ctrl_c_held():  # the first submits fork the pool's workers
        futures: dict[Future[R], int] = {executor.submit(fn, job): i for i, job in enumerate(jobs)}
    results: dict[int, R] = {}
    errors: dict[int, Exception] = {}
    pending = set(futures)
    try:
        while pending:
            done, pending = wait(pending, timeout=WAIT_SLICE, return_when=FIRST_EXCEPTION)
            for fut in done:
                _collect(fut, futures[fut], jobs, results, errors, on_done)
            if errors:  # jobs after the earliest failure need not run
                first = min(errors)
                pending = {f for f in pending if not (futures[f] > first and f.cancel())}
            if intent:
                intent.beat()
    except BaseException:
        # Jobs already handed to a worker cannot be cancelled (and a pool worker survives a
        # Ctrl-C to run its next job): wait for them, so that no worker is still writing
        # files when the caller discards the intent's files. (Dask's futures always cancel,
        # running or not: a task that was running may still write files, named after an
        # intent that is gone by then, which gc removes.)
        for fut in pending:
            fut.cancel()
        with contextlib.suppress(BaseException):
            wait([f for f in pending if not f.cancelled()])
        raise
    if errors:
        raise errors[min(errors)]
    return [results[i] for i in range(len(jobs))]


@contextlib.contextmanager
def _ctrl_c_held() -> Iterator[None]:
    """Hold a Ctrl-C back until the block ends, then raise it: one that lands while a worker is
    forked raises KeyboardInterrupt in the fork's hooks, where CPython drops it, and the run
    went on to commit. Only where Python's own handler is set (the main thread's business)."""
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    held: list[int] = []
    signal.signal(signal.SIGINT, lambda sig, _frame: held.append(sig))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if held:
        raise KeyboardInterrupt


@contextlib.contextmanager
def _beating(intent: Heartbeat | None) -> Iterator[None]:
    """Keep ``intent`` alive from a thread while jobs run inline: one job can outlast the
    time after which gc takes a silent intent for dead."""
    if intent is None:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(WAIT_SLICE):
            with contextlib.suppress(CatalogError):
                intent.beat()

    thread = threading.Thread(target=beat, name="catalog-intent-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _collect(
    fut: Future[R],
    index: int,
    jobs: Sequence[J],
    results: dict[int, R],
    errors: dict[int, Exception],
    on_done: Callable[[J, R], None] | None,
) -> None:
    try:
        results[index] = fut.result()
    except Exception as e:
        lost = executor_failure(e)
        if lost is not None:
            raise lost from e
        errors[index] = e  # the job's own failure: kept until earlier jobs have finished
        return
    if on_done:
        on_done(jobs[index], results[index])


def executor_failure(e: BaseException) -> CatalogError | None:
    """A failure of the executor rather than of the job, as one line; None for the job's own.

    run_jobs never collects a future it cancelled itself, so a cancelled one was dropped by
    the executor: Dask cancels every task when the client loses its scheduler. Exceptions of
    Dask's own classes (KilledWorker: the task's workers kept dying) are its failures too.
    """
    again = "nothing was registered; run it again"
    if isinstance(e, BrokenExecutor):
        return ExecutorError(f"a worker process died ({e}; killed, or out of memory?): {again}")
    if isinstance(e, CancelledError):
        return ExecutorError(f"the executor dropped a job (lost the Dask scheduler?): {again}")
    if type(e).__module__.partition(".")[0] == "distributed":
        detail = first_line(e, named=True)
        if type(e).__name__ == "KilledWorker":
            detail = "workers kept dying while running one job (killed, or out of memory?)"
        return ExecutorError(f"the Dask cluster failed: {detail}: {again}")
    return None


@contextlib.contextmanager
def executor_for(executor: Executor | None, workers: int | None, jobs: int) -> Iterator[Executor | None]:
    """The caller's executor as given, or a pool of our own shut down on exit."""
    if executor is not None:
        yield executor
        return
    own = make_executor(workers, jobs)
    try:
        yield own
    finally:
        if own is not None:
            own.shutdown(wait=True, cancel_futures=True)
