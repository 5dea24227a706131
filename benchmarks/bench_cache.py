"""Training from object storage: ``ds.torch`` over shards on S3 through the local shard cache
(``cache_dir=``), against MosaicML Streaming's ``StreamingDataset(remote=..., local=...)``
over the same records, and against ``ds.torch`` over the same shards in a local data area.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_cache                  # 500,000 records in 8 shards (about 5-10 minutes)
    .venv/bin/python -m benchmarks.bench_cache --quick          # 100,000 records in 4 shards (about a minute)
    .venv/bin/python -m benchmarks.bench_cache --json out.json  # also save every timing (and profiles) as JSON
    .venv/bin/python -m benchmarks.bench_cache --profile all    # cProfile the catalog's cached epoch 2

The script starts moto's S3 server (``start_s3()`` of the harness: a thread of this process,
on loopback) and writes the harness's text rows (id int64, text string, score float32,
vec float32[8]) three times, untimed: a catalog with ``storage="s3://<bucket>/data"``, a
catalog with a local data area, and MosaicML Streaming's MDS shards (``MDSWriter``, no
compression, shards of the catalog's size) uploaded to ``s3://<bucket>/mds``.

Each round runs every side once, in an order rotating every round, after an untimed and
checked warm-up round (every id exactly once). A side's run is two epochs of a 2-worker
``DataLoader``, batch 256, shuffled, each epoch timed:

* catalog, S3 + cache: ``DataLoader(ds.torch(batch_size=256, shuffle=True, cache_dir=NEW),
  batch_size=None, num_workers=2)``, ``set_epoch`` between the epochs: epoch 1 fetches every
  shard into the new (empty) cache directory, epoch 2 reads the cached copies;
* Streaming: ``DataLoader(StreamingDataset(remote="s3://<bucket>/mds", local=NEW,
  batch_size=256, shuffle=True), batch_size=256, num_workers=2)``: epoch 1 downloads its
  shards into the new local directory, epoch 2 reads them;
* catalog, local: the first reader, on the local catalog (page-cached): its rate is the best
  epoch of either.

Every epoch counts the requests moto served (HEADs, GETs of shards and of record indexes):
the cached and Streaming's second epochs should make none. moto runs in this process on the
same CPUs as the DataLoader's workers: epoch 1 bounds the cost of a download here; it is not
a real S3's throughput.
"""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
import numpy as np
import torch
from torch.utils.data import DataLoader

from benchmarks import harness as h
from catalog import Catalog, Dataset

BUCKET = "bench-cache"
BATCH = 256
WORKERS = 2
SIDES = ("cached", "streaming", "local")
TITLES = {
    "cached": "catalog, shards on S3 + cache_dir",
    "streaming": "MosaicML Streaming, remote S3 + local",
    "local": "catalog, local data area",
}
TARGET = 0.9  # epoch 2 from the cache against local: within 10%
SETTLE_SECONDS = 0.5
STREAMING_MISSING = (
    "MosaicML Streaming is not installed: pip install 'tfrecord-catalog[bench]' (or mosaicml-streaming alone)"
)


@dataclass(frozen=True)
class Config:
    records: int
    shards: int
    repeats: int  # timed rounds, every side once a round


FULL = Config(records=500_000, shards=8, repeats=3)
QUICK = Config(records=100_000, shards=4, repeats=2)


# --------------------------------------------------------------------------- the server's meter


class Served:
    """A WSGI wrapper around moto's app counting the requests it serves (GETs of shards and
    indexes, HEADs, listings), from this process and the DataLoader's workers alike."""

    def __init__(self, app: Any) -> None:
        self.app, self.lock, self.count = app, threading.Lock(), 0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        with self.lock:
            self.count += 1
        return self.app(environ, start_response)

    def take(self) -> int:
        with self.lock:
            n, self.count = self.count, 0
        return n


def meter(server: Any) -> Served:
    wsgi: Any = getattr(server, "_server", None)  # ThreadedMotoServer's werkzeug server
    h.check(hasattr(wsgi, "app"), "moto's server has no WSGI app to wrap")
    gets = Served(wsgi.app)
    wsgi.app = gets
    return gets


# --------------------------------------------------------------------------- the data


def write_catalog(root: Path, storage: str | None, cfg: Config) -> Dataset:
    """The text rows in ``cfg.shards`` shards (file fsyncs off: setup only)."""
    cat = Catalog.init(root, storage=storage) if storage else Catalog.init(root)
    ds = cat.register("text", h.TEXT_SCHEMA)
    with ds.writer(shard_records=-(-cfg.records // cfg.shards)) as w:
        h.skip_shard_fsync(w)
        for start in range(0, cfg.records, 100_000):
            for row in h.text_rows(min(100_000, cfg.records - start), seed=start, start=start):
                w.write(row)
    cat.close()
    return Catalog.open(root).dataset("text")


def write_mds(folder: Path, remote: str, cfg: Config, shard_bytes: int) -> None:
    """The same rows as MDS shards of about the catalog's shard size, uploaded to ``remote``."""
    from streaming import MDSWriter

    columns = {"id": "int64", "text": "str", "score": "float32", "vec": "ndarray:float32:8"}
    with MDSWriter(out=str(folder), columns=columns, compression=None, size_limit=shard_bytes) as out:
        for start in range(0, cfg.records, 100_000):
            for row in h.text_rows(min(100_000, cfg.records - start), seed=start, start=start):
                vec = np.asarray(row["vec"], dtype=np.float32)
                out.write({"id": row["id"], "text": row["text"], "score": np.float32(row["score"]), "vec": vec})
    fs = fsspec.filesystem("s3")
    fs.put(str(folder), remote, recursive=True)


# --------------------------------------------------------------------------- the sides


Epochs = Callable[[], Iterable[Iterable[Any]]]  # a run: its two epochs' batches, one after the other


def catalog_run(ds: Dataset, cache: Callable[[], dict[str, Any]]) -> Epochs:
    def epochs() -> Iterable[Iterable[Any]]:
        tds = ds.torch(batch_size=BATCH, shuffle=True, **cache())
        loader = DataLoader(tds, batch_size=None, num_workers=WORKERS)
        for epoch in range(2):
            tds.set_epoch(epoch)
            yield loader

    return epochs


def streaming_run(remote: str, local: Callable[[], Path]) -> Epochs:
    def epochs() -> Iterable[Iterable[Any]]:
        from streaming import StreamingDataset

        sds = StreamingDataset(remote=remote, local=str(local()), batch_size=BATCH, shuffle=True, shuffle_seed=0)
        loader = DataLoader(sds, batch_size=BATCH, num_workers=WORKERS)
        for _epoch in range(2):
            yield loader
        del sds

    return epochs


class Scratch:
    """A new empty directory for each run (a cache or Streaming's local), the last one removed."""

    def __init__(self, base: Path, prefix: str) -> None:
        self.base, self.prefix, self.n = base, prefix, 0
        self.last: Path | None = None

    def __call__(self) -> Path:
        self.discard()
        self.n += 1
        path = self.last = self.base / f"{self.prefix}-{self.n:03d}"
        return path

    def discard(self) -> None:
        if self.last is not None:
            shutil.rmtree(self.last, ignore_errors=True)
            self.last = None


def settle() -> None:
    """The garbage collector, then a moment for the last epoch's workers to wind down."""
    gc.collect()
    time.sleep(SETTLE_SECONDS)


def timed_epochs(run: Epochs, gets: Served, n: int, check: bool) -> list[tuple[float, int]]:
    """A side's run: (seconds, requests to S3) of each epoch; with ``check``, every id once."""
    out = []
    epochs = iter(run())
    for epoch in range(2):
        settle()
        gets.take()
        t0 = time.perf_counter()
        loader = next(epochs)
        ids = [np.asarray(batch["id"]).reshape(-1) for batch in loader]
        seconds = time.perf_counter() - t0
        out.append((seconds, gets.take()))
        seen = np.concatenate(ids)
        h.check(len(seen) == n, f"epoch {epoch + 1} gave {len(seen)} records, not {n}")
        if check:
            h.check(np.array_equal(np.sort(seen), np.arange(n)), f"epoch {epoch + 1}: not every record once")
    return out


def race(cfg: Config, runs: dict[str, Epochs], gets: Served) -> dict[str, list[list[tuple[float, int]]]]:
    """A checked warm-up round, then ``cfg.repeats`` rounds, the order rotating every round."""
    rounds: dict[str, list[list[tuple[float, int]]]] = {side: [] for side in runs}
    for side, run in runs.items():
        h.log(f"[warm-up] {side} ...")
        timed_epochs(run, gets, cfg.records, check=True)
    for rnd in range(cfg.repeats):
        for side in h.rotation(list(runs), rnd):
            epochs = timed_epochs(run=runs[side], gets=gets, n=cfg.records, check=False)
            rounds[side].append(epochs)
            rates = ", ".join(f"{cfg.records / s / 1e3:,.1f} k rec/s ({g} requests)" for s, g in epochs)
            h.log(f"[round {rnd + 1}] {side}: epoch 1, 2: {rates}")
    return rounds


# --------------------------------------------------------------------------- results


def rate(records: int, seconds: float) -> str:
    return f"{records / seconds / 1e3:,.1f} k rec/s"


def epoch_times(rounds: list[list[tuple[float, int]]], epoch: int) -> list[float]:
    return [r[epoch][0] for r in rounds]


def results(cfg: Config, rounds: dict[str, list[list[tuple[float, int]]]], ds: Dataset, report: h.Report) -> None:
    """The rows: each remote side's epochs against local, and the catalog against Streaming."""
    n = cfg.records
    local = epoch_times(rounds["local"], 0) + epoch_times(rounds["local"], 1)
    gets = {side: [sum(r[1][1] for r in rounds[side]), sum(r[0][1] for r in rounds[side])] for side in rounds}
    rows = [
        ("cached", 1, "local", None, "epoch 1 of ds.torch from S3, every shard fetched into the cache, vs local"),
        ("cached", 2, "local", TARGET, "epoch 2 of ds.torch from the cache vs local"),
        ("streaming", 1, "local", None, "epoch 1 of Streaming from S3 vs the catalog, local (info)"),
        ("streaming", 2, "local", None, "epoch 2 of Streaming from its local copies vs the catalog, local (info)"),
        ("cached", 1, "streaming", None, "epoch 1: ds.torch + cache vs Streaming, both from S3"),
        ("cached", 2, "streaming", None, "epoch 2: ds.torch from the cache vs Streaming from its local copies"),
    ]
    for side, epoch, base, target, title in rows:
        ours = epoch_times(rounds[side], epoch - 1)
        theirs = local if base == "local" else epoch_times(rounds[base], epoch - 1)
        ratio, median = min(theirs) / min(ours), statistics.median(theirs) / statistics.median(ours)
        second = f"; requests to S3 in epoch 2: {gets[side][0]} in {len(ours)} rounds" if epoch == 2 else ""
        report.add(
            h.Result(
                "1",
                title,
                f"{ratio:.2f}x",
                "—" if target is None else f">= {target:g}x",
                None if target is None else ratio >= target,
                f"{rate(n, min(ours))} vs {rate(n, min(theirs))}; medians {median:.2f}x{second}",
                {"records": n, side: ours, base: theirs, "ratio": ratio, "median_ratio": median, "requests": gets},
            ),
            profile=profile_cached(ds) if target is not None else None,
            what=f"one epoch of ds.torch(batch_size={BATCH}, shuffle=True) over the cached shards, in this process "
            "(the work of both DataLoader workers)",
        )


def profile_cached(ds: Dataset) -> Callable[[], object]:
    cache = Path(tempfile.mkdtemp(prefix="bench_cache_profile_"))

    def run() -> int:
        tds = ds.torch(batch_size=BATCH, shuffle=True, cache_dir=cache)
        sum(len(batch["id"]) for batch in tds)  # epoch 1 fills the cache (also profiled; small beside epoch 2)
        tds.set_epoch(1)
        return sum(len(batch["id"]) for batch in tds)

    return run


# --------------------------------------------------------------------------- main


def header(cfg: Config, quick: bool, shard_bytes: int) -> dict[str, Any]:
    return h.start_report(
        "TFRecord Catalog: training from object storage (shard cache) against MosaicML Streaming and local files",
        {
            "torch": torch.__version__,
            "mosaicml-streaming": h.dist_version("mosaicml-streaming"),
            "s3fs": h.dist_version("s3fs"),
            "moto": h.dist_version("moto"),
            "numpy": np.__version__,
            **h.format_versions(),
        },
        f"mode: {'quick' if quick else 'full'}: {cfg.records:,} text rows (id, text, score, vec[8]) in "
        f"{cfg.shards} shards of about {shard_bytes / h.MIB:.1f} MiB; MDS shards of the same size",
        f"DataLoader with {WORKERS} workers, batch {BATCH}, shuffled; two epochs per run, each timed; best of "
        f"{cfg.repeats} interleaved rounds after a checked warm-up round",
        "moto's S3 server is a thread of this process, on the same CPUs",
        where="cache directories, local copies and catalogs",
    )


def build(cfg: Config, folder: Path) -> tuple[Dataset, Dataset, str, int]:
    """The S3 catalog, the local one and Streaming's MDS copy; returns (S3 dataset, local
    dataset, the MDS remote, the mean shard size)."""
    fsspec.filesystem("s3").mkdir(BUCKET)
    h.log("[setup] writing the catalogs and the MDS shards ...")
    remote = write_catalog(folder / "s3cat", f"s3://{BUCKET}/data", cfg)
    local = write_catalog(folder / "localcat", None, cfg)
    shard_bytes = local.info().bytes // cfg.shards
    mds = f"s3://{BUCKET}/mds"
    write_mds(folder / "mds", mds, cfg, shard_bytes)
    h.cache_tree(folder / "localcat")
    return remote, local, mds, shard_bytes


def main(argv: list[str] | None = None) -> int:
    args, cfg = h.options(argv, QUICK, FULL, __doc__, "100,000 records in 4 shards, 2 rounds",
                          "timed rounds", "the catalog's cached epoch 2")  # fmt: skip
    try:
        import streaming  # noqa: F401  # the peer: said missing before anything is written
    except ImportError as e:
        raise SystemExit(STREAMING_MISSING) from e
    # Streaming hands torch's collate read-only arrays: a warning per worker, about the peer's own tensors.
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    started = time.perf_counter()
    report = h.Report()
    server, endpoint = h.start_s3()
    os.environ["S3_ENDPOINT_URL"] = endpoint  # Streaming's boto3 client reads this one
    try:
        with tempfile.TemporaryDirectory(prefix="bench_cache_") as d:
            folder = Path(d)
            remote, local, mds, shard_bytes = build(cfg, folder)
            info = header(cfg, args.quick, shard_bytes)
            gets = meter(server)
            caches, locals_ = Scratch(folder, "cache"), Scratch(folder, "streaming-local")
            runs = {
                "cached": catalog_run(remote, lambda: {"cache_dir": caches()}),
                "streaming": streaming_run(mds, locals_),
                "local": catalog_run(local, dict),
            }
            rounds = race(cfg, runs, gets)
            results(cfg, rounds, remote, report)
            note = f"; load average at the end {' '.join(map(str, h.loadavg()))}"
            texts = report.conclude(started, args.profile, note)
            report.write(args, info, cfg, rounds=rounds, elapsed_seconds=time.perf_counter() - started, profiles=texts)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
