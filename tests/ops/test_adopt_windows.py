"""adopt's read of an uncompressed file a window at a time (ops/adopt.py, _read_windows): the
same count, checksum, record index and statistics as the record-by-record read, whatever the
windows cut; any damage reported exactly as the record-by-record read reports it."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from catalog import Catalog, RecordWriter
from catalog.errors import CatalogError
from catalog.ops import adopt as adoption
from catalog.stats.dataset import DatasetStats
from catalog.tfrecord.example import encode_example

SCHEMA = {
    "features": {
        "id": {"dtype": "int64"},
        "v": {"dtype": "float32", "shape": [None]},
        "t": {"dtype": "string"},
        "o": {"dtype": "int64", "optional": True},
    }
}


def write(path: Path, n: int, big_every: int = 0) -> Path:
    """``n`` records of varying sizes; with ``big_every``, every such record is a large one."""
    with RecordWriter(path) as w:
        for i in range(n):
            size = 3000 if big_every and i % big_every == 0 else i % 7
            row: dict[str, Any] = {"id": i, "v": [i / 3] * size, "t": "x" * (i % 11)}
            if i % 3:
                row["o"] = -i
            w.write(encode_example(row))
    return path


def scanned(tmp_path: Path, path: Path, windows: bool) -> adoption.Scanned:
    """What adopt's scan finds of ``path``, read a window at a time or record by record."""
    cat = Catalog.init(tmp_path / f"cat-{windows}-{path.stem}")
    ds = cat.register("d", SCHEMA)
    found: list[adoption.Scanned] = []
    real = adoption._scanned

    def keep(*args: Any, **kw: Any) -> adoption.Scanned:
        found.append(real(*args, **kw))
        return found[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(adoption, "_scanned", keep)
        if not windows:
            mp.setattr(adoption, "_read_windows", lambda *a: None)
        ds.adopt([path])
    cat.close()
    return found[0]


@pytest.mark.parametrize("window", [64, 1000, 1 << 20])
@pytest.mark.parametrize("big_every", [0, 40])
def test_windows_find_what_the_record_by_record_read_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, window: int, big_every: int
) -> None:
    """Windows smaller than a record, cutting records anywhere, or holding the whole file."""
    monkeypatch.setattr(adoption, "WINDOW", window)
    path = write(tmp_path / "part.tfrecord", 300, big_every)
    a, b = scanned(tmp_path, path, True), scanned(tmp_path, path, False)
    assert (a.records, a.bytes, a.checksum, a.compression) == (b.records, b.bytes, b.checksum, b.compression)
    assert a.offsets is not None and b.offsets is not None and np.array_equal(a.offsets, b.offsets)
    assert exact(a.stats) == exact(b.stats)


def exact(stats: bytes | None) -> dict[str, Any]:
    """The statistics' exact parts (counts, extremes; moments to float rounding): the sketches
    depend on how records were batched, within their stated error."""
    assert stats is not None
    ds = DatasetStats.from_bytes(stats)
    out: dict[str, Any] = {"records": ds.records}
    for name, fs in ds.features.items():
        counts = (fs.records, fs.present, fs.filled, fs.missing, fs.zeros, fs.nans, fs.infs)
        v = fs.values
        out[name] = (counts, v.count, v.min, v.max, round(v.mean, 6))
    return out


def test_an_uncompressed_file_is_not_framed_record_by_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "part.tfrecord", 50)
    framed: list[int] = []
    real = adoption.read_record_batches

    def counted(*args: Any, **kw: Any) -> Any:
        framed.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(adoption, "read_record_batches", counted)
    cat = Catalog.init(tmp_path / "cat")
    cat.register("d", SCHEMA).adopt([path])
    assert framed == []


def damaged(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "data CRC":
        data[len(data) // 2] ^= 0x01
    elif how == "header CRC":
        data[8] ^= 0x01
    elif how == "length":
        first = struct.unpack_from("<Q", data)[0]
        struct.pack_into("<Q", data, 16 + first, 1 << 40)  # the second record's length: huge
    elif how == "truncated":
        del data[-7:]
    elif how == "trailing":
        data += b"\0\0\0"
    elif how == "a record the schema refuses":
        bad = encode_example({"id": "text", "v": [1.0], "t": "x"})
        data += struct.pack("<Q", len(bad)) + b"\0" * 4 + bad + b"\0" * 4  # its CRCs wrong too
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["data CRC", "header CRC", "length", "truncated", "trailing"])
@pytest.mark.parametrize("window", [100, 1 << 20])
def test_damage_is_reported_as_the_record_by_record_read_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, window: int
) -> None:
    monkeypatch.setattr(adoption, "WINDOW", window)
    path = write(tmp_path / "part.tfrecord", 200)
    damaged(path, how)
    errors = []
    for windows in (True, False):
        cat = Catalog.init(tmp_path / f"cat-{windows}")
        ds = cat.register("d", SCHEMA)
        with pytest.MonkeyPatch.context() as mp:
            if not windows:
                mp.setattr(adoption, "_read_windows", lambda *a: None)
            with pytest.raises(CatalogError) as e:
                ds.adopt([path])
        errors.append((type(e.value), str(e.value)))
        assert cat.dataset("d").version == 1
    assert errors[0] == errors[1]
