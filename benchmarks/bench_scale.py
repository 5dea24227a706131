"""Scale benchmarks with the manifest in PostgreSQL: 8 "machines" appending to one dataset at
once (beside the same workload on the SQLite default), and a 1,000,000-shard manifest (list,
show --no-shards, planning a read, `show --json` streamed, append latency vs a 100-shard dataset);
c: the manifest at scale on both backends, a catalog of a 100,000-shard, 10^9-record dataset and
10,000 datasets (manifest rows made in bulk, files hard links to one real shard) against one of
100 shards and 100 datasets: commit latency, show, list, history --limit 20, planning a split, gc --dry-run.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_scale                   # full run: 1,000,000 shards
    .venv/bin/python -m benchmarks.bench_scale --quick           # 100,000 shards, fewer commits
    .venv/bin/python -m benchmarks.bench_scale --db-url postgresql+psycopg://postgres@127.0.0.1:5432/empty
    .venv/bin/python -m benchmarks.bench_scale --workdir /big/disk --json results.json
    .venv/bin/python -m benchmarks.bench_scale --only c          # the manifest at scale (100k vs 100 shards)

Without --db-url, a throwaway PostgreSQL cluster is started by the harness (the machine's own
initdb/pg_ctl), with fsync and synchronous_commit on so that PostgreSQL commits are as
durable as the SQLite side's (--pg-fast runs it as the test suite does, with fsync=off).
Everything (catalog directories, the 1M shard files, the cluster) lives under --workdir (and
the cluster's own temporary directory) and is removed at the end. Progress lines go to stderr;
the report (a markdown table) goes to stdout. Missed targets are profiled (cProfile) under the table.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa

import catalog
from benchmarks import harness as h
from benchmarks import synthetic_manifest as sm
from catalog import Catalog, Dataset
from catalog import manifest as mf

# Server settings for the throwaway cluster unless --pg-fast: a durable commit, like SQLite's FULL.
DURABLE_PG = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
MANIFEST_TABLE = "catalog_meta"  # the manifest format's own table: a database holding it holds a catalog
# Room a one-record shard takes on disk (a 4 KiB block, the inode and directory entry), for the disk check.
BYTES_PER_SHARD_ON_DISK = 4600
RSS_SLACK_MIB = 64  # "memory flat": show --json at N shards may peak this much above the 100-shard show


@dataclass
class Config:
    procs: int  # a: concurrent appending processes ("machines")
    proc_commits: int  # a: one-row commits per process
    rounds: int  # a: rounds, each running the SQLite side and the PostgreSQL side (order alternating)
    shards: int  # b: one-record shards in the big dataset
    shards_per_commit: int  # b: bulk-build commit size
    small_shards: int  # b: the comparison dataset
    query_repeats: int  # b: timed library calls per query (after a cold first call)
    subprocess_repeats: int  # b: timed CLI runs per command (after a warm-up round)
    ab_commits: int  # b: one-row appends per side, big vs small
    c_shards: int  # c: shards of the big catalog's dataset (the small one's: C_SMALL_SHARDS)
    c_datasets: int  # c: datasets in the big catalog (the small one's: C_SMALL_DATASETS)
    c_rounds: int  # c: interleaved rounds per read (small, big; order alternating)
    c_commits: int  # c: one-row appends per side


FULL = Config(
    procs=8,
    proc_commits=50,
    rounds=3,
    shards=1_000_000,
    shards_per_commit=20_000,
    small_shards=100,
    query_repeats=5,
    subprocess_repeats=3,
    ab_commits=60,
    c_shards=100_000,
    c_datasets=10_000,
    c_rounds=7,
    c_commits=30,
)
# Smaller, for checking that the script works: only what differs from FULL.
QUICK = replace(
    FULL, proc_commits=25, rounds=1, shards=100_000, query_repeats=3, subprocess_repeats=2, ab_commits=20,
    c_shards=10_000, c_datasets=1_000, c_rounds=3, c_commits=10,
)  # fmt: skip
C_SMALL_SHARDS, C_SMALL_DATASETS = 100, 100  # c: what the big catalog is measured against
C_RECORDS = 10**9  # c: records in the big dataset (manifest rows only: its files hold one record each)
C_COMMITS = 1000  # c: commits that made the big dataset (the small one: 25, as many shards each as fit)
C_TARGET = 2.0  # c: commit latency and `show`, big / small


# --------------------------------------------------------------------------- the PostgreSQL server


@dataclass
class Server:
    url: str  # the manifest database
    stop: Callable[[], None]  # drop what we made: the cluster, or the manifest tables in a given database
    where: str  # for the header
    admin: str | None = None  # a throwaway cluster's maintenance database: section c makes databases there


def query(url: str, fn: Callable[[sa.Connection], Any]) -> Any:
    """``fn`` on a connection to ``url``, with an engine of its own, disposed afterwards."""
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return fn(conn)
    finally:
        engine.dispose()


def table_names(conn: sa.Connection) -> set[str]:
    return set(sa.inspect(conn).get_table_names())


def given_database(db_url: str) -> Server:
    """An empty database of the user's; at the end, the tables the run made are dropped."""
    url = sa.make_url(db_url)
    if url.drivername in ("postgresql", "postgres"):  # psycopg 3, as the catalog reads such a URL
        url = url.set(drivername="postgresql+psycopg")
    text, safe = url.render_as_string(hide_password=False), url.render_as_string(hide_password=True)
    before = query(text, table_names)
    if MANIFEST_TABLE in before:
        raise SystemExit(f"{safe} already holds a catalog manifest: give an empty database")

    def drop_made() -> None:
        def drop(conn: sa.Connection) -> None:
            made = sa.MetaData()
            made.reflect(conn, only=lambda name, _meta: name not in before)
            made.drop_all(conn)
            conn.commit()

        query(text, drop)

    return Server(text, drop_made, f"given database {safe} (its manifest tables dropped at the end)")


def throwaway_cluster(fast: bool) -> Server:
    settings = h.PG_SETTINGS if fast else {**h.PG_SETTINGS, **DURABLE_PG}
    pg = h.start_postgres(settings)
    try:
        engine = sa.create_engine(pg.url(), isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            conn.exec_driver_sql("CREATE DATABASE scale")
        engine.dispose()
    except BaseException:
        pg.stop()
        raise
    shown = ", ".join(f"{k}={v}" for k, v in settings.items() if k != "listen_addresses")
    return Server(pg.url("scale"), pg.stop, f"throwaway cluster on 127.0.0.1:{pg.port} ({shown})", pg.url())


def server_facts(conn: sa.Connection) -> dict[str, str]:
    facts = {"server_version": str(conn.exec_driver_sql("SHOW server_version").scalar())}
    for name in ("fsync", "synchronous_commit", "shared_buffers", "max_connections"):
        facts[name] = str(conn.exec_driver_sql(f"SHOW {name}").scalar())
    return facts


def database_size(conn: sa.Connection) -> dict[str, int]:
    return {
        "database": int(conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar() or 0),
        "shards_table": int(conn.exec_driver_sql("SELECT pg_total_relation_size('shards')").scalar() or 0),
    }


def shards_table_analyzed(conn: sa.Connection) -> str:
    """Whether autovacuum has analyzed the shards table yet (the plans of the timed queries depend on it)."""
    row = conn.exec_driver_sql(
        "SELECT last_analyze, last_autoanalyze, n_live_tup FROM pg_stat_user_tables WHERE relname = 'shards'"
    ).first()
    if row is None:
        return "no statistics row"
    analyzed = row[0] or row[1]
    return f"last analyzed {analyzed:%H:%M:%S}" if analyzed else "not analyzed yet"


# --------------------------------------------------------------------------- a. concurrent appends


def append_worker(start: Callable[[], None], root: str, name: str, wid: int, commits: int) -> dict[str, Any]:
    """One "machine": open its catalog directory, wait for the others, commit ``commits`` one-row appends,
    each with its own idempotency token; then retry its first token, which must change nothing."""
    rows = h.text_rows(commits, seed=wid + 1, start=wid * commits)
    with h.opened(Path(root)) as cat:
        ds = cat.dataset(name)
        ds.info()  # a pooled connection before the start line
        start()
        began = time.perf_counter()
        lat = []
        for i, row in enumerate(rows):
            t0 = time.perf_counter()
            ds.append_rows([row], token=f"w{wid}-{i}", message=f"w{wid}-{i}")
            lat.append(time.perf_counter() - t0)
        end = time.perf_counter()
        again = ds.append_rows([rows[0]], token=f"w{wid}-0", message="retry")  # after the clock: not timed
    return {"start": began, "end": end, "lat": lat, "duplicate": again.duplicate}


@dataclass
class Run:
    wall: float  # first process's start to last process's end (CLOCK_MONOTONIC, shared by the processes)
    latencies: list[float]
    retries_ok: bool  # every retried token came back as a duplicate


def run_appenders(roots: list[Path], name: str, commits: int) -> Run:
    jobs = [{"root": str(root), "name": name, "wid": w, "commits": commits} for w, root in enumerate(roots)]
    _, results = h.run_workers("benchmarks.bench_scale:append_worker", jobs)
    return Run(
        max(r["end"] for r in results) - min(r["start"] for r in results),
        [t for r in results for t in r["lat"]],
        all(r["duplicate"] for r in results),
    )


def same_row(row: dict[str, Any], want: dict[str, Any] | None) -> bool:
    return (
        want is not None
        and row["text"] == want["text"]
        and np.float32(row["score"]) == np.float32(want["score"])
        and np.array_equal(np.asarray(row["vec"], np.float32), np.asarray(want["vec"], np.float32))
    )


def check_exact(cat: Catalog, name: str, procs: int, commits: int) -> tuple[bool, str]:
    """Every commit present exactly once (by token), versions gapless, records exact, verify ok."""
    ds = cat.dataset(name)
    hist = ds.history()
    total = procs * commits
    tokens = Counter(c.token for c in hist if c.kind == "append")
    expected = {f"w{w}-{i}" for w in range(procs) for i in range(commits)}
    want = {r["id"]: r for w in range(procs) for r in h.text_rows(commits, seed=w + 1, start=w * commits)}
    got = list(ds.read())
    ids = Counter(int(r["id"]) for r in got)
    info = ds.info()
    vr = cat.verify([name])
    checks = {
        "tokens once each": set(tokens) == expected and all(n == 1 for n in tokens.values()),
        "versions gapless": [c.version for c in hist] == list(range(1, total + 2)),
        "records exact": len(got) == total
        and set(ids) == set(want)
        and all(same_row(r, want.get(int(r["id"]))) for r in got),
        "totals": info.records == total and info.shard_count == total and info.version == total + 1,
        "verify": vr.ok and vr.checked == total,
    }
    return h.verdict(checks)


@dataclass
class Rounds:
    runs: dict[str, list[Run]]
    verdicts: dict[str, list[str]]
    all_ok: bool = True


def concurrent_rounds(cfg: Config, url: str, work: Path) -> Rounds:
    # PostgreSQL: one attached catalog directory per process, as separate machines would have.
    pg_roots = [work / f"machine-{w}" for w in range(cfg.procs)]
    for root in pg_roots:
        Catalog.init(root, url).close()
    # SQLite: the embedded default, one directory (the manifest is a file in it) shared by the processes.
    lite_root = work / "sqlite-catalog"
    Catalog.init(lite_root).close()
    sides = {"PostgreSQL": pg_roots, "SQLite": [lite_root] * cfg.procs}
    out = Rounds({k: [] for k in sides}, {k: [] for k in sides})
    for rnd in range(cfg.rounds):
        for side in h.rotation(list(sides), rnd):
            roots, name = sides[side], f"appends-{rnd}"
            with h.opened(roots[0]) as cat:
                cat.register(name, h.TEXT_SCHEMA)
            run = run_appenders(roots, name, cfg.proc_commits)
            with h.opened(roots[0]) as cat:
                ok, detail = check_exact(cat, name, cfg.procs, cfg.proc_commits)
            out.all_ok = out.all_ok and ok and run.retries_ok
            out.runs[side].append(run)
            out.verdicts[side].append(detail if run.retries_ok else detail + "; a retried token was NOT a duplicate")
            h.log(f"  round {rnd} {side}: {cfg.procs * cfg.proc_commits / run.wall:,.0f} commits/s, {detail}")
    return out


def bench_concurrent(cfg: Config, url: str, work: Path, report: h.Report) -> None:
    r = concurrent_rounds(cfg, url, work)
    total = cfg.procs * cfg.proc_commits
    rates: dict[str, float] = {}
    for side, side_runs in r.runs.items():
        per_round = [total / run.wall for run in side_runs]
        rates[side] = statistics.median(per_round)
        lat = [t for run in side_runs for t in run.latencies]
        how = f"{cfg.procs} attached catalog directories" if side == "PostgreSQL" else "one catalog directory"
        report.add(
            h.Result(
                "a",
                f"{side}: {cfg.procs} processes x {cfg.proc_commits} durable one-row appends (token each) "
                f"to one dataset, {how}",
                f"{rates[side]:,.0f} commits/s",
                note=f"median of {len(per_round)} round(s) ({', '.join(f'{x:,.0f}' for x in per_round)}); commit "
                f"latency p50 {h.ms(statistics.median(lat))}, p99 {h.ms(float(np.percentile(lat, 99)))}, max "
                f"{h.ms(max(lat))}; started behind a common start line",
                data={"rates": per_round, "latencies": lat, "walls": [run.wall for run in side_runs]},
            )
        )
    report.add(
        h.Result(
            "a",
            "PostgreSQL / SQLite commits/s, same workload, same run",
            f"{rates['PostgreSQL'] / rates['SQLite']:.2f}x",
            note=f"rounds alternate which side goes first; {h.usable_cpus()} CPUs shared by {cfg.procs} writers "
            "(and by the PostgreSQL server on that side)",
            data={"ratio": rates["PostgreSQL"] / rates["SQLite"]},
        )
    )
    report.add(
        h.Result(
            "a",
            f"all {total:,} commits present exactly once, each round, both sides",
            "yes" if r.all_ok else "no",
            "all present",
            r.all_ok,
            "history tokens (each once), versions 1..N+1 gapless, ds.read() rows equal to those sent, totals, "
            f"Catalog.verify; every worker's retried token returned the earlier commit. PostgreSQL: "
            f"{r.verdicts['PostgreSQL'][-1]}",
            data={"verdicts": r.verdicts},
        )
    )


# --------------------------------------------------------------------------- b. a 1M-shard manifest


# The CLI as its console script runs it, plus one line on stderr at exit: the process's peak RSS (VmHWM of
# /proc/self/status). The child's ru_maxrss from wait4 or getrusage(RUSAGE_CHILDREN) cannot be used: Linux
# carries the parent's high-water mark over fork/vfork and exec, so every child would "peak" at this
# process's own RSS.
_PEAK_AT_EXIT = (
    "import atexit, sys\n"
    "def _peak():\n"
    "    with open('/proc/self/status') as f:\n"
    "        sys.stderr.write(next(line for line in f if line.startswith('VmHWM:')))\n"
    "atexit.register(_peak)\n"
)
CLI = _PEAK_AT_EXIT + "from catalog.cli import main\nsys.argv[0] = 'catalog'\nsys.exit(main())\n"
FLOOR = _PEAK_AT_EXIT + "import catalog, catalog.cli\n"


@dataclass
class Child:
    seconds: float
    first_line: float | None  # seconds to the first chunk holding the marker
    peak_rss_mib: float  # VmHWM at exit
    out_bytes: int


def run_child(argv: list[str], out_path: Path, marker: bytes = b'"path":') -> Child:
    """Run a command, copying its stdout to ``out_path`` as it arrives; time to the first ``marker``."""
    err_path = out_path.with_suffix(".err")
    first: float | None = None
    n = 0
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err)
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        tail = b""
        while chunk := os.read(fd, 1 << 20):
            if first is None and marker in tail + chunk:
                first = time.perf_counter() - t0
            tail = chunk[-len(marker) :]
            out.write(chunk)
            n += len(chunk)
        proc.wait()
        seconds = time.perf_counter() - t0
        proc.stdout.close()
    errors = err_path.read_text()
    h.check(proc.returncode == 0, f"{' '.join(argv[-3:])} exited {proc.returncode}: {errors[-500:]}")
    peaks = [line.split()[1] for line in errors.splitlines() if line.startswith("VmHWM:")]
    h.check(len(peaks) == 1, f"{' '.join(argv[-3:])}: no peak RSS line on stderr: {errors[-500:]}")
    return Child(seconds, first, int(peaks[0]) / 1024, n)


def build_big(cfg: Config, url: str, root: Path, work: Path, report: h.Report) -> None:
    """``big`` with ``cfg.shards`` one-record shards, ``small`` with ``cfg.small_shards``."""
    n = cfg.shards
    with Catalog.init(root, url) as cat:  # attaches (section a made the manifest) or creates it
        big, small = cat.register("big", h.TEXT_SCHEMA), cat.register("small", h.TEXT_SCHEMA)
        record = big.schema.encode(h.text_rows(1)[0])
        disk_before = shutil.disk_usage(work).used
        t0 = time.perf_counter()
        done = commits = 0
        while done < n:
            k = min(max(cfg.shards_per_commit, n // 10), n - done)
            commits += h.bulk_shards(big, record, k, cfg.shards_per_commit)
            done += k
            el = time.perf_counter() - t0
            h.log(f"  ... {done:,} shards in {el:.0f} s ({done / el:,.0f}/s)")
        build = time.perf_counter() - t0
        h.bulk_shards(small, record, cfg.small_shards, cfg.small_shards)
        disk_used = shutil.disk_usage(work).used - disk_before
    size, analyzed = query(url, database_size), query(url, shards_table_analyzed)
    report.add(
        h.Result(
            "b",
            f"setup: {n:,} one-record shards through Writer (shard_records=1), {cfg.shards_per_commit:,} per commit",
            f"{build:.0f} s",
            note=f"{commits} commits, {build / n * 1e6:.0f} µs/shard, shard-file fsync off (setup only); manifest "
            f"pg_database_size {size['database'] / h.MIB:,.0f} MiB (shards table + indexes "
            f"{size['shards_table'] / h.MIB:,.0f} MiB); data area {disk_used / 2**30:.1f} GiB on disk; shards table "
            f"{analyzed} when the timings started",
            data={"seconds": build, "commits": commits, "db_bytes": size, "disk_bytes": disk_used},
        )
    )


def bench_library(cfg: Config, root: Path, report: h.Report) -> tuple[str, str]:
    """Library calls with fresh handles, as a new process has them: the first call, then the
    median. Returns the first and last shard paths (for the check of `show --json`'s order)."""
    n = cfg.shards
    with h.opened(root) as cat:
        ds = cat.dataset("big")
        cases: list[tuple[str, Callable[[], object]]] = [
            ("`list`: Catalog.list()", cat.list),
            ("`show --no-shards`: Dataset.info()", ds.info),
            ("planning a read: Dataset.files()", ds.files),
        ]
        outputs: dict[str, Any] = {}
        for label, fn in cases:
            t0 = time.perf_counter()
            fn()
            cold = time.perf_counter() - t0
            times, outputs[label] = h.timed(fn, cfg.query_repeats, warmup=0)
            med = statistics.median(times)
            report.add(
                h.Result(
                    "b",
                    f"{label} at {n:,} shards (library)",
                    h.ms(med),
                    "< 1 s",
                    med < 1.0,
                    f"median of {len(times)}, max {h.ms(max(times))}; first call on the fresh handle {h.ms(cold)}",
                    {"times": times, "cold": cold},
                ),
                profile=profile_library(root, label),
                what=f"one call of {label} on a fresh handle",
            )
    files: list[str] = outputs["planning a read: Dataset.files()"]
    h.check(len(files) == n and os.path.isfile(files[0]) and os.path.isfile(files[-1]), "files() lists every shard")
    infos = outputs["`list`: Catalog.list()"]
    h.check(any(i.name == "big" and i.shard_count == n for i in infos), "list() shows the big dataset")
    return files[0], files[-1]


def cli_children(cfg: Config, root: Path, work: Path, ends: tuple[str, str]) -> dict[str, list[Child]]:
    """The CLI as new processes, a bare start-up floor interleaved with the commands, round by
    round after a warm-up round (whose `show big --json` output is checked in full)."""
    base = [sys.executable, "-c", CLI, "--catalog", str(root)]
    commands: list[tuple[str, list[str]]] = [
        ("floor", [sys.executable, "-c", FLOOR]),
        ("list", [*base, "list"]),
        ("show big --no-shards", [*base, "show", "big", "--no-shards"]),
        ("show small --json", [*base, "show", "small", "--json"]),
        ("show big --json", [*base, "show", "big", "--json"]),
    ]
    children: dict[str, list[Child]] = {label: [] for label, _ in commands}
    for rnd in range(cfg.subprocess_repeats + 1):  # round 0 is a warm-up
        for label, argv in commands:
            out_path = work / f"cli-{label.replace(' ', '_')}.out"
            child = run_child(argv, out_path)
            if rnd == 0 and label == "show big --json":
                h.log(f"  checking the {child.out_bytes / h.MIB:,.0f} MiB of `show big --json` ...")
                with open(out_path, "rb") as f:
                    doc = json.load(f)
                shards = doc["shards"]
                h.check(len(shards) == cfg.shards and doc["shard_count"] == cfg.shards, "show --json lists every shard")
                h.check((shards[0]["path"], shards[-1]["path"]) == ends, "show --json order")
                del doc, shards
            if rnd:
                children[label].append(child)
            out_path.unlink()
        h.log(f"  CLI round {rnd}: " + ", ".join(f"{k} {h.ms(v[-1].seconds)}" for k, v in children.items() if v))
    return children


def report_cli(cfg: Config, root: Path, children: dict[str, list[Child]], report: h.Report) -> None:
    n, floor = cfg.shards, statistics.median(c.seconds for c in children["floor"])
    for label in ("list", "show big --no-shards"):
        med = statistics.median(c.seconds for c in children[label])
        report.add(
            h.Result(
                "b",
                f"`catalog {label}` at {n:,} shards (subprocess)",
                f"{h.ms(med)}; net of start-up {h.ms(med - floor)}",
                "< 1 s net",
                med - floor < 1.0,
                f"median of {len(children[label])} after a warm-up run; start Python + import catalog and "
                f"catalog.cli alone: {h.ms(floor)} (same rounds)",
                {"times": [c.seconds for c in children[label]], "floor": floor},
            ),
            profile=h.cli_in_process(root, *label.split()),
            what=f"`catalog {label}` in-process through typer's CliRunner (fresh Catalog.open included)",
        )
    report_show_json(cfg, root, children, floor, report)


def report_show_json(cfg: Config, root: Path, children: dict[str, list[Child]], floor: float, report: h.Report) -> None:
    n, big_json, small_json = cfg.shards, children["show big --json"], children["show small --json"]
    first = statistics.median(c.first_line if c.first_line is not None else c.seconds for c in big_json)
    total_s = statistics.median(c.seconds for c in big_json)
    rss, rss_small = max(c.peak_rss_mib for c in big_json), max(c.peak_rss_mib for c in small_json)
    floor_rss = statistics.median(c.peak_rss_mib for c in children["floor"])
    profile = h.cli_in_process(root, "show", "big", "--json")
    report.add(
        h.Result(
            "b",
            f"`catalog show big --json` at {n:,} shards (subprocess): time to the first shard line",
            f"{h.ms(first)}; net of start-up {h.ms(first - floor)}",
            "< 1 s net (streamed)",
            first - floor < 1.0,
            f"median of {len(big_json)}; whole output {h.ms(total_s)} ({big_json[-1].out_bytes / h.MIB:,.0f} MiB, "
            f"{n / total_s:,.0f} shards/s)",
            {"first_line": [c.first_line for c in big_json], "total": [c.seconds for c in big_json]},
        ),
        profile=profile,
        what="`catalog show big --json` in-process through typer's CliRunner",
    )
    report.add(
        h.Result(
            "b",
            f"`catalog show big --json` at {n:,} shards: peak RSS of the child",
            f"{rss:,.0f} MiB",
            f"<= 100-shard show + {RSS_SLACK_MIB} MiB",
            rss <= rss_small + RSS_SLACK_MIB,
            f"`show small --json` (100 shards) peaks at {rss_small:,.0f} MiB, the bare import at {floor_rss:,.0f} MiB: "
            f"{(rss - rss_small) * h.MIB / n:,.0f} bytes per shard held at once",
            {"rss_mib": [c.peak_rss_mib for c in big_json], "rss_small_mib": [c.peak_rss_mib for c in small_json]},
        ),
        profile=profile,
        what="`catalog show big --json` in-process through typer's CliRunner (where the time and objects go)",
    )


def big_vs_small(cfg: Config, big: Dataset, small: Dataset) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """One-row durable commits into the big dataset and the 100-shard one, interleaved: (latencies, CPU times)."""
    rows = h.text_rows(2 * cfg.ab_commits + 2, seed=99)
    big.append_rows([rows[-1]])  # warm-up, both sides
    small.append_rows([rows[-2]])
    sides = {"big": big, "small": small}
    runs = {k: lambda i, ds=ds: ds.append_rows([rows[i]]) for k, ds in sides.items()}
    lat, cpu = h.alternate(runs, cfg.ab_commits)
    h.check(big.info().shard_count == cfg.shards + cfg.ab_commits + 1, "big dataset took every append")
    return lat, cpu


def bench_appends(cfg: Config, root: Path, report: h.Report) -> None:
    with h.opened(root) as cat:
        lat, cpu = big_vs_small(cfg, cat.dataset("big"), cat.dataset("small"))
    mb, msm = statistics.median(lat["big"]), statistics.median(lat["small"])
    cb, cs = statistics.median(cpu["big"]), statistics.median(cpu["small"])
    p90 = {k: h.ms(float(np.percentile(v, 90))) for k, v in lat.items()}
    report.add(
        h.Result(
            "b",
            f"durable one-row append into the {cfg.shards:,}-shard dataset vs a {cfg.small_shards}-shard one, "
            "same manifest",
            f"{h.ms(mb)} vs {h.ms(msm)} = {mb / msm:.2f}x",
            "<= 1.5x",
            mb / msm <= 1.5,
            f"medians of {cfg.ab_commits} appends each, alternating; p90 {p90['big']} vs {p90['small']}; CPU time "
            f"{h.ms(cb)} vs {h.ms(cs)}",
            {
                "big": lat["big"],
                "small": lat["small"],
                "ratio": mb / msm,
                "cpu_big": cpu["big"],
                "cpu_small": cpu["small"],
            },
        ),
        profile=profile_appends(root),
        what="30 durable one-row appends into the big dataset",
    )


def bench_big(cfg: Config, url: str, work: Path, report: h.Report) -> None:
    root = work / "machine-big"
    build_big(cfg, url, root, work, report)
    ends = bench_library(cfg, root, report)
    report_cli(cfg, root, cli_children(cfg, root, work, ends), report)
    bench_appends(cfg, root, report)


def profile_library(root: Path, label: str) -> Callable[[], object]:
    def run() -> object:
        with h.opened(root) as cat:
            if label.startswith("`list`"):
                return cat.list()
            ds = cat.dataset("big")
            return ds.info() if "info" in label else ds.files()

    return run


def profile_appends(root: Path) -> Callable[[], object]:
    def run() -> object:
        with h.opened(root) as cat:
            ds = cat.dataset("big")
            row = h.text_rows(1, seed=7)[0]
            return [ds.append_rows([row]) for _ in range(30)]

    return run


# --------------------------------------------------------------------------- c. the manifest at scale


@dataclass(frozen=True)
class Op:
    key: str
    label: str  # what is timed, for the table
    target: float | None  # the most big / small may be (None: reported only)
    make: Callable[[Path, Dataset], Callable[[int], object]]  # (root, the big dataset's handle) -> one run


def _cli(*args: str) -> Callable[[Path, Dataset], Callable[[int], object]]:
    def make(root: Path, _ds: Dataset) -> Callable[[int], object]:
        run = h.cli_in_process(root, *args)
        return lambda _k: run()

    return make


C_READS = [
    Op("show", "`catalog show big` (in process: open, info, the first 20 shards)", C_TARGET, _cli("show", "big")),
    Op(
        "info", "`Dataset.info()` (show's library call: totals, per split too)", None, lambda _r, d: lambda _k: d.info()
    ),
    Op("list", "`catalog list` (every dataset)", None, _cli("list")),
    Op("list20", "`catalog list --limit 20`", None, _cli("list", "--limit", "20")),
    Op("history", "`catalog history big --limit 20`", None, _cli("history", "big", "--limit", "20")),
    Op(
        "plan",
        f"planning a read of split `{sm.RARE_SPLIT}` (1% of the shards): `ds.records(split=...)`",
        None,
        lambda _r, ds: lambda _k: ds.records(split=sm.RARE_SPLIT),
    ),
    Op("gc", "`catalog gc --dry-run` (lists the data area)", None, _cli("gc", "--dry-run")),
]


def c_shapes(cfg: Config) -> dict[str, sm.Shape]:
    per_shard = C_RECORDS // cfg.c_shards
    return {
        "small": sm.Shape(C_SMALL_SHARDS, max(1, C_SMALL_SHARDS // 25), per_shard, C_SMALL_DATASETS - 1),
        "big": sm.Shape(cfg.c_shards, max(1, cfg.c_shards // C_COMMITS), per_shard, cfg.c_datasets - 1),
    }


def c_database(server: Server, name: str) -> str:
    """A new database ``name`` on the throwaway cluster; its URL."""
    assert server.admin is not None
    engine = sa.create_engine(server.admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    engine.dispose()
    return str(sa.make_url(server.admin).set(database=name).render_as_string(hide_password=False))


def check_c(root: Path, shape: sm.Shape) -> tuple[bool, str]:
    """The synthetic catalog read back through the catalog's own checks: list's totals against
    every dataset's commit, every commit of the big dataset against its shard rows (history),
    the per-split totals."""
    with h.opened(root) as cat:
        infos = {i.name: i for i in cat.list()}
        ds = cat.dataset("big")
        versions = [c.version for c in ds.history()]
        info = ds.info()
    splits = info.splits or {}
    return h.verdict(
        {
            "list": len(infos) == shape.others + 1 and infos["big"].shard_count == shape.shards,
            "history": versions == list(range(1, len(versions) + 1)),
            "records": info.records == 1 + (shape.shards - 1) * shape.records_per_shard,
            "splits": set(splits) == {mf.DEFAULT_SPLIT, sm.RARE_SPLIT}
            and sum(t["shards"] for t in splits.values()) == shape.shards,
        }
    )


def build_c(cfg: Config, backend: str, server: Server, work: Path, report: h.Report) -> dict[str, Path]:
    roots: dict[str, Path] = {}
    for side, shape in c_shapes(cfg).items():
        roots[side] = work / f"c-{backend}-{side}"
        url = None if backend == "SQLite" else c_database(server, f"c_{side}")
        t0 = time.perf_counter()
        sm.build(roots[side], url, shape)
        built = time.perf_counter() - t0
        if url is not None:
            # what autovacuum does to a table that has grown, before a user's next day of reads: the
            # statistics, and the hint bits and visibility map a first read after a bulk load sets
            query(
                url, lambda conn: conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM ANALYZE")
            )
        ok, detail = check_c(roots[side], shape)
        h.check(ok, f"{backend} {side}: {detail}")
        report.add(
            h.Result(
                "c",
                f"{backend}, {side}: {shape.shards:,} shards ({shape.per_commit} a commit), "
                f"{shape.others + 1:,} datasets: setup by bulk manifest rows",
                f"{built:.1f} s",
                note=f"read back: {detail}",
                data={"seconds": built},
            )
        )
    return roots


def c_rounds(op: Op, roots: dict[str, Path], handles: dict[str, Dataset], rounds: int) -> dict[str, Any]:
    runs = {side: op.make(roots[side], handles[side]) for side in roots}
    for run in runs.values():
        run(-1)  # warm-up, untimed
    load = h.loadavg()
    wall, cpu = h.alternate(runs, rounds)
    return {"wall": wall, "cpu": cpu, "load": load + h.loadavg()[:1]}


def c_appends(cfg: Config, handles: dict[str, Dataset]) -> dict[str, Any]:
    """Durable one-row appends, small and big alternating (rows[k]: the k-th append of all)."""
    rows = h.text_rows(2 * cfg.c_commits + 2, seed=34)
    runs = {side: (lambda k, ds=ds: ds.append_rows([rows[k]])) for side, ds in handles.items()}
    for i, run in enumerate(runs.values()):
        run(len(rows) - 1 - i)  # warm-up, untimed
    load = h.loadavg()
    wall, cpu = h.alternate(runs, cfg.c_commits)
    return {"wall": wall, "cpu": cpu, "load": load + h.loadavg()[:1]}


def report_c(backend: str, label: str, target: float | None, m: dict[str, Any], cfg: Config, report: h.Report,
             profile: Callable[[], object] | None) -> None:  # fmt: skip
    shards, datasets = cfg.c_shards, cfg.c_datasets
    small, big = statistics.median(m["wall"]["small"]), statistics.median(m["wall"]["big"])
    cs, cb = statistics.median(m["cpu"]["small"]), statistics.median(m["cpu"]["big"])
    report.add(
        h.Result(
            "c",
            f"{backend}: {label}, {C_SMALL_SHARDS} vs {shards:,} shards ({C_SMALL_DATASETS} vs {datasets:,} datasets)",
            f"{h.ms(small)} vs {h.ms(big)} = {big / small:.2f}x",
            f"<= {target:g}x" if target else "—",
            None if target is None else big / small <= target,
            f"medians of {len(m['wall']['big'])} interleaved rounds; CPU {h.ms(cs)} vs {h.ms(cb)}; "
            f"load {m['load'][0]:.1f} -> {m['load'][-1]:.1f}",
            {**m, "ratio": big / small},
        ),
        profile=profile,
        what=f"{label} on the {shards:,}-shard catalog",
    )


def bench_c_backend(cfg: Config, backend: str, server: Server, work: Path, report: h.Report) -> None:
    roots = build_c(cfg, backend, server, work, report)
    cats = {side: Catalog.open(root) for side, root in roots.items()}
    report.catalogs += cats.values()  # open for the profiles; closed at the end
    handles = {side: cat.dataset("big") for side, cat in cats.items()}
    m = c_appends(cfg, handles)
    one = h.text_rows(1, seed=35)[0]
    report_c(backend, "durable one-row append (`ds.append_rows`)", C_TARGET, m, cfg, report,
             lambda: [handles["big"].append_rows([one]) for _ in range(10)])  # fmt: skip
    for op in C_READS:
        h.log(f"  {backend}: {op.key} ...")
        m = c_rounds(op, roots, handles, cfg.c_rounds)
        big = op.make(roots["big"], handles["big"])
        report_c(backend, op.label, op.target, m, cfg, report, partial(big, 0))


def bench_c(cfg: Config, server: Server, work: Path, report: h.Report) -> None:
    backends = ["SQLite"] + (["PostgreSQL"] if server.admin is not None else [])
    if server.admin is None:
        h.log("  section c: a given database holds one manifest; PostgreSQL side skipped (run without --db-url)")
    for backend in backends:
        bench_c_backend(cfg, backend, server, work, report)


# --------------------------------------------------------------------------- main


def code_as_of() -> str:
    """The newest modification time in the catalog package this run imports."""
    newest = max(p.stat().st_mtime for p in Path(catalog.__file__).parent.rglob("*.py"))
    return datetime.datetime.fromtimestamp(newest, datetime.timezone.utc).isoformat(timespec="seconds")


def parse_args(argv: list[str] | None) -> Any:
    parser = h.arg_parser(__doc__, "100,000 shards and fewer commits", profiled="the catalog side")
    parser.add_argument("--db-url", metavar="URL", help="an empty PostgreSQL database (default: a throwaway cluster)")
    parser.add_argument("--workdir", metavar="DIR", default=tempfile.gettempdir(), help="where the catalogs go")
    parser.add_argument("--pg-fast", action="store_true", help="throwaway cluster with fsync=off, as the tests run it")
    parser.add_argument("--only", metavar="S", help="comma-separated sections: a, b, c (default all)")
    return parser.parse_args(argv)


def header(cfg: Config, quick: bool, server: Server, workdir: Path, free: int) -> dict[str, Any]:
    facts = query(server.url, server_facts)
    info = h.machine_header(
        sqlalchemy=sa.__version__,
        psycopg=h.dist_version("psycopg"),
        sqlite=sqlite3.sqlite_version,
        typer=h.dist_version("typer"),
        crc32c=h.dist_version("crc32c"),
    )
    code = code_as_of()
    h.print_header(
        "TFRecord Catalog: scale benchmarks (PostgreSQL manifest)",
        info,
        f"PostgreSQL {facts['server_version']}: {server.where}; fsync={facts['fsync']}, "
        f"synchronous_commit={facts['synchronous_commit']}, shared_buffers={facts['shared_buffers']}",
        f"catalog/ as of {code} (its newest file's modification time)",
        f"work directory {workdir} on {h.filesystem_of(str(workdir))}, {free / 2**30:.0f} GiB free at start",
        f"mode: {'quick' if quick else 'full'}: {cfg.procs} x {cfg.proc_commits} concurrent one-row appends "
        f"x {cfg.rounds} round(s) per backend; {cfg.shards:,} shards; rows: id int64, text string, score float32, "
        f"vec float32[8]; c: {cfg.c_shards:,} vs {C_SMALL_SHARDS} shards, {cfg.c_datasets:,} vs {C_SMALL_DATASETS} "
        f"datasets, {cfg.c_rounds} rounds per read, {cfg.c_commits} appends per side",
    )
    return info | {"postgres": facts, "server": server.where, "code": code}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = QUICK if args.quick else FULL
    sections = h.chosen_sections(args.only, ("a", "b", "c"))
    workdir = Path(args.workdir).resolve()
    need = cfg.shards * BYTES_PER_SHARD_ON_DISK + (2 << 30) if "b" in sections else 1 << 30
    free = shutil.disk_usage(workdir).free
    if free < need:
        raise SystemExit(f"{workdir}: {free / 2**30:.1f} GiB free, {need / 2**30:.1f} GiB needed: use --workdir")
    started = time.perf_counter()
    server = given_database(args.db_url) if args.db_url else throwaway_cluster(args.pg_fast)
    report = h.Report()
    try:
        info = header(cfg, args.quick, server, workdir, free)
        with tempfile.TemporaryDirectory(prefix="bench_scale_", dir=workdir) as d:
            steps: list[tuple[str, str, Callable[[], None]]] = [
                ("a", "concurrent appends", lambda: bench_concurrent(cfg, server.url, Path(d), report)),
                ("b", f"{cfg.shards:,}-shard manifest", lambda: bench_big(cfg, server.url, Path(d), report)),
                ("c", "the manifest at scale, SQLite and PostgreSQL", lambda: bench_c(cfg, server, Path(d), report)),
            ]
            report.run(steps, sections)
            profiles = report.conclude(started, args.profile, " (clean-up not included)")
            report.close()
            h.log("removing the work directory ...")
    finally:
        server.stop()
    report.write(args, info, cfg, profiles=profiles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
