"""Write intents: what a writer (an append, a migration, a compaction, a restore) records
before it writes any file, keeps alive while it works, and gives up or consumes at the end.

gc leaves files named after a live intent alone, whatever their age, and revokes a dead
intent (no heartbeat for INTENT_STALE, or a writer process of this machine that is gone)
before it deletes that intent's files. A commit consumes its intent in its own transaction,
so "the intent row is still there" proves nothing was committed under it.

All of the intents' SQL is here, the manifest holding only their table (``INTENTS``) and the
process identity a row records: an intent is part of the commit protocol (``protocol`` consumes
it in the commit's transaction; a commit row names it; HEARTBEAT_EVERY and INTENT_STALE are
commit values), it names files (``storage``, which the manifest, beside it, may not import),
and its other reader, gc (``maintenance``), sits above the commit layer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import Engine, bindparam, delete, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from catalog import faults
from catalog import manifest as mf
from catalog.commit.handles import DatasetHandle
from catalog.commit.values import HEARTBEAT_EVERY, INTENT_STALE
from catalog.errors import CatalogError, Interrupted, ManifestError
from catalog.manifest import COMMITS, INTENTS, utcnow
from catalog.storage import Store, index_owner, intent_of, new_intent_id

INSERT_INTENT = insert(INTENTS)
DELETE_INTENT = delete(INTENTS).where(INTENTS.c.id == bindparam("iid"))


class Intent:
    """One writer's intent and its heartbeat. ``open`` records it (in the caller's
    transaction, or in one of its own with ``register``); ``beat`` keeps it alive, cheaply
    (one clock read) when the last beat is recent; ``settle`` ends it after a failure."""

    def __init__(self, engine: Engine, store: Store, dataset: str) -> None:
        self.engine = engine
        self.store = store
        self.dataset = dataset
        self.id = new_intent_id()
        self._next_beat = 0.0

    @classmethod
    def of(cls, ds: DatasetHandle) -> Intent:
        return cls(ds.catalog.engine, ds.catalog.store, ds.name)

    def __enter__(self) -> Intent:
        """A rewrite's intent: recorded, and the dataset's folder ready for its files. What
        stops it once the intent may be recorded (a Ctrl-C just after its transaction, a
        folder that cannot be made) settles it here: ``__exit__`` runs only after this returns."""
        try:
            self.register()
            self.store.prepare(self.dataset)
        except BaseException as e:
            self.settle(e, self.discard_files)
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if exc is not None:  # else the commit consumed the intent in its own transaction
            self.settle(exc, self.discard_files)

    def open(self, conn: Connection) -> None:
        conn.execute(INSERT_INTENT, intent_values(self.id, self.dataset))
        self._next_beat = time.monotonic() + HEARTBEAT_EVERY.total_seconds()

    def register(self) -> None:
        """Record the intent in a transaction of its own."""

        def txn() -> None:
            # Not synced: an intent matters only while its process lives.
            with mf.write_txn(self.engine, durable=False) as conn:
                self.open(conn)

        mf.with_lock_retry(txn)
        faults.point("intent.recorded", intent=self.id)

    def beat(self) -> None:
        """Tell gc this writer is alive."""
        if time.monotonic() < self._next_beat:
            return
        self._next_beat = time.monotonic() + HEARTBEAT_EVERY.total_seconds()
        beat_intent(self.engine, self.id)

    def prefix(self, unit: int) -> str:
        """File-name prefix of one unit of work (the intent id leads: gc reads it back)."""
        return f"{self.id}-{unit:05d}"

    def discard_files(self, keep: Iterable[str] = ()) -> None:
        """Remove the data area's files named after this intent (but the shards ``keep``): shards
        and their record indexes."""
        kept = set(keep)
        for f in [*self.store.listing({self.dataset}), *self.store.index_listing({self.dataset})]:
            if intent_of(f.name) == self.id and f.rel not in kept and index_owner(f.rel) not in kept:
                self.store.remove(f.rel)

    def settle(self, error: BaseException | None, remove_files: Callable[[], object]) -> int | None:
        """After ``error`` (or a duplicate): remove this writer's files unless they were
        committed; returns the version they were committed in, if they were.

        Whether they were is the manifest's to say, never this process's memory of it: a
        Ctrl-C that lands after the COMMIT but before the commit call returns looks like a
        failure here, and the files then belong to a committed version. A Ctrl-C becomes
        Interrupted, which says how the write ended."""
        mine, committed = settle_intent(self.engine, self.id)
        if mine:
            remove_files()
        if isinstance(error, KeyboardInterrupt) and not isinstance(error, Interrupted):
            raise Interrupted(committed) from error
        return committed


def intent_values(intent_id: str, dataset: str) -> dict[str, Any]:
    """A new write intent's row: created and beaten now, by this process on this host."""
    now = utcnow()
    host, pid = mf.host_and_pid()
    return {
        "id": intent_id, "dataset": dataset, "created_at": now, "heartbeat_at": now, "pid": pid, "host": host,
        "process": mf.process_identity(),
    }  # fmt: skip


def beat_intent(engine: Engine, intent_id: str) -> None:
    """Tell gc the writer behind ``intent_id`` is alive."""
    now = utcnow()

    def txn() -> None:
        with mf.write_txn(engine, durable=False) as conn:
            conn.execute(update(INTENTS).where(INTENTS.c.id == intent_id).values(heartbeat_at=now))

    mf.with_lock_retry(txn)


def release_intent(engine: Engine, intent_id: str) -> bool | None:
    """Delete the row of an intent whose writer will not commit, before its files go.

    True: the row was there, so nothing was committed under it (a commit deletes it in its own
    transaction) and the files are the writer's to remove. False: the row was gone, consumed
    by a commit (maybe one whose return a Ctrl-C cut short) or revoked by gc: the files are
    not the writer's to touch. None: the manifest could not be reached; gc decides later.
    """

    def txn() -> bool:
        with mf.write_txn(engine, durable=False, moved_ok=True) as conn:
            return bool(conn.execute(delete(INTENTS).where(INTENTS.c.id == intent_id)).rowcount == 1)

    try:
        return mf.with_lock_retry(txn)
    except (CatalogError, DBAPIError):
        return None


def committed_under(engine: Engine, intent_id: str) -> int | None:
    """The version committed under ``intent_id``, or None: none was, and none can be now
    (a commit needs the intent's row). Raises CatalogError when the manifest cannot say."""
    try:
        with mf.read_txn(engine) as conn:
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


def live_intents(conn: Connection) -> set[str]:
    return intent_states(conn)[0]


def intent_states(conn: Connection) -> tuple[set[str], list[str]]:
    """(live, dead) intents, from one read of the table (see intents_dead)."""
    live: set[str] = set()
    dead: list[str] = []
    for intent_id, is_dead in _judged(conn, None, lock=False):
        (dead.append if is_dead else live.add)(intent_id)
    return live, dead


def intents_dead(conn: Connection, among: Sequence[str] | None = None, lock: bool = False) -> list[str]:
    """Intents whose writer is gone (of ``among`` only, if given): no heartbeat for
    INTENT_STALE, or, at once, a writer process of this machine that no longer runs.
    ``lock``: FOR UPDATE, for revoking them."""
    return [intent_id for intent_id, is_dead in _judged(conn, among, lock) if is_dead]


def _judged(conn: Connection, among: Sequence[str] | None, lock: bool) -> list[tuple[str, bool]]:
    query = select(INTENTS.c.id, INTENTS.c.heartbeat_at, INTENTS.c.process)
    if among is not None:
        query = query.where(INTENTS.c.id.in_(among))
    cutoff = utcnow() - INTENT_STALE
    rows = conn.execute(query.with_for_update() if lock else query).all()
    return [(r.id, r.heartbeat_at < cutoff or mf.process_is_dead(r.process)) for r in rows]


def revoke(conn: Connection, dead: Sequence[str]) -> set[str]:
    """Delete the rows of the intents in ``dead`` that are still dead now (gc, before it deletes
    their files); returns their ids. FOR UPDATE: a heartbeat or commit racing this waits, or we
    wait for it and then see its intent alive or gone (PostgreSQL; SQLite holds the write lock)."""
    gone = set(intents_dead(conn, dead, lock=True))
    if gone:
        conn.execute(delete(INTENTS).where(INTENTS.c.id.in_(gone)))
    return gone
