"""The manifest package's structure (issue 31): its modules each sit in its import-linter
order, a format's tables are what upgrading an older manifest gives, and write intents' SQL
has one home (``catalog.commit.intents``)."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect

from catalog import manifest as mf

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parents[1] / "fixtures" / "manifest-format1"


def _shape(engine: Engine) -> dict[str, tuple[list[tuple[str, bool]], set[str]]]:
    """Per table: its columns in order (name, nullable) and its indexes' names."""
    found = inspect(engine)
    return {
        table: (
            [(c["name"], bool(c["nullable"])) for c in found.get_columns(table)],
            {str(i["name"]) for i in found.get_indexes(table)},
        )
        for table in sorted(found.get_table_names())
    }


@pytest.mark.usefixtures("sqlite_only")
def test_the_first_format_upgraded_has_the_tables_of_a_new_manifest(tmp_path: Path) -> None:
    """A column or index added to ``tables`` without its step in ``upgrades`` (or the other way
    round) fails here."""
    shutil.copy(FIXTURE / "catalog.db", tmp_path / "old.db")
    old = mf.make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    assert mf.upgrade(old) == (1, mf.FORMAT_VERSION)
    new = mf.make_engine(f"sqlite:///{tmp_path / 'new.db'}")
    mf.create_manifest(new, str(tmp_path / "data"))
    assert _shape(old) == _shape(new)
    assert set(_shape(new)) == {t.name for t in mf.METADATA.sorted_tables}


def test_every_older_format_has_its_upgrade_step() -> None:
    assert sorted(mf.UPGRADES) == list(range(1, mf.FORMAT_VERSION))


def test_every_module_of_the_manifest_has_its_place_in_the_packages_order() -> None:
    text = (ROOT / "pyproject.toml").read_text()  # tomllib is 3.11's, the package runs on 3.10
    block = text[text.index('containers = ["catalog.manifest"]') :]
    block = block[block.index("layers = ") + len("layers = ") :]
    layers = ast.literal_eval(block[: block.index("]\n") + 1])
    placed = {name.strip() for layer in layers for name in layer.split("|")}
    modules = {p.stem for p in (ROOT / "catalog" / "manifest").glob("*.py") if p.stem != "__init__"}
    assert placed == modules


def test_write_intents_sql_has_one_home() -> None:
    """Only the table's own module (and the package that re-exports it, and copy-manifest, which
    leaves it out) names INTENTS, besides ``commit/intents.py``."""
    naming = set()
    for path in (ROOT / "catalog").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            named = (
                (isinstance(node, ast.Name) and node.id == "INTENTS")
                or (isinstance(node, ast.Attribute) and node.attr == "INTENTS")
                or (isinstance(node, ast.alias) and node.name == "INTENTS")
            )
            if named:
                naming.add(path.relative_to(ROOT / "catalog").as_posix())
    assert naming == {"manifest/tables.py", "manifest/__init__.py", "manifest/copying.py", "commit/intents.py"}


def test_the_package_exports_what_it_lists() -> None:
    assert [name for name in mf.__all__ if not hasattr(mf, name)] == []
