"""The statistics issue's schemas for bench_stats: those its own table lacked, each with the
columns ``append_rows`` takes and what decoding the records must give.

* blob: one 1 KiB bytes value a row, every one distinct (hashing them for distinct counts and
  top values must not cost more than writing them);
* wide: 100 scalar features (50 float32, 50 int64);
* lists: long variable-length lists (float32 and int64, 0-1,000 values a row);
* big: large tensors (float32 [128, 128, 3], 192 KiB a row);
* seq: SequenceExamples (a context label; int64 tokens and float32[8] frames, 1-50 steps).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

BLOB_BYTES = 1024
WIDE = 100
LIST_MAX = 1000
BIG_SHAPE = (128, 128, 3)
STEPS_MAX, FRAME = 50, 8
# the row-level migration every workload's dataset gets: a feature computed from each row
ADD_SCRIPT = """
from catalog.migrate import AddField

operations = [AddField("z", {"dtype": "int64"}, fn=lambda row: 0)]
"""

Columns = dict[str, Any]  # append_rows' columns: arrays, or lists of a value (an array) a row
Wanted = dict[str, Any]  # decoding's columns: an array, or a list of an array a row


@dataclass
class Workload:
    key: str
    title: str
    rows: int  # at full scale
    schema: dict[str, Any]
    make: Callable[[int, np.random.Generator], Columns]


def blob(n: int, rng: np.random.Generator) -> Columns:
    payload = rng.integers(0, 256, (n, BLOB_BYTES), dtype=np.uint8)
    payload[:, :8] = np.arange(n, dtype="<u8").view(np.uint8).reshape(n, 8)  # distinct for sure
    return {"id": np.arange(n, dtype=np.int64), "payload": [row.tobytes() for row in payload]}


def wide(n: int, rng: np.random.Generator) -> Columns:
    half = WIDE // 2
    out: Columns = {f"f{i:02d}": rng.random(n).astype(np.float32) for i in range(half)}
    out.update({f"i{i:02d}": rng.integers(0, 1000, n, dtype=np.int64) for i in range(half)})
    return out


def lists(n: int, rng: np.random.Generator) -> Columns:
    lengths = rng.integers(0, LIST_MAX + 1, n)
    floats = rng.random(int(lengths.sum())).astype(np.float32)
    ints = rng.integers(0, 1 << 40, int(lengths.sum()), dtype=np.int64)
    ends = np.cumsum(lengths)[:-1]
    return {"id": np.arange(n, dtype=np.int64), "values": np.split(floats, ends), "ids": np.split(ints, ends)}


def big(n: int, rng: np.random.Generator) -> Columns:
    return {"id": np.arange(n, dtype=np.int64), "field": rng.random((n, *BIG_SHAPE), dtype=np.float32)}


def seq(n: int, rng: np.random.Generator) -> Columns:
    steps = rng.integers(1, STEPS_MAX + 1, n)
    tokens = rng.integers(0, 30_000, int(steps.sum()), dtype=np.int64)
    frames = rng.random((int(steps.sum()), FRAME)).astype(np.float32)
    ends = np.cumsum(steps)[:-1]
    return {
        "label": rng.integers(0, 10, n, dtype=np.int64),
        "tokens": np.split(tokens, ends),
        "frames": np.split(frames, ends),
    }


WORKLOADS = {
    w.key: w
    for w in (
        Workload("blob", "1 KiB distinct bytes a row + int64 id", 200_000,
                 {"features": {"id": {"dtype": "int64"}, "payload": {"dtype": "bytes"}}}, blob),
        Workload("wide", f"{WIDE} scalar features (float32, int64)", 200_000,
                 {"features": {**{f"f{i:02d}": {"dtype": "float32"} for i in range(WIDE // 2)},
                               **{f"i{i:02d}": {"dtype": "int64"} for i in range(WIDE // 2)}}}, wide),
        Workload("lists", f"float32 and int64 lists of 0-{LIST_MAX:,} values + id", 20_000,
                 {"features": {"id": {"dtype": "int64"}, "values": {"dtype": "float32", "shape": [None]},
                               "ids": {"dtype": "int64", "shape": [None]}}}, lists),
        Workload("big", f"float32{list(BIG_SHAPE)} tensors (192 KiB a row) + id", 1_000,
                 {"features": {"id": {"dtype": "int64"},
                               "field": {"dtype": "float32", "shape": list(BIG_SHAPE), "encoding": "tensor"}}}, big),
        Workload("seq", f"SequenceExamples: label; int64 tokens, float32[{FRAME}] frames, 1-{STEPS_MAX} steps",
                 50_000, {"features": {"label": {"dtype": "int64"}},
                          "sequence_features": {"tokens": {"dtype": "int64"},
                                                "frames": {"dtype": "float32", "shape": [FRAME]}}}, seq),
    )
}  # fmt: skip


def wanted(columns: Columns) -> Wanted:
    """What decoding the records of ``columns`` gives: bytes as an object array, the rest as given."""
    return {k: np.array(v, dtype=object) if isinstance(v, list) and isinstance(v[0], bytes) else v
            for k, v in columns.items()}  # fmt: skip


def migrated(want: Wanted, n: int) -> Wanted:
    return {**want, "z": np.zeros(n, dtype=np.int64)}


def migrated_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "features": {**schema["features"], "z": {"dtype": "int64"}}}


def same(got: np.ndarray, want: Any) -> bool:
    """A decoded column equals ``want`` (wanted's form)."""
    if isinstance(want, list):
        return len(got) == len(want) and all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))
    if want.dtype == object:
        return bool(got.tolist() == want.tolist())
    return bool(np.array_equal(got, want))
