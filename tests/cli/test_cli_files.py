"""Verbs that start from files (catalog/cli/files.py): ``inspect``'s text, JSON and
--schema-out, the schema writer's one-line failures, a failed demo step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from catalog.cli.commands import app
from catalog.cli.files import _demo_step, _write_schema
from catalog.demo import write_demo
from catalog.errors import CatalogError, StorageError

runner = CliRunner()


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    write_demo(out, n=20)
    return out


def test_inspect_writes_the_inferred_schema_in_the_form_register_reads(demo_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "schema.json"
    result = runner.invoke(app, ["inspect", str(demo_dir / "demo.tfrecord"), "--limit", "0", "--schema-out", str(out)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"file:        {demo_dir / 'demo.tfrecord'}"
    assert "records:     20" in lines and "message:     tf.train.Example" in lines
    assert not any(line.startswith("example ") for line in lines)
    schema = json.loads(out.read_text())
    assert set(schema) >= {"features"} and schema["features"]


def test_inspecting_several_files_lists_each_then_one_schema(demo_dir: Path) -> None:
    files = [str(demo_dir / "demo.tfrecord"), str(demo_dir / "demo.tfrecord.gz")]
    result = runner.invoke(app, ["inspect", *files, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [f["records"] for f in doc["files"]] == [20, 20]
    assert [f["compression"] for f in doc["files"]] == ["none", "gzip"]
    assert doc["schema"]["features"]


def test_the_schema_writer_says_why_it_wrote_nothing(tmp_path: Path) -> None:
    _write_schema(None, None, [])  # not asked: nothing to do
    with pytest.raises(StorageError) as e:
        _write_schema(tmp_path / "s.json", None, [])
    assert str(e.value) == f"{tmp_path / 's.json'}: not written: the inputs hold no records"
    with pytest.raises(StorageError) as e:
        _write_schema(tmp_path / "no" / "s.json", {"features": {}}, [])
    assert str(e.value) == f"{tmp_path / 'no' / 's.json'}: cannot write the schema: No such file or directory"


def test_a_demo_step_that_fails_stops_the_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    step = _demo_step(get_command(app), ["-C", str(tmp_path), "list"])
    assert next(step) == f"\n$ catalog -C {tmp_path} list"
    with pytest.raises(CatalogError) as e:
        next(step)
    assert str(e.value) == f"demo step `catalog -C {tmp_path} list` failed"
    assert "not a catalog" in capsys.readouterr().err
