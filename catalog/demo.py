"""The demo dataset: a small, realistic Example file for README's first command, and the
demo's one step in Python (``catalog demo`` runs the rest as commands)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from catalog.api import Catalog
from catalog.commit.values import Commit
from catalog.errors import UsageError
from catalog.schema import Schema
from catalog.tfrecord.framing import RecordWriter

DEMO_SCHEMA = {
    "features": {
        "id": {"dtype": "int64"},
        "text": {"dtype": "string"},
        "score": {"dtype": "float32", "default": 0.0},
        "vec": {"dtype": "float32", "shape": [8]},
        "tags": {"dtype": "string", "shape": [None]},
        "image": {"dtype": "uint8", "shape": [4, 4, 3], "encoding": "tensor"},
    }
}
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def demo_rows(n: int, start: int = 0) -> list[dict[str, object]]:
    rng = np.random.default_rng(start)
    rows = []
    for i in range(start, start + n):
        rows.append(
            {
                "id": i,
                "text": f"{WORDS[i % len(WORDS)]} record {i}",
                "score": float(rng.random()),
                "vec": rng.standard_normal(8).astype(np.float32),
                "tags": [WORDS[j] for j in range(i % 3)],
                "image": rng.integers(0, 256, size=(4, 4, 3), dtype=np.uint8),
            }
        )
    return rows


def append_demo_rows(root: Path, n: int) -> Commit:
    """Append ``n`` demo rows to the demo catalog's dataset from Python, after the ``n``
    records of the demo's input files (the ids go on)."""
    with Catalog.open(root) as cat:
        return cat.dataset("demo").append_rows(demo_rows(n, start=n), message="rows from Python")


DEMO_MARKER = ".catalog-demo"


def prepare_demo_dir(out: Path) -> Path:
    """The demo's catalog directory under ``out``, cleared if an earlier demo made it.

    Only a directory carrying the demo's marker is ever removed, so pointing the demo at
    a folder of your own fails instead of deleting anything.
    """
    if out.exists() and any(out.iterdir()) and not (out / DEMO_MARKER).exists():
        raise UsageError(f"{out}: exists and was not made by `catalog demo`; pick another directory")
    if (out / DEMO_MARKER).exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / DEMO_MARKER).write_text("made by `catalog demo`; safe to delete\n")
    return out / "catalog"


def demo_migrations() -> Path:
    """The demo dataset's worked-example migrations: ``migrations/`` of the working directory
    when it has ``demo/``, else the repository's (editable installs and the test suite)."""
    for base in (Path.cwd() / "migrations", Path(__file__).resolve().parent.parent / "migrations"):
        if (base / "demo").is_dir():
            return base
    raise UsageError(
        "the demo's migrations (migrations/demo/ in the repository) were not found: run the demo from the "
        "repository root, or pass --migrations DIR"
    )


def copy_migrations(source: Path, out: Path) -> Path:
    """Copy ``source/demo`` into ``out/migrations/demo`` so the demo catalog is self-contained."""
    target = out / "migrations"
    shutil.copytree(source / "demo", target / "demo", ignore=shutil.ignore_patterns("__pycache__"))
    return target


def write_demo(out_dir: str | os.PathLike[str], n: int = 1000) -> list[Path]:
    """Write the demo schema and the same records raw and gzip-compressed into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    schema = Schema.from_json(DEMO_SCHEMA)
    schema_path = out / "schema.json"
    schema_path.write_text(json.dumps(schema.to_json(), indent=2) + "\n")
    records = [schema.encode(row) for row in demo_rows(n)]
    paths = [schema_path]
    for name, compression in (("demo.tfrecord", None), ("demo.tfrecord.gz", "gzip")):
        with RecordWriter(out / name, compression) as w:
            w.write_many(records)
        paths.append(out / name)
    return paths
