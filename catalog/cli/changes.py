"""Verbs that change rows: delete and update (catalog/ops/rowchanges.py), each a new version
of the same dataset in which only the shards holding a match were rewritten."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated

import typer

from catalog.cli.base import executor_of, open_catalog, progress_bar, verb
from catalog.cli.generated import takes
from catalog.cli.options import AsJson, DatasetName, DryRun, ExecutorKind, Scheduler, Workers, parse_defaults
from catalog.cli.output import Output, counted

if TYPE_CHECKING:
    from catalog.ops.options import DeleteOptions, UpdateOptions
    from catalog.ops.rowchanges import RowChangeReport

Where = Annotated[
    str,
    typer.Option(
        "--where",
        metavar="EXPR",
        help="The rows to change: feature = value, <, <=, >, >=, !=, IN (...), IS NULL, len(feature), "
        "AND, OR, NOT, parentheses; 'quoted' text.",
    ),
]
Sets = Annotated[
    list[str],
    typer.Option("--set", metavar="FEATURE=VALUE", help="A feature and its new value (repeat for more)."),
]


@verb
@takes(
    "DeleteOptions",
    "name where split purge rewrite_adopted message author token dry_run workers executor scheduler as_json",
)
def delete(
    name: DatasetName,
    options: DeleteOptions,
    where: Where,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say how many rows in how many shards would go; write nothing.")
    ] = False,
    workers: Workers = None,
    executor: ExecutorKind = "local",
    scheduler: Scheduler = None,
    as_json: AsJson = False,
) -> Output:
    """Delete the rows that match --where: a new version in which only the shards holding a match are rewritten."""
    ds = open_catalog().dataset(name)
    with (
        executor_of(executor, scheduler, workers, needed=not dry_run) as ex,
        progress_bar(f"delete from {name}", ds.info().records, unit="records") as progress,
    ):
        report = ds.delete(where, dry_run=dry_run, workers=workers, executor=ex, progress=progress, **asdict(options))
    return Output(text=_text(report), json=report.to_json)


@verb
@takes("UpdateOptions", "name sets where split message author token dry_run workers executor scheduler as_json")
def update(
    name: DatasetName,
    options: UpdateOptions,
    sets: Sets,
    where: Where,
    dry_run: DryRun = False,
    workers: Workers = None,
    executor: ExecutorKind = "local",
    scheduler: Scheduler = None,
    as_json: AsJson = False,
) -> Output:
    """Set features of the rows that match --where: a new version; only the shards holding a match are rewritten."""
    from catalog.ops.rowchanges import parse_sets

    ds = open_catalog().dataset(name)
    values = parse_sets(ds.schema, parse_defaults(sets, "--set"))
    with (
        executor_of(executor, scheduler, workers, needed=not dry_run) as ex,
        progress_bar(f"update {name}", ds.info().records, unit="records") as progress,
    ):
        report = ds.update(
            where, values, dry_run=dry_run, workers=workers, executor=ex, progress=progress, **asdict(options)
        )  # fmt: skip
    return Output(text=_text(report), json=report.to_json)


def _text(report: RowChangeReport) -> Iterator[str]:
    name, rows, verb = report.dataset, counted(report.rows, "row"), report.operation
    if report.duplicate:
        yield f"{name}: already committed (token seen before) as version {report.version}"
        return
    if not report.rows and not report.erased:
        yield f"{name}: no row matches {report.where}: nothing committed"
        return
    done = {"delete": "deleted", "update": "updated"}[verb]
    where = f"{report.shards} of {counted(report.shards_total, 'shard')}"
    if report.purge:
        yield from _erased(report, where)
        return
    if report.dry_run:
        yield f"{name}: would {verb} {rows} in {where} (version {report.read_version}); nothing written"
        return
    yield (f"{name}: {done} {rows} in {where}: version {report.version} ({counted(report.records_after, 'record')})")


def _erased(report: RowChangeReport, where: str) -> Iterator[str]:
    rows, name = counted(report.erased, "row"), report.dataset
    if report.dry_run:
        yield f"{name}: would erase {rows} ({report.rows} in the current version) from {where}; nothing written"
        return
    yield (
        f"{name}: erased {rows} ({report.rows} in the current version) from {where}: version {report.version} "
        f"({counted(report.records_after, 'record')}); {counted(report.files_removed, 'old file')} deleted"
    )
