"""Format-layer benchmarks: TFRecord Catalog against TensorFlow, same run, same files.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_format            # full run (a few minutes)
    .venv/bin/python -m benchmarks.bench_format --quick    # smaller workload, fewer repeats
    .venv/bin/python -m benchmarks.bench_format --json results.json

Every comparison times the catalog code path and the TensorFlow code path on the same
input in the same process, interleaving the runs (the order rotates every round) so
machine noise hits both sides, and keeps the best round of each side. Only the RATIO
is meaningful; the absolute rates depend on the machine and on what else it is doing.
See benchmarks/README.md for what each row measures.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import crc32c
import numpy as np

from benchmarks import harness as h
from catalog import CorruptRecordError, RecordWriter, Schema, read_record_batches, read_records
from catalog.schema import to_tf_feature_spec
from catalog.tfrecord.example import encode_example

LARGE_RECORD_BYTES = 256 * 1024
CRC_BUFFER_BYTES = 64 * 1024 * 1024
DECODE_BATCH = 1024
# TF reads big strings fastest in small batches (bigger ones cost it memory traffic):
# batch(8) = 2 MiB per batch; per-record iteration is reported too, for information.
LARGE_BATCH = 8


@dataclass
class Config(h.Racing):
    small_records: int
    eager_records: int
    large_records: int
    max_rounds: int = field(default=15, kw_only=True)


FULL = Config(small_records=200_000, eager_records=20_000, large_records=400, repeats=5, budget=6.0)
QUICK = Config(small_records=20_000, eager_records=5_000, large_records=100, repeats=3, budget=1.5)


@dataclass
class Work:
    """The inputs every section shares: rows, their records, and TensorFlow-written files."""

    tf: Any
    cfg: Config
    dir: str
    schema: Schema
    rows: list[dict[str, Any]]
    records: list[bytes]
    small: str  # every record
    subset: str  # the first cfg.eager_records
    large: str  # cfg.large_records of 256 KiB
    large_bytes: int

    @property
    def n(self) -> int:
        return len(self.records)

    @property
    def avg_size(self) -> float:
        return sum(map(len, self.records)) / self.n

    def path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def race(self, contenders: dict[str, Callable[[], object]]) -> dict[str, h.Timing]:
        return self.cfg.race({k: h.Contender(fn) for k, fn in contenders.items()})

    def row(
        self,
        key: str,
        title: str,
        ours: h.Timing,
        peer: h.Timing | None,
        target: float | None = None,
        unit: str = "rec/s",
        work: float | None = None,
        note: str = "",
    ) -> h.Versus:
        """A table row: ``work`` (every small record unless given) per round on both sides."""
        return h.versus(key, title, unit, self.n if work is None else work, ours, peer, target=target, note=note)


def prepare(tf: Any, cfg: Config, d: str) -> Work:
    """Encode the rows; TensorFlow writes the reference files (neutral ground), page-cached."""
    schema = Schema.from_json(h.LABELED_SCHEMA)
    rows = h.labeled_rows(cfg.small_records)
    records = [schema.encode(r) for r in rows]
    rng = np.random.default_rng(1)
    large = [rng.bytes(LARGE_RECORD_BYTES) for _ in range(cfg.large_records)]
    paths = [os.path.join(d, name) for name in ("small.tfrecord", "subset.tfrecord", "large.tfrecord")]
    for path, recs in zip(paths, (records, records[: cfg.eager_records], large), strict=True):
        h.tf_write(tf, path, recs)
        h.page_cache(path)
    small, subset, big = paths
    w = Work(tf, cfg, d, schema, rows, records, small, subset, big, LARGE_RECORD_BYTES * len(large))
    check_crc_is_verified(tf, w.subset, len(records[0]), w.path("bad_small"))
    check_crc_is_verified(tf, w.large, LARGE_RECORD_BYTES, w.path("bad_large"))
    # The inputs (and TensorFlow's modules) live for the whole run: move them out of the
    # collector's sight, or every collection, timed or not, would rescan them.
    h.freeze()
    return w


def check_crc_is_verified(tf: Any, path: str, first_len: int, bad_path: str) -> None:
    """Both readers must reject a flipped payload byte, or "CRC checked" would be untrue."""
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


# --------------------------------------------------------------------------- 1. write


def bench_write(w: Work) -> list[h.Versus]:
    def cat_write_loop() -> None:
        with RecordWriter(w.path("w_cat_loop")) as out:
            for r in w.records:
                out.write(r)

    def cat_write_many() -> None:
        with RecordWriter(w.path("w_cat_many")) as out:
            out.write_many(w.records)

    t = w.race(
        {
            "cat_loop": cat_write_loop,
            "cat_many": cat_write_many,
            "tf": lambda: h.tf_write(w.tf, w.path("w_tf"), w.records),
        }
    )
    h.check(same_file(w.path("w_cat_loop"), w.small), "RecordWriter.write output differs from TFRecordWriter's")
    h.check(same_file(w.path("w_cat_many"), w.small), "RecordWriter.write_many output differs from TFRecordWriter's")
    label = f"write {w.avg_size:.0f} B pre-serialized records"
    return [
        w.row(
            "write",
            f"{label}: `RecordWriter.write` loop vs `TFRecordWriter.write` loop",
            t["cat_loop"],
            t["tf"],
            target=1.0,
        ),
        w.row(
            "write_many",
            f"{label}: `RecordWriter.write_many` vs `TFRecordWriter.write` loop",
            t["cat_many"],
            t["tf"],
            target=1.0,
        ),
    ]


# --------------------------------------------------------------------------- 2. encode


def seeds_example(tf: Any) -> Callable[[dict[str, Any]], bytes]:
    """The way the seed scripts build Examples: one message object tree per row."""
    Example, Features, Feature = tf.train.Example, tf.train.Features, tf.train.Feature
    Int64List, FloatList, BytesList = tf.train.Int64List, tf.train.FloatList, tf.train.BytesList

    def build(row: dict[str, Any]) -> bytes:
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

    return build


def bench_encode(w: Work) -> list[h.Versus]:
    tf_example = seeds_example(w.tf)
    encoded: dict[str, list[bytes]] = {}

    def cat_encode() -> None:
        encoded["cat"] = [w.schema.encode(row) for row in w.rows]

    def tf_encode() -> None:
        encoded["tf"] = [tf_example(row) for row in w.rows]

    t = w.race({"cat": cat_encode, "tf": tf_encode})
    h.check(len(encoded["cat"]) == len(encoded["tf"]) == w.n, "encode counts differ")
    step = max(1, w.n // 2000)
    parse = w.tf.train.Example.FromString
    for c, f in zip(encoded["cat"][::step], encoded["tf"][::step], strict=True):
        h.check(parse(c) == parse(f), "schema.encode and tf.train.Example disagree")
    identical = encoded["cat"] == encoded["tf"]
    encoded.clear()
    row = w.row(
        "encode",
        "encode rows -> Example bytes: `schema.encode` vs `tf.train.Example(...)``.SerializeToString()`",
        t["cat"],
        t["tf"],
        target=3.0,
        note=f"messages equal to TF's (checked on a sample); bytes identical: {identical}",
    )
    return [row, bench_encode_schemaless(w, tf_example), bench_encode_write(w, tf_example)]


def bench_encode_schemaless(w: Work, tf_example: Callable[[dict[str, Any]], bytes]) -> h.Versus:
    """``encode_example`` (no schema: kinds from the Python values) against the same Example loop."""
    encoded: dict[str, list[bytes]] = {}

    def cat_encode() -> None:
        encoded["cat"] = [encode_example(row) for row in w.rows]

    def tf_encode() -> None:
        encoded["tf"] = [tf_example(row) for row in w.rows]

    t = w.race({"cat": cat_encode, "tf": tf_encode})
    parse = w.tf.train.Example.FromString
    for c, f in zip(encoded["cat"][:: max(1, w.n // 2000)], encoded["tf"][:: max(1, w.n // 2000)], strict=True):
        h.check(parse(c) == parse(f), "encode_example and tf.train.Example disagree")
    encoded.clear()
    return w.row(
        "encode_example",
        "encode rows without a schema: `encode_example` vs `tf.train.Example(...)``.SerializeToString()`",
        t["cat"],
        t["tf"],
        target=1.0,
    )


def bench_encode_write(w: Work, tf_example: Callable[[dict[str, Any]], bytes]) -> h.Versus:
    def cat_encode_write() -> None:
        with RecordWriter(w.path("ew_cat")) as out:
            for row in w.rows:
                out.write(w.schema.encode(row))

    def tf_encode_write() -> None:
        with w.tf.io.TFRecordWriter(w.path("ew_tf")) as out:
            for row in w.rows:
                out.write(tf_example(row))

    t = w.race({"cat": cat_encode_write, "tf": tf_encode_write})
    h.check(os.path.getsize(w.path("ew_cat")) == os.path.getsize(w.path("ew_tf")), "encode+write file sizes differ")
    return w.row(
        "encode+write",
        "encode + write rows: `schema.encode` + `RecordWriter.write` vs `tf.train.Example` + `TFRecordWriter.write`",
        t["cat"],
        t["tf"],
        target=3.0,
    )


# --------------------------------------------------------------------------- 3. read small records


def bench_read_small(w: Work) -> list[h.Versus]:
    """CRC verified on both sides; TF's dataset is built once, outside the timer."""
    counts: dict[str, int] = {}
    tf_batched = w.tf.data.TFRecordDataset(w.small).batch(DECODE_BATCH)

    def cat_read_records() -> None:
        k = 0
        for _r in read_records(w.small):
            k += 1
        counts["cat_records"] = k

    def cat_read_batches() -> None:
        k = 0
        for batch in read_record_batches(w.small):
            k += len(batch)
        counts["cat_batches"] = k

    def tf_read_batched() -> None:
        k = 0
        for batch in tf_batched:
            k += len(batch.numpy())
        counts["tf_batched"] = k

    t = w.race({"records": cat_read_records, "batches": cat_read_batches, "tf": tf_read_batched})
    h.check(counts["cat_records"] == counts["cat_batches"] == counts["tf_batched"] == w.n, f"read counts {counts}")
    label = f"read {w.avg_size:.0f} B records, CRC checked"
    return [
        w.row(
            "read",
            f"{label}: `read_records` vs `TFRecordDataset.batch(1024)` + `.numpy()`",
            t["records"],
            t["tf"],
            target=1.0,
        ),
        w.row(
            "read_batches",
            f"{label}: `read_record_batches` vs `TFRecordDataset.batch(1024)` + `.numpy()`",
            t["batches"],
            t["tf"],
            target=1.0,
        ),
        bench_read_subset(w, label),
    ]


def bench_read_subset(w: Work, label: str) -> h.Versus:
    counts: dict[str, int] = {}
    tf_sub = w.tf.data.TFRecordDataset(w.subset)
    m = w.cfg.eager_records

    def cat_read_sub() -> None:
        k = 0
        for _r in read_records(w.subset):
            k += 1
        counts["cat"] = k

    def tf_read_eager() -> None:
        k = 0
        for r in tf_sub:
            r.numpy()
            k += 1
        counts["tf"] = k

    t = w.race({"cat": cat_read_sub, "tf": tf_read_eager})
    h.check(counts["cat"] == counts["tf"] == m, f"subset read counts {counts}")
    return w.row(
        "read_eager",
        f"{label} ({m // 1000}k subset): `read_records` vs TF eager per-record `for r in TFRecordDataset: r.numpy()`",
        t["cat"],
        t["tf"],
        target=30.0,
        work=m,
    )


# --------------------------------------------------------------------------- 4. read large records


def bench_read_large(w: Work) -> list[h.Versus]:
    counts: dict[str, int] = {}
    tf_large = w.tf.data.TFRecordDataset(w.large).batch(LARGE_BATCH)
    tf_large_each = w.tf.data.TFRecordDataset(w.large)

    def cat_read_large() -> None:
        total = 0
        for r in read_records(w.large):
            total += len(r)
        counts["cat"] = total

    def tf_read_large() -> None:
        total = 0
        for batch in tf_large:
            total += sum(map(len, batch.numpy()))
        counts["tf"] = total

    def tf_read_large_each() -> None:
        total = 0
        for r in tf_large_each:
            total += len(r.numpy())
        counts["tf_each"] = total

    t = w.race({"cat": cat_read_large, "tf": tf_read_large, "tf_each": tf_read_large_each})
    h.check(counts["cat"] == counts["tf"] == counts["tf_each"] == w.large_bytes, f"large read bytes {counts}")
    return [
        w.row(
            "read_large",
            f"read 256 KiB records, CRC checked: `read_records` vs `TFRecordDataset.batch({LARGE_BATCH})` + `.numpy()`",
            t["cat"],
            t["tf"],
            target=1.0,
            unit="MB/s",
            work=w.large_bytes,
        ),
        w.row(
            "read_large_each",
            "(info) same, vs TF per-record `for r in TFRecordDataset: r.numpy()`",
            t["cat"],
            t["tf_each"],
            unit="MB/s",
            work=w.large_bytes,
        ),
    ]


# --------------------------------------------------------------------------- 5. decode to numpy


def tf_decode_runner(ds: Any, counts: dict[str, int], key: str) -> Callable[[], None]:
    def run() -> None:
        k = 0
        for batch in ds:
            cols = {name: v.numpy() for name, v in batch.items()}
            k += len(cols["id"])
        counts[key] = k

    return run


def bench_decode(w: Work) -> list[h.Versus]:
    """Columnar numpy batches, reading included on both sides."""
    tf = w.tf
    spec = to_tf_feature_spec(w.schema.feature_spec(), tf)
    tf_ds = tf.data.TFRecordDataset(w.small).batch(DECODE_BATCH).map(lambda x: tf.io.parse_example(x, spec))
    tf_par = (
        tf.data.TFRecordDataset(w.small)
        .batch(DECODE_BATCH)
        .map(lambda x: tf.io.parse_example(x, spec), num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )
    counts: dict[str, int] = {}

    def cat_decode() -> None:
        k = 0
        for chunk in chunked(read_record_batches(w.small), DECODE_BATCH):
            cols = w.schema.decode_batch(chunk)
            k += len(cols["id"])
        counts["cat"] = k

    t = w.race(
        {
            "cat": cat_decode,
            "tf": tf_decode_runner(tf_ds, counts, "tf"),
            "tf_par": tf_decode_runner(tf_par, counts, "tf_par"),
        }
    )
    h.check(counts["cat"] == counts["tf"] == counts["tf_par"] == w.n, f"decode counts {counts}")
    check_decoded_equal(w, tf_ds)
    label = "decode to numpy columns, read included: `read_record_batches` + `decode_batch` per 1024 vs "
    return [
        w.row("decode", label + "`TFRecordDataset.batch(1024).map(parse_example)`", t["cat"], t["tf"], target=1.0),
        w.row(
            "decode_parallel",
            "(info) same, vs TF with `num_parallel_calls=AUTOTUNE` + `prefetch`",
            t["cat"],
            t["tf_par"],
        ),
    ]


def check_decoded_equal(w: Work, tf_ds: Any) -> None:
    """Untimed: every decoded value must equal TensorFlow's."""
    cat_parts = [w.schema.decode_batch(c) for c in chunked(read_record_batches(w.small), DECODE_BATCH)]
    tf_parts = [{k: v.numpy() for k, v in b.items()} for b in tf_ds]
    for name in ("id", "score", "vec"):
        h.check(
            np.array_equal(np.concatenate([c[name] for c in cat_parts]), np.concatenate([f[name] for f in tf_parts])),
            f"decoded {name!r} differs from TF's",
        )
    cat_labels = [str(x).encode("utf-8") for c in cat_parts for x in c["label"]]
    h.check(cat_labels == [x for f in tf_parts for x in f["label"]], "decoded 'label' differs from TF's")


# --------------------------------------------------------------------------- 6. CRC32C, for context


def bench_crc(w: Work) -> list[h.Versus]:
    buf = np.random.default_rng(2).bytes(CRC_BUFFER_BYTES)
    t = w.race({"crc": lambda: crc32c.crc32c(buf)})
    return [
        w.row(
            "crc32c",
            "(info) CRC32C of a 64 MiB buffer, `crc32c` package",
            t["crc"],
            None,
            unit="GB/s",
            work=CRC_BUFFER_BYTES,
        )
    ]


SECTIONS: list[tuple[str, Callable[[Work], list[h.Versus]]]] = [
    ("write pre-serialized", bench_write),
    ("encode", bench_encode),
    ("read small", bench_read_small),
    ("read large", bench_read_large),
    ("decode", bench_decode),
    ("crc32c", bench_crc),
]


def print_results(results: list[h.Versus], elapsed: float) -> None:
    print()
    print(h.versus_table(results, "TensorFlow"))
    print(
        "\nratio = catalog rate / TensorFlow rate (best round of each side); higher is better for catalog. "
        f"Total time {elapsed:.0f} s."
    )
    print("\nratios from the medians instead of the best rounds (a noise gauge): " + h.median_line(results))
    for r in results:
        if r.note:
            print(f"- {r.benchmark.split(':')[0]}: {r.note}")


def main(argv: list[str] | None = None) -> int:
    args, cfg = h.options(argv, QUICK, FULL, __doc__, "smaller workload and fewer rounds (~15 s)",
                          "minimum timed rounds per comparison (default 5, quick 3)")  # fmt: skip
    tf = h.import_tensorflow()
    started = time.perf_counter()
    crc_info = f"{h.dist_version('crc32c')} (hardware: {getattr(crc32c, 'hardware_based', '?')})"
    info = h.machine_header(
        tensorflow=tf.__version__, numpy=np.__version__, protobuf=h.protobuf_version(), crc32c=crc_info
    )
    results: list[h.Versus] = []
    with tempfile.TemporaryDirectory(prefix="bench_format_") as d:
        w = prepare(tf, cfg, d)
        h.print_header(
            "TFRecord Catalog format benchmarks vs TensorFlow",
            info,
            f"mode: {'quick' if args.quick else 'full'}: {cfg.small_records:,} small records, {cfg.eager_records:,} "
            f"for TF eager per-record, {cfg.large_records} x 256 KiB records; {cfg.rounds()} "
            "after a warm-up round",
            f"small record: tf.train.Example, 4 features (id int64, label string, score float32, "
            f"vec float32[{h.LABELED_VEC}]), {w.avg_size:.1f} bytes serialized on average",
        )
        for title, section in SECTIONS:
            results += section(w)
            h.log(f"  [done] {title} ({time.perf_counter() - started:.0f} s)")
    elapsed = time.perf_counter() - started
    print_results(results, elapsed)
    if args.json:
        extra = {"avg_small_record_bytes": w.avg_size, "elapsed_seconds": elapsed}
        h.write_report(args.json, info, args.quick, cfg, [r.to_json() for r in results], **extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
