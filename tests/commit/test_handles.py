"""The read side's handles (catalog/commit/handles.py): a dataset looked up without parsing its
schema, and a dataset's description read without parsing it."""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path

import pytest

from catalog import Catalog
from catalog.commit.handles import CatalogHandle
from catalog.errors import SchemaError

SCHEMA = {
    "features": {"x": {"dtype": "int64", "default": 3}, "m": {"dtype": "uint8", "encoding": "tensor", "shape": [2]}},
    "sequence_features": {"tok": {"dtype": "string"}},
}


def reader(root: Path) -> CatalogHandle:
    """The commit layer's handle on ``root``, as `catalog show` opens it (base.open_reader)."""
    from catalog import directory

    found, url = directory.locate(root)
    return CatalogHandle(found, *directory.connect(found, url, check=True))


def test_a_dataset_looked_up_unparsed_parses_its_schema_on_first_use(tmp_path: Path) -> None:
    Catalog.init(tmp_path / "cat").register("d", SCHEMA).migrate(add=["y:float32=0.5"])
    handle = reader(tmp_path / "cat")
    ds = handle.lookup("d", parsed=False)
    assert ds._schema is None  # nothing parsed yet
    assert ds.info().schema == handle.lookup("d").schema.to_json()
    assert ds.info(1).schema == SCHEMA  # the version asked for, from its own stored JSON
    assert ds._schema is None
    assert ds.schema == handle.lookup("d").schema and ds._schema is not None
    copy = pickle.loads(pickle.dumps(handle.lookup("d", parsed=False)))
    assert (copy.schema, copy.schema_version, copy.version) == (ds.schema, 2, 2)


def test_a_damaged_schema_fails_where_it_is_parsed(tmp_path: Path) -> None:
    Catalog.init(tmp_path / "cat").register("d", SCHEMA)
    with sqlite3.connect(tmp_path / "cat" / "catalog.db") as conn:
        conn.execute("UPDATE schema_versions SET schema_json = ?", ('{"features": {"": {}}}',))
    handle = reader(tmp_path / "cat")
    with pytest.raises(SchemaError, match="non-empty"):
        handle.lookup("d")
    ds = handle.lookup("d", parsed=False)
    with pytest.raises(SchemaError, match="non-empty"):
        ds.info()
    with pytest.raises(SchemaError, match="non-empty"):
        ds.schema  # noqa: B018
