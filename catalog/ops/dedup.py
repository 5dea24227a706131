"""dedup: a new version of a dataset in which every record but the first of each key is gone.

A record's identity is its key features' values (``key``), or with ``content`` the record's
serialized bytes. The first occurrence in dataset order (the order ``ds.read()`` gives: shards
in read order, records in file order) is kept, across shards and splits, or within each split
(``per_split``). Only the shards holding a duplicate are rewritten, by the row changes'
machinery (catalog/ops/rowchanges.py: the rewrite jobs, the one commit, the fresh start when
shards were replaced meanwhile, tokens, dry runs); this module finds the duplicates.

Equality is by a 128-bit hash (BLAKE2b, 16-byte digest) of the key's canonical bytes: two
different keys are taken for equal with probability about n^2 / 2^129 for n records
(1e-20 for a billion), far below the chance of a disk error; keys are not compared
themselves. The canonical bytes of a feature's value (prefix-free, so a key of several
features is one string): absent (an optional feature without a value) is a value of its own
(two rows both lacking it are equal); numbers as their schema's type (int64, float32), their
shape included, floats by value: every NaN equals every NaN and -0.0 equals 0.0 (as pandas'
``drop_duplicates``); text and bytes as their bytes; lists element by element. With
``content`` the record's bytes are hashed as they are (two records with the same values
written in another field order differ).

Bounded memory whatever the dataset's size, an external hash partitioning:
  1. one job per shard on the executor reads it and writes its records' (hash, shard,
     position) entries, 24 bytes each, into one file in the catalog's spill directory
     (``<catalog>/.spill``, removed at the end), in runs of about CHUNK_ENTRIES entries (512k,
     12 MB: a shard of any size is never held whole), each run ordered by partition (hash
     mod P, P chosen so that a partition holds about PARTITION_ENTRIES entries: 2M, 48 MB);
  2. the partitions one at a time: each run's part read (in dataset order), stably sorted by
     hash, every entry but the first of its hash marked; each shard's positions to drop appended
     to a file of its own, which its rewrite job reads.
Memory is bounded by a run and a read batch (phase 1, per worker: about 50 MB) and one
partition with its sort (phase 2: about 100 MB), whatever the number of rows or their sizes.
The workers write to the spill directory: on a Dask cluster it must be shared with them.
"""

from __future__ import annotations

import contextlib
import hashlib
import struct
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from catalog import faults
from catalog.commit.changes import DEDUP
from catalog.commit.handles import DatasetHandle, LiveShard, Snapshot, snapshot
from catalog.commit.values import Progress
from catalog.errors import (
    CatalogError,
    FeatureNotFoundError,
    Interrupted,
    RowChangeError,
    StorageError,
    UsageError,
)
from catalog.executors import run_jobs
from catalog.ops.options import CommitOptions, Unpack, VerbKeywords, check_keywords, jobs_of
from catalog.ops.rowchanges import Drops, RowChange, RowChangeReport, run_row_change
from catalog.schema import Schema
from catalog.schema.features import Feature
from catalog.storage import shard_batches, spill_dir
from catalog.storage.content import check_named
from catalog.words import counted

PARTITION_ENTRIES = 2_000_000  # entries of one phase-2 partition, at most about (24 bytes each; sorting: 2x that)
CHUNK_ENTRIES = 1 << 19  # entries a phase-1 worker holds at once (a run of its spill file), at most about
SPILL = ".spill"  # in the catalog's directory
ENTRY = np.dtype([("h1", "<u8"), ("h2", "<u8"), ("shard", "<u4"), ("index", "<u4")])
_NUMPY: dict[str, np.dtype[Any]] = {"int64": np.dtype("<i8"), "float32": np.dtype("<f4")}
_MAX_RECORDS = 1 << 32  # a position is a uint32
_SPILL_TRIES = 3


@dataclass(frozen=True)
class HashJob:
    """One shard's phase 1: its records' entries into ``out``, ordered by partition."""

    schema: dict[str, Any]
    key: tuple[str, ...]  # () : the record's bytes
    prefix: bytes  # hashed before each key: the split's name with per_split, else nothing
    source: str
    records: int
    size: int
    checksum: str
    fingerprint: str | None
    adopted: bool
    ordinal: int  # the shard's place in dataset order
    partitions: int
    out: str


def hash_shard(job: HashJob) -> list[list[int]]:
    """Module-level (picklable) worker: writes the shard's entries, a run of at most about
    CHUNK_ENTRIES entries at a time (each run ordered by partition); each run's count per
    partition."""
    try:
        schema = Schema.from_json(job.schema)
    except CatalogError as e:
        raise RowChangeError(str(e)) from None
    check_named(job.source, job.checksum, job.fingerprint, job.adopted)
    runs: list[list[int]] = []
    digests, first, at = bytearray(), 0, 0
    with open(job.out, "wb") as out:
        for batch in shard_batches(job.source, job.size):
            try:
                digests += _digests(schema, job.key, job.prefix, batch)
            except CatalogError as e:
                raise RowChangeError(f"{job.source}: records from {at}: {e}") from None
            at += len(batch)
            if at - first >= CHUNK_ENTRIES:  # memory: a run's entries, never the whole shard's
                runs.append(_spill_run(out, digests, first, job))
                digests, first = bytearray(), at
        if at > first or not runs:
            runs.append(_spill_run(out, digests, first, job))
    if at != job.records:
        read = counted(at, "record")
        raise RowChangeError(f"{job.source}: {read} read, {job.records} registered; run `catalog verify`")
    return runs


def _spill_run(out: BinaryIO, digests: bytearray, first: int, job: HashJob) -> list[int]:
    """The entries of records ``first``, ``first + 1``... (their ``digests``) appended to
    ``out``, ordered by partition; their count per partition."""
    hashes = np.frombuffer(digests, dtype="<u8").reshape(-1, 2)
    entries = np.empty(len(hashes), dtype=ENTRY)
    entries["h1"], entries["h2"] = hashes[:, 0], hashes[:, 1]
    entries["shard"], entries["index"] = job.ordinal, np.arange(first, first + len(hashes), dtype=np.uint32)
    part = entries["h1"] % np.uint64(job.partitions)
    entries[np.argsort(part, kind="stable")].tofile(out)
    return [int(n) for n in np.bincount(part.astype(np.int64), minlength=job.partitions)]


def _digests(schema: Schema, key: tuple[str, ...], prefix: bytes, records: list[bytes]) -> bytes:
    """The 16-byte digests of ``records``' keys, one after the other."""
    if key:
        columns = schema.decode_batch(records, columns=key)  # the key's features only: a payload is not decoded
        features = schema.all_features
        per = [column_keys(columns[name], features[name]) for name in key]
        keys: Sequence[bytes] = per[0] if len(per) == 1 else [b"".join(parts) for parts in zip(*per, strict=True)]
    else:
        keys = records
    blake = hashlib.blake2b
    return b"".join([blake(prefix + k, digest_size=16).digest() for k in keys])


def column_keys(column: np.ndarray, feature: Feature) -> list[bytes]:
    """Each row's canonical bytes of ``feature``'s value (see the module's docstring); a
    column of numbers (no row absent) at once, else value by value."""
    dtype = _NUMPY.get(feature.dtype)
    if dtype is None and feature.tensor and np.dtype(feature.np_dtype).kind in "biuf":
        dtype = np.dtype(feature.np_dtype)  # a tensor's numbers (int8, bool...), one value or many
    if dtype is None or column.dtype == object:
        return [canonical(v, dtype) for v in column]
    rows = _canonical_floats(np.ascontiguousarray(column, dtype=dtype))
    head = _array_head(rows.shape[1:])
    flat = rows.reshape(len(rows), -1)
    if flat.shape[1] == 0:
        return [head] * len(rows)
    return [head + b for b in flat.view(f"V{flat.shape[1] * dtype.itemsize}").ravel().tolist()]


def canonical(value: Any, dtype: np.dtype[Any] | None) -> bytes:
    """One value's canonical bytes: 0 absent, 1 text or bytes, 2 a list, 3 an array of numbers."""
    if value is None:
        return b"\x00"
    if isinstance(value, str):
        value = value.encode()
    if isinstance(value, bytes | bytearray):
        return b"\x01" + struct.pack("<Q", len(value)) + bytes(value)
    if dtype is None and isinstance(value, np.generic):  # one value of a scalar tensor (an optional one's)
        dtype = value.dtype
    if dtype is not None or (isinstance(value, np.ndarray) and value.dtype != object):
        try:
            array = np.asarray(value, dtype=dtype)
        except ValueError:  # ragged (a sequence feature's steps of different lengths): item by item
            array = None
        if array is not None and array.dtype != object:
            array = _canonical_floats(np.ascontiguousarray(array))
            return _array_head(array.shape) + array.tobytes()
    items = list(value)
    return b"\x02" + struct.pack("<Q", len(items)) + b"".join(canonical(v, dtype) for v in items)


def _array_head(shape: tuple[int, ...]) -> bytes:
    return b"\x03" + struct.pack(f"<B{len(shape)}Q", len(shape), *shape)


def _canonical_floats(array: np.ndarray) -> np.ndarray:
    """Floats by value: -0.0 as 0.0, every NaN as one NaN."""
    if array.dtype.kind != "f":
        return array
    array = array + array.dtype.type(0)  # (-0.0 + 0.0 is 0.0; a new array, the column is not changed)
    array[np.isnan(array)] = np.nan
    return array


# --------------------------------------------------------------------------- phase 2


def non_first(entries: np.ndarray) -> np.ndarray:
    """The entries of a partition that are not the first of their hash in dataset order.
    ``entries`` come in dataset order (shard, then position: as ``_partition`` reads them), so
    a stable sort by hash alone keeps each hash's entries in that order; the hash's halves
    are taken one at a time (memory: the partition and about 20 bytes an entry beside it)."""
    order = np.lexsort((entries["h2"], entries["h1"]))  # lexsort is stable
    half = entries["h1"][order]
    same = half[1:] == half[:-1]
    half = entries["h2"][order]
    same &= half[1:] == half[:-1]
    del half
    return entries[order[1:][same]]


def _partition(files: list[str], counts: np.ndarray, starts: np.ndarray, p: int) -> np.ndarray:
    """Partition ``p``'s entries: from each run (its file, ``files[r]``) the part it holds,
    read into one array (no list of parts beside it)."""
    entries = np.empty(int(counts[:, p].sum()), dtype=ENTRY)
    at = 0
    for r in np.flatnonzero(counts[:, p]).tolist():
        n = int(counts[r, p])
        entries[at : at + n] = np.fromfile(files[r], dtype=ENTRY, count=n, offset=int(starts[r, p]) * ENTRY.itemsize)
        at += n
    return entries


def _append_drops(gone: np.ndarray, folder: Path, dropped: np.ndarray) -> None:
    """Add each shard's positions in ``gone`` to its drop file, and count them."""
    gone = gone[np.argsort(gone["shard"], kind="stable")]
    shards, firsts, counts = np.unique(gone["shard"], return_index=True, return_counts=True)
    for s, a, n in zip(shards.tolist(), firsts.tolist(), counts.tolist(), strict=True):
        with open(folder / f"drop-{s}.u4", "ab") as f:
            f.write(gone["index"][a : a + n].astype("<u4").tobytes())
        dropped[s] += n


def find_drops(runs: list[tuple[str, list[int]]], shards: int, folder: Path) -> list[Drops | None]:
    """Phase 2: per shard (``shards`` of them), its records that are not the first of their key
    (see the module's docstring); ``runs``: phase 1's, in order, each its file and its count
    per partition."""
    files = [file for file, _c in runs]
    counts = np.array([c for _f, c in runs], dtype=np.int64).reshape(len(runs), -1)
    totals = counts.sum(axis=1)
    base = np.zeros(len(runs), dtype=np.int64)  # a run's first entry in its file: its file's runs before it
    for r in range(1, len(runs)):
        base[r] = base[r - 1] + totals[r - 1] if files[r] == files[r - 1] else 0
    starts = base[:, None] + np.cumsum(counts, axis=1) - counts
    dropped = np.zeros(shards, dtype=np.int64)
    for p in range(counts.shape[1]):
        gone = non_first(_partition(files, counts, starts, p))
        if len(gone):
            _append_drops(gone, folder, dropped)
    return [Drops(int(n), str(folder / f"drop-{s}.u4")) if n else None for s, n in enumerate(dropped.tolist())]


@dataclass(frozen=True)
class _Scan:
    """dedup's scan (a rowchanges.DropScan): phases 1 and 2 over the shards of a snapshot."""

    key: tuple[str, ...]
    per_split: bool
    spill: Path

    def __call__(
        self,
        ds: DatasetHandle,
        snap: Snapshot,
        shards: list[LiveShard],
        ex: Executor | None,
        progress: Progress | None,
    ) -> list[Drops | None]:
        try:
            return self._scan(snap, shards, ex, progress)
        except KeyboardInterrupt as e:  # no intent yet, the spill files go with their folder: nothing is left
            if isinstance(e, Interrupted):
                raise
            raise Interrupted(None) from None

    def _scan(
        self, snap: Snapshot, shards: list[LiveShard], ex: Executor | None, progress: Progress | None
    ) -> list[Drops | None]:
        folder = Path(_fresh(self.spill))
        total = sum(s.records for s in shards)
        partitions = max(1, -(-total // max(1, PARTITION_ENTRIES)))
        jobs = [self._job(snap, s, i, partitions, folder) for i, s in enumerate(shards)]
        done = (lambda job, _r: progress(job.records)) if progress else None
        runs = run_jobs(hash_shard, jobs, ex, None, done)
        faults.point("dedup.spilled", folder=str(folder))
        spilled = [(job.out, run) for job, shard_runs in zip(jobs, runs, strict=True) for run in shard_runs]
        if not spilled:  # no shard
            return []
        return find_drops(spilled, len(jobs), folder)

    def _job(self, snap: Snapshot, s: LiveShard, i: int, partitions: int, folder: Path) -> HashJob:
        if s.records >= _MAX_RECORDS:
            raise RowChangeError(f"{s.path}: {s.records} records, more than dedup handles in one shard (2^32)")
        prefix = s.split.encode() + b"\x00" if self.per_split else b""
        return HashJob(
            snap.schema.to_json(), self.key, prefix, s.path, s.records, s.bytes, s.checksum, s.fingerprint,
            s.location is not None, i, partitions, str(folder / f"hashes-{i}.bin"),
        )  # fmt: skip


def _fresh(spill: Path) -> str:
    """A new folder in ``spill`` for one scan (a fresh start scans again)."""
    n = sum(1 for _ in spill.iterdir())
    folder = spill / f"scan-{n}"
    folder.mkdir()
    return str(folder)


@contextmanager
def _spilling(parent: Path) -> Iterator[Path]:
    """This dedup's spill directory in ``parent``, removed at the end, and ``parent`` too when
    nothing else is in it (another dedup's directory, or a killed one's, keeps it)."""
    try:
        with ExitStack() as stack:
            yield _spill_in(stack, parent)
    finally:
        with contextlib.suppress(OSError):  # not empty, or gone already: it stays as it is
            parent.rmdir()


def _spill_in(stack: ExitStack, parent: Path) -> Path:
    """A new spill directory in ``parent``, entered on ``stack``; made again when ``parent``
    vanished under it (another dedup ending removed it between its making and ours)."""
    for _ in range(_SPILL_TRIES - 1):
        try:
            return stack.enter_context(spill_dir(parent, "dedup"))
        except StorageError:
            if parent.exists():
                raise
    return stack.enter_context(spill_dir(parent, "dedup"))


def key_of(schema: Schema, key: str | Sequence[str] | None, content: bool) -> tuple[str, ...]:
    """The key's feature names, each in the schema (() with ``content``)."""
    if content:
        if key:
            raise UsageError("dedup: give a key (--key FEATURE[,FEATURE...]) or content (--content), not both")
        return ()
    names = tuple(n.strip() for n in key.split(",")) if isinstance(key, str) else tuple(key or ())
    if not names:
        raise UsageError("dedup: give a key (--key FEATURE[,FEATURE...]) or whole-record identity (--content)")
    if not all(names):  # "id," or "a,,b": a feature name left out between commas
        raise UsageError(f"dedup: --key {key if isinstance(key, str) else ','.join(names)!r} has an empty feature name")
    known = schema.all_features
    for name in names:
        if name not in known:
            raise FeatureNotFoundError(f"dedup: no feature {name!r} in the schema (it has {', '.join(known)})")
    return names


def dedup(
    ds: DatasetHandle,
    key: str | Sequence[str] | None = None,
    *,
    content: bool = False,
    split: str | None = None,
    per_split: bool = False,
    dry_run: bool = False,
    **run: Unpack[VerbKeywords],
) -> RowChangeReport:
    """A new version without duplicates: of each ``key`` (a feature name, several as a list or
    "a,b"; or with ``content``, the whole record's bytes) only the first record in dataset
    order is kept, across splits, or within each with ``per_split``; ``split``: that split's
    rows only. Only the shards holding a duplicate are rewritten; the rows left keep their
    order. Equality is by a 128-bit hash of the key (see the module's docstring: absent values
    equal, NaN equals NaN); memory stays bounded (hash partitions spilled to disk).
    ``dry_run``: count the duplicates, write nothing to the data area or the manifest; none:
    no commit (``version`` None). ``token``: a retry of a dedup that committed reports it."""
    check_keywords("dedup", run, VerbKeywords)
    names = key_of(snapshot(ds).schema, key, content)
    described = f"key {','.join(names)}" if names else "content"
    options = CommitOptions.taking(run)
    with _spilling(ds.catalog.root / SPILL) as spill:
        scan = _Scan(names, per_split, spill)
        change = RowChange(DEDUP, described, split=split, dry_run=dry_run, options=options, scan=scan)
        report = run_row_change(ds, change, **jobs_of(run))
    report.key, report.per_split = list(names), per_split
    return report
