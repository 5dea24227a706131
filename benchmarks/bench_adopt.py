"""Adopt benchmark (issue 14, section 6): ``catalog adopt`` of a folder of about 1 GB of TFRecord
files against ``catalog verify`` of the same bytes, and the disk the adoption takes.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_adopt              # full run: 16 files, about 1 GB
    .venv/bin/python -m benchmarks.bench_adopt --quick      # 16 files, about 100 MB
    .venv/bin/python -m benchmarks.bench_adopt --json results.json
    .venv/bin/python -m benchmarks.bench_adopt --profile all   # cProfile every adopt side, not only misses
    .venv/bin/python -m benchmarks.bench_adopt --only tfdata --baseline ../main   # also race another checkout's adopt

The target: adopt (every record's framing and CRCs checked and decoded against the schema, the
records counted, the whole file CRC32C-checksummed, a record index written) runs at >= 0.8x the
speed of verify (whole-file CRC32C and record index check) on the same files, and copies no
byte. Both sides are timed in this process as library calls, the executor opened inside the
timer as the CLI's ``--workers N`` opens it (``open_executor("local", None, N, N)``; 1 worker
is no pool at all): ``Dataset.adopt([folder])`` into a new catalog made untimed every run,
against ``Catalog.verify()`` of a catalog that holds the same files adopted. Interleaved rounds
in a rotating order after an untimed warm-up run of each side; rows with a warm page cache, then,
where ``/proc/sys/vm/drop_caches`` is writable, with the caches dropped before every timed run.
The data area is measured after every adoption: it must hold the record indexes and the
catalog's marker and nothing else, and the adopted files must be left as they were. Progress
goes to stderr, the report (markdown) to stdout. See benchmarks/README.md.
"""

from __future__ import annotations

import gc
import hashlib
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import harness as h
from catalog import Catalog, Commit, Dataset, RecordWriter
from catalog.executors import open_executor
from catalog.tfrecord.example import encode_example

NAME = "adopted"
TARGET = 0.8  # adopt's speed / verify's speed, on the same bytes
PEER_TARGET = 1.0  # adopt's speed / tf.data's reading and parsing the same files (issue 34 section 3)
X_LEN = 240  # float32s a record: with the rest, about 1 KB a record
SCHEMA: dict[str, Any] = {
    "features": {
        "id": {"dtype": "int64"},
        "label": {"dtype": "int64"},
        "x": {"dtype": "float32", "shape": [X_LEN]},
        "text": {"dtype": "bytes"},
    }
}
# What inference makes of the records written (text is UTF-8, so a string; features by name).
INFERRED: dict[str, Any] = {
    "features": {
        "id": {"dtype": "int64"},
        "label": {"dtype": "int64"},
        "text": {"dtype": "string"},
        "x": {"dtype": "float32", "shape": [X_LEN]},
    }
}
FRAMING = 16  # bytes a record takes in a TFRecord file besides its payload (length, 2 CRCs)
INDEX_ENTRY = 8  # bytes a record takes in a record index
OWNER_MARKER = ".catalog-owner"
READ_CHUNK = 4 * h.MIB  # the bare read's chunk: verify's (catalog.storage.files.CHECKSUM_CHUNK)
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
RUN_IDS = itertools.count(1)  # every run's catalog has a name of its own


@dataclass
class Config(h.Racing):
    total_bytes: int  # the folder's size, about
    files: int
    workers: tuple[int, ...] = (1, 2)
    peer_files: int = 12  # the tf.data rows' folder (issue 34: 1 GB of 1 KB records in 12 files)
    peer_repeats: int = 3  # their timed rounds (an adoption into a new name is the slow side)


SECTIONS = ("verify", "tfdata")
FULL = Config(total_bytes=1_000_000_000, files=16, repeats=5, budget=30.0)
QUICK = Config(total_bytes=100_000_000, files=16, repeats=3, budget=5.0)


# --------------------------------------------------------------------------- the folder


@dataclass
class Folder:
    """The TFRecord files adopted: what was written, and their state before any adoption."""

    path: Path
    records: dict[str, int]  # real path -> records written
    bytes: int
    stats: dict[str, tuple[int, int, int, int]]  # real path -> (size, mtime_ns, inode, links)
    sample: Path  # the file whose sha256 is compared
    sha256: str

    @property
    def total_records(self) -> int:
        return sum(self.records.values())


def file_stats(paths: list[str]) -> dict[str, tuple[int, int, int, int]]:
    out = {}
    for p in paths:
        st = os.stat(p)
        out[p] = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_nlink)
    return out


def sha256_of(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while chunk := f.read(16 << 20):
            sha.update(chunk)
    return sha.hexdigest()


def text_values(rng: np.random.Generator, start: int, n: int) -> list[bytes]:
    lengths = rng.integers(2, 9, n).tolist()
    words = len(h.WORDS)
    return [
        (" ".join(h.WORDS[(start + i + j) % words] for j in range(lengths[i])) + f" #{start + i}").encode()
        for i in range(n)
    ]


def write_folder(cfg: Config, path: Path, seed: int = 0) -> Folder:
    """``cfg.files`` uncompressed TFRecord files of ~1 KB tf.train.Examples (id, label, x
    float32[240] of random values, text of 2-8 words), about ``cfg.total_bytes`` in all, synced."""
    rng = np.random.default_rng(seed)
    path.mkdir()
    probe = text_values(rng, 0, 1000)
    framed = FRAMING + np.mean(
        [len(encode_example({"id": i, "label": i, "x": np.zeros(X_LEN, np.float32), "text": t})) for i, t in
         enumerate(probe)]
    )  # fmt: skip
    per_file = max(1, round(cfg.total_bytes / cfg.files / framed))
    records: dict[str, int] = {}
    k = 0
    for f in range(cfg.files):
        xs = rng.standard_normal((per_file, X_LEN), dtype=np.float32)
        labels = rng.integers(0, 100, per_file).tolist()
        text = text_values(rng, k, per_file)
        out = path / f"part-{f:05d}-of-{cfg.files:05d}.tfrecord"
        with RecordWriter(out) as w:
            for i in range(per_file):
                w.write(encode_example({"id": k + i, "label": labels[i], "x": xs[i], "text": text[i]}))
        records[os.path.realpath(out)] = per_file
        k += per_file
    os.sync()  # on disk: dropping the caches drops clean pages only
    paths = sorted(records)
    sample = Path(paths[0])
    size = sum(os.stat(p).st_size for p in paths)
    return Folder(path, records, size, file_stats(paths), sample, sha256_of(sample))


def check_unchanged(folder: Folder, when: str) -> None:
    """The adopted files are the very files written: same size, mtime, inode and link count."""
    now = file_stats(sorted(folder.records))
    for p, before in folder.stats.items():
        h.check(now[p] == before, f"{when}: {p} changed (size, mtime_ns, inode, links) {before} -> {now[p]}")
    h.check(
        set(os.listdir(folder.path)) == {os.path.basename(p) for p in folder.records}, f"{when}: the folder's files"
    )


# --------------------------------------------------------------------------- disk use


@dataclass
class Usage:
    """The regular files under a folder: how many, their sizes, the disk they take (st_blocks)."""

    files: int = 0
    apparent: int = 0
    on_disk: int = 0
    names: list[str] = field(default_factory=list)  # relative paths

    def add(self, rel: str, st: os.stat_result) -> None:
        self.files += 1
        self.apparent += st.st_size
        self.on_disk += st.st_blocks * 512
        self.names.append(rel)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "names"}


def usage_of(root: Path, paths: list[str] | None = None) -> Usage:
    """Every file under ``root`` (links not followed: one counts as a file), or just ``paths``."""
    u = Usage()
    if paths is not None:
        for p in paths:
            u.add(p, os.lstat(p))
        return u
    for dirpath, dirs, files in os.walk(root):
        for name in sorted(files) + sorted(d for d in dirs if os.path.islink(os.path.join(dirpath, d))):
            full = os.path.join(dirpath, name)
            u.add(os.path.relpath(full, root), os.lstat(full))
    return u


@dataclass
class DataArea:
    """The data area after one adoption, checked to hold only the record indexes and the marker."""

    area: Usage
    indexes: Usage
    marker: Usage
    catalog: Usage  # the whole catalog folder, manifest included (context)

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k).to_json() for k in ("area", "indexes", "marker", "catalog")}


def measure_area(cat: Catalog, commit: Commit, folder: Folder) -> DataArea:
    """Disk use of the data area after ``commit`` (an adoption of ``folder``), which must have
    copied nothing: every shard adopted in place at its file, the area holding one record index
    per shard (8 bytes a record) and the catalog's marker, and no other file."""
    root = cat.data_root
    h.check(commit.shard_count == len(folder.records), f"{commit.shard_count} shards for {len(folder.records)} files")
    indexes = {}
    for s in commit.shards:
        h.check(s.location is not None and s.location in folder.records, f"shard {s.relpath} not adopted in place")
        h.check(s.records == folder.records[str(s.location)], f"{s.location}: {s.records} records registered")
        indexes[os.path.relpath(cat.store.index_url(s.relpath), root)] = s.records * INDEX_ENTRY
    area = usage_of(root)
    extra = sorted(set(area.names) - set(indexes) - {OWNER_MARKER})
    h.check(not extra, f"files in the data area besides the record indexes and {OWNER_MARKER}: {extra[:5]}")
    h.check(OWNER_MARKER in area.names, f"no {OWNER_MARKER} in the data area")
    idx = usage_of(root, [str(root / rel) for rel in sorted(indexes)])
    for rel, size in indexes.items():
        got = os.lstat(root / rel).st_size
        h.check(got == size, f"record index {rel}: {got} bytes for {size // INDEX_ENTRY} records")
    marker = usage_of(root, [str(root / OWNER_MARKER)])
    return DataArea(area, idx, marker, usage_of(cat.root))


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


# --------------------------------------------------------------------------- the sides


def drop_caches() -> None:
    """Clean pages only, so sync first: the next read of every file comes from the disk."""
    os.sync()
    with open(DROP_CACHES, "w", encoding="ascii") as f:
        f.write("3\n")


def cold_unavailable() -> str | None:
    """Why the cold rows cannot run here (None: they can); tried once, for real."""
    try:
        drop_caches()
    except OSError as e:
        return f"{DROP_CACHES} is not writable here ({e.strerror})"
    return None


class Cache:
    """What runs last before a timed run: warm (the files read once, untimed) or cold (dropped)."""

    def __init__(self, cold: bool, folder: Folder, reference: Reference | None) -> None:
        self.cold, self.folder, self.reference = cold, folder, reference

    @property
    def name(self) -> str:
        return "cold" if self.cold else "warm"

    def settle(self) -> None:
        gc.collect()
        if self.cold:
            drop_caches()
            return
        h.cache_tree(self.folder.path)  # also what another process may have pushed out since
        if self.reference is not None:
            h.cache_tree(self.reference.data_root)
        os.sync()  # the last run's writes on disk: no write-back lands in the next timed run


class AdoptSide:
    """``Dataset.adopt([folder])`` into a new catalog every run (made, and removed, untimed);
    with ``infer``, ``Catalog.adopt(NAME, [folder])`` instead: a name not registered yet, so
    the schema is inferred from the records first."""

    def __init__(self, work: Path, folder: Folder, workers: int, cache: Cache, infer: bool = False) -> None:
        self.work, self.folder, self.workers, self.cache, self.infer = work, folder, workers, cache, infer
        self.cat: Catalog | None = None
        self.ds: Dataset | None = None
        self.areas: list[DataArea] = []

    def prepare(self) -> None:
        self.cat = Catalog.init(self.work / f"adopt-{next(RUN_IDS):04d}")
        self.ds = None if self.infer else self.cat.register(NAME, SCHEMA)

    def run(self) -> Commit:
        assert self.cat is not None
        with open_executor("local", None, self.workers, self.workers) as ex:  # the CLI's --workers N
            if self.ds is None:
                return self.cat.adopt(NAME, [self.folder.path], executor=ex)
            return self.ds.adopt([self.folder.path], executor=ex)

    def finish(self, out: object, _first: bool) -> None:
        assert isinstance(out, Commit) and self.cat is not None
        h.check(out.records == self.folder.total_records, f"adopt registered {out.records:,} records")
        if self.infer:
            got = self.cat.dataset(NAME).schema.to_json()
            h.check(got == INFERRED, f"the inferred schema: {got}")
        self.areas.append(measure_area(self.cat, out, self.folder))
        check_unchanged(self.folder, f"after an adoption with {self.workers} worker(s)")
        self.discard()

    def discard(self) -> None:
        h.remove_catalog(self.cat)
        self.cat = self.ds = None

    def contender(self) -> h.Contender:
        return h.Contender(run=self.run, prepare=self.prepare, finish=self.finish, settle=self.cache.settle)

    def profile(self) -> str:
        """One adoption under cProfile, into a new catalog made (and the cache settled) outside it."""
        return h.profile_run(self.prepare, self.cache.settle, self.run, self.discard)


class VerifySide:
    """``Catalog.verify()`` of the reference catalog (the same files adopted), opened untimed."""

    def __init__(self, reference: Path, folder: Folder, workers: int, cache: Cache) -> None:
        self.reference, self.folder, self.workers, self.cache = reference, folder, workers, cache
        self.cat: Catalog | None = None

    def prepare(self) -> None:
        self.cat = Catalog.open(self.reference)

    def run(self) -> object:
        assert self.cat is not None
        with open_executor("local", None, self.workers, self.workers) as ex:
            return self.cat.verify(executor=ex)

    def finish(self, out: object, _first: bool) -> None:
        report: Any = out
        n = len(self.folder.records)
        h.check(report.ok and not report.problems, f"verify reports problems: {report.problems[:3]}")
        h.check(report.checked == n and report.bytes == self.folder.bytes, f"verify checked {report.checked} shards")
        h.check(not report.not_indexed, "verify: shards without a record index")
        assert self.cat is not None
        self.cat.close()
        self.cat = None

    def contender(self) -> h.Contender:
        return h.Contender(run=self.run, prepare=self.prepare, finish=self.finish, settle=self.cache.settle)


def bare_read(folder: Folder, cache: Cache) -> h.Contender:
    """Context: every file read once as verify reads it (4 MiB ``readinto`` one buffer), nothing checked."""
    buf = bytearray(READ_CHUNK)
    view = memoryview(buf)

    def run() -> int:
        n = 0
        for p in sorted(folder.records):
            with open(p, "rb", buffering=0) as f:
                while k := f.readinto(view):
                    n += k
        h.check(n == folder.bytes, f"read {n} bytes")
        return n

    return h.Contender(run=run, settle=cache.settle)


class TfDataSide:
    """The peer: what reading and parsing the same files takes without the catalog, in this
    process: ``TFRecordDataset(files).batch(1024).map(parse_example)`` with the full feature
    spec, iterated to the end (TensorFlow imported by this benchmark only, when it runs)."""

    BATCH = 1024

    def __init__(self, folder: Folder, cache: Cache) -> None:
        self.folder, self.cache = folder, cache
        self.tf = h.import_tensorflow()
        tf = self.tf
        self.spec = {
            "id": tf.io.FixedLenFeature([], tf.int64),
            "label": tf.io.FixedLenFeature([], tf.int64),
            "x": tf.io.FixedLenFeature([X_LEN], tf.float32),
            "text": tf.io.FixedLenFeature([], tf.string),
        }

    def run(self) -> int:
        tf, spec = self.tf, self.spec
        files = sorted(self.folder.records)
        ds = tf.data.TFRecordDataset(files).batch(self.BATCH).map(lambda b: tf.io.parse_example(b, spec))
        n = 0
        for parsed in ds:
            n += int(parsed["id"].shape[0])
        return n

    def finish(self, out: object, _first: bool) -> None:
        h.check(out == self.folder.total_records, f"tf.data read {out} records")

    def contender(self) -> h.Contender:
        return h.Contender(run=self.run, finish=self.finish, settle=self.cache.settle)


# A checkout's adopt run in a process of its own, as the benchmark's sides run it (a new catalog
# made untimed, one adoption timed by this process around one request): the code before a change
# races the code after it, in the same rounds, under the same load.
_BASELINE = """
import json, shutil, sys
from pathlib import Path
import catalog
from catalog import Catalog
root, schema, folder = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
if not catalog.__file__.startswith(root):
    sys.exit(3)
cat = ds = None
for line in sys.stdin:
    cmd, *arg = line.split()
    if cmd == "prepare":
        cat = Catalog.init(Path(arg[0]))
        ds = None if arg[1] == "1" else cat.register("adopted", schema)
        out = "ok"
    elif cmd == "run":
        out = str((cat.adopt("adopted", [folder]) if ds is None else ds.adopt([folder])).records)
    else:
        cat.close()
        shutil.rmtree(arg[0])
        out = "ok"
    print(out, flush=True)
"""


class BaselineSide:
    """``adopt`` (registered, or ``infer``: a new name) by the catalog of another checkout
    (``tree``), in a worker process started once; each run a new catalog, as AdoptSide's."""

    def __init__(self, tree: Path, work: Path, folder: Folder, cache: Cache, infer: bool = False) -> None:
        self.work, self.folder, self.cache, self.infer = work, folder, cache, infer
        root = str(tree.resolve())
        env = {**os.environ, "PYTHONPATH": root}
        args = [sys.executable, "-c", _BASELINE, root, json.dumps(SCHEMA), str(folder.path)]
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=root)
        self.at: Path | None = None

    def _ask(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        h.check(bool(answer), f"the baseline's worker ended (exit {self.proc.poll()})")
        return answer

    def prepare(self) -> None:
        self.at = self.work / f"baseline-{next(RUN_IDS):04d}"
        self._ask(f"prepare {self.at} {int(self.infer)}")

    def run(self) -> int:
        return int(self._ask("run"))

    def finish(self, out: object, _first: bool) -> None:
        h.check(out == self.folder.total_records, f"the baseline adopted {out} records")
        self._ask(f"discard {self.at}")
        check_unchanged(self.folder, "after the baseline's adoption")

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()

    def contender(self) -> h.Contender:
        return h.Contender(run=self.run, prepare=self.prepare, finish=self.finish, settle=self.cache.settle)


def run_peer(cfg: Config, work: Path, folder: Folder, cache: Cache, baseline: Path | None = None) -> Outcome:
    """adopt into a registered dataset, and into a new name (inferred), against tf.data; with
    ``baseline``, the same two by that checkout's code, in the same rounds."""
    key = f"tfdata-{cache.name}"
    h.log(f"[{key}] adopt (registered, new name) vs tf.data, {cache.name} page cache ...")
    started = time.perf_counter()
    registered, inferred = AdoptSide(work, folder, 1, cache), AdoptSide(work, folder, 1, cache, infer=True)
    sides = {
        "adopt": registered.contender(),
        "adopt new name": inferred.contender(),
        "tf.data": TfDataSide(folder, cache).contender(),
    }
    others = [BaselineSide(baseline, work, folder, cache, infer) for infer in (False, True)] if baseline else []
    for side, name in zip(others, ("adopt (baseline)", "adopt new name (baseline)"), strict=False):
        sides[name] = side.contender()
    try:
        t = h.race(sides, cfg.peer_repeats)
    finally:
        for side in others:
            side.close()
    label = f"{cache.name} page cache, 1 process"
    rows = [
        h.versus(key, f"{label}: `adopt` into a registered dataset vs tf.data", "MB/s", folder.bytes, t["adopt"],
                 t["tf.data"], target=PEER_TARGET),
        h.versus(f"{key}-new", f"{label}: `adopt` into a new name (schema inferred) vs tf.data", "MB/s",
                 folder.bytes, t["adopt new name"], t["tf.data"], target=PEER_TARGET),
    ]  # fmt: skip
    if baseline:
        rows += [
            h.versus(f"{key}-baseline", f"{label}: baseline `adopt` into a registered dataset vs tf.data", "MB/s",
                     folder.bytes, t["adopt (baseline)"], t["tf.data"], target=PEER_TARGET),
            h.versus(f"{key}-new-baseline", f"{label}: baseline `adopt` into a new name vs tf.data", "MB/s",
                     folder.bytes, t["adopt new name (baseline)"], t["tf.data"], target=PEER_TARGET),
        ]  # fmt: skip
    for row in rows:
        h.log_race(row.key, row, started)
    return Outcome(rows, {side: t[side].times for side in t}, registered.areas + inferred.areas)


# --------------------------------------------------------------------------- the runs


@dataclass
class Reference:
    """The catalog verify reads, made by one untimed adoption; checked once, and measured."""

    root: Path
    data_root: Path
    area: DataArea
    free_drop: int  # bytes the file system's free space fell by across that adoption
    adopt_seconds: float


def make_reference(work: Path, folder: Folder) -> Reference:
    """Adopt the folder once (1 worker, untimed) into the catalog verify reads, and check the
    result: the records written, every shard in place, the data area, verify's report."""
    root = work / "reference"
    with Catalog.init(root) as cat:
        ds = cat.register(NAME, SCHEMA)
        os.sync()
        free0 = free_bytes(work)
        t0 = time.perf_counter()
        commit = ds.adopt([folder.path])
        seconds = time.perf_counter() - t0
        os.sync()
        free_drop = free0 - free_bytes(work)
        h.check(commit.records == folder.total_records, f"adopt registered {commit.records:,} records")
        info = ds.info()
        h.check(info.records == folder.total_records and info.bytes == folder.bytes, "the adopted dataset's totals")
        area = measure_area(cat, commit, folder)
        report = cat.verify()
        h.check(report.ok and report.checked == len(folder.records), f"verify after adopt: {report.problems[:3]}")
        h.check(not report.not_indexed, "verify: shards without a record index")
    check_unchanged(folder, "after the reference adoption")
    h.log(
        f"[check] adopted {commit.records:,} records in {commit.shard_count} files ({seconds:.2f} s, untimed); "
        f"verify ok; data area {area.area.files} files, {area.area.on_disk:,} bytes on disk"
    )
    return Reference(root, cat.data_root, area, free_drop, seconds)


@dataclass
class Outcome:
    rows: list[h.Versus]
    seconds: dict[str, list[float]]  # side -> seconds of its timed runs
    areas: list[DataArea]


def run_pair(cfg: Config, work: Path, folder: Folder, ref: Reference, workers: int, cache: Cache) -> Outcome:
    """adopt against verify (and, with 1 worker, a bare read) with ``workers`` and ``cache``."""
    key = f"{cache.name}-{workers}"
    h.log(f"[{key}] adopt vs verify, {workers} worker(s), {cache.name} page cache ...")
    started = time.perf_counter()
    adopt = AdoptSide(work, folder, workers, cache)
    sides = {"adopt": adopt.contender(), "verify": VerifySide(ref.root, folder, workers, cache).contender()}
    if workers == 1:
        sides["bare read"] = bare_read(folder, cache)
    t = cfg.race(sides)
    default = " (the default)" if workers == 1 else ""
    label = f"{cache.name} page cache, {workers} worker{'s' if workers > 1 else ''}{default}"
    rows = [
        h.versus(key, f"{label}: `adopt` vs `verify`", "MB/s", folder.bytes, t["adopt"], t["verify"], target=TARGET)
    ]
    if "bare read" in t:
        rows.append(
            h.versus(f"{key} (read)", f"(info) {label}: `adopt` vs a bare read", "MB/s", folder.bytes, t["adopt"],
                   t["bare read"])
        )  # fmt: skip
    h.log_race(key, rows[0], started)
    return Outcome(rows, {side: t[side].times for side in t}, adopt.areas)


# --------------------------------------------------------------------------- report


def seconds_table(outcomes: dict[str, Outcome]) -> str:
    med = statistics.median
    lines = ["| row | side | best | median | rounds |", "|---|---|---:|---:|---:|"]
    for key, o in outcomes.items():
        for side, times in o.seconds.items():
            lines.append(f"| {key} | {side} | {min(times):.3f} s | {med(times):.3f} s | {len(times)} |")
    return "\n".join(lines)


def disk_table(folder: Folder, ref: Reference, outcomes: dict[str, Outcome]) -> str:
    src = usage_of(folder.path, sorted(folder.records))
    lines = [
        "| what | files | bytes | on disk (st_blocks x 512) | on disk / the folder's |",
        "|---|---:|---:|---:|---:|",
    ]

    def row(what: str, u: Usage) -> None:
        lines.append(f"| {what} | {u.files} | {u.apparent:,} | {u.on_disk:,} | {u.on_disk / src.on_disk:.3%} |")

    row("the folder adopted (its TFRecord files)", src)
    row("data area after `adopt`, 1 worker (all of it)", ref.area.area)
    row(f"  of which record indexes (`.index/...`, {INDEX_ENTRY} bytes a record)", ref.area.indexes)
    row(f"  of which `{OWNER_MARKER}`", ref.area.marker)
    for key, o in outcomes.items():
        if o.areas and key.endswith("-2"):
            row(f"data area after `adopt`, 2 workers ({key}, first run)", o.areas[0].area)
            break
    row("(context) the whole catalog folder, manifest included", ref.area.catalog)
    return "\n".join(lines)


def disk_json(folder: Folder, ref: Reference, outcomes: dict[str, Outcome]) -> dict[str, Any]:
    src = usage_of(folder.path, sorted(folder.records))
    runs = {k: [a.to_json() for a in o.areas] for k, o in outcomes.items()}
    return {"folder": src.to_json(), "reference": ref.area.to_json(), "free_drop": ref.free_drop, "runs": runs}


def print_disk(folder: Folder, ref: Reference, outcomes: dict[str, Outcome]) -> None:
    runs = sum(len(o.areas) for o in outcomes.values()) + 1
    print("\n## Disk use (zero bytes copied)\n")
    print(disk_table(folder, ref, outcomes))
    print(
        f"\nChecked after every adoption ({runs}, warm-ups included): every shard registered in place at its "
        f"file; the data area holds one record index per file, {INDEX_ENTRY} bytes a record, and "
        f"`{OWNER_MARKER}`, and no other file; the {len(folder.records)} files keep their size, mtime_ns, "
        f"inode and link count (no copy, no hard link, no rewrite); sha256 of `{folder.sample.name}` "
        f"unchanged at the end. Bytes copied: 0. The file system's free space fell by "
        f"{ref.free_drop / h.MIB:,.1f} MiB across the reference adoption (`statvfs` after `os.sync()`; "
        f"the whole file system, so other writers on the machine count too)."
    )


def print_results(results: list[h.Versus], outcomes: dict[str, Outcome], cold_note: str | None, elapsed: float) -> None:
    table = h.versus_table(results, "verify").splitlines()
    table[0] = "| benchmark | adopt | verify | speed ratio adopt / verify | target | met? |"
    print("\n".join(table))
    print(
        "\nspeed ratio = adopt's MB/s / verify's MB/s on the same bytes = verify seconds / adopt seconds (best "
        "round of each side; MB = 10^6 bytes of the folder). Above 1: adopt is faster. The `(info)` rows set "
        "adopt against reading the same files as verify reads them (4 MiB `readinto` into one buffer) with "
        "nothing checked, in the same race."
        + (f" Cold rows skipped: {cold_note}." if cold_note else "")
        + f" Total time {elapsed:.0f} s."
    )
    h.print_medians(results, gauge=False)
    print("\nSeconds per run (`time.perf_counter`):\n")
    print(seconds_table(outcomes))


def header(cfg: Config, quick: bool, cold_note: str | None) -> dict[str, Any]:
    tf_version = h.dist_version("tensorflow", "tensorflow-cpu")
    return h.start_report(
        "TFRecord Catalog: `adopt` against `verify` and against tf.data on the same bytes",
        dict(numpy=np.__version__, crc32c=h.dist_version("crc32c"), sqlalchemy=h.dist_version("SQLAlchemy"),
             tensorflow=tf_version),
        f"mode: {'quick' if quick else 'full'}: uncompressed TFRecord files of about {cfg.total_bytes / 1e6:,.0f} MB "
        f"({cfg.files} files for the verify rows, {cfg.peer_files} for the tf.data rows), tf.train.Examples of "
        f"about 1 KB a record: id, label int64, x float32[{X_LEN}] (random), text bytes (2-8 words)",
        f"verify rows: {cfg.rounds()} after an untimed warm-up run of every side; tf.data rows: "
        f"{cfg.peer_repeats} interleaved rounds after one",
        "sides timed in this process as library calls: `Dataset.adopt([folder], executor=ex)` into a new "
        "catalog (made untimed) against `Catalog.verify(executor=ex)` of a catalog holding the same files adopted; "
        "`ex` opened inside the timer as the CLI's `--workers N` opens it, `open_executor('local', None, N, N)` "
        "(1 worker: no pool); tf.data's `TFRecordDataset` + `batch(1024)` + `parse_example`",
        "warm: the files (and the verified catalog's data area) read once and `os.sync()` untimed before every "
        "timed run; cold: `sync; echo 3 > /proc/sys/vm/drop_caches` before every timed run"
        + (f" ({cold_note}: skipped)" if cold_note else ""),
        where="catalogs and the folder",
    )  # fmt: skip


def verify_rows(
    cfg: Config, work: Path, cold_note: str | None
) -> tuple[Folder, Reference, dict[str, Outcome], dict[str, Callable[[], str]]]:
    """The rows against verify (issue 14): their own folder of ``cfg.files`` files."""
    t0 = time.perf_counter()
    folder = write_folder(cfg, work / "folder")
    h.log(f"[folder] {len(folder.records)} files, {folder.bytes:,} bytes in {time.perf_counter() - t0:.1f} s")
    ref = make_reference(work, folder)
    h.cache_tree(folder.path)
    h.freeze()
    outcomes: dict[str, Outcome] = {}
    profiles: dict[str, Callable[[], str]] = {}
    for cold in (False, True) if cold_note is None else (False,):
        for workers in cfg.workers:
            cache = Cache(cold, folder, ref)
            out = run_pair(cfg, work, folder, ref, workers, cache)
            key = out.rows[0].key
            outcomes[key] = out
            profiles[key] = AdoptSide(work, folder, workers, cache).profile
    check_unchanged(folder, "at the end")
    h.check(sha256_of(folder.sample) == folder.sha256, f"{folder.sample}: its sha256 changed")
    return folder, ref, outcomes, profiles


def peer_rows(
    cfg: Config, work: Path, cold_note: str | None, baseline: Path | None = None
) -> tuple[Folder, dict[str, Outcome], dict[str, Callable[[], str]]]:
    """The rows against tf.data (issue 34 section 3): a folder of ``cfg.peer_files`` files;
    ``baseline``: another checkout whose adopt races too."""
    folder = write_folder(replace(cfg, files=cfg.peer_files), work / "peer-folder", seed=1)
    h.log(f"[peer folder] {len(folder.records)} files, {folder.bytes:,} bytes")
    outcomes: dict[str, Outcome] = {}
    profiles: dict[str, Callable[[], str]] = {}
    for cold in (False, True) if cold_note is None else (False,):
        cache = Cache(cold, folder, None)
        out = run_peer(cfg, work, folder, cache, baseline)
        outcomes[out.rows[0].key] = out
        profiles[out.rows[0].key] = AdoptSide(work, folder, 1, cache).profile
        profiles[out.rows[1].key] = AdoptSide(work, folder, 1, cache, infer=True).profile
    check_unchanged(folder, "at the end of the tf.data rows")
    return folder, outcomes, profiles


def print_peer(results: list[h.Versus], folder: Folder, outcomes: dict[str, Outcome], cold_note: str | None) -> None:
    print(f"\n## adopt against tf.data (issue 34 section 3): {len(folder.records)} files, {folder.bytes:,} bytes\n")
    table = h.versus_table(results, "tf.data").splitlines()
    table[0] = "| benchmark | adopt | tf.data | speed ratio adopt / tf.data | target | met? |"
    print("\n".join(table))
    print(
        "\nspeed ratio = tf.data seconds / adopt seconds on the same files (best round; the medians below). "
        "tf.data: `TFRecordDataset(files).batch(1024).map(parse_example)` with the full feature spec, iterated "
        "in this process; adopt: `Dataset.adopt([folder])` of a dataset registered untimed, and "
        "`Catalog.adopt(name, [folder])` of a name not registered (its schema inferred), each into a new "
        "catalog made untimed, with the default single worker (the statistics helper process beside it)."
        + (f" Cold rows skipped: {cold_note}." if cold_note else "")
    )
    h.print_medians(results, gauge=False)
    print("\nSeconds per run (`time.perf_counter`):\n")
    print(seconds_table(outcomes))


def main(argv: list[str] | None = None) -> int:
    parser = h.arg_parser(__doc__, "about 100 MB instead of 1 GB", "minimum timed rounds per row (default 5, 3 quick)",
                          "the adopt side")  # fmt: skip
    parser.add_argument("--only", help=f"the rows to run, of {', '.join(SECTIONS)} (default: all)")
    parser.add_argument(
        "--baseline", type=Path, metavar="TREE", help="the tf.data rows also race the adopt of the checkout at TREE"
    )
    args = parser.parse_args(argv)
    cfg, chosen = h.chosen_config(args, QUICK, FULL), h.chosen_sections(args.only, SECTIONS)
    started = time.perf_counter()
    extra: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench_adopt_", dir="/tmp") as d:
        work = Path(d)
        cold_note = cold_unavailable()
        info = header(cfg, args.quick, cold_note)
        results: list[h.Versus] = []
        profiles: dict[str, Callable[[], str]] = {}
        if "verify" in chosen:
            folder, ref, outcomes, profiles = verify_rows(cfg, work, cold_note)
            results += [r for o in outcomes.values() for r in o.rows]
            print_results(results, outcomes, cold_note, time.perf_counter() - started)
            print_disk(folder, ref, outcomes)
            extra["seconds"] = {k: o.seconds for k, o in outcomes.items()}
            extra["disk"] = disk_json(folder, ref, outcomes)
        if "tfdata" in chosen:
            peer_folder, peer_outcomes, peer_profiles = peer_rows(cfg, work, cold_note, args.baseline)
            peer = [r for o in peer_outcomes.values() for r in o.rows]
            print_peer(peer, peer_folder, peer_outcomes, cold_note)
            results += peer
            profiles.update(peer_profiles)
            extra["peer_seconds"] = {k: o.seconds for k, o in peer_outcomes.items()}
        h.versus_missed(results)
        texts = h.versus_profiles(
            args.profile, results, profiles, "cProfile of one `adopt`; with 2 workers it sees this process only"
        )
    if args.json:
        h.write_report(args.json, info, args.quick, cfg, [r.to_json() for r in results], cold_skipped=cold_note,
                       elapsed_seconds=time.perf_counter() - started, profiles=texts, **extra)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
