"""catalog.ops.migrations, the package: it imports none of its modules, so a migration script's
`from catalog.migrate import AddField` loads the operations alone (not the runner's machinery)."""

from __future__ import annotations

import json
import subprocess
import sys

import catalog.ops.migrations
from catalog.ops.migrations import operations, runner, scripts


def _loaded_after(statement: str) -> list[str]:
    listed = "sorted(m for m in sys.modules if m.startswith('catalog.ops'))"
    code = f"{statement}; import json, sys; print(json.dumps({listed}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout))


def test_the_package_imports_none_of_its_modules() -> None:
    assert _loaded_after("import catalog.ops.migrations") == ["catalog.ops", "catalog.ops.migrations"]


def test_a_scripts_import_loads_the_operations_alone() -> None:
    loaded = _loaded_after("from catalog.migrate import AddField")
    assert "catalog.ops.migrations.operations" in loaded
    assert "catalog.ops.migrations.runner" not in loaded and "catalog.ops.migrations.scripts" not in loaded


def test_the_modules_are_the_layers_the_docstring_names() -> None:
    assert catalog.ops.migrations.__doc__ is not None
    for module in (operations, scripts, runner):
        assert module.__name__.rsplit(".", 1)[-1] in catalog.ops.migrations.__doc__
