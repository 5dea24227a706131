"""ShardSink: the records of one writer into new shard files of one dataset.

Files are named after the writer's intent id and numbered without gaps, published one by
one as they fill, and all removed again by abort() when the writer registers nothing. Each
shard's record index (storage.index) is computed while its records are framed and published
the same way (but not fsynced), in the index tree, before the commit that registers both.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from crc32c import crc32c

from catalog import faults
from catalog.errors import CatalogError
from catalog.schema import Ragged, Schema
from catalog.stats import Tally
from catalog.stats.columns import decoded_columns
from catalog.stats.sketches import FeatureStats
from catalog.stats.tally import batch_ends, per_row, ragged_cutter
from catalog.storage.base import Store
from catalog.storage.content import UNCHECKED, observe, to_register
from catalog.storage.factory import store_for
from catalog.storage.fileio import write_error
from catalog.storage.files import CHECKSUM_CHUNK, ShardFile, format_checksum
from catalog.storage.index import index_bytes, publish_index
from catalog.storage.names import SHARD_SUFFIX, index_rel, shard_name
from catalog.tfrecord.framing import FOOTER_SIZE, HEADER_SIZE, RecordWriter, read_record_batches, record_sizes

UNLIMITED = 1 << 62  # a ShardSink that never rolls: one output shard per job
# Records as Schema.decode_batch decodes them: the columns, the absent masks, the ragged values.
Decoded = tuple[dict[str, np.ndarray], dict[str, np.ndarray], Ragged]


class ShardSink:
    """Writes records into new shard files of one dataset, rolling at size or count limits."""

    def __init__(
        self,
        data_root: Store | str | os.PathLike[str],
        dataset: str,
        intent_id: str,
        shard_size: int,
        shard_records: int,
        sync: bool = True,
        index: bool = True,
        compression: str = "none",
        schema: Schema | None = None,
    ) -> None:
        self.store = data_root if isinstance(data_root, Store) else store_for(data_root)
        self._folder = self.store.url(dataset)  # refuses a dataset name that would lead outside
        self.dataset = dataset
        self.intent_id = intent_id
        self.shard_size = shard_size
        self.shard_records = shard_records
        self.sync = sync
        self.compression = compression  # of the shards written (none, gzip, zlib); none alone is indexed
        # write each shard's record index (False: only to measure its cost, or compressed)
        self.index = index and compression == "none"
        self.source: str | None = None  # recorded with each shard finished (ShardFile.source)
        self.shards: list[ShardFile] = []
        # For abort(): the temporary (or spool) files not published yet, and every shard put
        # in place under this sink's name (published, adopted, or taken from a job).
        self.temps: list[Path] = []
        self.placed: list[str] = []
        self._publishing: str | None = None  # the shard being renamed or uploaded, for abort()
        self._index_temps: list[Path] = []  # an index's temporary file while it exists, for abort()
        self._file: IO[bytes] | None = None
        self._writer: RecordWriter | None = None
        self._temp: Path | None = None
        self._rel = ""  # the open shard's final name, "<dataset>/<file>"
        self._bytes = 0
        self._records = 0
        # Each shard's statistics (catalog.stats), from the records as they are written; None:
        # not computed (the catalog's ``statistics`` off).
        self.schema = schema
        self._tally: Tally | None = None
        self._given: dict[str, FeatureStats] = {}  # see give_stats
        self.store.prepare(dataset)

    @property
    def records(self) -> int:
        return sum(s.records for s in self.shards) + self._records

    def _next_rel(self) -> str:
        index = len(self.temps) + len(self.placed)  # one index per file: never repeats
        return f"{self.dataset}/{shard_name(self.intent_id, index)}"

    def _open(self) -> RecordWriter:
        self._rel = self._next_rel()
        self.store.prepare(self.dataset)  # gc may have removed an empty folder meanwhile
        self._temp, self._file = self.store.open_temp(self._rel)  # closed in _finish
        self.temps.append(self._temp)
        codec = None if self.compression == "none" else self.compression
        self._writer = RecordWriter(self._file, codec, index=self.index)
        self._tally = None if self.schema is None else Tally(self.schema, given=self._given)
        return self._writer

    @property
    def tallying(self) -> bool:
        """Whether the shards written get statistics (write_decoded then saves a decode)."""
        return self.schema is not None

    def new_tally(self) -> Tally | None:
        """An empty tally of statistics (None when they are not computed)."""
        return None if self.schema is None else Tally(self.schema)

    def give_stats(self, given: Mapping[str, FeatureStats]) -> bool:
        """Take ``given`` as the statistics of these features over the whole shard this sink
        writes (a map's columns passed through unchanged, a migration's features written as
        they were read: their source shard's, taken as they are), instead of tallying them;
        only before the first record, by a sink that never rolls (its one shard is the whole of
        what the caller knows them for). Whether they were taken."""
        one_shard = self.shard_size == UNLIMITED and self.shard_records == UNLIMITED
        if not given or self.schema is None or not one_shard or self._writer is not None or self.placed:
            return False
        self._given = dict(given)
        return True

    def take_back_stats(self) -> None:
        """The statistics given (give_stats) are not the shard's after all (a column passed
        through in its first batches only): its features are tallied from the shard read again."""
        self._given = {}
        if self._tally is not None:
            self._tally.ungive()

    def _room(self, size: int, before_roll: Callable[[], None] | None = None) -> RecordWriter:
        """The writer of the shard a record of ``size`` framed bytes goes to (a new one when
        the open shard is full; ``before_roll`` runs first)."""
        writer = self._writer
        if writer is None or (
            self._records and (self._bytes + size > self.shard_size or self._records >= self.shard_records)
        ):
            if before_roll is not None and writer is not None:
                before_roll()
            self._finish()
            writer = self._open()
        return writer

    def _put(self, writer: RecordWriter, record: bytes, size: int) -> None:
        try:
            writer.write(record)
        except OSError as e:
            raise write_error(self._temp or self._folder, e) from e
        self._bytes += size
        self._records += 1

    def write(self, record: bytes, filled: Iterable[str] = ()) -> None:
        """Write one record; ``filled``: the features whose default the writer put in it."""
        size = len(record) + HEADER_SIZE + FOOTER_SIZE
        self._put(self._room(size), record, size)
        if self._tally is not None:
            self._tally.add_record(record)
            for name in filled:
                self._tally.fill(name)

    def fill(self, name: str, count: int) -> None:
        """``count`` records of the open shard had ``name``'s default filled in by their writer."""
        if self._tally is not None:
            self._tally.fill(name, count)

    def set_filled(self, fills: dict[str, int]) -> None:
        """The open shard's exact counts of records filled from defaults (Tally.set_filled)."""
        if self._tally is not None:
            self._tally.set_filled(fills)

    def write_many(self, records: Iterable[bytes], filled: Sequence[Iterable[str]] = ()) -> None:
        """``write`` of each record (``filled``: the features whose default the writer put in
        each, when it says), in one step when they all go to the open shard (else one by one,
        rolling where each would: the same shards)."""
        if type(records) is list:
            size = sum(map(len, records)) + len(records) * (HEADER_SIZE + FOOTER_SIZE)
            writer = self._whole(len(records), size)
            if writer is not None:
                self._put_many(lambda: writer.write_many(records), len(records), size)
                if self._tally is not None:
                    self._tally.add_records(records)
                    for names in filled:
                        for name in names:
                            self._tally.fill(name)
                return
        for r, names in zip(records, filled or itertools.repeat(()), strict=False):
            self.write(r, names)

    def _whole(self, n: int, size: int) -> RecordWriter | None:
        """The writer of the shard ``n`` records of ``size`` framed bytes all go to (one opened
        if none is); None when they would not all fit one shard: then they go record by
        record, rolling where each would (the batch paths write the same shards)."""
        if not n:
            return None  # no record: no shard opened for it
        if self._writer is None:
            return self._room(size) if n <= self.shard_records and size <= self.shard_size else None
        if self._records + n <= self.shard_records and self._bytes + size <= self.shard_size:
            return self._writer
        return None

    def _put_many(self, write: Callable[[], object], n: int, size: int) -> None:
        """``n`` records of ``size`` framed bytes written to the open shard by ``write()``."""
        try:
            write()
        except OSError as e:
            raise write_error(self._temp or self._folder, e) from e
        self._bytes += size
        self._records += n

    def write_framed(
        self,
        framed: bytes,
        lengths: list[int] | np.ndarray,
        records: Callable[[], list[bytes]],
        decoded: Callable[[], Decoded] | None = None,
    ) -> None:
        """Records framed already, as a reader found and checked them (a filter's kept records
        copied as they were): ``framed`` their bytes, ``lengths`` their data lengths;
        ``records()`` the records themselves (asked for when the statistics or a roll need them);
        ``decoded()``, when given, the records decoded (columns, absent, ragged), which the
        statistics then take instead. The shards hold the bytes ``write_many`` of the records
        would give them."""
        writer = self._whole(len(lengths), len(framed))
        if writer is None:
            self.write_many(records())
            return
        self._put_many(lambda: writer.write_framed(framed, lengths), len(lengths), len(framed))
        if self._tally is not None:
            if decoded is not None:
                columns, absent, ragged = decoded()
                self._tally.add_decoded_columns(columns, len(lengths), absent, ragged)
            else:
                self._tally.add_records(records())

    def write_encoded(
        self,
        records: Sequence[bytes],
        columns: Mapping[str, Sequence[Any]],
        filled: Mapping[str, list[int]],
        entries: Mapping[str, Sequence[bytes]],
        beat: Callable[[], None],
        framed: bytes | None = None,
    ) -> None:
        """Write the records ``Schema.encode_columns`` made of ``columns`` (with what it reported
        in ``filled``, ``entries`` and ``framed``, asked for while ``tallying``): the statistics
        take the columns (stats.columns), not the records decoded again; ``framed``, the
        records framed already, goes out as it is. ``beat``: the writer's heartbeat."""
        got = None
        if self.schema is not None and (entries or self.schema.sequence):
            got = decoded_columns(self.schema, columns, len(records), filled, entries, self._given)
        if got is not None:
            self.write_decoded(records, *got, beat, framed=framed)
            return
        if framed is not None and not any(filled.values()):  # (no statistics: nothing to tally)
            self.write_framed(framed, record_sizes(records), lambda: list(records))
            beat()
            return
        fills = per_row(filled, len(records))
        for i, record in enumerate(records):
            self.write(record, fills[i] if fills is not None else ())
            beat()

    def write_decoded(
        self,
        records: Sequence[bytes],
        columns: dict[str, np.ndarray],
        absent: dict[str, np.ndarray],
        beat: Callable[[], None] | None = None,
        ragged: Ragged | None = None,
        framed: bytes | None = None,
    ) -> None:
        """Write records the caller decoded already (``Schema.decode_batch``, checking them):
        the statistics take those columns (and its ``ragged`` columns' values joined) instead
        of decoding the records again, a part at a time as they are written, parted as
        Tally.add_record batches records (batch_full: ``batch_ends``, counted from the first
        record, not from a shard's); ``beat`` (the writer's heartbeat) runs after each part.
        ``framed``: the records framed already (written as they are when no shard rolls within)."""
        if self.schema is None:
            self.write_many(records)
            return
        start = 0
        cut = ragged_cutter(ragged or {})

        def tally_so_far(end: int) -> None:
            nonlocal start
            if self._tally is not None and end > start:
                part = {k: v[start:end] for k, v in columns.items()}
                lacked = {k: v[start:end] for k, v in absent.items()}
                self._tally.add_batch(records[start:end], part, lacked, cut(start, end), lengths[start:end])
            start = end
            if beat is not None:
                beat()

        def before_roll() -> None:
            tally_so_far(i)  # the shard so far: ``i``, the record about to start the next one

        lengths = record_sizes(records)
        size = int(lengths.sum()) + len(records) * (HEADER_SIZE + FOOTER_SIZE)
        writer = self._whole(len(records), size)
        if writer is not None:  # no roll within: one call, then the statistics part by part
            if framed is not None:
                self._put_many(lambda: writer.write_framed(framed, lengths), len(records), size)
            else:
                self._put_many(lambda: writer.write_many(records), len(records), size)
            for end in batch_ends(lengths):
                tally_so_far(end)
            return
        ends = iter(batch_ends(lengths))
        end = next(ends, 0)
        for i, record in enumerate(records):
            size = len(record) + HEADER_SIZE + FOOTER_SIZE
            self._put(self._room(size, before_roll), record, size)
            if i + 1 == end:
                tally_so_far(end)
                end = next(ends, 0)
        tally_so_far(len(records))

    def adopt(self, source: Path, records: int, stats: bytes | None = None) -> ShardFile | None:
        """Take an existing local file as a shard by hard link; None when it cannot be linked
        (another filesystem, or an object store): the caller then copies the records."""
        if not self.store.links_local_files:
            return None  # before _finish: the open shard goes on taking the copied records
        self._finish()
        rel = self._next_rel()
        if not self.store.adopt(source, rel):
            return None
        self.placed.append(rel)
        here = self.store.url(rel)  # a local path: only local stores link
        before = observe(here)
        size, checksum = self.store.checksum(rel)
        after = observe(here)
        # Changed while it was checksummed: its fingerprint vouches for nothing (storage.content).
        fingerprint = to_register(after) if after == before else UNCHECKED
        shard = ShardFile(
            rel, records, size, checksum, self.compression, source=self.source, linked=True,
            fingerprint=fingerprint, stats=stats,
        )  # fmt: skip
        self.shards.append(shard)
        return shard

    def take_in_place(
        self,
        location: str,
        records: int,
        size: int,
        checksum: str,
        compression: str,
        offsets: np.ndarray | None,
        source: str | None = None,
        stats: bytes | None = None,
        fingerprint: str | None = None,
    ) -> ShardFile:
        """An existing file, checked by the caller, as a shard where it is (``location``, never
        written or removed here): a new name in the dataset (no file takes it) and, when
        ``offsets`` are given, its record index, published as a written shard's is."""
        self._finish()
        rel = self._next_rel()
        index_checksum = None
        if offsets is not None:
            data, index_checksum = index_bytes(offsets)
            publish_index(self.store, rel, data, size, pending=self._index_temps)
        self.placed.append(rel)  # abort() removes its index (its name holds no file)
        shard = ShardFile(
            rel, records, size, checksum, compression, index_checksum, source, location=location,
            fingerprint=fingerprint or UNCHECKED, stats=stats,
        )  # fmt: skip
        self.shards.append(shard)
        return shard

    def take_as_is(self, source: IO[bytes], count: Callable[[Path], tuple[int, bytes | None]]) -> ShardFile:
        """One shard holding ``source``'s bytes exactly (an input already in this sink's
        compression: never inflated and deflated again). They are copied first and then
        ``count`` checks the copy and returns its records (and their statistics), so what is
        registered is what was checked, whatever happens to the input meanwhile."""
        self._finish()
        rel = self._next_rel()
        self.store.prepare(self.dataset)
        temp, f = self.store.open_temp(rel)
        self.temps.append(temp)
        crc = size = 0
        try:
            while chunk := source.read(CHECKSUM_CHUNK):
                f.write(chunk)
                crc = crc32c(chunk, crc)
                size += len(chunk)
            f.flush()
        except OSError as e:
            f.close()
            raise write_error(temp, e) from e
        records, stats = count(temp)
        self._publishing = rel
        self.store.publish(f, temp, rel, self.sync)
        self.temps.pop()
        shard = ShardFile(rel, records, size, format_checksum(crc), self.compression, source=self.source, stats=stats)
        self.placed.append(rel)
        self.shards.append(shard)
        self._publishing = None
        return shard

    def take(self, files: Iterable[ShardFile]) -> None:
        """Shards published by jobs under this sink's intent: registered with its own at
        commit, in this order, and removed by abort() like its own."""
        for f in files:
            self.placed.append(f.rel)
            self.shards.append(f)

    def _finish(self) -> None:
        writer, f, temp = self._writer, self._file, self._temp
        if writer is None or f is None or temp is None:
            return
        faults.point("shard.closing", temp=temp, records=writer.records, flush=writer.flush)
        # A local shard is made durable before its statistics are taken, not after: the
        # statistics helper works its part out meanwhile (fsync lets go of the GIL, and the
        # helper is another process), instead of the writer waiting for each in turn.
        if self._tally is not None:
            self._tally.flush()
            self._tally.ask_result()
        early = False  # made durable here, not by its publication
        try:
            writer.close()
            early = self.sync and self._tally is not None and self.store.sync_written(f)
        except OSError as e:
            f.close()
            raise write_error(temp, e) from e
        stats = self._tally_result(temp)
        self._writer = self._file = self._temp = self._tally = None
        rel = self._rel
        # Until the lists below say where the shard is, abort() finds it here: a Ctrl-C that
        # lands right after the rename (or upload) must not leave the published file behind.
        self._publishing = rel
        self.store.publish(f, temp, rel, self.sync and not early)
        self.temps.pop()  # renamed or uploaded (the temp file is always the newest entry)
        checksum = None
        if self.index:  # published before the commit that registers both
            data, checksum = index_bytes(writer.offsets())
            publish_index(self.store, rel, data, writer.file_bytes, pending=self._index_temps)
        self.placed.append(rel)
        self.shards.append(
            ShardFile(
                rel,
                writer.records,
                writer.file_bytes,
                format_checksum(writer.checksum),
                self.compression,
                index_checksum=checksum,
                source=self.source,
                stats=stats,
            )
        )
        self._publishing = None
        self._bytes = self._records = 0

    def _tally_result(self, temp: Path) -> bytes | None:
        """The open shard's statistics, once its file is complete (``temp``: read again if the
        statistics helper was lost with its part)."""
        if self._tally is None:
            return None
        compression = self.compression
        return self._tally.result(lambda: read_record_batches(temp, compression)).to_bytes()

    def cut(self, source: str | None) -> None:
        """End the open shard here: what is written next, from ``source``, goes to a new one
        (each input its own shards, so each shard has one source)."""
        self._finish()
        self.source = source

    def close(self) -> list[ShardFile]:
        """Publish the last shard and make every rename durable; when that fails (a full disk
        shows here, at the last flush), remove every file of the sink: the caller registers
        nothing, and its own clean-up may not run (the manifest on the same full disk)."""
        try:
            self._finish()
            if self.sync and self.placed:
                self.store.sync_dir(self.dataset)  # (not the index folder: storage.index says why)
        except BaseException:
            self.abort()
            raise
        return self.shards

    def abort(self) -> None:
        """Remove every file this sink made (the caller registers nothing)."""
        if self._file is not None:
            self._file.close()
        if self._tally is not None:
            self._tally.discard()
        self._writer = self._file = self._temp = self._tally = None
        for path in [*self.temps, *self._index_temps]:
            with contextlib.suppress(OSError):  # gone, or a read-only area: gc takes what stays
                path.unlink()
        for rel in [self._publishing, *self.placed]:
            if rel is not None:
                for each in (rel, index_rel(rel)):  # a shard, and its index if it has one
                    with contextlib.suppress(CatalogError):  # as above
                        self.store.remove(each)
        self._publishing = None
        self._index_temps.clear()
        self.temps.clear()
        self.placed.clear()
        self.shards.clear()


def clear_attempt(store: Store, dataset: str, prefix: str) -> None:
    """Remove the files of one job: what an earlier attempt left, or a failed run's.

    Dask re-runs the task of a worker that died, and a rerun would fail on the files of the
    attempt that died (temporary names are created exclusively, links refuse a taken name).
    The prefix (intent id, unit) is this job's alone, and its files are numbered from 0
    without gaps (see ShardSink), the newest perhaps still under its temporary name.
    """
    for index in itertools.count():
        found = False
        shard = f"{dataset}/{prefix}-{index:05d}{SHARD_SUFFIX}"
        for rel in (shard, index_rel(shard)):  # a shard and its index: the index never without its shard
            temp = None if store.remote else store.temp_for(rel)  # a remote store's spool is elsewhere
            found = store.remove(rel) or found
            if temp is not None and temp.exists():
                temp.unlink(missing_ok=True)
                found = True
        if not found:
            return
