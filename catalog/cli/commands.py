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
    help: str

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
    Verb("inspect", "files:inspect", "Count, check and describe the records of inputs, and infer one schema over all of them."),
    Verb("demo", "files:demo", "Run the end-to-end demo, echoing each command: append, read, verify, migrate, time travel, compact, export."),
    Verb("init", "admin:init", "Create a catalog directory: a new manifest and data area, or attach to a shared manifest."),
    Verb("register", "datasets:register", "Register a dataset with its schema (dataset version 1, schema version 1), or with the\nschema inferred from inputs, which are then appended (--infer)."),
    Verb("list", "datasets:list_", "List datasets."),
    Verb("show", "datasets:show", "Show a dataset: version, schema, totals and shards."),
    Verb("append", "datasets:append", "Append inputs as new shards of a split (default train), all or nothing, in one commit."),
    Verb("adopt", "datasets:adopt", "Register existing TFRecord files where they are (no copy), after checking, counting,\nchecksumming and indexing every record; a new NAME gets the schema they imply. One commit."),
    Verb("drop", "datasets:drop", "Remove a dataset from the catalog (its files go at the next gc)."),
    Verb("backup", "admin:backup", "Write a consistent copy of the manifest to a new SQLite file."),
    Verb("copy-manifest", "admin:copy_manifest", "Copy the whole manifest to another database (SQLite <-> PostgreSQL), losing nothing."),
    Verb("upgrade", "admin:upgrade", "Bring an older manifest to the current format."),
    Verb("cat", "rows:cat", "Print records as JSON Lines, per the schema (on a terminal, long bytes and tensors folded)."),
    Verb("stats", "statistics:stats", "Feature statistics of a version or split, kept by the manifest (no data read)."),
    Verb("serve", "statistics:serve", "Look at the catalog in a browser: datasets, history, schemas, shards, statistics, rows (read only)."),
    Verb("verify", "admin:verify", "Check every shard against the manifest: presence, size, checksum, records."),
    Verb("history", "datasets:history", "The dataset's commits, oldest first."),
    Verb("tag", "datasets:tag", "Name a version of a dataset (default: the current one); readers take the tag as --version."),
    Verb("tags", "datasets:tags", "A dataset's tags and the versions they name."),
    Verb("gc", "admin:gc", "Remove files that no committed shard names; with --keep-versions/--older-than, retired shards too."),
    Verb("index", "indexes:index", "Give shards without a record index (older catalogs, --link) one: a read per shard, idempotent."),
    Verb("migrate", "rewrites:migrate", "Apply pending migrations (or one quick migration): rewrite every shard, one commit each."),
    Verb("restore", "rewrites:restore", "A new commit whose shards and schema are exactly version N's (history keeps everything)."),
    Verb("compact", "rewrites:compact", "Merge small shards of a split into fewer: same records, same order, one no-data-change commit."),
    Verb("export", "rewrites:export", "Write the dataset (at version N; or a split, or a slice of one) as one TFRecord file that TensorFlow reads."),
    Verb("delete", "changes:delete", "Delete the rows that match --where: a new version in which only the shards holding a match are rewritten."),
    Verb("update", "changes:update", "Set features of the rows that match --where: a new version; only the shards holding a match are rewritten."),
    Verb("dedup", "changes:dedup", "Remove duplicate rows: the first row of each --key (or --content) in dataset order is kept; a new version in\nwhich only the shards holding a duplicate are rewritten. Equality is by a 128-bit hash of the key."),
    Verb("filter", "changes:filter", "A new dataset of the rows of NAME that match --where (its schema, splits and order), with its lineage."),
    Verb("map", "changes:map", "A new dataset of a function applied to every row of NAME (or batch of columns, --batched), with its lineage."),
    Verb("lineage", "changes:lineage", "Where a dataset came from: its derivation, its source's, back to a dataset that was not derived."),
    Verb("refresh", "changes:refresh", "Apply a derived dataset's filter or map to the rows its source appended since it was made."),
    Group("migrations", "Write and list migration scripts.", (
        Verb("new", "rewrites:migrations_new", "Write the next numbered migration template for a dataset."),
        Verb("list", "rewrites:migrations_list", "Applied and pending migrations, with their checksums."),
    )),
)
# fmt: on


def _register(app: typer.Typer, verb: Verb) -> None:
    fn = verb.function()
    # a verb of catalog.cli.generated.takes has its own command class
    app.command(verb.name, cls=getattr(fn, "command", None), help=verb.help)(fn)


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
