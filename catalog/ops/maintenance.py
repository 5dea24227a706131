"""verify and gc: checking shards against the manifest, and collecting unregistered files."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select

# The commit protocol through the package's lazy name: gc alone commits (it drops abandoned
# datasets), and verify's start-up counts in its GB/s (tests/cli/test_cli_startup.py).
from catalog import commit, faults
from catalog import manifest as mf
from catalog.commit.handles import CatalogHandle, not_found
from catalog.commit.intents import intent_states, live_intents, revoke
from catalog.commit.values import GcReport, Problem, Progress, ShardCount, TagKeep, VerifyReport
from catalog.errors import CatalogError, DataAreaError, DatasetNotFoundError, ManifestError, SchemaError, UsageError
from catalog.executors import run_jobs
from catalog.manifest import COMMITS, DATASETS, SHARDS, TAGS, utcnow
from catalog.storage import (
    Store,
    StoredFile,
    file_checksum,
    file_io,
    shard_batches,
    store_for,
)
from catalog.storage import names as naming
from catalog.storage.index import OFFSET, IndexCheck, has_file, read_index
from catalog.words import counted


def _data_files(store: Store, datasets: set[str] | None, links: list[str] | None = None) -> list[StoredFile]:
    """Every file in the data area's dataset folders (all, or those of ``datasets``); the
    symbolic links found there, never followed, go to ``links`` as local paths."""
    found: list[str] = []
    files = store.listing(datasets, found)
    if links is not None:
        links.extend(os.path.join(store.root, rel) for rel in found)
    return files


def check_owner(cat: CatalogHandle, dry_run: bool) -> None:
    """gc deletes only in a data area whose marker names this catalog. A manifest made
    before catalog ids gets one here, and marks its data area, unless another catalog's
    marker is there (a dry run writes nothing and checks only a marker that is there)."""
    store = cat.store
    cid = cat.catalog_id
    if cid is None:
        if dry_run:
            return
        cid = cat.catalog_id = mf.ensure_catalog_id(cat.engine, naming.new_catalog_id())
        owner: str | None = store.claim(cid)
    else:
        owner = store.owner()
        if owner is None and not store.remote and not os.path.lexists(store.root):
            return  # no data area at all: nothing to delete
    if owner is None:
        raise DataAreaError(
            f"{store.root}: no {naming.OWNER_FILE} naming this catalog ({cid}); gc deletes only in its own data area "
            f"(if this is it, write {cid} into {store.url_of_marker()})"
        )
    if owner != cid:
        raise DataAreaError(
            f"{store.root}: the data area of catalog {owner}, not of this one ({cid}); gc deletes only in its own "
            "data area"
        )


def verify_catalog(
    cat: CatalogHandle, names: Sequence[str] | None, progress: Progress | None, executor: Executor | None = None
) -> VerifyReport:
    wanted = set(names) if names else None
    damage = manifest_problems(cat, wanted)
    if any(p.dataset is None for p in damage):  # the file's pages: the shard list cannot be trusted
        return VerifyReport(problems=damage)
    links: list[str] = []
    files = _data_files(cat.store, wanted, links)  # listed before the snapshot: see collect_garbage
    faults.point("verify.listed", files=files)
    with mf.read_txn(cat.engine) as conn:
        rows = conn.execute(select(DATASETS.c.name, DATASETS.c.pending)).all()
        known = {r.name for r in rows}
        present = [r.name for r in rows if not mf.abandoned(r.pending)]
        shown = sorted(wanted or present)  # as manifest_problems
        for n in wanted or ():
            if n not in known:
                raise DatasetNotFoundError(not_found(n, present), n)
        q = select(
            DATASETS.c.name, SHARDS.c.path, SHARDS.c.records, SHARDS.c.bytes, SHARDS.c.checksum,
            SHARDS.c.compression, SHARDS.c.index_checksum, SHARDS.c.location, SHARDS.c.removed_version,
        ).join(DATASETS, DATASETS.c.id == SHARDS.c.dataset_id)  # fmt: skip
        q = q.where(SHARDS.c.collected_at.is_(None))  # gc removed those on purpose
        if wanted is not None:
            q = q.where(DATASETS.c.name.in_(wanted))
        shards = conn.execute(q.order_by(SHARDS.c.id)).all()
        live = live_intents(conn)
    problems = _check_all(cat, shards, executor, progress)
    report = VerifyReport(problems=damage)
    report.datasets = {n: ShardCount() for n in shown}  # a dataset without shards shows its zeros
    registered = set()
    for (ds, rel, _records, size, _checksum, compression, index_checksum, location, removed), problem in zip(
        shards, problems, strict=True
    ):
        registered.add(rel)
        _count(report, ds, retired=removed is not None)
        report.bytes += size
        if problem is not None:
            report.problems.append(Problem(ds, cat.shard_url(rel, location), problem[0], problem[1]))
        elif index_checksum is None and compression == "none":
            report.not_indexed.append(cat.shard_url(rel, location))  # not an error: `catalog index` makes one
    for f in files:
        # exists(): a temp file listed just before a commit renamed it is no leftover
        if f.rel not in registered and naming.intent_of(f.name) not in live and cat.store.exists(f.rel):
            report.problems.append(
                Problem(None, cat.shard_url(f.rel), "unregistered", "file in the data area that no shard names")
            )
    for path in links:
        report.problems.append(Problem(None, path, "link", "symbolic link in the data area: never followed"))
    return report


def _count(report: VerifyReport, dataset: str, retired: bool) -> None:
    """One more shard checked: of a current version, or retired (kept for older versions)."""
    report.checked += 1
    counts = report.datasets.setdefault(dataset, ShardCount())
    if retired:
        report.retired += 1
        counts.retired += 1
    else:
        report.shards += 1
        counts.shards += 1


def manifest_problems(cat: CatalogHandle, wanted: set[str] | None) -> list[Problem]:
    """The manifest's own damage: its pages (SQLite's quick_check), then each dataset's values
    (its commits' totals against its shard rows, its row against its current commit)."""
    where = mf.manifest_where(cat.engine)
    pages = mf.integrity_problems(cat.engine)
    if pages:
        return [Problem(None, where, "manifest", "; ".join(pages[:5]))]
    with mf.read_txn(cat.engine) as conn:
        rows = conn.execute(select(DATASETS.c.name, DATASETS.c.pending)).all()
    # a dataset registered for inputs whose process died before their commit is no dataset
    # (no lookup finds it; gc drops it)
    names = sorted(r.name for r in rows if not mf.abandoned(r.pending))
    out = []
    for name in names:
        if wanted is not None and name not in wanted:
            continue
        try:
            ds = cat.lookup(name)
            ds.history()
            ds.info()
        except ManifestError as e:
            out.append(Problem(name, where, "manifest", str(e).removeprefix(f"{where}: ").removesuffix(mf.VERIFY_HINT)))
        except SchemaError as e:  # a schema the manifest holds but cannot read: `catalog drop` still can
            out.append(Problem(name, where, "manifest", f"dataset {name!r}: its schema does not read: {e}"))
    return out


VERIFY_JOB_BYTES = 64 << 20  # a verify job checks shards up to this many bytes (or one larger shard)
VERIFY_JOB_SHARDS = 1000  # ... and at most this many: a Dask task costs about a millisecond


# path in the data area, records, bytes, checksum, index checksum, location (adopted in place)
ShardFacts = tuple[str, int, int, str, str | None, str | None]


@dataclass(frozen=True)
class CheckJob:
    """Shards to check in one job (their ShardFacts)."""

    data_root: str
    shards: tuple[ShardFacts, ...]

    @property
    def bytes(self) -> int:
        return sum(s[2] for s in self.shards)


def check_shards(job: CheckJob) -> list[tuple[str, str] | None]:
    """Module-level (picklable) worker: each shard's problem (or None), in order."""
    store = store_for(job.data_root)
    return [_check_shard(store, *facts) for facts in job.shards]


def _check_all(
    cat: CatalogHandle, shards: Sequence[Any], executor: Executor | None, progress: Progress | None
) -> list[tuple[str, str] | None]:
    """Each shard's problem (or None), in the order of ``shards``: inline, or in jobs on ``executor``."""
    if executor is None:
        out = []
        for _ds, rel, records, size, checksum, _compression, index_checksum, location, _removed in shards:
            out.append(_check_shard(cat.store, rel, records, size, checksum, index_checksum, location))
            if progress:
                progress(size)
        return out
    done = (lambda job, _r: progress(job.bytes)) if progress else None
    return [p for found in run_jobs(check_shards, _check_jobs(cat, shards), executor, None, done) for p in found]


def _check_jobs(cat: CatalogHandle, shards: Sequence[Any]) -> list[CheckJob]:
    """Runs of adjacent shards, in order: enough bytes per job that a job's cost dwarfs the executor's."""
    jobs: list[CheckJob] = []
    batch: list[ShardFacts] = []
    size_of_batch = 0
    for _ds, rel, records, size, checksum, _compression, index_checksum, location, _removed in shards:
        if batch and (len(batch) >= VERIFY_JOB_SHARDS or size_of_batch + size > VERIFY_JOB_BYTES):
            jobs.append(CheckJob(cat.store.root, tuple(batch)))
            batch, size_of_batch = [], 0
        batch.append((rel, records, size, checksum, index_checksum, location))
        size_of_batch += size
    if batch:
        jobs.append(CheckJob(cat.store.root, tuple(batch)))
    return jobs


def _check_shard(
    store: Store,
    rel: str,
    records: int,
    size: int,
    checksum: str,
    index_checksum: str | None = None,
    location: str | None = None,
) -> tuple[str, str] | None:
    check: IndexCheck | None = None
    index_problem = None
    url = store.shard_url(rel, location)
    # its index is read first, then checked in the shard's one read (a small local shard's has no
    # file: its offsets are the shard's own, whose checksum is checked below)
    if index_checksum is not None and has_file(size, store.remote):
        try:
            check = IndexCheck(read_index(store.index_url(rel), records, size, index_checksum), size)
        except (OSError, CatalogError) as e:
            index_problem = str(e)
    try:  # one open: on S3 a size() first would be one more round trip per shard
        actual, found = file_checksum(url, size, check)  # never past the registered size (/dev/zero has no end)
    except FileNotFoundError:
        return "missing", "registered shard file does not exist"
    except (OSError, CatalogError) as e:
        return "unreadable", str(e)
    if actual != size:
        found_size = f"more than {size}" if actual > size else str(actual)  # reading stopped one byte past
        return "size", f"{found_size} byte{'' if actual == 1 else 's'} on disk, {size} registered"
    if found == checksum:  # bit-identical to the file whose records were counted when it was registered
        return _index_problem(store.index_url(rel), check, index_problem)
    try:
        count = sum(len(b) for b in shard_batches(url))
    except CatalogError as e:
        return "unreadable", f"checksum {found}, {checksum} registered; {e}"
    if count != records:
        return "records", f"{counted(count, 'record')}, {records} registered (checksum {found}, {checksum} registered)"
    return "checksum", f"{found}, {checksum} registered"


def _index_problem(index_at: str, check: IndexCheck | None, problem: str | None) -> tuple[str, str] | None:
    """A registered index that is missing, damaged, or does not match its (sound) shard."""
    if problem is not None:
        return "index", problem
    wrong = None if check is None else check.result()
    if wrong is None:
        return None
    return "index", f"{index_at}: the offset of record {wrong} is not where the shard's record {wrong} starts"


def collect_garbage(
    cat: CatalogHandle,
    grace: timedelta,
    dry_run: bool,
    keep_versions: int | None = None,
    older_than: timedelta | None = None,
) -> GcReport:
    if keep_versions is not None and keep_versions < 1:
        raise UsageError("--keep-versions must be at least 1 (the current version is always kept)")
    report = GcReport(dry_run=dry_run)
    check_owner(cat, dry_run)
    _drop_abandoned(cat, report)
    if keep_versions is not None or older_than is not None:
        _collect_retired(cat, keep_versions, older_than, report)
    # List the files first, then read the manifest: a writer records its intent before
    # it creates a file, so any file listed here is either under an intent this snapshot
    # sees or already registered in it. Never the other way round.
    files = [f for f in _data_files(cat.store, None, report.links) if naming.is_catalog_file(f.name)]  # never another's
    indexes = [f for f in cat.store.index_listing() if naming.is_catalog_index(f.name)]
    spools = cat.store.spool_files()
    with mf.read_txn(cat.engine) as conn:
        mf.check_not_moved(conn)  # a moved manifest does not know the copy's newer shards
        registered = set(conn.execute(select(SHARDS.c.path).where(SHARDS.c.collected_at.is_(None))).scalars())
        datasets = set(conn.execute(select(DATASETS.c.name)).scalars())
        live, dead = intent_states(conn)
    faults.point("gc.read", dead=dead)
    if dead and not dry_run:
        # Revoke dead intents before touching their files: a writer that wakes up after this
        # cannot commit (a commit needs its intent), and the files of one that committed or
        # beat its heartbeat since the snapshot (so was not revoked) are kept.
        live |= set(dead) - _revoke(cat, dead)
    now = time.time()
    retired = set(report.retired)  # a list of URLs: one lookup per file must not scan it
    for f in files:
        if f.rel in registered or cat.shard_url(f.rel) in retired or _kept(f, live, now, grace, report):
            continue
        # Gone since the listing (a temporary file renamed by its commit): not ours to count.
        if not (cat.store.exists(f.rel) if dry_run else cat.store.remove(f.rel)):
            continue
        report.removed.append(cat.shard_url(f.rel))
        report.bytes += f.size
    for f in indexes:  # an index is its shard's: kept while the shard is registered
        if naming.index_owner(f.rel) in registered or _kept(f, live, now, grace, None):
            continue
        if cat.store.exists(f.rel) if dry_run else cat.store.remove(f.rel):
            report.indexes_removed += 1
            report.index_bytes += f.size
    _collect_spools(spools, live, now, grace, report)
    if not dry_run:
        cat.store.tidy(datasets)
    return report


def _collect_spools(spools: list[StoredFile], live: set[str], now: float, grace: timedelta, report: GcReport) -> None:
    """Spool files (an object store's shards and indexes before their upload): never registered."""
    for f in spools:
        index = naming.is_index_name(f.name)
        # A spool file is local (its rel a local path): gone since the listing (uploaded and
        # removed by its writer) is not counted.
        if _kept(f, live, now, grace, None if index else report) or not (
            report.dry_run or file_io(f.rel).delete(f.rel)
        ):
            continue
        if index:
            report.indexes_removed += 1
            report.index_bytes += f.size
        else:
            report.removed.append(f.rel)
            report.bytes += f.size


def _kept(f: StoredFile, live: set[str], now: float, grace: timedelta, report: GcReport | None) -> bool:
    """An unregistered file gc leaves alone: its writer's intent is alive, or it is young. Counted
    in ``report`` (record indexes are not: kept or not, they follow their shards)."""
    if naming.intent_of(f.name) in live:
        if report is not None:
            report.kept_live += 1
        return True
    if now - f.mtime < grace.total_seconds():  # uploaded or written lately: maybe a commit to come
        if report is not None:
            report.kept_young += 1
        return True
    return False


_RETIRED = (
    select(
        SHARDS.c.id,
        SHARDS.c.path,
        SHARDS.c.location,
        SHARDS.c.bytes,
        SHARDS.c.records,
        SHARDS.c.index_checksum,
        SHARDS.c.dataset_id,
        SHARDS.c.added_version,
        SHARDS.c.removed_version,
        DATASETS.c.name,
        DATASETS.c.version,
        COMMITS.c.created_at,
    )
    .join(DATASETS, DATASETS.c.id == SHARDS.c.dataset_id)
    .join(COMMITS, (COMMITS.c.dataset_id == SHARDS.c.dataset_id) & (COMMITS.c.version == SHARDS.c.removed_version))
    .where(SHARDS.c.removed_version.is_not(None), SHARDS.c.collected_at.is_(None))
)


def _collect_retired(
    cat: CatalogHandle, keep_versions: int | None, older_than: timedelta | None, report: GcReport
) -> None:
    """Retired shards no kept version needs: marked collected in the manifest, then deleted.

    A shard retired at version r was live up to r - 1, so the newest K versions (v-K+1 .. v)
    need it exactly when r > v - K + 1. ``older_than`` counts from the retiring commit. A
    tagged version t needs every shard with added_version <= t < r, whatever its age: those
    are kept, and the report says for which tag.
    """
    cutoff = _before_now(older_than) if older_than is not None else None
    with mf.read_txn(cat.engine) as conn:
        rows = conn.execute(_RETIRED).all()
        tags = _tags(conn, None)
    candidates = []
    for r in rows:
        needed = keep_versions is not None and r.removed_version > r.version - keep_versions + 1
        recent = cutoff is not None and r.created_at > cutoff
        if needed or recent:
            report.kept_retired += 1
        else:
            candidates.append(r)
    # each path checked before any is marked collected
    where = {r.id: cat.shard_url(r.path, r.location) for r in candidates}
    chosen, keeps = _spare_tagged(candidates, tags, where)
    if not report.dry_run and chosen:
        chosen, keeps = mf.with_lock_retry(lambda: _mark_collected(cat, candidates, where))
    report.kept_for_tags = keeps
    in_use = _locations_in_use(cat, chosen)
    for r in chosen:
        _collect(cat, r, where[r.id], report, r.location in in_use)


def _drop_abandoned(cat: CatalogHandle, report: GcReport) -> None:
    """Datasets registered for inputs whose process died before their commit (datasets.pending):
    dropped while still at the version they had (their writers' files go as any dead writer's do)."""
    with mf.read_txn(cat.engine) as conn:
        rows = conn.execute(select(DATASETS.c.id, DATASETS.c.name, DATASETS.c.pending, DATASETS.c.version)).all()
    for r in rows:
        if mf.abandoned(r.pending) and (report.dry_run or commit.drop_dataset(cat, r.id, only_at=r.version)):
            report.abandoned.append(r.name)


def _locations_in_use(cat: CatalogHandle, chosen: list[Any]) -> set[str]:
    """The adopted files among ``chosen`` that another shard row, not collected, still names
    (a restore brought the file back under a new name): not forgotten."""
    wanted = sorted({r.location for r in chosen if r.location is not None})
    ids = {r.id for r in chosen}
    found: set[str] = set()
    with mf.read_txn(cat.engine) as conn:
        for i in range(0, len(wanted), mf.ID_CHUNK):
            rows = conn.execute(
                select(SHARDS.c.id, SHARDS.c.location).where(
                    SHARDS.c.location.in_(wanted[i : i + mf.ID_CHUNK]), SHARDS.c.collected_at.is_(None)
                )
            )
            found.update(loc for sid, loc in rows if sid not in ids)
    return found


def _collect(cat: CatalogHandle, r: Any, where: str, report: GcReport, in_use: bool = False) -> None:
    """Delete one retired shard marked collected, and its index; an adopted file stays where it
    is (its ``path`` names no file: nothing there to delete), and is reported forgotten unless
    another shard still reads it (``in_use``). A file already gone (lost by hand) is reported
    missing: no bytes were freed."""
    if r.location is not None:
        if not in_use:
            report.forgotten.append(where)
    elif _gone(cat, r.path, report.dry_run):
        report.retired.append(where)
        report.removed.append(where)
        report.bytes += r.bytes
    else:
        report.missing.append(where)
    # An index file never registered (an index run stopped before it) goes in the loop over
    # the index listing, as any index whose shard is not registered does.
    if r.index_checksum is not None and _gone(cat, naming.index_rel(r.path), report.dry_run):
        report.indexes_removed += 1  # collected with its shard
        report.index_bytes += r.records * OFFSET.itemsize


def _gone(cat: CatalogHandle, rel: str, dry_run: bool) -> bool:
    """Delete a file (a dry run only looks): whether there was one. A file that cannot be
    deleted now (a read-only area) stays marked collected: no version needs it, and the next
    gc deletes it as the unregistered file it now is."""
    return cat.store.exists(rel) if dry_run else cat.store.remove(rel)


def _mark_collected(
    cat: CatalogHandle, candidates: list[Any], where: dict[int, str]
) -> tuple[list[Any], list[TagKeep]]:
    """Mark the candidates no tag needs collected, the tags read again under their datasets'
    row locks: a tag written meanwhile is either seen here or, written after, refused (its
    version no longer readable). Recorded before any file goes: readers get a clear error."""
    with mf.write_txn(cat.engine) as conn:
        ids = sorted({r.dataset_id for r in candidates})
        conn.execute(select(DATASETS.c.id).where(DATASETS.c.id.in_(ids)).order_by(DATASETS.c.id).with_for_update())
        chosen, keeps = _spare_tagged(candidates, _tags(conn, ids), where)
        mf.update_shards(conn, [r.id for r in chosen], collected_at=utcnow())  # only retired shards: none revives
    return chosen, keeps


def _tags(conn: Any, dataset_ids: list[int] | None) -> dict[int, list[tuple[str, int]]]:
    """Per dataset id: its tags as (name, version), by version then name."""
    q = select(TAGS.c.dataset_id, TAGS.c.name, TAGS.c.version).order_by(TAGS.c.version, TAGS.c.name)
    if dataset_ids is not None:
        q = q.where(TAGS.c.dataset_id.in_(dataset_ids))
    out: dict[int, list[tuple[str, int]]] = {}
    for ds, name, version in conn.execute(q):
        out.setdefault(ds, []).append((name, version))
    return out


def _spare_tagged(
    candidates: list[Any], tags: dict[int, list[tuple[str, int]]], where: dict[int, str]
) -> tuple[list[Any], list[TagKeep]]:
    """(the candidates no tagged version needs, what is kept for each tag)."""
    chosen = []
    kept: dict[tuple[str, int, str], list[str]] = {}
    for r in candidates:
        needing = [(name, v) for name, v in tags.get(r.dataset_id, ()) if r.added_version <= v < r.removed_version]
        if not needing:
            chosen.append(r)
        for name, v in needing:
            kept.setdefault((r.name, v, name), []).append(where[r.id])
    return chosen, [TagKeep(ds, name, v, tuple(paths)) for (ds, v, name), paths in sorted(kept.items())]


def _before_now(span: timedelta) -> datetime:
    """``span`` ago; a span reaching before year 1 reaches before every commit too."""
    try:
        return utcnow() - span
    except OverflowError:
        return datetime.min


def _revoke(cat: CatalogHandle, dead: list[str]) -> set[str]:
    """Delete the rows of the intents in ``dead`` that are still dead now; returns their ids."""

    def txn() -> set[str]:
        with mf.write_txn(cat.engine) as conn:
            return revoke(conn, dead)

    return mf.with_lock_retry(txn)
