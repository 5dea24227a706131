"""The exception tree (catalog/errors.py): every error is raised as the subclass that says what
went wrong, so a caller can catch what it means; CatalogError itself only where the cause has
no one kind."""

from __future__ import annotations

import ast
import pickle
from pathlib import Path

import numpy as np
import pytest

from catalog import Catalog
from catalog.errors import (
    CatalogError,
    CodecError,
    CorruptShardError,
    DataAreaError,
    DependencyError,
    FeatureNotFoundError,
    StorageError,
    UsageError,
)
from catalog.readers.order import check_ranks
from catalog.storage.local import LocalStore
from catalog.tfrecord import RecordWriter
from catalog.tfrecord.framing import unknown_compression
from catalog.tfrecord.sources import open_source

PACKAGE = Path(__file__).resolve().parent.parent / "catalog"

# The one place a bare CatalogError is made: the demo runs CLI steps, and a step's own error
# (of whatever kind) was printed already; what is left to say is only which step failed.
BARE_ALLOWED = {"cli/files.py"}


def _bare_catalog_errors(path: Path) -> list[int]:
    tree = ast.parse(path.read_text())
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "CatalogError"
    ]


def test_catalog_error_itself_is_made_only_where_the_cause_has_no_kind():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        lines = _bare_catalog_errors(path)
        if lines and rel not in BARE_ALLOWED:
            found[rel] = lines
    assert found == {}, f"raise a CatalogError subclass (catalog/errors.py) instead: {found}"


def test_every_error_class_is_a_catalog_error_and_documented():
    import catalog.errors as errors

    classes = [v for v in vars(errors).values() if isinstance(v, type) and issubclass(v, CatalogError)]
    assert len(classes) > 20
    for cls in classes:
        assert cls.__module__ == "catalog.errors"
        assert cls is CatalogError or cls.__doc__ or cls.__base__.__doc__, cls


def test_a_closed_record_writer_is_a_usage_error(tmp_path):
    w = RecordWriter(tmp_path / "a.tfrecord")
    w.close()
    with pytest.raises(UsageError, match="RecordWriter is closed"):
        w.write(b"x")


def test_a_record_that_is_no_bytes_is_a_codec_error(tmp_path):
    with RecordWriter(tmp_path / "a.tfrecord") as w, pytest.raises(CodecError, match="must be bytes, not int"):
        w.write(7)  # type: ignore[arg-type]


def test_an_unknown_compression_is_a_usage_error():
    e = unknown_compression("lz4")
    assert isinstance(e, UsageError)
    assert "unknown compression 'lz4'" in str(e)


def test_bad_ranks_are_usage_errors():
    with pytest.raises(UsageError, match="world_size must be at least 1, not 0"):
        check_ranks(0, 0)
    with pytest.raises(UsageError, match=r"rank must be in \[0, 2\), not 2"):
        check_ranks(2, 2)


def test_a_folder_given_as_a_record_file_is_a_storage_error(tmp_path):
    with pytest.raises(StorageError, match=r"a directory|not a regular file|Is a directory"):
        open_source(str(tmp_path))


def test_a_source_of_the_wrong_kind_is_a_usage_error():
    with pytest.raises(UsageError, match="cannot read records from a int"):
        open_source(3)  # type: ignore[arg-type]


def test_a_data_area_that_is_a_file_is_a_storage_error(tmp_path):
    (tmp_path / "area").write_text("not a folder")
    with pytest.raises(StorageError, match="not a directory; the data area must be a directory"):
        LocalStore(tmp_path / "area").check_new()


def test_a_data_area_of_another_catalog_is_a_data_area_error(tmp_path):
    Catalog.init(tmp_path / "one", storage=tmp_path / "area")
    with pytest.raises(DataAreaError, match="already the data area of catalog"):
        Catalog.init(tmp_path / "two", storage=tmp_path / "area")


def test_reader_arguments_and_columns_say_their_kind(tmp_path):
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("d", {"features": {"x": {"dtype": "int64", "shape": []}}})
    ds.append_rows({"x": np.arange(4)})
    with pytest.raises(FeatureNotFoundError, match="columns: no feature 'y'"):
        next(iter(ds.batches(2, columns=["y"])))
    with pytest.raises(UsageError, match="batch_size must be a whole number >= 1"):
        next(iter(ds.batches(0)))


def test_a_shard_that_grew_is_a_corrupt_shard_error_and_keeps_its_type_across_processes(tmp_path):
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("d", {"features": {"x": {"dtype": "int64", "shape": []}}})
    ds.append_rows({"x": np.arange(4)})
    shard = ds.shards()[0]
    with open(shard.path, "ab") as f:
        f.write(b"\0" * 16)
    with pytest.raises(CorruptShardError) as caught:
        list(ds.read())
    again = pickle.loads(pickle.dumps(caught.value))
    assert type(again) is CorruptShardError and str(again) == str(caught.value)


def test_a_missing_optional_dependency_is_a_dependency_error(monkeypatch):
    import builtins

    from catalog.storage import fileio

    real_import = builtins.__import__

    def no_fsspec(name, *args, **kwargs):
        if name == "fsspec":
            raise ImportError("No module named 'fsspec'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_fsspec)
    with pytest.raises(DependencyError, match="needs fsspec"):
        fileio.require_fsspec("s3://b/x: reading URLs needs fsspec")
