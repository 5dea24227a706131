"""Making and moving a catalog: creating its directory and manifest all or nothing (with a
data area it owns), switching it to a copy of its manifest, and backing the manifest up."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError

from catalog import faults
from catalog import manifest as mf
from catalog.commit.handles import CatalogHandle
from catalog.directory import CATALOG_FILE, DATA_DIR, default_url, write_atomically
from catalog.errors import CatalogError, DataAreaError, ManifestError, StorageError, UsageError
from catalog.storage import (
    Store,
    check_target,
    clear_dead_partials,
    new_catalog_id,
    partial_path,
    publish_written,
    store_for,
)
from catalog.storage.fileio import file_io, located, storage_root


def create(
    path: str | os.PathLike[str], db_url: str | None = None, storage: str | os.PathLike[str] | None = None
) -> tuple[Path, str]:
    """Make the catalog directory ``path``; returns (its resolved path, the manifest's URL).
    With ``db_url`` (or $CATALOG_DB_URL) naming a database that already holds a manifest,
    the directory attaches to it: another machine joining."""
    if storage is not None and not os.fspath(storage).strip():
        raise UsageError("--storage is empty: name a directory or URL (or leave it out for DIR/data)")
    root = Path(path)
    if (root / CATALOG_FILE).exists():
        raise UsageError(f"{root}: already a catalog")
    if root.exists() and not root.is_dir():
        raise StorageError(f"{root}: not a directory")
    db_url = db_url or os.environ.get("CATALOG_DB_URL")
    url = db_url or default_url(root.resolve())
    undo = _Undo()  # all or nothing: a failed init leaves nothing it made behind
    engine = mf.make_engine(url)
    try:
        undo.mkdirs(root)
        if db_url is None:  # the SQLite file and its companions: ours to remove if init fails
            undo.files(Path(url.removeprefix("sqlite:///")), "", "-wal", "-shm", "-journal")
        data_root = _create_or_attach(engine, root, storage, shared=db_url is not None, undo=undo)
        if not file_io(data_root).remote:
            undo.mkdirs(root / data_root)  # root / an absolute path = that path
        # Which manifest this directory uses, nothing more: its format is the manifest's own (meta),
        # which `upgrade` moves for every directory attached to it; a copy here would go stale.
        doc = {"db_url": mf.safe_url(mf.normalize_url(db_url)) if db_url else None}
        undo.files(root / CATALOG_FILE, "")
        write_atomically(root / CATALOG_FILE, json.dumps(doc, indent=2) + "\n")
    except BaseException as e:
        engine.dispose()
        undo.run()
        if isinstance(e, OSError):
            raise StorageError(f"{e.filename or root}: cannot create the catalog: {e.strerror or e}") from e
        raise
    engine.dispose()
    return root.resolve(), url


def copy_manifest(cat: CatalogHandle, db_url: str, switch: bool = True) -> dict[str, int]:
    """Copy the manifest, every row of it, into the empty database at ``db_url`` (SQLite or
    PostgreSQL); with ``switch``, this catalog directory uses the copy from then on. Other
    directories attached to the old manifest keep using it: attach them anew."""
    url = mf.normalize_url(db_url)
    target = mf.make_engine(url)
    try:
        shared = target.dialect.name != "sqlite"
        data_root = (cat.store.root if cat.store.remote else str(cat.data_root.resolve())) if shared else None
        counts = mf.copy_manifest(cat.engine, target, data_root, move=switch)
    finally:
        target.dispose()
    if switch:
        doc = {"db_url": None if url == default_url(cat.root) else mf.safe_url(url)}
        write_atomically(cat.root / CATALOG_FILE, json.dumps(doc, indent=2) + "\n")
    return counts


def backup(cat: CatalogHandle, out: str | os.PathLike[str], force: bool = False) -> Path:
    """A consistent copy of the manifest in a new SQLite file: SQLite's online backup API,
    or, from PostgreSQL, :func:`copy_manifest` (every row, writers held meanwhile). Written
    under a partial name, fsynced, then published without replacing anything (``force``:
    replacing the file there, in one rename): a killed backup leaves no file under ``out``,
    or the one that was there (the next one removes its partial file). A SQLite manifest of an
    older format is copied as it is: the backup to take before `catalog upgrade`."""
    _check_backup_format(cat.engine)
    target = Path(out)
    own = (str(cat.root),) if cat.store.remote else (str(cat.root), cat.store.root)
    check_target(target, force, cat.root, own)
    if not target.parent.is_dir():
        raise StorageError(f"{target}: cannot write there: no such directory")
    clear_dead_partials(target.parent)
    temp = partial_path(target)
    try:
        faults.point("backup.write", target=target)
        _backup_to(cat.engine, temp)
        with open(temp, "rb+") as f:
            os.fsync(f.fileno())
        publish_written(temp, target, force)
    except OSError as e:
        raise StorageError(f"{target}: cannot write the backup: {e.strerror or e}") from e
    finally:
        for leftover in (temp, Path(f"{temp}-journal")):
            leftover.unlink(missing_ok=True)
    return target


def _check_backup_format(engine: Engine) -> None:
    """A SQLite manifest of an older format is backed up as it is: SQLite's backup copies its
    pages, whatever tables they hold, and that copy is the one to take before `catalog upgrade`.
    Any other manifest is checked as every command checks it (a PostgreSQL one is copied row by
    row through this format's tables)."""
    meta = mf.read_meta(engine)
    found = meta.get("format_version", "")
    if engine.dialect.name == "sqlite" and found.isdigit() and int(found) < mf.FORMAT_VERSION:
        return
    mf.check_format(meta)


def _backup_to(engine: Engine, path: Path) -> None:
    if engine.dialect.name != "sqlite":
        copy = mf.make_engine(f"sqlite:///{path.resolve()}")
        try:
            mf.copy_manifest(engine, copy)
        finally:
            copy.dispose()
        return
    raw = engine.raw_connection()
    try:
        dest = sqlite3.connect(path)
        try:
            raw.driver_connection.backup(dest)  # type: ignore[union-attr]
        finally:
            dest.close()
    except sqlite3.Error as e:  # the directory is read-only, /proc, the disk is full: one line
        raise StorageError(f"{path}: cannot write the backup: {e}") from e
    finally:
        raw.close()


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
        store = store_for(located(root, data_root))
        store.check()
        store.check_new()
        catalog_id = new_catalog_id()
        if not store.remote:
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
        raise UsageError(f"this manifest keeps its data at {found}, not {storage}: leave out --storage to attach")
    _attach_owner(store_for(located(root, found)), meta.get("catalog_id"))
    return found


def _attach_owner(store: Store, catalog_id: str | None) -> None:
    """Joining an existing manifest: its data area must be its own (marked now if not yet)."""
    if catalog_id is None:
        return  # made before ids: its first gc marks the data area
    owner = store.claim(catalog_id)
    if owner != catalog_id:
        raise DataAreaError(
            f"{store.root}: the data area of catalog {owner}, not of this manifest's ({catalog_id}); not attached"
        )


def _new_data_root(root: Path, storage: str | os.PathLike[str] | None, shared: bool) -> str:
    """Where a new manifest keeps its shards: relative to the catalog directory for the
    embedded default (the directory can move), absolute for a shared database (other
    machines attaching resolve it the same way)."""
    if storage is not None:
        return storage_root(storage)
    return str((root / DATA_DIR).resolve()) if shared else DATA_DIR
