"""Tags: names for versions of a dataset (``run-42`` -> version 7). Readers take a tag wherever
they take a version number (commit.handles.resolve_version); gc never collects a shard that a
tagged version needs (catalog.ops.maintenance).

Writing a tag is one manifest transaction holding the dataset row's lock, as a commit does:
gc marks retired shards collected under the same locks, so a tag either lands before that
marking (and gc sees it and keeps the shards) or after it (and is refused here, its version
no longer readable). Tags never move: re-tagging a name at another version is refused, so a
training run pinned to a tag keeps reading the same records until the tag is deleted.
"""

from __future__ import annotations

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Connection

from catalog import manifest as mf
from catalog.commit.handles import DatasetHandle, unknown_tag
from catalog.commit.values import Tag, VersionRef, default_author, manifest_text, validate_tag
from catalog.errors import CommitConflictError, DatasetNotFoundError, VersionNotFoundError
from catalog.manifest import DATASETS, TAGS, utcnow


def _lock_dataset(conn: Connection, ds: DatasetHandle) -> None:
    """Take the dataset row's lock (PostgreSQL; SQLite's write transaction holds the database's)."""
    if conn.execute(select(DATASETS.c.id).where(DATASETS.c.id == ds.id).with_for_update()).first() is None:
        raise DatasetNotFoundError(f"dataset {ds.name!r} was dropped", ds.name)


def tag(ds: DatasetHandle, name: str, version: VersionRef = None, author: str | None = None) -> Tag:
    """Name ``version`` (default: the current one; a number or another tag) ``name``. Tagging
    the version a tag already names again is a no-op that returns it; another version is refused."""
    validate_tag(name)
    author = manifest_text(author, "author") or None

    def txn() -> Tag:
        with mf.write_txn(ds.catalog.engine) as conn:
            _lock_dataset(conn, ds)
            try:
                v, _sv, _live = ds._live(conn, version)  # refuses a version gc made unreadable
            except VersionNotFoundError as e:
                raise VersionNotFoundError(f"cannot tag: {e}") from None
            old = conn.execute(select(TAGS).where(TAGS.c.dataset_id == ds.id, TAGS.c.name == name)).first()
            if old is not None:
                if old.version != v:
                    raise CommitConflictError(
                        f"tag {name!r} of {ds.name!r} already names version {old.version}; tags never move "
                        f"(delete it first: `catalog tag {ds.name} {name} --delete`)"
                    )
                return Tag(ds.name, old.name, old.version, old.created_at, old.author)
            made = Tag(ds.name, name, v, utcnow(), author or default_author())
            conn.execute(
                insert(TAGS).values(dataset_id=ds.id, name=name, version=v, created_at=made.created, author=made.author)
            )
            return made

    return mf.with_lock_retry(txn)


def untag(ds: DatasetHandle, name: str) -> Tag:
    """Delete tag ``name``; returns it as it was. The shards only it kept go at the next gc."""

    def txn() -> Tag:
        with mf.write_txn(ds.catalog.engine) as conn:
            _lock_dataset(conn, ds)
            old = conn.execute(select(TAGS).where(TAGS.c.dataset_id == ds.id, TAGS.c.name == name)).first()
            if old is None:
                raise unknown_tag(conn, ds.id, ds.name, name)
            conn.execute(delete(TAGS).where(TAGS.c.id == old.id))
            return Tag(ds.name, old.name, old.version, old.created_at, old.author)

    return mf.with_lock_retry(txn)
