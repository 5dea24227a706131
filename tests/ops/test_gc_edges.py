"""gc of retired shards (--keep-versions) whose files are already gone: counted as what they are,
never as removed bytes."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli import app

SCHEMA = {"features": {"id": {"dtype": "int64"}}}


def _retired_and_gone(tmp_path):
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("d", SCHEMA)
    ds.append_rows([{"id": i} for i in range(4)])
    ds.append_rows([{"id": i} for i in range(4, 8)])
    old = {s.path for s in ds.shards()}
    ds.delete("id = 1")
    (gone,) = old - {s.path for s in ds.shards()}
    os.remove(gone)  # lost by hand before gc came
    return cat, gone


@pytest.mark.usefixtures("every_index_a_file")  # (tiny shards: see the fixture)
def test_gc_does_not_report_a_retired_shard_already_missing_as_removed(tmp_path):
    cat, gone = _retired_and_gone(tmp_path)
    for dry_run in (True, False):
        report = cat.gc(grace=timedelta(0), keep_versions=1, dry_run=dry_run)
        assert report.removed == [] and report.bytes == 0
        assert report.indexes_removed == 1  # its record index was there: that one goes
        assert report.retired == [] and report.missing == [gone]
    again = cat.gc(grace=timedelta(0), keep_versions=1)  # marked collected: said once
    assert (again.missing, again.removed, again.indexes_removed) == ([], [], 0)


def test_the_cli_says_the_missing_file_was_already_gone(tmp_path):
    _cat, gone = _retired_and_gone(tmp_path)
    args = ["-C", str(tmp_path / "cat"), "gc", "--keep-versions", "1", "--grace", "0s", "--dry-run"]
    dry = CliRunner().invoke(app, args).output
    assert f"already missing (would be forgotten) {gone}" in dry
    assert "would remove 0 files (0 B), would forget 1 retired shard already missing; kept" in dry
    out = CliRunner().invoke(app, ["-C", str(tmp_path / "cat"), "gc", "--keep-versions", "1", "--grace", "0s"])
    assert out.exit_code == 0, out.output
    assert f"already missing (forgotten) {gone}" in out.output
    assert "removed 0 files (0 B), forgot 1 retired shard already missing; kept" in out.output
