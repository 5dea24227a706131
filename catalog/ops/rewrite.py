"""Commits that rewrite a dataset's shards without changing its records: compact (adjacent
small shards concatenated) and restore (an older version's shards back as a new version);
and the verified byte copies they and export share.

As every change: a write intent first, per-shard jobs on an executor (picklable
descriptions run by module-level functions), then one commit through the commit protocol,
which retires the old shards (tombstones, still readable by version) and registers the new
ones. Until that commit nothing is visible. Migrations are in catalog/migrations/.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from catalog.commit.changes import (
    COMPACT,
    RESTORE,
    Change,
    NewShard,
    RequireLive,
    RetireShards,
    RevertMigrations,
    SetCompression,
    SetSchema,
    adding,
    updates,
)
from catalog.commit.handles import DatasetHandle, LiveShard, Snapshot, snapshot
from catalog.commit.intents import Intent
from catalog.commit.protocol import LiveChanged, commit, token_commit
from catalog.commit.slicing import validate_split
from catalog.commit.statistics import stored_stats
from catalog.commit.values import Commit, default_author
from catalog.errors import (
    CatalogError,
    CommitConflictError,
    CorruptShardError,
    SplitNotFoundError,
    VersionNotFoundError,
)
from catalog.executors import executor_for, run_jobs
from catalog.ops.options import CommitOptions, Unpack, VerbKeywords, check_keywords
from catalog.stats import merged as merge_stats
from catalog.storage import (
    CHECKSUM_CHUNK,
    OWNED,
    SHARD_SUFFIX,
    UNCHECKED,
    UNLIMITED,
    ShardFile,
    ShardSink,
    Store,
    clear_attempt,
    copy_verified,
    format_checksum,
    index_folder,
    index_rel,
    location_exists,
    shard_batches,
    store_for,
)
from catalog.storage.content import check_named
from catalog.storage.index import OFFSET, OffsetWalker, has_file, index_bytes, publish_index, read_index
from catalog.tfrecord.framing import stored_compression
from catalog.words import counted

DEFAULT_TARGET_SIZE = 256 << 20


# --------------------------------------------------------------------------- byte copies


@dataclass(frozen=True)
class ConcatJob:
    """Concatenate shards into one new shard (compaction): framing concatenates."""

    sources: tuple[LiveShard, ...]
    records: int
    data_root: str
    dataset: str
    prefix: str  # file-name prefix, led by the intent id
    compression: str = "none"  # of the new shard: the dataset's


def concat_job(job: ConcatJob) -> ShardFile:
    """Module-level (picklable) worker: one compacted shard, and its record index."""
    store = store_for(job.data_root)
    clear_attempt(store, job.dataset, job.prefix)
    if job.compression != "none" or any(s.compression != "none" for s in job.sources):
        return _reframe(job)
    rel = f"{job.dataset}/{job.prefix}-00000{SHARD_SUFFIX}"  # as ShardSink names its first file
    temp, f = store.open_temp(rel)
    buf = bytearray(CHECKSUM_CHUNK)
    crc = 0
    parts = []
    try:
        with f:
            for src in job.sources:
                start = f.tell()
                known = _registered_offsets(store, src)
                walker = None if known is not None else OffsetWalker()
                out: Any = f if walker is None else _Tee(f, walker)  # indexed in the same read
                crc = copy_verified(src.path, src.bytes, src.checksum, out, crc, buf)
                found = known if walker is None else walker.offsets(src.path, src.records)
                parts.append(found + np.uint64(start))  # framing concatenates: offsets shift
            size = f.tell()
            store.publish(f, temp, rel)
    finally:
        if store.remote:
            temp.unlink(missing_ok=True)  # a failed copy's spool (publish removes it otherwise)
    data, index_checksum = index_bytes(np.concatenate(parts) if parts else np.zeros(0, OFFSET))
    publish_index(store, rel, data, size)
    store.sync_dir(job.dataset)
    return ShardFile(rel, job.records, size, format_checksum(crc), index_checksum=index_checksum)


def _registered_offsets(store: Store, src: LiveShard) -> np.ndarray | None:
    """A source's registered index, when it has one that checks out; None: index it while copying
    (a damaged index is verify's to report, not a reason to stop a compaction)."""
    if src.index_checksum is None:
        return None
    try:
        return read_index(store.index_url(src.rel), src.records, src.bytes, src.index_checksum)
    except CatalogError:
        return None


class _Tee:
    """A copy's output that also shows every chunk to an OffsetWalker."""

    def __init__(self, f: Any, walker: OffsetWalker) -> None:
        self._f, self._walker = f, walker

    def write(self, chunk: memoryview) -> None:
        self._walker.write(chunk)
        self._f.write(chunk)


def _reframe(job: ConcatJob) -> ShardFile:
    """Compressed sources, or a compressed shard to make: the records re-framed into one shard
    in the job's compression."""
    sink = ShardSink(job.data_root, job.dataset, job.prefix, UNLIMITED, UNLIMITED, compression=job.compression)
    try:
        for src in job.sources:
            check_named(src.path, src.checksum, src.fingerprint, src.location is not None)
            for batch in shard_batches(src.path, src.bytes):
                sink.write_many(batch)
    except BaseException:
        sink.abort()  # its files go now, whether or not the manifest can settle the intent
        raise
    shards = sink.close()  # one shard (the sink never rolls), or none when the sources hold no records
    records = shards[0].records if shards else 0
    if records != job.records or not shards:
        where = ", ".join(s.path for s in job.sources)
        found = counted(records, "record")
        raise CorruptShardError(where, message=f"{where}: {found} read, {job.records} registered; run `catalog verify`")
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
    split: str | None = None  # the split compacted; None: every split (each on its own)

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "dry_run": self.dry_run,
            "split": self.split,
            "version": self.commit.version if self.commit else None,
            "duplicate": bool(self.commit and self.commit.duplicate),
            "data_change": False,
            "groups": self.groups,
            "shards_before": self.shards_before,
            "shards_after": self.shards_after,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
        }


def plan_compaction(
    shards: Sequence[LiveShard], target_size: int, split: str | None = None, compression: str | None = None
) -> list[list[LiveShard]]:
    """Runs of small shards adjacent in their split's read order (same split, schema version
    and compression), each run at most ``target_size`` bytes, in dataset order; runs of one
    shard are left alone, unless ``compression`` is given and the shard is stored otherwise.
    With ``split``, that split's shards only. A run never spans two splits: each split keeps
    its records and their order, whatever other splits interleave."""
    by_split: dict[str, list[LiveShard]] = {}
    for s in shards:
        if split is None or s.split == split:
            by_split.setdefault(s.split, []).append(s)
    groups = [g for members in by_split.values() for g in _runs(members, target_size, compression)]
    return sorted(groups, key=lambda g: g[0].seq)


def _runs(shards: Sequence[LiveShard], target_size: int, compression: str | None) -> list[list[LiveShard]]:
    """plan_compaction within one split."""
    groups: list[list[LiveShard]] = []
    run: list[LiveShard] = []
    size = 0

    def close() -> None:
        if len(run) > 1 or (run and compression is not None and run[0].compression != compression):
            groups.append(list(run))
        run.clear()

    for s in shards:
        fits = run and s.schema_version == run[0].schema_version and s.compression == run[0].compression
        if s.bytes >= target_size:
            close()
            if compression is not None and s.compression != compression:
                groups.append([s])  # rewritten alone, in the new compression
            continue
        if not fits or size + s.bytes > target_size:
            close()
            size = 0
        run.append(s)
        size += s.bytes
    close()
    return groups


def compact(
    ds: DatasetHandle,
    target_size: int | None = None,
    *,
    dry_run: bool = False,
    split: str | None = None,
    compression: str | None = None,
    **kw: Unpack[VerbKeywords],
) -> CompactReport:
    """Merge adjacent small shards of each split (or of ``split`` only) in one no-data-change
    commit: every split keeps its records in their order. With ``compression`` (none, gzip or
    zlib), every shard stored otherwise is rewritten in it too, and the dataset stores its
    new shards so from then on (with ``split``, that split's shards only are rewritten).
    ``token``: a retry with the token of a compaction that committed rewrites nothing and
    reports that commit (``commit.duplicate``)."""
    check_keywords("compact", kw, VerbKeywords)
    start, opts, progress = time.monotonic(), CommitOptions.taking(kw), kw.get("progress")
    if not dry_run and (prior := token_commit(ds, opts.token)) is not None:
        return CompactReport(ds.name, prior, 0, prior.total_shards, prior.total_shards, 0, 0.0, False, split)
    snap = snapshot(ds)
    if split is not None:
        _check_split(ds.name, validate_split(split), snap)
    target = None if compression is None else stored_compression(compression)
    groups = plan_compaction(snap.shards, target_size or DEFAULT_TARGET_SIZE, split, target)
    merged = sum(len(g) for g in groups)
    report = CompactReport(
        ds.name, None, len(groups), len(snap.shards), len(snap.shards) - merged + len(groups),
        sum(s.bytes for g in groups for s in g), 0.0, dry_run, split,
    )  # fmt: skip
    if dry_run or (not groups and target in (None, ds.compression)):
        return report
    with Intent.of(ds) as intent:
        root, compression = ds.catalog.store.root, target or ds.compression
        jobs = [
            ConcatJob(tuple(g), sum(s.records for s in g), root, ds.name, intent.prefix(i), compression)
            for i, g in enumerate(groups)
        ]
        done = (lambda job, _r: progress(sum(s.bytes for s in job.sources))) if progress else None
        with executor_for(kw.get("executor"), kw.get("workers"), len(jobs)) as ex:
            files = run_jobs(concat_job, jobs, ex, intent, done)
        files = with_stats(ds, files, groups)
        pairs = zip(files, groups, strict=True)
        merged_into = [NewShard(f, g[0].seq, g[0].schema_version, g[0].split) for f, g in pairs]
        change = Change(
            COMPACT, snap.version, snap.schema_version,
            opts.message or f"compact {merged} shards into {len(groups)}" + (f", stored {target}" if target else ""),
            opts.author or default_author(), intent.id,
            updates(
                adding(merged_into), RetireShards.of(s for g in groups for s in g),
                None if target is None else SetCompression(target),
            ),
            token=opts.token,
        )  # fmt: skip
        report.commit = _commit_merged(ds, change, intent)
    report.seconds = time.monotonic() - start
    return report


def _commit_merged(ds: DatasetHandle, change: Change, intent: Intent) -> Commit:
    try:
        done = commit(ds, change)
    except LiveChanged as e:
        raise CommitConflictError(
            f"{len(e.retired)} of the shards this compaction merged were rewritten meanwhile (by a migrate, "
            "compact, restore or erasure): nothing was registered; run it again"
        ) from None
    if done.duplicate:  # a twin with the token committed meanwhile: ours is not needed
        intent.settle(None, intent.discard_files)
    return done


def _check_split(name: str, split: str, snap: Snapshot) -> None:
    have = sorted({s.split for s in snap.shards})
    if split not in have:
        raise SplitNotFoundError(f"no split {split!r} in dataset {name!r} (splits: {', '.join(have) or 'none'})")


# --------------------------------------------------------------------------- restore


def restore(
    ds: DatasetHandle, version: int | str, message: str = "", author: str | None = None, token: str | None = None
) -> Commit:
    """A new commit whose live shards and schema are exactly ``version``'s (a number or a tag;
    history keeps all). Each shard comes back in its split. ``token``: a retry with the token
    of a restore that committed answers with that commit (``duplicate``), nothing written."""
    if (prior := token_commit(ds, token)) is not None:
        return prior
    asked = version
    for _ in range(10):
        target = snapshot(ds, version)
        version = target.version  # a tag resolved once: every attempt restores the same version
        if not message and asked != version and not str(asked).isdigit():
            message = f"restore version {version} (tag {asked})"
        now = snapshot(ds)
        for s in target.shards:
            if not (ds.catalog.store.exists(s.rel) if s.location is None else location_exists(s.location)):
                raise VersionNotFoundError(
                    f"dataset {ds.name!r} version {version} cannot be restored: {s.path} is missing"
                )
        live_now = {s.id for s in now.shards}
        keep = {s.id for s in target.shards} & live_now
        try:
            who = author or default_author()
            return _restore_once(ds, version, target, now, live_now, keep, message, who, token)
        except LiveChanged:
            continue  # a commit landed meanwhile: plan again (the intent's files were discarded)
    raise CommitConflictError(
        f"dataset {ds.name!r} kept changing during the restore: nothing was registered; run it again"
    )


def _restore_once(
    ds: DatasetHandle, version: int, target: Snapshot, now: Snapshot, live_now: set[int], keep: set[int], message: str,
    author: str, token: str | None,
) -> Commit:  # fmt: skip
    with Intent.of(ds) as intent:
        back = [s for s in target.shards if s.id not in keep]
        files = with_stats(ds, [_relink(ds, intent, i, s) for i, s in enumerate(back)], [[s] for s in back])
        revived = [NewShard(f, s.seq, s.schema_version, s.split) for f, s in zip(files, back, strict=True)]
        schema = None if target.schema == now.schema else SetSchema(target.schema)
        change = Change(
            RESTORE, now.version, now.schema_version, message or f"restore version {version}", author, intent.id,
            updates(adding(revived), RetireShards(frozenset(live_now - keep)), schema, RevertMigrations(version)),
            (RequireLive(frozenset(live_now)),), token,
        )  # fmt: skip
        done = commit(ds, change)
        if done.duplicate:  # a twin with the token committed meanwhile: ours is not needed
            intent.settle(None, intent.discard_files)
        return done


def _relink(ds: DatasetHandle, intent: Intent, unit: int, s: LiveShard) -> ShardFile:
    """A retired shard back under a new name: a hard link (same bytes, same inode), else a copy;
    its record index likewise, registered with the checksum it had. An adopted shard comes back
    as what it was: its own file, under a new name."""
    rel = f"{ds.name}/{intent.prefix(unit)}-00000{SHARD_SUFFIX}"
    store = ds.catalog.store
    if s.location is None and not store.link(s.rel, rel):  # no hard links here: a verified copy
        return concat_job(ConcatJob((s,), s.records, store.root, ds.name, intent.prefix(unit)))
    index_checksum = s.index_checksum  # a function of the same bytes: the readers rebuild a missing file
    if s.index_checksum is not None and has_file(s.bytes, store.remote):
        store.prepare(index_folder(ds.name))
        with contextlib.suppress(FileNotFoundError):  # lost (a crash, by hand): `catalog index`
            store.link(index_rel(s.rel), index_rel(rel))
    store.sync_dir(ds.name)
    # An adopted file is the same file, as registered; a linked one has a new ctime from this link.
    fingerprint = s.fingerprint if s.location is not None or s.fingerprint == OWNED else UNCHECKED
    return ShardFile(
        rel, s.records, s.bytes, s.checksum, s.compression, index_checksum, location=s.location,
        fingerprint=fingerprint or UNCHECKED,
    )  # fmt: skip


def with_stats(
    ds: DatasetHandle, files: Sequence[ShardFile], sources: Sequence[Sequence[LiveShard]]
) -> list[ShardFile]:
    """Rewritten shards (each holding exactly the records of its sources) with their sources'
    statistics merged: nothing decoded again. A shard some source of which has none gets none."""
    if not ds.catalog.statistics:
        return list(files)
    known = stored_stats(ds, [s.rel for group in sources for s in group])
    out = []
    for f, group in zip(files, sources, strict=True):
        if group and all(s.rel in known for s in group):
            f = replace(f, stats=merge_stats(known[s.rel] for s in group).to_bytes())
        out.append(f)
    return out
