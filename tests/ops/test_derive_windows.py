"""filter and map read an uncompressed, indexed source shard as checked windows of its bytes
(catalog/readers/spans.py), and a filter copies its kept records' framing as it was: the files,
rows and statistics are those the record-by-record path makes, TensorFlow reads them, and a
damaged source record is one line naming the shard and the record."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from catalog import Catalog
from catalog.errors import CatalogError, DatasetNotFoundError
from catalog.ops import derive
from catalog.tfrecord import native
from catalog.tfrecord.framing import RecordWriter, read_record_batches

SCHEMA = {
    "features": {
        "id": {"dtype": "int64"},
        "label": {"dtype": "int64", "names": ["cat", "dog", "bird"]},
        "name": {"dtype": "string"},
        "score": {"dtype": "float32", "optional": True},
    }
}


def _source(tmp_path: Path) -> tuple[Any, Any]:
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("src", SCHEMA)
    for k, split in enumerate(["train", "test", "train"]):
        rows = [
            {"id": i, "label": i % 3, "name": f"n{i}é" * (i % 5), "score": None if i % 4 == 0 else i / 10}
            for i in range(k * 400, k * 400 + 400)
        ]
        ds.append_rows(rows, split=split)
    return cat, cat.dataset("src")


def _windows_read(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The source shards read as windows from here (the list grows as they are)."""
    read: list[str] = []
    windows = derive.shard_windows

    def spy(path: str, *args: Any) -> Any:
        read.append(path)
        return windows(path, *args)

    monkeypatch.setattr(derive, "shard_windows", spy)
    return read


def _record_by_record(monkeypatch: pytest.MonkeyPatch) -> None:
    """Derivations from here read their sources as batches of records, as before windows."""
    job = derive._job
    monkeypatch.setattr(derive, "_job", lambda *a: replace(job(*a), index_checksum=None))


def _files(cat: Any, name: str) -> list[bytes]:
    return [Path(s.path).read_bytes() for s in cat.dataset(name).shards()]


def _stats(cat: Any, name: str) -> Any:
    """The statistics but the quantile sketches' figures (random: two runs of one path differ)."""
    sketched = ("quantiles", "histogram")
    return [{k: v for k, v in f.items() if k not in sketched} for f in cat.dataset(name).stats().to_json()["features"]]


def keep_even(row: dict[str, Any]) -> bool:
    return row["id"] % 2 == 0


def keep_even_batch(batch: dict[str, np.ndarray]) -> np.ndarray:
    return batch["id"] % 2 == 0


def lengths(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    batch["length"] = np.array([len(t) for t in batch["name"]], dtype=np.int64)
    return batch


WHERE = [("label = 'dog' AND score > 3", False), (keep_even, False), (keep_even_batch, True)]


@pytest.mark.parametrize(("where", "batched"), WHERE)
def test_a_filter_copies_the_kept_records_as_the_record_path_writes_them(tmp_path, monkeypatch, tf, where, batched):
    cat, src = _source(tmp_path)
    read = _windows_read(monkeypatch)
    src.filter(where, into="fast", batched=batched, workers=1)
    assert read == [s.path for s in src.shards()]
    _record_by_record(monkeypatch)
    src.filter(where, into="slow", batched=batched, workers=1)
    assert len(read) == 3
    assert _files(cat, "fast") == _files(cat, "slow") and _stats(cat, "fast") == _stats(cat, "slow")
    fast = cat.dataset("fast")
    assert [s.split for s in fast.shards()] == ["train", "test", "train"]
    for shard, source in zip(fast.shards(), src.shards(), strict=True):
        records = [r for b in read_record_batches(source.path) for r in b]
        kept = [r for r in records if _keeps(src.schema.decode(r), where)]
        expected = tmp_path / "expected.tfrecord"
        with RecordWriter(expected) as w:
            for r in kept:
                w.write(r)
        assert Path(shard.path).read_bytes() == expected.read_bytes() and shard.records == len(kept)
        assert [raw.numpy() for raw in tf.data.TFRecordDataset(shard.path)] == kept


def _keeps(row: dict[str, Any], where: Any) -> bool:
    if where is keep_even or where is keep_even_batch:
        return bool(row["id"] % 2 == 0)
    return bool(row["label"] == 1 and row["score"] is not None and row["score"] > 3)


@pytest.mark.parametrize("batched", [False, True])
def test_a_map_reads_windows_into_the_files_the_record_path_makes(tmp_path, monkeypatch, batched):
    cat, src = _source(tmp_path)
    fn = lengths if batched else (lambda row: {**row, "length": len(row["name"])})
    read = _windows_read(monkeypatch)
    src.map(fn, into="fast", batched=batched, workers=1)
    _record_by_record(monkeypatch)
    src.map(fn, into="slow", batched=batched, workers=1)
    assert len(read) == 3
    assert _files(cat, "fast") == _files(cat, "slow") and _stats(cat, "fast") == _stats(cat, "slow")
    assert [r["length"] for r in cat.dataset("fast").read()][:6] == [0, 3, 6, 9, 12, 0]


@pytest.mark.usefixtures("every_index_a_file")  # (tiny shards: see the fixture)
@pytest.mark.parametrize(("what", "at"), [("a damaged record header", 3), ("a data CRC mismatch", 20)])
def test_a_damaged_source_record_fails_the_filter_in_one_line_and_registers_nothing(tmp_path, what, at):
    cat, src = _source(tmp_path)
    shard = src.shards()[1]
    offsets = np.fromfile(cat.store.index_url(shard.relpath), dtype="<u8")
    data = bytearray(Path(shard.path).read_bytes())
    data[int(offsets[77]) + at] ^= 0x10
    Path(shard.path).write_bytes(bytes(data))
    with pytest.raises(CatalogError) as e:
        src.filter("id > 0", into="out", workers=1)
    assert str(e.value) == (
        f"{shard.path}: record 77 (byte {int(offsets[77])}): registered an intact record, found {what}"
        " (changed after its commit?)"
    )
    with pytest.raises(DatasetNotFoundError):
        cat.dataset("out")


def test_a_source_shard_is_checked_by_its_whole_file_checksum_not_a_crc_a_record(tmp_path, monkeypatch):
    from catalog.readers import spans

    cat, src = _source(tmp_path)
    checks: list[bool] = []
    check = spans.framing_fault
    monkeypatch.setattr(spans, "framing_fault", lambda *a: checks.append(a[-1]) or check(*a))
    src.filter("id > 3", into="fast", workers=1)
    assert len(checks) == 3 and not any(checks)  # one window a shard, its headers alone
    _record_by_record(monkeypatch)
    src.filter("id > 3", into="slow", workers=1)
    assert _files(cat, "fast") == _files(cat, "slow")


def test_a_batched_map_encodes_its_array_columns_into_the_files_lists_of_their_values_make(tmp_path, monkeypatch):
    from catalog.schema import frames

    cat, src = _source(tmp_path)
    src.map(lengths, into="arrays", batched=True, workers=1)
    batches = frames.column_batches
    monkeypatch.setattr(derive, "column_batches", lambda out, features, arrays: batches(out, features))
    src.map(lengths, into="lists", batched=True, workers=1)
    assert _files(cat, "arrays") == _files(cat, "lists") and _stats(cat, "arrays") == _stats(cat, "lists")
    assert list(cat.dataset("arrays").read())[5] == {**list(src.read())[5], "length": 0}


def test_a_filter_tallies_its_kept_records_decoded_where_they_lie(tmp_path, monkeypatch):
    from catalog.stats.tally import Tally
    from catalog.tfrecord.example import encode_example

    cat = Catalog.init(tmp_path / "cat")
    schema = {"features": {"id": {"dtype": "int64"}, "d": {"dtype": "int64", "default": 7}}}
    src = cat.register("src", schema)
    given = tmp_path / "given.tfrecord"  # records lacking "d": they read its default, counted as filled
    with RecordWriter(given) as w:
        for i in range(300):
            w.write(encode_example({"id": [i]} if i % 3 else {"id": [i], "d": [i]}))
    src.append_files([given])
    src = cat.dataset("src")
    calls: list[int] = []
    add = Tally.add_decoded_columns
    monkeypatch.setattr(Tally, "add_decoded_columns", lambda self, c, n, *a: calls.append(n) or add(self, c, n, *a))
    src.filter("id > 10", into="fast", workers=1)
    assert calls == [289]
    _record_by_record(monkeypatch)
    src.filter("id > 10", into="slow", workers=1)
    assert calls == [289] and _files(cat, "fast") == _files(cat, "slow")
    assert _stats(cat, "fast") == _stats(cat, "slow")
    assert _stats(cat, "fast")[1]["filled"] == len([i for i in range(11, 300) if i % 3])


PLAIN = {"features": {"id": {"dtype": "int64"}, "name": {"dtype": "string"}, "score": {"dtype": "float32"}}}


@pytest.mark.parametrize("statistics", [True, False])
def test_a_batched_maps_plain_records_go_out_framed_as_the_writer_frames_them(tmp_path, monkeypatch, tf, statistics):
    from catalog.schema import packing

    cat = Catalog.init(tmp_path / "cat")
    cat.statistics = statistics
    src = cat.register("src", PLAIN)
    rows = [{"id": i * 997, "name": f"n{i}é" * (i % 5), "score": i / 10} for i in range(700)]
    src.append_rows(rows[:300], split="train")
    src.append_rows(rows[300:], split="test")
    framed: list[int] = []
    where = "_records" if native.NATIVE is None else "_encode_native"  # (NumPy's layout, or the C loop)
    lay_out = getattr(packing, where)
    monkeypatch.setattr(packing, where, lambda p, v, n, f: (f is not None and framed.append(n)) or lay_out(p, v, n, f))
    cat.dataset("src").map(lengths, into="framed", batched=True, workers=1)
    assert framed == [300, 400]  # a shard's batch laid out with its framing
    encoded = derive._Program.encoded
    monkeypatch.setattr(derive._Program, "encoded", lambda self, c, n, t, _framed=None: encoded(self, c, n, t))
    cat.dataset("src").map(lengths, into="unframed", batched=True, workers=1)
    assert framed == [300, 400] and _files(cat, "framed") == _files(cat, "unframed")
    if statistics:
        assert _stats(cat, "framed") == _stats(cat, "unframed")
    got = []
    for shard in cat.dataset("framed").shards():
        for raw in tf.data.TFRecordDataset(shard.path):
            feature = tf.train.Example.FromString(raw.numpy()).features.feature
            got.append((feature["id"].int64_list.value[0], feature["length"].int64_list.value[0]))
    assert got == [(r["id"], len(r["name"])) for r in rows]
    assert [s.split for s in cat.dataset("framed").shards()] == ["train", "test"]
