"""Record indexes: every write path registers a correct one, gc keeps and collects them with
their shards, verify checks them, `catalog index` gives older and `--link`ed shards one (safe
beside writers, gc and other indexers; an interrupt leaves nothing half-registered), readers
build them on the fly, and `--dali` writes NVIDIA DALI's index files.

Offsets are checked against the TFRecord framing parsed by hand here, independently of the
catalog's own readers."""

from __future__ import annotations

import io
import json
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from crc32c import crc32c
from probes import downgrade_to_format_3, interruptible
from sqlalchemy import select, update
from typer.testing import CliRunner

from catalog import Catalog, RecordWriter, encode_example, faults
from catalog import manifest as mf
from catalog.cli import app
from catalog.cli.output import human
from catalog.commit.changes import APPEND, Change, NewShard, adding
from catalog.commit.plans import plan
from catalog.commit.protocol import commit
from catalog.errors import CatalogError, Interrupted, ManifestError
from catalog.manifest import INTENTS, SHARDS, utcnow
from catalog.ops.indexing import ensure_indexes
from catalog.storage import ShardFile, file_checksum, new_intent_id, store_for, write_error
from catalog.storage import index as storage_index
from catalog.storage.index import IndexCheck, OffsetWalker, index_bytes, publish_index, scan_offsets

pytestmark = pytest.mark.usefixtures("backend")  # the same suite on SQLite and PostgreSQL


@pytest.fixture(autouse=True)
def every_index_a_file(request: pytest.FixtureRequest) -> Iterator[None]:
    """These tests hold index files (their shards are tiny): every shard gets one, unless the
    test is about the small shards that keep none (storage.index.FILE_MIN_BYTES). A patch of
    its own: a test's monkeypatch.undo() leaves it."""
    with pytest.MonkeyPatch.context() as patch:
        if "small_shard" not in request.node.name:
            patch.setattr(storage_index, "FILE_MIN_BYTES", 0)
        yield


runner = CliRunner()
SCHEMA = {"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string"}}}
NAME = "events"


def cli(*args: str, ok: bool = True) -> Any:
    result = runner.invoke(app, list(args))
    if ok:
        assert result.exit_code == 0, (args, result.output, result.exception)
    return result


def rows(ids: range) -> list[dict[str, Any]]:
    return [{"id": i, "text": "x" * (i % 13)} for i in ids]  # records of varied lengths


def framing(data: bytes) -> list[tuple[int, int]]:
    """(offset, framed size) of each record, parsed by hand: u64 length, u32 crc, data, u32 crc."""
    out = []
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        out.append((pos, 12 + length + 4))
        pos += 12 + length + 4
    assert pos == len(data)
    return out


def index_path(cat: Catalog, rel: str) -> Path:
    return cat.data_root / ".index" / f"{rel}.idx"


def shard_rows(cat: Catalog, name: str = NAME) -> list[Any]:
    """Every shard row of a dataset (live or retired, not collected), in read order."""
    ds = cat.dataset(name)
    with mf.read_txn(cat.engine) as conn:
        return list(
            conn.execute(
                select(SHARDS)
                .where(SHARDS.c.dataset_id == ds.id, SHARDS.c.collected_at.is_(None))
                .order_by(SHARDS.c.seq)
            ).all()
        )


def check_indexed(cat: Catalog, name: str = NAME) -> int:
    """Every uncompressed live shard has a registered index equal to its framing; returns how many."""
    shards = cat.dataset(name).shards()
    for s in shards:
        assert s.compression == "none" and s.index_checksum is not None, s
        data = index_path(cat, s.relpath).read_bytes()
        assert f"crc32c:{crc32c(data):08x}" == s.index_checksum
        found = np.frombuffer(data, dtype="<u8").tolist()
        assert found == [o for o, _ in framing(Path(s.path).read_bytes())], s.path
        assert found == scan_offsets(s.path, s.bytes).tolist()
    return len(shards)


def ids(ds: Any) -> list[int]:
    return [int(r["id"]) for r in ds.read()]


def unindex(cat: Catalog, name: str = NAME) -> None:
    """Make a dataset's shards look registered before format 4: no index row, no index file."""
    for r in shard_rows(cat, name):
        index_path(cat, r.path).unlink(missing_ok=True)
    with mf.write_txn(cat.engine) as conn:
        conn.execute(update(SHARDS).values(index_checksum=None))


@pytest.fixture
def cat(tmp_path: Path) -> Any:
    with Catalog.init(tmp_path / "cat") as c:
        c.register(NAME, SCHEMA)
        yield c


def linked_inputs(tmp_path: Path, count: int, per: int) -> list[Path]:
    out = []
    for i in range(count):
        path = tmp_path / f"in{i}.tfrecord"
        with RecordWriter(path) as w:
            w.write_many(encode_example(r) for r in rows(range(i * per, (i + 1) * per)))
        out.append(path)
    return out


# --------------------------------------------------------------------------- every write path


def test_appends_register_an_index_per_shard(cat: Catalog, tmp_path: Path) -> None:
    ds = cat.dataset(NAME)
    commit_ = ds.append_rows(rows(range(100)), shard_records=30)
    assert len(commit_.shards) == 4 and all(s.index_checksum for s in commit_.shards)
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows(range(100, 150))))
    cat.dataset(NAME).append_files([*linked_inputs(tmp_path, 2, 25), jsonl], shard_records=20)
    with cat.dataset(NAME).writer(shard_records=7) as w:
        for r in rows(range(150, 160)):
            w.write(r)
    assert check_indexed(cat) == 4 + 7 + 2  # each input its own shards: 2 x (20 + 5), then 20 + 20 + 10
    assert cat.verify().to_json() == {"ok": True, "checked": 13, "shards": 13, "retired": 0,
                                      "datasets": {NAME: {"shards": 13, "retired": 0}},
                                      "bytes": cat.dataset(NAME).info().bytes,
                                      "problems": [], "not_indexed": []}  # fmt: skip
    # The index tree holds exactly the live shards' indexes; dataset folders hold shards only.
    names = {p.name for p in (cat.data_root / NAME).iterdir()}
    assert names == {Path(s.path).name for s in cat.dataset(NAME).shards()}
    assert {p.name for p in (cat.data_root / ".index" / NAME).iterdir()} == {n + ".idx" for n in names}


def test_appends_in_jobs_register_their_indexes(cat: Catalog, tmp_path: Path) -> None:
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(2) as ex:
        cat.dataset(NAME).append_files(linked_inputs(tmp_path, 3, 40), shard_records=15, executor=ex)
    assert check_indexed(cat) == 9
    assert ids(cat.dataset(NAME)) == list(range(120))


def test_migrations_compaction_and_restore_register_indexes(cat: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = cat.dataset(NAME)
    ds.append_rows(rows(range(40)), shard_records=9)
    cat.dataset(NAME).migrate(add=["g:int64=3"], workers=1)
    assert check_indexed(cat) == 5
    report = cat.dataset(NAME).compact(workers=1)
    assert (report.shards_before, report.shards_after) == (5, 1)
    assert check_indexed(cat) == 1
    appended = [r.index_checksum for r in shard_rows(cat) if r.added_version == 2]
    restored = cat.dataset(NAME).restore(2)  # the appended shards again: hard links, indexes too
    assert [s.index_checksum for s in restored.shards] == appended
    assert check_indexed(cat) == 5
    assert cat.verify().ok and cat.verify().not_indexed == []
    # No hard links here: restore copies, and the copy's index is the source's.
    monkeypatch.setattr(type(cat.store), "link", lambda self, source, rel: False)
    cat.dataset(NAME).restore(4)
    assert check_indexed(cat) == 1
    assert ids(cat.dataset(NAME)) == list(range(40))
    assert cat.verify().problems == []


def test_compaction_indexes_sources_without_one_in_its_copy(cat: Catalog, tmp_path: Path) -> None:
    ds = cat.dataset(NAME)
    ds.append_rows(rows(range(30)), shard_records=10)
    cat.dataset(NAME).append_files(linked_inputs(tmp_path, 2, 7), link=True)  # registered without an index
    ds = cat.dataset(NAME)
    assert [s.index_checksum is None for s in ds.shards()] == [False, False, False, True, True]
    first = shard_rows(cat)[0]
    index_path(cat, first.path).write_bytes(b"\0" * 80)  # damaged: the compaction computes it instead
    ds.compact(workers=1)
    assert check_indexed(cat) == 1
    assert ids(cat.dataset(NAME)) == [*range(30), *range(14)]


def test_compressed_shards_have_no_index_and_compaction_gives_them_one(cat: Catalog, tmp_path: Path) -> None:
    ds = cat.dataset(NAME)
    ds.append_rows(rows(range(10)))
    add_gzip_shard(cat, range(10, 25))
    add_gzip_shard(cat, range(25, 30))
    ds = cat.dataset(NAME)
    report = ds.index()
    assert (report.shards, report.indexed, report.already, report.compressed) == (3, 0, 1, 2)
    assert cat.verify().not_indexed == []  # a compressed shard cannot have one: nothing to report
    result = cli("-C", str(cat.root), "index", NAME, "--dali", str(tmp_path / "dali"), ok=False)
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and "gzip-compressed; DALI's TFRecord reader" in result.stderr
    assert not (tmp_path / "dali").exists() or list((tmp_path / "dali").iterdir()) == []
    ds.compact(workers=1)  # the gzip sources are re-framed: uncompressed, indexed
    assert check_indexed(cat) == 2
    assert ids(cat.dataset(NAME)) == list(range(30))


def add_gzip_shard(cat: Catalog, id_range: range) -> None:
    """A gzip shard, registered through the commit protocol (as format 1 catalogs had them)."""
    ds = cat.dataset(NAME)
    rel = f"{NAME}/{new_intent_id()}-00000.tfrecord"
    with RecordWriter(cat.data_root / rel, "gzip") as w:
        w.write_many(encode_example(r) for r in rows(id_range))
    size, checksum = file_checksum(cat.data_root / rel)
    shard = ShardFile(rel, len(id_range), size, checksum, "gzip")
    commit(ds, Change(APPEND, ds.version, ds.schema_version, "gzip", "test", None, (adding([NewShard(shard)]),)))


# --------------------------------------------------------------------------- --link, catalog index


def test_linked_shards_are_not_indexed_until_catalog_index(cat: Catalog, tmp_path: Path) -> None:
    inputs = linked_inputs(tmp_path, 3, 11)
    cli("-C", str(cat.root), "append", NAME, *map(str, inputs), "--link")
    shards = cat.dataset(NAME).shards()
    assert [s.index_checksum for s in shards] == [None] * 3
    assert not (cat.data_root / ".index" / NAME).exists() or not list((cat.data_root / ".index" / NAME).iterdir())
    result = cli("-C", str(cat.root), "verify")
    size = human(cat.dataset(NAME).info().bytes)
    assert result.stderr == f"ok: 3 shards, {size} checked: 0 problems, 3 not indexed (`catalog index` indexes them)\n"
    assert json.loads(cli("-C", str(cat.root), "verify", "--json").stdout)["not_indexed"] == [s.path for s in shards]

    doc = json.loads(cli("-C", str(cat.root), "index", NAME, "--json").stdout)
    (report,) = doc["datasets"]
    assert (report["dataset"], report["shards"], report["indexed"], report["already_indexed"]) == (NAME, 3, 3, 0)
    assert (report["records"], report["index_bytes"]) == (33, 33 * 8)
    assert check_indexed(cat) == 3
    again = cli("-C", str(cat.root), "index").stdout  # every dataset; nothing left to do
    assert again.startswith(f"{NAME} version 2: indexed 0 shards (0 records, 0 B of index); 3 already indexed")
    assert cli("-C", str(cat.root), "verify").stderr == f"ok: 3 shards, {size} checked: 0 problems\n"
    assert ids(cat.dataset(NAME)) == list(range(33))


def test_catalog_index_bad_input_is_one_line(cat: Catalog, tmp_path: Path) -> None:
    cat.register("other", SCHEMA)
    for args, line in [
        (["index", "nope"], "error: no dataset named 'nope' (`catalog list` names the datasets there are)\n"),
        (["index", "--version", "1"], "error: --version needs exactly one dataset name\n"),
        (["index", "--dali", str(tmp_path / "d")], "error: --dali needs exactly one dataset name\n"),
        (["index", NAME, "other", "--dali", str(tmp_path / "d")], "error: --dali needs exactly one dataset name\n"),
        (["index", NAME, "--version", "9"], f"error: dataset '{NAME}' has no version 9 (versions: 1; no tags)\n"),
    ]:
        result = cli("-C", str(cat.root), *args, ok=False)
        assert (result.exit_code, result.stderr) == (1, line), args


def test_catalog_index_of_an_older_version(cat: Catalog, tmp_path: Path) -> None:
    cat.dataset(NAME).append_files(linked_inputs(tmp_path, 2, 5), link=True)  # version 2
    cat.dataset(NAME).compact(workers=1)  # version 3: one indexed shard; version 2's are retired
    report = cat.dataset(NAME).index(version=2)
    assert (report.version, report.indexed) == (2, 2)
    assert all(r.index_checksum is not None for r in shard_rows(cat))
    assert cat.verify().problems == [] and cat.verify().not_indexed == []


def test_a_corrupt_shard_is_not_indexed(cat: Catalog, tmp_path: Path) -> None:
    cat.dataset(NAME).append_files(linked_inputs(tmp_path, 1, 5), link=True)
    (shard,) = cat.dataset(NAME).shards()
    data = bytearray(Path(shard.path).read_bytes())
    data[20] ^= 1  # a record's bytes, same size
    Path(shard.path).write_bytes(bytes(data))
    result = cli("-C", str(cat.root), "index", NAME, ok=False)
    assert result.exit_code == 1 and result.stderr.startswith(f"error: {shard.path}: byte 0: corrupt record")
    assert shard_rows(cat)[0].index_checksum is None


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads fsync's paths from /proc")
def test_an_append_fsyncs_its_shard_not_its_index(cat: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index is a function of its shard's bytes: neither it nor its folder is fsynced."""
    synced: list[str] = []
    fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(os.readlink(f"/proc/self/fd/{fd}")) or fsync(fd))
    cat.dataset(NAME).append_rows(rows(range(20)), shard_records=10)
    a, b = shard_rows(cat)
    assert index_path(cat, a.path).exists() and index_path(cat, b.path).exists()
    index_tree = str(cat.data_root / ".index")
    assert not [p for p in synced if p.startswith(index_tree)], synced
    assert {str(cat.data_root / a.path), str(cat.data_root / b.path), str(cat.data_root / NAME)} <= {
        p.removesuffix(".tmp").replace("/.", "/") for p in synced
    }


def test_readers_rebuild_an_index_a_crash_took_verify_reports_it(cat: Catalog) -> None:
    ds = cat.dataset(NAME)
    ds.append_rows(rows(range(40)), shard_records=10)
    a, b, c, _d = shard_rows(cat)
    index_path(cat, a.path).unlink()  # the rename was lost
    index_path(cat, b.path).write_bytes(b"")  # the name made it, the bytes did not
    index_path(cat, c.path).write_bytes(bytes(80))  # blocks allocated, never written
    src = cat.dataset(NAME).source()
    assert [int(src[i]["id"]) for i in range(40)] == list(range(40))
    assert [int(i) for i in src[[35, 12, 0, 29, 7]]["id"]] == [35, 12, 0, 29, 7]
    batches = cat.dataset(NAME).batches(8, shuffle=True, seed=3)
    assert sorted(int(i) for b in batches for i in b["id"]) == list(range(40))
    assert [int(r["id"]) for r in cat.dataset(NAME).read(split="train[15:25]")] == list(range(15, 25))
    assert not index_path(cat, a.path).exists()  # readers write nothing: `catalog index` does
    result = cli("-C", str(cat.root), "verify", ok=False)
    assert result.exit_code == 1 and len(result.stdout.splitlines()) == 3
    cli("-C", str(cat.root), "index", NAME)
    assert cli("-C", str(cat.root), "verify").stderr.startswith("ok: 4 shards")


def test_an_index_rebuilt_other_than_registered_is_refused(cat: Catalog) -> None:
    """A lost index rebuilt from a shard whose records moved (same size, same count, every CRC
    sound, other offsets) is not the registered one: the reader refuses it, naming the index."""
    cat.dataset(NAME).append_rows(rows(range(10)))
    (a,) = shard_rows(cat)
    index_path(cat, a.path).unlink()
    shard = cat.data_root / a.path
    buf = io.BytesIO()
    with RecordWriter(buf) as w:
        w.write_many([encode_example(r) for r in reversed(rows(range(10)))])
    assert len(buf.getvalue()) == shard.stat().st_size
    shard.write_bytes(buf.getvalue())
    with pytest.raises(CatalogError, match=f"^{shard}: record index checksum: registered {a.index_checksum}, found"):
        cat.dataset(NAME).source()[3]


def test_a_small_shard_keeps_its_index_in_no_file(cat: Catalog, tmp_path: Path) -> None:
    """A local shard of at most FILE_MIN_BYTES has its index registered, not written: readers,
    verify, `catalog index`, DALI's files, compaction and restore find its offsets in it."""
    ds = cat.dataset(NAME)
    ds.append_rows(rows(range(100)))  # about 2 KB
    big = [{"id": i, "text": "y" * 700} for i in range(100, 200)]  # about 72 KB
    ds.append_rows(big)
    small, large = shard_rows(cat)
    assert small.bytes <= storage_index.FILE_MIN_BYTES < large.bytes
    assert small.index_checksum is not None and not index_path(cat, small.path).exists()
    assert index_path(cat, large.path).exists()
    src = cat.dataset(NAME).source()
    assert [int(src[i]["id"]) for i in (0, 57, 99, 100, 199)] == [0, 57, 99, 100, 199]
    assert [int(r["id"]) for r in cat.dataset(NAME).read(split="train[50:150]")] == list(range(50, 150))
    assert cli("-C", str(cat.root), "verify").stderr.startswith("ok: 2 shards")
    again = cli("-C", str(cat.root), "index", NAME).stdout
    assert again == f"{NAME} version 3: indexed 0 shards (0 records, 0 B of index); 2 already indexed\n"
    report = cat.dataset(NAME).dali_index(tmp_path / "dali")
    (first, _), _ = report.files
    dali = (tmp_path / "dali" / (Path(first).name + ".idx")).read_text()
    offsets = [int(line.split()[0]) for line in dali.splitlines()]
    assert offsets == [o for o, _ in framing((cat.data_root / small.path).read_bytes())]
    cat.dataset(NAME).append_rows(rows(range(200, 210)))
    cat.dataset(NAME).compact()
    cat.dataset(NAME).restore(version=3)
    restored = cat.dataset(NAME).shards()
    assert [s.index_checksum for s in restored] == [small.index_checksum, large.index_checksum]
    assert ids(cat.dataset(NAME)) == list(range(200))
    assert int(cat.dataset(NAME).source()[42]["id"]) == 42
    assert cli("-C", str(cat.root), "verify").exit_code == 0


def test_a_small_shard_whose_records_moved_is_refused_by_its_index_checksum(cat: Catalog) -> None:
    cat.dataset(NAME).append_rows(rows(range(10)))
    (a,) = shard_rows(cat)
    shard = cat.data_root / a.path
    buf = io.BytesIO()
    with RecordWriter(buf) as w:
        w.write_many([encode_example(r) for r in reversed(rows(range(10)))])
    shard.write_bytes(buf.getvalue())  # same size, every CRC sound, other offsets
    with pytest.raises(CatalogError, match=f"{shard}: record index checksum: registered {a.index_checksum}"):
        cat.dataset(NAME).source()[3]


def test_catalog_index_writes_a_lost_index_file_again_as_registered(cat: Catalog) -> None:
    cat.dataset(NAME).append_rows(rows(range(20)), shard_records=10)
    a, b = shard_rows(cat)
    kept = index_path(cat, a.path).read_bytes()
    index_path(cat, a.path).unlink()  # lost (no backup of the data area holds it)
    assert cli("-C", str(cat.root), "verify", ok=False).exit_code == 1
    doc = json.loads(cli("-C", str(cat.root), "index", NAME, "--json").stdout)
    (report,) = doc["datasets"]
    assert (report["indexed"], report["already_indexed"], report["rebuilt"]) == (0, 1, 1)
    assert index_path(cat, a.path).read_bytes() == kept  # a function of the shard: the registered one
    assert [r.index_checksum for r in shard_rows(cat)] == [a.index_checksum, b.index_checksum]  # rows untouched
    assert cli("-C", str(cat.root), "verify").stderr.startswith("ok: 2 shards")
    assert cat.dataset(NAME).source()[3]["id"] == 3
    again = cli("-C", str(cat.root), "index", NAME).stdout
    assert again == f"{NAME} version 2: indexed 0 shards (0 records, 0 B of index); 2 already indexed\n"
    # An index that comes out other than the registered one: the shard changed since its commit.
    index_path(cat, b.path).unlink()
    with mf.write_txn(cat.engine) as conn:
        conn.execute(update(SHARDS).where(SHARDS.c.id == b.id).values(index_checksum="crc32c:00000000"))
    refused = cli("-C", str(cat.root), "index", NAME, ok=False)
    assert (refused.exit_code, refused.stderr.count("\n")) == (1, 1)
    assert refused.stderr.startswith(f"error: {cat.data_root / b.path}: record index: registered crc32c:00000000")
    assert not index_path(cat, b.path).exists()


# --------------------------------------------------------------------------- verify


def test_verify_names_a_missing_damaged_or_wrong_index(cat: Catalog) -> None:
    cat.dataset(NAME).append_rows(rows(range(40)), shard_records=10)
    a, b, c, d = shard_rows(cat)
    index_path(cat, a.path).unlink()  # missing
    damaged = bytearray(index_path(cat, b.path).read_bytes())
    damaged[9] ^= 0x40
    index_path(cat, b.path).write_bytes(bytes(damaged))  # its checksum no longer matches
    index_path(cat, c.path).write_bytes(index_path(cat, c.path).read_bytes()[:-8])  # cut
    # A self-consistent index (registered checksum and all) that does not match its shard.
    wrong = np.frombuffer(index_path(cat, d.path).read_bytes(), dtype="<u8").copy()
    wrong[5:] = wrong[4:-1] + (wrong[5] - wrong[4]) // 2 * 2  # plausible offsets, wrong ones
    data, checksum = index_bytes(np.sort(wrong))
    index_path(cat, d.path).write_bytes(data)
    with mf.write_txn(cat.engine) as conn:
        conn.execute(update(SHARDS).where(SHARDS.c.id == d.id).values(index_checksum=checksum))
    result = cli("-C", str(cat.root), "verify", ok=False)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert all(line.startswith("index: ") for line in lines) and len(lines) == 4, lines
    assert f"{index_path(cat, a.path)}: record index: registered present, found missing (`catalog index`" in lines[0]
    assert f"{index_path(cat, b.path)}: record index checksum: registered {b.index_checksum}" in lines[1]
    assert f"{index_path(cat, c.path)}: record index size: registered 80 bytes, found 72 bytes" in lines[2]
    assert lines[3].endswith(
        f"{index_path(cat, d.path)}: the offset of record 5 is not where the shard's record 5 starts"
    )
    assert result.stderr.startswith("FAILED: 4 shards")
    # The shards themselves are sound, and readers of the sequence are not affected.
    assert ids(cat.dataset(NAME)) == list(range(40))


def test_record_writer_offsets_as_it_frames() -> None:
    big = b"b" * (1 << 20)  # written on its own, not batched (DIRECT_READ)
    records = [b"", b"a" * 3, big, *[bytes([i]) * i for i in range(200)], big, b"z"]
    buf = io.BytesIO()
    w = RecordWriter(buf, index=True)
    w.write_many(records[:5])
    early = w.offsets()  # before the close: what was written so far
    w.write_many(records[5:])
    w.close()
    offsets = [o for o, _ in framing(buf.getvalue())]
    assert early.tolist() == offsets[:5] and w.offsets().tolist() == offsets and w.offsets().dtype == np.dtype("<u8")
    assert RecordWriter(io.BytesIO(), index=True).offsets().tolist() == []
    with pytest.raises(CatalogError, match="index=False"):
        RecordWriter(io.BytesIO()).offsets()
    with pytest.raises(CatalogError, match="uncompressed"):
        RecordWriter(io.BytesIO(), "gzip", index=True)


def test_index_check_and_offset_walker_over_any_chunking() -> None:
    records = [bytes([i % 251]) * (i * 7 % 61) for i in range(300)]
    buf = io.BytesIO()
    with RecordWriter(buf, index=True) as w:
        w.write_many(records)
        true = w.offsets()
    data = buf.getvalue()
    assert true.tolist() == [o for o, _ in framing(data)]
    rng = np.random.default_rng(5)
    for _ in range(30):
        cuts = np.sort(rng.choice(np.arange(1, len(data)), size=int(rng.integers(1, 400)), replace=False))
        pieces = [data[i:j] for i, j in zip([0, *cuts], [*cuts, len(data)], strict=True)]
        walker = OffsetWalker()
        good = IndexCheck(true, len(data))
        shifted = true.copy()
        bad_at = int(rng.integers(1, len(true)))
        shifted[bad_at] += np.uint64(1)
        bad = IndexCheck(shifted, len(data))
        for p in pieces:
            walker.write(memoryview(p))
            good(memoryview(p))
            bad(memoryview(p))
        assert walker.offsets("x", len(records)).tolist() == true.tolist()
        assert good.result() is None
        assert bad.result() == bad_at
    short = IndexCheck(true, len(data))
    short(memoryview(data[: len(data) // 2]))
    assert short.result() is not None  # the file ended before the offsets did


# --------------------------------------------------------------------------- gc


def test_gc_keeps_indexes_with_their_shards_and_collects_them_with_them(cat: Catalog, tmp_path: Path) -> None:
    cat.dataset(NAME).append_rows(rows(range(20)), shard_records=10)  # version 2
    cat.dataset(NAME).compact(workers=1)  # version 3: the two shards retired
    cat.dataset(NAME).append_files(linked_inputs(tmp_path, 1, 4), link=True)  # version 4, unindexed
    linked = shard_rows(cat)[-1]
    # An index run that published its file but was stopped before registering it: its shard owns it.
    offsets = scan_offsets(str(cat.data_root / linked.path), linked.bytes)
    publish_index(cat.store, linked.path, index_bytes(offsets)[0], linked.bytes)
    folder = cat.data_root / ".index" / NAME
    dead = new_intent_id()
    strays = {  # files of writers that died: an index and the temporary files of indexes
        f"{dead}-00000.tfrecord.idx": b"\0" * 8,
        f".{dead}-00001.tfrecord.idx.tmp": b"\0" * 8,
        f".{linked.path.split('/')[1]}.idx.0123456789abcdef.tmp": b"\0" * 8,  # an index run's, killed
    }
    foreign = {"notes.txt": b"mine", f"{dead}-00000.tfrecord.idx.bak": b"mine"}  # no names the catalog gives
    for name, data in {**strays, **foreign}.items():
        (folder / name).write_bytes(data)
    old = time.time() - 7200
    for name in [*strays, *foreign]:
        os.utime(folder / name, (old, old))
    before = {p.name for p in folder.iterdir()}

    young = cat.gc()  # the default grace keeps young files; old strays go
    assert young.removed == [] and (young.indexes_removed, young.index_bytes) == (3, 24)
    assert {p.name for p in folder.iterdir()} == before - set(strays)
    dry = cat.gc(grace=timedelta(0), keep_versions=1, dry_run=True)
    assert dry.indexes_removed == 2 and {p.name for p in folder.iterdir()} == before - set(strays)
    doc = json.loads(cli("-C", str(cat.root), "gc", "--grace", "0", "--keep-versions", "1", "--json").stdout)
    assert len(doc["removed"]) == 2 and all(p.endswith(".tfrecord") for p in doc["removed"])  # shards only
    assert (doc["indexes_removed"], doc["index_bytes"]) == (2, 2 * 10 * 8)
    live = shard_rows(cat)
    assert {p.name for p in folder.iterdir()} == {r.path.split("/")[1] + ".idx" for r in live} | set(foreign)
    cat.dataset(NAME).index()  # the linked shard: its leftover file is replaced, then registered
    assert check_indexed(cat) == 2
    assert cat.verify().problems == []
    cat.drop(NAME)
    gone = cat.gc(grace=timedelta(0))
    assert gone.indexes_removed == 2 and sorted(p.name for p in folder.iterdir()) == sorted(foreign)


# --------------------------------------------------------------------------- interrupts and races


def hook_at(point: str, action: Callable[[dict[str, Any]], None]) -> Callable[[str, dict[str, Any]], None]:
    fired = []

    def hook(name: str, info: dict[str, Any]) -> None:
        if name == point and not fired:
            fired.append(name)
            action(info)

    return hook


def ctrl_c(_info: dict[str, Any]) -> None:
    raise KeyboardInterrupt


def test_ctrl_c_while_an_append_writes_an_index_leaves_nothing(cat: Catalog) -> None:
    cat.dataset(NAME).append_rows(rows(range(5)))
    before = sorted(p.relative_to(cat.data_root) for p in cat.data_root.rglob("*") if p.is_file())
    for k in range(1, 4):  # the first, second or third shard's index
        seen: list[Path] = []

        def count(name: str, info: dict[str, Any], k: int = k, seen: list[Path] = seen) -> None:
            if name == "index.closing":
                seen.append(info["temp"])
                assert Path(info["temp"]).exists()
                if len(seen) == k:
                    raise KeyboardInterrupt

        previous = faults.install(count)
        try:
            with pytest.raises(Interrupted, match="nothing was registered"):
                cat.dataset(NAME).append_rows(rows(range(100, 130)), shard_records=10, token=f"t{k}")
        finally:
            faults.install(previous)
        after = sorted(p.relative_to(cat.data_root) for p in cat.data_root.rglob("*") if p.is_file())
        assert after == before, k
        assert cat.dataset(NAME).version == 2
    cat.dataset(NAME).append_rows(rows(range(100, 130)), shard_records=10, token="t1")
    assert check_indexed(cat) == 4 and cat.verify().problems == []


def test_ctrl_c_before_catalog_index_registers_leaves_nothing_half_registered(cat: Catalog, tmp_path: Path) -> None:
    cat.dataset(NAME).append_files(linked_inputs(tmp_path, 3, 6), link=True)
    previous = faults.install(hook_at("index.written", ctrl_c))
    try:
        with pytest.raises(KeyboardInterrupt):
            cat.index([NAME])
    finally:
        faults.install(previous)
    assert [r.index_checksum for r in shard_rows(cat)] == [None] * 3  # nothing registered
    assert len(list((cat.data_root / ".index" / NAME).iterdir())) == 3  # published, owned by their shards
    report = cat.verify()
    assert report.problems == [] and len(report.not_indexed) == 3
    assert cat.gc(grace=timedelta(0)).indexes_removed == 0
    assert cat.dataset(NAME).index().indexed == 3
    assert check_indexed(cat) == 3 and cat.verify().problems == []


def test_two_indexers_racing_register_one_index(cat: Catalog, tmp_path: Path) -> None:
    cat.dataset(NAME).append_files(linked_inputs(tmp_path, 4, 6), link=True)
    inner: list[Any] = []

    def other_indexer(_info: dict[str, Any]) -> None:
        with Catalog.open(cat.root) as other:  # another process would do the same: it sees no index yet
            inner.append(other.dataset(NAME).index())

    previous = faults.install(hook_at("index.written", other_indexer))
    try:
        outer = cat.dataset(NAME).index()
    finally:
        faults.install(previous)
    assert inner[0].indexed == 4  # it registered first
    assert outer.indexed == 4  # the same indexes, already registered: no error, nothing changed
    assert check_indexed(cat) == 4 and cat.verify().problems == []


def test_an_indexer_beside_gc_and_writers(cat: Catalog, tmp_path: Path) -> None:
    cat.dataset(NAME).append_files(linked_inputs(tmp_path, 3, 6), link=True)  # version 2
    cat.dataset(NAME).append_rows(rows(range(50, 60)))  # version 3

    def meanwhile(_info: dict[str, Any]) -> None:
        with Catalog.open(cat.root) as other:
            other.dataset(NAME).compact(workers=1)  # version 4 retires version 2's shards...
            other.dataset(NAME).append_rows(rows(range(60, 70)))
            report = other.gc(grace=timedelta(0), keep_versions=1)  # ...and gc collects them
            # The indexed one's index with it, and the three the indexer has published meanwhile:
            # their shards are not registered any more.
            assert len(report.retired) == 4 and report.indexes_removed == 1 + 3

    previous = faults.install(hook_at("index.written", meanwhile))
    try:
        report = cat.dataset(NAME).index(version=3)
    finally:
        faults.install(previous)
    assert report.indexed == 0  # its shards were collected before it could register them
    assert len(list((cat.data_root / ".index" / NAME).iterdir())) == 2  # the live shards' own
    assert cat.verify().problems == [] and cat.gc(grace=timedelta(0)).indexes_removed == 0
    assert check_indexed(cat) == 2


def test_gc_taking_an_indexers_temporary_file_fails_it_cleanly(cat: Catalog, tmp_path: Path) -> None:
    cat.dataset(NAME).append_files(linked_inputs(tmp_path, 2, 6), link=True)

    def gc_now(_info: dict[str, Any]) -> None:
        with Catalog.open(cat.root) as other:
            assert other.gc(grace=timedelta(0)).indexes_removed == 1  # --grace 0: even a fresh temporary file

    previous = faults.install(hook_at("index.closing", gc_now))
    try:
        with pytest.raises(CatalogError, match=r"\.idx: cannot write: "):
            cat.dataset(NAME).index()
    finally:
        faults.install(previous)
    assert [r.index_checksum for r in shard_rows(cat)] == [None, None]
    assert cat.dataset(NAME).index().indexed == 2 and check_indexed(cat) == 2


KILLED = r"""
import os, sys, time
from pathlib import Path

from catalog import Catalog, faults
from catalog.storage import index

index.FILE_MIN_BYTES = 0  # every shard's index a file (see every_index_a_file)
root, name, marker, what = sys.argv[1:5]


def on_point(point, info):
    if point == "index.closing":
        info["flush"]()
        Path(marker).write_text(str(info["temp"]))
        while True:
            time.sleep(60)


faults.install(on_point)
cat = Catalog.open(root)
if what == "index":
    cat.dataset(name).index()
else:
    cat.dataset(name).append_rows([{"id": i, "text": "k"} for i in range(30)], shard_records=10)
"""


def kill_at_index_closing(cat: Catalog, tmp_path: Path, what: str) -> Path:
    marker = tmp_path / f"marker-{what}"
    proc = subprocess.Popen([sys.executable, "-c", KILLED, str(cat.root), NAME, str(marker), what])
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(60)
    return Path(marker.read_text())


def test_sigkill_while_writing_an_index(cat: Catalog, tmp_path: Path) -> None:
    cat.dataset(NAME).append_files(linked_inputs(tmp_path, 2, 6), link=True)
    temp = kill_at_index_closing(cat, tmp_path, "index")
    assert temp.exists() and temp.name.endswith(".tmp") and temp.parent == cat.data_root / ".index" / NAME
    assert [r.index_checksum for r in shard_rows(cat)] == [None, None]
    assert cat.verify().problems == []
    assert cat.gc().indexes_removed == 0  # young: maybe an index run at work
    assert cat.gc(grace=timedelta(0)).indexes_removed == 1 and not temp.exists()
    assert cat.dataset(NAME).index().indexed == 2 and check_indexed(cat) == 2

    # An append killed while writing its first shard's index: its files go with its intent.
    temp = kill_at_index_closing(cat, tmp_path, "append")
    assert temp.exists()
    with mf.write_txn(cat.engine) as conn:  # as if it ran on another machine: only its heartbeat tells
        conn.execute(update(INTENTS).values(process=None, heartbeat_at=utcnow() - timedelta(hours=1)))
    gc = cat.gc(grace=timedelta(0))
    assert len(gc.removed) == 1 and gc.indexes_removed == 1 and not temp.exists()
    assert cat.verify().problems == [] and check_indexed(cat) == 2


# --------------------------------------------------------------------------- readers' on-the-fly indexing


def test_ensure_indexes_registers_or_falls_back_to_memory(
    cat: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat.dataset(NAME).append_rows(rows(range(10)))
    cat.dataset(NAME).append_files(linked_inputs(tmp_path, 2, 6), link=True)
    ds = cat.dataset(NAME)
    before = plan(ds)
    assert [s.index_checksum is None for s in before.shards] == [False, True, True]

    # A read-only data area: no error, the offsets in memory, nothing registered.
    import catalog.ops.indexing as indexing

    def read_only(*_a: Any, **_k: Any) -> None:
        raise write_error("somewhere", OSError(30, "Read-only file system"))

    monkeypatch.setattr(indexing, "publish_index", read_only)
    offsets: dict[str, np.ndarray] = {}
    after = ensure_indexes(ds, before, offsets)
    assert after == before
    assert sorted(offsets) == [s.rel for s in before.shards[1:]]
    for s in before.shards[1:]:
        assert offsets[s.rel].tolist() == [o for o, _ in framing(Path(s.path).read_bytes())]
    monkeypatch.undo()

    # A read-only manifest: the same (the published files stay, owned by their shards).
    def manifest_read_only(*_a: Any, **_k: Any) -> None:
        raise ManifestError("manifest database error: attempt to write a readonly database")

    monkeypatch.setattr(indexing, "_register", manifest_read_only)
    offsets = {}
    assert ensure_indexes(ds, before, offsets) == before and sorted(offsets) == [s.rel for s in before.shards[1:]]
    monkeypatch.undo()

    # Writable: registered, and the plan says so.
    after = ensure_indexes(ds, before)
    assert all(s.index_checksum for s in after.shards) and after.shards[0] == before.shards[0]
    assert [s.index_checksum for s in after.shards] == [r.index_checksum for r in shard_rows(cat)]
    assert check_indexed(cat) == 3
    assert ensure_indexes(ds, after) is after  # nothing to do


def test_ensure_indexes_never_hides_a_damaged_shard(cat: Catalog, tmp_path: Path) -> None:
    cat.dataset(NAME).append_files(linked_inputs(tmp_path, 1, 6), link=True)
    (shard,) = cat.dataset(NAME).shards()
    with open(shard.path, "ab") as f:
        f.write(b"more")  # grown through its link
    with pytest.raises(CatalogError, match=f"{shard.path}: more than the {shard.bytes} bytes registered"):
        ensure_indexes(cat.dataset(NAME), plan(cat.dataset(NAME)), {})
    with open(shard.path, "r+b") as f:
        f.truncate(shard.bytes)
        f.seek(12)
        f.write(b"\0")  # a byte of a record, at the same size
    with pytest.raises(CatalogError, match=f"{shard.path}: byte 0: corrupt record"):
        ensure_indexes(cat.dataset(NAME), plan(cat.dataset(NAME)), {})
    assert shard_rows(cat)[0].index_checksum is None


# --------------------------------------------------------------------------- DALI


def test_dali_index_files_match_the_framing(cat: Catalog, tmp_path: Path) -> None:
    cat.dataset(NAME).append_rows(rows(range(45)), shard_records=20)
    cat.dataset(NAME).append_files(linked_inputs(tmp_path, 1, 9), link=True)  # indexed on the way
    out = tmp_path / "dali"
    doc = json.loads(cli("-C", str(cat.root), "index", NAME, "--dali", str(out), "--json").stdout)
    files = cat.dataset(NAME).files()
    assert [f["shard"] for f in doc["dali"]["files"]] == files
    assert doc["dali"]["records"] == 54 and doc["datasets"][0]["indexed"] == 1
    for shard in files:
        paired = out / (Path(shard).name + ".idx")  # how a user pairs them with ds.files()
        expected = "".join(f"{o} {n}\n" for o, n in framing(Path(shard).read_bytes()))
        assert paired.read_text() == expected
    assert sorted(p.name for p in out.iterdir()) == sorted(Path(f).name + ".idx" for f in files)
    text = cli("-C", str(cat.root), "index", NAME, "--dali", str(out)).stdout  # again: the same files
    assert text.splitlines()[-1] == f"wrote 4 DALI index files (54 records) to {out}"
    report = cat.dataset(NAME).dali_index(tmp_path / "v2", version=2)
    assert [Path(p).name for _s, p in report.files] == [Path(f).name + ".idx" for f in cat.dataset(NAME).files(2)]


# --------------------------------------------------------------------------- a format 3 catalog


@pytest.mark.sqlite_only  # built by hand in the SQLite file
def test_format_3_catalog_upgrades_unindexed_and_catalog_index_indexes_it(tmp_path: Path) -> None:
    root = tmp_path / "old"
    with Catalog.init(root) as cat:
        cat.register(NAME, SCHEMA).append_rows(rows(range(30)), shard_records=8)
        cat.dataset(NAME).append_rows(rows(range(30, 35)))
        files = cat.dataset(NAME).files()
    downgrade_to_format_3(root / "catalog.db")  # and format 3 had no index files:
    for p in (root / "data" / ".index" / NAME).iterdir():
        p.unlink()
    result = cli("-C", str(root), "index", ok=False)
    assert result.stderr == f"error: the manifest has format 3, older than {mf.FORMAT_VERSION}: run `catalog upgrade`\n"
    assert cli("-C", str(root), "upgrade").stdout == f"manifest format 3 -> {mf.FORMAT_VERSION}\n"
    with Catalog.open(root) as cat:
        assert [s.index_checksum for s in cat.dataset(NAME).shards()] == [None] * 5
        assert cat.verify().not_indexed == files
    text = cli("-C", str(root), "index", NAME).stdout
    assert text == f"{NAME} version 3: indexed 5 shards (35 records, 280 B of index); 0 already indexed\n"
    with Catalog.open(root) as cat:
        assert check_indexed(cat) == 5
        assert cat.verify().to_json()["not_indexed"] == [] and cat.verify().ok
        assert ids(cat.dataset(NAME)) == list(range(35))


# --------------------------------------------------------------------------- object storage


def test_indexes_on_object_storage(s3_url: str, tmp_path: Path) -> None:
    import fsspec

    fs = fsspec.filesystem("s3", use_listings_cache=False)
    with Catalog.init(tmp_path / "c", storage=s3_url) as cat:
        cat.register(NAME, SCHEMA).append_rows(rows(range(30)), shard_records=12)
        shards = cat.dataset(NAME).shards()
        for s in shards:
            data = fs.cat_file(f"{s3_url}/.index/{s.relpath}.idx")
            assert f"crc32c:{crc32c(data):08x}" == s.index_checksum
            assert np.frombuffer(data, "<u8").tolist() == [o for o, _ in framing(fs.cat_file(s.path))]
        assert cat.verify().problems == []
        cat.dataset(NAME).compact(workers=1)
        gc = cat.gc(grace=timedelta(0), keep_versions=1)
        assert len(gc.removed) == 3 and gc.indexes_removed == 3
        (live,) = cat.dataset(NAME).shards()
        index_keys = {k.split("/.index/", 1)[1] for k in fs.find(s3_url[len("s3://") :] + "/.index")}
        assert index_keys == {f"{live.relpath}.idx"}
        plan_ = ensure_indexes(cat.dataset(NAME), plan(cat.dataset(NAME)))
        assert plan_.shards[0].index_checksum == live.index_checksum
        assert store_for(s3_url).index_listing({NAME})[0].rel == f".index/{live.relpath}.idx"


def test_the_names_of_record_indexes() -> None:
    from catalog.storage import index_owner, index_rel, is_catalog_file, is_catalog_index, is_index_name

    shard = "ev/0123456789abcdef0123456789ab-00003-00000.tfrecord"
    name = shard.split("/")[1]
    assert index_rel(shard) == f".index/{shard}.idx" and index_owner(index_rel(shard)) == shard
    assert index_owner(shard) is None and index_owner(f".index/ev/.{name}.idx.tmp") is None
    for own in (f"{name}.idx", f".{name}.idx.tmp", f".{name}.idx.0123456789abcdef.tmp"):
        assert is_catalog_index(own) and is_index_name(own) and not is_catalog_file(own), own
    for foreign in (f"{name}.idx.bak", f"{name}.IDX", f".{name}.idx.xyz.tmp", "notes.idx", name):
        assert not is_catalog_index(foreign), foreign
    assert is_index_name(f"{name}.idx.k3j4l5m6.tmp")  # an index's spool file on object storage
    assert not is_index_name(f"{name}.idxab12c.tmp")  # a shard's spool file whose random letters begin "idx"
    with pytest.raises(mf.ManifestError, match="outside the data area"):
        store_for("/tmp/area").url(".index/../x")


# Ctrl-C at every I/O call of `catalog index` (a real SIGINT, raised by a profile hook right
# before or after the k-th call): each time, every registered index matches its shard, and a
# rerun indexes the rest.
SWEEP = r"""
import json, signal, sys
from pathlib import Path

import numpy as np
from sqlalchemy import update

from catalog import Catalog
from catalog import manifest as mf
from catalog.manifest import SHARDS
from catalog.storage import index
from catalog.storage.index import read_index, scan_offsets

index.FILE_MIN_BYTES = 0  # every shard's index a file (see every_index_a_file)
root, name, when = sys.argv[1:4]
IO = {"execute", "executemany", "commit", "rollback", "fsync", "rename", "replace", "link", "unlink", "open",
      "write", "readinto", "read", "scandir", "listdir", "stat", "mkdir"}


class Inject:
    def __init__(self):
        self.k = self.n = 0
        self.fired = False

    def __call__(self, frame, event, arg):
        if event == when and getattr(arg, "__name__", None) in IO:
            self.n += 1
            if self.n == self.k:
                self.fired = True
                signal.raise_signal(signal.SIGINT)


cat = Catalog.open(root)


def state():
    shards = cat.dataset(name).shards()
    good = all(
        (read_index(cat.store.index_url(s.relpath), s.records, s.bytes, s.index_checksum)
         == scan_offsets(s.path, s.bytes)).all()
        for s in shards if s.index_checksum is not None
    )
    return {"indexed": sum(s.index_checksum is not None for s in shards), "good": bool(good),
            "problems": [p.to_json() for p in cat.verify().problems]}


out = []
k = 0
while True:
    k += 1
    with mf.write_txn(cat.engine) as conn:  # every shard unindexed again, its files gone
        conn.execute(update(SHARDS).values(index_checksum=None))
    for p in (Path(root) / "data" / ".index" / name).glob("*"):
        p.unlink()
    inject = Inject()
    inject.k = k
    caught = None
    sys.setprofile(inject)
    try:
        cat.dataset(name).index()
    except KeyboardInterrupt as e:
        caught = type(e).__name__
    finally:
        sys.setprofile(None)
    if not inject.fired:
        break
    after = state()
    cat.dataset(name).index()
    out.append({"k": k, "caught": caught, "after": after, "rerun": state()})
print(json.dumps({"calls": k - 1, "runs": out}))
"""


@pytest.mark.sqlite_only  # the code under test is the same on PostgreSQL; its sweep would take minutes
@pytest.mark.parametrize("when", ["c_call", "c_return"])
def test_ctrl_c_at_every_io_call_of_catalog_index(cat: Catalog, tmp_path: Path, when: str) -> None:
    cat.dataset(NAME).append_files(linked_inputs(tmp_path, 3, 5), link=True)
    res = subprocess.run(
        [sys.executable, "-c", interruptible(SWEEP), str(cat.root), NAME, when],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["calls"] >= 20 and len(doc["runs"]) == doc["calls"]
    for run in doc["runs"]:
        where = f"interrupted at I/O call {run['k']}"
        assert run["caught"] == "KeyboardInterrupt", where
        assert run["after"]["good"] and run["after"]["problems"] == [], (where, run)
        assert run["after"]["indexed"] in (0, 3), (where, run)  # one transaction registers them all
        assert run["rerun"] == {"indexed": 3, "good": True, "problems": []}, (where, run)
    assert {r["after"]["indexed"] for r in doc["runs"]} == {0, 3}  # some interrupts came after the registration


def test_gc_text_counts_the_index_files_it_removes(cat: Catalog) -> None:
    cat.dataset(NAME).append_rows(rows(range(20)), shard_records=10)
    cat.dataset(NAME).compact(workers=1)
    lines = cli("-C", str(cat.root), "gc", "--keep-versions", "1", "--dry-run").stdout.splitlines()
    assert lines[2] == "would remove 2 record index files (160 B)", lines
    lines = cli("-C", str(cat.root), "gc", "--keep-versions", "1").stdout.splitlines()
    assert lines[2] == "removed 2 record index files (160 B)" and lines[3].startswith("removed 2 files"), lines
    assert len(list((cat.data_root / ".index" / NAME).iterdir())) == 1
