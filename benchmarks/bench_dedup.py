"""dedup --key over N rows with 10% duplicates (issue 32 §4), side by side with pandas'
``drop_duplicates`` of the same key, each side in a process of its own: time, the ratio, and
the peak RSS of each (the process's VmHWM; its largest child's ``ru_maxrss`` apart).

Every row carries a payload (1000 random bytes), so that the data (about 1 GiB in the full
run) is larger than the memory the catalog's dedup is then allowed: a last run of it in a
process whose RLIMIT_DATA (brk and every private writable mapping: the heap, NumPy's arrays,
Python's arenas; Linux >= 4.7 enforces it at each allocation) is set to that process's own
data size after its imports plus a margin (128 MiB full, 48 MiB quick), far below the data.
The child first checks the limit holds (a buffer of the data's size must fail with
MemoryError), then runs the dedup with the default settings (1 worker: in this process; the
statistics helper, a process of its own, inherits the same limit): it must finish, with the
same rows kept. pandas holds the whole frame in memory (key, id, x and the payloads: its peak
RSS is the data's size and more), and is timed on ``drop_duplicates`` alone (the frame built
beforehand); the catalog is timed on the whole dedup (read, hash, spill, rewrite of every
shard holding a duplicate, commit) and on a dry run (finding them only).

Full: 1M rows in 16 shards; --quick: 100k rows in 8 shards."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import (
    MIB,
    REPO,
    arg_parser,
    check,
    dist_version,
    log,
    machine_header,
    print_header,
    skip_shard_fsync,
    write_report,
)

SCHEMA = {
    "features": {
        "id": {"dtype": "int64"},
        "key": {"dtype": "int64"},
        "x": {"dtype": "float32"},
        "payload": {"dtype": "bytes"},
    }
}


@dataclass
class Config:
    rows: int
    shards: int
    duplicates: float  # the share of rows that repeat an earlier key
    payload: int  # bytes of each row's payload
    margin: int  # the bounded run's RLIMIT_DATA: its data size after the imports plus this
    repeats: int


QUICK = Config(rows=100_000, shards=8, duplicates=0.1, payload=1000, margin=48 * MIB, repeats=1)
FULL = Config(rows=1_000_000, shards=16, duplicates=0.1, payload=1000, margin=128 * MIB, repeats=2)


def keys_of(cfg: Config) -> np.ndarray:
    """``rows`` keys, of which ``duplicates`` repeat one of the others, in a random order."""
    rng = np.random.default_rng(7)
    unique = int(cfg.rows * (1 - cfg.duplicates))
    keys = np.concatenate([np.arange(unique), rng.integers(0, unique, cfg.rows - unique)])
    return rng.permutation(keys).astype(np.int64)


def make_data(cfg: Config, work: Path) -> int:
    """The catalog (untimed, shard fsyncs off) and the keys as .npy for pandas; the data's bytes."""
    from catalog import Catalog

    t0 = time.perf_counter()
    keys = keys_of(cfg)
    np.save(work / "key.npy", keys)
    rng = np.random.default_rng(11)
    with Catalog.init(work / "pristine") as cat:
        ds = cat.register("d", SCHEMA)
        encode = ds.schema.encode
        with ds.writer(message="benchmark data", shard_records=-(-cfg.rows // cfg.shards)) as w:
            skip_shard_fsync(w)
            for i, k in enumerate(keys.tolist()):
                w.write_record(encode({"id": i, "key": k, "x": float(i), "payload": rng.bytes(cfg.payload)}))
        check(w.commit is not None and w.commit.shard_count == cfg.shards, "the dataset's shards")
        size = int(cat.dataset("d").info().bytes)
    log(f"built {cfg.rows:,} rows in {cfg.shards} shards, {size / MIB:,.0f} MiB, in {time.perf_counter() - t0:.0f} s")
    return size


# Each side: a script run as its own process, printing one JSON line of what it measured.
PRELUDE = """
import json, resource, sys, time
def status(field):  # a /proc/self/status figure, in bytes
    return next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith(field + ":"))
def hwm(pid):  # a process's peak resident set, in bytes (0: gone)
    try:
        return next(int(l.split()[1]) * 1024 for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return 0
def rss():  # peak resident set (MiB) of this process, and of its largest child process
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork and exec, so a child's would
    # start at the RSS of the benchmark's own process (the data's builder). Children: those
    # ended (a pool's workers) and those still running (the statistics helper).
    import os
    ended = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    live = [int(p) for t in os.listdir("/proc/self/task") for p in open(f"/proc/self/task/{t}/children").read().split()]
    return hwm("self") / 2**20, max([ended, *map(hwm, live)]) / 2**20
"""
PANDAS = """
import numpy as np, pandas as pd
keys = np.load(sys.argv[1])
n, size = len(keys), int(sys.argv[2])
rng = np.random.default_rng(11)
frame = pd.DataFrame({"id": np.arange(n), "key": keys, "x": np.arange(n, dtype=np.float32),
                      "payload": [rng.bytes(size) for _ in range(n)]})
held = int(frame.memory_usage(deep=True).sum())
t0 = time.perf_counter()
kept = frame.drop_duplicates(subset="key", keep="first")
seconds = time.perf_counter() - t0
own, kids = rss()
print(json.dumps({"seconds": seconds, "kept": len(kept), "rss_mib": own, "children_mib": kids, "held": held}))
"""
CATALOG = """
import resource
from catalog import Catalog
root, workers, margin, data, dry = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ds = Catalog.open(root).dataset("d")
base, enforced, cap, before = status("VmData"), None, 0, rss()[0]
if margin:
    cap = base + margin
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))
    try:
        bytearray(data)  # the data's size must not fit under the limit
        enforced = False
    except MemoryError:
        enforced = True
t0 = time.perf_counter()
report = ds.dedup("key", workers=workers, dry_run=dry == "dry")
seconds = time.perf_counter() - t0
own, kids = rss()
print(json.dumps({"seconds": seconds, "kept": report.records_after, "rss_mib": own, "children_mib": kids,
                  "rss_before_mib": before, "data_before": base, "limit": cap, "enforced": enforced,
                  "shards": report.shards}))
"""


def run_side(script: str, *args: str) -> dict[str, Any]:
    # one malloc arena per process: fewer reserved mappings, the same for every side
    env = {**os.environ, "PYTHONPATH": str(REPO), "MALLOC_ARENA_MAX": "1"}
    argv = [sys.executable, "-c", textwrap.dedent(PRELUDE + script), *args]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    check(proc.returncode == 0, f"side failed ({proc.returncode}): {proc.stderr[-1500:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def catalog_side(work: Path, data: int, workers: int, margin: int = 0, dry: bool = False) -> dict[str, Any]:
    """One dedup of a fresh copy of the pristine catalog (a dedup commits: each run starts anew)."""
    fresh = work / "run"
    shutil.rmtree(fresh, ignore_errors=True)
    shutil.copytree(work / "pristine", fresh)
    out = run_side(CATALOG, str(fresh), str(workers), str(margin), str(data), "dry" if dry else "commit")
    check(not (fresh / ".spill").exists(), "dedup left its spill folder behind")
    return out


def best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return min(runs, key=lambda r: float(r["seconds"]))


def measure(cfg: Config, work: Path) -> dict[str, Any]:
    data = make_data(cfg, work)
    expected = len(np.unique(keys_of(cfg)))
    pandas, full, dry = [], [], []
    for r in range(cfg.repeats):  # interleaved
        log(f"round {r + 1} of {cfg.repeats}")
        pandas.append(run_side(PANDAS, str(work / "key.npy"), str(cfg.payload)))
        full.append(catalog_side(work, data, 2))
        dry.append(catalog_side(work, data, 2, dry=True))
    log("the bounded run")
    bounded = catalog_side(work, data, 1, cfg.margin)
    check(bounded["enforced"] is True, "a buffer of the data's size fit under the limit: it limits nothing")
    for side in (*pandas, *full, *dry, bounded):
        check(side["kept"] == expected, f"kept {side['kept']} rows, expected {expected}")
    found = {"data_bytes": data, "pandas": best(pandas), "catalog": best(full), "dry_run": best(dry)}
    return {**found, "bounded": bounded, "rounds": {"pandas": pandas, "catalog": full, "dry_run": dry}}


def table(m: dict[str, Any]) -> None:
    b = m["bounded"]
    own, margin = b["data_before"] / MIB, (b["limit"] - b["data_before"]) / MIB
    limit = f"RLIMIT_DATA {b['limit'] / MIB:.0f} MiB = its {own:.0f} MiB + {margin:.0f} MiB"
    sides = {
        f"pandas drop_duplicates (holds the frame: {m['pandas']['held'] / MIB:,.0f} MiB)": m["pandas"],
        "catalog dedup --key, 2 workers": m["catalog"],
        "catalog dedup --key --dry-run, 2 workers": m["dry_run"],
        f"catalog dedup --key, 1 worker, {limit}": b,
    }
    print(f"data: {m['data_bytes'] / MIB:,.0f} MiB of shards\n")
    print("| side | seconds | peak RSS | before the dedup | largest child's peak RSS |\n|---|---:|---:|---:|---:|")
    for label, r in sides.items():
        before = f"{r['rss_before_mib']:,.0f} MiB" if "rss_before_mib" in r else ""
        print(f"| {label} | {r['seconds']:.3f} | {r['rss_mib']:,.0f} MiB | {before} | {r['children_mib']:,.0f} MiB |")
    for name in ("catalog", "dry_run"):
        print(f"\ncatalog ({name}) / pandas time: {m[name]['seconds'] / m['pandas']['seconds']:,.0f}x", end="")
    print(
        "\n(pandas hashes one column of a frame already in memory; the catalog reads every record from "
        "disk, and without --dry-run rewrites the shards holding a duplicate and commits)"
    )


def main() -> None:
    parser = arg_parser(__doc__, "100k rows in 8 shards, one round, instead of 1M rows in 16, two rounds")
    args = parser.parse_args()
    cfg = QUICK if args.quick else FULL
    info = machine_header(numpy=dist_version("numpy"), pandas=dist_version("pandas"))
    print_header("dedup --key against pandas drop_duplicates", info, f"{cfg}")
    with tempfile.TemporaryDirectory() as tmp:
        m = measure(cfg, Path(tmp))
    table(m)
    if args.json:
        write_report(args.json, info, args.quick, cfg, [m])


if __name__ == "__main__":
    main()
