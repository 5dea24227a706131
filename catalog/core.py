"""The catalog: datasets, their versions, and all-or-nothing appends.

Rules (see DESIGN.md): shards are immutable; the manifest commit is the only moment
data becomes visible; a commit is a compare-and-swap on the dataset's version, so
appends racing appends simply retry, while an append racing a schema change fails.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import getpass
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
from sqlalchemy import Engine, and_, bindparam, delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError, IntegrityError

from catalog import manifest as mf
from catalog.errors import (
    AppendError,
    CatalogError,
    CatalogNotFoundError,
    CommitConflictError,
    DatasetExistsError,
    DatasetNotFoundError,
    Interrupted,
    InvalidNameError,
    ManifestError,
    ValidationError,
    VersionNotFoundError,
)
from catalog.manifest import AppliedMigrationRow, CommitRow, DatasetRow, IntentRow, SchemaVersionRow, ShardRow, utcnow
from catalog.schema import Schema
from catalog.storage import (
    ShardFile,
    ShardSink,
    Store,
    clear_dead_partials,
    new_catalog_id,
    new_intent_id,
    open_shard,
    partial_path,
    publish_new,
    shard_missing,
    store_for,
)
from catalog.tfrecord.framing import is_url, read_record_batches

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from catalog.migrations import MigrateReport, MigrationStatus
    from catalog.rewrite import CompactReport, ExportReport

CATALOG_FILE = "catalog.json"
DEFAULT_DB_FILE = "catalog.db"
DATA_DIR = "data"
# Checked with fullmatch: `$` also matches before a final newline, so "nl\n" would pass.
NAME_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
DEFAULT_SHARD_SIZE = 256 << 20
DEFAULT_SHARD_RECORDS = 1_000_000
INTENT_STALE = timedelta(minutes=10)  # an intent without a heartbeat for this long is dead
HEARTBEAT_EVERY = timedelta(seconds=30)
VALIDATE_BATCH = 1024
COMMIT_RETRIES = 100
SHARD_CHUNK = 10_000  # shard rows fetched at a time when streaming a shard list
NO_DATA_CHANGE = ("create", "compact")  # commit kinds that leave the records as they were

Progress = Callable[[int], None]

# The append path's statements, built once: each append runs them all, and building a
# statement costs more than executing it on SQLite.
_DATASET_STATE = select(
    DatasetRow.version, DatasetRow.schema_version, DatasetRow.records, DatasetRow.bytes, DatasetRow.shard_count
).where(DatasetRow.id == bindparam("ds"))
# A commit reads the dataset's state under the row's lock: on PostgreSQL, commits to one
# dataset then queue on that row (gapless versions, no retry storms); SQLite ignores it.
DATASET_STATE_FOR_COMMIT = _DATASET_STATE.with_for_update()
_COMMIT_BY_TOKEN = select(CommitRow).where(
    CommitRow.dataset_id == bindparam("ds"), CommitRow.token == bindparam("token")
)
_SWAP_VERSION = (
    update(DatasetRow)
    .where(DatasetRow.id == bindparam("ds"), DatasetRow.version == bindparam("expected"))
    .values(
        version=bindparam("new"),
        records=bindparam("new_records"),
        bytes=bindparam("new_bytes"),
        shard_count=bindparam("new_shard_count"),
    )
)
# A ShardInfo's columns after its absolute path, in its field order.
_SHARD_INFO_COLUMNS = (
    ShardRow.path,
    ShardRow.records,
    ShardRow.bytes,
    ShardRow.checksum,
    ShardRow.compression,
    ShardRow.schema_version,
    ShardRow.added_version,
    ShardRow.removed_version,
)
_INSERT_COMMIT = insert(CommitRow)
_INSERT_SHARD = insert(ShardRow)
_INSERT_INTENT = insert(IntentRow)
_DELETE_INTENT = delete(IntentRow).where(
    IntentRow.id == bindparam("iid")
)  # called with a number of input bytes just processed


# --------------------------------------------------------------------------- values


@dataclass(slots=True)
class ShardInfo:
    path: str  # absolute
    relpath: str
    records: int
    bytes: int
    checksum: str
    compression: str
    schema_version: int
    added_version: int
    removed_version: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "records": self.records,
            "bytes": self.bytes,
            "checksum": self.checksum,
            "compression": self.compression,
            "schema_version": self.schema_version,
            "added_version": self.added_version,
            "removed_version": self.removed_version,
        }


@dataclass(frozen=True)
class Commit:
    dataset: str
    version: int
    kind: str
    schema_version: int
    time: datetime
    message: str
    author: str
    read_version: int
    token: str | None
    records: int  # records added by this commit
    shard_count: int  # shards added by this commit
    total_records: int
    total_bytes: int
    total_shards: int
    shards: list[ShardInfo] = field(default_factory=list)
    duplicate: bool = False  # True when a retried token returned an earlier commit
    records_removed: int = 0  # in the shards this commit retired (a rewrite's or restore's)
    shards_removed: int = 0

    def to_json(self, with_shards: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "dataset": self.dataset,
            "version": self.version,
            "kind": self.kind,
            "data_change": self.kind not in NO_DATA_CHANGE,
            "schema_version": self.schema_version,
            "time": _iso(self.time),
            "message": self.message,
            "author": self.author,
            "read_version": self.read_version,
            "token": self.token,
            "records": self.records,
            "shard_count": self.shard_count,
            "records_removed": self.records_removed,
            "shards_removed": self.shards_removed,
            "total_records": self.total_records,
            "total_bytes": self.total_bytes,
            "total_shards": self.total_shards,
        }
        if with_shards:
            out["shards"] = [s.to_json() for s in self.shards]
            out["duplicate"] = self.duplicate
        return out


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    description: str
    created: datetime
    version: int
    schema_version: int
    schema: dict[str, Any]
    records: int
    bytes: int
    shard_count: int

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "created": _iso(self.created),
            "version": self.version,
            "schema_version": self.schema_version,
            "schema": self.schema,
            "records": self.records,
            "bytes": self.bytes,
            "shard_count": self.shard_count,
        }


@dataclass
class Problem:
    dataset: str | None
    path: str
    problem: str  # missing | size | checksum | records | unreadable | unregistered | link | manifest
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "path": self.path, "problem": self.problem, "detail": self.detail}


@dataclass
class VerifyReport:
    checked: int = 0
    bytes: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(p.problem != "unregistered" for p in self.problems)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checked": self.checked,
            "bytes": self.bytes,
            "problems": [p.to_json() for p in self.problems],
        }


@dataclass
class GcReport:
    removed: list[str] = field(default_factory=list)
    bytes: int = 0
    kept_young: int = 0
    kept_live: int = 0
    dry_run: bool = False
    retired: list[str] = field(default_factory=list)  # retired shards collected (a subset of removed)
    kept_retired: int = 0  # retired shards kept for time travel
    links: list[str] = field(default_factory=list)  # symbolic links in the data area: never followed, kept

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "dry_run": self.dry_run,
            "removed": self.removed,
            "bytes": self.bytes,
            "kept_young": self.kept_young,
            "kept_live": self.kept_live,
            "retired_removed": self.retired,
            "kept_retired": self.kept_retired,
            "links": self.links,
        }


def _iso(t: datetime) -> str:
    return t.replace(microsecond=t.microsecond).isoformat(timespec="milliseconds") + "Z"


def validate_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise InvalidNameError(
            f"invalid dataset name {name!r}: use letters, digits, '.', '_' and '-', not starting with '.', "
            "at most 128 characters",
            name if isinstance(name, str) else None,
        )
    return name


def default_author() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER", "unknown")


# --------------------------------------------------------------------------- catalog


def find_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The catalog directory: ``start`` if given, else $CATALOG_ROOT, else search upwards."""
    if start is not None:
        root = Path(start)
        if not (root / CATALOG_FILE).is_file():
            raise CatalogNotFoundError(f"{root}: not a catalog (no {CATALOG_FILE}; create one with `catalog init`)")
        return root.resolve()
    env = os.environ.get("CATALOG_ROOT")
    if env:
        return find_root(env)
    here = Path.cwd().resolve()
    for candidate in (here, *here.parents):
        if (candidate / CATALOG_FILE).is_file():
            return candidate
    raise CatalogNotFoundError("no catalog found: pass --catalog DIR, set CATALOG_ROOT, or run `catalog init DIR`")


class Catalog:
    """A catalog directory and its manifest. Create with :meth:`init`, reopen with :meth:`open`."""

    def __init__(self, root: Path, engine: Engine, data_root: str | Path, catalog_id: str | None = None) -> None:
        self.root = root
        self.engine = engine
        # Names this catalog in its data area's marker (see gc); None for a manifest made
        # before ids existed: its first gc gives it one.
        self.catalog_id = catalog_id
        self.store = store_for(data_root)  # where shards live: a local directory or a URL
        # The local data area as a Path (for an object store: its URL, which only `str()` keeps whole).
        self.data_root = Path(data_root)

    # ---- opening
    @classmethod
    def init(
        cls, path: str | os.PathLike[str], db_url: str | None = None, storage: str | os.PathLike[str] | None = None
    ) -> Catalog:
        """A new catalog directory. With ``db_url`` (or $CATALOG_DB_URL) naming a database that
        already holds a manifest, the directory attaches to it: another machine joining."""
        if storage is not None and not os.fspath(storage).strip():
            raise CatalogError("--storage is empty: name a directory or URL (or leave it out for DIR/data)")
        root = Path(path)
        if (root / CATALOG_FILE).exists():
            raise CatalogError(f"{root}: already a catalog")
        if root.exists() and not root.is_dir():
            raise CatalogError(f"{root}: not a directory")
        db_url = db_url or os.environ.get("CATALOG_DB_URL")
        url = db_url or _default_url(root.resolve())
        undo = _Undo()  # all or nothing: a failed init leaves nothing it made behind
        engine = mf.make_engine(url)
        try:
            undo.mkdirs(root)
            if db_url is None:  # the SQLite file and its companions: ours to remove if init fails
                undo.files(Path(url.removeprefix("sqlite:///")), "", "-wal", "-shm", "-journal")
            data_root = _create_or_attach(engine, root, storage, shared=db_url is not None, undo=undo)
            if not is_url(data_root):
                undo.mkdirs(root / data_root)  # root / an absolute path = that path
            doc = {"format": mf.FORMAT_VERSION, "db_url": mf.safe_url(mf.normalize_url(db_url)) if db_url else None}
            undo.files(root / CATALOG_FILE, "")
            _write_atomically(root / CATALOG_FILE, json.dumps(doc, indent=2) + "\n")
        except BaseException as e:
            engine.dispose()
            undo.run()
            if isinstance(e, OSError):
                raise CatalogError(f"{e.filename or root}: cannot create the catalog: {e.strerror or e}") from e
            raise
        engine.dispose()
        return cls._connect(root.resolve(), url, check=True)

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, *, check: bool = True) -> Catalog:
        root = find_root(path)
        try:
            doc = json.loads((root / CATALOG_FILE).read_text())
        except (OSError, ValueError) as e:
            raise ManifestError(f"{root / CATALOG_FILE}: unreadable: {e}") from e
        recorded = doc.get("db_url")
        if recorded is None and not (root / DEFAULT_DB_FILE).exists():
            raise ManifestError(f"{root}: the manifest {DEFAULT_DB_FILE} is missing")
        return cls._connect(root, _runtime_url(recorded) if recorded else _default_url(root), check)

    @classmethod
    def _connect(cls, root: Path, url: str, check: bool) -> Catalog:
        engine = mf.make_engine(url)
        meta = mf.read_meta(engine)
        if check:
            mf.check_format(meta)
        if mf.MOVED_TO in meta:
            moved = meta[mf.MOVED_TO]
            raise ManifestError(
                f"{root}: its manifest was moved to {moved} by copy-manifest; use the copy "
                f"(catalog init DIR --db-url {moved})"
            )
        data_root = meta.get("data_root", DATA_DIR)
        return cls(root, engine, data_root if is_url(data_root) else root / data_root, meta.get("catalog_id"))

    def copy_manifest(self, db_url: str, switch: bool = True) -> dict[str, int]:
        """Copy the manifest, every row of it, into the empty database at ``db_url`` (SQLite or
        PostgreSQL); with ``switch``, this catalog directory uses the copy from then on. Other
        directories attached to the old manifest keep using it: attach them anew."""
        url = mf.normalize_url(db_url)
        target = mf.make_engine(url)
        try:
            shared = target.dialect.name != "sqlite"
            data_root = (self.store.root if self.store.remote else str(self.data_root.resolve())) if shared else None
            counts = mf.copy_manifest(self.engine, target, data_root, move=switch)
        finally:
            target.dispose()
        if switch:
            doc = {"format": mf.FORMAT_VERSION, "db_url": None if url == _default_url(self.root) else mf.safe_url(url)}
            _write_atomically(self.root / CATALOG_FILE, json.dumps(doc, indent=2) + "\n")
        return counts

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def upgrade(self) -> tuple[int, int]:
        """Bring the manifest to the current format; returns (from, to)."""
        return mf.upgrade(self.engine)

    # ---- datasets
    def register(
        self, name: str, schema: Schema | Mapping[str, Any] | str | os.PathLike[str], description: str = ""
    ) -> Dataset:
        validate_name(name)
        sch = _as_schema(schema)
        now = utcnow()

        def txn() -> None:
            with mf.write_txn(self.engine) as conn:
                if conn.execute(select(DatasetRow.id).where(DatasetRow.name == name)).first() is not None:
                    raise DatasetExistsError(f"dataset {name!r} already exists", name)
                ds_id = conn.execute(
                    insert(DatasetRow).values(
                        name=name,
                        description=description,
                        created_at=now,
                        version=1,
                        schema_version=1,
                        records=0,
                        bytes=0,
                        shard_count=0,
                    )
                ).inserted_primary_key[0]  # type: ignore[index]
                insert_schema(conn, ds_id, 1, sch, 1, now)
                conn.execute(
                    insert(CommitRow).values(
                        dataset_id=ds_id,
                        version=1,
                        kind="create",
                        schema_version=1,
                        created_at=now,
                        message=description,
                        author=default_author(),
                        read_version=0,
                        token=None,
                        records_added=0,
                        shards_added=0,
                        records=0,
                        bytes=0,
                        shard_count=0,
                    )
                )

        try:
            mf.with_lock_retry(txn)
        except IntegrityError as e:
            raise DatasetExistsError(f"dataset {name!r} already exists", name) from e
        return self.dataset(name)

    def list(self) -> list[DatasetInfo]:
        commit_totals = (
            CommitRow.shard_count.label("commit_shards"),
            CommitRow.records.label("commit_records"),
            CommitRow.bytes.label("commit_bytes"),
        )
        with mf.read_txn(self.engine) as conn:
            rows = conn.execute(
                select(*DatasetRow.__table__.c, SchemaVersionRow.schema_json, *commit_totals)
                .join(
                    SchemaVersionRow,
                    and_(
                        SchemaVersionRow.dataset_id == DatasetRow.id,
                        SchemaVersionRow.version == DatasetRow.schema_version,
                    ),
                )
                .outerjoin(  # outer: a dataset whose current commit is missing is damage to report
                    CommitRow, and_(CommitRow.dataset_id == DatasetRow.id, CommitRow.version == DatasetRow.version)
                )
                .order_by(DatasetRow.name)
            ).all()
        for r in rows:
            _check_totals(self.engine, r, _ShardSum(r.commit_shards, r.commit_records, r.commit_bytes))
        return [_info(r, json.loads(r.schema_json)) for r in rows]

    def dataset(self, name: str) -> Dataset:
        validate_name(name)
        with mf.read_txn(self.engine) as conn:
            row = conn.execute(select(DatasetRow).where(DatasetRow.name == name)).first()
            if row is None:
                names = list(conn.execute(select(DatasetRow.name)).scalars())
                raise DatasetNotFoundError(_not_found(name, names), name)
            schema = _schema_at(conn, row.id, row.schema_version)
        return Dataset(self, row.id, row.name, row.version, row.schema_version, schema)

    def drop(self, name: str) -> None:
        """Remove a dataset from the manifest; its files are collected by the next gc."""
        ds = self.dataset(name)

        def txn() -> None:
            with mf.write_txn(self.engine) as conn:
                for table in (ShardRow, CommitRow, SchemaVersionRow, AppliedMigrationRow):
                    conn.execute(delete(table).where(table.dataset_id == ds.id))
                conn.execute(delete(DatasetRow).where(DatasetRow.id == ds.id))

        mf.with_lock_retry(txn)

    # ---- maintenance
    def backup(self, out: str | os.PathLike[str]) -> Path:
        """A consistent copy of the manifest in a new SQLite file: SQLite's online backup API,
        or, from PostgreSQL, :func:`copy_manifest` (every row, writers held meanwhile). Written
        under a partial name, fsynced, then published without replacing anything: a killed
        backup leaves no file under ``out`` (the next one removes its partial file)."""
        target = Path(out)
        if os.path.lexists(target):
            raise CatalogError(f"{target}: already exists; backup never overwrites")
        if not target.parent.is_dir():
            raise CatalogError(f"{target}: cannot write there: no such directory")
        clear_dead_partials(target.parent)
        temp = partial_path(target)
        try:
            self._backup_to(temp)
            with open(temp, "rb+") as f:
                os.fsync(f.fileno())
            publish_new(temp, target)
        except OSError as e:
            raise CatalogError(f"{target}: cannot write the backup: {e.strerror or e}") from e
        finally:
            for leftover in (temp, Path(f"{temp}-journal")):
                leftover.unlink(missing_ok=True)
        return target

    def _backup_to(self, path: Path) -> None:
        if self.engine.dialect.name != "sqlite":
            copy = mf.make_engine(f"sqlite:///{path.resolve()}")
            try:
                mf.copy_manifest(self.engine, copy)
            finally:
                copy.dispose()
            return
        import sqlite3

        raw = self.engine.raw_connection()
        try:
            dest = sqlite3.connect(path)
            try:
                raw.driver_connection.backup(dest)  # type: ignore[union-attr]
            finally:
                dest.close()
        except sqlite3.Error as e:  # the directory is read-only, /proc, the disk is full: one line
            raise CatalogError(f"{path}: cannot write the backup: {e}") from e
        finally:
            raw.close()

    def verify(
        self, names: Sequence[str] | None = None, progress: Progress | None = None, *, executor: Executor | None = None
    ) -> VerifyReport:
        """Check shards against the manifest; with ``executor``, in jobs on it (same report, same order)."""
        from catalog.maintenance import verify_catalog

        return verify_catalog(self, names, progress, executor)

    def gc(
        self,
        grace: timedelta = timedelta(hours=1),
        dry_run: bool = False,
        *,
        keep_versions: int | None = None,
        older_than: timedelta | None = None,
    ) -> GcReport:
        """Remove unregistered files; with ``keep_versions`` and/or ``older_than`` also retired
        shards that no kept version needs (time travel to older versions ends there)."""
        from catalog.maintenance import collect_garbage

        return collect_garbage(self, grace, dry_run, keep_versions, older_than)

    def shard_path(self, relpath: str) -> Path:
        """A shard's local path (a local data area only; see :meth:`shard_url`)."""
        return self.data_root / relpath

    def shard_url(self, relpath: str) -> str:
        """Where a shard is: a local path, or a URL in an object store."""
        return self.store.url(relpath)

    def require_shards(self, relpaths: Iterable[str]) -> None:
        """Before a commit: every new shard is still there. A gc that wrongly took a writer's
        files must not leave the manifest pointing at nothing."""
        for rel in relpaths:
            if not self.store.exists(rel):
                raise CatalogError(f"{self.shard_url(rel)}: shard vanished before commit; nothing registered")


def explain_with(
    name: str,
    schema_version: int,
    older: Sequence[tuple[int, dict[str, Any]]],
    error: CatalogError,
    fits: Callable[[Schema], object],
) -> CatalogError:
    """Dataset.explain without a manifest (``older``: Dataset.older_schemas()), for append jobs in workers."""
    for version, doc in older:
        try:
            fits(Schema.from_json(doc))
        except CatalogError:
            continue
        return CommitConflictError(
            f"{error}; this data is in schema version {version} of {name!r}, which is at schema version "
            f"{schema_version} now (migrated): migrate the data, or write it in the new schema"
        )
    return error


def raise_explained(
    ds: Any, error: CatalogError, fits: Callable[[Schema], object]
) -> NoReturn:
    """Raise ``ds.explain(error, fits)``, or ``error`` itself, never chained to itself: Dask
    follows ``__cause__`` to send a job's error back, forever on such a loop."""
    better = ds.explain(error, fits)
    if better is error:
        raise error
    raise better from error


def _default_url(root: Path) -> str:
    return f"sqlite:///{(root / DEFAULT_DB_FILE).resolve()}"


def _write_atomically(path: Path, text: str) -> None:
    """``path`` holds ``text`` or what it held before, never half; nobody but its owner may
    write it, whatever the umask (it names the manifest every command trusts)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)  # a killed writer's leftover keeps its mode: start afresh
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _runtime_url(recorded: str) -> str:
    """The URL to connect with: the recorded one (no password), or $CATALOG_DB_URL when it
    names the same database, since that is where a password may come from. libpq also
    reads PGPASSWORD and ~/.pgpass by itself."""
    env = os.environ.get("CATALOG_DB_URL")
    if env and mf.safe_url(mf.normalize_url(env)) == mf.safe_url(mf.normalize_url(recorded)):
        return env
    return recorded


class _Undo:
    """What a failing init made, removed in reverse: directories it created, files it wrote,
    the marker it put in a data area."""

    def __init__(self) -> None:
        self._steps: list[Callable[[], None]] = []

    def mkdirs(self, path: Path) -> None:
        missing = []
        p = path.absolute()
        while not os.path.lexists(p) and p != p.parent:
            missing.append(p)
            p = p.parent
        path.mkdir(parents=True, exist_ok=True)
        self._steps.extend(functools.partial(os.rmdir, d) for d in reversed(missing))

    def files(self, base: Path, *suffixes: str) -> None:
        """``base`` + each suffix, where none is there now: removed on failure if made meanwhile."""
        for suffix in suffixes:
            f = Path(f"{base}{suffix}")
            if not os.path.lexists(f):
                self._steps.append(functools.partial(f.unlink, missing_ok=True))

    def call(self, step: Callable[[], None]) -> None:
        self._steps.append(step)

    def run(self) -> None:
        for step in reversed(self._steps):
            with contextlib.suppress(OSError, CatalogError):
                step()


def _create_or_attach(
    engine: Engine, root: Path, storage: str | os.PathLike[str] | None, shared: bool, undo: _Undo
) -> str:
    """The data area of the manifest behind ``engine``: a new manifest's, or an existing one's.
    A new manifest's data area must be new or empty; it is marked with the new catalog id
    before the manifest names it."""
    if not mf.has_manifest(engine):
        data_root = _new_data_root(root, storage, shared)
        store = store_for(data_root if is_url(data_root) else str(root / data_root))
        store.check()
        store.check_new()
        catalog_id = new_catalog_id()
        if not is_url(data_root):
            undo.mkdirs(Path(store.root))
        if store.claim(catalog_id) == catalog_id:
            undo.call(functools.partial(store.unclaim, catalog_id))
            try:
                mf.create_manifest(engine, data_root, catalog_id)
                return data_root
            except IntegrityError:  # another machine created it at the same moment: attach to that
                store.unclaim(catalog_id)
            except DBAPIError as e:
                if not mf.has_manifest(engine):
                    raise ManifestError(f"could not create the manifest: {e.orig}") from e
                store.unclaim(catalog_id)
        elif not mf.has_manifest(engine):  # claimed by an init racing this one for another manifest
            store.check_new()
    meta = mf.read_meta(engine)
    mf.check_format(meta)
    found = meta.get("data_root", DATA_DIR)
    if storage is not None and _new_data_root(root, storage, shared) != found:
        raise CatalogError(f"this manifest keeps its data at {found}, not {storage}: leave out --storage to attach")
    _attach_owner(store_for(found if is_url(found) else str(root / found)), meta.get("catalog_id"))
    return found


def _attach_owner(store: Store, catalog_id: str | None) -> None:
    """Joining an existing manifest: its data area must be its own (marked now if not yet)."""
    if catalog_id is None:
        return  # made before ids: its first gc marks the data area
    owner = store.claim(catalog_id)
    if owner != catalog_id:
        raise CatalogError(
            f"{store.root}: the data area of catalog {owner}, not of this manifest's ({catalog_id}); not attached"
        )


def _new_data_root(root: Path, storage: str | os.PathLike[str] | None, shared: bool) -> str:
    """Where a new manifest keeps its shards: relative to the catalog directory for the
    embedded default (the directory can move), absolute for a shared database (other
    machines attaching resolve it the same way)."""
    if storage is not None:
        return str(storage).rstrip("/") if is_url(str(storage)) else str(Path(storage).resolve())
    return str((root / DATA_DIR).resolve()) if shared else DATA_DIR


def _as_schema(schema: Schema | Mapping[str, Any] | str | os.PathLike[str]) -> Schema:
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, Mapping):
        return Schema.from_json(dict(schema))
    return Schema.load(schema)


def _not_found(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"no dataset named {name!r}{hint}"


def _info(row: Any, schema: dict[str, Any]) -> DatasetInfo:
    return DatasetInfo(
        row.name,
        row.description,
        row.created_at,
        row.version,
        row.schema_version,
        schema,
        row.records,
        row.bytes,
        row.shard_count,
    )


def _check_totals(engine: Engine, row: Any, commit: _ShardSum, version: int | None = None) -> None:
    """The totals of dataset ``row`` against those of its commit at ``version`` (default: the
    current one; every commit writes both): equal there, and never negative."""
    said = _ShardSum(row.shard_count, row.records, row.bytes)
    where = f"dataset {row.name!r} version {row.version if version is None else version}"
    if commit.shards is None:
        raise mf.damaged(engine, f"{where}: no commit row")
    if min(commit.shards, commit.records, commit.bytes) < 0:
        raise mf.damaged(engine, f"{where}: its commit says {commit}")
    if version in (None, row.version) and said != commit:
        raise mf.damaged(engine, f"{where}: the dataset row says {said}, its commit {commit}")


def insert_schema(conn: Connection, dataset_id: int, version: int, schema: Schema, commit: int, now: datetime) -> None:
    """Register ``schema`` as the dataset's schema ``version``, made by the commit of version ``commit``."""
    conn.execute(
        insert(SchemaVersionRow).values(
            dataset_id=dataset_id,
            version=version,
            schema_json=json.dumps(schema.to_json()),
            fingerprint=schema.fingerprint,
            created_at=now,
            commit_version=commit,
        )
    )


def _schema_at(conn: Connection, dataset_id: int, version: int) -> Schema:
    text = conn.execute(
        select(SchemaVersionRow.schema_json).where(
            SchemaVersionRow.dataset_id == dataset_id, SchemaVersionRow.version == version
        )
    ).scalar_one()
    return Schema.from_json(json.loads(text))


# --------------------------------------------------------------------------- dataset


class Dataset:
    """A handle on one dataset. It pins the schema version it read: appends validated
    against it fail at commit if a newer schema version was committed meanwhile."""

    def __init__(self, catalog: Catalog, id: int, name: str, version: int, schema_version: int, schema: Schema):
        self.catalog = catalog
        self.id = id
        self.name = name
        self.version = version
        self.schema_version = schema_version
        self.schema = schema

    def __repr__(self) -> str:
        return f"Dataset({self.name!r}, version={self.version}, schema_version={self.schema_version})"

    # ---- appends
    def append_rows(
        self,
        rows: Iterable[Mapping[str, Any]],
        token: str | None = None,
        message: str = "",
        shard_size: int | None = None,
        shard_records: int | None = None,
        author: str | None = None,
    ) -> Commit:
        with self.writer(token, message, shard_size, shard_records, author) as w:
            if not w.skipped:
                for row in rows:
                    w.write(row)
        assert w.commit is not None
        return w.commit

    def append_files(
        self,
        paths: Iterable[str | os.PathLike[str]],
        token: str | None = None,
        message: str = "",
        shard_size: int | None = None,
        shard_records: int | None = None,
        *,
        link: bool = False,
        format: str = "auto",
        author: str | None = None,
        progress: Progress | None = None,
        executor: Executor | None = None,
    ) -> Commit:
        """Validate and write the inputs as new shards, registered in one commit. With ``executor``
        and several inputs, each input is a job on it (see ingest.ingest_files)."""
        from catalog.ingest import ingest_file, ingest_files
        from catalog.tfrecord.framing import regular_file_problem

        inputs = [Path(p) for p in paths]
        for p in inputs:
            problem = regular_file_problem(p)
            if problem is not None:
                raise AppendError(f"{p}: {problem}", str(p))
        with self.writer(token, message, shard_size, shard_records, author) as w:
            if not w.skipped and executor is not None and len(inputs) > 1:
                ingest_files(w, inputs, format, link, progress, executor)
            elif not w.skipped:
                for p in inputs:
                    ingest_file(w, p, format, link, progress)
        assert w.commit is not None
        return w.commit

    def writer(
        self,
        token: str | None = None,
        message: str = "",
        shard_size: int | None = None,
        shard_records: int | None = None,
        author: str | None = None,
    ) -> Writer:
        """``with ds.writer() as w: w.write(row)`` commits on clean exit, registers nothing on error."""
        return Writer(
            self,
            token,
            message,
            shard_size or DEFAULT_SHARD_SIZE,
            shard_records or DEFAULT_SHARD_RECORDS,
            author or default_author(),
        )

    # ---- reading
    def _resolve_version(self, conn: Connection, version: int | None) -> tuple[int, int]:
        """(dataset version, its schema version) for ``version`` (None = current)."""
        if version is None:
            row = conn.execute(select(DatasetRow.version).where(DatasetRow.id == self.id)).first()
            if row is None:
                raise DatasetNotFoundError(f"no dataset named {self.name!r}", self.name)
            version = row[0]
        sv = conn.execute(
            select(CommitRow.schema_version).where(CommitRow.dataset_id == self.id, CommitRow.version == version)
        ).scalar_one_or_none()
        if sv is None:
            raise VersionNotFoundError(f"dataset {self.name!r} has no version {version}")
        return version, sv

    def _live(self, conn: Connection, version: int | None) -> tuple[int, int, Any]:
        """(version, its schema version, the query of its live shards in read order), once
        it is known that gc left every one of them."""
        v, sv = self._resolve_version(conn, version)
        query = _live_at(conn, self.id, v)
        _check_readable(conn, self.name, v, query)
        return v, sv, query

    def shards(self, version: int | None = None) -> list[ShardInfo]:
        """The shards live at ``version`` (default: current), in commit order."""
        return list(self.iter_shards(version))

    def iter_shards(self, version: int | None = None) -> Iterator[ShardInfo]:
        """:meth:`shards`, streamed from one read snapshot in chunks: a million-shard list
        never sits in memory at once."""
        url = self.catalog.store.url  # 100k shards: pathlib would cost a third of `show --json`
        with mf.read_txn(self.catalog.engine) as conn:
            _v, _sv, query = self._live(conn, version)
            result = conn.execution_options(yield_per=SHARD_CHUNK).execute(
                query.with_only_columns(*_SHARD_INFO_COLUMNS)
            )
            for rows in result.partitions():
                yield from (ShardInfo(url(r[0]), *r) for r in rows)

    def files(self, version: int | None = None) -> list[str]:
        """Shard locations at ``version``: absolute paths, or URLs for an object store (such as
        ``s3://...``, which ``tf.data.TFRecordDataset`` opens where TensorFlow has that filesystem)."""
        with mf.read_txn(self.catalog.engine) as conn:
            _v, _sv, query = self._live(conn, version)
            paths = mf.fetch_column(conn, query.with_only_columns(ShardRow.path))
        url = self.catalog.store.url  # each checked: the manifest never names a path outside the data area
        return [url(p) for p in paths]

    def _sized_files(self, version: int | None) -> list[tuple[str, int]]:
        """(location, registered size) of the shards at ``version``: readers stop at the size."""
        with mf.read_txn(self.catalog.engine) as conn:
            _v, _sv, query = self._live(conn, version)
            rows = conn.execute(query.with_only_columns(ShardRow.path, ShardRow.bytes)).all()
        url = self.catalog.store.url
        return [(url(p), size) for p, size in rows]

    def explain(self, error: CatalogError, fits: Callable[[Schema], object]) -> CatalogError:
        """``error``, or, when the data fits an older schema version (``fits`` does not raise),
        a CommitConflictError naming that version and the current one: data written for the
        dataset as it was before a migration."""
        return explain_with(self.name, self.schema_version, self.older_schemas(), error, fits)

    def older_schemas(self) -> list[tuple[int, dict[str, Any]]]:
        """(version, JSON form) of the schema versions before the pinned one, newest first."""
        with mf.read_txn(self.catalog.engine) as conn:
            rows = conn.execute(
                select(SchemaVersionRow.version, SchemaVersionRow.schema_json)
                .where(SchemaVersionRow.dataset_id == self.id, SchemaVersionRow.version < self.schema_version)
                .order_by(SchemaVersionRow.version.desc())
            ).all()
        return [(version, json.loads(text)) for version, text in rows]

    def schema_at(self, version: int | None = None) -> Schema:
        with mf.read_txn(self.catalog.engine) as conn:
            _v, sv = self._resolve_version(conn, version)
            return _schema_at(conn, self.id, sv)

    def info(self, version: int | None = None) -> DatasetInfo:
        with mf.read_txn(self.catalog.engine) as conn:
            row = conn.execute(select(DatasetRow).where(DatasetRow.id == self.id)).first()
            if row is None:
                raise DatasetNotFoundError(f"no dataset named {self.name!r}", self.name)
            v, sv = self._resolve_version(conn, version)
            schema = _schema_at(conn, self.id, sv).to_json()
            c = conn.execute(select(CommitRow).where(CommitRow.dataset_id == self.id, CommitRow.version == v)).one()
        _check_totals(self.catalog.engine, row, _ShardSum(c.shard_count, c.records, c.bytes), v)
        return DatasetInfo(row.name, row.description, row.created_at, v, sv, schema, c.records, c.bytes, c.shard_count)

    def records(self, version: int | None = None) -> Iterator[bytes]:
        """The raw serialized records at ``version``, shard by shard, CRC-checked."""
        for path, size in self._sized_files(version):
            for batch in _shard_batches(path, size):
                yield from batch

    def _pin(self, version: int | None) -> int:
        """``version``, or the current one, looked up once: a reader that asked for the schema
        and then the shards separately could pair one version's schema with the next's shards."""
        with mf.read_txn(self.catalog.engine) as conn:
            return self._resolve_version(conn, version)[0]

    def read(self, version: int | None = None) -> Iterator[dict[str, Any]]:
        """Rows (dicts per the schema of that version)."""
        version = self._pin(version)
        schema = self.schema_at(version)
        for path, size in self._sized_files(version):
            for batch in _shard_batches(path, size):
                for rec in batch:
                    yield schema.decode(rec)

    def batches(self, batch_size: int, version: int | None = None) -> Iterator[dict[str, np.ndarray]]:
        """Columnar numpy batches of ``batch_size`` rows (the last may be smaller)."""
        if batch_size < 1:
            raise CatalogError("batch_size must be at least 1")
        version = self._pin(version)
        schema = self.schema_at(version)
        pending: list[bytes] = []
        for path, size in self._sized_files(version):
            for batch in _shard_batches(path, size):
                pending.extend(batch)
                while len(pending) >= batch_size:
                    yield schema.decode_batch(pending[:batch_size])
                    del pending[:batch_size]
        if pending:
            yield schema.decode_batch(pending)

    def history(self) -> list[Commit]:
        """Every commit, oldest first, with the records and shards it added and retired: counted
        from the shard rows (a rewrite adds and retires shards; gc keeps collected shards' rows)."""
        with mf.read_txn(self.catalog.engine) as conn:
            rows = conn.execute(
                select(CommitRow).where(CommitRow.dataset_id == self.id).order_by(CommitRow.version)
            ).all()
            added = _shard_sums(conn, self.id, ShardRow.added_version)
            removed = _shard_sums(conn, self.id, ShardRow.removed_version)
        commits = []
        total = _NO_SHARDS
        for r in rows:
            plus, minus = added.get(r.version, _NO_SHARDS), removed.get(r.version, _NO_SHARDS)
            total = total + plus - minus
            self._check_commit(r, plus, total)
            commit = _commit_of(self.name, r)
            commits.append(
                replace(
                    commit,
                    records=plus.records,
                    shard_count=plus.shards,
                    records_removed=minus.records,
                    shards_removed=minus.shards,
                )
            )
        return commits

    def _check_commit(self, r: Any, added: _ShardSum, total: _ShardSum) -> None:
        """Fail when commit row ``r`` disagrees with the shard rows (``added`` by it, ``total``
        live after it): a flipped byte must not show as "+2024 records"."""
        said = _ShardSum(r.shard_count, r.records, r.bytes)
        detail = None
        if said != total:
            detail = f"its totals say {said}, its shards hold {total}"
        elif r.kind == "append" and (r.shards_added, r.records_added) != (added.shards, added.records):
            detail = f"it says it added {r.records_added} records in {r.shards_added} shards, its shards hold {added}"
        if detail is not None:
            raise mf.damaged(self.catalog.engine, f"dataset {self.name!r} version {r.version}: {detail}")

    def verify(self, progress: Progress | None = None, *, executor: Executor | None = None) -> VerifyReport:
        return self.catalog.verify([self.name], progress, executor=executor)

    # ---- rewrites (see rewrite.py and migrations.py)
    def migrate(
        self,
        migrations: str | os.PathLike[str] = "migrations",
        *,
        to: int | None = None,
        dry_run: bool = False,
        workers: int | None = None,
        executor: Executor | None = None,
        message: str = "",
        author: str | None = None,
        add: Sequence[str] = (),
        drop: Sequence[str] = (),
        rename: Sequence[str] = (),
        progress: Progress | None = None,
    ) -> MigrateReport:
        """Apply the pending migrations of ``migrations/<name>/`` in order, one commit each; or,
        with ``add``/``drop``/``rename`` (the CLI's quick forms), one quick migration."""
        from catalog.migrations import migrate, quick_operations

        quick = quick_operations(add, drop, rename) if (add or drop or rename) else None
        return migrate(
            self, Path(migrations), to=to, dry_run=dry_run, workers=workers, executor=executor, message=message,
            author=author, quick=quick, progress=progress,
        )  # fmt: skip

    def migrations(self, migrations: str | os.PathLike[str] = "migrations") -> list[MigrationStatus]:
        """Applied and pending migrations with their checksums."""
        from catalog.migrations import status

        return status(self, Path(migrations))

    def restore(self, version: int, message: str = "", author: str | None = None) -> Commit:
        """A new commit whose live shards and schema are exactly ``version``'s."""
        from catalog.rewrite import restore

        return restore(self, version, message, author)

    def compact(
        self,
        target_size: int | None = None,
        *,
        workers: int | None = None,
        executor: Executor | None = None,
        message: str = "",
        author: str | None = None,
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> CompactReport:
        """Merge adjacent small shards (same records, same order) in one no-data-change commit."""
        from catalog.rewrite import DEFAULT_TARGET_SIZE, compact

        return compact(
            self, target_size or DEFAULT_TARGET_SIZE, workers=workers, executor=executor, message=message,
            author=author, dry_run=dry_run, progress=progress,
        )  # fmt: skip

    def export(
        self,
        out: str | os.PathLike[str],
        version: int | None = None,
        compression: str = "none",
        progress: Progress | None = None,
    ) -> ExportReport:
        """One TFRecord file (none, gzip or zlib) holding the dataset at ``version``."""
        from catalog.rewrite import export

        return export(self, out, version, compression, progress)


@dataclass(frozen=True)
class _ShardSum:
    shards: int
    records: int
    bytes: int

    def __add__(self, other: _ShardSum) -> _ShardSum:
        return _ShardSum(self.shards + other.shards, self.records + other.records, self.bytes + other.bytes)

    def __sub__(self, other: _ShardSum) -> _ShardSum:
        return _ShardSum(self.shards - other.shards, self.records - other.records, self.bytes - other.bytes)

    def __str__(self) -> str:
        return f"{self.records} records, {self.bytes} bytes in {self.shards} shards"


_NO_SHARDS = _ShardSum(0, 0, 0)


def _shard_sums(conn: Connection, dataset_id: int, version_column: Any) -> dict[int, _ShardSum]:
    """Per version: the shards (count, records, bytes) whose ``version_column`` (added_version
    or removed_version) is that version."""
    query = (
        select(version_column, func.count(), func.coalesce(func.sum(ShardRow.records), 0),
               func.coalesce(func.sum(ShardRow.bytes), 0))
        .where(ShardRow.dataset_id == dataset_id, version_column.is_not(None))
        .group_by(version_column)
    )  # fmt: skip
    return {v: _ShardSum(int(n), int(records), int(size)) for v, n, records, size in conn.execute(query)}


def _live_at(conn: Connection, dataset_id: int, version: int) -> Any:
    """The shards live at ``version``, in read order. At the current version that is
    "not retired", ordered by (removed_version, seq): all NULL, so simply seq order, but
    spelt so PostgreSQL's planner sees the index (dataset, removed_version, seq) already
    gives it (IS NULL is no equality to that planner) and does not sort the whole list.
    1M shards: the first row in 0.1 ms, not 0.5 s."""
    current = conn.execute(select(DatasetRow.version).where(DatasetRow.id == dataset_id)).scalar_one_or_none()
    query = select(ShardRow).where(ShardRow.dataset_id == dataset_id)
    if version == current:
        return query.where(ShardRow.removed_version.is_(None)).order_by(ShardRow.removed_version, ShardRow.seq)
    live = and_(
        ShardRow.added_version <= version,
        or_(ShardRow.removed_version.is_(None), ShardRow.removed_version > version),
    )
    return query.where(live).order_by(ShardRow.seq)


def _check_readable(conn: Connection, name: str, version: int, live: Any) -> None:
    """Fail when gc collected a shard that ``version`` needs (``live``: its _live_at query)."""
    gone = (
        live.with_only_columns(ShardRow.id)
        .where(ShardRow.collected_at.is_not(None), ShardRow.removed_version.is_not(None))
        .order_by(None)
        .limit(1)
    )
    if conn.execute(gone).first() is not None:
        raise VersionNotFoundError(
            f"dataset {name!r} version {version} is no longer readable: gc collected its retired shards "
            "(keep versions with `catalog gc --keep-versions K`)"
        )


def _shard_batches(path: str, size: int) -> Iterator[list[bytes]]:
    try:
        f = open_shard(path, size)  # a regular file in the data area, never through a link
    except FileNotFoundError as e:
        if is_url(path):  # a URL's open says so itself
            raise
        raise shard_missing(path) from e
    with f:
        yield from read_record_batches(f)


def _commit_of(name: str, r: Any, shards: list[ShardInfo] | None = None, duplicate: bool = False) -> Commit:
    return Commit(
        name,
        r.version,
        r.kind,
        r.schema_version,
        r.created_at,
        r.message,
        r.author,
        r.read_version,
        r.token,
        r.records_added,
        r.shards_added,
        r.records,
        r.bytes,
        r.shard_count,
        shards or [],
        duplicate,
    )


# --------------------------------------------------------------------------- writer


class _Retry(Exception):
    """The compare-and-swap lost to a concurrent commit: re-read and try again."""


class Writer:
    """Appends rows or validated records into new shards; one commit at the end."""

    def __init__(self, ds: Dataset, token: str | None, message: str, shard_size: int, shard_records: int, author: str):
        self.ds = ds
        self.catalog = ds.catalog
        self.token = token
        self.message = message
        self.author = author
        self.shard_size = shard_size
        self.shard_records = shard_records
        self.commit: Commit | None = None
        self.skipped = False  # a retried token: nothing to write
        self.sink: ShardSink | None = None
        self.intent_id = new_intent_id()
        self.read_version = ds.version
        self._next_beat = time.monotonic() + HEARTBEAT_EVERY.total_seconds()

    # ---- lifecycle
    def __enter__(self) -> Writer:
        prior = self._start()
        if prior is not None:
            self.commit, self.skipped = prior, True
            return self
        self.sink = ShardSink(self.catalog.store, self.ds.name, self.intent_id, self.shard_size, self.shard_records)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if self.skipped:
            return
        if exc is not None:
            self._fail(exc)
            return
        try:
            self.commit = self._commit()
        except BaseException as e:
            self._fail(e)
            raise

    def _fail(self, error: BaseException) -> None:
        """Clean up after ``error``; a Ctrl-C becomes Interrupted, saying how the append ended."""
        committed = self._abort()
        if isinstance(error, KeyboardInterrupt) and not isinstance(error, Interrupted):
            raise Interrupted(committed) from error

    def _start(self) -> Commit | None:
        """Check the dataset and token, then record the intent before any file is written."""

        def txn() -> Commit | None:
            with mf.write_txn(self.catalog.engine, durable=False) as conn:  # the intent dies with its writer
                row = self._dataset_row(conn)
                self._check_schema(row)
                prior = self._prior(conn)
                if prior is not None:
                    return prior
                self.read_version = row.version
                conn.execute(_INSERT_INTENT, mf.intent_values(self.intent_id, self.ds.name))
                return None

        return mf.with_lock_retry(txn)

    def _dataset_row(self, conn: Connection, lock: bool = False) -> Any:
        row = conn.execute(DATASET_STATE_FOR_COMMIT if lock else _DATASET_STATE, {"ds": self.ds.id}).first()
        if row is None:
            raise DatasetNotFoundError(f"dataset {self.ds.name!r} was dropped", self.ds.name)
        return row

    def _check_schema(self, row: Any) -> None:
        if row.schema_version != self.ds.schema_version:
            raise CommitConflictError(
                f"dataset {self.ds.name!r} is now at schema version {row.schema_version}, but this append was "
                f"validated against schema version {self.ds.schema_version}: nothing was registered; "
                "reopen the dataset and write rows in the new schema"
            )

    def _prior(self, conn: Connection) -> Commit | None:
        if self.token is None:
            return None
        row = conn.execute(_COMMIT_BY_TOKEN, {"ds": self.ds.id, "token": self.token}).first()
        if row is None:
            return None
        # The commit's own shard rows, as registered: the answer must not depend on the
        # version still being readable (a compaction and a gc may have taken those files since).
        url = self.catalog.store.url
        added = conn.execute(
            select(*_SHARD_INFO_COLUMNS)
            .where(ShardRow.dataset_id == self.ds.id, ShardRow.added_version == row.version)
            .order_by(ShardRow.seq)
        ).all()
        return _commit_of(self.ds.name, row, [ShardInfo(url(r[0]), *r) for r in added], duplicate=True)

    # ---- writing
    def write(self, row: Mapping[str, Any]) -> None:
        """Validate and encode one row into the current shard."""
        try:
            record = self.ds.schema.encode(row)
        except ValidationError as e:
            raise_explained(self.ds, e, lambda schema: schema.encode(row))
        self.write_record(record)

    def write_record(self, record: bytes) -> None:
        """Write one serialized Example already validated against the dataset's schema."""
        if self.sink is None:
            raise CatalogError("the writer is not open (use it in a `with` block)")
        self.sink.write(record)
        # Rows written through write()/append_rows() must keep the intent alive too, or gc
        # takes a busy writer for dead. A monotonic clock keeps the per-record check cheap.
        if time.monotonic() >= self._next_beat:
            self.heartbeat()

    def heartbeat(self) -> None:
        """Tell gc this writer is alive; cheap (one clock read) when the last beat is recent."""
        if time.monotonic() < self._next_beat:
            return
        self._next_beat = time.monotonic() + HEARTBEAT_EVERY.total_seconds()
        mf.beat_intent(self.catalog.engine, self.intent_id)

    # ---- commit
    def _commit(self) -> Commit:
        assert self.sink is not None
        try:
            shards = self.sink.close()
        except FileNotFoundError as e:  # a temp file removed under us (by gc, once our intent was dead)
            raise CatalogError(f"{e.filename}: shard vanished before commit; nothing registered") from e
        for _ in range(COMMIT_RETRIES):
            try:
                commit, dup = mf.with_lock_retry(lambda: self._commit_txn(shards))
            except _Retry:
                continue
            except IntegrityError:
                continue  # a concurrent commit took our version number (or token): re-read
            if dup:
                self._abort()
            return commit
        raise CommitConflictError(f"could not commit to {self.ds.name!r} after {COMMIT_RETRIES} attempts")

    def _commit_txn(self, shards: list[ShardFile]) -> tuple[Commit, bool]:
        now = utcnow()
        # Other writers queue on the dataset row's lock, so what needs no lock comes first:
        # the files (a HEAD each on S3), the token (the unique (dataset, token) constraint
        # still catches a twin committed meanwhile) and our intent (gc revokes it before it
        # removes any file, so deleting it here proves the files checked are still ours).
        self.catalog.require_shards(s.path for s in shards)
        with mf.write_txn(self.catalog.engine) as conn:
            prior = self._prior(conn)
            if prior is not None:
                return prior, True
            self._check_intent(conn)
            row = self._dataset_row(conn, lock=True)
            self._check_schema(row)
            new = row.version + 1
            added_records = sum(s.records for s in shards)
            added_bytes = sum(s.bytes for s in shards)
            totals = {
                "records": row.records + added_records,
                "bytes": row.bytes + added_bytes,
                "shard_count": row.shard_count + len(shards),
            }
            swapped = conn.execute(
                _SWAP_VERSION,
                {"ds": self.ds.id, "expected": row.version, "new": new, **{f"new_{k}": v for k, v in totals.items()}},
            ).rowcount
            if swapped != 1:
                raise _Retry()
            conn.execute(
                _INSERT_COMMIT,
                {
                    "dataset_id": self.ds.id,
                    "version": new,
                    "kind": "append",
                    "schema_version": row.schema_version,
                    "created_at": now,
                    "message": self.message,
                    "author": self.author,
                    "read_version": self.read_version,
                    "token": self.token,
                    "records_added": added_records,
                    "shards_added": len(shards),
                    "intent": self.intent_id,
                    **totals,
                },
            )
            if shards:
                conn.execute(
                    _INSERT_SHARD,
                    [
                        {
                            "dataset_id": self.ds.id,
                            "path": s.path,
                            "records": s.records,
                            "bytes": s.bytes,
                            "checksum": s.checksum,
                            "compression": s.compression,
                            "schema_version": row.schema_version,
                            "added_version": new,
                            "removed_version": None,
                            "seq": (new << mf.SEQ_BITS) + i,
                        }
                        for i, s in enumerate(shards)
                    ],
                )
        url = self.catalog.store.url
        infos = [
            ShardInfo(
                url(s.path), s.path, s.records, s.bytes, s.checksum, s.compression, row.schema_version, new
            )
            for s in shards
        ]
        commit = Commit(
            self.ds.name,
            new,
            "append",
            row.schema_version,
            now,
            self.message,
            self.author,
            self.read_version,
            self.token,
            added_records,
            len(shards),
            totals["records"],
            totals["bytes"],
            totals["shard_count"],
            infos,
        )
        return commit, False

    def _check_intent(self, conn: Connection) -> None:
        # gc deletes a dead intent's row before it removes that intent's files, in a
        # transaction of its own: a writer whose intent is gone may have lost files (maybe
        # after require_shards looked), so it must not commit. Deleting our own intent here
        # is both that check and the commit's cleanup (undone if the transaction is).
        if conn.execute(_DELETE_INTENT, {"iid": self.intent_id}).rowcount != 1:
            raise CommitConflictError(
                f"the write intent of this append to {self.ds.name!r} expired (no heartbeat for {INTENT_STALE}) "
                "and gc may have collected its files: nothing was registered; run the append again"
            )

    def _abort(self) -> int | None:
        """Remove this writer's files unless they were committed; the version if they were.

        Whether they were is the manifest's to say, never this process's memory of it: a
        Ctrl-C that lands after the COMMIT but before the commit call returns looks like a
        failure here, and the files then belong to a committed version."""
        if self.sink is None:
            return None
        mine, committed = mf.settle_intent(self.catalog.engine, self.intent_id)
        if mine:
            self.sink.abort()
        return committed


def live_intents(conn: Connection) -> set[str]:
    return set(conn.execute(select(IntentRow.id)).scalars()) - set(intents_dead(conn))


def dead_intents(conn: Connection) -> list[str]:
    """Intents whose writer is gone: no heartbeat for INTENT_STALE, or (at once) a writer
    process of this machine that no longer runs."""
    return intents_dead(conn)


def intents_dead(conn: Connection, among: Sequence[str] | None = None, lock: bool = False) -> list[str]:
    """:func:`dead_intents`, of ``among`` only; ``lock``: FOR UPDATE, for revoking them."""
    query = select(IntentRow.id, IntentRow.heartbeat_at, IntentRow.process)
    if among is not None:
        query = query.where(IntentRow.id.in_(among))
    cutoff = utcnow() - INTENT_STALE
    rows = conn.execute(query.with_for_update() if lock else query).all()
    return [r.id for r in rows if r.heartbeat_at < cutoff or mf.process_is_dead(r.process)]
