"""Counts in words: "1 shard", "2 shards", in the library's helper and in what the CLI shows."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog.cli import app
from catalog.words import counted

runner = CliRunner()


def test_counted() -> None:
    assert [counted(n, "shard") for n in (0, 1, 2)] == ["0 shards", "1 shard", "2 shards"]
    assert counted(1, "retired shard") == "1 retired shard"
    assert [counted(n, "index", "indexes") for n in (1, 3)] == ["1 index", "3 indexes"]
    assert [counted(n, "record", grouped=True) for n in (1, 1234)] == ["1 record", "1,234 records"]


def run(*args: str) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, (args, result.output, result.exception)
    return result


@pytest.mark.usefixtures("every_index_a_file")  # (tiny shards: see the fixture)
@pytest.mark.parametrize("n", [1, 2])
def test_the_main_outputs_count_in_words(tmp_path: Path, n: int) -> None:
    """Each verb's counts, with one of a thing and with two: "1 record in 1 shard", never "1 records"."""
    s = "" if n == 1 else "s"
    root = tmp_path / "cat"
    c = ["-C", str(root)]
    run("init", str(root))
    (tmp_path / "schema.json").write_text(json.dumps({"features": {"x": {"dtype": "int64"}}}))
    run(*c, "register", "d", "--schema", str(tmp_path / "schema.json"))
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"x": i}) + "\n" for i in range(n)))
    out = run(*c, "append", "d", str(src), "--shard-records", "1").stdout
    assert out == f"committed: d version 2: {n} record{s} in {n} shard{s}\n"
    show = run(*c, "show", "d").stdout.splitlines()
    assert re.fullmatch(rf"size: +\d+ B in {n} shard{s}", show[4]), show
    assert re.fullmatch(rf"  train: {n} record{s}, \d+ B in {n} shard{s}", show[6]), show
    assert sum(bool(re.fullmatch(r"  \S+/d/\S+  1 record  \d+ B  crc32c:\w+", line)) for line in show) == n, show
    assert re.fullmatch(rf"ok: {n} shard{s}, \d+ B checked: 0 problems\n", run(*c, "verify").stderr)
    tf = tmp_path / "in.tfrecord"
    out = run(*c, "export", "d", str(tf)).stdout
    assert out.startswith(f"exported d version 2: {n} record{s} to {tf} ")
    inspected = run("inspect", str(tf), str(tf)).stdout.splitlines()  # (of several files: a line each)
    assert re.fullmatch(rf"{tf}: {n} record{s}, \d+ bytes, none, crc \w+", inspected[0]), inspected
    out = run(*c, "migrate", "d", "--add", "y:int64=0", "--migrations", str(tmp_path / "m")).stdout
    assert re.match(rf"applied 0001_quick: schema v1 -> v2 -> version 3, {n} record{s} in {n} shard{s} \(", out)
    summary = run(*c, "verify").stderr
    assert re.fullmatch(rf"ok: {n} shard{s} and {n} retired shard{s}, \d+ B checked: 0 problems\n", summary)
    stats = run(*c, "stats", "d").stdout.splitlines()
    assert stats[0] == f"dataset d version 3 (splits: train): {n} record{s} in {n} shard{s}"
    out = run(*c, "compact", "d").stdout
    if n == 1:
        assert out == "d: nothing to compact (1 shard)\n"
    else:
        assert re.fullmatch(r"merged 2 shards into 1 \(\d+ B\): 2 -> 1 shard as version 4\n", out)
    out = run(*c, "gc", "--keep-versions", "1", "--grace", "0").stdout.splitlines()
    retired = n if n == 1 else 2 * n  # the migration's, and (two shards) the compaction's
    r = "" if retired == 1 else "s"
    assert re.fullmatch(
        rf"removed {retired} file{r} \({retired} retired shard{r}\) \(\d+ B\); kept 0 younger than the grace "
        r"period, 0 of live writers and 0 retired shards for time travel",
        out[-1],
    ), out
    assert f"removed {retired} record index file{r} (" in out[-2]
