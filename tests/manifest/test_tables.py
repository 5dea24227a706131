"""The manifest's tables (catalog/manifest/tables.py): the names, keys and defaults the rows
are written with."""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import create_engine, insert, select

from catalog.manifest.tables import (
    DATASETS,
    DEFAULT_SPLIT,
    FORMAT_VERSION,
    ID_CHUNK,
    METADATA,
    SEQ_BITS,
    SHARDS,
    utcnow,
)
from catalog.manifest.upgrades import UPGRADES


def test_utcnow_is_naive_utc() -> None:
    before = datetime.now(timezone.utc).replace(tzinfo=None)
    now = utcnow()
    assert now.tzinfo is None
    assert before <= now <= datetime.now(timezone.utc).replace(tzinfo=None)


def test_the_format_lists_its_tables_and_a_step_to_each_version() -> None:
    assert {t.name for t in METADATA.sorted_tables} == {
        "catalog_meta", "datasets", "schema_versions", "commits", "shards", "shard_stats",
        "applied_migrations", "tags", "write_intents", "lineage",
    }  # fmt: skip
    assert max(UPGRADES) + 1 == FORMAT_VERSION
    assert 0 < ID_CHUNK < 32766  # under SQLite's bound-parameter limit
    assert 1 << SEQ_BITS > 1_000_000  # room for a commit's shards within one version


def test_a_shard_written_without_split_or_seq_gets_the_defaults() -> None:
    engine = create_engine("sqlite://")
    METADATA.create_all(engine)
    with engine.begin() as conn:
        conn.execute(insert(DATASETS).values(id=1, name="d", created_at=utcnow(), version=1, schema_version=1))
        conn.execute(
            insert(SHARDS).values(
                dataset_id=1,
                path="d/a",
                records=1,
                bytes=2,
                checksum="crc32c:0",
                compression="none",
                schema_version=1,
                added_version=1,
            )
        )
        row = conn.execute(select(SHARDS.c.split, SHARDS.c.seq, SHARDS.c.removed_version)).one()
        totals = conn.execute(select(DATASETS.c.records, DATASETS.c.compression, DATASETS.c.pending)).one()
    assert tuple(row) == (DEFAULT_SPLIT, 0, None)
    assert tuple(totals) == (0, "none", None)
