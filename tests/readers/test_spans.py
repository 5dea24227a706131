"""shard_windows (catalog/readers/spans.py): a registered uncompressed shard read as checked
windows of its bytes; the records, their framed copies, and every kind of damage named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from catalog import Catalog
from catalog.errors import CatalogError, CorruptShardError
from catalog.readers import spans
from catalog.readers.spans import shard_windows
from catalog.tfrecord.framing import RecordWriter, read_record_batches

SCHEMA = {"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string"}}}


def _shard(tmp_path: Path, n: int = 300) -> tuple[Any, Any, Any]:
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("ds", SCHEMA)
    ds.append_rows([{"id": i, "text": "t" * (i % 50)} for i in range(n)])
    (shard,) = cat.dataset("ds").shards()
    return cat, ds, shard


def _windows(cat: Any, shard: Any, pad: int = 0, checksum: str | None = None) -> list[spans.Window]:
    where = cat.store.index_url(shard.relpath)
    return list(shard_windows(shard.path, where, shard.records, shard.bytes, shard.index_checksum, pad, checksum))


def _data_checks(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each framing check from here checks the records' data CRCs too."""
    seen: list[bool] = []
    check = spans.framing_fault

    def spy(*args: Any) -> Any:
        seen.append(args[-1])
        return check(*args)

    monkeypatch.setattr(spans, "framing_fault", spy)
    return seen


@pytest.mark.parametrize("trusted", [False, True])
def test_windows_hold_every_record_in_order_and_copy_them_framed(tmp_path, monkeypatch, trusted):
    cat, _ds, shard = _shard(tmp_path)
    monkeypatch.setattr(spans, "WINDOW_BYTES", 1000)  # many windows, a record never cut
    records = [r for b in read_record_batches(shard.path) for r in b]
    windows = _windows(cat, shard, pad=16, checksum=shard.checksum if trusted else None)
    assert len(windows) > 5 and [w.first for w in windows] == list(np.cumsum([0] + [len(w) for w in windows])[:-1])
    assert [r for w in windows for r in w.records()] == records
    assert all(w.raw.endswith(bytes(16)) for w in windows)
    keep = np.array([0, 1, 2, 5, 9], dtype=np.int64)  # runs and gaps
    framed, lengths = windows[1].framed(keep)
    kept = [windows[1].records()[i] for i in keep.tolist()]
    out = tmp_path / "out.tfrecord"
    with RecordWriter(out) as w:
        w.write_many(kept)
    assert framed == out.read_bytes() and lengths == [len(r) for r in kept]
    assert windows[1].records(keep) == kept and windows[1].framed(keep[:0]) == (b"", [])


def _damage(path: str, at: int) -> None:
    data = bytearray(Path(path).read_bytes())
    data[at] ^= 0x40
    Path(path).write_bytes(bytes(data))


@pytest.mark.usefixtures("every_index_a_file")  # (tiny shards: see the fixture)
@pytest.mark.parametrize("trusted", [False, True])
@pytest.mark.parametrize(("where", "found"), [(2, "a damaged record header"), (30, "a data CRC mismatch")])
def test_a_damaged_record_is_named_with_its_shard_record_and_byte(tmp_path, monkeypatch, where, found, trusted):
    cat, _ds, shard = _shard(tmp_path)
    monkeypatch.setattr(spans, "WINDOW_BYTES", 1000)  # the damage in a window after the first
    offsets = np.fromfile(cat.store.index_url(shard.relpath), dtype="<u8")
    _damage(shard.path, int(offsets[200]) + where)
    with pytest.raises(CorruptShardError) as e:
        _windows(cat, shard, checksum=shard.checksum if trusted else None)
    assert str(e.value) == (
        f"{shard.path}: record 200 (byte {int(offsets[200])}): registered an intact record, found {found}"
        " (changed after its commit?)"
    )


def test_a_file_longer_or_shorter_than_registered_is_one_line(tmp_path):
    cat, _ds, shard = _shard(tmp_path)
    data = Path(shard.path).read_bytes()
    Path(shard.path).write_bytes(data + b"\0")
    with pytest.raises(CatalogError, match=f"more than the {len(data)} bytes registered; run `catalog verify`"):
        _windows(cat, shard)
    Path(shard.path).write_bytes(data[:-3])
    with pytest.raises(CatalogError, match=f": {len(data) - 3} bytes, {len(data)} registered; run `catalog verify`"):
        _windows(cat, shard)


def test_a_shard_whose_checksum_is_known_is_checked_by_it_not_a_crc_a_record(tmp_path, monkeypatch):
    cat, _ds, shard = _shard(tmp_path)
    monkeypatch.setattr(spans, "WINDOW_BYTES", 1000)
    seen = _data_checks(monkeypatch)
    trusted = _windows(cat, shard, checksum=shard.checksum)
    assert len(seen) == len(trusted) > 5 and not any(seen)  # the headers alone
    assert len({id(w.raw) for w in trusted}) == 1  # one read of the whole file
    seen.clear()
    checked = _windows(cat, shard)
    assert len(seen) == len(checked) and all(seen)
    assert [r for w in trusted for r in w.records()] == [r for w in checked for r in w.records()]
    keep = np.array([0, 3, 4], dtype=np.int64)
    assert [w.framed(keep) for w in trusted] == [w.framed(keep) for w in checked]


def test_a_shard_over_the_trusted_size_or_of_another_checksum_is_checked_a_record_at_a_time(tmp_path, monkeypatch):
    cat, _ds, shard = _shard(tmp_path)
    seen = _data_checks(monkeypatch)
    monkeypatch.setattr(spans, "TRUST_BYTES", shard.bytes - 1)
    _windows(cat, shard, checksum=shard.checksum)
    monkeypatch.setattr(spans, "TRUST_BYTES", shard.bytes)
    _windows(cat, shard, checksum="sha256:" + "0" * 64)  # not the algorithm this reader computes
    _windows(cat, shard, checksum=shard.checksum)
    assert seen == [True, True, False]


def test_intact_records_under_another_registered_checksum_are_refused_before_any_is_read(tmp_path):
    cat, _ds, shard = _shard(tmp_path)
    wrong = "crc32c:" + ("0" * 8 if shard.checksum != "crc32c:00000000" else "1" * 8)
    windows = shard_windows(
        shard.path, cat.store.index_url(shard.relpath), shard.records, shard.bytes, shard.index_checksum, 0, wrong
    )
    with pytest.raises(CorruptShardError, match=f"its content changed after it was registered .*{wrong} registered"):
        next(windows)
