"""Record indexes for shards registered without one (before manifest format 4, or taken by
``--link``): ``catalog index``, the readers' on-the-fly indexing, and DALI's index files.

A shard's index (storage.index) is one sequential read of the shard away. It is written in
the data area's index tree as a shard is (temporary name, fsync, rename, folder fsync), then
registered by ``UPDATE shards SET index_checksum = ... WHERE index_checksum IS NULL``: the
index is a function of the shard's bytes, so indexers racing for one shard write identical
files and the first registration stands; an interrupted run leaves at most an index file
that nothing registers, which its shard owns (gc keeps it while the shard is registered and
collects it with the shard) and the next run replaces. A shard collected meanwhile is never
registered (``collected_at IS NULL``). Where the catalog or its data area cannot be written,
readers get the offsets in memory instead (``ensure_indexes``), never an error. ``catalog index``
also writes again, from its shard, a registered index whose file was lost: the same bytes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from sqlalchemy import bindparam, select, update

from catalog import faults
from catalog import manifest as mf
from catalog.commit.handles import CatalogHandle, DatasetHandle
from catalog.commit.plans import PlannedShard, ReadPlan, plan
from catalog.commit.values import Progress, VersionRef
from catalog.errors import CatalogError, CorruptShardError, UsageError, VersionNotFoundError
from catalog.jsonform import SECONDS, JsonReport, shown
from catalog.manifest import DATASETS, SHARDS
from catalog.storage import (
    clear_dead_partials,
    fsync_dir,
    index_rel,
    partial_path,
    shard_missing,
    write_error,
)
from catalog.storage.index import OFFSET, has_file, index_bytes, load_offsets, publish_index, stored_index

INDEX_BATCH = 256  # shards whose index files are registered in one transaction
INDEX_BATCH_BYTES = 64 << 20  # ... and at most this many bytes of offsets held meanwhile (in-memory fallback)

_REGISTER = (
    update(SHARDS)
    .where(SHARDS.c.path == bindparam("p"), SHARDS.c.index_checksum.is_(None), SHARDS.c.collected_at.is_(None))
    .values(index_checksum=bindparam("c"))
)


@dataclass
class IndexReport(JsonReport):
    """What ``catalog index`` did for one dataset at one version."""

    dataset: str
    version: int
    shards: int  # live at the version
    indexed: int = 0  # indexed by this run (or by another that registered the same index first)
    already: int = field(default=0, metadata=shown("already_indexed"))  # had an index
    rebuilt: int = 0  # had one registered whose file was lost: written again from the shard
    compressed: int = 0  # gzip/zlib: no random access, no index
    records: int = 0  # in the shards indexed by this run
    index_bytes: int = 0  # written by this run
    seconds: float = field(default=0.0, metadata=SECONDS)


def _dali_files(files: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"shard": shard, "index": index} for shard, index in files]


@dataclass
class DaliReport(JsonReport):
    """DALI index files written for the shards of one version, in ``files()`` order."""

    dataset: str
    version: int
    directory: str
    records: int = 0
    # (shard, its DALI index file)
    files: list[tuple[str, str]] = field(default_factory=list, metadata=shown(convert=_dali_files))


# --------------------------------------------------------------------------- indexing


@dataclass(eq=False)
class _Indexer:
    """Indexes shards one sequential read each, registering them in batches. ``fallback``: a
    catalog or data area that cannot be written is no error; the offsets found then go to
    ``offsets`` (by the shard's path in the data area), when given."""

    cat: CatalogHandle
    fallback: bool = False
    offsets: dict[str, np.ndarray] | None = None
    progress: Progress | None = None
    writable: bool = field(default=True, init=False)
    pending: list[tuple[PlannedShard, str, np.ndarray | None]] = field(default_factory=list, init=False)
    held: int = field(default=0, init=False)  # bytes of offsets in self.pending
    # shard path in the data area -> registered index checksum
    found: dict[str, str] = field(default_factory=dict, init=False)
    records: int = field(default=0, init=False)
    bytes: int = field(default=0, init=False)

    def run(self, shards: Iterable[PlannedShard]) -> dict[str, str]:
        """Index ``shards``; returns the index checksum now registered for each it could register."""
        for s in shards:
            offsets = _scan(s)
            if self.writable:
                self._publish(s, offsets)
            if not self.writable and self.offsets is not None:
                self.offsets[s.rel] = offsets
            if len(self.pending) >= INDEX_BATCH or self.held >= INDEX_BATCH_BYTES:
                self._flush()
            if self.progress:
                self.progress(s.bytes)
        self._flush()
        return self.found

    def _publish(self, s: PlannedShard, offsets: np.ndarray) -> None:
        data, checksum = index_bytes(offsets)
        try:
            # A temporary name of its own: another indexer may be writing this shard's index too.
            publish_index(self.cat.store, s.rel, data, s.bytes, unique=True)
        except (CatalogError, OSError) as e:
            if not self.fallback:
                if isinstance(e, CatalogError):
                    raise
                raise write_error(s.index_path, e) from e
            self.writable = False  # a read-only data area: the rest in memory too
            return
        keep = offsets if self.fallback and self.offsets is not None else None
        self.pending.append((s, checksum, keep))
        self.held += 0 if keep is None else keep.nbytes

    def _flush(self) -> None:
        pending, self.pending, self.held = self.pending, [], 0
        if not pending:
            return
        registered: dict[str, str] = {}
        try:
            faults.point("index.written", shards=[s.rel for s, _c, _o in pending])
            registered = _register(self.cat, [(s.rel, checksum) for s, checksum, _o in pending])
        except (CatalogError, OSError):
            if not self.fallback:
                raise
            self.writable = False  # a read-only manifest: its files stay, owned by their shards
        for s, checksum, offsets in pending:
            got = registered.get(s.rel)
            if got is None:  # not registered (collected meanwhile, or a read-only manifest)
                if offsets is not None and self.offsets is not None:
                    self.offsets[s.rel] = offsets
                continue
            if got != checksum:  # another indexer read other bytes: the shard changed under us
                raise CorruptShardError(s.path, "record index", got, checksum)
            self.found[s.rel] = got
            self.records += s.records
            self.bytes += s.records * OFFSET.itemsize


def _scan(s: PlannedShard) -> np.ndarray:
    try:
        return load_offsets(s.path, s.index_path, s.records, s.bytes, None)  # one read, CRCs and count checked
    except FileNotFoundError as e:
        raise shard_missing(s.path) from e


def _register(cat: CatalogHandle, pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Register each (shard path, index checksum) whose shard has none yet and is not collected;
    returns the index checksum each of those shards has now (ours, or an earlier indexer's)."""
    paths = [rel for rel, _c in pairs]

    def txn() -> dict[str, str]:
        with mf.write_txn(cat.engine) as conn:
            conn.execute(_REGISTER, [{"p": rel, "c": checksum} for rel, checksum in pairs])
            rows = conn.execute(
                select(SHARDS.c.path, SHARDS.c.index_checksum).where(
                    SHARDS.c.path.in_(paths), SHARDS.c.collected_at.is_(None), SHARDS.c.index_checksum.is_not(None)
                )
            ).all()
        return {path: checksum for path, checksum in rows}

    return mf.with_lock_retry(txn)


def _unindexed(shards: Iterable[PlannedShard]) -> list[PlannedShard]:
    """The uncompressed shards without an index, each once (a split spec may name one twice)."""
    seen: dict[str, PlannedShard] = {}
    for s in shards:
        if s.index_checksum is None and s.compression == "none" and s.rel not in seen:
            seen[s.rel] = s
    return list(seen.values())


def index_dataset(ds: DatasetHandle, version: VersionRef = None, progress: Progress | None = None) -> IndexReport:
    """Index every uncompressed shard of ``version`` (default: current) that has no index yet,
    and write again the registered index files that were lost (:func:`_rewrite_lost`)."""
    start = time.monotonic()
    read_plan = plan(ds, version)
    todo = _unindexed(read_plan.shards)
    indexer = _Indexer(ds.catalog, progress=progress)
    indexer.run(todo)
    rebuilt = _rewrite_lost(ds, read_plan.shards)
    compressed = sum(s.compression != "none" for s in read_plan.shards)
    return IndexReport(
        ds.name, read_plan.version, len(read_plan.shards), len(indexer.found),
        len(read_plan.shards) - compressed - len(todo) - rebuilt, rebuilt, compressed, indexer.records,
        indexer.bytes, time.monotonic() - start,
    )  # fmt: skip


def _rewrite_lost(ds: DatasetHandle, shards: Iterable[PlannedShard]) -> int:
    """Write again, from its shard, each registered index file missing from the index tree (one
    listing of the dataset's folder there, before the manifest is asked: as gc does) or damaged
    (cut short or never written: a crash of the machine can leave either, as indexes are not
    fsynced); how many. An index is a function of its shard's bytes, so the file rebuilt is
    the one registered (its checksum checked; no row changes), where no backup of the data
    area has it."""
    store = ds.catalog.store
    registered = {
        s.rel: (s, s.index_checksum)
        for s in shards
        if s.index_checksum is not None and s.compression == "none" and has_file(s.bytes, store.remote)
    }  # (a small local shard's index has no file: storage.index)
    present = {f.rel for f in store.index_listing({ds.name})} if registered else set()
    lost = [
        s
        for s, checksum in registered.values()
        if index_rel(s.rel) not in present or stored_index(s.index_path, s.records, s.bytes, checksum) is None
    ]
    return sum(_rewrite_one(ds.catalog, s) for s in lost)


def _rewrite_one(cat: CatalogHandle, s: PlannedShard) -> bool:
    """Publish the lost index of ``s`` again; False when gc collected the shard meanwhile (its
    index with it). An index that comes out other than the registered one means the shard
    changed since its commit: refused, nothing written."""
    try:
        data, checksum = index_bytes(_scan(s))
    except VersionNotFoundError:  # the shard is gone too: collected (nothing to do), or deleted by hand
        if _collected(cat, s.rel):
            return False
        raise
    if checksum != s.index_checksum:
        raise CorruptShardError(s.path, "record index", s.index_checksum, checksum)
    publish_index(cat.store, s.rel, data, s.bytes, unique=True)
    return True


def _collected(cat: CatalogHandle, rel: str) -> bool:
    """Whether gc collected the shard ``rel`` (or it is registered no more)."""
    with mf.read_txn(cat.engine) as conn:
        row = conn.execute(select(SHARDS.c.collected_at).where(SHARDS.c.path == rel)).first()
    return row is None or row.collected_at is not None


def index_catalog(
    cat: CatalogHandle, names: Sequence[str] | None = None, version: VersionRef = None, progress: Progress | None = None
) -> list[IndexReport]:
    """index_dataset for the datasets ``names`` (default: all, each at its current version)."""
    if version is not None and (names is None or len(names) != 1):
        raise UsageError("--version needs exactly one dataset name")
    if not names:
        with mf.read_txn(cat.engine) as conn:
            names = list(conn.execute(select(DATASETS.c.name).order_by(DATASETS.c.name)).scalars())
    handles = [cat.lookup(name) for name in names]  # every name checked before any work
    return [index_dataset(ds, version, progress) for ds in handles]


def ensure_indexes(ds: DatasetHandle, read_plan: ReadPlan, offsets: dict[str, np.ndarray] | None = None) -> ReadPlan:
    """``read_plan`` with an index registered for every uncompressed shard it reads, building the
    missing ones on the fly as ``catalog index`` does. Where the catalog or its data area cannot
    be written, no error: the shard's offsets go to ``offsets`` (by its path in the data area,
    when a dict is given) and its ``index_checksum`` stays None."""
    todo = _unindexed(read_plan.shards)
    if not todo:
        return read_plan
    found = _Indexer(ds.catalog, fallback=True, offsets=offsets).run(todo)
    shards = tuple(
        s if s.index_checksum is not None or s.rel not in found else replace(s, index_checksum=found[s.rel])
        for s in read_plan.shards
    )
    return replace(read_plan, shards=shards)


# --------------------------------------------------------------------------- DALI


def dali_name(shard: str) -> str:
    """The DALI index file of a shard (a path or URL, as ``files()`` gives it): its file name + ".idx"."""
    return shard.rstrip("/").rsplit("/", 1)[-1] + ".idx"


def dali_indexes(ds: DatasetHandle, directory: str | os.PathLike[str], version: VersionRef = None) -> DaliReport:
    """NVIDIA DALI's index files for the shards of ``version`` (``fn.readers.tfrecord(path=...,
    index_path=...)``): per shard, one ``"<offset> <size>\\n"`` line per record, ``size`` being
    the framed record's (12-byte header, data, 4-byte footer), as DALI's tfrecord2idx writes.
    Shards without an index are indexed first, as ``catalog index`` does."""
    read_plan = plan(ds, version)
    for s in read_plan.shards:
        if s.compression != "none":
            raise UsageError(
                f"{s.path}: {s.compression}-compressed; DALI's TFRecord reader takes uncompressed files only "
                f"(`catalog export {ds.name} FILE` writes the version as one)"
            )
    out = Path(directory)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise write_error(out, e) from e
    clear_dead_partials(out)
    computed: dict[str, np.ndarray] = {}
    read_plan = ensure_indexes(ds, read_plan, computed)
    report = DaliReport(ds.name, read_plan.version, str(out))
    for s in read_plan.shards:
        offsets = computed.get(s.rel)
        if offsets is None:
            assert s.index_checksum is not None  # ensure_indexes registered it, or computed it
            offsets = load_offsets(s.path, s.index_path, s.records, s.bytes, s.index_checksum)
        target = out / dali_name(s.path)
        _write_dali(target, offsets, s.bytes)
        report.files.append((s.path, str(target)))
        report.records += s.records
    if report.files:
        fsync_dir(out)
    return report


def _write_dali(target: Path, offsets: np.ndarray, size: int) -> None:
    """One DALI index file, written under a partial name, fsynced, then renamed over any older
    one (a shard's index file never changes: a rerun writes the same bytes)."""
    sizes = np.diff(offsets, append=np.uint64(size))
    text = "".join(f"{o} {n}\n" for o, n in zip(offsets.tolist(), sizes.tolist(), strict=True))
    temp = partial_path(target)
    try:
        with open(temp, "w", encoding="ascii") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target)
    except OSError as e:
        temp.unlink(missing_ok=True)
        raise write_error(target, e) from e
