"""Format upgrades: UPGRADES[n] brings a manifest from format n to n + 1 (``catalog upgrade``).

A new format adds its step here (``_upgrade_<n>_to_<n+1>``, the DDL its new columns and
indexes need; a new table needs none: ``create_all`` makes it) and its entry in UPGRADES;
``upgrade`` reads UPGRADES when it runs: an item set in it (``catalog.manifest.UPGRADES`` is
the same dict) is obeyed; a new dict set on the package would not be.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Engine, update
from sqlalchemy.engine import Connection

from catalog.errors import ManifestError
from catalog.manifest.engine import manifest_errors
from catalog.manifest.meta import check_format, read_meta
from catalog.manifest.tables import DEFAULT_SPLIT, FORMAT_VERSION, META, METADATA, SEQ_BITS
from catalog.manifest.transactions import write_txn


def _upgrade_1_to_2(conn: Connection) -> None:
    """Format 2: shards get a read order (seq) and a collected mark; migrations get a table."""
    conn.exec_driver_sql("ALTER TABLE shards ADD COLUMN seq BIGINT NOT NULL DEFAULT 0")
    conn.exec_driver_sql("ALTER TABLE shards ADD COLUMN collected_at DATETIME")
    # The order format 1 read in (by id), expressed as format 2's seq.
    conn.exec_driver_sql(
        f"UPDATE shards SET seq = added_version * {1 << SEQ_BITS} + id - "
        "(SELECT MIN(s2.id) FROM shards s2 WHERE s2.dataset_id = shards.dataset_id "
        "AND s2.added_version = shards.added_version)"
    )
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_shards_live")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_shards_live_seq ON shards (dataset_id, removed_version, seq)")


def _upgrade_2_to_3(conn: Connection) -> None:
    """Format 3: a commit names the intent it consumed; an intent names its writer process."""
    conn.exec_driver_sql("ALTER TABLE commits ADD COLUMN intent VARCHAR(64)")
    conn.exec_driver_sql("ALTER TABLE write_intents ADD COLUMN process VARCHAR(160)")


def _upgrade_3_to_4(conn: Connection) -> None:
    """Format 4: shards get a split (every existing one: train) and a record index; tags
    (a new table, made by create_all) name versions."""
    conn.exec_driver_sql(f"ALTER TABLE shards ADD COLUMN split VARCHAR(64) DEFAULT '{DEFAULT_SPLIT}' NOT NULL")
    conn.exec_driver_sql("ALTER TABLE shards ADD COLUMN index_checksum VARCHAR(64)")
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_shards_split_totals "
        "ON shards (dataset_id, removed_version, split, records, bytes)"
    )


def _upgrade_4_to_5(conn: Connection) -> None:
    """Format 5: a dataset's compression (every existing one: none) and each shard's source
    (unknown, NULL, for the shards registered before)."""
    conn.exec_driver_sql("ALTER TABLE datasets ADD COLUMN compression VARCHAR(8) DEFAULT 'none' NOT NULL")
    conn.exec_driver_sql("ALTER TABLE shards ADD COLUMN source TEXT")
    conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_shards_checksum ON shards (dataset_id, checksum)")


def _upgrade_5_to_6(conn: Connection) -> None:
    """Format 6: shards adopted in place have a location of their own (none before); a dataset
    registered for its inputs is pending until its first commit (none is, before)."""
    conn.exec_driver_sql("ALTER TABLE shards ADD COLUMN location TEXT")
    conn.exec_driver_sql("ALTER TABLE datasets ADD COLUMN pending VARCHAR(160)")


def _upgrade_6_to_7(conn: Connection) -> None:
    """Format 7: shards' statistics, in their own table (create_all made it): none is
    computed for the shards registered before (`catalog stats NAME --compute`)."""


def _upgrade_7_to_8(conn: Connection) -> None:
    """Format 8: shards get the fingerprint of their file (NULL for those registered before:
    the content check then checksums an adopted or linked file once per process)."""
    conn.exec_driver_sql("ALTER TABLE shards ADD COLUMN fingerprint VARCHAR(160)")


def _upgrade_8_to_9(conn: Connection) -> None:
    """Format 9: derived datasets' lineage, in its own table (create_all made it): none for
    the datasets made before."""


def _upgrade_9_to_10(conn: Connection) -> None:
    """Format 10: the per-split index gets the read order (seq), so one split's shards are found
    in order without a pass over the dataset's; it replaces format 4's, which it covers. Commits
    keep their live totals per split (NULL for the commits before: summed from the shards, and
    kept from the next commit on)."""
    conn.exec_driver_sql("ALTER TABLE commits ADD COLUMN splits TEXT")
    conn.exec_driver_sql("DROP INDEX IF EXISTS ix_shards_split_totals")
    conn.exec_driver_sql(
        "CREATE INDEX IF NOT EXISTS ix_shards_split_seq "
        "ON shards (dataset_id, removed_version, split, seq, records, bytes)"
    )


# Upgrade steps: UPGRADES[n] brings a manifest from format n to n + 1 inside one transaction.
UPGRADES: dict[int, Callable[[Connection], None]] = {
    1: _upgrade_1_to_2,
    2: _upgrade_2_to_3,
    3: _upgrade_3_to_4,
    4: _upgrade_4_to_5,
    5: _upgrade_5_to_6,
    6: _upgrade_6_to_7,
    7: _upgrade_7_to_8,
    8: _upgrade_8_to_9,
    9: _upgrade_9_to_10,
}


def upgrade(engine: Engine) -> tuple[int, int]:
    """Bring the manifest to FORMAT_VERSION; returns (from, to)."""
    meta = read_meta(engine)
    start = int(meta.get("format_version", "0"))
    if start > FORMAT_VERSION:
        check_format(meta)
    METADATA.create_all(engine)  # tables new in this format appear empty
    current = start
    while current < FORMAT_VERSION:
        step = UPGRADES.get(current)
        if step is None:
            raise ManifestError(f"no upgrade path from manifest format {current}")
        with manifest_errors(engine), write_txn(engine) as conn:
            step(conn)
            conn.execute(update(META).where(META.c.key == "format_version").values(value=str(current + 1)))
        current += 1
    return start, current
