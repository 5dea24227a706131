"""Verbs that change rows: delete and update (catalog/ops/rowchanges.py) and dedup
(catalog/ops/dedup.py), each a new version of the same dataset in which only the shards
holding a match were rewritten; and verbs that derive new datasets: filter, map, refresh and
lineage (catalog/ops/derive.py)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from catalog.cli.base import open_catalog, running, verb
from catalog.cli.generated import takes
from catalog.cli.options import (
    AsJson,
    DatasetName,
    DryRun,
    Jobs,
    Version,
    parse_defaults,
)
from catalog.cli.output import Output, counted

if TYPE_CHECKING:
    from catalog.ops.derive import DeriveReport
    from catalog.ops.options import (
        DedupOptions,
        DeleteOptions,
        FilterOptions,
        MapOptions,
        RefreshOptions,
        UpdateOptions,
    )
    from catalog.ops.rowchanges import RowChangeReport

Where = Annotated[
    str,
    typer.Option(
        "--where",
        metavar="EXPR",
        help="The rows it applies to (deletes, updates, keeps): feature = value, <, <=, >, >=, !=, IN (...), "
        "IS NULL, len(feature), AND, OR, NOT, parentheses; 'quoted' text.",
    ),
]
Key = Annotated[
    str | None,
    typer.Option(
        "--key",
        metavar="FEATURE[,FEATURE...]",
        help="The features whose values make a row's identity (absent equals absent; NaN equals NaN).",
    ),
]
SHOWN = 200  # characters of a predicate a line shows (--json has it whole)
DEDUP_DRY_RUN = "Say how many duplicate rows in how many shards would go; write nothing."
Content = Annotated[
    bool, typer.Option("--content", help="Whole-record identity: the serialized record's bytes, instead of --key.")
]
Sets = Annotated[
    list[str],
    typer.Option("--set", metavar="FEATURE=VALUE", help="A feature and its new value (repeat for more)."),
]


@verb
@takes(
    "DeleteOptions",
    "name where split purge rewrite_adopted skip_derived message author token dry_run workers executor scheduler "
    "as_json",
    jobs=True,
)
def delete(
    name: DatasetName,
    options: DeleteOptions,
    jobs: Jobs,
    where: Where,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say how many rows in how many shards would go; write nothing.")
    ] = False,
) -> Output:
    ds = open_catalog().dataset(name)
    with running(jobs, f"delete from {name}", ds.info().records, needed=not dry_run) as run:
        report = ds.delete(where, dry_run=dry_run, **run, **asdict(options))
    return Output(text=_text(report), json=report.to_json)


@verb
@takes(
    "UpdateOptions", "name sets where split message author token dry_run workers executor scheduler as_json", jobs=True
)
def update(
    name: DatasetName,
    options: UpdateOptions,
    jobs: Jobs,
    sets: Sets,
    where: Where,
    dry_run: DryRun = False,
) -> Output:
    from catalog.ops.rowchanges import parse_sets

    ds = open_catalog().dataset(name)
    values = parse_sets(ds.schema, parse_defaults(sets, "--set"))
    with running(jobs, f"update {name}", ds.info().records, needed=not dry_run) as run:
        report = ds.update(where, values, dry_run=dry_run, **run, **asdict(options))
    return Output(text=_text(report), json=report.to_json)


@verb
@takes(
    "DedupOptions",
    "name key content split per_split message author token dry_run workers executor scheduler as_json",
    jobs=True,
)
def dedup(
    name: DatasetName,
    options: DedupOptions,
    jobs: Jobs,
    dry_run: Annotated[bool, typer.Option("--dry-run", help=DEDUP_DRY_RUN)] = False,
    key: Key = None,
    content: Content = False,
) -> Output:
    ds = open_catalog().dataset(name)
    with running(jobs, f"dedup {name}", ds.info().records) as run:
        report = ds.dedup(key, content=content, dry_run=dry_run, **run, **asdict(options))
    return Output(text=_deduped(report), json=report.to_json)


def _deduped(report: RowChangeReport) -> Iterator[str]:
    name, rows = report.dataset, counted(report.rows, "duplicate row")
    where = f"{report.shards} of {counted(report.shards_read, 'shard')}"
    if report.duplicate:
        yield f"{name}: already committed (token seen before) as version {report.version}"
    elif not report.rows:
        yield f"{name}: no duplicate rows ({report.where}): nothing committed"
    elif report.dry_run:
        yield f"{name}: would remove {rows} in {where} (version {report.read_version}); nothing written"
    else:
        yield f"{name}: removed {rows} in {where}: version {report.version} ({counted(report.records_after, 'record')})"


def _text(report: RowChangeReport) -> Iterator[str]:
    yield from _text_of(report)
    for heir in report.derived:  # an erasure's in the datasets derived from this one
        yield from _text_of(heir)


def _text_of(report: RowChangeReport) -> Iterator[str]:
    name, rows, verb = report.dataset, counted(report.rows, "row"), report.operation
    if report.duplicate:
        yield f"{name}: already committed (token seen before) as version {report.version}"
        return
    if not report.rows and not report.erased:
        where = report.where if len(report.where) <= SHOWN else f"{report.where[:SHOWN]}…"  # (up to 64 KiB)
        dropped = f"; {_dropped(report)}" if report.stats_dropped else ""
        yield f"{name}: no row matches {where}: nothing committed{dropped}"
        if report.unregistered:
            yield _unregistered(report)
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
        + (f"; {_dropped(report)}" if report.stats_dropped else "")
    )
    if report.unregistered:
        yield _unregistered(report)


def _unregistered(report: RowChangeReport) -> str:
    files = counted(report.unregistered, "unregistered file")
    return (
        f"{report.dataset}: {files} in its folder (a writer at work, or one killed) were not read and may hold "
        "erased rows: once no writer runs, `catalog gc --grace 0` removes them"
    )


def _dropped(report: RowChangeReport) -> str:
    return f"statistics of {counted(report.stats_dropped, 'shard')} gc collected dropped (their rows cannot be checked)"


# --------------------------------------------------------------------------- derived datasets

Into = Annotated[str, typer.Argument(help="The new dataset's name.")]


@verb
@takes(
    "FilterOptions", "name into where version split message author token workers executor scheduler as_json", jobs=True
)
def filter(
    name: Annotated[str, typer.Argument(help="The source dataset.")],
    into: Into,
    options: FilterOptions,
    jobs: Jobs,
    where: Where,
    version: Version = None,
) -> Output:
    src = open_catalog().dataset(name)
    with running(jobs, f"filter {name}", src.info(version).records) as run:
        report = src.filter(where, into, version=version, **run, **asdict(options))
    return Output(text=_derived(report), json=report.to_json)


@verb
@takes(
    "MapOptions",
    "name into fn schema batched version split message author token workers executor scheduler as_json",
    jobs=True,
)
def map(
    name: Annotated[str, typer.Argument(help="The source dataset.")],
    into: Into,
    options: MapOptions,
    jobs: Jobs,
    fn: Annotated[str, typer.Option("--fn", metavar="MODULE:FUNCTION", help="A function of a row returning a row.")],
    schema: Annotated[
        Path | None,
        typer.Option("--schema", help="The output's schema JSON file (default: inferred from the first outputs)."),
    ] = None,
    version: Version = None,
) -> Output:
    from catalog.ops.derive import load_function

    src = open_catalog().dataset(name)
    function = load_function(fn)
    with running(jobs, f"map {name}", src.info(version).records) as run:
        report = src.map(function, into, schema=schema, version=version, **run, **asdict(options))
    return Output(text=_derived(report), json=report.to_json)


@verb
@takes("RefreshOptions", "name message author workers executor scheduler as_json", hidden="token", jobs=True)
def refresh(
    name: DatasetName,
    options: RefreshOptions,
    jobs: Jobs,
) -> Output:
    ds = open_catalog().dataset(name)
    fields = {k: v for k, v in asdict(options).items() if k != "token"}
    with running(jobs, f"refresh {name}", 0) as run:
        report = ds.refresh(**run, **fields)
    return Output(text=_derived(report), json=report.to_json)


@verb
def lineage(name: DatasetName, as_json: AsJson = False) -> Output:
    chain = open_catalog().dataset(name).lineage()
    if not chain:
        text = [f"{name}: not derived from another dataset"]
    else:
        text = [f"{e.dataset} version {e.version} <- {e.describe()}" for e in chain]
    return Output(text=text, json=lambda: [e.to_json() for e in chain])


def _derived(report: DeriveReport) -> Iterator[str]:
    name = report.dataset
    if report.duplicate:
        yield f"{name}: already committed (token seen before) as version {report.version}"
    elif report.version is None:
        yield f"{name}: up to date with {report.source} version {report.source_version}: nothing committed"
    else:
        made = "refreshed" if report.refreshed else "made"
        yield (
            f"{name}: {made} version {report.version}: {counted(report.records, 'record')} in "
            f"{counted(report.shards, 'shard')} from {counted(report.records_read, 'record')} of {report.source} "
            f"version {report.source_version} ({report.operation})"
        )
