"""ruff and mypy are part of the suite: CI fails when either complains."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tool(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    found = str(path) if path.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install '.[test]')")
    return found


def test_ruff_clean() -> None:
    result = subprocess.run(
        [_tool("ruff"), "check", "catalog", "tests", "benchmarks"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_clean() -> None:
    result = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_layers_hold() -> None:
    """The layer order of ARCHITECTURE.md, checked by import-linter (pyproject.toml)."""
    result = subprocess.run([_tool("lint-imports"), "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_no_function_level_imports_of_the_package_below_the_cli() -> None:
    """A cycle must not hide in a function body: below the CLI, `catalog` modules import one
    another at module level only (TYPE_CHECKING blocks obey the layers too)."""
    offenders = []
    for path in sorted((ROOT / "catalog").rglob("*.py")):
        if path.parent.name == "cli" or (path.name == "__init__.py" and path.parent.name == "catalog"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    names = _imported(inner)
                    offenders += [
                        f"{path.relative_to(ROOT)}:{inner.lineno} {n}" for n in names if n.startswith("catalog")
                    ]
    assert offenders == []


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    return []


def test_every_function_is_short() -> None:
    """No function of the package or the benchmarks over 60 lines."""
    long = []
    for folder in ("catalog", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    size = (node.end_lineno or node.lineno) - node.lineno + 1
                    if size > 60:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({size} lines)")
    assert long == []
