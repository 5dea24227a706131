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


def _windows(cat: Any, shard: Any, pad: int = 0) -> list[spans.Window]:
    where = cat.store.index_url(shard.relpath)
    return list(shard_windows(shard.path, where, shard.records, shard.bytes, shard.index_checksum, pad))


def test_windows_hold_every_record_in_order_and_copy_them_framed(tmp_path, monkeypatch):
    cat, _ds, shard = _shard(tmp_path)
    monkeypatch.setattr(spans, "WINDOW_BYTES", 1000)  # many windows, a record never cut
    records = [r for b in read_record_batches(shard.path) for r in b]
    windows = _windows(cat, shard, pad=16)
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


@pytest.mark.parametrize(("where", "found"), [(2, "a damaged record header"), (30, "a data CRC mismatch")])
def test_a_damaged_record_is_named_with_its_shard_record_and_byte(tmp_path, where, found):
    cat, _ds, shard = _shard(tmp_path)
    offsets = np.fromfile(cat.store.index_url(shard.relpath), dtype="<u8")
    _damage(shard.path, int(offsets[200]) + where)
    with pytest.raises(CorruptShardError) as e:
        _windows(cat, shard)
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
