"""``python -m catalog`` (catalog/__main__.py): the same command as the console script."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_importing_the_module_runs_the_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["catalog", "--help"])
    monkeypatch.delitem(sys.modules, "catalog.__main__", raising=False)
    with pytest.raises(SystemExit) as e:
        import catalog.__main__  # noqa: F401
    assert e.value.code == 0
    assert "Usage: catalog" in capsys.readouterr().out


def test_python_dash_m_catalog_turns_an_error_into_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "catalog", "--catalog", str(tmp_path / "none"), "list"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert result.returncode == 1, result.stderr
    assert (
        result.stderr
        == f"error: {tmp_path / 'none'}: not a catalog (no catalog.json; create one with `catalog init`)\n"
    )
