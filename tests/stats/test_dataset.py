"""catalog.stats.dataset: a set of records' statistics, merged and stored as compressed JSON."""

from __future__ import annotations

import json
import zlib

import pytest

from catalog.errors import ManifestError
from catalog.schema import Schema
from catalog.stats.dataset import STATS_FORMAT, DatasetStats, merged
from catalog.stats.tally import Tally

SCHEMA = Schema.from_json({"features": {"n": {"dtype": "int64"}, "s": {"dtype": "string", "optional": True}}})


def _stats(rows: list[dict[str, object]], schema: Schema = SCHEMA) -> DatasetStats:
    tally = Tally(schema, helper=False)
    tally.add_records(schema.encode(r) for r in rows)
    return tally.result()


def test_bytes_round_trip() -> None:
    stats = _stats([{"n": 1, "s": "a"}, {"n": 5}])
    back = DatasetStats.from_bytes(stats.to_bytes())
    assert back.records == 2 and set(back.features) == {"n", "s"}
    assert back.features["n"].to_json() == stats.features["n"].to_json()
    assert (back.features["s"].present, back.features["s"].missing) == (1, 1)


def test_merge_adds_records_and_keeps_features_only_one_side_has() -> None:
    a = _stats([{"n": 1}, {"n": 2}])
    b = _stats([{"m": 3.5}], Schema.from_json({"features": {"m": {"dtype": "float32"}}}))
    total = merged([a, b])
    assert (total.records, total.shards) == (3, 2)
    assert total.features["n"].values.count == 2 and total.features["m"].values.max == 3.5
    b.features["m"].values.max = -1.0  # merged a copy, not b's own
    assert total.features["m"].values.max == 3.5
    assert merged([]).records == 0 and merged([]).shards == 0


@pytest.mark.parametrize(
    ("blob", "detail"),
    [
        (b"not zlib", "Error -3 while decompressing data: incorrect header check"),
        (
            zlib.compress(json.dumps({"format": STATS_FORMAT + 1}).encode()),
            f"format {STATS_FORMAT + 1}, this catalog reads 1",
        ),
        (zlib.compress(json.dumps({"format": STATS_FORMAT, "features": {}}).encode()), "'records'"),
    ],
)
def test_damaged_blobs_are_one_manifest_error(blob: bytes, detail: str) -> None:
    with pytest.raises(ManifestError) as e:
        DatasetStats.from_bytes(blob, "shard a/b")
    assert str(e.value) == f"shard a/b: damaged statistics in the manifest ({detail}); run `catalog stats --compute`"
