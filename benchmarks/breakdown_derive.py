"""Where a derivation's time goes, a row at a time: the catalog side of bench_derive broken
into phases (reading and checking the source, decoding, the function, encoding, framing and
CRC, statistics, writing, fsync, commit...), each timed by wall and by this thread's CPU,
exclusive of the phases inside it.

Run from the repository root (workers=1: the jobs run in this process, where the clocks are):

    CATALOG_STATS_HELPER=0 .venv/bin/python -m benchmarks.breakdown_derive          # 1,000,000 rows
    CATALOG_STATS_HELPER=0 .venv/bin/python -m benchmarks.breakdown_derive --rows 100000 --rounds 5

``CATALOG_STATS_HELPER=0`` keeps the statistics in this process (else part of them runs in the
helper process, on the other core, and is not counted). Each phase's functions are wrapped
(a few dozen calls a shard, not a call a row: the wrapping costs nothing measurable). Read the
CPU column on a loaded machine: the wall column then holds the waits for a core too.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from benchmarks import bench_derive as bd
from catalog import Catalog, Dataset

Clocks = dict[str, float]


class Phases:
    """Exclusive wall and CPU time by phase: a wrapped call's time less its wrapped callees'."""

    def __init__(self) -> None:
        self.wall: Clocks = defaultdict(float)
        self.cpu: Clocks = defaultdict(float)
        self._stack: list[list[float]] = []  # per open call: its callees' [wall, cpu]
        self._absorbing = 0  # inside a phase that takes its callees' time as its own

    def clear(self) -> None:
        self.wall.clear()
        self.cpu.clear()

    def timed(self, label: str, call: Callable[[], Any], absorb: bool = False) -> Any:
        if self._absorbing:
            return call()
        t0, c0 = time.perf_counter(), time.thread_time()
        self._stack.append([0.0, 0.0])
        self._absorbing += absorb
        try:
            return call()
        finally:
            self._absorbing -= absorb
            dt, dc = time.perf_counter() - t0, time.thread_time() - c0
            inner = self._stack.pop()
            self.wall[label] += dt - inner[0]
            self.cpu[label] += dc - inner[1]
            if self._stack:
                self._stack[-1][0] += dt
                self._stack[-1][1] += dc

    def wrap(self, owner: Any, name: str, label: str, absorb: bool = False) -> None:
        """``owner.name`` (a function or method) timed as ``label`` from now on."""
        fn = getattr(owner, name)

        @functools.wraps(fn)
        def wrapped(*a: Any, **k: Any) -> Any:
            return self.timed(label, lambda: fn(*a, **k), absorb)

        setattr(owner, name, wrapped)

    def wrap_generator(self, owner: Any, name: str, label: str) -> None:
        """``owner.name``, a generator function: each step of its iterators timed as ``label``."""
        fn = getattr(owner, name)
        done = object()

        def wrapped(*a: Any, **k: Any) -> Iterator[Any]:
            steps = fn(*a, **k)
            while (item := self.timed(label, lambda: next(steps, done))) is not done:
                yield item

        setattr(owner, name, wrapped)


def instrument(p: Phases) -> None:
    """Wrap the phases' functions (imported here: the wrapping is for this process alone)."""
    import catalog.api as api
    import catalog.ops.derive as dv
    import catalog.schema.codec as codec
    import catalog.schema.model as model
    import catalog.schema.packing as packing
    import catalog.stats.tally as tally
    import catalog.storage.base as base
    import catalog.storage.sink as sink
    import catalog.tfrecord.framing as framing

    p.wrap(api.Dataset, "_derive", "other (snapshot, register)")
    p.wrap(dv, "target_schema", "schema inference (target_schema), per run")
    p.wrap(dv, "run", "plan, executor, intent, per run")
    p.wrap(dv, "commit", "manifest commit, per run")
    p.wrap(dv, "derive_shard", "job glue (derive_shard, _write, write_batch, sink)")
    p.wrap(dv._Program, "__init__", "job set-up (_Program: Schema.from_json)")
    p.wrap_generator(dv, "_source_batches", "reading + framing check (shard_windows)")
    for name in ("decode_spans", "decode_batch"):
        p.wrap(model.Schema, name, "decoding into columns (decode_spans)")
    p.wrap(codec, "encode_plain", "encoding rows to Example bytes (encode_plain)")
    p.wrap(packing, "frame_in_place", "framing + CRC32C (frame_in_place)")
    for name in ("add_batch", "add_decoded_columns", "add_records", "result"):
        p.wrap(tally.Tally, name, "statistics (Tally)")
    p.wrap(dv._Program, "decoded", "statistics: a filter's kept rows decoded", absorb=True)
    p.wrap(sink, "decoded_columns", "statistics: columns prepared (decoded_columns)", absorb=True)
    for name in ("write_framed", "write_many", "close"):
        p.wrap(framing.RecordWriter, name, "writing (buffered write + file CRC32C)")
    for name in ("publish", "sync_dir"):
        p.wrap(base.Store, name, "fsync + rename (publish, sync_dir)")
    for name in ("publish_index", "index_bytes"):
        p.wrap(sink, name, "record index (write + fsync)")


def timed_fn(p: Phases) -> Callable[[Any], Any]:
    """bench_derive's batched map function, timed as its own phase (same name for lineage)."""
    fn = bd.with_length_batch

    def with_length_batch(batch: Any) -> Any:
        return p.timed("the function (with_length_batch)", lambda: fn(batch))

    with_length_batch.__module__ = fn.__module__
    return with_length_batch


def calls(ds: Dataset, fn: Callable[[Any], Any]) -> dict[str, Callable[[str], Any]]:
    return {
        "map-batched": lambda into: ds.map(fn, into=into, batched=True, workers=1),
        "filter": lambda into: ds.filter(bd.PREDICATE, into=into, workers=1),
    }


def measure(p: Phases, cat: Catalog, call: Callable[[str], Any], rounds: int) -> tuple[float, float, Clocks, Clocks]:
    """The median round (by wall) of ``rounds`` after a warm-up: wall, CPU, phases' wall and CPU."""
    call("warm")
    cat.drop("warm")
    cat.gc(grace=timedelta(0))
    runs = []
    for r in range(rounds):
        p.clear()
        os.sync()
        t0, c0 = time.perf_counter(), time.process_time()
        call(f"out{r}")
        runs.append((time.perf_counter() - t0, time.process_time() - c0, dict(p.wall), dict(p.cpu)))
        cat.drop(f"out{r}")
        cat.gc(grace=timedelta(0))
    runs.sort(key=lambda run: run[0])
    return runs[len(runs) // 2]


def report(kind: str, n: int, rounds: int, result: tuple[float, float, Clocks, Clocks]) -> None:
    wall, cpu, walls, cpus = result
    print(f"\n## {kind}: {n:,} rows, median of {rounds} rounds: wall {wall:.3f} s, CPU {cpu:.3f} s\n")
    print("| phase | wall s | wall us/row | CPU s | CPU us/row |\n|---|---:|---:|---:|---:|")
    for label, w in sorted(walls.items(), key=lambda kv: -cpus.get(kv[0], 0.0)):
        c = cpus.get(label, 0.0)
        print(f"| {label} | {w:.3f} | {w / n * 1e6:.2f} | {c:.3f} | {c / n * 1e6:.2f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", choices=["map-batched", "filter"], default=None)
    args = parser.parse_args(argv)
    phases = Phases()
    instrument(phases)
    rows = bd.make_rows(args.rows)
    print(f"load average {os.getloadavg()}, statistics helper {os.environ.get('CATALOG_STATS_HELPER', '1')}")
    with tempfile.TemporaryDirectory(prefix="breakdown_derive_") as d:
        cat = bd.build_catalog(Path(d) / "cat", rows, args.shards)
        for kind, call in calls(cat.dataset(bd.NAME), timed_fn(phases)).items():
            if args.only in (None, kind):
                report(kind, args.rows, args.rounds, measure(phases, cat, call, args.rounds))
        cat.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
