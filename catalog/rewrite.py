"""Commits that rewrite a dataset's shards: migrate, compact, restore; and export.

The protocol is the append's (see storage.py), generalised: an intent is recorded before
any file is written; per-shard work runs through a ``concurrent.futures.Executor`` on
picklable job descriptions handed to module-level functions; then ONE transaction retires
the old shards (tombstones, still readable by version), registers the new ones and, if the
schema changed, the new schema version. Until that commit nothing is visible.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import (
    FIRST_EXCEPTION,
    BrokenExecutor,
    CancelledError,
    Executor,
    Future,
    ProcessPoolExecutor,
    wait,
)
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol, TypeVar

from crc32c import crc32c
from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from catalog import manifest as mf
from catalog.errors import (
    CatalogError,
    CommitConflictError,
    DatasetNotFoundError,
    Interrupted,
    ObjectMissingError,
    VersionNotFoundError,
)
from catalog.manifest import (
    AppliedMigrationRow,
    CommitRow,
    DatasetRow,
    IntentRow,
    ShardRow,
    utcnow,
)
from catalog.schema import Schema
from catalog.storage import (
    CHECKSUM_CHUNK,
    SHARD_SUFFIX,
    ShardFile,
    ShardSink,
    Store,
    clear_dead_partials,
    format_checksum,
    intent_of,
    new_intent_id,
    open_shard,
    partial_path,
    publish_new,
    shard_batches,
    shard_missing,
    store_for,
)
from catalog.tfrecord.framing import RecordWriter

if TYPE_CHECKING:
    from catalog.core import Commit, Dataset, Progress

J = TypeVar("J")
R = TypeVar("R")
WAIT_SLICE = 5.0  # seconds between checks on running jobs (and chances to beat)
DEFAULT_TARGET_SIZE = 256 << 20
UNLIMITED = 1 << 62  # a ShardSink that never rolls: one output shard per job


class LiveChanged(Exception):
    """The live shards differ from what the rewrite planned for (appends landed meanwhile)."""

    def __init__(self, appended: set[int], retired: set[int]) -> None:
        super().__init__("live shards changed")
        self.appended = appended
        self.retired = retired


# --------------------------------------------------------------------------- snapshots


@dataclass(frozen=True)
class LiveShard:
    id: int
    path: str  # absolute: a local path, or a URL
    records: int
    bytes: int
    checksum: str
    compression: str
    schema_version: int
    seq: int
    rel: str  # "<dataset>/<file>", as the manifest has it


@dataclass(frozen=True)
class Snapshot:
    version: int
    schema_version: int
    schema: Schema
    shards: list[LiveShard]

    @property
    def records(self) -> int:
        return sum(s.records for s in self.shards)


def snapshot(ds: Dataset, version: int | None = None) -> Snapshot:
    """The dataset at ``version`` (default current): schema and live shards, in read order."""
    from catalog.core import _schema_at

    with mf.read_txn(ds.catalog.engine) as conn:
        v, sv, query = ds._live(conn, version)
        rows = conn.execute(query).all()
        schema = _schema_at(conn, ds.id, sv)
    url = ds.catalog.store.url
    shards = [
        LiveShard(r.id, url(r.path), r.records, r.bytes, r.checksum, r.compression, r.schema_version, r.seq, r.path)
        for r in rows
    ]
    return Snapshot(v, sv, schema, shards)


# --------------------------------------------------------------------------- intents


class Intent:
    """A rewrite at work: gc leaves files named after a live intent alone, whatever their age."""

    def __init__(self, ds: Dataset) -> None:
        self.ds = ds
        self.id = new_intent_id()
        self.store = ds.catalog.store
        self._next_beat = 0.0

    def __enter__(self) -> Intent:
        def txn() -> None:
            # Not synced (as an append's intent): it matters only while this process lives.
            with mf.write_txn(self.ds.catalog.engine, durable=False) as conn:
                conn.execute(insert(IntentRow).values(**mf.intent_values(self.id, self.ds.name)))

        mf.with_lock_retry(txn)
        self.store.prepare(self.ds.name)
        self._next_beat = time.monotonic() + _heartbeat_seconds()
        return self

    def beat(self) -> None:
        if time.monotonic() < self._next_beat:
            return
        self._next_beat = time.monotonic() + _heartbeat_seconds()
        mf.beat_intent(self.ds.catalog.engine, self.id)

    def prefix(self, unit: int) -> str:
        """File-name prefix of one unit of work (the intent id leads: gc reads it back)."""
        return f"{self.id}-{unit:05d}"

    def discard_files(self, keep: Iterable[str] = ()) -> None:
        kept = set(keep)
        for f in self.store.listing({self.ds.name}):
            if intent_of(f.name) == self.id and f.rel not in kept:
                self.store.remove(f.rel)

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is None:
            return  # the commit deleted the intent row in its own transaction
        # As Writer._abort: the manifest, not this process's memory, says whether the files
        # were committed (a Ctrl-C can land after the COMMIT, before commit_change returns).
        engine = self.ds.catalog.engine
        mine, committed = mf.settle_intent(engine, self.id)
        if mine:
            self.discard_files()
        if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, Interrupted):
            raise Interrupted(committed) from exc


def _heartbeat_seconds() -> float:
    from catalog.core import HEARTBEAT_EVERY  # one interval for appends and rewrites

    return HEARTBEAT_EVERY.total_seconds()


# --------------------------------------------------------------------------- running jobs


class Heartbeat(Protocol):
    """What run_jobs keeps alive while jobs run: an Intent, or an append's writer."""

    def beat(self) -> None: ...


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
    return ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork" if "fork" in methods else "spawn"))


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
        return CatalogError(f"a worker process died ({e}; killed, or out of memory?): {again}")
    if isinstance(e, CancelledError):
        return CatalogError(f"the executor dropped a job (lost the Dask scheduler?): {again}")
    if type(e).__module__.partition(".")[0] == "distributed":
        lines = str(e).strip().splitlines()
        detail = f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__
        if type(e).__name__ == "KilledWorker":
            detail = "workers kept dying while running one job (killed, or out of memory?)"
        return CatalogError(f"the Dask cluster failed: {detail}: {again}")
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


# --------------------------------------------------------------------------- committing


@dataclass(frozen=True)
class NewShard:
    file: ShardFile
    seq: int
    schema_version: int


@dataclass
class Change:
    """What one rewrite commit does."""

    kind: str  # migrate | compact | restore
    read_version: int
    schema_version: int  # the schema version the work was planned against
    retire: set[int]
    add: list[NewShard]
    message: str
    author: str
    intent: str | None
    new_schema: Schema | None = None  # registered as schema version + 1
    expect_live: set[int] | None = None  # the live set must be exactly this (else LiveChanged)
    migration: dict[str, Any] | None = None  # an applied_migrations row (without ids and versions)
    revert_after: int | None = None  # restore: migrations applied after this version are pending again
    records_added: int = 0  # rewrites keep every record: 0 (history shows "+0 records")


_LIVE = select(ShardRow.id, ShardRow.records, ShardRow.bytes).where(
    ShardRow.dataset_id == bindparam("ds"), ShardRow.removed_version.is_(None)
)


def commit_change(ds: Dataset, change: Change) -> Commit:
    from catalog.core import COMMIT_RETRIES

    for _ in range(COMMIT_RETRIES):
        try:
            return mf.with_lock_retry(lambda: _commit_txn(ds, change))
        except IntegrityError:
            continue  # a concurrent commit took our version number: re-read
    raise CommitConflictError(f"could not commit to {ds.name!r} after {COMMIT_RETRIES} attempts")


def _commit_txn(ds: Dataset, ch: Change) -> Commit:
    from catalog.core import DATASET_STATE_FOR_COMMIT, insert_schema

    now = utcnow()
    # As an append's commit: the files are checked before the locks (a HEAD each on S3), and
    # claiming the intent inside proves gc has not taken them since (it revokes intents first).
    ds.catalog.require_shards(s.file.path for s in ch.add)
    with mf.write_txn(ds.catalog.engine) as conn:
        row: Any = conn.execute(DATASET_STATE_FOR_COMMIT, {"ds": ds.id}).first()
        live = _check(conn, ds, ch, row)
        new = row.version + 1
        schema_version = row.schema_version
        if ch.new_schema is not None:
            schema_version += 1
            insert_schema(conn, ds.id, schema_version, ch.new_schema, new, now)
        totals = {
            "records": row.records - sum(live[i].records for i in ch.retire) + sum(s.file.records for s in ch.add),
            "bytes": row.bytes - sum(live[i].bytes for i in ch.retire) + sum(s.file.bytes for s in ch.add),
            "shard_count": row.shard_count - len(ch.retire) + len(ch.add),
        }
        swapped = conn.execute(
            update(DatasetRow)
            .where(DatasetRow.id == ds.id, DatasetRow.version == row.version)
            .values(version=new, schema_version=schema_version, **totals)
        ).rowcount
        if swapped != 1:
            raise IntegrityError("version swap lost", None, Exception("retry"))
        _write_shards(conn, ds.id, ch, new)
        values = {
            "dataset_id": ds.id, "version": new, "kind": ch.kind, "schema_version": schema_version,
            "created_at": now, "message": ch.message, "author": ch.author, "read_version": ch.read_version,
            "token": None, "records_added": ch.records_added, "shards_added": len(ch.add), "intent": ch.intent,
            **totals,
        }  # fmt: skip
        conn.execute(insert(CommitRow).values(**values))
        _record_migration(conn, ds.id, ch, schema_version, new, now)
    retired = [live[i] for i in ch.retire]
    return _commit_value(ds, ch, values, sum(r.records for r in retired), len(retired))


def _check(conn: Connection, ds: Dataset, ch: Change, row: Any) -> dict[int, Any]:
    """Inside the commit's transaction: may this change still commit? Returns the live shards."""
    if row is None:
        raise DatasetNotFoundError(f"dataset {ds.name!r} was dropped", ds.name)
    if row.schema_version != ch.schema_version:
        raise CommitConflictError(
            f"dataset {ds.name!r} moved to schema version {row.schema_version} while this {ch.kind} worked from "
            f"schema version {ch.schema_version}: nothing was registered; run it again"
        )
    live = {r.id: r for r in conn.execute(_LIVE, {"ds": ds.id})}
    if ch.retire - live.keys() or (ch.expect_live is not None and live.keys() != ch.expect_live):
        expected = ch.expect_live if ch.expect_live is not None else ch.retire
        raise LiveChanged(set(live) - expected, expected - set(live))
    _claim_intent(conn, ch, ds.name)
    return live


def _write_shards(conn: Connection, ds_id: int, ch: Change, version: int) -> None:
    mf.update_shards(conn, sorted(ch.retire), removed_version=version)
    if ch.add:
        conn.execute(insert(ShardRow), [_shard_values(ds_id, s, version) for s in ch.add])


def _commit_value(ds: Dataset, ch: Change, v: dict[str, Any], records_removed: int, shards_removed: int) -> Commit:
    """The commit as history will show it: what it added and what it retired, counted from
    the shards (the row's ``records_added`` stays 0 for a rewrite)."""
    from catalog.core import Commit, ShardInfo

    url = ds.catalog.store.url
    infos = [
        ShardInfo(
            url(f.path), f.path, f.records, f.bytes, f.checksum, f.compression, s.schema_version, v["version"]
        )
        for s in ch.add
        if (f := s.file)
    ]
    return Commit(
        ds.name, v["version"], ch.kind, v["schema_version"], v["created_at"], ch.message, ch.author,
        ch.read_version, None, sum(s.file.records for s in ch.add), len(ch.add), v["records"], v["bytes"],
        v["shard_count"], infos, records_removed=records_removed, shards_removed=shards_removed,
    )  # fmt: skip


def _claim_intent(conn: Connection, ch: Change, name: str) -> None:
    # As in Writer._check_intent: gc revokes a dead intent before it deletes the intent's
    # files, so an intent that is gone means files may be gone: never commit then.
    if ch.intent is None:
        return
    if conn.execute(delete(IntentRow).where(IntentRow.id == ch.intent)).rowcount != 1:
        raise CommitConflictError(
            f"the write intent of this {ch.kind} of {name!r} expired and gc may have collected its files: "
            "nothing was registered; run it again"
        )


def _shard_values(ds_id: int, s: NewShard, version: int) -> dict[str, Any]:
    return {
        "dataset_id": ds_id,
        "path": s.file.path,
        "records": s.file.records,
        "bytes": s.file.bytes,
        "checksum": s.file.checksum,
        "compression": s.file.compression,
        "schema_version": s.schema_version,
        "added_version": version,
        "removed_version": None,
        "seq": s.seq,
    }


def _record_migration(conn: Connection, ds_id: int, ch: Change, schema_version: int, version: int, now: Any) -> None:
    if ch.migration is not None:
        conn.execute(
            insert(AppliedMigrationRow).values(
                dataset_id=ds_id,
                from_schema_version=ch.schema_version,
                to_schema_version=schema_version,
                applied_version=version,
                applied_at=now,
                author=ch.author,
                **ch.migration,
            )
        )
    if ch.revert_after is not None:
        conn.execute(
            update(AppliedMigrationRow)
            .where(
                AppliedMigrationRow.dataset_id == ds_id,
                AppliedMigrationRow.applied_version > ch.revert_after,
                AppliedMigrationRow.reverted_version.is_(None),
            )
            .values(reverted_version=version)
        )


# --------------------------------------------------------------------------- byte copies


@dataclass(frozen=True)
class CopySource:
    path: str
    bytes: int
    checksum: str
    compression: str


@dataclass(frozen=True)
class ConcatJob:
    """Concatenate shards into one new shard (compaction): framing concatenates."""

    sources: tuple[CopySource, ...]
    records: int
    data_root: str
    dataset: str
    prefix: str  # file-name prefix, led by the intent id


def _copy_verified(src: CopySource, out: Any, crc: int, buf: bytearray) -> int:
    """Append ``src`` to ``out``, checking its registered checksum on the way; returns the new crc."""
    view = memoryview(buf)
    mine = 0
    size = 0
    f: Any  # a FileIO, or an fsspec file: both have readinto
    try:
        f = open_shard(src.path)
    except (FileNotFoundError, ObjectMissingError) as e:
        raise shard_missing(src.path) from e
    end = src.bytes + 1  # never read past the registered size: one byte more tells it is wrong
    with f:
        while n := f.readinto(view[: min(len(buf), end - size)]):
            chunk = view[:n]
            mine = crc32c(chunk, mine)
            crc = crc32c(chunk, crc)
            out.write(chunk)
            size += n
    if format_checksum(mine) != src.checksum or size != src.bytes:
        raise CatalogError(
            f"{src.path}: checksum {format_checksum(mine)} ({size} bytes), {src.checksum} ({src.bytes} bytes) "
            "registered: the shard is damaged (run `catalog verify`); nothing was written"
        )
    return crc


def clear_attempt(store: Store, dataset: str, prefix: str) -> None:
    """Remove the files of one job: what an earlier attempt left, or a failed run's.

    Dask re-runs the task of a worker that died, and a rerun would fail on the files of the
    attempt that died (temporary names are created exclusively, links refuse a taken name).
    The prefix (intent id, unit) is this job's alone, and its files are numbered from 0
    without gaps (see ShardSink), the newest perhaps still under its temporary name.
    """
    for index in itertools.count():
        rel = f"{dataset}/{prefix}-{index:05d}{SHARD_SUFFIX}"
        temp = None if store.remote else store.temp_for(rel)  # a remote store's spool is elsewhere
        found = store.remove(rel)
        if temp is not None and temp.exists():
            temp.unlink(missing_ok=True)
            found = True
        if not found:
            return


def concat_job(job: ConcatJob) -> ShardFile:
    """Module-level (picklable) worker: one compacted shard."""
    store = store_for(job.data_root)
    clear_attempt(store, job.dataset, job.prefix)
    if any(s.compression != "none" for s in job.sources):
        return _reframe(job)
    rel = f"{job.dataset}/{job.prefix}-00000{SHARD_SUFFIX}"  # as ShardSink names its first file
    temp, f = store.open_temp(rel)
    buf = bytearray(CHECKSUM_CHUNK)
    crc = 0
    try:
        with f:
            for src in job.sources:
                crc = _copy_verified(src, f, crc, buf)
            size = f.tell()
            store.publish(f, temp, rel)
    finally:
        if store.remote:
            temp.unlink(missing_ok=True)  # a failed copy's spool (publish removes it otherwise)
    store.sync_dir(job.dataset)
    return ShardFile(rel, job.records, size, format_checksum(crc))


def _reframe(job: ConcatJob) -> ShardFile:
    """Compressed sources: their records re-framed into one uncompressed shard."""
    sink = ShardSink(job.data_root, job.dataset, job.prefix, UNLIMITED, UNLIMITED)
    for src in job.sources:
        for batch in shard_batches(src.path, src.bytes):
            sink.write_many(batch)
    shards = sink.close()  # one shard (the sink never rolls), or none when the sources hold no records
    records = shards[0].records if shards else 0
    if records != job.records or not shards:
        where = ", ".join(s.path for s in job.sources)
        raise CatalogError(f"{where}: {records} records read, {job.records} registered; run `catalog verify`")
    return shards[0]


# --------------------------------------------------------------------------- compact


@dataclass
class CompactReport:
    dataset: str
    commit: Commit | None
    groups: int
    shards_before: int
    shards_after: int
    bytes: int
    seconds: float
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "dry_run": self.dry_run,
            "version": self.commit.version if self.commit else None,
            "data_change": False,
            "groups": self.groups,
            "shards_before": self.shards_before,
            "shards_after": self.shards_after,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
        }


def plan_compaction(shards: Sequence[LiveShard], target_size: int) -> list[list[LiveShard]]:
    """Runs of adjacent small shards (same schema version and compression), each run at most
    ``target_size`` bytes; runs of one shard are left alone."""
    groups: list[list[LiveShard]] = []
    run: list[LiveShard] = []
    size = 0

    def close() -> None:
        if len(run) > 1:
            groups.append(list(run))
        run.clear()

    for s in shards:
        fits = run and s.schema_version == run[0].schema_version and s.compression == run[0].compression
        if s.bytes >= target_size:
            close()
            continue
        if not fits or size + s.bytes > target_size:
            close()
            size = 0
        run.append(s)
        size += s.bytes
    close()
    return groups


def compact(
    ds: Dataset,
    target_size: int = DEFAULT_TARGET_SIZE,
    *,
    workers: int | None = None,
    executor: Executor | None = None,
    message: str = "",
    author: str | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> CompactReport:
    from catalog.core import default_author

    start = time.monotonic()
    snap = snapshot(ds)
    groups = plan_compaction(snap.shards, target_size)
    merged = sum(len(g) for g in groups)
    report = CompactReport(
        ds.name, None, len(groups), len(snap.shards), len(snap.shards) - merged + len(groups),
        sum(s.bytes for g in groups for s in g), 0.0, dry_run,
    )  # fmt: skip
    if dry_run or not groups:
        return report
    with Intent(ds) as intent:
        jobs = [
            ConcatJob(
                tuple(CopySource(s.path, s.bytes, s.checksum, s.compression) for s in g),
                sum(s.records for s in g),
                ds.catalog.store.root,
                ds.name,
                intent.prefix(i),
            )
            for i, g in enumerate(groups)
        ]
        done = (lambda job, _r: progress(sum(s.bytes for s in job.sources))) if progress else None
        with executor_for(executor, workers, len(jobs)) as ex:
            files = run_jobs(concat_job, jobs, ex, intent, done)
        change = Change(
            "compact",
            snap.version,
            snap.schema_version,
            {s.id for g in groups for s in g},
            [NewShard(f, g[0].seq, g[0].schema_version) for f, g in zip(files, groups, strict=True)],
            message or f"compact {merged} shards into {len(groups)}",
            author or default_author(),
            intent.id,
        )
        try:
            report.commit = commit_change(ds, change)
        except LiveChanged as e:
            raise CommitConflictError(
                f"{len(e.retired)} of the shards this compaction merged were rewritten meanwhile (by a migrate, "
                "compact or restore): nothing was registered; run it again"
            ) from None
    report.seconds = time.monotonic() - start
    return report


# --------------------------------------------------------------------------- restore


def restore(ds: Dataset, version: int, message: str = "", author: str | None = None) -> Commit:
    """A new commit whose live shards and schema are exactly ``version``'s (history keeps all)."""
    from catalog.core import default_author

    for _ in range(10):
        target = snapshot(ds, version)
        now = snapshot(ds)
        for s in target.shards:
            if not ds.catalog.store.exists(s.rel):
                raise VersionNotFoundError(
                    f"dataset {ds.name!r} version {version} cannot be restored: {s.path} is missing"
                )
        live_now = {s.id for s in now.shards}
        keep = {s.id for s in target.shards} & live_now
        try:
            return _restore_once(ds, version, target, now, live_now, keep, message, author or default_author())
        except LiveChanged:
            continue  # a commit landed meanwhile: plan again (the intent's files were discarded)
    raise CommitConflictError(
        f"dataset {ds.name!r} kept changing during the restore: nothing was registered; run it again"
    )


def _restore_once(
    ds: Dataset, version: int, target: Snapshot, now: Snapshot, live_now: set[int], keep: set[int], message: str,
    author: str,
) -> Commit:  # fmt: skip
    with Intent(ds) as intent:
        revived = [
            NewShard(_relink(ds, intent, i, s), s.seq, s.schema_version)
            for i, s in enumerate(x for x in target.shards if x.id not in keep)
        ]
        change = Change(
            "restore",
            now.version,
            now.schema_version,
            live_now - keep,
            revived,
            message or f"restore version {version}",
            author,
            intent.id,
            new_schema=None if target.schema == now.schema else target.schema,
            expect_live=live_now,
            revert_after=version,
        )
        return commit_change(ds, change)


def _relink(ds: Dataset, intent: Intent, unit: int, s: LiveShard) -> ShardFile:
    """A retired shard back under a new name: a hard link (same bytes, same inode), else a copy."""
    rel = f"{ds.name}/{intent.prefix(unit)}-00000{SHARD_SUFFIX}"
    store = ds.catalog.store
    if not store.link(s.rel, rel):  # no hard links here: a verified copy
        source = CopySource(s.path, s.bytes, s.checksum, s.compression)
        return concat_job(ConcatJob((source,), s.records, store.root, ds.name, intent.prefix(unit)))
    store.sync_dir(ds.name)
    return ShardFile(rel, s.records, s.bytes, s.checksum, s.compression)


# --------------------------------------------------------------------------- export


@dataclass
class ExportReport:
    dataset: str
    version: int
    path: str
    records: int
    bytes: int
    compression: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "version": self.version,
            "path": self.path,
            "records": self.records,
            "bytes": self.bytes,
            "compression": self.compression,
            "seconds": round(self.seconds, 3),
        }


EXPORT_COMPRESSIONS = ("none", "gzip", "zlib")


def export(
    ds: Dataset,
    out: str | os.PathLike[str],
    version: int | None = None,
    compression: str = "none",
    progress: Progress | None = None,
) -> ExportReport:
    """One TFRecord file holding the dataset at ``version``, written atomically (temp, fsync, rename)."""
    if compression not in EXPORT_COMPRESSIONS:
        raise CatalogError(f"unknown compression {compression!r}: use none, gzip or zlib")
    start = time.monotonic()
    target = Path(out)
    if os.path.lexists(target):
        raise CatalogError(f"{target}: already exists; export never overwrites")
    if not target.parent.is_dir():
        raise CatalogError(f"{target.parent}: no such directory")
    snap = snapshot(ds, version)
    clear_dead_partials(target.parent)  # what killed exports left here
    temp = partial_path(target)
    try:
        with open(temp, "xb") as f:
            _export_to(snap, f, compression, progress)
            size = f.tell()
            f.flush()
            os.fsync(f.fileno())
        publish_new(temp, target)  # never over a file made meanwhile
    except OSError as e:
        raise CatalogError(f"{target}: cannot write: {e.strerror or e}") from e
    finally:
        temp.unlink(missing_ok=True)
    return ExportReport(ds.name, snap.version, str(target), snap.records, size, compression, time.monotonic() - start)


def _export_to(snap: Snapshot, f: IO[bytes], compression: str, progress: Progress | None) -> None:
    if compression == "none" and all(s.compression == "none" for s in snap.shards):
        buf = bytearray(CHECKSUM_CHUNK)  # framing concatenates: copy bytes, checking each shard's checksum
        for s in snap.shards:
            _copy_verified(CopySource(s.path, s.bytes, s.checksum, s.compression), f, 0, buf)
            if progress:
                progress(s.bytes)
        return
    w = RecordWriter(f, None if compression == "none" else compression)
    for s in snap.shards:
        for batch in shard_batches(s.path, s.bytes):
            w.write_many(batch)
        if progress:
            progress(s.bytes)
    w.close()
