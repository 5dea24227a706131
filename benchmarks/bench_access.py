"""Random access against ArrayRecord (issue 34, section 6): ``ds.source()`` over TFRecord shards
against ``ArrayRecordDataSource`` over ArrayRecord files holding the same serialized records,
and against TFDS's random-access path (``tfds.data_sources``: an ArrayRecord data source whose
records ``FeaturesDict.deserialize_example_np`` turns into NumPy rows).

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_access              # 1M small Examples, 200k images
    .venv/bin/python -m benchmarks.bench_access --quick      # 100k and 20k
    .venv/bin/python -m benchmarks.bench_access --json out.json

Both sides read from the page cache, every shard of one side matched by a file of the other
(same records, same order; ArrayRecord written with ``group_size:1``, as TFDS writes files meant
for random access). Rows, per dataset:

- raw records: ``src.records(i)`` against ``ar[i]``; ``src.records(list of 256)`` against
  ``ar.__getitems__(list of 256)`` (both give ``bytes``, checked equal);
- decoded rows: ``src[i]`` against ``deserialize_example_np(ar[i])`` (what a TFDS data source's
  ``__getitem__`` does); ``src.__getitems__(list of 256)`` against TFDS's ``__getitems__`` (a
  list of row dicts each); and ``src[list of 256]`` (one columnar batch) against the same TFDS
  list, since a batch is what a training step takes.

New random indices every run (drawn outside the timer), interleaved rounds in a rotating
order, best and median rounds; every run's last answer is checked against the other side's.
The target is >= 1x on every row. array_record and TFDS come with the test extra; the side
that needs one skips (with the reason) where it is missing. Progress goes to stderr, the
report (markdown) to stdout.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import harness as h
from catalog import Catalog, Dataset

BATCH = 256
SHARDS = 16
IMAGE_SHAPE = h.TENSOR_IMAGE_SHAPE


@dataclass(frozen=True)
class Config:
    small_records: int
    images: int
    singles: int  # single-index calls per run
    lists: int  # calls of 256 indices per run
    repeats: int
    budget: float  # seconds a race may take beyond its repeats


FULL = Config(1_000_000, 200_000, singles=20_000, lists=200, repeats=5, budget=20.0)
QUICK = Config(100_000, 20_000, singles=5_000, lists=50, repeats=3, budget=4.0)


def build(cat: Catalog, cfg: Config) -> list[Dataset]:
    """The two datasets, SHARDS shards each, every record's ``id`` its position."""
    small = cat.register("small", h.LABELED_SCHEMA)
    with small.writer(shard_records=-(-cfg.small_records // SHARDS)) as w:
        h.skip_shard_fsync(w)
        for i, row in enumerate(h.labeled_rows(cfg.small_records, seed=0)):
            w.write({**row, "id": i})
    return [cat.dataset("small"), h.write_tensor_images(cat, cfg.images, SHARDS)]


def array_record_copy(ds: Dataset, folder: Path) -> Any:
    """An ArrayRecordDataSource over files holding ``ds``'s records, one file per shard."""
    from array_record.python.array_record_data_source import ArrayRecordDataSource
    from array_record.python.array_record_module import ArrayRecordWriter

    folder.mkdir()
    src, first = ds.source(), 0
    for k, shard in enumerate(ds.shards()):
        writer = ArrayRecordWriter(str(folder / f"{ds.name}-{k:05d}.array_record"), "group_size:1")
        for record in src.records(range(first, first + shard.records)):
            writer.write(record)
        writer.close()
        first += shard.records
    return ArrayRecordDataSource(sorted(str(p) for p in folder.iterdir()))


def tfds_features(name: str) -> Any:
    """TFDS's description of the same features: it parses the catalog's records as they are."""
    import tensorflow_datasets as tfds

    if name == "images":
        image = tfds.features.Tensor(shape=IMAGE_SHAPE, dtype=np.uint8, encoding=tfds.features.Encoding.BYTES)
        return tfds.features.FeaturesDict({"id": np.int64, "image": image, "label": np.int64})
    vec = tfds.features.Tensor(shape=(16,), dtype=np.float32)
    return tfds.features.FeaturesDict({"id": np.int64, "label": tfds.features.Text(), "score": np.float32, "vec": vec})


# --------------------------------------------------------------------------- the races


Pair = tuple[Callable[[Any], Any], Callable[[Any], Any]]  # (catalog side, peer side) of one drawn index set


def pairs(src: Any, ar: Any, features: Any) -> dict[str, tuple[str, bool, Pair]]:
    """Each row: (title, whether it takes lists, (catalog's call, the peer's call))."""
    decode = features.deserialize_example_np
    return {
        "raw-1": ("records(i) vs ArrayRecord ar[i]", False, (src.records, ar.__getitem__)),
        "raw-256": (f"records(list of {BATCH}) vs ar.__getitems__", True, (src.records, ar.__getitems__)),
        "row-1": ("src[i] vs TFDS ArrayRecord source[i]", False, (src.__getitem__, lambda i: decode(ar[i]))),
        "rows-256": (
            f"src.__getitems__(list of {BATCH}) vs TFDS __getitems__",
            True,
            (src.__getitems__, lambda keys: [decode(r) for r in ar.__getitems__(keys)]),
        ),
        "batch-256": (
            f"src[list of {BATCH}] (one batch) vs TFDS __getitems__",
            True,
            (src.__getitem__, lambda keys: [decode(r) for r in ar.__getitems__(keys)]),
        ),
    }


def ids_of(out: Any) -> list[int]:
    """The record ids an answer holds, whatever its form (bytes are checked by equality instead)."""
    if isinstance(out, dict):
        return np.atleast_1d(np.asarray(out["id"])).tolist()
    return [int(row["id"]) for row in out]


def race_pair(cfg: Config, n: int, key: str, lists: bool, pair: Pair) -> dict[str, h.Timing]:
    """One row's race: the same drawn indices for both sides, new ones every round."""
    rng = np.random.default_rng(abs(hash(key)) % 2**32)
    calls = cfg.lists if lists else cfg.singles
    drawn: list[Any] = []
    last: dict[str, Any] = {}

    def draw() -> None:
        if not drawn or len(last) == 2:  # both sides ran on these: draw anew
            drawn[:] = rng.integers(0, n, (calls, BATCH)).tolist() if lists else rng.integers(0, n, calls).tolist()
            last.clear()

    def side(name: str, call: Callable[[Any], Any]) -> h.Contender:
        def run() -> Any:
            out = None
            for keys in drawn:
                out = call(keys)
            return drawn[-1], out

        def finish(result: object, _warmup: bool) -> None:
            assert isinstance(result, tuple)
            asked, out = result
            last[name] = out
            raw = isinstance(out, bytes) or (isinstance(out, list) and bool(out) and isinstance(out[0], bytes))
            if raw:  # records: the two sides' bytes, once both read the same indices
                if len(last) == 2:
                    h.check(last["catalog"] == last["peer"], f"{key}: the two sides read different bytes")
                return
            h.check(ids_of(out) == (asked if lists else [asked]), f"{key}: wrong records for {str(asked)[:60]}")

        return h.Contender(run, draw, finish)

    contenders = {"catalog": side("catalog", pair[0]), "peer": side("peer", pair[1])}
    return h.race(contenders, cfg.repeats, cfg.budget)


def dataset_rows(cfg: Config, ds: Dataset, folder: Path) -> list[h.Versus]:
    src = ds.source()
    ar = array_record_copy(ds, folder / f"ar-{ds.name}")
    out = []
    for key, (title, lists, pair) in pairs(src, ar, tfds_features(ds.name)).items():
        started = time.perf_counter()
        t = race_pair(cfg, len(src), key, lists, pair)
        work = (cfg.lists * BATCH) if lists else cfg.singles
        row = h.versus(f"{ds.name}-{key}", f"{ds.name}: {title}", "rec/s", work, t["catalog"], t["peer"], target=1.0)
        h.log_race(row.key, row, started)
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    args, cfg = h.options(argv, QUICK, FULL, __doc__, "100k small records and 20k images", "minimum rounds")
    started = time.perf_counter()
    info = h.start_report(
        "TFRecord Catalog: random access against ArrayRecord and TFDS's data source",
        {"array_record": h.dist_version("array_record"), "tensorflow-datasets": h.dist_version("tensorflow-datasets")},
        f"mode: {'quick' if args.quick else 'full'}: {cfg.small_records:,} small Examples (id, label, score, "
        f"vec[16]) and {cfg.images:,} 32x32x3 uint8 tensor images, {SHARDS} shards/files each, page cache",
        f"each row: {cfg.singles:,} single indices or {cfg.lists} lists of {BATCH} a run; best of "
        f"{cfg.repeats}+ interleaved rounds",
    )
    rows: list[h.Versus] = []
    with tempfile.TemporaryDirectory(prefix="bench_access_") as d, Catalog.init(Path(d) / "cat") as cat:
        for ds in build(cat, cfg):
            rows += dataset_rows(cfg, ds, Path(d))
    print(h.versus_table(rows, "peer"))
    h.print_medians(rows)
    missed = [r.key for r in rows if r.met() is False]
    print(f"\n{len(rows) - len(missed)} targets met, {len(missed)} missed{': ' + ', '.join(missed) if missed else ''}.")
    print(f"run time {time.perf_counter() - started:.0f} s; load average at the end {' '.join(map(str, h.loadavg()))}")
    if args.json:
        h.write_report(args.json, info, args.quick, cfg, [r.to_json() for r in rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())
