"""Migration throughput: the Dask executor on a LocalCluster against the local process pool.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_dask                 # 200,000 Examples in 16 shards (2-3 minutes)
    .venv/bin/python -m benchmarks.bench_dask --quick         # 20,000 Examples in 8 shards (about 30 s)
    .venv/bin/python -m benchmarks.bench_dask --json out.json

The data is bench_migrate's (the harness's labeled rows): small tf.train.Examples (id,
label, score, vec[16]) and the same migration scripts. Both sides call ``Dataset.migrate``
on a fresh copy of one catalog (copied, synced and page-cached outside the timer) with two
workers:

* local: ``workers=2``, today's default path: a fork process pool that each migrate starts
  and stops, inside its time;
* dask: ``executor=`` the ``client.get_executor()`` of a LocalCluster of 2 worker processes,
  1 thread each (``catalog.executors.open_executor("dask", workers=2)``), started once before
  any timing: its start-up is reported apart, as a long-lived cluster would pay it once.

Rounds interleave and their order rotates; the table shows each side's best round and the
median. The ratio is dask / local (above 1: Dask is faster). The first run of each side is
untimed and checked: both must produce the same records, byte for byte.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import harness as h
from catalog import Catalog, Dataset
from catalog.executors import open_executor

NAME = "small"
KINDS = ["add", "transform"]  # a byte-level migration (I/O and framing) and a row-level one (CPU)
WORKERS = 2


@dataclass
class Config:
    records: int
    shards: int
    repeats: int  # timed rounds per migration, each side once per round


FULL = Config(records=200_000, shards=16, repeats=5)
QUICK = Config(records=20_000, shards=8, repeats=3)


@dataclass
class Result(h.TwoSides):
    ours = "dask"

    kind: str
    records: int
    local: list[float] = field(default_factory=list)  # seconds per timed run
    dask: list[float] = field(default_factory=list)

    def rate(self, side: str, pick: Callable[[list[float]], float] = min) -> float:
        return self.records / pick(getattr(self, side))

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "local_rate": self.rate("local"),
            "dask_rate": self.rate("dask"),
            "ratio": self.ratio,
            "local_median_rate": self.rate("local", statistics.median),
            "dask_median_rate": self.rate("dask", statistics.median),
            "median_ratio": self.median_ratio,
        }


def build(tmp: Path, cfg: Config) -> Path:
    """The pristine catalog, never migrated itself."""
    pristine = tmp / "pristine"
    with Catalog.init(pristine) as cat:
        commit = cat.register(NAME, h.LABELED_SCHEMA).append_rows(
            h.labeled_rows(cfg.records), shard_records=math.ceil(cfg.records / cfg.shards)
        )
    h.check(commit.records == cfg.records and commit.shard_count == cfg.shards, "the dataset's shards")
    return pristine


def digest(ds: Dataset) -> str:
    """sha256 of every record of the migrated dataset, in order."""
    h.check(ds.schema_version == 2, f"schema version {ds.schema_version} after the migration, not 2")
    sha = hashlib.sha256()
    for record in ds.records():
        sha.update(len(record).to_bytes(8, "little") + record)
    return sha.hexdigest()


def side(
    name: str, fresh: h.FreshCatalog, migrations: Path, executor: Executor | None, outputs: dict[str, str]
) -> h.Contender:
    """One Dataset.migrate on a fresh copy (the copy and the open are untimed). The warm-up
    runs' records must be the same on both sides, byte for byte."""

    def run() -> object:
        if executor is None:
            return fresh.ds.migrate(migrations, workers=WORKERS)
        return fresh.ds.migrate(migrations, executor=executor)

    def finish(_out: object, first: bool) -> None:
        if first:
            assert fresh.cat is not None
            outputs[name] = digest(fresh.cat.dataset(NAME))
            h.check(
                len(set(outputs.values())) == 1,
                f"{migrations.name}: the dask run's records differ from the local run's",
            )
        fresh.discard()

    return h.Contender(run, fresh.prepare, finish)


def compare(kind: str, cfg: Config, pristine: Path, work: Path, migrations: Path, dask_ex: Executor) -> Result:
    outputs: dict[str, str] = {}
    contenders = {
        name: side(name, h.FreshCatalog(pristine, work, NAME), migrations, ex, outputs)
        for name, ex in (("local", None), ("dask", dask_ex))
    }
    t = h.race(contenders, cfg.repeats)
    h.check(len(outputs) == 2, f"{kind}: a side's warm-up run was not checked")
    result = Result(kind, cfg.records, t["local"].times, t["dask"].times)
    h.log(f"  {kind}: local best {min(result.local):.2f} s, dask best {min(result.dask):.2f} s")
    return result


def table(results: list[Result]) -> str:
    lines = [
        "| migration | records | local pool (2 workers) | Dask LocalCluster (2 workers) | dask/local | median |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r.kind} | {r.records:,} | {r.rate('local') / 1e3:.1f} k rec/s | {r.rate('dask') / 1e3:.1f} k rec/s "
            f"| {r.ratio:.2f}x | {r.median_ratio:.2f}x |"
        )
    return "\n".join(lines)


def run_all(cfg: Config) -> tuple[list[Result], float]:
    """Both migrations, on a LocalCluster started once; returns the results and its start-up seconds."""
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="bench_dask_", dir="/tmp") as d, contextlib.ExitStack() as stack:
        tmp = Path(d)
        work = tmp / "runs"
        work.mkdir()
        h.log("building the dataset ...")
        pristine = build(tmp, cfg)
        migrations = h.write_migrations(tmp, NAME, KINDS)
        t0 = time.perf_counter()
        dask_ex = stack.enter_context(open_executor("dask", workers=WORKERS))
        h.check(dask_ex is not None, "open_executor('dask') gave no executor")
        assert dask_ex is not None
        cluster_start = time.perf_counter() - t0
        h.log(f"LocalCluster of {WORKERS} workers started in {cluster_start:.1f} s")
        for kind in KINDS:
            h.log(f"[{kind}] ...")
            results.append(compare(kind, cfg, pristine, work, migrations[kind], dask_ex))
    return results, cluster_start


def main(argv: list[str] | None = None) -> int:
    args, cfg = h.options(argv, QUICK, FULL, __doc__, "smaller workload and fewer rounds",
                          "timed rounds per migration (default 5, quick 3)")  # fmt: skip
    started = time.perf_counter()
    info = h.start_report(
        "TFRecord Catalog: migration throughput, Dask LocalCluster vs local process pool",
        dict(dask=h.dist_version("dask"), distributed=h.dist_version("distributed")),
        f"mode: {'quick' if args.quick else 'full'}: {cfg.records:,} records in {cfg.shards} shards; "
        f"{cfg.repeats} interleaved timed rounds after an untimed, checked warm-up; best round shown",
    )
    results, cluster_start = run_all(cfg)
    elapsed = time.perf_counter() - started
    print(f"- LocalCluster start-up (once, untimed above): {cluster_start:.2f} s\n")
    print(table(results))
    print(
        "\nrec/s = records / best round's seconds (Dataset.migrate: read, rewrite, fsync, commit). "
        f"Total time {elapsed:.0f} s."
    )
    if args.json:
        extra = {"workers": WORKERS, "cluster_start_seconds": cluster_start, "elapsed_seconds": elapsed}
        h.write_report(args.json, info, args.quick, cfg, [r.to_json() for r in results], **extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
