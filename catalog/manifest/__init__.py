"""The manifest: the database that records datasets, commits and shards, and the only place
that knows it is SQLite or PostgreSQL (pragmas and ``BEGIN IMMEDIATE``; snapshot reads and
transient-error retries). The queries elsewhere are portable SQL; commits serialize on their
dataset's row (``SELECT ... FOR UPDATE``, which SQLite, holding the whole database's write
lock, does not need).

One module per concern, each importing only those below it (pyproject's "the manifest
package's own order"):

- ``copying`` (copy-manifest), ``upgrades`` (UPGRADES, ``upgrade``: format n to n + 1)
- ``meta`` (``catalog_meta``: creating a manifest, the format check, the catalog id)
- ``transactions`` (``write_txn``, ``read_txn``, ``with_lock_retry``), ``rows`` (many rows at once)
- ``engine`` (engines, SQLite's connection set-up, errors as one ManifestError line)
- ``write_queue`` (SQLite's writers' queue), ``urls`` (database URLs without passwords),
  ``processes`` (process identity: whose intent, whose pending dataset)
- ``tables`` (the tables, FORMAT_VERSION, the constants rows are written with)

Write intents' rows are the commit layer's (``catalog.commit.intents``): here is only their table.
Callers import from here (``from catalog import manifest as mf``), not from the modules.
"""

from __future__ import annotations

from catalog.errors import ManifestError
from catalog.manifest.copying import COPY_CHUNK, copy_manifest
from catalog.manifest.engine import (
    BUSY_TIMEOUT_MS,
    CONNECT_TIMEOUT_S,
    VERIFY_HINT,
    check_connection,
    damaged,
    integrity_problems,
    make_engine,
    manifest_errors,
    manifest_where,
    scrub,
)
from catalog.manifest.meta import check_format, create_manifest, ensure_catalog_id, has_manifest, read_meta
from catalog.manifest.processes import abandoned, host_and_pid, process_identity, process_is_dead
from catalog.manifest.rows import fetch_column, fetch_rows, update_shards
from catalog.manifest.tables import (
    APPLIED_MIGRATIONS,
    COMMITS,
    DATASETS,
    DEFAULT_SPLIT,
    FORMAT_VERSION,
    ID_CHUNK,
    INTENTS,
    LINEAGE,
    META,
    METADATA,
    MOVED_TO,
    SCHEMA_VERSIONS,
    SEQ_BITS,
    SHARD_STATS,
    SHARDS,
    TAGS,
    utcnow,
)
from catalog.manifest.transactions import LOCK_RETRIES, check_not_moved, read_txn, with_lock_retry, write_txn
from catalog.manifest.upgrades import UPGRADES, upgrade
from catalog.manifest.urls import PASSWORD_QUERY_KEY, has_password, normalize_url, redact, safe_url
from catalog.manifest.write_queue import QUEUE_SUFFIX, WRITE_QUEUE

__all__ = [
    # tables
    "FORMAT_VERSION", "SEQ_BITS", "DEFAULT_SPLIT", "ID_CHUNK", "MOVED_TO", "utcnow", "METADATA",
    "META", "DATASETS", "SCHEMA_VERSIONS", "COMMITS", "SHARDS", "SHARD_STATS", "APPLIED_MIGRATIONS",
    "TAGS", "INTENTS", "LINEAGE",
    # processes, urls, the writers' queue
    "host_and_pid", "process_identity", "process_is_dead", "abandoned",
    "PASSWORD_QUERY_KEY", "normalize_url", "safe_url", "has_password", "redact",
    "WRITE_QUEUE", "QUEUE_SUFFIX",
    # engine
    "BUSY_TIMEOUT_MS", "CONNECT_TIMEOUT_S", "VERIFY_HINT", "ManifestError", "make_engine", "check_connection",
    "manifest_errors", "manifest_where", "damaged", "integrity_problems", "scrub",
    # transactions, rows
    "LOCK_RETRIES", "with_lock_retry", "write_txn", "read_txn", "check_not_moved",
    "fetch_rows", "fetch_column", "update_shards",
    # meta, upgrades, copying
    "create_manifest", "ensure_catalog_id", "has_manifest", "read_meta", "check_format",
    "UPGRADES", "upgrade", "COPY_CHUNK", "copy_manifest",
]  # fmt: skip
