"""The benchmarks' shared harness: the one module every benchmark imports (``from benchmarks
import harness as h``), so that a benchmark module holds its own cases only.

Output (progress on stderr, the report on stdout), the machine header, options and the JSON
report, timing (interleaved rounds in a rotating order, with a warm-up, ``race``, or without,
``alternate``; a contender with a new output every run, ``Side``; cProfile), the two result
tables (catalog against a peer, and the measured/target table), the shared workloads,
TensorFlow as the peer, the CLI in process, worker processes started behind a common start
line, and throwaway servers (PostgreSQL from the machine's own binaries, moto's S3: those of
the test suite, ``tests/servers.py``). It uses the catalog's public API only, except
``skip_shard_fsync`` (see there).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import gc
import importlib
import importlib.metadata
import io
import json
import os
import platform
import pstats
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from google.protobuf.internal import api_implementation

from catalog import Catalog, Dataset
from tests import servers
from tests.servers import PG_SETTINGS, S3_ENV

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    Config = TypeVar("Config", bound=DataclassInstance)

REPO = Path(__file__).resolve().parent.parent  # holds benchmarks/ and catalog/
MIB = 1 << 20

# --------------------------------------------------------------------------- output


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def check(condition: bool, what: str) -> None:
    """A benchmark that did the wrong work stops instead of printing figures for it."""
    if not condition:
        raise SystemExit(f"sanity check failed: {what}")


def ms(seconds: float) -> str:
    v = seconds * 1e3
    if v >= 100:
        return f"{v:,.0f} ms"
    if v >= 10:
        return f"{v:.1f} ms"
    return f"{v:.2f} ms"


UNIT_SCALE = {"rec/s": 1.0, "MB/s": 1e6, "GB/s": 1e9}


def fmt_rate(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "GB/s":
        return f"{value:.2f} GB/s"
    if unit == "MB/s":
        return f"{value:,.0f} MB/s"
    if value >= 1e6:
        return f"{value / 1e6:.2f} M rec/s"
    if value >= 1e3:
        return f"{value / 1e3:.1f} k rec/s"
    return f"{value:.0f} rec/s"


# --------------------------------------------------------------------------- the machine


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 0


def loadavg() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def dist_version(*names: str) -> str:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "not installed"


def protobuf_version() -> str:
    """protobuf's version and which implementation it runs (upb, cpp or python)."""
    return f"{dist_version('protobuf')} ({api_implementation.Type()})"


def filesystem_of(path: str) -> str:
    """The mount (device, type) holding ``path``, from /proc/mounts."""
    best = ("?", "?", "")
    real = os.path.realpath(path)
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            for line in f:
                dev, mnt, fstype = line.split()[:3]
                if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best[2]):
                    best = (dev, fstype, mnt)
    except OSError:
        pass
    return f"{best[0]} ({best[1]}) mounted on {best[2] or '?'}"


STANDARD_KEYS = ("date", "nproc", "cpu", "platform", "python", "tmp_fs", "loadavg_at_start")


def machine_header(**versions: Any) -> dict[str, Any]:
    """What every report starts with: date, CPUs, platform, Python, then ``versions`` (the
    packages that benchmark depends on), /tmp's filesystem and the load at the start."""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "nproc": usable_cpus(),
        "cpu": cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        **versions,
        "tmp_fs": filesystem_of("/tmp"),
        "loadavg_at_start": loadavg(),
    }


def print_header(title: str, info: dict[str, Any], *lines: str) -> None:
    """The report's title, the machine, the versions in ``info``, then one bullet per line."""
    versions = ", ".join(f"{k} {v}" for k, v in info.items() if k not in STANDARD_KEYS and isinstance(v, str))
    print(f"# {title}\n")
    print(f"- date: {info['date']}")
    print(
        f"- machine: {info['nproc']} CPU(s), {info['cpu']} ({info['platform']}); load average at start "
        f"{' '.join(map(str, info['loadavg_at_start']))}"
    )
    print(f"- Python {info['python']}, {versions}")
    for line in lines:
        print(f"- {line}")
    print()
    sys.stdout.flush()


def start_report(title: str, versions: dict[str, Any], *lines: str, where: str = "temp catalogs") -> dict[str, Any]:
    """The machine header with ``versions``, printed under ``title``: where ``where`` lives (/tmp's
    file system) first, then ``lines``. Returns the header (the JSON report's "machine")."""
    info = machine_header(**versions)
    print_header(title, info, f"{where} on {info['tmp_fs']}", *lines)
    return info


def format_versions() -> dict[str, str]:
    """The versions under the catalog's own encoding, manifest and checksums."""
    return {"protobuf": protobuf_version(), "sqlite": sqlite3.sqlite_version, "crc32c": dist_version("crc32c")}


def arg_parser(
    doc: str | None, quick: str, repeats: str | None = None, profiled: str | None = None
) -> argparse.ArgumentParser:
    """The options every benchmark has: --quick (its meaning in ``quick``), --json PATH, and,
    with ``repeats``, --repeats N; with ``profiled`` (what is profiled, "the catalog side"),
    --profile missed|all|none for Report.print_profiles."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--json", metavar="PATH", help="also write every result and timing as JSON to PATH")
    if repeats is not None:
        parser.add_argument("--repeats", type=int, help=repeats)
    if profiled is not None:
        parser.add_argument(
            "--profile",
            choices=("missed", "all", "none"),
            default="missed",
            help=f"cProfile {profiled} of missed targets (default), of every target, or of none",
        )
    return parser


def chosen_sections(only: str | None, sections: tuple[str, ...]) -> set[str]:
    """The sections ``--only`` names (all of them without it); a name not among them stops the run."""
    chosen = set(only.split(",")) if only else set(sections)
    check(chosen <= set(sections), f"--only takes {', '.join(sections)}")
    return chosen


def options(
    argv: list[str] | None, quick_config: Config, full_config: Config, *parser_args: Any, **parser_kw: Any
) -> tuple[argparse.Namespace, Config]:
    """The command line (the options of ``arg_parser(*parser_args, **parser_kw)``) and the
    workload it picks (see chosen_config)."""
    args = arg_parser(*parser_args, **parser_kw).parse_args(argv)
    return args, chosen_config(args, quick_config, full_config)


def chosen_config(args: argparse.Namespace, quick: Config, full: Config) -> Config:
    """The workload ``--quick`` picks, with ``--repeats`` (when given) in place of its own."""
    return replace(quick if args.quick else full, **({"repeats": args.repeats} if args.repeats else {}))


def write_report(
    path: str, machine: dict[str, Any], quick: bool, config: Any, results: list[Any], **extra: Any
) -> None:
    """The run's JSON report (``--json PATH``): the machine, the mode, the config (a
    dataclass), the results (JSON-ready), then what else that benchmark keeps."""
    doc = {"machine": machine, "mode": "quick" if quick else "full", "config": asdict(config), "results": results}
    with open(path, "w", encoding="utf-8") as f:
        json.dump({**doc, **extra}, f, indent=1)
        f.write("\n")
    print(f"results written to {path}", file=sys.stderr)


# --------------------------------------------------------------------------- timing


@dataclass
class Timing:
    """One contender's round times (seconds)."""

    name: str
    times: list[float] = field(default_factory=list)

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def _nothing() -> None:
    return None


def _ignore(_out: object, _first: bool) -> None:
    return None


@dataclass
class Contender:
    """One side of a comparison. ``prepare``, ``settle`` and ``finish`` run outside the timer."""

    run: Callable[[], object]
    prepare: Callable[[], None] = _nothing
    finish: Callable[[object, bool], None] = _ignore  # (result, is the warm-up run)
    settle: Callable[[], object] = gc.collect  # last thing before the clock starts


def rotation(names: list[str], rnd: int) -> list[str]:
    """Round ``rnd``'s order: rotated by one every round, so noise and caches land on every side."""
    shift = rnd % len(names)
    return names[shift:] + names[:shift]


def _timed_once(c: Contender) -> tuple[float, object]:
    c.prepare()
    c.settle()
    t0 = time.perf_counter()
    out = c.run()
    return time.perf_counter() - t0, out


class Side:
    """A contender whose every run gets a new output: ``prepare`` makes it, ``run`` is the
    timed call (its CPU seconds, ``time.process_time``, kept but for the warm-up's), ``check``
    looks at the warm-up's output, ``discard`` removes each output after its run."""

    def __init__(self) -> None:
        self.runs = 0
        self.cpu: list[float] = []

    def prepare(self) -> None:
        pass

    def run(self) -> object:
        raise NotImplementedError

    def check(self, out: object) -> None:
        pass

    def discard(self) -> None:
        pass

    def settle(self) -> None:
        sync_and_collect()

    def timed(self) -> object:
        c0 = time.process_time()
        out = self.run()
        if self.runs:  # the warm-up run is not timed
            self.cpu.append(time.process_time() - c0)
        self.runs += 1
        return out

    def finish(self, out: object, first: bool) -> None:
        if first:
            self.check(out)
        self.discard()

    def contender(self) -> Contender:
        return Contender(run=self.timed, prepare=self.prepare, finish=self.finish, settle=self.settle)


@dataclass(kw_only=True)
class Racing:
    """The base of a benchmark's Config that races contenders with its own settings."""

    repeats: int  # timed rounds per comparison, at least
    budget: float  # seconds a comparison may spend on extra rounds (fast ones get more)
    max_rounds: int = 9

    def race(self, contenders: dict[str, Contender]) -> dict[str, Timing]:
        return race(contenders, self.repeats, self.budget, self.max_rounds)

    def rounds(self) -> str:
        """The header's words for it."""
        return f"best of {self.repeats} to {self.max_rounds} interleaved rounds (as many as fit in {self.budget:g} s)"


def race(
    contenders: dict[str, Contender], repeats: int, budget: float = 0.0, max_rounds: int = 15
) -> dict[str, Timing]:
    """Time every contender in interleaved rounds, the order rotating every round.

    An untimed warm-up run of every contender comes first (imports, first-use costs,
    connections) and is checked by each contender's ``finish``. It also sizes the run: at
    least ``repeats`` rounds, more (up to ``max_rounds``) while they fit in ``budget``
    seconds, so fast comparisons get more samples.
    """
    round_time = 0.0
    for c in contenders.values():
        seconds, out = _timed_once(c)
        round_time += seconds
        c.finish(out, True)
    rounds = max(repeats, min(max_rounds, int(budget / max(round_time, 1e-9))))
    timings = {name: Timing(name) for name in contenders}
    for rnd in range(rounds):
        for name in rotation(list(contenders), rnd):
            seconds, out = _timed_once(contenders[name])
            timings[name].times.append(seconds)
            contenders[name].finish(out, False)
    return timings


def alternate(
    runs: Mapping[str, Callable[[int], object]], rounds: int, settle: Callable[[], object] = _nothing
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Every side once a round for ``rounds`` rounds, the order rotating every round, ``settle``
    untimed before each run; no warm-up (the caller's). ``runs[side](k)`` is the k-th run of
    all. Returns each side's wall seconds and CPU seconds (this process's) per run."""
    wall: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    k = 0
    for rnd in range(rounds):
        for name in rotation(list(runs), rnd):
            settle()
            c0 = time.process_time()
            t0 = time.perf_counter()
            runs[name](k)
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            k += 1
    return wall, cpu


def timed(fn: Callable[[], object], repeats: int, warmup: int = 1) -> tuple[list[float], object]:
    """Run ``fn`` ``warmup`` times untimed, then ``repeats`` times timed (gc.collect() before each)."""
    out: object = None
    for _ in range(warmup):
        out = fn()
    times = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return times, out


def freeze() -> None:
    """Collect, then move what is left (the inputs, TensorFlow's modules: what lives for the whole
    run) out of every later collection, so the timed runs' collections do not walk it."""
    gc.collect()
    gc.freeze()


def verdict(checks: dict[str, bool], passed: str = "") -> tuple[bool, str]:
    """(every check true, the words for it): ``passed`` (or the checks' names) or the failed ones."""
    bad = [k for k, ok in checks.items() if not ok]
    return not bad, (passed or "; ".join(checks) + ": all passed") if not bad else "FAILED: " + ", ".join(bad)


def cli_in_process(root: Path, *args: str) -> Callable[[], str]:
    """``catalog --catalog root ARGS`` in this process through typer's CliRunner (Catalog.open
    included in every call); returns its stdout, stops the run if it fails."""
    from typer.testing import CliRunner

    from catalog.cli import app

    runner = CliRunner()
    argv = ["--catalog", str(root), *args]

    def run() -> str:
        res = runner.invoke(app, argv)
        check(res.exit_code == 0, f"catalog {' '.join(args)} exited {res.exit_code}: {res.output[-500:]}")
        return res.stdout

    return run


def profile_run(
    prepare: Callable[[], object],
    settle: Callable[[], object],
    run: Callable[[], object],
    discard: Callable[[], object],
    profiler: Callable[[Callable[[], object]], str] | None = None,
) -> str:
    """One ``run`` under cProfile (or ``profiler``), its new catalog or file made (``prepare``),
    the machine settled, and the output removed (``discard``) outside the profile."""
    prepare()
    settle()
    try:
        return (profiler or profile_text)(run)
    finally:
        discard()


def profile_text(fn: Callable[[], object], top: int = 25) -> str:
    """cProfile of one call of ``fn``: the top ``top`` by cumulative time, then the top 15 by own time."""
    prof = cProfile.Profile()
    gc.collect()
    prof.enable()
    fn()
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(15)
    # Keep the tables, drop pstats' preamble lines about ordering and restriction.
    lines = [
        line.rstrip()
        for line in out.getvalue().splitlines()
        if line.strip() and not line.lstrip().startswith(("Ordered by", "List reduced"))
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- files


def page_cache(path: str | Path) -> int:
    """Read a file once so later reads are served from the page cache; returns its size."""
    n = 0
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(16 << 20):
            n += len(chunk)
    return n


def cache_tree(root: Path) -> int:
    """Read every file under ``root`` once (page cache); returns the bytes read."""
    return sum(page_cache(p) for p in sorted(root.rglob("*")) if p.is_file())


@contextmanager
def opened(root: Path) -> Iterator[Catalog]:
    """A fresh handle on the catalog at ``root``, as a new process would have it."""
    cat = Catalog.open(root)
    try:
        yield cat
    finally:
        cat.close()


def remove_catalog(cat: Catalog | None) -> None:
    """A run's new catalog closed and its folder removed (untimed, after the run)."""
    if cat is not None:
        cat.close()
        shutil.rmtree(cat.root)


class FreshCatalog:
    """Every run gets its own copy of a pristine catalog: copied, synced and page-cached untimed."""

    def __init__(self, pristine: Path, work: Path, dataset: str) -> None:
        self.pristine = pristine
        self.work = work
        self.dataset = dataset
        self.n = 0
        self.cat: Catalog | None = None
        self._ds: Dataset | None = None
        self.root: Path | None = None

    def prepare(self) -> None:
        self.n += 1
        self.root = Path(tempfile.mkdtemp(prefix=f"run{self.n:03d}-", dir=self.work))
        shutil.copytree(self.pristine, self.root, dirs_exist_ok=True)
        os.sync()
        cache_tree(self.root)
        self.cat = Catalog.open(self.root)
        self._ds = self.cat.dataset(self.dataset)

    @property
    def ds(self) -> Dataset:
        check(self._ds is not None, "FreshCatalog used before prepare()")
        assert self._ds is not None
        return self._ds

    def discard(self) -> None:
        if self.cat is not None:
            self.cat.close()
        if self.root is not None:
            shutil.rmtree(self.root)
        self.cat = self._ds = self.root = None


# --------------------------------------------------------------------------- catalog against a peer


@dataclass
class Versus:
    """A row of the catalog-against-peer table: rates of the best rounds and their ratio."""

    key: str  # short name: the median line, --profile, JSON
    benchmark: str
    unit: str  # "rec/s", "MB/s" or "GB/s"
    catalog_work: float  # records or bytes per catalog run
    catalog_times: list[float]
    peer_work: float = 0.0
    peer_times: list[float] | None = None
    target: float | None = None  # minimum ratio (or catalog rate when ``absolute``); None: information
    absolute: bool = False
    note: str = ""

    def _rate(self, work: float, seconds: float) -> float:
        return work / seconds / UNIT_SCALE[self.unit]

    def catalog_rate(self, pick: Callable[[list[float]], float] = min) -> float:
        """The catalog's rate from its best round, or from the round ``pick`` chooses."""
        return self._rate(self.catalog_work, pick(self.catalog_times))

    def peer_rate(self, pick: Callable[[list[float]], float] = min) -> float | None:
        return None if not self.peer_times else self._rate(self.peer_work, pick(self.peer_times))

    def ratio(self, pick: Callable[[list[float]], float] = min) -> float | None:
        peer = self.peer_rate(pick)
        return None if peer is None else self.catalog_rate(pick) / peer

    def met(self, pick: Callable[[list[float]], float] = min) -> bool | None:
        value = self.catalog_rate(pick) if self.absolute else self.ratio(pick)
        return None if self.target is None or value is None else value >= self.target

    @property
    def rounds(self) -> int:
        return len(self.catalog_times)

    def to_json(self) -> dict[str, Any]:
        med = statistics.median
        return {
            **asdict(self),
            "catalog_rate": self.catalog_rate(),
            "peer_rate": self.peer_rate(),
            "catalog_median_rate": self.catalog_rate(med),
            "peer_median_rate": self.peer_rate(med),
            "ratio": self.ratio(),
            "median_ratio": self.ratio(med),
            "met": self.met(),
            "median_met": self.met(med),
        }


def versus(key: str, benchmark: str, unit: str, work: float, cat: Timing, peer: Timing | None, **kw: Any) -> Versus:
    """A row where both sides did the same ``work``."""
    return Versus(key, benchmark, unit, work, cat.times, work, None if peer is None else peer.times, **kw)


def versus_table(rows: list[Versus], peer: str) -> str:
    lines = [f"| benchmark | catalog | {peer} | ratio | target | met? |", "|---|---:|---:|---:|---:|:---:|"]
    for r in rows:
        ratio = r.ratio()
        target = "—" if r.target is None else f">= {r.target:g} {r.unit}" if r.absolute else f">= {r.target:g}x"
        met = {None: "—", True: "yes", False: "**NO**"}[r.met()]
        lines.append(
            f"| {r.benchmark} | {fmt_rate(r.catalog_rate(), r.unit)} | {fmt_rate(r.peer_rate(), r.unit)} "
            f"| {'—' if ratio is None else f'{ratio:.2f}x'} | {target} | {met} |"
        )
    return "\n".join(lines)


def median_line(rows: list[Versus]) -> str:
    """The same rows from the median rounds: a noise gauge (rounds in parentheses)."""
    parts = []
    for r in rows:
        if r.absolute:
            parts.append(f"{r.key} {r.catalog_rate(statistics.median):.2f} {r.unit} ({r.rounds})")
        elif (ratio := r.ratio(statistics.median)) is not None:
            parts.append(f"{r.key} {ratio:.2f}x ({r.rounds})")
    return "; ".join(parts)


def print_medians(rows: list[Versus], gauge: bool = True) -> None:
    """The median line under a race table; with ``gauge``, saying it is a noise gauge."""
    what = "a noise gauge; rounds in parentheses" if gauge else "rounds in parentheses"
    print(f"\nfrom the medians instead of the best rounds ({what}): " + median_line(rows))


def cpu_row(key: str, title: str, work: float, cpu: dict[str, list[float]], ours: str, peer: str) -> Versus:
    """The ``(info)`` row setting the two sides' CPU seconds (``cpu[side]``) against each other."""
    return versus(f"{key}-cpu", title, "rec/s", work, Timing(ours, cpu[ours]), Timing(peer, cpu[peer]))


def log_race(key: str, head: Versus, started: float, before: str = "", cpu: Versus | None = None) -> None:
    """A race's progress line: its ratio, the median one, its rounds (and its CPU row's ratio)."""
    rounds = f"{head.rounds} rounds" + ("" if cpu is None else f"; CPU {cpu.ratio():.2f}x")
    log(
        f"[{key}] {before}{head.ratio():.2f}x (median {head.ratio(statistics.median):.2f}x, {rounds}) "
        f"in {time.perf_counter() - started:.0f} s"
    )


class TwoSides:
    """A result row of two sides' runs (seconds): ``ratio`` and ``median_ratio`` of ``ours``
    against ``base``, from ``rate(side, pick)``."""

    ours = ""
    base = "local"

    def rate(self, side: str, pick: Callable[[list[float]], float] = min) -> float:
        raise NotImplementedError

    @property
    def ratio(self) -> float:
        return self.rate(self.ours) / self.rate(self.base)

    @property
    def median_ratio(self) -> float:
        return self.rate(self.ours, statistics.median) / self.rate(self.base, statistics.median)


def seconds_table(seconds: dict[str, dict[str, dict[str, list[float]]]], row: str, side: str, share: bool) -> str:
    """Each side's wall and CPU seconds per run (``seconds[row][side]["wall" | "cpu"]``), best and
    median; with ``share``, the share of a core the CPU seconds are (above 100%: threads, such
    as pyarrow's, ran beside the main one)."""
    med = statistics.median
    lines = [
        f"| {row} | {side} | wall, best | wall, median | CPU, best | CPU, median |"
        + (" CPU / wall (medians) |" if share else ""),
        "|---|---|---:|---:|---:|---:|" + ("---:|" if share else ""),
    ]
    for key, sides in seconds.items():
        for name, s in sides.items():
            wall, cpu = s["wall"], s["cpu"]
            line = f"| {key} | {name} | {min(wall):.2f} s | {med(wall):.2f} s | {min(cpu):.2f} s | {med(cpu):.2f} s |"
            lines.append(line + (f" {med(cpu) / med(wall):.0%} |" if share else ""))
    return "\n".join(lines)


def sync_and_collect() -> None:
    """Before a timed run: the last run's output on disk (no write-back lands in the next timed
    run), and the garbage collected."""
    os.sync()
    gc.collect()


# --------------------------------------------------------------------------- measured against a target


@dataclass
class Result:
    section: str
    benchmark: str
    measured: str
    target: str = "—"
    met: bool | None = None
    note: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Profiled:
    """The catalog side of a result row, runnable again under cProfile."""

    benchmark: str
    fn: Callable[[], object]
    what: str


class Report:
    """The measured/target table, built section by section, and the profiles of its rows."""

    def __init__(self) -> None:
        self.results: list[Result] = []
        self.profiles: dict[str, Profiled] = {}
        self.catalogs: list[Catalog] = []  # kept open for the profiles; closed before the temp directory goes

    def add(self, result: Result, profile: Callable[[], object] | None = None, what: str = "") -> Result:
        self.results.append(result)
        if profile is not None:
            self.profiles[result.benchmark] = Profiled(result.benchmark, profile, what)
        status = {None: "info", True: "met", False: "MISSED"}[result.met]
        log(f"[{status}] {result.benchmark}: {result.measured} (target {result.target})")
        return result

    def run(self, steps: list[tuple[str, str, Callable[[], None]]], sections: set[str]) -> None:
        """Run the (key, title, step) sections asked for, logging each one's time."""
        for key, title, step in steps:
            if key not in sections:
                continue
            t0 = time.perf_counter()
            log(f"[{key}] {title} ...")
            step()
            log(f"[{key}] done in {time.perf_counter() - t0:.1f} s")

    def summary(self, started: float, note: str = "") -> list[Result]:
        """Print the table and the count of targets met; returns the missed rows."""
        lines = ["| # | benchmark | measured | target | met? | notes |", "|---|---|---:|---:|:---:|---|"]
        for r in self.results:
            met = {None: "—", True: "yes", False: "**NO**"}[r.met]
            lines.append(f"| {r.section} | {r.benchmark} | {r.measured} | {r.target} | {met} | {r.note} |")
        print("\n".join(lines))
        missed = [r for r in self.results if r.met is False]
        print(
            f"\n{sum(r.met is True for r in self.results)} targets met, {len(missed)} missed"
            + (": " + "; ".join(r.benchmark for r in missed) if missed else "")
            + f". Run time {time.perf_counter() - started:.0f} s{note}."
        )
        sys.stdout.flush()
        return missed

    def conclude(self, started: float, choice: str, note: str = "") -> dict[str, str]:
        """The table, then the profiles ``choice`` names (see print_profiles); returns their texts."""
        return self.print_profiles(choice, self.summary(started, note))

    def print_profiles(self, choice: str, missed: list[Result]) -> dict[str, str]:
        """cProfile the catalog side of the rows ``choice`` names (all, missed, none); rows
        sharing one profile function run it once. Returns the texts by benchmark."""
        chosen = {"all": self.results, "missed": missed, "none": []}[choice]
        rows = [r for r in chosen if r.benchmark in self.profiles]
        if rows:
            print("\n## Profiles (catalog side, cProfile)\n")
        texts: dict[str, str] = {}
        done: dict[int, str] = {}
        for r in rows:
            p = self.profiles[r.benchmark]
            if id(p.fn) not in done:
                log(f"[profile] {r.benchmark} ...")
                done[id(p.fn)] = profile_text(p.fn)
            texts[r.benchmark] = done[id(p.fn)]
            print(f"### {r.benchmark}: {p.what}\n\n```\n{texts[r.benchmark]}\n```\n")
            sys.stdout.flush()
        return texts

    def write(self, args: argparse.Namespace, machine: dict[str, Any], config: Any, **extra: Any) -> None:
        """The JSON report of the rows (see write_report), when ``--json PATH`` asks for one."""
        if args.json:
            write_report(args.json, machine, args.quick, config, [asdict(r) for r in self.results], **extra)

    def close(self) -> None:
        for c in self.catalogs:
            c.close()


def versus_missed(results: list[Versus]) -> list[Versus]:
    """Print the count of targets met (a race table's last line); returns the missed rows."""
    missed = [r for r in results if r.met() is False]
    print(
        f"\n{sum(r.met() is True for r in results)} targets met, {len(missed)} missed"
        + (": " + "; ".join(r.key for r in missed) if missed else "")
        + "."
    )
    sys.stdout.flush()
    return missed


def versus_profiles(
    choice: str, results: list[Versus], profiles: dict[str, Callable[[], str]], title: str = "cProfile"
) -> dict[str, str]:
    """Run and print the catalog side's profile of the rows ``choice`` names (all, missed,
    none); returns the texts by key."""
    keys = {
        "all": [r.key for r in results if r.target is not None],
        "missed": [r.key for r in results if r.met() is False],
        "none": [],
    }[choice]
    if keys:
        print(f"\n## Profiles (catalog side, {title})\n")
    texts: dict[str, str] = {}
    for key in keys:
        log(f"[profile] {key} ...")
        texts[key] = profiles[key]()
        print(f"### {key}\n\n```\n{texts[key]}\n```\n", flush=True)
    return texts


# --------------------------------------------------------------------------- workloads


def four_features(text: str, vec: int) -> dict[str, Any]:
    """The schema of the shared workloads' rows: id, the string feature ``text``, score, vec[``vec``]."""
    return {
        "features": {
            "id": {"dtype": "int64"},
            text: {"dtype": "string"},
            "score": {"dtype": "float32"},
            "vec": {"dtype": "float32", "shape": [vec]},
        }
    }


# "labeled": small tf.train.Examples of about 140 bytes (the format, migrate and dask benchmarks).
LABELED_VEC = 16
LABELS = [f"class_{i:03d}" for i in range(100)]
LABELED_SCHEMA = four_features("label", LABELED_VEC)


def labeled_rows(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """Rows of plain Python values (vec values are float32-exact, so every side agrees bit for bit)."""
    rng = np.random.default_rng(seed)
    scores = rng.random(n).astype(np.float32).tolist()
    vecs = rng.standard_normal((n, LABELED_VEC)).astype(np.float32).tolist()
    return [{"id": i, "label": LABELS[i % len(LABELS)], "score": scores[i], "vec": vecs[i]} for i in range(n)]


# "text": rows with a free-text field (the catalog, load, S3 and scale benchmarks).
TEXT_VEC = 8
TEXT_SCHEMA = four_features("text", TEXT_VEC)
WORDS = [
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta",
    "iota", "kappa", "lambda", "mu", "nu", "xi", "omicron", "pi",
]  # fmt: skip


def text_rows(n: int, seed: int = 0, start: int = 0) -> list[dict[str, Any]]:
    """Rows of plain Python values; floats have at most 6 decimals, as JSON from elsewhere would."""
    rng = np.random.default_rng(seed)
    scores = np.round(rng.random(n), 6).tolist()
    vecs = np.round(rng.standard_normal((n, TEXT_VEC)), 6).tolist()
    lengths = rng.integers(2, 9, n).tolist()
    rows = []
    for i in range(n):
        k = start + i
        text = " ".join(WORDS[(k + j) % len(WORDS)] for j in range(lengths[i])) + f" #{k}"
        rows.append({"id": k, "text": text, "score": scores[i], "vec": vecs[i]})
    return rows


# One migration script per kind, on the labeled rows (migrations/<dataset>/0001_<kind>.py).
# Workers import the script themselves, so the Transform's function is defined in it.
HEIGHT = 256
ENRICHED_SCHEMA: dict[str, Any] = {"features": {**LABELED_SCHEMA["features"], "magnitude": {"dtype": "float32"}}}
MIGRATION_SCRIPTS: dict[str, str] = {
    "add": f"""
from catalog.migrate import AddField

operations = [AddField("height", {{"dtype": "int64"}}, default={HEIGHT})]
""",
    "rename": """
from catalog.migrate import RenameField

operations = [RenameField("label", "category")]
""",
    "drop": """
from catalog.migrate import DropField

operations = [DropField("score")]
""",
    "transform": f"""
import math

import numpy as np

from catalog.migrate import Transform


def enrich(row):
    vec = row["vec"]
    row["magnitude"] = row["score"] * math.sqrt(float(np.dot(vec, vec)))
    row["label"] = row["label"].upper()
    return row


operations = [Transform(enrich, schema={ENRICHED_SCHEMA!r})]
""",
}


def write_migrations(root: Path, dataset: str, kinds: list[str]) -> dict[str, Path]:
    """One migrations folder per kind under ``root``, holding that kind's script for ``dataset``."""
    folders = {}
    for kind in kinds:
        folder = root / f"migrations-{kind}"
        (folder / dataset).mkdir(parents=True)
        (folder / dataset / f"0001_{kind}.py").write_text(MIGRATION_SCRIPTS[kind].lstrip(), encoding="utf-8")
        folders[kind] = folder
    return folders


def skip_shard_fsync(writer: Any) -> None:
    """Turn off the shard files' fsyncs of an open ``Dataset.writer()`` (setup and context
    rows only). The one internal the harness touches: ``Writer.sink`` has the only switch."""
    sink = writer.sink
    check(sink is not None, "the writer has no open shard sink")
    sink.sync = False


TENSOR_IMAGE_SHAPE = (32, 32, 3)
TENSOR_IMAGES_SCHEMA: dict[str, Any] = {
    "features": {
        "id": {"dtype": "int64"},
        "image": {"dtype": "uint8", "shape": list(TENSOR_IMAGE_SHAPE), "encoding": "tensor"},
        "label": {"dtype": "int64"},
    }
}


def write_tensor_images(cat: Catalog, n: int, shards: int, name: str = "images") -> Dataset:
    """``name``: ``n`` random 32x32x3 uint8 tensor images (``id`` = position, ``label`` = id % 10)
    in ``shards`` shards, file fsyncs off (setup only); the readers' and random access' workload."""
    ds = cat.register(name, TENSOR_IMAGES_SCHEMA)
    rng = np.random.default_rng(0)
    with ds.writer(shard_records=-(-n // shards)) as w:
        skip_shard_fsync(w)
        for start in range(0, n, 10_000):
            pixels = rng.integers(0, 256, (min(10_000, n - start), *TENSOR_IMAGE_SHAPE), dtype=np.uint8)
            for i, image in enumerate(pixels):
                w.write({"id": start + i, "image": image, "label": (start + i) % 10})
    return cat.dataset(name)


def bulk_shards(ds: Dataset, record: bytes, n: int, per_commit: int) -> int:
    """Add ``n`` one-record shards through the writer, ``per_commit`` per commit, file fsyncs off
    (setup only); returns the commits made. Everything else is the ordinary append path."""
    commits = 0
    left = n
    while left:
        k = min(per_commit, left)
        with ds.writer(message="bulk", shard_records=1) as w:
            skip_shard_fsync(w)
            for _ in range(k):
                w.write_record(record)
        check(w.commit is not None and w.commit.shard_count == k, "bulk commit shard count")
        left -= k
        commits += 1
    return commits


# --------------------------------------------------------------------------- TensorFlow as the peer

# TF 2.21 prints these through absl before TF_CPP_MIN_LOG_LEVEL applies.
TF_IMPORT_NOISE = ("All log messages before absl::InitializeLog()", "oneDNN custom operations are on")


def import_tensorflow() -> Any:
    """Import TensorFlow quietly: its C++ logging off, fd 2 captured during the import and
    passed through but for its import notices."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # read once, when TensorFlow loads
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow as tf
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode("utf-8", "replace").splitlines():
                if line.strip() and not any(noise in line for noise in TF_IMPORT_NOISE):
                    print(line, file=sys.stderr)
    return tf


def tf_write(tf: Any, path: str, records: list[bytes]) -> None:
    """Write ``records`` with TensorFlow's writer: the neutral ground both sides read."""
    with tf.io.TFRecordWriter(path) as w:
        for r in records:
            w.write(r)


# --------------------------------------------------------------------------- worker processes

_WORKER = "import sys\nfrom benchmarks.harness import worker_main\nworker_main(sys.argv[1:])\n"
_GO = "go\n"
_READY = "ready"


def worker_main(argv: list[str]) -> None:
    """A worker process's body: ``argv`` is ``module:function`` and its keyword arguments as
    JSON. The function gets a ``start`` callable to call once it is ready: it returns when
    every worker is. Its JSON-ready result goes to stdout, as the last line."""
    module, _, name = argv[0].partition(":")
    fn = getattr(importlib.import_module(module), name)

    def start() -> None:
        print(_READY, flush=True)
        if sys.stdin.readline() != _GO:
            raise SystemExit("the benchmark went away before the start")

    result = fn(start, **json.loads(argv[1]))
    print(json.dumps(result), flush=True)


class _Worker:
    """One worker process; its stderr goes to a file, shown when it fails."""

    def __init__(self, target: str, job: dict[str, Any], err: Path, cwd: Path, env: dict[str, str]) -> None:
        self.err = err
        argv = [sys.executable, "-c", _WORKER, target, json.dumps(job)]
        with open(err, "wb") as f:
            pipe = subprocess.PIPE
            self.proc = subprocess.Popen(argv, stdin=pipe, stdout=pipe, stderr=f, cwd=cwd, env=env, text=True)

    def failed(self) -> str:
        return f"a worker exited {self.proc.wait()}: {self.err.read_text()[-800:]}"

    def line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            check(False, self.failed())
        return line

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(_GO)
        self.proc.stdin.flush()

    def reap(self) -> None:
        if self.proc.poll() is None:  # only when the run failed: no worker outlives the benchmark
            self.proc.kill()
        self.proc.wait()


def _reap(workers: list[_Worker]) -> None:
    for w in workers:
        w.reap()


def run_workers(target: str, jobs: list[dict[str, Any]], cwd: Path = REPO) -> tuple[float, list[Any]]:
    """Run ``target`` (``module:function``) in one new process per entry of ``jobs`` (its
    keyword arguments), released together once all are ready. Returns the seconds from the
    release to the last result, and the results in ``jobs``' order. ``cwd`` is the first place
    the workers import ``catalog`` from (another checkout's, say); ``benchmarks`` comes from here."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    with ExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_workers_")))
        workers: list[_Worker] = []
        stack.callback(_reap, workers)
        workers += [_Worker(target, job, logs / f"{i}.err", cwd, env) for i, job in enumerate(jobs)]
        for w in workers:
            while w.line().strip() != _READY:
                pass
        t0 = time.perf_counter()
        for w in workers:
            w.go()
        results = [json.loads(w.line()) for w in workers]
        wall = time.perf_counter() - t0
        for w in workers:
            if w.proc.wait(timeout=60) != 0:
                check(False, w.failed())
    return wall, results


# --------------------------------------------------------------------------- throwaway servers
# The test suite's own set-up (tests/servers.py): one copy of it, which the package never imports.


def start_postgres(settings: dict[str, str] = PG_SETTINGS) -> servers.Postgres:
    """A throwaway cluster on a free loopback port with ``settings`` (the test suite's fast
    ones unless given); ``stop()`` removes it all. No server, no benchmark: it exits saying why."""
    try:
        return servers.start_postgres(settings)
    except servers.Unavailable as e:
        raise SystemExit(str(e)) from e


def start_s3() -> tuple[Any, str]:
    """moto's S3 server, a thread of this process on loopback, with the AWS environment a user
    would have pointed at it: (the ThreadedMotoServer, its endpoint)."""
    try:
        s3 = servers.start_s3()
    except servers.Unavailable as e:
        raise SystemExit(f"no S3 server: {e}") from e
    os.environ.update(S3_ENV)
    os.environ["AWS_ENDPOINT_URL"] = s3.endpoint
    return s3.server, s3.endpoint


RECYCLE_CHUNK = os.urandom(4 * MIB)


def recycle_memory(scratch: Path, nbytes: int) -> None:
    """Write ``nbytes`` into a scratch file and delete it: memory the next run's new page cache can reuse.

    Our VMs (Firecracker, free page reporting) hand memory the guest freed a few seconds ago
    back to the host; the guest's next use of it faults on the host, and writing into such
    fresh page cache runs at 0.2-0.5 GB/s instead of 2-4 GB/s. Without this step, a run that
    writes new data pays that VM cost, and how much of it varies run to run. Every contender
    of a comparison gets the same step.
    """
    if nbytes <= 0:
        return
    path = scratch / "recycle.scratch"
    with open(path, "wb") as f:
        for _ in range(0, nbytes, len(RECYCLE_CHUNK)):
            f.write(RECYCLE_CHUNK)
    path.unlink()  # never synced: its dirty pages are dropped, not written
