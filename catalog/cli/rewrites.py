"""Verbs that rewrite a dataset's shards or history: migrate (and its scripts), restore,
compact, export."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from catalog.cli.base import executor_of, open_catalog, progress_bar, verb
from catalog.cli.generated import takes
from catalog.cli.options import (
    AsJson,
    DatasetName,
    DryRun,
    ExecutorKind,
    Force,
    MigrationsDir,
    Scheduler,
    Split,
    Version,
    Workers,
    compression_option,
    parse_bytes,
    parse_version,
)
from catalog.cli.output import Output, counted, human

if TYPE_CHECKING:
    from catalog.ops.migrations.runner import MigrateReport, MigrationStatus
    from catalog.ops.options import CompactOptions, MigrateOptions, RestoreOptions
    from catalog.ops.rewrite import CompactReport


@verb
@takes(
    "MigrateOptions",
    "name migrations to dry_run workers executor scheduler message add drop rename as_json compression token",
    hidden="author",
)
def migrate(
    name: DatasetName,
    options: MigrateOptions,
    migrations: MigrationsDir = Path("migrations"),
    to: Annotated[int | None, typer.Option("--to", metavar="NNNN", help="Apply up to this migration number.")] = None,
    dry_run: DryRun = False,
    workers: Workers = None,
    executor: ExecutorKind = "local",
    scheduler: Scheduler = None,
    add: Annotated[
        list[str] | None,
        typer.Option("--add", metavar="FEATURE:DTYPE=DEFAULT", help="Quick migration: add a scalar feature."),
    ] = None,
    drop: Annotated[list[str] | None, typer.Option("--drop", metavar="FEATURE", help="Quick migration.")] = None,
    rename: Annotated[list[str] | None, typer.Option("--rename", metavar="OLD:NEW", help="Quick migration.")] = None,
) -> Output:
    ds = open_catalog().dataset(name)
    quick: dict[str, Any] = {"add": add or (), "drop": drop or (), "rename": rename or ()}
    total = None
    if sys.stderr.isatty() and not dry_run:  # the bar's total: records times pending migrations
        plan = ds.migrate(migrations, to=to, dry_run=True, **quick)
        total = sum(m.records for m in plan.migrations)
    with (
        executor_of(executor, scheduler, workers, needed=not dry_run) as ex,
        progress_bar(f"migrate {name}", total, "records") as progress,
    ):
        report = ds.migrate(
            migrations, to=to, dry_run=dry_run, workers=workers, executor=ex, progress=progress, **quick,
            **asdict(options),
        )  # fmt: skip
    return Output(text=_migrate_text(name, report, dry_run), json=report.to_json)


def _migrate_text(name: str, report: MigrateReport, dry_run: bool) -> Iterator[str]:
    if report.duplicate:
        yield f"{name}: already committed (token seen before) as version {report.version}"
        return
    if not report.migrations:
        yield f"{name}: no pending migrations (schema version {report.schema_version})"
        return
    for m in report.migrations:
        head = "would apply" if dry_run else "applied"
        where = "" if m.version is None else f" -> version {m.version}"
        yield (
            f"{head} {m.id}: schema v{m.from_schema_version} -> v{m.to_schema_version}{where}, "
            f"{counted(m.records, 'record')} in {counted(m.shards, 'shard')}"
            + ("" if dry_run else f" ({m.seconds:.2f} s)")
        )
        for op in m.operations:
            yield f"  {op}"
        diff = m.diff
        for label, names in (("added", diff.added), ("removed", diff.removed), ("changed", list(diff.changed))):
            if names:
                yield f"  {label}: {', '.join(names)}"


@verb
def migrations_new(
    name: DatasetName,
    slug: Annotated[str, typer.Argument(help="What it does, e.g. add_height.")],
    migrations: MigrationsDir = Path("migrations"),
) -> Output:
    from catalog.ops.migrations.runner import new_migration

    path = new_migration(open_catalog().dataset(name), migrations, slug)
    return Output(text=[f"wrote {path}; fill in `operations`, then run `catalog migrate {name} --dry-run`"])


@verb
def migrations_list(
    name: DatasetName,
    migrations: MigrationsDir = Path("migrations"),
    as_json: AsJson = False,
) -> Output:
    rows = open_catalog().dataset(name).migrations(migrations)
    return Output(text=_migrations_text(name, migrations, rows), json=lambda: [r.to_json() for r in rows])


def _migrations_text(name: str, migrations: Path, rows: list[MigrationStatus]) -> Iterator[str]:
    if not rows:
        yield f"{name}: no migrations in {migrations / name}"
        return
    yield f"{'MIGRATION':32} {'STATUS':8} {'SCHEMA':>9} {'VERSION':>7}  CHECKSUM"
    for r in rows:
        schema = f"v{r.from_schema_version}->v{r.to_schema_version}" if r.to_schema_version else ""
        yield f"{r.id:32} {r.status:8} {schema:>9} {r.version or '':>7}  {r.checksum[:19]}"


@verb
@takes("RestoreOptions", "name version message as_json token", hidden="author")
def restore(
    name: DatasetName,
    options: RestoreOptions,
    version: Annotated[
        str,
        typer.Option(
            "--version", parser=parse_version, metavar="N|TAG", help="The version (number or tag) to bring back."
        ),
    ],
) -> Output:
    ds = open_catalog().dataset(name)
    what = version if version.isdigit() else f"{ds.info(version).version} (tag {version})"
    commit = ds.restore(version, **asdict(options))
    head = "already committed (token seen before): " if commit.duplicate else ""
    text = (
        f"{head}restored {name} to version {what} as version {commit.version} (schema version "
        f"{commit.schema_version}): {counted(commit.total_records, 'record')} in "
        f"{counted(commit.total_shards, 'shard')}"
    )
    return Output(text=[text], json=commit.to_json)


@verb
@takes(
    "CompactOptions",
    "name target_size workers executor scheduler message dry_run as_json split compression token",
    hidden="author",
)
def compact(
    name: DatasetName,
    options: CompactOptions,
    target_size: Annotated[
        int | None,
        typer.Option("--target-size", parser=parse_bytes, metavar="BYTES", help="Merged shard size (default 256 MiB)."),
    ] = None,
    workers: Workers = None,
    executor: ExecutorKind = "local",
    scheduler: Scheduler = None,
    dry_run: DryRun = False,
) -> Output:
    ds = open_catalog().dataset(name)
    with (
        executor_of(executor, scheduler, workers, needed=not dry_run) as ex,
        progress_bar(f"compact {name}", ds.info().bytes) as progress,
    ):
        report = ds.compact(
            target_size, workers=workers, executor=ex, dry_run=dry_run, progress=progress, **asdict(options)
        )  # fmt: skip
    return Output(text=_compact_text(name, report, dry_run), json=report.to_json)


def _compact_text(name: str, report: CompactReport, dry_run: bool) -> Iterator[str]:
    if report.commit is not None and report.commit.duplicate:
        yield f"{name}: already committed (token seen before) as version {report.commit.version}"
        return
    if not report.groups:
        yield f"{name}: nothing to compact ({counted(report.shards_before, 'shard')})"
        return
    head = "would merge" if dry_run else "merged"
    tail = "" if report.commit is None else f" as version {report.commit.version}"
    yield (
        f"{head} {counted(report.shards_before - report.shards_after + report.groups, 'shard')} into "
        f"{report.groups} ({human(report.bytes)}): {report.shards_before} -> "
        f"{counted(report.shards_after, 'shard')}{tail}"
    )


@verb
def export(
    name: DatasetName,
    out: Annotated[Path, typer.Argument(help="The TFRecord file to write (replaced only with --force).")],
    version: Version = None,
    compression: Annotated[str, compression_option("Compression.")] = "none",
    as_json: AsJson = False,
    split: Split = None,
    force: Force = False,
) -> Output:
    ds = open_catalog().dataset(name)
    with progress_bar(f"export {name}", ds.info(version).bytes) as progress:
        report = ds.export(out, version, compression, progress, split=split, force=force)
    what = "" if split is None else f" {split}"
    text = (
        f"exported {name} version {report.version}{what}: {counted(report.records, 'record')} to {report.path} "
        f"({human(report.bytes)}, compression {report.compression})"
    )
    return Output(text=[text], json=report.to_json)
