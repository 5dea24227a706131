"""The manifest's tables described for operators (catalog/manifest/reference.py): every table and
column of the format is described, and no description outlives its column."""

from __future__ import annotations

import re
from pathlib import Path

from catalog.commit.changes import Kind
from catalog.manifest.reference import ABOUT, markdown
from catalog.manifest.tables import FORMAT_VERSION, METADATA, MOVED_TO

ROOT = Path(__file__).resolve().parent.parent.parent


def test_every_table_and_column_is_described_and_nothing_else() -> None:
    assert set(ABOUT) == set(METADATA.tables)
    for name, table in METADATA.tables.items():
        about, columns = ABOUT[name]
        assert about.endswith("."), name
        assert list(columns) == [c.name for c in table.columns], name  # in the table's order
        assert all(text.strip() for text in columns.values()), name


def test_the_page_names_every_table_column_index_and_the_format() -> None:
    page = markdown()
    assert f"format version is **{FORMAT_VERSION}**" in page
    for name, table in METADATA.tables.items():
        assert f"\n## {name}\n" in page
        for column in table.columns:
            assert f"| `{column.name}` | `{column.type}`" in page, (name, column.name)
        for index in table.indexes:
            assert f"index `{index.name}`" in page


def test_the_descriptions_name_every_commit_kind_and_meta_key() -> None:
    kinds = ABOUT["commits"][1]["kind"]
    assert all(re.search(rf"\b{k.value}\b", kinds) for k in Kind), kinds
    meta = (ROOT / "catalog" / "manifest" / "meta.py").read_text(encoding="utf-8")
    keys = {*re.findall(r'"key": "(\w+)"', meta), *re.findall(r'key="(\w+)"', meta), MOVED_TO}
    assert keys >= {"format_version", "data_root", "catalog_id"}
    assert all(f"`{key}`" in ABOUT["catalog_meta"][1]["key"] for key in keys), keys
