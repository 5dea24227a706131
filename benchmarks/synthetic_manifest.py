"""Big manifests made fast, for bench_scale's section c: manifest rows inserted in bulk through
the manifest's own tables (``catalog.manifest``), in one transaction (executemany chunks), beside one
shard written the ordinary way. Every synthetic shard row names a hard link to that real shard's
file (so gc's listing and the data area look as they would), but says it holds ``records_per_shard``
records: the files are never read by what section c measures (list, show, history, planning,
commits, gc --dry-run), so a 10^9-record dataset costs a 4 KiB file.

The rows keep the manifest's invariants that the read side checks: gapless versions, each
commit's totals equal to its live shards', the dataset row equal to its current commit, each
append's records_added/shards_added equal to its shard rows', seq in commit order. ``check``
reads them back through the catalog's own read paths.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select, update

from benchmarks import harness as h
from catalog import Catalog
from catalog import manifest as mf

LINKS_PER_FILE = 50_000
INSERT_CHUNK = 20_000  # rows per executemany: a few MB of parameters at a time
RARE_SPLIT = "test"  # one shard in Shape.rare_every is in it: the split a planned read takes


@dataclass(frozen=True)
class Shape:
    """What a synthetic catalog holds: one dataset ``big`` and ``others`` one-shard datasets."""

    shards: int  # in ``big``
    per_commit: int  # shards per append commit of ``big``
    records_per_shard: int
    others: int  # more datasets, one one-shard append each (`list`'s rows)
    rare_every: int = 100  # one shard in this many is in RARE_SPLIT


@dataclass(frozen=True)
class Template:
    """The one real shard's facts: every synthetic row's file is a hard link to it."""

    path: Path
    bytes: int
    checksum: str
    compression: str


def build(root: Path, url: str | None, shape: Shape) -> None:
    """A catalog at ``root`` (its manifest at ``url``; None: SQLite in it) holding ``shape``."""
    with Catalog.init(root, url) as cat:
        big = cat.register("big", h.TEXT_SCHEMA)
        real = big.append_rows(h.text_rows(1)).shards[0]
        t = Template(Path(real.path), real.bytes, real.checksum, real.compression)
        now = mf.utcnow()
        with mf.write_txn(cat.engine) as conn:
            _fill_big(conn, cat, big.id, t, shape, now)
            _add_others(conn, cat, big.id, t, shape.others, now)


def _intent() -> str:
    return f"{0x18000000000:012x}{secrets.token_hex(8)}"  # the shape of naming.new_intent_id


def _link(cat: Catalog, t: Template, rel: str) -> None:
    """A hard link to the template (a fresh copy of it, beside the catalog, every LINKS_PER_FILE
    links: ext4 allows 65,000 links to one file)."""
    source = t.path
    if source.stat().st_nlink >= LINKS_PER_FILE:
        copies = sorted(Path(cat.root).parent.glob(f"{Path(cat.root).name}-template-*"))
        source = copies[-1] if copies and copies[-1].stat().st_nlink < LINKS_PER_FILE else _copy(cat, t, len(copies))
    os.link(source, Path(cat.store.root) / rel)


def _copy(cat: Catalog, t: Template, n: int) -> Path:
    made = Path(cat.root).parent / f"{Path(cat.root).name}-template-{n:03d}"
    shutil.copyfile(t.path, made)
    return made


def _fill_big(conn: Any, cat: Catalog, ds_id: int, t: Template, shape: Shape, now: datetime) -> None:
    """Commits 3.. of ``big`` (1 made it, 2 wrote the real shard), ``per_commit`` shards each."""
    state = conn.execute(select(mf.DATASETS).where(mf.DATASETS.c.id == ds_id)).one()
    shards, records, size, version = state.shard_count, state.records, state.bytes, state.version
    per_split = {mf.DEFAULT_SPLIT: [shards, records, size]}  # the real shard's commit's (format 10's splits)
    commits: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    left = shape.shards - shards
    while left > 0:
        k, version = min(shape.per_commit, left), version + 1
        intent = _intent()
        for i in range(k):
            rel = f"big/{intent}-{i:05d}.tfrecord"
            split = RARE_SPLIT if (shards + i) % shape.rare_every == shape.rare_every // 2 else mf.DEFAULT_SPLIT
            _link(cat, t, rel)
            rows.append(_shard(ds_id, rel, t, shape.records_per_shard, version, (version << mf.SEQ_BITS) + i, split))
            kept = per_split.setdefault(split, [0, 0, 0])
            kept[0], kept[1], kept[2] = kept[0] + 1, kept[1] + shape.records_per_shard, kept[2] + t.bytes
        shards, records, size, left = shards + k, records + k * shape.records_per_shard, size + k * t.bytes, left - k
        totals = {"records": records, "bytes": size, "shard_count": shards}
        commits.append(_commit(ds_id, version, now, k * shape.records_per_shard, k, totals, splits=per_split))
    _insert(conn, mf.COMMITS, commits)
    _insert(conn, mf.SHARDS, rows)
    conn.execute(update(mf.DATASETS).where(mf.DATASETS.c.id == ds_id).values(version=version, **totals))


def _add_others(conn: Any, cat: Catalog, big_id: int, t: Template, n: int, now: datetime) -> None:
    """``n`` datasets ``d00000``.., each created and given one one-record shard (version 2)."""
    schema = conn.execute(select(mf.SCHEMA_VERSIONS).where(mf.SCHEMA_VERSIONS.c.dataset_id == big_id)).one()
    one = {"records": 1, "bytes": t.bytes, "shard_count": 1}
    datasets = [
        {"name": f"d{i:05d}", "description": "", "created_at": now, "version": 2, "schema_version": 1, **one}
        for i in range(n)
    ]
    _insert(conn, mf.DATASETS, datasets)
    ids = dict(conn.execute(select(mf.DATASETS.c.name, mf.DATASETS.c.id).where(mf.DATASETS.c.id != big_id)).all())
    schemas, commits, rows = [], [], []
    for name, ds_id in ids.items():
        schemas.append({**schema._asdict(), "id": None, "dataset_id": ds_id})
        zero = {"records": 0, "bytes": 0, "shard_count": 0}
        train = {mf.DEFAULT_SPLIT: [1, 1, t.bytes]}
        commits += [_commit(ds_id, 1, now, 0, 0, zero, {}, "create"), _commit(ds_id, 2, now, 1, 1, one, train)]
        (Path(cat.store.root) / name).mkdir()
        rel = f"{name}/{_intent()}-00000.tfrecord"
        _link(cat, t, rel)
        rows.append(_shard(ds_id, rel, t, 1, 2, 2 << mf.SEQ_BITS, mf.DEFAULT_SPLIT))
    for s in schemas:
        del s["id"]
    _insert(conn, mf.SCHEMA_VERSIONS, schemas)
    _insert(conn, mf.COMMITS, commits)
    _insert(conn, mf.SHARDS, rows)


def _shard(ds_id: int, rel: str, t: Template, records: int, version: int, seq: int, split: str) -> dict[str, Any]:
    return {
        "dataset_id": ds_id, "path": rel, "records": records, "bytes": t.bytes, "checksum": t.checksum,
        "compression": t.compression, "schema_version": 1, "added_version": version, "removed_version": None,
        "seq": seq, "split": split, "index_checksum": None, "source": "synthetic", "location": None,
        "fingerprint": "owned",
    }  # fmt: skip


def _commit(
    ds_id: int,
    version: int,
    now: datetime,
    records: int,
    shards: int,
    totals: dict[str, int],
    splits: dict[str, list[int]],
    kind: str = "append",
) -> dict[str, Any]:
    return {
        "dataset_id": ds_id, "version": version, "kind": kind, "schema_version": 1, "created_at": now,
        "message": "synthetic", "author": "bench", "read_version": version - 1, "token": None,
        "records_added": records, "shards_added": shards, "intent": None, **totals,
        "splits": json.dumps(dict(sorted(splits.items())), separators=(",", ":")),  # as commits keep them (format 10)
    }  # fmt: skip


def _insert(conn: Any, table: Any, rows: list[dict[str, Any]]) -> None:
    for lo in range(0, len(rows), INSERT_CHUNK):
        conn.execute(insert(table), rows[lo : lo + INSERT_CHUNK])
