"""A batched map's columns passed through unchanged take their source shard's statistics
(derive.PassThrough) instead of being tallied again: the statistics are those a tally of the
written records makes, a column changed in place or in some batches only is tallied, and a
default the source read counts as present in the map's output, as when tallied."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from catalog import Catalog
from catalog.ops import derive
from catalog.readers import spans
from catalog.stats import tally
from catalog.tfrecord.example import encode_example
from catalog.tfrecord.framing import RecordWriter

SCHEMA = {
    "features": {
        "id": {"dtype": "int64"},
        "name": {"dtype": "string"},
        "score": {"dtype": "float32"},
        "d": {"dtype": "int64", "default": 7},
    }
}
CALLS = [0]  # the batches changing_later has seen


def lengths(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    batch["length"] = np.array([len(t) for t in batch["name"]], dtype=np.int64)
    return batch


def doubled_in_place(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    batch["score"] *= 2  # the very array given, its values changed
    return lengths(batch)


def renamed_in_place(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    batch["name"][::7] = "renamed"  # the very array of texts given, some of its objects replaced
    return lengths(batch)


def changing_later(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    CALLS[0] += 1
    if CALLS[0] > 2:  # (the first call infers the schema) the first batch passes "score" through, no other
        batch["score"] = batch["score"] + 1
    return lengths(batch)


def _source(tmp_path: Path) -> Any:
    cat = Catalog.init(tmp_path / "cat")
    src = cat.register("src", SCHEMA)
    given = tmp_path / "given.tfrecord"  # a third lack "d": they read its default (filled)
    with RecordWriter(given) as w:
        for i in range(600):
            row = {"id": [i], "name": [f"n{i}é".encode() * (i % 4)], "score": [i / 8]}
            w.write(encode_example(row if i % 3 == 0 else {**row, "d": [i % 5]}))
    src.append_files([given])
    src.append_rows([{"id": i, "name": f"m{i}", "score": i / 3, "d": 1} for i in range(400)], split="test")
    return cat


def _stats(cat: Any, name: str) -> Any:
    """The statistics but the quantile sketches' figures (random: two runs of one path differ),
    floats to 12 digits (moments merged from other batches differ in the last bits)."""
    sketched = ("quantiles", "histogram")
    features = cat.dataset(name).stats().to_json()["features"]
    return [_rounded({k: v for k, v in f.items() if k not in sketched}) for f in features]


def _rounded(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return float(f"{value:.12g}") if isinstance(value, float) else value


def _tallied(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The features tallied from here (a batch's column each time)."""
    seen: list[str] = []
    add = tally._add_column
    monkeypatch.setattr(tally, "_add_column", lambda fs, *a: seen.append(fs.name) or add(fs, *a))
    return seen


def _both(cat: Any, monkeypatch: pytest.MonkeyPatch, fn: Any) -> tuple[list[str], list[str]]:
    """``fn`` mapped into "reused" and, with no source statistics to take, into "tallied"; the
    features each tallied."""
    seen = _tallied(monkeypatch)
    CALLS[0] = 0
    cat.dataset("src").map(fn, into="reused", batched=True, workers=1)
    reused = sorted(set(seen))
    seen.clear()
    CALLS[0] = 0
    with monkeypatch.context() as m:
        m.setattr(derive, "_source_stats", lambda *a: {})
        cat.dataset("src").map(fn, into="tallied", batched=True, workers=1)
    return reused, sorted(set(seen))


def test_the_columns_a_batched_map_passes_through_keep_their_source_shards_statistics(tmp_path, monkeypatch):
    cat = _source(tmp_path)
    reused, tallied = _both(cat, monkeypatch, lengths)
    assert reused == ["length"] and tallied == ["d", "id", "length", "name", "score"]
    assert _stats(cat, "reused") == _stats(cat, "tallied")
    d = next(f for f in _stats(cat, "reused") if f["feature"] == "d")
    assert d["filled"] == 0 and d["present"] == 1000  # the source's 200 filled: written as values now
    assert [s.records for s in cat.dataset("reused").shards()] == [600, 400]
    cat.dataset("src").map(lengths, into="pool", batched=True, workers=2)  # the statistics sent to workers
    assert _stats(cat, "pool") == _stats(cat, "reused")


@pytest.mark.parametrize(
    ("fn", "changed", "shows"),
    [(doubled_in_place, "score", lambda f: f["values"]["max"] == pytest.approx(2 * 133)),
     (renamed_in_place, "name", lambda f: "renamed" in str(f))],
    ids=["numbers", "texts"],
)  # fmt: skip
def test_a_column_changed_in_place_is_tallied(tmp_path, monkeypatch, fn, changed, shows):
    cat = _source(tmp_path)
    reused, _ = _both(cat, monkeypatch, fn)
    assert reused == sorted(["length", changed])
    assert _stats(cat, "reused") == _stats(cat, "tallied")
    assert shows(next(f for f in _stats(cat, "reused") if f["feature"] == changed))


def test_a_column_passed_through_in_a_shards_first_batch_only_is_tallied_from_the_shard(tmp_path, monkeypatch):
    cat = Catalog.init(tmp_path / "cat")
    src = cat.register("src", SCHEMA)  # one shard, indexed: read as windows
    src.append_rows([{"id": i, "name": f"m{i}", "score": i / 3} for i in range(400)])
    monkeypatch.setattr(spans, "WINDOW_BYTES", 2048)  # several batches a shard
    reused, _ = _both(cat, monkeypatch, changing_later)
    assert CALLS[0] > 2
    assert reused == ["d", "id", "length", "name", "score"]  # the shard tallied again, whole
    assert _stats(cat, "reused") == _stats(cat, "tallied")


def test_a_batched_maps_schema_is_inferred_from_its_first_records_decoded_as_one_batch(tmp_path, monkeypatch):
    cat = _source(tmp_path)
    monkeypatch.setattr(derive, "rows", lambda *a, **k: pytest.fail("the first rows made one by one"))
    cat.dataset("src").map(lengths, into="out", batched=True, workers=1)
    out = cat.dataset("out")
    assert list(out.schema.features) == ["id", "name", "score", "d", "length"]
    assert out.schema.features["d"] == cat.dataset("src").schema.features["d"]  # its default kept
    assert [r["length"] for r in out.read()][:4] == [0, 3, 6, 9]


def test_a_tensor_whose_default_is_an_array_passes_through_too(tmp_path: Path) -> None:
    """A feature whose default is an array (a tensor's) is compared by its declaration, not by
    the dataclass (whose comparison of two arrays raised): a batched map over such a dataset
    and a row-level migration of it run, and their statistics are a fresh tally's."""
    t = {"dtype": "uint8", "shape": [2, 2], "encoding": "tensor", "default": [[0, 1], [2, 3]]}
    schema = {"features": {"id": {"dtype": "int64"}, "t": t}}
    cat = Catalog.init(tmp_path / "cat")
    ds = cat.register("src", schema)
    ds.append_rows([{"id": i} if i % 3 else {"id": i, "t": np.full((2, 2), i % 7, np.uint8)} for i in range(60)])
    cat.dataset("src").map(lengths_of_ids, into="out", batched=True, workers=1)
    script = tmp_path / "m" / "src" / "0001_z.py"
    script.parent.mkdir(parents=True)
    script.write_text(
        'from catalog.migrate import AddField\n\noperations = [AddField("z", {"dtype": "int64"}, fn=lambda r: 1)]\n'
    )
    cat.dataset("src").migrate(tmp_path / "m", workers=1)
    for name in ("out", "src"):
        got = cat.dataset(name).stats()
        fresh = tally.Tally(cat.dataset(name).schema, helper=False)
        fresh.add_records(cat.dataset(name).records())
        want = fresh.result()
        f = got.feature("t")
        assert (f.values.count, f.values.min, f.values.max, f.zeros) == (
            want.features["t"].values.count, want.features["t"].values.min,
            want.features["t"].values.max, want.features["t"].zeros)  # fmt: skip


def lengths_of_ids(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    batch["double"] = batch["id"] * 2
    return batch
