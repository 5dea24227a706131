"""Verbs that start from files rather than a catalog: ``inspect`` and ``demo``."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from catalog.cli.base import verb
from catalog.cli.options import Defaults, FillMissing, FormatOption, parse_defaults
from catalog.cli.output import Output, counted
from catalog.errors import CatalogError, StorageError

if TYPE_CHECKING:
    from typer._click import Command

    from catalog.ops.inspection import FileReport


@verb
def inspect(
    inputs: Annotated[
        list[str],
        typer.Argument(
            help="TFRecord files (raw, gzip or zlib), or any input append takes (CSV, Parquet, JSON Lines, "
            "NumPy, image folders), folders and globs of them.",
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    limit: Annotated[int, typer.Option("--limit", min=0, help="Decoded examples to show.")] = 3,
    schema_out: Annotated[
        Path | None,
        typer.Option("--schema-out", metavar="FILE", help="Write the schema inferred over all inputs to FILE."),
    ] = None,
    fmt: FormatOption = "auto",
    default: Defaults = None,
    fill_missing: FillMissing = False,
) -> Output:
    from catalog.inputs import InputOptions, detect, expand, given_paths, input_format
    from catalog.inputs.infer import Inferred, infer_inputs
    from catalog.ops.inspection import inspect_files
    from catalog.schema import Schema

    found = expand(given_paths(inputs), fmt)
    defaults = parse_defaults(default)
    if all(input_format(detect(p, f)).reads == "records" for p, f in found):
        reports, schema = inspect_files([p for p, _ in found], limit=limit)
        notes: list[str] = []
        if schema is not None:  # the optional features said, and given defaults if asked
            seen = Inferred(Schema.from_json(schema), [(str(r.path), r.records) for r in reports])
            seen = seen.with_defaults(defaults, fill_missing)
            schema, notes = seen.schema.to_json(), seen.summary()
        if len(reports) == 1:
            reports[0].schema = schema
        _write_schema(schema_out, schema, reports)
        if len(reports) == 1:
            return Output(text=[*_inspect_text(reports[0]), *notes], json=reports[0].to_json)
        doc = {"files": [r.to_json() for r in reports], "schema": schema}
        return Output(text=[*_files_text(reports, schema), *notes], json=lambda: doc)
    inferred = infer_inputs(found, InputOptions()).with_defaults(defaults, fill_missing)
    schema = inferred.schema.to_json()
    _write_schema(schema_out, schema, [])
    counts = [{"path": p, "records": n} for p, n in inferred.counts]
    text = [f"{p}: {counted(n, 'record')}" for p, n in inferred.counts]
    text += ["schema:", json.dumps(schema, indent=2), *inferred.summary()]
    return Output(text=text, json=lambda: {"inputs": counts, "schema": schema, "optional": inferred.missing})


def _write_schema(out: Path | None, schema: dict[str, Any] | None, reports: list[FileReport]) -> None:
    """The inferred schema into ``out``, in the form ``register --schema`` reads."""
    if out is None:
        return
    if schema is None:
        why = next((r.note for r in reports if r.note), "the inputs hold no records")
        raise StorageError(f"{out}: not written: {why}")
    try:
        out.write_text(json.dumps(schema, indent=2) + "\n", encoding="utf-8")
    except OSError as e:
        raise StorageError(f"{out}: cannot write the schema: {e.strerror or e}") from e


def _files_text(reports: list[FileReport], schema: dict[str, Any] | None) -> Iterator[str]:
    for r in reports:
        note = f"  note: {r.note}" if r.note else ""
        counts = f"{counted(r.records, 'record')}, {counted(r.bytes, 'byte')}"
        yield f"{r.path}: {counts}, {r.compression}, crc {r.crc}{note}"
    if schema is not None:
        yield "schema:"
        yield json.dumps(schema, indent=2)


def _inspect_text(report: FileReport) -> Iterator[str]:
    yield f"file:        {report.path}"
    yield f"records:     {report.records}"
    yield f"bytes:       {report.bytes} on disk, {report.data_bytes} framed"
    yield f"compression: {report.compression}"
    yield f"crc:         {report.crc} (every record's length and data CRC checked)"
    yield f"message:     {report.message or 'not tf.train.Example'}"
    if report.note:
        yield f"note:        {report.note}"
    if report.schema is not None:
        yield "schema:"
        yield json.dumps(report.schema, indent=2)
    for i, ex in enumerate(report.examples):
        yield f"example {i}: {json.dumps(ex, ensure_ascii=False)}"


@verb
def demo(
    ctx: typer.Context,
    out: Annotated[Path, typer.Argument(help="Directory for the demo (inputs and catalog).")] = Path("demo-out"),
    records: Annotated[int, typer.Option("--records", min=1, help="Records per demo input.")] = 1000,
    migrations: Annotated[
        Path | None, typer.Option("--migrations", help="Folder holding demo/ migrations (default: the repo's).")
    ] = None,
) -> Output:
    from catalog.demo import copy_migrations, demo_migrations, prepare_demo_dir, write_demo

    source = migrations or demo_migrations()
    root = prepare_demo_dir(out)
    write_demo(out / "inputs", records)
    mig = copy_migrations(source, out)
    return Output(text=_demo_transcript(ctx.find_root().command, out, root, mig, records))


def _demo_transcript(catalog: Command, out: Path, root: Path, mig: Path, records: int) -> Iterator[str]:
    """The demo, run as its transcript is written: each step's command line comes first,
    then the step runs (a command of ``catalog``, the command the demo runs under) and writes
    its own output."""
    inputs = out / "inputs"
    c = ["-C", str(root)]
    yield from _demo_step(catalog, ["init", str(root)])
    schema = str(inputs / "schema.json")
    yield from _demo_step(catalog, [*c, "register", "demo", "--schema", schema, "--description", "demo dataset"])
    yield from _demo_rows(root, records)
    steps = [
        ["append", "demo", str(inputs / "demo.tfrecord.gz"), "-m", "records from a gzip TFRecord file"],
        ["list"],
        ["show", "demo", "--no-shards"],
        ["cat", "demo", "--limit", "2"],
        ["stats", "demo"],
        ["verify"],
        ["migrations", "list", "demo", "--migrations", str(mig)],
        ["migrate", "demo", "--migrations", str(mig), "--dry-run"],
        ["migrate", "demo", "--migrations", str(mig)],
        ["migrate", "demo", "--add", "height:int64=4", "--add", "width:int64=4", "-m", "image size"],
        ["cat", "demo", "--limit", "1"],
        ["cat", "demo", "--version", "3", "--limit", "1"],
        ["stats", "demo", "--compare", "2", "3", "-f", "score", "-f", "tags"],
        ["compact", "demo"],
        ["export", "demo", str(out / "demo-export.tfrecord.gz"), "--compression", "gzip"],
        ["history", "demo"],
        ["verify"],
    ]
    for step in steps:
        yield from _demo_step(catalog, [*c, *step])
    yield (
        f"\ndone: the catalog is in {root}, its migrations in {mig}; try `catalog -C {root} show demo --version 3` "
        f"or `catalog -C {root} migrations list demo --migrations {mig}`;\n"
        f"look at it in a browser: `catalog -C {root} serve` (then open http://127.0.0.1:8765/; "
        "it needs the web extra: pip install -e '.[web]')"
    )


def _demo_step(catalog: Command, args: list[str]) -> Iterator[str]:
    yield f"\n$ catalog {shlex.join(args)}"
    code = catalog.main(args, prog_name="catalog", standalone_mode=False)
    if code:
        raise CatalogError(f"demo step `catalog {shlex.join(args)}` failed")


def _demo_rows(root: Path, records: int) -> Iterator[str]:
    from catalog.demo import append_demo_rows

    yield "\n>>> Catalog.open(root).dataset('demo').append_rows(rows, message='rows from Python')"
    commit = append_demo_rows(root, records)
    yield f"version {commit.version}: {counted(commit.records, 'record')} in {counted(len(commit.shards), 'new shard')}"
