"""The command's table of verbs (catalog/cli/commands.py): every verb once, in the order
``catalog --help`` lists them, append's bare --check, the migrations sub-command."""

from __future__ import annotations

import typer
from typer.main import get_command
from typer.testing import CliRunner

from catalog.cli.commands import app
from catalog.cli.options import BareCheck

runner = CliRunner()
VERBS = [
    "inspect", "demo", "init", "register", "list", "show", "append", "adopt", "drop", "backup",
    "copy-manifest", "upgrade", "cat", "stats", "serve", "verify", "history", "tag", "tags", "gc",
    "index", "migrate", "restore", "compact", "export", "delete", "update", "dedup", "filter", "map", "lineage",
    "refresh", "migrations",
]  # fmt: skip


def test_every_verb_is_registered_once_in_the_help_order() -> None:
    command = get_command(app)
    assert isinstance(command, typer.core.TyperGroup)
    assert list(command.commands) == VERBS
    help_text = runner.invoke(app, ["--help"]).stdout
    listed = help_text[help_text.index("Commands") :].splitlines()
    first_words = [line.strip("│ ").split(" ")[0] for line in listed if line.startswith("│ ") and line[2] != " "]
    assert first_words == VERBS


def test_append_alone_takes_a_bare_check_and_migrations_has_its_own_verbs() -> None:
    command = get_command(app)
    assert isinstance(command, typer.core.TyperGroup)
    assert isinstance(command.commands["append"], BareCheck)  # (its class generated on BareCheck: cli/generated.py)
    assert not any(isinstance(c, BareCheck) for name, c in command.commands.items() if name != "append")
    migrations = command.commands["migrations"]
    assert isinstance(migrations, typer.core.TyperGroup)
    assert list(migrations.commands) == ["new", "list"]
    result = runner.invoke(app, ["migrations"])
    assert result.exit_code == 2 and "migrations [OPTIONS] COMMAND" in result.output  # no args: its help
