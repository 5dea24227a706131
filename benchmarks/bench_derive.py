"""Derived datasets: ``ds.filter`` and ``ds.map`` against Hugging Face ``datasets``' filter and map.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_derive            # full run: 1,000,000 rows
    .venv/bin/python -m benchmarks.bench_derive --quick    # 100,000 rows
    .venv/bin/python -m benchmarks.bench_derive --only filter,map-batched
    .venv/bin/python -m benchmarks.bench_derive --json results.json
    .venv/bin/python -m benchmarks.bench_derive --profile all   # cProfile every catalog side, not only misses

The rows are small (id int64, label int64 with class names, score float32, text of about 20
characters). They are built once, untimed, into a catalog dataset (``shards`` shards) and into
a Hugging Face Dataset saved to disk and loaded back with ``load_from_disk`` (memory-mapped
Arrow, so its filter and map write their results to cache files beside it). Timed, side by
side in interleaved rounds whose order rotates:

- the catalog: ``ds.filter(predicate, into=...)`` and ``ds.map(fn, into=...)`` (row by row and
  ``batched``), with workers=1 and workers=2: every new shard written and fsynced, the new
  dataset committed;
- Hugging Face: ``Dataset.filter`` and ``Dataset.map`` (row by row and ``batched``, its fast
  path), with num_proc=1 and num_proc=2, ``load_from_cache_file=False`` and a new cache file
  every round, so it computes and writes its result (a filter's: the indices of the kept rows,
  which is how ``datasets`` materializes one; a map's: the new table) every time.

A filter is set against Hugging Face's filter by a function of a row and batched (its fast
path), and, for information, batched then ``flatten_indices`` (the kept rows copied, as the
catalog writes them); a map against the same kind of map (row or batched); each at the same
process count; and the catalog with 2 workers against itself with 1. Only the RATIOS are
meaningful. Progress goes to stderr, the report to stdout; see benchmarks/README.md.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import harness as h
from catalog import Catalog, Dataset

NAME = "rows"
LABELS = ["cat", "dog", "bird", "fish"]
DOG = LABELS.index("dog")
SCHEMA: dict[str, Any] = {
    "features": {
        "id": {"dtype": "int64"},
        "label": {"dtype": "int64", "names": LABELS},
        "score": {"dtype": "float32"},
        "text": {"dtype": "string"},
    }
}
PREDICATE = "label = 'dog' AND score > 0.5"
TARGET = 3.0  # issue 32, §4: >= 3x Hugging Face's filter and map


@dataclass
class Config(h.Racing):
    rows: int
    shards: int
    max_rounds: int = field(default=7, kw_only=True)


FULL = Config(rows=1_000_000, shards=16, repeats=3, budget=60.0)
QUICK = Config(rows=100_000, shards=16, repeats=3, budget=10.0)


# --------------------------------------------------------------------------- the functions (workers import them)


def with_length(row: dict[str, Any]) -> dict[str, Any]:
    """The catalog's row map: the row with a new feature, its text's length."""
    row["length"] = len(row["text"])
    return row


def with_length_batch(batch: dict[str, np.ndarray]) -> dict[str, Any]:
    """The catalog's batched map: the columns with the new one."""
    batch["length"] = np.fromiter(map(len, batch["text"]), dtype=np.int64, count=len(batch["text"]))
    return batch


def hf_keep(row: dict[str, Any]) -> bool:
    return bool(row["label"] == DOG and row["score"] > 0.5)


def hf_keep_batch(label: list[int], score: list[float]) -> list[bool]:
    return [lab == DOG and s > 0.5 for lab, s in zip(label, score, strict=True)]


def hf_length(row: dict[str, Any]) -> dict[str, Any]:
    """Hugging Face's row map: the new column only (``datasets`` keeps the others)."""
    return {"length": len(row["text"])}


def hf_length_batch(text: list[str]) -> dict[str, Any]:
    return {"length": [len(t) for t in text]}


# --------------------------------------------------------------------------- the rows, built once


@dataclass
class Rows:
    columns: dict[str, Any]
    kept: int  # rows the filter keeps
    lengths: int  # the sum of the texts' lengths (what the map adds)


def make_rows(n: int, seed: int = 0) -> Rows:
    rng = np.random.default_rng(seed)
    label = rng.integers(0, len(LABELS), n)
    score = rng.random(n).astype(np.float32)
    words = np.array(h.WORDS)
    picks = rng.integers(0, len(words), (n, 3))
    text = [f"{a} {b} {c} {i}"[:24] for i, (a, b, c) in enumerate(words[picks].tolist())]
    columns = {"id": np.arange(n, dtype=np.int64), "label": label, "score": score, "text": text}
    kept = int(((label == DOG) & (score > 0.5)).sum())
    return Rows(columns, kept, sum(map(len, text)))


def build_catalog(root: Path, rows: Rows, shards: int) -> Catalog:
    cat = Catalog.init(root)
    ds = cat.register(NAME, SCHEMA)
    n = len(rows.columns["id"])
    ds.append_rows(rows.columns, shard_records=-(-n // shards))
    h.check(len(cat.dataset(NAME).shards()) == shards, f"{shards} shards")
    return cat


def build_hf(folder: Path, rows: Rows) -> Any:
    import datasets

    features = datasets.Features(
        {
            "id": datasets.Value("int64"),
            "label": datasets.ClassLabel(names=LABELS),
            "score": datasets.Value("float32"),
            "text": datasets.Value("string"),
        }
    )
    cols = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in rows.columns.items()}
    datasets.Dataset.from_dict(cols, features=features).save_to_disk(str(folder))
    return datasets.load_from_disk(str(folder))


# --------------------------------------------------------------------------- the sides


class CatalogSide(h.Side):
    """One derivation into a new dataset each run; dropped and its files collected after."""

    def __init__(self, cat: Catalog, call: Callable[[Dataset, str], Any], check: Callable[[Any], None]) -> None:
        super().__init__()
        self.cat = cat
        self.call = call
        self.checker = check
        self.into = ""

    def prepare(self) -> None:
        self.into = f"out{self.runs:03d}"

    def run(self) -> object:
        return self.call(self.cat.dataset(NAME), self.into)

    def check(self, out: object) -> None:
        self.checker(self.cat.dataset(self.into))

    def discard(self) -> None:
        self.cat.drop(self.into)
        self.cat.gc(grace=timedelta(0))


class HFSide(h.Side):
    """One filter or map of the loaded Hugging Face Dataset into a new cache file each run."""

    def __init__(self, ds: Any, work: Path, call: Callable[[Any, str], Any], check: Callable[[Any], None]) -> None:
        super().__init__()
        self.ds = ds
        self.work = work
        self.call = call
        self.checker = check
        self.folder = work

    def prepare(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="hf-", dir=self.work))

    def run(self) -> object:
        return self.call(self.ds, str(self.folder / "cache.arrow"))

    def check(self, out: object) -> None:
        self.checker(out)

    def discard(self) -> None:
        shutil.rmtree(self.folder)


def hf_options(num_proc: int, cache: str) -> dict[str, Any]:
    return {"num_proc": None if num_proc == 1 else num_proc, "load_from_cache_file": False, "cache_file_name": cache}


def hf_filter(num_proc: int, batched: bool, flat: bool = False) -> Callable[[Any, str], Any]:
    """``Dataset.filter`` (its result: the kept rows' indices over the source's table); with
    ``flat``, then ``flatten_indices``: the kept rows copied into a table of their own, as the
    catalog's filter writes them (an information row: not what a user of ``datasets`` must do)."""

    def call(ds: Any, cache: str) -> Any:
        if flat:
            out = hf_filter(num_proc, batched)(ds, cache)
            return out.flatten_indices(cache_file_name=cache + ".flat", num_proc=None if num_proc == 1 else num_proc)
        if batched:
            return ds.filter(
                hf_keep_batch, batched=True, input_columns=["label", "score"], **hf_options(num_proc, cache)
            )
        return ds.filter(hf_keep, **hf_options(num_proc, cache))

    return call


def hf_map(num_proc: int, batched: bool) -> Callable[[Any, str], Any]:
    def call(ds: Any, cache: str) -> Any:
        if batched:
            return ds.map(hf_length_batch, batched=True, input_columns=["text"], **hf_options(num_proc, cache))
        return ds.map(hf_length, **hf_options(num_proc, cache))

    return call


# --------------------------------------------------------------------------- the checks


def catalog_filter_check(rows: Rows) -> Callable[[Any], None]:
    def check(ds: Any) -> None:
        n = sum(s.records for s in ds.shards())
        h.check(n == rows.kept, f"catalog filter kept {n} rows, expected {rows.kept}")

    return check


def catalog_map_check(rows: Rows) -> Callable[[Any], None]:
    def check(ds: Any) -> None:
        total = sum(int(b["length"].sum()) for b in ds.batches(65536, columns=["length"]))
        h.check(total == rows.lengths, f"catalog map: lengths sum to {total}, expected {rows.lengths}")

    return check


def hf_filter_check(rows: Rows) -> Callable[[Any], None]:
    def check(out: Any) -> None:
        h.check(len(out) == rows.kept, f"Hugging Face filter kept {len(out)} rows, expected {rows.kept}")

    return check


def hf_map_check(rows: Rows) -> Callable[[Any], None]:
    def check(out: Any) -> None:
        total = int(out.data.column("length").to_numpy().sum())
        h.check(total == rows.lengths, f"Hugging Face map: lengths sum to {total}, expected {rows.lengths}")

    return check


# --------------------------------------------------------------------------- the races


@dataclass
class Bench:
    cfg: Config
    rows: Rows
    cat: Catalog
    hf: Any
    work: Path

    def catalog(self, call: Callable[[Dataset, str], Any], check: Callable[[Any], None]) -> h.Contender:
        return CatalogSide(self.cat, call, check).contender()

    def peer(self, call: Callable[[Any, str], Any], check: Callable[[Any], None]) -> h.Contender:
        return HFSide(self.hf, self.work, call, check).contender()

    def row(self, key: str, title: str, ours: h.Timing, peer: h.Timing, target: float | None = TARGET) -> h.Versus:
        n = self.cfg.rows
        return h.Versus(key, title, "rec/s", n, ours.times, n, peer.times, target)


def catalog_filter(workers: int) -> Callable[[Dataset, str], Any]:
    return lambda ds, into: ds.filter(PREDICATE, into=into, workers=workers)


def catalog_map(workers: int, batched: bool) -> Callable[[Dataset, str], Any]:
    fn = with_length_batch if batched else with_length
    return lambda ds, into: ds.map(fn, into=into, batched=batched, workers=workers)


def bench_filter(b: Bench) -> list[h.Versus]:
    ours, theirs = catalog_filter_check(b.rows), hf_filter_check(b.rows)
    contenders = {f"cat{w}": b.catalog(catalog_filter(w), ours) for w in (1, 2)}
    for p in (1, 2):
        contenders[f"hf{p}"] = b.peer(hf_filter(p, False), theirs)
        contenders[f"hf{p}-batched"] = b.peer(hf_filter(p, True), theirs)
        contenders[f"hf{p}-flat"] = b.peer(hf_filter(p, True, flat=True), theirs)
    t = b.cfg.race(contenders)
    rows = []
    for w in (1, 2):
        what = f"filter `{PREDICATE}`, workers={w} vs `Dataset.filter`, num_proc={w}"
        rows.append(b.row(f"filter-{w}", f"{what}, a function of a row", t[f"cat{w}"], t[f"hf{w}"]))
        rows.append(b.row(f"filter-{w}-batched", f"{what}, batched", t[f"cat{w}"], t[f"hf{w}-batched"]))
        flat = f"(info) {what}, batched, then `flatten_indices` (the kept rows copied)"
        rows.append(b.row(f"filter-{w}-flat", flat, t[f"cat{w}"], t[f"hf{w}-flat"], None))
    rows.append(b.row("filter-2v1", "filter, workers=2 vs workers=1", t["cat2"], t["cat1"], 1.0))
    return rows


def bench_map(b: Bench, batched: bool) -> list[h.Versus]:
    ours, theirs = catalog_map_check(b.rows), hf_map_check(b.rows)
    contenders = {f"cat{w}": b.catalog(catalog_map(w, batched), ours) for w in (1, 2)}
    contenders |= {f"hf{p}": b.peer(hf_map(p, batched), theirs) for p in (1, 2)}
    t = b.cfg.race(contenders)
    kind = "map-batched" if batched else "map"
    fn = "with_length_batch, batched=True" if batched else "with_length (a row)"
    rows = [
        b.row(f"{kind}-{w}", f"map `{fn}`, workers={w} vs `Dataset.map`, num_proc={w}", t[f"cat{w}"], t[f"hf{w}"])
        for w in (1, 2)
    ]
    rows.append(b.row(f"{kind}-2v1", f"{kind}, workers=2 vs workers=1", t["cat2"], t["cat1"], 1.0))
    return rows


def profiler(b: Bench, call: Callable[[Dataset, str], Any]) -> Callable[[], str]:
    """The catalog side with workers=1 under cProfile (its jobs run in this process then)."""

    def run() -> str:
        side = CatalogSide(b.cat, call, lambda _ds: None)
        side.prepare()
        h.sync_and_collect()
        try:
            return h.profile_text(side.run)
        finally:
            side.discard()

    return run


def profiles(b: Bench) -> dict[str, Callable[[], str]]:
    out = {}
    for w in (1, 2):
        out[f"filter-{w}"] = out[f"filter-{w}-batched"] = out["filter-2v1"] = profiler(b, catalog_filter(1))
        out[f"filter-{w}-flat"] = out["filter-1"]
        out[f"map-{w}"] = out["map-2v1"] = profiler(b, catalog_map(1, False))
        out[f"map-batched-{w}"] = out["map-batched-2v1"] = profiler(b, catalog_map(1, True))
    return out


# --------------------------------------------------------------------------- main


def header(cfg: Config, quick: bool) -> dict[str, Any]:
    import datasets
    import pyarrow

    return h.start_report(
        "TFRecord Catalog: filter and map vs Hugging Face datasets",
        {"datasets": datasets.__version__, "pyarrow": pyarrow.__version__, "numpy": np.__version__}
        | h.format_versions(),
        f"mode: {'quick' if quick else 'full'}: {cfg.rows:,} rows (id int64, label int64 with class names, "
        f"score float32, text of about 20 characters) in {cfg.shards} shards; {cfg.rounds()} after a warm-up round",
        "Hugging Face: `load_from_disk` of the same rows (memory-mapped Arrow); each run writes a new cache file "
        "(`load_from_cache_file=False`); progress bars off. The catalog: a new dataset per run, shards fsynced, "
        "one commit",
        "before every timed run, untimed: `os.sync()` and a garbage collection",
    )


def print_results(results: list[h.Versus], elapsed: float) -> list[h.Versus]:
    print(h.versus_table(results, "Hugging Face"))
    print(
        "\nratio = catalog rate / Hugging Face rate (best round of each side); the 2v1 rows set the catalog with "
        f"2 workers against itself with 1. Total time {elapsed:.0f} s."
    )
    h.print_medians(results)
    return h.versus_missed(results)


SECTIONS = ("filter", "map", "map-batched")


def main(argv: list[str] | None = None) -> int:
    parser = h.arg_parser(
        __doc__, "100,000 rows instead of 1,000,000", "minimum timed rounds (default 3)",
        "the catalog side (workers=1)",
    )  # fmt: skip
    parser.add_argument("--only", metavar="SECTIONS", help=f"comma-separated ({','.join(SECTIONS)}); default all")
    args = parser.parse_args(argv)
    cfg = h.chosen_config(args, QUICK, FULL)
    chosen = h.chosen_sections(args.only, SECTIONS)
    import datasets

    datasets.disable_progress_bars()
    started = time.perf_counter()
    info = header(cfg, args.quick)
    rows = make_rows(cfg.rows)
    with tempfile.TemporaryDirectory(prefix="bench_derive_", dir="/tmp") as d:
        h.log("[build] the catalog dataset and the Hugging Face Dataset ...")
        cat = build_catalog(Path(d) / "cat", rows, cfg.shards)
        b = Bench(cfg, rows, cat, build_hf(Path(d) / "hf", rows), Path(d))
        h.freeze()
        results: list[h.Versus] = []
        for key, step in (("filter", bench_filter), ("map", lambda b: bench_map(b, False)),
                          ("map-batched", lambda b: bench_map(b, True))):  # fmt: skip
            if key not in chosen:
                continue
            t0 = time.perf_counter()
            results += step(b)
            h.log(f"[{key}] done in {time.perf_counter() - t0:.0f} s")
        elapsed = time.perf_counter() - started
        print_results(results, elapsed)
        texts = h.versus_profiles(args.profile, results, profiles(b), "workers=1, cProfile")
        cat.close()
    if args.json:
        out = [r.to_json() for r in results]
        h.write_report(args.json, info, args.quick, cfg, out, elapsed_seconds=elapsed, profiles=texts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
