"""The manifest's tables: the format itself (columns, types, constraints, indexes), its
version, and the constants the rows are written with.

Adding a column: declare it here (with the format that brought it, in a comment), raise
FORMAT_VERSION, add its step to ``upgrades.py``; nothing else in this package changes
(ARCHITECTURE.md, "Adding a manifest column").
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
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
)

FORMAT_VERSION = 10  # the manifest's own schema version: one step per older format in upgrades.UPGRADES
# A shard's read order: appended shards get (commit version << SEQ_BITS) + index in the
# commit; a rewritten shard (migration, compaction, restore) takes the seq of the shard it
# replaces, so order survives rewrites that commit after newer appends.
SEQ_BITS = 24
DEFAULT_SPLIT = "train"  # the split of shards appended without one, and of every shard before format 4
ID_CHUNK = 5000  # ids per IN (...): stays under every database's bound-parameter limit


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
MOVED_TO = "moved_to"  # catalog_meta key: a manifest switched away from by copy-manifest

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
    # Format 10. The live totals per split right after this commit, as JSON {split: [shards,
    # records, bytes]}: `show` and a split's read plan read them here instead of summing every
    # live shard. NULL where not kept (commits before format 10, and the earlier commits an
    # erasure restated): then they are summed from the shard rows.
    _opt("splits", Text),
    UniqueConstraint("dataset_id", "version"),
    UniqueConstraint("dataset_id", "token"),
)

# A registered shard: its facts and its version range. ``path`` is its ``rel`` in code
# ("<dataset>/<file>", relative to the data area; ARCHITECTURE.md, "Shards: one vocabulary").
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
    # Format 10 (format 4's ix_shards_split_totals, with seq). Totals per split (`show`, `list
    # --json`) from the index alone: 100k live shards summed in 11 ms instead of 90 ms (SQLite),
    # never reading the table's rows; and one split's live shards found in read order (a read
    # plan of a 1% split of 100k shards: 1k index entries, not a pass over all 100k rows).
    Index("ix_shards_split_seq", "dataset_id", "removed_version", "split", "seq", "records", "bytes"),
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

# Format 9. Where a derived dataset came from (`filter`, `map`): one row per commit that made or
# refreshed it, naming the source (by name, and its id when it was made), the version read, the
# operation, its predicate or the function's qualified name and a hash of its code.
LINEAGE = Table(
    "lineage",
    METADATA,
    _id(),
    _dataset_id(),
    _req("version", Integer),  # the derived dataset's commit this row is of
    _req("source", String(256)),
    _opt("source_id", Integer),
    _req("source_version", Integer),
    _req("operation", String(16)),  # "filter" or "map"
    _opt("predicate", Text),  # a filter's --where text; None: a function (``function``)
    _opt("function", Text),  # "module:qualname" of a map's (or a filter's) function
    _opt("code_hash", String(80)),  # "sha256:" of the function's source (or bytecode)
    _opt("split", String(64)),  # the source's split read; None: every split
    _req("batched", Boolean, default=False),
    _req("created_at", DateTime),
    Index("ix_lineage_dataset", "dataset_id", "version"),
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
