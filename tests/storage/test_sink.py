"""ShardSink (catalog/storage/sink.py): records into numbered shards that roll at their
limits, each with its record index; abort() and clear_attempt() leave nothing behind."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from catalog.errors import ManifestError, StorageError
from catalog.storage.files import file_checksum
from catalog.storage.local import LocalStore
from catalog.storage.names import index_folder, index_rel
from catalog.storage.sink import UNLIMITED, ShardSink, clear_attempt
from catalog.tfrecord.framing import RecordWriter, read_record_batches

INTENT = "0123456789abcdef0123456789ab"


def _records(path: Path) -> list[bytes]:
    return [r for batch in read_record_batches(path) for r in batch]


@pytest.mark.usefixtures("every_index_a_file")  # (tiny shards: see the fixture)
def test_records_roll_into_numbered_shards_at_the_record_limit(tmp_path: Path) -> None:
    sink = ShardSink(tmp_path, "ds", INTENT, shard_size=UNLIMITED, shard_records=2)
    sink.source = "input.jsonl"
    sink.write_many([b"r0", b"r1", b"r2", b"r3", b"r4"])
    assert sink.records == 5
    shards = sink.close()
    assert [s.rel for s in shards] == [f"ds/{INTENT}-0000{i}.tfrecord" for i in range(3)]
    assert [s.records for s in shards] == [2, 2, 1]
    assert _records(tmp_path / shards[2].rel) == [b"r4"]
    for s in shards:
        assert (s.bytes, s.checksum) == file_checksum(tmp_path / s.rel)
        assert s.index_checksum is not None and (tmp_path / index_rel(s.rel)).exists()
        assert s.source == "input.jsonl" and s.compression == "none"


def test_a_shard_rolls_at_its_byte_limit_and_cut_starts_a_new_one(tmp_path: Path) -> None:
    sink = ShardSink(LocalStore(tmp_path), "ds", INTENT, shard_size=40, shard_records=UNLIMITED)
    sink.write(b"x" * 10)  # 26 framed bytes
    sink.write(b"y" * 10)  # would make 52: a new shard
    sink.cut("second")
    sink.write(b"z")
    shards = sink.close()
    assert [(s.records, s.source) for s in shards] == [(1, None), (1, None), (1, "second")]


def test_a_compressed_sink_writes_no_index(tmp_path: Path) -> None:
    sink = ShardSink(tmp_path, "ds", INTENT, shard_size=UNLIMITED, shard_records=UNLIMITED, compression="gzip")
    sink.write_many([b"a", b"b"])
    [shard] = sink.close()
    assert shard.compression == "gzip" and shard.index_checksum is None
    assert [r for batch in read_record_batches(tmp_path / shard.rel, "gzip") for r in batch] == [b"a", b"b"]


@pytest.mark.usefixtures("every_index_a_file")  # (tiny shards: see the fixture)
def test_abort_and_clear_attempt_remove_every_file_of_the_writer(tmp_path: Path) -> None:
    sink = ShardSink(tmp_path, "ds", INTENT, shard_size=UNLIMITED, shard_records=1)
    sink.write_many([b"1", b"2", b"3"])  # two published, one open under its temporary name
    assert len(list((tmp_path / "ds").iterdir())) == 3
    sink.abort()
    assert list((tmp_path / "ds").iterdir()) == [] and list((tmp_path / ".index" / "ds").iterdir()) == []
    assert sink.shards == [] and sink.placed == [] and sink.temps == []
    again = ShardSink(tmp_path, "ds", INTENT, shard_size=UNLIMITED, shard_records=1)
    again.write_many([b"1", b"2"])
    again.close()
    (tmp_path / "ds" / "someone-elses.tfrecord").write_bytes(b"keep")
    clear_attempt(LocalStore(tmp_path), "ds", INTENT)
    assert [p.name for p in (tmp_path / "ds").iterdir()] == ["someone-elses.tfrecord"]


@pytest.mark.usefixtures("every_index_a_file")  # (tiny shards: see the fixture)
def test_a_close_that_fails_leaves_no_file_of_the_sink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk shows at the last flush (records wait in the writer's buffer): the open
    shard's temporary file and the shards already published go, as abort() would remove them,
    even when the caller's own clean-up (the manifest, on the same full disk) cannot run."""
    sink = ShardSink(tmp_path, "ds", INTENT, shard_size=UNLIMITED, shard_records=2)
    sink.write_many([b"1", b"2", b"3"])  # one published, one open
    monkeypatch.setattr(RecordWriter, "_write_out", _no_space)
    with pytest.raises(StorageError, match="No space left on device"):
        sink.close()
    assert list((tmp_path / "ds").iterdir()) == [] and not any((tmp_path / index_folder("ds")).iterdir())


def _no_space(*_args: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_dataset_name_that_leads_outside_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"outside the data area"):
        ShardSink(tmp_path / "area", "../escape", INTENT, shard_size=UNLIMITED, shard_records=1)
    assert not (tmp_path / "escape").exists()


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads fsync's paths from /proc")
@pytest.mark.parametrize("statistics", [True, False])
def test_each_shard_is_fsynced_once_before_its_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, statistics: bool
) -> None:
    """With statistics, a local shard is made durable before they are taken (the helper works
    meanwhile), not by its publication: still once a file, under its temporary name; and an
    fsync that fails there is one error naming the file, and abort() leaves nothing."""
    from catalog.schema import Schema
    from catalog.tfrecord import encode_example

    schema = Schema.from_json({"features": {"id": {"dtype": "int64"}}})
    records = [encode_example({"id": [i]}) for i in range(5)]
    synced: list[str] = []
    fsync = os.fsync

    def spy(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if "/ds/" in path:
            synced.append(path)
        fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    sink = ShardSink(tmp_path, "ds", INTENT, UNLIMITED, 2, schema=schema if statistics else None)
    sink.write_many(records)
    shards = sink.close()
    assert len(shards) == 3 and all((s.stats is not None) == statistics for s in shards)
    names = [Path(p).name for p in synced]
    assert len(names) == 3 and all(n not in {Path(s.rel).name for s in shards} for n in names), names

    def failing(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", failing)
    again = ShardSink(tmp_path, "ds2", INTENT, UNLIMITED, 2, schema=schema if statistics else None)
    with pytest.raises(StorageError, match=r"ds2/.*: cannot write: No space left on device"):
        again.write_many(records)  # (the first shard is published as the second begins)
    again.abort()
    assert list((tmp_path / "ds2").iterdir()) == []
