"""copy-manifest (catalog/manifest/copying.py): every row but write intents, ids kept, into an
empty database only; a move marks the source so its writers fail."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, func, insert, select

from catalog.errors import ManifestError
from catalog.manifest.copying import copy_manifest
from catalog.manifest.engine import make_engine
from catalog.manifest.meta import create_manifest, read_meta
from catalog.manifest.tables import DATASETS, INTENTS, MOVED_TO, TAGS, utcnow
from catalog.manifest.transactions import read_txn, write_txn

pytestmark = pytest.mark.usefixtures("sqlite_only")


def _source(tmp_path: Path) -> Engine:
    engine = make_engine(f"sqlite:///{tmp_path / 'src.db'}")
    create_manifest(engine, "data")
    now = utcnow()
    with write_txn(engine) as conn:
        conn.execute(insert(DATASETS).values(id=7, name="d", created_at=now, version=3, schema_version=1))
        conn.execute(insert(TAGS).values(id=4, dataset_id=7, name="best", version=2, created_at=now))
        conn.execute(insert(INTENTS).values(id="i1", dataset="d", created_at=now, heartbeat_at=now, pid=1, host="h"))
    return engine


def test_every_row_but_intents_is_copied_with_its_id(tmp_path: Path) -> None:
    source = _source(tmp_path)
    target = make_engine(f"sqlite:///{tmp_path / 'dst.db'}")
    counts = copy_manifest(source, target, data_root="/abs/data")
    assert counts["datasets"] == 1 and counts["tags"] == 1 and counts["catalog_meta"] == 3
    assert "write_intents" not in counts
    with read_txn(target) as conn:
        assert conn.execute(select(DATASETS.c.id, DATASETS.c.name)).all() == [(7, "d")]
        assert conn.execute(select(TAGS.c.id, TAGS.c.dataset_id)).all() == [(4, 7)]
        assert conn.execute(select(func.count()).select_from(INTENTS)).scalar() == 0
    assert read_meta(target)["data_root"] == "/abs/data"
    assert read_meta(source)["data_root"] == "data"
    assert MOVED_TO not in read_meta(source)  # a copy, not a move


def test_a_move_marks_the_source_and_refuses_its_writers(tmp_path: Path) -> None:
    source = _source(tmp_path)
    target = make_engine(f"sqlite:///{tmp_path / 'dst.db'}")
    copy_manifest(source, target, move=True)
    assert read_meta(source)[MOVED_TO] == f"sqlite:///{tmp_path / 'dst.db'}"
    assert MOVED_TO not in read_meta(target)
    with pytest.raises(ManifestError, match="moved"), write_txn(source) as conn:
        conn.execute(insert(TAGS).values(dataset_id=7, name="late", version=3, created_at=utcnow()))


def test_a_target_that_holds_a_manifest_is_refused(tmp_path: Path) -> None:
    source = _source(tmp_path)
    target = make_engine(f"sqlite:///{tmp_path / 'dst.db'}")
    create_manifest(target, "other")
    with pytest.raises(ManifestError) as e:
        copy_manifest(source, target)
    assert str(e.value) == f"sqlite:///{tmp_path / 'dst.db'} already holds a manifest; copy into an empty database"
    assert read_meta(target)["data_root"] == "other"
