"""What every verb shares (catalog/cli/base.py): the command wrapper's one error line and exit
codes, resources held until the output is written, the catalog a command opens."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from catalog.cli import base
from catalog.cli.base import Globals, catalog_option, executor_of, hold, open_manifest, progress_bar, verb
from catalog.cli.commands import app
from catalog.cli.output import Output
from catalog.errors import CatalogError, Interrupted

runner = CliRunner()


@pytest.fixture(autouse=True)
def fresh_globals(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "_state", Globals())


def test_a_catalog_error_is_one_visible_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    @verb
    def fails() -> Output:
        raise CatalogError("bad\x1b[31m thing\nsecond line")

    with pytest.raises(typer.Exit) as e:
        fails()
    assert e.value.exit_code == 1
    assert capsys.readouterr().err == "error: bad\\u001b[31m thing\\u000asecond line\n"
    assert base.verb_started()


def test_ctrl_c_is_one_line_and_exit_130_unless_traceback_is_asked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    @verb
    def reading() -> Output:
        raise KeyboardInterrupt

    @verb
    def writing() -> Output:
        raise Interrupted(4)

    for fn, line in ((reading, "interrupted\n"), (writing, "interrupted after the commit: version 4 is complete\n")):
        with pytest.raises(typer.Exit) as e:
            fn()
        assert e.value.exit_code == 130 and capsys.readouterr().err == line
    monkeypatch.setattr(base, "_state", Globals(traceback=True))
    with pytest.raises(KeyboardInterrupt):
        reading()


def test_what_a_verb_holds_is_closed_after_its_output_is_written(capsys: pytest.CaptureFixture[str]) -> None:
    events: list[str] = []

    @contextmanager
    def resource() -> Iterator[str]:
        events.append("open")
        yield "r"
        events.append("closed")

    def lines() -> Iterator[str]:
        events.append("writing")
        yield "line"

    @verb
    def shows() -> Output:
        assert hold(resource()) == "r"
        return Output(text=lines())

    shows()
    assert events == ["open", "writing", "closed"]
    assert capsys.readouterr().out == "line\n"


def test_the_catalog_option_and_a_missing_catalog(tmp_path: Path) -> None:
    result = runner.invoke(app, ["-C", str(tmp_path), "list"])
    assert result.exit_code == 1
    assert result.stderr == f"error: {tmp_path}: not a catalog (no catalog.json; create one with `catalog init`)\n"
    base._state = Globals(catalog=tmp_path)
    assert catalog_option() == tmp_path


def test_without_a_terminal_no_progress_bar_and_a_dry_run_no_executor(tmp_path: Path) -> None:
    with progress_bar("copying", 10) as advance:
        assert advance is None  # stderr is captured, not a terminal
    with executor_of("local", None, needed=False) as executor:
        assert executor is None
    with pytest.raises(CatalogError):
        executor_of("nonsense", None)
    base._state = Globals(catalog=tmp_path)
    with pytest.raises(CatalogError, match="not a catalog"), base._command_scope():
        open_manifest()
