"""Running migrations: plan, rewrite every shard through an executor, commit.

Each applied migration is one commit through the commit protocol: a new schema version,
the rewritten shards live, the old ones retired (still readable by version), and a row in
the applied-migrations table with the script's sha256 (Flyway's schema history). A script
edited after it was applied is refused.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sqlalchemy import select

from catalog import manifest as mf
from catalog.commit.changes import (
    MIGRATE,
    Change,
    NewShard,
    RecordMigration,
    RequireLive,
    RetireShards,
    SetCompression,
    SetSchema,
    adding,
)
from catalog.commit.handles import DatasetHandle, LiveShard, Snapshot, snapshot
from catalog.commit.intents import Intent
from catalog.commit.protocol import LiveChanged, commit, token_commit
from catalog.commit.statistics import stored_stats
from catalog.commit.values import Progress, default_author
from catalog.errors import CatalogError, CommitConflictError, MigrationError, ValidationError
from catalog.executors import executor_for, run_jobs
from catalog.jsonform import SECONDS, JsonReport
from catalog.manifest import APPLIED_MIGRATIONS
from catalog.ops.migrations.operations import (
    AddField,
    DropField,
    Operation,
    RenameField,
    RowFn,
    compile_row_steps,
    compile_steps,
    evolve,
    from_json,
    untouched,
)
from catalog.ops.migrations.scripts import (
    DEFAULT_DIR,
    SLUG_RE,
    TEMPLATE,
    MigrationFile,
    discover,
    file_numbers,
    load_operations,
    quick_operations,
    sha256_of,
)
from catalog.ops.options import CommitOptions, Unpack, VerbKeywords, check_keywords
from catalog.schema import Schema, SchemaDiff
from catalog.schema.frames import rows_columns
from catalog.stats import DatasetStats
from catalog.stats.columns import decoded_columns
from catalog.stats.tally import constant_stats
from catalog.storage import UNLIMITED, ShardFile, ShardSink, clear_attempt, shard_batches, store_for
from catalog.storage.content import check_named
from catalog.tfrecord.framing import stored_compression
from catalog.words import counted

CATCHUP_ROUNDS = 10  # passes over shards appended while a migration ran, before asking for a rerun
QUICK_SLUG = "quick"  # a quick migration's id: NNNN_quick, NNNN in the sequence of the files
NUMBERED_ID = re.compile(r"(\d{4,})_")

__all__ = [
    "MigrateReport",
    "MigrationResult",
    "MigrationStatus",
    "migrate",
    "new_migration",
    "quick_operations",
    "status",
]

# --------------------------------------------------------------------------- work units


@dataclass(frozen=True)
class MigrationSpec:
    """A migration as data: a script (path and sha256) or quick operations, and the schema it reads."""

    id: str
    source_schema: dict[str, Any]
    script: str | None = None
    checksum: str = ""
    operations: tuple[dict[str, Any], ...] = ()

    def key(self) -> str:
        return json.dumps([self.id, self.script, self.checksum, self.operations, self.source_schema], sort_keys=True)

    def ops(self) -> list[Operation]:
        if self.script is not None:
            return load_operations(self.script, self.checksum)
        return [from_json(o) for o in self.operations]

    def chain(self) -> list[Schema]:
        return evolve(Schema.from_json(self.source_schema), self.ops())


@dataclass(frozen=True)
class ShardJob:
    """Migrate one shard into one new shard."""

    spec: MigrationSpec
    source: str  # absolute path
    records: int
    data_root: str
    dataset: str
    prefix: str  # file-name prefix, led by the intent id
    size: int | None = None  # the source's registered bytes: reading stops there
    compression: str = "none"  # of the new shard: the dataset's
    statistics: bool = True  # tally the new shard's statistics from its records
    # Per feature of the target schema, how many records were filled from its default (the
    # source shard's counts, carried through the operations); None: the source has no statistics.
    filled: tuple[tuple[str, int], ...] | None = None
    added: tuple[str, ...] = ()  # features this migration fills with their default in every record
    # What the content check needs (storage.content): the source's checksum and fingerprint,
    # and whether it is an adopted file; None: not checked.
    checksum: str | None = None
    fingerprint: str | None = None
    adopted: bool = False
    # The source shard's statistics of the features the migration writes as it read them (by
    # their target names: Lineage.same), taken as the new shard's instead of tallied again
    given: bytes | None = None


# per process: MigrationSpec.key() -> the record function, the row function (None: a byte-level
# plan) and the target schema
_COMPILED: dict[str, tuple[Any, RowFn | None, Schema]] = {}


def migrate_shard(job: ShardJob) -> ShardFile | None:
    """Module-level (picklable) worker: the shard's records, migrated, in a new shard (None if empty)."""
    key = job.spec.key()
    if key not in _COMPILED:
        try:
            chain = job.spec.chain()
            ops = job.spec.ops()
            _COMPILED[key] = compile_steps(ops, chain), compile_row_steps(ops, chain), chain[-1]
        except CatalogError as e:
            raise MigrationError(f"{job.spec.id}: {e}") from None
    fn, with_rows, target = _COMPILED[key]
    clear_attempt(store_for(job.data_root), job.dataset, job.prefix)  # a rerun of a task whose worker died
    schema = target if job.statistics else None
    sink = ShardSink(
        job.data_root, job.dataset, job.prefix, UNLIMITED, UNLIMITED, compression=job.compression, schema=schema
    )
    tallied = _tallied(sink, target, job.given)
    index = 0
    try:
        if job.checksum is not None:
            check_named(job.source, job.checksum, job.fingerprint, job.adopted)
        for batch in shard_batches(job.source, job.size):
            # rows for the statistics when the source's exact fill counts replace what they show
            # (a row holds a default its record lacked: decoding alone counts it as filled)
            if with_rows is None or job.filled is None or not job.statistics:
                for record in batch:
                    sink.write(fn(record, index))
                    index += 1
                continue
            records: list[bytes] = []
            rows: list[dict[str, Any]] = []
            for record in batch:
                new, row = with_rows(record, index)
                records.append(new)
                rows.append(row)
                index += 1
            _write_rows(sink, tallied, records, rows)
        if job.filled is not None:
            sink.set_filled(dict(job.filled))
        else:  # no statistics to carry: at least the features this migration filled in
            for name in job.added:
                sink.fill(name, index)
    except Exception as e:
        sink.abort()
        raise _record_error(job, index, e) from None
    shards = sink.close()
    if index != job.records:
        found = counted(index, "record")
        raise MigrationError(f"{job.source}: {found} read, {job.records} registered; run `catalog verify`")
    return shards[0] if shards else None


def _tallied(sink: ShardSink, target: Schema, given: bytes | None) -> Schema:
    """The features of ``target`` whose statistics the new shard tallies: all but those ``given``
    (the source's, of the features written as they were read) when the sink takes them."""
    if given is None:
        return target
    stats = DatasetStats.from_bytes(given).features
    if not sink.give_stats(stats):
        return target
    return Schema([f for name, f in target.features.items() if name not in stats])


def _write_rows(sink: ShardSink, tallied: Schema, records: list[bytes], rows: list[dict[str, Any]]) -> None:
    """Migrated records written with the rows they were encoded from, which the statistics take
    as an append's columns (stats.columns), not the records decoded again (unless a feature's
    values are in no form taken as given, or the row lacks one: then they are). ``tallied``: the
    features the statistics count (the rest were given whole: ShardSink.give_stats)."""
    columns = rows_columns(rows, list(tallied.all_features))
    got = decoded_columns(tallied, columns, len(records), {}, {})
    if got is None:
        sink.write_many(records)
    else:
        sink.write_decoded(records, *got)


def _record_error(job: ShardJob, index: int, e: Exception) -> MigrationError:
    """One line naming the migration, and the shard and record where it could (a plain message
    pickles back to the caller from a worker process)."""
    at = f"{job.spec.id}: {job.source}: record {index}"
    if isinstance(e, ValidationError):
        return MigrationError(f"{at}: " + (f"feature {e.feature!r}: " if e.feature else "") + e.reason)
    if isinstance(e, CatalogError):  # already says where (a damaged shard...)
        return MigrationError(f"{job.spec.id}: {e}")
    return MigrationError(f"{at}: the migration raised {type(e).__name__}: {e}")  # a function of the script


# --------------------------------------------------------------------------- plan and report


@dataclass
class MigrationResult(JsonReport):
    id: str
    checksum: str
    operations: list[str]
    from_schema_version: int
    to_schema_version: int
    diff: SchemaDiff
    shards: int
    records: int
    version: int | None = None  # the commit's dataset version (None on a dry run)
    seconds: float = field(default=0.0, metadata=SECONDS)


@dataclass
class MigrateReport(JsonReport):
    dataset: str
    dry_run: bool
    version: int
    schema_version: int
    migrations: list[MigrationResult] = field(default_factory=list)
    duplicate: bool = False  # a retried token: its commit (``version``) was made before, nothing done now


@dataclass(frozen=True)
class Pending:
    spec_id: str
    checksum: str
    script: Path | None
    operations: list[Operation]
    quick_json: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class MigrationStatus(JsonReport):
    id: str
    status: str  # applied | pending | edited | missing
    checksum: str
    file_checksum: str | None
    from_schema_version: int | None
    to_schema_version: int | None
    version: int | None
    rows: int | None
    seconds: float | None
    applied_at: str | None


def applied_rows(ds: DatasetHandle) -> list[Any]:
    with mf.read_txn(ds.catalog.engine) as conn:
        return list(
            conn.execute(
                select(APPLIED_MIGRATIONS)
                .where(APPLIED_MIGRATIONS.c.dataset_id == ds.id, APPLIED_MIGRATIONS.c.reverted_version.is_(None))
                .order_by(APPLIED_MIGRATIONS.c.applied_version)
            ).all()
        )


def status(ds: DatasetHandle, migrations: str | os.PathLike[str] = DEFAULT_DIR) -> list[MigrationStatus]:
    """Applied and pending migrations, oldest first, with their checksums."""
    directory = Path(migrations)
    files = {f.id: f for f in discover(directory, ds.name)}
    out = []
    for r in applied_rows(ds):
        # a quick migration has no file (one named as it is a pending file, which migrate refuses)
        f = files.pop(r.migration_id, None) if r.operations is None else None
        if f is None:
            state = "applied" if r.operations is not None else "missing"
        else:
            state = "applied" if f.checksum == r.checksum else "edited"
        out.append(
            MigrationStatus(
                r.migration_id,
                state,
                r.checksum,
                f.checksum if f else None,
                r.from_schema_version,
                r.to_schema_version,
                r.applied_version,
                r.rows,
                r.seconds,
                r.applied_at.isoformat() + "Z",
            )
        )
    out += [MigrationStatus(f.id, "pending", f.checksum, f.checksum, *([None] * 6)) for f in files.values()]
    return out


def pending_files(ds: DatasetHandle, directory: Path, to: int | None) -> list[MigrationFile]:
    files = discover(directory, ds.name)
    rows = applied_rows(ds)
    applied = {r.migration_id: r for r in rows if r.operations is None}  # files' (quick ones hold operations)
    for f in files:
        r = applied.get(f.id)
        if r is not None and r.checksum != f.checksum:
            raise MigrationError(
                f"{f.path}: migration {f.id} was edited after it was applied (sha256 now {f.checksum[7:19]}..., "
                f"applied {r.checksum[7:19]}...): restore the file, or write a new migration"
            )
    if to is not None and not any(f.number == to for f in files):
        raise MigrationError(f"--to {to:04d}: no migration numbered {to:04d} in {directory / ds.name}")
    pending = [f for f in files if f.id not in applied and (to is None or f.number <= to)]
    _check_numbers(pending, rows)
    return pending


def _check_numbers(pending: list[MigrationFile], rows: list[Any]) -> None:
    """Files and quick migrations share one sequence: a pending file needs a number after every
    applied migration's (whether its file is still there or not), never one a quick migration took."""
    numbered = sorted((n, r.applied_version, r) for r in rows if (n := migration_number(r.migration_id)) is not None)
    if not pending or not numbered:
        return
    last_number, _version, last = numbered[-1]
    quick = {n: r for n, _v, r in numbered if r.operations is not None}
    for f in pending:
        if (r := quick.get(f.number)) is not None:
            raise MigrationError(
                f"{f.path}: number {f.number:04d} is taken by the quick migration {r.migration_id} "
                f"(version {r.applied_version}): number it after {last_number:04d}"
            )
    if pending[0].number <= last_number:
        raise MigrationError(
            f"{pending[0].path}: pending, but {last.migration_id} is already applied: number it after {last_number:04d}"
        )


def migration_number(migration_id: str) -> int | None:
    """An applied migration's place in its dataset's one sequence: the NNNN of a file's stem
    (NNNN_slug) or of a quick migration's id (NNNN_quick). None for the ids quick migrations
    had before they shared the sequence, ``quick-NNNN`` (NNNN: the schema version they made):
    still read as they are, they take no number (nor can a new id be one of them)."""
    m = NUMBERED_ID.match(migration_id)
    return int(m.group(1)) if m else None


def next_number(ds: DatasetHandle, file_numbers: Sequence[int]) -> int:
    """The number after every migration file's and every applied migration's (files and quick)."""
    applied = [n for r in applied_rows(ds) if (n := migration_number(r.migration_id)) is not None]
    return max([*file_numbers, *applied], default=0) + 1


def new_migration(ds: DatasetHandle, directory: Path, slug: str) -> Path:
    """Write the next numbered template, ``<directory>/<dataset>/NNNN_<slug>.py``."""
    slug = slug.replace("-", "_")
    if not SLUG_RE.fullmatch(slug):
        raise MigrationError(f"slug {slug!r}: use letters, digits and '_' (it becomes part of a file name)")
    number = next_number(ds, [f.number for f in discover(directory, ds.name)])
    folder = directory / ds.name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{number:04d}_{slug}.py"
    with open(path, "x", encoding="utf-8") as f:
        f.write(TEMPLATE.format(dataset=ds.name, number=number, slug=slug.replace("_", " ")))
    return path


def _pending(ds: DatasetHandle, directory: Path, to: int | None, quick: list[dict[str, Any]] | None) -> list[Pending]:
    if quick:
        ops = [from_json(o) for o in quick]
        text = json.dumps(quick, sort_keys=True)
        # numbered with the files: the next number after the folder's files (applied or not:
        # a file keeps its number) and the applied migrations; a file named with it is refused
        number = next_number(ds, file_numbers(directory, ds.name))
        return [Pending(f"{number:04d}_{QUICK_SLUG}", sha256_of(text.encode()), None, ops, quick)]
    if not directory.is_dir():
        raise MigrationError(f"{directory}: no such folder (--migrations DIR holds one folder of scripts per dataset)")
    files = pending_files(ds, directory, to)
    # Jobs carry the script's absolute path: a worker (a Dask one) has another working directory.
    return [Pending(f.id, f.checksum, f.path.absolute(), load_operations(f.path, f.checksum)) for f in files]


# --------------------------------------------------------------------------- migrate


def migrate(
    ds: DatasetHandle,
    migrations: str | os.PathLike[str] = DEFAULT_DIR,
    *,
    to: int | None = None,
    dry_run: bool = False,
    add: Sequence[str] = (),
    drop: Sequence[str] = (),
    rename: Sequence[str] = (),
    compression: str | None = None,
    **kw: Unpack[VerbKeywords],
) -> MigrateReport:
    """Apply the pending migrations of ``migrations/<name>/`` in order, one commit each; or,
    with ``add``/``drop``/``rename`` (the CLI's quick forms), one quick migration. With
    ``compression`` (none, gzip or zlib), the rewritten shards, and the dataset's new ones
    from then on, are stored so.

    ``token``: a quick migration's commit carries it, and a retry with the token of one that
    committed rewrites nothing and reports that commit (``duplicate``). Migration files'
    commits carry ``TOKEN:ID`` each; a retry applies what is still pending, as any run does."""
    check_keywords("migrate", kw, VerbKeywords)
    token, opts = kw.get("token"), CommitOptions.taking(kw)
    quick = quick_operations(add, drop, rename) if (add or drop or rename) else None
    if quick is not None and not dry_run and (prior := token_commit(ds, token)) is not None:
        return MigrateReport(ds.name, False, prior.version, prior.schema_version, duplicate=True)
    pending = _pending(ds, Path(migrations), to, quick)
    target = None if compression is None else stored_compression(compression)
    if target is not None and not pending:
        raise MigrationError(
            f"{ds.name}: no migration pending to rewrite the shards with: `catalog compact {ds.name} "
            f"--compression {target}` changes the compression alone"
        )
    snap = snapshot(ds)
    report = MigrateReport(ds.name, dry_run, snap.version, snap.schema_version)
    if dry_run:
        schema, sv = snap.schema, snap.schema_version
        for p in pending:
            chain = evolve(schema, p.operations)
            report.migrations.append(_result(p, sv, chain, snap))
            schema, sv = chain[-1], sv + 1
        return report
    with executor_for(kw.get("executor"), kw.get("workers"), max(len(snap.shards), 1)) as ex:
        for p in pending:
            tag = token if token is None or quick is not None else f"{token}:{p.spec_id}"
            result = _apply(ds, p, ex, opts.message, opts.author or default_author(), kw.get("progress"), target, tag)
            report.migrations.append(result)
            report.version, report.schema_version = result.version or report.version, result.to_schema_version
    return report


def _result(p: Pending, sv: int, chain: list[Schema], snap: Snapshot) -> MigrationResult:
    return MigrationResult(
        p.spec_id, p.checksum, [op.describe() for op in p.operations], sv, sv + 1, chain[0].diff(chain[-1]),
        len(snap.shards), snap.records,
    )  # fmt: skip


def _apply(
    ds: DatasetHandle,
    p: Pending,
    ex: Executor | None,
    message: str,
    author: str,
    progress: Progress | None,
    compression: str | None = None,
    token: str | None = None,
) -> MigrationResult:
    start = time.monotonic()
    snap = snapshot(ds)
    chain = evolve(snap.schema, p.operations)
    result = _result(p, snap.schema_version, chain, snap)
    script = str(p.script) if p.script else None
    spec = MigrationSpec(result.id, snap.schema.to_json(), script, p.checksum, tuple(p.quick_json or ()))
    message = message or f"migration {result.id}: " + "; ".join(result.operations)
    with Intent.of(ds) as intent:
        done: dict[int, ShardFile | None] = {}
        todo = list(snap.shards)
        for _round in range(CATCHUP_ROUNDS):
            done.update(_run(ds, spec, todo, intent, len(done), ex, progress, compression or ds.compression))
            change = _change(snap, done, chain[-1], p, result.id, message, author, intent.id, start)
            change = change.with_updates(None if compression is None else SetCompression(compression))
            change.token = token
            try:
                committed = commit(ds, change)
                if committed.duplicate:  # a twin with the token committed meanwhile: ours is not needed
                    intent.settle(None, intent.discard_files)
            except LiveChanged as e:
                if e.retired:
                    raise CommitConflictError(
                        f"shards of {ds.name!r} were rewritten during the migration (by a compact, restore or "
                        "erasure): nothing was registered; run `catalog migrate` again"
                    ) from None
                snap = _with_appended(ds, snap, e.appended)  # appends landed: migrate them too
                todo = [s for s in snap.shards if s.id in e.appended]
                continue
            result.version, result.seconds = committed.version, time.monotonic() - start
            result.records, result.shards = snap.records, len(snap.shards)
            return result
        # raised inside the intent's block, so that its files go with it
        raise CommitConflictError(
            f"appends to {ds.name!r} kept landing during the migration: nothing was registered; run it again"
        )


def _change(
    snap: Snapshot,
    done: dict[int, ShardFile | None],
    target: Schema,
    p: Pending,
    migration_id: str,
    message: str,
    author: str,
    intent: str,
    start: float,
) -> Change:
    """The migration's commit: every shard in ``done`` retired, its rewrite (if any records) in its place."""
    new_sv = snap.schema_version + 1
    read = RetireShards.of(s for s in snap.shards if s.id in done)
    added = [NewShard(f, s.seq, new_sv, s.split) for s in _in_order(snap, done) if (f := done[s.id]) is not None]
    row = {
        "migration_id": migration_id,
        "checksum": p.checksum,
        "rows": sum(s.records for s in snap.shards),
        "seconds": time.monotonic() - start,
        "operations": json.dumps(p.quick_json) if p.quick_json is not None else None,
    }
    return Change(
        MIGRATE, snap.version, snap.schema_version, message, author, intent,
        (adding(added), read, SetSchema(target), RecordMigration(row)),
        (RequireLive(frozenset(done)),),
    )  # fmt: skip


def _in_order(snap: Snapshot, done: dict[int, ShardFile | None]) -> list[LiveShard]:
    return [s for s in snap.shards if s.id in done]


def _with_appended(ds: DatasetHandle, snap: Snapshot, appended: set[int]) -> Snapshot:
    now = snapshot(ds)
    known = {s.id for s in snap.shards}
    extra = [s for s in now.shards if s.id in appended and s.id not in known]
    if now.schema_version != snap.schema_version:
        raise CommitConflictError(f"dataset {ds.name!r} changed schema during the migration: run it again")
    return Snapshot(snap.version, snap.schema_version, snap.schema, snap.shards + extra)


def _run(
    ds: DatasetHandle,
    spec: MigrationSpec,
    shards: list[LiveShard],
    intent: Intent,
    first_unit: int,
    ex: Executor | None,
    progress: Progress | None,
    compression: str,
) -> dict[int, ShardFile | None]:
    root = ds.catalog.store.root
    on = ds.catalog.statistics
    sources = stored_stats(ds, [s.rel for s in shards]) if on else {}
    lineage = Lineage.of(spec)
    derived = {s.rel: d for s in shards if s.rel in sources and (d := lineage.derive(sources[s.rel])) is not None}

    def job(i: int, s: LiveShard) -> ShardJob:
        tally = on and s.rel not in derived  # a derived shard's statistics need no records
        fills = lineage.fills(sources.get(s.rel))
        unit = intent.prefix(first_unit + i)
        given = lineage.given(sources[s.rel]) if tally and s.rel in sources else None
        return ShardJob(
            spec, s.path, s.records, root, ds.name, unit, s.bytes, compression, tally, fills, lineage.added,
            s.checksum, s.fingerprint, s.location is not None, given,
        )  # fmt: skip

    jobs = [job(i, s) for i, s in enumerate(shards)]
    done = (lambda job, _r: progress(job.records)) if progress else None
    files = run_jobs(migrate_shard, jobs, ex, intent, done)
    for i, (s, f) in enumerate(zip(shards, files, strict=True)):
        stats = derived.get(s.rel)
        if f is not None and stats is not None:
            files[i] = replace(f, stats=stats.to_bytes())
    return {s.id: f for s, f in zip(shards, files, strict=True)}


ADDED = ""  # a feature's origin when the migration fills it with its default in every record


@dataclass(frozen=True)
class Lineage:
    """Where each feature of a migration's target schema comes from: a source feature (through
    renames), or ADDED; a feature absent here is computed (a function, a transform)."""

    origins: dict[str, str]
    target: Schema
    byte_level: bool  # the records' other bytes are the source's (add a constant, drop, rename)
    same: dict[str, str]  # features a row-level plan writes as it read them -> their source name

    @classmethod
    def of(cls, spec: MigrationSpec) -> Lineage:
        ops, chain = spec.ops(), spec.chain()
        origins = {name: name for name in chain[0].all_features}
        for op, after in zip(ops, chain[1:], strict=True):
            if isinstance(op, AddField):
                feat = after.all_features.get(op.name)
                if feat is not None and feat.has_default and op.fn is None:
                    origins[op.name] = ADDED
            elif isinstance(op, DropField):
                origins.pop(op.name, None)
            elif isinstance(op, RenameField) and op.old in origins:
                origins[op.new] = origins.pop(op.old)
        target = chain[-1]
        kept = {name: o for name, o in origins.items() if name in target.all_features}
        byte_level = all(op.byte_level for op in ops) and not any(s.sequence for s in chain)
        return cls(kept, target, byte_level, untouched(ops, chain))

    @property
    def added(self) -> tuple[str, ...]:
        return tuple(name for name, o in self.origins.items() if o == ADDED)

    def fills(self, source: DatasetStats | None) -> tuple[tuple[str, int], ...] | None:
        """The new shard's records filled from defaults, per feature: the source's counts carried
        by name, every record for an added constant (migrated records hold the values, so decoding
        them could not tell); None without the source's statistics."""
        if source is None:
            return None
        counts = {name: source.records if o == ADDED else source.features[o].filled
                  for name, o in self.origins.items() if o == ADDED or o in source.features}  # fmt: skip
        return tuple((name, n) for name, n in counts.items() if n)

    def given(self, source: DatasetStats) -> bytes | None:
        """A row-level migration's new shard's statistics of the features it writes as it read
        them: the source shard's (same records, same values, same fills), as ShardJob.given;
        None when there are none (or the source's do not cover its records)."""
        features = {
            name: replace(fs, name=name)
            for name, old in self.same.items()
            if (fs := source.features.get(old)) is not None and fs.records == source.records
        }
        return DatasetStats(features, source.records).to_bytes() if features else None

    def derive(self, source: DatasetStats) -> DatasetStats | None:
        """A byte-level migration's new shard's statistics from its source's, nothing decoded (a
        rename renames, a drop drops, an added constant is one value n times); None for another
        migration, or when the source's statistics are of another schema."""
        if not self.byte_level:
            return None
        features = {}
        for name, feat in self.target.all_features.items():
            origin = self.origins.get(name)
            if origin == ADDED:
                features[name] = constant_stats(feat, source.records)
            elif origin is not None and origin in source.features:
                features[name] = replace(source.features[origin], name=name)
            else:
                return None
        return DatasetStats(features, source.records)
