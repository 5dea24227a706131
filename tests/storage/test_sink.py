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
