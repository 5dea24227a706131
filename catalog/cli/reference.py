"""The CLI's reference pages, written from the code itself (the documentation site's
``reference/cli.md`` and ``reference/errors.md``, through ``docs/hooks.py``): every verb, its
one-line help, usage, example, options and exit codes; every error class, its parents, what it
means, what it carries and the exit code it gives; so the pages cannot drift from the code."""

from __future__ import annotations

import inspect

import typer
from typer import _click as click
from typer.core import TyperGroup, TyperOption

from catalog import errors
from catalog.cli.base import EXIT_ERROR, EXIT_INTERRUPTED
from catalog.cli.commands import VERBS, Group, Verb, app, built

__all__ = ["EXIT_CODES", "error_classes", "errors_markdown", "exit_code", "markdown"]

EXIT_CODES = (
    ("0", "done"),
    (str(EXIT_ERROR), "an error of the input, the catalog or the data: one line on stderr saying what and where"),
    ("2", "a usage error: an unknown option, a missing argument, a value of the wrong kind"),
    (str(EXIT_INTERRUPTED), "interrupted (Ctrl-C, SIGTERM): what was committed stays, nothing half-done is visible"),
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


def error_classes() -> list[type[BaseException]]:
    """Every class of the exception tree, parents before children (as catalog.errors declares
    them), then :class:`~catalog.errors.Interrupted`, the one error outside it."""
    found: list[type[BaseException]] = []

    def walk(cls: type[BaseException]) -> None:
        found.append(cls)
        for sub in cls.__subclasses__():
            if sub.__module__ == errors.__name__ and sub not in found:
                walk(sub)

    walk(errors.CatalogError)
    return [*found, errors.Interrupted]


def exit_code(cls: type[BaseException]) -> int:
    """The code ``catalog`` exits with when a verb raises ``cls`` (catalog.cli.base.verb)."""
    return EXIT_ERROR if issubclass(cls, errors.CatalogError) else EXIT_INTERRUPTED


def errors_markdown() -> str:
    """The reference of every error class, as Markdown: the tree, then a section per class."""
    classes = error_classes()
    tree = "\n".join(f"{'    ' * _depth(c)}{c.__name__}{_also(c)}" for c in classes)
    parts = [f"## The tree\n\n```text\n{tree}\n```\n"]
    parts += [_error(cls) for cls in classes]
    return "\n".join(parts)


def _also(cls: type[BaseException]) -> str:
    # what else code may catch it as: a built-in exception besides the tree
    others = [b.__name__ for b in cls.__bases__ if b.__module__ == "builtins" and b is not Exception]
    return f"  (also a {', '.join(others)})" if others else ""


def _depth(cls: type[BaseException]) -> int:
    return sum(1 for c in cls.__mro__[1:] if c.__module__ == errors.__name__)


def _error(cls: type[BaseException]) -> str:
    parents = ", ".join(f"`{b.__name__}`" for b in cls.__bases__)
    facts = f"Parents: {parents}. `catalog` exits with {exit_code(cls)}."
    lines = [f"## {cls.__name__}\n", f"{facts}\n", f"{inspect.cleandoc(cls.__doc__ or '')}\n"]
    maker = next((c for c in cls.__mro__ if c.__module__ == errors.__name__ and "__init__" in vars(c)), None)
    if maker is not None:
        params = list(inspect.signature(vars(maker)["__init__"]).parameters.values())[1:]  # (self)
        shown = str(inspect.Signature(params)).replace("'", "")
        lines.append(f"Made as `{cls.__name__}{shown}`.\n")
    return "\n".join(lines)
