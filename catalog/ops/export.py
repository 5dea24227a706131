"""Export: one TFRecord file (none, gzip or zlib) holding a dataset at a version, written
under a partial name, fsynced and published without replacing anything (with ``force``:
replacing the file there in one rename, once the new one is complete)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from catalog import faults
from catalog.commit.handles import DatasetHandle
from catalog.commit.plans import ReadPlan, plan
from catalog.commit.values import Progress, VersionRef
from catalog.errors import StorageError
from catalog.jsonform import SECONDS, JsonReport
from catalog.readers.files import stream_shard
from catalog.storage import (
    CHECKSUM_CHUNK,
    check_target,
    clear_dead_partials,
    copy_verified,
    partial_path,
    publish_written,
)
from catalog.tfrecord.compression import COMPRESSIONS
from catalog.tfrecord.framing import RecordWriter, unknown_compression


@dataclass
class ExportReport(JsonReport):
    dataset: str
    version: int
    path: str
    records: int
    bytes: int
    compression: str
    seconds: float = field(metadata=SECONDS)
    split: str | None = None  # the split spec exported; None: every record


def export_dataset(
    ds: DatasetHandle,
    out: str | os.PathLike[str],
    version: VersionRef = None,
    compression: str = "none",
    progress: Progress | None = None,
    split: str | None = None,
    force: bool = False,
) -> ExportReport:
    """One TFRecord file holding the dataset at ``version`` (a number or a tag), written
    atomically (temp, fsync, rename); with ``split`` (a TFDS spec such as ``"train[:90%]"``)
    only the records it selects, in its order. A file at ``out`` is an error, or with
    ``force`` replaced, and only once the new one is complete."""
    if compression not in COMPRESSIONS:
        raise unknown_compression(compression)
    start = time.monotonic()
    target = Path(out)
    check_target(target, force, ds.catalog.root, _own_places(ds))
    if not target.parent.is_dir():
        raise StorageError(f"{target.parent}: no such directory")
    selected = plan(ds, version, split)
    clear_dead_partials(target.parent)  # what killed exports left here
    temp = partial_path(target)
    try:
        with open(temp, "xb") as f:
            _export_to(selected, f, compression, progress)
            f.flush()
            faults.point("export.written", target=target)
            size = f.tell()
            f.flush()
            os.fsync(f.fileno())
        publish_written(temp, target, force)  # without force, never over a file made meanwhile
    except OSError as e:
        raise StorageError(f"{target}: cannot write: {e.strerror or e}") from e
    finally:
        temp.unlink(missing_ok=True)
    return ExportReport(
        ds.name, selected.version, str(target), selected.records, size, compression, time.monotonic() - start, split
    )


def _own_places(ds: DatasetHandle) -> tuple[str, ...]:
    """Where the catalog's own files are (its directory, a local data area): never replaced."""
    store = ds.catalog.store
    return (str(ds.catalog.root),) if store.remote else (str(ds.catalog.root), store.root)


def _export_to(selected: ReadPlan, f: IO[bytes], compression: str, progress: Progress | None) -> None:
    whole = all(s.compression == "none" and s.count == s.records for s in selected.shards)
    if compression == "none" and whole:
        buf = bytearray(CHECKSUM_CHUNK)  # framing concatenates: copy bytes, checking each shard's checksum
        for s in selected.shards:
            copy_verified(s.path, s.bytes, s.checksum, f, 0, buf)
            if progress:
                progress(s.bytes)
        return
    # Compressed shards, or a split's slice of a shard: records re-framed (same bytes, same CRCs).
    w = RecordWriter(f, None if compression == "none" else compression)
    for s in selected.shards:
        for _index, batch in stream_shard(s):
            w.write_many(batch)
        if progress:
            progress(s.bytes)
    w.close()
