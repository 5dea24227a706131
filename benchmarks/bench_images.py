"""Images decoded on read (issue 33, §1): ``ds.torch`` and ``ds.tf_dataset`` with
``decode_images=True`` against torchvision's ``ImageFolder`` and TensorFlow Datasets' own
decoding of the same images.

Run from the repository root:

    .venv/bin/python -m benchmarks.bench_images            # full run: 10,000 JPEGs of 128x128
    .venv/bin/python -m benchmarks.bench_images --quick    # 1,000 JPEGs, 2 rounds
    .venv/bin/python -m benchmarks.bench_images --json results.json
    .venv/bin/python -m benchmarks.bench_images --profile all   # cProfile the catalog's torch side

Built once, untimed: an image folder ``DIR/<class>/<file>.jpg`` (10 classes; 128x128 RGB
JPEGs, Pillow, quality 90, of smooth gradients, a soft wave and noise, so they compress as
photographs do), brought into a catalog dataset as the README shows (``register`` with the
image's shape, ``append_files([DIR])``), and a TFDS dataset of the same files
(``tfds.dataset_builders.store_as_tfds_dataset``: ``Image`` and ``ClassLabel`` features,
TFRecord shards holding each file's bytes as they are), which a second catalog dataset adopts
where it lies (``cat.adopt``): both TensorFlow sides read the very same shard files.

Timed, a full epoch per run, in interleaved rounds whose order rotates, after a checked
warm-up run of each side:

- torch: ``DataLoader(ds.torch(batch_size=B, shuffle=True, decode_images=True,
  columns=["image", "label"]), batch_size=None, num_workers=2)``: uint8 ``(B, H, W, 3)``,
  decoded by Pillow in the workers; against ``DataLoader(ImageFolder(DIR,
  transform=PILToTensor()), batch_size=B, shuffle=True, num_workers=2)``: uint8
  ``(B, 3, H, W)``, decoded by Pillow in the workers (its loader's ``convert("RGB")``);
- tf: ``ds.tf_dataset(B, decode_images=True)`` against ``builder.as_dataset(split="train")
  .batch(B).prefetch(AUTOTUNE)``, both in stored order (``tf.io.decode_image`` in both
  graphs); and, for information, shuffled: ours ``shuffle=True`` (shards mixed, then a
  10,000-record buffer), TFDS ``shuffle_files=True`` (its shards' order only).

Neither side normalises or resizes: both deliver the decoded uint8 pixels. Before the races
the pixels are compared: the catalog's torch rows against ImageFolder's items (equal), its
tf_dataset's against TFDS's (equal). Only the RATIOS are meaningful. Progress goes to
stderr, the report to stdout; see benchmarks/README.md.
"""

from __future__ import annotations

import gc
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import harness as h
from catalog import Catalog, Dataset

SIZE = 128  # pixels a side
CLASSES = [f"class{i}" for i in range(10)]
QUALITY = 90  # JPEG quality: Pillow's default is 75; cameras and datasets' files are higher
BATCH = 128
WORKERS = 2
TARGET = 1.0  # issue 33 §1: at least the peer's throughput
CHECKED = 16  # images whose pixels are compared between the sides before the races
SETTLE_SECONDS = 0.5  # for the last epoch's DataLoader workers to wind down
PEERS_MISSING = (
    "bench_images needs torchvision (the `bench` extra: pip install torchvision matching your torch) "
    "and tensorflow-datasets (the `test` extra): {}"
)


@dataclass
class Config(h.Racing):
    images: int
    shards: int
    max_rounds: int = field(default=9, kw_only=True)


FULL = Config(images=10_000, shards=8, repeats=5, budget=150.0)
QUICK = Config(images=1_000, shards=4, repeats=2, budget=5.0)


# --------------------------------------------------------------------------- the images, made once


def picture(rng: np.random.Generator) -> np.ndarray:
    """A SIZE x SIZE RGB picture: two colours blended along a random direction, a soft wave and
    some noise; smooth areas and fine grain, so JPEG's size is a photograph's, not noise's."""
    y, x = np.mgrid[0:SIZE, 0:SIZE].astype(np.float32) / SIZE
    angle = rng.uniform(0, 2 * np.pi)
    along = np.cos(angle) * x + np.sin(angle) * y
    along = (along - along.min()) / max(float(np.ptp(along)), 1e-6)
    start, end = rng.uniform(0, 255, (2, 3))
    img = start + along[..., None] * (end - start)
    fx, fy = rng.uniform(1, 4, 2)
    img += 24 * np.sin(2 * np.pi * (fx * x + fy * y))[..., None]
    img += rng.normal(0, 6, (SIZE, SIZE, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def write_folder(root: Path, n: int) -> int:
    """``n`` JPEGs spread over the class folders of ``root``; returns their bytes."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in CLASSES:
        (root / c).mkdir(parents=True)
    total = 0
    for i in range(n):
        path = root / CLASSES[i % len(CLASSES)] / f"{i:05d}.jpg"
        Image.fromarray(picture(rng)).save(path, quality=QUALITY)
        total += path.stat().st_size
    return total


SCHEMA: dict[str, Any] = {
    "features": {
        "image": {"dtype": "bytes", "encoding": "image", "format": "jpeg", "shape": [SIZE, SIZE, 3]},
        "label": {"dtype": "int64", "names": CLASSES},
        "filename": {"dtype": "string"},
    }
}


def write_catalog(cat: Catalog, folder: Path, cfg: Config) -> Dataset:
    """The folder appended as a user does: a schema with the images' shape, then append_files."""
    ds = cat.register("folder", SCHEMA)
    ds.append_files([folder], shard_records=-(-cfg.images // cfg.shards))
    h.check(len(ds.shards()) == cfg.shards, f"the folder's dataset has {cfg.shards} shards")
    return ds


def write_tfds(folder: Path, data_dir: Path, shards: int) -> Path:
    """The folder as a prepared TFDS dataset (each file's bytes kept as they are, TFDS's
    ``Image`` reads a path's file); its directory."""
    import tensorflow_datasets as tfds

    tfds.disable_progress_bar()
    examples = [
        (f"{c}/{p.name}", {"image": str(p), "label": c}) for c in CLASSES for p in sorted((folder / c).iterdir())
    ]
    builder = tfds_images_builder(tfds)(data_dir=str(data_dir), examples=examples)
    config = tfds.download.DownloadConfig(
        num_shards=shards, try_download_gcs=False, compute_stats=tfds.download.ComputeStatsMode.SKIP
    )
    builder.download_and_prepare(download_config=config)
    return Path(str(builder.data_dir))


def tfds_images_builder(tfds: Any) -> Any:
    """A GeneratorBasedBuilder of the folder's (key, example) pairs: ``Image`` (JPEG, its
    shape) and ``ClassLabel``, one split. (``store_as_tfds_dataset`` would do, but it looks
    for a checksums file beside TFDS's own package through ``importlib_resources``, which TFDS
    does not require; this builder has no code path, so no checksums are looked for.)"""

    # skip_registration: TFDS's registry (by name) is not needed to prepare or read a directory.
    class BenchImages(tfds.core.GeneratorBasedBuilder, skip_registration=True):  # type: ignore[call-arg]  # TFDS's untyped
        name = "bench_images"
        VERSION = tfds.core.Version("1.0.0")
        code_path = None

        def __init__(self, examples: list[tuple[str, dict[str, str]]], **kw: Any) -> None:
            self.examples = examples
            super().__init__(**kw)

        def _info(self) -> Any:
            image = tfds.features.Image(shape=(SIZE, SIZE, 3), encoding_format="jpeg")
            features = tfds.features.FeaturesDict({"image": image, "label": tfds.features.ClassLabel(names=CLASSES)})
            return tfds.core.DatasetInfo(builder=self, description="bench_images", features=features)

        def _split_generators(self, dl_manager: Any) -> Any:
            return {"train": self._generate_examples()}

        def _generate_examples(self) -> Any:
            yield from self.examples

    return BenchImages


@dataclass
class Built:
    cfg: Config
    folder: Path  # the image folder (ImageFolder's root)
    cat: Catalog
    ds: Dataset  # the folder appended
    adopted: Dataset  # TFDS's shards adopted where they lie
    tfds_dir: Path
    label_sum: int  # what every epoch's labels add up to
    jpeg_bytes: int


def build(cfg: Config, work: Path) -> Built:
    h.log(f"[build] {cfg.images:,} JPEGs, the catalog dataset, the TFDS dataset and its adoption ...")
    folder = work / "images"
    jpeg_bytes = write_folder(folder, cfg.images)
    cat = Catalog.init(work / "cat")
    ds = write_catalog(cat, folder, cfg)
    tfds_dir = write_tfds(folder, work / "tfds", cfg.shards)
    cat.adopt("tfds", [tfds_dir])
    adopted = cat.dataset("tfds")
    h.check(adopted.info().records == cfg.images, "the adopted TFDS dataset holds every image")
    h.cache_tree(work)
    label_sum = sum(i % len(CLASSES) for i in range(cfg.images))
    return Built(cfg, folder, cat, ds, adopted, tfds_dir, label_sum, jpeg_bytes)


# --------------------------------------------------------------------------- what an epoch delivered


@dataclass
class Seen:
    """An epoch's images and labels as counted, and the batches' shapes and dtypes."""

    images: int = 0
    label_sum: int = 0
    shapes: set[tuple[int, ...]] = field(default_factory=set)
    dtypes: set[str] = field(default_factory=set)

    def add(self, images: Any, labels: Any) -> None:
        self.images += int(images.shape[0])
        self.label_sum += int(labels.sum())
        self.shapes.add(tuple(images.shape[1:]))
        self.dtypes.add(getattr(images.dtype, "name", str(images.dtype)))  # tf.uint8 says "uint8"


def checker(b: Built, side: str, shape: tuple[int, ...], dtype: str) -> Callable[[object, bool], None]:
    """A race's ``finish``: every run delivered every image once, of ``shape`` and ``dtype``
    (a batch's), with the labels' sum; the warm-up run's shapes are logged."""

    def finish(out: object, first: bool) -> None:
        h.check(isinstance(out, Seen), f"{side}: an epoch's tally")
        assert isinstance(out, Seen)
        h.check(out.images == b.cfg.images, f"{side}: {out.images} images, not {b.cfg.images}")
        h.check(out.label_sum == b.label_sum, f"{side}: the labels add up to {out.label_sum}, not {b.label_sum}")
        h.check(out.shapes == {shape}, f"{side}: images of shapes {sorted(out.shapes)}, not {shape}")
        h.check(out.dtypes == {dtype}, f"{side}: images of {sorted(out.dtypes)}, not {dtype}")
        if first:
            h.log(f"[check] {side}: {out.images:,} images of {shape} {dtype}, labels right")

    return finish


def settle() -> None:
    gc.collect()
    time.sleep(SETTLE_SECONDS)


# --------------------------------------------------------------------------- the torch sides


def torch_catalog(ds: Dataset) -> Callable[[], Seen]:
    from torch.utils.data import DataLoader

    def run() -> Seen:
        tds = ds.torch(batch_size=BATCH, shuffle=True, decode_images=True, columns=["image", "label"])
        seen = Seen()
        for batch in DataLoader(tds, batch_size=None, num_workers=WORKERS):
            seen.add(batch["image"], batch["label"])
        return seen

    return run


def image_folder(folder: Path) -> Any:
    """torchvision's ImageFolder of ``folder``: each item (uint8 ``(3, H, W)``, its label)."""
    from torchvision import datasets, transforms

    return datasets.ImageFolder(str(folder), transform=transforms.PILToTensor())


def torch_peer(folder: Path) -> Callable[[], Seen]:
    from torch.utils.data import DataLoader

    images = image_folder(folder)

    def run() -> Seen:
        seen = Seen()
        for pixels, labels in DataLoader(images, batch_size=BATCH, shuffle=True, num_workers=WORKERS):
            seen.add(pixels, labels)
        return seen

    return run


# --------------------------------------------------------------------------- the TensorFlow sides


def tf_tally(batches: Iterable[dict[str, Any]]) -> Seen:
    seen = Seen()
    for batch in batches:
        seen.add(batch["image"], batch["label"].numpy())
    return seen


def tf_catalog(ds: Dataset, shuffle: bool) -> Callable[[], Seen]:
    def run() -> Seen:
        return tf_tally(ds.tf_dataset(BATCH, shuffle=shuffle, decode_images=True, columns=["image", "label"]))

    return run


def tfds_builder(tfds_dir: Path) -> Any:
    import tensorflow_datasets as tfds

    return tfds.builder_from_directory(str(tfds_dir))


def tf_peer(tfds_dir: Path, shuffle: bool) -> Callable[[], Seen]:
    tf = h.import_tensorflow()
    builder = tfds_builder(tfds_dir)

    def run() -> Seen:
        split = builder.as_dataset(split="train", shuffle_files=shuffle)
        return tf_tally(split.batch(BATCH).prefetch(tf.data.AUTOTUNE))

    return run


# --------------------------------------------------------------------------- the pixels compared


def check_torch_pixels(b: Built) -> None:
    """The catalog's first rows through ds.torch (stored order: the folder's, class by class,
    files sorted) against ImageFolder's first items: the same files, labels and pixels."""
    folder = image_folder(b.folder)
    first = next(iter(b.ds.torch(batch_size=CHECKED, decode_images=True)))
    for i in range(CHECKED):
        pixels, label = folder[i]
        path = Path(folder.samples[i][0])
        h.check(first["filename"][i] == f"{path.parent.name}/{path.name}", f"torch: row {i} is {path}")
        h.check(int(first["label"][i]) == label, f"torch: row {i}'s label")
        ours = first["image"][i].numpy()
        h.check(np.array_equal(ours, pixels.permute(1, 2, 0).numpy()), f"torch: row {i}'s pixels equal ImageFolder's")
    h.log(f"[check] torch: the first {CHECKED} images' pixels equal ImageFolder's (Pillow both)")


def check_tf_pixels(b: Built) -> None:
    """The adopted dataset's first batch through tf_dataset against TFDS's, both in file order
    (TFDS interleaves its shards unless told not to): the same labels and pixels. Pillow's
    decoding of the same files is compared too (JPEG: within images.py's tolerance)."""
    import tensorflow_datasets as tfds

    from catalog.readers.images import JPEG_TOLERANCE

    ours = next(iter(b.adopted.tf_dataset(CHECKED, decode_images=True)))
    config = tfds.ReadConfig(interleave_cycle_length=1)
    split = tfds_builder(b.tfds_dir).as_dataset(split="train", shuffle_files=False, read_config=config)
    theirs = next(iter(split.batch(CHECKED)))
    h.check(np.array_equal(ours["label"].numpy(), theirs["label"].numpy()), "tf: the first batch's labels")
    h.check(ours["image"].shape == (CHECKED, SIZE, SIZE, 3), f"tf: the first batch's shape {ours['image'].shape}")
    h.check(np.array_equal(ours["image"].numpy(), theirs["image"].numpy()), "tf: the first batch's pixels equal TFDS's")
    pillow = next(iter(b.adopted.batches(CHECKED, decode_images=True)))["image"]
    diff = int(np.abs(pillow.astype(np.int16) - ours["image"].numpy().astype(np.int16)).max())
    h.check(diff <= JPEG_TOLERANCE, f"tf: TensorFlow's and Pillow's pixels differ by {diff}")
    h.log(f"[check] tf: the first {CHECKED} images' pixels equal TFDS's; Pillow's within {diff} of them")


# --------------------------------------------------------------------------- the races


def cpu_seconds() -> float:
    """CPU seconds of this process (TensorFlow's threads) and of its ended children (the
    DataLoader's workers, joined at the end of each epoch)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class Metered:
    """A side's run that keeps the CPU seconds of each timed run (not the warm-up's): on a
    machine other jobs share, the work each side does, whatever share of the cores it got."""

    def __init__(self, run: Callable[[], Seen]) -> None:
        self.run, self.runs = run, 0
        self.cpu: list[float] = []

    def __call__(self) -> Seen:
        start = cpu_seconds()
        out = self.run()
        if self.runs:
            self.cpu.append(cpu_seconds() - start)
        self.runs += 1
        return out


def race(b: Built, sides: dict[str, tuple[Callable[[], Seen], Callable[[object, bool], None]]]) -> Any:
    """The sides raced; returns (their timings, their CPU seconds per timed run)."""
    metered = {name: Metered(run) for name, (run, _) in sides.items()}
    contenders = {name: h.Contender(run=metered[name], finish=sides[name][1], settle=settle) for name in sides}
    return b.cfg.race(contenders), {name: m.cpu for name, m in metered.items()}


def row(b: Built, key: str, title: str, t: dict[str, h.Timing], ours: str, peer: str, target: float | None) -> h.Versus:
    return h.versus(key, title, "rec/s", b.cfg.images, t[ours], t[peer], target=target)


def cpu_row(b: Built, key: str, cpu: dict[str, list[float]], ours: str, peer: str) -> h.Versus:
    title = f"(info) {key}: images per CPU second (this process and its workers), catalog vs peer"
    return h.cpu_row(key, title, b.cfg.images, cpu, ours, peer)


def bench_torch(b: Built) -> list[h.Versus]:
    hwc, chw = (SIZE, SIZE, 3), (3, SIZE, SIZE)
    t, cpu = race(
        b,
        {
            "catalog": (torch_catalog(b.ds), checker(b, "ds.torch", hwc, "torch.uint8")),
            "imagefolder": (torch_peer(b.folder), checker(b, "ImageFolder", chw, "torch.uint8")),
        },
    )
    title = (
        f"torch: DataLoader(ds.torch(batch_size={BATCH}, shuffle=True, decode_images=True), {WORKERS} workers) "
        f"vs ImageFolder(PILToTensor) + DataLoader(batch_size={BATCH}, shuffle=True, {WORKERS} workers)"
    )
    return [
        row(b, "torch", title, t, "catalog", "imagefolder", TARGET),
        cpu_row(b, "torch", cpu, "catalog", "imagefolder"),
    ]


def bench_tf(b: Built) -> list[h.Versus]:
    hwc = (SIZE, SIZE, 3)
    ours, theirs = checker(b, "tf_dataset", hwc, "uint8"), checker(b, "TFDS", hwc, "uint8")
    sides: dict[str, tuple[Callable[[], Seen], Callable[[object, bool], None]]] = {}
    for order, shuffle in (("", False), ("-shuffled", True)):
        sides[f"catalog{order}"] = (tf_catalog(b.adopted, shuffle), ours)
        sides[f"tfds{order}"] = (tf_peer(b.tfds_dir, shuffle), theirs)
    t, cpu = race(b, sides)
    return [
        row(b, "tf", f"tf: ds.tf_dataset({BATCH}, decode_images=True) vs TFDS as_dataset().batch({BATCH}) "
            "(decodes), the same shards, stored order", t, "catalog", "tfds", TARGET),
        cpu_row(b, "tf", cpu, "catalog", "tfds"),
        row(b, "tf-shuffled", "(info) tf: the same, shuffled: tf_dataset(shuffle=True) vs "
            "as_dataset(shuffle_files=True)", t, "catalog-shuffled", "tfds-shuffled", None),
        cpu_row(b, "tf-shuffled", cpu, "catalog-shuffled", "tfds-shuffled"),
    ]  # fmt: skip


# --------------------------------------------------------------------------- results


def versus_medians(rows: list[h.Versus]) -> str:
    """The race table from the median rounds (the headline on a shared machine), the best
    rounds' ratio beside it."""
    med = statistics.median
    lines = [
        "| benchmark | catalog (median) | peer (median) | ratio of medians | ratio of best rounds | target | met? |",
        "|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for r in rows:
        target = "—" if r.target is None else f">= {r.target:g}x"
        met = {None: "—", True: "yes", False: "**NO**"}[r.met(med)]
        lines.append(
            f"| {r.benchmark} | {h.fmt_rate(r.catalog_rate(med), r.unit)} | {h.fmt_rate(r.peer_rate(med), r.unit)} "
            f"| {r.ratio(med) or 0:.2f}x | {r.ratio() or 0:.2f}x | {target} | {met} |"
        )
    return "\n".join(lines)


def print_results(rows: list[h.Versus], elapsed: float) -> list[h.Versus]:
    print(versus_medians(rows))
    rounds = ", ".join(f"{r.key} {r.rounds}" for r in rows)
    print(
        f"\nrates in images/s (rec/s; the CPU rows: images per CPU second); ratio = catalog rate / peer rate; met? "
        f"from the medians. Rounds: {rounds}. "
        f"Total time {elapsed:.0f} s; load average at the end {' '.join(map(str, h.loadavg()))}."
    )
    missed = [r for r in rows if r.met(statistics.median) is False]
    print(f"\n{sum(r.met(statistics.median) is True for r in rows)} targets met, {len(missed)} missed.")
    sys.stdout.flush()
    return missed


def profile_torch(ds: Dataset) -> Callable[[], str]:
    """One epoch of the catalog's torch side in this process (what its two workers share)."""

    def epoch() -> int:
        tds = ds.torch(batch_size=BATCH, shuffle=True, decode_images=True, columns=["image", "label"])
        return sum(len(batch["label"]) for batch in tds)

    return lambda: h.profile_text(epoch)


def profiles(b: Built, choice: str, rows: list[h.Versus]) -> dict[str, str]:
    """cProfile of the torch side; tf_dataset's work is in TensorFlow's graph, which cProfile
    does not see: its rows are not profiled."""
    torch_rows = [r for r in rows if r.key == "torch"]
    if choice == "missed" and any(r.met(statistics.median) is False for r in torch_rows):
        choice = "all"  # missed by the medians (the harness's "missed" looks at the best rounds)
    return h.versus_profiles(choice, torch_rows, {"torch": profile_torch(b.ds)})


# --------------------------------------------------------------------------- main


def header(cfg: Config, quick: bool, b: Built) -> dict[str, Any]:
    import PIL
    import tensorflow_datasets as tfds
    import torch
    import torchvision

    tf = h.import_tensorflow()
    return h.start_report(
        "TFRecord Catalog: images decoded on read vs torchvision's ImageFolder and TFDS's decoding",
        {"torch": torch.__version__, "torchvision": torchvision.__version__, "tensorflow": tf.__version__,
         "tensorflow-datasets": tfds.__version__, "Pillow": PIL.__version__, "numpy": np.__version__},
        f"mode: {'quick' if quick else 'full'}: {cfg.images:,} JPEGs of {SIZE}x{SIZE} RGB in {len(CLASSES)} class "
        f"folders ({b.jpeg_bytes / h.MIB:.1f} MiB, quality {QUALITY}); the catalog's dataset and TFDS's in "
        f"{cfg.shards} shards each; batch {BATCH}",
        f"{cfg.repeats} to {cfg.max_rounds} interleaved rounds (as many as fit in {cfg.budget:g} s; medians reported, "
        "the best rounds beside them), each run a full epoch, after a checked warm-up run of each side; "
        "a garbage collection and 0.5 s of rest before each run",
        "torch: 2 DataLoader workers on both sides, Pillow decoding on both; tf: the very same shard files "
        "(TFDS's, adopted by the catalog), tf.io.decode_image on both",
        where="the image folder, the catalog and the TFDS dataset",
    )  # fmt: skip


def import_peers() -> None:
    """The peers imported, torchvision before TensorFlow: the other way round (torchvision 0.29,
    TensorFlow 2.21) the process dies in torchvision's import, a segmentation fault (the two
    load their own builds of the same native libraries). A missing peer stops the run."""
    try:
        import torchvision  # noqa: F401
    except ImportError as e:
        raise SystemExit(PEERS_MISSING.format(e)) from e
    h.import_tensorflow()  # before TFDS imports it, so that its import notices are filtered
    try:
        import tensorflow_datasets  # noqa: F401
    except ImportError as e:
        raise SystemExit(PEERS_MISSING.format(e)) from e


def main(argv: list[str] | None = None) -> int:
    args, cfg = h.options(argv, QUICK, FULL, __doc__, "1,000 images instead of 10,000, 2 rounds",
                          "minimum timed rounds", "the catalog's torch side (in this process)")  # fmt: skip
    import_peers()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_images_") as d:
        b = build(cfg, Path(d))
        info = header(cfg, args.quick, b)
        check_torch_pixels(b)
        check_tf_pixels(b)
        h.freeze()
        rows: list[h.Versus] = []
        for key, step in (("torch", bench_torch), ("tf", bench_tf)):
            t0 = time.perf_counter()
            rows += step(b)
            h.log(f"[{key}] done in {time.perf_counter() - t0:.0f} s")
        elapsed = time.perf_counter() - started
        print_results(rows, elapsed)
        texts = profiles(b, args.profile, rows)
        b.cat.close()
    if args.json:
        h.write_report(args.json, info, args.quick, cfg, [r.to_json() for r in rows], elapsed_seconds=elapsed,
                       profiles=texts)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
