"""Record index benchmark: bulk appends that write every shard's record index (computed while
framing, published beside the shard before its commit) against the same appends without one,
the code before the index, side by side.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_index            # full run: 1,000,000 records (about 4-6 minutes on 2 cores)
    .venv/bin/python -m benchmarks.bench_index --quick    # 100,000 records (about 40 s)
    .venv/bin/python -m benchmarks.bench_index --json results.json

Two workloads, each in interleaved rounds whose order rotates, every round into a new catalog
made outside the timer: ``append_files`` of one TFRecord file of small Examples (validated,
written, fsynced, committed: what `catalog append` does), and the writer alone
(``Dataset.writer().write_record`` of the same records: no validation, so the index's share
of the work is at its largest). The side without an index is the same code with the shard
sink's index switched off (``ShardSink(index=False)``: the one internal this benchmark
touches). Only the ratios are meaningful. Progress goes to stderr, the report to stdout.
"""

from __future__ import annotations

import gc
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import catalog.ops.writer
from benchmarks import harness as h
from catalog import Catalog, RecordWriter, Schema
from catalog.commit.values import Commit
from catalog.storage import ShardSink

NAME = "small"
TARGET = 0.95  # the append throughput with the index, against without


@dataclass
class Config(h.Racing):
    records: int


FULL = Config(records=1_000_000, repeats=7, budget=120.0, max_rounds=15)
QUICK = Config(records=100_000, repeats=3, budget=10.0)


class _UnindexedSink(ShardSink):
    """The shard sink as it was before the record index: no index computed, none written."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["index"] = False
        super().__init__(*args, **kwargs)


@contextmanager
def without_index() -> Iterator[None]:
    """Appends made inside write no record index (the writer's sink is the only place one is made)."""
    saved = catalog.ops.writer.ShardSink
    catalog.ops.writer.ShardSink = _UnindexedSink  # type: ignore[misc]
    try:
        yield
    finally:
        catalog.ops.writer.ShardSink = saved  # type: ignore[misc]


class Runs:
    """A new catalog (and dataset) for every run, made and removed outside the timer."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.n = 0
        self.cat: Catalog | None = None
        self.commits: dict[bool, Commit] = {}  # with an index or not: the warm-up run's commit
        # CPU seconds of each timed run, with an index or not: this process's own work, which
        # other users of a shared machine disturb less than the wall clock (fsync waits excluded).
        self.cpu: dict[bool, list[float]] = {True: [], False: []}
        self.warm: set[bool] = set()

    def prepare(self) -> None:
        self.n += 1
        self.cat = Catalog.init(self.work / f"run{self.n:03d}")
        self.cat.register(NAME, h.LABELED_SCHEMA)
        os.sync()  # the last run's deletions and this catalog on disk: no write-back lands in the timed run
        gc.collect()

    def discard(self) -> None:
        h.remove_catalog(self.cat)
        self.cat = None

    def contender(self, run: Callable[[Catalog], Commit], indexed: bool) -> h.Contender:
        def timed() -> Commit:
            assert self.cat is not None
            c0 = time.process_time()
            if indexed:
                out = run(self.cat)
            else:
                with without_index():
                    out = run(self.cat)
            if indexed in self.warm:  # the warm-up run is not timed
                self.cpu[indexed].append(time.process_time() - c0)
            self.warm.add(indexed)
            return out

        def finish(out: object, first: bool) -> None:
            if first:
                assert isinstance(out, Commit) and self.cat is not None
                check_commit(self.cat, out, indexed)
                self.commits[indexed] = out
            self.discard()

        return h.Contender(run=timed, prepare=self.prepare, finish=finish, settle=h.sync_and_collect)


def check_commit(cat: Catalog, commit: Commit, indexed: bool) -> None:
    """The run did the work: every record registered; an index per shard, of 8 bytes per record, or none."""
    h.check(commit.records == commit.total_records > 0, "records registered")
    for s in commit.shards:
        index = cat.data_root / ".index" / f"{s.relpath}.idx"
        if indexed:
            h.check(s.index_checksum is not None and index.stat().st_size == 8 * s.records, "an index per shard")
        else:
            h.check(s.index_checksum is None and not index.exists(), "no index without the index")


def append_files(src: Path) -> Callable[[Catalog], Commit]:
    return lambda cat: cat.dataset(NAME).append_files([src])


def write_records(records: list[bytes]) -> Callable[[Catalog], Commit]:
    def run(cat: Catalog) -> Commit:
        with cat.dataset(NAME).writer() as w:
            for r in records:
                w.write_record(r)
        assert w.commit is not None
        return w.commit

    return run


def bench(cfg: Config, work: Path, records: list[bytes], src: Path) -> tuple[list[h.Versus], dict[str, Any]]:
    results: list[h.Versus] = []
    sizes: dict[str, Any] = {}
    for key, title, run in [
        ("append_files", f"append_files: one TFRecord file of {cfg.records:,} records", append_files(src)),
        ("writer", f"writer.write_record x {cfg.records:,} (no validation)", write_records(records)),
    ]:
        h.log(f"[{key}] {title} ...")
        runs = Runs(work)
        timings = cfg.race({"index": runs.contender(run, True), "no index": runs.contender(run, False)})
        row = h.versus(key, title, "rec/s", cfg.records, timings["index"], timings["no index"], target=TARGET)
        cpu = h.versus(
            f"{key}-cpu", f"{title}, CPU time (info)", "rec/s", cfg.records,
            h.Timing("index", runs.cpu[True]), h.Timing("no index", runs.cpu[False]),
        )  # fmt: skip
        results += [row, cpu]
        median = row.ratio(np.median)
        h.log(f"[{key}] {row.ratio():.3f}x (median {median:.3f}x, {row.rounds} rounds), CPU {cpu.ratio():.3f}x")
        indexed = runs.commits[True]
        sizes = {
            "records": indexed.total_records,
            "data_bytes": indexed.total_bytes,
            "index_bytes": 8 * indexed.total_records,
            "shards": indexed.total_shards,
        }
    return results, sizes


def main(argv: list[str] | None = None) -> int:
    parser = h.arg_parser(__doc__, "100,000 records and fewer rounds (about 40 s)", "minimum timed rounds (default 5)")
    parser.add_argument("--profile", action="store_true", help="cProfile one indexed writer run after the table")
    args = parser.parse_args(argv)
    cfg = h.chosen_config(args, QUICK, FULL)
    started = time.perf_counter()
    info = h.machine_header(numpy=np.__version__, sqlite=sqlite3.sqlite_version, crc32c=h.dist_version("crc32c"))
    h.print_header(
        "TFRecord Catalog: bulk appends with the record index vs without",
        info,
        f"temp catalogs on {info['tmp_fs']}; mode: {'quick' if args.quick else 'full'}: {cfg.records:,} records "
        f"a run, best of {cfg.repeats} to {cfg.max_rounds} interleaved rounds after a warm-up round",
        f"record: tf.train.Example, 4 features (id int64, label string, score float32, vec float32[{h.LABELED_VEC}])",
        "every run: a new catalog (made, and the last one removed, untimed), then `os.sync()` untimed; the append "
        "is durable (shard and index fsynced, the manifest commit synced)",
    )
    schema = Schema.from_json(h.LABELED_SCHEMA)
    with tempfile.TemporaryDirectory(prefix="bench_index_", dir="/tmp") as d:
        records = [schema.encode(r) for r in h.labeled_rows(cfg.records)]
        src = Path(d) / "input.tfrecord"
        with RecordWriter(src) as w:
            w.write_many(records)
        h.freeze()
        results, sizes = bench(cfg, Path(d), records, src)
        print(h.versus_table(results, "no index"))
        share = sizes["index_bytes"] / sizes["data_bytes"]
        print(
            f"\nratio = rate with the index / rate without (best round of each side); the CPU rows count this "
            f"process's CPU seconds instead of the wall clock (a gauge for a shared machine). Index size: "
            f"{sizes['index_bytes']:,} bytes for {sizes['data_bytes']:,} bytes of shards ({share:.1%}; "
            f"8 bytes a record, {sizes['data_bytes'] / sizes['records']:.0f} bytes a framed record). "
            f"Total time {time.perf_counter() - started:.0f} s."
        )
        h.print_medians(results, gauge=False)
        profile = ""
        if args.profile:
            runs = Runs(Path(d))
            runs.prepare()
            assert runs.cat is not None
            cat = runs.cat
            profile = h.profile_text(lambda: write_records(records)(cat))
            runs.discard()
            print(f"\n## Profile: one indexed writer run\n\n```\n{profile}\n```")
    if args.json:
        h.write_report(
            args.json, info, args.quick, cfg, [r.to_json() for r in results], index_size=sizes, profile=profile
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
