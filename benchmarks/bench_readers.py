"""The readers where training happens: ``ds.torch()`` in a PyTorch DataLoader against the PyPI
``tfrecord`` package and tf.data, ``ds.source()``'s random access, shuffle quality and resumption.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_readers                  # 1M small Examples, 200k images
    .venv/bin/python -m benchmarks.bench_readers --quick          # 100k and 20k, fewer rounds
    .venv/bin/python -m benchmarks.bench_readers --json out.json  # also save every timing (and profiles)
    .venv/bin/python -m benchmarks.bench_readers --profile all    # cProfile every catalog side (default: missed)

1. DataLoader, 2 workers, batch 256, shuffled, to tensors, over the same shard files:
   ``DataLoader(ds.torch(batch_size=256, shuffle=True), batch_size=None, num_workers=2)``
   against the ``tfrecord`` package's ``MultiTFRecordDataset`` (its own index files,
   ``shuffle_queue_size=1024``, ``DataLoader(batch_size=256, num_workers=2)``) and the issue's
   tf.data pipeline (``TFRecordDataset(files, num_parallel_reads=AUTOTUNE).shuffle(1024)
   .batch(256).map(parse_example, AUTOTUNE).prefetch(AUTOTUNE)`` iterated as numpy).
2. Random access from the page cache: ``src[i]`` at random ``i``, ``src[list of 256]``.
3. Shuffle quality of the orders section 1 delivered (records carry their position as ``id``).
4. Time to the first batch after ``load_state_dict`` at 90% of an epoch against at 0%.

TensorFlow and the ``tfrecord`` package cannot share a process: both register the
``tensorflow.Example`` messages in protobuf's default descriptor pool, and the second import
fails (``duplicate symbol 'tensorflow.BytesList'``). So the tf.data side runs in a process of
its own (started once, given one run at a time in the rotation), and every side times itself,
from building its pipeline to its last batch. The tfrecord package is imported where it is
used, never at module level: the tf.data process imports this module too.
"""

from __future__ import annotations

import gc
import importlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

from benchmarks import harness as h
from catalog import Catalog, Dataset
from catalog.schema import to_tf_feature_spec

BATCH = 256
WORKERS = 2
SHUFFLE_QUEUE = 1024  # the tfrecord package's shuffle_queue_size and tf.data's shuffle buffer
SHARDS = 16
SETTLE_SECONDS = 0.5  # before each timed run: the previous run's workers and threads wind down
RESUME_AT = 0.9
IMAGE_SHAPE = h.TENSOR_IMAGE_SHAPE
# The tfrecord package's description of each dataset's features ("int", "float", "byte").
TFR_DESCRIPTION = {
    "small": {"id": "int", "label": "byte", "score": "float", "vec": "float"},
    "images": {"id": "int", "image": "byte", "label": "int"},
}


@dataclass(frozen=True)
class Config:
    small_records: int
    images: int
    repeats: int  # timed rounds of a loader race (section 1): a round of 1M records takes a minute
    singles: int  # src[i] calls per run (section 2)
    lists: int  # src[list of 256] calls per run
    access_repeats: int
    resume_repeats: int
    budget: float  # seconds the fast races (sections 2 and 4) may take beyond their repeats


FULL = Config(1_000_000, 200_000, 3, singles=20_000, lists=200, access_repeats=5, resume_repeats=7, budget=20.0)
QUICK = Config(100_000, 20_000, 2, singles=5_000, lists=50, access_repeats=3, resume_repeats=3, budget=4.0)


# --------------------------------------------------------------------------- the data


def build(cat: Catalog, cfg: Config) -> tuple[Dataset, Dataset]:
    """The two datasets, SHARDS shards each (file fsyncs off: setup only); every record's
    ``id`` is its position in dataset order, so any output order can be traced to the disk."""
    small = cat.register("small", h.LABELED_SCHEMA)
    with small.writer(shard_records=-(-cfg.small_records // SHARDS)) as w:
        h.skip_shard_fsync(w)
        for start in range(0, cfg.small_records, 100_000):
            for i, row in enumerate(h.labeled_rows(min(100_000, cfg.small_records - start), seed=start)):
                w.write({**row, "id": start + i})
    return cat.dataset("small"), h.write_tensor_images(cat, cfg.images, SHARDS)


def tfrecord_files(ds: Dataset, folder: Path) -> dict[str, float]:
    """The shards as the tfrecord package takes several files: ``folder/<key>.tfrecord`` (links
    to the shards) and ``folder/<key>.tfindex`` made by its own ``tfrecord2idx``. Returns its
    ``splits`` (each file's share of the mix: its record count)."""
    create_index = importlib.import_module("tfrecord.tools.tfrecord2idx").create_index
    folder.mkdir()
    splits = {}
    for i, shard in enumerate(ds.shards()):
        key = f"{i:03d}"
        (folder / f"{key}.tfrecord").symlink_to(shard.path)
        create_index(shard.path, str(folder / f"{key}.tfindex"))
        splits[key] = float(shard.records)
    return splits


# --------------------------------------------------------------------------- the loaders


Batches = Callable[[], Iterable[Any]]
Run = tuple[float, np.ndarray, dict[str, np.ndarray]]  # (seconds, ids in output order, first batch)


def consume(make: Batches) -> Run:
    """Build a loader and take every batch: the seconds it took, the ids in the order they came,
    and the first batch as numpy (for the value check)."""
    t0 = time.perf_counter()
    ids: list[np.ndarray] = []
    first: dict[str, Any] = {}
    for batch in make():
        if not ids:
            first = batch
        ids.append(np.asarray(batch["id"]).reshape(-1))
    seconds = time.perf_counter() - t0
    return seconds, np.concatenate(ids), {k: _numpy(v) for k, v in first.items()}


def _numpy(column: Any) -> np.ndarray:
    if isinstance(column, list):  # strings from torch's collate, or the catalog's text column
        return np.array([v.decode() if isinstance(v, bytes) else v for v in column], dtype=object)
    array = np.asarray(column)
    if array.dtype.kind in "SO":
        return np.array([v.decode() if isinstance(v, bytes) else v for v in array.reshape(-1)], dtype=object)
    return array


def catalog_loader(ds: Dataset) -> Batches:
    return lambda: DataLoader(ds.torch(batch_size=BATCH, shuffle=True), batch_size=None, num_workers=WORKERS)


def decode_image(row: dict[str, Any]) -> dict[str, Any]:
    """The tfrecord package's rows give the tensor feature as its raw bytes: to uint8 pixels."""
    row["image"] = np.frombuffer(row["image"], dtype=np.uint8).reshape(IMAGE_SHAPE).copy()  # torch wants it writable
    return row


def tfrecord_loader(ds: Dataset, folder: Path, splits: dict[str, float]) -> Batches:
    """The tfrecord package's multi-file torch dataset over the same shards, its shuffle queue
    1024, batched by DataLoader's default collate (numpy -> tensors) in 2 workers."""
    module = importlib.import_module("tfrecord.torch.dataset")

    def make() -> Iterable[Any]:
        data = module.MultiTFRecordDataset(
            str(folder / "{}.tfrecord"),
            str(folder / "{}.tfindex"),
            splits,
            description=TFR_DESCRIPTION[ds.name],
            shuffle_queue_size=SHUFFLE_QUEUE,
            transform=decode_image if ds.name == "images" else None,
            infinite=False,
        )
        return DataLoader(data, batch_size=BATCH, num_workers=WORKERS)

    return make


class TransferFloor(torch.utils.data.IterableDataset):
    """``batches`` batches like ``template`` (copied anew each time, as a reader makes new ones),
    dealt to DataLoader workers as ds.torch deals its batches, with nothing read, as plain
    dicts: what torch's own transfer costs to carry a reader's batches from its workers to the
    trainer (ds.torch packs each batch into one buffer instead, readers/carry.py)."""

    def __init__(self, template: dict[str, Any], batches: int) -> None:
        self.template = template
        self.batches = batches

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        for _ in range(worker, self.batches, workers):
            yield {k: v.clone() if isinstance(v, torch.Tensor) else list(v) for k, v in self.template.items()}


def floor_loader(first: dict[str, np.ndarray], records: int) -> Callable[[], int]:
    """A 2-worker DataLoader over a TransferFloor of batches shaped as ``first``; returns the rows."""
    template = {k: v.tolist() if v.dtype == object else torch.from_numpy(v.copy()) for k, v in first.items()}
    batches = -(-records // BATCH)

    def run() -> int:
        loader = DataLoader(TransferFloor(template, batches), batch_size=None, num_workers=WORKERS)
        return sum(len(batch["id"]) for batch in loader)

    return run


def tf_pipeline(tf: Any, files: list[str], spec: dict[str, Any], tensors: dict[str, Any], parallel: bool) -> Batches:
    """The issue's tf.data pipeline; ``tensors``: name -> (dtype, shape) of the tensor features,
    decoded with ``decode_raw`` and reshaped as a user writes it by hand. Not ``parallel``: the
    files read one after another (the same pipeline without ``num_parallel_reads``)."""
    parse_spec = to_tf_feature_spec(spec, tf)

    def parse_example(serialized: Any) -> Any:
        out = tf.io.parse_example(serialized, parse_spec)
        for name, (dtype, shape) in tensors.items():
            out[name] = tf.reshape(tf.io.decode_raw(out[name], getattr(tf, dtype)), [-1, *shape])
        return out

    def make() -> Iterable[Any]:
        reads = tf.data.AUTOTUNE if parallel else None
        records = tf.data.TFRecordDataset(files, num_parallel_reads=reads).shuffle(SHUFFLE_QUEUE)
        batches = records.batch(BATCH).map(parse_example, num_parallel_calls=tf.data.AUTOTUNE)
        return batches.prefetch(tf.data.AUTOTUNE).as_numpy_iterator()

    return make


def tf_server() -> None:
    """The tf.data side's process: one JSON job a line on stdin (files, spec, tensors, parallel, out),
    one run each, its ids and first batch saved to ``out`` (.npz), its seconds on stdout."""
    tf = h.import_tensorflow()
    print(json.dumps({"tensorflow": tf.__version__}), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        gc.collect()
        seconds, ids, first = consume(tf_pipeline(tf, job["files"], job["spec"], job["tensors"], job["parallel"]))
        arrays: dict[str, Any] = {"ids": ids, **first}
        np.savez(job["out"], **arrays)
        print(json.dumps({"seconds": seconds}), flush=True)


class TfServer:
    """The tf.data side in a process of its own (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.err = folder / "tf_server.err"
        code = "from benchmarks.bench_readers import tf_server\ntf_server()\n"
        with open(self.err, "wb") as f:
            pipe = subprocess.PIPE
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code], stdin=pipe, stdout=pipe, stderr=f, cwd=h.REPO, text=True
            )
        self.version = str(self._reply()["tensorflow"])

    def _reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        h.check(bool(line), f"the tf.data process exited {self.proc.poll()}: {self.err.read_text()[-800:]}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def loader(self, ds: Dataset, parallel: bool = True) -> Callable[[], Run]:
        """One run of the pipeline over ``ds``'s shards, in the server."""
        schema = ds.schema
        tensors = {name: (f.dtype, list(f.shape)) for name, f in schema.features.items() if f.tensor}
        out = self.folder / f"tf-{ds.name}-{'parallel' if parallel else 'sequential'}.npz"
        job = {"files": ds.files(), "spec": schema.feature_spec(), "tensors": tensors, "parallel": parallel}
        line = json.dumps({**job, "out": str(out)})

        def run() -> Run:
            assert self.proc.stdin is not None
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
            seconds = float(self._reply()["seconds"])
            with np.load(out, allow_pickle=True) as saved:
                first = {k: _numpy(saved[k]) for k in saved.files if k != "ids"}
                return seconds, saved["ids"], first

        return run

    def close(self) -> None:
        """End of input: the server returns; one that does not is killed (no process outlives the run)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


# --------------------------------------------------------------------------- 1. the DataLoader race


def settle() -> None:
    """Before each timed run: the garbage collector, then a moment for the previous run's
    DataLoader workers and tf.data threads to wind down (their work must not bill the next)."""
    gc.collect()
    time.sleep(SETTLE_SECONDS)


def same_values(side: str, ds: Dataset, first: dict[str, np.ndarray], src: Any) -> None:
    """A side's first batch holds the values the shards hold for its ids (``src[ids]``)."""
    ids = first["id"].reshape(-1)
    expected = src[ids.tolist()]
    for name, column in expected.items():
        h.check(name in first, f"{side} on {ds.name}: no feature {name!r}")
        got = first[name]
        same = list(got.reshape(-1)) == list(column) if column.dtype == object else (
            np.array_equal(got.reshape(column.shape), column)
        )  # fmt: skip
        h.check(same, f"{side} on {ds.name}: feature {name!r} differs from the shards' values")


def loader_race(cfg: Config, ds: Dataset, src: Any, sides: dict[str, Callable[[], Run]]) -> dict[str, Any]:
    """Every side in interleaved rounds, each run timed by the side itself. The warm-up run of
    each is checked (every record exactly once, its first batch's values) and its order kept.
    Returns {"timings": side -> Timing, "orders": side -> ids in output order, "first": the
    catalog's first batch}."""
    n = len(src)
    timings = {side: h.Timing(side) for side in sides}
    orders: dict[str, np.ndarray] = {}
    firsts: dict[str, dict[str, np.ndarray]] = {}

    def finish_of(side: str) -> Callable[[object, bool], None]:
        def finish(out: object, warmup: bool) -> None:
            assert isinstance(out, tuple)
            seconds, ids, first = out
            h.check(len(ids) == n, f"{side} on {ds.name} gave {len(ids)} records, not {n}")
            if warmup:
                h.check(np.array_equal(np.sort(ids), np.arange(n)), f"{side} on {ds.name}: not every record once")
                same_values(side, ds, first, src)
                orders[side], firsts[side] = ids, first
            else:
                timings[side].times.append(seconds)

        return finish

    contenders = {side: h.Contender(run, finish=finish_of(side), settle=settle) for side, run in sides.items()}
    h.race(contenders, cfg.repeats)
    return {"timings": timings, "orders": orders, "first": firsts["catalog"]}


PEERS: tuple[tuple[str, str, float | None], ...] = (
    ("tfrecord", "the tfrecord package", 5.0),
    ("tf.data", "tf.data", 1.0),
    ("tf.data, one file at a time", "tf.data reading its files one after another (info)", None),
)


def rate(records: int, seconds: float) -> str:
    return f"{records / seconds / 1e3:,.1f} k rec/s"


def versus_rows(report: h.Report, ds: Dataset, what: str, timings: dict[str, h.Timing]) -> None:
    """Section 1's rows: the catalog's rate against each peer's (best rounds; medians in the note)."""
    n = ds.info().records
    cat = timings["catalog"]
    epoch = profile_epoch(ds)  # one profile for the rows of a dataset
    for peer, title, target in PEERS:
        theirs = timings[peer]
        ratio, median = theirs.best / cat.best, theirs.median / cat.median
        report.add(
            h.Result(
                "1",
                f"DataLoader, {what}: ds.torch vs {title}",
                f"{ratio:.2f}x",
                "—" if target is None else f">= {target:g}x",
                None if target is None else ratio >= target,
                f"{rate(n, cat.best)} vs {rate(n, theirs.best)}; medians {median:.2f}x ({len(cat.times)} rounds)",
                {"records": n, "catalog": cat.times, peer: theirs.times, "ratio": ratio, "median_ratio": median},
            ),
            profile=epoch,
            what=f"one epoch of ds.torch(batch_size={BATCH}, shuffle=True) over {ds.name}, in this process "
            "(the work of both DataLoader workers)",
        )


def profile_epoch(ds: Dataset) -> Callable[[], object]:
    def run() -> int:
        return sum(len(batch["id"]) for batch in ds.torch(batch_size=BATCH, shuffle=True))

    return run


def loaders(cfg: Config, ds: Dataset, what: str, server: TfServer, folder: Path, report: h.Report) -> dict[str, Any]:
    """Section 1 on one dataset; returns each side's order (the warm-up runs')."""
    splits = tfrecord_files(ds, folder / f"tfrecord-{ds.name}")
    h.cache_tree(folder)
    sides: dict[str, Callable[[], Run]] = {
        "catalog": lambda: consume(catalog_loader(ds)),
        "tfrecord": lambda: consume(tfrecord_loader(ds, folder / f"tfrecord-{ds.name}", splits)),
        "tf.data": server.loader(ds),
        "tf.data, one file at a time": server.loader(ds, parallel=False),  # (info): AUTOTUNE's reads vary 3x here
        "in-process": lambda: consume(lambda: ds.torch(batch_size=BATCH, shuffle=True)),  # (info): no workers
    }
    src = ds.source()
    h.log(f"[1] {ds.name}: {len(src):,} records, {', '.join(sides)} ...")
    out = loader_race(cfg, ds, src, sides)
    versus_rows(report, ds, what, out["timings"])
    context_rows(cfg, report, what, out)
    orders: dict[str, Any] = out["orders"]
    return orders


def context_rows(cfg: Config, report: h.Report, what: str, race_out: dict[str, Any]) -> None:
    """Section 1's information: the catalog's reader with no DataLoader (this process, one
    core), and torch's own transfer (the same batches as plain dicts carried from 2 workers,
    nothing read: what ds.torch's batches would cost without its one-buffer packing)."""
    timings = race_out["timings"]
    alone, loader = timings["in-process"], timings["catalog"]
    n = len(race_out["orders"]["catalog"])
    report.add(
        h.Result(
            "1",
            f"DataLoader, {what}: ds.torch in this process, no workers (info)",
            rate(n, alone.best),
            note=f"{timings['tf.data'].best / alone.best:.2f}x tf.data; the 2-worker DataLoader's best round "
            f"took {loader.best / alone.best:.2f}x its time",
            data={"times": alone.times},
        )
    )
    carry = floor_loader(race_out["first"], n)
    floor = h.race({"floor": h.Contender(carry, settle=settle)}, cfg.repeats)["floor"]
    report.add(
        h.Result(
            "1",
            f"DataLoader, {what}: torch's own transfer of ds.torch's batches, nothing read (info)",
            rate(n, floor.best),
            note=f"ds.torch in the DataLoader reached {floor.best / loader.best:.0%} of it",
            data={"times": floor.times},
        )
    )


# --------------------------------------------------------------------------- 2. random access


def random_access(cfg: Config, ds: Dataset, what: str, report: h.Report) -> None:
    """``src[i]`` at random ``i`` and ``src[list of 256 random indices]``, new indices every
    run (drawn outside the timer), from the page cache; every run's last answer is checked."""
    src = ds.source()
    n = len(src)
    rng = np.random.default_rng(1)
    drawn: dict[str, Any] = {}

    def draw() -> None:
        drawn["singles"] = rng.integers(0, n, cfg.singles).tolist()
        drawn["lists"] = rng.integers(0, n, (cfg.lists, BATCH)).tolist()

    def singles() -> tuple[int, Any]:
        row = None
        for i in drawn["singles"]:
            row = src[i]
        return drawn["singles"][-1], row

    def lists() -> tuple[list[int], Any]:
        batch = None
        for indices in drawn["lists"]:
            batch = src[indices]
        return drawn["lists"][-1], batch

    def finish(out: object, _warmup: bool) -> None:
        assert isinstance(out, tuple)
        asked, got = out
        h.check(np.array_equal(np.asarray(got["id"]), np.asarray(asked)), f"src[...] on {ds.name}: wrong records")

    contenders = {"single": h.Contender(singles, draw, finish), "list": h.Contender(lists, draw, finish)}
    t = h.race(contenders, cfg.access_repeats, cfg.budget)
    for key, rows, title, target in (
        ("single", cfg.singles, "src[i]", 50_000),
        ("list", cfg.lists * BATCH, f"src[list of {BATCH}]", 300_000),
    ):
        best, median = rows / t[key].best, rows / t[key].median
        report.add(
            h.Result(
                "2",
                f"random access, {what}: {title}",
                f"{best / 1e3:,.1f} k rows/s",
                f">= {target // 1000}k rows/s",
                best >= target,
                f"median {median / 1e3:,.1f} k ({len(t[key].times)} rounds of {rows:,} rows)",
                {"rows": rows, "times": t[key].times},
            ),
            profile=contenders[key].run,
            what=f"{title} over {ds.name}, one run",
        )


# --------------------------------------------------------------------------- 3. shuffle quality


def quality(order: np.ndarray) -> tuple[float, float, float]:
    """(fraction of consecutive outputs that are neighbours on disk, Spearman's rho between
    output position and storage position, mean |output position - storage position| / N);
    ``order`` holds the storage positions (the ids). A uniform shuffle's displacement is 1/3:
    a small buffer's stays near 0 whatever the other two say."""
    n = len(order)
    neighbours = float(np.mean(np.abs(np.diff(order)) == 1))
    ranks = np.empty(n, dtype=np.float64)
    ranks[np.argsort(order, kind="stable")] = np.arange(n)  # ids are unique: no ties
    output = np.arange(n, dtype=np.float64)
    rho = float(np.corrcoef(output, ranks)[0, 1])
    return neighbours, rho, float(np.mean(np.abs(output - ranks)) / n)


SIDE_TITLES = {
    "catalog": "ds.torch(shuffle=True)",
    "tf.data": f"tf.data shuffle({SHUFFLE_QUEUE})",
    "tfrecord": f"tfrecord package, queue {SHUFFLE_QUEUE}",
}


def shuffle_quality(orders: dict[str, np.ndarray], report: h.Report) -> None:
    """Section 3's rows: the targets apply to ds.torch; the peers' figures are information."""
    n = len(orders["catalog"])
    for side in ("catalog", "tf.data", "tfrecord"):
        neighbours, rho, displaced = quality(orders[side])
        ours = side == "catalog"
        passes = f"{'meets' if neighbours <= 0.01 else 'fails'} <= 1%, {'meets' if abs(rho) <= 0.01 else 'fails'}"
        note = f"{n:,} records as the loader delivered them" if ours else f"{passes} |rho| <= 0.01"
        note += f"; mean displacement {displaced:.3f} N (uniform: 0.333)"
        report.add(
            h.Result(
                "3",
                f"shuffle quality, {SIDE_TITLES[side]}: neighbours on disk; Spearman rho",
                f"{neighbours:.4%}; {rho:+.4f}",
                "<= 1%; abs <= 0.01" if ours else "—",
                (neighbours <= 0.01 and abs(rho) <= 0.01) if ours else None,
                note,
                {"neighbours": neighbours, "spearman": rho, "displacement": displaced, "records": n},
            )
        )


# --------------------------------------------------------------------------- 4. resumption


def resumption(cfg: Config, ds: Dataset, what: str, report: h.Report) -> None:
    """Time to the first batch, from ``load_state_dict`` to the batch out of a 2-worker
    DataLoader, resuming at 90% of epoch 0 against at its start. The dataset is made outside
    the timer; the workers are shut down outside it (the last reference dropped in ``finish``)."""
    n = ds.info().records
    at = {"0%": 0, f"{RESUME_AT:.0%}": int(n * RESUME_AT)}
    expected = {key: next(ds.batches(BATCH, shuffle=True, samples=k))["id"] for key, k in at.items()}
    held: dict[str, Any] = {}

    def side(key: str) -> h.Contender:
        def prepare() -> None:
            held["dataset"] = ds.torch(batch_size=BATCH, shuffle=True)

        def run() -> Any:
            dataset = held.pop("dataset")
            dataset.load_state_dict({"epoch": 0, "samples": at[key]})
            held["iterator"] = iter(DataLoader(dataset, batch_size=None, num_workers=WORKERS))
            return next(held["iterator"])

        def finish(out: object, _warmup: bool) -> None:
            held.pop("iterator")  # its workers stop now, off the clock
            assert isinstance(out, dict)
            h.check(np.array_equal(out["id"].numpy(), expected[key]), f"resumed at {key} of {ds.name}: wrong batch")

        return h.Contender(run, prepare, finish, settle)

    t = h.race({key: side(key) for key in at}, cfg.resume_repeats, cfg.budget)
    late, start = t[f"{RESUME_AT:.0%}"], t["0%"]
    ratio, median = late.best / start.best, late.median / start.median
    report.add(
        h.Result(
            "4",
            f"resume, {what}: first batch at {RESUME_AT:.0%} / at 0%",
            f"{ratio:.2f}x",
            "<= 2x",
            ratio <= 2.0,
            f"{late.best * 1e3:.0f} vs {start.best * 1e3:.0f} ms; medians {median:.2f}x ({len(late.times)} rounds)",
            {"samples": at, "times": {k: v.times for k, v in t.items()}, "ratio": ratio, "median_ratio": median},
        ),
        profile=lambda: next(iter(resumed(ds, at[f"{RESUME_AT:.0%}"]))),
        what=f"load_state_dict at {RESUME_AT:.0%} and the first batch, in this process (no workers)",
    )


def resumed(ds: Dataset, samples: int) -> Any:
    dataset = ds.torch(batch_size=BATCH, shuffle=True)
    dataset.load_state_dict({"epoch": 0, "samples": samples})
    return dataset


# --------------------------------------------------------------------------- the run


def header(cfg: Config, quick: bool, tf_version: str) -> dict[str, Any]:
    info = h.machine_header(
        torch=torch.__version__,
        tfrecord=h.dist_version("tfrecord"),
        tensorflow=tf_version,
        numpy=np.__version__,
        protobuf=h.protobuf_version(),
    )
    h.print_header(
        "TFRecord Catalog: the readers against the tfrecord package and tf.data",
        info,
        f"mode: {'quick' if quick else 'full'}: {cfg.small_records:,} Examples of ~140 bytes (id, label, score, "
        f"vec[16]) and {cfg.images:,} 32x32x3 uint8 tensor images (id, image, label), {SHARDS} shards each, "
        "read from the page cache",
        f"section 1: DataLoader with {WORKERS} workers, batch {BATCH}, shuffled; best of {cfg.repeats} interleaved "
        "rounds after a checked warm-up; tf.data in a process of its own (TensorFlow "
        "and the tfrecord package cannot share one)",
    )
    return info


def sections(cfg: Config, folder: Path, server: TfServer, report: h.Report) -> None:
    cat = Catalog.open(folder / "cat")
    report.catalogs.append(cat)
    small, images = cat.dataset("small"), cat.dataset("images")
    names = {"small": "small Examples", "images": "32x32x3 images"}
    orders: dict[str, np.ndarray] = {}

    def section_1() -> None:
        orders.update(loaders(cfg, small, names["small"], server, folder, report))
        loaders(cfg, images, names["images"], server, folder, report)

    def section_2() -> None:
        for ds in (small, images):
            random_access(cfg, ds, names[ds.name], report)

    def section_4() -> None:
        for ds in (small, images):
            resumption(cfg, ds, names[ds.name], report)

    steps: list[tuple[str, str, Callable[[], None]]] = [
        ("1", "DataLoader: ds.torch, the tfrecord package, tf.data", section_1),
        ("2", "random access", section_2),
        ("3", "shuffle quality (the small Examples)", lambda: shuffle_quality(orders, report)),
        ("4", "resumption", section_4),
    ]
    report.run(steps, {"1", "2", "3", "4"})


def main(argv: list[str] | None = None) -> int:
    args, cfg = h.options(argv, QUICK, FULL, __doc__, "100k small records and 20k images, fewer rounds",
                          "minimum rounds of section 1", "the catalog side")  # fmt: skip
    started = time.perf_counter()
    report = h.Report()
    with tempfile.TemporaryDirectory(prefix="bench_readers_") as d, ExitStack() as stack:
        folder = Path(d)
        server = TfServer(folder)  # TensorFlow imports in it while the data is written here
        stack.callback(server.close)
        with Catalog.init(folder / "cat") as cat:
            build(cat, cfg)
        info = header(cfg, args.quick, server.version)
        stack.callback(report.close)
        sections(cfg, folder, server, report)
        texts = report.conclude(started, args.profile, f"; load average at the end {' '.join(map(str, h.loadavg()))}")
    report.write(args, info, cfg, elapsed_seconds=time.perf_counter() - started, profiles=texts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
