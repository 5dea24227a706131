"""Shard files one at a time (catalog/storage/files.py): read no further than registered,
checksummed, copied with their checksum checked; every fault one line naming the shard."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from crc32c import crc32c

from catalog.errors import CatalogError, CorruptRecordError, CorruptShardError, VersionNotFoundError
from catalog.storage.fileio import publish
from catalog.storage.files import (
    copy_verified,
    damaged_shard,
    file_checksum,
    format_checksum,
    location_exists,
    location_size,
    open_shard,
    shard_batches,
    shard_missing,
)
from catalog.tfrecord.framing import RecordWriter


def _shard(path: Path, records: list[bytes]) -> Path:
    with open(path, "wb") as f:
        writer = RecordWriter(f)
        for r in records:
            writer.write(r)
        writer.close()
    return path


def test_file_checksum_is_crc32c_of_every_byte_and_stops_past_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    path.write_bytes(b"hello world")
    assert format_checksum(0xAB) == "crc32c:000000ab"
    assert file_checksum(path) == (11, format_checksum(crc32c(b"hello world")))
    seen: list[bytes] = []
    assert file_checksum(path, limit=4, tap=lambda chunk: seen.append(bytes(chunk)))[0] == 5  # one byte more
    assert b"".join(seen) == b"hello"


def test_a_shard_read_with_its_registered_size_must_be_that_size(tmp_path: Path) -> None:
    path = _shard(tmp_path / "s.tfrecord", [b"a", b"bb", b"ccc"])
    size = path.stat().st_size
    assert [r for batch in shard_batches(str(path), size) for r in batch] == [b"a", b"bb", b"ccc"]
    with open_shard(str(path), size - 1) as f, pytest.raises(CorruptShardError) as longer:
        f.read()
    assert str(longer.value) == f"{path}: more than the {size - 1} bytes registered; run `catalog verify`"
    with open_shard(str(path), size + 5) as f, pytest.raises(CorruptShardError) as shorter:
        f.read()
    assert str(shorter.value) == f"{path}: {size} bytes, {size + 5} registered; run `catalog verify`"
    assert (shorter.value.what, shorter.value.found) == ("size", f"{size} bytes")


def test_what_is_no_regular_file_is_refused_and_a_missing_location_has_no_size(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"x" * 3)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(CatalogError) as e:
        open_shard(str(tmp_path / "link"))
    assert (
        str(e.value) == f"{tmp_path / 'link'}: a symbolic link; the catalog reads only regular files in its data area"
    )
    assert location_size(str(tmp_path / "real")) == 3
    assert location_size(str(tmp_path / "gone")) is None
    assert location_exists(str(tmp_path / "real")) and not location_exists(str(tmp_path / "gone"))
    missing = shard_missing("d/a.tfrecord")
    assert isinstance(missing, VersionNotFoundError)
    assert str(missing) == "d/a.tfrecord: shard file is missing (collected by gc, or deleted by hand)"


def test_copy_verified_extends_the_crc_and_refuses_a_changed_or_missing_shard(tmp_path: Path) -> None:
    path = tmp_path / "s.bin"
    path.write_bytes(b"payload")
    good = format_checksum(crc32c(b"payload"))
    out = io.BytesIO()
    crc = copy_verified(str(path), 7, good, out, crc32c(b"head"), bytearray(3))
    assert out.getvalue() == b"payload" and crc == crc32c(b"headpayload")
    with pytest.raises(CorruptShardError, match=r"its content changed after it was registered"):
        copy_verified(str(path), 7, "crc32c:00000000", io.BytesIO(), 0, bytearray(16))
    with pytest.raises(CatalogError) as e:
        copy_verified(str(path), 9, good, io.BytesIO(), 0, bytearray(16))
    assert str(e.value) == (
        f"{path}: checksum {good} (7 bytes), {good} (9 bytes) registered: the shard is damaged "
        "(run `catalog verify`); nothing was written"
    )
    with pytest.raises(VersionNotFoundError, match=r"shard file is missing"):
        copy_verified(str(tmp_path / "gone"), 1, good, io.BytesIO(), 0, bytearray(16))


def test_publish_renames_and_damaged_shard_names_the_byte(tmp_path: Path) -> None:
    temp, final = tmp_path / ".s.tmp", tmp_path / "s"
    f = open(temp, "wb")  # noqa: SIM115 (publish closes it)
    f.write(b"data")
    publish(f, temp, final)
    assert f.closed and final.read_bytes() == b"data" and not temp.exists()
    err = damaged_shard("d/s", CorruptRecordError("bad length crc", "x", 12), start=100)
    assert str(err) == "d/s: byte 112: bad length crc"
    zipped = damaged_shard("d/s", CorruptRecordError("bad data", "x", 3, compressed=True))
    assert str(zipped) == "d/s: byte 3 of its decompressed stream: bad data"
