"""Row-change benchmarks: ``ds.delete(where)`` of a few rows against the seeds' way.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_rowchanges            # full run: 1 GB in 64 shards (a few minutes)
    .venv/bin/python -m benchmarks.bench_rowchanges --quick    # 64 MB in 64 shards (about a minute)
    .venv/bin/python -m benchmarks.bench_rowchanges --json results.json
    .venv/bin/python -m benchmarks.bench_rowchanges --profile all   # cProfile the catalog sides too

The dataset (built once, untimed): rows of an int64 ``id`` (0, 1, 2, ... in write order), an
int64 ``label``, a float32 ``score`` and a 2 KiB ``payload``, spread over 64 shards. 0.1% of
the rows are deleted by ``id IN (...)``: once with every id in one shard, once spread over
8 shards, so the catalog's cost can be read against the shards touched, not the dataset.

The peer is the seeds' way: every shard read with ``tf.data.TFRecordDataset``, each record
parsed into a ``tf.train.Example``, its id tested in Python, the rest written with
``tf.io.TFRecordWriter`` to a new set of files (for information, also a batched variant:
``tf.io.parse_example`` of the id alone, a numpy mask). The catalog side is one
``ds.delete`` call, commit included; between its rounds the dataset is put back with
``ds.restore`` (untimed). Only the RATIOS are meaningful. Progress goes to stderr, the report
(a markdown table) to stdout.
"""

from __future__ import annotations

import gc
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy

from benchmarks.harness import (
    MIB,
    Contender,
    Racing,
    Versus,
    arg_parser,
    check,
    chosen_config,
    import_tensorflow,
    log,
    machine_header,
    median_line,
    page_cache,
    print_header,
    profile_text,
    protobuf_version,
    skip_shard_fsync,
    usable_cpus,
    versus_missed,
    versus_profiles,
    versus_table,
    write_report,
)
from catalog import Catalog, Dataset, Schema, read_record_batches

NAME = "rows"
PAYLOAD = 2048
SCHEMA: dict[str, Any] = {
    "features": {
        "id": {"dtype": "int64"},
        "label": {"dtype": "int64"},
        "score": {"dtype": "float32"},
        "payload": {"dtype": "bytes"},
    }
}
SHARE = 0.001  # of the rows deleted


@dataclass
class Config(Racing):
    rows: int
    shards: int
    max_rounds: int = field(default=10, kw_only=True)

    @property
    def per_shard(self) -> int:
        return -(-self.rows // self.shards)  # the last shard may hold fewer


FULL = Config(rows=500_000, shards=64, repeats=3, budget=0.0)  # about 1 GB
QUICK = Config(rows=32_000, shards=64, repeats=3, budget=2.0)  # about 64 MB


# --------------------------------------------------------------------------- the dataset


def build(cfg: Config, root: Path) -> tuple[Catalog, Dataset]:
    """The dataset, written once (untimed, shard fsyncs off): ids in write order, so each
    shard holds a run of them (as rows appended over time do)."""
    t0 = time.perf_counter()
    cat = Catalog.init(root)
    ds = cat.register(NAME, SCHEMA)
    rng = np.random.default_rng(7)
    pool = [rng.bytes(PAYLOAD) for _ in range(64)]
    scores = rng.random(cfg.rows).astype(np.float32).tolist()
    encode = ds.schema.encode
    with ds.writer(message="benchmark data", shard_records=cfg.per_shard) as w:
        skip_shard_fsync(w)
        for i in range(cfg.rows):
            w.write_record(encode({"id": i, "label": i % 10, "score": scores[i], "payload": pool[i % 64]}))
    check(w.commit is not None and w.commit.shard_count == cfg.shards, "the dataset's shards")
    size = sum(os.path.getsize(p) for p in ds.files())
    log(f"  built {cfg.rows:,} rows in {cfg.shards} shards ({size / MIB:,.0f} MiB) in {time.perf_counter() - t0:.1f} s")
    for p in ds.files():
        page_cache(p)
    return cat, cat.dataset(NAME)  # a fresh handle: its version is the data's


def doomed(cfg: Config, shards: list[int]) -> list[int]:
    """0.1% of the rows, as ids spread evenly over the rows of ``shards``."""
    per_shard = cfg.per_shard
    n = max(len(shards), round(cfg.rows * SHARE))
    ids: list[int] = []
    for k, s in enumerate(shards):
        take = n // len(shards) + (k < n % len(shards))
        ids += (s * per_shard + np.linspace(0, per_shard - 1, take).astype(np.int64)).tolist()
    return ids


def where(ids: list[int]) -> str:
    return f"id IN ({', '.join(map(str, ids))})"


def kept_ids(paths: list[str]) -> np.ndarray:
    """The ids of every record of ``paths``, in order (decoded by the catalog's schema)."""
    schema = Schema.from_json(SCHEMA)
    parts = [schema.decode_batch(batch)["id"] for p in paths for batch in read_record_batches(p)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def expected(cfg: Config, ids: list[int]) -> np.ndarray:
    return np.setdiff1d(np.arange(cfg.rows, dtype=np.int64), np.array(ids, dtype=np.int64))


# --------------------------------------------------------------------------- catalog side


class Deletes:
    """The catalog side: ``ds.delete("id IN (...)")``, the dataset restored to ``base`` (the
    pristine rows) before each round that follows a delete (untimed: a commit of relinks)."""

    def __init__(self, cfg: Config, ds: Dataset) -> None:
        self.cfg, self.ds = cfg, ds
        self.base = ds.version
        self.dirty = False

    def restore(self) -> None:
        if self.dirty:
            self.ds.restore(self.base, message="benchmark: back to the pristine rows")
            self.dirty = False
        for p in self.ds.files():
            page_cache(p)

    def contender(self, ids: list[int], shards: int) -> Contender:
        text = where(ids)

        def run() -> object:
            self.dirty = True
            return self.ds.delete(text)

        def finish(report: Any, first: bool) -> None:
            check(report.version is not None and report.rows == len(ids), f"delete report {report.to_json()}")
            check(report.shards == shards, f"delete touched {report.shards} shards, not {shards}")
            if first:
                got = kept_ids(self.ds.files())
                check(np.array_equal(got, expected(self.cfg, ids)), "the rows left are not the rows expected, in order")

        return Contender(run=run, prepare=self.restore, finish=finish)

    def profiler(self, ids: list[int]) -> Callable[[], str]:
        def run() -> str:
            self.restore()
            self.dirty = True
            return profile_text(lambda: self.ds.delete(where(ids), workers=1))

        return run


# --------------------------------------------------------------------------- peer side (the seeds' way)


class Peer:
    """The seeds' way: every shard read with tf.data, filtered in Python, written anew."""

    def __init__(self, tf: Any, sources: list[str], work: Path, ids: list[int], cfg: Config) -> None:
        self.tf, self.sources, self.work, self.cfg = tf, sources, work, cfg
        self.ids = ids
        self.wanted = set(ids)
        self.n = 0

    @property
    def out(self) -> Path:
        return self.work / f"peer{self.n:03d}"

    def prepare(self) -> None:
        self.n += 1
        self.out.mkdir()
        for p in self.sources:
            page_cache(p)

    def per_record(self) -> int:
        """Parse each record into an Example, test its id, write it if it stays."""
        tf, wanted, kept = self.tf, self.wanted, 0
        for i, path in enumerate(self.sources):
            with tf.io.TFRecordWriter(str(self.out / f"part-{i:05d}.tfrecord")) as writer:
                for raw in tf.data.TFRecordDataset(path):
                    data = raw.numpy()
                    ex = tf.train.Example.FromString(data)
                    if ex.features.feature["id"].int64_list.value[0] not in wanted:
                        writer.write(data)
                        kept += 1
        return kept

    def batched(self) -> int:
        """tf.io.parse_example of the id alone, 1024 records at a time, a numpy mask."""
        tf, kept = self.tf, 0
        spec = {"id": tf.io.FixedLenFeature([], tf.int64)}
        doomed_ids = np.array(self.ids, dtype=np.int64)
        for i, path in enumerate(self.sources):
            with tf.io.TFRecordWriter(str(self.out / f"part-{i:05d}.tfrecord")) as writer:
                for batch in tf.data.TFRecordDataset(path).batch(1024):
                    ids = tf.io.parse_example(batch, spec)["id"].numpy()
                    for data in batch.numpy()[~np.isin(ids, doomed_ids)].tolist():
                        writer.write(data)
                        kept += 1
        return kept

    def finish(self, kept: object, first: bool) -> None:
        check(kept == self.cfg.rows - len(self.ids), f"peer kept {kept} rows")
        if first:
            got = kept_ids(sorted(str(p) for p in self.out.iterdir()))
            check(np.array_equal(got, expected(self.cfg, self.ids)), "peer: the rows left are not those expected")
        shutil.rmtree(self.out)

    def contender(self, run: Callable[[], int]) -> Contender:
        return Contender(run=run, prepare=self.prepare, finish=self.finish)


# --------------------------------------------------------------------------- main


def bench(cfg: Config, tf: Any, ds: Dataset, tmp: Path, profiles: dict[str, Callable[[], str]]) -> list[Versus]:
    deletes = Deletes(cfg, ds)
    one, eight = doomed(cfg, [cfg.shards // 2]), doomed(cfg, [3 + 8 * k for k in range(8)])
    work = tmp / "peer"
    work.mkdir()
    peer = Peer(tf, ds.files(), work, one, cfg)
    log("  racing ...")
    t = cfg.race(
        {
            "one": deletes.contender(one, 1),
            "eight": deletes.contender(eight, 8),
            "peer": peer.contender(peer.per_record),
            "batched": peer.contender(peer.batched),
        }
    )
    profiles["delete-1"], profiles["delete-8"] = deletes.profiler(one), deletes.profiler(eight)
    return rows(cfg, t, len(one))


def rows(cfg: Config, t: dict[str, Any], n: int) -> list[Versus]:
    """Rates in rows of the dataset a second (each side handles the whole dataset's deletion)."""
    work, peer = cfg.rows, t["peer"].times
    text = f"{n:,} rows of {cfg.rows:,} ({cfg.shards} shards, 2 KiB payloads)"
    return [
        Versus("delete-1", f"delete {text} in 1 shard: `ds.delete('id IN (...)')` vs tf.data + Example + writer",
               "rec/s", work, t["one"].times, work, peer, target=20.0),
        Versus("delete-8", f"delete {text} in 8 shards: `ds.delete` vs the same peer",
               "rec/s", work, t["eight"].times, work, peer, target=20.0),
        Versus("(8 / 1 shards)", "(info) delete in 8 shards vs in 1 (the cost of the shards touched)",
               "rec/s", work, t["eight"].times, work, t["one"].times),
        Versus("(vs batched peer)", "(info) delete in 1 shard vs tf.data batches + parse_example(id) + numpy mask",
               "rec/s", work, t["one"].times, work, t["batched"].times),
    ]  # fmt: skip


def header(cfg: Config, quick: bool, tf: Any) -> dict[str, Any]:
    info = machine_header(
        tensorflow=tf.__version__,
        numpy=np.__version__,
        protobuf=protobuf_version(),
        sqlalchemy=sqlalchemy.__version__,
        sqlite=sqlite3.sqlite_version,
    )
    print_header(
        "TFRecord Catalog: delete by predicate vs the seeds' way",
        info,
        f"temp catalog on {info['tmp_fs']}",
        f"mode: {'quick' if quick else 'full'}: {cfg.rows:,} rows (id, label, score, 2 KiB payload) in "
        f"{cfg.shards} shards; {SHARE:.1%} of them deleted; best of {cfg.repeats} to {cfg.max_rounds} interleaved "
        f"rounds after a warm-up round; catalog workers: default ({usable_cpus()})",
    )
    return info


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(
        __doc__, "64 MB instead of 1 GB (about a minute)", "minimum timed rounds (default 3)", "the catalog side"
    )
    args = parser.parse_args(argv)
    cfg = chosen_config(args, QUICK, FULL)
    tf = import_tensorflow()
    started = time.perf_counter()
    info = header(cfg, args.quick, tf)
    profiles: dict[str, Callable[[], str]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_rowchanges_", dir="/tmp") as d:
        cat, ds = build(cfg, Path(d) / "catalog")
        gc.collect()
        results = bench(cfg, tf, ds, Path(d), profiles)
        elapsed = time.perf_counter() - started
        print(versus_table(results, "peer"))
        print(f"\nratio = catalog rate / peer rate (best round of each side). Total time {elapsed:.0f} s.")
        print("\nfrom the medians instead of the best rounds: " + median_line(results))
        versus_missed(results)
        texts = versus_profiles(args.profile, results, profiles, "workers=1, cProfile")
        cat.close()
    if args.json:
        write_report(args.json, info, args.quick, cfg, [r.to_json() for r in results], elapsed_seconds=elapsed,
                     profiles=texts)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
