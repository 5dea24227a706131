"""Verbs on one dataset or the list of them: register, list, show, append, drop, cat, history,
tag and tags."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from catalog.cli.base import executor_of, open_catalog, open_manifest, open_reader, progress_bar, verb
from catalog.cli.generated import takes
from catalog.cli.options import (
    AsJson,
    BareCheck,
    DatasetName,
    Defaults,
    Delimiter,
    ExecutorKind,
    FillMissing,
    FormatOption,
    ImageShape,
    Inputs,
    NpyFeature,
    Scheduler,
    Version,
    compression_option,
    parse_defaults,
    workers_option,
)
from catalog.cli.output import Output, counted, human

if TYPE_CHECKING:
    from catalog.commit.handles import DatasetHandle
    from catalog.commit.values import Commit, DatasetInfo, ShardInfo, Tag
    from catalog.ops.options import AdoptOptions, AppendOptions, RegisterOptions


@verb
@takes(
    "RegisterOptions",
    "name inputs schema description infer split compression token message as_json default fill_missing",
    hidden="author",
)
def register(
    name: DatasetName,
    options: RegisterOptions,
    inputs: Annotated[
        list[str] | None,
        typer.Argument(
            help="With --infer: the inputs (any format append takes, folders and globs too).", show_default=False
        ),
    ] = None,
    schema: Annotated[Path | None, typer.Option("--schema", help="Schema JSON file.")] = None,
    description: Annotated[str, typer.Option("--description", help="What the dataset is.")] = "",
    infer: Annotated[
        bool, typer.Option("--infer", help="Infer the schema from every record of the inputs, then append them.")
    ] = False,
    compression: Annotated[str, compression_option("How its shards are stored.")] = "none",
    default: Defaults = None,
    fill_missing: FillMissing = False,
) -> Output:
    if (schema is None) == (not infer):
        raise typer.BadParameter("give --schema FILE, or --infer and inputs (not both)", param_hint="--schema/--infer")
    if bool(inputs) != infer:
        raise typer.BadParameter("--infer needs inputs, and inputs need --infer", param_hint="--infer")
    if schema is not None and (default or fill_missing):
        raise typer.BadParameter("--default/--fill-missing apply to --infer's schema", param_hint="--default")
    cat = open_catalog()
    token = options.token
    if schema is not None:
        done = None if token is None else cat.committed(name, token)
        ds = cat.register(name, schema, description, compression, message=options.message, token=token)
        what = "already registered (token seen before):" if done is not None else "registered"
        return Output(text=[f"{what} {ds.name} (version {ds.version}, schema version {ds.schema_version})"])
    commit = cat.register_inferred(
        name, inputs or [], description, compression=compression, defaults=parse_defaults(default),
        fill_missing=fill_missing, **asdict(options),
    )  # fmt: skip
    ds = cat.dataset(name)
    inferred = ds.schema.to_json()
    text = [f"registered {name} with an inferred schema:", *_schema_text(inferred)]
    counts = f"{counted(commit.records, 'record')} in {counted(commit.shard_count, 'shard')}"
    text.append(f"committed: {name} version {commit.version}: {counts}")
    missing = _missing(ds, commit.version)
    from catalog.inputs.infer import optional_summary

    text += optional_summary(missing, commit.records)
    doc = {"schema": inferred, "commit": commit.to_json(), "optional": missing}
    return Output(text=text, json=lambda: doc)


def _missing(ds: Any, version: int) -> dict[str, int | None]:
    """The optional features of ``ds`` and, from its statistics, how many records lack each."""
    optional = [n for n, f in ds.schema.features.items() if f.optional]
    if not optional:
        return {}
    st = ds.stats(version)
    return {n: fs.missing if (fs := st.feature(n)) is not None and st.at.complete else None for n in optional}


@verb
def list_(
    as_json: AsJson = False,
    limit: Annotated[int | None, typer.Option("--limit", "-n", min=1, help="At most N datasets (a page).")] = None,
    after: Annotated[
        str | None, typer.Option("--after", metavar="NAME", help="Only the datasets whose names sort after NAME.")
    ] = None,
) -> Output:
    from catalog.commit.listing import list_datasets

    engine = open_manifest()
    # One more than the page: whether a next page exists, for the text's last line.
    infos = list_datasets(engine, limit=None if limit is None else limit + 1, after=after, schemas=False)
    more = limit is not None and len(infos) > limit
    infos = infos[:limit]
    keep = (
        *("name", "description", "version", "schema_version", "shard_count", "records", "bytes", "created"),
        "compression",
    )

    def document() -> list[dict[str, Any]]:
        # Totals per split, for --json only: the text listing stays one small query.
        page = list_datasets(engine, splits=True, limit=limit, after=after, schemas=False)
        return [{**{k: i.to_json()[k] for k in keep}, "splits": i.splits} for i in page]

    return Output(text=_list_text(infos, infos[-1].name if more else None), json=document)


def _list_text(infos: list[DatasetInfo], next_after: str | None = None) -> Iterator[str]:
    if not infos:
        yield "no datasets"
        return
    yield f"{'NAME':24} {'VERSION':>7} {'SCHEMA':>6} {'SHARDS':>7} {'RECORDS':>12} {'SIZE':>10}"
    for i in infos:
        size = human(i.bytes)
        yield f"{i.name:24} {i.version:>7} {i.schema_version:>6} {i.shard_count:>7} {i.records:>12} {size:>10}"
    if next_after is not None:
        yield f"... more datasets: catalog list --after {next_after}"


SHOWN_SHARDS = 20  # shards `show` lists as text unless --limit or --all: a summary, whatever the dataset's size


@verb
def show(
    name: DatasetName,
    as_json: AsJson = False,
    version: Version = None,
    no_shards: Annotated[bool, typer.Option("--no-shards", help="Leave out the shard list.")] = False,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit", min=0, help=f"List the first N shards (text: {SHOWN_SHARDS} unless given; --json: all)."
        ),
    ] = None,
    all_shards: Annotated[bool, typer.Option("--all", help="List every shard (text too).")] = False,
) -> Output:
    from catalog.commit.handles import lineage

    if all_shards and limit is not None:
        raise typer.BadParameter("give --limit N or --all, not both", param_hint="--limit/--all")
    ds = open_reader().lookup(name, parsed=False)  # its schema shown from its stored JSON (info)
    info = ds.info(version)
    made = lineage(ds, info.version)[:1]  # how this version's rows were derived, if they were
    text_limit = None if all_shards else SHOWN_SHARDS if limit is None else limit
    rows = None if no_shards else ("shards", _shard_docs(ds, info.version, limit))
    listed = iter(()) if no_shards else _shard_lines(ds, info, text_limit)
    with_lineage = (lambda: info.to_json() | {"lineage": made[0].to_json()}) if made else info.to_json
    return Output(text=_show_text(info, listed, [e.describe() for e in made]), json=with_lineage, rows=rows)


def _shards(ds: DatasetHandle, version: int, limit: int | None) -> Iterable[ShardInfo]:
    """The first ``limit`` shards at ``version`` (one query with LIMIT), or all of them streamed."""
    return ds.iter_shards(version) if limit is None else ds.shard_page(version, 0, limit)


def _shard_docs(ds: DatasetHandle, version: int, limit: int | None) -> Iterator[dict[str, Any]]:
    """`show --json`'s shards (read only if the JSON is shown)."""
    for s in _shards(ds, version, limit):
        yield s.to_json()


def _shard_lines(ds: DatasetHandle, info: DatasetInfo, limit: int | None) -> Iterator[str]:
    """The shard lines of `show`'s text (read only if the text is shown): the first ``limit``
    (None: all), then how many more there are."""
    shown = 0
    for s in _shards(ds, info.version, limit):
        where = "  (adopted in place)" if s.location is not None else ""
        yield f"  {s.path}  {counted(s.records, 'record')}  {human(s.bytes)}  {s.checksum}{where}"
        shown += 1
    if info.shard_count > shown:
        more = counted(info.shard_count - shown, "more shard")
        yield f"  ... {more} (--all lists every shard, --limit N the first N)"


def _show_text(info: DatasetInfo, shard_lines: Iterable[str], derived: list[str]) -> Iterator[str]:
    yield f"dataset:        {info.name}"
    if info.description:
        yield f"description:    {info.description}"
    for how in derived:
        yield f"derived:        {how} (catalog lineage {info.name})"
    yield f"version:        {info.version}"
    yield f"schema version: {info.schema_version}"
    yield f"records:        {info.records}"
    yield f"size:           {human(info.bytes)} in {counted(info.shard_count, 'shard')}"
    if info.compression != "none":
        yield f"compression:    {info.compression} (new shards; TensorFlow reads them with compression_type)"
    if info.splits:
        yield "splits:"
        width = max(map(len, info.splits))
        for split, t in info.splits.items():
            counts = f"{counted(t['records'], 'record')}, {human(t['bytes'])} in {counted(t['shards'], 'shard')}"
            yield f"  {split + ':':{width + 1}} {counts}"
    yield "schema:"
    yield from _schema_text(info.schema)
    yield from shard_lines


def _schema_text(schema: dict[str, Any]) -> Iterator[str]:
    for fname, spec in schema["features"].items():
        yield f"  {fname}: {_feature_text(spec)}"
    for fname, spec in schema.get("sequence_features", {}).items():  # a SequenceExample's feature lists
        yield f"  {fname}: sequence of {_feature_text(spec)}"


def _feature_text(spec: dict[str, Any]) -> str:
    text = spec["dtype"]
    shape = "[" + ", ".join("null" if d is None else str(d) for d in spec.get("shape", [])) + "]"
    if spec.get("encoding") == "image":  # its shape is the decoded image's
        parts = ["image", spec.get("format"), shape if spec.get("shape") else None]
        text += f" ({' '.join(p for p in parts if p)})"
    else:
        text += shape if spec.get("shape") else ""
        text += f" ({spec['encoding']})" if spec.get("encoding") else ""
    if spec.get("names"):
        shown = spec["names"][:10]
        more = f", ... {len(spec['names']):,} in all" if len(spec["names"]) > 10 else ""
        text += f" names: {', '.join(shown)}{more}"
    if "default" in spec:
        text += f" = {json.dumps(spec['default'])}"
    if spec.get("optional"):
        text += " optional"
    return text


@verb
@takes(
    "AppendOptions",
    "name inputs fmt shard_size shard_records token message author link as_json workers executor scheduler split "
    "delimiter feature image_shape allow_duplicate check max_linf",
    base=BareCheck,  # --check may stand alone
)
def append(
    name: DatasetName,
    inputs: Inputs,
    options: AppendOptions,
    fmt: FormatOption = "auto",
    workers: Annotated[int | None, workers_option("Inputs validated and written")] = None,
    executor: ExecutorKind = "local",
    scheduler: Scheduler = None,
    delimiter: Delimiter = None,
    feature: NpyFeature = None,
    image_shape: ImageShape = None,
) -> Output:
    ds = open_catalog().dataset(name)
    total = _input_bytes(inputs)
    # Jobs run one input each: a single input runs here, and needs no cluster.
    with (
        executor_of(executor, scheduler, workers, needed=len(inputs) > 1, jobs=len(inputs) if workers else None) as ex,
        progress_bar(f"append {name}", total) as progress,
    ):
        commit = ds.append_files(
            inputs,
            format=fmt,
            progress=progress,
            executor=ex,
            delimiter=_delimiter(delimiter),
            feature=feature,
            image_shape=_image_shape(image_shape),
            **asdict(options),
        )
    return _append_output(name, commit)


def _append_output(name: str, commit: Commit) -> Output:
    """The commit, and on stderr what ``--check`` compared and what it broke (``--check=warn``)."""
    warned = "\n".join([*commit.checked, *(f"warning: {w}" for w in commit.warnings)]) or None
    return Output(text=_append_text(name, commit), json=commit.to_json, summary=warned)


@verb
@takes(
    "AdoptOptions",
    "name paths split copy link description token message author allow_duplicate as_json workers executor scheduler",
)
def adopt(
    name: DatasetName,
    paths: Annotated[
        list[str],
        typer.Argument(
            help="TFRecord files (any compression), folders and globs of them, or one TFDS directory.",
            show_default=False,
        ),
    ],
    options: AdoptOptions,
    description: Annotated[str, typer.Option("--description", help="A new dataset's description.")] = "",
    workers: Annotated[int | None, workers_option("Files read")] = None,
    executor: ExecutorKind = "local",
    scheduler: Scheduler = None,
) -> Output:
    if options.copy and options.link:
        raise typer.BadParameter("give --copy or --link, not both", param_hint="--copy/--link")
    cat = open_catalog()
    total = _input_bytes(paths)
    with (
        executor_of(executor, scheduler, workers, jobs=workers) as ex,
        progress_bar(f"adopt {name}", total) as progress,
    ):
        commit = cat.adopt(name, paths, description=description, progress=progress, executor=ex, **asdict(options))
    return Output(text=_adopt_text(name, commit, options.copy or options.link), json=commit.to_json)


def _input_bytes(paths: Iterable[str]) -> int:
    """The bytes of the inputs that are files, for the progress bar; a path that cannot be
    looked at counts nothing (the command itself says what is wrong with it)."""
    total = 0
    for p in paths:
        with contextlib.suppress(OSError):
            total += os.stat(p).st_size if p and os.path.isfile(p) else 0
    return total


def _adopt_text(name: str, commit: Commit, moved: bool) -> Iterator[str]:
    yield from _append_text(name, commit)
    if not moved and not commit.duplicate:
        size = human(sum(s.bytes for s in commit.shards))
        yield f"adopted {counted(commit.shard_count, 'file')} in place ({size}; no bytes copied)"


def _append_text(name: str, commit: Commit) -> Iterator[str]:
    what = "already committed (token seen before)" if commit.duplicate else "committed"
    counts = f"{counted(commit.records, 'record')} in {counted(commit.shard_count, 'shard')}"
    yield f"{what}: {name} version {commit.version}: {counts}"
    if commit.linked is not None:
        yield f"linked {counted(len(commit.linked), 'input')} (no bytes copied)"
        if commit.copied:
            shown = ", ".join(commit.copied[:3]) + (", ..." if len(commit.copied) > 3 else "")
            why = "another filesystem, compressed unlike the dataset, or not TFRecord"
            yield f"copied {counted(len(commit.copied), 'input')} that could not be linked ({why}): {shown}"


def _delimiter(text: str | None) -> str | None:
    if text is None:
        return None
    sep = {"\\t": "\t", "tab": "\t"}.get(text, text)  # a tab is hard to type in a shell
    if len(sep) != 1 or sep in '"\r\n':
        raise typer.BadParameter(f"one character (or \\t), got {text!r}", param_hint="--delimiter")
    return sep


def _image_shape(text: str | None) -> tuple[int, int, int] | None:
    if text is None:
        return None
    parts = text.replace("x", ",").split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise typer.BadParameter(f"three positive integers H,W,C, got {text!r}", param_hint="--image-shape")
    h, w, c = (int(p) for p in parts)
    return h, w, c


@verb
def drop(name: DatasetName) -> Output:
    open_catalog().drop(name)
    return Output(text=[f"dropped {name}; run `catalog gc` to remove its files"])


@verb
def history(
    name: DatasetName,
    as_json: AsJson = False,
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=0, help="Only the newest N commits (still oldest first).")
    ] = None,
) -> Output:
    from catalog.commit.handles import dataset_id
    from catalog.commit.handles import history as read_history

    engine = open_manifest()
    commits = read_history(engine, dataset_id(engine, name), name, limit)
    return Output(text=_history_text(commits), json=lambda: [c.to_json(with_shards=False) for c in commits])


def _history_text(commits: list[Commit]) -> Iterator[str]:
    for c in commits:
        msg = f"  {c.message}" if c.message else ""
        tags = f"  [tags: {', '.join(c.tags)}]" if c.tags else ""
        yield (
            f"v{c.version:<4} {c.kind:8} schema v{c.schema_version}  {c.time:%Y-%m-%d %H:%M:%S}  "
            f"{c.author}  +{c.records} -{c.records_removed} records, +{c.shard_count} -{c.shards_removed} shards"
            f"{tags}{msg}"
        )


@verb
def tag(
    name: DatasetName,
    tag_name: Annotated[str, typer.Argument(metavar="TAG", help="The tag: a letter first, e.g. run-42.")],
    version: Version = None,
    delete: Annotated[bool, typer.Option("--delete", help="Delete the tag (its shards go at a later gc).")] = False,
    as_json: AsJson = False,
) -> Output:
    ds = open_catalog().dataset(name)
    if delete:
        if version is not None:
            raise typer.BadParameter("--delete takes no --version", param_hint="--version")
        gone = ds.untag(tag_name)
        return Output(text=[f"deleted tag {gone.name} of {name} (version {gone.version})"], json=gone.to_json)
    made = ds.tag(tag_name, version)
    return Output(text=[f"tagged {name} version {made.version} as {made.name}"], json=made.to_json)


@verb
def tags(name: DatasetName, as_json: AsJson = False) -> Output:
    from catalog.commit.handles import dataset_id
    from catalog.commit.handles import tags as read_tags

    engine = open_manifest()
    found = read_tags(engine, dataset_id(engine, name), name)
    return Output(text=_tags_text(name, found), json=lambda: [t.to_json() for t in found])


def _tags_text(name: str, found: list[Tag]) -> Iterator[str]:
    if not found:
        yield f"{name}: no tags"
        return
    width = max(len("TAG"), *(len(t.name) for t in found))
    yield f"{'TAG':{width}} {'VERSION':>7}  {'CREATED':19}  AUTHOR"
    for t in found:
        yield f"{t.name:{width}} {t.version:>7}  {t.created:%Y-%m-%d %H:%M:%S}  {t.author}"
