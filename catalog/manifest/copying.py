"""``copy-manifest``: every row of one manifest into an empty database, ids included, writers
held off meanwhile; with ``move``, the source marked moved in the same transaction.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, Integer, insert, select, update
from sqlalchemy.engine import Connection

from catalog.errors import ManifestError
from catalog.manifest.engine import manifest_errors, manifest_where
from catalog.manifest.meta import check_format, has_manifest
from catalog.manifest.tables import INTENTS, META, METADATA, MOVED_TO
from catalog.manifest.transactions import write_txn

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
        raise ManifestError(f"{manifest_where(target)} already holds a manifest; copy into an empty database")
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
            src.execute(insert(META), [{"key": MOVED_TO, "value": manifest_where(target)}])
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
