"""Export: one TFRecord file (none, gzip or zlib) holding a dataset at a version, written
under a partial name, fsynced and published without replacing anything."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from catalog import faults
from catalog.commit.handles import DatasetHandle, Snapshot, snapshot
from catalog.commit.values import Progress
from catalog.errors import CatalogError
from catalog.storage import CHECKSUM_CHUNK, clear_dead_partials, copy_verified, partial_path, publish_new, shard_batches
from catalog.tfrecord.framing import RecordWriter, unknown_compression


@dataclass
class ExportReport:
    dataset: str
    version: int
    path: str
    records: int
    bytes: int
    compression: str
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "version": self.version,
            "path": self.path,
            "records": self.records,
            "bytes": self.bytes,
            "compression": self.compression,
            "seconds": round(self.seconds, 3),
        }


EXPORT_COMPRESSIONS = ("none", "gzip", "zlib")


def export_dataset(
    ds: DatasetHandle,
    out: str | os.PathLike[str],
    version: int | None = None,
    compression: str = "none",
    progress: Progress | None = None,
) -> ExportReport:
    """One TFRecord file holding the dataset at ``version``, written atomically (temp, fsync, rename)."""
    if compression not in EXPORT_COMPRESSIONS:
        raise unknown_compression(compression)
    start = time.monotonic()
    target = Path(out)
    if os.path.lexists(target):
        raise CatalogError(f"{target}: already exists; export never overwrites")
    if not target.parent.is_dir():
        raise CatalogError(f"{target.parent}: no such directory")
    snap = snapshot(ds, version)
    clear_dead_partials(target.parent)  # what killed exports left here
    temp = partial_path(target)
    try:
        with open(temp, "xb") as f:
            _export_to(snap, f, compression, progress)
            f.flush()
            faults.point("export.written", target=target)
            size = f.tell()
            f.flush()
            os.fsync(f.fileno())
        publish_new(temp, target)  # never over a file made meanwhile
    except OSError as e:
        raise CatalogError(f"{target}: cannot write: {e.strerror or e}") from e
    finally:
        temp.unlink(missing_ok=True)
    return ExportReport(ds.name, snap.version, str(target), snap.records, size, compression, time.monotonic() - start)


def _export_to(snap: Snapshot, f: IO[bytes], compression: str, progress: Progress | None) -> None:
    if compression == "none" and all(s.compression == "none" for s in snap.shards):
        buf = bytearray(CHECKSUM_CHUNK)  # framing concatenates: copy bytes, checking each shard's checksum
        for s in snap.shards:
            copy_verified(s.path, s.bytes, s.checksum, f, 0, buf)
            if progress:
                progress(s.bytes)
        return
    w = RecordWriter(f, None if compression == "none" else compression)
    for s in snap.shards:
        for batch in shard_batches(s.path, s.bytes):
            w.write_many(batch)
        if progress:
            progress(s.bytes)
    w.close()
