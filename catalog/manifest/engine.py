"""Engines and what the database says: creating an engine (SQLite's pragmas, ``BEGIN
IMMEDIATE`` and Ctrl-C handling; PostgreSQL's bounded connect), naming the manifest in
messages, and turning driver errors into one ManifestError line (a lock or a constraint
passes through: ``transactions`` retries locks, callers act on constraints).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection, ExceptionContext
from sqlalchemy.exc import ArgumentError, DatabaseError, DBAPIError, IntegrityError

from catalog.errors import ManifestError, first_line
from catalog.manifest.urls import check_port, normalize_url, safe_url

BUSY_TIMEOUT_MS = 60_000
CONNECT_TIMEOUT_S = 10
SCRUB_WAIT_MS = 5_000  # scrub's wait for readers to let VACUUM run


def _sqlite_setup(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control from the driver so we can say BEGIN IMMEDIATE: a
        # writer then waits for the lock up front (busy timeout) instead of failing
        # later when a read transaction tries to upgrade.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        wal = cur.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() == "wal"
        cur.execute("PRAGMA synchronous = FULL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()
        database = engine.url.database
        if wal and database and database != ":memory:":  # where write_txn syncs its commits (see there)
            _record.info["wal"] = os.path.abspath(database) + "-wal"
        _record.info["synchronous"] = "FULL"

    @event.listens_for(engine, "handle_error")
    def _on_interrupt(ctx: Any) -> None:
        # Ctrl-C inside a driver call: SQLAlchemy closes the connection, but SQLite keeps it
        # open as a zombie, transaction and write lock included, while the interrupted
        # statement lives on in the traceback; then the writer's cleanup waits on its own
        # lock. End the statement and the transaction now.
        if isinstance(ctx.original_exception, Exception):
            return
        with contextlib.suppress(Exception):
            ctx.cursor.close()
        with contextlib.suppress(Exception):
            ctx.connection.connection.dbapi_connection.rollback()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        options = conn.get_execution_options()
        # synchronous is the connection's setting: each transaction sets the one it needs.
        sync = "NORMAL" if options.get("sqlite_sync_after") and conn.info.get("wal") else "FULL"
        if conn.info.get("synchronous") != sync:
            conn.exec_driver_sql(f"PRAGMA synchronous = {sync}")
            conn.info["synchronous"] = sync
        conn.exec_driver_sql(f"BEGIN {options.get('sqlite_begin', 'DEFERRED')}")


def make_engine(url: str) -> Engine:
    url = normalize_url(url)
    check_port(url)
    try:
        if url.startswith("sqlite"):
            engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})
            _sqlite_setup(engine)
        else:
            # A bounded connect: an unreachable server is an error, never a hang.
            args = {"connect_timeout": CONNECT_TIMEOUT_S} if url.startswith("postgresql") else {}
            engine = create_engine(url, pool_pre_ping=True, connect_args=args)
        _name_the_manifest(engine)
        return engine
    except ArgumentError as e:
        raise ManifestError(f"bad database URL {safe_url(url)!r}: {e}") from e
    except ModuleNotFoundError as e:  # the driver of a database the embedded default does not need
        extra = " (pip install 'tfrecord-catalog[postgres]')" if url.startswith("postgresql") else ""
        raise ManifestError(f"no database driver for {safe_url(url)!r}: {e}{extra}") from e


def check_connection(engine: Engine) -> None:
    """Fail with one line naming the database (never its password) when it cannot be reached."""
    try:
        with engine.connect():
            pass
    except DBAPIError as e:
        raise ManifestError(f"cannot connect to the manifest database {_where(engine)}: {_first_line(e)}") from e


def _where(engine: Engine) -> str:
    """The engine's database URL as it may be printed: no password."""
    return safe_url(engine.url.render_as_string(hide_password=False))


def _name_the_manifest(engine: Engine) -> None:
    """Every error of the engine's remembers which manifest raised it: with_lock_retry, which is
    handed only the error, names the manifest in its one line."""

    @event.listens_for(engine, "handle_error")
    def _on_error(context: ExceptionContext) -> None:
        if context.sqlalchemy_exception is not None:
            context.sqlalchemy_exception.manifest = _where(engine)  # type: ignore[attr-defined]


def database_error(e: Exception, where: str | None = None) -> ManifestError:
    where = where or getattr(e, "manifest", None)
    return ManifestError(f"manifest database error{f' in {where}' if where else ''}: {_first_line(e)}")


def _first_line(e: Exception) -> str:
    return first_line(e.orig if isinstance(e, DBAPIError) and e.orig is not None else e)


@contextmanager
def manifest_errors(engine: Engine) -> Iterator[None]:
    """What the database says (a lost server, a damaged file: "database disk image is
    malformed") or a value it returns that is not what its column holds (a date no longer
    a date) as one ManifestError line naming the manifest. A lock or a constraint passes
    through: callers wait or act on those."""
    try:
        yield
    except DatabaseError as e:
        if isinstance(e, IntegrityError) or is_lock_error(e):
            raise
        raise database_error(e, getattr(e, "manifest", None) or _where(engine)) from e
    except (ValueError, engine.dialect.loaded_dbapi.Error) as e:  # a raw cursor's error (fetch_column), a value
        raise database_error(e, _where(engine)) from e


def manifest_where(engine: Engine) -> str:
    """How messages name the manifest: its URL (a file's path), never with a password."""
    return _where(engine)


VERIFY_HINT = " (`catalog verify` checks all of it)"


def damaged(engine: Engine, detail: str) -> ManifestError:
    """The error for values read that cannot all be true (totals that disagree with the shards)."""
    return ManifestError(f"{_where(engine)}: the manifest is damaged: {detail}{VERIFY_HINT}")


def integrity_problems(engine: Engine) -> list[str]:
    """What SQLite's ``PRAGMA quick_check`` finds wrong with the file's pages (PostgreSQL: nothing
    to ask; its own checksums and WAL guard its pages)."""
    if engine.dialect.name != "sqlite":
        return []
    found: list[str] = []
    raw = engine.raw_connection()  # the driver's own cursor: the rows before a stumble are kept
    try:
        cursor = raw.cursor()
        try:
            cursor.execute("PRAGMA quick_check")
            while (row := cursor.fetchone()) is not None:
                found.append(str(row[0]))
        except engine.dialect.loaded_dbapi.Error as e:  # the check can stumble on what it has just reported
            found.append(str(e))
        finally:
            cursor.close()
    finally:
        raw.close()
    return [] if found == ["ok"] else found


def scrub(engine: Engine) -> bool:
    """Leave no copy of deleted rows in the manifest's files (after an erasure: the replaced
    shards' statistics hold their values). SQLite keeps a deleted row's bytes in its free pages,
    and older page images in the write-ahead log, until they are reused: VACUUM rebuilds the
    file without them, a TRUNCATE checkpoint empties the log. False when a reader still used
    the log (its old frames then go at a later checkpoint). Other databases: their own VACUUM."""
    if engine.dialect.name != "sqlite":
        return True
    raw = engine.raw_connection()  # the driver's own: VACUUM runs outside any transaction
    try:
        cursor = raw.cursor()
        try:  # a reader's open transaction holds VACUUM back: waited for a while, not a minute
            cursor.execute(f"PRAGMA busy_timeout = {SCRUB_WAIT_MS}")
            cursor.execute("VACUUM")
            busy = cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        finally:
            cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            cursor.close()
    except engine.dialect.loaded_dbapi.Error as e:
        raise database_error(e, _where(engine)) from e
    finally:
        raw.close()
    return bool(busy == 0)


# PostgreSQL's transient failures, worth a retry like SQLite's "locked": serialization
# failure, deadlock detected, lock not available.
_RETRY_SQLSTATES = {"40001", "40P01", "55P03"}


def is_lock_error(e: DBAPIError) -> bool:
    if getattr(e.orig, "sqlstate", None) in _RETRY_SQLSTATES:
        return True
    text = str(e.orig).lower() if e.orig is not None else str(e).lower()
    return "locked" in text or "busy" in text
