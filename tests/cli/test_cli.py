"""The CLI through typer's CliRunner: exit codes, JSON shapes and exact error lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from catalog.cli import app
from catalog.demo import write_demo

runner = CliRunner()


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    write_demo(out, n=50)
    return out


def test_inspect_text(demo_dir: Path) -> None:
    result = runner.invoke(app, ["inspect", str(demo_dir / "demo.tfrecord"), "--limit", "1"])
    assert result.exit_code == 0, result.output
    assert "records:     50" in result.stdout
    assert "compression: none" in result.stdout
    assert "example 0: " in result.stdout and "example 1: " not in result.stdout
    assert result.stderr == ""


@pytest.mark.parametrize(("name", "compression"), [("demo.tfrecord", "none"), ("demo.tfrecord.gz", "gzip")])
def test_inspect_json(demo_dir: Path, name: str, compression: str) -> None:
    result = runner.invoke(app, ["inspect", str(demo_dir / name), "--json", "--limit", "2"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["records"] == 50
    assert doc["compression"] == compression
    assert doc["bytes"] == os.path.getsize(demo_dir / name)
    assert len(doc["examples"]) == 2
    assert doc["examples"][1]["id"] == [1]
    assert doc["examples"][0]["text"] == ["alpha record 0"]
    features = doc["schema"]["features"]
    assert features["id"] == {"dtype": "int64"}
    assert features["vec"] == {"dtype": "float32", "shape": [8]}
    assert features["tags"] == {"dtype": "string", "shape": [None]}


def test_inspect_float32_shortest_form(tmp_path: Path) -> None:
    from catalog import RecordWriter, encode_example

    path = tmp_path / "f.tfrecord"
    with RecordWriter(path) as w:
        w.write(encode_example({"x": [0.1, float("nan"), float("inf"), -float("inf")]}))
    doc = json.loads(runner.invoke(app, ["inspect", str(path), "--json"]).stdout)
    assert doc["examples"][0]["x"] == [0.1, "NaN", "Infinity", "-Infinity"]


def test_inspect_corrupt_file_one_line(demo_dir: Path, tmp_path: Path) -> None:
    data = bytearray((demo_dir / "demo.tfrecord").read_bytes())
    first_len = int.from_bytes(data[:8], "little")
    second = 12 + first_len + 4  # offset of the second record
    data[second + 12 + 3] ^= 0x10  # flip a bit in the second record's payload
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(bytes(data))
    result = runner.invoke(app, ["inspect", str(bad)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == f"error: {bad}: byte {second}: corrupt record: data CRC mismatch\n"


def test_inspect_truncated_gzip_names_decompressed_offsets(demo_dir: Path, tmp_path: Path) -> None:
    data = (demo_dir / "demo.tfrecord.gz").read_bytes()
    bad = tmp_path / "cut.tfrecord.gz"
    bad.write_bytes(data[: len(data) // 2])
    result = runner.invoke(app, ["inspect", str(bad)])
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {bad}: byte ")
    assert "gzip" in lines[0] or "decompressed" in lines[0]
    assert "Traceback" not in result.output


def test_inspect_not_tfrecord_and_missing(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"this is plainly not a tfrecord file at all")
    result = runner.invoke(app, ["inspect", str(junk)])
    assert result.exit_code == 1
    assert (
        result.stderr
        == f"error: {junk}: byte 0: not a TFRecord file (no valid record header, gzip or zlib signature)\n"
    )
    missing = tmp_path / "nope.tfrecord"
    result = runner.invoke(app, ["inspect", str(missing)])
    assert result.exit_code == 1
    assert result.stderr == f"error: {missing}: cannot open: No such file or directory\n"


def test_huge_length_header_is_an_error_not_a_crash(tmp_path: Path) -> None:
    from catalog.tfrecord.framing import frame_header

    path = tmp_path / "liar.tfrecord"
    path.write_bytes(frame_header(2**62) + b"abc")  # 15 bytes: TF 2.21 segfaults on this
    result = runner.invoke(app, ["inspect", str(path)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"error: {path}: byte 0: record length {2**62} runs past the end of the file")


def test_traceback_flag_reraises(tmp_path: Path) -> None:
    from catalog.errors import CatalogError

    result = runner.invoke(app, ["--traceback", "inspect", str(tmp_path / "nope")])
    assert result.exit_code == 1
    assert isinstance(result.exception, CatalogError)


def test_usage_errors_exit_2(demo_dir: Path) -> None:
    assert runner.invoke(app, ["inspect"]).exit_code == 2
    assert runner.invoke(app, ["inspect", str(demo_dir / "demo.tfrecord"), "--limit", "-1"]).exit_code == 2
    assert runner.invoke(app, ["no-such-verb"]).exit_code == 2


def test_non_example_records_are_reported_not_failed(tmp_path: Path) -> None:
    from catalog import RecordWriter

    path = tmp_path / "raw.tfrecord"
    with RecordWriter(path) as w:
        w.write(b"\xff\xff\xff plain bytes")
    result = runner.invoke(app, ["inspect", str(path), "--json"])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["records"] == 1 and doc["schema"] is None
    assert doc["note"].startswith("records are not tf.train.Example")


def test_demo_command(tmp_path: Path) -> None:
    out = tmp_path / "d"
    for _ in range(2):  # a second run replaces the first demo
        result = runner.invoke(app, ["demo", str(out), "--records", "10"])
        assert result.exit_code == 0, result.output
    steps = ("init", "register demo", "append demo", "list", "show demo", "cat demo", "verify", "history demo")
    steps += ("migrations list demo", "migrate demo", "compact demo", "export demo")
    for step in steps:
        assert f" {step}" in result.stdout, step
    assert "version 3: 10 records" in result.stdout
    root = str(out / "catalog")
    doc = json.loads(runner.invoke(app, ["-C", root, "show", "demo", "--json"]).stdout)
    # three file migrations and one quick one, then a compaction
    assert (doc["version"], doc["schema_version"], doc["records"], doc["shard_count"]) == (8, 5, 20, 1)
    assert {"caption", "source", "brightness", "height", "width"} <= set(doc["schema"]["features"])
    assert not {"text", "tags"} & set(doc["schema"]["features"])
    old = [
        json.loads(line)
        for line in runner.invoke(app, ["-C", root, "cat", "demo", "--version", "3"]).stdout.splitlines()
    ]
    new = [json.loads(line) for line in runner.invoke(app, ["-C", root, "cat", "demo"]).stdout.splitlines()]
    assert [r["id"] for r in old] == [r["id"] for r in new] and len(new) == 20
    assert [r["text"] for r in old] == [r["caption"] for r in new] and all(r["source"] == "demo" for r in new)
    applied = json.loads(
        runner.invoke(
            app, ["-C", root, "migrations", "list", "demo", "--migrations", str(out / "migrations"), "--json"]
        ).stdout
    )
    assert [(m["id"], m["status"]) for m in applied] == [
        ("0001_add_source", "applied"), ("0002_caption", "applied"), ("0003_brightness", "applied"),
        ("0004_quick", "applied"),
    ]  # fmt: skip
    exported = json.loads(runner.invoke(app, ["inspect", str(out / "demo-export.tfrecord.gz"), "--json"]).stdout)
    assert (exported["records"], exported["compression"]) == (20, "gzip")
    doc = json.loads(runner.invoke(app, ["inspect", str(out / "inputs" / "demo.tfrecord.gz"), "--json"]).stdout)
    assert doc["records"] == 10
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "precious.txt").write_text("keep me")
    result = runner.invoke(app, ["demo", str(mine)])
    assert result.exit_code == 1
    assert result.stderr == f"error: {mine}: exists and was not made by `catalog demo`; pick another directory\n"
    assert (mine / "precious.txt").exists()


def test_python_dash_m_and_console_script_agree(demo_dir: Path) -> None:
    target = str(demo_dir / "demo.tfrecord")
    via_module = subprocess.run(
        [sys.executable, "-m", "catalog", "inspect", target, "--json"], capture_output=True, text=True, check=True
    )
    script = Path(sys.executable).with_name("catalog")
    assert script.exists(), "console script 'catalog' is not installed next to the interpreter"
    via_script = subprocess.run([str(script), "inspect", target, "--json"], capture_output=True, text=True, check=True)
    assert json.loads(via_module.stdout) == json.loads(via_script.stdout)
    assert json.loads(via_module.stdout)["records"] == 50


def test_inspect_streams_a_large_file_in_bounded_memory(tmp_path: Path) -> None:
    import tracemalloc

    from catalog import RecordWriter, encode_example
    from catalog.ops.inspection import inspect_file

    path = tmp_path / "large.tfrecord"
    n = 60_000
    with RecordWriter(path) as w:
        for i in range(n):  # ~700 bytes a record, ~42 MB in all; the last record alone has "late"
            row = {"id": i, "vec": [float(i)] * 16, "text": f"row {i} " + "x" * 600}
            w.write(encode_example(row | {"late": 1} if i == n - 1 else row))
    size = path.stat().st_size
    assert size > 40_000_000
    tracemalloc.start()
    try:
        report = inspect_file(path, limit=2)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12 << 20, f"peak {peak / 2**20:.1f} MiB for a {size / 2**20:.0f} MiB file"
    assert report.records == n and report.data_bytes == size
    assert [ex["id"] for ex in report.examples] == [[0], [1]]
    assert report.schema is not None
    assert report.schema["features"]["vec"] == {"dtype": "float32", "shape": [16]}
    assert report.schema["features"]["late"]["dtype"] == "int64"  # the file was read to its end


def _closed_std_streams() -> None:
    for fd in (0, 1, 2):
        os.close(fd)


def test_commands_run_with_their_standard_streams_closed(tmp_path: Path) -> None:
    """``catalog append ... <&- >&- 2>&-`` (a cron job, a daemon): Python starts with
    sys.stdin/stdout/stderr None, and the progress bar's isatty() on None was an
    AttributeError (found by an adversarial pass). The commands run; nothing is shown."""
    root = tmp_path / "cat"
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"x": i}) + "\n" for i in range(50)))
    (tmp_path / "schema.json").write_text(json.dumps({"features": {"x": {"dtype": "int64"}}}))
    env = dict(os.environ, CATALOG_ROOT=str(root))
    base = [sys.executable, "-m", "catalog"]
    for args in (
        ["init", str(root)],
        ["register", "d", "--schema", str(tmp_path / "schema.json")],
        ["append", "d", str(rows)],
        ["stats", "d"],
        ["cat", "d", "--limit", "2"],
        ["show", "d"],
    ):
        done = subprocess.run([*base, *args], env=env, preexec_fn=_closed_std_streams, timeout=120)
        assert done.returncode == 0, args
    from catalog import Catalog

    assert Catalog.open(root).dataset("d").info().records == 50
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"x": "text"}\n')
    done = subprocess.run([*base, "append", "d", str(bad)], env=env, preexec_fn=_closed_std_streams, timeout=120)
    assert done.returncode == 1
    assert Catalog.open(root).dataset("d").info().records == 50
