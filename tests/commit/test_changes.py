"""catalog.commit.changes: a commit's kind, updates and requirements, typed. What the protocol
asks of a change is answered here (never by comparing kind names)."""

from __future__ import annotations

import pytest

from catalog.commit.changes import (
    APPEND,
    COMPACT,
    MIGRATE,
    RESTORE,
    Change,
    Kind,
    NewShard,
    RecordMigration,
    RequireLive,
    RequireNewBytes,
    RetireShards,
    RevertMigrations,
    SetCompression,
    SetSchema,
    adding,
    updates,
)
from catalog.schema import Schema
from catalog.storage import ShardFile

SHARD = NewShard(ShardFile("d/a.tfrecord", 3, 99, "crc32c:00000000"))
SCHEMA = Schema.from_json({"features": {"x": {"dtype": "int64"}}})


def test_kinds_are_the_text_history_stores() -> None:
    assert [k.value for k in Kind] == [
        "append", "migrate", "compact", "restore", "delete", "update", "erase", "derive", "dedup",
    ]  # fmt: skip
    assert APPEND == "append" and MIGRATE == "migrate"  # what fault hooks and history compare
    assert [k.adds_records for k in (APPEND, MIGRATE, COMPACT, RESTORE)] == [True, False, False, False]


def test_an_append_says_what_an_append_is() -> None:
    change = Change(APPEND, 4, 2, "m", "me", None, (adding([SHARD]),), (RequireNewBytes(),), "tok")
    assert change.add == (SHARD,) and change.retire == frozenset() and change.requires_new_bytes
    assert change.new_schema is None and change.expect_live is None and change.source() is None
    assert "this append to 'd' expired" in APPEND.expired("d") and "run the append again" in APPEND.expired("d")
    assert "reopen the dataset and write rows in the new schema" in APPEND.schema_moved("d", 2, 3)


def test_a_rewrite_names_the_version_it_read() -> None:
    restore = Change(
        RESTORE, 9, 3, "m", "me", "i",
        updates(adding([SHARD]), RetireShards(frozenset({1, 2})), SetSchema(SCHEMA), RevertMigrations(5), None),
        (RequireLive(frozenset({1, 2, 7})),),
    )  # fmt: skip
    assert restore.retire == {1, 2} and restore.expect_live == {1, 2, 7} and restore.new_schema is SCHEMA
    assert restore.source() == "restore of version 5" and not restore.requires_new_bytes
    compact = Change(COMPACT, 9, 3, "m", "me", "i", (adding([SHARD]), SetCompression("gzip")))
    assert compact.source() == "compact of version 9" and compact.new_compression == "gzip"
    migrate = Change(MIGRATE, 9, 3, "m", "me", "i", (RecordMigration({"migration_id": "0001_x"}),))
    assert migrate.migration == {"migration_id": "0001_x"} and migrate.revert_after is None
    moved = MIGRATE.schema_moved("d", 3, 4)
    assert moved.endswith("worked from schema version 3: nothing was registered; run it again")


def test_a_change_takes_each_update_once() -> None:
    with pytest.raises(ValueError, match="a commit takes one RetireShards"):
        Change(COMPACT, 1, 1, "", "", None, (RetireShards(frozenset({1})), RetireShards(frozenset({2}))))


def test_message_and_author_are_checked_as_the_manifest_stores_them() -> None:
    from catalog.errors import UsageError

    with pytest.raises(UsageError, match="message is not UTF-8 text"):
        Change(APPEND, 1, 1, "\ud800", "me", None)


def test_an_update_added_later_is_seen() -> None:
    """A migration adds its compression after building its change: the protocol must see it
    (an accessor that cached the updates at construction lost it, and the dataset kept none)."""
    change = Change(MIGRATE, 1, 1, "", "", None, (RetireShards(frozenset({1})),)).with_updates(SetCompression("zlib"))
    assert change.new_compression == "zlib" and change.retire == {1}
    with pytest.raises(ValueError, match="a commit takes one SetCompression"):
        change.with_updates(SetCompression("gzip"))
