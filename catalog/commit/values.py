"""Values of the commit layer: what a commit, a shard, a dataset and a report look like
to callers, and the constants of the commit protocol (see ARCHITECTURE.md)."""

from __future__ import annotations

import functools
import getpass
import operator
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from catalog.errors import InvalidNameError, UsageError
from catalog.jsonform import HIDDEN, JsonReport, shown
from catalog.manifest import DEFAULT_SPLIT
from catalog.words import counted

NAME_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
# A tag starts with a letter: wherever a version is asked for, "3" is a number, "run-42" a tag.
TAG_RE = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,127}")
DEFAULT_SHARD_SIZE = 256 << 20
DEFAULT_SHARD_RECORDS = 1_000_000
INTENT_STALE = timedelta(minutes=10)  # an intent without a heartbeat for this long is dead
HEARTBEAT_EVERY = timedelta(seconds=30)
COMMIT_RETRIES = 100
SHARD_CHUNK = 10_000  # shard rows fetched at a time when streaming a shard list
NO_DATA_CHANGE = ("create", "compact")  # commit kinds that leave the records as they were

Progress = Callable[[int], None]  # called with a number of input bytes just processed
# A version as callers give it: None (the current one), a number, or a tag naming one.
VersionRef = int | str | None


def iso(t: datetime) -> str:
    return t.replace(microsecond=t.microsecond).isoformat(timespec="milliseconds") + "Z"


@dataclass(slots=True)
class ShardInfo(JsonReport):
    """The public view of a registered shard (``Dataset.shards``, a ``Commit``'s shards, the
    ``--json`` listings): its facts and its version range (``added_version`` to
    ``removed_version``). ``path`` is where it is read (absolute); ``relpath`` is the public
    spelling of what the rest of the catalog calls ``rel`` (a property here): its
    ``<dataset>/<file>`` relative to the data area, the manifest's ``shards.path``."""

    path: str  # absolute: a local path, or a URL (an adopted shard: its own file)
    relpath: str = field(
        metadata=HIDDEN
    )  # "<dataset>/<file>", relative to the data area: public name, kept (see ``rel``)
    records: int
    bytes: int
    checksum: str
    compression: str
    schema_version: int
    added_version: int
    removed_version: int | None = None
    split: str = DEFAULT_SPLIT
    index_checksum: str | None = None  # of its record index; None: not indexed yet (`catalog index`)
    source: str | None = None  # input path or URL, "rows", or "<kind> of version N"; None: from before format 5
    # adopted in place (``path`` is then this): never deleted by the catalog; shown as whether it is
    location: str | None = field(default=None, metadata=shown("external", convert=lambda v: v is not None))

    @property
    def rel(self) -> str:
        """``relpath`` in the catalog's one vocabulary (ARCHITECTURE.md, "Shards: one vocabulary")."""
        return self.relpath


@dataclass(frozen=True)
class Commit:
    dataset: str
    version: int
    kind: str
    schema_version: int
    time: datetime
    message: str
    author: str
    read_version: int
    token: str | None
    records: int  # records added by this commit
    shard_count: int  # shards added by this commit
    total_records: int
    total_bytes: int
    total_shards: int
    shards: list[ShardInfo] = field(default_factory=list)
    duplicate: bool = False  # True when a retried token returned an earlier commit
    records_removed: int = 0  # in the shards this commit retired (a rewrite's or restore's)
    shards_removed: int = 0
    tags: tuple[str, ...] = ()  # the tags naming this version (history fills them in)
    # append --link: the inputs taken by hard link, and those copied after all (None: not asked)
    linked: tuple[str, ...] | None = None
    copied: tuple[str, ...] | None = None
    # append --check=warn: the checks the new data broke, one line each (committed all the same)
    warnings: tuple[str, ...] = ()
    # append --check: what it compared (CheckReport.to_json), and the same as lines of text
    check: dict[str, Any] | None = None
    checked: tuple[str, ...] = ()

    def to_json(self, with_shards: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "dataset": self.dataset,
            "version": self.version,
            "kind": self.kind,
            "data_change": self.kind not in NO_DATA_CHANGE,
            "schema_version": self.schema_version,
            "time": iso(self.time),
            "message": self.message,
            "author": self.author,
            "read_version": self.read_version,
            "token": self.token,
            "records": self.records,
            "shard_count": self.shard_count,
            "records_removed": self.records_removed,
            "shards_removed": self.shards_removed,
            "total_records": self.total_records,
            "total_bytes": self.total_bytes,
            "total_shards": self.total_shards,
            "tags": list(self.tags),
        }
        if with_shards:
            out["shards"] = [s.to_json() for s in self.shards]
            out["duplicate"] = self.duplicate
        if self.warnings:
            out["warnings"] = list(self.warnings)
        if self.check is not None:
            out["check"] = self.check
        if self.linked is not None:
            out["linked"] = list(self.linked)
            out["copied"] = list(self.copied or ())
        return out


@dataclass(frozen=True)
class DatasetInfo:
    name: str
    description: str
    created: datetime
    version: int
    schema_version: int
    schema: dict[str, Any]
    records: int
    bytes: int
    shard_count: int
    # Per split at this version: name -> {"records", "shards", "bytes"}; None when not read
    # (`catalog list` reads them for --json only: the text listing stays one small query).
    splits: dict[str, dict[str, int]] | None = None
    compression: str = "none"  # how the dataset stores new shards (format 5)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "created": iso(self.created),
            "version": self.version,
            "schema_version": self.schema_version,
            "schema": self.schema,
            "records": self.records,
            "bytes": self.bytes,
            "shard_count": self.shard_count,
            "compression": self.compression,
        }
        if self.splits is not None:
            out["splits"] = self.splits
        return out


@dataclass(frozen=True)
class Tag(JsonReport):
    """A name for one version of a dataset: readers pin it, gc keeps the shards it needs."""

    dataset: str
    name: str
    version: int
    created: datetime = field(metadata=shown(convert=iso))
    author: str


@dataclass
class Problem(JsonReport):
    dataset: str | None
    path: str
    problem: str  # missing | size | checksum | records | unreadable | index | unregistered | link | manifest
    detail: str


@dataclass
class ShardCount:
    """A dataset's shards verify checked: its current version's, and the retired ones kept."""

    shards: int = 0
    retired: int = 0


@dataclass
class VerifyReport:
    checked: int = 0  # every shard checked: ``shards`` + ``retired``
    bytes: int = 0
    shards: int = 0  # the shards of the datasets' current versions
    retired: int = 0  # retired shards gc has not collected: older versions (time travel) read them
    datasets: dict[str, ShardCount] = field(default_factory=dict)  # the two counts of each dataset checked
    problems: list[Problem] = field(default_factory=list)
    # Uncompressed shards registered without a record index (before format 4, or `--link`ed):
    # not a problem; `catalog index` (or a reader that needs one) makes it.
    not_indexed: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(p.problem != "unregistered" for p in self.problems)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checked": self.checked,
            "shards": self.shards,
            "retired": self.retired,
            "datasets": {name: {"shards": c.shards, "retired": c.retired} for name, c in self.datasets.items()},
            "bytes": self.bytes,
            "problems": [p.to_json() for p in self.problems],
            "not_indexed": self.not_indexed,
        }


@dataclass
class GcReport:
    removed: list[str] = field(default_factory=list)
    bytes: int = 0
    kept_young: int = 0
    kept_live: int = 0
    dry_run: bool = False
    retired: list[str] = field(default_factory=list)  # retired shards collected (a subset of removed)
    kept_retired: int = 0  # retired shards kept for time travel
    links: list[str] = field(default_factory=list)  # symbolic links in the data area: never followed, kept
    # Retired shards that only tagged versions need (else collected): one entry per tag.
    kept_for_tags: list[TagKeep] = field(default_factory=list)
    # Record indexes removed with their shards (or left by writers that never committed): not
    # in ``removed``, which names shards.
    indexes_removed: int = 0
    index_bytes: int = 0
    # Adopted files (outside the data area) no kept version needs: forgotten by the manifest,
    # left where they are, never deleted.
    forgotten: list[str] = field(default_factory=list)
    # Datasets registered for inputs (adopt, register --infer) whose process died before their commit.
    abandoned: list[str] = field(default_factory=list)
    # Retired shards collected whose files were already gone (deleted by hand): nothing freed.
    missing: list[str] = field(default_factory=list)

    @property
    def kept_tagged(self) -> int:
        """Retired shards kept because a tagged version needs them (each counted once)."""
        return len({p for k in self.kept_for_tags for p in k.shards})

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": True,
            "dry_run": self.dry_run,
            "removed": self.removed,
            "bytes": self.bytes,
            "kept_young": self.kept_young,
            "kept_live": self.kept_live,
            "retired_removed": self.retired,
            "kept_retired": self.kept_retired,
            "kept_tagged": self.kept_tagged,
            "kept_for_tags": [k.to_json() for k in self.kept_for_tags],
            "links": self.links,
            "indexes_removed": self.indexes_removed,
            "index_bytes": self.index_bytes,
            "forgotten": self.forgotten,
            "abandoned": self.abandoned,
            "missing": self.missing,
        }


@dataclass(frozen=True)
class TagKeep(JsonReport):
    """What gc kept for one tag: the retired shards (URLs) its version needs."""

    dataset: str
    tag: str
    version: int
    shards: tuple[str, ...] = field(metadata=shown(convert=list))


def validate_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise InvalidNameError(
            f"invalid dataset name {name!r}: use letters, digits, '.', '_' and '-', not starting with '.', "
            "at most 128 characters",
            name if isinstance(name, str) else None,
        )
    return name


def validate_tag(name: str) -> str:
    if not isinstance(name, str) or not TAG_RE.fullmatch(name):
        raise InvalidNameError(
            f"invalid tag {name!r}: a letter first, then letters, digits, '.', '_' and '-', at most 128 characters "
            "(a tag never looks like a version number)"
        )
    return name


def manifest_text(value: object, what: str) -> str:
    """A message, author, token or description as the manifest stores it: text UTF-8 can
    hold (None: empty). Checked before anything is written: a NOT NULL or an encoding error
    from the database would surface as a commit conflict or a driver's traceback."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise UsageError(f"{what} must be text, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"{what} is not UTF-8 text: {value!r}") from None
    return value


def positive_int(value: object, what: str) -> int:
    """A shard size or record limit: a whole number above 0 (a NumPy integer too)."""
    try:
        number = operator.index(value)  # type: ignore[arg-type]  # (what it refuses is the point)
    except TypeError:
        number = 0
    if isinstance(value, bool) or number < 1:
        raise UsageError(f"{what} must be a whole number above 0, got {value!r}")
    return number


def default_author() -> str:
    """Who commits when no author is given: getpass.getuser()'s answer."""
    return _user(tuple(os.environ.get(name) for name in _LOGIN_VARIABLES))


_LOGIN_VARIABLES = ("LOGNAME", "USER", "LNAME", "USERNAME")  # what getpass.getuser reads first


@functools.lru_cache(maxsize=8)
def _user(login: tuple[str | None, ...]) -> str:
    """getpass.getuser() while the login variables are ``login``: without them it reads the
    password database, a file read at every commit."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER", "unknown")


@dataclass(frozen=True)
class ShardSum:
    """Shards, records and bytes of a set of shards: what a commit's totals are checked against."""

    shards: int
    records: int
    bytes: int

    def __add__(self, other: ShardSum) -> ShardSum:
        return ShardSum(self.shards + other.shards, self.records + other.records, self.bytes + other.bytes)

    def __sub__(self, other: ShardSum) -> ShardSum:
        return ShardSum(self.shards - other.shards, self.records - other.records, self.bytes - other.bytes)

    def __str__(self) -> str:
        records, size = counted(self.records, "record"), counted(self.bytes, "byte")
        return f"{records}, {size} in {counted(self.shards, 'shard')}"


NO_SHARDS = ShardSum(0, 0, 0)


@dataclass(frozen=True)
class LineageEntry:
    """One lineage row: ``dataset`` version ``version`` was made from ``source`` version
    ``source_version`` by ``operation`` (its ``predicate``, or ``function`` and ``code_hash``)."""

    dataset: str
    version: int
    source: str
    source_id: int | None
    source_version: int
    operation: str
    predicate: str | None
    function: str | None
    code_hash: str | None
    split: str | None
    batched: bool
    source_gone: bool = False  # the source was dropped (or its name given to a new dataset) since

    def describe(self) -> str:
        how = f"where {self.predicate}" if self.predicate is not None else f"{self.function}"
        split = f" (split {self.split})" if self.split else ""
        gone = " (that dataset has been dropped since)" if self.source_gone else ""
        return f"{self.operation} of {self.source} version {self.source_version}{gone}{split}: {how}"

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}
