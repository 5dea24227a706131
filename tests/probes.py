"""Probes the fault tests share."""

from __future__ import annotations

from catalog import Catalog


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
