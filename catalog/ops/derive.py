"""New datasets derived from others: ``filter`` (the rows a predicate matches) and ``map`` (a
function of each row, or of each batch of columns with ``batched``).

Each source shard is read once and makes at most one shard of the new dataset, on the executor,
in the source's order whatever the worker count; splits carry over. The new dataset's first
commit (kind "derive") holds every shard and its lineage (the manifest's ``lineage`` table):
the source and the version read, the operation, its predicate or the function's qualified name
and a hash of its code. :func:`refresh` applies the recorded operation to the rows the source
appended since. A failure names the source shard and record; nothing is registered then.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import itertools
import operator
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sqlalchemy import select

from catalog import manifest as mf
from catalog.commit.changes import DERIVE, Change, NewShard, RecordLineage, adding
from catalog.commit.handles import DatasetHandle, LiveShard, Snapshot, lineage, snapshot
from catalog.commit.intents import Intent
from catalog.commit.plans import ReadPlan, plan
from catalog.commit.protocol import commit
from catalog.commit.statistics import stored_stats
from catalog.commit.values import LineageEntry, default_author
from catalog.errors import (
    CatalogError,
    RowChangeError,
    SchemaError,
    UsageError,
    ValidationError,
)
from catalog.executors import executor_for, run_jobs
from catalog.manifest import COMMITS, SHARDS
from catalog.ops.options import CommitOptions, RunKeywords, Unpack, VerbKeywords
from catalog.ops.rowchanges import RowProgram, Where, _Compiled, describe_where, job_schema, where_jobs_run
from catalog.readers.batches import records as plan_records
from catalog.readers.batches import rows
from catalog.readers.spans import Window, shard_windows
from catalog.schema import Feature, Ragged, Schema, batch_rows
from catalog.schema.features import same_declaration
from catalog.schema.frames import column_batches, rows_columns
from catalog.stats.dataset import DatasetStats
from catalog.stats.tally import written_again
from catalog.storage import UNLIMITED, ShardFile, ShardSink, Store, clear_attempt, shard_batches, store_for
from catalog.storage.content import check_named
from catalog.storage.sink import Decoded
from catalog.words import counted

FILTER, MAP = "filter", "map"
Derived = tuple[int, ShardFile | None]  # a job's result: records written, the new shard (None: none)
INFER_ROWS = 1000  # a map's schema, when not given, is inferred from its outputs of this many rows


@dataclass(frozen=True)
class Operation:
    """What a derivation does to the source's rows (picklable: module-level functions only)."""

    kind: str  # FILTER or MAP
    where: Where | None = None  # a filter's predicate (text) or function of a row
    fn: Callable[..., Any] | None = None  # a map's function of a row (or of a batch)
    batched: bool = False

    def describe(self) -> str:
        if self.kind == FILTER:
            return f"filter where {describe_where(self.where or '')}"
        return f"map {function_name(self.fn)}" + (" (batched)" if self.batched else "")


def function_name(fn: Any) -> str:
    """ "module:qualname", how lineage names a function (and how refresh imports it again)."""
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', type(fn).__name__)}"


def code_hash(fn: Any) -> str | None:
    """ "sha256:" of a function's source (else of its bytecode and constants); None: no function."""
    if fn is None or isinstance(fn, str):
        return None
    try:
        text = inspect.getsource(fn).encode()
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        text = repr((code.co_code, code.co_consts)).encode() if code is not None else repr(fn).encode()
    return "sha256:" + hashlib.sha256(text).hexdigest()


def load_function(name: str, what: str = "--fn") -> Callable[..., Any]:
    """The function ``module:qualname`` names (`catalog map --fn`, a refresh of a map); the
    working directory is searched first, as ``python -m`` does."""
    module, colon, qualname = name.partition(":")
    if not colon or not module or not qualname:
        raise UsageError(f"{what} {name!r}: name a function as module:function (e.g. features:add_length)")
    if not all(part.isidentifier() for part in module.split(".")):  # "../x", ".x": no module's name
        raise UsageError(f"{what} {name!r}: cannot import {module!r} (not a module name)")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found: Any = importlib.import_module(module)
    except ImportError as e:
        raise UsageError(f"{what} {name!r}: cannot import {module!r} ({e})") from None
    except (Exception, SystemExit) as e:  # the user's module failed as it ran: their error, one line
        raise UsageError(f"{what} {name!r}: cannot import {module!r} ({type(e).__name__}: {e})") from None
    try:
        for part in qualname.split("."):
            found = getattr(found, part)
    except AttributeError:
        raise UsageError(f"{what} {name!r}: module {module!r} has no {qualname!r}") from None
    if not callable(found):
        raise UsageError(f"{what} {name!r}: not a function but a {type(found).__name__}")
    return found


# --------------------------------------------------------------------------- the workers


@dataclass(frozen=True)
class DeriveJob:
    """One source shard into (at most) one shard of the new dataset."""

    op: Operation
    source_schema: dict[str, Any]
    target_schema: dict[str, Any]
    source: str  # the shard's absolute path or URL
    records: int
    size: int
    compression: str  # of the new shard: the new dataset's
    data_root: str
    dataset: str  # the new dataset
    prefix: str
    statistics: bool
    checksum: str
    fingerprint: str | None
    adopted: bool
    source_compression: str = "none"  # the source shard's
    index_at: str | None = None  # where the source shard's record index is (with index_checksum)
    index_checksum: str | None = None  # None: no index registered (the shard is read through)
    source_stats: bytes | None = None  # the source shard's statistics (a batched map's, to reuse)
    sync: bool = True  # False: the new shard's files are not fsynced by the job (Syncs does it)


class _Program:
    """A job's operation made ready in its worker: the schemas, the filter's test."""

    def __init__(self, job: DeriveJob) -> None:
        self.op = job.op
        self.source = job_schema(job.source_schema)
        self.target = job_schema(job.target_schema) if job.op.kind == MAP else self.source
        filtering = job.op.kind == FILTER
        self.test = _Compiled(RowProgram(job.source_schema, job.op.where or "", job.op.batched)) if filtering else None
        self.scalar = not self.source.sequence and all(f.is_scalar for f in self.source.features.values())
        self.through = PassThrough(self.source, self.target, job.source_stats if job.op.kind == MAP else None)

    @property
    def by_row(self) -> bool:
        """A map of each row: its errors name the record."""
        return self.op.kind == MAP and not self.op.batched

    def one(self, record: bytes) -> bytes:
        """A row map's output record of one source record."""
        return self.target.encode(_row_of(self.op.fn(self.source.decode(record))))  # type: ignore[misc]

    def rows(self, records: list[bytes]) -> list[dict[str, Any]] | None:
        """The rows of ``records`` as ``Schema.decode`` makes them, decoded a batch at a time
        (one columnar parse instead of one per record: most of a row map's time otherwise);
        None when a feature is not a scalar (its values' types differ between the two) or the
        batch fails to decode (the record-at-a-time path then names the record)."""
        if not self.scalar:
            return None
        try:
            columns = self.source.decode_batch(records)
        except Exception:  # (a record that is no Example, say)
            return None
        return batch_rows(columns, len(records))

    def write_batch(self, sink: ShardSink, batch: list[bytes] | Window) -> int:
        """A filter's or a batched map's records made from ``batch`` (records of one source
        shard, or a window of its bytes) written to ``sink``; returns how many."""
        if self.test is not None:
            return self.keep(sink, batch)
        if isinstance(batch, Window):
            decoded = self.source.decode_spans(batch.raw, batch.starts, batch.lengths)
        else:
            decoded = self.source.decode_batch(batch)
        before = self.through.before(decoded)
        out = self.op.fn(decoded)  # type: ignore[misc]
        if sink.tallying:
            self.through.tell(sink, self.through.passed(decoded, out, before))
        written = 0
        for columns, n in column_batches(out, self.target.features, arrays=True):
            framed: list[bytes] = []
            records, entries = self.encoded(columns, n, sink.tallying, framed)
            sink.write_encoded(records, columns, {}, entries, _no_beat, b"".join(framed) if framed else None)
            written += n
        return written

    def keep(self, sink: ShardSink, batch: list[bytes] | Window) -> int:
        """A filter's kept records of ``batch`` written to ``sink`` as they were (never encoded
        again); from a window, with their framing (no CRC computed again: the reader checked
        it); returns how many. A predicate decodes its own features only."""
        assert self.test is not None
        if not isinstance(batch, Window):
            mask = self.test.mask(batch)
            sink.write_many([r for r, keep in zip(batch, mask.tolist(), strict=True) if keep])
            return int(mask.sum())
        predicate = self.test.predicate
        if predicate is not None:
            wanted = predicate.features
            mask = predicate.mask(self.source.decode_spans(batch.raw, batch.starts, batch.lengths, wanted))
        else:
            mask = self.test.mask(batch.records())
        kept = np.flatnonzero(mask)
        framed, lengths = batch.framed(kept)
        sink.write_framed(framed, lengths, lambda: batch.records(kept), lambda: self.decoded(batch, kept))
        return len(kept)

    def decoded(self, window: Window, kept: np.ndarray) -> Decoded:
        """The kept records of ``window`` decoded where they lie, for their statistics."""
        absent: dict[str, np.ndarray] = {}
        ragged: Ragged = {}
        columns = self.source.decode_spans(window.raw, window.starts[kept], window.lengths[kept], None, absent, ragged)
        return columns, absent, ragged

    def encoded(
        self, columns: Mapping[str, Sequence[Any]], n: int, tallying: bool, framed: list[bytes] | None = None
    ) -> tuple[Sequence[bytes], dict[str, Sequence[bytes]]]:
        """The records of ``n`` rows given as columns, and (``tallying``) each feature's entries,
        which ``ShardSink.write_encoded`` gives the statistics instead of the records decoded
        again (``framed``: see Schema.encode_columns). A default an output lacked counts as
        present there, as in a record decoded (appends count it as filled: ``filled`` is not asked)."""
        entries: dict[str, Sequence[bytes]] = {}
        return self.target.encode_columns(columns, n, None, entries if tallying else None, framed), entries


class PassThrough:
    """A batched map's columns passed through unchanged (the very arrays it was given, with the
    same values after it ran), whose statistics over a whole shard are then its source shard's:
    taken from there (ShardSink.give_stats) instead of tallied again. Only required scalars of
    the same declaration in both schemas, and only when the source shard has statistics."""

    def __init__(self, source: Schema, target: Schema, stats: bytes | None) -> None:
        known = DatasetStats.from_bytes(stats).features if stats else {}
        self.stats = {
            name: known[name]
            for name, f in target.features.items()
            if name in known and _plain_scalar(f) and (was := source.features.get(name)) and same_declaration(was, f)
        }
        if source.sequence or target.sequence:
            self.stats = {}
        self.given: set[str] | None = None  # what the shard's first batch passed through

    def before(self, decoded: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Copies of the candidate columns, to see after the function whether it changed them
        in place (a shallow copy of texts: Python strings do not change)."""
        return {n: c.copy() for n in self.stats if type(c := decoded.get(n)) is np.ndarray}

    def passed(self, decoded: Mapping[str, Any], out: Any, before: Mapping[str, np.ndarray]) -> set[str]:
        """The features ``out`` (the function's output of ``decoded``) passes through unchanged."""
        if not isinstance(out, Mapping):
            return set()
        return {n for n, was in before.items() if _unchanged(out.get(n), decoded[n], was)}

    def tell(self, sink: ShardSink, passed: set[str]) -> None:
        """Give ``sink`` the source's statistics of what the first batch passed through; take
        them back if a later batch does not pass one of them through (the shard is tallied then)."""
        if self.given is None:
            given = {n: written_again(self.stats[n]) for n in passed}
            self.given = passed if sink.give_stats(given) else set()
        elif not self.given <= passed:
            sink.take_back_stats()
            self.given = set()


def _plain_scalar(f: Feature) -> bool:
    return f.is_scalar and not f.tensor and not f.optional and f.dtype in ("int64", "float32", "string", "bytes")


def _unchanged(now: Any, given: np.ndarray, was: np.ndarray) -> bool:
    """Whether ``now`` is the column ``given`` to the function, holding the values ``was``."""
    if now is not given or now.dtype != was.dtype or now.shape != was.shape:
        return False
    if was.dtype == object:  # the same objects (immutable: str, bytes)
        try:  # their addresses compared, as ``is`` compares (both arrays hold every object)
            return bool(np.array_equal(np.frombuffer(now, dtype=np.uintp), np.frombuffer(was, dtype=np.uintp)))
        except (ValueError, BufferError):  # (a view that is not contiguous)
            return all(map(operator.is_, now.tolist(), was.tolist()))
    return bool(now.tobytes() == was.tobytes())  # bit for bit (a NaN equals itself here)


def _no_beat() -> None:
    """The jobs' heartbeat is the executor's (run_jobs), not the sink's."""


def _row_of(out: Any) -> Mapping[str, Any]:
    if not isinstance(out, Mapping):
        raise UsageError(f"map's function must return a row (a dict of feature values), got {type(out).__name__}")
    for name in out:
        if not isinstance(name, str):  # else inferred as the feature "7", then missing from the very row
            shown = f"{name!r} ({type(name).__name__})"
            raise UsageError(f"map's function returned a feature name that is not text: {shown}")
    return out


def derive_shard(job: DeriveJob) -> Derived:
    """Module-level (picklable) worker: (records written, the new shard; None when none)."""
    try:
        program = _Program(job)
    except CatalogError as e:
        raise RowChangeError(str(e)) from None
    check_named(job.source, job.checksum, job.fingerprint, job.adopted)
    clear_attempt(store_for(job.data_root), job.dataset, job.prefix)  # a rerun of a task whose worker died
    target = program.target if job.statistics else None
    sink = ShardSink(
        job.data_root,
        job.dataset,
        job.prefix,
        UNLIMITED,
        UNLIMITED,
        job.sync,
        compression=job.compression,
        schema=target,
    )
    written = 0
    try:
        written = _write(job, program, sink)
    except BaseException:
        sink.abort()
        raise
    shards = sink.close()
    return written, (shards[0] if shards else None)


def _write(job: DeriveJob, program: _Program, sink: ShardSink) -> int:
    written = read = 0
    for batch in _source_batches(job, program):
        if program.by_row:
            _write_rows(job, program, sink, batch.records() if isinstance(batch, Window) else batch, read)
            written += len(batch)
        else:
            try:
                written += program.write_batch(sink, batch)
            except (Exception, SystemExit) as e:
                raise _failed(job, read, len(batch), e) from None
        read += len(batch)
    if read != job.records:
        raise RowChangeError(f"{job.source}: {counted(read, 'record')} read, {job.records} registered")
    return written


def _source_batches(job: DeriveJob, program: _Program) -> Iterator[list[bytes] | Window]:
    """The source shard's records: windows of its bytes when it is uncompressed and indexed
    (checked a window at a time, decoded where they lie), else batches of records."""
    if job.source_compression == "none" and job.index_at and job.index_checksum and not program.source.sequence:
        pad = program.source.spans_pad
        yield from shard_windows(job.source, job.index_at, job.records, job.size, job.index_checksum, pad, job.checksum)
    else:
        yield from shard_batches(job.source, job.size)


def _write_rows(job: DeriveJob, program: _Program, sink: ShardSink, batch: list[bytes], read: int) -> None:
    """A row map of one batch (its first record the shard's ``read``-th): errors name the record,
    the first that fails (its function raising, or its output not encoding), as record by record."""
    rows = program.rows(batch)
    if rows is None:
        for i, record in enumerate(batch):
            try:
                sink.write(program.one(record))
            except (Exception, SystemExit) as e:
                raise _failed(job, read + i, 1, e) from None
        return
    outputs: list[Any] = []
    failure: BaseException | None = None
    try:
        for row in rows:
            outputs.append(program.op.fn(row))  # type: ignore[misc]
    except (Exception, SystemExit) as e:
        failure = e  # after the outputs before it: one of them may fail first
    _write_outputs(job, program, sink, outputs, read)
    if failure is not None:
        raise _failed(job, read + len(outputs), 1, failure) from None


def _write_outputs(job: DeriveJob, program: _Program, sink: ShardSink, outputs: list[Any], read: int) -> None:
    """A row map's outputs encoded a feature at a time (encode_columns) when they are dicts of
    the target's features; else, or when one does not encode, row by row, for the error."""
    features = program.target.features
    if outputs and all(type(o) is dict and o.keys() <= features.keys() for o in outputs):
        columns = rows_columns(outputs, list(features))
        try:
            records, entries = program.encoded(columns, len(outputs), sink.tallying)
        except Exception:
            records = None  # one does not encode: row by row, for its error
        if records is not None:
            try:
                sink.write_encoded(records, columns, {}, entries, _no_beat)
            except Exception as e:
                raise _failed(job, read, len(outputs), e) from None
            return
    encode, write = program.target.encode, sink.write
    for i, out in enumerate(outputs):
        try:
            write(encode(_row_of(out)))
        except Exception as e:
            raise _failed(job, read + i, 1, e) from None


def _failed(job: DeriveJob, first: int, n: int, e: BaseException) -> RowChangeError:
    """One line naming the source shard and the record (or a batch's records) that failed."""
    what = "filter" if job.op.kind == FILTER else "map"
    at = f"record {first}" if n == 1 else f"records {first}-{first + n - 1}"
    if isinstance(e, ValidationError):
        row = f"row {e.record}: " if e.record is not None and n > 1 else ""
        feature = f"feature {e.feature!r}: " if e.feature else ""
        return RowChangeError(f"{job.source}: {at}: {what}'s output: {row}{feature}{e.reason}")
    if isinstance(e, CatalogError):
        return RowChangeError(f"{job.source}: {at}: {e}")
    return RowChangeError(f"{job.source}: {at}: {what}'s function raised {type(e).__name__}: {e}")


# --------------------------------------------------------------------------- plan and commit


@dataclass
class DeriveReport:
    """What a filter, map or refresh made: the new dataset's ``version`` (None: nothing to do)."""

    dataset: str
    source: str
    source_version: int
    operation: str  # Operation.describe()
    version: int | None = None
    records_read: int = 0
    records: int = 0  # written
    shards: int = 0  # written
    split: str | None = None
    seconds: float = 0.0
    refreshed: bool = False
    duplicate: bool = False  # a retry with the token of a derivation that committed

    def to_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("dataset", "source", "source_version", "operation", "version")}
        out |= {"records_read": self.records_read, "records": self.records, "shards": self.shards}
        out |= {"split": self.split, "seconds": round(self.seconds, 3), "refreshed": self.refreshed}
        return out | {"duplicate": self.duplicate}


def target_schema(src: DatasetHandle, op: Operation, snap: Snapshot, given: Schema | None, split: str | None) -> Schema:
    """A filter's: the source's, whole (class names, image metadata...). A map's: ``given``, or
    inferred from its outputs of the first rows, each feature that passes through unchanged
    (same name, dtype and shape) keeping the source's declaration."""
    if op.kind == FILTER:
        return snap.schema
    if given is not None:
        return given
    read = plan(src, snap.version, split)
    # a batched map's first records decoded a batch at once, as its jobs decode them (not a row
    # made of each, encoded again and decoded: most of this inference's time)
    first: list[Any] = list(itertools.islice(plan_records(read) if op.batched else rows(read, None), INFER_ROWS))
    if not first:
        raise UsageError(f"map: {src.name!r} has no row to infer the output schema from: give schema=")
    outputs = _first_outputs(op, snap.schema, first, read)
    try:
        inferred = Schema.infer(outputs)
    except ValidationError as e:  # (a batch's columns of different lengths, or not columns)
        path, at = _first_at(read, 0, len(first), op.batched)
        feature = f"feature {e.feature!r}: " if e.feature else ""
        raise RowChangeError(f"{path}: {at}: map's output: {feature}{e.reason}") from None
    except SchemaError as e:
        raise SchemaError(f"map's first outputs: {e}: give schema= (the output's schema)") from None
    if not inferred.features:
        raise UsageError("map: its first outputs hold no feature: give schema= or return rows with values")
    return _declared(snap.schema, inferred, _output_values(outputs, op.batched))


def _declared(source: Schema, inferred: Schema, values: Callable[[str], list[Any]]) -> Schema:
    """The inferred schema with the source's declarations of the features that pass through: a
    context feature's (class names, a tensor's encoding and dtype...) when the source's
    declaration takes every output value of it (``values``), and a sequence feature's steps
    (its rows are arrays of steps, which inference alone takes for a list in the context)."""
    context, steps = [], []
    for f in inferred.features.values():
        step = source.sequence.get(f.name)
        if step is not None and (f.dtype, f.shape, f.tensor) == (step.dtype, (None, *step.shape), step.tensor):
            steps.append(step)
        else:
            context.append(_kept(source.features.get(f.name), f, values))
    return Schema(context, steps)


def _output_values(outputs: Any, batched: bool) -> Callable[[str], list[Any]]:
    """A feature's values in the function's first outputs (rows, or a batch's columns)."""
    if batched:
        return lambda name: list(outputs[name])
    return lambda name: [row.get(name) for row in outputs]


def _first_outputs(op: Operation, schema: Schema, first: list[Any], read: ReadPlan) -> Any:
    """The function's outputs of the ``first`` rows of ``read`` (batched: its first records);
    a failure names the source shard and record, as one in the jobs does (a batch: its first
    record, and how many)."""
    outputs: list[Any] = []
    batch = schema.decode_batch(first) if op.batched else None
    try:
        if op.batched:
            return op.fn(batch)  # type: ignore[misc]
        for row in first:
            outputs.append(_row_of(op.fn(row)))  # type: ignore[misc]
        return outputs
    except (Exception, SystemExit) as e:  # (SystemExit: sys.exit in the function, a failure of it too)
        path, at = _first_at(read, len(outputs), len(first), op.batched)
        if isinstance(e, CatalogError):
            raise RowChangeError(f"{path}: {at}: {e}") from None
        raise RowChangeError(f"{path}: {at}: map's function raised {type(e).__name__}: {e}") from None


def _first_at(read: ReadPlan, done: int, first: int, batched: bool) -> tuple[str, str]:
    """(shard, "record N") of the row after the ``done`` first ones; batched, the records of
    the batch of the ``first`` rows: "records N-M", or "records N on (...)" across shards."""
    path, record = _located(read, done)
    if not batched:
        return path, f"record {record}"
    last_path, last = _located(read, first - 1)
    return path, f"records {record}-{last}" if last_path == path else f"records {record} on (the first {first} rows)"


def _located(read: ReadPlan, i: int) -> tuple[str, int]:
    """The shard and record number of the plan's ``i``-th row (a batch's rows may run on into
    the next shards: its first record names it)."""
    for s in read.shards:
        if i < s.count:
            return s.path, s.start + i
        i -= s.count
    return read.dataset, i


def _kept(source: Feature | None, inferred: Feature, values: Callable[[str], list[Any]]) -> Feature:
    """The source's declaration of a feature the map's outputs keep, when it takes every output
    value (inference reads an int8 tensor's values as int64s, say); else the inferred one."""
    if source is None:
        return inferred
    kept = replace(source, name=inferred.name, optional=inferred.optional or source.optional)
    same = (source.dtype, source.shape, source.tensor) == (inferred.dtype, inferred.shape, inferred.tensor)
    if same:
        return kept
    encode = Schema([kept]).encode
    try:
        for value in values(inferred.name):
            encode({inferred.name: value})
    except (CatalogError, TypeError, ValueError, OverflowError):
        return inferred
    return kept


def lineage_row(src: DatasetHandle, op: Operation, source_version: int, split: str | None) -> dict[str, Any]:
    """The lineage a derivation records (without the dataset, version and time)."""
    text = op.where if isinstance(op.where, str) else None
    fn = op.fn if op.kind == MAP else (op.where if not isinstance(op.where, str) else None)
    return {
        "source": src.name, "source_id": src.id, "source_version": source_version, "operation": op.kind,
        "predicate": text, "function": None if fn is None else function_name(fn), "code_hash": code_hash(fn),
        "split": split, "batched": op.batched,
    }  # fmt: skip


def run(
    src: DatasetHandle,
    dst: DatasetHandle,
    op: Operation,
    snap: Snapshot,
    shards: list[LiveShard],
    split: str | None,
    **kw: Unpack[VerbKeywords],
) -> DeriveReport:
    """Derive ``shards`` of ``src`` (at ``snap``) into ``dst`` (registered with the target
    schema): one job per shard, one commit of every new shard and the lineage row."""
    start = time.monotonic()
    report = DeriveReport(dst.name, src.name, snap.version, op.describe(), split=split)
    origin = f"{op.kind} of {src.name} version {snap.version}"
    opts, progress = CommitOptions.taking(kw), kw.get("progress")
    here = kw.get("executor") is None  # the jobs run on this machine: their files synced here, together
    executor, workers = where_jobs_run(op, executor=kw.get("executor"), workers=kw.get("workers"))
    with (
        executor_for(executor, workers, max(len(shards), 1)) as ex,
        Intent.of(dst) as intent,
        Syncs(dst.catalog.store, dst.name, here) as syncs,
    ):
        known = _source_stats(src, dst, op, [s for s in shards if s.schema_version == snap.schema_version])
        jobs = [_job(src, dst, op, snap, s, intent.prefix(i), known.get(s.rel), not here) for i, s in enumerate(shards)]
        results = run_jobs(derive_shard, jobs, ex, intent, syncs.after(progress))
        syncs.wait()
        added = [
            NewShard(replace(f, source=origin), None, None, s.split)
            for s, (_n, f) in zip(shards, results, strict=True)
            if f
        ]
        row = lineage_row(src, op, snap.version, split)
        text = opts.message or f"{op.describe()}, from {src.name} version {snap.version}"
        change = Change(DERIVE, dst.version, dst.schema_version, text, opts.author or default_author(), intent.id)
        change = change.with_updates(adding(added), RecordLineage(row))
        change.token = opts.token
        committed = commit(dst, change)
    report.version, report.shards = committed.version, len(added)
    report.records_read, report.records = sum(s.records for s in shards), sum(n for n, _f in results)
    report.seconds = time.monotonic() - start
    return report


def _source_stats(src: DatasetHandle, dst: DatasetHandle, op: Operation, shards: list[LiveShard]) -> dict[str, bytes]:
    """The source shards' stored statistics by path, for a batched map to reuse those of the
    columns it passes through (PassThrough); none for other operations or without statistics.
    (The caller passes the shards written under the schema version read: an older shard's
    statistics were tallied under another declaration, class names for one.)"""
    if op.kind != MAP or not op.batched or not dst.catalog.statistics:
        return {}
    return {path: stats.to_bytes() for path, stats in stored_stats(src, [s.rel for s in shards]).items()}


def _job(
    src: DatasetHandle, dst: DatasetHandle, op: Operation, snap: Snapshot, s: LiveShard, prefix: str,
    stats: bytes | None = None, sync: bool = True,
) -> DeriveJob:  # fmt: skip
    cat = dst.catalog
    return DeriveJob(
        op, snap.schema.to_json(), dst.schema.to_json(), s.path, s.records, s.bytes, dst.compression,
        cat.store.root, dst.name, prefix, cat.statistics, s.checksum, s.fingerprint, s.location is not None,
        s.compression, cat.store.index_url(s.rel), s.index_checksum, stats, sync,
    )  # fmt: skip


class Syncs:
    """The new shards' files made durable by this process, when the jobs run on this machine
    (``enabled``) and write them without fsync: each job's shard fsynced on threads as the job
    ends (an fsync lets go of the GIL: the next shard's work goes on meanwhile, and the disk
    takes several at once: 16 fsyncs of 3 MB files took a third of the time together), then
    their folder, all before the commit (record indexes never: storage.index), as each job's
    own syncs were (ShardSink: fsync, then rename; here the rename comes first, of a file
    nothing registers until the commit). Jobs on other machines (an executor given: Dask) sync
    their own files, as before."""

    THREADS = 4

    def __init__(self, store: Store, dataset: str, enabled: bool) -> None:
        self.store, self.dataset, self.enabled = store, dataset, enabled
        self._pool = ThreadPoolExecutor(self.THREADS, thread_name_prefix="catalog-fsync") if enabled else None
        self._pending: list[Future[None]] = []

    def __enter__(self) -> Syncs:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:  # (on a failure too: no fsync left running when the files go)
            self._pool.shutdown(wait=True)

    def after(self, progress: Callable[[int], None] | None) -> Callable[[DeriveJob, Derived], None]:
        """run_jobs' callback of each finished job: its files synced, its progress told."""

        def done(job: DeriveJob, result: Derived) -> None:
            if self._pool is not None and result[1] is not None:
                rel = result[1].rel
                self._pending.append(self._pool.submit(self.store.sync_file, rel))  # (its index: never)
            if progress is not None:
                progress(job.records)

        return done

    def wait(self) -> None:
        """Every file synced (the first failure raised), then their folders."""
        for fut in self._pending:
            fut.result()
        if self._pending:
            self.store.sync_dir(self.dataset)


# --------------------------------------------------------------------------- lineage and refresh


def chain(ds: DatasetHandle, open_dataset: Callable[[str], DatasetHandle]) -> list[LineageEntry]:
    """The derivations back from ``ds`` to its first source (a source dropped, or made anew
    under its name since, ends the chain: its entry is the last)."""
    out: list[LineageEntry] = []
    current, at = ds, None
    seen = set()
    while (found := lineage(current, at)) and len(out) < 256:
        entry = found[0]
        out.append(entry)
        if (entry.source, entry.source_version) in seen:
            break
        seen.add((entry.source, entry.source_version))
        source = _still_there(entry, open_dataset)
        if source is None:
            out[-1] = replace(entry, source_gone=True)  # said, so nobody reads today's namesake
            break
        current, at = source, entry.source_version
    return out


def _still_there(entry: LineageEntry, open_dataset: Callable[[str], DatasetHandle]) -> DatasetHandle | None:
    """The entry's source, or None when it was dropped or its name now holds another dataset."""
    try:
        source = open_dataset(entry.source)
    except CatalogError:
        return None
    return None if entry.source_id is not None and source.id != entry.source_id else source


def appended_since(src: DatasetHandle, entry: LineageEntry, snap: Snapshot) -> list[LiveShard]:
    """The source's shards added after the version the lineage read, when appends are all
    that happened since (else one line: the derivation must be made again)."""
    if snap.schema_version != _schema_version_at(src, entry.source_version):
        raise UsageError(f"refresh: {src.name!r} changed schema since version {entry.source_version}: derive it again")
    with mf.read_txn(src.catalog.engine) as conn:
        retired = conn.execute(
            select(SHARDS.c.id).where(SHARDS.c.dataset_id == src.id, SHARDS.c.removed_version > entry.source_version)
        ).first()
        if retired is not None:
            raise UsageError(
                f"refresh: {src.name!r} changed more than by appends since version {entry.source_version} "
                "(a delete, update, compaction, migration or restore): derive it again"
            )
        newer = select(SHARDS.c.id).where(SHARDS.c.dataset_id == src.id, SHARDS.c.added_version > entry.source_version)
        new = {r.id for r in conn.execute(newer)}
    return [s for s in snap.shards if s.id in new and (entry.split is None or s.split == entry.split)]


def _schema_version_at(src: DatasetHandle, version: int) -> int | None:
    with mf.read_txn(src.catalog.engine) as conn:
        found = conn.execute(
            select(COMMITS.c.schema_version).where(COMMITS.c.dataset_id == src.id, COMMITS.c.version == version)
        ).scalar()
    return None if found is None else int(found)


def operation_of(entry: LineageEntry, dataset: str) -> Operation:
    """The operation a lineage row recorded, to apply again (a function imported by its name,
    refused when its code changed since)."""
    if entry.predicate is not None:
        return Operation(FILTER, where=entry.predicate, batched=entry.batched)
    if entry.function is None:
        raise UsageError(f"refresh: the lineage of {dataset!r} names no predicate and no function")
    if "<" in entry.function:  # <lambda>, <locals>: no name to import it by
        raise UsageError(
            f"refresh: the {entry.operation}'s function {entry.function} is a lambda or a nested function, which "
            f"cannot be imported again: {entry.operation} again with a function defined at a module's top level"
        )
    fn = load_function(entry.function, "refresh")
    if code_hash(fn) != entry.code_hash:
        raise UsageError(
            f"refresh: {entry.function} changed since {dataset!r} was derived (its code hash differs): derive it again"
        )
    if entry.operation == FILTER:
        return Operation(FILTER, where=fn, batched=entry.batched)
    return Operation(MAP, fn=fn, batched=entry.batched)


def refresh(
    dst: DatasetHandle, open_dataset: Callable[[str], DatasetHandle], **kw: Unpack[RunKeywords]
) -> DeriveReport:
    """Apply ``dst``'s recorded operation to the rows its source appended since the version it
    read, in one commit (with a new lineage row); nothing when the source did not move."""
    found = lineage(dst)
    if not found:
        raise UsageError(f"refresh: {dst.name!r} was not derived from another dataset: nothing to refresh")
    entry = found[0]
    src = _source_of(entry, open_dataset)
    op = operation_of(entry, dst.name)
    snap = snapshot(src)
    if snap.version == entry.source_version:
        return DeriveReport(dst.name, src.name, snap.version, op.describe(), split=entry.split, refreshed=True)
    shards = appended_since(src, entry, snap)
    report = run(src, dst, op, snap, shards, entry.split, **kw)
    report.refreshed = True
    return report


def _source_of(entry: LineageEntry, open_dataset: Callable[[str], DatasetHandle]) -> DatasetHandle:
    try:
        src = open_dataset(entry.source)
    except CatalogError:
        raise UsageError(f"refresh: its source {entry.source!r} is gone (dropped): nothing to refresh from") from None
    if entry.source_id is not None and src.id != entry.source_id:
        raise UsageError(f"refresh: {entry.source!r} was dropped and made anew since: derive it again")
    return src
