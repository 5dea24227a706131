"""Columnar batches at Arrow's speed (issue 34 §2): ``ds.batches(256)`` against Hugging Face
``datasets`` iterating the same rows from its Arrow cache, and against tf.data, on four
workloads: 8 scalar columns, a variable-length int64 list, a 32x32x3 uint8 tensor, a 1 KB
bytes column.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_columns                  # full run, about 3 minutes
    .venv/bin/python -m benchmarks.bench_columns --quick          # a tenth of the rows, fewer rounds
    .venv/bin/python -m benchmarks.bench_columns --json out.json  # also save every timing (and profiles)
    .venv/bin/python -m benchmarks.bench_columns --profile all    # cProfile every catalog side (default: missed)

Each workload's rows are written once, untimed, into a catalog dataset of 8 shards and into
a Hugging Face ``Dataset`` (``from_dict`` with its features, ``save_to_disk``, then
``load_from_disk``: memory-mapped Arrow). The sides, each iterating one epoch in order in
this process with batches of 256, all files page-cached:

* catalog: ``for batch in ds.batches(256)``;
* Hugging Face: ``for batch in hf.with_format("numpy", **kw).iter(batch_size=256)``: ``kw`` is
  ``dtype=np.uint8`` for the tensor (without it ``datasets`` casts every integer to int64, a
  different output: that is an (info) row);
* tf.data: ``TFRecordDataset(files).batch(256).map(parse_example)``, each tensor ``.numpy()``, over
  the catalog's shard files with the schema's full feature spec (``decode_raw`` and a
  reshape for the tensor, as a user writes it);
* (info) ``ds.source()[indices]``: the epoch in batches of 256 random positions.

The first batch of every side is checked against the catalog's (same values) before timing.
Rounds are interleaved, the order rotating; ratios are from the median rounds (the best
rounds' in the JSON).
"""

from __future__ import annotations

import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import harness as h
from catalog import Catalog, Dataset
from catalog.schema import to_tf_feature_spec

BATCH = 256
SHARDS = 8
IMAGE = (32, 32, 3)
BLOB_BYTES = 1024
TOKENS_MAX = 64
SCHEMAS: dict[str, dict[str, Any]] = {
    "scalars": {
        "features": {
            **{name: {"dtype": "int64"} for name in ("id", "label", "count", "delta")},
            **{name: {"dtype": "float32"} for name in ("a", "b", "c", "d")},
        }
    },
    "tokens": {"features": {"tokens": {"dtype": "int64", "shape": [None]}}},
    "image": {"features": {"image": {"dtype": "uint8", "shape": list(IMAGE), "encoding": "tensor"}}},
    "blob": {"features": {"blob": {"dtype": "bytes"}}},
}
TITLES = {
    "scalars": "8 scalar columns (4 int64, 4 float32)",
    "tokens": f"a variable-length int64 list (0 to {TOKENS_MAX} values)",
    "image": "a 32x32x3 uint8 tensor",
    "blob": f"a {BLOB_BYTES}-byte bytes column",
}
TARGETS = {"hf": 1.2, "tf.data": 1.5}


@dataclass(kw_only=True)
class Config(h.Racing):
    rows: tuple[tuple[str, int], ...]  # (workload, rows): each epoch about 0.5 to 2 s here


FULL = Config(
    rows=(("scalars", 300_000), ("tokens", 200_000), ("image", 200_000), ("blob", 300_000)),
    repeats=5, budget=60.0, max_rounds=9,
)  # fmt: skip
QUICK = Config(
    rows=(("scalars", 30_000), ("tokens", 20_000), ("image", 20_000), ("blob", 30_000)),
    repeats=3, budget=5.0, max_rounds=5,
)  # fmt: skip


# --------------------------------------------------------------------------- the data


def columns(workload: str, n: int) -> dict[str, Any]:
    """The workload's rows as columns (a fixed seed: every run writes the same values)."""
    rng = np.random.default_rng(34)
    if workload == "scalars":  # ids, small labels, 31-bit counts, signed deltas (10-byte varints)
        ints = {
            "id": np.arange(n, dtype=np.int64),
            "label": rng.integers(0, 10, n),
            "count": rng.integers(0, 1 << 31, n),
            "delta": rng.integers(-1000, 1000, n),
        }
        floats = {k: rng.standard_normal(n).astype(np.float32) for k in "abcd"}
        return {**ints, **floats}
    if workload == "tokens":
        return {"tokens": [rng.integers(0, 50_000, k) for k in rng.integers(0, TOKENS_MAX + 1, n)]}
    if workload == "image":
        return {"image": rng.integers(0, 256, (n, *IMAGE), dtype=np.uint8)}
    # no value ends in a zero byte: datasets' numpy batches hold them as fixed-width bytes ('S1024'),
    # whose items drop trailing zero bytes
    blobs = rng.integers(0, 256, (n, BLOB_BYTES), dtype=np.uint8)
    blobs[:, -1] |= 1
    return {"blob": [row.tobytes() for row in blobs]}


def hf_features(workload: str) -> Any:
    import datasets

    v = datasets.Value
    return datasets.Features(
        {
            "scalars": {
                **{k: v("int64") for k in ("id", "label", "count", "delta")},
                **{k: v("float32") for k in "abcd"},
            },
            "tokens": {"tokens": datasets.List(v("int64"))},
            "image": {"image": datasets.Array3D(IMAGE, "uint8")},
            "blob": {"blob": v("binary")},
        }[workload]
    )


def build(cat: Catalog, root: Path, workload: str, n: int) -> tuple[Dataset, Any]:
    """The workload's rows in a catalog dataset of SHARDS shards and in a Hugging Face Arrow cache."""
    import datasets

    cols = columns(workload, n)
    ds = cat.register(workload, SCHEMAS[workload])
    with ds.writer(shard_records=-(-n // SHARDS)) as w:
        h.skip_shard_fsync(w)
        for at in range(0, n, 50_000):
            w.write_batch({k: v[at : at + 50_000] for k, v in cols.items()})
    hf_cols = {k: [t.tolist() for t in v] if workload == "tokens" else v for k, v in cols.items()}
    folder = root / "hf" / workload
    datasets.Dataset.from_dict(hf_cols, features=hf_features(workload)).save_to_disk(str(folder))
    h.cache_tree(root)
    return cat.dataset(workload), datasets.load_from_disk(str(folder))


# --------------------------------------------------------------------------- the sides

Epoch = Callable[[], Iterable[dict[str, Any]]]


def catalog_epoch(ds: Dataset) -> Epoch:
    return lambda: ds.batches(BATCH)


def source_epoch(ds: Dataset) -> Epoch:
    src = ds.source()
    order = np.random.default_rng(1).permutation(len(src))

    def epoch() -> Iterable[dict[str, Any]]:
        return (src[order[at : at + BATCH]] for at in range(0, len(order), BATCH))

    return epoch


def hf_epoch(hf: Any, **kw: Any) -> Epoch:
    return lambda: hf.with_format("numpy", **kw).iter(batch_size=BATCH)


def tf_epoch(tf: Any, ds: Dataset) -> Epoch:
    """The issue's pipeline: TFRecordDataset + batch + map(parse_example), the full feature spec."""
    spec = to_tf_feature_spec(ds.schema.feature_spec(), tf)
    tensors = {name: f for name, f in ds.schema.features.items() if f.tensor}
    files = ds.files()

    def parse_example(serialized: Any) -> Any:
        out = tf.io.parse_example(serialized, spec)
        for name, f in tensors.items():
            out[name] = tf.reshape(tf.io.decode_raw(out[name], getattr(tf, f.dtype)), [-1, *f.shape])
        return out

    def epoch() -> Iterable[dict[str, Any]]:
        batches = tf.data.TFRecordDataset(files).batch(BATCH).map(parse_example)
        return ({name: as_numpy(tf, t) for name, t in batch.items()} for batch in batches)

    return epoch


def as_numpy(tf: Any, tensor: Any) -> Any:
    """A tensor's numpy value; a sparse one's three arrays (``as_numpy_iterator`` converts a
    SparseTensor element by element here: minutes an epoch)."""
    if isinstance(tensor, tf.SparseTensor):
        return tf.compat.v1.SparseTensorValue(tensor.indices.numpy(), tensor.values.numpy(), tensor.dense_shape.numpy())
    return tensor.numpy()


def run_epoch(epoch: Epoch) -> tuple[int, dict[str, Any]]:
    """One epoch: the rows seen and the first batch."""
    rows, first = 0, None
    for batch in epoch():
        first = batch if first is None else first
        column = next(iter(batch.values()))
        rows += int(column.dense_shape[0]) if hasattr(column, "dense_shape") else len(column)
    return rows, first or {}


# --------------------------------------------------------------------------- the value check


def rows_of(column: Any, n: int) -> list[Any]:
    """A column's first ``n`` values as comparable Python values (a tf.data sparse value per row)."""
    if hasattr(column, "indices") and hasattr(column, "values"):  # VarLenFeature: a SparseTensorValue
        rows = column.indices[:, 0]
        return [column.values[rows == i].tolist() for i in range(n)]
    return [bytes(v) if isinstance(v, (bytes, np.bytes_)) else np.asarray(v).tolist() for v in column[:n]]


def same_values(side: str, workload: str, mine: dict[str, Any], theirs: dict[str, Any]) -> None:
    n = len(next(iter(mine.values())))
    for name, column in mine.items():
        h.check(name in theirs, f"{side} on {workload}: no column {name!r}")
        got, want = rows_of(theirs[name], n), rows_of(column, n)
        h.check(got == want, f"{side} on {workload}: column {name!r} differs from ds.batches' first batch")


# --------------------------------------------------------------------------- the race


@dataclass
class Row:
    workload: str
    side: str
    rows: int
    catalog: list[float]
    peer: list[float]
    target: float | None

    def ratio(self, pick: Callable[[list[float]], float] = statistics.median) -> float:
        return pick(self.peer) / pick(self.catalog)

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.ratio() >= self.target

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "median_ratio": self.ratio(), "best_ratio": self.ratio(min), "met": self.met}


def race(cfg: Config, workload: str, sides: dict[str, Epoch], rows: int) -> dict[str, h.Timing]:
    """Every side's epochs in interleaved rounds; the warm-up epoch of each is checked."""
    firsts: dict[str, dict[str, Any]] = {}

    def finish_of(side: str) -> Callable[[object, bool], None]:
        def finish(out: object, warmup: bool) -> None:
            assert isinstance(out, tuple)
            h.check(out[0] == rows, f"{side} on {workload}: {out[0]} rows, not {rows}")
            if warmup:
                firsts[side] = out[1]

        return finish

    contenders = {s: h.Contender(functools.partial(run_epoch, e), finish=finish_of(s)) for s, e in sides.items()}
    timings = cfg.race(contenders)
    for side, first in firsts.items():
        if side not in ("catalog", "source"):  # source's rows are random: checked by the tests
            same_values(side, workload, firsts["catalog"], first)
    return timings


def workload_rows(cfg: Config, tf: Any, cat: Catalog, root: Path, workload: str, n: int) -> tuple[list[Row], Dataset]:
    t0 = time.perf_counter()
    ds, hf = build(cat, root, workload, n)
    sides = {"catalog": catalog_epoch(ds), "hf": hf_epoch(hf), "tf.data": tf_epoch(tf, ds), "source": source_epoch(ds)}
    if workload == "image":
        sides["hf"] = hf_epoch(hf, dtype=np.uint8)
        sides["hf, int64"] = hf_epoch(hf)  # with_format("numpy")'s own output: every integer as int64
    h.log(f"[{workload}] built {n:,} rows in {time.perf_counter() - t0:.0f} s; racing {', '.join(sides)} ...")
    t = race(cfg, workload, sides, n)
    mine = t["catalog"].times
    peers = [side for side in sides if side not in ("catalog", "source")]
    out = [Row(workload, side, n, mine, t[side].times, TARGETS.get(side)) for side in peers]
    out.append(Row(workload, "source", n, t["source"].times, t["hf"].times, None))  # source()[indices] vs HF
    h.log(f"[{workload}] " + "; ".join(f"{r.side} {r.ratio():.2f}x" for r in out))
    return out, ds


PEER_TITLES = {
    "hf": "Hugging Face `with_format('numpy')`",
    "hf, int64": "(info) Hugging Face `with_format('numpy')` as it is (int64 pixels)",
    "tf.data": "tf.data `TFRecordDataset + batch + map(parse_example)`",
    "source": "(info) `ds.source()[256 random indices]` vs Hugging Face in order",
}


def print_table(results: list[Row]) -> None:
    print("| workload | ds.batches(256) vs | ratio (medians) | best rounds | rounds | target | met? |")
    print("|---|---|---:|---:|---:|---:|:---:|")
    for r in results:
        target = "—" if r.target is None else f">= {r.target:g}x"
        met = {None: "—", True: "yes", False: "**NO**"}[r.met]
        rate = f"{r.rows / statistics.median(r.catalog) / 1e3:,.0f} k rows/s"
        print(
            f"| {TITLES[r.workload]} ({rate}) | {PEER_TITLES[r.side]} | {r.ratio():.2f}x | {r.ratio(min):.2f}x "
            f"| {len(r.catalog)} | {target} | {met} |"
        )
    missed = [r for r in results if r.met is False]
    print(f"\n{sum(r.met is True for r in results)} targets met, {len(missed)} missed.")


def profile_of(ds: Dataset) -> Callable[[], str]:
    return lambda: h.profile_text(lambda: run_epoch(catalog_epoch(ds)))


def main(argv: list[str] | None = None) -> int:
    args, cfg = h.options(argv, QUICK, FULL, __doc__, "a tenth of the rows, fewer rounds",
                          "minimum timed rounds", "the catalog side")  # fmt: skip
    import datasets
    import pyarrow

    datasets.disable_progress_bars()
    tf = h.import_tensorflow()
    started = time.perf_counter()
    info = h.start_report(
        "TFRecord Catalog: ds.batches against Hugging Face datasets and tf.data (issue 34 §2)",
        {"datasets": datasets.__version__, "pyarrow": pyarrow.__version__, "tensorflow": tf.__version__,
         "numpy": np.__version__} | h.format_versions(),
        f"mode: {'quick' if args.quick else 'full'}: " + ", ".join(f"{w} {n:,} rows" for w, n in cfg.rows)
        + f", {SHARDS} shards each, page-cached; batch {BATCH}, one epoch in order per run, this process",
        f"{cfg.rounds()}, after a checked warm-up epoch; ratios from the median rounds",
    )  # fmt: skip
    results: list[Row] = []
    profiles: dict[str, Callable[[], str]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_columns_") as d:
        root = Path(d)
        with Catalog.init(root / "cat") as cat:
            for workload, n in cfg.rows:
                rows, ds = workload_rows(cfg, tf, cat, root, workload, n)
                results += rows
                profiles[workload] = profile_of(ds)
            print_table(results)
            load = " ".join(map(str, h.loadavg()))
            print(f"\nload average at the end {load}; run time {time.perf_counter() - started:.0f} s")
            texts = run_profiles(args.profile, results, profiles)
    if args.json:
        out = [r.to_json() for r in results]
        h.write_report(args.json, info, args.quick, cfg, out, profiles=texts)
    return 0


def run_profiles(choice: str, results: list[Row], profiles: dict[str, Callable[[], str]]) -> dict[str, str]:
    """cProfile of one catalog epoch for each workload ``choice`` names (all, missed, none)."""
    chosen = {
        "all": list(profiles),
        "missed": sorted({r.workload for r in results if r.met is False}),
        "none": [],
    }[choice]
    texts: dict[str, str] = {}
    for workload in chosen:
        h.log(f"[profile] {workload} ...")
        texts[workload] = profiles[workload]()
        print(f"\n### {workload}: one epoch of ds.batches({BATCH})\n\n```\n{texts[workload]}\n```")
    return texts


if __name__ == "__main__":
    sys.exit(main())
