"""What a commit does, typed: its kind, the updates it makes and the requirements the
dataset must meet for it to go in (the model is PyIceberg's TableUpdate/TableRequirement).

The protocol (``commit.protocol``) checks the requirements against the dataset's row and
live shards inside the commit's transaction, then applies the updates; nothing in it asks
which verb made the change: what differs between an append and a rewrite is said by their
:class:`Kind`, an update or a requirement here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Generic, Protocol, TypeVar

from catalog.commit.values import INTENT_STALE, manifest_text
from catalog.manifest import DEFAULT_SPLIT
from catalog.schema import Schema
from catalog.storage import ShardFile


class Kind(str, Enum):
    """A kind of commit, as history stores it (``commits.kind``; equal to that text)."""

    APPEND = "append"
    MIGRATE = "migrate"
    COMPACT = "compact"
    RESTORE = "restore"
    DELETE = "delete"  # rows a predicate matched removed: their shards rewritten without them
    UPDATE = "update"  # features of the rows a predicate matched set anew
    ERASE = "erase"  # rows a predicate matched removed from every version that held them
    DERIVE = "derive"  # a dataset's rows made from another's (filter, map): new records, as an append's
    DEDUP = "dedup"  # every record but the first of each key (or content) removed

    @property
    def adds_records(self) -> bool:
        """Its new shards hold new records (an append); a rewrite's hold those it retires."""
        return self in (Kind.APPEND, Kind.DERIVE)

    def expired(self, dataset: str) -> str:
        """The line for a commit whose write intent gc revoked meanwhile."""
        what, again = f"this {self.value} of {dataset!r} expired", "run it again"
        if self.adds_records:
            what = f"this append to {dataset!r} expired (no heartbeat for {INTENT_STALE})"
            again = "run the append again"
        return f"the write intent of {what} and gc may have collected its files: nothing was registered; {again}"

    def schema_moved(self, dataset: str, planned: int, found: int) -> str:
        """The line for a change worked out against schema version ``planned``, now ``found``."""
        if self.adds_records:
            return (
                f"dataset {dataset!r} is now at schema version {found}, but this append was "
                f"validated against schema version {planned}: nothing was registered; "
                "reopen the dataset and write rows in the new schema"
            )
        return (
            f"dataset {dataset!r} moved to schema version {found} while this {self.value} worked from "
            f"schema version {planned}: nothing was registered; run it again"
        )


APPEND, MIGRATE, COMPACT, RESTORE = Kind.APPEND, Kind.MIGRATE, Kind.COMPACT, Kind.RESTORE
DELETE, UPDATE, ERASE, DERIVE, DEDUP = Kind.DELETE, Kind.UPDATE, Kind.ERASE, Kind.DERIVE, Kind.DEDUP


@dataclass(frozen=True)
class NewShard:
    """A shard file a commit registers, and where it goes: its read order (``seq``; None:
    after everything live, in the order given, as an append's), the schema version its
    records are in (None: the dataset's at the commit) and its split (a rewrite's keeps its
    source's). Apart from the ``ShardFile`` it wraps: these are the commit's decisions, not
    facts of the file the storage layer wrote."""

    file: ShardFile
    seq: int | None = None
    schema_version: int | None = None
    split: str = DEFAULT_SPLIT


# ---- updates: what the commit writes


@dataclass(frozen=True)
class AddShards:
    shards: tuple[NewShard, ...]


class _ReadShard(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def rel(self) -> str: ...


@dataclass(frozen=True)
class RetireShards:
    """Live shards the commit retires (each must be live, and at the file the change read: else
    the live set changed, and the commit is refused with LiveChanged). ``read``: (id, rel) of
    the files read, when the commit adds what it made of them: an erasure that replaced one of
    those files meanwhile would see its rows come back from the copy made before it."""

    ids: frozenset[int]
    read: tuple[tuple[int, str], ...] = ()

    @classmethod
    def of(cls, shards: Iterable[_ReadShard]) -> RetireShards:
        """The shards whose files a rewrite read, retired for what it made of them."""
        read = tuple(sorted((s.id, s.rel) for s in shards))
        return cls(frozenset(i for i, _ in read), read)


@dataclass(frozen=True)
class SetSchema:
    """The dataset's next schema version (the current one + 1)."""

    schema: Schema


@dataclass(frozen=True)
class SetCompression:
    """How the dataset stores its new shards from this commit on."""

    compression: str


@dataclass(frozen=True)
class RecordMigration:
    """An applied_migrations row (without its ids and versions)."""

    row: dict[str, Any]


@dataclass(frozen=True)
class RevertMigrations:
    """A restore of version ``after``: the migrations applied since are pending again."""

    after: int


@dataclass(frozen=True)
class RecordLineage:
    """A lineage row of a derived dataset (without its dataset, version and time)."""

    row: dict[str, Any]


@dataclass(frozen=True)
class Replacement:
    """A registered shard's file swapped for a copy without some of its records: the row ``id``
    (whose file is ``rel`` when planned) keeps its versions, place and split; ``file`` None: no
    record is left, the row goes."""

    id: int
    rel: str
    file: ShardFile | None


@dataclass(frozen=True)
class ReplaceShards:
    """Shards, live or retired, whose files an erasure replaced: every version that reads one
    reads its copy from this commit on (the only update that changes what an old version holds)."""

    items: tuple[Replacement, ...]


Update = (
    AddShards
    | RetireShards
    | SetSchema
    | SetCompression
    | RecordMigration
    | RevertMigrations
    | ReplaceShards
    | RecordLineage
)


# ---- requirements: what the dataset must be for the commit to go in


@dataclass(frozen=True)
class RequireLive:
    """The live shards must be exactly ``ids`` (a rewrite planned on them; else LiveChanged)."""

    ids: frozenset[int]


@dataclass(frozen=True)
class RequireNewBytes:
    """No input's shards may have the bytes of live shards (an input appended twice)."""


Requirement = RequireLive | RequireNewBytes


_Item = TypeVar("_Item")
_Value = TypeVar("_Value")
_NO_SHARDS: tuple[NewShard, ...] = ()
_NO_IDS: frozenset[int] = frozenset()
_NO_READ: tuple[tuple[int, str], ...] = ()
_NO_REPLACEMENTS: tuple[Replacement, ...] = ()


class _Part(Generic[_Item, _Value]):
    """A property of a Change: ``read`` of its update or requirement of ``kind``, else ``absent``."""

    def __init__(self, kind: type[_Item], read: Callable[[_Item], _Value], absent: _Value) -> None:
        self.kind, self.read, self.absent = kind, read, absent

    def __get__(self, change: Change, owner: type[Change] | None = None) -> _Value:
        found = change._get(self.kind)
        return self.read(found) if found is not None else self.absent


@dataclass
class Change:
    """What one commit does: its ``kind``; the version and schema version it was worked out
    against (``read_version``, ``schema_version``: a commit at another schema version is
    refused); its ``updates`` and ``requirements``; ``token``: a retry with it answers with
    the first commit."""

    kind: Kind
    read_version: int
    schema_version: int
    message: str
    author: str
    intent: str | None
    updates: tuple[Update, ...] = ()
    requirements: tuple[Requirement, ...] = ()
    token: str | None = None

    def __post_init__(self) -> None:
        self.message = manifest_text(self.message, "message")
        self.author = manifest_text(self.author, "author")
        self._one_of_each()

    def _one_of_each(self) -> None:
        kinds = [type(item) for item in (*self.updates, *self.requirements)]
        for kind in kinds:
            if kinds.count(kind) > 1:
                raise ValueError(f"a commit takes one {kind.__name__}")  # a caller's bug

    def with_updates(self, *more: Update | None) -> Change:
        """This change with ``more`` updates (Nones left out)."""
        return replace(self, updates=self.updates + updates(*more))

    def _get(self, kind: type[_Item]) -> _Item | None:
        # looked up each time, never cached: a change is small, and stays right when edited
        return next((item for item in (*self.updates, *self.requirements) if isinstance(item, kind)), None)

    # What its updates and requirements say, each ``absent`` when the change has none of that kind.
    add = _Part(AddShards, lambda u: u.shards, _NO_SHARDS)
    retire = _Part(RetireShards, lambda u: u.ids, _NO_IDS)
    retire_read = _Part(RetireShards, lambda u: u.read, _NO_READ)
    replaced = _Part(ReplaceShards, lambda u: u.items, _NO_REPLACEMENTS)
    new_schema = _Part(SetSchema, lambda u: u.schema, None)
    new_compression = _Part(SetCompression, lambda u: u.compression, None)
    migration = _Part(RecordMigration, lambda u: u.row, None)
    lineage = _Part(RecordLineage, lambda u: u.row, None)
    revert_after = _Part(RevertMigrations, lambda u: u.after, None)
    expect_live = _Part(RequireLive, lambda u: u.ids, None)

    @property
    def requires_new_bytes(self) -> bool:
        return self._get(RequireNewBytes) is not None

    def source(self) -> str | None:
        """A rewritten shard's source: the version its records were read from (an append's
        shards name their input instead)."""
        if self.kind.adds_records:
            return None
        read = self.revert_after if self.revert_after is not None else self.read_version
        return f"{self.kind.value} of version {read}"


def updates(*items: Update | None) -> tuple[Update, ...]:
    """The updates given, without the Nones (an optional one left out)."""
    return tuple(u for u in items if u is not None)


def adding(shards: Iterable[NewShard]) -> AddShards:
    return AddShards(tuple(shards))
