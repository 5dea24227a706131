"""The manifest's tables described for operators (the documentation site's
``reference/manifest-tables.md``, through ``docs/hooks.py``). What each table and column holds
is said here; names, types, nullability, keys and indexes are read from ``tables.METADATA``,
and tests/manifest/test_reference.py checks that every table and column is described, so the
page cannot drift from the format."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, Index, Table, UniqueConstraint

from catalog.manifest.tables import FORMAT_VERSION, METADATA

__all__ = ["ABOUT", "markdown"]

# table -> (what a row is, {column: what it holds})
ABOUT: dict[str, tuple[str, dict[str, str]]] = {
    "catalog_meta": (
        "The manifest's own facts, one key a row, which every client must agree on.",
        {
            "key": "`format_version` (this page's format), `data_root` (where the shards are: a directory or "
            "a URL), `created_at`, `catalog_id` (the id the data area's marker names), `moved_to` (set on a "
            "manifest `copy-manifest` switched away from: where it went)",
            "value": "the value, as text",
        },
    ),
    "datasets": (
        "One row a dataset, with its current version and its totals over live shards (kept by every "
        "commit, so `list` and `show` never scan shards). A commit locks this row.",
        {
            "id": "the dataset's id, which other tables' `dataset_id` names",
            "name": "its name, unique",
            "description": "the description given at registration",
            "created_at": "when it was registered (UTC)",
            "version": "the current version: raised by one by every commit",
            "schema_version": "the schema version the current version's records follow",
            "records": "records in the live shards",
            "bytes": "bytes of the live shards",
            "shard_count": "live shards",
            "compression": "how new shards are stored: `none`, `gzip` or `zlib`",
            "pending": "set while a dataset registered for its inputs (`adopt`, `register --infer`) awaits "
            "its first commit: the registering process; readers skip such a dataset",
        },
    ),
    "schema_versions": (
        "Every schema a dataset has had: version 1 at registration, one more per migration. Old "
        "versions keep theirs, so they stay readable.",
        {
            "id": "row id",
            "dataset_id": "the dataset",
            "version": "the schema version, from 1",
            "schema_json": "the schema in its JSON form (reference/schema.md; a JSON Schema validates it)",
            "fingerprint": "sha256 of the canonical JSON (`Schema.fingerprint`)",
            "created_at": "when it was made (UTC)",
            "commit_version": "the dataset version whose commit made it",
        },
    ),
    "commits": (
        "The history: one row a dataset version, with the totals right after it (time travel shows them "
        "without a scan).",
        {
            "id": "row id",
            "dataset_id": "the dataset",
            "version": "the dataset version this commit made (gapless from 1)",
            "kind": "what it did: append, migrate, compact, restore, delete, update, erase, derive or dedup",
            "schema_version": "the schema version of this version's records",
            "created_at": "when it committed (UTC)",
            "message": "its message (`-m`)",
            "author": "who made it (`--author`, else the user)",
            "read_version": "the version the writer read when it planned the work",
            "token": "the idempotency token (`--token`) a retry is recognised by",
            "records_added": "new records: an append's (or a derivation's); 0 for a rewrite (migrate, compact, "
            "delete, ...), whose new shards hold records that were there",
            "shards_added": "shards it added",
            "records": "the dataset's records right after it",
            "bytes": "the dataset's bytes right after it",
            "shard_count": "the dataset's live shards right after it",
            "intent": "the write intent it consumed: how an interrupted writer learns it committed",
            "splits": "the dataset's live totals per split right after it (JSON: split -> [shards, records, "
            "bytes]), which `show` and planning a split read in one row; null for commits before format 10 "
            "and the earlier commits an erasure restated (summed from the shard rows then)",
        },
    ),
    "shards": (
        "Every shard file ever registered, live or retired: its facts and the versions in which it is "
        "live (`added_version` up to, not including, `removed_version`).",
        {
            "id": "row id",
            "dataset_id": "the dataset",
            "path": "`<dataset>/<file>`, relative to the data area (`data_root`)",
            "records": "records in the file",
            "bytes": "the file's size",
            "checksum": "`crc32c:` and 8 hex digits: the whole file's CRC32C",
            "compression": "`none`, `gzip` or `zlib`",
            "schema_version": "the schema version its records follow",
            "added_version": "the version whose commit registered it",
            "removed_version": "the version whose commit retired it (a tombstone); NULL while live",
            "seq": "read order within the dataset (a rewritten shard takes its source's)",
            "collected_at": "when gc deleted the file of a retired shard no kept version needs",
            "split": "its split (`train` unless given)",
            "index_checksum": "`crc32c:` of its record index file (`.index/<path>.idx` in the data area); "
            "NULL: no index (compressed, linked, or registered before format 4)",
            "source": "where it came from: the input's path or URL, `rows` (Python), or `<kind> of version N`",
            "location": "an adopted shard's own place outside the data area, which the catalog never "
            "writes or deletes; NULL: the file is at `path`",
            "fingerprint": "what the content check compares a shared file with: `owned`, `stat:...`, "
            "`etag:...` or `unchecked`",
        },
    ),
    "shard_stats": (
        "A shard's feature statistics (counts, moments, sketches), kept apart so listing shards never loads them.",
        {
            "path": "the shard's `path`",
            "dataset_id": "the dataset",
            "data": "the statistics as zlib-compressed JSON",
        },
    ),
    "applied_migrations": (
        "The migrations applied to a dataset, Flyway's schema history: a script edited after it was "
        "applied is refused.",
        {
            "id": "row id",
            "dataset_id": "the dataset",
            "migration_id": "the script's stem (`0001_add_height`) or a quick migration's (`0002_quick`)",
            "checksum": "`sha256:` of the script (a quick one's: of its operations)",
            "operations": "a quick migration's operations, as JSON",
            "from_schema_version": "the schema version it read",
            "to_schema_version": "the schema version it made",
            "applied_version": "the dataset version its commit made",
            "reverted_version": "the version of a restore to before it; NULL: in force",
            "rows": "rows it rewrote",
            "seconds": "how long it took",
            "applied_at": "when it committed (UTC)",
            "author": "who applied it",
        },
    ),
    "tags": (
        "Names for versions (`catalog tag`): readers pin them, gc keeps what they need.",
        {
            "id": "row id",
            "dataset_id": "the dataset",
            "name": "the tag, unique within the dataset",
            "version": "the version it names",
            "created_at": "when it was made (UTC)",
            "author": "who made it",
        },
    ),
    "lineage": (
        "Where a derived dataset (`filter`, `map`) came from: one row per commit that made or refreshed it.",
        {
            "id": "row id",
            "dataset_id": "the derived dataset",
            "version": "the derived dataset's version this row is of",
            "source": "the source dataset's name",
            "source_id": "the source's id when it was made",
            "source_version": "the source version read",
            "operation": "`filter` or `map`",
            "predicate": "a filter's `--where` text",
            "function": "`module:qualname` of the function",
            "code_hash": "`sha256:` of the function's source (or bytecode)",
            "split": "the source's split read; NULL: every split",
            "batched": "whether the function took batches of columns",
            "created_at": "when (UTC)",
        },
    ),
    "write_intents": (
        "Writers at work: a row from before a writer makes its first file until its commit consumes it; "
        "gc leaves files named after a live intent alone.",
        {
            "id": "the intent's id, also the prefix of its files' names",
            "dataset": "the dataset being written",
            "created_at": "when the writer started (UTC)",
            "heartbeat_at": "the writer's last heartbeat (UTC)",
            "pid": "the writer's process id",
            "host": "the writer's host",
            "process": "the writer's process identity (pid and start time), so gc on the same host knows "
            "at once that it died",
        },
    ),
}


def markdown() -> str:
    """Every table of the manifest, as Markdown."""
    parts = [f"The manifest's format version is **{FORMAT_VERSION}** (`catalog --version` says it).\n"]
    parts += [_table(table) for table in METADATA.tables.values()]
    return "\n".join(parts)


def _table(table: Table) -> str:
    about, columns = ABOUT[table.name]
    rows = [f"| `{c.name}` | {_type(c)} | {_key(c)} | {columns[c.name]} |" for c in table.columns]
    lines = [f"## {table.name}\n", f"{about}\n", "| column | type | key | what it holds |", "|---|---|---|---|"]
    lines += rows
    lines.append("")
    lines += [f"- {fact}" for fact in _constraints(table)]
    return "\n".join(lines) + "\n"


def _type(column: Column[Any]) -> str:
    text = f"`{column.type}`" + ("" if column.nullable else " not null")
    default = column.server_default if column.server_default is not None else column.default
    value = getattr(default, "arg", None)
    if value is not None:
        value = getattr(value, "text", value)  # a server default's SQL text
        text += f", default `{value!r}`" if isinstance(value, str) else f", default `{value}`"
    return text


def _key(column: Column[Any]) -> str:
    keys = ["primary key"] if column.primary_key else []
    if column.unique:
        keys.append("unique")
    for fk in column.foreign_keys:
        on_delete = f" (on delete {fk.ondelete.lower()})" if fk.ondelete else ""
        keys.append(f"→ `{fk.target_fullname}`{on_delete}")
    return ", ".join(keys)


def _constraints(table: Table) -> list[str]:
    facts = []
    for constraint in sorted(table.constraints, key=lambda c: str(c.name or type(c).__name__)):
        if isinstance(constraint, UniqueConstraint) and len(constraint.columns) > 1:
            facts.append(f"unique together: {', '.join(f'`{c.name}`' for c in constraint.columns)}")
    indexes: list[Index] = sorted(table.indexes, key=lambda i: str(i.name))
    facts += [f"index `{i.name}` on {', '.join(f'`{c.name}`' for c in i.columns)}" for i in indexes]
    return facts
