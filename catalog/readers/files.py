"""A planned shard read front to back, checked against the manifest as it is read.

Before a shard is opened its size is compared with the registered size (one stat, or one
HEAD on an object store); at its end, the records read are counted against the registered
count; every record's CRCs are checked on the way. A shard changed after its commit (grown,
cut, or edited through a name ``--link`` shares with it) is a CorruptShardError naming it,
never a short or padded read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import IO, Any

from catalog.commit.plans import PlannedShard
from catalog.errors import CatalogError, CorruptRecordError, CorruptShardError, ObjectMissingError
from catalog.storage import damaged_shard, open_shard, shard_missing, size_mismatch
from catalog.storage.index import read_index
from catalog.tfrecord.framing import read_record_batches
from catalog.tfrecord.sources import S3_EXTRA, is_url, remote_errors, require_fsspec


def remote_fs(url: str) -> Any:
    """The fsspec filesystem of ``url`` (fsspec caches instances; it resets them after a fork)."""
    fsspec = require_fsspec(f"{url}: reading URLs needs fsspec ({S3_EXTRA})")
    with remote_errors(url, "cannot open"):
        return fsspec.core.url_to_fs(url)[0]


def stored_size(url: str) -> int:
    """The size of a shard file now: one HEAD on an object store, one stat on a local disk."""
    try:
        if is_url(url):
            with remote_errors(url, "cannot open"):  # the HEAD is the first step of opening it
                return int(remote_fs(url).size(url))
        st = os.lstat(url)  # as open_shard opens it: a link in its place is refused, never followed
        if not stat.S_ISREG(st.st_mode):
            what = "not a regular file (a link, folder or device took its place)"
            raise CatalogError(f"{url}: {what}: run `catalog verify`")
        return st.st_size
    except (FileNotFoundError, ObjectMissingError) as e:
        raise shard_missing(url) from e
    except OSError as e:
        raise CatalogError(f"{url}: cannot stat: {e.strerror or e}") from e


def open_checked(shard: PlannedShard) -> IO[bytes]:
    """A registered shard opened (open_shard's rules: a regular file, no symbolic link) and
    its size checked before any read: one fstat, or one HEAD on an object store."""
    remote = is_url(shard.url)
    size = stored_size(shard.url) if remote else None
    try:
        f = open_shard(shard.url)
    except (FileNotFoundError, ObjectMissingError) as e:
        raise shard_missing(shard.url) from e
    if size is None:
        size = os.fstat(f.fileno()).st_size
    if size != shard.bytes:
        f.close()
        raise size_mismatch(shard.url, shard.bytes, size)
    return f


def stream_shard(shard: PlannedShard, skip: int = 0) -> Iterator[tuple[int, list[bytes]]]:
    """Records ``shard.start + skip`` to ``shard.stop`` of a planned shard, in order, as
    (index in the shard of the first, records) batches. With a registered index, the read
    starts at the first record wanted; otherwise (or compressed) it reads through those
    before. Read to its end, the shard's record count is checked."""
    first = shard.start + skip
    pos = at = 0
    compression = None if shard.compression == "none" else shard.compression
    try:
        with open_checked(shard) as f:
            if first and compression is None and shard.index_checksum is not None:
                offsets = read_index(shard.index_url, shard.records, shard.bytes, shard.index_checksum)
                pos, at = first, int(offsets[first])
                f.seek(at)
            for batch in read_record_batches(f, compression):
                n = len(batch)
                lo, hi = max(first - pos, 0), min(shard.stop - pos, n)
                if lo < hi:
                    yield pos + lo, batch if (lo, hi) == (0, n) else batch[lo:hi]
                pos += n
                if pos >= shard.stop and shard.stop < shard.records:
                    return  # a slice ending inside the shard: its size was checked, not its count
    except CorruptRecordError as e:
        raise damaged_shard(shard.url, e, at) from e
    if pos != shard.records:
        raise CorruptShardError(shard.url, "records", shard.records, pos)
