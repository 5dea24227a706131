"""delete and update by predicate (catalog/ops/rowchanges.py): the rows left (or changed) equal
the rows computed here from what was written, only the shards holding a match are rewritten,
and every failure leaves the dataset as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from catalog import Catalog
from catalog.errors import (
    CatalogError,
    CommitConflictError,
    PredicateError,
    RowChangeError,
    SplitNotFoundError,
    UsageError,
)
from catalog.ops import rowchanges
from tests.catalogs import made

SCHEMA = {
    "features": {
        "id": {"dtype": "int64", "shape": []},
        "label": {"dtype": "int64", "shape": [], "names": ["cat", "dog", "bird"]},
        "name": {"dtype": "string", "shape": []},
        "score": {"dtype": "float32", "shape": [], "optional": True},
        "tags": {"dtype": "string", "shape": [None]},
    }
}


def _rows(start: int, n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "label": i % 3,
            "name": f"n{i}",
            "score": None if i % 4 == 0 else i / 10,
            "tags": ["t"] * (i % 3),
        }
        for i in range(start, start + n)
    ]


def _dataset(root: Path, shards: int = 4, per: int = 10, splits: tuple[str, ...] = ("train",), **kw: Any) -> Any:
    return made(root, SCHEMA, _rows, shards, per, splits, **kw)


def _ids(ds: Any, version: int | None = None, split: str | None = None) -> list[int]:
    return [r["id"] for r in ds.read(version, split)]


def _live_paths(ds: Any) -> set[str]:
    return {s.path for s in ds.shards()}


def test_delete_leaves_exactly_the_other_rows_in_order_and_rewrites_only_shards_with_a_match(tmp_path, backend):
    ds = _dataset(tmp_path, splits=("train", "test"))
    before = _live_paths(ds)
    written = [r for r in ds.read()]
    where = "label = 'dog' AND id < 25 OR name IN ('n71', 'n3')"
    expected = [r["id"] for r in written if (r["label"] == 1 and r["id"] < 25) or r["name"] in ("n71", "n3")]

    report = ds.delete(where)

    assert report.rows == len(expected) and report.version == 10
    assert _ids(ds) == [r["id"] for r in written if r["id"] not in expected]
    # shards 0..2 (ids 0-29) and shard 7 (ids 70-79) hold a match: the 4 others are kept as they were
    assert len(before - _live_paths(ds)) == report.shards == 4
    assert len(before & _live_paths(ds)) == 4
    assert _ids(ds, 9) == [r["id"] for r in written]  # time travel: the old version whole
    assert [r["id"] for r in ds.read(split="test")] == [i for i in range(40, 80) if i not in expected]
    assert ds.info().records == 80 - len(expected)


def test_a_dry_run_and_a_delete_matching_nothing_write_nothing(tmp_path):
    ds = _dataset(tmp_path)

    def listing() -> dict[Path, tuple[int, int]]:
        return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in (tmp_path / "cat").rglob("*") if p.is_file()}

    files = listing()
    version = ds.info().version

    dry = ds.delete("id >= 35", dry_run=True)
    assert listing() == files  # not a file written, not even the manifest's
    none = ds.delete("id > 1000")

    assert (dry.rows, dry.shards, dry.version, dry.records_after) == (5, 1, None, 35)
    assert (none.rows, none.version) == (0, None)
    assert ds.info().version == version
    data = {p: facts for p, facts in listing().items() if p.suffix == ".tfrecord" or "index" in p.parts}
    assert data == {p: facts for p, facts in files.items() if p in data}  # (the intent's own row came and went)


def test_optional_features_follow_sql_null_rules(tmp_path):
    ds = _dataset(tmp_path, shards=1, per=12)
    ds.delete("NOT score > 0.5")  # absent scores (ids 0, 4, 8) are neither > 0.5 nor not: kept
    assert _ids(ds) == [0, 4, 6, 7, 8, 9, 10, 11]
    ds.delete("score IS NULL")
    assert _ids(ds) == [6, 7, 9, 10, 11]
    ds.delete("len(tags) = 2")  # ids with id % 3 == 2
    assert _ids(ds) == [6, 7, 9, 10]


def test_update_sets_constants_names_and_functions_of_the_row_and_keeps_the_rest(tmp_path):
    ds = _dataset(tmp_path, shards=2, per=5)
    report = ds.update("id < 3", set={"label": "bird", "name": "fixed"})
    assert report.rows == 3 and report.shards == 1
    rows = list(ds.read())
    assert [(r["id"], r["label"], r["name"]) for r in rows[:4]] == [
        (0, 2, "fixed"),
        (1, 2, "fixed"),
        (2, 2, "fixed"),
        (3, 0, "n3"),
    ]
    ds.update("id >= 8", set={"score": _tenfold})
    assert [r["score"] for r in ds.read()][8:] == [pytest.approx(8.0), pytest.approx(9.0)]
    assert [r["id"] for r in ds.read()] == list(range(10))


def test_update_sets_an_optional_feature_to_null_with_none_as_a_function_returning_none_does(tmp_path):
    ds = _dataset(tmp_path, shards=2, per=5)
    report = ds.update("id IN (1, 2)", set={"score": None})
    assert report.rows == 2 and report.shards == 1
    assert [r["score"] for r in ds.read()][:4] == [None, None, None, pytest.approx(0.3)]
    assert ds.delete("score IS NULL", dry_run=True).rows == 5  # and ids 0, 4, 8, absent already
    with pytest.raises(UsageError, match="feature 'id': expected int64, got NoneType"):
        ds.update("id = 3", set={"id": None})  # not optional: no null to set


def _tenfold(row: dict[str, Any]) -> float:
    return float(row["id"])


def test_an_update_that_breaks_the_schema_names_shard_record_and_feature_and_registers_nothing(tmp_path):
    ds = _dataset(tmp_path, shards=2, per=5)
    version = ds.info().version
    with pytest.raises(UsageError, match=r"update: feature 'id': "):
        ds.update("id = 1", set={"id": "x"})
    with pytest.raises(RowChangeError, match=r"\.tfrecord: record 2: feature 'name': "):
        ds.update("id = 7", set={"name": _not_text})
    assert ds.info().version == version
    assert not [p for p in (tmp_path / "cat").rglob("*.tfrecord") if p.name.startswith("i")]


def _not_text(row: dict[str, Any]) -> Any:
    return 12


def test_python_predicates_row_and_batch_functions(tmp_path):
    ds = _dataset(tmp_path, shards=2, per=5)
    ds.delete(_even)
    assert _ids(ds) == [1, 3, 5, 7, 9]
    ds.delete(_above_five, batched=True)
    assert _ids(ds) == [1, 3, 5]
    wrong = r"\.tfrecord: where\(batch\) must return one bool per row \(\d\), got int64"
    with pytest.raises(RowChangeError, match=wrong):
        ds.delete(_wrong_shape, batched=True)
    with pytest.raises(RowChangeError, match=r"records from 0: where raised ZeroDivisionError: division by zero"):
        ds.delete(_raises)
    with pytest.raises(UsageError, match=r"where is a predicate .text. or a function, not int"):
        ds.delete(3)


def _even(row: dict[str, Any]) -> bool:
    return row["id"] % 2 == 0


def _above_five(batch: dict[str, np.ndarray]) -> np.ndarray:
    return batch["id"] > 5


def _wrong_shape(batch: dict[str, np.ndarray]) -> np.ndarray:
    return batch["id"]


def _raises(row: dict[str, Any]) -> bool:
    return 1 / 0 > 0


def test_split_tokens_and_bad_predicates(tmp_path):
    ds = _dataset(tmp_path, shards=1, per=5, splits=("train", "test"))
    report = ds.delete("id IN (1, 6)", split="test", token="t1")
    assert report.rows == 1 and _ids(ds) == [0, 1, 2, 3, 4, 5, 7, 8, 9]
    again = ds.delete("id IN (1, 6)", split="test", token="t1")
    assert again.duplicate and again.version == report.version and ds.info().version == report.version
    with pytest.raises(SplitNotFoundError, match="has no split 'valid'"):
        ds.delete("id = 1", split="valid")
    with pytest.raises(PredicateError, match=r"at character 1: no feature 'nope'"):
        ds.delete("nope = 1")


def test_compressed_and_adopted_shards_are_rewritten_into_the_data_area(tmp_path):
    ds = _dataset(tmp_path, shards=2, per=5, compression="gzip")
    ds.delete("id = 2")
    assert {s.compression for s in ds.shards()} == {"gzip"} and _ids(ds) == [0, 1, 3, 4, 5, 6, 7, 8, 9]

    outside = tmp_path / "outside.tfrecord"
    from catalog import RecordWriter

    with RecordWriter(outside) as w:
        for row in _rows(100, 5):
            w.write(ds.schema.encode(row))
    before = outside.read_bytes()
    ds.adopt([outside])
    ds.delete("id = 101")
    assert _ids(ds)[-4:] == [100, 102, 103, 104]
    assert outside.read_bytes() == before  # not the catalog's file: read, never changed
    assert all(Path(s.path).is_relative_to(tmp_path / "cat") for s in ds.shards())


def test_statistics_indexes_and_random_access_are_right_for_the_new_version(tmp_path):
    ds = _dataset(tmp_path, shards=2, per=10)
    ds.delete("id < 5 OR id = 15")
    stats = ds.stats().to_json()
    assert (stats["records"], stats["not_computed"]["records"]) == (14, 0)
    ids = next(f for f in stats["features"] if f["feature"] == "id")["values"]
    assert (ids["min"], ids["max"], ids["count"]) == (5, 19, 14)
    src = ds.source()
    assert len(src) == 14 and (src[5]["id"], src[9]["id"], src[10]["id"]) == (10, 14, 16)


def test_tensorflow_reads_the_rewritten_shards(tmp_path, tf):
    ds = _dataset(tmp_path, shards=2, per=5)
    ds.update("id = 3", set={"name": "three"})
    ds.delete("id = 8")
    ids, names = [], []
    for s in ds.shards():
        for raw in tf.data.TFRecordDataset(s.path, compression_type=None):
            ex = tf.train.Example.FromString(raw.numpy())
            ids.append(ex.features.feature["id"].int64_list.value[0])
            names.append(ex.features.feature["name"].bytes_list.value[0].decode())
    assert ids == [0, 1, 2, 3, 4, 5, 6, 7, 9] and names[3] == "three"


def test_an_append_landing_during_a_delete_is_kept(tmp_path, monkeypatch):
    ds = _dataset(tmp_path, shards=2, per=5)
    real = rowchanges.commit

    def append_first(handle: Any, change: Any) -> Any:
        Catalog.open(tmp_path / "cat").dataset("d").append_rows(_rows(50, 3))
        return real(handle, change)

    monkeypatch.setattr(rowchanges, "commit", append_first)
    ds.delete("id < 2")
    assert _ids(ds) == [2, 3, 4, 5, 6, 7, 8, 9, 50, 51, 52]


def test_a_compaction_landing_during_a_delete_makes_it_start_again(tmp_path, monkeypatch):
    ds = _dataset(tmp_path, shards=3, per=5)
    real = rowchanges.commit
    calls = []

    def compact_first(handle: Any, change: Any) -> Any:
        calls.append(change.read_version)
        if len(calls) == 1:
            Catalog.open(tmp_path / "cat").dataset("d").compact()
        return real(handle, change)

    monkeypatch.setattr(rowchanges, "commit", compact_first)
    report = ds.delete("id = 7")
    assert len(calls) == 2 and calls[1] > calls[0]
    assert _ids(ds) == [i for i in range(15) if i != 7] and report.rows == 1
    leftovers = [p for p in (tmp_path / "cat").rglob("*.tfrecord") if not any(str(p) == s.path for s in ds.shards())]
    assert all(any(str(p) == s.path for v in range(1, report.version) for s in ds.shards(v)) for p in leftovers)


def test_shards_rewritten_under_it_every_time_end_in_one_line(tmp_path, monkeypatch):
    ds = _dataset(tmp_path, shards=2, per=5)

    def always_lost(handle: Any, change: Any) -> Any:
        from catalog.commit.protocol import LiveChanged

        raise LiveChanged(set(), {1})

    monkeypatch.setattr(rowchanges, "commit", always_lost)
    with pytest.raises(
        CommitConflictError, match=r"kept being rewritten .* during this delete: nothing was registered"
    ):
        ds.delete("id = 1")
    assert _ids(ds) == list(range(10))
    names = {p.name for p in (tmp_path / "cat").rglob("*.tfrecord")}
    assert len(names) == 2  # each attempt's files went with it


def test_worker_processes_give_the_same_result(tmp_path):
    ds = _dataset(tmp_path, shards=4, per=5)
    report = ds.delete("id IN (1, 6, 11, 16)", workers=2)
    assert _ids(ds) == [i for i in range(20) if i not in (1, 6, 11, 16)] and report.shards == 4


def test_a_migration_landing_during_a_delete_makes_it_start_again_on_the_migrated_shards(tmp_path, monkeypatch):
    ds = _dataset(tmp_path, shards=2, per=5)
    real = rowchanges.commit
    calls = []

    def migrate_first(handle: Any, change: Any) -> Any:
        calls.append(change.schema_version)
        if len(calls) == 1:
            Catalog.open(tmp_path / "cat").dataset("d").migrate(add=["extra:int64=7"])
        return real(handle, change)

    monkeypatch.setattr(rowchanges, "commit", migrate_first)
    report = ds.delete("id = 3")
    assert calls == [1, 2] and report.rows == 1
    rows = list(Catalog.open(tmp_path / "cat").dataset("d").read())
    assert [r["id"] for r in rows] == [0, 1, 2, 4, 5, 6, 7, 8, 9] and {r["extra"] for r in rows} == {7}


SEQUENCE_SCHEMA = {
    "features": {"id": {"dtype": "int64", "shape": []}},
    "sequence_features": {"tokens": {"dtype": "int64"}},
}


def test_sequence_examples_are_deleted_filtered_and_updated_by_their_context(tmp_path, tf):
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("seq", SEQUENCE_SCHEMA)
    ds.append_rows([{"id": i, "tokens": [[i]] * (i % 4)} for i in range(12)])
    ds.delete("id IN (1, 5) OR len(tokens) = 3")  # 3, 7 and 11 have three steps
    assert [r["id"] for r in ds.read()] == [0, 2, 4, 6, 8, 9, 10]
    ds.update("id = 2", set={"id": 20})
    ds.filter("len(tokens) >= 1", into="some")
    some = cat.dataset("some")
    assert [(r["id"], len(r["tokens"])) for r in some.read()] == [(20, 2), (6, 2), (9, 1), (10, 2)]
    ids = []
    for s in some.shards():
        for raw in tf.data.TFRecordDataset(s.path):
            ids.append(tf.train.SequenceExample.FromString(raw.numpy()).context.feature["id"].int64_list.value[0])
    assert ids == [20, 6, 9, 10]


def test_an_update_of_a_sequence_feature_says_update_sets_context_features(tmp_path):
    ds = Catalog.init(tmp_path / "cat").register("seq", SEQUENCE_SCHEMA)
    ds.append_rows([{"id": i, "tokens": [[i]]} for i in range(3)])
    said = "update: feature 'tokens' is a sequence feature: update sets context features (id); map changes steps"
    with pytest.raises(UsageError) as e:
        ds.update("id = 1", set={"tokens": [[5]]})
    assert str(e.value) == said


KILLED = r"""
import os, signal, sys
from catalog import Catalog, faults

root, point, verb = sys.argv[1:4]

def on_point(name, info):
    if name == point:
        os.kill(os.getpid(), signal.SIGKILL)

faults.install(on_point)
ds = Catalog.open(root).dataset("d")
if verb == "delete":  # (workers=1: in this process, the one killed)
    ds.delete("id IN (2, 12)", workers=1)
elif verb == "update":
    ds.update("id IN (2, 12)", set={"name": "changed"}, workers=1)
else:
    ds.filter("id IN (2, 12)", into="picked", workers=1)
"""


@pytest.mark.parametrize("verb", ["delete", "update", "filter"])
@pytest.mark.parametrize("point", ["intent.recorded", "shard.closing", "commit.before", "commit.after"])
def test_a_kill_at_any_point_leaves_the_old_state_or_the_new_one(tmp_path, verb, point):
    import os
    import signal
    import subprocess
    import sys
    from datetime import timedelta

    from catalog.errors import DatasetNotFoundError

    ds = _dataset(tmp_path, shards=2, per=10)
    before = list(ds.read())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run([sys.executable, "-c", KILLED, str(tmp_path / "cat"), point, verb], env=env, timeout=120)
    assert child.returncode == -signal.SIGKILL
    cat = Catalog.open(tmp_path / "cat")
    cat.gc(grace=timedelta(0))  # the dead writer's files go
    assert cat.verify().ok
    ds = cat.dataset("d")
    done = point == "commit.after"
    if verb == "filter":
        assert ds.info().version == 3 and list(ds.read()) == before
        if done:
            assert [r["id"] for r in cat.dataset("picked").read()] == [2, 12]
        else:
            with pytest.raises(DatasetNotFoundError):
                cat.dataset("picked")  # a derivation that never committed is no dataset
            assert ds.filter("id IN (2, 12)", into="picked").records == 2  # and its name is free
    elif not done:
        assert ds.info().version == 3 and list(ds.read()) == before
    elif verb == "delete":
        assert [r["id"] for r in ds.read()] == [r["id"] for r in before if r["id"] not in (2, 12)]
    else:
        assert [r["name"] for r in ds.read() if r["id"] in (2, 12)] == ["changed", "changed"]
    registered = {s.path for v in range(1, ds.info().version + 1) for s in ds.shards(v)}
    if verb == "filter":
        registered |= {s.path for s in cat.dataset("picked").shards()}
    assert {str(p) for p in (tmp_path / "cat" / "data").rglob("*.tfrecord")} <= registered  # nothing half-done left


# --------------------------------------------------------------------------- data skipping


def _damage_middle(path: str) -> bytes:
    """Overwrite bytes inside a shard (same size): reading it would fail its checksum or
    framing. Returns what was there."""
    with open(path, "r+b") as f:
        f.seek(20)
        was = f.read(16)
        f.seek(20)
        f.write(b"\xff" * 16)
    return was


def _mend(path: str, was: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(20)
        f.write(was)


def test_shards_whose_statistics_rule_out_a_match_are_not_read(tmp_path, backend):
    ds = _dataset(tmp_path)  # ids 0-9, 10-19, 20-29, 30-39, one shard each
    shards = ds.shards()
    damaged = {s.path: _damage_middle(s.path) for s in (shards[0], shards[1], shards[3])}  # never read
    dry = ds.delete("id IN (21, 25, 1000) OR id < -3", dry_run=True)
    assert (dry.rows, dry.shards, dry.shards_read, dry.shards_total) == (2, 1, 1, 4)

    report = ds.delete("id IN (21, 25, 1000) OR id < -3")

    assert (report.rows, report.shards, report.shards_read, report.shards_total) == (2, 1, 1, 4)
    assert report.to_json()["shards_read"] == 1 and report.to_json()["shards_total"] == 4
    assert _live_paths(ds) - {s.path for s in shards} != set()  # shard 2 rewritten
    assert {s.path for s in (shards[0], shards[1], shards[3])} <= _live_paths(ds)
    assert ds.shards()[2].records == 8
    for path, was in damaged.items():
        _mend(path, was)
    assert _ids(ds) == [i for i in range(40) if i not in (21, 25)]


def test_shards_without_statistics_are_read(tmp_path, backend):
    cat = Catalog.init(tmp_path / "cat")
    cat.statistics = False
    ds = cat.register("d", SCHEMA)
    for start in (0, 10, 20):
        ds.append_rows(_rows(start, 10))
    report = ds.delete("id = 15")
    assert (report.rows, report.shards, report.shards_read) == (1, 1, 3)
    assert _ids(ds) == [i for i in range(30) if i != 15]


@pytest.mark.parametrize(
    "where",
    [
        "id IN (3, 17, 35)",
        "id >= 29 AND id < 31",
        "NOT id > 5",
        "score = 1.5",
        "score IS NULL AND id > 25",
        "score > 2.5 OR label = 'bird'",
        "NOT (score < 3.5)",
        "id != 12",
        "id NOT IN (0, 1, 2, 3, 4, 5, 6, 7, 8, 9)",
        "name = 'n7' AND id < 100",
        "len(tags) = 2 AND id > 30",
    ],
)
def test_skipping_finds_what_reading_everything_finds(tmp_path, where):
    ds = _dataset(tmp_path)
    written = list(ds.read())
    predicate = rowchanges.Predicate(where, ds.schema)
    expected = [r["id"] for r in written if predicate.matches(r)]

    report = ds.delete(where, dry_run=True)
    scanned = ds.delete(predicate.matches, dry_run=True, workers=1)  # a function: no skipping

    assert report.rows == scanned.rows == len(expected)
    assert scanned.shards_read == 4 and report.shards_read <= 4


def _exits(row: dict[str, Any]) -> bool:
    raise SystemExit(5)  # sys.exit in the user's predicate: its failure, one line like any other


def _exits_setting(row: dict[str, Any]) -> int:
    raise SystemExit("no")


def test_a_function_calling_sys_exit_is_a_failure_of_it_and_commits_nothing(tmp_path):
    ds = _dataset(tmp_path, shards=2, per=5)
    version = ds.info().version
    for workers in (1, 2):
        with pytest.raises(RowChangeError, match=r"\.tfrecord: records from 0: where raised SystemExit: 5$"):
            ds.delete(_exits, workers=workers)
    with pytest.raises(RowChangeError, match=r"\.tfrecord: records from 1: set raised SystemExit: no$"):
        ds.update("id = 1", set={"id": _exits_setting})
    assert ds.info().version == version


@pytest.mark.parametrize("verb", ["delete", "dry-run", "update", "purge", "dedup", "filter", "map", "compact"])
def test_a_shard_deleted_by_hand_is_one_line_naming_it(tmp_path, verb):
    """Not a FileNotFoundError's traceback from a worker: the readers' one line for a shard gone."""
    ds = _dataset(tmp_path, shards=3, per=5)
    gone = ds.shards()[1].path
    Path(gone).unlink()
    run = {
        "delete": lambda: ds.delete("id = 7", workers=2),
        "dry-run": lambda: ds.delete("id = 7", dry_run=True, workers=1),
        "update": lambda: ds.update("id > 0", set={"name": "x"}, workers=1),
        "purge": lambda: ds.delete("id = 7", purge=True, workers=2),
        "dedup": lambda: ds.dedup("label", workers=2),
        "filter": lambda: ds.filter("id > 0", into="f", workers=2),
        "map": lambda: ds.map(rowchanges_copy, into="m", schema=ds.schema, workers=2),
        "compact": lambda: ds.compact(workers=1),
    }[verb]
    with pytest.raises(CatalogError, match="shard file is missing") as e:
        run()
    assert str(e.value).startswith(gone)


def rowchanges_copy(row: dict[str, Any]) -> dict[str, Any]:
    return row
