"""The ``index`` verb (catalog/cli/indexes.py): record indexes for shards without one, DALI's
index files for one dataset, and its one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update
from typer.testing import CliRunner

from catalog import Catalog
from catalog import manifest as mf
from catalog.cli.commands import app
from catalog.cli.indexes import _index_text, index

runner = CliRunner()
SCHEMA = {"features": {"x": {"dtype": "int64"}}}


def run(*args: str, code: int = 0) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (args, result.output, result.exception)
    return result


@pytest.fixture
def root(tmp_path: Path) -> Path:
    cat = Catalog.init(tmp_path / "cat")
    cat.register("d", SCHEMA).append_rows([{"x": 1}, {"x": 2}])
    cat.register("z", SCHEMA, compression="gzip").append_rows([{"x": 3}])
    return tmp_path / "cat"


def test_shards_written_by_the_catalog_are_indexed_already(root: Path) -> None:
    assert index.__name__ == "index"
    lines = run("-C", str(root), "index").stdout.splitlines()
    assert lines == [
        "d version 2: indexed 0 shards (0 records, 0 B of index); 1 already indexed",
        "z version 2: indexed 0 shards (0 records, 0 B of index); 0 already indexed, 1 compressed "
        "(no random access, no index)",
    ]
    assert list(_index_text([], None)) == ["no datasets"]


@pytest.mark.usefixtures("every_index_a_file")  # (tiny shards: see the fixture)
def test_a_shard_registered_without_an_index_gets_one(root: Path) -> None:
    [idx] = (root / "data" / ".index" / "d").iterdir()
    idx.unlink()  # as an older catalog, or --link, registered it
    cat = Catalog.open(root)
    with mf.write_txn(cat.engine) as conn:
        conn.execute(update(mf.SHARDS).values(index_checksum=None))
    cat.close()
    doc = json.loads(run("-C", str(root), "index", "d", "--json").stdout)
    [report] = doc["datasets"]
    assert (report["dataset"], report["indexed"], report["records"]) == ("d", 1, 2)
    assert idx.exists()


def test_dali_index_files_for_one_dataset_only(root: Path, tmp_path: Path) -> None:
    out = tmp_path / "dali"
    lines = run("-C", str(root), "index", "d", "--dali", str(out)).stdout.splitlines()
    assert lines[-1] == f"wrote 1 DALI index file (2 records) to {out}"
    assert len(list(out.iterdir())) == 1
    refused = run("-C", str(root), "index", "--dali", str(out), code=1)
    assert refused.stderr == "error: --dali needs exactly one dataset name\n"
