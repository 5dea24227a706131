"""``ds.tf_dataset`` against the same tf.data pipeline written by hand: the helper must cost nothing.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_tf_dataset            # full run (1M small records, 200k images)
    .venv/bin/python -m benchmarks.bench_tf_dataset --quick    # 100k and 20k
    .venv/bin/python -m benchmarks.bench_tf_dataset --json results.json

Both sides read the same shard files of one catalog in the same process, in interleaved
rounds (the order rotates every round), and each round builds its pipeline anew and iterates
it to the end: building (the read plan, the size checks, tracing the parse) is timed on both
sides. The hand-written side is what a user writes from ``ds.files()`` and
``to_tf_feature_spec``: ``TFRecordDataset`` -> ``batch`` -> ``map(parse_example [+ decode_raw,
reshape], AUTOTUNE)`` -> ``prefetch(AUTOTUNE)``, with the same shuffle when shuffling. Rows
marked ``(info)`` compare with the issue's literal pipeline
(``TFRecordDataset(files, num_parallel_reads=AUTOTUNE).shuffle(1024)``), a smaller buffer.
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import harness as h
from catalog import Catalog, Dataset
from catalog.readers.tfdata import SHUFFLE_BUFFER, SHUFFLE_CYCLE
from catalog.schema import to_tf_feature_spec

BATCH = 256
SETTLE_SECONDS = 0.5
SHARDS = 16
IMAGE_SCHEMA: dict[str, Any] = {
    "features": {
        "image": {"dtype": "uint8", "shape": [32, 32, 3], "encoding": "tensor"},
        "label": {"dtype": "int64"},
    }
}


@dataclass
class Config(h.Racing):
    small_records: int
    images: int


FULL = Config(small_records=1_000_000, images=200_000, repeats=5, budget=60.0, max_rounds=9)
QUICK = Config(small_records=100_000, images=20_000, repeats=3, budget=8.0, max_rounds=5)


def build(cat: Catalog, cfg: Config) -> tuple[Dataset, Dataset]:
    """The two datasets, each in SHARDS shards (file fsyncs off: setup only)."""
    small = cat.register("small", h.LABELED_SCHEMA)
    with small.writer(shard_records=-(-cfg.small_records // SHARDS)) as w:
        h.skip_shard_fsync(w)
        for row in h.labeled_rows(cfg.small_records):
            w.write(row)
    images = cat.register("images", IMAGE_SCHEMA)
    rng = np.random.default_rng(0)
    with images.writer(shard_records=-(-cfg.images // SHARDS)) as w:
        h.skip_shard_fsync(w)
        for start in range(0, cfg.images, 10_000):
            pixels = rng.integers(0, 256, (min(10_000, cfg.images - start), 32, 32, 3), dtype=np.uint8)
            for i, image in enumerate(pixels):
                w.write({"image": image, "label": (start + i) % 10})
    return cat.dataset("small"), cat.dataset("images")


# --------------------------------------------------------------------------- the two sides


def hand_written(tf: Any, ds: Dataset, shuffle: str) -> Callable[[], Any]:
    """The pipeline as a user writes it by hand. ``shuffle``: "" (dataset order), "same" (shard
    order shuffled, SHUFFLE_CYCLE shards interleaved, a SHUFFLE_BUFFER buffer, as tf_dataset
    does) or "issue" (the issue's num_parallel_reads=AUTOTUNE and shuffle(1024))."""
    schema = ds.schema
    spec = to_tf_feature_spec(schema.feature_spec(), tf)
    tensors = {name: f for name, f in schema.features.items() if f.tensor}

    def parse(serialized: Any) -> Any:
        out = tf.io.parse_example(serialized, spec)
        for name, f in tensors.items():
            out[name] = tf.reshape(tf.io.decode_raw(out[name], getattr(tf, f.dtype)), [-1, *f.shape])
        label = out.pop("label")
        return out, label

    def make() -> Any:
        files = ds.files()
        if shuffle == "same":
            names = tf.data.Dataset.from_tensor_slices(files).shuffle(len(files))
            records = names.interleave(
                tf.data.TFRecordDataset, cycle_length=SHUFFLE_CYCLE, num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=False,
            ).shuffle(SHUFFLE_BUFFER)  # fmt: skip
        elif shuffle == "issue":
            records = tf.data.TFRecordDataset(files, num_parallel_reads=tf.data.AUTOTUNE).shuffle(1024)
        else:
            records = tf.data.TFRecordDataset(files)
        return records.batch(BATCH).map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    return make


def catalog_side(ds: Dataset, shuffle: bool) -> Callable[[], Any]:
    return lambda: ds.tf_dataset(BATCH, label_key="label", shuffle=shuffle)


def consume(make: Callable[[], Any]) -> Callable[[], tuple[int, float]]:
    """Build the pipeline and iterate it to its end; returns the records seen and the CPU time
    the process spent (every thread of it: tf.data's own included)."""

    def run() -> tuple[int, float]:
        n = 0
        cpu = time.process_time()
        for _features, label in make():
            n += int(label.shape[0])
        return n, time.process_time() - cpu

    return run


# --------------------------------------------------------------------------- checks and rows


def same_values(tf: Any, ds: Dataset, ours: Any, theirs: Any) -> None:
    """In dataset order both sides give the same batches, value for value (the first few)."""
    for (a, la), (b, lb) in zip(ours.take(4), theirs.take(4), strict=True):
        h.check(np.array_equal(la.numpy(), lb.numpy()), f"{ds.name}: labels differ")
        h.check(set(a) == set(b), f"{ds.name}: features differ")
        for name in a:
            h.check(np.array_equal(a[name].numpy(), b[name].numpy()), f"{ds.name}: feature {name!r} differs")


def settle() -> None:
    """Before each timed run: the garbage collector, then a moment for the threads of the last
    pipeline's parallel reads to wind down (their work must not land on the next contender)."""
    gc.collect()
    time.sleep(SETTLE_SECONDS)


def duel(cfg: Config, records: int, ours: Callable[[], Any], theirs: Callable[[], Any]) -> dict[str, h.Timing]:
    """One comparison of two pipelines in its own race: each side follows the other in turn.
    Returns each side's wall-clock rounds, and its CPU times as "<side> cpu"."""
    cpu = {"ours": h.Timing("ours cpu"), "theirs": h.Timing("theirs cpu")}

    def counted(side: str) -> Callable[[object, bool], None]:
        def finish(out: object, warmup: bool) -> None:
            assert isinstance(out, tuple)
            n, seconds = out
            h.check(n == records, f"a pipeline gave {n} records, not {records}")
            if not warmup:
                cpu[side].times.append(seconds)

        return finish

    sides = {"ours": consume(ours), "theirs": consume(theirs)}
    contenders = {k: h.Contender(run, finish=counted(k), settle=settle) for k, run in sides.items()}
    wall = cfg.race(contenders)
    return {**wall, "ours cpu": cpu["ours"], "theirs cpu": cpu["theirs"]}


def compare(tf: Any, ds: Dataset, cfg: Config, what: str) -> list[h.Versus]:
    records = ds.info().records
    same_values(tf, ds, catalog_side(ds, False)(), hand_written(tf, ds, "")())
    rows = []
    for key, shuffle, peer, title, target in (
        ("ordered", False, "", "dataset order", 0.95),
        ("shuffled", True, "same", "shuffled", 0.95),
        ("issue", True, "issue", "shuffled, vs shuffle(1024) (info)", None),
    ):
        h.log(f"[{ds.name}] {title}: {records:,} records ...")
        t = duel(cfg, records, catalog_side(ds, shuffle), hand_written(tf, ds, peer))
        rows.append(
            h.versus(f"{ds.name}-{key}", f"{what}, {title}", "rec/s", records, t["ours"], t["theirs"], target=target)
        )
        if target is not None:  # the CPU each side spent: what another process's load disturbs least
            name = f"{what}, {title}, per CPU second (info)"
            rows.append(h.versus(f"{ds.name}-{key}-cpu", name, "rec/s", records, t["ours cpu"], t["theirs cpu"]))
    return rows


def main(argv: list[str] | None = None) -> int:
    args, cfg = h.options(argv, QUICK, FULL, __doc__, "100k small records and 20k images, fewer rounds",
                          "minimum timed rounds")  # fmt: skip
    tf = h.import_tensorflow()
    started = time.perf_counter()
    info = h.machine_header(tensorflow=tf.__version__, numpy=np.__version__)
    with tempfile.TemporaryDirectory(prefix="bench_tf_dataset_") as d:
        cat = Catalog.init(Path(d) / "cat")
        small, images = build(cat, cfg)
        h.cache_tree(Path(d))
        h.print_header(
            "ds.tf_dataset against the same tf.data pipeline by hand",
            info,
            f"mode: {'quick' if args.quick else 'full'}: {cfg.small_records:,} Examples of ~140 bytes (id, label, "
            f"score, vec[16]) and {cfg.images:,} 32x32x3 uint8 tensor images, {SHARDS} shards each, batch {BATCH}; "
            f"best of {cfg.repeats} to {cfg.max_rounds} interleaved rounds, each building its pipeline anew; "
            "each comparison is a race of its own",
        )
        rows = compare(tf, small, cfg, "small Examples") + compare(tf, images, cfg, "32x32x3 images")
        cat.close()
    elapsed = time.perf_counter() - started
    print(h.versus_table(rows, "by hand"))
    print(f"\nmedian rounds: {h.median_line(rows)}\n\nrun time {elapsed:.0f} s")
    if args.json:
        h.write_report(args.json, info, args.quick, cfg, [r.to_json() for r in rows], elapsed_seconds=elapsed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
