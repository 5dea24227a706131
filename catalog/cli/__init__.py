"""The ``catalog`` command: a thin typer layer over the library (see ARCHITECTURE.md).

Every verb calls the library and returns what to show; one output layer (``output``)
writes it as text or ``--json``. A :class:`~catalog.errors.CatalogError` becomes one line
on stderr and exit code 1 (``--traceback`` shows the traceback instead); anything else is
a bug and keeps its traceback.

This module is what the console script imports first, outside any handler, so it imports
nothing of the command: that (``commands``: typer, the verbs) is loaded inside
:func:`main`, where a Ctrl-C during start-up is one line and exit 130, as in a verb.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from catalog.cli.commands import app

__all__ = ["app", "main"]

STARTUP_INTERRUPTED = "interrupted: nothing was done"


def main() -> None:
    """Console-script entry point."""
    _closed_streams_to_devnull()
    try:
        # Imported here, not above: the console script's own `from catalog.cli import main`
        # runs outside any handler, so the slow part of start-up must happen in this one.
        from catalog.cli import base
        from catalog.cli.commands import app

        app(prog_name="catalog")
    except KeyboardInterrupt:
        # Once a verb runs, Ctrl-C is its to report (it says what it did): one escaping
        # here came while Python loaded the command, before any verb.
        _interrupted_at_start()
    except SystemExit as e:
        # typer ends a Ctrl-C that comes while it reads the arguments (and loads pydantic to
        # convert them) with a silent exit 130: no verb had started, so nothing was done either.
        if e.code == 130 and not base.verb_started():
            _interrupted_at_start()
        raise


def _closed_streams_to_devnull() -> None:
    """A process started with a standard descriptor closed (``catalog ... >&- 2>&-``: a cron
    job, a daemon) has that sys stream None, which every write, progress bar and prompt would
    trip on: it reads as empty and writes go nowhere instead, as the shell's user asked."""
    for name, mode in (("stdin", "r"), ("stdout", "w"), ("stderr", "w")):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, mode))  # noqa: SIM115 - the process's stream, for its life


def _interrupted_at_start() -> NoReturn:
    sys.stderr.write(STARTUP_INTERRUPTED + "\n")
    raise SystemExit(130) from None


def __getattr__(name: str) -> Any:
    # `from catalog.cli import app` (tests, benchmarks) loads the command on first use.
    if name == "app":
        from catalog.cli.commands import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
