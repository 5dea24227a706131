"""The ``catalog`` command: a thin typer layer over the library (see ARCHITECTURE.md).

Every verb calls the library and returns what to show; one output layer (``output``)
writes it as text or ``--json``. A :class:`~catalog.errors.CatalogError` becomes one line
on stderr and exit code 1 (``--traceback`` shows the traceback instead); anything else is
a bug and keeps its traceback.

This module is what the console script imports first, so it imports nothing: the command
itself (``commands``: typer, the verbs) is loaded inside :func:`main`, where a Ctrl-C
during start-up is caught like one during a verb.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from catalog.cli.commands import app

__all__ = ["app", "main"]

STARTUP_INTERRUPTED = "interrupted: nothing was done"


def main() -> None:
    """Console-script entry point."""
    try:
        # Imported here, not above: the console script's own `from catalog.cli import main`
        # runs outside any handler, so the slow part of start-up must happen in this one.
        from catalog.cli.commands import app

        app(prog_name="catalog")
    except KeyboardInterrupt:
        # Once a verb runs, typer turns Ctrl-C into exit 130 itself (the verb says what it
        # did): one escaping here came while Python loaded the command, before any verb.
        sys.stderr.write(STARTUP_INTERRUPTED + "\n")
        raise SystemExit(130) from None


def __getattr__(name: str) -> Any:
    # `from catalog.cli import app` (tests, benchmarks) loads the command on first use.
    if name == "app":
        from catalog.cli.commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
