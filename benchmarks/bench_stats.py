"""Statistics benchmarks: what computing each shard's feature statistics adds to appends and
migrations, statistics on against statistics off, side by side in one run.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_stats              # full run: 1,000,000 rows, 50,000 tensors
    .venv/bin/python -m benchmarks.bench_stats --quick      # 100,000 rows, 10,000 tensors
    .venv/bin/python -m benchmarks.bench_stats --json results.json
    .venv/bin/python -m benchmarks.bench_stats --profile all   # cProfile every statistics-on side, not only misses
    .venv/bin/python -m benchmarks.bench_stats --only frame,cast

The target (the statistics issue): statistics add at most 15% to append and migrate time, so
the ratio time off / time on is at least 1/1.15 (0.87). Both sides run the same call on the same
input: ``Dataset.append_rows(df)``, ``append_files([jsonl])``, ``append_files([tfrecord])``,
``append_rows({...numpy columns})`` of uint8 tensors, and ``Dataset.migrate`` (a quick
byte-level ``add=["z:int64=0"]`` and a row-level ``CastField``), and the issue's schemas
(``stats_schemas``: 1 KiB distinct bytes a row, 100 scalars, long lists, large tensors,
SequenceExamples; each appended, and migrated row-level), each into a new catalog (or,
for a migration, a fresh copy of the same dataset) made outside the timer, through a handle
whose ``statistics`` is True (the default) or False. Each comparison runs in interleaved rounds
whose order rotates, after an untimed warm-up run of each side whose output is checked: the
records decode to the input, both sides wrote the same bytes, the statistics-on side has one
statistics blob per live shard (decoded, its records counted) and the off side none. The
statistics' size in the manifest (``shard_stats`` in catalog.db) is reported per shard and per
feature. Progress goes to stderr, the report (markdown tables) to stdout. See
benchmarks/README.md.
"""

from __future__ import annotations

import contextlib
import cProfile
import gc
import io
import itertools
import json
import os
import pstats
import sqlite3
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks import harness as h
from benchmarks import stats_schemas as ss
from catalog import Catalog, Dataset, read_record_batches
from catalog.stats import DatasetStats
from catalog.stats import helper as helpers

NAME = "table"
IMAGES_NAME = "images"
SECTIONS = ("frame", "jsonl", "tfrecord", "tensor", "add", "cast", "blob", "wide", "lists", "big", "seq",
            "blob-mig", "wide-mig", "lists-mig", "big-mig", "seq-mig")  # fmt: skip
TARGET = 1 / 1.15  # time off / time on: statistics add at most 15%
CLASSES = [f"class_{i}" for i in range(10)]
TAG_VALUES, MAX_TAGS = 50, 5
IMAGE_SHAPE = (32, 32, 3)

# 8 columns: int64, float32, a string of 100 values, a string id per row, a variable-length
# int64 list, and a class label (int64 with names).
TABLE_SCHEMA: dict[str, Any] = {
    "features": {
        "id": {"dtype": "int64"},
        "clicks": {"dtype": "int64"},
        "score": {"dtype": "float32"},
        "price": {"dtype": "float32"},
        "category": {"dtype": "string"},
        "uid": {"dtype": "string"},
        "tags": {"dtype": "int64", "shape": [None]},
        "label": {"dtype": "int64", "names": CLASSES},
    }
}
IMAGE_SCHEMA: dict[str, Any] = {
    "features": {
        "image": {"dtype": "uint8", "shape": list(IMAGE_SHAPE), "encoding": "tensor"},
        "label": {"dtype": "int64", "names": CLASSES},
    }
}
CAST_SCRIPT = """
from catalog.migrate import CastField

operations = [CastField("clicks", {"dtype": "float32"})]
"""
QUICK_ADD = "z:int64=0"
RUN_IDS = itertools.count(1)  # every run's catalog has a name of its own


@dataclass
class Config(h.Racing):
    rows: int  # rows of the table (DataFrame, JSON Lines, TFRecord, the migrated dataset)
    images: int  # rows of the tensor dataset
    scale: float = 1.0  # of the issue's schemas' rows (WORKLOADS)


FULL = Config(rows=1_000_000, images=50_000, repeats=3, budget=60.0)
QUICK = Config(rows=100_000, images=10_000, repeats=3, budget=10.0, scale=0.2)


# --------------------------------------------------------------------------- the inputs


@dataclass
class Ragged:
    """A variable-length column, as lengths and every value in order."""

    lengths: np.ndarray
    flat: np.ndarray


Expected = dict[str, Any]  # an array, a Ragged, or a list of an array a row (stats_schemas.same)


def make_table(n: int, seed: int = 0) -> tuple[pd.DataFrame, Expected]:
    """The table as a DataFrame (floats float32-exact), and what decoding its records must give."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, MAX_TAGS + 1, n)
    flat = rng.integers(0, TAG_VALUES, int(lengths.sum()), dtype=np.int64)
    ends = np.cumsum(lengths).tolist()
    values = flat.tolist()
    tags = [values[e - k : e] for e, k in zip(ends, lengths.tolist(), strict=True)]
    df = pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64),
            "clicks": rng.integers(0, 1_000, n, dtype=np.int64),
            "score": rng.random(n).astype(np.float32),
            "price": np.round(rng.random(n) * 1_000, 2).astype(np.float32),
            "category": np.array(h.LABELS, dtype=object)[rng.integers(0, len(h.LABELS), n)],
            "uid": [f"user-{k:08x}" for k in rng.permutation(n).tolist()],
            "tags": tags,
            "label": rng.integers(0, len(CLASSES), n, dtype=np.int64),
        }
    )
    h.check(list(df.columns) == list(TABLE_SCHEMA["features"]), "the table's columns in the schema's order")
    expected: Expected = {k: df[k].to_numpy() for k in df.columns if k != "tags"}
    expected["tags"] = Ragged(lengths.astype(np.int64), flat)
    return df, expected


def write_jsonl(df: pd.DataFrame, path: Path) -> None:
    """The table as JSON Lines: every float the exact value of its float32."""
    columns = [df[k].tolist() for k in df.columns]
    names = list(df.columns)
    with open(path, "w", encoding="utf-8") as f:
        for row in zip(*columns, strict=True):
            f.write(json.dumps(dict(zip(names, row, strict=True)), separators=(",", ":")))
            f.write("\n")


def make_images(n: int, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "image": rng.integers(0, 256, (n, *IMAGE_SHAPE), dtype=np.uint8),
        "label": rng.integers(0, len(CLASSES), n, dtype=np.int64),
    }


def same_column(got: np.ndarray, want: np.ndarray | Ragged) -> bool:
    if isinstance(want, Ragged):
        lengths = np.fromiter(map(len, got), dtype=np.int64, count=len(got))
        flat = np.concatenate([np.asarray(v, dtype=np.int64) for v in got]) if len(got) else np.zeros(0, np.int64)
        return np.array_equal(lengths, want.lengths) and np.array_equal(flat, want.flat)
    return ss.same(got, want)


# --------------------------------------------------------------------------- statistics in the manifest


@dataclass
class StatsSize:
    """The statistics blobs of a catalog's live shards: bytes per shard, per feature."""

    records: list[int]  # per shard
    blob_bytes: list[int]  # per shard: length(data) in shard_stats
    feature_bytes: dict[str, list[int]] = field(default_factory=dict)  # zlib of the feature's JSON alone
    feature_json: dict[str, list[int]] = field(default_factory=dict)  # the feature's JSON, uncompressed
    kinds: dict[str, str] = field(default_factory=dict)


def live_stats(root: Path) -> list[tuple[str, int, bytes | None]]:
    """(path, records, statistics blob or None) of every live shard, from catalog.db."""
    db = sqlite3.connect(f"file:{root / 'catalog.db'}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT sh.path, sh.records, st.data FROM shards sh LEFT JOIN shard_stats st ON st.path = sh.path "
            "WHERE sh.removed_version IS NULL ORDER BY sh.seq"
        ).fetchall()
    finally:
        db.close()
    return [(str(p), int(n), None if d is None else bytes(d)) for p, n, d in rows]


def check_stats(who: str, root: Path, on: bool, features: set[str]) -> StatsSize | None:
    """Statistics on: one blob per live shard, decoding to its record count and the schema's
    features (returns their sizes). Off: no live shard has any."""
    shards = live_stats(root)
    h.check(bool(shards), f"{who}: no live shards")
    if not on:
        h.check(all(blob is None for _, _, blob in shards), f"{who}: statistics written with statistics off")
        return None
    size = StatsSize([], [])
    for path, records, blob in shards:
        h.check(blob is not None, f"{who}: shard {path} has no statistics")
        assert blob is not None
        stats = DatasetStats.from_bytes(blob, path)
        h.check(stats.records == records, f"{who}: {path}: statistics of {stats.records} records, not {records}")
        h.check(set(stats.features) == features, f"{who}: {path}: statistics of {sorted(stats.features)}")
        size.records.append(records)
        size.blob_bytes.append(len(blob))
        for name, fs in stats.features.items():
            text = json.dumps(fs.to_json(), separators=(",", ":")).encode("utf-8")
            size.feature_bytes.setdefault(name, []).append(len(zlib.compress(text, 6)))
            size.feature_json.setdefault(name, []).append(len(text))
            size.kinds[name] = fs.kind
    return size


# --------------------------------------------------------------------------- the sides


@dataclass
class Case:
    key: str
    title: str  # the call, on what
    records: int
    schema: dict[str, Any]  # the schema of the dataset written (after the migration, for one)
    expected: Expected
    run: Callable[[Dataset], object]
    pristine: Path | None = None  # a migration: the dataset every run migrates a fresh copy of
    first: list[bytes] | None = None  # the first side's records, which the other must equal
    dataset: str = NAME


class Side(h.Side):
    """One side of a case: statistics on or off, a new catalog (or a fresh copy) every run,
    made before and removed after the timed call; the CPU seconds of its timed runs (the
    statistics helper's included)."""

    def __init__(self, case: Case, on: bool, work: Path) -> None:
        super().__init__()
        self.case, self.on, self.work = case, on, work
        self.name = "on" if on else "off"
        self.out_bytes = 0  # the warm-up's shard bytes: how much memory to recycle before a run
        self.cat: Catalog | None = None
        self.ds: Dataset | None = None
        self.fresh: h.FreshCatalog | None = None
        self.size: StatsSize | None = None

    def prepare(self) -> None:
        if self.case.pristine is not None:
            self.fresh = h.FreshCatalog(self.case.pristine, self.work, self.case.dataset)
            self.fresh.prepare()
            self.cat, self.ds = self.fresh.cat, self.fresh.ds
        else:
            self.cat = Catalog.init(self.work / f"catalog-{next(RUN_IDS):04d}")
            self.ds = self.cat.register(self.case.dataset, self.case.schema)
        assert self.cat is not None
        self.cat.statistics = self.on

    def settle(self) -> None:
        os.sync()  # the last run's output on disk: no write-back lands in the next timed run
        h.recycle_memory(self.work, 2 * self.out_bytes)
        gc.collect()

    def timed(self) -> object:
        assert self.ds is not None
        c0, h0 = time.process_time(), helper_cpu()
        out = self.case.run(self.ds)
        if self.runs:  # the warm-up run is not timed
            self.cpu.append(time.process_time() - c0 + helper_cpu(h0))
        self.runs += 1
        return out

    def discard(self) -> None:
        if self.fresh is not None:
            self.fresh.discard()
        else:
            h.remove_catalog(self.cat)
        self.cat = self.ds = self.fresh = None

    def check(self, _out: object) -> None:
        """The records decode to the input and equal the other side's; the statistics are there (or not)."""
        assert self.cat is not None and self.ds is not None
        case, who = self.case, f"{self.case.key}, statistics {self.name}"
        ds = self.cat.dataset(self.ds.name)  # reopened: a migration made a new schema version
        files = ds.files()
        self.out_bytes = sum(os.path.getsize(p) for p in files)
        records = [r for p in files for batch in read_record_batches(p) for r in batch]
        h.check(len(records) == case.records, f"{who}: {len(records):,} records, not {case.records:,}")
        if case.first is None:
            cols = ds.schema.decode_batch(records)
            h.check(set(cols) == set(case.expected), f"{who}: decoded features {sorted(cols)}")
            for k, want in case.expected.items():
                h.check(same_column(cols[k], want), f"{who}: decoded {k!r} differs from the input")
            case.first = records
        else:
            h.check(records == case.first, f"{who}: the records differ from the other side's")
            case.first = None  # both sides checked: the reference is not needed any more
            h.log(f"  checked: both sides wrote the same {case.records:,} records, equal to the input")
        self.size = check_stats(who, self.cat.root, self.on, set(case.expected))

    def profile(self) -> str:
        """One run under cProfile, into a new catalog (or copy) made outside the profile."""
        self.prepare()
        self.settle()
        ds = self.ds
        assert ds is not None
        try:
            return stats_profile(lambda: self.case.run(ds))
        finally:
            self.discard()


# --------------------------------------------------------------------------- profiles


def helper_cpu(since: tuple[int, float] | None = None) -> Any:
    """The statistics helper's CPU seconds (catalog.stats.helper: a process of its own, which
    ``time.process_time`` does not count) as (pid, seconds); with ``since``, those spent since
    (all of a helper started meanwhile)."""
    helper = helpers.SLOT.helper
    pid = helper.proc.pid if helper is not None else 0
    seconds = 0.0
    if pid:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            seconds = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    if since is None:
        return pid, seconds
    return seconds - (since[1] if since[0] == pid else 0.0)


def stats_profile(fn: Callable[[], object], top: int = 15) -> str:
    """cProfile of one call: the ``top`` entries under catalog/stats by cumulative time, then
    the top 20 entries overall by cumulative time."""
    prof = cProfile.Profile()
    gc.collect()
    prof.enable()
    fn()
    prof.disable()
    parts = []
    for title, restrictions in (
        ("under catalog/stats, by cumulative time", ("/catalog/stats/", top)),
        ("overall, by cumulative time", (20,)),
    ):
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(*restrictions)
        lines = [
            line.rstrip().replace(str(h.REPO) + "/", "")
            for line in out.getvalue().splitlines()
            if line.strip() and not line.lstrip().startswith(("Ordered by", "List reduced"))
        ]
        parts.append(f"-- {title}:\n" + "\n".join(lines))
    return "\n\n".join(parts)


# --------------------------------------------------------------------------- the cases


@dataclass
class Inputs:
    work: Path
    df: pd.DataFrame | None = None
    table: Expected | None = None
    jsonl: Path | None = None
    tfrecord: Path | None = None
    pristine: Path | None = None
    images: dict[str, np.ndarray] | None = None
    workloads: dict[str, tuple[ss.Columns, Path | None]] = field(default_factory=dict)  # key -> columns, pristine

    def describe(self) -> list[str]:
        out = []
        if self.jsonl is not None:
            out.append(f"JSON Lines {self.jsonl.stat().st_size / h.MIB:.1f} MiB")
        if self.tfrecord is not None:
            out.append(f"TFRecord {self.tfrecord.stat().st_size / h.MIB:.1f} MiB (`ds.export` of the table)")
        if self.pristine is not None:
            with Catalog.open(self.pristine) as cat:
                files = cat.dataset(NAME).files()
            size = sum(os.path.getsize(p) for p in files)
            out.append(f"the dataset migrated: {len(files)} shard(s), {size / h.MIB:.1f} MiB, with statistics")
        return out


def build_pristine(df: pd.DataFrame, work: Path) -> Path:
    """The table appended with default shard sizes (statistics on, as `catalog append` does)."""
    pristine = work / "pristine"
    with Catalog.init(pristine) as cat:
        commit = cat.register(NAME, TABLE_SCHEMA).append_rows(df, message="benchmark data")
    h.check(commit.records == len(df), "the pristine dataset's records")
    (work / "migrations" / NAME).mkdir(parents=True)
    (work / "migrations" / NAME / "0001_cast_clicks.py").write_text(CAST_SCRIPT.lstrip(), encoding="utf-8")
    return pristine


def make_inputs(cfg: Config, work: Path, chosen: set[str]) -> Inputs:
    """Every input, made and page-cached before any timing."""
    inp = Inputs(work)
    if chosen & {"frame", "jsonl", "tfrecord", "add", "cast"}:
        t0 = time.perf_counter()
        inp.df, inp.table = make_table(cfg.rows)
        if "jsonl" in chosen:
            inp.jsonl = work / "table.jsonl"
            write_jsonl(inp.df, inp.jsonl)
            h.page_cache(inp.jsonl)
        if chosen & {"tfrecord", "add", "cast"}:
            inp.pristine = build_pristine(inp.df, work)
        if "tfrecord" in chosen:
            inp.tfrecord = work / "table.tfrecord"
            with Catalog.open(inp.pristine) as cat:
                cat.dataset(NAME).export(inp.tfrecord)
            h.page_cache(inp.tfrecord)
        h.log(f"[inputs] {cfg.rows:,}-row table and its files in {time.perf_counter() - t0:.1f} s")
    if "tensor" in chosen:
        inp.images = make_images(cfg.images)
    for key, w in ss.WORKLOADS.items():
        if chosen & {key, f"{key}-mig"}:
            t0 = time.perf_counter()
            columns = w.make(workload_rows(cfg, w), np.random.default_rng(2))
            pristine = build_workload(w, columns, work) if f"{key}-mig" in chosen else None
            inp.workloads[key] = (columns, pristine)
            h.log(f"[inputs] {key}: {workload_rows(cfg, w):,} rows in {time.perf_counter() - t0:.1f} s")
    return inp


def workload_rows(cfg: Config, w: ss.Workload) -> int:
    return max(1, round(w.rows * cfg.scale))


def build_workload(w: ss.Workload, columns: ss.Columns, work: Path) -> Path:
    """A catalog holding ``columns`` as dataset ``w.key`` (statistics on), and its migration script."""
    pristine = work / f"pristine-{w.key}"
    with Catalog.init(pristine) as cat:
        cat.register(w.key, w.schema).append_rows(columns, message="benchmark data")
    (work / "migrations" / w.key).mkdir(parents=True)
    (work / "migrations" / w.key / "0001_add_z.py").write_text(ss.ADD_SCRIPT.lstrip(), encoding="utf-8")
    return pristine


def migrated_expected(table: Expected, key: str) -> Expected:
    clicks = table["clicks"]
    assert isinstance(clicks, np.ndarray)
    if key == "add":
        return {**table, "z": np.zeros(len(clicks), dtype=np.int64)}
    return {**table, "clicks": clicks.astype(np.float32)}


def migrated_schema(key: str) -> dict[str, Any]:
    features = dict(TABLE_SCHEMA["features"])
    if key == "add":
        features["z"] = {"dtype": "int64", "default": 0}
    else:
        features["clicks"] = {"dtype": "float32"}
    return {"features": features}


def cases_of(inp: Inputs, cfg: Config, chosen: set[str]) -> list[Case]:
    rows, table, df = f"{cfg.rows:,} rows x 8 columns", inp.table, inp.df
    out: list[Case] = []
    if "frame" in chosen and table is not None and df is not None:
        frame = df
        out.append(Case("frame", f"`append_rows(df)`, DataFrame of {rows}", cfg.rows, TABLE_SCHEMA, table,
                        lambda ds: ds.append_rows(frame)))  # fmt: skip
    if "jsonl" in chosen and table is not None and inp.jsonl is not None:
        jsonl = inp.jsonl
        out.append(Case("jsonl", f"`append_files([jsonl])`, {rows}", cfg.rows, TABLE_SCHEMA, table,
                        lambda ds: ds.append_files([jsonl])))  # fmt: skip
    if "tfrecord" in chosen and table is not None and inp.tfrecord is not None:
        tfrecord = inp.tfrecord
        out.append(Case("tfrecord", f"`append_files([tfrecord])`, {rows} (decoded to validate)", cfg.rows,
                        TABLE_SCHEMA, table, lambda ds: ds.append_files([tfrecord])))  # fmt: skip
    if "tensor" in chosen and inp.images is not None:
        images = inp.images
        title = f"`append_rows({{image, label}})`, {cfg.images:,} uint8[32,32,3] tensors + label"
        expected: Expected = dict(images)
        out.append(Case("tensor", title, cfg.images, IMAGE_SCHEMA, expected, lambda ds: ds.append_rows(images),
                        dataset=IMAGES_NAME))  # fmt: skip
    migrations = inp.work / "migrations"
    out += workload_cases(inp, cfg, chosen)
    for key, title, run in (
        ("add", f'`migrate(add=["{QUICK_ADD}"])` (byte-level)', lambda ds: ds.migrate(migrations, add=[QUICK_ADD])),
        ("cast", '`migrate`: CastField("clicks", float32) (row-level)', lambda ds: ds.migrate(migrations)),
    ):
        if key in chosen and table is not None and inp.pristine is not None:
            out.append(Case(key, f"{title}, {rows}, 1 fresh copy a run", cfg.rows, migrated_schema(key),
                            migrated_expected(table, key), run, pristine=inp.pristine))  # fmt: skip
    return out


def appender(columns: ss.Columns) -> Callable[[Dataset], object]:
    return lambda ds: ds.append_rows(columns)


def workload_cases(inp: Inputs, cfg: Config, chosen: set[str]) -> list[Case]:
    """The issue's schemas (stats_schemas): an append of each, and a row-level migration."""
    out: list[Case] = []
    migrations = inp.work / "migrations"
    for key, (columns, pristine) in inp.workloads.items():
        w, n = ss.WORKLOADS[key], workload_rows(cfg, ss.WORKLOADS[key])
        want = ss.wanted(columns)
        if key in chosen:
            out.append(Case(key, f"`append_rows`, {n:,} rows: {w.title}", n, w.schema, want,
                            appender(columns), dataset=key))  # fmt: skip
        if pristine is not None:
            out.append(Case(f"{key}-mig", f'`migrate`: AddField("z", fn=...) (row-level), {n:,} rows: {w.title}', n,
                            ss.migrated_schema(w.schema), ss.migrated(want, n), lambda ds: ds.migrate(migrations),
                            pristine=pristine, dataset=key))  # fmt: skip
    return out


# --------------------------------------------------------------------------- a race


@dataclass
class Outcome:
    rows: list[h.Versus]  # the target's row, then the CPU row
    seconds: dict[str, dict[str, list[float]]]  # side -> wall / cpu -> seconds a run
    size: StatsSize | None
    profile: Callable[[], str]


def run_case(cfg: Config, case: Case, work: Path) -> Outcome:
    h.log(f"[{case.key}] {case.title} ...")
    started = time.perf_counter()
    sides = {"on": Side(case, True, work), "off": Side(case, False, work)}
    t = cfg.race({name: side.contender() for name, side in sides.items()})
    cpu = {name: side.cpu for name, side in sides.items()}
    head = h.versus(case.key, case.title, "rec/s", case.records, t["on"], t["off"], target=TARGET)
    cpu_row = h.cpu_row(case.key, f"(info) {case.key}: the same, CPU time", case.records, cpu, "on", "off")
    h.log_race(case.key, head, started, "off/on ", cpu_row)
    seconds = {name: {"wall": t[name].times, "cpu": cpu[name]} for name in sides}
    return Outcome([head, cpu_row], seconds, sides["on"].size, sides["on"].profile)


# --------------------------------------------------------------------------- report


def added(r: h.Versus, pick: Callable[[list[float]], float] = min) -> str:
    ratio = r.ratio(pick)
    if ratio is None:
        return "—"
    percent = (1 / ratio - 1) * 100
    return f"{0.0 if round(percent) == 0 else percent:+.0f}%"  # no "-0%"


def overhead_table(rows: list[h.Versus]) -> str:
    lines = [
        "| case | statistics on | statistics off | ratio off / on | statistics add | target | met? |",
        "|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for r in rows:
        on, off, ratio = min(r.catalog_times), min(r.peer_times or [0.0]), r.ratio()
        target = "—" if r.target is None else f">= {r.target:.2f}x (<= +15%)"
        met = {None: "—", True: "yes", False: "**NO**"}[r.met()]
        lines.append(
            f"| {r.benchmark} | {on:.2f} s ({h.fmt_rate(r.catalog_rate(), r.unit)}) | {off:.2f} s "
            f"({h.fmt_rate(r.peer_rate(), r.unit)}) | {'—' if ratio is None else f'{ratio:.2f}x'} | {added(r)} "
            f"| {target} | {met} |"
        )
    return "\n".join(lines)


def size_tables(outcomes: dict[str, Outcome]) -> str:
    """Bytes per shard of each case, then bytes per feature (mean over shards)."""
    sized = {k: o.size for k, o in outcomes.items() if o.size is not None}
    lines = [
        "| case | shards | records a shard | statistics bytes a shard (mean; min-max) | bytes a record |",
        "|---|---:|---:|---:|---:|",
    ]
    for key, s in sized.items():
        mean = statistics.mean(s.blob_bytes)
        lines.append(
            f"| {key} | {len(s.blob_bytes)} | {statistics.mean(s.records):,.0f} | {mean:,.0f}; "
            f"{min(s.blob_bytes):,}-{max(s.blob_bytes):,} | {sum(s.blob_bytes) / sum(s.records):.4f} |"
        )
    features = list(dict.fromkeys(name for s in sized.values() for name in s.feature_bytes))
    lines += ["", "| feature | " + " | ".join(sized) + " |", "|---|" + "---:|" * len(sized)]
    for name in features:
        cells = []
        for s in sized.values():
            b, j = s.feature_bytes.get(name), s.feature_json.get(name)
            cells.append("—" if not b or not j else f"{statistics.mean(b):,.0f} ({statistics.mean(j):,.0f})")
        kind = next(s.kinds[name] for s in sized.values() if name in s.kinds)
        lines.append(f"| {name} ({kind}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def print_results(results: list[h.Versus], outcomes: dict[str, Outcome], elapsed: float) -> list[h.Versus]:
    print(overhead_table(results))
    print(
        "\nratio = time with statistics off / time with statistics on (best round of each side); statistics add "
        "= time on / time off - 1. Both sides include validation, the shards' fsync and the commit; `(info)` "
        "rows compare the sides' CPU seconds (`time.process_time`, plus the statistics helper process's). "
        f"Total time {elapsed:.0f} s."
    )
    h.print_medians(results)
    print("\nSeconds per run (`time.perf_counter`; CPU: `time.process_time` plus the statistics helper's):\n")
    print(h.seconds_table({k: o.seconds for k, o in outcomes.items()}, "case", "statistics", share=False))
    print(
        "\nStatistics in the manifest (`SELECT length(data) FROM shard_stats`, the live shards of the warm-up run):\n"
    )
    print(size_tables(outcomes))
    print(
        "\nPer feature: bytes of the feature's statistics JSON compressed alone with zlib (level 6, as the blob), "
        "mean over shards; its uncompressed JSON in parentheses. A blob is the features' JSON compressed together, "
        "so it is a little smaller than their sum."
    )
    return h.versus_missed(results)


def header(cfg: Config, quick: bool) -> dict[str, Any]:
    return h.start_report(
        "TFRecord Catalog: statistics on vs off (appends and migrations)",
        dict(
            numpy=np.__version__,
            pandas=pd.__version__,
            datasketches=h.dist_version("datasketches"),
            **h.format_versions(),
        ),
        f"mode: {'quick' if quick else 'full'}: {cfg.rows:,} rows, {cfg.images:,} tensors; {cfg.rounds()} "
        "after a warm-up round",
        "table: id, clicks int64; score, price float32; category string (100 values); uid string (one a row); "
        f"tags int64[None] (0-{MAX_TAGS} values); label int64 with {len(CLASSES)} names",
        f"tensors: image uint8{list(IMAGE_SHAPE)} (`encoding: tensor`, random pixels), label int64 with names",
        "the issue's schemas (benchmarks/stats_schemas.py, rows x "
        + f"{cfg.scale:g}): "
        + "; ".join(f"{w.key}: {w.title}" for w in ss.WORKLOADS.values()),
        f"statistics helper: {'on' if helpers.SLOT.enabled else 'off (CATALOG_STATS_HELPER=0)'}; "
        f"cores this process may use: {len(os.sched_getaffinity(0))}",
        "every run: a new catalog, or a fresh copy of the dataset to migrate (made, and the last one removed, "
        "untimed), then `os.sync()`, recycled page-cache memory and `gc.collect()`, untimed",
    )


def run_all(cfg: Config, work: Path, chosen: set[str]) -> dict[str, Outcome]:
    inp = make_inputs(cfg, work, chosen)
    print("- inputs: " + ("; ".join(inp.describe()) or "tensors only") + "\n", flush=True)
    runs = work / "runs"
    runs.mkdir()
    h.freeze()
    return {case.key: run_case(cfg, case, runs) for case in cases_of(inp, cfg, chosen)}


def main(argv: list[str] | None = None) -> int:
    parser = h.arg_parser(
        __doc__, "100,000 rows and 10,000 tensors", "minimum timed rounds per comparison (default 3)",
        "the statistics-on side",
    )  # fmt: skip
    parser.add_argument("--only", metavar="CASES", help=f"comma-separated cases ({','.join(SECTIONS)}); default all")
    args = parser.parse_args(argv)
    cfg = h.chosen_config(args, QUICK, FULL)
    chosen = h.chosen_sections(args.only, SECTIONS)
    started = time.perf_counter()
    info = header(cfg, args.quick)
    with tempfile.TemporaryDirectory(prefix="bench_stats_", dir="/tmp") as d:
        outcomes = run_all(cfg, Path(d), chosen)
        results = [row for o in outcomes.values() for row in o.rows]
        elapsed = time.perf_counter() - started
        print_results(results, outcomes, elapsed)
        profiles = {key: o.profile for key, o in outcomes.items()}
        texts = h.versus_profiles(args.profile, results, profiles, "statistics on, cProfile")
    if args.json:
        sizes = {k: None if o.size is None else o.size.__dict__ for k, o in outcomes.items()}
        seconds = {k: o.seconds for k, o in outcomes.items()}
        h.write_report(args.json, info, args.quick, cfg, [r.to_json() for r in results], seconds=seconds,
                     stats_sizes=sizes, elapsed_seconds=elapsed, profiles=texts)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
