"""A catalog directory: finding it (as git finds .git), where its manifest is, connecting
to it. Light on purpose: `catalog list` needs only this and the manifest. Creating a
catalog, moving its manifest and backing it up are in catalog.ops.provision."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from catalog import manifest as mf
from catalog.errors import CatalogNotFoundError, ManifestError

CATALOG_FILE = "catalog.json"
DEFAULT_DB_FILE = "catalog.db"
DATA_DIR = "data"
MAX_CATALOG_FILE = 1 << 20


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


def locate(path: str | os.PathLike[str] | None = None) -> tuple[Path, str]:
    """(the catalog directory, the URL of its manifest) for ``path`` (see find_root)."""
    root = find_root(path)
    doc = _read_catalog_file(root / CATALOG_FILE)
    recorded = doc.get("db_url")
    if recorded is not None and not isinstance(recorded, str):
        raise ManifestError(f"{root / CATALOG_FILE}: db_url is not a string: {recorded!r}"[:300])
    if recorded is None and not (root / DEFAULT_DB_FILE).exists():
        raise ManifestError(f"{root}: the manifest {DEFAULT_DB_FILE} is missing")
    return root, runtime_url(recorded) if recorded else default_url(root)


def _read_catalog_file(path: Path) -> dict[str, Any]:
    """catalog.json: a small JSON object (the catalog writes a few lines; a hand edit or a sync
    tool may leave anything)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CATALOG_FILE + 1)
        if len(data) > MAX_CATALOG_FILE:
            raise ManifestError(f"{path}: unreadable: larger than {MAX_CATALOG_FILE >> 20} MiB")
        doc = json.loads(data.decode("utf-8"))
    except RecursionError as e:
        raise ManifestError(f"{path}: unreadable: not valid JSON: nested too deeply") from e
    except (OSError, ValueError) as e:
        raise ManifestError(f"{path}: unreadable: {e}") from e
    if not isinstance(doc, dict):
        raise ManifestError(f"{path}: not a JSON object")
    return doc


def connect(root: Path, url: str, check: bool) -> tuple[Engine, str, str | None]:
    """(engine, data root, catalog id) of the manifest at ``url``; the data root as the manifest
    keeps it (a URL, or a path relative to ``root``), resolved by the catalog's store
    (storage.fileio.located): this module tells no URL from a path."""
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
    return engine, data_root, meta.get("catalog_id")


def default_url(root: Path) -> str:
    return f"sqlite:///{(root / DEFAULT_DB_FILE).resolve()}"


def write_atomically(path: Path, text: str) -> None:
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


def runtime_url(recorded: str) -> str:
    """The URL to connect with: the recorded one (no password), or $CATALOG_DB_URL when it
    names the same database, since that is where a password may come from. libpq also
    reads PGPASSWORD and ~/.pgpass by itself."""
    env = os.environ.get("CATALOG_DB_URL")
    if env and mf.safe_url(mf.normalize_url(env)) == mf.safe_url(mf.normalize_url(recorded)):
        return env
    return recorded
