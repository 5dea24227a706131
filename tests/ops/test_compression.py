"""Datasets stored compressed (gzip, zlib): written so, read by TensorFlow so, inputs already so
kept byte for byte, and compact --compression to change it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from catalog import Catalog, RecordWriter
from catalog.cli import app
from catalog.errors import AppendError, CatalogError
from catalog.tfrecord.example import encode_example
from catalog.tfrecord.framing import detect_file_compression, read_records

SCHEMA = {"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string", "default": ""}}}
runner = CliRunner()


def run(*args: Any, ok: bool = True) -> Any:
    result = runner.invoke(app, [str(a) for a in args])
    if ok:
        assert result.exit_code == 0, result.output
    return result


def tfrecord(path: Path, ids: range, compression: str | None = None) -> Path:
    with RecordWriter(path, compression) as w:
        for i in ids:
            w.write(encode_example({"id": i, "text": f"t{i}"}))
    return path


def ids(cat: Catalog, name: str = "d") -> list[int]:
    return [r["id"] for r in cat.dataset(name).read()]


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    return Catalog.init(tmp_path / "cat")


@pytest.mark.parametrize("compression", ["gzip", "zlib"])
def test_a_compressed_dataset_stores_every_input_so(cat: Catalog, tmp_path: Path, compression: str) -> None:
    assert run("-C", cat.root, "register", "d", "--schema", _schema(tmp_path), "--compression", compression)
    (tmp_path / "r.jsonl").write_text('{"id": 100}\n')
    (tmp_path / "r.csv").write_text("id\n101\n")
    inputs = [tfrecord(tmp_path / "raw.tfrecord", range(5)), tmp_path / "r.jsonl", tmp_path / "r.csv"]
    out = json.loads(run("-C", cat.root, "append", "d", *inputs, "--json").stdout)
    assert [s["compression"] for s in out["shards"]] == [compression] * 3
    assert [s["index_checksum"] for s in out["shards"]] == [None] * 3  # no offsets into a deflate stream
    for s in out["shards"]:
        assert detect_file_compression(s["path"]) == compression
    assert ids(cat) == [0, 1, 2, 3, 4, 100, 101]
    assert cat.verify().ok
    info = json.loads(run("-C", cat.root, "show", "d", "--json").stdout)
    assert info["compression"] == compression


def test_an_input_in_the_datasets_compression_is_kept_byte_for_byte(cat: Catalog, tmp_path: Path) -> None:
    cat.register("d", SCHEMA, compression="gzip")
    gz = tfrecord(tmp_path / "in.gz", range(50), "gzip")
    zl = tfrecord(tmp_path / "in.zlib", range(50, 60), "zlib")
    commit = cat.dataset("d").append_files([gz, zl])
    kept, reframed = commit.shards
    assert Path(kept.path).read_bytes() == gz.read_bytes()  # never inflated and deflated again
    assert kept.source == str(gz) and kept.records == 50
    assert detect_file_compression(reframed.path) == "gzip" and reframed.records == 10  # zlib: framed anew
    assert ids(cat) == list(range(60))


def test_a_kept_input_is_checked_first(cat: Catalog, tmp_path: Path) -> None:
    cat.register("d", SCHEMA, compression="gzip")
    bad = tmp_path / "bad.gz"
    with RecordWriter(bad, "gzip") as w:
        w.write(encode_example({"id": 1}))
        w.write(encode_example({"id": "x"}))  # a string where the schema wants int64
    with pytest.raises(AppendError, match=r"bad\.gz: record 1: feature 'id'"):
        cat.dataset("d").append_files([bad])
    assert cat.dataset("d").version == 1
    assert not [p for p in (cat.data_root / "d").iterdir()]  # its copy removed again
    truncated = tmp_path / "cut.gz"
    truncated.write_bytes(tfrecord(tmp_path / "whole.gz", range(100), "gzip").read_bytes()[:-30])
    with pytest.raises(CatalogError, match=r"cut\.gz"):
        cat.dataset("d").append_files([truncated])
    assert cat.dataset("d").version == 1


def test_link_keeps_a_compressed_input_as_the_same_file(cat: Catalog, tmp_path: Path) -> None:
    cat.register("d", SCHEMA, compression="zlib")
    zl = tfrecord(tmp_path / "in.zlib", range(7), "zlib")
    shard = cat.dataset("d").append_files([zl], link=True).shards[0]
    assert os.path.samefile(shard.path, zl)
    assert ids(cat) == list(range(7))


def test_tensorflow_reads_a_compressed_dataset(cat: Catalog, tmp_path: Path, tf: Any) -> None:
    cat.register("d", SCHEMA, compression="gzip")
    ds = cat.dataset("d")
    ds.append_rows([{"id": i} for i in range(20)], shard_records=8)
    got = tf.data.TFRecordDataset(ds.files(), compression_type="GZIP")
    spec = {"id": tf.io.FixedLenFeature([], tf.int64)}
    assert [int(tf.io.parse_single_example(r, spec)["id"]) for r in got] == list(range(20))
    assert [int(x) for b in ds.tf_dataset(7) for x in b["id"].numpy()] == list(range(20))


def test_compact_changes_the_compression(cat: Catalog, tmp_path: Path) -> None:
    cat.register("d", SCHEMA, compression="gzip")
    ds = cat.dataset("d")
    ds.append_rows([{"id": i} for i in range(30)], shard_records=10)
    with pytest.raises(CatalogError, match=r"no random access.*catalog compact d --compression none"):
        ds.source()
    text = run("-C", cat.root, "compact", "d", "--compression", "none").stdout
    assert text.startswith("merged 3 shards into 1")
    ds = cat.dataset("d")
    assert ds.compression == "none"
    assert [(s.compression, bool(s.index_checksum)) for s in ds.shards()] == [("none", True)]
    assert [ds.source()[i]["id"] for i in (0, 29)] == [0, 29]
    ds.append_rows([{"id": 30}])
    assert [s.compression for s in cat.dataset("d").shards()] == ["none", "none"]
    # and back, a big shard too: every shard stored otherwise is rewritten, alone if need be
    cat.dataset("d").compact(1, compression="zlib")
    ds = cat.dataset("d")
    assert ds.compression == "zlib" and [s.compression for s in ds.shards()] == ["zlib", "zlib"]
    assert ids(cat) == list(range(31))
    assert cat.verify().ok
    history = [c.message for c in ds.history()]
    assert history[-1] == "compact 2 shards into 2, stored zlib"


def test_migrations_keep_the_compression(cat: Catalog) -> None:
    cat.register("d", SCHEMA, compression="zlib")
    cat.dataset("d").append_rows([{"id": i} for i in range(5)])
    cat.dataset("d").migrate(add=["h:int64=7"])
    ds = cat.dataset("d")
    assert [s.compression for s in ds.shards()] == ["zlib"]
    assert [r["h"] for r in ds.read()] == [7] * 5


def test_a_compressed_shard_reads_as_written(cat: Catalog, tmp_path: Path) -> None:
    cat.register("d", SCHEMA, compression="gzip")
    cat.dataset("d").append_rows([{"id": i, "text": "x" * i} for i in range(40)])
    shard = cat.dataset("d").shards()[0]
    assert [encode_example({"id": i, "text": "x" * i}) for i in range(40)] == list(read_records(shard.path))


def _schema(tmp_path: Path) -> Path:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    return path


def test_migrate_can_change_the_compression(cat: Catalog) -> None:
    cat.register("d", SCHEMA)
    cat.dataset("d").append_rows([{"id": i} for i in range(6)], shard_records=4)
    args = ("migrate", "d", "--add", "h:int64=1", "--compression", "gzip", "--json")
    out = json.loads(run("-C", cat.root, *args).stdout)
    assert out["migrations"][0]["to_schema_version"] == 2
    ds = cat.dataset("d")
    assert ds.compression == "gzip" and [s.compression for s in ds.shards()] == ["gzip", "gzip"]
    assert [(r["id"], r["h"]) for r in ds.read()] == [(i, 1) for i in range(6)]
    result = run("-C", cat.root, "migrate", "d", "--compression", "none", ok=False)
    assert result.exit_code == 1
    assert result.stderr == (
        "error: d: no migration pending to rewrite the shards with: `catalog compact d --compression none` "
        "changes the compression alone\n"
    )
    assert cat.dataset("d").compression == "gzip"


def test_list_json_gives_each_datasets_compression(cat: Catalog) -> None:
    cat.register("plain", SCHEMA)
    cat.register("packed", SCHEMA, compression="zlib")
    listed = json.loads(run("-C", cat.root, "list", "--json").stdout)
    assert {d["name"]: d["compression"] for d in listed} == {"plain": "none", "packed": "zlib"}
