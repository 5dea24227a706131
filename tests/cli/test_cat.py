"""`catalog cat` for people and programs: columns, offset, limit, samples, folded values."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from catalog import Catalog
from catalog.cli import app
from catalog.cli.rows import _shown

runner = CliRunner()
SCHEMA = {
    "features": {
        "id": {"dtype": "int64"},
        "label": {"dtype": "int64", "names": ["cat", "dog"]},
        "blob": {"dtype": "bytes"},
        "px": {"dtype": "uint8", "shape": [8, 8, 3], "encoding": "tensor"},
    }
}


def run(*args: Any) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def lines(result: Any) -> list[dict[str, Any]]:
    assert result.exit_code == 0, result.output
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.fixture(params=["none", "gzip"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("d", SCHEMA, compression=request.param)
    rows = [
        {"id": i, "label": i % 2, "blob": bytes([i % 256]) * (i * 37), "px": np.full((8, 8, 3), i % 256, np.uint8)}
        for i in range(120)
    ]
    ds.append_rows(rows, shard_records=25)  # five shards: positions cross shard boundaries
    return cat.root


def test_columns_offset_limit_are_slices_of_the_whole(root: Path) -> None:
    everything = lines(run("-C", root, "cat", "d"))
    assert [r["id"] for r in everything] == list(range(120))
    part = lines(run("-C", root, "cat", "d", "--offset", 23, "--limit", 30, "--columns", "label,id"))
    assert part == [{"label": r["label"], "id": r["id"]} for r in everything[23:53]]
    assert list(part[0]) == ["label", "id"]  # the order asked for
    assert lines(run("-C", root, "cat", "d", "--offset", 500)) == []
    assert base64.b64decode(everything[5]["blob"]) == bytes([5]) * 185  # piped: every byte


def test_sample_is_seeded_and_without_replacement(root: Path) -> None:
    one = lines(run("-C", root, "cat", "d", "--sample", 10, "--seed", 3, "--columns", "id"))
    again = lines(run("-C", root, "cat", "d", "--sample", 10, "--seed", 3, "--columns", "id"))
    other = lines(run("-C", root, "cat", "d", "--sample", 10, "--seed", 4, "--columns", "id"))
    ids = [r["id"] for r in one]
    assert one == again and len(set(ids)) == 10 and ids == sorted(ids)
    assert one != other
    late = [r["id"] for r in lines(run("-C", root, "cat", "d", "--sample", 5, "--offset", 100, "--columns", "id"))]
    assert len(late) == 5 and min(late) >= 100
    assert len(lines(run("-C", root, "cat", "d", "--sample", 999))) == 120  # at most every record


def test_names_and_bad_columns(root: Path) -> None:
    named = lines(run("-C", root, "cat", "d", "--names", "--limit", 2, "--columns", "label"))
    assert named == [{"label": "cat"}, {"label": "dog"}]
    bad = run("-C", root, "cat", "d", "--columns", "id,nope")
    assert bad.exit_code == 1
    assert bad.stderr == "error: dataset 'd' has no feature 'nope' (features: id, label, blob, px)\n"


def test_long_values_fold_on_a_terminal() -> None:
    from catalog.schema import Schema

    schema = Schema.from_json(SCHEMA)
    png = b"\x89PNG" + bytes(1713)
    row = {"id": 1, "label": 1, "blob": png, "px": np.arange(192, dtype=np.uint8).reshape(8, 8, 3)}
    shown = _shown(schema, row, {"label": ("cat", "dog")}, 80)
    folded_px = "<uint8[8,8,3]: 0, 1, 2, 3, 4, 5, 6, 7, …>"
    assert shown == {"id": 1, "label": "dog", "blob": "<bytes 1,717: 89504e47…>", "px": folded_px}
    short = {"id": 1, "label": 0, "blob": b"ab", "px": np.zeros((8, 8, 3), np.uint8)}
    assert _shown(schema, short, {}, 10_000)["blob"] == "YWI="  # fits a line: as it is
    assert _shown(schema, row, {}, None)["blob"] == base64.b64encode(png).decode()  # piped or --json: whole


def test_offset_into_compressed_shards_decodes_only_what_it_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cat --offset (and the viewer's rows page) on shards that cannot be read by position
    decoded every record it passed over (29 s to show 2 rows of 2M), and an offset past the
    end read the whole dataset: now shards before it are skipped by their counts and the
    records before it in its shard framed only, as a split's slice is read."""
    from catalog.readers.decoding import Decoder

    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("g", {"features": {"i": {"dtype": "int64"}}}, compression="gzip")
    ds.append_rows([{"i": i} for i in range(300)], shard_records=100)
    decoded: list[int] = []
    row = Decoder.row

    def counting(self: Decoder, *args: Any, **kwargs: Any) -> Any:
        decoded.append(1)
        return row(self, *args, **kwargs)

    monkeypatch.setattr(Decoder, "row", counting)
    result = runner.invoke(app, ["-C", str(tmp_path / "cat"), "cat", "g", "--offset", "250", "--limit", "3"])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["i"] for line in result.stdout.splitlines()] == [250, 251, 252]
    assert sum(decoded) == 3, sum(decoded)
    decoded.clear()
    past = runner.invoke(app, ["-C", str(tmp_path / "cat"), "cat", "g", "--offset", "10000"])
    assert (past.exit_code, past.stdout, sum(decoded)) == (0, "", 0)
