"""catalog.inputs.parquet: Parquet rows by batch, nulls as missing values, columns checked against the schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog.errors import AppendError, SchemaError
from catalog.inputs.files import InputOptions
from catalog.inputs.parquet import ParquetRows, infer_parquet, parquet_rows
from catalog.schema.features import Feature
from catalog.schema.inference import RowInference
from catalog.schema.model import Schema

pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install '.[test]')")
pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (pip install '.[test]')")

SCHEMA = Schema.from_json(
    {"features": {"id": {"dtype": "int64"}, "tags": {"dtype": "string", "shape": [None], "optional": True}}}
)


def _write(path: Path, table: object) -> Path:
    pq.write_table(table, path, row_group_size=2)
    return path


def test_rows_and_batches_keep_order_across_row_groups(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.parquet", pa.table({"id": [1, 2, 3], "tags": [["a"], None, []]}))
    rows = parquet_rows(path, SCHEMA, InputOptions(), None)
    assert list(rows) == [(0, {"id": 1, "tags": ["a"]}), (1, {"id": 2}), (2, {"id": 3, "tags": []})]
    assert [indices for _, indices in ParquetRows(path, SCHEMA).batches()] == [[0, 1, 2]]


def test_columns_are_checked_against_the_schema(tmp_path: Path) -> None:
    extra = _write(tmp_path / "extra.parquet", pa.table({"id": [1], "x": [2]}))
    with pytest.raises(AppendError, match=r"extra.parquet: column 'x' is not a feature of the schema$"):
        list(ParquetRows(extra, SCHEMA))
    missing = _write(tmp_path / "missing.parquet", pa.table({"tags": [["a"]]}))
    with pytest.raises(AppendError, match=r"missing.parquet: no column 'id', and the feature has no default$"):
        list(ParquetRows(missing, SCHEMA))
    twice = _write(tmp_path / "twice.parquet", pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["id", "id"]))
    with pytest.raises(
        AppendError, match=r"twice.parquet: column 'id' appears twice: rows would keep only one of them$"
    ):
        list(ParquetRows(twice, None))


def test_a_file_that_is_not_parquet(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"PAR1 but nothing else")
    with pytest.raises(AppendError, match=r"bad.parquet: not a Parquet file pyarrow can read: ") as e:
        list(ParquetRows(path, SCHEMA))
    assert e.value.path == str(path)


def test_inference_declares_columns_of_nulls_only(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.parquet", pa.table({"id": [1, 2], "none": pa.array([None, None], pa.int64())}))
    tally = RowInference()
    assert infer_parquet(path, InputOptions(), tally) == []
    message = r"^feature 'none': no value in any row: its type cannot be told \(declare it in a schema\)$"
    with pytest.raises(SchemaError, match=message):  # declared, not silently left out
        tally.features()
    only_ids = RowInference()
    infer_parquet(_write(tmp_path / "ids.parquet", pa.table({"id": [1, None]})), InputOptions(), only_ids)
    assert only_ids.features() == [Feature("id", "int64", optional=True)]
