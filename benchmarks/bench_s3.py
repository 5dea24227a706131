"""Append and read throughput: shards on a loopback S3 server (moto) against a local data area.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_s3                 # ~256 MiB in 8 shards per append (about 3-5 minutes)
    .venv/bin/python -m benchmarks.bench_s3 --quick         # ~32 MiB in 4 shards (under a minute)
    .venv/bin/python -m benchmarks.bench_s3 --json out.json # also save every timing (and profiles) as JSON
    .venv/bin/python -m benchmarks.bench_s3 --profile all   # cProfile the S3 side of every row

The script starts moto's S3 server itself (``start_s3()`` of the harness: a thread of this
process, on loopback), creates a bucket, and makes two catalogs side by side, both with the
SQLite manifest: one with the local data area, one with ``storage="s3://<bucket>/data"``.
The same pre-encoded Examples (the harness's text rows: id int64, text string, score
float32, vec float32[8]) go to both. Rows measured, each side once per round in a rotating
order:

* append: ``Dataset.writer()`` + ``write_record`` of every record, commit included, into a new
  dataset (removed with ``drop`` + ``gc`` after each run, outside the timer);
* read: ``Dataset.records()`` over the whole dataset (the raw records, CRC-checked);
* read + decode: ``Dataset.batches(8192)`` (numpy columns);
* verify: ``Catalog.verify`` of the dataset (size, then a streamed CRC32C of every shard).

moto runs in this process on the same 2 CPUs and under the same GIL as the client, so the
S3 figures bound the client's overhead; they are not a real S3's throughput. For each S3 run
the script splits the process's CPU time into our thread (main), fsspec's I/O loop thread
(s3fs, aiobotocore, aiohttp) and the rest (moto's server threads), and counts the requests
moto served. Rows where S3 reaches less than half the local rate are profiled (cProfile of the
main thread) and printed under the table.
"""

from __future__ import annotations

import gc
import math
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import fsspec
from crc32c import crc32c

from benchmarks import harness as h
from catalog import Catalog, Commit, Schema

SIDES = ("local", "s3")
BUCKET = "bench-s3"
READ_BATCH = 8192  # rows per numpy batch in the decode row
PROFILE_BELOW = 0.5  # profile a row's S3 side when S3 / local falls below this (--profile auto)


@dataclass
class Config:
    records: int
    shards: int
    repeats: int  # timed rounds per row, each side once per round


FULL = Config(records=1_880_000, shards=8, repeats=5)  # ~256 MiB framed, 32 MiB shards
QUICK = Config(records=235_000, shards=4, repeats=3)  # ~32 MiB framed, 8 MiB shards


# --------------------------------------------------------------------------- the server's meters


class RequestCounter:
    """A WSGI wrapper around moto's app: requests served, by method, and the bytes sent up."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        method = str(environ.get("REQUEST_METHOD", "?"))
        query = str(environ.get("QUERY_STRING", ""))
        if "uploadId" in query or "uploads" in query:
            method += " (multipart)"
        elif method == "GET" and ("list-type" in query or "prefix" in query):
            method = "LIST"
        with self.lock:
            self.counts[method] += 1
            self.counts["bytes up"] += int(environ.get("CONTENT_LENGTH") or 0)
        return self.app(environ, start_response)

    def snapshot(self) -> Counter[str]:
        with self.lock:
            return Counter(self.counts)


def count_requests(server: Any) -> RequestCounter | None:
    """Wrap a counter around the server's app (None if moto's internals moved)."""
    wsgi = getattr(server, "_server", None)  # ThreadedMotoServer's werkzeug server
    if wsgi is None or not hasattr(wsgi, "app"):
        return None
    counter = RequestCounter(wsgi.app)
    wsgi.app = counter
    return counter


def thread_cpu(thread: threading.Thread | None) -> float:
    """CPU seconds of a running thread (0 when it is not there)."""
    if thread is None or thread.ident is None or not thread.is_alive():
        return 0.0
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
    except (AttributeError, OSError):  # not Linux, or the thread just ended
        return 0.0


def io_thread() -> threading.Thread | None:
    """fsspec's event-loop thread, where s3fs (aiobotocore, aiohttp) does its work."""
    return next((t for t in threading.enumerate() if t.name == "fsspecIO"), None)


@dataclass
class Run:
    """One timed run of one side."""

    seconds: float
    cpu_main: float  # this thread
    cpu_io: float  # fsspec's I/O loop thread
    cpu_process: float  # every thread of the process, moto's included
    requests: dict[str, int] = field(default_factory=dict)

    @property
    def cpu_rest(self) -> float:
        """moto's threads, mostly (the server thread and one thread per request)."""
        return max(self.cpu_process - self.cpu_main - self.cpu_io, 0.0)


class Meter:
    """Wall time, the CPU split and the requests of one timed call."""

    def __init__(self, counter: RequestCounter | None) -> None:
        self.counter = counter

    def __call__(self, fn: Callable[[], object]) -> tuple[Run, object]:
        gc.collect()
        io = io_thread()
        before = self.counter.snapshot() if self.counter else Counter()
        p0, m0, i0 = time.process_time(), time.thread_time(), thread_cpu(io)
        t0 = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - t0
        io = io or io_thread()  # the first S3 call may have started it
        p1, m1, i1 = time.process_time(), time.thread_time(), thread_cpu(io)
        after = self.counter.snapshot() if self.counter else Counter()
        requests = {k: v for k, v in (after - before).items() if v}
        return Run(seconds, m1 - m0, max(i1 - i0, 0.0), p1 - p0, requests), out


# --------------------------------------------------------------------------- results


@dataclass
class Row(h.TwoSides):
    ours = "s3"

    benchmark: str
    nbytes: int  # framed shard bytes per run
    records: int
    runs: dict[str, list[Run]] = field(default_factory=lambda: {s: [] for s in SIDES})
    extra: dict[str, list[Run]] = field(default_factory=dict)  # context contenders, e.g. local without fsync
    notes: list[str] = field(default_factory=list)
    profile: str = ""
    baseline: str = "local"  # the local contender that does the S3 side's work minus the transfer
    bare: str = "bare GET"  # the contender that transfers the same bytes with s3fs alone

    def best(self, side: str) -> Run:
        return min(self.runs.get(side) or self.extra[side], key=lambda r: r.seconds)

    def rate(self, side: str, pick: Callable[[list[float]], float] = min) -> float:
        """MB/s (10^6 bytes/s) of the best (or median) run."""
        return self.nbytes / pick([r.seconds for r in self.runs.get(side) or self.extra[side]]) / 1e6

    def cell(self, side: str) -> str:
        mbs = self.rate(side)
        return f"{mbs:,.0f} MB/s ({mbs * 1e6 / self.nbytes * self.records / 1e3:,.0f} k rec/s)"

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "rates_mb_s": {s: self.rate(s) for s in [*self.runs, *self.extra]},
            "median_rates_mb_s": {s: self.rate(s, statistics.median) for s in [*self.runs, *self.extra]},
            "ratio": self.ratio,
            "median_ratio": self.median_ratio,
        }


def requests_text(run: Run) -> str:
    return ", ".join(f"{k} {v:,}" if k != "bytes up" else f"{v / h.MIB:,.0f} MiB up" for k, v in run.requests.items())


def breakdown(rows: list[Row]) -> str:
    """Where each row's S3 time goes, from the best runs: the same work locally (the baseline), the
    bare transfer of the same bytes through s3fs, what is left, and the process's CPU split."""
    lines = [
        "| benchmark | S3 run | baseline (local) | bare transfer | S3 - baseline - transfer | CPU of the S3 run: "
        "main / s3fs loop / moto | CPU of the transfer: s3fs loop / moto | requests per S3 run |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        s3, base, raw = r.best("s3"), r.best(r.baseline), r.best(r.bare)
        left = s3.seconds - base.seconds - raw.seconds
        lines.append(
            f"| {r.benchmark.split(':')[0]} | {s3.seconds:.2f} s | {base.seconds:.2f} s ({r.baseline}) | "
            f"{raw.seconds:.2f} s ({r.bare}) | {left:+.2f} s | {s3.cpu_main:.2f} / {s3.cpu_io:.2f} / "
            f"{s3.cpu_rest:.2f} s | {raw.cpu_io:.2f} / {raw.cpu_rest:.2f} s | {requests_text(s3) or '?'} |"
        )
    return "\n".join(lines)


def verdict(r: Row) -> str:
    """Which of moto, s3fs and the catalog's own S3 path the S3 side's extra time is mostly in."""
    s3, base, raw = r.best("s3"), r.best(r.baseline), r.best(r.bare)
    extra = s3.seconds - base.seconds
    own = s3.seconds - base.seconds - raw.seconds
    parts = {"moto (its CPU during the bare transfer)": raw.cpu_rest, "s3fs (its loop's CPU)": raw.cpu_io}
    parts["the catalog's own S3 path (S3 run - baseline - transfer)"] = own
    top = max(parts, key=lambda k: parts[k])
    return (
        f"- {r.benchmark.split(':')[0]}: S3 takes {extra:+.2f} s over {r.baseline} ({s3.seconds:.2f} vs "
        f"{base.seconds:.2f} s). The bare transfer of the same bytes takes {raw.seconds:.2f} s, of which moto "
        f"used {raw.cpu_rest:.2f} s CPU and s3fs {raw.cpu_io:.2f} s; the catalog's S3 path adds {own:+.2f} s "
        f"beyond it. Largest: {top}."
    )


def table(rows: list[Row]) -> str:
    lines = ["| benchmark | local | S3 (moto, loopback) | S3/local | notes |", "|---|---:|---:|---:|---|"]
    for r in rows:
        notes = "; ".join([f"median ratio {r.median_ratio:.2f}x over {len(r.runs['s3'])} rounds", *r.notes])
        lines.append(f"| {r.benchmark} | {r.cell('local')} | {r.cell('s3')} | {r.ratio:.2f}x | {notes} |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- data and sides


def make_records(n: int) -> list[bytes]:
    """The text rows, encoded once (in chunks: two million row dicts would take gigabytes)."""
    schema = Schema.from_json(h.TEXT_SCHEMA)
    out: list[bytes] = []
    for start in range(0, n, 100_000):
        out += [schema.encode(r) for r in h.text_rows(min(100_000, n - start), seed=start, start=start)]
    return out


class Bare:
    """The transfer alone: s3fs put_file / cat_file of the same bytes, no catalog code."""

    def __init__(self, local_files: list[str], s3_files: list[str], nbytes: int) -> None:
        self.fs = fsspec.filesystem("s3")
        self.base = f"s3://{BUCKET}/bare"
        self.local_files = local_files
        self.s3_files = s3_files
        self.nbytes = nbytes
        self.runs = 0

    def put(self, keys: list[str]) -> int:
        for path, key in zip(self.local_files, keys, strict=True):
            self.fs.put_file(path, key)
        return len(keys)

    def timed_put(self, meter: Meter) -> Run:
        self.runs += 1
        keys = [f"{self.base}/{self.runs}-{i}.tfrecord" for i in range(len(self.local_files))]
        run, _ = meter(lambda: self.put(keys))
        h.check(sum(int(self.fs.size(k)) for k in keys) == self.nbytes, "bare PUT stored every byte")
        self.fs.rm(keys)
        return run

    def get(self) -> int:
        return sum(len(self.fs.cat_file(url)) for url in self.s3_files)


class Side:
    """One catalog (local data area, or S3) and the operations timed on it."""

    def __init__(self, name: str, root: Path, storage: str | None, records: list[bytes], cfg: Config) -> None:
        self.name = name
        self.cat = Catalog.init(root, storage=storage)
        self.records = records
        self.shard_records = math.ceil(len(records) / cfg.shards)
        self.shards = cfg.shards
        self.runs = 0

    def append(self, dataset: str, sync: bool = True) -> Commit:
        ds = self.cat.register(dataset, h.TEXT_SCHEMA)
        with ds.writer(message="bench", shard_size=1 << 40, shard_records=self.shard_records) as w:
            if not sync:
                h.skip_shard_fsync(w)
            for rec in self.records:
                w.write_record(rec)
        commit = w.commit
        h.check(commit is not None and commit.records == len(self.records), f"{self.name}: append committed all")
        assert commit is not None
        h.check(commit.shard_count == self.shards, f"{self.name}: {commit.shard_count} shards, not {self.shards}")
        return commit

    def remove(self, dataset: str) -> None:
        """Untimed: drop the dataset and delete its shards (gc), so runs do not pile up data."""
        self.cat.drop(dataset)
        self.cat.gc(grace=timedelta(0))

    def timed_append(self, meter: Meter, sync: bool = True) -> Run:
        self.runs += 1
        name = f"append-{self.runs}"
        run, _ = meter(lambda: self.append(name, sync))
        self.remove(name)
        return run

    def read_records(self) -> tuple[int, int]:
        n = nbytes = 0
        for rec in self.cat.dataset("events").records():
            n += 1
            nbytes += len(rec)
        return n, nbytes

    def read_batches(self) -> int:
        return sum(len(b["id"]) for b in self.cat.dataset("events").batches(READ_BATCH))

    def verify(self) -> int:
        rep = self.cat.verify(["events"])
        h.check(rep.ok and rep.checked == self.shards, f"{self.name}: verify report {rep.to_json()}")
        return int(rep.bytes)

    def digest(self) -> tuple[int, str]:
        """(records, crc32c of every record in order) of the read dataset."""
        crc, n = 0, 0
        for rec in self.cat.dataset("events").records():
            crc = crc32c(len(rec).to_bytes(8, "little") + rec, crc)
            n += 1
        return n, f"{crc:08x}"


def race(row: Row, contenders: dict[str, Callable[[], Run]], repeats: int) -> Row:
    """One untimed warm-up per contender, then ``repeats`` rounds in a rotating order."""
    for fn in contenders.values():
        fn()
    for rnd in range(repeats):
        for name in h.rotation(list(contenders), rnd):
            run = contenders[name]()
            (row.runs[name] if name in SIDES else row.extra.setdefault(name, [])).append(run)
    h.log(f"[done] {row.benchmark}: local {row.cell('local')}, S3 {row.cell('s3')}, S3/local {row.ratio:.2f}x")
    return row


def measured(meter: Meter, fn: Callable[[], object], expect: object) -> Callable[[], Run]:
    def go() -> Run:
        run, out = meter(fn)
        h.check(out == expect, f"result {out!r}, expected {expect!r}")
        return run

    return go


# --------------------------------------------------------------------------- the rows


def build_sides(cfg: Config, tmp: Path) -> tuple[dict[str, Side], dict[str, Any]]:
    """Both catalogs, each with the read dataset ``events`` (untimed; also warms every
    connection), checked to hold the same records."""
    h.log(f"encoding {cfg.records:,} records ...")
    records = make_records(cfg.records)
    fsspec.filesystem("s3", skip_instance_cache=True).mkdir(BUCKET)
    sides = {
        "local": Side("local", tmp / "local", None, records, cfg),
        "s3": Side("s3", tmp / "s3", f"s3://{BUCKET}/data", records, cfg),
    }
    facts: dict[str, Any] = {}
    for side in sides.values():
        t0 = time.perf_counter()
        commit = side.append("events")
        facts[f"{side.name}_build_seconds"] = time.perf_counter() - t0
        facts["bytes"] = commit.total_bytes
    for p in sides["local"].cat.dataset("events").files():
        h.page_cache(p)
    digests = {name: side.digest() for name, side in sides.items()}
    h.check(digests["local"] == digests["s3"], f"record streams differ: {digests}")
    h.check(digests["local"][0] == cfg.records, "records read back")
    facts["record_digest"] = digests["local"]
    h.log(f"datasets built: {cfg.records:,} records, {facts['bytes'] / h.MIB:.1f} MiB in {cfg.shards} shards per side")
    return sides, facts


def bench_append(cfg: Config, sides: dict[str, Side], bare: Bare, meter: Meter) -> Row:
    local, s3 = sides["local"], sides["s3"]
    nosync = "local, no fsync"
    row = Row(
        f"append {bare.nbytes / h.MIB:.0f} MiB, {cfg.shards} shards: writer + write_record, commit included",
        bare.nbytes,
        cfg.records,
        baseline=nosync,
        bare="bare PUT",
    )
    contenders = {
        "local": lambda: local.timed_append(meter),
        "s3": lambda: s3.timed_append(meter),
        nosync: lambda: local.timed_append(meter, sync=False),
        "bare PUT": lambda: bare.timed_put(meter),
    }
    race(row, contenders, cfg.repeats)
    row.notes.append(
        f"{nosync} {row.rate(nosync):,.0f} MB/s, S3 / that {row.rate('s3') / row.rate(nosync):.2f}x (the S3 path "
        "fsyncs nothing: it spools each shard to a temp file, PUTs it, HEADs it at commit)"
    )
    return row


def bench_reads(cfg: Config, sides: dict[str, Side], bare: Bare, meter: Meter) -> list[Row]:
    get = measured(meter, bare.get, bare.nbytes)
    expect = (cfg.records, bare.nbytes - 16 * cfg.records)
    read_rows = [
        ("read: Dataset.records() (raw records, CRC-checked)", "read_records", expect),
        (f"read + decode: Dataset.batches({READ_BATCH}) to numpy", "read_batches", cfg.records),
        ("verify: Catalog.verify (size + streamed CRC32C per shard)", "verify", bare.nbytes),
    ]
    rows = []
    for title, method, want in read_rows:
        row = Row(title, bare.nbytes, cfg.records)
        contenders = {n: measured(meter, getattr(s, method), want) for n, s in sides.items()}
        rows.append(race(row, {**contenders, "bare GET": get}, cfg.repeats))
    return rows


def run_all(cfg: Config, tmp: Path, meter: Meter, profile: str) -> tuple[list[Row], dict[str, Any]]:
    sides, facts = build_sides(cfg, tmp)
    local, s3 = sides["local"], sides["s3"]
    bare = Bare(local.cat.dataset("events").files(), s3.cat.dataset("events").files(), int(facts["bytes"]))
    rows = [bench_append(cfg, sides, bare, meter), *bench_reads(cfg, sides, bare, meter)]
    for r in rows:
        r.notes.append(f"{r.bare} (s3fs alone, same bytes) {r.rate(r.bare):,.0f} MB/s")
    profiled: list[Callable[[], object]] = [lambda: s3.timed_append(meter), s3.read_records, s3.read_batches, s3.verify]
    for r, fn in zip(rows, profiled, strict=True):
        if profile == "all" or (profile == "auto" and r.ratio < PROFILE_BELOW):
            h.log(f"[profile] S3 side of {r.benchmark} ...")
            r.profile = h.profile_text(fn)
    local.cat.close()
    s3.cat.close()
    return rows, facts


# --------------------------------------------------------------------------- main


def print_results(rows: list[Row], facts: dict[str, Any], elapsed: float) -> None:
    print(
        f"- building the read dataset (untimed): local {facts['local_build_seconds']:.2f} s, "
        f"S3 {facts['s3_build_seconds']:.2f} s; load average at the end {' '.join(map(str, h.loadavg()))}\n"
    )
    print(table(rows))
    print("\nWhere the S3 time goes (best runs; CPU seconds by thread; moto = the process's other threads):\n")
    print(breakdown(rows))
    print("\nVerdict, computed from the best runs:\n")
    print("\n".join(verdict(r) for r in rows))
    print(
        "\nMB/s = 10^6 bytes of shard files (framed records) / best round's seconds; S3/local above 1 means S3 "
        f"is faster. CPU seconds from this thread's, fsspec's I/O thread's and the process's clocks. "
        f"Total time {elapsed:.0f} s."
    )
    profiled = [r for r in rows if r.profile]
    if profiled:
        print("\n## Profiles (S3 side, main thread, cProfile)\n")
        print(
            "cProfile sees only the thread it runs in: time in s3fs (its event loop thread) and in moto (its "
            "server threads) shows up here as waiting, in fsspec.asyn.sync and threading waits.\n"
        )
        for r in profiled:
            print(f"### {r.benchmark}\n\n```\n{r.profile}\n```\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    parser = h.arg_parser(__doc__, "~32 MiB instead of ~256 MiB, 3 rounds", "timed rounds per row (default 5, quick 3)")
    parser.add_argument(
        "--profile",
        choices=("auto", "all", "none"),
        default="auto",
        help=f"cProfile the S3 side of rows below {PROFILE_BELOW}x of local (default), of every row, or none",
    )
    args = parser.parse_args(argv)
    cfg = h.chosen_config(args, QUICK, FULL)
    versions = ("s3fs", "fsspec", "aiobotocore", "botocore", "moto", "werkzeug")
    info = h.machine_header(**{name: h.dist_version(name) for name in versions}, sqlite=sqlite3.sqlite_version)
    started = time.perf_counter()
    server, _endpoint = h.start_s3()
    try:
        h.print_header(
            "TFRecord Catalog: append and read throughput, S3 (moto on loopback) vs local data area",
            info,
            f"local catalogs and the S3 spool on {info['tmp_fs']}",
            f"mode: {'quick' if args.quick else 'full'}: {cfg.records:,} records in {cfg.shards} shards per dataset; "
            f"{cfg.repeats} interleaved timed rounds after an untimed warm-up; best round shown",
            "the S3 server is moto's ThreadedMotoServer in this very process: it shares the 2 CPUs and the GIL "
            "with the client, so the S3 column bounds our client's overhead; it is not a real S3's throughput",
        )
        with tempfile.TemporaryDirectory(prefix="bench_s3_", dir="/tmp") as d:
            rows, facts = run_all(cfg, Path(d), Meter(count_requests(server)), args.profile)
    finally:
        server.stop()
    elapsed = time.perf_counter() - started
    print_results(rows, facts, elapsed)
    if args.json:
        extra = {"facts": facts, "loadavg_at_end": h.loadavg(), "elapsed_seconds": elapsed}
        h.write_report(args.json, info, args.quick, cfg, [r.to_json() for r in rows], **extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
