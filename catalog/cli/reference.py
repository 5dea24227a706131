"""The CLI's reference page, written from the commands themselves (the documentation site's
``reference/cli.md``, through ``docs/hooks.py``): every verb, its one-line help, usage,
example, options and exit codes, so the page cannot drift from what ``--help`` says."""

from __future__ import annotations

import typer
from typer import _click as click
from typer.core import TyperGroup, TyperOption

from catalog.cli.commands import VERBS, Group, Verb, app, built

__all__ = ["EXIT_CODES", "markdown"]

EXIT_CODES = (
    ("0", "done"),
    ("1", "an error of the input, the catalog or the data: one line on stderr saying what and where"),
    ("2", "a usage error: an unknown option, a missing argument, a value of the wrong kind"),
    ("130", "interrupted (Ctrl-C, SIGTERM): what was committed stays, nothing half-done is visible"),
)


def markdown() -> str:
    """The reference of every command, as Markdown."""
    parts = [_root()]
    for entry in VERBS:
        if isinstance(entry, Group):
            parts.append(f"## catalog {entry.name}\n\n{entry.help}\n")
            group = built(entry)
            assert isinstance(group, TyperGroup)
            for verb in entry.verbs:
                parts.append(_verb(f"{entry.name} {verb.name}", verb, group.commands[verb.name], "###"))
        else:
            parts.append(_verb(entry.name, entry, built(entry), "##"))
    codes = "".join(f"| {code} | {meaning} |\n" for code, meaning in EXIT_CODES)
    parts.append(f"## Exit codes\n\n| code | meaning |\n|---|---|\n{codes}")
    return "\n".join(parts)


def _root() -> str:
    root = typer.main.get_command(app)
    lines = ["## catalog\n", f"{root.help}\n", "```text\ncatalog [OPTIONS] COMMAND [ARGS]...\n```\n"]
    lines.append(_options(root))
    return "\n".join(lines)


def _verb(name: str, verb: Verb, command: click.Command, level: str) -> str:
    usage = " ".join(["catalog", name, *command.collect_usage_pieces(click.Context(command))])
    lines = [f"{level} catalog {name}\n", f"{verb.help}\n", f"```text\n{usage}\n```\n"]
    if verb.example:
        lines.append(f"Example:\n\n```text\n{verb.example}\n```\n")
    lines.append(_options(command))
    return "\n".join(lines)


def _options(command: click.Command) -> str:
    rows = []
    ctx = click.Context(command)
    for param in command.params:
        if not isinstance(param, TyperOption) or param.hidden:
            continue
        names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
        kind = "" if param.is_flag else f" `{param.make_metavar(ctx)}`"
        help_ = param.help or ""
        if param.required:
            help_ += " (required)"
        elif param.show_default and not param.is_flag and param.default not in (None, (), ""):
            help_ += f" Default: `{param.default}`."
        rows.append(f"| {_cell(names + kind)} | {_cell(help_)} |")
    if not rows:
        return ""
    return "| option | what it does |\n|---|---|\n" + "\n".join(rows) + "\n"


def _cell(text: str) -> str:
    # a | in a table cell ends it, even inside code, unless escaped
    return text.replace("|", "\\|").replace("\n", " ")
