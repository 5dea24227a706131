"""Ingest benchmarks: CSV, Parquet, a pandas DataFrame and an image folder into shards, against
the seeds' way of making TFRecords from the same input, side by side in one run.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_ingest              # full run: 1,000,000 rows, 10,000 images
    .venv/bin/python -m benchmarks.bench_ingest --quick      # 100,000 rows, 2,000 images
    .venv/bin/python -m benchmarks.bench_ingest --json results.json
    .venv/bin/python -m benchmarks.bench_ingest --profile all   # cProfile every catalog side, not only misses
    .venv/bin/python -m benchmarks.bench_ingest --only csv,images

The peer is the seeds' loop ("Creates TFRecord from Structured Dataset" and "... from Image
Dataset"): read the input (``pandas.read_csv``, ``pyarrow.parquet.read_table().to_pylist()``,
the DataFrame's rows, each image file's bytes), build one ``tf.train.Example`` per row with one
``tf.train.Feature`` per column, and write it with ``tf.io.TFRecordWriter`` (no fsync). Where the
peer has more than one reasonable way (``itertuples`` or ``to_dict("records")``; ``open().read()``
or the seed's ``tf.io.read_file``), every way runs in the same race and the fastest is the
peer of the target; the others are information rows. The catalog side is what ``catalog
append`` does: ``Dataset.append_files([input])`` (validated, written, fsynced, committed), and
``Dataset.append_rows(df)`` for the DataFrame. Each comparison runs in interleaved rounds whose
order rotates, every run into a new catalog (or a new output file) made outside the timer,
after an untimed warm-up run of each side whose output is checked: the same record count, and
the decoded records equal to the input and between the sides. Only the RATIOS are meaningful.
Progress goes to stderr, the report (a markdown table) to stdout. See benchmarks/README.md.
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

from benchmarks import harness as h
from catalog import Catalog, Dataset, Schema, read_record_batches, read_records
from catalog.commit.values import Commit

NAME = "ingest"
SECTIONS = ("csv", "parquet", "frame", "images")
TARGETS = {"csv": 3.0, "parquet": 3.0, "frame": 5.0, "images": 2.0}

# The table: 3 int64, 3 float32 and 2 string columns, in this order in every input.
INTS, FLOATS, TEXTS = ("id", "user", "clicks"), ("score", "price", "weight"), ("category", "text")
TABLE_SCHEMA: dict[str, Any] = {
    "features": {
        **{name: {"dtype": "int64"} for name in INTS},
        **{name: {"dtype": "float32"} for name in FLOATS},
        **{name: {"dtype": "string"} for name in TEXTS},
    }
}
IMAGE_SCHEMA: dict[str, Any] = {
    "features": {"image": {"dtype": "bytes"}, "label": {"dtype": "int64"}, "filename": {"dtype": "string"}}
}
IMAGE_SIDE = 32  # pixels: small RGB JPEGs
IMAGE_CLASSES = 10
RUN_IDS = itertools.count(1)  # every run's catalog or output file has a name of its own


@dataclass
class Config(h.Racing):
    rows: int  # rows of the CSV, the Parquet file and the DataFrame
    images: int  # JPEGs in the image folder


FULL = Config(rows=1_000_000, images=10_000, repeats=3, budget=60.0)
QUICK = Config(rows=100_000, images=2_000, repeats=3, budget=10.0)


# --------------------------------------------------------------------------- the inputs


def make_table(n: int, seed: int = 0) -> pd.DataFrame:
    """The table as pandas reads a CSV: int64, float64 and text columns. Floats have few
    decimals, as numbers in a CSV from elsewhere would; both sides store them as float32."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(2, 9, n).tolist()
    labels = np.array(h.LABELS, dtype=object)[rng.integers(0, len(h.LABELS), n)].tolist()
    words = len(h.WORDS)
    return pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64),
            "user": rng.integers(0, 10_000_000, n, dtype=np.int64),
            "clicks": rng.integers(0, 1_000, n, dtype=np.int64),
            "score": np.round(rng.random(n), 6),
            "price": np.round(rng.random(n) * 1_000, 2),
            "weight": np.round(rng.standard_normal(n) * 10, 4),
            "category": labels,
            "text": [" ".join(h.WORDS[(i + j) % words] for j in range(lengths[i])) + f" #{i}" for i in range(n)],
        }
    )


def expected_table(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """What decoding the records of ``df`` must give, per feature (floats as float32)."""
    out: dict[str, np.ndarray] = {name: df[name].to_numpy(dtype=np.int64) for name in INTS}
    out.update({name: df[name].to_numpy(dtype=np.float64).astype(np.float32) for name in FLOATS})
    out.update({name: np.array(df[name].tolist(), dtype=object) for name in TEXTS})
    return out


def make_images(folder: Path, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``n`` random 32x32 RGB JPEGs in ``folder/<class>/``, made with Pillow; returns what
    decoding the records must give, in the order both sides read them (class, then file name)."""
    rng = np.random.default_rng(seed)
    names = [f"class_{c:02d}" for c in range(IMAGE_CLASSES)]
    for name in names:
        (folder / name).mkdir(parents=True)
    files: list[tuple[int, str]] = []
    for i in range(n):
        label = i % IMAGE_CLASSES
        rel = f"{names[label]}/img_{i:06d}.jpg"
        pixels = rng.integers(0, 256, (IMAGE_SIDE, IMAGE_SIDE, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / rel, format="JPEG", quality=90)
        files.append((label, rel))
    files.sort(key=lambda f: f[1])
    return {
        "image": np.array([(folder / rel).read_bytes() for _, rel in files], dtype=object),
        "label": np.array([label for label, _ in files], dtype=np.int64),
        "filename": np.array([rel for _, rel in files], dtype=object),
    }


# --------------------------------------------------------------------------- the seeds' way


class SeedsWay:
    """The seeds' loop: one ``tf.train.Example`` a row, one ``tf.train.Feature`` a column,
    written with ``tf.io.TFRecordWriter``. Each row shape (tuple, dict) has its Example written
    out feature by feature, as the seed does, with no helper call per feature."""

    def __init__(self, tf: Any) -> None:
        self.tf = tf
        train = tf.train
        self.Example, self.Features, self.Feature = train.Example, train.Features, train.Feature
        self.Int64List, self.FloatList, self.BytesList = train.Int64List, train.FloatList, train.BytesList

    def from_tuple(self, r: tuple[Any, ...]) -> bytes:
        """A row as ``itertuples(index=False, name=None)`` yields it (the table's column order)."""
        F, I64, Fl, B = self.Feature, self.Int64List, self.FloatList, self.BytesList
        return self.Example(
            features=self.Features(
                feature={
                    "id": F(int64_list=I64(value=[r[0]])),
                    "user": F(int64_list=I64(value=[r[1]])),
                    "clicks": F(int64_list=I64(value=[r[2]])),
                    "score": F(float_list=Fl(value=[r[3]])),
                    "price": F(float_list=Fl(value=[r[4]])),
                    "weight": F(float_list=Fl(value=[r[5]])),
                    "category": F(bytes_list=B(value=[r[6].encode("utf-8")])),
                    "text": F(bytes_list=B(value=[r[7].encode("utf-8")])),
                }
            )
        ).SerializeToString()

    def from_dict(self, r: dict[str, Any]) -> bytes:
        """A row as a dict (``to_dict("records")``, ``to_pylist()``), the seed's ``row['int_col']``."""
        F, I64, Fl, B = self.Feature, self.Int64List, self.FloatList, self.BytesList
        return self.Example(
            features=self.Features(
                feature={
                    "id": F(int64_list=I64(value=[r["id"]])),
                    "user": F(int64_list=I64(value=[r["user"]])),
                    "clicks": F(int64_list=I64(value=[r["clicks"]])),
                    "score": F(float_list=Fl(value=[r["score"]])),
                    "price": F(float_list=Fl(value=[r["price"]])),
                    "weight": F(float_list=Fl(value=[r["weight"]])),
                    "category": F(bytes_list=B(value=[r["category"].encode("utf-8")])),
                    "text": F(bytes_list=B(value=[r["text"].encode("utf-8")])),
                }
            )
        ).SerializeToString()

    def write_tuples(self, df: pd.DataFrame, out: Path) -> int:
        n = 0
        with self.tf.io.TFRecordWriter(str(out)) as w:
            for r in df.itertuples(index=False, name=None):
                w.write(self.from_tuple(r))
                n += 1
        return n

    def write_dicts(self, rows: list[dict[str, Any]], out: Path) -> int:
        n = 0
        with self.tf.io.TFRecordWriter(str(out)) as w:
            for r in rows:
                w.write(self.from_dict(r))
                n += 1
        return n

    def images(self, folder: Path, out: Path, tf_read: bool) -> int:
        """The seed's image loop: each file's bytes (Python's ``open().read()``, or the seed's
        ``tf.io.read_file``), its class's index as ``label``, and ``<class>/<file>`` as
        ``filename`` (the catalog stores it too, so both sides do the same work)."""
        F, I64, B = self.Feature, self.Int64List, self.BytesList
        read_file = self.tf.io.read_file
        n = 0
        classes = sorted(e.name for e in os.scandir(folder) if e.is_dir())
        with self.tf.io.TFRecordWriter(str(out)) as w:
            for label, c in enumerate(classes):
                for entry in sorted(os.scandir(folder / c), key=lambda e: e.name):
                    if tf_read:
                        raw = read_file(entry.path).numpy()
                    else:
                        with open(entry.path, "rb") as f:
                            raw = f.read()
                    example = self.Example(
                        features=self.Features(
                            feature={
                                "image": F(bytes_list=B(value=[raw])),
                                "label": F(int64_list=I64(value=[label])),
                                "filename": F(bytes_list=B(value=[f"{c}/{entry.name}".encode()])),
                            }
                        )
                    )
                    w.write(example.SerializeToString())
                    n += 1
        return n


# --------------------------------------------------------------------------- the sides


class Outputs:
    """A section's expected columns, and the first side's decoded output: every side's warm-up
    output must hold the input's record count, decode to the input, and equal the first side's."""

    def __init__(self, schema: dict[str, Any], expected: dict[str, np.ndarray]) -> None:
        self.schema = Schema.from_json(schema)
        self.expected = expected
        self.n = len(next(iter(expected.values())))
        self.first: tuple[str, dict[str, np.ndarray]] | None = None

    def check(self, who: str, records: list[bytes]) -> None:
        h.check(len(records) == self.n, f"{who} wrote {len(records):,} records for {self.n:,} input rows")
        got = self.schema.decode_batch(records)
        h.check(set(got) == set(self.expected), f"{who}: decoded features {sorted(got)}")
        for k, want in self.expected.items():
            h.check(np.array_equal(got[k], want), f"{who}: decoded {k!r} differs from the input")
        if self.first is None:
            self.first = (who, got)
            return
        name, theirs = self.first
        for k in self.expected:
            h.check(np.array_equal(got[k], theirs[k]), f"decoded {k!r} differs between {who} and {name}")
        h.log(f"  checked: {who} and {name} wrote the same {self.n:,} records, equal to the input")


class Side(h.Side):
    """One contender's runs, each into a new output, which decodes to the input (checked once)."""

    def __init__(self, name: str, work: Path, outputs: Outputs) -> None:
        super().__init__()
        self.name, self.work, self.outputs = name, work, outputs

    def _records(self, out: object) -> list[bytes]:
        raise NotImplementedError

    def check(self, out: object) -> None:
        self.outputs.check(self.name, self._records(out))


class CatalogSide(Side):
    """``append`` into a new catalog for every run (made, and the last one removed, untimed)."""

    def __init__(
        self, work: Path, outputs: Outputs, schema: dict[str, Any], append: Callable[[Dataset], Commit]
    ) -> None:
        super().__init__("catalog", work, outputs)
        self.schema, self.append = schema, append
        self.cat: Catalog | None = None
        self.ds: Dataset | None = None

    def prepare(self) -> None:
        self.cat = Catalog.init(self.work / f"catalog-{next(RUN_IDS):04d}")
        self.ds = self.cat.register(NAME, self.schema)

    def run(self) -> Commit:
        assert self.ds is not None
        return self.append(self.ds)

    def _records(self, out: object) -> list[bytes]:
        assert isinstance(out, Commit)
        h.check(out.records == self.outputs.n, f"the commit registers {out.records:,} records")
        return [r for s in out.shards for batch in read_record_batches(s.path) for r in batch]

    def discard(self) -> None:
        h.remove_catalog(self.cat)
        self.cat = self.ds = None

    def profile(self) -> str:
        """One append under cProfile, into a new catalog made outside the profile."""
        return h.profile_run(self.prepare, h.sync_and_collect, self.run, self.discard)


class PeerSide(Side):
    """``write(out)`` into a new file for every run (removed untimed); it returns the rows written."""

    def __init__(self, name: str, work: Path, outputs: Outputs, write: Callable[[Path], int]) -> None:
        super().__init__(name, work, outputs)
        self.write = write
        self.out: Path | None = None

    def prepare(self) -> None:
        self.out = self.work / f"peer-{next(RUN_IDS):04d}.tfrecord"

    def run(self) -> int:
        assert self.out is not None
        return self.write(self.out)

    def _records(self, out: object) -> list[bytes]:
        h.check(out == self.outputs.n, f"{self.name} reports {out} rows written")
        assert self.out is not None
        return list(read_records(str(self.out)))

    def discard(self) -> None:
        if self.out is not None:
            self.out.unlink()
        self.out = None


# --------------------------------------------------------------------------- the sections


@dataclass
class Section:
    key: str
    title: str  # what the catalog side does, on what
    rows: int
    catalog: CatalogSide
    peers: dict[str, PeerSide]  # way -> side; the fastest is the target's peer


@dataclass
class Outcome:
    """A section's rows in the table, and each side's seconds (wall and CPU) for the notes."""

    rows: list[h.Versus]
    seconds: dict[str, dict[str, list[float]]]


def run_section(cfg: Config, s: Section) -> Outcome:
    h.log(f"[{s.key}] {s.title} ...")
    started = time.perf_counter()
    sides: dict[str, Side] = {"catalog": s.catalog, **s.peers}
    t = cfg.race({name: side.contender() for name, side in sides.items()})
    best = min(s.peers, key=lambda way: t[way].best)
    target = TARGETS[s.key]
    rows = [h.versus(s.key, f"{s.title} vs {best}", "rec/s", s.rows, t["catalog"], t[best], target=target)]
    rows += [
        h.versus(f"{s.key} ({way})", f"(info) {s.key}: the same vs {way}", "rec/s", s.rows, t["catalog"], t[way])
        for way in s.peers
        if way != best
    ]
    cpu = {name: side.cpu for name, side in sides.items()}
    rows.append(h.cpu_row(s.key, f"(info) {s.key}: the same, CPU time, vs {best}", s.rows, cpu, "catalog", best))
    h.log_race(s.key, rows[0], started, cpu=rows[-1])
    seconds = {name: {"wall": t[name].times, "cpu": cpu[name]} for name in sides}
    return Outcome(rows, seconds)


@dataclass
class Inputs:
    work: Path
    seeds: SeedsWay
    df: pd.DataFrame | None = None
    table: Outputs | None = None
    csv: Path | None = None
    parquet: Path | None = None
    folder: Path | None = None
    images: Outputs | None = None

    def describe(self) -> list[str]:
        lines = []
        if self.csv is not None:
            lines.append(f"CSV {self.csv.stat().st_size / h.MIB:.1f} MiB")
        if self.parquet is not None:
            lines.append(f"Parquet {self.parquet.stat().st_size / h.MIB:.1f} MiB (pyarrow's defaults)")
        if self.folder is not None and self.images is not None:
            size = sum(len(b) for b in self.images.expected["image"])
            lines.append(f"images {size / self.images.n:,.0f} bytes a JPEG on average")
        return lines


def make_inputs(cfg: Config, work: Path, seeds: SeedsWay, sections: set[str]) -> Inputs:
    """Every input, made, written and page-cached before any timing."""
    inp = Inputs(work, seeds)
    if sections & {"csv", "parquet", "frame"}:
        t0 = time.perf_counter()
        inp.df = make_table(cfg.rows)
        inp.table = Outputs(TABLE_SCHEMA, expected_table(inp.df))
        if "csv" in sections:
            inp.csv = work / "table.csv"
            inp.df.to_csv(inp.csv, index=False)
            h.page_cache(inp.csv)
        if "parquet" in sections:
            inp.parquet = work / "table.parquet"
            pq.write_table(pa.Table.from_pandas(inp.df, preserve_index=False), inp.parquet)
            h.page_cache(inp.parquet)
        h.log(f"[inputs] {cfg.rows:,}-row table and its files in {time.perf_counter() - t0:.1f} s")
    if "images" in sections:
        t0 = time.perf_counter()
        inp.folder = work / "images"
        inp.images = Outputs(IMAGE_SCHEMA, make_images(inp.folder, cfg.images))
        h.cache_tree(inp.folder)
        h.log(f"[inputs] {cfg.images:,} JPEGs in {time.perf_counter() - t0:.1f} s")
    return inp


def sections_of(inp: Inputs, cfg: Config, chosen: set[str]) -> list[Section]:
    seeds, work = inp.seeds, inp.work
    out: list[Section] = []

    def add(key: str, title: str, outputs: Outputs, schema: dict[str, Any], append: Callable[[Dataset], Commit],
            ways: dict[str, Callable[[Path], int]]) -> None:  # fmt: skip
        peers = {way: PeerSide(way, work, outputs, write) for way, write in ways.items()}
        out.append(Section(key, title, outputs.n, CatalogSide(work, outputs, schema, append), peers))

    table, df, rows = inp.table, inp.df, f"{cfg.rows:,} rows x 8 columns"
    if table is not None and df is not None:
        h.check(list(df.columns) == list(TABLE_SCHEMA["features"]), "the table's columns in the schema's order")
    if "csv" in chosen and table is not None and inp.csv is not None:
        csv = inp.csv
        add("csv", f"CSV -> shards, {rows}: `append_files([csv])`", table, TABLE_SCHEMA,
            lambda ds: ds.append_files([csv]),
            {"read_csv + itertuples": lambda o: seeds.write_tuples(pd.read_csv(csv), o),
             "read_csv + to_dict(records)": lambda o: seeds.write_dicts(pd.read_csv(csv).to_dict("records"), o)},
        )  # fmt: skip
    if "parquet" in chosen and table is not None and inp.parquet is not None:
        parquet = inp.parquet
        add("parquet", f"Parquet -> shards, {rows}: `append_files([parquet])`", table, TABLE_SCHEMA,
            lambda ds: ds.append_files([parquet]),
            {"read_table().to_pylist()": lambda o: seeds.write_dicts(pq.read_table(parquet).to_pylist(), o)},
        )  # fmt: skip
    if "frame" in chosen and table is not None and df is not None:
        frame = df
        add("frame", f"DataFrame -> shards, {rows}: `append_rows(df)`", table, TABLE_SCHEMA,
            lambda ds: ds.append_rows(frame),
            {"itertuples": lambda o: seeds.write_tuples(frame, o),
             "to_dict(records)": lambda o: seeds.write_dicts(frame.to_dict("records"), o)},
        )  # fmt: skip
    if "images" in chosen and inp.images is not None and inp.folder is not None:
        folder = inp.folder
        add("images", f"image folder -> shards, {cfg.images:,} {IMAGE_SIDE}x{IMAGE_SIDE} JPEGs: "
            "`append_files([folder])`", inp.images, IMAGE_SCHEMA,
            lambda ds: ds.append_files([folder]),
            {"open().read()": lambda o: seeds.images(folder, o, tf_read=False),
             "tf.io.read_file (the seed's)": lambda o: seeds.images(folder, o, tf_read=True)},
        )  # fmt: skip
    return out


# --------------------------------------------------------------------------- report


def print_results(results: list[h.Versus], outcomes: dict[str, Outcome], elapsed: float) -> list[h.Versus]:
    """The table, the median line, the seconds and the count of targets met; returns the missed rows."""
    print(h.versus_table(results, "seeds' way (fastest)"))
    print(
        "\nratio = catalog rate / peer rate (best round of each side; rows per second). The peer is the fastest "
        "of the seeds' ways in the same race; `(info)` rows set the catalog against the others, and its CPU "
        "seconds against the fastest way's. The catalog side includes validation, the shards' fsync and the "
        f"commit; the peer writes one file and no fsync. Total time {elapsed:.0f} s."
    )
    h.print_medians(results)
    print("\nSeconds per run (`time.perf_counter`, and this process's `time.process_time`):\n")
    print(h.seconds_table({k: o.seconds for k, o in outcomes.items()}, "section", "side", share=True))
    return h.versus_missed(results)


def header(cfg: Config, quick: bool, tf: Any) -> dict[str, Any]:
    return h.start_report(
        "TFRecord Catalog: ingest benchmarks vs the seeds' way",
        dict(
            tensorflow=tf.__version__,
            pandas=pd.__version__,
            pyarrow=pa.__version__,
            pillow=h.dist_version("Pillow", "pillow"),
            numpy=np.__version__,
            **h.format_versions(),
        ),
        f"mode: {'quick' if quick else 'full'}: {cfg.rows:,} rows, {cfg.images:,} images; {cfg.rounds()} "
        "after a warm-up round",
        f"table: {', '.join(INTS)} int64; {', '.join(FLOATS)} float32 (float64 in pandas, up to 6 decimals in "
        f"the CSV); {', '.join(TEXTS)} string",
        f"images: {IMAGE_SIDE}x{IMAGE_SIDE} RGB JPEGs (random pixels, Pillow, quality 90) in {IMAGE_CLASSES} "
        "class folders; schema image bytes, label int64, filename string (the peer stores the filename too)",
        "every run: a new catalog or output file (made, and the last one removed, untimed), then `os.sync()` and "
        "`gc.collect()` untimed",
    )


def main(argv: list[str] | None = None) -> int:
    parser = h.arg_parser(
        __doc__,
        "100,000 rows and 2,000 images",
        "minimum timed rounds per comparison (default 3)",
        "the catalog side",
    )
    parser.add_argument(
        "--only", metavar="SECTIONS", help=f"comma-separated sections to run ({','.join(SECTIONS)}); default all"
    )
    args = parser.parse_args(argv)
    cfg = h.chosen_config(args, QUICK, FULL)
    chosen = h.chosen_sections(args.only, SECTIONS)
    tf = h.import_tensorflow()
    started = time.perf_counter()
    info = header(cfg, args.quick, tf)
    results: list[h.Versus] = []
    outcomes: dict[str, Outcome] = {}
    profiles: dict[str, Callable[[], str]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_ingest_", dir="/tmp") as d:
        inp = make_inputs(cfg, Path(d), SeedsWay(tf), chosen)
        print("- inputs: " + "; ".join(inp.describe()) + "\n", flush=True)
        h.freeze()
        for section in sections_of(inp, cfg, chosen):
            outcome = run_section(cfg, section)
            outcomes[section.key] = outcome
            results += outcome.rows
            profiles[section.key] = section.catalog.profile
            section.catalog.outputs.first = None  # the decoded reference is not needed any more
        elapsed = time.perf_counter() - started
        print_results(results, outcomes, elapsed)
        texts = h.versus_profiles(args.profile, results, profiles, "cProfile")
    if args.json:
        h.write_report(
            args.json,
            info,
            args.quick,
            cfg,
            [r.to_json() for r in results],
            seconds={k: o.seconds for k, o in outcomes.items()},
            elapsed_seconds=elapsed,
            profiles=texts,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
