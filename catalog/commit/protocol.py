"""The one commit protocol: every change to a dataset (an append, a migration, a
compaction, a restore) becomes visible here, in one transaction, or not at all.

Before the locks: the new files are checked (a HEAD each on S3). Inside one transaction:
a retried token answers with its earlier commit; the writer's intent is consumed (gc
revokes a dead intent before deleting its files, so a consumed intent proves the files
checked are still ours); the dataset row is read under its lock; the change is checked
against it (schema version, live shards); the version is swapped (compare-and-swap: a lost
race re-reads and tries again); then the commit, shard, schema and migration rows are
written. See ARCHITECTURE.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from catalog import faults
from catalog import manifest as mf
from catalog.commit.changes import Change, Kind, Replacement
from catalog.commit.handles import SHARD_INFO_COLUMNS, CatalogHandle, DatasetHandle, commit_of, shard_info
from catalog.commit.intents import DELETE_INTENT
from catalog.commit.listing import splits_text
from catalog.commit.values import COMMIT_RETRIES, Commit, ShardInfo, manifest_text
from catalog.errors import AppendError, CommitConflictError, DatasetExistsError, DatasetNotFoundError
from catalog.manifest import (
    APPLIED_MIGRATIONS,
    COMMITS,
    DATASETS,
    LINEAGE,
    SCHEMA_VERSIONS,
    SHARD_STATS,
    SHARDS,
    TAGS,
    utcnow,
)
from catalog.schema import Schema
from catalog.storage import ShardFile

# Built once: every append runs them, and building a statement costs more than executing
# it on SQLite. A commit reads the dataset's state under the row's lock: on PostgreSQL,
# commits to one dataset then queue on that row (gapless versions, no retry storms).
DATASET_STATE = select(
    DATASETS.c.version, DATASETS.c.schema_version, DATASETS.c.records, DATASETS.c.bytes, DATASETS.c.shard_count
).where(DATASETS.c.id == bindparam("ds"))
DATASET_STATE_FOR_COMMIT = DATASET_STATE.with_for_update()
COMMIT_BY_TOKEN = select(COMMITS).where(COMMITS.c.dataset_id == bindparam("ds"), COMMITS.c.token == bindparam("token"))
_SWAP_VERSION = (
    update(DATASETS)
    .where(DATASETS.c.id == bindparam("ds"), DATASETS.c.version == bindparam("expected"))
    .values(
        version=bindparam("new"),
        schema_version=bindparam("new_schema_version"),
        records=bindparam("new_records"),
        bytes=bindparam("new_bytes"),
        shard_count=bindparam("new_shard_count"),
        pending=None,  # its first commit: a dataset registered for inputs is a dataset now
    )
)
_LIVE = select(SHARDS.c.id, SHARDS.c.records, SHARDS.c.bytes, SHARDS.c.split, SHARDS.c.path).where(
    SHARDS.c.dataset_id == bindparam("ds"), SHARDS.c.removed_version.is_(None)
)
# The live totals per split a commit starts from: its predecessor's, kept in its row (format 10).
_KEPT_SPLITS = select(COMMITS.c.splits).where(
    COMMITS.c.dataset_id == bindparam("ds"), COMMITS.c.version == bindparam("version")
)
# ... or summed from the live shards, where the predecessor kept none (the first commit after an
# upgrade to format 10, or after an erasure): once, then kept from there on.
_LIVE_SPLITS = (
    select(SHARDS.c.split, func.count(), func.coalesce(func.sum(SHARDS.c.records), 0),
           func.coalesce(func.sum(SHARDS.c.bytes), 0))
    .where(SHARDS.c.dataset_id == bindparam("ds"), SHARDS.c.removed_version.is_(None))
    .group_by(SHARDS.c.split)
)  # fmt: skip
_INSERT_COMMIT = insert(COMMITS)
_INSERT_SHARD = insert(SHARDS)
_INSERT_STATS = insert(SHARD_STATS)


class LiveChanged(Exception):
    """The live shards differ from what the rewrite planned for (appends landed meanwhile)."""

    def __init__(self, appended: set[int], retired: set[int]) -> None:
        super().__init__("live shards changed")
        self.appended = appended
        self.retired = retired


class _Retry(Exception):
    """The compare-and-swap lost to a concurrent commit: re-read and try again."""


def commit(ds: DatasetHandle, change: Change) -> Commit:
    """Make ``change`` visible as the dataset's next version; a commit whose ``duplicate`` is
    True is the earlier commit of the change's token (nothing new was registered)."""
    for _ in range(COMMIT_RETRIES):
        try:
            return mf.with_lock_retry(lambda: _commit_txn(ds, change))
        except (_Retry, IntegrityError):
            continue  # a concurrent commit took our version number (or token): re-read
    raise CommitConflictError(f"could not commit to {ds.name!r} after {COMMIT_RETRIES} attempts")


def _commit_txn(ds: DatasetHandle, ch: Change) -> Commit:
    faults.point("commit.before", change=ch)
    now = utcnow()
    # Other writers queue on the dataset row's lock (on SQLite: the database's), so what
    # needs no lock comes first: the files, the token (the unique (dataset, token)
    # constraint still catches a twin committed meanwhile) and the intent.
    ds.catalog.require_shards(s.file for s in ch.add)
    with mf.write_txn(ds.catalog.engine) as conn:
        prior = prior_commit(conn, ds, ch.token)
        if prior is not None:
            return prior
        _claim_intent(conn, ch, ds.name)
        row = conn.execute(DATASET_STATE_FOR_COMMIT, {"ds": ds.id}).first()
        if row is None:
            raise DatasetNotFoundError(f"dataset {ds.name!r} was dropped", ds.name)
        check_schema(ds.name, ch.kind, ch.schema_version, row.schema_version)
        if ch.requires_new_bytes:
            _refuse_duplicates(conn, ds, ch)
        retired = _retired(conn, ds, ch)
        swapped, replaced_rows = _replaced(conn, ds, ch)
        new = row.version + 1
        schema_version = row.schema_version + (ch.new_schema is not None)
        totals = {
            "records": row.records - retired.records + sum(s.file.records for s in ch.add) + swapped["records"],
            "bytes": row.bytes - retired.bytes + sum(s.file.bytes for s in ch.add) + swapped["bytes"],
            "shard_count": row.shard_count - len(retired.ids) + len(ch.add) + swapped["shard_count"],
        }
        swap = {"ds": ds.id, "expected": row.version, "new": new, "new_schema_version": schema_version}
        if conn.execute(_SWAP_VERSION, {**swap, **{f"new_{k}": v for k, v in totals.items()}}).rowcount != 1:
            raise _Retry()
        if ch.new_schema is not None:
            insert_schema(conn, ds.id, schema_version, ch.new_schema, new, now)
        if ch.new_compression is not None:
            conn.execute(update(DATASETS).where(DATASETS.c.id == ds.id).values(compression=ch.new_compression))
        values = _commit_row(ds, ch, new, schema_version, now, totals)
        values["splits"] = _new_splits(conn, ds, ch, row.version, retired, replaced_rows)
        conn.execute(_INSERT_COMMIT, values)
        shards = _write_shards(conn, ds, ch, retired, new, schema_version)
        _replace_files(conn, ds, ch.replaced, replaced_rows, new)
        _record_migration(conn, ds.id, ch, schema_version, new, now)
        if ch.lineage is not None:
            conn.execute(insert(LINEAGE).values(dataset_id=ds.id, version=new, created_at=now, **ch.lineage))
    done = _commit_value(ds, values, shards, retired)
    faults.point("commit.after", commit=done)
    return done


def _refuse_duplicates(conn: Connection, ds: DatasetHandle, ch: Change) -> None:
    """An input appended twice makes shards of the same bytes (each input has its own shards,
    written the same way): refuse an input every one of whose shards has the size and
    whole-file checksum of a live shard, or the same shards as another input of this append.
    An input sharing only some records (a shard) is new data and goes in. Inside the commit's
    transaction, so two concurrent appends of one file cannot both pass."""
    inputs: dict[str | None, list[ShardFile]] = {}
    for s in ch.add:
        inputs.setdefault(s.file.source, []).append(s.file)
    twins: dict[tuple[tuple[str, int], ...], str | None] = {}
    for source, files in inputs.items():
        twin = twins.setdefault(tuple((f.checksum, f.bytes) for f in files), source)
        if twin != source:
            raise AppendError(
                f"{source}: the same bytes as {twin}, in this same append: nothing was registered "
                "(--allow-duplicate to append both)"
            )
    live = _live_by_bytes(conn, ds.id, sorted({s.file.checksum for s in ch.add}))
    for source, files in inputs.items():
        found = [live.get((f.checksum, f.bytes), []) for f in files]
        if all(found):
            # name the shard this input made before, if one of them is (else what has its bytes)
            r = next((r for r in found[0] if r.source == source), found[0][0])
            origin = f", from {r.source}" if r.source else ""
            where = ds.catalog.shard_url(r.path, r.location)
            raise AppendError(
                f"{source}: already in {ds.name!r}: the same bytes as shard {where} (version "
                f"{r.added_version}{origin}); nothing was registered (--allow-duplicate to append it again)"
            )


def _live_by_bytes(conn: Connection, dataset_id: int, sums: list[str]) -> dict[tuple[str, int], list[Any]]:
    """The live shards of a dataset with these checksums, by (checksum, size)."""
    live: dict[tuple[str, int], list[Any]] = {}
    for lo in range(0, len(sums), 500):  # bound the IN list
        for r in conn.execute(
            select(
                SHARDS.c.path,
                SHARDS.c.location,
                SHARDS.c.checksum,
                SHARDS.c.bytes,
                SHARDS.c.source,
                SHARDS.c.added_version,
            ).where(
                SHARDS.c.dataset_id == dataset_id,
                SHARDS.c.removed_version.is_(None),
                SHARDS.c.checksum.in_(sums[lo : lo + 500]),
            )
        ):
            live.setdefault((r.checksum, r.bytes), []).append(r)
    return live


def token_commit(ds: DatasetHandle, token: str | None) -> Commit | None:
    """The commit ``token`` already made in ``ds`` (the request is a retry), else None: a
    rewrite looks before its work, not only at its commit, so that a retry writes nothing."""
    if token is None:
        return None
    with mf.read_txn(ds.catalog.engine) as conn:
        return prior_commit(conn, ds, manifest_text(token, "token"))


def prior_commit(conn: Connection, ds: DatasetHandle, token: str | None) -> Commit | None:
    """The commit already made under ``token``, with its own shard rows as registered: the
    answer must not depend on the version still being readable (a compaction and a gc may
    have taken those files since)."""
    if token is None:
        return None
    row = conn.execute(COMMIT_BY_TOKEN, {"ds": ds.id, "token": token}).first()
    if row is None:
        return None
    url = ds.catalog.store.shard_url
    added = conn.execute(
        select(*SHARD_INFO_COLUMNS)
        .where(SHARDS.c.dataset_id == ds.id, SHARDS.c.added_version == row.version)
        .order_by(SHARDS.c.seq)
    ).all()
    return commit_of(ds.name, row, [shard_info(url, r) for r in added], duplicate=True)


def _claim_intent(conn: Connection, ch: Change, name: str) -> None:
    # gc deletes a dead intent's row before it removes that intent's files, in a transaction
    # of its own: a writer whose intent is gone may have lost files (maybe after
    # require_shards looked), so it must not commit. Deleting the intent here is both that
    # check and the commit's cleanup (undone if the transaction is).
    if ch.intent is None:
        return
    if conn.execute(DELETE_INTENT, {"iid": ch.intent}).rowcount != 1:
        raise CommitConflictError(ch.kind.expired(name))


def check_schema(name: str, kind: Kind, planned: int, found: int) -> None:
    """Refuse a change worked out against schema version ``planned`` of dataset ``name`` when
    the dataset is at ``found`` now (a migration landed meanwhile)."""
    if found != planned:
        raise CommitConflictError(kind.schema_moved(name, planned, found))


@dataclass(frozen=True)
class _Retired:
    ids: tuple[int, ...]
    records: int
    bytes: int
    splits: tuple[tuple[str, int, int], ...] = ()  # each retired shard's (split, records, bytes)


_NONE_RETIRED = _Retired((), 0, 0)


def _retired(conn: Connection, ds: DatasetHandle, ch: Change) -> _Retired:
    """The live shards ``ch`` retires, after checking the live set is what it planned for.
    An append retires nothing and plans on no live set: it reads none."""
    if not ch.retire and ch.expect_live is None:
        return _NONE_RETIRED
    live = {r.id: r for r in conn.execute(_LIVE, {"ds": ds.id})}
    if ch.retire - live.keys() or (ch.expect_live is not None and live.keys() != ch.expect_live):
        expected = ch.expect_live if ch.expect_live is not None else ch.retire
        raise LiveChanged(set(live) - expected, set(expected - live.keys()))
    replaced = {i for i, rel in ch.retire_read if live[i].path != rel}
    if replaced:  # an erasure put another file under the row: what was made of the old one must not go in
        raise LiveChanged(set(), replaced)
    ids = tuple(sorted(ch.retire))
    gone = tuple((live[i].split, live[i].records, live[i].bytes) for i in ids)
    return _Retired(ids, sum(live[i].records for i in ids), sum(live[i].bytes for i in ids), gone)


def _replaced(conn: Connection, ds: DatasetHandle, ch: Change) -> tuple[dict[str, int], dict[int, Any]]:
    """How the live totals move with ``ch``'s replaced files, after checking each row is still
    at the file the change read (else LiveChanged: a gc or another erasure got there first)."""
    moved = {"records": 0, "bytes": 0, "shard_count": 0}
    ids = [r.id for r in ch.replaced]
    if not ids:
        return moved, {}
    found = {
        r.id: r
        for lo in range(0, len(ids), 500)
        for r in conn.execute(
            select(*_REPLACED_COLUMNS).where(
                SHARDS.c.dataset_id == ds.id, SHARDS.c.id.in_(ids[lo : lo + 500]), SHARDS.c.collected_at.is_(None)
            )
        )
    }
    gone = {r.id for r in ch.replaced if r.id not in found or found[r.id].path != r.rel}
    if gone:
        raise LiveChanged(set(), gone)
    if _rewritten_since(conn, ds, ch.read_version):  # its new shards hold rows read before: not scanned
        raise LiveChanged(set(), set())
    for r in ch.replaced:
        old = found[r.id]
        if old.removed_version is None:  # a live shard: the dataset's totals change with it
            moved["records"] += (r.file.records if r.file else 0) - old.records
            moved["bytes"] += (r.file.bytes if r.file else 0) - old.bytes
            moved["shard_count"] -= r.file is None
    return moved, found


def _rewritten_since(conn: Connection, ds: DatasetHandle, version: int) -> bool:
    """Whether a commit after ``version`` rewrote records (its shards made from others)."""
    rewrites = [k.value for k in Kind if not k.adds_records]
    found = conn.execute(
        select(COMMITS.c.version)
        .where(COMMITS.c.dataset_id == ds.id, COMMITS.c.version > version, COMMITS.c.kind.in_(rewrites))
        .limit(1)
    ).first()
    return found is not None


_REPLACED_COLUMNS = (
    SHARDS.c.id, SHARDS.c.path, SHARDS.c.records, SHARDS.c.bytes, SHARDS.c.added_version, SHARDS.c.removed_version,
    SHARDS.c.split,
)  # fmt: skip


def _replace_files(
    conn: Connection, ds: DatasetHandle, items: tuple[Replacement, ...], old: dict[int, Any], new: int
) -> None:
    """Point each replaced row at its copy (a row with no record left goes), statistics too, and
    make every earlier commit that had the shard live say what its versions hold now (history
    checks each commit's totals against its shard rows)."""
    for r in items:
        _restate_commits(conn, ds.id, old[r.id], r.file, new)
        conn.execute(delete(SHARD_STATS).where(SHARD_STATS.c.path == r.rel))
        if r.file is None:
            conn.execute(delete(SHARDS).where(SHARDS.c.id == r.id))
            continue
        f = r.file
        conn.execute(
            update(SHARDS)
            .where(SHARDS.c.id == r.id)
            .values(
                path=f.rel, records=f.records, bytes=f.bytes, checksum=f.checksum, compression=f.compression,
                index_checksum=f.index_checksum, location=None, fingerprint=f.fingerprint,
            )
        )  # fmt: skip
        if f.stats:
            conn.execute(_INSERT_STATS, [{"path": f.rel, "dataset_id": ds.id, "data": f.stats}])


def _restate_commits(conn: Connection, dataset_id: int, old: Any, file: ShardFile | None, new: int) -> None:
    records = (file.records if file else 0) - old.records
    size = (file.bytes if file else 0) - old.bytes
    count = -1 if file is None else 0
    until = new if old.removed_version is None else old.removed_version
    conn.execute(
        update(COMMITS)
        .where(COMMITS.c.dataset_id == dataset_id, COMMITS.c.version >= old.added_version, COMMITS.c.version < until)
        .values(
            records=COMMITS.c.records + records, bytes=COMMITS.c.bytes + size,
            shard_count=COMMITS.c.shard_count + count,
            splits=None,  # no longer what they kept: summed from the shard rows when read
        )
    )  # fmt: skip
    conn.execute(
        update(COMMITS)
        .where(COMMITS.c.dataset_id == dataset_id, COMMITS.c.version == old.added_version, COMMITS.c.kind == "append")
        .values(records_added=COMMITS.c.records_added + records, shards_added=COMMITS.c.shards_added + count)
    )


def _new_splits(
    conn: Connection, ds: DatasetHandle, ch: Change, prior: int, retired: _Retired, replaced: dict[int, Any]
) -> str:
    """The live totals per split after ``ch`` (the commits row's ``splits``): version ``prior``'s,
    moved by the same shards as the dataset's totals (added, retired, replaced while live)."""
    text = conn.execute(_KEPT_SPLITS, {"ds": ds.id, "version": prior}).scalar()
    if text is not None:
        now: dict[str, list[int]] = {k: list(v) for k, v in json.loads(text).items()}
    else:
        now = {split: [int(n), int(r), int(b)] for split, n, r, b in conn.execute(_LIVE_SPLITS, {"ds": ds.id})}
    moves = [(s.split, 1, s.file.records, s.file.bytes) for s in ch.add]
    moves += [(split, -1, -records, -size) for split, records, size in retired.splits]
    for r in ch.replaced:
        old = replaced[r.id]
        if old.removed_version is None:  # live: its split's totals change with it
            new_records, new_bytes = (r.file.records, r.file.bytes) if r.file else (0, 0)
            moves.append((old.split, -(r.file is None), new_records - old.records, new_bytes - old.bytes))
    for split, n, records, size in moves:
        t = now.setdefault(split, [0, 0, 0])
        t[0], t[1], t[2] = t[0] + n, t[1] + records, t[2] + size
    return splits_text(now)


def _commit_row(
    ds: DatasetHandle, ch: Change, version: int, schema_version: int, now: datetime, totals: dict[str, int]
) -> dict[str, Any]:
    # records_added: an append's records; 0 for a rewrite, which keeps every record (history
    # counts what each commit added and retired from the shard rows).
    added = sum(s.file.records for s in ch.add) if ch.kind.adds_records else 0
    return {
        "dataset_id": ds.id, "version": version, "kind": ch.kind.value, "schema_version": schema_version,
        "created_at": now, "message": ch.message, "author": ch.author, "read_version": ch.read_version,
        "token": ch.token, "records_added": added, "shards_added": len(ch.add), "intent": ch.intent, **totals,
    }  # fmt: skip


def _write_shards(
    conn: Connection, ds: DatasetHandle, ch: Change, retired: _Retired, version: int, schema_version: int
) -> list[ShardInfo]:
    if retired.ids:
        mf.update_shards(conn, retired.ids, removed_version=version)
    url = ds.catalog.store.shard_url
    rows: list[dict[str, Any]] = [
        {
            "dataset_id": ds.id,
            "path": s.file.rel,
            "records": s.file.records,
            "bytes": s.file.bytes,
            "checksum": s.file.checksum,
            "compression": s.file.compression,
            "schema_version": schema_version if s.schema_version is None else s.schema_version,
            "added_version": version,
            "removed_version": None,
            "seq": (version << mf.SEQ_BITS) + i if s.seq is None else s.seq,
            "split": s.split,
            "index_checksum": s.file.index_checksum,
            "source": s.file.source or ch.source(),
            "location": s.file.location,
            "fingerprint": s.file.fingerprint,
        }
        for i, s in enumerate(ch.add)
    ]
    if rows:
        conn.execute(_INSERT_SHARD, rows)
        stats = [{"path": s.file.rel, "dataset_id": ds.id, "data": s.file.stats} for s in ch.add if s.file.stats]
        if stats:
            conn.execute(_INSERT_STATS, stats)
    # The rows as listed (SHARD_INFO_COLUMNS' names): no field list of ShardInfo's to keep here.
    return [ShardInfo(url(r["path"], r["location"]), *(r[c.name] for c in SHARD_INFO_COLUMNS)) for r in rows]


def _commit_value(ds: DatasetHandle, v: dict[str, Any], shards: list[ShardInfo], retired: _Retired) -> Commit:
    """The commit as history will show it: what it added and what it retired."""
    return Commit(
        ds.name, v["version"], v["kind"], v["schema_version"], v["created_at"], v["message"], v["author"],
        v["read_version"], v["token"], sum(s.records for s in shards), len(shards), v["records"], v["bytes"],
        v["shard_count"], shards, records_removed=retired.records, shards_removed=len(retired.ids),
    )  # fmt: skip


def insert_schema(conn: Connection, dataset_id: int, version: int, schema: Schema, commit: int, now: datetime) -> None:
    """Register ``schema`` as the dataset's schema ``version``, made by the commit of version ``commit``."""
    conn.execute(
        insert(SCHEMA_VERSIONS).values(
            dataset_id=dataset_id,
            version=version,
            schema_json=json.dumps(schema.to_json()),
            fingerprint=schema.fingerprint,
            created_at=now,
            commit_version=commit,
        )
    )


def create_dataset(
    cat: CatalogHandle,
    name: str,
    sch: Schema,
    description: str,
    author: str,
    compression: str = "none",
    pending: str | None = None,
    message: str = "",
    token: str | None = None,
) -> None:
    """Register dataset ``name`` at version 1 (a "create" commit, no shards, its message
    ``message`` else the description, its token ``token``); ``pending``: for inputs this
    process appends next (see the manifest's datasets.pending)."""
    description, author = manifest_text(description, "description"), manifest_text(author, "author")
    message = manifest_text(message, "message") or description
    token = None if token is None else manifest_text(token, "token")
    sch.check_new()
    now = utcnow()
    empty = {"records": 0, "bytes": 0, "shard_count": 0}  # the totals, in the dataset and its first commit
    dataset = {
        "name": name, "description": description, "created_at": now, "version": 1, "schema_version": 1,
        "compression": compression, "pending": pending, **empty,
    }  # fmt: skip
    first = {
        "version": 1, "kind": "create", "schema_version": 1, "created_at": now, "message": message, "author": author,
        "read_version": 0, "token": token, "records_added": 0, "shards_added": 0, "splits": "{}", **empty,
    }  # fmt: skip

    def txn() -> None:
        with mf.write_txn(cat.engine) as conn:
            found = conn.execute(select(DATASETS.c.id, DATASETS.c.pending).where(DATASETS.c.name == name)).first()
            if found is not None and not mf.abandoned(found.pending):
                raise DatasetExistsError(f"dataset {name!r} already exists", name)
            if found is not None:  # registered for inputs by a process that died before their commit
                _delete_dataset(conn, found.id)
            ds_id = conn.execute(insert(DATASETS).values(**dataset)).inserted_primary_key[0]  # type: ignore[index]
            insert_schema(conn, ds_id, 1, sch, 1, now)
            conn.execute(insert(COMMITS).values(dataset_id=ds_id, **first))

    try:
        mf.with_lock_retry(txn)
    except IntegrityError as e:
        raise DatasetExistsError(f"dataset {name!r} already exists", name) from e


def drop_dataset(cat: CatalogHandle, ds_id: int, only_at: int | None = None) -> bool:
    """Remove a dataset's rows from the manifest; its files are collected by the next gc.
    ``only_at``: only while it is still at that version (a dataset registered for an input
    that failed, undone unless someone committed to it meanwhile). Whether it was dropped."""

    def txn() -> bool:
        with mf.write_txn(cat.engine) as conn:
            if only_at is not None:
                found = conn.execute(select(DATASETS.c.version).where(DATASETS.c.id == ds_id)).scalar()
                if found != only_at:
                    return False
            _delete_dataset(conn, ds_id)
        return True

    return mf.with_lock_retry(txn)


def _delete_dataset(conn: Connection, ds_id: int) -> None:
    for table in (SHARD_STATS, SHARDS, COMMITS, SCHEMA_VERSIONS, APPLIED_MIGRATIONS, TAGS, LINEAGE):
        conn.execute(delete(table).where(table.c.dataset_id == ds_id))
    conn.execute(delete(DATASETS).where(DATASETS.c.id == ds_id))


def _record_migration(conn: Connection, ds_id: int, ch: Change, schema_version: int, version: int, now: Any) -> None:
    if ch.migration is not None:
        conn.execute(
            insert(APPLIED_MIGRATIONS).values(
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
            update(APPLIED_MIGRATIONS)
            .where(
                APPLIED_MIGRATIONS.c.dataset_id == ds_id,
                APPLIED_MIGRATIONS.c.applied_version > ch.revert_after,
                APPLIED_MIGRATIONS.c.reverted_version.is_(None),
            )
            .values(reverted_version=version)
        )
