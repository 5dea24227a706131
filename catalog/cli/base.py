"""What every verb shares: the global options (the app's callback), the command wrapper
(errors, output, resources), the catalog a command opens, progress bars and executors.

Start-up matters here: from outside the CLI, this module imports typer and ``catalog.errors``
only. The library (SQLAlchemy, NumPy, protobuf) is imported by the verbs that use it,
inside them, so ``catalog --help`` and ``catalog inspect`` never pay for a manifest.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, closing, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from catalog.errors import CatalogError, Interrupted

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from sqlalchemy import Engine

    from catalog.api import Catalog
    from catalog.cli.options import Jobs
    from catalog.cli.output import Output
    from catalog.commit.handles import CatalogHandle

T = TypeVar("T")

# How a verb that fails ends (the CLI reference's exit codes, and each error class's on
# docs/reference/errors.md): a CatalogError, and Ctrl-C or SIGTERM (128 + SIGINT, as shells say).
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130


@dataclass
class Globals:
    catalog: Path | None = None
    traceback: bool = False


# Set by the callback on every invocation (the CLI runs one command per process or per
# CliRunner call), so the error handler can see --traceback without threading a context.
_state = Globals()
# The resources of the running commands, innermost last (the demo runs commands inside its own).
_scopes: list[ExitStack] = []
_verb_started = False


def _globals() -> Globals:
    return _state


def verb_started() -> bool:
    """Whether a verb of this process has begun: a Ctrl-C before one has done nothing."""
    return _verb_started


def _print_version(asked: bool) -> None:
    if not asked:
        return
    from catalog import __version__
    from catalog.manifest.tables import FORMAT_VERSION

    typer.echo(f"catalog {__version__} (tfrecord-catalog), manifest format {FORMAT_VERSION}")
    raise typer.Exit()


def main_options(
    ctx: typer.Context,
    catalog: Annotated[
        Path | None, typer.Option("--catalog", "-C", help="Catalog directory (else $CATALOG_ROOT, else search up).")
    ] = None,
    traceback: Annotated[bool, typer.Option("--traceback", help="Show the traceback of errors.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the package and manifest format versions."
        ),
    ] = False,
) -> None:
    global _state
    _state = Globals(catalog=catalog, traceback=traceback)
    ctx.obj = _state


def verb(fn: Callable[..., Output]) -> Callable[..., None]:
    """A command: runs ``fn``, writes the :class:`Output` it returns (as JSON when its
    ``as_json`` parameter is set), then closes what it opened (:func:`hold`). A
    CatalogError becomes one stderr line and exit 1, Ctrl-C one line and exit 130, unless
    --traceback was given; anything else is a bug and keeps its traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        # Here, not at the top: `catalog --help` builds no verb and writes no output of one.
        from catalog.cli.output import emit, visible

        global _verb_started
        _verb_started = True
        try:
            with _command_scope():
                # Written inside the scope: text and rows may stream from the catalog.
                emit(fn(*args, **kwargs), kwargs.get("as_json", False))
        except CatalogError as e:
            if _globals().traceback:
                raise
            # one line, whatever a file name or a library's message holds (newlines, escapes)
            typer.echo(f"error: {visible(_redact(str(e)))}", err=True)
            raise typer.Exit(EXIT_ERROR) from None
        except KeyboardInterrupt as e:
            if _globals().traceback:
                raise
            # Interrupted says how a write ended; any other command was only reading.
            typer.echo(str(e) if isinstance(e, Interrupted) else "interrupted", err=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None

    return wrapper


@contextmanager
def _command_scope() -> Iterator[None]:
    with ExitStack() as stack:
        _scopes.append(stack)
        try:
            yield
        finally:
            _scopes.pop()


def hold(resource: AbstractContextManager[T]) -> T:
    """Enter ``resource`` for the running command: it is exited once the command's output is written."""
    return _scopes[-1].enter_context(resource)


def _redact(message: str) -> str:
    # A password can only be in a message once a database URL went through SQLAlchemy: a
    # command that never loaded it (inspect) need not load it, and the manifest, to say so.
    if "sqlalchemy" not in sys.modules:
        return message
    from catalog.manifest import redact

    return redact(message)


def open_catalog(check: bool = True) -> Catalog:
    """The catalog of --catalog (else $CATALOG_ROOT, else search up), closed after the command;
    ``check=False``: of any manifest format (the command checks what it needs)."""
    from catalog.api import Catalog

    return hold(Catalog.open(_globals().catalog, check=check))


def open_reader() -> CatalogHandle:
    """The catalog ``open_catalog`` would open, as the commit layer's read side alone (its
    manifest and data area, closed after the command): for verbs that only read it (show,
    history, tags) or call one operation module (verify), which then load none of the
    other operations (catalog.api), the writers or the readers."""
    from catalog import directory
    from catalog.commit.handles import CatalogHandle

    root, url = directory.locate(_globals().catalog)
    return hold(closing(CatalogHandle(root, *directory.connect(root, url, check=True))))


def open_manifest() -> Engine:
    """Only the manifest of the catalog ``open_catalog`` would open, disposed after the
    command: for verbs that read the manifest alone (list), which then load neither the
    schema codec nor the storage layer."""
    from catalog import directory

    root, url = directory.locate(_globals().catalog)
    engine = directory.connect(root, url, check=True)[0]
    hold(_disposing(engine))
    return engine


@contextmanager
def _disposing(engine: Engine) -> Iterator[None]:
    try:
        yield
    finally:
        engine.dispose()


def catalog_option() -> Path | None:
    """--catalog as given (None: $CATALOG_ROOT, else search up)."""
    return _globals().catalog


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


def executor_of(
    kind: str, scheduler: str | None, workers: int | None = None, needed: bool = True, jobs: int | None = None
) -> AbstractContextManager[Executor | None]:
    """open_executor(...); or no executor at all when no job will run (a dry run starts no cluster).
    ``jobs``: a local pool for that many jobs (None: no local pool; the library decides)."""
    from catalog.executors import check_executor, open_executor

    check_executor(kind, scheduler)
    return open_executor(kind, scheduler, workers, jobs) if needed else nullcontext(None)


@contextmanager
def running(jobs: Jobs, label: str, records: int, needed: bool = True) -> Iterator[dict[str, Any]]:
    """The library's keywords for where a verb's jobs run: the executor (none when ``needed``
    is False: a dry run starts no cluster) and a progress bar of ``records`` on a terminal."""
    with (
        executor_of(jobs.executor, jobs.scheduler, jobs.workers, needed=needed) as ex,
        progress_bar(label, records, unit="records") as progress,
    ):
        yield {"workers": jobs.workers, "executor": ex, "progress": progress}
