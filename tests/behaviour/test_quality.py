"""ruff and mypy are part of the suite: CI fails when either complains."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # import-linter brings tomli where Python lacks tomllib
    import tomli as tomllib

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


def _layered_names() -> dict[str, set[str]]:
    """Each layers contract's container, with the names its layers give (`a | b`, `a : b`, `(a)`)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    named: dict[str, set[str]] = {}
    for contract in config["contracts"]:
        if contract["type"] != "layers":
            continue
        for container in contract["containers"]:
            for layer in contract["layers"]:
                parts = layer.replace(":", "|").split("|")
                named.setdefault(container, set()).update(p.strip().strip("()").strip() for p in parts)
    return named


def _unlayered(package: Path, dotted: str, named: dict[str, set[str]]) -> list[str]:
    """The modules and subpackages of `package` that no layer of `dotted`'s own contract names,
    then the same for each subpackage: a package's `__init__` is its container, not a layer."""
    missing = []
    for child in sorted(package.iterdir()):
        is_package = child.is_dir() and (child / "__init__.py").exists()
        if not is_package and (child.suffix != ".py" or child.name == "__init__.py"):
            continue
        name = child.stem if child.suffix == ".py" else child.name
        if name not in named.get(dotted, set()):
            missing.append(f"{dotted}.{name}")
        if is_package:
            missing += _unlayered(child, f"{dotted}.{name}", named)
    return missing


def test_every_module_sits_in_a_layer() -> None:
    """import-linter checks only the modules its contracts name: one left out could import
    anything and every contract would still be KEPT. So every module of the package, and each
    subpackage's modules, must be named in a layer of the layers contract of its parent."""
    missing = _unlayered(ROOT / "catalog", "catalog", _layered_names())
    assert missing == [], (
        "modules in no import-linter layer (add each to the layers contract whose container is its"
        " package in pyproject.toml [tool.importlinter], or give its subpackage a contract): " + ", ".join(missing)
    )


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
