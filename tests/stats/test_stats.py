"""Feature statistics (catalog.stats, manifest format 7): computed as shards are written,
merged per version and split from the manifest, compared, and checked on append."""

from __future__ import annotations

import json
import sqlite3
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from typer.testing import CliRunner

from catalog import Catalog
from catalog import manifest as mf
from catalog.cli import app
from catalog.errors import CatalogError, CheckError, SchemaError, ValidationError
from catalog.schema import Schema
from catalog.schema.frames import column_batches
from catalog.stats import Tally, sketches, tally
from catalog.stats.columns import decoded_columns
from catalog.stats.sketches import KLL_K
from catalog.stats.tally import BYTE_ROW, byte_sums
from catalog.tfrecord import RecordWriter, encode_example
from catalog.web import create_app

runner = CliRunner()
N = 6000
SCHEMA = {
    "features": {
        "i": {"dtype": "int64"},
        "f": {"dtype": "float32"},
        "label": {"dtype": "int64", "names": ["cat", "dog", "eel"]},
        "word": {"dtype": "string", "default": "none"},
        "blob": {"dtype": "bytes", "optional": True},
        "tokens": {"dtype": "int64", "shape": [None]},
        "pixels": {"dtype": "uint8", "shape": [4, 4], "encoding": "tensor"},
    }
}


def run(*args: Any) -> Any:
    return runner.invoke(app, [str(a) for a in args])


def generated(n: int = N, seed: int = 0) -> dict[str, Any]:
    """Columns of random rows, with NaNs, infinities, zeros, missing and default-filled values."""
    rng = np.random.default_rng(seed)
    f = rng.normal(3, 2, n).astype(np.float32)
    f[rng.random(n) < 0.01] = np.nan
    f[rng.random(n) < 0.005] = np.inf
    f[rng.random(n) < 0.02] = 0
    words = np.array(["alpha", "beta", "gamma", "delta", ""], dtype=object)[rng.integers(0, 5, n)]
    words[rng.random(n) < 0.1] = None  # filled with the default "none"
    blobs = [None if rng.random() < 0.3 else rng.bytes(int(rng.integers(0, 300))) for _ in range(n)]
    return {
        "i": rng.integers(-(10**12), 10**12, n),
        "f": f,
        "label": rng.choice(3, n, p=[0.6, 0.3, 0.1]),
        "word": list(words),
        "blob": blobs,
        "tokens": [rng.integers(0, 50, int(rng.integers(0, 6))) for _ in range(n)],
        "pixels": rng.integers(0, 256, (n, 4, 4)).astype(np.uint8),
    }


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    return Catalog.init(tmp_path / "cat")


def rank_error(values: np.ndarray, q: float, rank: float) -> float:
    """How far ``q`` is, in normalized rank, from ``rank`` in ``values``."""
    s = np.sort(values)
    lo, hi = np.searchsorted(s, q, "left") / len(s), np.searchsorted(s, q, "right") / len(s)
    return 0.0 if lo <= rank <= hi else min(abs(rank - lo), abs(rank - hi))


def test_statistics_equal_numpy_on_generated_data(cat: Catalog) -> None:
    cols = generated()
    ds = cat.register("d", SCHEMA)
    ds.append_rows(cols, shard_records=1000)  # six shards, merged on reading
    st = ds.stats()
    assert (st.at.shards, st.at.records, st.at.missing_shards) == (6, N, 0)
    f = st.feature("f")
    arr = cols["f"].astype(np.float64)
    finite = arr[np.isfinite(arr)]
    assert (f.records, f.present, f.filled, f.missing) == (N, N, 0, 0)
    assert f.nans == int(np.isnan(arr).sum()) and f.infs == int(np.isinf(arr).sum())
    assert f.zeros == int((arr == 0).sum())
    assert (f.values.count, f.values.min, f.values.max) == (finite.size, finite.min(), finite.max())
    assert f.values.mean == pytest.approx(finite.mean(), rel=1e-9)
    assert f.values.std == pytest.approx(finite.std(), rel=1e-9)
    bound = 1.5 * f.quantiles.normalized_rank_error(False)  # DataSketches' 99% bound, with margin
    for rank, q in zip([0.1, 0.5, 0.9], f.quantile_values([0.1, 0.5, 0.9]) or [], strict=True):
        assert rank_error(finite, q, rank) <= bound
    assert f.quantile_values([0.0, 1.0]) == [finite.min(), finite.max()]
    hist = f.histogram(10) or []
    assert sum(c for _lo, _hi, c in hist) == pytest.approx(finite.size)

    i = st.feature("i")
    assert (i.values.min, i.values.max) == (int(cols["i"].min()), int(cols["i"].max()))  # int64 exactly
    assert i.values.mean == pytest.approx(cols["i"].mean(), rel=1e-9)


def test_texts_labels_lists_and_tensors(cat: Catalog) -> None:
    cols = generated()
    ds = cat.register("d", SCHEMA)
    ds.append_rows(cols, shard_records=2500)
    st = ds.stats()
    word = st.feature("word")
    filled = sum(w is None for w in cols["word"])
    assert (word.present, word.filled, word.missing) == (N - filled, filled, 0)
    seen = ["none" if w is None else w for w in cols["word"]]
    assert dict(word.top_values(10)) == {w: seen.count(w) for w in set(seen)}  # few values: exact
    assert word.distinct_estimate() == len(set(seen))
    assert word.zeros == seen.count("")  # empty strings
    assert (word.values.min, word.values.max) == (0, 5)  # lengths

    blob = st.feature("blob")
    present = [b for b in cols["blob"] if b is not None]
    assert (blob.present, blob.missing) == (len(present), N - len(present))
    assert blob.values.count == len(present) and blob.values.max == max(map(len, present))
    assert blob.long_values == sum(len(b) > 128 for b in present)
    assert blob.distinct_estimate() == pytest.approx(len(set(present)), rel=0.08)

    label = st.feature("label")
    counts = np.bincount(cols["label"], minlength=3)
    assert dict(label.top_values()) == {str(k): int(c) for k, c in enumerate(counts) if c}
    summary = next(s for s in st.summaries() if s["feature"] == "label")
    assert summary["top_values"][0]["value"] == "0 (cat)"

    tokens = st.feature("tokens")
    lengths = np.array([len(t) for t in cols["tokens"]])
    flat = np.concatenate(cols["tokens"])
    assert tokens.lengths is not None
    assert (tokens.lengths.min, tokens.lengths.max, tokens.lengths.count) == (lengths.min(), lengths.max(), N)
    assert tokens.lengths.mean == pytest.approx(lengths.mean())
    assert (tokens.values.count, tokens.values.max) == (flat.size, flat.max())

    pixels = st.feature("pixels")
    px = cols["pixels"].reshape(-1)
    assert (pixels.values.count, pixels.zeros) == (px.size, int((px == 0).sum()))
    assert pixels.values.mean == pytest.approx(px.mean(), rel=1e-9)


def test_merge_of_shards_equals_the_union(cat: Catalog) -> None:
    cols = generated(3000, seed=5)
    one = cat.register("one", SCHEMA)
    one.append_rows(cols)
    many = cat.register("many", SCHEMA)
    many.append_rows(cols, shard_records=300)
    a, b = one.stats(), many.stats()
    assert (a.at.shards, b.at.shards) == (1, 10)
    for name in SCHEMA["features"]:
        x, y = a.feature(name), b.feature(name)
        exact = ("records", "present", "filled", "missing", "zeros", "nans", "infs", "long_values")
        assert [getattr(x, k) for k in exact] == [getattr(y, k) for k in exact], name
        assert (x.values.count, x.values.min, x.values.max) == (y.values.count, y.values.min, y.values.max)
        assert x.values.mean == pytest.approx(y.values.mean, rel=1e-9, abs=1e-12)
        assert x.quantiles.n == y.quantiles.n
    for name in ("word", "label"):  # few distinct values: counted exactly, whatever the merge order
        assert a.feature(name).top_values() == b.feature(name).top_values()


def test_fills_from_every_path(cat: Catalog, tmp_path: Path) -> None:
    schema = {"features": {"id": {"dtype": "int64"}, "w": {"dtype": "int64", "default": -1}}}
    ds = cat.register("d", schema)
    ds.append_rows([{"id": 1}, {"id": 2, "w": 5}, {"id": 3, "w": None}])  # rows: 2 filled
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text('{"id": 4}\n{"id": 5, "w": 7}\n')
    ds.append_files([jsonl])  # 1 filled
    csv = tmp_path / "rows.csv"
    csv.write_text("id,w\n6,\n7,8\n8,\n")
    ds.append_files([csv])  # 2 filled (empty cells)
    rec = tmp_path / "in.tfrecord"
    with RecordWriter(rec) as w:  # records without "w": TensorFlow reads the default: filled
        w.write(encode_example({"id": [9]}))
        w.write(encode_example({"id": [10], "w": [3]}))
    ds.append_files([rec])  # 1 filled
    ds.append_rows({"id": np.array([11, 12])})  # columns without "w": 2 filled
    w = ds.stats().feature("w")
    assert (w.records, w.filled, w.present, w.missing) == (12, 8, 4, 0)
    assert (w.values.min, w.values.max) == (-1, 8)  # what readers read, defaults included


def test_check_refuses_drift_and_registers_nothing(cat: Catalog, tmp_path: Path) -> None:
    schema = {"features": {"x": {"dtype": "float32", "checks": {"linf": 0.2, "max": 100}}, "y": {"dtype": "int64"}}}
    ds = cat.register("d", schema)
    rng = np.random.default_rng(1)
    ds.append_rows({"x": rng.normal(0, 1, 2000).astype(np.float32), "y": rng.integers(0, 5, 2000)})
    same = tmp_path / "same.jsonl"
    same.write_text("".join(json.dumps({"x": float(v), "y": 1}) + "\n" for v in rng.normal(0, 1, 500)))
    shifted = tmp_path / "shifted.jsonl"
    shifted.write_text("".join(json.dumps({"x": float(v), "y": 1}) + "\n" for v in rng.normal(3, 1, 500)))
    root = cat.root
    files_before = sorted(p.name for p in (root / "data" / "d").iterdir())

    result = run("-C", root, "append", "d", shifted, "--check")
    assert result.exit_code == 1
    assert "append refused by --check: feature 'x': L-infinity distance" in result.stderr
    assert "nothing registered" in result.stderr and "Traceback" not in result.output
    assert cat.dataset("d").version == 2
    assert sorted(p.name for p in (root / "data" / "d").iterdir()) == files_before  # no file left behind

    assert run("-C", root, "append", "d", same, "--check").exit_code == 0  # similar data passes
    warned = run("-C", root, "append", "d", shifted, "--check=warn", "--json")
    assert warned.exit_code == 0 and "warning: feature 'x': L-infinity distance" in warned.stderr
    assert "L-infinity" in json.loads(warned.stdout)["warnings"][0]
    assert cat.dataset("d").version == 4

    with pytest.raises(CheckError, match="refused by --check: feature 'y': L-infinity"):  # --max-linf: the others
        ds.append_rows({"x": rng.normal(0, 1, 500).astype(np.float32), "y": np.full(500, 4)}, max_linf=0.3)
    with pytest.raises(CheckError, match="feature 'x': maximum 500 is above the limit 100"):
        ds.append_rows({"x": np.full(10, 500, np.float32), "y": np.ones(10, np.int64)}, check="fail")
    assert cat.dataset("d").version == 4


def test_max_missing_check(cat: Catalog) -> None:
    ds = cat.register("d", {"features": {"a": {"dtype": "int64", "default": 0, "checks": {"max_missing": 0.1}}}})
    ds.append_rows([{"a": 1}] * 95 + [{}] * 5, check="fail")  # 5%: fine (the first append has nothing to drift from)
    with pytest.raises(CheckError, match=r"missing rate 0\.5 is above the limit 0\.1"):
        ds.append_rows([{"a": 1}, {}], check="fail")


def test_rewrites_keep_statistics(cat: Catalog) -> None:
    schema = {"features": {"id": {"dtype": "int64"}, "w": {"dtype": "int64", "default": -1}}}
    ds = cat.register("d", schema)
    for k in range(3):
        ds.append_rows([{"id": i} if i % 2 else {"id": i, "w": i} for i in range(k * 10, k * 10 + 10)])
    before = ds.stats().feature("w")
    ds = cat.dataset("d")
    ds.compact()
    after = cat.dataset("d").stats()
    assert after.at.shards == 1 and after.at.missing_shards == 0
    assert (after.feature("w").filled, after.feature("w").values.max) == (before.filled, before.values.max)
    cat.dataset("d").migrate(add=["z:int64=3"], rename=["w:ww"]) if False else None
    cat.dataset("d").restore(4)  # the three appended shards again
    restored = cat.dataset("d").stats()
    assert restored.at.shards == 3 and restored.feature("w").filled == before.filled


def test_migration_statistics(cat: Catalog, tmp_path: Path) -> None:
    schema = {"features": {"id": {"dtype": "int64"}, "w": {"dtype": "int64", "default": -1}}}
    ds = cat.register("d", schema)
    ds.append_rows([{"id": i} if i % 4 == 0 else {"id": i, "w": i} for i in range(40)])
    result = run("-C", cat.root, "migrate", "d", "--add", "z:float32=0.5", "--rename", "w:ww")
    assert result.exit_code == 0, result.output
    st = cat.dataset("d").stats()
    assert st.at.missing_shards == 0
    assert (st.feature("ww").filled, st.feature("ww").present) == (10, 30)  # carried through the rename
    z = st.feature("z")
    assert (z.filled, z.present, z.values.min, z.values.max) == (40, 0, 0.5, 0.5)
    # derived from the source's statistics (nothing decoded): what decoding the new shard finds
    ds = cat.dataset("d")
    tally = Tally(ds.schema)
    tally.add_records(ds.records())
    fresh = tally.result()
    for name in ("id", "ww", "z"):
        a, b = st.feature(name), fresh.features[name]
        assert (a.records, a.missing, a.zeros) == (b.records, b.missing, b.zeros), name
        assert (a.values.count, a.values.min, a.values.max) == (b.values.count, b.values.min, b.values.max), name
        assert a.values.mean == pytest.approx(b.values.mean), name


def test_row_level_migration_statistics(cat: Catalog, tmp_path: Path) -> None:
    ds = cat.register("d", {"features": {"id": {"dtype": "int64"}, "v": {"dtype": "int64", "default": 1}}})
    ds.append_rows([{"id": i} if i % 5 == 0 else {"id": i, "v": i * 10} for i in range(50)])
    script = tmp_path / "migrations" / "d" / "0001_cast.py"
    script.parent.mkdir(parents=True)
    script.write_text(
        'from catalog.migrate import CastField\n\noperations = [CastField("v", {"dtype": "float32", "default": 1.0})]\n'
    )
    result = run("-C", cat.root, "migrate", "d", "--migrations", tmp_path / "migrations")
    assert result.exit_code == 0, result.output
    v = cat.dataset("d").stats().feature("v")
    assert (v.kind, v.filled, v.present, v.values.max) == ("float", 10, 40, 490.0)


def test_old_shards_not_computed_then_compute(cat: Catalog, tmp_path: Path) -> None:
    from probes import downgrade_to_format_6

    cat.register("d", SCHEMA).append_rows(generated(500), shard_records=200)
    cat.close()
    downgrade_to_format_6(cat.root / "catalog.db")
    assert run("-C", cat.root, "upgrade").stdout == f"manifest format 6 -> {mf.FORMAT_VERSION}\n"
    shown = run("-C", cat.root, "stats", "d")
    assert shown.exit_code == 0
    assert "not computed: 3 shards (500 records)" in shown.stdout
    doc = json.loads(run("-C", cat.root, "stats", "d", "--json").stdout)
    assert doc["not_computed"] == {"shards": 3, "records": 500, "damaged": 0}
    computed = run("-C", cat.root, "stats", "d", "--compute", "--json")
    assert computed.exit_code == 0 and "computed the statistics of 3 shards (500 records)" in computed.stderr
    doc = json.loads(computed.stdout)
    assert doc["not_computed"] == {"shards": 0, "records": 0, "damaged": 0}
    assert {f["feature"]: f["present"] for f in doc["features"]}["i"] == 500
    again = run("-C", cat.root, "stats", "d", "--compute")
    assert "computed the statistics of 0 shards" in again.stderr  # idempotent


def test_statistics_off(cat: Catalog) -> None:
    cat.statistics = False
    ds = cat.register("d", SCHEMA)
    ds.append_rows(generated(100))
    assert ds.stats().at.missing_shards == 1
    with pytest.raises(CatalogError, match="--check needs statistics"):
        ds.append_rows(generated(10), check="fail")


def test_list_statistics_of_a_tfrecord_input_cut_into_shards(cat: Catalog, tmp_path: Path) -> None:
    """A TFRecord input's statistics take its validation's columns, lists as their values
    joined (decode_batch's ``ragged``), cut where shards end: equal to NumPy's per shard."""
    cols = generated(3000, seed=5)
    schema = Schema.from_json(SCHEMA)
    rows = [{k: v[i] for k, v in cols.items()} for i in range(3000)]
    with RecordWriter(tmp_path / "in.tfrecord") as w:
        for row in rows:
            w.write(schema.encode({k: v for k, v in row.items() if v is not None}))
    ds = cat.register("d", SCHEMA)
    ds.append_files([tmp_path / "in.tfrecord"], shard_records=700)  # 5 shards, cut inside batches
    tokens = cols["tokens"]
    st = ds.stats()  # merged over the shards: a value counted twice or lost at a cut shows
    t = st.feature("tokens")
    lengths = np.array([len(t) for t in tokens])
    flat = np.concatenate(tokens)
    assert st.at.shards == 5
    assert (t.lengths.count, t.lengths.min, t.lengths.max) == (3000, lengths.min(), lengths.max())
    assert t.lengths.mean == pytest.approx(lengths.mean(), rel=1e-12)
    assert (t.values.count, t.values.min, t.values.max) == (flat.size, flat.min(), flat.max())
    assert t.values.mean == pytest.approx(flat.mean(), rel=1e-12)
    assert t.values.std == pytest.approx(flat.std(), rel=1e-12)


def test_adopt_and_tfrecord_inputs_get_statistics(cat: Catalog, tmp_path: Path) -> None:
    folder = tmp_path / "ext"
    folder.mkdir()
    for k in range(2):
        with RecordWriter(folder / f"part-{k}.tfrecord") as w:
            for i in range(50):
                w.write(encode_example({"id": [k * 50 + i]}))
    cat.adopt("a", [folder])
    st = cat.dataset("a").stats()
    assert (st.at.shards, st.at.missing_shards, st.feature("id").values.max) == (2, 0, 99)


def test_compare_versions_and_splits(cat: Catalog) -> None:
    ds = cat.register("d", {"features": {"x": {"dtype": "float32"}, "w": {"dtype": "string"}}})
    rng = np.random.default_rng(2)
    ds.append_rows({"x": rng.normal(0, 1, 1000).astype(np.float32), "w": ["a", "b"] * 500})
    ds.append_rows({"x": rng.normal(5, 1, 1000).astype(np.float32), "w": ["c"] * 1000}, split="test")
    cmp = ds.compare_stats("train", "test")
    by = {f.name: f for f in cmp.features}
    assert by["x"].linf is not None and by["x"].linf > 0.5
    assert by["w"].new_values == ["c"] and sorted(by["w"].vanished_values) == ["a", "b"]
    assert by["w"].linf == pytest.approx(1.0)
    same = ds.compare_stats("2", "train@2")  # a version, and a split of a version
    assert all(f.linf == 0 for f in same.features)
    assert ds.compare_stats("1", "1").features == []  # the empty first version: nothing to compare
    assert [f.only_in for f in ds.compare_stats("1", "2").features] == [None, None]  # in both schemas: A is empty
    text = run("-C", cat.root, "stats", "d", "--compare", "train", "test")
    assert text.exit_code == 0 and " !" in text.stdout
    bad = run("-C", cat.root, "stats", "d", "--compare", "train", "nope")
    said = "error: dataset 'd' has no split, tag or version 'nope' (splits: test, train; "
    assert bad.exit_code == 1 and bad.stderr.startswith(said)


def test_damaged_statistics_are_left_out_and_recomputed(cat: Catalog) -> None:
    ds = cat.register("d", {"features": {"x": {"dtype": "int64"}}})
    ds.append_rows([{"x": 1}])
    ds.append_rows([{"x": 5}, {"x": 7}])
    with sqlite3.connect(cat.root / "catalog.db") as conn:
        (path,) = conn.execute("SELECT path FROM shards ORDER BY id LIMIT 1").fetchone()
        conn.execute("UPDATE shard_stats SET data = X'00010203' WHERE path = ?", (path,))
    result = run("-C", cat.root, "stats", "d")
    assert result.exit_code == 0 and "Traceback" not in result.output
    assert "not computed: 1 shard (1 record, 1 of them damaged) is left out" in result.stdout
    fixed = run("-C", cat.root, "stats", "d", "--compute", "--json")
    assert "computed the statistics of 1 shard (1 record)" in fixed.stderr
    doc = json.loads(fixed.stdout)
    assert doc["not_computed"]["shards"] == 0 and doc["features"][0]["values"]["min"] == 1


def test_sketch_sizes_are_bounded(cat: Catalog) -> None:
    """What a shard's statistics weigh in the manifest (reported in the README)."""
    ds = cat.register("d", SCHEMA)
    ds.append_rows(generated(20000))
    with sqlite3.connect(cat.root / "catalog.db") as conn:
        (size,) = conn.execute("SELECT length(data) FROM shard_stats").fetchone()
    assert size < 8 * 1024 * len(SCHEMA["features"])
    assert KLL_K == 200


def test_rewrites_over_damaged_statistics_still_run(cat: Catalog) -> None:
    """A shard whose statistics do not read back: compact and a migration still run (its new
    shard gets none, or its own from decoding), and --compute mends what is left."""
    ds = cat.register("d", {"features": {"x": {"dtype": "int64"}}})
    for k in range(3):
        ds.append_rows([{"x": k * 10 + i} for i in range(10)])
    with sqlite3.connect(cat.root / "catalog.db") as conn:
        conn.execute("UPDATE shard_stats SET data = X'789c0300000000'")  # zlib of nothing: no JSON
    cat.dataset("d").compact()
    assert cat.dataset("d").stats().at.missing_shards == 1
    assert run("-C", cat.root, "migrate", "d", "--add", "y:int64=0").exit_code == 0
    st = cat.dataset("d").stats()
    assert st.at.missing_shards == 0 and st.feature("x").values.max == 29  # the migration decoded it
    assert st.feature("y").filled == 30


def test_sampled_tensor_quantiles_weigh_every_element_alike(cat: Catalog) -> None:
    """Pixels go into the quantile sketch sampled; a small append's pixels must not weigh more,
    element for element, than a large one's (a sample per batch would give each batch the same
    weight, whatever its size)."""
    schema = {"features": {"img": {"dtype": "uint8", "shape": [32, 32, 3], "encoding": "tensor"}}}
    ds = cat.register("imgs", schema)
    rng = np.random.default_rng(0)
    ds.append_rows({"img": rng.integers(0, 100, (6000, 32, 32, 3), dtype=np.uint8)})
    ds.append_rows({"img": rng.integers(200, 256, (30, 32, 32, 3), dtype=np.uint8)})
    img = ds.stats().feature("img")
    share = 30 / 6030  # of the pixels, those >= 200
    q = img.quantile_values([0.5, 0.97, 1 - 3 * share])
    assert q is not None and q[0] == pytest.approx(49.5, abs=3) and max(q) < 100, q
    hist = img.histogram(4) or []
    assert sum(c for _lo, _hi, c in hist) == pytest.approx(img.values.count)  # every pixel, not the sample
    top = sum(c for lo, _hi, c in hist if lo >= 190)
    assert top / img.values.count == pytest.approx(share, rel=0.5), hist


# Features of every kind decoded_columns handles: taken directly (plain numbers and texts, a
# tensor given as one array) or decoded from their own entries (the rest).
_KINDS: dict[str, dict[str, Any]] = {
    "i": {"dtype": "int64"},
    "i_default": {"dtype": "int64", "default": 7},
    "f": {"dtype": "float32"},
    "s": {"dtype": "string", "default": "none"},
    "b": {"dtype": "bytes", "optional": True},
    "payload": {"dtype": "bytes"},  # taken directly, and long ones counted by digest
    "label": {"dtype": "int64", "names": ["a", "b", "c"]},
    "tokens": {"dtype": "int64", "shape": [None]},
    "weights": {"dtype": "float32", "shape": [None]},
    "pair": {"dtype": "float32", "shape": [2]},
    "px": {"dtype": "uint8", "shape": [2, 3], "encoding": "tensor"},
    "big": {"dtype": ">i4", "shape": [2], "encoding": "tensor"},
}


@st.composite
def _columns(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    """A schema of some of _KINDS, and columns for it with values of every type its
    encoders take (Python and NumPy numbers, bools, big integers, NaN, None where allowed)."""
    names = draw(st.lists(st.sampled_from(sorted(_KINDS)), min_size=1, max_size=5, unique=True))
    n = draw(st.integers(0, 30))  # at most 180 values a feature: a KLL sketch of k=200 is still exact
    ints = st.one_of(st.integers(-(2**63), 2**63 - 1), st.integers(-3, 3), st.booleans())
    floats = st.one_of(
        st.floats(width=32, allow_nan=True),
        st.integers(-(2**63), 2**63),
        st.just(2**60 + 2**36 + 1),  # rounds one way to float32 directly, another through float64
        st.just(np.longdouble(1) + np.longdouble(2**-24) + np.longdouble(2**-60)),  # so does this
    )
    token = st.one_of(
        st.integers(-5, 5),
        st.integers(-(2**63), 2**63 - 1),
        st.integers(0, 3).map(np.int32),
        st.integers(2**63 - 2, 2**63 + 1).map(np.uint64),  # above int64: refused
    )
    values: dict[str, st.SearchStrategy[Any]] = {
        "i": ints,
        "i_default": st.one_of(ints, st.none()),
        "f": floats,
        "s": st.one_of(st.text(max_size=5), st.none()),
        "b": st.one_of(st.binary(max_size=5), st.none()),
        "payload": st.one_of(st.binary(max_size=3), st.binary(min_size=120, max_size=300)),
        "label": st.integers(0, 2),
        "tokens": st.one_of(  # int64 lists as the tally takes them directly: lists, tuples, 1-D arrays
            st.lists(token, max_size=4),
            st.lists(token, max_size=4).map(tuple),
            hnp.arrays(st.sampled_from([np.int64, np.int16, np.uint32]), st.integers(0, 4)),
        ),
        "pair": st.lists(st.floats(-1e3, 1e3, width=32), min_size=2, max_size=2),
        "weights": st.lists(st.floats(width=32, allow_nan=True), max_size=4),
    }
    cols: dict[str, Any] = {}
    for name in names:
        if name == "px":
            cols[name] = draw(hnp.arrays(np.uint8, (n, 2, 3)))
        elif name == "big":
            cols[name] = draw(hnp.arrays(np.dtype(">i4"), (n, 2)))
        elif name == "f" and draw(st.booleans()):  # integers alone: NumPy takes them as int64, not float64
            cols[name] = draw(st.lists(st.one_of(st.integers(-(2**63), 2**63 - 1), st.just(2**60 + 2**36 + 1)),
                                       min_size=n, max_size=n))  # fmt: skip
        elif draw(st.booleans()) and name in ("i", "label"):  # a NumPy column (rows as Python ints)
            dtype = draw(st.sampled_from([np.int64, np.uint8, np.uint64, np.bool_]))
            cols[name] = np.array(draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)), dtype=dtype)
        elif name == "f" and draw(st.booleans()):  # a NumPy column the statistics take as it is
            dtype = draw(st.sampled_from([np.float32, np.float64, np.float16, np.int64, np.longdouble]))
            small = (
                st.one_of(st.floats(-6e4, 6e4, width=16), st.just(float("nan")))
                if dtype != np.int64
                else st.integers(-9, 9)
            )
            cols[name] = np.array(draw(st.lists(small, min_size=n, max_size=n)), dtype=dtype)
        else:
            cols[name] = draw(st.lists(values[name], min_size=n, max_size=n))
    return {"features": {k: _KINDS[k] for k in names}}, cols


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_columns())
def test_statistics_from_columns_equal_those_of_decoded_records(case: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """append_rows' statistics take the input columns (decoded_columns), not the records
    decoded again: the two must agree on every figure and sketch."""
    spec, cols = case
    schema = Schema.from_json(spec)
    (columns, rows), *_ = list(column_batches(cols, schema.features)) or [({}, 0)]
    filled: dict[str, list[int]] = {}
    entries: dict[str, Any] = {}
    try:
        records = schema.encode_columns(columns, rows, filled, entries)
    except ValidationError:
        return  # a value the schema refuses (an int64 for a float32 out of range...): nothing written
    by_records = Tally(schema)
    for record in records:
        by_records.add_record(record)
    for name, at in filled.items():
        by_records.fill(name, len(at))
    by_columns = Tally(schema)
    got_columns = decoded_columns(schema, columns, rows, filled, entries)
    assert got_columns is not None
    by_columns.add_columns(*got_columns[:1], rows, got_columns[1])
    got, want = (json.loads(zlib.decompress(t.result().to_bytes())) for t in (by_columns, by_records))
    assert got["records"] == want["records"]
    for name, feature in want["features"].items():
        for key, value in feature.items():
            assert got["features"][name][key] == value, (name, key)


_SEQUENCE = {
    "features": {"label": {"dtype": "int64"}},
    "sequence_features": {"tokens": {"dtype": "int64"}, "frames": {"dtype": "float32", "shape": [3]}},
}


@st.composite
def _sequences(draw: st.DrawFn) -> dict[str, Any]:
    """SequenceExample columns: steps as arrays of the feature's dtype (taken directly), or
    of another dtype, or lists (decoded from the records), 0-4 steps a row."""
    n = draw(st.integers(0, 20))
    steps = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    ints = st.sampled_from([np.int64, np.int32, list])
    kind = draw(ints)
    tokens = [np.arange(k, dtype=np.int64) * 7 - 3 for k in steps]
    frames = [np.linspace(-1, 1, 3 * k, dtype=np.float32).reshape(k, 3) for k in steps]
    if kind is list:
        tokens = [t.tolist() for t in tokens]
    elif kind is np.int32:
        tokens = [t.astype(np.int32) for t in tokens]
    return {"label": list(range(n)), "tokens": tokens, "frames": frames}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_sequences())
def test_sequence_statistics_from_columns_equal_those_of_decoded_records(cols: dict[str, Any]) -> None:
    """A SequenceExample's columns of arrays are taken directly (decoded_columns), equal to
    its records decoded; other columns give None (the records are decoded)."""
    schema = Schema.from_json(_SEQUENCE)
    (columns, rows), *_ = list(column_batches(cols, schema.features)) or [({}, 0)]
    filled: dict[str, list[int]] = {}
    records = schema.encode_columns(columns, rows, filled, {})
    by_records = Tally(schema)
    by_records.add_records(records)
    got_columns = decoded_columns(schema, columns, rows, filled, {})
    direct = rows > 0 and all(type(t) is np.ndarray and t.dtype == np.int64 for t in cols["tokens"])
    assert (got_columns is not None) == direct
    if got_columns is None:
        return
    by_columns = Tally(schema)
    by_columns.add_columns(got_columns[0], rows, got_columns[1])
    got, want = (json.loads(zlib.decompress(t.result().to_bytes())) for t in (by_columns, by_records))
    assert got == want


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_many_one_byte_values_are_counted_exactly(cat: Catalog, dtype: str) -> None:
    """Pixels are summed on a helper thread, a part at a time as they are written, across
    shards: every exact figure equals NumPy's over all of them."""
    schema = {"features": {"img": {"dtype": dtype, "shape": [16, 16, 3], "encoding": "tensor"}}}
    ds = cat.register("px", schema)
    info = np.iinfo(dtype)
    px = np.random.default_rng(3).integers(info.min, info.max + 1, (5000, 16, 16, 3)).astype(dtype)
    px[:100] = 0
    ds.append_rows({"img": px}, shard_records=1500)  # four shards, each counted in parts
    img = ds.stats().feature("img")
    flat = px.reshape(-1).astype(np.int64)
    assert (img.values.count, img.zeros) == (flat.size, int((flat == 0).sum()))
    assert (img.values.min, img.values.max) == (int(flat.min()), int(flat.max()))
    assert img.values.mean == pytest.approx(flat.mean(), rel=1e-12)
    assert img.values.std == pytest.approx(flat.std(), rel=1e-12)


@pytest.mark.parametrize("fill", [255, 0, -128, 127])
def test_byte_sums_are_exact_at_the_extremes(fill: int) -> None:
    """Sums of 1-byte values run in int32 rows: the largest values, over rows and a rest that
    is not a whole row, must not wrap."""
    dtype = np.int8 if fill < 0 or fill == 127 else np.uint8
    values = np.full(3 * BYTE_ROW + 11, fill, dtype=dtype)
    wide = values.astype(np.int64)
    got = byte_sums(values)
    assert got == (wide.size, int(wide.sum()), int((wide * wide).sum()), int((wide == 0).sum()), fill, fill)


def test_shards_of_like_tensors_sample_different_places(cat: Catalog) -> None:
    """Each shard's tally samples its own places: with one seed for all, 100 shards of the same
    three images showed the sketch the same few pixels (a median of 136 for pixels 0..252), and
    one-image appends never reached the sketch at all."""
    schema = {"features": {"img": {"dtype": "uint8", "shape": [64, 64, 3], "encoding": "tensor"}}}
    gradient = np.repeat((np.arange(64, dtype=np.uint8) * 4)[:, None, None], 64 * 3).reshape(64, 64, 3)
    ds = cat.register("g", schema)
    ds.append_rows({"img": np.repeat(gradient[None], 900, axis=0)}, shard_records=3)
    q = ds.stats().feature("img").quantile_values([0.1, 0.5, 0.9])
    truth = np.quantile(gradient, [0.1, 0.5, 0.9])
    # ~340 runs, each about one row's value: the median's rank error has a standard deviation
    # of ~2.7% (7 levels); one seed for all gave [136, 136, 136]
    assert q is not None and q[2] - q[0] >= 150 and np.abs(np.array(q) - truth).max() <= 40, (q, truth)
    ones = cat.register("ones", schema)
    for _ in range(30):  # 24 of an image's 12,288 values, in runs of 64: a run with probability 0.375
        ones.append_rows({"img": gradient[None]})
    assert ones.stats().feature("img").histogram(4) is not None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 100), max_size=60))
def test_batch_ends_cut_where_batch_full_does(lengths: list[int]) -> None:
    """write_decoded parts its records before writing them (batch_ends), as Tally.add_record
    batches them one by one (batch_full): the same parts."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tally, "BATCH", 5)
        mp.setattr(tally, "BATCH_BYTES", 150)
        want, records, nbytes = [], 0, 0
        for i, length in enumerate(lengths):
            records, nbytes = records + 1, nbytes + length
            if tally.batch_full(records, nbytes):
                want.append(i + 1)
                records = nbytes = 0
        if records:
            want.append(len(lengths))
        assert tally.batch_ends(lengths) == want


def _strict_json(text: str) -> Any:
    """JSON as a strict reader takes it: no NaN or Infinity."""

    def refuse(token: str) -> None:
        raise ValueError(f"not JSON: {token}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("big", [1e200, 1.7e308])
def test_values_beyond_float64_moments_are_appended(cat: Catalog, big: float) -> None:
    """Finite float64 values whose sum or variance overflows float64 were refused with a
    traceback (the statistics' JSON refuses infinity): the mean stays exact (scaled), a
    standard deviation beyond float64 reads as unknown, every figure is valid JSON."""
    schema = {"features": {"x": {"dtype": "float64", "shape": [2], "encoding": "tensor"}}}
    ds = cat.register("d", schema)
    ds.append_rows({"x": np.array([[big, -big], [big, big]])})
    ds.append_rows({"x": np.array([[-big, -big]])})  # a second shard: merged
    x = ds.stats().feature("x")
    assert (x.values.count, x.values.min, x.values.max) == (6, -big, big)
    assert x.values.mean == pytest.approx(0.0, abs=big * 1e-15)
    assert x.values.std is None
    same = cat.register("same", schema)  # no spread: its deviation is 0, however large the values
    same.append_rows({"x": np.full((3, 2), big)})
    assert (same.stats().feature("x").values.mean, same.stats().feature("x").values.std) == (big, 0.0)
    one_way = cat.register("one_way", schema)  # merged means of one sign near the limit stay finite
    one_way.append_rows({"x": np.zeros((2, 2))})
    one_way.append_rows({"x": np.full((2, 2), big)})
    assert one_way.stats().feature("x").values.mean == pytest.approx(big / 2)
    assert run("-C", cat.root, "stats", "one_way", "--json").exit_code == 0
    result = run("-C", cat.root, "stats", "d", "--json")
    assert result.exit_code == 0, result.output
    values = _strict_json(result.stdout)["features"][0]["values"]
    assert (values["std"], values["count"]) == (None, 6)
    compared = run("-C", cat.root, "stats", "d", "--compare", "2", "3", "--json")
    assert compared.exit_code == 0, compared.output
    assert _strict_json(compared.stdout)["features"][0]["feature"] == "x"
    web = pytest.importorskip("starlette.testclient").TestClient(create_app(cat.root))
    for path in ("/api/datasets/d/stats", "/datasets/d/stats", "/api/datasets/d/compare?a=2&b=3"):
        response = web.get(path)
        assert response.status_code == 200, (path, response.text[:300])
        if path.startswith("/api"):
            _strict_json(response.text)


@pytest.mark.parametrize(
    "args",
    [
        ["stats", "d", "--version", "9" * 30],
        ["cat", "d", "--version", "9" * 30],
        ["stats", "d", "--compare", "1", "9" * 30],
        ["stats", "d", "--compare", f"train@{'9' * 30}", "2"],
        ["stats", "d", "--compare", "\u00b2", "2"],
        ["cat", "d", "--sample", "3", "--seed", "-1"],
    ],
)
def test_odd_numbers_on_the_command_line_are_one_line(cat: Catalog, args: list[str]) -> None:
    """A version beyond SQLite's integers was an OverflowError, a superscript digit a
    ValueError from int(), a negative seed numpy's ValueError: each a traceback."""
    cat.register("d", {"features": {"x": {"dtype": "int64"}}}).append_rows([{"x": 1}, {"x": 2}])
    result = run("-C", cat.root, *args)
    assert result.exit_code in (1, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


def test_stats_and_show_print_values_as_text(cat: Catalog) -> None:
    """Values and names are data, never markup or terminal commands: rich read '[/red]' as a
    closing tag (a traceback) and '[link=...]' as a hyperlink; an ESC, a C1 CSI or a bidi
    override went to the terminal as it was. Each now shows as text, its controls escaped."""
    evil_name = "[link=https://evil.example/]click[/link]\x1b[31m"
    schema = {
        "features": {
            "s": {"dtype": "string"},
            "label": {"dtype": "int64", "names": ["cat", "[/]", "[blink]x"]},
            evil_name: {"dtype": "int64"},
        }
    }
    ds = cat.register("d", schema)
    values = ["[/red]", "[blink]x", "\x1b[2J", "a\u009b31mb", "\u202eabc"]
    ds.append_rows([{"s": v, "label": i % 3, evil_name: i} for i, v in enumerate(values * 3)])
    for args in (["stats", "d"], ["show", "d"], ["cat", "d"], ["stats", "d", "--compare", "2", "2"]):
        result = run("-C", cat.root, *args)
        assert result.exit_code == 0, (args, result.output)
        for raw in ("\x1b", "\u009b", "\u202e"):
            assert raw not in result.stdout, (args, raw)
        if args[0] == "stats" and len(args) == 2:
            assert "[/red]" in result.stdout and "[link=https://evil.example/]click[/link]" in result.stdout
    lines = run("-C", cat.root, "cat", "d").stdout.splitlines()
    assert [json.loads(line)["s"] for line in lines] == values * 3  # escaped, not changed


def test_check_of_a_range_refuses_nan_and_infinity(cat: Catalog) -> None:
    """min/max were checked on the finite values only: NaN and infinities passed a range
    check (all-NaN data passed anything); a range on a string feature was taken, never checked."""
    ds = cat.register("d", {"features": {"x": {"dtype": "float32", "checks": {"min": 0, "max": 10}}}})
    ds.append_rows({"x": np.array([1, 2, 3], np.float32)})
    for bad in ([5, np.inf], [5, -np.inf], [np.nan, np.nan]):
        with pytest.raises(CheckError, match=r"feature 'x': .* NaN or infinite values? outside its range"):
            ds.append_rows({"x": np.array(bad, np.float32)}, check="fail")
    assert ds.append_rows({"x": np.array([0, 10], np.float32)}, check="fail").records == 2
    assert cat.dataset("d").version == 3
    with pytest.raises(SchemaError, match=r"min.*max.*numbers"):
        cat.register("s", {"features": {"s": {"dtype": "string", "checks": {"min": 0}}}})


def test_compare_with_a_side_of_no_records(cat: Catalog) -> None:
    """Version 1 (registered, no records) against version 2 showed every feature as 'only in
    B': both schemas declare it; one side just has no records of it."""
    ds = cat.register("d", {"features": {"x": {"dtype": "float32"}, "w": {"dtype": "string"}}})
    ds.append_rows([{"x": 1.0, "w": "a"}, {"x": 2.0, "w": "b"}])
    ds.migrate(add=["z:int64=0"])  # z: in version 3's schema only
    compared = {f.name: f for f in ds.compare_stats("1", "3").features}
    assert compared["x"].only_in is None and compared["w"].only_in is None
    assert compared["x"].mean == (None, 1.5) and compared["x"].linf is None
    assert compared["z"].only_in == "b"


def test_a_stored_range_check_on_text_still_reads(cat: Catalog) -> None:
    """Refusing a min/max check on a text feature at parse time made datasets registered with
    one before unreadable (show, cat, append, migrate): stored schemas read as ever, the check
    ignored (and kept by a migration); a schema registered with one is refused."""
    import sqlite3

    ds = cat.register("d", {"features": {"s": {"dtype": "string"}, "x": {"dtype": "int64"}}})
    ds.append_rows([{"s": "a", "x": 1}])
    with sqlite3.connect(cat.root / "catalog.db") as conn:  # as an earlier version stored it
        stored = {"features": {"s": {"dtype": "string", "checks": {"min": 1}}, "x": {"dtype": "int64"}}}
        conn.execute("UPDATE schema_versions SET schema_json = ?", (json.dumps(stored),))
    again = Catalog.open(cat.root).dataset("d")
    assert list(again.read()) == [{"s": "a", "x": 1}]
    # the text range applies to nothing, so the default L-infinity limit does (issue 30): warned
    warned = again.append_rows([{"s": "b", "x": 2}], check="warn")
    assert warned.records == 1 and "(the default)" in warned.warnings[0]
    assert run("-C", cat.root, "verify").exit_code == 0
    again.migrate(add=["z:int64=0"])  # the stored check comes along in the new version: tolerated
    assert Catalog.open(cat.root).dataset("d").version == 4


def test_shard_limits_take_numpy_integers(cat: Catalog) -> None:
    ds = cat.register("d", {"features": {"x": {"dtype": "int64"}}})
    commit = ds.append_rows([{"x": i} for i in range(8)], shard_records=np.int64(4), shard_size=np.int64(1 << 20))
    assert commit.shard_count == 2


def test_check_without_thresholds_uses_the_default_and_says_what_it_compared(cat: Catalog, tmp_path: Path) -> None:
    """issue 30: `append --check` on a schema without checks committed drifted data and said nothing."""
    ds = cat.register("d", {"features": {"x": {"dtype": "float32"}, "y": {"dtype": "int64"}}})  # no checks
    rng = np.random.default_rng(7)
    ds.append_rows({"x": rng.normal(0, 1, 2000).astype(np.float32), "y": rng.integers(0, 3, 2000)})
    shifted = tmp_path / "shifted.jsonl"
    shifted.write_text("".join(json.dumps({"x": float(v), "y": 1}) + "\n" for v in rng.normal(3, 1, 500)))
    same = tmp_path / "same.jsonl"
    similar = ({"x": float(v), "y": int(rng.integers(0, 3))} for v in rng.normal(0, 1, 500))
    same.write_text("".join(json.dumps(r) + "\n" for r in similar))
    refused = run("-C", cat.root, "append", "d", shifted, "--check")
    assert refused.exit_code == 1 and refused.stderr.count("\n") == 1, refused.output
    assert refused.stderr.startswith("error: dataset 'd': append refused by --check: feature 'x': L-infinity distance")
    assert "is above the limit 0.1 (the default)" in refused.stderr
    assert cat.dataset("d").version == 2
    passed = run("-C", cat.root, "append", "d", same, "--check")
    assert passed.exit_code == 0, passed.output
    lines = passed.stderr.splitlines()
    assert lines[0] == "checked 500 new records against version 2 (split 'train', 2000 records):"
    assert lines[1].startswith("  feature 'x': L-infinity distance ") and lines[1].endswith(" (limit 0.1, the default)")
    assert lines[2].startswith("  feature 'y': L-infinity distance ")
    again = tmp_path / "again.jsonl"
    again.write_text(same.read_text() + '{"x": 0.5, "y": 2}\n')  # other bytes: not the same input twice
    doc = json.loads(run("-C", cat.root, "append", "d", again, "--check=warn", "--json").stdout)
    assert doc["check"]["against"] == {"version": 3, "split": "train", "records": 2500}
    measured = [(f["feature"], f["check"], f["limit"], f["default"]) for f in doc["check"]["features"]]
    assert measured == [("x", "linf", 0.1, True), ("y", "linf", 0.1, True)]
    commit = ds.append_rows({"x": rng.normal(0, 1, 500).astype(np.float32), "y": np.ones(500, np.int64)}, check="warn")
    assert commit.check is not None and [w for w in commit.warnings if "'y'" in w]  # y: all ones now


def test_check_with_nothing_to_compare_is_refused(cat: Catalog, tmp_path: Path) -> None:
    ds = cat.register("e", {"features": {"x": {"dtype": "float32"}}})
    (tmp_path / "a.jsonl").write_text('{"x": 1.0}\n')
    said = (
        "error: dataset 'e': --check has nothing to check: no records to compare the new ones with, and the schema "
        "sets no max_missing, min or max checks; append without --check, or declare checks in the schema\n"
    )
    result = run("-C", cat.root, "append", "e", tmp_path / "a.jsonl", "--check")
    assert (result.exit_code, result.stderr) == (1, said)
    with pytest.raises(CheckError, match="--check has nothing to check"):
        ds.append_rows([{"x": 1.0}], check="warn")
    assert cat.dataset("e").version == 1
    ok = cat.register("f", {"features": {"x": {"dtype": "float32", "checks": {"min": 0}}}})
    assert ok.append_rows([{"x": 1.0}], check="fail").check is not None  # a range needs nothing to compare with


def test_float_tensors_are_counted_exactly_on_the_thread(cat: Catalog) -> None:
    """Large float tensors' exact figures (zeros, NaNs, infinities, moments of the finite ones)
    are counted on the helper thread, a part at a time, across shards: equal to NumPy's."""
    schema = {"features": {"x": {"dtype": "float32", "shape": [32, 32], "encoding": "tensor"}}}
    ds = cat.register("fx", schema)
    x = np.random.default_rng(5).normal(3, 2, (3000, 32, 32)).astype(np.float32)
    x[:50] = 0
    x[60, 1, :5] = np.nan
    x[70, 2, :3] = np.inf
    x[80, 3, :2] = -np.inf
    ds.append_rows({"x": x}, shard_records=1000)
    fs = ds.stats().feature("x")
    flat = x.reshape(-1).astype(np.float64)
    finite = flat[np.isfinite(flat)]
    assert (fs.zeros, fs.nans, fs.infs) == (int((flat == 0).sum()), 5, 5)
    assert (fs.values.count, fs.values.min, fs.values.max) == (finite.size, finite.min(), finite.max())
    assert fs.values.mean == pytest.approx(finite.mean(), rel=1e-9)
    assert fs.values.std == pytest.approx(finite.std(), rel=1e-9)
    q = fs.quantile_values([0.5])
    assert q is not None and q[0] == pytest.approx(np.median(finite), abs=0.3)


def test_sequence_steps_of_lists_are_tallied_value_by_value(cat: Catalog) -> None:
    """A step that is itself a list (shape [None]: a SequenceExample's feature list of lists)
    was counted as one value per step, and a numeric one stopped every append with a NumPy
    ValueError (append, append_rows and adopt alike)."""
    schema = {
        "features": {"id": {"dtype": "int64"}},
        "sequence_features": {
            "ints": {"dtype": "int64", "shape": [None]},
            "floats": {"dtype": "float32", "shape": [None]},
            "words": {"dtype": "string", "shape": [None]},
        },
    }
    ds = cat.register("steps_of_lists", schema)
    rows = [
        {"id": 0, "ints": [[1], [2, 3]], "floats": [[0.5, -1.5]], "words": [["a", "b"], [], ["c"]]},
        {"id": 1, "ints": [], "floats": [[], [4.0]], "words": [["d"]]},
        {"id": 2, "ints": [[-7, 9, 0]], "floats": [[2.0]], "words": []},
    ]
    ds.append_rows(rows)
    stats = ds.stats()
    ints = stats.feature("ints")
    assert (ints.values.count, ints.values.min, ints.values.max, ints.zeros) == (6, -7, 9, 1)
    floats = stats.feature("floats")
    assert (floats.values.count, floats.values.min, floats.values.max) == (4, -1.5, 4.0)
    read = [[np.asarray(step).tolist() for step in r["ints"]] for r in ds.read()]
    assert read == [r["ints"] for r in rows]


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(7).normal(1000, 0.01, 3 * sketches.PASS + 17).astype(np.float32),  # mean >> spread
        np.random.default_rng(8).integers(-(2**62), 2**62, 2 * sketches.PASS + 1),
        np.random.default_rng(9).integers(0, 2**64 - 1, sketches.PASS + 3, dtype=np.uint64),
        np.concatenate([np.zeros(sketches.PASS), np.full(sketches.PASS + 5, 7.5)]),  # parts of unlike means
    ],
)
def test_moments_of_many_parts_equal_numpy(values: np.ndarray) -> None:
    """Moments of more than PASS numbers are summed a part at a time in float64 and the parts
    merged: the mean and the spread equal NumPy's over the whole, to float64 rounding."""
    m = sketches.Moments()
    m.add(values)
    wide = values.astype(np.float64)
    assert (m.count, m.min, m.max) == (values.size, values.min().item(), values.max().item())
    assert m.mean == pytest.approx(wide.mean(), rel=1e-12)
    assert m.m2 == pytest.approx(wide.var() * wide.size, rel=1e-9)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int16"])
def test_zeros_counted_by_comparison_equal_numpy(dtype: str) -> None:
    """Zeros of floats are counted by comparing (NumPy's count_nonzero of floats is slow): -0.0
    counts, NaN and infinities do not, whatever the dtype."""
    values = np.random.default_rng(4).integers(-3, 4, 50_000).astype(dtype)
    if values.dtype.kind == "f":
        values[::7] = -0.0
        values[1::11] = np.nan
        values[2::13] = -np.inf
    want = int(np.sum(values.astype(np.float64) == 0))
    assert tally.count_zeros(values) == want
    assert tally.number_figures(values).zeros == want


def test_small_tensor_batches_are_counted_without_a_thread(cat: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tensor batches under INLINE_BYTES are counted where they are tallied (a thread cost a
    small append 8 ms waiting for 0.2 ms of sums); larger ones on the thread: exact both ways."""
    pools: list[object] = []
    real = tally.ThreadPoolExecutor

    def counting(*args: Any, **kwargs: Any) -> Any:
        pools.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(tally, "ThreadPoolExecutor", counting)
    schema = {"features": {"img": {"dtype": "uint8", "shape": [32, 32, 3], "encoding": "tensor"}}}
    px = np.random.default_rng(2).integers(0, 256, (400, 32, 32, 3), dtype=np.uint8)
    small, large = cat.register("small", schema), cat.register("large", schema)
    small.append_rows({"img": px[:100]})  # 300 KiB
    assert pools == []
    large.append_rows({"img": np.concatenate([px] * 3)})  # 3.5 MiB: past INLINE_BYTES
    assert len(pools) == 1
    for ds, images in ((small, px[:100]), (large, np.concatenate([px] * 3))):
        img, flat = ds.stats().feature("img"), images.reshape(-1).astype(np.int64)
        assert (img.values.count, img.zeros, img.values.min, img.values.max) == (
            flat.size, int((flat == 0).sum()), int(flat.min()), int(flat.max()))  # fmt: skip
        assert img.values.mean == pytest.approx(flat.mean(), rel=1e-12)


def _near(dtype: str, lo: int, hi: int) -> Any:
    return hnp.arrays(dtype, st.integers(0, 300), elements=st.integers(lo, hi))


@settings(max_examples=300, deadline=None)
@given(
    hnp.arrays(st.sampled_from(["int8", "uint8", "int16", "int32", "int64", "uint64"]), st.integers(0, 300))
    | _near("int64", 2**63 - 1500, 2**63 - 1)  # float64 rounds these to multiples of 1024
    | _near("int64", -(2**63), -(2**63) + 400)
    | _near("uint64", 2**64 - 400, 2**64 - 1)
    | _near("int64", -3000, 3000)
)
def test_integers_sorted_by_counting_equal_numpy_sort(values: np.ndarray) -> None:
    """The quantile sketch's input, integers of a small range counted and repeated: the values
    np.sort gives, as float64, at every dtype's extremes."""
    got, want = tally.sorted_values(values), np.sort(values).astype(np.float64)
    assert got.dtype == np.float64 and np.array_equal(got, want)


def test_sequence_steps_given_as_arrays_equal_steps_given_as_lists() -> None:
    """A sequence feature whose records' steps are the rows of one array is flattened whole;
    its statistics equal those of the same steps given as lists, one a step."""
    schema = Schema.from_json(
        {"features": {}, "sequence_features": {"frames": {"dtype": "float32", "shape": [3]},
                                               "ids": {"dtype": "int64", "shape": [2]}}}
    )  # fmt: skip
    rng = np.random.default_rng(11)
    steps = rng.integers(1, 7, 400)
    frames = [rng.normal(0, 5, (k, 3)).astype(np.float32) for k in steps]
    ids = [rng.integers(-50, 50, (k, 2)) for k in steps]
    tallies = []
    for form in (lambda a: a, lambda a: [step.tolist() for step in a]):
        t = Tally(schema, helper=False)
        columns = {"frames": np.fromiter(map(form, frames), dtype=object, count=400),
                   "ids": np.fromiter(map(form, ids), dtype=object, count=400)}  # fmt: skip
        t.add_columns(columns, 400, {})
        tallies.append(t.result())
    as_arrays, as_lists = tallies
    for name, rows in (("frames", frames), ("ids", ids)):
        flat = np.concatenate(rows, axis=None).astype(np.float64)
        got, want = as_arrays.features[name], as_lists.features[name]
        assert (got.values.count, got.values.min, got.values.max, got.zeros) == (
            flat.size, flat.min(), flat.max(), int((flat == 0).sum()))  # fmt: skip
        assert (want.values.count, want.values.min, want.values.max) == (flat.size, flat.min(), flat.max())
        assert got.values.mean == pytest.approx(want.values.mean, rel=1e-12)
        assert got.quantiles.n == want.quantiles.n == flat.size
        assert (got.lengths.count, got.lengths.min, got.lengths.max) == (400, int(steps.min()), int(steps.max()))


def test_row_level_migration_tallies_its_rows_not_its_records_again(
    cat: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row-level migration hands the statistics the rows it encoded (as an append's columns):
    no record is decoded again for them, and they equal those of the new records decoded."""
    features = {"id": {"dtype": "int64"}, "word": {"dtype": "string"}, "blob": {"dtype": "bytes"},
                "f": {"dtype": "float32", "shape": [None]}, "t": {"dtype": "int64", "shape": [None]},
                "img": {"dtype": "uint8", "shape": [4, 4], "encoding": "tensor"},
                "x": {"dtype": "float32", "shape": [3], "encoding": "tensor"}}  # fmt: skip
    schema = {"features": features}
    rng = np.random.default_rng(12)
    ds = cat.register("d", schema)
    ds.append_rows([{"id": i, "word": f"w{i % 9}", "blob": rng.bytes(int(rng.integers(0, 300))),
                     "f": rng.normal(0, 3, int(rng.integers(0, 9))).astype(np.float32),
                     "t": rng.integers(-5, 5, int(rng.integers(0, 6))),
                     "img": rng.integers(0, 256, (4, 4), dtype=np.uint8),
                     "x": rng.normal(0, 2, 3).astype(np.float32)} for i in range(3000)])  # fmt: skip
    script = tmp_path / "migrations" / "d" / "0001_z.py"
    script.parent.mkdir(parents=True)
    script.write_text(
        "from catalog.migrate import AddField\n\n"
        'operations = [AddField("z", {"dtype": "int64"}, fn=lambda r: r["id"] % 3)]\n'
    )
    decoded: list[int] = []
    real = Tally.add_decoded
    monkeypatch.setattr(
        Tally,
        "add_decoded",
        lambda self, records, counted: (decoded.append(len(records)), real(self, records, counted)),
    )
    monkeypatch.setattr(helpers_module().SLOT, "enabled", False)  # the writer's own tally: what it decodes shows
    ds.migrate(tmp_path / "migrations")
    assert decoded == []
    migrated = cat.dataset("d")
    st = migrated.stats()
    fresh = Tally(migrated.schema, helper=False)
    fresh.add_records(migrated.records())
    want = fresh.result()
    for name in ("id", "word", "blob", "f", "t", "img", "x", "z"):
        a, b = st.feature(name), want.features[name]
        assert (a.records, a.present, a.missing, a.zeros) == (b.records, b.present, b.missing, b.zeros), name
        assert (a.values.count, a.values.min, a.values.max) == (b.values.count, b.values.min, b.values.max), name
        assert a.values.mean == pytest.approx(b.values.mean, rel=1e-12), name
        if a.lengths is not None:
            assert (a.lengths.count, a.lengths.min, a.lengths.max) == (b.lengths.count, b.lengths.min, b.lengths.max)
        if a.top is not None:
            assert sorted(a.top_values(5)) == sorted(b.top_values(5)), name


def helpers_module() -> Any:
    from catalog.stats import helper

    return helper


@pytest.mark.parametrize("dtype", ["int8", "float64", "bool"])
def test_an_optional_scalar_tensor_counts_its_values_and_its_missing(cat: Catalog, dtype: str) -> None:
    """One number a record, or None: its values are numbers, as a scalar's (an append of them
    failed: the statistics took each for a list)."""
    ds = cat.register("t", {"features": {"k": {"dtype": dtype, "shape": [], "encoding": "tensor", "optional": True}}})
    values: list[Any] = {"int8": [1, None, 0, 1, None], "float64": [2.5, None, 0.0, -1.5, None]}.get(
        dtype, [True, None, False, True, None]
    )
    ds.append_rows([{"k": v} for v in values])
    k = ds.stats().feature("k")
    given = [float(v) for v in values if v is not None]
    assert (k.present, k.missing) == (len(given), values.count(None))
    assert (k.values.min, k.values.max, k.zeros) == (min(given), max(given), given.count(0.0))


def test_row_level_migration_carries_the_statistics_of_what_it_leaves(
    cat: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row-level migration's features written as they were read (renamed or not) take their
    source shard's statistics; only what it computes or casts is tallied. Every figure equals
    what the migrated records, decoded and tallied anew, give (fills carried as the migration
    carries them; sketches within their error)."""
    ds = cat.register("d", SCHEMA)
    ds.append_rows(generated(3000), shard_records=1000)
    before = {name: ds.stats().feature(name) for name in SCHEMA["features"]}
    script = tmp_path / "migrations" / "d" / "0001_z.py"
    script.parent.mkdir(parents=True)
    script.write_text(
        "from catalog.migrate import AddField, CastField, RenameField\n\n"
        "operations = [\n"
        '    RenameField("word", "text"),\n'
        '    CastField("i", {"dtype": "float32"}, lossy=True),\n'
        '    AddField("z", {"dtype": "int64"}, fn=lambda r: int(r["i"]) % 7),\n'
        "]\n"
    )
    tallied: list[set[str]] = []
    real = Tally.add_columns
    monkeypatch.setattr(
        Tally,
        "add_columns",
        lambda self, columns, n, absent, ragged=None: (
            tallied.append(set(columns) | set(ragged or {})),
            real(self, columns, n, absent, ragged),
        ),
    )
    monkeypatch.setattr(helpers_module().SLOT, "enabled", False)  # the writer's own tally: what it counts shows
    ds.migrate(tmp_path / "migrations", workers=1)  # in this process: what it tallies shows
    assert tallied and set().union(*tallied) == {"i", "z"}  # the cast and the computed feature alone
    migrated = cat.dataset("d")
    st = migrated.stats()
    assert st.at.missing_shards == 0 and st.at.shards == 3
    fresh = Tally(migrated.schema, helper=False)
    fresh.add_records(migrated.records())
    want = fresh.result()
    for name in ("i", "f", "label", "text", "blob", "tokens", "pixels", "z"):
        a, b = st.feature(name), want.features[name]
        assert (a.records, a.missing, a.zeros, a.nans, a.infs) == (b.records, b.missing, b.zeros, b.nans, b.infs), name
        assert (a.values.count, a.values.min, a.values.max) == (b.values.count, b.values.min, b.values.max), name
        assert a.values.mean == pytest.approx(b.values.mean, rel=1e-9), name
        if a.top is not None:
            assert sorted(a.top_values(3)) == sorted(b.top_values(3)), name
    text = st.feature("text")  # the default-filled words: counted as the source counted them
    assert (text.filled, text.present) == (before["word"].filled, before["word"].present) and text.filled > 0
    assert st.feature("i").kind == "float" and st.feature("z").values.max == 6


def test_add_field_function_reads_the_row_and_changes_nothing(cat: Catalog, tmp_path: Path) -> None:
    """An AddField's function gets the row read-only (its arrays too): one that would change the
    features it leaves (whose statistics are carried) stops the migration naming the record,
    and nothing is registered; a Transform is what changes rows."""
    ds = cat.register("d", SCHEMA)
    ds.append_rows(generated(50))
    version = cat.dataset("d").version
    for body in ('r.__setitem__("f", 0.0) or 1', 'r["pixels"].__setitem__(0, 0) or 1', 'r["tokens"].fill(0) or 1'):
        script = tmp_path / "m" / "d" / "0001_z.py"
        script.parent.mkdir(parents=True, exist_ok=True)
        add = f'AddField("z", {{"dtype": "int64"}}, fn=lambda r: {body})'
        script.write_text(f"from catalog.migrate import AddField\n\noperations = [{add}]\n")
        result = run("-C", cat.root, "migrate", "d", "--migrations", tmp_path / "m")
        assert result.exit_code == 1, body
        line = result.stderr.strip()
        assert "\n" not in line and "record 0" in line and "Traceback" not in result.output, line
        assert (cat.dataset("d").version, cat.dataset("d").schema_version) == (version, 1), line
    reads = "len(json.dumps(sorted(r))) + len(dict(r)) + len(r.copy()) + isinstance(r, dict) + len(repr(r)) * 0"
    script.write_text(
        "import json\nfrom catalog.migrate import AddField\n\n"
        f'operations = [AddField("z", {{"dtype": "int64"}}, fn=lambda r: {reads})]\n'
    )
    result = run("-C", cat.root, "migrate", "d", "--migrations", tmp_path / "m")
    assert result.exit_code == 0, result.output  # a function that only reads the row, as a dict
    assert {int(r["z"]) for r in cat.dataset("d").read()} == {len(json.dumps(sorted(SCHEMA["features"]))) + 15}
