"""Probes and manifest surgery the tests share."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from catalog import Catalog

# A child that a test sends a SIGINT to (or that raises one itself) starts with this line: a
# shell that ignores SIGINT (nohup, a background job, some CI runners) hands SIG_IGN down
# through pytest to every child, and the SIGINT would change nothing (issue 30).
CTRL_C = "import signal as _signal; _signal.signal(_signal.SIGINT, _signal.default_int_handler)\n"


def interruptible(code: str) -> str:
    """The ``python -c`` program ``code``, with Ctrl-C restored first: KeyboardInterrupt on
    SIGINT, whatever disposition the suite was started with."""
    return CTRL_C + code


def downgrade_to_format_9(db: Path) -> None:
    """Turn a SQLite manifest into what format 9 had: the per-split index without the read order,
    commits without their totals per split."""
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE commits DROP COLUMN splits")
        conn.execute("DROP INDEX ix_shards_split_seq")
        conn.execute(
            "CREATE INDEX ix_shards_split_totals ON shards (dataset_id, removed_version, split, records, bytes)"
        )
        conn.execute("UPDATE catalog_meta SET value = '9' WHERE key = 'format_version'")


def downgrade_to_format_7(db: Path) -> None:
    """Turn a SQLite manifest into what format 7 had: no shard fingerprints."""
    downgrade_to_format_9(db)
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE shards DROP COLUMN fingerprint")
        conn.execute("UPDATE catalog_meta SET value = '7' WHERE key = 'format_version'")


def downgrade_to_format_6(db: Path) -> None:
    """Turn a SQLite manifest into what format 6 had: no shard statistics."""
    downgrade_to_format_7(db)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE shard_stats")
        conn.execute("UPDATE catalog_meta SET value = '6' WHERE key = 'format_version'")


def downgrade_to_format_5(db: Path) -> None:
    """Turn a SQLite manifest into what format 5 had: no shard locations (nothing adopted in place),
    no pending datasets."""
    downgrade_to_format_6(db)
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE shards DROP COLUMN location")
        conn.execute("ALTER TABLE datasets DROP COLUMN pending")
        conn.execute("UPDATE catalog_meta SET value = '5' WHERE key = 'format_version'")


def downgrade_to_format_4(db: Path) -> None:
    """Turn a SQLite manifest into what format 4 had: no shard sources, no dataset compression."""
    downgrade_to_format_5(db)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP INDEX ix_shards_checksum")
        conn.execute("ALTER TABLE shards DROP COLUMN source")
        conn.execute("ALTER TABLE datasets DROP COLUMN compression")
        conn.execute("UPDATE catalog_meta SET value = '4' WHERE key = 'format_version'")


def downgrade_to_format_3(db: Path) -> None:
    """Turn a SQLite manifest into what format 3 had: no splits, no index checksums, no tags."""
    downgrade_to_format_4(db)
    with sqlite3.connect(db) as conn:
        conn.execute("DROP INDEX ix_shards_split_totals")
        conn.execute("ALTER TABLE shards DROP COLUMN split")
        conn.execute("ALTER TABLE shards DROP COLUMN index_checksum")
        conn.execute("DROP TABLE tags")
        conn.execute("UPDATE catalog_meta SET value = '3' WHERE key = 'format_version'")


def commit_lock_held(cat: Catalog, dataset: str) -> bool:
    """Whether another transaction holds the lock a commit to ``dataset`` needs: SQLite's
    database write lock, or PostgreSQL's lock on the dataset's row. Never waits."""
    raw = cat.engine.raw_connection()
    try:
        cur = raw.cursor()
        if cat.engine.dialect.name == "sqlite":
            cur.execute("PRAGMA busy_timeout = 0")
            try:
                cur.execute("BEGIN IMMEDIATE")
            except Exception as e:  # sqlite3.OperationalError: database is locked
                if "locked" not in str(e):
                    raise
                return True
            cur.execute("ROLLBACK")
            return False
        import psycopg

        try:
            cur.execute("SELECT id FROM datasets WHERE name = %s FOR UPDATE NOWAIT", (dataset,))
        except psycopg.errors.LockNotAvailable:
            return True
        finally:
            raw.rollback()
        return False
    finally:
        raw.close()
