"""The manifest's own facts (catalog/manifest/meta.py): creating one, reading it back, the
format check's three answers, one catalog id however many ask."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from catalog.errors import ManifestError
from catalog.manifest.engine import make_engine
from catalog.manifest.meta import check_format, create_manifest, ensure_catalog_id, has_manifest, read_meta
from catalog.manifest.tables import FORMAT_VERSION


def _engine(tmp_path: Path, name: str = "catalog.db") -> Engine:
    return make_engine(f"sqlite:///{tmp_path / name}")


def test_a_created_manifest_reads_back_its_facts(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    assert not has_manifest(engine)
    create_manifest(engine, "/data/area", catalog_id="cat-1")
    assert has_manifest(engine)
    meta = read_meta(engine)
    assert meta["format_version"] == str(FORMAT_VERSION)
    assert meta["data_root"] == "/data/area"
    assert meta["catalog_id"] == "cat-1"
    assert "created_at" in meta
    assert check_format(meta) == FORMAT_VERSION


def test_reading_an_empty_database_says_it_is_no_manifest(tmp_path: Path) -> None:
    engine = _engine(tmp_path, "empty.db")
    with pytest.raises(ManifestError) as e:
        read_meta(engine)
    assert str(e.value) == f"sqlite:///{tmp_path / 'empty.db'}: not a catalog manifest (no catalog_meta table)"


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({}, "not a catalog manifest (no format version)"),
        ({"format_version": "eight"}, "not a catalog manifest (no format version)"),
        (
            {"format_version": str(FORMAT_VERSION + 1)},
            f"the manifest has format {FORMAT_VERSION + 1}, newer than this catalog understands "
            f"({FORMAT_VERSION}): upgrade the tfrecord-catalog package",
        ),
        (
            {"format_version": "1"},
            f"the manifest has format 1, older than {FORMAT_VERSION}: run `catalog upgrade`",
        ),
    ],
)
def test_check_format_refuses_what_this_code_cannot_read(meta: dict[str, str], message: str) -> None:
    with pytest.raises(ManifestError) as e:
        check_format(meta)
    assert str(e.value) == message


def test_ensure_catalog_id_keeps_the_first_id_it_was_given(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    create_manifest(engine, "/data")  # made before ids existed: none recorded
    assert "catalog_id" not in read_meta(engine)
    assert ensure_catalog_id(engine, "first") == "first"
    assert ensure_catalog_id(engine, "second") == "first"
    assert read_meta(engine)["catalog_id"] == "first"
