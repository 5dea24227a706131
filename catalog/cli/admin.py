"""Verbs on the catalog as a whole: init, backup, copy-manifest, upgrade, verify, gc."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from catalog.cli.base import catalog_option, executor_of, hold, open_catalog, open_reader, progress_bar, verb
from catalog.cli.options import AsJson, ExecutorKind, Force, Scheduler, parse_duration, workers_option
from catalog.cli.output import Output, counted, human

if TYPE_CHECKING:
    from catalog.commit.values import GcReport


@verb
def init(
    directory: Annotated[Path, typer.Argument(help="Directory for the new catalog.")],
    db_url: Annotated[
        str | None,
        typer.Option(
            "--db-url",
            help="SQLAlchemy URL of the manifest, e.g. postgresql+psycopg://user@host/db (default: $CATALOG_DB_URL, "
            "else SQLite in DIR). An existing manifest there is attached to.",
        ),
    ] = None,
    storage: Annotated[
        str | None,
        typer.Option(
            "--storage",
            metavar="PATH|URL",
            help="Where shards live: a directory, or e.g. s3://bucket/prefix (default: DIR/data).",
        ),
    ] = None,
) -> Output:
    from catalog.api import Catalog
    from catalog.manifest import has_password, safe_url

    cat = hold(Catalog.init(directory, db_url, storage))
    where = f"manifest {safe_url(str(cat.engine.url))}, " if cat.engine.dialect.name != "sqlite" else ""
    text = [f"initialized catalog in {cat.root} ({where}data area {cat.store.root})"]
    if db_url and has_password(db_url):
        text.append("note: the password was not recorded; give it with CATALOG_DB_URL, PGPASSWORD or ~/.pgpass")
    return Output(text=text)


@verb
def backup(
    out: Annotated[Path, typer.Argument(help="Where to write the copy of the manifest.")], force: Force = False
) -> Output:
    path = open_catalog(check=False).backup(out, force)  # an older manifest too: backed up before its upgrade
    return Output(text=[f"manifest backed up to {path}"])


@verb
def copy_manifest(
    db_url: Annotated[str, typer.Argument(help="URL of an empty database: PostgreSQL, or a new SQLite file.")],
    switch: Annotated[
        bool, typer.Option("--switch/--no-switch", help="Point this catalog directory at the copy afterwards.")
    ] = True,
    as_json: AsJson = False,
) -> Output:
    from catalog.manifest import safe_url

    cat = open_catalog()
    counts = cat.copy_manifest(db_url, switch)
    shards = counted(counts.get("shards", 0), "shard")
    text = [f"copied {counted(sum(counts.values()), 'row')} ({shards}) to {safe_url(db_url)}"]
    if switch:
        text.append(f"{cat.root} now uses the copy; other catalog directories on the old manifest must attach anew")
    return Output(text=text, json=lambda: {"ok": True, "target": safe_url(db_url), "switched": switch, "rows": counts})


@verb
def upgrade() -> Output:
    from catalog.api import Catalog
    from catalog.directory import find_root

    cat = hold(Catalog.open(find_root(catalog_option()), check=False))
    start, end = cat.upgrade()
    return Output(text=[f"manifest format {start} -> {end}" if start != end else f"manifest already at format {end}"])


@verb
def verify(
    names: Annotated[list[str] | None, typer.Argument(help="Datasets (default: all).")] = None,
    as_json: AsJson = False,
    workers: Annotated[int | None, workers_option("Shards checked")] = None,
    executor: ExecutorKind = "local",
    scheduler: Scheduler = None,
) -> Output:
    _one_blas_thread()
    from catalog.ops.maintenance import verify_catalog

    c = open_reader()  # not catalog.api's Catalog: verify's start-up counts in its GB/s
    with executor_of(executor, scheduler, workers, jobs=workers) as ex, progress_bar("verify", None) as progress:
        report = verify_catalog(c, names or None, progress, ex)
    bad = sum(p.problem != "unregistered" for p in report.problems)
    extra = len(report.problems) - bad
    # the current versions' shards apart from the retired ones older versions still read
    retired = f" and {counted(report.retired, 'retired shard')}" if report.retired else ""
    summary = f"{counted(report.shards, 'shard')}{retired}, {human(report.bytes)} checked: {counted(bad, 'problem')}"
    if extra:
        summary += f", {counted(extra, 'unregistered file')}"
    if report.not_indexed:
        summary += f", {len(report.not_indexed)} not indexed (`catalog index` indexes them)"
    return Output(
        text=(f"{p.problem}: {p.path}: {p.detail}" for p in report.problems),
        json=report.to_json,
        summary=("ok: " if report.ok else "FAILED: ") + summary,
        failed=not report.ok,
    )


def _one_blas_thread() -> None:
    """NumPy (the record index check, the schemas) loads OpenBLAS, which starts a thread per core
    as it loads: verify multiplies no matrices, and those threads cost its start-up about 8% of
    its CPU time on 2 cores, more of its wall time on a busy box. Set only before NumPy loads
    (OpenBLAS reads it then), never over the user's own setting."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


@verb
def gc(
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report what would be removed.")] = False,
    grace: Annotated[
        timedelta,
        typer.Option(
            "--grace",
            parser=parse_duration,
            metavar="DURATION",
            help="Leave unregistered files younger than this (default 1h).",
        ),
    ] = timedelta(hours=1),
    keep_versions: Annotated[
        int | None,
        typer.Option("--keep-versions", min=1, help="Also remove retired shards the newest K versions do not need."),
    ] = None,
    older_than: Annotated[
        timedelta | None,
        typer.Option(
            "--older-than",
            parser=parse_duration,
            metavar="DURATION",
            help="Also remove retired shards retired longer ago than this.",
        ),
    ] = None,
    as_json: AsJson = False,
) -> Output:
    report = open_catalog().gc(grace, dry_run, keep_versions=keep_versions, older_than=older_than)
    return Output(text=_gc_text(report, dry_run), json=report.to_json)


def _gc_text(report: GcReport, dry_run: bool) -> Iterator[str]:
    verb = "would remove" if dry_run else "removed"
    for p in report.removed:
        yield f"{verb} {p}"
    for p in report.links:
        yield f"left alone (a symbolic link, never followed) {p}"
    for name in report.abandoned:
        why = "registered for inputs whose process died before their commit"
        yield f"{'would drop' if dry_run else 'dropped'} dataset {name}: {why}"
    for p in report.forgotten:
        yield f"{'would forget' if dry_run else 'forgot'} adopted file {p} (no kept version needs it; left in place)"
    for p in report.missing:
        yield f"already missing ({'would be forgotten' if dry_run else 'forgotten'}) {p}"
    for k in report.kept_for_tags:
        yield f"kept {counted(len(k.shards), 'retired shard')} for tag {k.tag} of {k.dataset} (version {k.version})"
    retired = f" ({counted(len(report.retired), 'retired shard')})" if report.retired else ""
    if report.indexes_removed:  # with their shards: not in the list above, which names shards
        yield f"{verb} {counted(report.indexes_removed, 'record index file')} ({human(report.index_bytes)})"
    # A missing retired shard is dropped from the manifest with no file to remove: the summary says
    # so, since a piped `| tail -1` shows only this line.
    forget = "would forget" if dry_run else "forgot"
    forgot = f", {forget} {counted(len(report.missing), 'retired shard')} already missing" if report.missing else ""
    yield (
        f"{verb} {counted(len(report.removed), 'file')}{retired} ({human(report.bytes)}){forgot}; "
        f"kept {report.kept_young} younger than the grace period, {report.kept_live} of live writers and "
        f"{counted(report.kept_retired, 'retired shard')} for time travel"
        + (f", {report.kept_tagged} for tags" if report.kept_tagged else "")
    )
