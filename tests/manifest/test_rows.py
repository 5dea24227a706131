"""Many rows at once (catalog/manifest/rows.py): rows straight from the cursor, updates in
chunks of ID_CHUNK ids."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, insert, select

from catalog.manifest import rows
from catalog.manifest.engine import make_engine
from catalog.manifest.meta import create_manifest
from catalog.manifest.rows import fetch_column, fetch_rows, update_shards
from catalog.manifest.tables import DATASETS, SHARDS, utcnow
from catalog.manifest.transactions import read_txn, write_txn


def _manifest_with_shards(tmp_path: Path, n: int) -> Engine:
    engine = make_engine(f"sqlite:///{tmp_path / 'catalog.db'}")
    create_manifest(engine, str(tmp_path / "data"))
    with write_txn(engine) as conn:
        conn.execute(
            insert(DATASETS).values(id=1, name="d", created_at=utcnow(), version=1, schema_version=1, description="")
        )
        conn.execute(insert(SHARDS), [_shard(i) for i in range(n)])
    return engine


def _shard(i: int) -> dict[str, Any]:
    return {
        "dataset_id": 1,
        "path": f"d/{i:04d}.tfrecord",
        "records": i,
        "bytes": 10 * i,
        "checksum": "crc32c:00000000",
        "compression": "none",
        "schema_version": 1,
        "added_version": 1,
        "seq": i,
    }


def test_fetch_rows_and_fetch_column_give_plain_tuples_in_query_order(tmp_path: Path) -> None:
    engine = _manifest_with_shards(tmp_path, 3)
    with read_txn(engine) as conn:
        found = fetch_rows(conn, select(SHARDS.c.path, SHARDS.c.records).order_by(SHARDS.c.seq.desc()))
        paths = fetch_column(conn, select(SHARDS.c.path).order_by(SHARDS.c.seq))
        none = fetch_column(conn, select(SHARDS.c.path).where(SHARDS.c.records > 99))
    assert found == [("d/0002.tfrecord", 2), ("d/0001.tfrecord", 1), ("d/0000.tfrecord", 0)]
    assert all(type(r) is tuple for r in found)
    assert paths == ["d/0000.tfrecord", "d/0001.tfrecord", "d/0002.tfrecord"]
    assert none == []


def test_update_shards_touches_exactly_the_ids_given_across_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _manifest_with_shards(tmp_path, 7)
    monkeypatch.setattr(rows, "ID_CHUNK", 2)  # 5 ids: three statements
    statements: list[str] = []
    with write_txn(engine) as conn:
        ids = fetch_column(conn, select(SHARDS.c.id).order_by(SHARDS.c.seq))
        event.listen(conn, "before_cursor_execute", lambda *a: statements.append(a[2]))
        update_shards(conn, ids[1:6], removed_version=2)
        update_shards(conn, [], removed_version=3)  # nothing: no statement
    with read_txn(engine) as conn:
        removed = fetch_column(conn, select(SHARDS.c.removed_version).order_by(SHARDS.c.seq))
    assert removed == [None, 2, 2, 2, 2, 2, None]
    assert sum(s.lstrip().upper().startswith("UPDATE") for s in statements) == 3
