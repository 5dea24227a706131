"""dedup --key over N small rows with 10% duplicates (issue 32 §4), side by side with pandas'
``drop_duplicates`` of the same column, each side in a process of its own: time, the ratio,
and the peak RSS of each (``ru_maxrss`` of the process and its workers). Then the catalog's
dedup again with its memory limited below the data (RLIMIT_AS: the address space after the
imports plus half the dataset's bytes; PARTITION_ENTRIES set so a partition is 1/16 of the
rows): it must finish, with the same result, which shows its memory is bounded by a
partition and a shard, not by the dataset. pandas holds the whole column in memory by design.

Full: 1M rows in 16 shards; --quick: 100k rows."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import REPO, arg_parser, check, dist_version, log, machine_header, print_header, write_report

SCHEMA = {
    "features": {
        "id": {"dtype": "int64"},
        "key": {"dtype": "int64"},
        "x": {"dtype": "float32"},
        "name": {"dtype": "string"},
    }
}


@dataclass
class Config:
    rows: int
    shards: int
    duplicates: float  # the share of rows that repeat an earlier key
    repeats: int


QUICK = Config(rows=100_000, shards=8, duplicates=0.1, repeats=1)
FULL = Config(rows=1_000_000, shards=16, duplicates=0.1, repeats=3)


def keys_of(cfg: Config) -> np.ndarray:
    """``rows`` keys, of which ``duplicates`` repeat one of the others, in a random order."""
    rng = np.random.default_rng(7)
    unique = int(cfg.rows * (1 - cfg.duplicates))
    keys = np.concatenate([np.arange(unique), rng.integers(0, unique, cfg.rows - unique)])
    return rng.permutation(keys).astype(np.int64)


def make_data(cfg: Config, work: Path) -> int:
    """The catalog (one shard per append) and the same columns as .npy for pandas; the data's bytes."""
    from catalog import Catalog

    keys = keys_of(cfg)
    np.save(work / "key.npy", keys)
    cat = Catalog.init(work / "pristine")
    ds = cat.register("d", SCHEMA)
    for chunk in np.array_split(np.arange(cfg.rows), cfg.shards):
        ds.append_rows(
            {"id": chunk, "key": keys[chunk], "x": chunk.astype(np.float32), "name": [f"r{i}" for i in chunk]}
        )
    size = ds.info().bytes
    cat.close()
    return int(size)


# Each side: a script run as its own process, printing {"seconds", "kept", "rss_mib", "rss_start_mib"}.
PRELUDE = """
import json, resource, sys, time
def rss():  # peak resident set (MiB) of this process and of its worker processes
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024
"""
PANDAS = """
import numpy as np, pandas as pd
keys = np.load(sys.argv[1])
n = len(keys)
frame = pd.DataFrame({"id": np.arange(n), "key": keys, "x": np.arange(n, dtype=np.float32),
                      "name": [f"r{i}" for i in range(n)]})
start_rss = rss()
t0 = time.perf_counter()
kept = frame.drop_duplicates(subset="key", keep="first")
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "kept": len(kept), "rss_mib": rss(), "rss_start_mib": start_rss}))
"""
CATALOG = """
import os, resource
from catalog import Catalog
from catalog.ops import dedup as dd
root, limit, partition = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ds = Catalog.open(root).dataset("d")
if partition:
    dd.PARTITION_ENTRIES = partition
start_rss = rss()
if limit:  # the address space now, plus ``limit`` bytes: less than the data
    vm = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + limit, vm + limit))
t0 = time.perf_counter()
report = ds.dedup("key", workers=1 if limit else 2)  # (a pool forked under the limit could not start)
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "kept": report.records_after, "rss_mib": rss(), "rss_start_mib": start_rss}))
"""


def run_side(script: str, *args: str) -> dict[str, Any]:
    # one malloc arena: glibc reserves 64 MiB of address space per thread's arena, which RLIMIT_AS counts
    env = {**os.environ, "PYTHONPATH": str(REPO), "MALLOC_ARENA_MAX": "1"}
    argv = [sys.executable, "-c", textwrap.dedent(PRELUDE + script), *args]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800)
    check(proc.returncode == 0, f"side failed: {proc.stderr[-600:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def catalog_side(work: Path, limit: int = 0, partition: int = 0) -> dict[str, Any]:
    """One dedup of a fresh copy of the pristine catalog (a dedup commits: each run starts anew)."""
    fresh = work / "run"
    shutil.rmtree(fresh, ignore_errors=True)
    shutil.copytree(work / "pristine", fresh)
    return run_side(CATALOG, str(fresh), str(limit), str(partition))


def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return min(runs, key=lambda r: float(r["seconds"]))


def measure(cfg: Config, work: Path) -> dict[str, Any]:
    data = make_data(cfg, work)
    expected = len(np.unique(keys_of(cfg)))
    log(f"{cfg.rows:,} rows in {cfg.shards} shards, {data / 2**20:.1f} MiB; {expected:,} distinct keys")
    pandas, catalog = [], []
    for _ in range(cfg.repeats):  # interleaved
        pandas.append(run_side(PANDAS, str(work / "key.npy")))
        catalog.append(catalog_side(work))
    limit, partition = max(data // 2, 64 << 20), max(1, cfg.rows // 16)  # (a floor for the quick run's small data)
    bounded = catalog_side(work, limit, partition)
    for side in (*pandas, *catalog, bounded):
        check(side["kept"] == expected, f"kept {side['kept']} rows, expected {expected}")
    return {"data_bytes": data, "pandas": best(pandas), "catalog": best(catalog), "bounded": bounded,
            "limit_bytes": limit, "partition_entries": partition}  # fmt: skip


def table(cfg: Config, m: dict[str, Any]) -> None:
    limited = f"1 worker, RLIMIT_AS +{m['limit_bytes'] / 2**20:.0f} MiB, {m['partition_entries']:,}-entry partitions"
    sides = {
        "pandas drop_duplicates (in memory)": m["pandas"],
        "catalog dedup --key (2 workers)": m["catalog"],
        f"catalog dedup --key ({limited})": m["bounded"],
    }
    print("| side | seconds | peak RSS | RSS before the work |\n|---|---:|---:|---:|")
    for label, r in sides.items():
        print(f"| {label} | {r['seconds']:.3f} | {r['rss_mib']:.0f} MiB | {r['rss_start_mib']:.0f} MiB |")
    ratio = m["catalog"]["seconds"] / m["pandas"]["seconds"]
    print(
        f"\ncatalog / pandas time: {ratio:.1f}x (pandas only sorts a column already in memory; the catalog "
        f"reads {m['data_bytes'] / 2**20:.1f} MiB of records, rewrites the shards holding a duplicate and commits)"
    )


def main() -> None:
    parser = arg_parser(__doc__, "100k rows in 8 shards, one round instead of 1M rows, 3 rounds")
    args = parser.parse_args()
    cfg = QUICK if args.quick else FULL
    info = machine_header(numpy=dist_version("numpy"), pandas=dist_version("pandas"))
    print_header("dedup --key against pandas drop_duplicates", info, f"{cfg}")
    with tempfile.TemporaryDirectory() as tmp:
        m = measure(cfg, Path(tmp))
    table(cfg, m)
    if args.json:
        write_report(args.json, info, args.quick, cfg, [m])


if __name__ == "__main__":
    main()
