"""A planned shard read front to back, checked against the manifest as it is read.

Before a shard is opened its size is compared with the registered size (one stat, or one
HEAD on an object store), and a file others may write (adopted, linked) is checked to be as
registered (storage.content: its fingerprint, else its checksum); at its end, the records
read are counted against the registered count; every record's CRCs are checked on the way.
A shard changed after its commit (grown, cut, or edited through a name ``--link`` shares
with it) is a CorruptShardError naming it, never a short or padded read.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import IO

from catalog.commit.plans import PlannedShard
from catalog.errors import CorruptRecordError, CorruptShardError, ObjectMissingError, StorageError
from catalog.storage import content, damaged_shard, shard_missing, size_mismatch
from catalog.storage.fileio import Facts, facts_size, file_io
from catalog.storage.index import stored_index
from catalog.tfrecord.framing import read_record_batches


def file_facts(url: str) -> tuple[int, Facts]:
    """The size of a shard file now, and its facts: one HEAD on an object store, one stat on a
    local disk (as open_shard opens it: a link in its place is refused, never followed)."""
    try:
        facts = file_io(url).lstat(url)  # on an object store the HEAD is the first step of opening it
    except (FileNotFoundError, ObjectMissingError) as e:
        raise shard_missing(url) from e
    except OSError as e:
        raise StorageError(f"{url}: cannot stat: {e.strerror or e}") from e
    if isinstance(facts, os.stat_result) and not stat.S_ISREG(facts.st_mode):
        what = "not a regular file (a link, folder or device took its place)"
        raise CorruptShardError(url, message=f"{url}: {what}: run `catalog verify`")
    return facts_size(facts), facts


def stored_size(url: str) -> int:
    """The size of a shard file now: one HEAD on an object store, one stat on a local disk."""
    return file_facts(url)[0]


def check_content(shard: PlannedShard, facts: Facts) -> None:
    """A shard's file others may write (adopted, linked) is as registered (storage.content):
    no read when its fingerprint is the registered one, nor when its FileIO checked its bytes
    whole against the registered checksum (a cached copy: storage.cache)."""
    if shard.io.verified:
        return
    if isinstance(facts, os.stat_result):
        content.check_local(shard.path, facts, shard.checksum, shard.fingerprint, shard.adopted)
    else:
        content.check_object(shard.path, facts, shard.checksum, shard.fingerprint, shard.adopted)


def check_file(shard: PlannedShard) -> None:
    """A shard's size and content checked by its name (one stat or HEAD), for readers that
    hand the file to another library (TensorFlow) or open it later."""
    size, facts = file_facts(shard.path)
    if size != shard.bytes:
        raise size_mismatch(shard.path, shard.bytes, size)
    check_content(shard, facts)


def open_checked(shard: PlannedShard) -> IO[bytes]:
    """A registered shard opened (open_shard's rules: a regular file, no symbolic link), its
    size and content checked before any read: one fstat, or one HEAD on an object store."""
    reader = shard.io
    facts = file_facts(shard.path)[1] if reader.remote else None  # a HEAD first: an open does not give it
    try:
        f = reader.open(shard.path)
    except (FileNotFoundError, ObjectMissingError) as e:
        raise shard_missing(shard.path) from e
    try:
        if facts is None:
            facts = reader.stat(shard.path, f)
        size = facts_size(facts)
        if size != shard.bytes:
            raise size_mismatch(shard.path, shard.bytes, size)
        check_content(shard, facts)
    except BaseException:
        f.close()
        raise
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
                # (none, or one a crash took: read from the start, as for a shard without one)
                offsets = stored_index(shard.index_path, shard.records, shard.bytes, shard.index_checksum, shard.cache)
                if offsets is not None:
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
        raise damaged_shard(shard.path, e, at) from e
    if pos != shard.records:
        raise CorruptShardError(shard.path, "records", shard.records, pos)
