"""The ``catalog`` command: a thin typer layer over the library.

Every verb calls one library function and renders its result as text or ``--json``.
A :class:`CatalogError` becomes one line on stderr and exit code 1 (``--traceback``
shows the traceback instead); anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer

from catalog.errors import CatalogError, Interrupted

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from catalog.api import Catalog

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="TFRecord Catalog: a manifest for TFRecord datasets.",
)

F = TypeVar("F", bound=Callable[..., Any])
# Closed sets of option values are Literal types: the parser refuses anything else (exit 2).
InputFormat = Literal["auto", "tfrecord", "jsonl"]


@dataclass
class Globals:
    catalog: Path | None = None
    traceback: bool = False


# Set by the callback on every invocation (the CLI runs one command per process or per
# CliRunner call), so the error handler can see --traceback without threading a context.
_state = Globals()


def _globals() -> Globals:
    return _state


def handle_errors(fn: F) -> F:
    """Turn CatalogError into one stderr line and exit 1, unless --traceback was given."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CatalogError as e:
            if _globals().traceback:
                raise
            from catalog.manifest import redact

            typer.echo(f"error: {redact(str(e))}", err=True)
            raise typer.Exit(1) from None
        except KeyboardInterrupt as e:
            if _globals().traceback:
                raise
            # Interrupted says how a write ended; any other command was only reading.
            typer.echo(str(e) if isinstance(e, Interrupted) else "interrupted", err=True)
            raise typer.Exit(130) from None

    return wrapper  # type: ignore[return-value]


def echo_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, indent=2, ensure_ascii=False))


def echo_json_rows(obj: dict[str, Any], key: str, rows: Iterable[dict[str, Any]]) -> None:
    """``obj`` with ``obj[key] = rows`` as JSON, the (long, streamed) rows one compact object
    per line: readable, memory-flat for a million shards, and fast (indent= turns off json's
    C encoder, so only the head is indented)."""
    head = json.dumps(obj, indent=2, ensure_ascii=False)
    out = sys.stdout
    out.write((head[:-2] + ",\n" if obj else "{\n") + f'  "{key}": [')
    sep = "\n"
    for r in rows:
        out.write(sep + "    " + json.dumps(r, ensure_ascii=False))
        sep = ",\n"
    out.write("\n  ]\n}\n" if sep == ",\n" else "]\n}\n")


@app.callback()
def main_options(
    ctx: typer.Context,
    catalog: Annotated[
        Path | None, typer.Option("--catalog", "-C", help="Catalog directory (else $CATALOG_ROOT, else search up).")
    ] = None,
    traceback: Annotated[bool, typer.Option("--traceback", help="Show the traceback of errors.")] = False,
) -> None:
    global _state
    _state = Globals(catalog=catalog, traceback=traceback)
    ctx.obj = _state


@app.command()
@handle_errors
def inspect(
    file: Annotated[Path, typer.Argument(help="A TFRecord file (raw, gzip or zlib).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    limit: Annotated[int, typer.Option("--limit", min=0, help="Decoded examples to show.")] = 3,
) -> None:
    """Count, check and describe the records of a TFRecord file."""
    from catalog.inspection import inspect_file

    report = inspect_file(file, limit=limit)
    if as_json:
        echo_json(report.to_json())
        return
    typer.echo(f"file:        {report.path}")
    typer.echo(f"records:     {report.records}")
    typer.echo(f"bytes:       {report.bytes} on disk, {report.data_bytes} framed")
    typer.echo(f"compression: {report.compression}")
    typer.echo(f"crc:         {report.crc} (every record's length and data CRC checked)")
    typer.echo(f"message:     {report.message or 'not tf.train.Example'}")
    if report.note:
        typer.echo(f"note:        {report.note}")
    if report.schema is not None:
        typer.echo("schema:")
        typer.echo(json.dumps(report.schema, indent=2))
    for i, ex in enumerate(report.examples):
        typer.echo(f"example {i}: {json.dumps(ex, ensure_ascii=False)}")


@app.command()
@handle_errors
def demo(
    out: Annotated[Path, typer.Argument(help="Directory for the demo (inputs and catalog).")] = Path("demo-out"),
    records: Annotated[int, typer.Option("--records", min=1, help="Records per demo input.")] = 1000,
    migrations: Annotated[
        Path | None, typer.Option("--migrations", help="Folder holding demo/ migrations (default: the repo's).")
    ] = None,
) -> None:
    """Run the end-to-end demo, echoing each command: append, read, verify, migrate, time travel, compact, export."""
    from catalog.demo import copy_migrations, demo_migrations, prepare_demo_dir, write_demo

    source = migrations or demo_migrations()
    root = prepare_demo_dir(out)
    inputs = out / "inputs"
    write_demo(inputs, records)
    mig = copy_migrations(source, out)
    c = ["-C", str(root)]
    _demo_step(["init", str(root)])
    _demo_step([*c, "register", "demo", "--schema", str(inputs / "schema.json"), "--description", "demo dataset"])
    _demo_rows(root, records)
    _demo_step([*c, "append", "demo", str(inputs / "demo.tfrecord.gz"), "-m", "records from a gzip TFRecord file"])
    _demo_step([*c, "list"])
    _demo_step([*c, "show", "demo", "--no-shards"])
    _demo_step([*c, "cat", "demo", "--limit", "2"])
    _demo_step([*c, "verify"])
    _demo_step([*c, "migrations", "list", "demo", "--migrations", str(mig)])
    _demo_step([*c, "migrate", "demo", "--migrations", str(mig), "--dry-run"])
    _demo_step([*c, "migrate", "demo", "--migrations", str(mig)])
    _demo_step([*c, "migrate", "demo", "--add", "height:int64=4", "--add", "width:int64=4", "-m", "image size"])
    _demo_step([*c, "cat", "demo", "--limit", "1"])
    _demo_step([*c, "cat", "demo", "--version", "3", "--limit", "1"])
    _demo_step([*c, "compact", "demo"])
    _demo_step([*c, "export", "demo", str(out / "demo-export.tfrecord.gz"), "--compression", "gzip"])
    _demo_step([*c, "history", "demo"])
    _demo_step([*c, "verify"])
    typer.echo(
        f"\ndone: the catalog is in {root}, its migrations in {mig}; try `catalog -C {root} show demo --version 3` "
        f"or `catalog -C {root} migrations list demo --migrations {mig}`"
    )


def _demo_step(args: list[str]) -> None:
    typer.echo(f"\n$ catalog {shlex.join(args)}")
    code = app(args, prog_name="catalog", standalone_mode=False)
    if code:
        raise CatalogError(f"demo step `catalog {shlex.join(args)}` failed")


def _demo_rows(root: Path, records: int) -> None:
    from catalog.api import Catalog
    from catalog.demo import demo_rows

    typer.echo("\n>>> Catalog.open(root).dataset('demo').append_rows(rows, message='rows from Python')")
    with Catalog.open(root) as cat_:
        commit = cat_.dataset("demo").append_rows(demo_rows(records, start=records), message="rows from Python")
    typer.echo(f"version {commit.version}: {commit.records} records in {len(commit.shards)} new shard(s)")


# --------------------------------------------------------------------------- catalog verbs

BYTES_RE = re.compile(r"\s*(\d+)\s*(|b|k|kb|kib|m|mb|mib|g|gb|gib)\s*", re.IGNORECASE)  # fullmatch
_UNITS = {
    "": 1,
    "b": 1,
    "k": 1 << 10,
    "kb": 1 << 10,
    "kib": 1 << 10,
    "m": 1 << 20,
    "mb": 1 << 20,
    "mib": 1 << 20,
    "g": 1 << 30,
    "gb": 1 << 30,
    "gib": 1 << 30,
}
DURATION_RE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*")  # fullmatch
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_bytes(text: str) -> int:
    """BYTES: an integer with an optional KiB/MiB/GiB suffix (bad input: usage error, exit 2)."""
    m = BYTES_RE.fullmatch(text)
    if not m or int(m.group(1)) == 0:
        raise typer.BadParameter(f"{text!r} is not a size: use an integer with an optional KiB, MiB or GiB suffix")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def parse_duration(text: str | timedelta) -> timedelta:
    """DURATION: seconds, or N followed by s, m, h or d."""
    if isinstance(text, timedelta):  # typer hands the default through the parser too
        return text
    m = DURATION_RE.fullmatch(text)
    if not m:
        raise typer.BadParameter(f"{text!r} is not a duration: use seconds or N[smhd], e.g. 90, 15m, 2h, 7d")
    try:
        return timedelta(seconds=float(m.group(1)) * _SECONDS[m.group(2)])
    except OverflowError:  # beyond timedelta's range (float("9" * 400) is even infinite)
        raise typer.BadParameter(f"{text!r} is too long a duration: at most {timedelta.max.days}d") from None


def open_catalog() -> Catalog:
    from catalog.api import Catalog

    return Catalog.open(_globals().catalog)


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


@contextmanager
def progress_bar(description: str, total: int | None, unit: str = "bytes") -> Iterator[Callable[[int], None] | None]:
    """A rich progress bar on a terminal (``unit``: bytes or records); nothing (None) otherwise."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns: list[ProgressColumn] = [TextColumn("{task.description}"), BarColumn()]
    if unit == "bytes":
        columns += [DownloadColumn(), TransferSpeedColumn()]
    else:
        columns += [MofNCompleteColumn(), TextColumn(unit)]
    with Progress(*columns, TimeRemainingColumn(), transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


@app.command()
@handle_errors
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
) -> None:
    """Create a catalog directory: a new manifest and data area, or attach to a shared manifest."""
    from catalog.api import Catalog
    from catalog.manifest import has_password, safe_url

    cat = Catalog.init(directory, db_url, storage)
    where = f"manifest {safe_url(str(cat.engine.url))}, " if cat.engine.dialect.name != "sqlite" else ""
    typer.echo(f"initialized catalog in {cat.root} ({where}data area {cat.store.root})")
    if db_url and has_password(db_url):
        typer.echo("note: the password was not recorded; give it with CATALOG_DB_URL, PGPASSWORD or ~/.pgpass")


@app.command()
@handle_errors
def register(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    schema: Annotated[Path, typer.Option("--schema", help="Schema JSON file.")],
    description: Annotated[str, typer.Option("--description", help="What the dataset is.")] = "",
) -> None:
    """Register a dataset with its schema (dataset version 1, schema version 1)."""
    ds = open_catalog().register(name, schema, description)
    typer.echo(f"registered {ds.name} (version {ds.version}, schema version {ds.schema_version})")


@app.command(name="list")
@handle_errors
def list_(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List datasets."""
    infos = open_catalog().list()
    if as_json:
        keep = ("name", "description", "version", "schema_version", "shard_count", "records", "bytes", "created")
        echo_json([{k: i.to_json()[k] for k in keep} for i in infos])
        return
    if not infos:
        typer.echo("no datasets")
        return
    typer.echo(f"{'NAME':24} {'VERSION':>7} {'SCHEMA':>6} {'SHARDS':>7} {'RECORDS':>12} {'SIZE':>10}")
    for i in infos:
        typer.echo(
            f"{i.name:24} {i.version:>7} {i.schema_version:>6} {i.shard_count:>7} {i.records:>12} {_human(i.bytes):>10}"
        )


@app.command()
@handle_errors
def show(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    version: Annotated[int | None, typer.Option("--version", min=1, help="Dataset version (default: current).")] = None,
    no_shards: Annotated[bool, typer.Option("--no-shards", help="Leave out the shard list.")] = False,
) -> None:
    """Show a dataset: version, schema, totals and shards."""
    ds = open_catalog().dataset(name)
    info = ds.info(version)
    shards = iter(()) if no_shards else ds.iter_shards(info.version)
    if as_json:
        if no_shards:
            echo_json(info.to_json())
        else:
            echo_json_rows(info.to_json(), "shards", (s.to_json() for s in shards))
        return
    typer.echo(f"dataset:        {info.name}")
    if info.description:
        typer.echo(f"description:    {info.description}")
    typer.echo(f"version:        {info.version}")
    typer.echo(f"schema version: {info.schema_version}")
    typer.echo(f"records:        {info.records}")
    typer.echo(f"size:           {_human(info.bytes)} in {info.shard_count} shards")
    typer.echo("schema:")
    for fname, spec in info.schema["features"].items():
        typer.echo(f"  {fname}: {_feature_text(spec)}")
    for s in shards:
        typer.echo(f"  {s.path}  {s.records} records  {_human(s.bytes)}  {s.checksum}")


def _feature_text(spec: dict[str, Any]) -> str:
    text = spec["dtype"]
    if spec.get("shape"):
        text += "[" + ", ".join("null" if d is None else str(d) for d in spec["shape"]) + "]"
    if spec.get("encoding"):
        text += f" ({spec['encoding']})"
    if "default" in spec:
        text += f" = {json.dumps(spec['default'])}"
    return text


@app.command()
@handle_errors
def append(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    inputs: Annotated[list[Path], typer.Argument(help="TFRecord (any compression) or JSON Lines files.")],
    fmt: Annotated[InputFormat, typer.Option("--format", case_sensitive=False, help="Input format.")] = "auto",
    shard_size: Annotated[
        int | None, typer.Option("--shard-size", parser=parse_bytes, metavar="BYTES", help="Roll shards at this size.")
    ] = None,
    shard_records: Annotated[
        int | None, typer.Option("--shard-records", min=1, help="Roll shards at N records.")
    ] = None,
    token: Annotated[str | None, typer.Option("--token", help="Idempotency token: a retry is a no-op.")] = None,
    message: Annotated[str, typer.Option("--message", "-m", help="Commit message.")] = "",
    author: Annotated[str | None, typer.Option("--author", help="Commit author (default: user name).")] = None,
    link: Annotated[bool, typer.Option("--link", help="Adopt valid uncompressed TFRecord files by hard link.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, help="Inputs validated and written at once (default: 1).")
    ] = None,
    executor: ExecutorKind = "local",
    scheduler: Scheduler = None,
) -> None:
    """Append inputs as new shards, all or nothing, in one commit."""
    ds = open_catalog().dataset(name)
    total = sum(p.stat().st_size for p in inputs if p.is_file())
    # Jobs run one input each: a single input runs here, and needs no cluster.
    with (
        executor_of(executor, scheduler, workers, needed=len(inputs) > 1, jobs=len(inputs) if workers else None) as ex,
        progress_bar(f"append {name}", total) as progress,
    ):
        commit = ds.append_files(
            inputs,
            token=token,
            message=message,
            shard_size=shard_size,
            shard_records=shard_records,
            link=link,
            format=fmt,
            author=author,
            progress=progress,
            executor=ex,
        )
    if as_json:
        echo_json(commit.to_json())
        return
    what = "already committed (token seen before)" if commit.duplicate else "committed"
    typer.echo(f"{what}: {name} version {commit.version}: {commit.records} records in {commit.shard_count} shards")


@app.command()
@handle_errors
def drop(name: Annotated[str, typer.Argument(help="Dataset name.")]) -> None:
    """Remove a dataset from the catalog (its files go at the next gc)."""
    open_catalog().drop(name)
    typer.echo(f"dropped {name}; run `catalog gc` to remove its files")


@app.command()
@handle_errors
def backup(out: Annotated[Path, typer.Argument(help="Where to write the copy of the manifest.")]) -> None:
    """Write a consistent copy of the manifest to a new SQLite file."""
    path = open_catalog().backup(out)
    typer.echo(f"manifest backed up to {path}")


@app.command(name="copy-manifest")
@handle_errors
def copy_manifest(
    db_url: Annotated[str, typer.Argument(help="URL of an empty database: PostgreSQL, or a new SQLite file.")],
    switch: Annotated[
        bool, typer.Option("--switch/--no-switch", help="Point this catalog directory at the copy afterwards.")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Copy the whole manifest to another database (SQLite <-> PostgreSQL), losing nothing."""
    from catalog.manifest import safe_url

    cat = open_catalog()
    counts = cat.copy_manifest(db_url, switch)
    if as_json:
        echo_json({"ok": True, "target": safe_url(db_url), "switched": switch, "rows": counts})
        return
    total = sum(counts.values())
    typer.echo(f"copied {total} rows ({counts.get('shards', 0)} shards) to {safe_url(db_url)}")
    if switch:
        typer.echo(f"{cat.root} now uses the copy; other catalog directories on the old manifest must attach anew")


@app.command()
@handle_errors
def upgrade() -> None:
    """Bring an older manifest to the current format."""
    from catalog.api import Catalog
    from catalog.directory import find_root

    cat = Catalog.open(find_root(_globals().catalog), check=False)
    start, end = cat.upgrade()
    typer.echo(f"manifest format {start} -> {end}" if start != end else f"manifest already at format {end}")


@app.command()
@handle_errors
def cat(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    limit: Annotated[int | None, typer.Option("--limit", min=0, help="At most N records.")] = None,
    version: Annotated[int | None, typer.Option("--version", min=1, help="Dataset version (default: current).")] = None,
) -> None:
    """Print records as JSON Lines, per the schema."""
    from catalog.schema import row_to_json

    ds = open_catalog().dataset(name)
    version = ds.info(version).version  # one version for the schema and the records
    schema = ds.schema_at(version)
    out = sys.stdout
    for i, row in enumerate(ds.read(version)):
        if limit is not None and i >= limit:
            break
        out.write(json.dumps(row_to_json(schema, row), ensure_ascii=False) + "\n")


@app.command()
@handle_errors
def verify(
    names: Annotated[list[str] | None, typer.Argument(help="Datasets (default: all).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    workers: Annotated[
        int | None, typer.Option("--workers", min=1, help="Shards checked at once (default: 1).")
    ] = None,
    executor: ExecutorKind = "local",
    scheduler: Scheduler = None,
) -> None:
    """Check every shard against the manifest: presence, size, checksum, records."""
    c = open_catalog()
    with executor_of(executor, scheduler, workers, jobs=workers) as ex, progress_bar("verify", None) as progress:
        report = c.verify(names or None, progress, executor=ex)
    if as_json:
        echo_json(report.to_json())
    else:
        for p in report.problems:
            typer.echo(f"{p.problem}: {p.path}: {p.detail}")
    bad = sum(p.problem != "unregistered" for p in report.problems)
    extra = len(report.problems) - bad
    summary = f"{report.checked} shards, {_human(report.bytes)} checked: {bad} problems"
    if extra:
        summary += f", {extra} unregistered files"
    sys.stdout.flush()  # the problems (stdout) come before the summary line (stderr)
    typer.echo(("ok: " if report.ok else "FAILED: ") + summary, err=True)
    if not report.ok:
        raise typer.Exit(1)


@app.command()
@handle_errors
def history(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The dataset's commits, oldest first."""
    commits = open_catalog().dataset(name).history()
    if as_json:
        echo_json([c.to_json(with_shards=False) for c in commits])
        return
    for c in commits:
        msg = f"  {c.message}" if c.message else ""
        typer.echo(
            f"v{c.version:<4} {c.kind:8} schema v{c.schema_version}  {c.time:%Y-%m-%d %H:%M:%S}  "
            f"{c.author}  +{c.records} -{c.records_removed} records, +{c.shard_count} -{c.shards_removed} shards{msg}"
        )


@app.command()
@handle_errors
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
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Remove files that no committed shard names; with --keep-versions/--older-than, retired shards too."""
    report = open_catalog().gc(grace, dry_run, keep_versions=keep_versions, older_than=older_than)
    if as_json:
        echo_json(report.to_json())
        return
    verb = "would remove" if dry_run else "removed"
    for p in report.removed:
        typer.echo(f"{verb} {p}")
    for p in report.links:
        typer.echo(f"left alone (a symbolic link, never followed) {p}")
    retired = f" ({len(report.retired)} retired shards)" if report.retired else ""
    typer.echo(
        f"{verb} {len(report.removed)} files{retired} ({_human(report.bytes)}); kept {report.kept_young} younger "
        f"than the grace period, {report.kept_live} of live writers and {report.kept_retired} retired shards "
        "for time travel"
    )


# --------------------------------------------------------------------------- migrations and rewrites

MigrationsDir = Annotated[
    Path,
    typer.Option("--migrations", help="Folder with one sub-folder of migration scripts per dataset."),
]
Workers = Annotated[
    int | None, typer.Option("--workers", min=1, help="Parallel worker processes (default: the core count).")
]
# Where per-shard jobs run (migrate, compact, verify, append): see catalog/executors.py.
ExecutorKind = Annotated[
    Literal["local", "dask"],
    typer.Option("--executor", case_sensitive=False, help="Run per-shard jobs in local processes or on Dask."),
]
Scheduler = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        metavar="ADDRESS",
        help="Dask scheduler address (else $CATALOG_DASK_SCHEDULER; else a local cluster is started).",
    ),
]


def executor_of(
    kind: str, scheduler: str | None, workers: int | None = None, needed: bool = True, jobs: int | None = None
) -> AbstractContextManager[Executor | None]:
    """open_executor(...); or no executor at all when no job will run (a dry run starts no cluster).
    ``jobs``: a local pool for that many jobs (None: no local pool; the library decides)."""
    from catalog.executors import check_executor, open_executor

    check_executor(kind, scheduler)
    return open_executor(kind, scheduler, workers, jobs) if needed else nullcontext(None)


@app.command()
@handle_errors
def migrate(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    migrations: MigrationsDir = Path("migrations"),
    to: Annotated[int | None, typer.Option("--to", metavar="NNNN", help="Apply up to this migration number.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the plan; write nothing.")] = False,
    workers: Workers = None,
    executor: ExecutorKind = "local",
    scheduler: Scheduler = None,
    message: Annotated[str, typer.Option("--message", "-m", help="Commit message.")] = "",
    add: Annotated[
        list[str] | None,
        typer.Option("--add", metavar="FEATURE:DTYPE=DEFAULT", help="Quick migration: add a scalar feature."),
    ] = None,
    drop: Annotated[list[str] | None, typer.Option("--drop", metavar="FEATURE", help="Quick migration.")] = None,
    rename: Annotated[list[str] | None, typer.Option("--rename", metavar="OLD:NEW", help="Quick migration.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Apply pending migrations (or one quick migration): rewrite every shard, one commit each."""
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
            migrations, to=to, dry_run=dry_run, workers=workers, executor=ex, message=message, progress=progress,
            **quick,
        )  # fmt: skip
    if as_json:
        echo_json(report.to_json())
        return
    if not report.migrations:
        typer.echo(f"{name}: no pending migrations (schema version {report.schema_version})")
        return
    for m in report.migrations:
        head = "would apply" if dry_run else "applied"
        where = "" if m.version is None else f" -> version {m.version}"
        typer.echo(
            f"{head} {m.id}: schema v{m.from_schema_version} -> v{m.to_schema_version}{where}, "
            f"{m.records} records in {m.shards} shards" + ("" if dry_run else f" ({m.seconds:.2f} s)")
        )
        for op in m.operations:
            typer.echo(f"  {op}")
        diff = m.diff
        for label, names in (("added", diff.added), ("removed", diff.removed), ("changed", list(diff.changed))):
            if names:
                typer.echo(f"  {label}: {', '.join(names)}")


migrations_app = typer.Typer(no_args_is_help=True, help="Write and list migration scripts.")
app.add_typer(migrations_app, name="migrations")


@migrations_app.command("new")
@handle_errors
def migrations_new(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    slug: Annotated[str, typer.Argument(help="What it does, e.g. add_height.")],
    migrations: MigrationsDir = Path("migrations"),
) -> None:
    """Write the next numbered migration template for a dataset."""
    from catalog.migrations import new_migration

    path = new_migration(open_catalog().dataset(name), migrations, slug)
    typer.echo(f"wrote {path}; fill in `operations`, then run `catalog migrate {name} --dry-run`")


@migrations_app.command("list")
@handle_errors
def migrations_list(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    migrations: MigrationsDir = Path("migrations"),
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Applied and pending migrations, with their checksums."""
    rows = open_catalog().dataset(name).migrations(migrations)
    if as_json:
        echo_json([r.to_json() for r in rows])
        return
    if not rows:
        typer.echo(f"{name}: no migrations in {migrations / name}")
        return
    typer.echo(f"{'MIGRATION':32} {'STATUS':8} {'SCHEMA':>9} {'VERSION':>7}  CHECKSUM")
    for r in rows:
        schema = f"v{r.from_schema_version}->v{r.to_schema_version}" if r.to_schema_version else ""
        typer.echo(f"{r.id:32} {r.status:8} {schema:>9} {r.version or '':>7}  {r.checksum[:19]}")


@app.command()
@handle_errors
def restore(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    version: Annotated[int, typer.Option("--version", min=1, help="The version to bring back.")],
    message: Annotated[str, typer.Option("--message", "-m", help="Commit message.")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """A new commit whose shards and schema are exactly version N's (history keeps everything)."""
    commit = open_catalog().dataset(name).restore(version, message)
    if as_json:
        echo_json(commit.to_json())
        return
    typer.echo(
        f"restored {name} to version {version} as version {commit.version} (schema version "
        f"{commit.schema_version}): {commit.total_records} records in {commit.total_shards} shards"
    )


@app.command()
@handle_errors
def compact(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    target_size: Annotated[
        int | None,
        typer.Option("--target-size", parser=parse_bytes, metavar="BYTES", help="Merged shard size (default 256 MiB)."),
    ] = None,
    workers: Workers = None,
    executor: ExecutorKind = "local",
    scheduler: Scheduler = None,
    message: Annotated[str, typer.Option("--message", "-m", help="Commit message.")] = "",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the plan; write nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Merge small shards into fewer: same records, same order, one no-data-change commit."""
    ds = open_catalog().dataset(name)
    with (
        executor_of(executor, scheduler, workers, needed=not dry_run) as ex,
        progress_bar(f"compact {name}", ds.info().bytes) as progress,
    ):
        report = ds.compact(
            target_size, workers=workers, executor=ex, message=message, dry_run=dry_run, progress=progress
        )
    if as_json:
        echo_json(report.to_json())
        return
    if not report.groups:
        typer.echo(f"{name}: nothing to compact ({report.shards_before} shards)")
        return
    head = "would merge" if dry_run else "merged"
    tail = "" if report.commit is None else f" as version {report.commit.version}"
    typer.echo(
        f"{head} {report.shards_before - report.shards_after + report.groups} shards into {report.groups} "
        f"({_human(report.bytes)}): {report.shards_before} -> {report.shards_after} shards{tail}"
    )


@app.command()
@handle_errors
def export(
    name: Annotated[str, typer.Argument(help="Dataset name.")],
    out: Annotated[Path, typer.Argument(help="The TFRecord file to write (never overwritten).")],
    version: Annotated[int | None, typer.Option("--version", min=1, help="Dataset version (default: current).")] = None,
    compression: Annotated[
        Literal["none", "gzip", "zlib"], typer.Option("--compression", case_sensitive=False, help="Compression.")
    ] = "none",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Write the dataset (at version N) as one TFRecord file that TensorFlow reads."""
    ds = open_catalog().dataset(name)
    with progress_bar(f"export {name}", ds.info(version).bytes) as progress:
        report = ds.export(out, version, compression, progress)
    if as_json:
        echo_json(report.to_json())
        return
    typer.echo(
        f"exported {name} version {report.version}: {report.records} records to {report.path} "
        f"({_human(report.bytes)}, compression {report.compression})"
    )


def main() -> None:
    """Console-script entry point."""
    app(prog_name="catalog")


if __name__ == "__main__":  # pragma: no cover
    main()
