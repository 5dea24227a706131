#!/usr/bin/env python
"""Load: 8 processes appending one-row commits to one SQLite catalog for a fixed time, each
append's latency recorded; this code beside the code before the writers' queue, in the same run.

Run from the repository root:

    .venv/bin/python benchmarks/bench_load.py                 # full run: 60 s per side (about 2.5 minutes)
    .venv/bin/python benchmarks/bench_load.py --quick         # 10 s per side
    .venv/bin/python benchmarks/bench_load.py --sides queue   # only the current code
    .venv/bin/python benchmarks/bench_load.py --baseline /tmp/old   # beside another checkout's catalog/
    .venv/bin/python benchmarks/bench_load.py --json results.json --profile

Each side is a fresh catalog directory (the manifest is a file in it) shared by every
process. Processes start behind a barrier and append until the shared deadline; an append
that started before it finishes and counts. The "before" side runs the package found in
--baseline DIR (DIR/catalog: e.g. ``git archive 203407b catalog | tar -x -C DIR``, the commit
before the queue) in its worker processes; without --baseline it is this code with the queue
disabled in the workers only (``catalog.manifest.WRITE_QUEUE = False``), so that writers wait
for SQLite's write lock in its busy handler, as before (the commit's fsync after the lock,
also new, stays). Afterwards
every commit is checked: each token once, versions gapless, every row back, totals. Progress
lines go to stderr; the report (a markdown table) goes to stdout. With --profile, worker 0 of
each side runs under cProfile and its profile is printed under the table.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
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
from bench_catalog import SCHEMA_JSON, VEC_LEN, Report, Result, check, log, machine_info, ms
from common import arg_parser, filesystem_of, profile_text, usable_cpus, write_report

# The targets (issue 11, on a 2-core machine): tail latency of one append under 8 writers.
P99_TARGET_S = 0.050
MAX_TARGET_S = 0.200
SIDES = ("queue", "busy")  # this code; the code before (--baseline) or this code without its queue


@dataclass
class Config:
    procs: int  # concurrent appending processes
    seconds: float  # how long each side appends
    rounds: int  # rounds; each runs every side once, the order alternating


FULL = Config(procs=8, seconds=60.0, rounds=1)
QUICK = Config(procs=8, seconds=10.0, rounds=1)


def row_of(wid: int, i: int) -> dict[str, Any]:
    """Worker ``wid``'s ``i``-th row: its id and text say whose it is, so the check can find it."""
    return {"id": wid * 10_000_000 + i, "text": f"w{wid}-{i}", "score": 0.5, "vec": [float(wid)] * VEC_LEN}


def _worker(
    root: str, name: str, wid: int, code: str | None, seconds: float, barrier: Any, results: Any, prof: bool
) -> None:
    """One appender: open the catalog, wait for the others, append one row per commit until the
    deadline. ``code``: a directory holding the catalog package to run instead, or "" for this
    code without its writers' queue."""
    try:
        if code:
            sys.path.insert(0, code)
        import catalog.manifest as mf
        from catalog import Catalog

        if code is not None:
            mf.WRITE_QUEUE = False  # type: ignore[attr-defined]  # a no-op in code without the queue
        turns = _time_turns(mf)
        cat = Catalog.open(root)
        ds = cat.dataset(name)
        ds.info()  # a pooled connection before the start line
        lat: list[float] = []

        def loop() -> None:
            deadline = time.perf_counter() + seconds
            i = 0
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                ds.append_rows([row_of(wid, i)], token=f"w{wid}-{i}")
                lat.append(time.perf_counter() - t0)
                i += 1

        barrier.wait(timeout=120)
        start = time.perf_counter()
        text = profile_text(loop) if prof else ""
        if not prof:
            loop()
        end = time.perf_counter()
        cat.close()
        results.put((wid, start, end, lat, turns, text, None))
    except BaseException as e:  # reported by the parent
        results.put((wid, 0.0, 0.0, [], ([], []), "", repr(e)))


def _time_turns(mf: Any) -> tuple[list[float], list[float]]:
    """Time every wait for a turn in the writers' queue and how long the turn was held (the
    write transaction), where the code has the queue: where an append's time goes."""
    waits: list[float] = []
    holds: list[float] = []
    queue = getattr(mf, "_write_queue", None)
    if queue is None or not mf.WRITE_QUEUE:
        return waits, holds

    @contextmanager
    def timed(engine: Any) -> Iterator[None]:
        t0 = time.perf_counter()
        with queue(engine):
            t1 = time.perf_counter()
            try:
                yield
            finally:
                holds.append(time.perf_counter() - t1)
                waits.append(t1 - t0)

    mf._write_queue = timed
    return waits, holds


@dataclass
class Run:
    wall: float  # first process's start to last process's end (one CLOCK_MONOTONIC across processes)
    per_worker: list[list[float]]  # each worker's append latencies, in order
    waits: list[float]  # each wait for a turn in the writers' queue (empty without the queue)
    holds: list[float]  # how long each turn was held
    profile: str

    @property
    def latencies(self) -> list[float]:
        return [t for w in self.per_worker for t in w]

    @property
    def commits(self) -> int:
        return sum(len(w) for w in self.per_worker)

    def summary(self) -> str:
        lat, per = self.latencies, [len(w) for w in self.per_worker]
        text = (
            f"{self.commits / self.wall:,.0f} commits/s, p50 {ms(statistics.median(lat))}, p99 "
            f"{ms(float(np.percentile(lat, 99)))}, max {ms(max(lat))}, {min(per):,} to {max(per):,} commits per process"
        )
        if self.waits:
            busy = sum(self.holds) / self.wall
            text += (
                f"; {len(self.waits) / self.commits:.1f} turns per append, waited for p50 "
                f"{ms(statistics.median(self.waits))} / p99 {ms(float(np.percentile(self.waits, 99)))}, held p50 "
                f"{ms(statistics.median(self.holds))} / p99 {ms(float(np.percentile(self.holds, 99)))} "
                f"(held {busy:.0%} of the time)"
            )
        return text


def run_side(root: Path, name: str, cfg: Config, code: str | None, prof: bool) -> Run:
    ctx = mp.get_context("spawn")  # no fork of a process holding connections
    barrier = ctx.Barrier(cfg.procs)
    results = ctx.Queue()
    workers = [
        ctx.Process(target=_worker, args=(str(root), name, w, code, cfg.seconds, barrier, results, prof and w == 0))
        for w in range(cfg.procs)
    ]
    for p in workers:
        p.start()
    starts, ends = [], []
    per_worker: list[list[float]] = [[] for _ in range(cfg.procs)]
    turn_waits: list[float] = []
    turn_holds: list[float] = []
    text = ""
    for _ in range(cfg.procs):
        wid, start, end, lat, (waits, holds), prof_text, err = results.get(timeout=cfg.seconds + 600)
        check(err is None, f"append worker {wid} failed: {err}")
        starts.append(start)
        ends.append(end)
        per_worker[wid] = lat
        turn_waits += waits
        turn_holds += holds
        text = text or prof_text
    for p in workers:
        p.join(timeout=60)
        check(p.exitcode == 0, f"append worker exited with {p.exitcode}")
    return Run(max(ends) - min(starts), per_worker, turn_waits, turn_holds, text)


def check_exact(cat: Any, name: str, run: Run) -> tuple[bool, str]:
    """Every append present once (by token), versions gapless, every row back as sent, totals."""
    ds = cat.dataset(name)
    hist = ds.history()
    tokens = Counter(c.token for c in hist if c.kind == "append")
    expected = {f"w{w}-{i}" for w, lat in enumerate(run.per_worker) for i in range(len(lat))}
    rows = {int(r["id"]): r["text"] for r in ds.read()}
    want = {row_of(w, i)["id"]: f"w{w}-{i}" for w, lat in enumerate(run.per_worker) for i in range(len(lat))}
    info = ds.info()
    total = run.commits
    checks = {
        "tokens once each": set(tokens) == expected and all(n == 1 for n in tokens.values()),
        "versions gapless": [c.version for c in hist] == list(range(1, total + 2)),
        "rows exact": rows == want,
        "totals": info.records == total and info.shard_count == total and info.version == total + 1,
    }
    bad = [k for k, ok in checks.items() if not ok]
    return not bad, ("; ".join(checks) + ": all passed" if not bad else "FAILED: " + ", ".join(bad))


def bench_load(
    cfg: Config, sides: list[str], baseline: str | None, work: Path, report: Report, prof: bool
) -> dict[str, str]:
    from catalog import Catalog

    names = {"queue": "fair queue", "busy": f"before ({baseline}/catalog)" if baseline else "busy handler (no queue)"}
    codes = {"queue": None, "busy": baseline or ""}

    runs: dict[str, list[Run]] = {s: [] for s in sides}
    verdicts: dict[str, list[str]] = {s: [] for s in sides}
    all_ok = True
    for rnd in range(cfg.rounds):
        for side in sides if rnd % 2 == 0 else sides[::-1]:
            root = work / f"{side}-{rnd}"
            with Catalog.init(root) as cat:
                cat.register("load", SCHEMA_JSON)
            run = run_side(root, "load", cfg, codes[side], prof)
            with Catalog.open(root) as cat:
                ok, detail = check_exact(cat, "load", run)
            all_ok = all_ok and ok
            runs[side].append(run)
            verdicts[side].append(detail)
            log(f"  round {rnd} {names[side]}: {run.summary()}; {detail}")

    rates: dict[str, float] = {}
    for side in sides:
        side_runs = runs[side]
        lat = [t for r in side_runs for t in r.latencies]
        commits = sum(r.commits for r in side_runs)
        rate = commits / sum(r.wall for r in side_runs)
        rates[side] = rate
        p50, p99, worst = statistics.median(lat), float(np.percentile(lat, 99)), max(lat)
        per_proc = [len(w) for r in side_runs for w in r.per_worker]
        rounds = "; ".join(f"round {i}: {r.summary()}" for i, r in enumerate(side_runs))
        report.add(
            Result(
                "1",
                f"{names[side]}: append latency p99 / max, {cfg.procs} processes x {cfg.seconds:.0f} s "
                "of one-row appends to one SQLite catalog",
                f"{ms(p99)} / {ms(worst)}",
                f"<= {ms(P99_TARGET_S)} / <= {ms(MAX_TARGET_S)}",
                p99 <= P99_TARGET_S and worst <= MAX_TARGET_S if side == "queue" else None,
                f"{commits:,} commits, {rate:,.0f} commits/s; p50 {ms(p50)}, p90 {ms(float(np.percentile(lat, 90)))}, "
                f"p99.9 {ms(float(np.percentile(lat, 99.9)))}; {rounds}",
                data={
                    "commits": commits,
                    "rate": rate,
                    "p50": p50,
                    "p99": p99,
                    "max": worst,
                    "per_process": per_proc,
                    "walls": [r.wall for r in side_runs],
                },
            )
        )
    if len(sides) == 2:
        ratio = rates["queue"] / rates["busy"]
        report.add(
            Result(
                "1",
                f"throughput, {names['queue']} / {names['busy']}, same workload, same run",
                f"{ratio:.2f}x",
                ">= 1.00x",
                ratio >= 1.0,
                f"{rates['queue']:,.0f} vs {rates['busy']:,.0f} commits/s; {usable_cpus()} CPUs shared by "
                f"{cfg.procs} writers; rounds alternate which side goes first",
                data={"ratio": ratio},
            )
        )
    report.add(
        Result(
            "1",
            "every commit present exactly once, every side and round",
            "yes" if all_ok else "no",
            "all present",
            all_ok,
            next(iter(verdicts.values()))[-1],
            data={"verdicts": verdicts},
        )
    )
    return {names[s]: runs[s][-1].profile for s in sides if runs[s][-1].profile}


def main(argv: list[str] | None = None) -> int:
    parser = arg_parser(__doc__, "10 s per side instead of 60 s")
    parser.add_argument("--sides", default="queue,busy", help="comma-separated: queue, busy (default both)")
    parser.add_argument("--seconds", type=float, help="seconds per side (overrides the mode's)")
    parser.add_argument("--rounds", type=int, help="rounds (default 1)")
    parser.add_argument("--procs", type=int, help="appending processes (default 8)")
    parser.add_argument("--profile", action="store_true", help="cProfile worker 0 of each side")
    parser.add_argument("--baseline", metavar="DIR", help="the 'busy' side runs DIR/catalog (the code before)")
    parser.add_argument("--workdir", metavar="DIR", default=tempfile.gettempdir(), help="where the catalogs go")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    cfg = Config(
        procs=args.procs or base.procs, seconds=args.seconds or base.seconds, rounds=args.rounds or base.rounds
    )
    sides = [s for s in args.sides.split(",") if s]
    if not sides or any(s not in SIDES for s in sides):
        parser.error(f"--sides: choose from {', '.join(SIDES)}")

    if args.baseline and not (Path(args.baseline) / "catalog" / "__init__.py").is_file():
        parser.error(f"--baseline: no catalog package in {args.baseline}")
    baseline = f" (busy: {args.baseline}/catalog)" if args.baseline else " (busy: this code without its queue)"
    info = machine_info()
    print("# TFRecord Catalog: load (concurrent appends on one SQLite catalog)\n")
    print(f"- date: {info['date']}")
    print(
        f"- machine: {info['nproc']} CPU(s), {info['cpu']} ({info['platform']}); load average at start "
        f"{' '.join(map(str, info['loadavg_at_start']))}"
    )
    print(f"- Python {info['python']}, SQLAlchemy {info['sqlalchemy']} (SQLite {info['sqlite']})")
    print(f"- catalogs under {args.workdir} on {filesystem_of(args.workdir)}")
    print(
        f"- mode: {'quick' if args.quick else 'full'}: {cfg.procs} processes, {cfg.seconds:.0f} s per side, "
        f"{cfg.rounds} round(s), sides {', '.join(sides)}{baseline}; one durable one-row append "
        f"(token each) per commit; rows: id int64, text string, score float32, vec float32[{VEC_LEN}]"
    )
    print()
    sys.stdout.flush()

    report = Report()
    started = time.perf_counter()
    profiles: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench_load_", dir=args.workdir) as d:
        steps: list[tuple[str, str, Callable[[], None]]] = [
            (
                "1",
                "appends under load",
                lambda: profiles.update(bench_load(cfg, sides, args.baseline, Path(d), report, args.profile)),
            )
        ]
        report.run(steps, {"1"})
        report.summary(started)
    for side, text in profiles.items():
        print(f"\n### {side}: worker 0 under cProfile\n\n```\n{text}\n```")
    if args.json:
        write_report(args.json, info, args.quick, cfg, [asdict(r) for r in report.results], profiles=profiles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
