"""Transactions: ``write_txn`` (SQLite: the writers' queue, then ``BEGIN IMMEDIATE``, the WAL
synced after the lock is let go; a moved manifest refused), ``read_txn`` (one snapshot, on
PostgreSQL too) and ``with_lock_retry`` (a lock is waited out, never shown).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy import Engine, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DatabaseError, IntegrityError

from catalog.errors import ManifestError
from catalog.manifest import write_queue
from catalog.manifest.engine import database_error, is_lock_error, manifest_errors
from catalog.manifest.tables import META, MOVED_TO

LOCK_RETRIES = 50
# Built once: every write transaction runs it, and building a statement costs more than running it
_MOVED = select(META.c.value).where(META.c.key == MOVED_TO)
T = TypeVar("T")


def with_lock_retry(fn: Callable[[], T]) -> T:
    """Run ``fn`` again when the database reports a lock; the user never sees "locked". Other
    database errors, but for a constraint's (callers act on those), are one ManifestError line."""
    delay = 0.005
    for attempt in range(LOCK_RETRIES):
        try:
            return fn()
        except IntegrityError:
            raise
        except DatabaseError as e:
            if not is_lock_error(e) or attempt == LOCK_RETRIES - 1:
                raise database_error(e) from e
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
    raise AssertionError("unreachable")  # pragma: no cover


@contextmanager
def write_txn(engine: Engine, durable: bool = True, moved_ok: bool = False) -> Iterator[Connection]:
    """A write transaction. On SQLite it holds the database's write lock from its first
    statement, taken in turn (see write_queue); on PostgreSQL (READ COMMITTED) commits take
    their dataset's row lock instead.

    On SQLite in WAL mode the commit's fsync happens after the write lock is let go: the
    transaction commits with ``synchronous = NORMAL`` (the WAL written, not synced), then
    the WAL is fsynced here, before this returns, so the caller never reports a commit that
    is not on disk (other processes may see it a moment earlier: a power loss then takes it
    from them too). The lock is held for the writing only, so writers queue for less than
    the time of a fsync each. ``durable=False`` skips that fsync, for rows that only
    matter while their writer lives (its intent, heartbeats): a power loss may take them, a
    crash of the process cannot, and the next durable commit syncs them along. A manifest
    that copy-manifest moved away from takes no more writes (``moved_ok``: but for a writer's
    own cleanup)."""
    with (
        write_queue._write_queue(engine),  # looked up here: a benchmark times the turns
        engine.connect().execution_options(sqlite_begin="IMMEDIATE", sqlite_sync_after=True) as conn,
    ):
        with conn.begin():
            if not moved_ok:
                check_not_moved(conn)
            yield conn
        wal = conn.info.get("wal") if conn.dialect.name == "sqlite" else None
    if wal and durable:
        _sync_wal(wal)


def _sync_wal(path: str) -> None:
    """fsync SQLite's WAL file: every commit written to it so far is then on disk."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:  # the last connection checkpointed it away: the database file was synced
        return
    try:
        os.fsync(fd)
    except OSError as e:
        raise ManifestError(
            f"the manifest's disk failed to sync {path} after a commit ({e.strerror}): "
            "that commit is recorded but may not survive a power loss"
        ) from e
    finally:
        os.close(fd)


def check_not_moved(conn: Connection) -> None:
    """Refuse a manifest that copy-manifest switched away from: a write there would be lost to
    the copy, and a gc there would take files only the copy names. (copy_manifest holds
    catalog_meta exclusively while it copies, so this read waits for it and then sees the mark.)"""
    moved = conn.execute(_MOVED).scalar_one_or_none()
    if moved is not None:
        raise ManifestError(
            f"this manifest was moved to {moved} by copy-manifest and takes no more writes: nothing was "
            f"registered; use the copy (catalog init DIR --db-url {moved})"
        )


@contextmanager
def read_txn(engine: Engine) -> Iterator[Connection]:
    """A read transaction on one snapshot, as SQLite's are: on PostgreSQL, REPEATABLE READ
    (its default, READ COMMITTED, would give each statement a newer snapshot, and gc, which
    reads the shards and then the intents, could miss a commit landing in between)."""
    with manifest_errors(engine), engine.connect() as conn:  # one line (writes: with_lock_retry)
        if conn.dialect.name == "postgresql":
            conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            yield conn
