"""Handles on a catalog and a dataset for the layers above: the manifest's read side (live
shards at a version, schemas, history, snapshots) that every operation stands on. The
public `Catalog` and `Dataset` (catalog.api) extend these with the operations."""

from __future__ import annotations

import copy
import difflib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from sqlalchemy import Engine, and_, func, or_, select
from sqlalchemy.engine import Connection

from catalog import manifest as mf

# The schema layer (NumPy, protobuf) and shard files (crc32c) through their packages' lazy names: a
# dataset's history, tags and shard list need neither (tests/cli/test_cli_startup.py).
from catalog import schema as schema_layer
from catalog import storage
from catalog.commit.listing import check_totals, list_datasets, splits_at
from catalog.commit.values import (
    NO_SHARDS,
    SHARD_CHUNK,
    TAG_RE,
    Commit,
    DatasetInfo,
    LineageEntry,
    ShardInfo,
    ShardSum,
    Tag,
    VersionRef,
    validate_name,
)
from catalog.errors import (
    CatalogError,
    CorruptShardError,
    DatasetNotFoundError,
    StorageError,
    ValidationError,
    VersionNotFoundError,
)
from catalog.manifest import COMMITS, DATASETS, DEFAULT_SPLIT, LINEAGE, SCHEMA_VERSIONS, SHARDS, TAGS
from catalog.schema.canonical import fingerprint
from catalog.storage.fileio import FileIO, file_io, located
from catalog.words import counted

if TYPE_CHECKING:
    from catalog.schema import Schema
    from catalog.storage import ShardFile

# A ShardInfo's columns after its absolute path, in its field order: the shards columns of its
# fields' names (``relpath`` is the row's ``path``). Derived, so that a column given to ShardInfo
# is read everywhere shards are listed with no list here to keep (ARCHITECTURE.md).
SHARD_INFO_COLUMNS = (SHARDS.c.path, *(SHARDS.c[f.name] for f in fields(ShardInfo)[2:]))


def shard_info(url: Callable[[str, str | None], str], row: Any) -> ShardInfo:
    """The ShardInfo of a row of SHARD_INFO_COLUMNS (``url``: the store's shard_url)."""
    return ShardInfo(url(row.path, row.location), *row)


class CatalogHandle:
    """A manifest (``engine``) and its data area (``store``)."""

    def __init__(self, root: Path, engine: Engine, data_root: str | Path, catalog_id: str | None = None) -> None:
        """``data_root`` as the manifest keeps it: a URL, or a path (relative: to ``root``)."""
        self.root = root
        data_root = located(root, os.fspath(data_root))
        self._engine: Engine | None = engine
        self._url = ""  # the manifest's URL, without a password: kept by a pickled copy to connect again
        # Names this catalog in its data area's marker (see gc); None for a manifest made
        # before ids existed: its first gc gives it one.
        self.catalog_id = catalog_id
        self.store = storage.store_for(data_root)  # where shards live: a local directory or a URL
        # The local data area as a Path (for an object store: its URL, which only `str()` keeps whole).
        self.data_root = Path(data_root)
        # Compute each new shard's feature statistics as it is written (catalog.stats); False
        # leaves them "not computed" (`catalog stats NAME --compute` fills them in later).
        self.statistics = True

    @property
    def engine(self) -> Engine:
        """The manifest's engine; a handle unpickled in another process connects on first use."""
        if self._engine is None:
            engine = mf.make_engine(self.runtime_url(self._url))
            mf.check_format(mf.read_meta(engine))
            self._engine = engine
        return self._engine

    def runtime_url(self, url: str) -> str:
        """The URL to connect with, given the recorded one (without a password)."""
        return url

    def __getstate__(self) -> dict[str, Any]:
        """Everything but the connection, which no process can share: a copy (a DataLoader
        worker under spawn, say) connects anew. The manifest's URL travels without its
        password; the copy finds one where ``Catalog.open`` does ($CATALOG_DB_URL naming the
        same database, $PGPASSWORD, ~/.pgpass), so no password lands in a pickle."""
        state = self.__dict__.copy()
        engine = state.pop("_engine")
        if engine is not None:
            state["_url"] = mf.safe_url(engine.url.render_as_string(hide_password=False))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._engine = None

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()

    def list(self) -> list[DatasetInfo]:
        return list_datasets(self.engine)

    def lookup(self, name: str, parsed: bool = True) -> DatasetHandle:
        """The dataset ``name`` as it is now (its version and schema pinned). ``parsed=False``:
        its schema's stored JSON is read now but parsed on first use of ``.schema`` (a verb
        that shows the dataset never loads NumPy and the codec; a damaged schema fails then)."""
        if parsed:
            return DatasetHandle(self, *self.dataset_row(name))
        validate_name(name)
        with mf.read_txn(self.engine) as conn:
            row = _dataset_row(conn, name)
            text = _schema_row(conn, row.id, row.schema_version).schema_json
        ds = DatasetHandle(self, row.id, row.name, row.version, row.schema_version, None, row.compression)
        ds.unparsed = text
        return ds

    def dataset_row(self, name: str) -> tuple[int, str, int, int, Schema, str]:
        validate_name(name)
        with mf.read_txn(self.engine) as conn:
            row = _dataset_row(conn, name)
            schema = load_schema(conn, row.id, row.schema_version)
        return (row.id, row.name, row.version, row.schema_version, schema, row.compression)

    def dataset_id(self, name: str) -> int:
        """Dataset ``name``'s id, its schema not read (drop works on one whose schema is damaged)."""
        return dataset_id(self.engine, name)

    def shard_path(self, relpath: str) -> Path:
        """A shard's local path (a local data area only; see :meth:`shard_url`)."""
        return self.data_root / relpath

    def shard_url(self, relpath: str, location: str | None = None) -> str:
        """Where a shard is: a local path, or a URL in an object store (its own, when adopted in place)."""
        return self.store.shard_url(relpath, location)

    def require_shards(self, shards: Iterable[ShardFile]) -> None:
        """Before a commit: every new shard is still there. A gc that wrongly took a writer's
        files must not leave the manifest pointing at nothing (nor a moved adopted file)."""
        for s in shards:
            if s.location is None and not self.store.exists(s.rel):
                raise StorageError(f"{self.shard_url(s.rel)}: shard vanished before commit; nothing registered")
            if s.location is not None:
                size = storage.location_size(s.location)
                if size is None:
                    raise StorageError(f"{s.location}: adopted file vanished before commit; nothing registered")
                if size not in (-1, s.bytes):
                    changed = f"{counted(size, 'byte')} now, {s.bytes} when it was checked: changed before the commit"
                    raise CorruptShardError(s.location, message=f"{s.location}: {changed}; nothing registered")


def explain_with(
    name: str,
    schema_version: int,
    older: Sequence[tuple[int, dict[str, Any]]],
    error: CatalogError,
    fits: Callable[[Schema], object],
) -> CatalogError:
    """Dataset.explain without a manifest (``older``: Dataset.older_schemas()), for append jobs in workers."""
    for version, doc in older:
        try:
            fits(schema_layer.Schema.from_json(doc))
        except CatalogError:
            continue
        note = (
            f"this data is in schema version {version} of {name!r}, which is at schema version "
            f"{schema_version} now (migrated): migrate the data, or write it in the new schema"
        )
        return _noted(error, note)
    return error


def _noted(error: CatalogError, note: str) -> CatalogError:
    """``error`` with ``note`` after its message, of its own class and fields: data that breaks
    the schema stays a ValidationError (or an input's AppendError) when it fits an older one;
    a conflict is only a concurrent commit."""
    better = copy.copy(error)
    better.args = (f"{error}; {note}",)
    if isinstance(better, ValidationError):
        better.reason = f"{better.reason}; {note}"
    return better


def raise_explained(ds: Any, error: CatalogError, fits: Callable[[Schema], object]) -> NoReturn:
    """Raise ``ds.explain(error, fits)``, or ``error`` itself, never chained to itself: Dask
    follows ``__cause__`` to send a job's error back, forever on such a loop."""
    better = ds.explain(error, fits)
    if better is error:
        raise error
    raise better from error


def not_found(name: str, names: list[str]) -> str:
    """The error of a name no dataset has, with the next step: the close name, else where
    to see the names, else how to make the first dataset."""
    close = difflib.get_close_matches(name, names, n=1)
    if close:
        hint = f" (did you mean {close[0]!r}?)"
    elif names:
        hint = " (`catalog list` names the datasets there are)"
    else:
        hint = " (the catalog has none yet: `catalog register NAME --schema FILE` makes one)"
    return f"no dataset named {name!r}{hint}"


def dataset_id(engine: Engine, name: str) -> int:
    """Dataset ``name``'s id from the manifest alone: no schema read, no data area opened."""
    validate_name(name)
    with mf.read_txn(engine) as conn:
        return int(_dataset_row(conn, name).id)


def load_schema(conn: Connection, dataset_id: int, version: int) -> Schema:
    return schema_layer.Schema.from_json(json.loads(_schema_row(conn, dataset_id, version).schema_json))


def schema_doc(conn: Connection, dataset_id: int, version: int) -> dict[str, Any]:
    """Schema ``version``'s JSON form, as ``load_schema(...).to_json()`` gives it. The stored
    text is what a parsed Schema wrote: while its fingerprint (stored beside it) matches, it is
    that form already, and NumPy and the codec need not load to show it; a text changed since
    (edited, damaged) is parsed, to fail as it does for every reader or to be normalised."""
    row = _schema_row(conn, dataset_id, version)
    doc = json.loads(row.schema_json)
    if isinstance(doc, dict) and fingerprint(doc) == row.fingerprint:
        return doc
    return schema_layer.Schema.from_json(doc).to_json()


def _schema_row(conn: Connection, dataset_id: int, version: int) -> Any:
    columns = (SCHEMA_VERSIONS.c.schema_json, SCHEMA_VERSIONS.c.fingerprint)
    where = (SCHEMA_VERSIONS.c.dataset_id == dataset_id, SCHEMA_VERSIONS.c.version == version)
    return conn.execute(select(*columns).where(*where)).one()


def resolve_version(conn: Connection, dataset_id: int, name: str, version: VersionRef) -> tuple[int, int]:
    """(dataset version, its schema version) that ``version`` names: None the current one, a
    number (or its digits as text), or a tag. Every reader, verb and rewrite resolves here."""
    if version is None:
        number = conn.execute(select(DATASETS.c.version).where(DATASETS.c.id == dataset_id)).scalar_one_or_none()
        if number is None:
            raise DatasetNotFoundError(f"no dataset named {name!r}", name)
    else:
        number = _version_number(conn, dataset_id, name, version)
    sv = conn.execute(
        select(COMMITS.c.schema_version).where(COMMITS.c.dataset_id == dataset_id, COMMITS.c.version == number)
    ).scalar_one_or_none()
    if sv is None:
        raise VersionNotFoundError(f"dataset {name!r} has no version {number} ({what_exists(conn, dataset_id)})")
    return number, sv


def _dataset_row(conn: Connection, name: str) -> Any:
    row = conn.execute(select(DATASETS).where(DATASETS.c.name == name)).first()
    if row is None or mf.abandoned(row.pending):  # registered for inputs whose writer died: none
        names = [n for n, p in conn.execute(select(DATASETS.c.name, DATASETS.c.pending)) if not mf.abandoned(p)]
        raise DatasetNotFoundError(not_found(name, names), name)
    return row


def _version_number(conn: Connection, dataset_id: int, name: str, version: int | str) -> int:
    if isinstance(version, str) and version.isascii() and version.isdigit():
        version = int(version)
    if isinstance(version, int) and not isinstance(version, bool):
        if not 0 <= version < 1 << 63:  # beyond SQLite's integers: no such version, not an OverflowError
            raise VersionNotFoundError(f"dataset {name!r} has no version {version} ({what_exists(conn, dataset_id)})")
        return version
    if not isinstance(version, str) or not TAG_RE.fullmatch(version):
        raise VersionNotFoundError(
            f"dataset {name!r}: {version!r} is neither a version number nor a tag ({what_exists(conn, dataset_id)})"
        )
    number = conn.execute(
        select(TAGS.c.version).where(TAGS.c.dataset_id == dataset_id, TAGS.c.name == version)
    ).scalar_one_or_none()
    if number is None:
        raise unknown_tag(conn, dataset_id, name, version)
    return int(number)


def unknown_tag(conn: Connection, dataset_id: int, name: str, tag: str) -> VersionNotFoundError:
    """The error for a tag dataset ``name`` does not have, naming those it has and its versions."""
    have = f"{_tag_names(conn, dataset_id)}; {_version_range(conn, dataset_id)}"
    return VersionNotFoundError(f"dataset {name!r} has no tag {tag!r} ({have})")


def unknown_name(
    conn: Connection, dataset_id: int, name: str, spec: str, splits: Iterable[str]
) -> VersionNotFoundError:
    """The error for a name that may be a split, a tag or a version (``stats --compare``) and is
    none of them, naming what the dataset has of each."""
    have = f"splits: {', '.join(sorted(splits)) or 'none'}; {_tag_names(conn, dataset_id)}"
    return VersionNotFoundError(
        f"dataset {name!r} has no split, tag or version {spec!r} ({have}; {_version_range(conn, dataset_id)})"
    )


def what_exists(conn: Connection, dataset_id: int) -> str:
    """The dataset's versions and tags, for an error about a version that is not there."""
    return f"{_version_range(conn, dataset_id)}; {_tag_names(conn, dataset_id)}"


def _version_range(conn: Connection, dataset_id: int) -> str:
    """The dataset's versions, "versions: 1 to 5" (gapless: the first and the last say them all)."""
    first, last = conn.execute(
        select(func.min(COMMITS.c.version), func.max(COMMITS.c.version)).where(COMMITS.c.dataset_id == dataset_id)
    ).one()
    if last is None:
        return "no versions"
    return f"versions: {first}" if first == last else f"versions: {first} to {last}"


def _tag_names(conn: Connection, dataset_id: int, most: int = 10) -> str:
    """The dataset's tags for an error line: "tags: a, b", at most ``most`` named."""
    names = list(
        conn.execute(
            select(TAGS.c.name).where(TAGS.c.dataset_id == dataset_id).order_by(TAGS.c.name).limit(most + 1)
        ).scalars()
    )
    if not names:
        return "no tags"
    more = ", ..." if len(names) > most else ""
    return "tags: " + ", ".join(names[:most]) + more


def tags_of(conn: Connection, dataset_id: int, name: str) -> list[Tag]:
    """The dataset's tags, by version then name."""
    rows = conn.execute(select(TAGS).where(TAGS.c.dataset_id == dataset_id).order_by(TAGS.c.version, TAGS.c.name)).all()
    return [Tag(name, r.name, r.version, r.created_at, r.author) for r in rows]


def tags(engine: Engine, dataset_id: int, name: str) -> list[Tag]:
    """The dataset's tags (name -> version), by version then name."""
    with mf.read_txn(engine) as conn:
        return tags_of(conn, dataset_id, name)


def lineage(ds: DatasetHandle, at: int | None = None) -> list[LineageEntry]:
    """``ds``'s lineage rows, newest first (``at``: those of versions up to it)."""
    query = select(LINEAGE).where(LINEAGE.c.dataset_id == ds.id).order_by(LINEAGE.c.version.desc())
    if at is not None:
        query = query.where(LINEAGE.c.version <= at)
    with mf.read_txn(ds.catalog.engine) as conn:
        rows_ = conn.execute(query).all()
    return [
        LineageEntry(
            ds.name, r.version, r.source, r.source_id, r.source_version, r.operation, r.predicate, r.function,
            r.code_hash, r.split, bool(r.batched),
        )
        for r in rows_
    ]  # fmt: skip


def derived_names(ds: DatasetHandle) -> list[tuple[str, str]]:
    """The datasets (name, operation) with a lineage row naming ``ds`` as their source."""
    query = (
        select(DATASETS.c.name, LINEAGE.c.operation)
        .join(DATASETS, DATASETS.c.id == LINEAGE.c.dataset_id)
        .where((LINEAGE.c.source_id == ds.id) | (LINEAGE.c.source_id.is_(None) & (LINEAGE.c.source == ds.name)))
        .order_by(DATASETS.c.name, LINEAGE.c.version)
    )
    with mf.read_txn(ds.catalog.engine) as conn:
        rows_ = conn.execute(query).all()
    found: dict[str, str] = {}
    for name, operation in rows_:  # a map anywhere in a dataset's lineage makes it a map's
        if found.get(name) != "map":
            found[name] = operation
    return list(found.items())


# --------------------------------------------------------------------------- dataset


class DatasetHandle:
    """One dataset. It pins the schema version it read until its next append starts, which
    follows a migration committed since (rows are validated against the current schema); an
    append fails at commit if a newer schema version was committed while it wrote."""

    def __init__(
        self,
        catalog: CatalogHandle,
        id: int,
        name: str,
        version: int,
        schema_version: int,
        schema: Schema | None,
        compression: str = "none",
    ) -> None:
        self.catalog = catalog
        self.id = id
        self.name = name
        self.version = version
        self.schema_version = schema_version
        self._schema = schema  # None: ``unparsed`` holds its stored JSON (CatalogHandle.lookup)
        self.unparsed = ""
        self.compression = compression  # how new shards are stored: none, gzip or zlib

    @property
    def schema(self) -> Schema:
        """The pinned schema version's schema (parsed from its stored JSON on first use, for a
        handle looked up with ``parsed=False``)."""
        if self._schema is None:
            self._schema = schema_layer.Schema.from_json(json.loads(self.unparsed))
        return self._schema

    @schema.setter
    def schema(self, schema: Schema) -> None:
        self._schema = schema

    def __repr__(self) -> str:
        return f"Dataset({self.name!r}, version={self.version}, schema_version={self.schema_version})"

    def __getstate__(self) -> dict[str, Any]:
        """Pickled with its catalog (which connects anew where it is unpickled); the schema
        as its JSON form (its compiled codec is rebuilt)."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("_schema", "unparsed")}
        return {**state, "schema": self.schema.to_json()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        self.schema = schema_layer.Schema.from_json(state.pop("schema"))
        self.__dict__.update(state)
        self.unparsed = ""

    # ---- reading
    def _resolve_version(self, conn: Connection, version: VersionRef) -> tuple[int, int]:
        """(dataset version, its schema version) for ``version``: see resolve_version."""
        return resolve_version(conn, self.id, self.name, version)

    def _live(self, conn: Connection, version: VersionRef) -> tuple[int, int, Any]:
        """(version, its schema version, the query of its live shards in read order), once
        it is known that gc left every one of them."""
        v, sv = self._resolve_version(conn, version)
        query = live_at(conn, self.id, v)
        _check_readable(conn, self.name, v, query)
        return v, sv, query

    def shards(self, version: VersionRef = None) -> list[ShardInfo]:
        """The shards live at ``version`` (default: current), in commit order."""
        return list(self.iter_shards(version))

    def iter_shards(self, version: VersionRef = None) -> Iterator[ShardInfo]:
        """:meth:`shards`, streamed from one read snapshot in chunks: a million-shard list
        never sits in memory at once."""
        url = self.catalog.store.shard_url  # 100k shards: pathlib would cost a third of `show --json`
        with mf.read_txn(self.catalog.engine) as conn:
            _v, _sv, query = self._live(conn, version)
            result = conn.execution_options(yield_per=SHARD_CHUNK).execute(query.with_only_columns(*SHARD_INFO_COLUMNS))
            for rows in result.partitions():
                yield from (shard_info(url, r) for r in rows)

    def shard_page(self, version: VersionRef = None, offset: int = 0, limit: int = 100) -> list[ShardInfo]:
        """Shards ``offset`` to ``offset + limit`` of :meth:`shards` (one query, whatever the
        dataset's size: a viewer pages a million shards)."""
        url = self.catalog.store.shard_url
        with mf.read_txn(self.catalog.engine) as conn:
            _v, _sv, query = self._live(conn, version)
            page = query.with_only_columns(*SHARD_INFO_COLUMNS).offset(max(0, offset)).limit(max(0, limit))
            return [shard_info(url, r) for r in conn.execute(page)]

    def files(self, version: VersionRef = None) -> list[str]:
        """Shard locations at ``version``: absolute paths, or URLs for an object store (such as
        ``s3://...``, which ``tf.data.TFRecordDataset`` opens where TensorFlow has that filesystem)."""
        with mf.read_txn(self.catalog.engine) as conn:
            _v, _sv, query = self._live(conn, version)
            rows = mf.fetch_rows(conn, query.with_only_columns(SHARDS.c.path, SHARDS.c.location))
        url = self.catalog.store.shard_url  # each checked: the manifest never names a path outside the data area
        return [url(p, loc) for p, loc in rows]

    def explain(self, error: CatalogError, fits: Callable[[Schema], object]) -> CatalogError:
        """``error``, or, when the data fits an older schema version (``fits`` does not raise),
        ``error`` (of its class) naming that version and the current one: data written for the
        dataset as it was before a migration."""
        return explain_with(self.name, self.schema_version, self.older_schemas(), error, fits)

    def older_schemas(self) -> list[tuple[int, dict[str, Any]]]:
        """(version, JSON form) of the schema versions before the pinned one, newest first."""
        with mf.read_txn(self.catalog.engine) as conn:
            rows = conn.execute(
                select(SCHEMA_VERSIONS.c.version, SCHEMA_VERSIONS.c.schema_json)
                .where(SCHEMA_VERSIONS.c.dataset_id == self.id, SCHEMA_VERSIONS.c.version < self.schema_version)
                .order_by(SCHEMA_VERSIONS.c.version.desc())
            ).all()
        return [(version, json.loads(text)) for version, text in rows]

    def schema_at(self, version: VersionRef = None) -> Schema:
        with mf.read_txn(self.catalog.engine) as conn:
            _v, sv = self._resolve_version(conn, version)
            return load_schema(conn, self.id, sv)

    def info(self, version: VersionRef = None) -> DatasetInfo:
        with mf.read_txn(self.catalog.engine) as conn:
            row = conn.execute(select(DATASETS).where(DATASETS.c.id == self.id)).first()
            if row is None:
                raise DatasetNotFoundError(f"no dataset named {self.name!r}", self.name)
            v, sv = self._resolve_version(conn, version)
            schema = schema_doc(conn, self.id, sv)
            c = conn.execute(select(COMMITS).where(COMMITS.c.dataset_id == self.id, COMMITS.c.version == v)).one()
            # the totals first: a damaged commit is named as such, before its splits are checked against it
            check_totals(self.catalog.engine, row, ShardSum(c.shard_count, c.records, c.bytes), v)
            splits = splits_at(conn, self.name, c, live_at(conn, self.id, v))
        return DatasetInfo(
            row.name, row.description, row.created_at, v, sv, schema, c.records, c.bytes, c.shard_count, splits,
            row.compression,
        )  # fmt: skip

    def history(self, limit: int | None = None, skip: int = 0) -> list[Commit]:
        """Every commit, oldest first, with the records and shards it added and retired; with
        ``limit``, the newest ``limit`` after the ``skip`` newest (see :func:`history`)."""
        return history(self.catalog.engine, self.id, self.name, limit, skip)

    def last_commit(self) -> Commit:
        """The newest commit, as ``history()[-1]`` gives it, without reading the others (the
        viewer's catalog page shows every dataset's): a few index lookups."""
        with mf.read_txn(self.catalog.engine) as conn:
            last = select(COMMITS).where(COMMITS.c.dataset_id == self.id).order_by(COMMITS.c.version.desc()).limit(1)
            r = conn.execute(last).first()
            if r is None:
                raise mf.damaged(self.catalog.engine, f"dataset {self.name!r}: no commit row")
            plus = _shard_sums(conn, self.id, SHARDS.c.added_version, r.version).get(r.version, NO_SHARDS)
            minus = _shard_sums(conn, self.id, SHARDS.c.removed_version, r.version).get(r.version, NO_SHARDS)
            tags = [t.name for t in tags_of(conn, self.id, self.name) if t.version == r.version]
        # what it says it added, against its shards; its totals against the live shards' would be
        # a pass over them all (list_datasets checks them against the dataset row)
        _check_commit(self.catalog.engine, self.name, r, plus, ShardSum(r.shard_count, r.records, r.bytes))
        return _commit_with(self.name, r, plus, minus, tags)

    def follow_schema(self, conn: Connection, schema_version: int) -> None:
        """Move the handle to ``schema_version`` (the dataset's now, read in ``conn``), and to
        its compression: an append that starts after a migration writes in the new schema."""
        if schema_version == self.schema_version:
            return
        compression = conn.execute(select(DATASETS.c.compression).where(DATASETS.c.id == self.id)).scalar_one()
        self.schema = load_schema(conn, self.id, schema_version)
        self.schema_version, self.compression = schema_version, compression

    def unknown_name(self, spec: str, splits: Iterable[str]) -> VersionNotFoundError:
        """The error for ``spec`` that names no split, tag or version of the dataset: see unknown_name."""
        with mf.read_txn(self.catalog.engine) as conn:
            return unknown_name(conn, self.id, self.name, spec, splits)

    def tags(self) -> list[Tag]:
        """The dataset's tags (name -> version), by version then name."""
        return tags(self.catalog.engine, self.id, self.name)


def history(engine: Engine, dataset_id: int, name: str, limit: int | None = None, skip: int = 0) -> list[Commit]:
    """Every commit, oldest first, with the records and shards it added and retired: counted
    from the shard rows (a rewrite adds and retires shards; gc keeps collected shards' rows). Its
    schema is not read: a dataset's history is the same whatever it is.

    ``limit``: only the newest ``limit`` commits after the ``skip`` newest (still oldest first):
    its queries read those commits and their shards alone (the indexes by added and by removed
    version), whatever the dataset's length. Each commit is checked as in the whole history,
    from the totals the commit before the window states."""
    with mf.read_txn(engine) as conn:
        query = select(COMMITS).where(COMMITS.c.dataset_id == dataset_id)
        if limit is None:
            rows = conn.execute(query.order_by(COMMITS.c.version)).all()
        else:
            newest = query.order_by(COMMITS.c.version.desc()).offset(max(0, skip)).limit(max(0, limit))
            rows = conn.execute(newest).all()[::-1]
        first = rows[0].version if rows else 0
        total = _totals_before(conn, dataset_id, first)
        added = _shard_sums(conn, dataset_id, SHARDS.c.added_version, since=first)
        removed = _shard_sums(conn, dataset_id, SHARDS.c.removed_version, since=first)
        tagged: dict[int, list[str]] = {}
        for t in tags_of(conn, dataset_id, name):
            tagged.setdefault(t.version, []).append(t.name)
    commits = []
    for r in rows:
        plus, minus = added.get(r.version, NO_SHARDS), removed.get(r.version, NO_SHARDS)
        total = total + plus - minus
        _check_commit(engine, name, r, plus, total)
        commits.append(_commit_with(name, r, plus, minus, tagged.get(r.version, [])))
    return commits


def _totals_before(conn: Connection, dataset_id: int, version: int) -> ShardSum:
    """The live totals the commit before ``version`` states (none before the first)."""
    before = conn.execute(
        select(COMMITS.c.shard_count, COMMITS.c.records, COMMITS.c.bytes).where(
            COMMITS.c.dataset_id == dataset_id, COMMITS.c.version == version - 1
        )
    ).first()
    return NO_SHARDS if before is None else ShardSum(*before)


def _commit_with(name: str, r: Any, plus: ShardSum, minus: ShardSum, tags: list[str]) -> Commit:
    """Commit row ``r`` with the shards it added and retired, and its tags."""
    return replace(
        commit_of(name, r),
        records=plus.records,
        shard_count=plus.shards,
        records_removed=minus.records,
        shards_removed=minus.shards,
        tags=tuple(tags),
    )


def _check_commit(engine: Engine, name: str, r: Any, added: ShardSum, total: ShardSum) -> None:
    """Fail when commit row ``r`` disagrees with the shard rows (``added`` by it, ``total``
    live after it): a flipped byte must not show as "+2024 records"."""
    said = ShardSum(r.shard_count, r.records, r.bytes)
    detail = None
    if said != total:
        detail = f"its totals say {said}, its shards hold {total}"
    elif r.kind == "append" and (r.shards_added, r.records_added) != (added.shards, added.records):
        said_added = f"{counted(r.records_added, 'record')} in {counted(r.shards_added, 'shard')}"
        detail = f"it says it added {said_added}, its shards hold {added}"
    if detail is not None:
        raise mf.damaged(engine, f"dataset {name!r} version {r.version}: {detail}")


def _shard_sums(
    conn: Connection, dataset_id: int, version_column: Any, version: int | None = None, since: int = 0
) -> dict[int, ShardSum]:
    """Per version (or ``version`` alone; or from ``since`` on): the shards (count, records,
    bytes) whose ``version_column`` (added_version or removed_version) is that version."""
    which = version_column >= since if version is None else version_column == version
    query = (
        select(version_column, func.count(), func.coalesce(func.sum(SHARDS.c.records), 0),
               func.coalesce(func.sum(SHARDS.c.bytes), 0))
        .where(SHARDS.c.dataset_id == dataset_id, which)
        .group_by(version_column)
    )  # fmt: skip
    return {v: ShardSum(int(n), int(records), int(size)) for v, n, records, size in conn.execute(query)}


def live_at(conn: Connection, dataset_id: int, version: int) -> Any:
    """The shards live at ``version``, in read order. At the current version that is
    "not retired", ordered by (removed_version, seq): all NULL, so simply seq order, but
    spelt so PostgreSQL's planner sees the index (dataset, removed_version, seq) already
    gives it (IS NULL is no equality to that planner) and does not sort the whole list.
    1M shards: the first row in 0.1 ms, not 0.5 s."""
    current = conn.execute(select(DATASETS.c.version).where(DATASETS.c.id == dataset_id)).scalar_one_or_none()
    query = select(SHARDS).where(SHARDS.c.dataset_id == dataset_id)
    if version == current:
        return query.where(SHARDS.c.removed_version.is_(None)).order_by(SHARDS.c.removed_version, SHARDS.c.seq)
    live = and_(
        SHARDS.c.added_version <= version,
        or_(SHARDS.c.removed_version.is_(None), SHARDS.c.removed_version > version),
    )
    return query.where(live).order_by(SHARDS.c.seq)


def _check_readable(conn: Connection, name: str, version: int, live: Any) -> None:
    """Fail when gc collected a shard that ``version`` needs (``live``: its live_at query)."""
    gone = (
        live.with_only_columns(SHARDS.c.id)
        .where(SHARDS.c.collected_at.is_not(None), SHARDS.c.removed_version.is_not(None))
        .order_by(None)
        .limit(1)
    )
    if conn.execute(gone).first() is not None:
        raise VersionNotFoundError(
            f"dataset {name!r} version {version} is no longer readable: gc collected its retired shards "
            "(keep versions with `catalog gc --keep-versions K`)"
        )


def commit_of(name: str, r: Any, shards: list[ShardInfo] | None = None, duplicate: bool = False) -> Commit:
    return Commit(
        name,
        r.version,
        r.kind,
        r.schema_version,
        r.created_at,
        r.message,
        r.author,
        r.read_version,
        r.token,
        r.records_added,
        r.shards_added,
        r.records,
        r.bytes,
        r.shard_count,
        shards or [],
        duplicate,
    )


# --------------------------------------------------------------------------- snapshots


@dataclass(frozen=True)
class LiveShard:
    """A registered shard live at a snapshot's version, as the operations that rewrite a
    version see it (compact, rewrite, restore, migrate): its row ``id`` (what a commit
    retires), its read order (``seq``) and schema version, and where it is read. Internal;
    callers get a :class:`ShardInfo`, readers a ``PlannedShard`` (this, plus a record range)."""

    id: int
    path: str  # absolute: a local path, or a URL (an adopted shard: its own file)
    records: int
    bytes: int
    checksum: str
    compression: str
    schema_version: int
    seq: int
    rel: str  # "<dataset>/<file>", relative to the data area: the manifest's shards.path
    split: str = DEFAULT_SPLIT
    index_checksum: str | None = None  # of its record index (storage.index); None: none yet
    location: str | None = None  # adopted in place: its own file (``path`` is then this)
    fingerprint: str | None = None  # what the content check compares its file with (storage.content)

    @property
    def adopted(self) -> bool:
        """Its own file, outside the data area (``catalog adopt``)."""
        return self.location is not None

    @property
    def io(self) -> FileIO:
        """What reads its file (storage.fileio, chosen by ``path``): readers open, stat and read
        ranges of it through this, never by looking at the location themselves."""
        return file_io(self.path)


def live_values(url: Callable[[str, str | None], str], r: Any) -> tuple[Any, ...]:
    """A LiveShard's fields, in order, from a shards row (``url``: the store's shard_url)."""
    return (
        r.id, url(r.path, r.location), r.records, r.bytes, r.checksum, r.compression, r.schema_version, r.seq,
        r.path, r.split, r.index_checksum, r.location, r.fingerprint,
    )  # fmt: skip


@dataclass(frozen=True)
class Snapshot:
    version: int
    schema_version: int
    schema: Schema
    shards: list[LiveShard]

    @property
    def records(self) -> int:
        return sum(s.records for s in self.shards)


def snapshot(ds: DatasetHandle, version: VersionRef = None) -> Snapshot:
    """The dataset at ``version`` (default current): schema and live shards, in read order."""
    with mf.read_txn(ds.catalog.engine) as conn:
        v, sv, query = ds._live(conn, version)
        rows = conn.execute(query).all()
        schema = load_schema(conn, ds.id, sv)
    url = ds.catalog.store.shard_url
    shards = [LiveShard(*live_values(url, r)) for r in rows]
    return Snapshot(v, sv, schema, shards)
