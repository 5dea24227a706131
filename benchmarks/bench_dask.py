#!/usr/bin/env python
"""Migration throughput: the Dask executor on a LocalCluster against the local process pool.

Run from the repository root:

    .venv/bin/python benchmarks/bench_dask.py                 # 200,000 Examples in 16 shards (2-3 minutes)
    .venv/bin/python benchmarks/bench_dask.py --quick         # 20,000 Examples in 8 shards (about 30 s)
    .venv/bin/python benchmarks/bench_dask.py --json out.json

The data is bench_migrate.py's: small tf.train.Examples (id, label, score, vec[16]), the same
rows and the same migration scripts. Both sides call ``Dataset.migrate`` on a fresh copy of
one catalog (copied, synced and page-cached outside the timer) with two workers:

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
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench_migrate import NAME, SCHEMA_JSON, SCRIPTS, make_rows
from common import arg_parser, dist_version, machine_header, page_cache, write_report

KINDS = ("add", "transform")  # a byte-level migration (I/O and framing) and a row-level one (CPU)
WORKERS = 2


@dataclass
class Config:
    records: int
    shards: int
    repeats: int  # timed rounds per migration, each side once per round


FULL = Config(records=200_000, shards=16, repeats=5)
QUICK = Config(records=20_000, shards=8, repeats=3)


@dataclass
class Result:
    kind: str
    records: int
    local: list[float] = field(default_factory=list)  # seconds per timed run
    dask: list[float] = field(default_factory=list)

    def rate(self, side: str, pick: Callable[[list[float]], float] = min) -> float:
        return self.records / pick(getattr(self, side))

    @property
    def ratio(self) -> float:
        return self.rate("dask") / self.rate("local")

    @property
    def median_ratio(self) -> float:
        return self.rate("dask", statistics.median) / self.rate("local", statistics.median)

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


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"sanity check failed: {what}")


# --------------------------------------------------------------------------- data


def build(tmp: Path, cfg: Config) -> tuple[Path, dict[str, Path]]:
    """The pristine catalog (never migrated itself) and one migrations folder per kind."""
    from catalog import Catalog

    pristine = tmp / "pristine"
    with Catalog.init(pristine) as cat:
        commit = cat.register(NAME, SCHEMA_JSON).append_rows(
            make_rows(cfg.records), shard_records=math.ceil(cfg.records / cfg.shards)
        )
    check(commit.records == cfg.records and commit.shard_count == cfg.shards, "the dataset's shards")
    folders = {}
    for kind in KINDS:
        folder = tmp / f"migrations-{kind}"
        (folder / NAME).mkdir(parents=True)
        (folder / NAME / f"0001_{kind}.py").write_text(SCRIPTS[kind].lstrip(), encoding="utf-8")
        folders[kind] = folder
    return pristine, folders


def fresh_copy(pristine: Path, work: Path) -> Path:
    root = Path(tempfile.mkdtemp(prefix="run-", dir=work))
    shutil.copytree(pristine, root, dirs_exist_ok=True)
    os.sync()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            page_cache(p)
    return root


def digest(root: Path) -> str:
    """sha256 of every record of the migrated dataset, in order."""
    from catalog import Catalog

    h = hashlib.sha256()
    with Catalog.open(root) as cat:
        ds = cat.dataset(NAME)
        check(ds.schema_version == 2, f"{root}: schema version {ds.schema_version} after the migration, not 2")
        for record in ds.records():
            h.update(len(record).to_bytes(8, "little") + record)
    return h.hexdigest()


# --------------------------------------------------------------------------- timing


def timed_migrate(pristine: Path, work: Path, migrations: Path, executor: Executor | None) -> tuple[float, Path]:
    """Seconds of one Dataset.migrate on a fresh copy (the copy and the open are untimed)."""
    from catalog import Catalog

    root = fresh_copy(pristine, work)
    with Catalog.open(root) as cat:
        ds = cat.dataset(NAME)
        t0 = time.perf_counter()
        if executor is None:
            ds.migrate(migrations, workers=WORKERS)
        else:
            ds.migrate(migrations, executor=executor)
        seconds = time.perf_counter() - t0
    return seconds, root


def race(kind: str, cfg: Config, pristine: Path, work: Path, migrations: Path, dask_ex: Executor) -> Result:
    sides: dict[str, Executor | None] = {"local": None, "dask": dask_ex}
    result = Result(kind, cfg.records)
    outputs = {}
    for side, ex in sides.items():  # warm-up: imports in the workers, the first pool; checked
        _seconds, root = timed_migrate(pristine, work, migrations, ex)
        outputs[side] = digest(root)
        shutil.rmtree(root)
    check(outputs["local"] == outputs["dask"], f"{kind}: the dask run's records differ from the local run's")
    names = list(sides)
    for rnd in range(cfg.repeats):
        shift = rnd % len(names)
        for side in names[shift:] + names[:shift]:
            seconds, root = timed_migrate(pristine, work, migrations, sides[side])
            getattr(result, side).append(seconds)
            shutil.rmtree(root)
    log(f"  {kind}: local best {min(result.local):.2f} s, dask best {min(result.dask):.2f} s")
    return result


# --------------------------------------------------------------------------- report


def machine() -> dict[str, Any]:
    return machine_header(dask=dist_version("dask"), distributed=dist_version("distributed"))


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


def main() -> int:
    parser = arg_parser(__doc__, "smaller workload and fewer rounds", "timed rounds per migration (default 5, quick 3)")
    args = parser.parse_args()
    cfg = QUICK if args.quick else FULL
    if args.repeats:
        cfg = Config(cfg.records, cfg.shards, args.repeats)
    info = machine()
    started = time.perf_counter()
    print("# TFRecord Catalog: migration throughput, Dask LocalCluster vs local process pool\n")
    print(f"- date: {info['date']}; machine: {info['nproc']} CPU(s), {info['cpu']} ({info['platform']})")
    print(f"- load average at start {' '.join(map(str, info['loadavg_at_start']))}; temp catalogs on {info['tmp_fs']}")
    print(f"- Python {info['python']}, dask {info['dask']}, distributed {info['distributed']}")
    print(
        f"- mode: {'quick' if args.quick else 'full'}: {cfg.records:,} records in {cfg.shards} shards; "
        f"{cfg.repeats} interleaved timed rounds after an untimed, checked warm-up; best round shown"
    )
    sys.stdout.flush()

    from catalog.executors import open_executor

    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="bench_dask_", dir="/tmp") as d, contextlib.ExitStack() as stack:
        tmp = Path(d)
        work = tmp / "runs"
        work.mkdir()
        log("building the dataset ...")
        pristine, migrations = build(tmp, cfg)
        t0 = time.perf_counter()
        dask_ex = stack.enter_context(open_executor("dask", workers=WORKERS))
        assert dask_ex is not None  # "dask" always opens one
        cluster_start = time.perf_counter() - t0
        log(f"LocalCluster of {WORKERS} workers started in {cluster_start:.1f} s")
        for kind in KINDS:
            log(f"[{kind}] ...")
            results.append(race(kind, cfg, pristine, work, migrations[kind], dask_ex))
    elapsed = time.perf_counter() - started
    print(f"- LocalCluster start-up (once, untimed above): {cluster_start:.2f} s\n")
    print(table(results))
    print(
        "\nrec/s = records / best round's seconds (Dataset.migrate: read, rewrite, fsync, commit). "
        f"Total time {elapsed:.0f} s."
    )
    if args.json:
        extra = {"workers": WORKERS, "cluster_start_seconds": cluster_start, "elapsed_seconds": elapsed}
        write_report(args.json, info, args.quick, cfg, [r.to_json() for r in results], **extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
