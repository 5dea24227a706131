"""The manifest's own facts (``catalog_meta``): creating a manifest, its format check, its
catalog id.
"""

from __future__ import annotations

from sqlalchemy import Engine, insert, inspect, select

from catalog.errors import ManifestError
from catalog.manifest.engine import check_connection, manifest_errors, manifest_where
from catalog.manifest.tables import FORMAT_VERSION, META, METADATA, utcnow
from catalog.manifest.transactions import read_txn, with_lock_retry, write_txn


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
        raise ManifestError(f"{manifest_where(engine)}: not a catalog manifest (no {META.name} table)")
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
