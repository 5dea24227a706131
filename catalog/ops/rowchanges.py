"""Row changes as new versions of the same dataset: :func:`delete` (the rows a predicate
matches are gone) and :func:`update` (features of the matching rows set anew).

Only the shards that hold a match are rewritten, one shard in and one out, on the executor;
every other shard stays live as it is. A rewrite takes its source's place in the read order
(its seq, split and schema version) and its compression, so the rows that remain keep their
order. One commit retires the rewritten shards and registers their rewrites. An append that
lands meanwhile is kept: it retires nothing this change retires. A shard retired meanwhile (a
compact, a migration, another delete) makes the change start again from the new version, a
few times, then fail in one line; either way nothing half done is ever visible.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import pickle
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from sqlalchemy import delete as sql_delete
from sqlalchemy import select

from catalog import manifest as mf
from catalog.commit.changes import (
    DEDUP,
    DELETE,
    ERASE,
    UPDATE,
    Change,
    Kind,
    NewShard,
    Replacement,
    ReplaceShards,
    RetireShards,
    adding,
)
from catalog.commit.handles import (
    DatasetHandle,
    LiveShard,
    Snapshot,
    derived_names,
    live_values,
    load_schema,
    snapshot,
)
from catalog.commit.intents import Intent
from catalog.commit.protocol import LiveChanged, commit, token_commit
from catalog.commit.slicing import validate_split
from catalog.commit.statistics import stored_feature_ranges
from catalog.commit.values import Progress, default_author
from catalog.errors import (
    CatalogError,
    CommitConflictError,
    PredicateError,
    RowChangeError,
    SplitNotFoundError,
    UsageError,
    ValidationError,
)
from catalog.executors import executor_for, run_jobs
from catalog.inputs.delimited import finite_float
from catalog.manifest import SHARD_STATS, SHARDS
from catalog.ops.options import CommitOptions, Unpack, VerbKeywords, check_keywords, jobs_of
from catalog.schema import Schema
from catalog.schema.features import convert
from catalog.schema.predicates import Predicate
from catalog.storage import (
    UNLIMITED,
    ShardFile,
    ShardSink,
    clear_attempt,
    file_io,
    index_rel,
    shard_batches,
    store_for,
)
from catalog.storage import names as naming
from catalog.storage.content import check_named
from catalog.words import counted

ROUNDS = 5  # fresh starts after shards were retired under the change, before giving up
Where = str | Callable[..., Any]
MaskOf = Callable[[int, int, list[bytes]], np.ndarray]  # (batch number, its first record, records) -> drop mask


def describe_where(where: Where) -> str:
    """How history and reports name a predicate: its text, or the function's qualified name."""
    if isinstance(where, str):
        return where
    return f"{getattr(where, '__module__', '?')}:{getattr(where, '__qualname__', repr(where))}"


@dataclass(frozen=True)
class RowProgram:
    """What a row change does to a shard's records; picklable, as it goes to the workers (a
    function given as ``where`` or as a value must be a module's, not a lambda, to run in
    worker processes)."""

    schema: dict[str, Any]  # the dataset's schema (JSON) at the snapshot
    where: Where | None  # None: the records to drop are the job's ``drop`` (a scan found them)
    batched: bool = False  # ``where`` is a function of a batch of columns: one bool per row
    sets: tuple[tuple[str, Any], ...] = ()  # an update's (feature, value or function of the row)


logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RowJob:
    """One shard's part of a row change: find its matches and, unless ``dry_run``, rewrite it."""

    program: RowProgram
    source: str  # the shard's absolute path or URL
    records: int
    size: int
    compression: str
    data_root: str
    dataset: str
    prefix: str
    statistics: bool
    dry_run: bool
    checksum: str
    fingerprint: str | None
    adopted: bool
    drop: str | None = None  # a file of the positions (uint32) of the records to drop: see Drops


@dataclass(frozen=True)
class Drops:
    """A shard's records to drop, found by a scan before any rewrite (dedup's duplicates): a
    file of their positions within the shard, as uint32 in any order; the file (not the
    positions) goes to the worker, so a job stays small whatever the count."""

    count: int
    path: str


DropScan = Callable[[DatasetHandle, Snapshot, list[LiveShard], Executor | None, Progress | None], list[Drops | None]]


@dataclass(frozen=True)
class RowOutcome:
    matched: int
    file: ShardFile | None  # the rewrite (None: no match, a dry run, or nothing left)


@functools.lru_cache(maxsize=16)
def _schema_of(text: str) -> Schema:
    return Schema.from_json(json.loads(text))


def job_schema(obj: Mapping[str, Any]) -> Schema:
    """``Schema.from_json(obj)``, built once a process for each schema (a Schema does not change):
    every job of a row change or a derivation carries its schema as JSON, and building its
    codecs took about a millisecond a job (16 shards of 100,000 rows: a tenth of a filter's CPU)."""
    return _schema_of(json.dumps(obj))


class _Compiled:
    """A program made ready in a worker: the schema, the test of a batch of records."""

    def __init__(self, program: RowProgram) -> None:
        self.program = program
        self.schema = job_schema(program.schema)
        where = program.where
        self.predicate = Predicate(where, self.schema) if isinstance(where, str) else None

    def mask(self, records: list[bytes]) -> np.ndarray:
        """True for the records the change applies to (a predicate's error names no record yet).
        A predicate's features alone are decoded: the rest (a 2 KiB payload) is not its business."""
        fn = self.program.where
        if self.predicate is not None:
            return self.predicate.mask(self.schema.decode_batch(records, columns=self.predicate.features))
        if not callable(fn):  # a scan's drops: change_shard reads them, never a mask
            raise TypeError("no where to test")
        if self.program.batched:
            mask = np.asarray(fn(self.schema.decode_batch(records)))
            if mask.shape != (len(records),) or mask.dtype != bool:
                got = f"{mask.dtype} of shape {mask.shape}"
                raise UsageError(f"where(batch) must return one bool per row ({len(records)}), got {got}")
            return mask
        return np.fromiter((_verdict(fn(self.schema.decode(r))) for r in records), dtype=bool, count=len(records))

    def updated(self, record: bytes) -> bytes:
        row = self.schema.decode(record)
        for name, value in self.program.sets:
            row[name] = value(row) if callable(value) else value
        return self.schema.encode(row)


def _verdict(value: Any) -> bool:
    """A row function's answer: a bool (a function that forgot its ``return`` gives None, which
    must not quietly match nothing)."""
    if type(value) is bool or type(value) is np.bool_:
        return bool(value)
    raise UsageError(f"where(row) must return a bool (True: the row matches), got {type(value).__name__}")


def _batches(job: RowJob) -> Iterator[tuple[int, list[bytes]]]:
    """(index of its first record in the shard, records) of each batch of the shard."""
    at = 0
    for batch in shard_batches(job.source, job.size):
        yield at, batch
        at += len(batch)
    if at != job.records:
        raise RowChangeError(
            f"{job.source}: {counted(at, 'record')} read, {job.records} registered; run `catalog verify`"
        )


def _failed(job: RowJob, first: int, e: BaseException, what: str) -> RowChangeError:
    """One line naming the shard and the record (within it) where the change failed."""
    if isinstance(e, RowChangeError):
        return e
    if isinstance(e, ValidationError):
        record = first + (e.record or 0)
        feature = f"feature {e.feature!r}: " if e.feature else ""
        return RowChangeError(f"{job.source}: record {record}: {feature}{e.reason}")
    if isinstance(e, CatalogError):
        return RowChangeError(f"{job.source}: {e}")
    return RowChangeError(f"{job.source}: records from {first}: {what} raised {type(e).__name__}: {e}")


def change_shard(job: RowJob) -> RowOutcome:
    """Module-level (picklable) worker: the shard's matches, and its rewrite when it has any."""
    try:
        compiled = _Compiled(job.program)
    except CatalogError as e:
        raise RowChangeError(str(e)) from None
    check_named(job.source, job.checksum, job.fingerprint, job.adopted)
    if job.drop is not None:  # the positions are known: one read, the rewrite's
        drop = np.zeros(job.records, dtype=bool)
        drop[np.fromfile(job.drop, dtype="<u4").astype(np.int64)] = True
        matched = int(drop.sum())
        mask_of: MaskOf = lambda _i, first, batch: drop[first : first + len(batch)]  # noqa: E731
    else:
        masks = _masks(job, compiled)
        matched = int(sum(int(m.sum()) for m in masks))
        mask_of = lambda i, _first, _batch: masks[i]  # noqa: E731
    if matched == 0 or job.dry_run:
        return RowOutcome(matched, None)
    return RowOutcome(matched, _rewrite(job, compiled, mask_of))


def _masks(job: RowJob, compiled: _Compiled) -> list[np.ndarray]:
    masks = []
    for first, batch in _batches(job):
        try:
            masks.append(compiled.mask(batch))
        except (Exception, SystemExit) as e:  # (a predicate function calling sys.exit: its failure)
            raise _failed(job, first, e, "where") from None
    return masks


def _rewrite(job: RowJob, compiled: _Compiled, mask_of: MaskOf) -> ShardFile | None:
    clear_attempt(store_for(job.data_root), job.dataset, job.prefix)  # a rerun of a task whose worker died
    schema = compiled.schema if job.statistics else None
    sink = ShardSink(
        job.data_root, job.dataset, job.prefix, UNLIMITED, UNLIMITED, compression=job.compression, schema=schema
    )
    updating = bool(job.program.sets)
    try:
        for i, (first, batch) in enumerate(_batches(job)):
            _write_batch(sink, compiled, job, first, batch, mask_of(i, first, batch), updating)
    except BaseException:
        sink.abort()
        raise
    shards = sink.close()
    return shards[0] if shards else None


def _write_batch(
    sink: ShardSink, compiled: _Compiled, job: RowJob, first: int, batch: list[bytes], mask: np.ndarray, updating: bool
) -> None:
    if not updating:  # the records kept, as they were, in one call
        sink.write_many([batch[i] for i in np.flatnonzero(~mask).tolist()])
        return
    write = sink.write
    for i in range(len(batch)):
        if not updating or not mask[i]:
            write(batch[i])
        else:
            try:
                write(compiled.updated(batch[i]))
            except (Exception, SystemExit) as e:
                if isinstance(e, ValidationError):
                    e.record = i
                raise _failed(job, first + (0 if isinstance(e, ValidationError) else i), e, "set") from None


# --------------------------------------------------------------------------- plan and commit


@dataclass
class RowChangeReport:
    """What a delete or update found and did; ``version`` None: nothing committed."""

    dataset: str
    operation: str  # "delete" or "update"
    where: str
    dry_run: bool
    read_version: int
    version: int | None = None
    rows: int = 0  # matched: deleted or updated
    shards: int = 0  # holding a match
    shards_read: int = 0  # read to find matches (the others' statistics ruled them out)
    shards_total: int = 0  # in the change's scope (the split's, or all live ones)
    records_before: int = 0
    records_after: int = 0
    seconds: float = 0.0
    duplicate: bool = False  # a retry with the token of a change that committed
    split: str | None = None
    sets: list[str] = field(default_factory=list)
    purge: bool = False  # an erasure: the rows gone from every version that held them
    erased: int = 0  # an erasure's rows, in every version (``rows``: in the current one)
    files_removed: int = 0  # an erasure's old files deleted
    stats_dropped: int = 0  # an erasure's: statistics of shards gc collected (see _drop_collected_stats)
    unregistered: int = 0  # an erasure's: files of writers at work or killed in the dataset's folder (unread)
    key: list[str] = field(default_factory=list)  # a dedup's key features (none: --content)
    per_split: bool = False  # a dedup's: duplicates within a split only
    derived: list[RowChangeReport] = field(default_factory=list)  # an erasure's in datasets derived from this one

    def to_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("dataset", "operation", "where", "dry_run", "read_version", "version")}
        out |= {"rows": self.rows, "shards": self.shards, "shards_read": self.shards_read}
        out |= {"shards_total": self.shards_total}
        out |= {"records_before": self.records_before, "records_after": self.records_after}
        out |= {"split": self.split, "seconds": round(self.seconds, 3), "duplicate": self.duplicate}
        if self.purge:
            out |= {"purge": True, "erased": self.erased, "files_removed": self.files_removed}
            out |= {"stats_dropped": self.stats_dropped, "unregistered": self.unregistered}
            out |= {"derived": [d.to_json() for d in self.derived]}
        if self.operation == "dedup":
            out |= {"key": self.key or None, "content": not self.key, "per_split": self.per_split}
        return out | ({"set": self.sets} if self.operation == "update" else {})


class _StartOver(Exception):
    """Shards the change rewrote were retired meanwhile: plan again from the new version."""


def _start_over_if_migrated(ds: DatasetHandle, snap: Snapshot) -> None:
    """A migration committed meanwhile (the commit refused a change planned on the schema
    version before it): start again on the migrated shards, as after any rewrite."""
    if snapshot(ds).schema_version != snap.schema_version:
        raise _StartOver from None


@dataclass(frozen=True)
class RowChange:
    """A delete or update as asked: the program's parts and how to run and commit it."""

    kind: Kind
    where: Where
    batched: bool = False
    sets: tuple[tuple[str, Any], ...] = ()
    split: str | None = None
    dry_run: bool = False
    options: CommitOptions = field(default_factory=CommitOptions)
    purge: bool = False  # a delete that erases: see erase()
    rewrite_adopted: bool = False  # an erasure may stop reading files the catalog does not own
    skip_derived: bool = False  # an erasure leaves the datasets derived from this one as they are
    scan: DropScan | None = None  # finds the records to drop before any rewrite (``where`` then only names it)


def _check_sets(schema: Schema, sets: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """An update's assignments, each naming a context feature; constants checked at once."""
    if not sets:
        raise UsageError("update: set at least one feature (--set FEATURE=VALUE)")
    out = []
    for name, value in sets.items():
        feat = schema.features.get(name)
        if feat is None:
            have = ", ".join(schema.features)
            if name in schema.sequence:
                said = f"is a sequence feature: update sets context features ({have}); map changes steps"
                raise UsageError(f"update: feature {name!r} {said}")
            raise UsageError(f"update: no feature {name!r} to set (the schema has {have})")
        if value is None and feat.optional:
            pass  # SQL's SET x = NULL: the feature left out of the record, as a function's None does
        elif not callable(value):
            try:
                value = convert(feat, value)  # (a class name becomes its number there)
            except ValidationError as e:
                raise UsageError(f"update: feature {name!r}: {e.reason}") from None
        out.append((name, value))
    return tuple(out)


def parse_sets(schema: Schema, given: Mapping[str, str]) -> dict[str, Any]:
    """``--set FEATURE=VALUE`` texts as values: JSON for numbers and lists (a class name for a
    label with names), the text itself for a string or bytes value (bytes: its UTF-8, also for
    each text of a JSON list of bytes)."""
    out: dict[str, Any] = {}
    for name, text in given.items():
        feat = schema.features.get(name)
        if feat is None:
            out[name] = text  # (an unknown name: _check_sets says so)
            continue
        text_value = feat.dtype in ("string", "bytes") and feat.is_scalar
        if text_value or (feat.names is not None and text in feat.names):
            out[name] = text.encode() if text_value and feat.dtype == "bytes" else text  # (bytes: the text's UTF-8)
            continue
        try:
            out[name] = json.loads(text, parse_float=finite_float)  # 1e400 refused, as in every input
            if feat.dtype == "bytes" and isinstance(out[name], list):
                out[name] = [v.encode() if isinstance(v, str) else v for v in out[name]]
        except ValidationError as e:
            raise UsageError(f"update: feature {name!r}: {e.reason}") from None
        except ValueError:
            if feat.dtype in ("string", "bytes"):  # a list of text: JSON, as cat prints it
                wanted = f"a JSON list of {feat.dtype} values"
                raise UsageError(f"update: feature {name!r}: {text!r} is not {wanted}") from None
            article = "an" if feat.dtype.startswith("int") else "a"
            if feat.names is not None:  # a label: the names it has, as a predicate's error lists them
                listed = ", ".join(feat.names[:10]) + (", ..." if len(feat.names) > 10 else "")
                neither = f"neither a class name of {name} ({listed}) nor {article} {feat.dtype} value"
                raise UsageError(f"update: feature {name!r}: {text!r} is {neither}") from None
            raise UsageError(f"update: feature {name!r}: {text!r} is not {article} {feat.dtype} value") from None
    return out


def run_row_change(
    ds: DatasetHandle,
    change: RowChange,
    *,
    workers: int | None = None,
    executor: Executor | None = None,
    progress: Progress | None = None,
) -> RowChangeReport:
    """Apply ``change`` (see the module's docstring); the report says what it matched and did.
    An erasure goes on into every dataset derived from this one (filter, map, refresh: and
    from those), each in its own commit, after checking each can take the predicate (else
    nothing is erased): a deletion request must reach every copy. Run again after a failure
    part way, it finds nothing left where it got to and goes on from there."""
    heirs = [] if not change.purge or change.skip_derived else derived_datasets(ds, change.where)
    report = _rounds(ds, change, workers, executor, progress)
    for heir, where in heirs:  # (found transitively already: each erased from itself alone)
        again = replace(change, where=where, skip_derived=True)
        report.derived.append(run_row_change(heir, again, workers=workers, executor=executor))
    return report


def derived_datasets(ds: DatasetHandle, where: Where) -> list[tuple[DatasetHandle, Where]]:
    """The datasets derived from ``ds``, and from those (lineage), each with ``where`` checked
    against its schema; one line naming the first that cannot take it."""
    out: list[tuple[DatasetHandle, Where]] = []
    seen, todo = {ds.id}, [(ds, "filter")]
    while todo:
        parent, path = todo.pop(0)  # path: "map" once any step from ``ds`` was a map
        for name, operation in derived_names(parent):
            try:
                heir = type(ds)(ds.catalog, *ds.catalog.dataset_row(name))
            except CatalogError:  # one being made (not committed yet), or dropped just now
                continue
            if heir.id in seen:
                continue
            seen.add(heir.id)
            via = "filter" if path == operation == "filter" else "map"
            out.append((heir, _heir_where(ds, heir, via, where)))
            todo.append((heir, via))
    return out


def _heir_where(ds: DatasetHandle, heir: DatasetHandle, via: str, where: Where) -> Where:
    """``where`` for a dataset derived from ``ds`` (``via``: "filter" when by filters alone): a
    predicate its schema takes, or a function given a filter's rows (a map's rows are not the
    source's: the function cannot be trusted there)."""
    again = f"then run this again, or erase from {ds.name!r} alone with --skip-derived"
    if callable(where) and via != "filter":
        raise UsageError(
            f"delete --purge: {heir.name!r} was derived from {ds.name!r} by a map, whose rows a function of "
            f"{ds.name!r}'s rows may not read: erase from it with a predicate, or drop it; {again}"
        )
    try:
        return checked_where(heir, where)
    except CatalogError as e:
        raise UsageError(
            f"delete --purge: {heir.name!r}, derived from {ds.name!r}, cannot take the predicate ({e}): erase from it "
            f"with a predicate of its own, or drop it; {again}"
        ) from None


def _rounds(
    ds: DatasetHandle, change: RowChange, workers: int | None, executor: Executor | None, progress: Progress | None
) -> RowChangeReport:
    """``change`` applied to ``ds`` alone, planned again (up to ROUNDS times) when a rewrite
    retired what it read."""
    opts = change.options
    if not change.dry_run and (prior := token_commit(ds, opts.token)) is not None:
        report = _report(ds, change, snapshot(ds), [])
        report.version, report.duplicate = prior.version, True
        return report
    start = time.monotonic()
    for _round in range(ROUNDS):
        snap = snapshot(ds)
        shards = shards_in_split(ds, snap, change.split)
        todo = shards if change.purge else _to_read(ds, change, snap, shards)
        if progress is not None and len(todo) < len(shards):
            progress(sum(s.records for s in shards) - sum(s.records for s in todo))  # ruled out: done
        ex_given, n = where_jobs_run(change.where, change.sets, executor=executor, workers=workers)
        with executor_for(ex_given, n, max(len(todo), 1)) as ex:
            try:
                if change.purge:
                    report = erase(ds, change, change.rewrite_adopted, ex, progress)
                else:
                    report = _attempt(ds, change, snap, (shards, todo), ex, progress)
            except _StartOver:
                continue
        report.seconds = time.monotonic() - start
        return report
    raise CommitConflictError(
        f"shards of {ds.name!r} kept being rewritten (compact, migrate, delete) during this "
        f"{change.kind.value}: nothing was registered; run it again"
    )


def where_jobs_run(
    *functions: Any, executor: Executor | None, workers: int | None
) -> tuple[Executor | None, int | None]:
    """``executor`` and ``workers`` as given, or this process alone when a function the jobs
    call cannot go to other processes (a lambda, a nested function: pickle refuses them), so
    that it runs all the same, one shard after another."""
    try:
        pickle.dumps(functions)
    except Exception:  # PicklingError, AttributeError, TypeError: pickle's refusals vary
        return None, 1
    return executor, workers


def shards_in_split(ds: DatasetHandle, snap: Snapshot, split: str | None) -> list[LiveShard]:
    """The shards of ``snap`` a row change or a derivation reads: every split's, or ``split``'s
    (a name the dataset never had: one line naming the splits it has)."""
    if split is None:
        return list(snap.shards)
    validate_split(split)
    shards = [s for s in snap.shards if s.split == split]
    if not shards and split not in {s.split for s in snap.shards}:
        have = ", ".join(sorted({s.split for s in snap.shards})) or "none"
        raise SplitNotFoundError(f"dataset {ds.name!r} has no split {split!r} (splits: {have})")
    return shards


def _to_read(ds: DatasetHandle, change: RowChange, snap: Snapshot, shards: list[LiveShard]) -> list[LiveShard]:
    """The shards a predicate may match in: those its statistics (each feature's min, max and
    nulls) do not rule out are read, the rest need not be. A function as ``where``, a shard
    without statistics, or one written in another schema version (its statistics name that
    version's features) is always read."""
    if change.scan is not None or not isinstance(change.where, str):  # (a dedup's "where" is its key's words)
        return shards
    try:
        predicate = Predicate(change.where, snap.schema)
    except CatalogError as e:  # a schema migrated since it was checked: as the workers would say
        raise RowChangeError(str(e)) from None
    current = [s.rel for s in shards if s.schema_version == snap.schema_version]
    known = stored_feature_ranges(ds, current) if current else {}
    return [s for s in shards if (found := known.get(s.rel)) is None or predicate.may_match(found)]


def _report(ds: DatasetHandle, change: RowChange, snap: Snapshot, shards: list[LiveShard]) -> RowChangeReport:
    records = sum(s.records for s in snap.shards)
    return RowChangeReport(
        ds.name, change.kind.value, describe_where(change.where), change.dry_run, snap.version,
        shards_read=len(shards), shards_total=len(shards), records_before=records, records_after=records,
        split=change.split, sets=[name for name, _ in change.sets], purge=change.purge,
    )  # fmt: skip


def _attempt(
    ds: DatasetHandle,
    change: RowChange,
    snap: Snapshot,
    planned: tuple[list[LiveShard], list[LiveShard]],
    ex: Executor | None,
    progress: Progress | None,
) -> RowChangeReport:
    """One pass: the matches of every shard to read (``planned``: all the shards, and those to
    read), the rewrites of those with any, one commit."""
    everything, shards = planned
    report = _report(ds, change, snap, everything)
    report.shards_read = len(shards)
    drops = change.scan(ds, snap, shards, ex, progress) if change.scan is not None else None
    if drops is not None:
        progress = None  # the scan read every record: the rewrites' records are not counted again
    if change.dry_run:  # no intent, no file: a dry run writes nothing, not even to the manifest
        outcomes = _run(ds, change, snap, shards, None, ex, progress, drops)
        _tally(report, change, list(zip(shards, outcomes, strict=True)))
        return report
    with Intent.of(ds) as intent:
        outcomes = _run(ds, change, snap, shards, intent, ex, progress, drops)
        hit = [(s, o) for s, o in zip(shards, outcomes, strict=True) if o.matched]
        _tally(report, change, hit)
        if not hit:
            intent.settle(None, intent.discard_files)
            return report
        try:
            committed = commit(ds, _change(change, snap, hit, intent.id, report))
        except LiveChanged:
            raise _StartOver from None  # inside the intent's block: its files go with it
        except CommitConflictError:
            _start_over_if_migrated(ds, snap)
            raise
        if committed.duplicate:  # a twin with the token committed meanwhile
            intent.settle(None, intent.discard_files)
        report.version, report.duplicate = committed.version, committed.duplicate
        return report


def _run(
    ds: DatasetHandle,
    change: RowChange,
    snap: Snapshot,
    shards: list[LiveShard],
    intent: Intent | None,
    ex: Executor | None,
    progress: Progress | None,
    drops: list[Drops | None] | None = None,
) -> list[RowOutcome]:
    """Each shard's outcome; with ``drops`` (a scan's), jobs only for the shards holding some."""
    where = change.where if drops is None else None
    program = RowProgram(snap.schema.to_json(), where, change.batched, change.sets)
    root, on = ds.catalog.store.root, ds.catalog.statistics

    def job(i: int, s: LiveShard, drop: str | None = None) -> RowJob:
        prefix = intent.prefix(i) if intent is not None else ""
        return RowJob(
            program, s.path, s.records, s.bytes, s.compression, root, ds.name, prefix, on, change.dry_run,
            s.checksum, s.fingerprint, s.location is not None, drop,
        )  # fmt: skip

    done = (lambda job, _r: progress(job.records)) if progress else None
    if drops is None:
        return run_jobs(change_shard, [job(i, s) for i, s in enumerate(shards)], ex, intent, done)
    out = [RowOutcome(d.count if d is not None else 0, None) for d in drops]
    todo = [(i, d) for i, d in enumerate(drops) if d is not None]
    if change.dry_run or not todo:
        return out
    jobs = [job(i, shards[i], d.path) for i, d in todo]
    for (i, _d), outcome in zip(todo, run_jobs(change_shard, jobs, ex, intent, done), strict=True):
        out[i] = outcome
    return out


def _tally(report: RowChangeReport, change: RowChange, hit: list[tuple[LiveShard, RowOutcome]]) -> None:
    hit = [(s, o) for s, o in hit if o.matched]
    report.rows = sum(o.matched for _, o in hit)
    report.shards = len(hit)
    if change.kind in (DELETE, DEDUP):
        report.records_after = report.records_before - report.rows


def _change(
    change: RowChange, snap: Snapshot, hit: list[tuple[LiveShard, RowOutcome]], intent: str, report: RowChangeReport
) -> Change:
    """The commit: the shards with a match retired, each rewrite (if any rows remain) in its place."""
    opts = change.options
    added = [NewShard(o.file, s.seq, s.schema_version, s.split) for s, o in hit if o.file is not None]
    rows = counted(report.rows, "row")
    verb = "deleted" if change.kind is DELETE else f"set {', '.join(report.sets)} in"
    message = opts.message or f"{change.kind.value} where {report.where}: {verb} {rows}"
    if change.kind is DEDUP:
        message = opts.message or f"dedup by {report.where}: removed {counted(report.rows, 'duplicate row')}"
    author = opts.author or default_author()
    retired = RetireShards.of(s for s, _ in hit)
    made = Change(change.kind, snap.version, snap.schema_version, message, author, intent, (adding(added), retired), ())
    made.token = opts.token
    return made


def delete(
    ds: DatasetHandle,
    where: Where,
    *,
    split: str | None = None,
    dry_run: bool = False,
    batched: bool = False,
    purge: bool = False,
    rewrite_adopted: bool = False,
    skip_derived: bool = False,
    **run: Unpack[VerbKeywords],
) -> RowChangeReport:
    """A new version without the rows ``where`` matches: a predicate (``"label = 'cat' AND
    score < 0.2"``, see catalog.schema.predicates) or a function of a row returning a bool (of
    a batch of columns returning one bool per row, with ``batched``). Only the shards holding
    a match are rewritten; the remaining rows keep their order. ``split``: that split's rows
    only; ``dry_run``: count the matches, write nothing; no match: no commit (``version`` None).
    ``token``: a retry with the token of a delete that committed reports that commit.

    ``purge``: erase them, from every version still holding them, not only the new one (see
    :func:`erase`), and from the datasets derived from this one (see :func:`run_row_change`;
    ``skip_derived``: from this one alone); files the catalog does not own (adopted, linked)
    that hold a match are refused unless ``rewrite_adopted``. With ``split``, an erasure is
    refused (old versions' shards may have been in other splits)."""
    check_keywords("delete", run, VerbKeywords)
    if purge and split is not None:
        raise UsageError("delete --purge erases from every split and version: give no --split")
    if rewrite_adopted and not purge:  # a plain delete leaves every old file as it is: nothing to allow
        raise UsageError("--rewrite-adopted only means something with --purge (an erasure); add --purge or drop it")
    if skip_derived and not purge:
        raise UsageError("--skip-derived only means something with --purge (an erasure); add --purge or drop it")
    options = CommitOptions.taking(run)
    change = RowChange(
        DELETE, checked_where(ds, where), batched, (), split, dry_run, options, purge, rewrite_adopted, skip_derived
    )
    return run_row_change(ds, change, **jobs_of(run))


def update(
    ds: DatasetHandle,
    where: Where,
    set: Mapping[str, Any],  # the name: ds.update(where, set={...})
    *,
    split: str | None = None,
    dry_run: bool = False,
    batched: bool = False,
    **run: Unpack[VerbKeywords],
) -> RowChangeReport:
    """A new version whose rows ``where`` matches (as :func:`delete`'s) have the features of
    ``set`` set: a value (checked against the schema at once) or a function of the row; each
    updated row is checked against the schema. Only the shards holding a match are rewritten."""
    check_keywords("update", run, VerbKeywords)
    sets = _check_sets(snapshot(ds).schema, set)
    change = RowChange(UPDATE, checked_where(ds, where), batched, sets, split, dry_run, CommitOptions.taking(run))
    return run_row_change(ds, change, **jobs_of(run))


def checked_where(ds: DatasetHandle, where: Where) -> Where:
    """``where`` checked against the dataset's schema now (a predicate's error before any work)."""
    if isinstance(where, str):
        Predicate(where, snapshot(ds).schema)
    elif not callable(where):
        raise UsageError(f"where is a predicate (text) or a function, not {type(where).__name__}")
    return where


# --------------------------------------------------------------------------- erasure


def _retired_shards(ds: DatasetHandle) -> list[LiveShard]:
    """The dataset's retired shards whose files are still there (old versions read them)."""
    with mf.read_txn(ds.catalog.engine) as conn:
        rows = conn.execute(
            select(SHARDS)
            .where(SHARDS.c.dataset_id == ds.id, SHARDS.c.removed_version.is_not(None), SHARDS.c.collected_at.is_(None))
            .order_by(SHARDS.c.id)
        ).all()
    return [LiveShard(*live_values(ds.catalog.store.shard_url, r)) for r in rows]


def _schemas(ds: DatasetHandle, versions: set[int]) -> dict[int, Schema]:
    with mf.read_txn(ds.catalog.engine) as conn:
        return {v: load_schema(conn, ds.id, v) for v in sorted(versions)}


def not_owned(s: LiveShard) -> bool:
    """An adopted file (read where it is) or a linked one (a hard link to the user's file): its
    bytes are not the catalog's to erase."""
    return s.location is not None or (s.fingerprint or "").startswith(("stat:", "etag:"))


def _programs(change: RowChange, shards: list[LiveShard], schemas: dict[int, Schema]) -> dict[int, RowProgram]:
    """A program per schema version the shards are in: old versions' records are read with
    their own schema, and a predicate must make sense there too."""
    out = {}
    for sv, schema in schemas.items():
        if isinstance(change.where, str):
            try:
                Predicate(change.where, schema)
            except PredicateError as e:
                raise RowChangeError(
                    f"erase: the shards of schema version {sv} cannot be searched ({e}): nothing was erased"
                ) from None
        out[sv] = RowProgram(schema.to_json(), change.where, change.batched)
    return out


def _erase_jobs(
    ds: DatasetHandle, change: RowChange, shards: list[LiveShard], intent: Intent | None, dry_run: bool
) -> list[RowJob]:
    programs = _programs(change, shards, _schemas(ds, {s.schema_version for s in shards}))
    root, on = ds.catalog.store.root, ds.catalog.statistics
    return [
        RowJob(
            programs[s.schema_version], s.path, s.records, s.bytes, s.compression, root, ds.name,
            intent.prefix(i) if intent is not None else "", on, dry_run, s.checksum, s.fingerprint,
            s.location is not None,
        )
        for i, s in enumerate(shards)
    ]  # fmt: skip


def linked_in(shards: list[LiveShard]) -> set[int]:
    """The ids of ``shards`` whose local file has more hard links than the catalog has names
    for it among ``shards``: a ``--link``ed input whose fingerprint says nothing (linked just
    now, the link itself changes its ctime: "unchecked"; or from before manifest format 8).
    A restore's own links are counted as the catalog's names, so they are not caught."""
    names: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for s in shards:
        if s.location is not None or file_io(s.path).remote:
            continue  # adopted (not_owned says so), or an object: no hard links there
        try:
            st = os.stat(s.path)
        except (OSError, ValueError):
            continue  # gone: the read says so
        names.setdefault((st.st_dev, st.st_ino), []).append((s.id, st.st_nlink))
    return {i for same in names.values() if same[0][1] > len(same) for i, _ in same}


def _refuse_not_owned(ds: DatasetHandle, hit: list[LiveShard], every: list[LiveShard], rewrite_adopted: bool) -> None:
    linked = linked_in(every) if not rewrite_adopted else set()
    theirs = [s for s in hit if not_owned(s) or s.id in linked]
    if theirs and not rewrite_adopted:
        shown = ", ".join(s.location or s.path for s in theirs[:3]) + (", ..." if len(theirs) > 3 else "")
        raise RowChangeError(
            f"erase: matching rows of {ds.name!r} are in {counted(len(theirs), 'file')} the catalog does not own "
            f"(adopted or linked: {shown}): it cannot remove their bytes; delete the rows from those files yourself, "
            "or allow rewriting them into the data area (--rewrite-adopted; the files themselves stay as they "
            "are): nothing was erased"
        )


def erase(
    ds: DatasetHandle,
    change: RowChange,
    rewrite_adopted: bool,
    ex: Executor | None,
    progress: Progress | None,
) -> RowChangeReport:
    """Remove the rows ``change`` matches from every version that holds them: each shard file,
    live or retired, holding one is replaced by a copy without them in one commit (kind
    "erase"), then the old files are deleted; a crash in between leaves them unregistered,
    for gc. No new shard rows: old versions read the copies."""
    snap = snapshot(ds)
    shards = [*snap.shards, *_retired_shards(ds)]
    report = _report(ds, change, snap, shards)
    scan = run_jobs(change_shard, _erase_jobs(ds, change, shards, None, True), ex, None, None)
    hit = [s for s, o in zip(shards, scan, strict=True) if o.matched]
    live = {s.id for s in snap.shards}
    report.rows = sum(o.matched for s, o in zip(shards, scan, strict=True) if s.id in live)
    report.erased = sum(o.matched for o in scan)
    report.shards = len(hit)
    report.records_after = report.records_before - report.rows
    if change.dry_run:
        return report
    if not hit:
        report.stats_dropped = _drop_collected_stats(ds)
        if report.stats_dropped:
            _scrub(ds)
        report.unregistered = _unregistered(ds)
        return report
    _refuse_not_owned(ds, hit, shards, rewrite_adopted)
    with Intent.of(ds) as intent:
        done = (lambda job, _r: progress(job.records)) if progress else None
        outcomes = run_jobs(change_shard, _erase_jobs(ds, change, hit, intent, False), ex, intent, done)
        items = tuple(Replacement(s.id, s.rel, o.file) for s, o in zip(hit, outcomes, strict=True))
        opts = change.options
        # The predicate and the count stay in history whatever the message (never the rows).
        erased = f"erase where {report.where}: {counted(report.erased, 'row')}"
        message = f"{opts.message} ({erased})" if opts.message else erased
        made = Change(ERASE, snap.version, snap.schema_version, message, opts.author or default_author(), intent.id)
        made = made.with_updates(ReplaceShards(items))
        made.token = opts.token
        try:
            committed = commit(ds, made)
        except LiveChanged:
            raise _StartOver from None
        except CommitConflictError:
            _start_over_if_migrated(ds, snap)
            raise
    report.version, report.duplicate = committed.version, committed.duplicate
    if not committed.duplicate:
        report.files_removed = _remove_old(ds, hit)
        report.stats_dropped = _drop_collected_stats(ds)
        _scrub(ds)
    report.unregistered = _unregistered(ds)
    return report


def _unregistered(ds: DatasetHandle) -> int:
    """Shard files in the dataset's folder that no shard row names: a writer's at work (its
    commit to come, or refused if it rewrote what the erasure changed) or a killed one's, which
    an erasure does not read and may hold erased rows (``gc --grace 0`` removes them once no
    writer runs: the grace keeps a live writer's)."""
    rels = [f.rel for f in ds.catalog.store.listing({ds.name}) if naming.is_catalog_file(f.name)]
    known: set[str] = set()
    with mf.read_txn(ds.catalog.engine) as conn:
        for lo in range(0, len(rels), 500):
            known.update(conn.execute(select(SHARDS.c.path).where(SHARDS.c.path.in_(rels[lo : lo + 500]))).scalars())
    return len(set(rels) - known)


def _drop_collected_stats(ds: DatasetHandle) -> int:
    """Drop the statistics of the dataset's shards gc collected: they hold values of records no
    file holds any more, so none can be checked for the erased rows (the versions that read
    those shards then show their statistics as not computed). How many were dropped."""
    collected = select(SHARDS.c.path).where(SHARDS.c.dataset_id == ds.id, SHARDS.c.collected_at.is_not(None))

    def txn() -> int:
        with mf.write_txn(ds.catalog.engine) as conn:
            gone = SHARD_STATS.c.path.in_(collected)
            return int(conn.execute(sql_delete(SHARD_STATS).where(SHARD_STATS.c.dataset_id == ds.id, gone)).rowcount)

    return mf.with_lock_retry(txn)


def _scrub(ds: DatasetHandle) -> None:
    """The replaced shards' statistics (their values) were deleted rows: no copy may stay in the
    manifest's files. Committed already: a failure here is a warning, not the erasure's."""
    try:
        if not mf.scrub(ds.catalog.engine):
            logger.warning("erase: a reader kept the manifest's log: its old pages go at its next checkpoint")
    except CatalogError as e:
        logger.warning("erase: committed, but the manifest may keep old pages of the erased rows: %s", e)


def _remove_old(ds: DatasetHandle, shards: list[LiveShard]) -> int:
    """Delete the replaced files the catalog owns, and their record indexes (never an adopted
    file: not the catalog's; a linked one's name in the data area goes, its bytes stay the
    user's). A file that cannot be deleted now is unregistered: gc deletes it."""
    removed = 0
    for s in shards:
        if s.location is None and ds.catalog.store.remove(s.rel):
            removed += 1
        if s.index_checksum is not None:
            ds.catalog.store.remove(index_rel(s.rel))
    return removed
