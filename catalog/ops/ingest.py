"""Append inputs: TFRecord files (validated, bytes kept exactly), JSON Lines rows, and the row
formats of ``catalog.inputs`` (CSV, Parquet, NumPy, image folders), from files or standard input."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np

from catalog.commit.handles import explain_with, raise_explained
from catalog.commit.values import Progress
from catalog.errors import AppendError, CatalogError, CodecError, CorruptRecordError, ValidationError
from catalog.executors import run_jobs
from catalog.inputs import (
    STDIN,
    ColumnSource,
    InputOptions,
    RowSource,
    check_json_document,
    detect,
    input_format,
    open_input,
    row_source,
)
from catalog.inputs.delimited import finite_float
from catalog.inputs.registry import AUTO, INPUT_FORMATS, folder_format, stdin_labels
from catalog.ops.writer import Writer
from catalog.schema import Ragged, Schema, json_problem, row_from_json
from catalog.storage import ShardFile, ShardSink, clear_attempt, store_for
from catalog.tfrecord.framing import FOOTER_SIZE, HEADER_SIZE, detect_file_compression, read_record_batches


class Schemas(Protocol):
    """What ingesting reads of a dataset: a Dataset, or a job's copy of its schemas."""

    @property
    def schema(self) -> Schema: ...

    def explain(self, error: CatalogError, fits: Callable[[Schema], object]) -> CatalogError: ...


class Target(Protocol):
    """What ingesting writes through: a Writer, or a job's own sink (see ingest_job)."""

    @property
    def ds(self) -> Schemas: ...

    @property
    def sink(self) -> ShardSink | None: ...

    def write_record(self, record: bytes, filled: Iterable[str] = ()) -> None: ...

    def heartbeat(self) -> None: ...


# A batch's decoded columns, and which records lacked each feature with a default (Schema.decode_batch).
Decoded = tuple[dict[str, np.ndarray], dict[str, np.ndarray], Ragged]  # decode_batch's columns, absent, ragged

_scan_json = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set in __init__, untyped
# Where a record may hold an infinity: a float32's ends in 80 7f (80 ff when negative), a
# float64's in f0 7f (f0 ff), a float16's is 00 7c (00 fc). A record without such a pair
# holds no number json made infinite ("1e400"); one with it (rarely, and sometimes by
# chance) has its line parsed again to tell.
_INFINITY_TAILS = {2: rb"\x00[\x7c\xfc]", 4: rb"\x80[\x7f\xff]", 8: rb"\xf0[\x7f\xff]"}  # by float size


def source_of(path: Path) -> str:
    """What a shard records as its source: the input's absolute path, or "stdin"."""
    if str(path) == STDIN:
        return "stdin"
    # a name's bytes that are not UTF-8 (os.fsdecode's surrogates) as \xff escapes: the manifest holds text
    return os.fsencode(path.absolute()).decode("utf-8", "backslashreplace")


def ingest_file(
    w: Target, path: Path, fmt: str, link: bool, progress: Progress | None, options: InputOptions | None = None
) -> None:
    """One input, read as its format's entry in the format table says (``inputs.registry``)."""
    options = options or InputOptions()
    named = INPUT_FORMATS.get(fmt)
    if (named is not None and named.folder is not None) or (str(path) != STDIN and path.is_dir()):
        folder = named if named is not None and named.folder is not None else folder_format(path)
        _ingest_rows(w, path, row_source(path, folder.name, w.ds.schema, options, None), progress)
        return
    with open_input(path) as f:
        spec = input_format(detect(path, fmt, f))
        if spec.reads == "records" or (str(path) == STDIN and not spec.stdin):
            if str(path) == STDIN:
                told = f"its first bytes do not say {stdin_labels()}" if fmt == AUTO else f"not {spec.name}"
                raise AppendError(f"standard input takes {stdin_labels()} ({told}): name it with --format", STDIN)
            f.close()
            ingest_tfrecord(w, path, link, progress)
            return
        if spec.reads == "json":
            ingest_jsonl(w, path, f, progress)
        else:
            _ingest_rows(w, path, row_source(path, spec.name, w.ds.schema, options, f), progress)


def _ingest_rows(w: Target, path: Path, source: RowSource, progress: Progress | None) -> None:
    """Encode and write the rows of one input; an error names the input and the line or row.
    A source that gives batches of columns (CSV, Parquet) is encoded a column at a time."""
    schema = w.ds.schema
    if isinstance(source, ColumnSource):
        _ingest_batches(w, path, source)
        if progress and str(path) != STDIN:
            progress(_size(path))
        return
    filled: list[str] = []
    for index, (where, row) in enumerate(source):
        try:
            record = schema.encode(row, filled)
        except ValidationError as e:
            raise_explained(w.ds, _row_error(path, source.unit, index, where, e), lambda old: old.encode(row))  # noqa: B023
        w.write_record(record, filled)
        filled.clear()
    if progress and str(path) != STDIN:
        progress(_size(path))


def _ingest_batches(w: Target, path: Path, source: ColumnSource) -> None:
    schema = w.ds.schema
    sink = w.sink
    assert sink is not None  # an open writer's, or a job's own
    index = 0
    for columns, where in source.batches():
        n = len(where)
        filled: dict[str, list[int]] = {}
        entries: dict[str, Sequence[bytes]] = {}
        framed: list[bytes] = []
        try:
            records = schema.encode_columns(
                columns, n, filled if sink.tallying else None, entries if sink.tallying else None, framed
            )
        except ValidationError as e:
            i = e.record or 0
            error = _row_error(path, source.unit, index + i, where[i], e)
            raise_explained(w.ds, error, lambda old: old.encode_columns(columns, n))  # noqa: B023
        sink.write_encoded(records, columns, filled, entries, w.heartbeat, b"".join(framed) if framed else None)
        index += n


def _row_error(path: Path, unit: str, index: int, where: int, e: ValidationError) -> AppendError:
    """A row that breaks the schema, named by its record index and line, or by its row."""
    place = f"record {index} ({unit} {where})" if unit == "line" else f"row {where}"
    what = f"feature {e.feature!r}: " if e.feature else ""
    return AppendError(f"{path}: {place}: {what}{e.reason}", str(path), index, e.feature)


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def check_batch(w: Target, batch: list[bytes], path: Path, first_index: int) -> Decoded:
    """validate_batch against the writer's schema; data in an older schema version says so."""
    try:
        return validate_batch(w.ds.schema, batch, path, first_index)
    except AppendError as e:
        raise_explained(w.ds, e, lambda schema: schema.decode_batch(batch))


def validate_batch(schema: Schema, batch: list[bytes], path: Path, first_index: int) -> Decoded:
    """Check every record of a batch; the error names file, record index and feature.
    Returns the decoded columns, which records lacked each feature with a default, and the
    variable-length numeric columns' values joined (as Schema.decode_batch gives them)."""
    absent: dict[str, np.ndarray] = {}
    ragged: Ragged = {}
    try:
        return schema.decode_batch(batch, absent, ragged), absent, ragged
    except ValidationError as e:
        index = first_index + (e.record or 0)
        where = f"feature {e.feature!r}: " if e.feature else ""
        raise AppendError(f"{path}: record {index}: {where}{e.reason}", str(path), index, e.feature) from e
    except CodecError:
        for i, rec in enumerate(batch):  # find which record is malformed
            try:
                schema.validate_record(rec)
            except CodecError as e:
                raise AppendError(f"{path}: record {first_index + i}: {e}", str(path), first_index + i) from e
        raise


def ingest_tfrecord(w: Target, path: Path, link: bool, progress: Progress | None) -> None:
    """Validate a TFRecord input. In the dataset's compression, it is kept as it is: hard
    linked (``link``), or, when compressed, copied byte for byte; else its records are framed
    into new shards in the dataset's compression (once: never inflated twice)."""
    sink = w.sink
    assert sink is not None
    compression = detect_file_compression(path) or "none"
    if compression == sink.compression:
        kept = link and sink.adopt(path, *_validated(w, path)) is not None
        if not kept and compression != "none":
            with open_input(path) as f:
                sink.take_as_is(f, lambda copy: _validated(w, copy, path))
            kept = True
        if kept:
            if progress:
                progress(path.stat().st_size)
            return
    _reframe(w, path, progress)


def _validated(w: Target, path: Path, named: Path | None = None) -> tuple[int, bytes | None]:
    """Check every record of a TFRecord file (errors name ``named``, else ``path``); its count
    and its statistics (None when they are not computed)."""
    count = 0
    tally = w.sink.new_tally() if w.sink is not None else None
    try:
        for batch in read_record_batches(path):
            columns, absent, ragged = check_batch(w, batch, named or path, count)
            if tally is not None:
                tally.add_batch(batch, columns, absent, ragged)
            count += len(batch)
            w.heartbeat()  # validation writes nothing, so beat by hand
    except CorruptRecordError as e:
        if named is None:
            raise
        # named as the input, not as the copy the catalog checked
        raise CorruptRecordError(e.reason, str(named), e.offset, compressed=e.compressed) from None
    return count, tally.result(lambda: read_record_batches(path)).to_bytes() if tally is not None else None


def _reframe(w: Target, path: Path, progress: Progress | None) -> None:
    index = 0
    sink = w.sink
    assert sink is not None
    for batch in read_record_batches(path):
        columns, absent, ragged = check_batch(w, batch, path, index)
        sink.write_decoded(batch, columns, absent, ragged=ragged)
        w.heartbeat()
        index += len(batch)
        if progress:
            progress(sum(map(len, batch)) + (HEADER_SIZE + FOOTER_SIZE) * len(batch))


def ingest_jsonl(w: Target, path: Path, f: IO[bytes], progress: Progress | None) -> None:
    schema = w.ds.schema
    infs = infinities(schema)  # checked for in each record: a number json made infinite
    filled: list[str] = []
    index = 0
    # Lines are split as bytes and decoded one by one, so a bad byte is reported on its
    # own line (a text stream decodes in chunks and miscounts the lines read so far).
    for lineno, raw in enumerate(f, 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            where = f"{path}: line {lineno}: not UTF-8 text (byte {e.start} of the line)"
            raise AppendError(where, str(path), index) from e
        if not line.strip():
            continue
        try:
            record = _encode_line(schema, line, path, lineno, index, infs, filled)
        except AppendError as e:
            if lineno == 1 and ("not valid JSON" in str(e) or line.lstrip().startswith("[")):
                check_json_document(path, line, f)
            raise_explained(w.ds, e, lambda old: _encode_line(old, line, path, lineno, index))  # noqa: B023
        w.write_record(record, filled)
        filled.clear()
        index += 1
        if progress:
            progress(len(raw))


def infinities(schema: Schema) -> re.Pattern[bytes] | None:
    """What an infinity's last bytes look like in the float features a schema has; None: no such feature."""
    floats = {f.np_dtype.itemsize // (2 if f.np_dtype.kind == "c" else 1) for f in schema.features.values()
              if f.np_dtype.kind in "fc"}  # fmt: skip
    tails = [_INFINITY_TAILS[n] for n in sorted(floats) if n in _INFINITY_TAILS]
    return re.compile(b"|".join(tails)) if tails else None


def _encode_line(
    schema: Schema,
    line: str,
    path: Path,
    lineno: int,
    index: int,
    infs: re.Pattern[bytes] | None = None,
    filled: list[str] | None = None,
) -> bytes:
    """One JSON line's record; ``filled`` receives the features whose default went in."""
    record = _encode_json(schema, line, path, lineno, index, filled)
    if infs is not None and infs.search(record):  # rare: a number json made infinite ("1e400")?
        try:
            json.loads(line, parse_float=_marked_float, object_pairs_hook=_name_overflow)
            json.loads(line, parse_float=finite_float)  # (one outside any object: not named)
        except ValidationError as e:
            where = f"feature {e.feature!r}: " if e.feature else ""
            raise AppendError(f"{path}: record {index} (line {lineno}): {where}{e.reason}", str(path), index) from e
    return record


class _TooLarge(float):
    """A number json would make infinite that was not written as one ("1e400"), with its text."""

    text = ""


def _marked_float(text: str) -> float:
    try:
        return finite_float(text)
    except ValidationError:
        marked = _TooLarge("inf")
        marked.text = text
        return marked


def _name_overflow(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's object hook, run once an object's values are parsed: a number too large for a
    float (``_marked_float``) is named with its key, the feature in a record's object."""
    for key, value in pairs:
        found = _too_large(value)
        if found is not None:
            raise ValidationError(f"number {found.text.strip()[:40]} is out of float32 range", key)
    return dict(pairs)


def _too_large(value: Any) -> _TooLarge | None:
    if isinstance(value, _TooLarge):
        return value
    if isinstance(value, list):
        return next((found for v in value if (found := _too_large(v)) is not None), None)
    return None


def _encode_json(schema: Schema, line: str, path: Path, lineno: int, index: int, filled: list[str] | None) -> bytes:
    try:
        obj, end = _scan_json(line, 0)  # the C scanner alone: json.loads adds ~1 us of wrappers a line
        if line[end:].strip():
            raise StopIteration
    except (StopIteration, ValueError, RecursionError):
        try:
            obj = json.loads(line)  # slow path, for the exact message
        except json.JSONDecodeError as e:
            raise AppendError(f"{path}: line {lineno}: not valid JSON: {e.msg}", str(path), index) from e
        except (RecursionError, ValueError) as e:
            raise AppendError(f"{path}: line {lineno}: {json_problem(e)}", str(path), index) from e
    try:
        try:
            # Most rows are already in their Python form; the JSON conventions (base64 bytes,
            # "NaN" strings) only matter where encoding fails, so convert only then.
            return schema.encode(obj, filled)
        except ValidationError:
            if filled is not None:
                filled.clear()  # what the failed attempt noted
            return schema.encode(row_from_json(schema, obj), filled)
    except ValidationError as e:
        where = f"feature {e.feature!r}: " if e.feature else ""
        raise AppendError(
            f"{path}: record {index} (line {lineno}): {where}{e.reason}", str(path), index, e.feature
        ) from e
    except RecursionError as e:  # JSON the parser took, nested past what the checks (and repr) can walk
        raise AppendError(f"{path}: record {index} (line {lineno}): values nested too deeply", str(path), index) from e


# --------------------------------------------------------------------------- inputs as jobs


@dataclass(frozen=True)
class IngestJob:
    """Validate one input file and write it into new shards named after ``prefix``."""

    path: str  # absolute: a worker's working directory need not be the caller's
    format: str
    link: bool
    dataset: str
    schema_version: int
    schema: dict[str, Any]
    older: tuple[tuple[int, dict[str, Any]], ...]  # Dataset.older_schemas(): to name data in an older version
    data_root: str
    prefix: str  # the writer's intent id, then the input's number: gc keeps the files while the append runs
    shard_size: int
    shard_records: int
    options: InputOptions = field(default_factory=InputOptions)
    compression: str = "none"  # the dataset's: how its shards are stored
    statistics: bool = True  # compute each shard's statistics (the catalog's ``statistics``)


class _JobSchemas:
    def __init__(self, job: IngestJob) -> None:
        self.job = job
        self.schema = Schema.from_json(job.schema)

    def explain(self, error: CatalogError, fits: Callable[[Schema], object]) -> CatalogError:
        return explain_with(self.job.dataset, self.job.schema_version, self.job.older, error, fits)


class JobTarget:
    def __init__(self, job: IngestJob) -> None:
        self.ds = _JobSchemas(job)
        schema = self.ds.schema if job.statistics else None
        self.own = ShardSink(
            job.data_root,
            job.dataset,
            job.prefix,
            job.shard_size,
            job.shard_records,
            compression=job.compression,
            schema=schema,
        )
        self.sink: ShardSink | None = self.own

    def write_record(self, record: bytes, filled: Iterable[str] = ()) -> None:
        self.own.write(record, filled)

    def heartbeat(self) -> None:
        pass  # the caller beats the writer's intent while it waits for the jobs


def ingest_job(job: IngestJob) -> list[ShardFile]:
    """Module-level (picklable) worker: one input, validated, in new shards (none when it is empty)."""
    clear_attempt(store_for(job.data_root), job.dataset, job.prefix)  # a rerun of a task whose worker died
    target = JobTarget(job)
    target.own.source = source_of(Path(job.path))
    try:
        ingest_file(target, Path(job.path), job.format, job.link, None, job.options)
    except BaseException:
        target.own.abort()
        raise
    return target.own.close()


def ingest_files(
    w: Writer,
    inputs: Sequence[tuple[Path, str]],
    link: bool,
    progress: Progress | None,
    executor: Executor,
    options: InputOptions,
) -> None:
    """Each input validated and written by a job on ``executor``, into shards under the writer's
    intent; the writer's one commit then registers them all, in input order. Errors name the
    inputs by absolute path."""
    jobs = ingest_jobs(w, inputs, link, options)
    for files in run_ingest_jobs(w, ingest_job, jobs, progress, executor):
        assert w.sink is not None
        w.sink.take(files)


def ingest_jobs(w: Writer, inputs: Sequence[tuple[Path, str]], link: bool, options: InputOptions) -> list[IngestJob]:
    """One job per input, each writing under its own prefix of the writer's intent."""
    ds = w.ds
    common: dict[str, Any] = {
        "link": link,
        "options": options,
        "dataset": ds.name,
        "schema_version": ds.schema_version,
        "schema": ds.schema.to_json(),
        "older": tuple(ds.older_schemas()),
        "data_root": w.catalog.store.root,
        "shard_size": w.shard_size,
        "shard_records": w.shard_records,
        "compression": ds.compression,
        "statistics": w.catalog.statistics,
    }
    return [
        IngestJob(path=str(p.absolute()), format=fmt, prefix=w.intent.prefix(i), **common)
        for i, (p, fmt) in enumerate(inputs)
    ]


def run_ingest_jobs(
    w: Writer,
    fn: Callable[[IngestJob], list[ShardFile]],
    jobs: list[IngestJob],
    progress: Progress | None,
    executor: Executor,
) -> list[list[ShardFile]]:
    """``fn`` of each job on ``executor`` (the writer's intent kept alive meanwhile), results in
    job order; on any failure, every job's files are removed (nothing is registered)."""
    done = (lambda job, _r: progress(_size(Path(job.path)))) if progress else None
    try:
        return run_jobs(fn, jobs, executor, w.intent, done)
    except BaseException:
        for job in jobs:  # nothing is registered: the jobs' files go, as the writer's own do
            clear_attempt(w.catalog.store, job.dataset, job.prefix)
        raise
