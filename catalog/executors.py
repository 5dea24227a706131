"""Where per-shard jobs run: the local process pool, or a Dask cluster.

``--executor dask`` hands the jobs of migrate, compact, verify and large appends (picklable
descriptions run by module-level functions) to a ``dask.distributed`` cluster through
``Client.get_executor()``. The plan and the final commit stay in the calling process, so a
worker that dies changes nothing visible, and a rerun completes. Dask is an optional extra,
imported only here and only when asked for.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
from collections.abc import Iterator
from concurrent.futures import CancelledError, Executor
from typing import Any

from catalog.errors import CatalogError
from catalog.rewrite import default_workers, executor_for

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
        raise CatalogError(f"--workers sizes a cluster started here; the one at {address} has its own workers")
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
        raise CatalogError(f"unknown executor {kind!r}: use local or dask")
    if kind == "local" and scheduler:
        raise CatalogError("--scheduler needs --executor dask")


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
        raise CatalogError(DASK_EXTRA) from None
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
        raise CatalogError(f"cannot start a local Dask cluster: {_first_line(e)}") from None


def _connect(distributed: Any, address: str) -> Any:
    """A client of the scheduler at ``address``, within Dask's connect timeout
    (``distributed.comm.timeouts.connect``: 30 s unless configured, e.g. by
    ``DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=5s``)."""
    try:
        return distributed.Client(address, set_as_default=False)
    except Exception as e:  # refused, timed out, not an address, not a Dask scheduler...
        reason = _first_line(e)
    # The half-made client still holds its event loop: finalize it now, while that loop
    # runs, or its __del__ at interpreter exit waits for a dead loop and prints a traceback.
    gc.collect()
    raise CatalogError(f"cannot reach the Dask scheduler at {address}: {reason}")


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__
