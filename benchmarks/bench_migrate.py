#!/usr/bin/env python
"""Rewrite benchmarks: dataset migrations, compact and export, against the seeds' way.

Run from the repository root:

    .venv/bin/python benchmarks/bench_migrate.py            # full run (about 3-4 minutes on 2 cores)
    .venv/bin/python benchmarks/bench_migrate.py --quick    # smaller workload (about 40 s)
    .venv/bin/python benchmarks/bench_migrate.py --json results.json
    .venv/bin/python benchmarks/bench_migrate.py --profile all   # cProfile every catalog side, not only misses

The peer is the seeds' way of changing a TFRecord dataset: iterate every shard eagerly with
``tf.data.TFRecordDataset``, parse each record into a ``tf.train.Example``, modify it, and
write it back with ``tf.io.TFRecordWriter``. The catalog side is one ``Dataset.migrate``
call (reading, rewriting, fsync and the manifest commit included). Both run in the same
process on the same shard files, in interleaved rounds whose order rotates; every catalog
round starts from a fresh copy of the same catalog, made outside the timed section. Only
the RATIOS are meaningful. Progress goes to stderr, the report (a markdown table) to
stdout. See benchmarks/README.md for what each row measures.
"""

from __future__ import annotations

import os

# Must be set before TensorFlow is imported, or its C++ logging goes to stderr.
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"

import gc
import math
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from common import (
    Timing,
    arg_parser,
    dist_version,
    import_tensorflow,
    machine_header,
    page_cache,
    profile_text,
    usable_cpus,
    write_report,
)

# --------------------------------------------------------------------------- workload

VEC_LEN = 16  # as bench_format: with the three scalars, a ~140-byte serialized Example
LABELS = [f"class_{i:03d}" for i in range(100)]
NAME = "small"
BLOB_NAME = "blobs"
BLOB_BYTES = 256 * 1024
MIB = 1 << 20
HEIGHT = 256
SCHEMA_JSON: dict[str, Any] = {
    "features": {
        "id": {"dtype": "int64"},
        "label": {"dtype": "string"},
        "score": {"dtype": "float32"},
        "vec": {"dtype": "float32", "shape": [VEC_LEN]},
    }
}
BLOB_SCHEMA_JSON: dict[str, Any] = {"features": {"data": {"dtype": "bytes"}}}
# The Transform's target schema: the source's, plus a computed float feature.
ENRICHED_JSON: dict[str, Any] = {"features": {**SCHEMA_JSON["features"], "magnitude": {"dtype": "float32"}}}

# One migration script per benchmark (migrations/<dataset>/0001_<slug>.py). Workers import
# the script themselves, so the Transform's function is defined in it.
SCRIPTS: dict[str, str] = {
    "add": f"""
from catalog.migrate import AddField

operations = [AddField("height", {{"dtype": "int64"}}, default={HEIGHT})]
""",
    "rename": """
from catalog.migrate import RenameField

operations = [RenameField("label", "category")]
""",
    "drop": """
from catalog.migrate import DropField

operations = [DropField("score")]
""",
    "transform": f"""
import math

import numpy as np

from catalog.migrate import Transform


def enrich(row):
    vec = row["vec"]
    row["magnitude"] = row["score"] * math.sqrt(float(np.dot(vec, vec)))
    row["label"] = row["label"].upper()
    return row


operations = [Transform(enrich, schema={ENRICHED_JSON!r})]
""",
}


@dataclass
class Config:
    records: int  # small Examples in the dataset
    shards: int  # ... split into this many shards
    peer_shards: int  # the peer migrates the first this-many shards (its eager loop is slow)
    blob_mib: int  # compact/export: MiB of 256 KiB records
    blob_shards: int  # ... in this many shards
    repeats: int  # timed rounds per comparison, at least
    budget: float  # seconds a comparison may spend on extra rounds (fast ones get more)
    max_rounds: int = 15


FULL = Config(records=200_000, shards=16, peer_shards=2, blob_mib=256, blob_shards=64, repeats=5, budget=6.0)
QUICK = Config(records=20_000, shards=8, peer_shards=2, blob_mib=64, blob_shards=16, repeats=3, budget=1.5)


def make_rows(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Rows of plain Python values (vec values are float32-exact), as in bench_format."""
    rng = np.random.default_rng(seed)
    scores = rng.random(n).astype(np.float32).tolist()
    vecs = rng.standard_normal((n, VEC_LEN)).astype(np.float32).tolist()
    return [{"id": i, "label": LABELS[i % len(LABELS)], "score": scores[i], "vec": vecs[i]} for i in range(n)]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"sanity check failed: {what}")


# --------------------------------------------------------------------------- timing


@dataclass
class Contender:
    """One side of a comparison. ``prepare`` and ``finish`` run outside the timer, around every run."""

    run: Callable[[], object]
    prepare: Callable[[], None] = lambda: None
    finish: Callable[[object, bool], None] = lambda _out, _first: None  # (result, is the warm-up run)
    recycle: int = 0  # bytes of page-cache memory to recycle before each run (see settle)


SCRATCH: list[Path] = []  # where settle() writes its scratch file (set in main)
RECYCLE_CHUNK = os.urandom(4 * MIB)


def recycle_memory(nbytes: int) -> None:
    """Write ``nbytes`` into a scratch file and delete it: memory the next run's new page cache can reuse.

    Our VMs (Firecracker, free page reporting) hand memory the guest freed a few seconds ago
    back to the host; the guest's next use of it faults on the host, and writing into such
    fresh page cache runs at 0.2-0.5 GB/s instead of 2-4 GB/s. Without this step, a run that
    writes new data pays that VM cost, and how much of it varies run to run. Every contender
    of a comparison gets the same step.
    """
    if nbytes <= 0 or not SCRATCH:
        return
    path = SCRATCH[0] / "recycle.scratch"
    with open(path, "wb") as f:
        for _ in range(0, nbytes, len(RECYCLE_CHUNK)):
            f.write(RECYCLE_CHUNK)
    path.unlink()  # never synced: its dirty pages are dropped, not written


def settle(recycle: int = 0) -> None:
    """Before every timed run: write back every dirty page, recycle memory, collect garbage.

    Without the sync, one run's unsynced output (the peer never fsyncs; the catalog copies
    its fresh dataset in ``prepare``) would be written back during the next run's fsync,
    because ext4 commits other files' new data with the journal.
    """
    os.sync()
    recycle_memory(recycle)
    gc.collect()


def race(contenders: dict[str, Contender], cfg: Config) -> dict[str, Timing]:
    """Time every contender in interleaved rounds, rotating the order every round.

    An untimed warm-up run of every contender comes first (imports, TF first-use costs, the
    catalog's connections); its results are checked by each contender's ``finish``. It also
    sizes the run: at least ``cfg.repeats`` rounds, more (up to ``max_rounds``) while they
    fit in ``cfg.budget`` seconds.
    """
    names = list(contenders)
    timings = {name: Timing(name) for name in names}
    round_time = 0.0
    for name in names:
        c = contenders[name]
        c.prepare()
        settle(c.recycle)
        t0 = time.perf_counter()
        out = c.run()
        round_time += time.perf_counter() - t0
        c.finish(out, True)
    rounds = max(cfg.repeats, min(cfg.max_rounds, int(cfg.budget / max(round_time, 1e-9))))
    for rnd in range(rounds):
        shift = rnd % len(names)
        for name in names[shift:] + names[:shift]:
            c = contenders[name]
            c.prepare()
            settle(c.recycle)
            t0 = time.perf_counter()
            out = c.run()
            timings[name].times.append(time.perf_counter() - t0)
            c.finish(out, False)
    return timings


# --------------------------------------------------------------------------- results


@dataclass
class Row:
    key: str  # short name: the median line, --profile, JSON
    benchmark: str
    unit: str  # "rec/s" or "GB/s"
    catalog_work: float  # records or bytes per catalog run
    catalog_times: list[float]
    peer_work: float = 0.0
    peer_times: list[float] | None = None
    target: float | None = None
    absolute: bool = False  # target is a catalog rate (GB/s), not a ratio
    note: str = ""

    def _rate(self, work: float, seconds: float) -> float:
        return work / seconds / (1e9 if self.unit == "GB/s" else 1.0)

    @property
    def catalog_rate(self) -> float:
        return self._rate(self.catalog_work, min(self.catalog_times))

    @property
    def peer_rate(self) -> float | None:
        return None if not self.peer_times else self._rate(self.peer_work, min(self.peer_times))

    @property
    def catalog_median_rate(self) -> float:
        return self._rate(self.catalog_work, statistics.median(self.catalog_times))

    @property
    def peer_median_rate(self) -> float | None:
        return None if not self.peer_times else self._rate(self.peer_work, statistics.median(self.peer_times))

    @property
    def ratio(self) -> float | None:
        peer = self.peer_rate
        return None if peer is None else self.catalog_rate / peer

    @property
    def median_ratio(self) -> float | None:
        peer = self.peer_median_rate
        return None if peer is None else self.catalog_median_rate / peer

    @property
    def rounds(self) -> int:
        return len(self.catalog_times)

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        value = self.catalog_rate if self.absolute else self.ratio
        return None if value is None else value >= self.target

    @property
    def median_met(self) -> bool | None:
        if self.target is None:
            return None
        value = self.catalog_median_rate if self.absolute else self.median_ratio
        return None if value is None else value >= self.target

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "catalog_rate": self.catalog_rate,
            "peer_rate": self.peer_rate,
            "ratio": self.ratio,
            "catalog_median_rate": self.catalog_median_rate,
            "peer_median_rate": self.peer_median_rate,
            "median_ratio": self.median_ratio,
            "met": self.met,
            "median_met": self.median_met,
        }


def fmt_rate(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "GB/s":
        return f"{value:.2f} GB/s"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M rec/s"
    if value >= 1e3:
        return f"{value / 1e3:.1f} k rec/s"
    return f"{value:.0f} rec/s"


def markdown_table(rows: list[Row]) -> str:
    lines = ["| benchmark | catalog | peer | ratio | target | met? |", "|---|---:|---:|---:|---:|:---:|"]
    for r in rows:
        ratio = "—" if r.ratio is None else f"{r.ratio:.2f}x"
        if r.target is None:
            target = "—"
        elif r.absolute:
            target = f">= {r.target:g} {r.unit}"
        else:
            target = f">= {r.target:g}x"
        met = {None: "—", True: "yes", False: "**NO**"}[r.met]
        lines.append(
            f"| {r.benchmark} | {fmt_rate(r.catalog_rate, r.unit)} | {fmt_rate(r.peer_rate, r.unit)} "
            f"| {ratio} | {target} | {met} |"
        )
    return "\n".join(lines)


def median_line(rows: list[Row]) -> str:
    parts = []
    for r in rows:
        if r.absolute:
            parts.append(f"{r.key} {r.catalog_median_rate:.2f} GB/s ({r.rounds})")
        elif r.median_ratio is not None:
            parts.append(f"{r.key} {r.median_ratio:.2f}x ({r.rounds})")
    return "; ".join(parts)


# --------------------------------------------------------------------------- machine


def machine_info(tf: Any) -> dict[str, Any]:
    import google.protobuf
    import sqlalchemy
    from google.protobuf.internal import api_implementation

    return machine_header(
        tensorflow=tf.__version__,
        numpy=np.__version__,
        protobuf=f"{google.protobuf.__version__} ({api_implementation.Type()})",
        sqlalchemy=sqlalchemy.__version__,
        sqlite=sqlite3.sqlite_version,
        crc32c=dist_version("crc32c"),
    )


# --------------------------------------------------------------------------- catalog side


def cache_tree(root: Path) -> int:
    """Read every file under ``root`` once (page cache); returns the bytes read."""
    return sum(page_cache(p) for p in sorted(root.rglob("*")) if p.is_file())


class FreshCatalog:
    """Every run gets its own copy of a pristine catalog: copied, synced and page-cached untimed."""

    def __init__(self, pristine: Path, work: Path, dataset: str) -> None:
        self.pristine = pristine
        self.work = work
        self.dataset = dataset
        self.n = 0
        self.cat: Any = None
        self.ds: Any = None
        self.root: Path | None = None

    def prepare(self) -> None:
        from catalog import Catalog

        self.n += 1
        self.root = self.work / f"run{self.n:03d}"
        shutil.copytree(self.pristine, self.root)
        os.sync()
        cache_tree(self.root)
        self.cat = Catalog.open(self.root)
        self.ds = self.cat.dataset(self.dataset)

    def discard(self) -> None:
        if self.cat is not None:
            self.cat.close()
        if self.root is not None:
            shutil.rmtree(self.root)
        self.cat = self.ds = self.root = None


def migrate_contender(
    fresh: FreshCatalog, migrations: Path, workers: int | None, verify: Callable[[Any, Any], None], recycle: int
) -> Contender:
    def finish(report: object, first: bool) -> None:
        if first:
            verify(fresh.cat, report)
        fresh.discard()

    return Contender(
        run=lambda: fresh.ds.migrate(migrations, workers=workers), prepare=fresh.prepare, finish=finish, recycle=recycle
    )


# --------------------------------------------------------------------------- peer side (the seeds' way)


Modify = Callable[[Any], None]  # modifies a tf.train.Example in place


def peer_contender(
    tf: Any, sources: list[str], work: Path, modify: Modify, verify: Callable[[Path], None], recycle: int
) -> Contender:
    """``for raw in TFRecordDataset(shard): parse, modify, TFRecordWriter.write``, one output per shard.

    The ``tf.data`` datasets are built once, outside the timer (only iterating them is timed).
    """
    datasets = [tf.data.TFRecordDataset(p) for p in sources]
    Example = tf.train.Example
    TFRecordWriter = tf.io.TFRecordWriter
    state: dict[str, Any] = {"n": 0}

    def prepare() -> None:
        state["n"] += 1
        out = work / f"peer{state['n']:03d}"
        out.mkdir()
        state["out"] = out

    def run() -> int:
        out: Path = state["out"]
        k = 0
        for i, dataset in enumerate(datasets):
            with TFRecordWriter(str(out / f"part-{i:05d}.tfrecord")) as writer:
                for raw in dataset:
                    ex = Example()
                    ex.ParseFromString(raw.numpy())
                    modify(ex)
                    writer.write(ex.SerializeToString())
                    k += 1
        return k

    def finish(_k: object, first: bool) -> None:
        if first:
            verify(state["out"])
        shutil.rmtree(state["out"])

    return Contender(run=run, prepare=prepare, finish=finish, recycle=recycle)


def peer_add(ex: Any) -> None:
    ex.features.feature["height"].int64_list.value.append(HEIGHT)


def peer_rename(ex: Any) -> None:
    f = ex.features.feature
    f["category"].CopyFrom(f["label"])
    del f["label"]


def peer_drop(ex: Any) -> None:
    del ex.features.feature["score"]


def peer_transform(ex: Any) -> None:
    f = ex.features.feature
    score = f["score"].float_list.value[0]
    vec = f["vec"].float_list.value
    f["magnitude"].float_list.value.append(score * math.sqrt(sum(v * v for v in vec)))
    label = f["label"].bytes_list.value
    label[0] = label[0].decode("utf-8").upper().encode("utf-8")


# --------------------------------------------------------------------------- expected results


@dataclass
class Expected:
    """The source rows as columns, to check both sides' outputs against."""

    ids: np.ndarray
    labels: list[str]
    scores: np.ndarray
    vecs: np.ndarray

    @classmethod
    def of(cls, rows: list[dict[str, Any]]) -> Expected:
        return cls(
            np.array([r["id"] for r in rows], dtype=np.int64),
            [r["label"] for r in rows],
            np.array([r["score"] for r in rows], dtype=np.float32),
            np.array([r["vec"] for r in rows], dtype=np.float32),
        )

    def head(self, n: int) -> Expected:
        return Expected(self.ids[:n], self.labels[:n], self.scores[:n], self.vecs[:n])


def texts(column: Iterable[Any]) -> list[str]:
    return [x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in column]


def check_columns(kind: str, cols: dict[str, np.ndarray], exp: Expected, who: str) -> None:
    """The decoded output of one migration must hold exactly what the migration promises."""
    n = len(exp.ids)
    check(np.array_equal(cols["id"], exp.ids), f"{who} {kind}: ids differ from the source's (order or values)")
    check(np.array_equal(cols["vec"], exp.vecs), f"{who} {kind}: vec differs from the source's")
    if kind == "add":
        check(set(cols) == {"id", "label", "score", "vec", "height"}, f"{who} add: features {sorted(cols)}")
        check(np.array_equal(cols["height"], np.full(n, HEIGHT, np.int64)), f"{who} add: height is not {HEIGHT}")
        check(texts(cols["label"]) == exp.labels, f"{who} add: label differs")
        check(np.array_equal(cols["score"], exp.scores), f"{who} add: score differs")
    elif kind == "rename":
        check(set(cols) == {"id", "category", "score", "vec"}, f"{who} rename: features {sorted(cols)}")
        check(texts(cols["category"]) == exp.labels, f"{who} rename: category is not the old label")
        check(np.array_equal(cols["score"], exp.scores), f"{who} rename: score differs")
    elif kind == "drop":
        check(set(cols) == {"id", "label", "vec"}, f"{who} drop: features {sorted(cols)}")
        check(texts(cols["label"]) == exp.labels, f"{who} drop: label differs")
    elif kind == "transform":
        check(set(cols) == {"id", "label", "score", "vec", "magnitude"}, f"{who} transform: features {sorted(cols)}")
        check(texts(cols["label"]) == [s.upper() for s in exp.labels], f"{who} transform: label is not upper-cased")
        check(np.array_equal(cols["score"], exp.scores), f"{who} transform: score differs")
        want = exp.scores.astype(np.float64) * np.sqrt((exp.vecs.astype(np.float64) ** 2).sum(axis=1))
        check(
            np.allclose(cols["magnitude"], want, rtol=1e-5, atol=1e-6),
            f"{who} transform: magnitude differs from score * |vec| (max error "
            f"{float(np.max(np.abs(cols['magnitude'] - want))):.3g})",
        )
    else:
        raise ValueError(kind)


TARGET_SCHEMAS: dict[str, dict[str, Any]] = {
    "add": {"features": {**SCHEMA_JSON["features"], "height": {"dtype": "int64", "default": HEIGHT}}},
    "rename": {
        "features": {("category" if k == "label" else k): v for k, v in SCHEMA_JSON["features"].items()},
    },
    "drop": {"features": {k: v for k, v in SCHEMA_JSON["features"].items() if k != "score"}},
    "transform": ENRICHED_JSON,
}


def catalog_verifier(kind: str, exp: Expected, n_records: int, n_shards: int) -> Callable[[Any, Any], None]:
    def verify(cat: Any, report: Any) -> None:
        from catalog import Schema
        from catalog.tfrecord.framing import read_record_batches

        check(len(report.migrations) == 1, f"catalog {kind}: {len(report.migrations)} migrations applied, not 1")
        m = report.migrations[0]
        check(m.records == n_records and m.shards == n_shards, f"catalog {kind}: report {m.records} records")
        check(report.schema_version == 2, f"catalog {kind}: schema version {report.schema_version}, not 2")
        ds = cat.dataset(NAME)  # reopen: the old handle pins schema version 1
        want = Schema.from_json(TARGET_SCHEMAS[kind])
        check(ds.schema == want, f"catalog {kind}: new schema {ds.schema.to_json()} is not {want.to_json()}")
        files = ds.files()
        check(len(files) == n_shards, f"catalog {kind}: {len(files)} shards live, not {n_shards}")
        records = [r for p in files for batch in read_record_batches(p) for r in batch]
        check(len(records) == n_records, f"catalog {kind}: {len(records)} records read back, not {n_records}")
        check_columns(kind, ds.schema.decode_batch(records), exp, "catalog")
        check(ds.verify().ok, f"catalog {kind}: verify failed after the migration")

    return verify


def peer_verifier(kind: str, exp: Expected) -> Callable[[Path], None]:
    def verify(out: Path) -> None:
        from catalog import Schema
        from catalog.tfrecord.framing import read_record_batches

        records = [r for p in sorted(out.iterdir()) for batch in read_record_batches(str(p)) for r in batch]
        check(len(records) == len(exp.ids), f"peer {kind}: {len(records)} records written, not {len(exp.ids)}")
        check_columns(kind, Schema.from_json(TARGET_SCHEMAS[kind]).decode_batch(records), exp, "peer")

    return verify


# --------------------------------------------------------------------------- 1-4. migrations


def write_migrations(root: Path) -> dict[str, Path]:
    dirs = {}
    for kind, text in SCRIPTS.items():
        folder = root / f"migrations-{kind}"
        (folder / NAME).mkdir(parents=True)
        (folder / NAME / f"0001_{kind}.py").write_text(text.lstrip(), encoding="utf-8")
        dirs[kind] = folder
    return dirs


@dataclass
class MigrationCase:
    kind: str
    label: str
    peer_text: str
    modify: Modify
    target: float
    workers: int | None
    info_workers: int | None = None  # also time the catalog side with this many workers, for information


CASES = [
    MigrationCase(
        "add",
        f'AddField("height", int64, default={HEIGHT})',
        f"`feature['height'].int64_list.value.append({HEIGHT})`",
        peer_add,
        20.0,
        None,
        info_workers=1,
    ),
    MigrationCase(
        "rename",
        'RenameField("label", "category")',
        "`feature['category'].CopyFrom(feature['label'])` + `del feature['label']`",
        peer_rename,
        5.0,
        None,
    ),
    MigrationCase("drop", 'DropField("score")', "`del feature['score']`", peer_drop, 5.0, None),
    MigrationCase(
        "transform",
        "Transform(row fn: magnitude = score * |vec|, label.upper())",
        "the same on the parsed Example",
        peer_transform,
        2.0,
        2,
    ),
]


def bench_migrations(
    tf: Any,
    cfg: Config,
    tmp: Path,
    rows: list[dict[str, Any]],
    results: list[Row],
    profiles: dict[str, Callable[[], object]],
) -> None:
    from catalog import Catalog

    pristine = tmp / "pristine-small"
    t0 = time.perf_counter()
    cat = Catalog.init(pristine)
    ds = cat.register(NAME, SCHEMA_JSON)
    per_shard = math.ceil(cfg.records / cfg.shards)
    commit = ds.append_rows(rows, shard_records=per_shard, message="benchmark data")
    check(commit.records == cfg.records and commit.shard_count == cfg.shards, "the dataset's shards")
    files = ds.files()
    shard_bytes = sum(os.path.getsize(p) for p in files)
    cat.close()  # the pristine copy is only ever copied from now on
    log(f"  built {cfg.records:,} records in {cfg.shards} shards ({shard_bytes / MIB:.1f} MiB) "
        f"in {time.perf_counter() - t0:.1f} s")  # fmt: skip
    sources = files[: cfg.peer_shards]
    for p in sources:
        page_cache(p)
    peer_records = sum(1 for p in sources for _ in tf.data.TFRecordDataset(p))
    exp = Expected.of(rows)
    check(peer_records == per_shard * cfg.peer_shards, f"peer subset holds {peer_records} records")
    migrations = write_migrations(tmp)
    recycle = 2 * shard_bytes  # more than any run writes (the copy is made in prepare, before the recycling)
    work = tmp / "runs"
    work.mkdir()
    started = time.perf_counter()
    for case in CASES:
        contenders: dict[str, Contender] = {}
        verify = catalog_verifier(case.kind, exp, cfg.records, cfg.shards)
        fresh = FreshCatalog(pristine, work, NAME)
        contenders["catalog"] = migrate_contender(fresh, migrations[case.kind], case.workers, verify, recycle)
        if case.info_workers is not None:
            fresh_info = FreshCatalog(pristine, work, NAME)
            contenders["info"] = migrate_contender(
                fresh_info, migrations[case.kind], case.info_workers, verify, recycle
            )
        contenders["peer"] = peer_contender(
            tf, sources, work, case.modify, peer_verifier(case.kind, exp.head(peer_records)), recycle
        )
        t = race(contenders, cfg)
        workers = case.workers or f"default ({usable_cpus()})"
        results.append(
            Row(
                case.kind,
                f"{case.kind}: `ds.migrate` {case.label}, workers={workers} vs parse + {case.peer_text} + write",
                "rec/s",
                cfg.records,
                t["catalog"].times,
                peer_records,
                t["peer"].times,
                case.target,
            )
        )
        if case.info_workers is not None:
            results.append(
                Row(
                    f"({case.kind}, workers={case.info_workers})",
                    f"(info) {case.kind}: same, workers={case.info_workers}",
                    "rec/s",
                    cfg.records,
                    t["info"].times,
                    peer_records,
                    t["peer"].times,
                )
            )
        profiles[case.kind] = profile_target(pristine, work, migrations[case.kind], recycle)
        log(f"  [done] {case.kind} ({time.perf_counter() - started:.0f} s)")


def profile_target(pristine: Path, work: Path, migrations: Path, recycle: int) -> Callable[[], object]:
    """One catalog migration for cProfile, with workers=1 so the work shows in this process."""

    def run() -> object:
        fresh = FreshCatalog(pristine, work, NAME)
        fresh.prepare()
        settle(recycle)
        try:
            return profile_text(lambda: fresh.ds.migrate(migrations, workers=1))
        finally:
            fresh.discard()

    return run


# --------------------------------------------------------------------------- 5. compact and export


def stream_digest(paths: Iterable[str]) -> tuple[int, int]:
    """(records, crc32c over every record in order) of TFRecord files, CRCs checked."""
    from crc32c import crc32c

    from catalog.tfrecord.framing import read_record_batches

    n, crc = 0, 0
    for p in paths:
        for batch in read_record_batches(p):
            for r in batch:
                crc = crc32c(r, crc)
            n += len(batch)
    return n, crc


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def bench_compact_export(cfg: Config, tmp: Path, results: list[Row], profiles: dict[str, Callable[[], object]]) -> None:
    from catalog import Catalog

    pristine = tmp / "pristine-blobs"
    cat = Catalog.init(pristine)
    ds = cat.register(BLOB_NAME, BLOB_SCHEMA_JSON)
    rng = np.random.default_rng(5)
    pool = [ds.schema.encode({"data": rng.bytes(BLOB_BYTES)}) for _ in range(16)]
    total = cfg.blob_mib * MIB // BLOB_BYTES
    per_shard = total // cfg.blob_shards
    t0 = time.perf_counter()
    with ds.writer(message="blobs", shard_records=per_shard) as w:
        for i in range(total):
            w.write_record(pool[i % len(pool)])
    check(w.commit is not None and w.commit.shard_count == cfg.blob_shards, "blob shards committed")
    files = ds.files()
    sizes = [os.path.getsize(p) for p in files]
    nbytes = sum(sizes)
    source_digest = stream_digest(files)
    check(source_digest[0] == total, "blob records")
    cat.close()
    log(f"  built {total} x 256 KiB records in {len(files)} shards ({nbytes / MIB:.0f} MiB) "
        f"in {time.perf_counter() - t0:.1f} s")  # fmt: skip
    # Two compaction groups, so both workers of the default pool have one.
    target_size = math.ceil(len(sizes) / 2) * max(sizes)
    groups = 2
    work = tmp / "blob-runs"
    work.mkdir()

    recycle = nbytes + 64 * MIB  # more than one run writes
    size_text = f"{len(files)} shards of 256 KiB records ({nbytes / MIB:.0f} MiB, page-cached)"

    # ---- compact: a fresh copy per run; with and without recycling memory first
    def compact_contender(recycled: int, workers: int | None) -> Contender:
        fresh = FreshCatalog(pristine, work, BLOB_NAME)

        def finish(report: object, first: bool) -> None:
            rep: Any = report
            check(rep.commit is not None and rep.groups == groups, f"compact made {rep.groups} groups, not {groups}")
            check(rep.bytes == nbytes and rep.shards_after == groups, f"compact report {rep.to_json()}")
            if first:
                d = fresh.cat.dataset(BLOB_NAME)
                check(len(d.files()) == groups, "compacted shard count")
                check(stream_digest(d.files()) == source_digest, "compacted records differ from the source's")
                check(d.verify().ok, "verify after compact")
            fresh.discard()

        return Contender(
            run=lambda: fresh.ds.compact(target_size=target_size, workers=workers),
            prepare=fresh.prepare,
            finish=finish,
            recycle=recycled,
        )

    t = race(
        {
            "compact": compact_contender(recycle, None),
            "one": compact_contender(recycle, 1),
            "cold": compact_contender(0, None),
        },
        cfg,
    )
    results.append(
        Row(
            "compact",
            f"compact: `ds.compact`, {size_text} -> {groups} shards, workers=default ({usable_cpus()}); "
            "fsync + commit included",
            "GB/s",
            nbytes,
            t["compact"].times,
            target=1.0,
            absolute=True,
        )
    )
    results.append(Row("(compact, workers=1)", "(info) compact: same, workers=1", "GB/s", nbytes, t["one"].times))
    results.append(
        Row(
            "(compact, no recycling)",
            "(info) compact: same, without recycling page-cache memory before the run (the VM's cost of fresh memory)",
            "GB/s",
            nbytes,
            t["cold"].times,
        )
    )
    log("  [done] compact")

    # ---- export, and plain copies of the same shard files as the ceiling
    shared = work / "export-catalog"
    shutil.copytree(pristine, shared)
    cat = Catalog.open(shared)
    ds = cat.dataset(BLOB_NAME)
    src = ds.files()
    check(len(src) == len(files), "export catalog shards")
    outs = {"n": 0}

    def out_dir() -> Path:
        return work / f"out{outs['n']:03d}"

    def fresh_out() -> None:
        outs["n"] += 1
        out_dir().mkdir()
        for p in src:
            page_cache(p)

    def export() -> object:
        return ds.export(out_dir() / "export.tfrecord")

    def export_finish(report: object, first: bool) -> None:
        rep: Any = report
        check(rep.bytes == nbytes and rep.records == total, f"export report {rep.to_json()}")
        exported = out_dir() / "export.tfrecord"
        check(os.path.getsize(exported) == nbytes, "export size")
        if first:
            check(stream_digest([str(exported)]) == source_digest, "exported records differ from the dataset's")
        shutil.rmtree(out_dir())

    def copy(sync: bool) -> Callable[[], object]:
        def run() -> object:
            d = out_dir()
            for i, p in enumerate(src):
                dst = d / f"copy-{i:05d}.tfrecord"
                shutil.copyfile(p, dst)
                if sync:
                    fsync_path(dst)
            if sync:
                fsync_path(d)
            return None

        return run

    def copy_finish(_out: object, first: bool) -> None:
        copied = sorted(out_dir().iterdir())
        check(len(copied) == len(src) and sum(p.stat().st_size for p in copied) == nbytes, "copied bytes")
        shutil.rmtree(out_dir())

    t = race(
        {
            "export": Contender(run=export, prepare=fresh_out, finish=export_finish, recycle=recycle),
            "cold": Contender(run=export, prepare=fresh_out, finish=export_finish),
            "copy": Contender(run=copy(False), prepare=fresh_out, finish=copy_finish, recycle=recycle),
            "copy_sync": Contender(run=copy(True), prepare=fresh_out, finish=copy_finish, recycle=recycle),
        },
        cfg,
    )
    results.append(
        Row(
            "export",
            f"export: `ds.export(compression='none')`, {size_text} -> 1 file; fsync included",
            "GB/s",
            nbytes,
            t["export"].times,
            target=1.0,
            absolute=True,
        )
    )
    results.append(
        Row(
            "(export, no recycling)",
            "(info) export: same, without recycling page-cache memory before the run",
            "GB/s",
            nbytes,
            t["cold"].times,
        )
    )
    results.append(
        Row(
            "(export / copyfile)",
            "(info) export vs `shutil.copyfile` of every shard, no fsync (the page-cache ceiling)",
            "GB/s",
            nbytes,
            t["export"].times,
            nbytes,
            t["copy"].times,
        )
    )
    results.append(
        Row(
            "(export / copyfile + fsync)",
            "(info) export vs `shutil.copyfile` of every shard + fsync of each and of the folder",
            "GB/s",
            nbytes,
            t["export"].times,
            nbytes,
            t["copy_sync"].times,
        )
    )
    log("  [done] export")

    def profile_export() -> object:
        fresh_out()
        settle(recycle)
        try:
            return profile_text(export)
        finally:
            shutil.rmtree(out_dir())

    def profile_compact() -> object:
        f = FreshCatalog(pristine, work, BLOB_NAME)
        f.prepare()
        settle(recycle)
        try:
            return profile_text(lambda: f.ds.compact(target_size=target_size, workers=1))
        finally:
            f.discard()

    profiles["compact"] = profile_compact
    profiles["export"] = profile_export
    profiles["_close"] = cat.close


# --------------------------------------------------------------------------- profiles


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(
        __doc__,
        "smaller workload and fewer rounds (about 40 s)",
        "minimum timed rounds per comparison (default 5, quick 3)",
    )
    parser.add_argument(
        "--profile",
        choices=("missed", "all", "none"),
        default="missed",
        help="cProfile the catalog side (workers=1) of missed targets (default), of every target, or of none",
    )
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    if args.repeats:
        cfg = replace(cfg, repeats=args.repeats)

    tf = import_tensorflow()
    started = time.perf_counter()
    info = machine_info(tf)
    per_shard = math.ceil(cfg.records / cfg.shards)
    print("# TFRecord Catalog: migrate, compact and export benchmarks vs the seeds' way\n")
    print(f"- date: {info['date']}")
    print(
        f"- machine: {info['nproc']} CPU(s), {info['cpu']} ({info['platform']}); load average at start "
        f"{' '.join(map(str, info['loadavg_at_start']))}"
    )
    print(
        f"- Python {info['python']}, TensorFlow {info['tensorflow']}, numpy {info['numpy']}, "
        f"protobuf {info['protobuf']}, SQLAlchemy {info['sqlalchemy']} (SQLite {info['sqlite']}), "
        f"crc32c {info['crc32c']}"
    )
    print(f"- temp catalogs on {info['tmp_fs']}")
    print(
        f"- mode: {'quick' if args.quick else 'full'}: {cfg.records:,} records in {cfg.shards} shards (catalog side), "
        f"the first {cfg.peer_shards} shards ({cfg.peer_shards * per_shard:,} records) for the peer's eager loop; "
        f"{cfg.blob_mib} MiB of 256 KiB records in {cfg.blob_shards} shards; best of {cfg.repeats} to "
        f"{cfg.max_rounds} interleaved rounds (as many as fit in {cfg.budget:g} s) after a warm-up round"
    )
    print(
        f"- small record: tf.train.Example, 4 features (id int64, label string, score float32, vec float32[{VEC_LEN}])"
    )
    print(
        "- before every timed run, untimed: `os.sync()`, then a scratch file as large as the run's output (or more) "
        "is written and deleted, on both sides (recycled page-cache memory; see benchmarks/README.md)"
    )
    print()
    sys.stdout.flush()

    rows = make_rows(cfg.records)
    gc.collect()
    gc.freeze()  # the rows and TensorFlow's modules live for the whole run: keep them out of every collection
    results: list[Row] = []
    profiles: dict[str, Callable[[], object]] = {}
    profile_out: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench_migrate_", dir="/tmp") as d:
        tmp = Path(d)
        SCRATCH.append(tmp)
        log("[1-4] migrations ...")
        bench_migrations(tf, cfg, tmp, rows, results, profiles)
        log("[5] compact and export ...")
        bench_compact_export(cfg, tmp, results, profiles)
        elapsed = time.perf_counter() - started

        print(markdown_table(results))
        print(
            "\nratio = catalog rate / peer rate (best round of each side); the peer is the seeds' per-record eager "
            f"loop, without fsync. Total time {elapsed:.0f} s."
        )
        print(
            "\nfrom the medians instead of the best rounds (a noise gauge; rounds in parentheses): "
            + median_line(results)
        )
        missed = [r for r in results if r.met is False]
        print(
            f"\n{sum(r.met is True for r in results)} targets met, {len(missed)} missed"
            + (": " + "; ".join(r.key for r in missed) if missed else "")
            + "."
        )
        sys.stdout.flush()

        keys = [r.key for r in results if r.target is not None]
        if args.profile == "missed":
            keys = [r.key for r in missed]
        elif args.profile == "none":
            keys = []
        if keys:
            print("\n## Profiles (catalog side, workers=1, cProfile)\n")
            for key in keys:
                log(f"[profile] {key} ...")
                text = str(profiles[key]())
                profile_out[key] = text
                print(f"### {key}\n\n```\n{text}\n```\n")
            sys.stdout.flush()
        profiles["_close"]()

    if args.json:
        results_json = [r.to_json() for r in results]
        write_report(args.json, info, args.quick, cfg, results_json, elapsed_seconds=elapsed, profiles=profile_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
