"""dedup (catalog/ops/dedup.py): the rows left equal those a seen-set over ``ds.read()`` keeps,
only the shards holding a duplicate are rewritten, memory stays in bounded partitions, and
every failure or dry run leaves the dataset (and the data area) as it was."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from catalog import Catalog, RecordWriter
from catalog.errors import FeatureNotFoundError, UsageError
from catalog.ops import dedup as dd
from catalog.ops import rowchanges
from tests.catalogs import made

SCHEMA = {
    "features": {
        "id": {"dtype": "int64", "shape": []},
        "k": {"dtype": "int64", "shape": []},
        "name": {"dtype": "string", "shape": []},
        "score": {"dtype": "float32", "shape": [], "optional": True},
        "tags": {"dtype": "string", "shape": [None]},
        "vec": {"dtype": "float32", "shape": [2]},
    }
}


def _rows(start: int, n: int) -> list[dict[str, Any]]:
    """Rows with many repeated keys: k cycles over 7 values, name over 5, score over 3 (or absent)."""
    return [
        {
            "id": i,
            "k": (i * 3) % 7,
            "name": f"n{i % 5}",
            "score": None if i % 4 == 0 else float(i % 3),
            "tags": ["t"] * (i % 3),
            "vec": [float(i % 2), 0.5],
        }
        for i in range(start, start + n)
    ]


def _dataset(root: Path, shards: int = 3, per: int = 10, splits: tuple[str, ...] = ("train",), **kw: Any) -> Any:
    return made(root, SCHEMA, _rows, shards, per, splits, **kw)


def _frozen(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        value = value.tolist()
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def _key(row: dict[str, Any], key: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(_frozen(row[k]) for k in key)


def _expected(rows: list[dict[str, Any]], key: tuple[str, ...], per_split: list[str] | None = None) -> list[int]:
    """The ids a seen-set keeps: the first of each key, in the order given."""
    seen: set[Any] = set()
    out = []
    for i, row in enumerate(rows):
        k = (_key(row, key), per_split[i] if per_split else None)
        if k not in seen:
            seen.add(k)
            out.append(row["id"])
    return out


def _ids(ds: Any, version: int | None = None, split: str | None = None) -> list[int]:
    return [r["id"] for r in ds.read(version, split)]


def _splits_of(ds: Any) -> list[str]:
    return [s.split for s in ds.shards() for _ in range(s.records)]


def _paths(ds: Any) -> set[str]:
    return {s.path for s in ds.shards()}


def test_dedup_keeps_the_first_of_each_key_across_shards_and_splits(tmp_path, backend):
    ds = _dataset(tmp_path, splits=("train", "test"))
    before, rows, version = _paths(ds), list(ds.read()), ds.info().version
    expected = _expected(rows, ("k",))
    assert len(expected) == 7 and expected[:3] == [0, 1, 2]

    report = ds.dedup("k")

    assert _ids(ds) == expected
    assert (report.rows, report.records_after, report.version) == (60 - 7, 7, version + 1)
    assert report.shards == len(before - _paths(ds)) == 6  # every shard holds a duplicate here
    assert _ids(ds, version) == [r["id"] for r in rows]  # time travel: the old version whole
    assert ds.history()[-1].kind == "dedup"
    assert ds.info().records == 7


def test_only_the_shards_holding_a_duplicate_are_rewritten(tmp_path, backend):
    ds = _dataset(tmp_path, shards=4, per=5)
    before = _paths(ds)
    report = ds.dedup("id")  # ids are unique: nothing to do
    assert (report.rows, report.version) == (0, None)
    ds.append_rows([{**_rows(7, 1)[0]}, {**_rows(13, 1)[0]}])  # ids 7 and 13 again, in a new shard
    report = ds.dedup(["id"])
    assert report.rows == 2 and report.shards == 1
    assert before <= _paths(ds)  # the four first shards are kept as they were
    assert _ids(ds) == list(range(20))


def test_per_split_keeps_the_first_of_each_key_in_each_split(tmp_path, backend):
    ds = _dataset(tmp_path, shards=2, per=10, splits=("train", "test", "valid"))
    rows, splits = list(ds.read()), _splits_of(ds)
    report = ds.dedup(["k", "name"], per_split=True)
    assert _ids(ds) == _expected(rows, ("k", "name"), splits)
    assert report.per_split and report.to_json()["per_split"] is True
    for split in ("train", "test", "valid"):  # each split's rows as a dedup of that split alone
        part = [r for r, s in zip(rows, splits, strict=True) if s == split]
        assert _ids(ds, split=split) == _expected(part, ("k", "name"))


def test_split_dedups_that_splits_rows_only(tmp_path):
    ds = _dataset(tmp_path, shards=2, per=10, splits=("train", "test"))
    rows, splits = list(ds.read()), _splits_of(ds)
    ds.dedup("k", split="test")
    test = [r for r, s in zip(rows, splits, strict=True) if s == "test"]
    assert _ids(ds, split="train") == list(range(20))
    assert _ids(ds, split="test") == _expected(test, ("k",))


def test_optional_list_and_array_features_absent_equals_absent(tmp_path, backend):
    ds = _dataset(tmp_path, shards=2, per=12)
    rows = list(ds.read())
    for key in (("score",), ("tags",), ("vec",), ("score", "tags", "vec")):
        version = ds.info().version
        report = ds.dedup(list(key), dry_run=True)
        assert report.rows == len(rows) - len(_expected(rows, key)), key
        assert ds.info().version == version
    ds.dedup(["score"])
    assert _ids(ds) == _expected(rows, ("score",)) == [0, 1, 2, 3]  # 0: absent; 1, 2, 3: 1.0, 2.0, 0.0


def test_floats_by_value_nan_equals_nan_and_minus_zero_equals_zero(tmp_path):
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("f", {"features": {"id": {"dtype": "int64"}, "x": {"dtype": "float32", "shape": [None]}}})
    values = [[math.nan], [0.0], [-0.0], [math.nan], [1.0, math.nan], [1.0, float("nan")], [], [0.0, 0.0], []]
    ds.append_rows([{"id": i, "x": v} for i, v in enumerate(values)])
    ds.dedup("x")
    assert _ids(ds) == [0, 1, 4, 6, 7]


def test_content_is_whole_record_identity(tmp_path, backend):
    ds = _dataset(tmp_path, shards=2, per=5)
    rows = _rows(0, 5)
    ds.append_rows(rows[1:3])  # two exact copies
    ds.append_rows([{**rows[3], "name": "other"}])  # a copy with one feature changed: not a duplicate
    report = ds.dedup(content=True)
    assert report.rows == 2 and report.key == [] and report.to_json()["content"] is True
    assert _ids(ds) == [*range(10), 3]


def test_sequence_example_datasets(tmp_path):
    schema = {
        "features": {"id": {"dtype": "int64"}, "lang": {"dtype": "string"}},
        "sequence_features": {"tokens": {"dtype": "int64"}, "words": {"dtype": "string", "shape": [None]}},
    }
    ds = Catalog.init(tmp_path / "cat").register("s", schema)
    seqs = [([1, 2], [["a"], ["b", "c"]]), ([1, 2], [["a"], ["b"]]), ([], []), ([1, 2], [["a"], ["b", "c"]])]
    ds.append_rows([{"id": i, "lang": "en", "tokens": t, "words": w} for i, (t, w) in enumerate(seqs)])
    ds.append_rows([{"id": 10 + i, "lang": "fr", "tokens": t, "words": w} for i, (t, w) in enumerate(seqs)])
    rows = list(ds.read())
    for key in (("tokens",), ("words",), ("lang", "words")):
        assert ds.dedup(list(key), dry_run=True).rows == len(rows) - len(_expected(rows, key)), key
    ds.dedup(["words"])
    assert _ids(ds) == [0, 1, 2]
    ds.dedup(content=True)
    assert _ids(ds) == [0, 1, 2]


def test_compressed_and_adopted_shards(tmp_path):
    ds = _dataset(tmp_path, shards=2, per=5, compression="gzip")
    outside = tmp_path / "outside.tfrecord"
    with RecordWriter(outside) as w:
        for row in _rows(100, 5):
            w.write(ds.schema.encode(row))
    before = outside.read_bytes()
    ds.adopt([outside])
    rows = list(ds.read())
    ds.dedup("name")
    assert _ids(ds) == _expected(rows, ("name",)) == [0, 1, 2, 3, 4]
    assert outside.read_bytes() == before  # not the catalog's file: read, never changed
    assert {s.compression for s in ds.shards()} == {"gzip"}


def test_workers_give_the_same_result(tmp_path):
    ds = _dataset(tmp_path, shards=4, per=10)
    rows = list(ds.read())
    report = ds.dedup(["k", "name"], workers=2)
    assert _ids(ds) == _expected(rows, ("k", "name")) and report.rows == 40 - 35


def test_tiny_partitions_give_the_same_result_in_bounded_pieces(tmp_path, monkeypatch):
    ds = _dataset(tmp_path, shards=4, per=25)
    rows = list(ds.read())
    sizes: list[int] = []
    real = dd.non_first

    def spy(entries: np.ndarray) -> np.ndarray:
        sizes.append(len(entries))
        return real(entries)

    monkeypatch.setattr(dd, "non_first", spy)
    monkeypatch.setattr(dd, "PARTITION_ENTRIES", 10)
    ds.dedup(["name", "tags"])
    assert _ids(ds) == _expected(rows, ("name", "tags"))
    assert len(sizes) == 10 and sum(sizes) == 100  # 100 records in 10 partitions, each entry in one
    assert max(sizes) < 100  # no partition held the whole dataset


def test_dry_run_writes_nothing_and_zero_duplicates_commit_nothing(tmp_path):
    ds = _dataset(tmp_path, shards=2, per=5)

    def listing() -> dict[Path, tuple[int, int]]:
        return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in (tmp_path / "cat").rglob("*") if p.is_file()}

    files, version = listing(), ds.info().version
    dry = ds.dedup("k", dry_run=True)
    assert (dry.rows, dry.shards, dry.version, dry.records_after) == (3, 1, None, 7)
    assert listing() == files  # not a file written (the spill directory went with its files)
    none = ds.dedup("id")
    assert (none.rows, none.version) == (0, None) and ds.info().version == version
    assert not (tmp_path / "cat" / ".spill").exists()  # nor its empty folder


def test_a_token_retry_reports_the_first_commit(tmp_path):
    ds = _dataset(tmp_path, shards=2, per=5)
    first = ds.dedup("k", token="t1", message="merge cleanup", author="me")
    again = ds.dedup("k", token="t1")
    assert again.duplicate and again.version == first.version == ds.info().version
    last = ds.history()[-1]
    assert (last.message, last.author) == ("merge cleanup", "me")


def test_bad_keys_are_one_line_and_change_nothing(tmp_path):
    ds = _dataset(tmp_path, shards=1, per=5)
    version = ds.info().version
    with pytest.raises(FeatureNotFoundError, match=r"^dedup: no feature 'nope' in the schema \(it has id, k, name, "):
        ds.dedup(["k", "nope"])
    with pytest.raises(UsageError, match=r"^dedup: give a key .* or content .*, not both$"):
        ds.dedup("k", content=True)
    with pytest.raises(UsageError, match=r"^dedup: give a key \(--key FEATURE\[,FEATURE...\]\) or whole-record"):
        ds.dedup()
    for key in ("k,", "k,,id", ["k", ""]):
        with pytest.raises(UsageError, match=r"^dedup: --key '.*' has an empty feature name$"):
            ds.dedup(key)
    assert ds.info().version == version


def test_tensorflow_reads_the_rewritten_shards(tmp_path, tf):
    ds = _dataset(tmp_path, shards=2, per=5)
    ds.dedup("k")
    ids = []
    for s in ds.shards():
        for raw in tf.data.TFRecordDataset(s.path):
            ids.append(tf.train.Example.FromString(raw.numpy()).features.feature["id"].int64_list.value[0])
    assert ids == _expected(_rows(0, 10), ("k",))


def test_an_append_landing_during_a_dedup_is_kept(tmp_path, monkeypatch):
    ds = _dataset(tmp_path, shards=2, per=5)
    real = rowchanges.commit

    def append_first(handle: Any, change: Any) -> Any:
        Catalog.open(tmp_path / "cat").dataset("d").append_rows(_rows(0, 2))  # duplicates, landing after the scan
        return real(handle, change)

    monkeypatch.setattr(rowchanges, "commit", append_first)
    ds.dedup("k")
    assert _ids(ds) == [*_expected(_rows(0, 10), ("k",)), 0, 1]


def test_a_compaction_landing_during_a_dedup_makes_it_start_again(tmp_path, monkeypatch):
    ds = _dataset(tmp_path, shards=3, per=5)
    real = rowchanges.commit
    calls = []

    def compact_first(handle: Any, change: Any) -> Any:
        calls.append(change.read_version)
        if len(calls) == 1:
            Catalog.open(tmp_path / "cat").dataset("d").compact()
        return real(handle, change)

    monkeypatch.setattr(rowchanges, "commit", compact_first)
    ds.dedup("k")
    assert len(calls) == 2 and _ids(ds) == _expected(_rows(0, 15), ("k",))


def test_hashing_memory_does_not_grow_with_the_shard(tmp_path, monkeypatch):
    """Phase 1 holds a run of entries and a read batch, never a whole shard's entries (before
    runs, a 400k-record shard's hashing peaked at 40 MB, 3x a 100k one's)."""
    import tracemalloc

    cat = Catalog.init(tmp_path / "cat")
    peaks: dict[int, int] = {}
    runs: dict[int, Any] = {}
    real = dd.hash_shard

    def measured(job: dd.HashJob) -> Any:
        tracemalloc.start()
        try:
            runs[job.records] = real(job)
            peaks[job.records] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        return runs[job.records]

    monkeypatch.setattr(dd, "hash_shard", measured)
    monkeypatch.setattr(dd, "CHUNK_ENTRIES", 10_000)
    for n in (100_000, 400_000):  # one shard each
        ds = cat.register(f"d{n}", {"features": {"k": {"dtype": "int64"}}})
        ds.append_rows({"k": np.arange(n, dtype=np.int64) % 1000})
        assert ds.dedup("k", workers=1, dry_run=True).rows == n - 1000
    assert len(runs[400_000]) > 1  # the shard's entries went out in runs
    assert peaks[400_000] < 1.25 * peaks[100_000], peaks  # 4x the records, not 4x the memory


def test_the_spill_folder_goes_after_a_dedup_a_dry_run_and_a_failure_but_not_from_under_another(tmp_path):
    from catalog.errors import CatalogError

    ds = _dataset(tmp_path, shards=2, per=5)
    spill = tmp_path / "cat" / ".spill"
    ds.dedup("k", dry_run=True)
    assert not spill.exists()
    ds.dedup("k")
    assert not spill.exists()
    path = ds.shards()[0].path
    with open(path, "r+b") as f:  # a shard that no longer reads: the scan fails
        f.seek(20)
        f.write(b"\xff" * 8)
    with pytest.raises(CatalogError, match="data CRC mismatch"):
        ds.dedup("name")
    assert not spill.exists()
    (spill / "another-dedup").mkdir(parents=True)  # a dedup running beside this one
    with pytest.raises(CatalogError, match="data CRC mismatch"):
        ds.dedup("name")
    assert [p.name for p in spill.iterdir()] == ["another-dedup"]  # its folder, and the spill folder, kept


def test_a_spill_folder_removed_by_another_dedup_ending_is_made_again(tmp_path, monkeypatch):
    import shutil

    from catalog.errors import StorageError

    ds = _dataset(tmp_path, shards=2, per=5)
    real = dd.spill_dir
    calls = []

    def raced(parent: Path, what: str) -> Any:
        calls.append(parent)
        if len(calls) == 1:  # another dedup ending removed the folder just after it was made
            parent.mkdir()
            shutil.rmtree(parent)
            raise StorageError(f"{parent}: cannot make a spill directory: No such file or directory")
        return real(parent, what)

    monkeypatch.setattr(dd, "spill_dir", raced)
    assert ds.dedup("k").rows == 3
    assert len(calls) == 2 and not (tmp_path / "cat" / ".spill").exists()


def test_runs_and_partitions_keep_the_first_in_dataset_order(tmp_path, monkeypatch):
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("d", {"features": {"id": {"dtype": "int64"}, "k": {"dtype": "int64"}}})
    n = 120_000  # per shard: several read batches, so several runs
    for start in (0, n):
        ids = np.arange(start, start + n, dtype=np.int64)
        ds.append_rows({"id": ids, "k": (ids * 7919) % 5000})  # the first of each k: in the first shard
    monkeypatch.setattr(dd, "CHUNK_ENTRIES", 1000)
    monkeypatch.setattr(dd, "PARTITION_ENTRIES", 20_000)
    assert ds.dedup("k", workers=1).rows == 2 * n - 5000
    seen: set[int] = set()
    first = [i for i in range(2 * n) if (k := (i * 7919) % 5000) not in seen and not seen.add(k)]
    assert [r["id"] for r in cat.dataset("d").read()] == first


def test_entries_sharing_half_a_hash_are_told_apart_and_the_first_kept():
    entries = np.zeros(5, dtype=dd.ENTRY)
    entries["h1"] = [9, 9, 9, 4, 9]  # one half shared by two keys: (9, 1) and (9, 2)
    entries["h2"] = [1, 2, 1, 4, 2]
    entries["shard"], entries["index"] = [0, 0, 1, 1, 2], [0, 1, 0, 1, 0]  # dataset order
    gone = dd.non_first(entries)
    assert sorted(zip(gone["shard"].tolist(), gone["index"].tolist(), strict=True)) == [(1, 0), (2, 0)]


@pytest.mark.parametrize(
    ("dtype", "values"),
    [("int8", [3, 3, -1, 3, -1]), ("bool", [True, False, True, True, False]), ("float64", [0.5, -0.0, 0.0, 0.5, 1.0])],
)
@pytest.mark.parametrize("optional", [False, True])
def test_a_scalar_tensor_key_dedups_by_its_values(
    tmp_path: Path, dtype: str, values: list[Any], optional: bool
) -> None:
    """A scalar tensor (a numpy scalar a row, not a list) is a key like any number (-0.0 is 0.0)."""
    feature: dict[str, Any] = {"dtype": dtype, "shape": [], "encoding": "tensor"}
    if optional:
        feature["optional"] = True
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("t", {"features": {"id": {"dtype": "int64"}, "k": feature}})
    ds.append_rows([{"id": i, "k": v} for i, v in enumerate(values)])
    if optional:
        ds.append_rows([{"id": 10, "k": None}, {"id": 11, "k": None}])
    report = ds.dedup(["k"])
    firsts: dict[Any, int] = {}
    for i, v in enumerate(values):
        firsts.setdefault(v + 0 if dtype == "float64" else v, i)
    want = sorted(firsts.values()) + ([10] if optional else [])
    assert [r["id"] for r in cat.dataset("t").read()] == want
    assert report.rows == len(values) + 2 * optional - len(want)
