"""The ``catalog`` command: every verb, in the order ``catalog --help`` lists them, with its help.

The verbs live by subject (``files``, ``datasets``, ``admin``, ``rewrites``, ...); this table is
the one place that names them and says what each does (a verb's function has no docstring: its
help is here). ``catalog --help`` is written from the table alone: a verb's module is imported,
and its command built from its signature, only when that verb is looked up, to run it or to show
its own help (tests/cli/test_cli_startup.py checks what ``--help`` and ``list`` import).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from dataclasses import dataclass
from typing import Any

import typer
from typer import _click as click  # the click typer bundles: its Command, Context, HelpFormatter
from typer.core import TyperCommand, TyperGroup

from catalog.cli.base import main_options

__all__ = ["VERBS", "Group", "Verb", "app"]


@dataclass(frozen=True)
class Verb:
    name: str
    where: str  # "module:function" in catalog.cli
    help: str  # one line: what the verb does
    example: str = ""  # one command line a user could type, shown under the verb's help

    def function(self) -> Callable[..., Any]:
        module, name = self.where.split(":")
        found: Callable[..., Any] = getattr(importlib.import_module(f"catalog.cli.{module}"), name)
        return found


@dataclass(frozen=True)
class Group:
    """A sub-command with verbs of its own (``catalog migrations new``)."""

    name: str
    help: str
    verbs: tuple[Verb, ...]


# A verb a line, so the table reads as one (and is not six-line blocks of the same shape).
# fmt: off
VERBS: tuple[Verb | Group, ...] = (
    Verb("inspect", "files:inspect", "Count, check and describe the records of inputs, and infer one schema over all of them.", "catalog inspect data/*.tfrecord --schema-out schema.json"),
    Verb("demo", "files:demo", "Run the end-to-end demo, echoing each command: append, read, verify, migrate, time travel, compact, export.", "catalog demo /tmp/catalog-demo"),
    Verb("init", "admin:init", "Create a catalog directory: a new manifest and data area, or attach to a shared manifest.", "catalog init ./cat"),
    Verb("register", "datasets:register", "Register a dataset with its schema, or with one inferred from inputs that are then appended (--infer).", "catalog register mnist --schema schema.json"),
    Verb("list", "datasets:list_", "List datasets.", "catalog list --json"),
    Verb("show", "datasets:show", "Show a dataset: version, schema, totals and shards.", "catalog show mnist --version 3 --no-shards"),
    Verb("append", "datasets:append", "Append inputs as new shards of a split (default train), all or nothing, in one commit.", "catalog append mnist day2.jsonl --split train -m 'day 2'"),
    Verb("adopt", "datasets:adopt", "Register existing TFRecord files where they are (no copy), each record checked, counted and indexed; one commit.", "catalog adopt mnist /data/mnist/*.tfrecord --split test"),
    Verb("drop", "datasets:drop", "Remove a dataset from the catalog (its files go at the next gc).", "catalog drop mnist"),
    Verb("backup", "admin:backup", "Write a consistent copy of the manifest to a new SQLite file.", "catalog backup /backups/manifest.sqlite"),
    Verb("copy-manifest", "admin:copy_manifest", "Copy the whole manifest to another database (SQLite <-> PostgreSQL), losing nothing.", "catalog copy-manifest postgresql+psycopg://me@dbhost/catalog"),
    Verb("upgrade", "admin:upgrade", "Bring an older manifest to the current format.", "catalog upgrade"),
    Verb("cat", "rows:cat", "Print records as JSON Lines, per the schema (on a terminal, long bytes and tensors folded).", "catalog cat mnist --split 'test[:10]' --columns label --names"),
    Verb("stats", "statistics:stats", "Feature statistics of a version or split, kept by the manifest (no data read).", "catalog stats mnist --compare 1 2"),
    Verb("serve", "statistics:serve", "Look at the catalog in a browser: datasets, history, schemas, shards, statistics, rows (read only).", "catalog serve --port 8765"),
    Verb("verify", "admin:verify", "Check every shard against the manifest: presence, size, checksum, records.", "catalog verify mnist --workers 2"),
    Verb("history", "datasets:history", "The dataset's commits, oldest first.", "catalog history mnist"),
    Verb("tag", "datasets:tag", "Name a version of a dataset (default: the current one); readers take the tag as --version.", "catalog tag mnist v1.0"),
    Verb("tags", "datasets:tags", "A dataset's tags and the versions they name.", "catalog tags mnist"),
    Verb("gc", "admin:gc", "Remove files that no committed shard names; with --keep-versions/--older-than, retired shards too.", "catalog gc --keep-versions 5 --dry-run"),
    Verb("index", "indexes:index", "Give shards without a record index (older catalogs, --link) one, and a lost index file back: a read per shard, idempotent.", "catalog index mnist"),
    Verb("migrate", "rewrites:migrate", "Apply pending migrations (or one quick migration): rewrite every shard, one commit each.", "catalog migrate mnist --add weight:float32=1.0"),
    Verb("restore", "rewrites:restore", "A new commit whose shards and schema are exactly version N's (history keeps everything).", "catalog restore mnist --version 2"),
    Verb("compact", "rewrites:compact", "Merge small shards of a split into fewer: same records, same order, one no-data-change commit.", "catalog compact mnist --target-size 256MiB"),
    Verb("export", "rewrites:export", "Write the dataset (at version N; or a split, or a slice of one) as one TFRecord file that TensorFlow reads.", "catalog export mnist mnist-test.tfrecord --split test"),
    Verb("delete", "changes:delete", "Delete the rows that match --where: a new version in which only the shards holding a match are rewritten.", "catalog delete mnist --where \"label = 7 AND source = 'scan'\" --dry-run"),
    Verb("update", "changes:update", "Set features of the rows that match --where: a new version; only the shards holding a match are rewritten.", "catalog update mnist --set label=3 --where 'id IN (17, 42)'"),
    Verb("dedup", "changes:dedup", "Remove duplicate rows (by --key or --content), keeping each one's first in dataset order: a new version.", "catalog dedup mnist --key id"),
    Verb("filter", "changes:filter", "A new dataset of the rows of NAME that match --where (its schema, splits and order), with its lineage.", "catalog filter mnist mnist-sevens --where 'label = 7'"),
    Verb("map", "changes:map", "A new dataset of a function applied to every row of NAME (or batch of columns, --batched), with its lineage.", "catalog map mnist mnist-features --fn features:add_brightness"),
    Verb("lineage", "changes:lineage", "Where a dataset came from: its derivation, its source's, back to a dataset that was not derived.", "catalog lineage mnist-sevens"),
    Verb("refresh", "changes:refresh", "Apply a derived dataset's filter or map to the rows its source appended since it was made.", "catalog refresh mnist-sevens"),
    Group("migrations", "Write and list migration scripts.", (
        Verb("new", "rewrites:migrations_new", "Write the next numbered migration template for a dataset.", "catalog migrations new mnist add-weight"),
        Verb("list", "rewrites:migrations_list", "Applied and pending migrations, with their checksums.", "catalog migrations list mnist"),
    )),
)
# fmt: on


def _register(app: typer.Typer, verb: Verb) -> None:
    fn = verb.function()
    # a verb of catalog.cli.generated.takes has its own command class
    epilog = f"Example: {verb.example}" if verb.example else None
    app.command(verb.name, cls=getattr(fn, "command", None), help=verb.help, epilog=epilog)(fn)


def built(entry: Verb | Group) -> click.Command:
    """The command of ``entry``, as typer makes it from the verb's signature (a group: with its verbs)."""
    holder = typer.Typer(add_completion=False)
    if isinstance(entry, Verb):
        _register(holder, entry)
        return typer.main.get_command(holder)  # one command: typer gives it, not a group of it
    group = typer.Typer(no_args_is_help=True, help=entry.help)
    for verb in entry.verbs:
        _register(group, verb)
    holder.add_typer(group, name=entry.name)
    command: click.Command = typer.main.get_command(holder).commands[entry.name]  # type: ignore[attr-defined]
    return command


class Commands(MutableMapping[str, click.Command]):
    """The root group's commands by name, in the table's order, each built on first lookup."""

    def __init__(self, entries: Iterable[Verb | Group]) -> None:
        self._entries = {e.name: e for e in entries}
        self._built: dict[str, click.Command] = {}

    def listed(self, name: str) -> click.Command | None:
        """What the root's help shows of ``name``: its name and help, nothing built."""
        entry = self._entries.get(name)
        return None if entry is None else TyperCommand(name=name, help=entry.help)

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._built:
            self._built[name] = built(self._entries[name])
        return self._built[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._built[name] = command
        self._entries.setdefault(name, Verb(name, "", command.help or ""))

    def __delitem__(self, name: str) -> None:
        del self._entries[name]
        self._built.pop(name, None)

    def __contains__(self, name: object) -> bool:  # (Mapping's would build it)
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


class VerbGroup(TyperGroup):
    """The ``catalog`` group: its verbs are :data:`VERBS`, built when one is looked up; its own
    help lists them from the table."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.verbs = Commands(VERBS)
        self.commands = self.verbs
        self._listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.verbs)  # (typer's reads every item: each would be built)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self.verbs.listed(cmd_name) if self._listing else self.verbs.get(cmd_name)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # typer's help looks every verb up for its name and help: the table's, nothing built
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    cls=VerbGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="TFRecord Catalog: a manifest for TFRecord datasets.",
)
app.callback()(main_options)
