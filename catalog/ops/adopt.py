"""Adopt existing TFRecord files in place (``catalog adopt``): registered where they are, never
copied, after one read of each that checks every record (framing and schema), counts them,
checksums the whole file and, when it is uncompressed, computes its record index.

An adopted shard keeps its own location (the file's real path or URL) in the manifest; its
``path`` is a name in the dataset's folder that no file ever takes, under which its record
index lives in the data area's index tree. The catalog reads the file and never writes,
moves or deletes it: gc only forgets it once no kept version needs it (and removes its
index). A file changed after its adoption is caught as any damaged shard is: readers check
its size before they read it, ``verify`` its checksum.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import io
import itertools
import operator
import os
import struct
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
from crc32c import crc32c

from catalog.commit.slicing import validate_split
from catalog.commit.values import Progress
from catalog.errors import AppendError, CatalogError, CodecError, CorruptRecordError, SchemaError, ValidationError
from catalog.inputs import STDIN, InputOptions, expand, given_paths
from catalog.inputs.tfds import INFO_FILE, TfdsDataset, is_tfds_dir, read_tfds
from catalog.manifest import DEFAULT_SPLIT
from catalog.ops.ingest import (
    Decoded,
    IngestJob,
    JobTarget,
    Target,
    check_batch,
    ingest_file,
    ingest_jobs,
    run_ingest_jobs,
    source_of,
)
from catalog.ops.writer import Writer
from catalog.schema import Ragged, Schema
from catalog.stats.tally import Tally
from catalog.storage import (
    OWNER_FILE,
    UNCHECKED,
    ShardFile,
    ShardSink,
    Store,
    clear_attempt,
    content,
    format_checksum,
    open_shard,
    shard_batches,
    store_for,
)
from catalog.storage.fileio import file_io
from catalog.storage.index import offsets_from_lengths
from catalog.tfrecord.example import first_sequence, plain_examples
from catalog.tfrecord.framing import (
    FRAMING,
    HEADER_SIZE,
    detect_file_compression,
    framing_fault,
    read_record_batches,
    starts_framed,
    whole_records,
)
from catalog.tfrecord.sources import regular_file_problem
from catalog.words import counted


@dataclass(frozen=True)
class Scanned:
    """One input file as its adoption's read found it: not a shard yet (no ``rel``); ``_take``
    makes its ``ShardFile``."""

    location: str  # where the bytes are: the file's real path (links resolved), or its URL
    source: str  # the input as named (absolute)
    records: int
    bytes: int
    checksum: str
    compression: str
    offsets: np.ndarray | None  # its record index (uncompressed files only)
    stats: builtins.bytes | None = None  # its records' statistics (None: not computed)
    fingerprint: str = UNCHECKED  # what the content check compares the file with (storage.content)


class _Tap(io.RawIOBase):
    """A file read through once, its bytes' CRC32C and count kept on the way."""

    def __init__(self, f: Any, name: str) -> None:
        super().__init__()
        self._f, self.name = f, name
        self.crc = 0
        self.size = 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        data: bytes = self._f.read(n)
        self.crc = crc32c(data, self.crc)
        self.size += len(data)
        return data

    def readinto(self, b: Any) -> int:
        data = self.read(len(memoryview(b)))
        memoryview(b).cast("B")[: len(data)] = data
        return len(data)

    # The framing asks how much is left (to refuse a record longer than the file), then reads.
    def seekable(self) -> bool:
        return bool(self._f.seekable())

    def tell(self) -> int:
        return int(self._f.tell())

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return int(self._f.seek(offset, whence))


def location_of(path: Path) -> str:
    """Where an adopted file's bytes are: its URL, or its real local path (every link resolved,
    so the readers, which never follow one, open the file itself)."""
    return file_io(str(path)).real(str(path))


def scan(w: Target, path: Path, guessed: bool = False) -> Scanned:
    """Read ``path`` once: every record checked against the writer's schema (errors name the
    input, record and feature), counted, the whole file checksummed, offsets kept. ``guessed``:
    the schema was inferred from the first records only (see guess_schema): a SequenceExample,
    whose feature lists that schema does not describe, raises GuessMissed."""
    return scan_started(w, path, guessed)()


Finish = Callable[[], Scanned]


def scan_started(
    w: Target, path: Path, guessed: bool = False, then: Callable[[], None] | None = None, pool: Executor | None = None
) -> Finish:
    """``scan`` in two steps: the file read, and (the call returned) what its statistics helper
    owes waited for. ``then`` runs once the file's first records are checked here, or before
    anything is raised: there the scan of the file before it is finished, while the helper ends
    that file's last spans and this process begins the next file (no wait at each file's end).
    ``pool``: the read-ahead's thread, kept for every file (else one a file)."""
    once = _Once(then)
    try:
        location = location_of(path)
        compression = detect_file_compression(location) or "none"
        finish = _scan(w, path, location, compression, guessed, once, pool)
    except BaseException as e:
        once()  # (the file before this one is finished first: its error, if any, comes first)
        if isinstance(e, FileNotFoundError):
            raise _gone(path) from e
        raise
    once()
    return lambda: _not_gone(path, finish)


class _Once:
    """``then``, called at most once."""

    def __init__(self, then: Callable[[], None] | None) -> None:
        self.then = then

    def __call__(self) -> None:
        then, self.then = self.then, None
        if then is not None:
            then()


def _gone(path: Path) -> AppendError:
    return AppendError(f"{path}: gone while being adopted: nothing registered", str(path))


def _not_gone(path: Path, finish: Finish) -> Scanned:
    try:
        return finish()
    except FileNotFoundError as e:
        raise _gone(path) from e


Read = tuple[int, list[np.ndarray], int, int]  # a file's records, their data lengths, its CRC32C and size


def _scan(
    w: Target,
    path: Path,
    location: str,
    compression: str,
    guessed: bool,
    then: Callable[[], None],
    pool: Executor | None,
) -> Finish:
    tally = w.sink.new_tally() if w.sink is not None else None
    spans = _Spans(tally, location, guessed) if tally is not None and _tallies(tally, w.ds.schema) else None
    read: Read | None = None
    before = after = None
    if compression == "none":  # read a window at a time: framing checked and records decoded with NumPy
        read, before, after = _opened(location, lambda f: _read_windows(w, f, path, tally, spans, guessed, then, pool))
        if read is not None and spans is not None and spans.sent:
            spans.tally.ask_result()  # worked out by the helper while the next file begins

    def finish() -> Scanned:
        nonlocal read, before, after, tally
        if read is None or (spans is not None and not spans.held()):
            if spans is not None:
                spans.tally.release()
            # compressed, damaged, or refused by the helper: the record-by-record read says where, as it always did
            tally = w.sink.new_tally() if w.sink is not None else None
            read, before, after = _opened(location, lambda f: _read_batches(w, f, path, compression, tally, guessed))
        assert read is not None
        return _scanned(path, location, compression, read, tally, before == after, after)

    return finish


def _scanned(
    path: Path, location: str, compression: str, read: Read, tally: Tally | None, same: bool, after: Any
) -> Scanned:
    count, lengths, crc, size = read
    # A file written to from here on is refused at the commit (its size checked again there).
    offsets = None
    if compression == "none":
        offsets = offsets_from_lengths(np.concatenate(lengths) if lengths else np.zeros(0, np.uint64))
    stats = tally.result(lambda: shard_batches(location)).to_bytes() if tally is not None else None
    found = Scanned(location, source_of(path), count, size, format_checksum(crc), compression, offsets, stats)
    # Changed while it was read (grown, say): what was checksummed is what is registered, but the
    # file's fingerprint now vouches for nothing: readers checksum it (once a process) instead.
    return replace(found, fingerprint=content.to_register(after) if same else UNCHECKED)


def _opened(location: str, read: Callable[[Any], Read | None]) -> tuple[Read | None, Any, Any]:
    """``read`` of the file opened, and what the content check saw of it before and after."""
    with open_shard(location) as f:
        before = content.observe(location, f)
        out = read(f)
        return out, before, content.observe(location, f)


def _read_batches(w: Target, f: Any, path: Path, compression: str, tally: Tally | None, guessed: bool) -> Read:
    """Every record framed one by one (read_record_batches), checked and tallied a batch at a time."""
    lengths: list[np.ndarray] = []
    count = 0
    tap = _Tap(f, str(path))
    try:
        for batch in read_record_batches(cast(IO[bytes], tap), compression):
            if guessed:
                refuse_sequences(batch, path, count)
            columns, absent, ragged = check_batch(w, batch, path, count)
            if tally is not None:
                tally.add_batch(batch, columns, absent, ragged)
            if compression == "none":
                lengths.append(np.fromiter(map(len, batch), dtype=np.uint64, count=len(batch)))
            count += len(batch)
            w.heartbeat()
    except CorruptRecordError as e:
        raise CorruptRecordError(e.reason, str(path), e.offset, compressed=e.compressed) from None
    if tap.read(1):  # framing ended where the file did: nothing may follow unread
        raise AppendError(f"{path}: bytes after the last record", str(path))
    return count, lengths, tap.crc, tap.size


# --------------------------------------------------------------------------- windows of a file
# An uncompressed file is read READ_WINDOWS x WINDOW bytes at a time by a thread one read ahead, which also
# keeps the whole file's CRC32C (crc32c lets go of the GIL): the read and the checksum overlap
# the work on the records. In each window the records are found by their lengths (a loop that
# reads one number a record), their framing checked at once (framing.framing_fault: every
# header's length CRC, every data CRC) and they are decoded where they lie (Schema.decode_spans:
# no record copied out and joined again). Anything wrong (damage, a record the schema refuses)
# returns None: the file is then read record by record, which names what is wrong. Decoding and
# the statistics are most of the work: windows of a local file go to the statistics helper
# process (_Spans), which reads them itself and checks and tallies them on the other core, as
# long as it keeps up; this process does the others, and finishes a file's scan (the helper's
# answers, its statistics) once the next file's first window is checked, so neither waits.
WINDOW = 2 << 20
# Windows read at once: every read handed between the threads costs a wait for the GIL (a few
# milliseconds on a busy machine), so the reads are larger than the batches decoded.
READ_WINDOWS = 4
_U64 = struct.Struct("<Q")


def _read_windows(
    w: Target,
    f: Any,
    path: Path,
    tally: Tally | None,
    spans: _Spans | None,
    guessed: bool,
    then: Callable[[], None],
    pool: Executor | None,
) -> Read | None:
    """The file ``f`` read a window at a time (see above); ``spans``: the helper that may take
    some of them (a local file's), which the caller waits for; ``then``: run after the first
    records checked here. None: the file is to be read record by record."""
    schema = w.ds.schema
    pad = bytes(schema.spans_pad)
    size = _size_of(f)
    helper = spans if size is not None else None
    ahead = _ReadAhead(f)
    lengths: list[np.ndarray] = []
    count = base = 0
    rest = b""
    known: dict[int, int] = {}
    with contextlib.nullcontext(pool) if pool is not None else _read_ahead_pool() as reads:
        for chunk in ahead.chunks(reads):
            raw = rest + chunk + pad if rest else chunk + pad
            end = len(raw) - len(pad)
            at, lens, pos = whole_records(raw, end)
            if not _fits(raw, pos, end, base, size):
                return None
            if len(at):
                if framing_fault(raw, at, lens, known) is not None:
                    return None
                for lo, hi in _groups(at):
                    stop = int(at[hi - 1] + FRAMING + lens[hi - 1])
                    if helper is not None and helper.offer(raw, base, int(at[lo]), stop, hi - lo):
                        pass  # read, checked and tallied by the statistics helper
                    elif not _records(
                        w, schema, raw, at[lo:hi] + HEADER_SIZE, lens[lo:hi], path, count, tally, guessed
                    ):
                        return None
                    else:
                        then()
                    count += hi - lo
                lengths.append(lens.astype(np.uint64))
            rest = raw[pos:end]
            base += pos
            w.heartbeat()
    if rest:
        return None  # bytes after the last whole record: named by the other read
    return count, lengths, ahead.crc, ahead.size


def _read_ahead_pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(1, thread_name_prefix="catalog-adopt-read")


def _tallies(tally: Tally, schema: Schema) -> bool:
    """Whether ``tally``'s schema is ``schema`` (its helper then checks spans against it)."""
    return tally.schema is schema or tally.schema.to_json() == schema.to_json()


class _Spans:
    """Windows of a local file handed to the statistics helper process, which reads them again
    itself (no bytes copied between the processes), checks them against the schema as _records
    does and tallies them: the decoding and the statistics of a file shared between two cores.
    The helper checks that it read the bytes this process read (their CRC32C, whose framing
    this process checked); whatever it refuses, or a helper lost, sends the file to the other read."""

    def __init__(self, tally: Tally, location: str, guessed: bool) -> None:
        self.tally, self.location, self.guessed = tally, location, guessed
        self.sent = False

    def offer(self, raw: bytes, base: int, start: int, stop: int, records: int) -> bool:
        """Whether the helper took the records of ``raw[start:stop]`` (at ``base + start`` in the file)."""
        crc = crc32c(memoryview(raw)[start:stop])
        taken = self.tally.offer_span(self.location, base + start, stop - start, records, crc, self.guessed)
        self.sent = self.sent or taken
        return taken

    def held(self) -> bool:
        """Whether every span the helper took passed (it is waited for)."""
        return not self.sent or self.tally.spans_held()


def _size_of(f: Any) -> int | None:
    """The open file's size, when it has one to tell (a local file; else None: not checked early)."""
    try:
        return os.fstat(f.fileno()).st_size
    except (AttributeError, OSError, ValueError):  # (io.UnsupportedOperation is both)
        return None


def _groups(starts: np.ndarray) -> Iterator[tuple[int, int]]:
    """The records of a read cut into groups of about WINDOW bytes: each one decoded and tallied
    as a batch (the statistics helper takes whole batches; a smaller one shares the work finer)."""
    cuts = np.searchsorted(starts, np.arange(WINDOW, int(starts[-1]) + 1, WINDOW)).tolist()
    bounds = [0, *cuts, len(starts)]
    for lo, hi in itertools.pairwise(bounds):
        if hi > lo:
            yield lo, hi


def _fits(raw: bytes, pos: int, end: int, base: int, size: int | None) -> bool:
    """Whether the record cut by the window's end at ``pos`` may be read on: a header whose CRC
    holds and whose record ends within the file (never a damaged length read on to the end)."""
    if pos + HEADER_SIZE > end:
        return True
    if not starts_framed(raw[pos : pos + HEADER_SIZE]):
        return False
    n = _U64.unpack_from(raw, pos)[0]
    return size is None or base + pos + FRAMING + n <= size


def _records(
    w: Target,
    schema: Schema,
    raw: bytes,
    starts: np.ndarray,
    lengths: np.ndarray,
    path: Path,
    first: int,
    tally: Tally | None,
    guessed: bool,
) -> bool:
    """Check and tally a window's records where they lie; False when the schema refuses one."""
    if guessed:
        found = first_sequence(plain_examples(raw, starts, lengths), lambda i: raw[starts[i] : starts[i] + lengths[i]])
        _refuse_sequence(found, path, first)
    decoded = check_spans(schema, raw, starts, lengths)
    if decoded is None and guessed:  # no need to find which record: the schema is inferred again
        raise GuessMissed(f"{path}: a record from {first} on infers another schema", str(path), first)
    if decoded is None:
        return False
    if tally is not None:  # the features a record lacks count as filled, as add_batch counted them
        columns, absent, ragged = decoded
        tally.add_decoded_columns(columns, len(starts), absent, ragged)
    return True


def check_spans(schema: Schema, raw: bytes, starts: np.ndarray, lengths: np.ndarray) -> Decoded | None:
    """The records ``raw[starts[i]:starts[i] + lengths[i]]`` decoded against ``schema`` where
    they lie (columns, absent, ragged as check_batch's); None when it refuses one."""
    absent: dict[str, np.ndarray] = {}
    ragged: Ragged = {}
    try:
        return schema.decode_spans(raw, starts, lengths, absent=absent, ragged=ragged), absent, ragged
    except (ValidationError, CodecError):
        return None


class _ReadAhead:
    """A file's windows, each read (and added to the file's CRC32C) by a thread while the one
    before is worked on."""

    def __init__(self, f: Any) -> None:
        self._f = f
        self.crc = 0
        self.size = 0

    def _read(self) -> bytes:
        data: bytes = self._f.read(READ_WINDOWS * WINDOW)
        self.crc = crc32c(data, self.crc)
        self.size += len(data)
        return data

    def chunks(self, pool: Executor) -> Iterator[bytes]:
        pending = pool.submit(self._read)
        while True:
            # The end, read ahead, is read again once the window before it is worked on: a file
            # grown meanwhile is read on, as a read one record at a time would (the content check
            # decides about the rest).
            chunk = pending.result() or self._read()
            if not chunk:
                return
            pending = pool.submit(self._read)
            yield chunk


# --------------------------------------------------------------------------- a new dataset's schema
# Adopting into a new name needs a schema before the first record is checked. Inferring it from
# every record first read every file twice, the first time record by record in Python (about
# ten times the adoption's own time). Instead the schema is inferred from the first records
# (GUESS_RECORDS), and the adoption itself checks that no record would have inferred another:
# decoding against an inferred schema refuses every record that would change it (a feature not
# in it, one missing that is not optional, another value count than a fixed shape's, another
# wire kind, bytes that are not UTF-8 for a string), and refuse_sequences the SequenceExamples
# decoding would take by their context alone. Once every record passed, the schema is the one
# inference over every record gives; when one does not, the adoption is undone and the schema
# inferred from every record as before (Catalog.adopt).
GUESS_RECORDS = 1024


class GuessMissed(AppendError):
    """A record a schema inferred from the first records does not describe (see above)."""


def guess_schema(p: Plan) -> Schema | None:
    """The schema of the inputs' first GUESS_RECORDS records; None when none is to be guessed:
    no records (inference over all says why), or SequenceExamples (their feature lists)."""
    sample: list[bytes] = []
    for path, _split in p.inputs:
        for batch in read_record_batches(path):
            sample += batch[: GUESS_RECORDS - len(sample)]
            if len(sample) >= GUESS_RECORDS:
                break
        if len(sample) >= GUESS_RECORDS:
            break
    try:
        schema = Schema.infer(sample)
    except (CodecError, SchemaError):
        return None  # inference over every record names the record
    return schema if schema.features and not schema.sequence else None


_HEAD = operator.itemgetter(slice(0, 6))  # what plain_examples reads of a record


def refuse_sequences(batch: list[bytes], path: Path, first: int) -> None:
    """GuessMissed at the first SequenceExample of ``batch``. An Example as writers make it is
    one features field spanning the record: checked for all at once; the others one by one."""
    if not batch:
        return
    lens = np.fromiter(map(len, batch), dtype=np.int64, count=len(batch))
    head_lens = np.minimum(lens, 6)
    heads = b"".join(map(_HEAD, batch)) + bytes(6)
    _refuse_sequence(
        first_sequence(plain_examples(heads, np.cumsum(head_lens) - head_lens, lens), batch.__getitem__), path, first
    )


def _refuse_sequence(found: int | None, path: Path, first: int) -> None:
    if found is not None:
        index = first + found
        raise GuessMissed(f"{path}: record {index}: a SequenceExample", str(path), index)


@dataclass(frozen=True)
class Plan:
    """What an adoption takes: every file with its split, and what a TFDS directory says of them."""

    inputs: list[tuple[Path, str]]
    split: str  # the split of plain files (a TFDS directory's files have their own)
    tfds: TfdsDataset | None = None
    guessed: bool = False  # the schema was inferred from the first records only (see guess_schema)

    @cached_property
    def expected(self) -> dict[Path, int]:
        """Each TFDS shard's record count, as dataset_info.json gives it (worked out once)."""
        return self.tfds.expected() if self.tfds is not None else {}

    def named(self) -> str:
        """The first inputs' names, for a message."""
        return ", ".join(str(p) for p, _ in self.inputs[:3]) + (", ..." if len(self.inputs) > 3 else "")

    def compression(self) -> str:
        """The compression every input has (a dataset made for them stores new shards so), else none."""
        found = {detect_file_compression(p) or "none" for p, _ in self.inputs}
        return found.pop() if len(found) == 1 else "none"


def plan(paths: Iterable[str | os.PathLike[str]], split: str | None) -> Plan:
    """The input files (folders and globs expanded, sorted; a TFDS directory's shards by split),
    each checked to be a regular file before anything is read."""
    given = given_paths(paths)
    folders = [p for p in given if _is_tfds_dir(p)]
    if folders:
        if len(given) > 1:
            raise AppendError(f"{folders[0]}: a TFDS directory is adopted on its own (one per adopt)", str(folders[0]))
        if split is not None:
            raise AppendError(f"{folders[0]}: a TFDS directory's splits come from its files: drop --split")
        tfds = read_tfds(folders[0])
        for s in tfds.splits:
            try:
                validate_split(s.name)
            except CatalogError as e:
                raise AppendError(f"{folders[0] / INFO_FILE}: {e}", str(folders[0])) from e
        return Plan(tfds.inputs(), DEFAULT_SPLIT, tfds)
    split = split or DEFAULT_SPLIT
    inputs = _once([(p, split) for p, _fmt in expand(given, "tfrecord")])
    for p, _split in inputs:
        problem = "standard input cannot be adopted (adopt takes files)" if str(p) == STDIN else None
        problem = problem or regular_file_problem(p)
        if problem is not None:
            raise AppendError(f"{p}: {problem}", str(p))
    if not inputs:
        raise AppendError("no input files: nothing committed")
    return Plan(inputs, split)


def refuse_data_area(p: Plan, store: Store) -> None:
    """A file in the catalog's own data area is the catalog's to delete (gc): adopting it in
    place would leave a shard that vanishes when its owner is collected. Append it instead."""
    area = "" if store.remote else os.path.join(os.path.realpath(store.root), "")
    marked: dict[str, bool] = {}  # folder -> whether a catalog's data area starts there
    for path, _split in p.inputs:
        real = os.path.realpath(path)
        whose = "the catalog's" if area and real.startswith(area) else None
        if whose is None and _in_a_data_area(os.path.dirname(real), marked):
            whose = "another catalog's"
        if whose is not None:
            raise AppendError(
                f"{path}: inside {whose} data area, whose files its gc may delete: "
                "adopt --copy (or --link) takes it instead",
                str(path),
            )


def _in_a_data_area(folder: str, marked: dict[str, bool]) -> bool:
    """Whether ``folder`` or a folder above it holds a data area's ownership marker."""
    if folder not in marked:
        parent = os.path.dirname(folder)
        here = os.path.exists(os.path.join(folder, OWNER_FILE))
        marked[folder] = here or (parent != folder and _in_a_data_area(parent, marked))
    return marked[folder]


def _is_tfds_dir(p: Path) -> bool:
    try:
        return is_tfds_dir(p)
    except OSError as e:  # a name too long, a folder that cannot be read
        raise AppendError(f"{p}: {e.strerror or e}", str(p)) from e


def _once(inputs: list[tuple[Path, str]]) -> list[tuple[Path, str]]:
    """Each file once, where it is first named (a folder and a file in it, or a name given
    twice, name one file; adopting it twice is never what was meant)."""
    seen: set[str] = set()
    out = []
    for p, split in inputs:
        key = os.path.realpath(p) if str(p) != STDIN else STDIN
        if key not in seen:
            seen.add(key)
            out.append((p, split))
    return out


def _check_count(p: Plan, path: Path, records: int) -> None:
    """A TFDS shard holds the records dataset_info.json's shardLengths gives it."""
    expected = p.expected.get(path)
    if expected is not None and expected != records:
        found = counted(records, "record")
        raise AppendError(f"{path}: {found}, but {INFO_FILE} says {expected}: nothing registered", str(path))


def _take(sink: ShardSink, found: Scanned) -> ShardFile:
    return sink.take_in_place(
        found.location,
        found.records,
        found.bytes,
        found.checksum,
        found.compression,
        found.offsets,
        found.source,
        found.stats,
        found.fingerprint,
    )


def adopt_job(job: IngestJob) -> list[ShardFile]:
    """Module-level (picklable) worker: one input scanned, its record index published under the
    job's prefix; the adopted shard, for the writer's commit."""
    store = store_for(job.data_root)
    clear_attempt(store, job.dataset, job.prefix)  # a rerun of a task whose worker died
    target = JobTarget(job)
    try:
        found = scan(target, Path(job.path))
        if not found.records:
            return []  # an empty file: no shard (see adopt_files)
        _take(target.own, found)
    except BaseException:
        target.own.abort()
        raise
    return target.own.close()


def adopt_files(w: Writer, p: Plan, progress: Progress | None = None, executor: Executor | None = None) -> None:
    """Each input scanned and taken by the writer's sink as an adopted shard of its split: here,
    or with ``executor`` and several inputs, one job per input on it."""
    sink = w.sink
    assert sink is not None
    if executor is not None and len(p.inputs) > 1 and not p.guessed:
        jobs = ingest_jobs(w, [(path, "tfrecord") for path, _ in p.inputs], False, InputOptions())
        results = run_ingest_jobs(w, adopt_job, jobs, progress, executor)
        for files, (_path, split) in zip(results, p.inputs, strict=True):
            sink.take(files)  # every job's first: abort() then removes their indexes, whatever fails next
            w.splits.update((f.rel, split) for f in files)
        for files, (path, _split) in zip(results, p.inputs, strict=True):
            _check_count(p, path, sum(f.records for f in files))
        return
    # Each shard taken (its record index written) on a thread of its own while the next files
    # are read: the writes wait for the disk, not for this process.
    taken: list[tuple[Future[ShardFile], str]] = []
    with ThreadPoolExecutor(1, thread_name_prefix="catalog-adopt-index") as publisher:
        try:
            for path, split, found in _scans(w, p):
                _check_count(p, path, found.records)
                if progress:
                    progress(found.bytes)
                if taken and taken[-1][0].done():
                    taken[-1][0].result()  # one that failed (a full disk) stops the adoption here
                if found.records:  # (an empty file, Spark's _SUCCESS: no shard, as append makes none)
                    taken.append((publisher.submit(_take, sink, found), split))
        finally:  # none still writing when the sink is aborted
            wait([f for f, _split in taken])
    for f, split in taken:
        w.splits[f.result().rel] = split


def _scans(w: Writer, p: Plan) -> Iterator[tuple[Path, str, Scanned]]:
    """Each input scanned, in order; each one finished (its statistics helper's part waited
    for) once the next one's first records are checked (see scan_started)."""
    pending: tuple[Path, str, Finish] | None = None
    with _read_ahead_pool() as pool:
        for path, split in p.inputs:
            done: list[tuple[Path, str, Scanned]] = []

            def then(before: tuple[Path, str, Finish] | None = pending, done: list[Any] = done) -> None:
                if before is not None:
                    done.append((before[0], before[1], before[2]()))

            if p.guessed:
                finish = _guessing(path, functools.partial(scan_started, w, path, True, then, pool))
            else:
                finish = scan_started(w, path, False, then, pool)
            pending = (path, split, finish)
            yield from done
        if pending is not None:
            yield pending[0], pending[1], pending[2]()


def _guessing(path: Path, started: Callable[[], Finish]) -> Finish:
    """scan_started() under a guessed schema, both its steps: whatever it refuses is GuessMissed,
    so that Catalog.adopt infers the schema from every record instead, and says what is wrong as
    that inference does."""
    finish = _guess_missed(path, started)
    return lambda: _guess_missed(path, finish)


def _guess_missed(path: Path, call: Callable[[], Any]) -> Any:
    try:
        return call()
    except (AppendError, CorruptRecordError) as e:
        if isinstance(e, GuessMissed):
            raise
        raise GuessMissed(f"{path}: {e}", str(path)) from e


def bring_in(w: Writer, p: Plan, link: bool, progress: Progress | None = None) -> None:
    """``--copy``/``--link``: each input validated into the data area as ``append`` takes a
    TFRecord file (hard linked where it can be, with ``link``), under its split."""
    sink = w.sink
    assert sink is not None
    starts = []
    for path, _split in p.inputs:
        sink.cut(source_of(path))  # each input its own shards: finished when the next begins
        starts.append(len(sink.shards))
        ingest_file(w, path, "tfrecord", link, progress)
    sink.cut(None)
    starts.append(len(sink.shards))
    for i, (path, split) in enumerate(p.inputs):
        made = sink.shards[starts[i] : starts[i + 1]]
        _check_count(p, path, sum(f.records for f in made))
        w.splits.update((f.rel, split) for f in made)
