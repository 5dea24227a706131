"""The datasets' summary (what `catalog list` shows), from the manifest alone: no schema
codec, no storage, so listing a catalog starts fast."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from sqlalchemy import Engine, and_, func, select, true

from catalog import manifest as mf
from catalog.commit.values import DatasetInfo, ShardSum
from catalog.manifest import COMMITS, DATASETS, SCHEMA_VERSIONS, SHARDS


def list_datasets(
    engine: Engine, splits: bool = False, limit: int | None = None, after: str | None = None, schemas: bool = True
) -> list[DatasetInfo]:
    """Every dataset at its current version, by name, its totals checked against its commit's;
    with ``splits``, each one's totals per split too (one more query, over every live shard).
    A page of them: ``limit`` datasets (None: all) whose names sort after ``after`` (a datasets
    page ends at its last name: the next starts there, one index range whatever the catalog's
    size). ``schemas=False``: each one's ``schema`` left empty (`catalog list` shows none:
    parsing 10,000 schemas was 40% of listing them)."""
    commit_totals = (
        COMMITS.c.shard_count.label("commit_shards"),
        COMMITS.c.records.label("commit_records"),
        COMMITS.c.bytes.label("commit_bytes"),
    )
    with mf.read_txn(engine) as conn:
        rows = conn.execute(
            select(*DATASETS.c, SCHEMA_VERSIONS.c.schema_json, *commit_totals)
            .join(
                SCHEMA_VERSIONS,
                and_(
                    SCHEMA_VERSIONS.c.dataset_id == DATASETS.c.id,
                    SCHEMA_VERSIONS.c.version == DATASETS.c.schema_version,
                ),
            )
            .outerjoin(  # outer: a dataset whose current commit is missing is damage to report
                COMMITS, and_(COMMITS.c.dataset_id == DATASETS.c.id, COMMITS.c.version == DATASETS.c.version)
            )
            .where(DATASETS.c.name > after if after is not None else true())
            .order_by(DATASETS.c.name)
            .limit(limit)
        ).all()
        page = None if limit is None and after is None else [r.id for r in rows]
        per_split = _current_split_totals(conn, page) if splits else None
    rows = [r for r in rows if not mf.abandoned(r.pending)]  # registered for inputs whose writer died
    for r in rows:
        check_totals(engine, r, ShardSum(r.commit_shards, r.commit_records, r.commit_bytes))
    infos = [dataset_info(r, json.loads(r.schema_json) if schemas else {}) for r in rows]
    if per_split is None:
        return infos
    return [replace(i, splits=per_split.get(r.id, {})) for i, r in zip(infos, rows, strict=True)]


def _current_split_totals(conn: Any, ids: list[int] | None) -> dict[int, dict[str, dict[str, int]]]:
    """Per dataset id (of ``ids``; None: every one), per split: the records, shards and bytes
    of its live shards now."""
    query = (
        select(SHARDS.c.dataset_id, SHARDS.c.split, func.count(), _total(SHARDS.c.records), _total(SHARDS.c.bytes))
        .where(SHARDS.c.removed_version.is_(None))
        .group_by(SHARDS.c.dataset_id, SHARDS.c.split)
        .order_by(SHARDS.c.dataset_id, SHARDS.c.split)
    )
    if ids is None:
        rows = conn.execute(query).all()
    else:
        chunks = (ids[lo : lo + mf.ID_CHUNK] for lo in range(0, len(ids), mf.ID_CHUNK))
        rows = [r for chunk in chunks for r in conn.execute(query.where(SHARDS.c.dataset_id.in_(chunk)))]
    out: dict[int, dict[str, dict[str, int]]] = {}
    for ds, name, n, records, size in rows:
        out.setdefault(ds, {})[name] = {"records": int(records), "shards": int(n), "bytes": int(size)}
    return out


def split_totals(conn: Any, live: Any) -> dict[str, dict[str, int]]:
    """Per split of the shards in ``live`` (a live_at query): records, shards, bytes."""
    sub = live.order_by(None).subquery()
    rows = conn.execute(
        select(sub.c.split, func.count(), _total(sub.c.records), _total(sub.c.bytes))
        .group_by(sub.c.split)
        .order_by(sub.c.split)
    ).all()
    return {name: {"records": int(r), "shards": int(n), "bytes": int(b)} for name, n, r, b in rows}


def splits_at(conn: Any, name: str, commit: Any, live: Any) -> dict[str, dict[str, int]]:
    """Per split, the live totals at ``commit`` (a commits row): as the commit kept them (format
    10: one row read, whatever the dataset's size), else summed from ``live`` (its live_at
    query). Kept totals that disagree with the commit's own are damage, as check_totals says."""
    kept = kept_splits(commit.splits)
    if kept is None:
        return split_totals(conn, live)
    said = ShardSum(*(sum(t[k] for t in kept.values()) for k in ("shards", "records", "bytes")))
    total = ShardSum(commit.shard_count, commit.records, commit.bytes)
    if said != total:
        where = f"dataset {name!r} version {commit.version}"
        raise mf.damaged(conn.engine, f"{where}: its totals per split add up to {said}, its commit {total}")
    return kept


def kept_splits(text: str | None) -> dict[str, dict[str, int]] | None:
    """A commit's ``splits`` column read (None: not kept), by split name."""
    if text is None:
        return None
    return {k: {"records": r, "shards": n, "bytes": b} for k, (n, r, b) in sorted(json.loads(text).items())}


def splits_text(totals: dict[str, list[int]]) -> str:
    """A commit's ``splits`` column: {split: [shards, records, bytes]}, splits left empty dropped."""
    return json.dumps({k: v for k, v in sorted(totals.items()) if v[0] > 0}, separators=(",", ":"))


def _total(column: Any) -> Any:
    return func.coalesce(func.sum(column), 0)


def dataset_info(row: Any, schema: dict[str, Any]) -> DatasetInfo:
    return DatasetInfo(
        row.name,
        row.description,
        row.created_at,
        row.version,
        row.schema_version,
        schema,
        row.records,
        row.bytes,
        row.shard_count,
        compression=row.compression,
    )


def check_totals(engine: Engine, row: Any, commit: ShardSum, version: int | None = None) -> None:
    """The totals of dataset ``row`` against those of its commit at ``version`` (default: the
    current one; every commit writes both): equal there, and never negative."""
    said = ShardSum(row.shard_count, row.records, row.bytes)
    where = f"dataset {row.name!r} version {row.version if version is None else version}"
    if commit.shards is None:
        raise mf.damaged(engine, f"{where}: no commit row")
    if min(commit.shards, commit.records, commit.bytes) < 0:
        raise mf.damaged(engine, f"{where}: its commit says {commit}")
    if version in (None, row.version) and said != commit:
        raise mf.damaged(engine, f"{where}: the dataset row says {said}, its commit {commit}")
