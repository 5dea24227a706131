"""catalog.ops.export: one TFRecord file of a version or a split, written atomically, never over the catalog's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog import Catalog
from catalog.api import Dataset
from catalog.errors import CatalogError, StorageError
from catalog.ops.export import export_dataset
from catalog.tfrecord import read_records

N = 7


@pytest.fixture(params=["none", "gzip"])
def ds(request: pytest.FixtureRequest, tmp_path: Path) -> Dataset:
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("d", {"features": {"id": {"dtype": "int64"}}}, compression=request.param)
    ds.append_rows([{"id": i} for i in range(N)], shard_records=3)
    return cat.dataset("d")


def test_the_file_holds_every_record_in_order(ds: Dataset, tmp_path: Path) -> None:
    out = tmp_path / "all.tfrecord"
    report = export_dataset(ds, out)
    assert [ds.schema.decode(r)["id"] for r in read_records(out)] == list(range(N))
    assert (report.records, report.bytes, report.version) == (N, out.stat().st_size, 2)
    gz = export_dataset(ds, tmp_path / "part.tfrecord.gz", compression="gzip", split="train[2:5]")
    assert [ds.schema.decode(r)["id"] for r in read_records(gz.path)] == [2, 3, 4]
    assert gz.to_json()["split"] == "train[2:5]" and gz.compression == "gzip"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.tfrecord", "cat", "part.tfrecord.gz"]  # no partial file


def test_targets_it_refuses(ds: Dataset, tmp_path: Path) -> None:
    out = tmp_path / "x.tfrecord"
    out.write_bytes(b"keep")
    with pytest.raises(CatalogError, match=r"x.tfrecord: already exists; use --force to replace it$"):
        export_dataset(ds, out)
    assert out.read_bytes() == b"keep"
    export_dataset(ds, out, force=True)
    assert out.read_bytes() != b"keep"
    with pytest.raises(StorageError, match=r"nowhere: no such directory$"):
        export_dataset(ds, tmp_path / "nowhere" / "x.tfrecord")
    with pytest.raises(CatalogError, match=r"^unknown compression 'lz4'"):
        export_dataset(ds, tmp_path / "y.tfrecord", compression="lz4")
    with pytest.raises(CatalogError, match="a file of the catalog at"):
        export_dataset(ds, ds.catalog.root / "catalog.json", force=True)
