"""Load: 8 processes appending one-row commits to one SQLite catalog for a fixed time, each
append's latency recorded; this code beside the code before the writers' queue, in the same run.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_load                 # full run: 60 s per side (about 2.5 minutes)
    .venv/bin/python -m benchmarks.bench_load --quick         # 10 s per side
    .venv/bin/python -m benchmarks.bench_load --sides queue   # only the current code
    .venv/bin/python -m benchmarks.bench_load --baseline /tmp/old   # beside another checkout's catalog/
    .venv/bin/python -m benchmarks.bench_load --json results.json --profile

Each side is a fresh catalog directory (the manifest is a file in it) shared by every
process. Processes start behind a common start line and append until the shared deadline;
an append that started before it finishes and counts. The "before" side runs the package
found in --baseline DIR (DIR/catalog: e.g. ``git archive 203407b catalog | tar -x -C DIR``,
the commit before the queue) in its worker processes (they start in DIR, so DIR/catalog is
the one they import); without --baseline it is this code with the queue disabled in the
workers only (``catalog.manifest.write_queue.WRITE_QUEUE = False``), so that writers wait for SQLite's
write lock in its busy handler, as before (the commit's fsync after the lock, also new,
stays). Afterwards every commit is checked: each token once, versions gapless, every row
back, totals. Progress lines go to stderr; the report (a markdown table) goes to stdout.
With --profile, worker 0 of each side runs under cProfile and its profile is printed under
the table.

The one internal it touches is the writers' queue of ``catalog.manifest.write_queue`` (``WRITE_QUEUE``,
``_write_queue``): to turn it off, and to time each turn in it.
"""

from __future__ import annotations

import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy

try:  # the writers' queue, where write_txn looks it up
    import catalog.manifest.write_queue as mf
except ImportError:  # a --baseline from before the manifest package: one module
    import catalog.manifest as mf  # type: ignore[no-redef]
from benchmarks import harness as h
from catalog import Catalog

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
    return {"id": wid * 10_000_000 + i, "text": f"w{wid}-{i}", "score": 0.5, "vec": [float(wid)] * h.TEXT_VEC}


def time_turns() -> tuple[list[float], list[float]]:
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


def append_loop(
    start: Callable[[], None], root: str, name: str, wid: int, seconds: float, queue: bool, profile: bool
) -> dict[str, Any]:
    """One appender (a worker process): open the catalog, wait for the others, append one row
    per commit until the deadline. ``queue`` False: with the writers' queue turned off (a
    no-op in code without it)."""
    if not queue:
        mf.WRITE_QUEUE = False
    waits, holds = time_turns()
    lat: list[float] = []
    with h.opened(Path(root)) as cat:
        ds = cat.dataset(name)
        ds.info()  # a pooled connection before the start line

        def loop() -> None:
            deadline = time.perf_counter() + seconds
            i = 0
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                ds.append_rows([row_of(wid, i)], token=f"w{wid}-{i}")
                lat.append(time.perf_counter() - t0)
                i += 1

        start()
        began = time.perf_counter()
        text = h.profile_text(loop) if profile else ""
        if not profile:
            loop()
        end = time.perf_counter()
    return {"start": began, "end": end, "lat": lat, "waits": waits, "holds": holds, "profile": text}


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
            f"{self.commits / self.wall:,.0f} commits/s, p50 {h.ms(statistics.median(lat))}, p99 "
            f"{h.ms(float(np.percentile(lat, 99)))}, max {h.ms(max(lat))}, "
            f"{min(per):,} to {max(per):,} commits per process"
        )
        if self.waits:
            busy = sum(self.holds) / self.wall
            text += (
                f"; {len(self.waits) / self.commits:.1f} turns per append, waited for p50 "
                f"{h.ms(statistics.median(self.waits))} / p99 {h.ms(float(np.percentile(self.waits, 99)))}, held p50 "
                f"{h.ms(statistics.median(self.holds))} / p99 {h.ms(float(np.percentile(self.holds, 99)))} "
                f"(held {busy:.0%} of the time)"
            )
        return text


def run_side(root: Path, cfg: Config, code: str | None, prof: bool) -> Run:
    """Every worker of one side; ``code``: None for this code, "" for this code without its
    queue, else a directory holding the catalog package to run (also without a queue)."""
    jobs = [
        dict(root=str(root), name="load", wid=w, seconds=cfg.seconds, queue=code is None, profile=prof and w == 0)
        for w in range(cfg.procs)
    ]
    _, results = h.run_workers("benchmarks.bench_load:append_loop", jobs, cwd=Path(code) if code else h.REPO)
    return Run(
        max(r["end"] for r in results) - min(r["start"] for r in results),
        [r["lat"] for r in results],
        [t for r in results for t in r["waits"]],
        [t for r in results for t in r["holds"]],
        next((r["profile"] for r in results if r["profile"]), ""),
    )


def check_exact(cat: Catalog, name: str, run: Run) -> tuple[bool, str]:
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
    return h.verdict(checks)


@dataclass
class Sides:
    """Every round's run and verdict of each side."""

    names: dict[str, str]  # side -> its name in the report
    runs: dict[str, list[Run]]
    verdicts: dict[str, list[str]]
    all_ok: bool = True


def run_rounds(cfg: Config, sides: list[str], baseline: str | None, work: Path, prof: bool) -> Sides:
    names = {"queue": "fair queue", "busy": f"before ({baseline}/catalog)" if baseline else "busy handler (no queue)"}
    codes = {"queue": None, "busy": baseline or ""}
    out = Sides(names, {s: [] for s in sides}, {s: [] for s in sides})
    for rnd in range(cfg.rounds):
        for side in sides if rnd % 2 == 0 else sides[::-1]:
            root = work / f"{side}-{rnd}"
            with Catalog.init(root) as cat:
                cat.register("load", h.TEXT_SCHEMA)
            run = run_side(root, cfg, codes[side], prof)
            with h.opened(root) as cat:
                ok, detail = check_exact(cat, "load", run)
            out.all_ok = out.all_ok and ok
            out.runs[side].append(run)
            out.verdicts[side].append(detail)
            h.log(f"  round {rnd} {names[side]}: {run.summary()}; {detail}")
    return out


def report_side(cfg: Config, s: Sides, side: str, report: h.Report) -> float:
    """The side's latency row; returns its commits/s over every round."""
    side_runs = s.runs[side]
    lat = [t for r in side_runs for t in r.latencies]
    commits = sum(r.commits for r in side_runs)
    rate = commits / sum(r.wall for r in side_runs)
    p50, p99, worst = statistics.median(lat), float(np.percentile(lat, 99)), max(lat)
    rounds = "; ".join(f"round {i}: {r.summary()}" for i, r in enumerate(side_runs))
    report.add(
        h.Result(
            "1",
            f"{s.names[side]}: append latency p99 / max, {cfg.procs} processes x {cfg.seconds:.0f} s "
            "of one-row appends to one SQLite catalog",
            f"{h.ms(p99)} / {h.ms(worst)}",
            f"<= {h.ms(P99_TARGET_S)} / <= {h.ms(MAX_TARGET_S)}",
            p99 <= P99_TARGET_S and worst <= MAX_TARGET_S if side == "queue" else None,
            f"{commits:,} commits, {rate:,.0f} commits/s; p50 {h.ms(p50)}, p90 {h.ms(float(np.percentile(lat, 90)))}, "
            f"p99.9 {h.ms(float(np.percentile(lat, 99.9)))}; {rounds}",
            data={
                "commits": commits,
                "rate": rate,
                "p50": p50,
                "p99": p99,
                "max": worst,
                "per_process": [len(w) for r in side_runs for w in r.per_worker],
                "walls": [r.wall for r in side_runs],
            },
        )
    )
    return rate


def bench_load(cfg: Config, sides: list[str], baseline: str | None, work: Path, report: h.Report, prof: bool) -> Sides:
    s = run_rounds(cfg, sides, baseline, work, prof)
    rates = {side: report_side(cfg, s, side, report) for side in sides}
    if len(sides) == 2:
        ratio = rates["queue"] / rates["busy"]
        report.add(
            h.Result(
                "1",
                f"throughput, {s.names['queue']} / {s.names['busy']}, same workload, same run",
                f"{ratio:.2f}x",
                ">= 1.00x",
                ratio >= 1.0,
                f"{rates['queue']:,.0f} vs {rates['busy']:,.0f} commits/s; {h.usable_cpus()} CPUs shared by "
                f"{cfg.procs} writers; rounds alternate which side goes first",
                data={"ratio": ratio},
            )
        )
    report.add(
        h.Result(
            "1",
            "every commit present exactly once, every side and round",
            "yes" if s.all_ok else "no",
            "all present",
            s.all_ok,
            next(iter(s.verdicts.values()))[-1],
            data={"verdicts": s.verdicts},
        )
    )
    return s


def parse_args(argv: list[str] | None) -> tuple[Any, Config, list[str]]:
    parser = h.arg_parser(__doc__, "10 s per side instead of 60 s")
    parser.add_argument("--sides", default="queue,busy", help="comma-separated: queue, busy (default both)")
    parser.add_argument("--seconds", type=float, help="seconds per side (overrides the mode's)")
    parser.add_argument("--rounds", type=int, help="rounds (default 1)")
    parser.add_argument("--procs", type=int, help="appending processes (default 8)")
    parser.add_argument("--profile", action="store_true", help="cProfile worker 0 of each side")
    parser.add_argument("--baseline", metavar="DIR", help="the 'busy' side runs DIR/catalog (the code before)")
    parser.add_argument("--workdir", metavar="DIR", default=tempfile.gettempdir(), help="where the catalogs go")
    args = parser.parse_args(argv)
    base = QUICK if args.quick else FULL
    cfg = Config(args.procs or base.procs, args.seconds or base.seconds, args.rounds or base.rounds)
    sides = [s for s in args.sides.split(",") if s]
    if not sides or any(s not in SIDES for s in sides):
        parser.error(f"--sides: choose from {', '.join(SIDES)}")
    if args.baseline and not (Path(args.baseline) / "catalog" / "__init__.py").is_file():
        parser.error(f"--baseline: no catalog package in {args.baseline}")
    if args.baseline:
        args.baseline = str(Path(args.baseline).resolve())
    return args, cfg, sides


def main(argv: list[str] | None = None) -> int:
    args, cfg, sides = parse_args(argv)
    baseline = f" (busy: {args.baseline}/catalog)" if args.baseline else " (busy: this code without its queue)"
    info = h.machine_header(sqlalchemy=sqlalchemy.__version__, sqlite=sqlite3.sqlite_version)
    h.print_header(
        "TFRecord Catalog: load (concurrent appends on one SQLite catalog)",
        info,
        f"catalogs under {args.workdir} on {h.filesystem_of(args.workdir)}",
        f"mode: {'quick' if args.quick else 'full'}: {cfg.procs} processes, {cfg.seconds:.0f} s per side, "
        f"{cfg.rounds} round(s), sides {', '.join(sides)}{baseline}; one durable one-row append "
        f"(token each) per commit; rows: id int64, text string, score float32, vec float32[{h.TEXT_VEC}]",
    )
    report = h.Report()
    started = time.perf_counter()
    done: list[Sides] = []
    with tempfile.TemporaryDirectory(prefix="bench_load_", dir=args.workdir) as d:

        def step() -> None:
            done.append(bench_load(cfg, sides, args.baseline, Path(d), report, args.profile))

        report.run([("1", "appends under load", step)], {"1"})
        report.summary(started)
    profiles = {done[0].names[s]: done[0].runs[s][-1].profile for s in sides if done[0].runs[s][-1].profile}
    for side, text in profiles.items():
        print(f"\n### {side}: worker 0 under cProfile\n\n```\n{text}\n```")
    report.write(args, info, cfg, profiles=profiles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
