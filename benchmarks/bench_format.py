#!/usr/bin/env python
"""Format-layer benchmarks: TFRecord Catalog against TensorFlow, same run, same files.

Run from the repository root:

    .venv/bin/python benchmarks/bench_format.py            # full run (a few minutes)
    .venv/bin/python benchmarks/bench_format.py --quick    # smaller workload, fewer repeats
    .venv/bin/python benchmarks/bench_format.py --json results.json

Every comparison times the catalog code path and the TensorFlow code path on the same
input in the same process, interleaving the runs (the order rotates every round) so
machine noise hits both sides, and keeps the best round of each side. Only the RATIO
is meaningful; the absolute rates depend on the machine and on what else it is doing.
See benchmarks/README.md for what each row measures.
"""

from __future__ import annotations

import os

# Must be set before TensorFlow is imported, or its C++ logging goes to stderr.
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"

import datetime
import gc
import json
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from common import Timing, arg_parser, cpu_model, import_tensorflow, page_cache, usable_cpus

# --------------------------------------------------------------------------- workload

VEC_LEN = 16  # with the three scalars this makes a ~140-byte serialized Example
LABELS = [f"class_{i:03d}" for i in range(100)]
LARGE_RECORD_BYTES = 256 * 1024
CRC_BUFFER_BYTES = 64 * 1024 * 1024
DECODE_BATCH = 1024
SCHEMA_JSON = {
    "features": {
        "id": {"dtype": "int64"},
        "label": {"dtype": "string"},
        "score": {"dtype": "float32"},
        "vec": {"dtype": "float32", "shape": [VEC_LEN]},
    }
}


@dataclass
class Config:
    small_records: int
    eager_records: int
    large_records: int
    repeats: int  # timed rounds per comparison, at least
    budget: float  # seconds a comparison may spend on extra rounds (fast ones get more)
    max_rounds: int = 15


FULL = Config(small_records=200_000, eager_records=20_000, large_records=400, repeats=5, budget=6.0)
QUICK = Config(small_records=20_000, eager_records=5_000, large_records=100, repeats=3, budget=1.5)


def make_rows(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Rows of plain Python values (vec values are float32-exact, so both sides agree bit for bit)."""
    rng = np.random.default_rng(seed)
    scores = rng.random(n).astype(np.float32).tolist()
    vecs = rng.standard_normal((n, VEC_LEN)).astype(np.float32).tolist()
    return [{"id": i, "label": LABELS[i % len(LABELS)], "score": scores[i], "vec": vecs[i]} for i in range(n)]


# --------------------------------------------------------------------------- timing


def race(contenders: dict[str, Callable[[], object]], cfg: Config) -> dict[str, Timing]:
    """Time every contender in interleaved rounds, rotating the order every round.

    A warm-up round (untimed) runs first so one-off costs (imports, TF graph/function
    setup, first-touch allocations) are not charged to whichever side happens to go first.
    It also sizes the run: at least ``cfg.repeats`` rounds, more (up to ``max_rounds``)
    while they fit in ``cfg.budget`` seconds, so fast comparisons get more samples and
    their best round is less at the mercy of a noisy neighbour.
    """
    names = list(contenders)
    timings = {name: Timing(name) for name in names}
    t0 = time.perf_counter()
    for name in names:
        contenders[name]()
    round_time = max(time.perf_counter() - t0, 1e-9)
    rounds = max(cfg.repeats, min(cfg.max_rounds, int(cfg.budget / round_time)))
    for rnd in range(rounds):
        shift = rnd % len(names)
        for name in names[shift:] + names[:shift]:
            gc.collect()
            t0 = time.perf_counter()
            contenders[name]()
            timings[name].times.append(time.perf_counter() - t0)
    return timings


# --------------------------------------------------------------------------- results


@dataclass
class Row:
    benchmark: str
    unit: str  # "rec/s", "MB/s" or "GB/s"
    catalog_rate: float
    tf_rate: float | None
    target: float | None  # minimum catalog/TF ratio, None for informational rows
    work: float  # records or bytes processed per run
    catalog_times: list[float]
    tf_times: list[float] | None
    rounds: int = 0
    catalog_median_rate: float = 0.0
    tf_median_rate: float | None = None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        return None if self.tf_rate is None else self.catalog_rate / self.tf_rate

    @property
    def median_ratio(self) -> float | None:
        return None if self.tf_median_rate is None else self.catalog_median_rate / self.tf_median_rate

    @property
    def met(self) -> bool | None:
        if self.target is None or self.ratio is None:
            return None
        return self.ratio >= self.target


def compare_row(
    benchmark: str, unit: str, work: float, cat: Timing, tf: Timing | None, target: float | None, note: str = ""
) -> Row:
    scale = {"rec/s": 1.0, "MB/s": 1e6, "GB/s": 1e9}[unit]
    return Row(
        benchmark=benchmark,
        unit=unit,
        catalog_rate=work / cat.best / scale,
        tf_rate=None if tf is None else work / tf.best / scale,
        target=target,
        work=work,
        catalog_times=cat.times,
        tf_times=None if tf is None else tf.times,
        rounds=len(cat.times),
        catalog_median_rate=work / cat.median / scale,
        tf_median_rate=None if tf is None else work / tf.median / scale,
        note=note,
    )


def fmt_rate(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "rec/s":
        if value >= 1e6:
            return f"{value / 1e6:.2f} M rec/s"
        if value >= 1e3:
            return f"{value / 1e3:.1f} k rec/s"
        return f"{value:.0f} rec/s"
    if unit == "GB/s":
        return f"{value:.2f} GB/s"
    return f"{value:,.0f} MB/s"


def markdown_table(rows: list[Row]) -> str:
    lines = [
        "| benchmark | catalog | TensorFlow | ratio | target | met? |",
        "|---|---:|---:|---:|---:|:---:|",
    ]
    for r in rows:
        ratio = "—" if r.ratio is None else f"{r.ratio:.2f}x"
        target = "—" if r.target is None else f">= {r.target:g}x"
        met = {None: "—", True: "yes", False: "**NO**"}[r.met]
        lines.append(
            f"| {r.benchmark} | {fmt_rate(r.catalog_rate, r.unit)} | {fmt_rate(r.tf_rate, r.unit)} "
            f"| {ratio} | {target} | {met} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- machine


def machine_info(tf: Any) -> dict[str, Any]:
    import crc32c
    import google.protobuf
    from google.protobuf.internal import api_implementation

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "nproc": usable_cpus(),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "tensorflow": tf.__version__,
        "numpy": np.__version__,
        "protobuf": f"{google.protobuf.__version__} ({api_implementation.Type()})",
        "crc32c": f"{getattr(crc32c, '__version__', '?')} (hardware: {getattr(crc32c, 'hardware_based', '?')})",
        "platform": platform.platform(),
    }


# --------------------------------------------------------------------------- helpers


def same_file(a: str, b: str) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        return fa.read() == fb.read()


def chunked(batches: Iterable[list[bytes]], size: int) -> Iterator[list[bytes]]:
    """Regroup read_record_batches' per-read-chunk lists into lists of ``size`` records."""
    pending: list[bytes] = []
    for batch in batches:
        pending += batch
        if len(pending) >= size:
            cut = len(pending) - len(pending) % size
            for i in range(0, cut, size):
                yield pending[i : i + size]
            pending = pending[cut:]
    if pending:
        yield pending


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"sanity check failed: {what}")


def check_crc_is_verified(tf: Any, read_records: Any, path: str, first_len: int, bad_path: str) -> None:
    """Both readers must reject a flipped payload byte, or "CRC checked" would be untrue."""
    from catalog.errors import CorruptRecordError

    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[12 + first_len // 2] ^= 0x01  # inside the first record's payload: only its data CRC can tell
    with open(bad_path, "wb") as f:
        f.write(data)
    try:
        for _ in read_records(bad_path):
            pass
    except CorruptRecordError:
        pass
    else:
        raise SystemExit(f"sanity check failed: read_records accepted a corrupt payload in {bad_path}")
    try:
        for _ in tf.data.TFRecordDataset(bad_path).batch(DECODE_BATCH):
            pass
    except tf.errors.DataLossError:
        pass
    else:
        raise SystemExit(f"sanity check failed: TFRecordDataset accepted a corrupt payload in {bad_path}")
    os.remove(bad_path)


# --------------------------------------------------------------------------- benchmarks


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(
        __doc__, "smaller workload and fewer rounds (~15 s)", "minimum timed rounds per comparison (default 5, quick 3)"
    )
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    if args.repeats:
        cfg = replace(cfg, repeats=args.repeats)

    import crc32c

    tf = import_tensorflow()

    from catalog.schema import Schema, to_tf_feature_spec
    from catalog.tfrecord.framing import RecordWriter, read_record_batches, read_records

    started = time.perf_counter()
    info = machine_info(tf)
    print("# TFRecord Catalog format benchmarks vs TensorFlow\n")
    print(f"- date: {info['date']}")
    print(f"- machine: {info['nproc']} CPU(s), {info['cpu']} ({info['platform']})")
    print(
        f"- Python {info['python']}, TensorFlow {info['tensorflow']}, numpy {info['numpy']}, "
        f"protobuf {info['protobuf']}, crc32c {info['crc32c']}"
    )
    print(
        f"- mode: {'quick' if args.quick else 'full'}: {cfg.small_records:,} small records, "
        f"{cfg.eager_records:,} for TF eager per-record, {cfg.large_records} x 256 KiB records; "
        f"best of {cfg.repeats} to {cfg.max_rounds} interleaved rounds (as many as fit in "
        f"{cfg.budget:g} s) after a warm-up round"
    )
    sys.stdout.flush()

    schema = Schema.from_json(SCHEMA_JSON)
    rows = make_rows(cfg.small_records)
    records = [schema.encode(r) for r in rows]
    n = len(records)
    avg_size = sum(map(len, records)) / n
    print(
        f"- small record: tf.train.Example, 4 features (id int64, label string, score float32, "
        f"vec float32[{VEC_LEN}]), {avg_size:.1f} bytes serialized on average\n"
    )
    sys.stdout.flush()

    results: list[Row] = []
    tmp = tempfile.TemporaryDirectory(prefix="bench_format_")
    d = tmp.name

    def p(name: str) -> str:
        return os.path.join(d, name)

    # Reference files are written by TensorFlow (neutral ground) and page-cached.
    small_path, sub_path, large_path = p("small.tfrecord"), p("subset.tfrecord"), p("large.tfrecord")
    with tf.io.TFRecordWriter(small_path) as w:
        for r in records:
            w.write(r)
    with tf.io.TFRecordWriter(sub_path) as w:
        for r in records[: cfg.eager_records]:
            w.write(r)
    rng = np.random.default_rng(1)
    large = [rng.bytes(LARGE_RECORD_BYTES) for _ in range(cfg.large_records)]
    with tf.io.TFRecordWriter(large_path) as w:
        for r in large:
            w.write(r)
    large_bytes = LARGE_RECORD_BYTES * len(large)
    del large
    for path in (small_path, sub_path, large_path):
        page_cache(path)
    check_crc_is_verified(tf, read_records, sub_path, len(records[0]), p("bad_small"))
    check_crc_is_verified(tf, read_records, large_path, LARGE_RECORD_BYTES, p("bad_large"))
    # The inputs (and TensorFlow's modules) live for the whole run: move them out of the
    # collector's sight, or every collection, timed or not, would rescan them.
    gc.collect()
    gc.freeze()

    # ---- 1. write pre-serialized records -----------------------------------------------
    def cat_write_loop() -> None:
        with RecordWriter(p("w_cat_loop")) as w:
            for r in records:
                w.write(r)

    def cat_write_many() -> None:
        with RecordWriter(p("w_cat_many")) as w:
            w.write_many(records)

    def tf_write_loop() -> None:
        with tf.io.TFRecordWriter(p("w_tf")) as w:
            for r in records:
                w.write(r)

    t = race({"cat_loop": cat_write_loop, "cat_many": cat_write_many, "tf": tf_write_loop}, cfg)
    check(same_file(p("w_cat_loop"), small_path), "RecordWriter.write output differs from TFRecordWriter's")
    check(same_file(p("w_cat_many"), small_path), "RecordWriter.write_many output differs from TFRecordWriter's")
    label = f"write {avg_size:.0f} B pre-serialized records"
    results.append(
        compare_row(
            f"{label}: `RecordWriter.write` loop vs `TFRecordWriter.write` loop",
            "rec/s",
            n,
            t["cat_loop"],
            t["tf"],
            1.0,
        )
    )
    results.append(
        compare_row(
            f"{label}: `RecordWriter.write_many` vs `TFRecordWriter.write` loop",
            "rec/s",
            n,
            t["cat_many"],
            t["tf"],
            1.0,
        )
    )
    print(f"  [done] write pre-serialized ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    # ---- 2. build + serialize (+ write) Examples from rows ----------------------------------
    Example, Features, Feature = tf.train.Example, tf.train.Features, tf.train.Feature
    Int64List, FloatList, BytesList = tf.train.Int64List, tf.train.FloatList, tf.train.BytesList

    def tf_example(row: dict[str, Any]) -> bytes:
        # The way the seed scripts build Examples: one message object tree per row.
        ex = Example(
            features=Features(
                feature={
                    "id": Feature(int64_list=Int64List(value=[row["id"]])),
                    "label": Feature(bytes_list=BytesList(value=[row["label"].encode("utf-8")])),
                    "score": Feature(float_list=FloatList(value=[row["score"]])),
                    "vec": Feature(float_list=FloatList(value=row["vec"])),
                }
            )
        )
        return ex.SerializeToString()

    encoded: dict[str, list[bytes]] = {}

    def cat_encode() -> None:
        encoded["cat"] = [schema.encode(row) for row in rows]

    def tf_encode() -> None:
        encoded["tf"] = [tf_example(row) for row in rows]

    t = race({"cat": cat_encode, "tf": tf_encode}, cfg)
    check(len(encoded["cat"]) == len(encoded["tf"]) == n, "encode counts differ")
    step = max(1, n // 2000)
    for c, f in zip(encoded["cat"][::step], encoded["tf"][::step], strict=True):
        check(Example.FromString(c) == Example.FromString(f), "schema.encode and tf.train.Example disagree")
    identical = encoded["cat"] == encoded["tf"]
    encoded.clear()
    results.append(
        compare_row(
            "encode rows -> Example bytes: `schema.encode` vs `tf.train.Example(...)``.SerializeToString()`",
            "rec/s",
            n,
            t["cat"],
            t["tf"],
            3.0,
            note=f"messages equal to TF's (checked on a sample); bytes identical: {identical}",
        )
    )

    def cat_encode_write() -> None:
        with RecordWriter(p("ew_cat")) as w:
            for row in rows:
                w.write(schema.encode(row))

    def tf_encode_write() -> None:
        with tf.io.TFRecordWriter(p("ew_tf")) as w:
            for row in rows:
                w.write(tf_example(row))

    t = race({"cat": cat_encode_write, "tf": tf_encode_write}, cfg)
    check(os.path.getsize(p("ew_cat")) == os.path.getsize(p("ew_tf")), "encode+write file sizes differ")
    results.append(
        compare_row(
            "encode + write rows: `schema.encode` + `RecordWriter.write` vs "
            "`tf.train.Example` + `TFRecordWriter.write`",
            "rec/s",
            n,
            t["cat"],
            t["tf"],
            3.0,
        )
    )
    print(f"  [done] encode ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    # ---- 3. read small records (CRC verified on both sides) ---------------------------------
    counts: dict[str, int] = {}
    # TF datasets are built once, outside the timed region (only iteration is timed).
    tf_small_batched = tf.data.TFRecordDataset(small_path).batch(DECODE_BATCH)

    def cat_read_records() -> None:
        k = 0
        for _r in read_records(small_path):
            k += 1
        counts["cat_records"] = k

    def cat_read_batches() -> None:
        k = 0
        for batch in read_record_batches(small_path):
            k += len(batch)
        counts["cat_batches"] = k

    def tf_read_batched() -> None:
        k = 0
        for batch in tf_small_batched:
            k += len(batch.numpy())
        counts["tf_batched"] = k

    t = race({"records": cat_read_records, "batches": cat_read_batches, "tf": tf_read_batched}, cfg)
    check(counts["cat_records"] == counts["cat_batches"] == counts["tf_batched"] == n, f"read counts {counts}")
    label = f"read {avg_size:.0f} B records, CRC checked"
    results.append(
        compare_row(
            f"{label}: `read_records` vs `TFRecordDataset.batch(1024)` + `.numpy()`",
            "rec/s",
            n,
            t["records"],
            t["tf"],
            1.0,
        )
    )
    results.append(
        compare_row(
            f"{label}: `read_record_batches` vs `TFRecordDataset.batch(1024)` + `.numpy()`",
            "rec/s",
            n,
            t["batches"],
            t["tf"],
            1.0,
        )
    )

    tf_sub = tf.data.TFRecordDataset(sub_path)
    m = cfg.eager_records

    def cat_read_sub() -> None:
        k = 0
        for _r in read_records(sub_path):
            k += 1
        counts["cat_sub"] = k

    def tf_read_eager() -> None:
        k = 0
        for r in tf_sub:
            r.numpy()
            k += 1
        counts["tf_eager"] = k

    t = race({"cat": cat_read_sub, "tf": tf_read_eager}, cfg)
    check(counts["cat_sub"] == counts["tf_eager"] == m, f"subset read counts {counts}")
    results.append(
        compare_row(
            f"{label} ({m // 1000}k subset): `read_records` vs TF eager per-record "
            "`for r in TFRecordDataset: r.numpy()`",
            "rec/s",
            m,
            t["cat"],
            t["tf"],
            30.0,
        )
    )
    print(f"  [done] read small ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    # ---- 4. read large records -------------------------------------------------------------
    # TF reads big strings fastest in small batches (bigger ones cost it memory traffic):
    # batch(8) = 2 MiB per batch; per-record iteration is reported too, for information.
    large_batch = 8
    tf_large = tf.data.TFRecordDataset(large_path).batch(large_batch)
    tf_large_each = tf.data.TFRecordDataset(large_path)

    def cat_read_large() -> None:
        total = 0
        for r in read_records(large_path):
            total += len(r)
        counts["cat_large"] = total

    def tf_read_large() -> None:
        total = 0
        for batch in tf_large:
            total += sum(map(len, batch.numpy()))
        counts["tf_large"] = total

    def tf_read_large_each() -> None:
        total = 0
        for r in tf_large_each:
            total += len(r.numpy())
        counts["tf_large_each"] = total

    t = race({"cat": cat_read_large, "tf": tf_read_large, "tf_each": tf_read_large_each}, cfg)
    check(
        counts["cat_large"] == counts["tf_large"] == counts["tf_large_each"] == large_bytes,
        f"large read bytes {counts}",
    )
    results.append(
        compare_row(
            f"read 256 KiB records, CRC checked: `read_records` vs `TFRecordDataset.batch({large_batch})` + `.numpy()`",
            "MB/s",
            large_bytes,
            t["cat"],
            t["tf"],
            1.0,
        )
    )
    results.append(
        compare_row(
            "(info) same, vs TF per-record `for r in TFRecordDataset: r.numpy()`",
            "MB/s",
            large_bytes,
            t["cat"],
            t["tf_each"],
            None,
        )
    )
    print(f"  [done] read large ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    # ---- 5. decode to columnar numpy batches (reading included on both sides) ---------------
    spec = to_tf_feature_spec(schema.feature_spec(), tf)
    tf_decode_ds = tf.data.TFRecordDataset(small_path).batch(DECODE_BATCH).map(lambda x: tf.io.parse_example(x, spec))
    tf_decode_par = (
        tf.data.TFRecordDataset(small_path)
        .batch(DECODE_BATCH)
        .map(lambda x: tf.io.parse_example(x, spec), num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )

    def cat_decode() -> None:
        k = 0
        for chunk in chunked(read_record_batches(small_path), DECODE_BATCH):
            cols = schema.decode_batch(chunk)
            k += len(cols["id"])
        counts["cat_decode"] = k

    def tf_decode(ds: Any, key: str) -> Callable[[], None]:
        def run() -> None:
            k = 0
            for batch in ds:
                cols = {name: v.numpy() for name, v in batch.items()}
                k += len(cols["id"])
            counts[key] = k

        return run

    t = race(
        {"cat": cat_decode, "tf": tf_decode(tf_decode_ds, "tf"), "tf_par": tf_decode(tf_decode_par, "tf_par")},
        cfg,
    )
    check(counts["cat_decode"] == counts["tf"] == counts["tf_par"] == n, f"decode counts {counts}")
    # Untimed: every decoded value must equal TensorFlow's.
    cat_parts = [schema.decode_batch(c) for c in chunked(read_record_batches(small_path), DECODE_BATCH)]
    tf_parts = [{k: v.numpy() for k, v in b.items()} for b in tf_decode_ds]
    for name in ("id", "score", "vec"):
        check(
            np.array_equal(np.concatenate([c[name] for c in cat_parts]), np.concatenate([f[name] for f in tf_parts])),
            f"decoded {name!r} differs from TF's",
        )
    cat_labels = [str(x).encode("utf-8") for c in cat_parts for x in c["label"]]
    check(cat_labels == [x for f in tf_parts for x in f["label"]], "decoded 'label' differs from TF's")
    del cat_parts, tf_parts
    label = "decode to numpy columns, read included: `read_record_batches` + `decode_batch` per 1024 vs "
    results.append(
        compare_row(label + "`TFRecordDataset.batch(1024).map(parse_example)`", "rec/s", n, t["cat"], t["tf"], 1.0)
    )
    results.append(
        compare_row(
            "(info) same, vs TF with `num_parallel_calls=AUTOTUNE` + `prefetch`",
            "rec/s",
            n,
            t["cat"],
            t["tf_par"],
            None,
        )
    )
    print(f"  [done] decode ({time.perf_counter() - started:.0f} s)", file=sys.stderr)

    # ---- 6. CRC32C throughput, for context --------------------------------------------------
    buf = np.random.default_rng(2).bytes(CRC_BUFFER_BYTES)
    t = race({"crc": lambda: crc32c.crc32c(buf)}, cfg)
    results.append(
        compare_row(
            "(info) CRC32C of a 64 MiB buffer, `crc32c` package", "GB/s", CRC_BUFFER_BYTES, t["crc"], None, None
        )
    )

    tmp.cleanup()
    elapsed = time.perf_counter() - started
    print()
    print(markdown_table(results))
    print(
        f"\nratio = catalog rate / TensorFlow rate (best round of each side); higher is better for catalog. "
        f"Total time {elapsed:.0f} s."
    )
    print(
        "\nratios from the medians instead of the best rounds (a noise gauge): "
        + ", ".join(f"{r.median_ratio:.2f}x ({r.rounds})" for r in results if r.median_ratio is not None)
    )
    notes = [r for r in results if r.note]
    for r in notes:
        print(f"- {r.benchmark.split(':')[0]}: {r.note}")

    if args.json:
        payload = {
            "machine": info,
            "mode": "quick" if args.quick else "full",
            "config": asdict(cfg),
            "avg_small_record_bytes": avg_size,
            "elapsed_seconds": elapsed,
            "results": [{**asdict(r), "ratio": r.ratio, "median_ratio": r.median_ratio, "met": r.met} for r in results],
        }
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=2)
            fh.write("\n")
        print(f"\nJSON written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
