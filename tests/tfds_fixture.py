"""A small TensorFlow Datasets (TFDS) prepared dataset, built on the fly for tests.

`build_tfds_dataset(data_dir)` defines a tiny `GeneratorBasedBuilder` and runs its
`download_and_prepare` into `data_dir`; it returns the prepared dataset directory
(`data_dir/tfds_fixture/1.0.0`, the folder that holds `features.json`,
`dataset_info.json`, `label.labels.txt` and the
`tfds_fixture-{train,test}.tfrecord-0000N-of-00003` files).

`tensorflow_datasets` is imported inside the functions only, so this module imports
(and a test that uses it can skip) where TFDS is not installed. Nothing is downloaded:
the builder generates its examples from numpy, and TFDS's GCS look-ups are off.

Every value is a pure function of (split, index), so two builds give the same records;
`expected_example(split, i)` says what `as_dataset` should return for record i.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any, ClassVar

DATASET_NAME = "tfds_fixture"
DATASET_VERSION = "1.0.0"
LABEL_NAMES = ("cat", "dog", "bird")
KIND_NAMES = ("small", "large")
SPLITS = {"train": 30, "test": 12}
NUM_SHARDS = 3
IMAGE_SHAPE = (8, 8, 3)


def _offline() -> None:
    """Keep TFDS away from the network: GCS look-ups off (the default in 4.9.x, made sure)."""
    os.environ.setdefault("NO_GCE_CHECK", "true")  # google-auth: no metadata-server probe
    from tensorflow_datasets.core.utils import gcs_utils

    gcs_utils._is_gcs_disabled = True


def expected_example(split: str, i: int, *, extra_features: bool = False) -> dict[str, Any]:
    """The example the generator yields for record `i` of `split` (before encoding).

    Images come back from `as_dataset` as the same uint8 array (PNG is lossless);
    Text comes back as UTF-8 bytes; the optional scalar comes back as
    -2**63 (int64 min) where it was None here.
    """
    import numpy as np

    base = 1000 if split == "test" else 0
    n = base + i
    rng = np.random.default_rng(n)
    example: dict[str, Any] = {
        "vec": np.array([n, n + 0.5, -n], dtype=np.float32),
        "count": np.int64(n * 10),
        "image": rng.integers(0, 256, size=IMAGE_SHAPE, dtype=np.uint8),
        "label": LABEL_NAMES[n % len(LABEL_NAMES)],
        "caption": f"{split} example {i} \u00e9",
        "meta": {"id": np.int64(n), "score": np.float32(n / 4)},
        "tokens": list(range(n % 5)),  # lengths 0..4, so some are empty
        "maybe": None if i % 3 == 0 else np.int64(i),
        "bbox": _bbox(i),
    }
    if extra_features:
        # A Sequence of a dict (the detection-dataset pattern) and a nested Sequence,
        # which TFDS stores as ragged `flat_values` + `row_lengths_0`.
        example["objects"] = {
            "bbox": [_bbox(i + k) for k in range(i % 3)],
            "kind": [KIND_NAMES[(i + k) % 2] for k in range(i % 3)],
        }
        example["ragged"] = [list(range(k)) for k in range(i % 4)]
    return example


def _bbox(i: int) -> Any:
    import numpy as np

    # BBoxFeature takes (ymin, xmin, ymax, xmax), each in [0, 1], min <= max.
    lo = (i % 4) / 8
    return np.array([lo, lo / 2, lo + 0.25, lo / 2 + 0.5], dtype=np.float32)


def build_tfds_dataset(
    data_dir: pathlib.Path,
    *,
    extra_features: bool = False,
    shuffle: bool = True,
    sizes: dict[str, int] | None = None,
) -> pathlib.Path:
    """Prepare the fixture dataset under `data_dir`; return the prepared dataset directory.

    Features: `vec` Tensor float32 (3,), `count` Tensor int64 (), `image` Image (8, 8, 3)
    PNG, `label` ClassLabel(cat, dog, bird), `caption` Text, `meta` {id int64, score
    float32}, `tokens` Sequence(int64), `maybe` Scalar(int64, optional=True) and
    `bbox` BBoxFeature. With `extra_features`, also `objects` Sequence({bbox, kind})
    and `ragged` Sequence(Sequence(int64)) (ragged storage).
    Splits: train (30 examples) and test (12), exactly 3 shards each (`sizes` overrides
    the example counts, e.g. {"train": 60} for shards longer than TFDS's read block of 16).
    With `shuffle` (TFDS's default) records are stored in key-hash order; `meta/id`
    (index, +1000 for test) tells which example a record is. `shuffle=False` sets
    DatasetInfo's `disable_shuffling`, so records are stored in generation order.
    """
    import numpy as np
    import tensorflow_datasets as tfds

    _offline()
    tfds.disable_progress_bar()
    counts = dict(SPLITS if sizes is None else sizes)

    def features() -> Any:
        spec: dict[str, Any] = {
            "vec": tfds.features.Tensor(shape=(3,), dtype=np.float32),
            "count": tfds.features.Tensor(shape=(), dtype=np.int64),
            "image": tfds.features.Image(shape=IMAGE_SHAPE, encoding_format="png"),
            "label": tfds.features.ClassLabel(names=list(LABEL_NAMES)),
            "caption": tfds.features.Text(),
            "meta": {"id": np.int64, "score": np.float32},
            "tokens": tfds.features.Sequence(np.int64),
            "maybe": tfds.features.Scalar(np.int64, optional=True),
            "bbox": tfds.features.BBoxFeature(),
        }
        if extra_features:
            spec["objects"] = tfds.features.Sequence(
                {
                    "bbox": tfds.features.BBoxFeature(),
                    "kind": tfds.features.ClassLabel(names=list(KIND_NAMES)),
                }
            )
            spec["ragged"] = tfds.features.Sequence(tfds.features.Sequence(np.int64))
        return tfds.features.FeaturesDict(spec)

    # skip_registration: the class is made anew on every call, and TFDS's registry
    # refuses a second dataset of the same name; builder_from_directory needs no registry.
    class TfdsFixture(tfds.core.GeneratorBasedBuilder, skip_registration=True):
        """A tiny deterministic dataset for the catalog's tests."""

        name = DATASET_NAME
        VERSION = tfds.core.Version(DATASET_VERSION)
        RELEASE_NOTES: ClassVar[dict[str, str]] = {DATASET_VERSION: "Initial release."}

        def _info(self) -> Any:
            # DatasetInfo directly: dataset_info_from_configs wants the builder to live
            # in a package with its metadata files beside it.
            return tfds.core.DatasetInfo(
                builder=self,
                description="TFRecord Catalog test fixture.",
                features=features(),
                homepage="https://example.invalid/tfds_fixture",
                citation="",
                # TFDS writes a split sorted by a salted hash of each example's key,
                # not in generation order, unless shuffling is disabled here.
                disable_shuffling=not shuffle,
            )

        def _split_generators(self, dl_manager: Any) -> Any:
            return {split: self._generate_examples(split) for split in counts}

        def _generate_examples(self, split: str) -> Any:
            for i in range(counts[split]):
                yield f"{split}-{i:04d}", expected_example(split, i, extra_features=extra_features)

    builder = TfdsFixture(data_dir=str(data_dir))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            num_shards=NUM_SHARDS,  # exact count per split (max_shard_size only caps)
            try_download_gcs=False,
            compute_stats=tfds.download.ComputeStatsMode.SKIP,
        )
    )
    return pathlib.Path(str(builder.data_dir))


def tfds_read_back(ds_dir: pathlib.Path) -> dict[str, list[dict[str, Any]]]:
    """Every split of a prepared TFDS directory, as TFDS itself decodes it, in file order.

    File order: shard 00000's records in their stored order, then shard 00001's, and so
    on. `shuffle_files=False` alone does not give that: TFDS still interleaves the shards
    (cycle 16, block 16) unless the dataset was written with `disable_shuffling`, so the
    read config pins the cycle length to 1.
    """
    import tensorflow_datasets as tfds

    _offline()
    builder = tfds.builder_from_directory(str(ds_dir))
    read_config = tfds.ReadConfig(interleave_cycle_length=1)
    out: dict[str, list[dict[str, Any]]] = {}
    for split in builder.info.splits:
        ds = builder.as_dataset(split=split, shuffle_files=False, read_config=read_config)
        out[split] = list(tfds.as_numpy(ds))
    return out


def build_tfds_features(
    data_dir: pathlib.Path, name: str, features: Any, examples: list[dict[str, Any]]
) -> pathlib.Path:
    """A one-split ("train"), one-shard TFDS dataset `name` of `features` (a callable given the
    `tensorflow_datasets` module, returning a FeaturesDict's dict) holding `examples` in
    order; returns the prepared directory. For features the main fixture does not have."""
    import tensorflow_datasets as tfds

    _offline()
    tfds.disable_progress_bar()

    class Custom(tfds.core.GeneratorBasedBuilder, skip_registration=True):
        """A dataset of the features a test names."""

        VERSION = tfds.core.Version(DATASET_VERSION)
        RELEASE_NOTES: ClassVar[dict[str, str]] = {DATASET_VERSION: "Initial release."}

        def _info(self) -> Any:
            spec = tfds.features.FeaturesDict(features(tfds))
            return tfds.core.DatasetInfo(builder=self, features=spec, disable_shuffling=True)

        def _split_generators(self, dl_manager: Any) -> Any:
            return {"train": self._generate_examples()}

        def _generate_examples(self) -> Any:
            yield from enumerate(examples)

    Custom.name = name
    builder = Custom(data_dir=str(data_dir))
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            num_shards=1, try_download_gcs=False, compute_stats=tfds.download.ComputeStatsMode.SKIP
        )
    )
    return pathlib.Path(str(builder.data_dir))
