"""The manifest: SQLAlchemy models, engine setup and the manifest's own format version.

Everything database-specific lives here: SQLite's pragmas and ``BEGIN IMMEDIATE``,
PostgreSQL's snapshot reads and transient-error retries. The models and queries elsewhere
are portable SQL; commits serialize on their dataset's row (``SELECT ... FOR UPDATE``, which
SQLite, holding the whole database's write lock, does not need).
"""

from __future__ import annotations

import contextlib
import functools
import os
import struct
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Engine,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    delete,
    event,
    insert,
    inspect,
    make_url,
    select,
    update,
)
from sqlalchemy.engine import Connection, ExceptionContext
from sqlalchemy.exc import ArgumentError, DatabaseError, DBAPIError, IntegrityError

from catalog.errors import CatalogError, ManifestError, first_line

try:
    import fcntl
except ImportError:  # Windows: no writers' queue (see WRITE_QUEUE)
    fcntl = None  # type: ignore[assignment]

FORMAT_VERSION = 8  # the manifest's own schema version (see upgrade())
# A shard's read order: appended shards get (commit version << SEQ_BITS) + index in the
# commit; a rewritten shard (migration, compaction, restore) takes the seq of the shard it
# replaces, so order survives rewrites that commit after newer appends.
SEQ_BITS = 24
DEFAULT_SPLIT = "train"  # the split of shards appended without one, and of every shard before format 4
ID_CHUNK = 5000  # ids per IN (...): stays under every database's bound-parameter limit
BUSY_TIMEOUT_MS = 60_000
CONNECT_TIMEOUT_S = 10
LOCK_RETRIES = 50
T = TypeVar("T")


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


# Core tables, not ORM models: every query is SQL on a connection, and importing the ORM
# alone would add ~50 ms to every CLI call. Column order, types, nullability and constraints
# are the manifest format: change them only with FORMAT_VERSION and upgrade().
METADATA = MetaData()


def _req(name: str, type_: Any, **kw: Any) -> Column[Any]:
    return Column(name, type_, nullable=False, **kw)


def _opt(name: str, type_: Any) -> Column[Any]:
    return Column(name, type_, nullable=True)


def _id() -> Column[Any]:
    return Column("id", Integer, primary_key=True)


def _dataset_id() -> Column[Any]:
    return Column("dataset_id", Integer, ForeignKey("datasets.id", ondelete="CASCADE"), nullable=False)


# Key/value facts every client must agree on: format version, data area.
META = Table("catalog_meta", METADATA, Column("key", String(64), primary_key=True), _req("value", Text))

DATASETS = Table(
    "datasets",
    METADATA,
    _id(),
    _req("name", String(128), unique=True),
    _req("description", Text, default=""),
    _req("created_at", DateTime),
    _req("version", Integer),
    _req("schema_version", Integer),
    # Totals over live shards, kept by every commit so list/show never scan shards.
    _req("records", BigInteger, default=0),
    _req("bytes", BigInteger, default=0),
    _req("shard_count", Integer, default=0),
    # Format 5. How new shards are stored: none, gzip or zlib (register --compression).
    _req("compression", String(8), server_default="none"),
    # Format 6. Set while a dataset registered for its inputs (adopt, register --infer) awaits
    # its first commit: the registering process (process_identity). Once that process is dead
    # the dataset is no dataset: lookups and lists skip it, register takes its name, gc drops it.
    _opt("pending", String(160)),
)

SCHEMA_VERSIONS = Table(
    "schema_versions",
    METADATA,
    _id(),
    _dataset_id(),
    _req("version", Integer),
    _req("schema_json", Text),
    _req("fingerprint", String(64)),
    _req("created_at", DateTime),
    _req("commit_version", Integer),  # the dataset version whose commit made it
    UniqueConstraint("dataset_id", "version"),
)

COMMITS = Table(
    "commits",
    METADATA,
    _id(),
    _dataset_id(),
    _req("version", Integer),
    _req("kind", String(16)),
    _req("schema_version", Integer),
    _req("created_at", DateTime),
    _req("message", Text, default=""),
    _req("author", String(256), default=""),
    _req("read_version", Integer),
    _opt("token", String(256)),
    _req("records_added", BigInteger, default=0),
    _req("shards_added", Integer, default=0),
    # Dataset totals right after this commit: time travel shows them without a scan.
    _req("records", BigInteger, default=0),
    _req("bytes", BigInteger, default=0),
    _req("shard_count", Integer, default=0),
    # The write intent this commit consumed: a writer interrupted after its COMMIT returned
    # learns here that it committed, and which version (format 3).
    _opt("intent", String(64)),
    UniqueConstraint("dataset_id", "version"),
    UniqueConstraint("dataset_id", "token"),
)

SHARDS = Table(
    "shards",
    METADATA,
    _id(),
    _dataset_id(),
    _req("path", String(1024), unique=True),  # relative to the data area
    _req("records", BigInteger),
    _req("bytes", BigInteger),
    _req("checksum", String(64)),  # "crc32c:" + 8 hex digits
    _req("compression", String(8)),
    _req("schema_version", Integer),
    _req("added_version", Integer),
    _opt("removed_version", Integer),  # tombstone: retired here
    _req("seq", BigInteger, default=0),  # read order (see SEQ_BITS)
    # Set by gc (before it deletes the file) on retired shards: versions needing it are gone.
    _opt("collected_at", DateTime),
    # Format 4. The split the shard belongs to (a dataset's splits share its schema).
    _req("split", String(64), server_default=DEFAULT_SPLIT),
    # "crc32c:" + 8 hex digits of the shard's record index (storage.index, in the data area's index tree);
    # NULL until it has one (shards registered before format 4: `catalog index`).
    _opt("index_checksum", String(64)),
    # Format 5. Where the shard came from: the input's absolute path or URL, "rows" (Python),
    # or "<kind> of version N" for a rewrite; NULL for shards registered before format 5.
    _opt("source", Text),
    # Format 6. An adopted shard's own place, outside the data area (`catalog adopt`): an absolute
    # path or URL the catalog reads and never writes or deletes; NULL for a shard in the data area,
    # which is at ``path``. An adopted shard still has a ``path`` (never a file there): its name in
    # the dataset, and where its record index lives in the index tree.
    _opt("location", Text),
    # Format 8. What the content check (storage.content) compares a shared file with: "owned" (a
    # file the catalog wrote), "stat:..." or "etag:..." (an adopted or linked file as registered),
    # "unchecked" (checksummed once per process); NULL for shards registered before format 8.
    _opt("fingerprint", String(160)),
    Index("ix_shards_live_seq", "dataset_id", "removed_version", "seq"),
    Index("ix_shards_added", "dataset_id", "added_version"),
    # Format 4. Totals per split (`show`, `list --json`) from the index alone: 100k live
    # shards summed in 11 ms instead of 90 ms (SQLite), never reading the table's rows.
    Index("ix_shards_split_totals", "dataset_id", "removed_version", "split", "records", "bytes"),
    # Format 5. An append's duplicate check finds a shard by its bytes' checksum, not by a scan.
    Index("ix_shards_checksum", "dataset_id", "checksum"),
)

# Format 7. A shard's feature statistics (catalog.stats: counts, moments and sketches, as
# compressed JSON), written in the commit that registers it, or later by `catalog stats
# --compute` for a shard that has none. Kept apart from ``shards`` so that listing shards
# never loads them; keyed by the shard's path, unique like the shard.
SHARD_STATS = Table(
    "shard_stats",
    METADATA,
    Column("path", String(1024), primary_key=True),
    _dataset_id(),
    _req("data", LargeBinary),
    Index("ix_shard_stats_dataset", "dataset_id"),
)

# One applied migration (Flyway's schema history): a file's sha256, or a quick one's operations.
APPLIED_MIGRATIONS = Table(
    "applied_migrations",
    METADATA,
    _id(),
    _dataset_id(),
    # file stem "0001_add_height", or a quick migration's "0002_quick" (same sequence); before
    # quick ones were numbered with the files, "quick-<schema v>" (still read, takes no number)
    _req("migration_id", String(256)),
    _req("checksum", String(80)),  # "sha256:" + hex of the script (quick: of its operations)
    _opt("operations", Text),  # quick migrations: the operations as JSON
    _req("from_schema_version", Integer),
    _req("to_schema_version", Integer),
    _req("applied_version", Integer),  # the dataset version its commit made
    _opt("reverted_version", Integer),  # a restore to before it
    _req("rows", BigInteger),
    _req("seconds", Float),
    _req("applied_at", DateTime),
    _req("author", String(256), default=""),
    UniqueConstraint("dataset_id", "migration_id", "applied_version"),
)

# A name for one version of a dataset (format 4): readers pin it, gc keeps what it needs.
TAGS = Table(
    "tags",
    METADATA,
    _id(),
    _dataset_id(),
    _req("name", String(128)),
    _req("version", Integer),
    _req("created_at", DateTime),
    _req("author", String(256), default=""),
    UniqueConstraint("dataset_id", "name"),
)

# A writer at work: gc leaves files under a live intent alone, whatever their age.
INTENTS = Table(
    "write_intents",
    METADATA,
    Column("id", String(64), primary_key=True),  # also the prefix of its files
    _req("dataset", String(128)),
    _req("created_at", DateTime),
    _req("heartbeat_at", DateTime),
    _req("pid", Integer),
    _req("host", String(256)),
    # The writer process as this machine knows it (see process_identity): gc on the same
    # machine sees at once that it died, where others wait for the heartbeat (format 3).
    _opt("process", String(160)),
)


# --------------------------------------------------------------------------- engine


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


def normalize_url(url: str) -> str:
    """``postgresql://`` means psycopg 3 here (SQLAlchemy alone would pick psycopg2)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


# libpq (and so psycopg) also takes the password as a query parameter: ...?password=...
PASSWORD_QUERY_KEY = "password"


def safe_url(url: str) -> str:
    """``url`` without its password (``user:pw@`` or ``?password=``): the form that may be
    recorded or printed."""
    try:
        bare = make_url(url)._replace(password=None).difference_update_query([PASSWORD_QUERY_KEY])
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        return "<unparsable database URL>"
    return bare.render_as_string(hide_password=False)


def _passwords(url: str) -> list[str]:
    """Every password ``url`` carries, in its user part or its query."""
    try:
        u = make_url(normalize_url(url))
    except (ArgumentError, ValueError):
        return []
    query = u.query.get(PASSWORD_QUERY_KEY, ())
    return [p for p in [u.password, *([query] if isinstance(query, str) else query)] if p]


def has_password(url: str) -> bool:
    return bool(_passwords(url))


def redact(text: str) -> str:
    """``text`` with any password this process was given (in $CATALOG_DB_URL or $PGPASSWORD)
    masked: a last line of defence for messages that quote a driver's words."""
    secrets = [os.environ.get("PGPASSWORD"), *_passwords(os.environ.get("CATALOG_DB_URL") or "sqlite://")]
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def make_engine(url: str) -> Engine:
    url = normalize_url(url)
    _check_port(url)
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


def _check_port(url: str) -> None:
    """SQLAlchemy parses a URL's port with a bare int(): a ValueError that would name no URL."""
    try:
        make_url(url)
    except ArgumentError:  # create_engine says so in its own words
        pass
    except ValueError:
        netloc = url.partition("://")[2].split("/")[0].split("?")[0]
        port = netloc.rpartition("@")[2].rpartition(":")[2]  # never the user:password part
        raise ManifestError(f"bad database URL: its port {port!r} is not a number") from None


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


def _database_error(e: Exception, where: str | None = None) -> ManifestError:
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
        if isinstance(e, IntegrityError) or _is_lock_error(e):
            raise
        raise _database_error(e, getattr(e, "manifest", None) or _where(engine)) from e
    except (ValueError, engine.dialect.loaded_dbapi.Error) as e:  # a raw cursor's error (fetch_column), a value
        raise _database_error(e, _where(engine)) from e


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


# PostgreSQL's transient failures, worth a retry like SQLite's "locked": serialization
# failure, deadlock detected, lock not available.
_RETRY_SQLSTATES = {"40001", "40P01", "55P03"}


def _is_lock_error(e: DBAPIError) -> bool:
    if getattr(e.orig, "sqlstate", None) in _RETRY_SQLSTATES:
        return True
    text = str(e.orig).lower() if e.orig is not None else str(e).lower()
    return "locked" in text or "busy" in text


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
            if not _is_lock_error(e) or attempt == LOCK_RETRIES - 1:
                raise _database_error(e) from e
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
    raise AssertionError("unreachable")  # pragma: no cover


MOVED_TO = "moved_to"  # catalog_meta key: a manifest switched away from by copy-manifest


@contextmanager
def write_txn(engine: Engine, durable: bool = True, moved_ok: bool = False) -> Iterator[Connection]:
    """A write transaction. On SQLite it holds the database's write lock from its first
    statement, taken in turn (see _write_queue); on PostgreSQL (READ COMMITTED) commits take
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
        _write_queue(engine),
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


# --------------------------------------------------------------------------- SQLite's writers' queue

# SQLite's busy handler makes a waiting writer sleep and retry on a growing interval, so
# under load a writer that has just committed takes the lock again before waiters wake:
# 8 appenders saw p99 551 ms, max 1.96 s. Writers therefore queue first, in ticket order,
# on OFD byte-range locks of a file beside the database (Linux; elsewhere the busy handler
# alone, as before). The queue only orders writers: SQLite's lock still excludes them, so
# a writer that bypasses the queue (an older version, another OS, a nested transaction)
# costs fairness, never correctness. The kernel frees a dead process's locks.
WRITE_QUEUE = hasattr(fcntl, "F_OFD_SETLKW")
QUEUE_SUFFIX = ".lock"
_TICKET = struct.Struct("<Q")  # the next ticket, at offset 0, guarded by a lock on that range
_SLOTS_AT = 1 << 20  # ticket t's slot is the byte at _SLOTS_AT + t % _SLOTS
_SLOTS = 1 << 40
_queued = threading.local()  # this thread is in the queue: it never waits in one again (nesting)
_queue_fds: set[int] = set()  # open in this process; a forked child closes its copies, which would hold the slots


@contextmanager
def _write_queue(engine: Engine) -> Iterator[None]:
    """Wait for this process's turn to write to ``engine``'s SQLite file: take a ticket
    (lock my slot, bump the counter, under the counter's lock), then wait until the ticket
    before mine has let go of its slot. Mine is let go when the transaction ends."""
    path = engine.url.database if engine.dialect.name == "sqlite" else None
    if not WRITE_QUEUE or not path or path == ":memory:" or getattr(_queued, "active", False):
        yield
        return
    _finish_interrupted_leave(path + QUEUE_SUFFIX)
    fd = _queue_turn(path + QUEUE_SUFFIX)
    _queued.active, _queued.fd = True, fd
    try:
        yield
    finally:
        _queued.active = False
        if fd is not None:
            _leave_queue(fd)  # the next ticket's holder goes
        _queued.fd = None


def _finish_interrupted_leave(lock_path: str) -> None:
    """Close the queue descriptor a Ctrl-C kept this thread from closing: it holds a slot the
    next writer waits on (the writer's own cleanup among them). Only if it still is that
    open lock file, never a descriptor number reused since."""
    fd = getattr(_queued, "fd", None)
    _queued.fd = None
    if fd is None or fd not in _queue_fds:
        return
    with contextlib.suppress(OSError):
        here, there = os.fstat(fd), os.stat(lock_path)
        if (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino):
            _leave_queue(fd)


def _queue_turn(lock_path: str) -> int | None:
    """A descriptor holding my slot once my turn has come; None when no queue can be had
    (a read-only directory, a file system without these locks): SQLite's busy handler then."""
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return None
    _queue_fds.add(fd)
    try:
        _lock(fd, 0, _TICKET.size, wait=True)
        raw = os.pread(fd, _TICKET.size, 0)
        ticket = _TICKET.unpack(raw)[0] if len(raw) == _TICKET.size else 0
        _lock(fd, _SLOTS_AT + ticket % _SLOTS, 1, wait=False)
        os.pwrite(fd, _TICKET.pack(ticket + 1), 0)
        _lock(fd, 0, _TICKET.size, unlock=True)
        # The previous ticket's slot was locked before the counter passed it: once I get
        # it, that writer is done (or dead). I let it go at once; nobody else waits on it.
        before = _SLOTS_AT + (ticket - 1) % _SLOTS
        _lock(fd, before, 1, wait=True)
        _lock(fd, before, 1, unlock=True)
    except OSError:  # no such locks here, or a slot taken by a ticket reused: no queue
        _leave_queue(fd)
        return None
    except BaseException:  # Ctrl-C while waiting: leave the queue (the next in line goes on)
        _leave_queue(fd)
        raise
    return fd


def _leave_queue(fd: int) -> None:
    os.close(fd)  # the last descriptor of its open file: its locks go, my slot with them
    _queue_fds.discard(fd)  # after: an interrupted close is finished by _finish_interrupted_leave


def _forget_queue_in_child() -> None:
    for fd in list(_queue_fds):
        with contextlib.suppress(OSError):
            os.close(fd)
    _queue_fds.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_queue_in_child)


# struct flock: l_type, l_whence, l_start, l_len, l_pid (which must be 0 for OFD locks).
_FLOCK = struct.Struct("hhqqi4x")


def _lock(fd: int, start: int, length: int, wait: bool = False, unlock: bool = False) -> None:
    kind = fcntl.F_UNLCK if unlock else fcntl.F_WRLCK
    cmd = fcntl.F_OFD_SETLKW if wait else fcntl.F_OFD_SETLK
    fcntl.fcntl(fd, cmd, _FLOCK.pack(kind, os.SEEK_SET, start, length, 0))


def check_not_moved(conn: Connection) -> None:
    """Refuse a manifest that copy-manifest switched away from: a write there would be lost to
    the copy, and a gc there would take files only the copy names. (copy_manifest holds
    catalog_meta exclusively while it copies, so this read waits for it and then sees the mark.)"""
    moved = conn.execute(select(META.c.value).where(META.c.key == MOVED_TO)).scalar_one_or_none()
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


# --------------------------------------------------------------------------- format


def create_manifest(engine: Engine, data_root: str, catalog_id: str | None = None) -> None:
    """The tables and the meta rows, in one transaction where DDL is transactional
    (PostgreSQL): two machines running `init` at once leave one manifest, not half of two."""
    with write_txn(engine, moved_ok=True) as conn:  # no catalog_meta to look in yet
        METADATA.create_all(conn)
        conn.execute(
            insert(META),
            [
                {"key": "format_version", "value": str(FORMAT_VERSION)},
                {"key": "data_root", "value": data_root},
                {"key": "created_at", "value": utcnow().isoformat()},
                *([{"key": "catalog_id", "value": catalog_id}] if catalog_id else []),
            ],
        )


def ensure_catalog_id(engine: Engine, catalog_id: str) -> str:
    """The manifest's catalog id; a manifest made before ids existed gets ``catalog_id``.
    Two processes doing this at once agree on one (the key is the primary key)."""

    def txn() -> str:
        with write_txn(engine) as conn:
            found = conn.execute(select(META.c.value).where(META.c.key == "catalog_id")).scalar_one_or_none()
            if found is not None:
                return str(found)
            conn.execute(insert(META).values(key="catalog_id", value=catalog_id))
            return catalog_id

    return with_lock_retry(txn)


def has_manifest(engine: Engine) -> bool:
    check_connection(engine)
    with manifest_errors(engine):
        return inspect(engine).has_table(META.name)


def read_meta(engine: Engine) -> dict[str, str]:
    if not has_manifest(engine):
        raise ManifestError(f"{_where(engine)}: not a catalog manifest (no {META.name} table)")
    with read_txn(engine) as conn:
        rows = conn.execute(select(META.c.key, META.c.value)).all()
    return {k: v for k, v in rows}


def check_format(meta: dict[str, str]) -> int:
    """Refuse manifests this code cannot read; tell the user when `catalog upgrade` is due."""
    try:
        found = int(meta["format_version"])
    except (KeyError, ValueError) as e:
        raise ManifestError("not a catalog manifest (no format version)") from e
    if found > FORMAT_VERSION:
        raise ManifestError(
            f"the manifest has format {found}, newer than this catalog understands ({FORMAT_VERSION}): "
            "upgrade the tfrecord-catalog package"
        )
    if found < FORMAT_VERSION:
        raise ManifestError(f"the manifest has format {found}, older than {FORMAT_VERSION}: run `catalog upgrade`")
    return found


def _upgrade_1_to_2(conn: Connection) -> None:
    """Format 2: shards get a read order (seq) and a collected mark; migrations get a table."""
    conn.exec_driver_sql("ALTER TABLE shards ADD COLUMN seq BIGINT NOT NULL DEFAULT 0")
    conn.exec_driver_sql("ALTER TABLE shards ADD COLUMN collected_at DATETIME")
    # The order format 1 read in (by id), expressed as format 2's seq.
    conn.exec_driver_sql(
        f"UPDATE shards SET seq = added_version * {1 << SEQ_BITS} + id - "
        "(SELECT MIN(s2.id) FROM shards s2 WHERE s2.dataset_id = shards.dataset_id "
        "AND s2.added_version = shards.added_version)"
    )
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_shards_live")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_shards_live_seq ON shards (dataset_id, removed_version, seq)")


def _upgrade_2_to_3(conn: Connection) -> None:
    """Format 3: a commit names the intent it consumed; an intent names its writer process."""
    conn.exec_driver_sql("ALTER TABLE commits ADD COLUMN intent VARCHAR(64)")
    conn.exec_driver_sql("ALTER TABLE write_intents ADD COLUMN process VARCHAR(160)")


def _upgrade_3_to_4(conn: Connection) -> None:
    """Format 4: shards get a split (every existing one: train) and a record index; tags
    (a new table, made by create_all) name versions."""
    conn.exec_driver_sql(f"ALTER TABLE shards ADD COLUMN split VARCHAR(64) DEFAULT '{DEFAULT_SPLIT}' NOT NULL")
    conn.exec_driver_sql("ALTER TABLE shards ADD COLUMN index_checksum VARCHAR(64)")
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_shards_split_totals "
        "ON shards (dataset_id, removed_version, split, records, bytes)"
    )


def _upgrade_4_to_5(conn: Connection) -> None:
    """Format 5: a dataset's compression (every existing one: none) and each shard's source
    (unknown, NULL, for the shards registered before)."""
    conn.exec_driver_sql("ALTER TABLE datasets ADD COLUMN compression VARCHAR(8) DEFAULT 'none' NOT NULL")
    conn.exec_driver_sql("ALTER TABLE shards ADD COLUMN source TEXT")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_shards_checksum ON shards (dataset_id, checksum)")


def _upgrade_5_to_6(conn: Connection) -> None:
    """Format 6: shards adopted in place have a location of their own (none before); a dataset
    registered for its inputs is pending until its first commit (none is, before)."""
    conn.exec_driver_sql("ALTER TABLE shards ADD COLUMN location TEXT")
    conn.exec_driver_sql("ALTER TABLE datasets ADD COLUMN pending VARCHAR(160)")


def _upgrade_6_to_7(conn: Connection) -> None:
    """Format 7: shards' statistics, in their own table (create_all made it): none is
    computed for the shards registered before (`catalog stats NAME --compute`)."""


def _upgrade_7_to_8(conn: Connection) -> None:
    """Format 8: shards get the fingerprint of their file (NULL for those registered before:
    the content check then checksums an adopted or linked file once per process)."""
    conn.exec_driver_sql("ALTER TABLE shards ADD COLUMN fingerprint VARCHAR(160)")


# Upgrade steps: UPGRADES[n] brings a manifest from format n to n + 1 inside one transaction.
UPGRADES: dict[int, Callable[[Connection], None]] = {
    1: _upgrade_1_to_2,
    2: _upgrade_2_to_3,
    3: _upgrade_3_to_4,
    4: _upgrade_4_to_5,
    5: _upgrade_5_to_6,
    6: _upgrade_6_to_7,
    7: _upgrade_7_to_8,
}


def upgrade(engine: Engine) -> tuple[int, int]:
    """Bring the manifest to FORMAT_VERSION; returns (from, to)."""
    meta = read_meta(engine)
    start = int(meta.get("format_version", "0"))
    if start > FORMAT_VERSION:
        check_format(meta)
    METADATA.create_all(engine)  # tables new in this format appear empty
    current = start
    while current < FORMAT_VERSION:
        step = UPGRADES.get(current)
        if step is None:
            raise CatalogError(f"no upgrade path from manifest format {current}")
        with manifest_errors(engine), write_txn(engine) as conn:
            step(conn)
            conn.execute(update(META).where(META.c.key == "format_version").values(value=str(current + 1)))
        current += 1
    return start, current


def host_and_pid() -> tuple[str, int]:
    return os.uname().nodename, os.getpid()


@functools.cache
def _machine() -> str | None:
    """What makes a pid mean one process: this boot of this kernel and this pid namespace.
    A host name alone does not (containers share one; a reboot reuses pids). None off Linux."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return None


def _start_ticks(pid: int) -> str | None:
    """The start time (clock ticks since boot) of a running process; None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the name, in parentheses, may hold spaces
    return None if fields[0] in ("Z", "X") else fields[19]


def process_identity() -> str | None:
    """This process as this machine knows it: "<boot id>/<pid namespace>/<pid>/<start ticks>"."""
    machine = _machine()
    start = _start_ticks(os.getpid())
    return None if machine is None or start is None else f"{machine}/{os.getpid()}/{start}"


def process_is_dead(process: str | None) -> bool:
    """True only when ``process`` names a process of this machine that no longer runs (a pid
    now used by a later process counts as dead). False when it runs, or when this machine
    cannot tell (another machine, no /proc, a pid hidden from us): the heartbeat decides then."""
    parts = (process or "").split("/")
    if len(parts) != 4 or "/".join(parts[:2]) != _machine() or not parts[2].isdigit():
        return False
    pid, start = int(parts[2]), parts[3]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: it exists
        pass
    except OSError:
        return False
    found = _start_ticks(pid)
    if found is None:  # a zombie, or /proc hides it (hidepid): dead only if we can see it is a zombie
        return os.path.exists(f"/proc/{pid}/stat")
    return found != start


def abandoned(pending: str | None) -> bool:
    """Whether a dataset registered for inputs (datasets.pending) lost its registering process
    before their commit: then it is no dataset."""
    return pending is not None and process_is_dead(pending)


def intent_values(intent_id: str, dataset: str) -> dict[str, Any]:
    """A new write intent's row: created and beaten now, by this process on this host."""
    now = utcnow()
    host, pid = host_and_pid()
    return {
        "id": intent_id, "dataset": dataset, "created_at": now, "heartbeat_at": now, "pid": pid, "host": host,
        "process": process_identity(),
    }  # fmt: skip


def beat_intent(engine: Engine, intent_id: str) -> None:
    """Tell gc the writer behind ``intent_id`` is alive."""
    now = utcnow()

    def txn() -> None:
        with write_txn(engine, durable=False) as conn:
            conn.execute(update(INTENTS).where(INTENTS.c.id == intent_id).values(heartbeat_at=now))

    with_lock_retry(txn)


def release_intent(engine: Engine, intent_id: str) -> bool | None:
    """Delete the row of an intent whose writer will not commit, before its files go.

    True: the row was there, so nothing was committed under it (a commit deletes it in its own
    transaction) and the files are the writer's to remove. False: the row was gone, consumed
    by a commit (maybe one whose return a Ctrl-C cut short) or revoked by gc: the files are
    not the writer's to touch. None: the manifest could not be reached; gc decides later.
    """

    def txn() -> bool:
        with write_txn(engine, durable=False, moved_ok=True) as conn:
            return bool(conn.execute(delete(INTENTS).where(INTENTS.c.id == intent_id)).rowcount == 1)

    try:
        return with_lock_retry(txn)
    except (CatalogError, DBAPIError):
        return None


def committed_under(engine: Engine, intent_id: str) -> int | None:
    """The version committed under ``intent_id``, or None: none was, and none can be now
    (a commit needs the intent's row). Raises CatalogError when the manifest cannot say."""
    try:
        with read_txn(engine) as conn:
            found = conn.execute(select(COMMITS.c.version).where(COMMITS.c.intent == intent_id)).first()
    except DBAPIError as e:
        raise ManifestError(f"manifest database error: {e}") from e
    return None if found is None else int(found[0])


def settle_intent(engine: Engine, intent_id: str) -> tuple[bool, int | None]:
    """After a writer's error or Ctrl-C: (may it remove its files, the version it committed).
    Its files are its own to remove when nothing was committed under its intent; when the
    manifest cannot be reached, they stay for gc."""
    released = release_intent(engine, intent_id)
    if released:
        return True, None
    if released is None:
        return False, None
    try:
        version = committed_under(engine, intent_id)
    except CatalogError:
        return False, None
    return version is None, version


def fetch_rows(conn: Connection, query: Any) -> list[Any]:
    """Every row as the driver's tuple, straight from its cursor. SQLAlchemy builds a Row
    object per row: for a million shard paths that was 1 s of a 1.5 s ``files()``."""
    result = conn.execute(query)
    try:
        return list(result.cursor.fetchall())
    finally:
        result.close()


def fetch_column(conn: Connection, query: Any) -> list[Any]:
    """The first column of every row (see fetch_rows)."""
    return [row[0] for row in fetch_rows(conn, query)]


def update_shards(conn: Connection, ids: Sequence[int], **values: Any) -> None:
    """``UPDATE shards SET values WHERE id IN ids``, in chunks of ID_CHUNK ids."""
    for i in range(0, len(ids), ID_CHUNK):
        conn.execute(update(SHARDS).where(SHARDS.c.id.in_(ids[i : i + ID_CHUNK])).values(**values))


# --------------------------------------------------------------------------- copying

COPY_CHUNK = 10_000


def copy_manifest(
    source: Engine, target: Engine, data_root: str | None = None, *, move: bool = False
) -> dict[str, int]:
    """Copy every row of the manifest behind ``source`` into the empty database behind
    ``target`` (ids included, so shard ids and versions stay what they were). Writers to the
    source wait until the copy is done; the target sees all of it or nothing. ``data_root``
    replaces the recorded data area (a relative one means nothing to another machine).
    Write intents are not copied: their writers commit to the source, never to the copy.
    With ``move``, the source is marked moved in the same transaction: a writer still at
    work on it then fails at its commit instead of committing where nobody will look.
    Returns the rows copied per table."""
    if has_manifest(target):
        raise ManifestError(f"{_where(target)} already holds a manifest; copy into an empty database")
    counts: dict[str, int] = {}
    with manifest_errors(source), write_txn(source) as src:  # a damaged source (or target): one line
        _hold_writers(src, move)
        check_format({k: v for k, v in src.execute(select(META.c.key, META.c.value)).all()})
        with write_txn(target, moved_ok=True) as dst:  # empty: no catalog_meta yet
            METADATA.create_all(dst)
            for table in METADATA.sorted_tables:  # parents before children (foreign keys)
                if table is not INTENTS:
                    counts[table.name] = _copy_table(src, dst, table)
            if data_root is not None:
                dst.execute(update(META).where(META.c.key == "data_root").values(value=data_root))
            _reset_sequences(dst)
        if move:
            src.execute(insert(META), [{"key": MOVED_TO, "value": _where(target)}])
    return counts


def _hold_writers(conn: Connection, move: bool) -> None:
    """Keep writers out of the source while it is copied (readers carry on). SQLite's
    ``BEGIN IMMEDIATE`` already did; PostgreSQL needs the tables locked, and for a move
    catalog_meta against reads too, first: a writer's check_not_moved then waits for the
    copy's commit and sees the mark."""
    if conn.dialect.name != "postgresql":
        return
    tables = [t.name for t in METADATA.sorted_tables if t is not META or not move]
    if move:
        conn.exec_driver_sql(f"LOCK TABLE {META.name} IN ACCESS EXCLUSIVE MODE")
    conn.exec_driver_sql(f"LOCK TABLE {', '.join(tables)} IN EXCLUSIVE MODE")


def _copy_table(src: Connection, dst: Connection, table: Any) -> int:
    n = 0
    # On the statement, not the connection: Connection.execution_options changes the
    # connection itself, and later statements (the move's INSERT) would become cursors.
    query = select(table).order_by(*table.primary_key.columns).execution_options(yield_per=COPY_CHUNK)
    result = src.execute(query)
    for rows in result.partitions():
        dst.execute(insert(table), [r._asdict() for r in rows])
        n += len(rows)
    return n


def _reset_sequences(conn: Connection) -> None:
    """Rows copied with their ids leave PostgreSQL's id sequences behind: move them past the ids."""
    if conn.dialect.name != "postgresql":
        return
    for table in METADATA.sorted_tables:
        pk = list(table.primary_key.columns)
        if len(pk) == 1 and isinstance(pk[0].type, Integer):
            conn.exec_driver_sql(
                f"SELECT setval(pg_get_serial_sequence('{table.name}', '{pk[0].name}'), "
                f"COALESCE((SELECT MAX({pk[0].name}) FROM {table.name}), 0) + 1, false)"
            )
