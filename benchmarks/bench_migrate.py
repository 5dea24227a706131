"""Rewrite benchmarks: dataset migrations, compact and export, against the seeds' way.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_migrate            # full run (about 3-4 minutes on 2 cores)
    .venv/bin/python -m benchmarks.bench_migrate --quick    # smaller workload (about 40 s)
    .venv/bin/python -m benchmarks.bench_migrate --json results.json
    .venv/bin/python -m benchmarks.bench_migrate --profile all   # cProfile every catalog side, not only misses

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

import gc
import math
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy
from crc32c import crc32c

from benchmarks import harness as h
from catalog import Catalog, Schema, read_record_batches
from catalog.storage import fsync_dir

NAME = "small"
BLOB_NAME = "blobs"
BLOB_BYTES = 256 * 1024
BLOB_SCHEMA: dict[str, Any] = {"features": {"data": {"dtype": "bytes"}}}


@dataclass
class Config(h.Racing):
    records: int  # small Examples in the dataset
    shards: int  # ... split into this many shards
    peer_shards: int  # the peer migrates the first this-many shards (its eager loop is slow)
    blob_mib: int  # compact/export: MiB of 256 KiB records
    blob_shards: int  # ... in this many shards
    max_rounds: int = field(default=15, kw_only=True)


FULL = Config(records=200_000, shards=16, peer_shards=2, blob_mib=256, blob_shards=64, repeats=5, budget=6.0)
QUICK = Config(records=20_000, shards=8, peer_shards=2, blob_mib=64, blob_shards=16, repeats=3, budget=1.5)


# --------------------------------------------------------------------------- settling before a run


def settler(scratch: Path, recycle: int) -> Callable[[], None]:
    """Before every timed run: write back every dirty page, recycle memory, collect garbage.

    Without the sync, one run's unsynced output (the peer never fsyncs; the catalog copies
    its fresh dataset in ``prepare``) would be written back during the next run's fsync,
    because ext4 commits other files' new data with the journal.
    """

    def settle() -> None:
        os.sync()
        h.recycle_memory(scratch, recycle)
        gc.collect()

    return settle


def migrate_contender(
    fresh: h.FreshCatalog,
    migrations: Path,
    workers: int | None,
    verify: Callable[[Catalog, Any], None],
    settle: Callable[[], object],
) -> h.Contender:
    def finish(report: object, first: bool) -> None:
        if first:
            assert fresh.cat is not None
            verify(fresh.cat, report)
        fresh.discard()

    return h.Contender(
        run=lambda: fresh.ds.migrate(migrations, workers=workers), prepare=fresh.prepare, finish=finish, settle=settle
    )


# --------------------------------------------------------------------------- peer side (the seeds' way)


Modify = Callable[[Any], None]  # modifies a tf.train.Example in place


def peer_contender(
    tf: Any,
    sources: list[str],
    work: Path,
    modify: Modify,
    verify: Callable[[Path], None],
    settle: Callable[[], object],
) -> h.Contender:
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

    return h.Contender(run=run, prepare=prepare, finish=finish, settle=settle)


def peer_add(ex: Any) -> None:
    ex.features.feature["height"].int64_list.value.append(h.HEIGHT)


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


FEATURES_AFTER = {
    "add": {"id", "label", "score", "vec", "height"},
    "rename": {"id", "category", "score", "vec"},
    "drop": {"id", "label", "vec"},
    "transform": {"id", "label", "score", "vec", "magnitude"},
}


def check_columns(kind: str, cols: dict[str, np.ndarray], exp: Expected, who: str) -> None:
    """The decoded output of one migration must hold exactly what the migration promises."""
    h.check(set(cols) == FEATURES_AFTER[kind], f"{who} {kind}: features {sorted(cols)}")
    h.check(np.array_equal(cols["id"], exp.ids), f"{who} {kind}: ids differ from the source's (order or values)")
    h.check(np.array_equal(cols["vec"], exp.vecs), f"{who} {kind}: vec differs from the source's")
    if "score" in cols:
        h.check(np.array_equal(cols["score"], exp.scores), f"{who} {kind}: score differs")
    if kind == "rename":
        h.check(texts(cols["category"]) == exp.labels, f"{who} rename: category is not the old label")
    elif kind == "transform":
        h.check(texts(cols["label"]) == [s.upper() for s in exp.labels], f"{who} transform: label is not upper-cased")
        want = exp.scores.astype(np.float64) * np.sqrt((exp.vecs.astype(np.float64) ** 2).sum(axis=1))
        h.check(
            np.allclose(cols["magnitude"], want, rtol=1e-5, atol=1e-6),
            f"{who} transform: magnitude differs from score * |vec| (max error "
            f"{float(np.max(np.abs(cols['magnitude'] - want))):.3g})",
        )
    else:
        h.check(texts(cols["label"]) == exp.labels, f"{who} {kind}: label differs")
    if kind == "add":
        n = len(exp.ids)
        h.check(np.array_equal(cols["height"], np.full(n, h.HEIGHT, np.int64)), f"{who} add: height is not {h.HEIGHT}")


TARGET_SCHEMAS: dict[str, dict[str, Any]] = {
    "add": {"features": {**h.LABELED_SCHEMA["features"], "height": {"dtype": "int64", "default": h.HEIGHT}}},
    "rename": {
        "features": {("category" if k == "label" else k): v for k, v in h.LABELED_SCHEMA["features"].items()},
    },
    "drop": {"features": {k: v for k, v in h.LABELED_SCHEMA["features"].items() if k != "score"}},
    "transform": h.ENRICHED_SCHEMA,
}


def catalog_verifier(kind: str, exp: Expected, n_records: int, n_shards: int) -> Callable[[Catalog, Any], None]:
    def verify(cat: Catalog, report: Any) -> None:
        h.check(len(report.migrations) == 1, f"catalog {kind}: {len(report.migrations)} migrations applied, not 1")
        m = report.migrations[0]
        h.check(m.records == n_records and m.shards == n_shards, f"catalog {kind}: report {m.records} records")
        h.check(report.schema_version == 2, f"catalog {kind}: schema version {report.schema_version}, not 2")
        ds = cat.dataset(NAME)  # reopen: the old handle pins schema version 1
        want = Schema.from_json(TARGET_SCHEMAS[kind])
        h.check(ds.schema == want, f"catalog {kind}: new schema {ds.schema.to_json()} is not {want.to_json()}")
        files = ds.files()
        h.check(len(files) == n_shards, f"catalog {kind}: {len(files)} shards live, not {n_shards}")
        records = [r for p in files for batch in read_record_batches(p) for r in batch]
        h.check(len(records) == n_records, f"catalog {kind}: {len(records)} records read back, not {n_records}")
        check_columns(kind, ds.schema.decode_batch(records), exp, "catalog")
        h.check(ds.verify().ok, f"catalog {kind}: verify failed after the migration")

    return verify


def peer_verifier(kind: str, exp: Expected) -> Callable[[Path], None]:
    def verify(out: Path) -> None:
        records = [r for p in sorted(out.iterdir()) for batch in read_record_batches(str(p)) for r in batch]
        h.check(len(records) == len(exp.ids), f"peer {kind}: {len(records)} records written, not {len(exp.ids)}")
        check_columns(kind, Schema.from_json(TARGET_SCHEMAS[kind]).decode_batch(records), exp, "peer")

    return verify


# --------------------------------------------------------------------------- 1-4. migrations


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
        f'AddField("height", int64, default={h.HEIGHT})',
        f"`feature['height'].int64_list.value.append({h.HEIGHT})`",
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


@dataclass
class Migrations:
    """What every migration case shares: the pristine catalog, the peer's shards, the checks."""

    tf: Any
    cfg: Config
    pristine: Path
    work: Path
    folders: dict[str, Path]  # migrations folder by kind
    sources: list[str]  # the peer's shards
    peer_records: int
    exp: Expected
    settle: Callable[[], None]


def build_small(tf: Any, cfg: Config, tmp: Path, rows: list[dict[str, Any]]) -> Migrations:
    """The pristine catalog (only ever copied), the peer's page-cached shards, the scripts."""
    pristine = tmp / "pristine-small"
    t0 = time.perf_counter()
    per_shard = math.ceil(cfg.records / cfg.shards)
    with Catalog.init(pristine) as cat:
        ds = cat.register(NAME, h.LABELED_SCHEMA)
        commit = ds.append_rows(rows, shard_records=per_shard, message="benchmark data")
        files = ds.files()
    h.check(commit.records == cfg.records and commit.shard_count == cfg.shards, "the dataset's shards")
    shard_bytes = sum(os.path.getsize(p) for p in files)
    h.log(
        f"  built {cfg.records:,} records in {cfg.shards} shards ({shard_bytes / h.MIB:.1f} MiB) "
        f"in {time.perf_counter() - t0:.1f} s"
    )
    sources = files[: cfg.peer_shards]
    for p in sources:
        h.page_cache(p)
    peer_records = sum(1 for p in sources for _ in tf.data.TFRecordDataset(p))
    h.check(peer_records == per_shard * cfg.peer_shards, f"peer subset holds {peer_records} records")
    work = tmp / "runs"
    work.mkdir()
    folders = h.write_migrations(tmp, NAME, [c.kind for c in CASES])
    # More than any run writes (the copy is made in prepare, before the recycling).
    settle = settler(tmp, 2 * shard_bytes)
    return Migrations(tf, cfg, pristine, work, folders, sources, peer_records, Expected.of(rows), settle)


def bench_case(m: Migrations, case: MigrationCase) -> list[h.Versus]:
    verify = catalog_verifier(case.kind, m.exp, m.cfg.records, m.cfg.shards)
    folder = m.folders[case.kind]
    contenders = {
        "catalog": migrate_contender(h.FreshCatalog(m.pristine, m.work, NAME), folder, case.workers, verify, m.settle)
    }
    if case.info_workers is not None:
        fresh = h.FreshCatalog(m.pristine, m.work, NAME)
        contenders["info"] = migrate_contender(fresh, folder, case.info_workers, verify, m.settle)
    peer_check = peer_verifier(case.kind, m.exp.head(m.peer_records))
    contenders["peer"] = peer_contender(m.tf, m.sources, m.work, case.modify, peer_check, m.settle)
    t = m.cfg.race(contenders)
    workers = case.workers or f"default ({h.usable_cpus()})"
    rows = [
        h.Versus(
            case.kind,
            f"{case.kind}: `ds.migrate` {case.label}, workers={workers} vs parse + {case.peer_text} + write",
            "rec/s",
            m.cfg.records,
            t["catalog"].times,
            m.peer_records,
            t["peer"].times,
            case.target,
        )
    ]
    if case.info_workers is not None:
        rows.append(
            h.Versus(
                f"({case.kind}, workers={case.info_workers})",
                f"(info) {case.kind}: same, workers={case.info_workers}",
                "rec/s",
                m.cfg.records,
                t["info"].times,
                m.peer_records,
                t["peer"].times,
            )
        )
    return rows


def profile_migration(m: Migrations, folder: Path) -> Callable[[], str]:
    """One catalog migration for cProfile, with workers=1 so the work shows in this process."""

    def run() -> str:
        fresh = h.FreshCatalog(m.pristine, m.work, NAME)
        return h.profile_run(fresh.prepare, m.settle, lambda: fresh.ds.migrate(folder, workers=1), fresh.discard)

    return run


def bench_migrations(m: Migrations, results: list[h.Versus], profiles: dict[str, Callable[[], str]]) -> None:
    started = time.perf_counter()
    for case in CASES:
        results += bench_case(m, case)
        profiles[case.kind] = profile_migration(m, m.folders[case.kind])
        h.log(f"  [done] {case.kind} ({time.perf_counter() - started:.0f} s)")


# --------------------------------------------------------------------------- 5. compact and export


def stream_digest(paths: Iterable[str]) -> tuple[int, int]:
    """(records, crc32c over every record in order) of TFRecord files, CRCs checked."""
    n, crc = 0, 0
    for p in paths:
        for batch in read_record_batches(p):
            for r in batch:
                crc = crc32c(r, crc)
            n += len(batch)
    return n, crc


@dataclass
class Blobs:
    """The pristine blob catalog: its shards' facts, and what every compact/export run shares."""

    cfg: Config
    pristine: Path
    work: Path
    files: list[str]
    sizes: list[int]
    records: int
    digest: tuple[int, int]
    settle: Callable[[], None]

    @property
    def nbytes(self) -> int:
        return sum(self.sizes)

    @property
    def text(self) -> str:
        return f"{len(self.files)} shards of 256 KiB records ({self.nbytes / h.MIB:.0f} MiB, page-cached)"


def build_blobs(cfg: Config, tmp: Path) -> Blobs:
    pristine = tmp / "pristine-blobs"
    total = cfg.blob_mib * h.MIB // BLOB_BYTES
    t0 = time.perf_counter()
    with Catalog.init(pristine) as cat:
        ds = cat.register(BLOB_NAME, BLOB_SCHEMA)
        rng = np.random.default_rng(5)
        pool = [ds.schema.encode({"data": rng.bytes(BLOB_BYTES)}) for _ in range(16)]
        with ds.writer(message="blobs", shard_records=total // cfg.blob_shards) as w:
            for i in range(total):
                w.write_record(pool[i % len(pool)])
        h.check(w.commit is not None and w.commit.shard_count == cfg.blob_shards, "blob shards committed")
        files = ds.files()
    sizes = [os.path.getsize(p) for p in files]
    digest = stream_digest(files)
    h.check(digest[0] == total, "blob records")
    h.log(
        f"  built {total} x 256 KiB records in {len(files)} shards ({sum(sizes) / h.MIB:.0f} MiB) "
        f"in {time.perf_counter() - t0:.1f} s"
    )
    work = tmp / "blob-runs"
    work.mkdir()
    return Blobs(cfg, pristine, work, files, sizes, total, digest, settler(tmp, sum(sizes) + 64 * h.MIB))


COMPACT_GROUPS = 2  # so both workers of the default pool have one


def compact_contender(b: Blobs, settle: Callable[[], object], workers: int | None) -> h.Contender:
    fresh = h.FreshCatalog(b.pristine, b.work, BLOB_NAME)
    target_size = math.ceil(len(b.sizes) / COMPACT_GROUPS) * max(b.sizes)

    def finish(report: object, first: bool) -> None:
        rep: Any = report
        h.check(rep.commit is not None and rep.groups == COMPACT_GROUPS, f"compact made {rep.groups} groups")
        h.check(rep.bytes == b.nbytes and rep.shards_after == COMPACT_GROUPS, f"compact report {rep.to_json()}")
        if first:
            assert fresh.cat is not None
            d = fresh.cat.dataset(BLOB_NAME)
            h.check(len(d.files()) == COMPACT_GROUPS, "compacted shard count")
            h.check(stream_digest(d.files()) == b.digest, "compacted records differ from the source's")
            h.check(d.verify().ok, "verify after compact")
        fresh.discard()

    return h.Contender(
        run=lambda: fresh.ds.compact(target_size=target_size, workers=workers),
        prepare=fresh.prepare,
        finish=finish,
        settle=settle,
    )


def bench_compact(b: Blobs) -> list[h.Versus]:
    """A fresh copy per run; with and without recycling memory first."""
    t = b.cfg.race(
        {
            "compact": compact_contender(b, b.settle, None),
            "one": compact_contender(b, b.settle, 1),
            "cold": compact_contender(b, settler(b.work, 0), None),
        }
    )
    return [
        h.Versus(
            "compact",
            f"compact: `ds.compact`, {b.text} -> {COMPACT_GROUPS} shards, workers=default ({h.usable_cpus()}); "
            "fsync + commit included",
            "GB/s",
            b.nbytes,
            t["compact"].times,
            target=1.0,
            absolute=True,
        ),
        h.Versus("(compact, workers=1)", "(info) compact: same, workers=1", "GB/s", b.nbytes, t["one"].times),
        h.Versus(
            "(compact, no recycling)",
            "(info) compact: same, without recycling page-cache memory before the run (the VM's cost of fresh memory)",
            "GB/s",
            b.nbytes,
            t["cold"].times,
        ),
    ]


class ExportRuns:
    """``ds.export`` into a fresh folder per run, and plain copies of the same shards (the ceiling)."""

    def __init__(self, b: Blobs, cat: Catalog) -> None:
        self.b = b
        self.ds = cat.dataset(BLOB_NAME)
        self.src = self.ds.files()
        h.check(len(self.src) == len(b.files), "export catalog shards")
        self.n = 0

    @property
    def out(self) -> Path:
        return self.b.work / f"out{self.n:03d}"

    def prepare(self) -> None:
        self.n += 1
        self.out.mkdir()
        for p in self.src:
            h.page_cache(p)

    def export(self) -> object:
        return self.ds.export(self.out / "export.tfrecord")

    def export_finish(self, report: object, first: bool) -> None:
        rep: Any = report
        h.check(rep.bytes == self.b.nbytes and rep.records == self.b.records, f"export report {rep.to_json()}")
        exported = self.out / "export.tfrecord"
        h.check(os.path.getsize(exported) == self.b.nbytes, "export size")
        if first:
            h.check(stream_digest([str(exported)]) == self.b.digest, "exported records differ from the dataset's")
        shutil.rmtree(self.out)

    def copy(self, sync: bool) -> Callable[[], object]:
        def run() -> object:
            for i, p in enumerate(self.src):
                dst = self.out / f"copy-{i:05d}.tfrecord"
                shutil.copyfile(p, dst)
                if sync:
                    fsync_dir(dst)
            if sync:
                fsync_dir(self.out)
            return None

        return run

    def copy_finish(self, _out: object, first: bool) -> None:
        copied = sorted(self.out.iterdir())
        h.check(len(copied) == len(self.src) and sum(p.stat().st_size for p in copied) == self.b.nbytes, "copied bytes")
        shutil.rmtree(self.out)

    def profile(self) -> str:
        return h.profile_run(self.prepare, self.b.settle, self.export, lambda: shutil.rmtree(self.out))


def bench_export(b: Blobs, runs: ExportRuns) -> list[h.Versus]:
    def side(run: Callable[[], object], finish: Callable[[object, bool], None], recycled: bool = True) -> h.Contender:
        return h.Contender(run, runs.prepare, finish, b.settle if recycled else settler(b.work, 0))

    t = b.cfg.race(
        {
            "export": side(runs.export, runs.export_finish),
            "cold": side(runs.export, runs.export_finish, recycled=False),
            "copy": side(runs.copy(False), runs.copy_finish),
            "copy_sync": side(runs.copy(True), runs.copy_finish),
        }
    )
    n, export = b.nbytes, t["export"].times
    return [
        h.Versus(
            "export",
            f"export: `ds.export(compression='none')`, {b.text} -> 1 file; fsync included",
            "GB/s",
            n,
            export,
            target=1.0,
            absolute=True,
        ),
        h.Versus(
            "(export, no recycling)",
            "(info) export: same, without recycling page-cache memory before the run",
            "GB/s",
            n,
            t["cold"].times,
        ),
        h.Versus(
            "(export / copyfile)",
            "(info) export vs `shutil.copyfile` of every shard, no fsync (the page-cache ceiling)",
            "GB/s",
            n,
            export,
            n,
            t["copy"].times,
        ),
        h.Versus(
            "(export / copyfile + fsync)",
            "(info) export vs `shutil.copyfile` of every shard + fsync of each and of the folder",
            "GB/s",
            n,
            export,
            n,
            t["copy_sync"].times,
        ),
    ]


def profile_compact(b: Blobs) -> Callable[[], str]:
    target_size = math.ceil(len(b.sizes) / COMPACT_GROUPS) * max(b.sizes)

    def run() -> str:
        fresh = h.FreshCatalog(b.pristine, b.work, BLOB_NAME)
        return h.profile_run(fresh.prepare, b.settle, lambda: fresh.ds.compact(target_size=target_size, workers=1),
                             fresh.discard)  # fmt: skip

    return run


def bench_compact_export(
    cfg: Config, tmp: Path, results: list[h.Versus], profiles: dict[str, Callable[[], str]], stack: ExitStack
) -> None:
    b = build_blobs(cfg, tmp)
    results += bench_compact(b)
    h.log("  [done] compact")
    shared = b.work / "export-catalog"
    shutil.copytree(b.pristine, shared)
    runs = ExportRuns(b, stack.enter_context(Catalog.open(shared)))
    results += bench_export(b, runs)
    h.log("  [done] export")
    profiles["compact"] = profile_compact(b)
    profiles["export"] = runs.profile


# --------------------------------------------------------------------------- main


def print_results(results: list[h.Versus], elapsed: float) -> list[h.Versus]:
    """The table, the median line and the count of targets met; returns the missed rows."""
    print(h.versus_table(results, "peer"))
    print(
        "\nratio = catalog rate / peer rate (best round of each side); the peer is the seeds' per-record eager "
        f"loop, without fsync. Total time {elapsed:.0f} s."
    )
    h.print_medians(results)
    return h.versus_missed(results)


def header(cfg: Config, quick: bool, tf: Any) -> dict[str, Any]:
    per_shard = math.ceil(cfg.records / cfg.shards)
    return h.start_report(
        "TFRecord Catalog: migrate, compact and export benchmarks vs the seeds' way",
        dict(
            tensorflow=tf.__version__,
            numpy=np.__version__,
            protobuf=h.protobuf_version(),
            sqlalchemy=sqlalchemy.__version__,
            sqlite=sqlite3.sqlite_version,
            crc32c=h.dist_version("crc32c"),
        ),
        f"mode: {'quick' if quick else 'full'}: {cfg.records:,} records in {cfg.shards} shards (catalog side), "
        f"the first {cfg.peer_shards} shards ({cfg.peer_shards * per_shard:,} records) for the peer's eager loop; "
        f"{cfg.blob_mib} MiB of 256 KiB records in {cfg.blob_shards} shards; {cfg.rounds()} "
        "after a warm-up round",
        "small record: tf.train.Example, 4 features (id int64, label string, score float32, "
        f"vec float32[{h.LABELED_VEC}])",
        "before every timed run, untimed: `os.sync()`, then a scratch file as large as the run's output (or more) "
        "is written and deleted, on both sides (recycled page-cache memory; see benchmarks/README.md)",
    )


def main(argv: list[str] | None = None) -> int:
    args, cfg = h.options(argv, QUICK, FULL, __doc__, "smaller workload and fewer rounds (about 40 s)",
                          "minimum timed rounds per comparison (default 5, quick 3)",
                          "the catalog side (workers=1)")  # fmt: skip
    tf = h.import_tensorflow()
    started = time.perf_counter()
    info = header(cfg, args.quick, tf)
    rows = h.labeled_rows(cfg.records)
    h.freeze()
    results: list[h.Versus] = []
    profiles: dict[str, Callable[[], str]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_migrate_", dir="/tmp") as d, ExitStack() as stack:
        h.log("[1-4] migrations ...")
        bench_migrations(build_small(tf, cfg, Path(d), rows), results, profiles)
        h.log("[5] compact and export ...")
        bench_compact_export(cfg, Path(d), results, profiles, stack)
        elapsed = time.perf_counter() - started
        print_results(results, elapsed)
        texts = h.versus_profiles(args.profile, results, profiles, "workers=1, cProfile")
    if args.json:
        results_json = [r.to_json() for r in results]
        h.write_report(args.json, info, args.quick, cfg, results_json, elapsed_seconds=elapsed, profiles=texts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
