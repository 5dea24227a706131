#!/usr/bin/env python
"""Scale benchmarks with the manifest in PostgreSQL: 8 "machines" appending to one dataset at
once (beside the same workload on the SQLite default), and a 1,000,000-shard manifest (list,
show --no-shards, planning a read, `show --json` streamed, append latency vs a 100-shard dataset).

Run from the repository root:

    .venv/bin/python benchmarks/bench_scale.py                   # full run: 1,000,000 shards
    .venv/bin/python benchmarks/bench_scale.py --quick           # 100,000 shards, fewer commits
    .venv/bin/python benchmarks/bench_scale.py --db-url postgresql+psycopg://postgres@127.0.0.1:5432/empty
    .venv/bin/python benchmarks/bench_scale.py --workdir /big/disk --json results.json

Without --db-url, a throwaway PostgreSQL cluster is started with tests/servers.py (the machine's
own initdb/pg_ctl), with fsync and synchronous_commit turned back on so that PostgreSQL commits
are as durable as the SQLite side's (--pg-fast keeps the test suite's fsync=off settings).
Everything (catalog directories, the 1M shard files, the cluster) lives under --workdir (and
the cluster's own temporary directory) and is removed at the end. Progress lines go to stderr;
the report (a markdown table) goes to stdout. Missed targets are profiled (cProfile) under the table.
"""

from __future__ import annotations

import datetime
import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from bench_catalog import (
    SCHEMA_JSON,
    Report,
    Result,
    bulk_shards,
    check,
    log,
    machine_info,
    make_rows,
    ms,
    timed,
)
from common import arg_parser, dist_version, filesystem_of, usable_cpus, write_report

TESTS_DIR = Path(__file__).resolve().parent.parent / "tests"
MIB = 1 << 20
# Server settings for the throwaway cluster unless --pg-fast: a durable commit, like SQLite's FULL.
DURABLE_PG = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
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
)
QUICK = Config(
    procs=8,
    proc_commits=25,
    rounds=1,
    shards=100_000,
    shards_per_commit=20_000,
    small_shards=100,
    query_repeats=3,
    subprocess_repeats=2,
    ab_commits=20,
)


# --------------------------------------------------------------------------- the PostgreSQL server


@dataclass
class Server:
    url: str  # the manifest database
    stop: Callable[[], None]  # drop what we made: the cluster, or the manifest tables in a given database
    where: str  # for the header


def start_server(db_url: str | None, fast: bool) -> Server:
    import sqlalchemy as sa

    from catalog import manifest as mf

    if db_url:
        url = mf.normalize_url(db_url)
        engine = mf.make_engine(url)
        try:
            mf.check_connection(engine)
            if mf.has_manifest(engine):
                raise SystemExit(f"{mf.safe_url(url)} already holds a catalog manifest: give an empty database")
        finally:
            engine.dispose()

        def drop_manifest() -> None:
            eng = mf.make_engine(url)
            try:
                mf.Base.metadata.drop_all(eng)
            finally:
                eng.dispose()

        return Server(url, drop_manifest, f"given database {mf.safe_url(url)} (its manifest tables dropped at the end)")

    sys.path.insert(0, str(TESTS_DIR))
    import servers

    if not fast:
        servers.PG_SETTINGS.update(DURABLE_PG)
    pg = servers.start_postgres()
    admin = sa.create_engine(pg.url(), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql("CREATE DATABASE scale")
    except BaseException:
        pg.stop()
        raise
    finally:
        admin.dispose()
    settings = ", ".join(f"{k}={v}" for k, v in servers.PG_SETTINGS.items() if k != "listen_addresses")
    return Server(
        pg.url("scale"), pg.stop, f"throwaway cluster from tests/servers.py on 127.0.0.1:{pg.port} ({settings})"
    )


def server_facts(url: str) -> dict[str, str]:
    from catalog import manifest as mf

    engine = mf.make_engine(url)
    try:
        with engine.connect() as conn:
            facts = {"server_version": str(conn.exec_driver_sql("SHOW server_version").scalar())}
            for name in ("fsync", "synchronous_commit", "shared_buffers", "max_connections"):
                facts[name] = str(conn.exec_driver_sql(f"SHOW {name}").scalar())
    finally:
        engine.dispose()
    return facts


def database_size(url: str) -> dict[str, int]:
    from catalog import manifest as mf

    engine = mf.make_engine(url)
    try:
        with engine.connect() as conn:
            return {
                "database": int(conn.exec_driver_sql("SELECT pg_database_size(current_database())").scalar() or 0),
                "shards_table": int(conn.exec_driver_sql("SELECT pg_total_relation_size('shards')").scalar() or 0),
            }
    finally:
        engine.dispose()


def shards_table_analyzed(url: str) -> str:
    """Whether autovacuum has analyzed the shards table yet (the plans of the timed queries depend on it)."""
    from catalog import manifest as mf

    engine = mf.make_engine(url)
    try:
        with engine.connect() as conn:
            row = conn.exec_driver_sql(
                "SELECT last_analyze, last_autoanalyze, n_live_tup FROM pg_stat_user_tables WHERE relname = 'shards'"
            ).first()
    finally:
        engine.dispose()
    if row is None:
        return "no statistics row"
    analyzed = row[0] or row[1]
    return f"last analyzed {analyzed:%H:%M:%S}" if analyzed else "not analyzed yet"


# --------------------------------------------------------------------------- a. concurrent appends


def _append_worker(root: str, name: str, wid: int, commits: int, barrier: Any, results: Any) -> None:
    """One "machine": open its catalog directory, wait for the others, commit ``commits`` one-row appends,
    each with its own idempotency token; then retry its first token, which must change nothing."""
    try:
        from catalog import Catalog

        rows = make_rows(commits, seed=wid + 1, start=wid * commits)
        cat = Catalog.open(root)
        ds = cat.dataset(name)
        ds.info()  # a pooled connection before the start line
        barrier.wait()
        start = time.perf_counter()
        lat = []
        for i, row in enumerate(rows):
            t0 = time.perf_counter()
            ds.append_rows([row], token=f"w{wid}-{i}", message=f"w{wid}-{i}")
            lat.append(time.perf_counter() - t0)
        end = time.perf_counter()
        again = ds.append_rows([rows[0]], token=f"w{wid}-0", message="retry")  # after the clock: not timed
        cat.close()
        results.put((wid, start, end, lat, again.duplicate, None))
    except BaseException as e:  # reported by the parent
        results.put((wid, 0.0, 0.0, [], False, repr(e)))


@dataclass
class Run:
    wall: float  # first process's start to last process's end (CLOCK_MONOTONIC, shared by the processes)
    latencies: list[float]
    retries_ok: bool  # every retried token came back as a duplicate


def run_appenders(roots: list[Path], name: str, commits: int) -> Run:
    ctx = mp.get_context("spawn")  # no fork of a process holding connections
    procs = len(roots)
    barrier = ctx.Barrier(procs)
    results = ctx.Queue()
    workers = [
        ctx.Process(target=_append_worker, args=(str(root), name, w, commits, barrier, results))
        for w, root in enumerate(roots)
    ]
    for p in workers:
        p.start()
    starts, ends, lat, retries = [], [], [], []
    for _ in range(procs):
        wid, start, end, times, dup, err = results.get(timeout=900)
        check(err is None, f"append worker {wid} failed: {err}")
        starts.append(start)
        ends.append(end)
        lat += times
        retries.append(dup)
    for p in workers:
        p.join(timeout=60)
        check(p.exitcode == 0, f"append worker exited with {p.exitcode}")
    return Run(max(ends) - min(starts), lat, all(retries))


def check_exact(cat: Any, name: str, procs: int, commits: int) -> tuple[bool, str]:
    """Every commit present exactly once (by token), versions gapless, records exact, verify ok."""
    ds = cat.dataset(name)
    hist = ds.history()
    total = procs * commits
    tokens = Counter(c.token for c in hist if c.kind == "append")
    expected = {f"w{w}-{i}" for w in range(procs) for i in range(commits)}
    want = {r["id"]: r for w in range(procs) for r in make_rows(commits, seed=w + 1, start=w * commits)}
    got = list(ds.read())
    ids = Counter(int(r["id"]) for r in got)

    def same(row: dict[str, Any]) -> bool:
        w = want.get(int(row["id"]))
        return (
            w is not None
            and row["text"] == w["text"]
            and np.float32(row["score"]) == np.float32(w["score"])
            and np.array_equal(np.asarray(row["vec"], np.float32), np.asarray(w["vec"], np.float32))
        )

    info = ds.info()
    vr = cat.verify([name])
    checks = {
        "tokens once each": set(tokens) == expected and all(n == 1 for n in tokens.values()),
        "versions gapless": [c.version for c in hist] == list(range(1, total + 2)),
        "records exact": len(got) == total and set(ids) == set(want) and all(same(r) for r in got),
        "totals": info.records == total and info.shard_count == total and info.version == total + 1,
        "verify": vr.ok and vr.checked == total,
    }
    bad = [k for k, ok in checks.items() if not ok]
    return not bad, ("; ".join(checks) + ": all passed" if not bad else "FAILED: " + ", ".join(bad))


def bench_concurrent(cfg: Config, url: str, work: Path, report: Report) -> None:
    from catalog import Catalog

    # PostgreSQL: one attached catalog directory per process, as separate machines would have.
    pg_roots = [work / f"machine-{w}" for w in range(cfg.procs)]
    for root in pg_roots:
        Catalog.init(root, url).close()
    # SQLite: the embedded default, one directory (the manifest is a file in it) shared by the processes.
    lite_root = work / "sqlite-catalog"
    Catalog.init(lite_root).close()
    sides = {"PostgreSQL": (pg_roots[0], pg_roots), "SQLite": (lite_root, [lite_root] * cfg.procs)}
    runs: dict[str, list[Run]] = {k: [] for k in sides}
    verdicts: dict[str, list[str]] = {k: [] for k in sides}
    all_ok = True
    total = cfg.procs * cfg.proc_commits
    for rnd in range(cfg.rounds):
        order = list(sides) if rnd % 2 == 0 else list(sides)[::-1]
        for side in order:
            admin_root, roots = sides[side]
            name = f"appends-{rnd}"
            with Catalog.open(admin_root) as cat:
                cat.register(name, SCHEMA_JSON)
            run = run_appenders(roots, name, cfg.proc_commits)
            with Catalog.open(admin_root) as cat:
                ok, detail = check_exact(cat, name, cfg.procs, cfg.proc_commits)
            ok = ok and run.retries_ok
            all_ok = all_ok and ok
            runs[side].append(run)
            verdicts[side].append(detail if run.retries_ok else detail + "; a retried token was NOT a duplicate")
            log(f"  round {rnd} {side}: {total / run.wall:,.0f} commits/s, {detail}")

    rates: dict[str, float] = {}
    for side in sides:
        side_runs = runs[side]
        per_round = [total / r.wall for r in side_runs]
        rate = statistics.median(per_round)
        rates[side] = rate
        lat = [t for r in side_runs for t in r.latencies]
        p50, p99 = statistics.median(lat), float(np.percentile(lat, 99))
        how = f"{cfg.procs} attached catalog directories" if side == "PostgreSQL" else "one catalog directory"
        report.add(
            Result(
                "a",
                f"{side}: {cfg.procs} processes x {cfg.proc_commits} durable one-row appends (token each) "
                f"to one dataset, {how}",
                f"{rate:,.0f} commits/s",
                note=f"median of {len(per_round)} round(s) ({', '.join(f'{x:,.0f}' for x in per_round)}); commit "
                f"latency p50 {ms(p50)}, p99 {ms(p99)}, max {ms(max(lat))}; started behind a barrier",
                data={"rates": per_round, "latencies": lat, "walls": [r.wall for r in side_runs]},
            )
        )
    report.add(
        Result(
            "a",
            "PostgreSQL / SQLite commits/s, same workload, same run",
            f"{rates['PostgreSQL'] / rates['SQLite']:.2f}x",
            note=f"rounds alternate which side goes first; {usable_cpus()} CPUs shared by {cfg.procs} writers "
            "(and by the PostgreSQL server on that side)",
            data={"ratio": rates["PostgreSQL"] / rates["SQLite"]},
        )
    )
    report.add(
        Result(
            "a",
            f"all {total:,} commits present exactly once, each round, both sides",
            "yes" if all_ok else "no",
            "all present",
            all_ok,
            "history tokens (each once), versions 1..N+1 gapless, ds.read() rows equal to those sent, totals, "
            f"Catalog.verify; every worker's retried token returned the earlier commit. PostgreSQL: "
            f"{verdicts['PostgreSQL'][-1]}",
            data={"verdicts": verdicts},
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
FLOOR = _PEAK_AT_EXIT + "import catalog.core, catalog.cli\n"


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
    check(proc.returncode == 0, f"{' '.join(argv[-3:])} exited {proc.returncode}: {errors[-500:]}")
    peaks = [line.split()[1] for line in errors.splitlines() if line.startswith("VmHWM:")]
    check(len(peaks) == 1, f"{' '.join(argv[-3:])}: no peak RSS line on stderr: {errors[-500:]}")
    return Child(seconds, first, int(peaks[0]) / 1024, n)


@contextmanager
def fresh(root: Path) -> Iterator[Any]:
    from catalog import Catalog

    cat = Catalog.open(root)
    try:
        yield cat
    finally:
        cat.close()


def bench_big(cfg: Config, url: str, work: Path, report: Report) -> None:
    from catalog import Catalog

    n = cfg.shards
    root = work / "machine-big"
    Catalog.init(root, url).close()  # attaches (section a made the manifest) or creates it
    with fresh(root) as cat:
        big = cat.register("big", SCHEMA_JSON)
        small = cat.register("small", SCHEMA_JSON)
        record = big.schema.encode(make_rows(1)[0])
        disk_before = shutil.disk_usage(work).used
        t0 = time.perf_counter()
        done = commits = 0
        step = max(cfg.shards_per_commit, n // 10)
        while done < n:
            k = min(step, n - done)
            commits += bulk_shards(big, record, k, cfg.shards_per_commit)
            done += k
            el = time.perf_counter() - t0
            log(f"  ... {done:,} shards in {el:.0f} s ({done / el:,.0f}/s)")
        build = time.perf_counter() - t0
        bulk_shards(small, record, cfg.small_shards, cfg.small_shards)
        disk_used = shutil.disk_usage(work).used - disk_before
    size = database_size(url)
    analyzed = shards_table_analyzed(url)
    report.add(
        Result(
            "b",
            f"setup: {n:,} one-record shards through Writer (shard_records=1), {cfg.shards_per_commit:,} per commit",
            f"{build:.0f} s",
            note=f"{commits} commits, {build / n * 1e6:.0f} µs/shard, shard-file fsync off (setup only); manifest "
            f"pg_database_size {size['database'] / MIB:,.0f} MiB (shards table + indexes "
            f"{size['shards_table'] / MIB:,.0f} MiB); data area {disk_used / 2**30:.1f} GiB on disk; shards table "
            f"{analyzed} when the timings started",
            data={"seconds": build, "commits": commits, "db_bytes": size, "disk_bytes": disk_used},
        )
    )

    # Library calls with fresh handles, as a new process has them: the first call, then the median.
    with fresh(root) as cat:
        ds = cat.dataset("big")
        cases: list[tuple[str, Callable[[], object]]] = [
            ("`list`: Catalog.list()", cat.list),
            ("`show --no-shards`: Dataset.info()", ds.info),
            ("planning a read: Dataset.files()", ds.files),
        ]
        outputs: dict[str, object] = {}
        for label, fn in cases:
            t0 = time.perf_counter()
            fn()
            cold = time.perf_counter() - t0
            times, out = timed(fn, cfg.query_repeats, warmup=0)
            outputs[label] = out
            med = statistics.median(times)
            report.add(
                Result(
                    "b",
                    f"{label} at {n:,} shards (library)",
                    ms(med),
                    "< 1 s",
                    med < 1.0,
                    f"median of {len(times)}, max {ms(max(times))}; first call on the fresh handle {ms(cold)}",
                    {"times": times, "cold": cold},
                ),
                profile=_profile_in(root, label),
                what=f"one call of {label} on a fresh handle",
            )
        files = outputs["planning a read: Dataset.files()"]
        check(isinstance(files, list) and len(files) == n, "files() lists every shard")
        assert isinstance(files, list)
        check(os.path.isfile(files[0]) and os.path.isfile(files[-1]), "files() paths exist")
        infos = outputs["`list`: Catalog.list()"]
        assert isinstance(infos, list)
        check(any(i.name == "big" and i.shard_count == n for i in infos), "list() shows the big dataset")
        first_path, last_path = files[0], files[-1]
        del files, outputs, infos

    # The CLI as new processes: a bare "start Python, import the CLI" floor interleaved with the commands.
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
                log(f"  checking the {child.out_bytes / MIB:,.0f} MiB of `show big --json` ...")
                with open(out_path, "rb") as f:
                    doc = json.load(f)
                shards = doc["shards"]
                check(len(shards) == n and doc["shard_count"] == n, "show --json lists every shard")
                check(shards[0]["path"] == first_path and shards[-1]["path"] == last_path, "show --json order")
                del doc, shards
            if rnd:
                children[label].append(child)
            out_path.unlink()
        log(f"  CLI round {rnd}: " + ", ".join(f"{k} {ms(v[-1].seconds)}" for k, v in children.items() if v))
    floor = statistics.median(c.seconds for c in children["floor"])
    floor_rss = statistics.median(c.peak_rss_mib for c in children["floor"])
    for label in ("list", "show big --no-shards"):
        med = statistics.median(c.seconds for c in children[label])
        report.add(
            Result(
                "b",
                f"`catalog {label}` at {n:,} shards (subprocess)",
                f"{ms(med)}; net of start-up {ms(med - floor)}",
                "< 1 s net",
                med - floor < 1.0,
                f"median of {len(children[label])} after a warm-up run; start Python + import catalog.cli alone: "
                f"{ms(floor)} (same rounds)",
                {"times": [c.seconds for c in children[label]], "floor": floor},
            ),
            profile=_profile_cli(root, label.split()),
            what=f"`catalog {label}` in-process through typer's CliRunner (fresh Catalog.open included)",
        )
    big_json, small_json = children["show big --json"], children["show small --json"]
    first = statistics.median(c.first_line if c.first_line is not None else c.seconds for c in big_json)
    total_s = statistics.median(c.seconds for c in big_json)
    rss = max(c.peak_rss_mib for c in big_json)
    rss_small = max(c.peak_rss_mib for c in small_json)
    out_mib = big_json[-1].out_bytes / MIB
    show_json_profile = _profile_cli(root, ["show", "big", "--json"])
    report.add(
        Result(
            "b",
            f"`catalog show big --json` at {n:,} shards (subprocess): time to the first shard line",
            f"{ms(first)}; net of start-up {ms(first - floor)}",
            "< 1 s net (streamed)",
            first - floor < 1.0,
            f"median of {len(big_json)}; whole output {ms(total_s)} ({out_mib:,.0f} MiB, {n / total_s:,.0f} shards/s)",
            {"first_line": [c.first_line for c in big_json], "total": [c.seconds for c in big_json]},
        ),
        profile=show_json_profile,
        what="`catalog show big --json` in-process through typer's CliRunner",
    )
    report.add(
        Result(
            "b",
            f"`catalog show big --json` at {n:,} shards: peak RSS of the child",
            f"{rss:,.0f} MiB",
            f"<= 100-shard show + {RSS_SLACK_MIB} MiB",
            rss <= rss_small + RSS_SLACK_MIB,
            f"`show small --json` (100 shards) peaks at {rss_small:,.0f} MiB, the bare import at {floor_rss:,.0f} MiB: "
            f"{(rss - rss_small) * MIB / n:,.0f} bytes per shard held at once",
            {"rss_mib": [c.peak_rss_mib for c in big_json], "rss_small_mib": [c.peak_rss_mib for c in small_json]},
        ),
        profile=show_json_profile,
        what="`catalog show big --json` in-process through typer's CliRunner (where the time and objects go)",
    )

    # Append latency: one-row durable commits into the big dataset and the 100-shard one, interleaved.
    with fresh(root) as cat:
        big, small = cat.dataset("big"), cat.dataset("small")
        rows = make_rows(2 * cfg.ab_commits + 2, seed=99)
        big.append_rows([rows[-1]])  # warm-up, both sides
        small.append_rows([rows[-2]])
        lat: dict[str, list[float]] = {"big": [], "small": []}
        cpu: dict[str, list[float]] = {"big": [], "small": []}
        for i in range(cfg.ab_commits):
            order = [("big", big), ("small", small)]
            for j, (key, d) in enumerate(order if i % 2 == 0 else order[::-1]):
                c0 = time.process_time()
                t0 = time.perf_counter()
                d.append_rows([rows[2 * i + j]])
                lat[key].append(time.perf_counter() - t0)
                cpu[key].append(time.process_time() - c0)
        check(big.info().shard_count == n + cfg.ab_commits + 1, "big dataset took every append")
        mb, msm = statistics.median(lat["big"]), statistics.median(lat["small"])
        cb, cs = statistics.median(cpu["big"]), statistics.median(cpu["small"])
        ratio = mb / msm
        report.add(
            Result(
                "b",
                f"durable one-row append into the {n:,}-shard dataset vs a {cfg.small_shards}-shard one, same manifest",
                f"{ms(mb)} vs {ms(msm)} = {ratio:.2f}x",
                "<= 1.5x",
                ratio <= 1.5,
                f"medians of {cfg.ab_commits} appends each, alternating; p90 {ms(float(np.percentile(lat['big'], 90)))}"
                f" vs {ms(float(np.percentile(lat['small'], 90)))}; CPU time {ms(cb)} vs {ms(cs)}",
                {
                    "big": lat["big"],
                    "small": lat["small"],
                    "ratio": ratio,
                    "cpu_big": cpu["big"],
                    "cpu_small": cpu["small"],
                },
            ),
            profile=_profile_appends(root),
            what="30 durable one-row appends into the big dataset",
        )


def _profile_in(root: Path, label: str) -> Callable[[], object]:
    def run() -> object:
        with fresh(root) as cat:
            if label.startswith("`list`"):
                return cat.list()
            ds = cat.dataset("big")
            return ds.info() if "info" in label else ds.files()

    return run


def _profile_cli(root: Path, args: list[str]) -> Callable[[], object]:
    def run() -> object:
        from typer.testing import CliRunner

        from catalog.cli import app

        res = CliRunner().invoke(app, ["--catalog", str(root), *args])
        check(res.exit_code == 0, f"catalog {' '.join(args)}: {res.output[-300:]}")
        return len(res.stdout)

    return run


def _profile_appends(root: Path) -> Callable[[], object]:
    def run() -> object:
        with fresh(root) as cat:
            ds = cat.dataset("big")
            row = make_rows(1, seed=7)[0]
            return [ds.append_rows([row]) for _ in range(30)]

    return run


# --------------------------------------------------------------------------- main


def code_as_of() -> str:
    package = Path(__file__).resolve().parent.parent / "catalog"
    newest = max(p.stat().st_mtime for p in package.rglob("*.py"))
    return datetime.datetime.fromtimestamp(newest, datetime.timezone.utc).isoformat(timespec="seconds")


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, "100,000 shards and fewer commits")
    parser.add_argument("--db-url", metavar="URL", help="an empty PostgreSQL database (default: a throwaway cluster)")
    parser.add_argument("--workdir", metavar="DIR", default=tempfile.gettempdir(), help="where the catalogs go")
    parser.add_argument("--pg-fast", action="store_true", help="throwaway cluster with fsync=off, as the tests run it")
    parser.add_argument("--only", metavar="S", help="comma-separated sections: a, b (default both)")
    parser.add_argument(
        "--profile", choices=("missed", "all", "none"), default="missed", help="cProfile missed targets (default)"
    )
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else FULL
    sections = set(args.only.split(",")) if args.only else {"a", "b"}

    workdir = Path(args.workdir).resolve()
    need = cfg.shards * BYTES_PER_SHARD_ON_DISK + (2 << 30) if "b" in sections else 1 << 30
    free = shutil.disk_usage(workdir).free
    if free < need:
        raise SystemExit(f"{workdir}: {free / 2**30:.1f} GiB free, {need / 2**30:.1f} GiB needed: use --workdir")

    info = machine_info()
    started = time.perf_counter()
    server = start_server(args.db_url, args.pg_fast)
    report = Report()
    profiles: dict[str, str] = {}
    try:
        facts = server_facts(server.url)
        info |= {"psycopg": dist_version("psycopg"), "postgres": facts, "server": server.where, "code": code_as_of()}
        print("# TFRecord Catalog: scale benchmarks (PostgreSQL manifest)\n")
        print(f"- date: {info['date']}")
        print(
            f"- machine: {info['nproc']} CPU(s), {info['cpu']} ({info['platform']}); load average at start "
            f"{' '.join(map(str, info['loadavg_at_start']))}"
        )
        print(
            f"- Python {info['python']}, SQLAlchemy {info['sqlalchemy']}, psycopg {info['psycopg']}, "
            f"SQLite {info['sqlite']}, typer {info['typer']}, crc32c {info['crc32c']}"
        )
        print(
            f"- PostgreSQL {facts['server_version']}: {server.where}; fsync={facts['fsync']}, "
            f"synchronous_commit={facts['synchronous_commit']}, shared_buffers={facts['shared_buffers']}"
        )
        print(f"- catalog/ as of {info['code']} (its newest file's modification time)")
        print(f"- work directory {workdir} on {filesystem_of(str(workdir))}, {free / 2**30:.0f} GiB free at start")
        print(
            f"- mode: {'quick' if args.quick else 'full'}: {cfg.procs} x {cfg.proc_commits} concurrent one-row appends "
            f"x {cfg.rounds} round(s) per backend; {cfg.shards:,} shards; rows: id int64, text string, score float32, "
            "vec float32[8]"
        )
        print()
        sys.stdout.flush()

        with tempfile.TemporaryDirectory(prefix="bench_scale_", dir=workdir) as d:
            work = Path(d)
            steps: list[tuple[str, str, Callable[[], None]]] = [
                ("a", "concurrent appends", lambda: bench_concurrent(cfg, server.url, work, report)),
                ("b", f"{cfg.shards:,}-shard manifest", lambda: bench_big(cfg, server.url, work, report)),
            ]
            report.run(steps, sections)
            missed = report.summary(started, " (clean-up not included)")
            profiles = report.print_profiles(args.profile, missed)
            log("removing the work directory ...")
    finally:
        server.stop()

    if args.json:
        write_report(args.json, info, args.quick, cfg, [asdict(r) for r in report.results], profiles=profiles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
