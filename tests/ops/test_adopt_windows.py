"""adopt's read of an uncompressed file a window at a time (ops/adopt.py, _read_windows): the
same count, checksum, record index and statistics as the record-by-record read, whatever the
windows cut; any damage reported exactly as the record-by-record read reports it."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from catalog import Catalog, RecordWriter
from catalog.errors import CatalogError
from catalog.ops import adopt as adoption
from catalog.stats import Tally
from catalog.stats import helper as helpers
from catalog.stats.dataset import DatasetStats
from catalog.tfrecord.example import encode_example
from tests.stats.test_stats_helper import ready_helper

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


# --------------------------------------------------------------------------- spans the statistics helper takes
@pytest.fixture
def helped(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[bool]]]:
    """A statistics helper up and ready; what Tally.offer_span and Tally.spans_held answered."""
    monkeypatch.setattr(helpers.SLOT, "failures", 0)
    ready_helper()
    answers: dict[str, list[bool]] = {"offer_span": [], "spans_held": []}
    for name, got in answers.items():
        real = getattr(Tally, name)

        def spy(self: Tally, *args: Any, _real: Any = real, _got: list[bool] = got) -> bool:
            _got.append(_real(self, *args))
            return _got[-1]

        monkeypatch.setattr(Tally, name, spy)
    yield answers
    assert not helpers.SLOT.busy, "an adoption kept the helper"


@pytest.mark.parametrize("big_every", [0, 40])
def test_spans_the_helper_checks_and_tallies_give_what_the_record_by_record_read_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helped: dict[str, list[bool]], big_every: int
) -> None:
    monkeypatch.setattr(adoption, "WINDOW", 1000)
    path = write(tmp_path / "part.tfrecord", 400, big_every)
    a = scanned(tmp_path, path, True)
    assert helped["offer_span"].count(True) >= 2 and helped["spans_held"] == [True]
    b = scanned(tmp_path, path, False)
    assert (a.records, a.bytes, a.checksum) == (b.records, b.bytes, b.checksum)
    assert a.offsets is not None and b.offsets is not None and np.array_equal(a.offsets, b.offsets)
    assert exact(a.stats) == exact(b.stats)


def refused_at(path: Path, bad: set[int], n: int = 300) -> Path:
    """``n`` records, well framed, those in ``bad`` of a type the schema refuses."""
    with RecordWriter(path) as w:
        for i in range(n):
            w.write(encode_example({"id": "text" if i in bad else i, "v": [1.0], "t": "x"}))
    return path


def adopt_error(tmp_path: Path, paths: list[Path], windows: bool) -> tuple[type, str]:
    cat = Catalog.init(tmp_path / f"cat-{windows}-{len(list(tmp_path.iterdir()))}")
    ds = cat.register("d", SCHEMA)
    with pytest.MonkeyPatch.context() as mp:
        if not windows:
            mp.setattr(adoption, "_read_windows", lambda *a: None)
        with pytest.raises(CatalogError) as e:
            ds.adopt(paths)
    assert cat.dataset("d").version == 1
    cat.close()
    return type(e.value), str(e.value)


def test_a_record_refused_in_the_helpers_span_is_reported_as_the_record_by_record_read_reports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helped: dict[str, list[bool]]
) -> None:
    """The helper, up and free, takes the file's first span: the record it refuses is there."""
    monkeypatch.setattr(adoption, "WINDOW", 1000)
    path = refused_at(tmp_path / "part.tfrecord", {2})
    got = adopt_error(tmp_path, [path], True)
    assert helped["offer_span"][0] is True and helped["spans_held"] == [False]
    assert got == adopt_error(tmp_path, [path], False)


def test_the_first_of_two_refused_files_is_named_though_each_file_is_finished_during_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helped: dict[str, list[bool]]
) -> None:
    monkeypatch.setattr(adoption, "WINDOW", 1000)
    paths = [refused_at(tmp_path / "a.tfrecord", {2}), refused_at(tmp_path / "b.tfrecord", {1})]
    got = adopt_error(tmp_path, paths, True)
    assert "a.tfrecord" in got[1]
    assert got == adopt_error(tmp_path, paths, False)


def test_a_helper_killed_while_it_holds_spans_loses_no_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helped: dict[str, list[bool]]
) -> None:
    """The spans it took unanswered, the file is read again record by record: the same result."""
    monkeypatch.setattr(adoption, "WINDOW", 1000)
    real = helpers.Helper.offer_span

    def then_killed(self: helpers.Helper, *args: Any) -> bool:
        taken = real(self, *args)
        if taken:
            self.proc.kill()
            self.proc.wait()
        return taken

    monkeypatch.setattr(helpers.Helper, "offer_span", then_killed)
    path = write(tmp_path / "part.tfrecord", 400)
    a = scanned(tmp_path, path, True)
    assert helped["spans_held"] == [False]
    monkeypatch.setattr(helpers.Helper, "offer_span", real)
    b = scanned(tmp_path, path, False)
    assert (a.records, a.checksum) == (b.records, b.checksum)
    assert exact(a.stats) == exact(b.stats)


def test_several_files_with_the_helper_give_what_they_give_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, helped: dict[str, list[bool]]
) -> None:
    monkeypatch.setattr(adoption, "WINDOW", 1000)
    folder = tmp_path / "in"
    folder.mkdir()
    for k in range(4):
        write(folder / f"part-{k}.tfrecord", 300 + 50 * k)
    stats = []
    real = adoption._scanned
    for helper in (True, False):
        monkeypatch.setattr(helpers.SLOT, "enabled", helper)
        found: list[adoption.Scanned] = []
        monkeypatch.setattr(adoption, "_scanned", lambda *a, _found=found: _found.append(real(*a)) or _found[-1])
        cat = Catalog.init(tmp_path / f"cat-{helper}")
        assert cat.register("d", SCHEMA).adopt([folder]).records == 300 + 350 + 400 + 450
        stats.append([(f.records, exact(f.stats)) for f in found])
        cat.close()
    assert helped["offer_span"].count(True) >= 4
    assert stats[0] == stats[1]
