"""`catalog adopt`: existing TFRecord files registered where they are (manifest format 6)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from catalog import Catalog, RecordWriter
from catalog.cli import app
from catalog.errors import AppendError, CatalogError, CorruptRecordError, CorruptShardError
from catalog.tfrecord.example import encode_example
from catalog.tfrecord.framing import read_records

SCHEMA = {"features": {"id": {"dtype": "int64"}, "x": {"dtype": "float32", "shape": [2]}}}
runner = CliRunner()


def run(*args: Any) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def write_part(path: Path, ids: range, compression: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with RecordWriter(path, compression) as w:
        for i in ids:
            w.write(encode_example({"id": [i], "x": [i / 2, -i / 4]}))
    return path


def fingerprint(folder: Path) -> dict[str, tuple[str, int, int]]:
    """Every file under ``folder``: sha256, inode and mtime (ns), so a move or a rewrite shows."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p)] = (hashlib.sha256(p.read_bytes()).hexdigest(), st.st_ino, st.st_mtime_ns)
    return out


def files_in(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.fixture
def ext(tmp_path: Path) -> Path:
    """A folder of shards kept by hand: two raw, one gzip (ids 0..299 in order)."""
    folder = tmp_path / "ext"
    write_part(folder / "part-0.tfrecord", range(0, 100))
    write_part(folder / "part-1.tfrecord", range(100, 200))
    write_part(folder / "part-2.tfrecord.gz", range(200, 300), "gzip")
    return folder


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    cat = Catalog.init(tmp_path / "cat")
    cat.register("d", SCHEMA)
    return cat


@pytest.mark.usefixtures("every_index_a_file")  # (tiny shards: see the fixture)
def test_adopted_in_place_read_back_and_originals_untouched(cat: Catalog, ext: Path) -> None:
    before = fingerprint(ext)
    commit = cat.dataset("d").adopt([ext])
    assert fingerprint(ext) == before  # not moved, not rewritten, same inode
    assert [s.location for s in commit.shards] == [str(p) for p in sorted(ext.iterdir())]
    ds = cat.dataset("d")
    assert [r["id"] for r in ds.read()] == list(range(300))
    assert ds.files() == [str(p) for p in sorted(ext.iterdir())]
    # nothing in the data area but the two raw shards' record indexes (8 bytes a record)
    data = cat.data_root
    assert [f for f in files_in(data) if not f.startswith(".catalog-owner")] == sorted(
        f".index/d/{Path(s.relpath).name}.idx" for s in commit.shards[:2]
    )
    assert all((data / ".index/d" / f"{Path(s.relpath).name}.idx").stat().st_size == 800 for s in commit.shards[:2])
    src = ds.source(split="train[:200]")  # random access through the indexes
    assert src[150]["id"] == 150 and list(src[[3, 199, 0]]["id"]) == [3, 199, 0]
    report = cat.verify()
    assert report.ok and report.checked == 3 and not report.not_indexed
    assert fingerprint(ext) == before


def test_show_json_marks_adopted_shards_and_their_source(cat: Catalog, ext: Path) -> None:
    cat.dataset("d").adopt([ext / "part-0.tfrecord"])
    cat.dataset("d").append_files([ext / "part-1.tfrecord"])
    shards = json.loads(run("-C", cat.root, "show", "d", "--json").stdout)["shards"]
    assert [(s["external"], s["source"]) for s in shards] == [
        (True, str(ext / "part-0.tfrecord")),
        (False, str(ext / "part-1.tfrecord")),
    ]
    assert shards[0]["path"] == str(ext / "part-0.tfrecord")
    assert shards[1]["path"].startswith(str(cat.data_root))
    text = run("-C", cat.root, "show", "d").stdout
    lines = [line for line in text.splitlines() if "records  " in line]
    assert lines[0].startswith(f"  {ext / 'part-0.tfrecord'}  100 records") and lines[0].endswith("(adopted in place)")
    assert not lines[1].endswith("(adopted in place)")


@pytest.mark.usefixtures("every_index_a_file")  # (tiny shards: see the fixture)
def test_gc_never_deletes_an_adopted_file_it_only_forgets_it(cat: Catalog, ext: Path) -> None:
    before = fingerprint(ext)
    ds = cat.dataset("d")
    ds.adopt([ext])
    ds.compact(compression="none")  # every adopted shard retires: its records now live in the data area
    report = cat.gc(keep_versions=1)
    assert sorted(report.forgotten) == sorted(str(p) for p in ext.iterdir())
    assert report.removed == [] and report.indexes_removed == 2
    assert fingerprint(ext) == before
    with pytest.raises(CatalogError, match="collected"):
        list(cat.dataset("d").read(version=2))
    assert [r["id"] for r in cat.dataset("d").read()] == list(range(300))
    again = cat.gc(keep_versions=1)
    assert again.forgotten == [] and fingerprint(ext) == before


def test_gc_text_says_forgotten_files_stay(cat: Catalog, ext: Path) -> None:
    ds = cat.dataset("d")
    ds.adopt([ext / "part-0.tfrecord", ext / "part-1.tfrecord"])
    ds.compact()  # two small shards: merged into one in the data area
    out = run("-C", cat.root, "gc", "--keep-versions", "1")
    assert out.exit_code == 0
    for name in ("part-0.tfrecord", "part-1.tfrecord"):
        assert f"forgot adopted file {ext / name} (no kept version needs it; left in place)" in out.stdout
        assert (ext / name).exists()


def test_a_file_changed_after_adoption_is_caught_by_readers_and_verify(cat: Catalog, ext: Path) -> None:
    ds = cat.dataset("d")
    ds.adopt([ext / "part-0.tfrecord", ext / "part-1.tfrecord"])
    with open(ext / "part-0.tfrecord", "ab") as f:  # grown
        f.write(b"\0")
    data = bytearray((ext / "part-1.tfrecord").read_bytes())
    data[40] ^= 0xFF  # same size, other bytes
    (ext / "part-1.tfrecord").write_bytes(bytes(data))
    with pytest.raises(CorruptShardError, match=r"part-0\.tfrecord"):
        list(ds.read())
    problems = {Path(p.path).name: p.problem for p in cat.verify().problems}
    assert problems == {"part-0.tfrecord": "size", "part-1.tfrecord": "unreadable"}


def test_a_moved_adopted_file_is_one_line_missing(cat: Catalog, ext: Path) -> None:
    ds = cat.dataset("d")
    ds.adopt([ext / "part-0.tfrecord"])
    (ext / "part-0.tfrecord").rename(ext / "moved.tfrecord")
    with pytest.raises(CatalogError, match=r"part-0.tfrecord: shard file is missing"):
        list(ds.read())
    assert [p.problem for p in cat.verify().problems] == ["missing"]
    result = run("-C", cat.root, "cat", "d")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("truncate", r"part-1.tfrecord: byte \d+: "),
        ("crc", r"part-1.tfrecord: byte \d+: "),
        ("schema", r"part-1.tfrecord: record 7: feature 'x'"),
    ],
)
def test_bad_input_registers_nothing(cat: Catalog, ext: Path, damage: str, message: str) -> None:
    bad = ext / "part-1.tfrecord"
    if damage == "truncate":
        bad.write_bytes(bad.read_bytes()[:-5])
    elif damage == "crc":
        data = bytearray(bad.read_bytes())
        data[300] ^= 1
        bad.write_bytes(bytes(data))
    else:
        with RecordWriter(bad) as w:
            for i in range(10):
                w.write(encode_example({"id": [i], "x": [1.0] * (2 if i != 7 else 3)}))
    ds = cat.dataset("d")
    with pytest.raises((AppendError, CorruptRecordError), match=message):
        ds.adopt([ext])
    assert cat.dataset("d").version == 1
    cat.gc(grace=__import__("datetime").timedelta(0))
    assert [f for f in files_in(cat.data_root) if f != ".catalog-owner"] == []
    result = run("-C", cat.root, "adopt", "d", ext)
    assert result.exit_code == 1 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1


def test_a_new_name_gets_the_inferred_schema_and_the_files_compression(tmp_path: Path, ext: Path) -> None:
    cat = Catalog.init(tmp_path / "cat")
    gz = sorted(ext.glob("*.gz"))
    commit = cat.adopt("new", gz, description="from TFX")
    ds = cat.dataset("new")
    assert ds.compression == "gzip" and commit.records == 100
    assert ds.schema.to_json()["features"]["x"]["shape"] == [2]
    assert [r["id"] for r in ds.read()] == list(range(200, 300))
    assert ds.shards()[0].index_checksum is None  # compressed: no random access, no index


def test_a_failed_adoption_into_a_new_name_registers_no_dataset(tmp_path: Path, ext: Path) -> None:
    cat = Catalog.init(tmp_path / "cat")
    (ext / "junk.tfrecord").write_bytes(b"not a tfrecord at all")
    result = run("-C", cat.root, "adopt", "new", ext)
    assert result.exit_code == 1 and "junk.tfrecord" in result.stderr
    assert run("-C", cat.root, "list", "--json").stdout.strip() == "[]"


def test_copy_and_link_bring_the_bytes_into_the_data_area(cat: Catalog, ext: Path) -> None:
    before = fingerprint(ext)
    raw = ext / "part-0.tfrecord"
    linked = cat.dataset("d").adopt([raw], link=True)
    assert linked.shards[0].location is None and linked.linked == (str(raw),)
    assert os.stat(linked.shards[0].path).st_ino == raw.stat().st_ino
    copied = cat.dataset("d").adopt([ext / "part-1.tfrecord"], copy=True, split="test")
    assert copied.shards[0].location is None and copied.shards[0].split == "test"
    assert os.stat(copied.shards[0].path).st_ino != (ext / "part-1.tfrecord").stat().st_ino
    assert fingerprint(ext) == before
    assert run("-C", cat.root, "adopt", "d", raw, "--copy", "--link").exit_code == 2


def test_an_adopted_file_adopted_again_is_refused_unless_insisted(cat: Catalog, ext: Path) -> None:
    ds = cat.dataset("d")
    ds.adopt([ext / "part-0.tfrecord"])
    with pytest.raises(AppendError, match="already in 'd'"):
        ds.adopt([ext / "part-0.tfrecord"])
    with pytest.raises(AppendError, match="already in 'd'"):
        ds.append_files([ext / "part-0.tfrecord"])  # the same bytes, copied: refused too
    ds.adopt([ext / "part-0.tfrecord"], allow_duplicate=True)
    assert cat.dataset("d").info().records == 200


def test_splits_token_and_json(cat: Catalog, ext: Path) -> None:
    out = run("-C", cat.root, "adopt", "d", ext / "part-0.tfrecord", "--split", "test", "--token", "t1", "--json")
    assert out.exit_code == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["records"] == 100 and [s["split"] for s in doc["shards"]] == ["test"]
    assert doc["shards"][0]["external"] is True
    again = run("-C", cat.root, "adopt", "d", ext / "part-0.tfrecord", "--split", "test", "--token", "t1")
    assert again.exit_code == 0 and "already committed" in again.stdout
    assert cat.dataset("d").version == 2
    assert [r["id"] for r in cat.dataset("d").read(split="test[-3:]")] == [97, 98, 99]


def test_restore_brings_adopted_shards_back_as_they_were(cat: Catalog, ext: Path) -> None:
    ds = cat.dataset("d")
    ds.adopt([ext / "part-0.tfrecord"])
    ds.compact()
    cat.dataset("d").restore(2)
    shards = cat.dataset("d").shards()
    assert [s.location for s in shards] == [str(ext / "part-0.tfrecord")]
    assert shards[0].index_checksum is not None
    assert list(cat.dataset("d").source()[[0, 99]]["id"]) == [0, 99]
    assert cat.verify().ok


def test_a_symlinked_input_is_adopted_at_its_real_path(cat: Catalog, ext: Path, tmp_path: Path) -> None:
    (tmp_path / "alias").symlink_to(ext)
    commit = cat.dataset("d").adopt([tmp_path / "alias" / "part-0.tfrecord"])
    assert commit.shards[0].location == str(ext / "part-0.tfrecord")
    assert commit.shards[0].source == str(tmp_path / "alias" / "part-0.tfrecord")
    assert len(list(cat.dataset("d").read())) == 100


def test_hostile_inputs_are_one_line(cat: Catalog, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "empty").mkdir()
    for arg, what in [
        (tmp_path / "fifo", "not a regular file"),
        (tmp_path / "missing.tfrecord", "no such file"),
        (tmp_path / "empty", "empty folder"),
        ("-", "standard input cannot be adopted"),
        (tmp_path / "nothing*.tfrecord", "no file matches"),
    ]:
        result = run("-C", cat.root, "adopt", "d", arg)
        assert result.exit_code == 1 and what in result.stderr and result.stderr.count("\n") == 1, (arg, result.stderr)
    assert cat.dataset("d").version == 1


def test_tensorflow_reads_adopted_files_as_files_lists_them(cat: Catalog, ext: Path) -> None:
    tf = pytest.importorskip("tensorflow") if os.environ.get("CI") != "true" else __import__("tensorflow")
    ds = cat.dataset("d")
    ds.adopt([ext / "part-0.tfrecord", ext / "part-1.tfrecord"])
    got = [r.numpy() for r in tf.data.TFRecordDataset(ds.files())]
    assert got == list(read_records(ext / "part-0.tfrecord")) + list(read_records(ext / "part-1.tfrecord"))
    assert [int(b["id"][0]) for b in ds.batches(batch_size=150)][:1] == [0]


def test_format_5_manifest_upgrades(tmp_path: Path, ext: Path) -> None:
    from probes import downgrade_to_format_5

    from catalog import manifest as mf

    root = tmp_path / "old"
    with Catalog.init(root) as cat:
        cat.register("d", SCHEMA).append_files([ext / "part-0.tfrecord"])
    downgrade_to_format_5(root / "catalog.db")
    result = run("-C", root, "show", "d")
    assert result.stderr == f"error: the manifest has format 5, older than {mf.FORMAT_VERSION}: run `catalog upgrade`\n"
    assert run("-C", root, "upgrade").stdout == f"manifest format 5 -> {mf.FORMAT_VERSION}\n"
    with Catalog.open(root) as cat:
        assert [s.location for s in cat.dataset("d").shards()] == [None]
        cat.dataset("d").adopt([ext / "part-1.tfrecord"])
        assert [r["id"] for r in cat.dataset("d").read()] == list(range(200))


KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from catalog import Catalog, faults
    from catalog.storage import index

    index.FILE_MIN_BYTES = 0  # every index a file, however small its shard (conftest's every_index_a_file)

    def hook(name, info):
        if name == "commit.before":
            os.kill(os.getpid(), signal.SIGKILL)

    faults.install(hook)
    Catalog.open(sys.argv[1]).dataset("d").adopt([sys.argv[2]])
    """
)


def test_killed_before_its_commit_an_adoption_leaves_nothing_registered(cat: Catalog, ext: Path) -> None:
    before = fingerprint(ext)
    proc = subprocess.run([sys.executable, "-c", KILLED, str(cat.root), str(ext)], capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert cat.dataset("d").version == 1
    assert len(files_in(cat.data_root / ".index")) == 2  # the dead writer's indexes, not registered
    from datetime import timedelta

    cat.gc(grace=timedelta(0))
    assert not (cat.data_root / ".index").exists() or files_in(cat.data_root / ".index") == []
    assert fingerprint(ext) == before
    cat.dataset("d").adopt([ext])  # and adopting again works
    assert np.array_equal([r["id"] for r in cat.dataset("d").read()], np.arange(300))


def test_a_file_in_the_data_area_is_not_adopted_in_place(cat: Catalog, ext: Path) -> None:
    cat.dataset("d").append_files([ext / "part-0.tfrecord"])
    own = Path(cat.dataset("d").files()[0])  # the catalog's shard: gc deletes it once retired
    cat.register("e", SCHEMA)
    with pytest.raises(AppendError, match="inside the catalog's data area"):
        cat.dataset("e").adopt([own])
    assert cat.dataset("e").version == 1
    assert cat.dataset("e").adopt([own], copy=True).records == 100  # a copy is the catalog's own


def test_workers_adopt_the_same_shards_as_one_process(tmp_path: Path, ext: Path) -> None:
    from catalog.executors import open_executor

    one = Catalog.init(tmp_path / "one")
    one.register("d", SCHEMA).adopt([ext], split="test")
    two = Catalog.init(tmp_path / "two")
    two.register("d", SCHEMA)
    with open_executor("local", None, 2, 3) as ex:
        assert ex is not None
        two.dataset("d").adopt([ext], split="test", executor=ex)

    def facts(cat: Catalog) -> list[tuple[Any, ...]]:
        shards = cat.dataset("d").shards()
        return [(s.location, s.records, s.bytes, s.checksum, s.index_checksum, s.split) for s in shards]

    assert facts(two) == facts(one) and len(facts(one)) == 3
    assert two.verify().ok and [r["id"] for r in two.dataset("d").read()] == list(range(300))


def test_a_bad_file_among_workers_registers_nothing_and_leaves_no_index(tmp_path: Path, ext: Path) -> None:
    from datetime import timedelta

    from catalog.executors import open_executor

    (ext / "part-1.tfrecord").write_bytes((ext / "part-1.tfrecord").read_bytes()[:-3])
    cat = Catalog.init(tmp_path / "cat")
    cat.register("d", SCHEMA)
    with open_executor("local", None, 2, 3) as ex, pytest.raises(CorruptRecordError, match=r"part-1\.tfrecord"):
        cat.dataset("d").adopt([ext], executor=ex)
    assert cat.dataset("d").version == 1
    cat.gc(grace=timedelta(0))
    assert [f for f in files_in(cat.data_root) if f != ".catalog-owner"] == []
