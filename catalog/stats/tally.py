"""Statistics of records as they are written: decoded columns in, FeatureStats out.

A :class:`Tally` takes batches of records (decoded here) or of columns a caller already
decoded (an input's validation), plus the defaults a writer filled in, and gives one
shard's :class:`~catalog.stats.dataset.DatasetStats`. The cost is what it adds to an
append or a migration (benchmarks/bench_stats.py): vectorized numpy per batch, sketches
updated with arrays, strings counted once per batch (a Counter) before the sketches see them.
"""

from __future__ import annotations

import copy
import json
import pickle
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from catalog.errors import ExecutorError
from catalog.schema import Feature, Ragged, Schema
from catalog.stats import helper as helpers
from catalog.stats.dataset import DatasetStats
from catalog.stats.digest import digests
from catalog.stats.sketches import TOP_MAX_BYTES, FeatureStats, Moments, new_hll, new_kll, new_top
from catalog.tfrecord.framing import record_sizes
from catalog.tfrecord.native import float32_figures, texts_joined

# Records decoded at a time: large batches spread numpy's per-call cost (a dozen calls per
# feature a batch), bounded in bytes for large records.
BATCH = 8192
BATCH_BYTES = 8 << 20
# A fixed-shape feature of more than PER_RECORD elements (a tensor: an image) feeds its
# quantile sketch a sample of its elements, each taken with the same probability in every
# batch and shard, PER_RECORD / elements (counts, range, moments, zeros, NaNs and infinities
# still see every element): sketching 3,072 bytes of every 32x32x3 image costs more than
# writing it. The rate is the feature's, never a batch's: sketches carry no weights, so a
# rate per batch would give a 30-image append the weight of 6,000 images once merged. The
# sample is taken as runs of RUN consecutive values at random places: a run costs a cache
# miss, not a value; neighbouring values are alike (pixels), so the error in rank is about
# that of one value a run, 1-2% over thousands of runs.
PER_RECORD = 24
RUN = 64
# A batch with more distinct values than this (the frequent-items sketch tracks 48) shows the
# sketch only values seen at least twice in it (see _skip_singles).
TOP_SKIP_SINGLES = 256
# Batches of records larger than this on average (images, documents) are tallied here, never
# sent to the helper: their statistics cost little per byte (few values a record, or NumPy's
# passes over tensors), less than copying them to it and waiting for its last batches.
HELPER_MAX_RECORD = 2048
# Nor are batches of a schema of scalars alone whose records hold more than this many bytes a
# feature on average: long strings or bytes (1 KiB payloads), which are digested here a batch at
# once (stats.digest) for less than copying them to the helper, which decodes them again.
HELPER_MAX_SCALAR_BYTES = 64
# A first batch of this many records, not decoded yet, goes to the helper when the process has
# one up already (a migration's shard of 10,000 SequenceExamples: the writer decoded its first
# 8,192 itself, 4.7 s of 26); a smaller one (a small append) is tallied here, for less than a
# round trip, and so is a first batch whose columns the writer has (the helper would decode it).
EARLY_RECORDS = BATCH // 2
BYTE_SUMS = 1 << 14  # 1-byte values at least this many a batch are summed on a helper thread
BYTE_ROW = 1 << 15  # 1-byte values summed at once in int32: 255**2 * BYTE_ROW < 2**31


def feature_kind(feat: Feature) -> str:
    if feat.dtype == "string":
        return "string"
    if feat.dtype == "bytes" and not feat.tensor:
        return "bytes"
    return "float" if feat.np_dtype.kind in "fc" else "int"


def batch_full(records: int, nbytes: int) -> bool:
    """Whether ``records`` records of ``nbytes`` bytes make a batch (BATCH, BATCH_BYTES)."""
    return records >= BATCH or nbytes >= BATCH_BYTES


def batch_ends(lengths: Sequence[int] | np.ndarray) -> list[int]:
    """Where each batch of records of these ``lengths`` ends, batched as ``batch_full`` says
    (the records that fill a batch belong to it), computed before the records are written."""
    total = np.cumsum(np.asarray(lengths, dtype=np.int64))
    ends: list[int] = []
    start = 0
    while start < len(total):
        before = int(total[start - 1]) if start else 0
        by_bytes = int(np.searchsorted(total, before + BATCH_BYTES, side="left")) + 1
        start = min(start + BATCH, by_bytes, len(total))
        ends.append(start)
    return ends


def joined_arrays(column: Any, dtype: Any = None) -> tuple[np.ndarray, np.ndarray] | None:
    """An object column of 1-D arrays of one dtype (a variable-length list's values, a row
    each) in decode_batch's ragged form: its values joined (as ``dtype`` when given) and each
    row's count; None for any other column. Pickled as they are, such arrays cost the writer a
    few microseconds each (a row-level migration sending a 6,000-row batch to the helper:
    24 ms, most of what its statistics added); joined, one copy."""
    if not isinstance(column, np.ndarray) or column.dtype != object or not column.size:
        return None
    first = column[0]
    if not isinstance(first, np.ndarray):
        return None
    if any(type(a) is not np.ndarray or a.ndim != 1 or a.dtype != first.dtype for a in column):
        return None
    counts = np.fromiter(map(len, column), dtype=np.int64, count=column.size)
    return np.concatenate(column.tolist(), dtype=dtype, casting="unsafe"), counts


def ragged_cutter(ragged: Ragged) -> Callable[[int, int], Ragged]:
    """What of ``ragged`` (decode_batch's joined values) records ``[start, end)`` hold."""
    at = {name: np.concatenate(([0], np.cumsum(counts))) for name, (_flat, counts) in ragged.items()}

    def cut(start: int, end: int) -> Ragged:
        return {k: (flat[at[k][start] : at[k][end]], counts[start:end]) for k, (flat, counts) in ragged.items()}

    return cut


def _varlen(feat: Feature, sequence: bool) -> bool:
    return sequence or feat.is_varlen or feat.stores_shape


Reread = Callable[[], Iterable[list[bytes]]]


class Tally:
    """The statistics of one shard's records, as they are written: past its first batch, the
    batches the helper process (catalog.stats.helper) has room for go to it, on another core;
    the rest are tallied here, and the two parts merge in ``result``."""

    def __init__(
        self, schema: Schema, helper: bool = True, given: Mapping[str, FeatureStats] | None = None, threads: bool = True
    ) -> None:
        """``threads``: whether the exact figures of large tensors are counted on a thread
        (ByteCounts); not in a process whose other core is busy already (the helper itself)."""
        self.schema = schema
        # Features whose statistics over the whole shard the writer knows already (a map's
        # columns passed through unchanged, a migration's features left as they were: their
        # source shard's), taken as they are, not tallied again; the helper
        # tallies every feature of the records it takes, so it is not asked then.
        self._given = dict(given or {})
        self._recount_all = False  # a given feature stopped being given: the shard is read again
        self._want_helper = helper and not self._given
        self._helper: helpers.Helper | None = None
        self._sent = 0  # batches the helper took
        self._early = False  # whether a batch of EARLY_RECORDS was offered to the helper (_borrow)
        self._asked = False  # the helper's part was asked for (ask_result): nothing more goes to it
        self._batches = 0  # batches tallied here
        self._runs: list[list[Any]] = []  # [counted, records] (see _note_run)
        self._finalizer: weakref.finalize[Any, Any] | None = None  # ends a lent helper if the tally is dropped
        self._sequence = set(schema.sequence)
        self._features = schema.all_features
        self.stats = DatasetStats({name: self._empty(name, f) for name, f in self._features.items()})
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._writer_fills: Counter[str] = Counter()
        self._exact_fills: dict[str, int] | None = None
        # Fresh entropy per tally: a fixed seed sampled the same places in every shard (shards of
        # like records then showed the sketch the same few pixels). Sketches are not reproducible
        # anyway: DataSketches' KLL compaction flips its own coins.
        self._rng = np.random.default_rng()
        self._rates = {name: sample_rate(f, name in self._sequence) for name, f in self._features.items()}
        # Features whose object columns of arrays may go to the helper as ragged values (what
        # _add_joined takes as _add_column takes the arrays): numbers, not steps, not tensors;
        # integers joined as int64, as _flatten joins them.
        self._joinable = {
            name: np.int64 if fs.kind == "int" else None
            for name, fs in self.stats.features.items()
            if fs.numeric and name not in self._sequence and not self._features[name].tensor
        }
        # text features whose columns go to the helper as their UTF-8 joined (native.texts_joined)
        self._texts = {n for n, f in self._features.items() if f.dtype == "string" and n not in self._sequence}
        self._bytes = ByteCounts(inline=not threads)
        self._helper_max_record = HELPER_MAX_RECORD
        if not self._sequence and all(f.is_scalar and not f.tensor for f in self._features.values()):
            self._helper_max_record = min(HELPER_MAX_RECORD, HELPER_MAX_SCALAR_BYTES * len(self._features))

    def _empty(self, name: str, feat: Feature) -> FeatureStats:
        fs = FeatureStats(name, feature_kind(feat))
        if _varlen(feat, name in self._sequence):
            fs.lengths, fs.length_quantiles = Moments(), new_kll()
        if not fs.numeric or feat.names:
            fs.distinct, fs.top = new_hll(), new_top()
        return fs

    # ---- input
    def add_record(self, record: bytes) -> None:
        self._pending.append(record)
        self._pending_bytes += len(record)
        if len(self._pending) >= BATCH or self._pending_bytes >= BATCH_BYTES:  # batch_full, inlined: a call a record
            self.flush()

    def add_records(self, records: Iterable[bytes]) -> None:
        """``add_record`` of each, batched at the same records, a list's joining the queue a
        batch at a time (a filter's kept records: one call a record cost a tenth of its time)."""
        if type(records) is not list:
            for r in records:
                self.add_record(r)
            return
        at = 0
        while at < len(records):
            room = BATCH - len(self._pending)
            part = records[at : at + room]
            sizes = np.cumsum(np.fromiter(map(len, part), dtype=np.int64, count=len(part)))
            # the batch ends at the record that brings it to BATCH_BYTES, as add_record's would
            full = int(np.searchsorted(sizes, BATCH_BYTES - self._pending_bytes, side="left"))
            take = min(full + 1, len(part))
            self._pending.extend(part[:take])
            self._pending_bytes += int(sizes[take - 1])
            at += take
            if len(self._pending) >= BATCH or self._pending_bytes >= BATCH_BYTES:
                self.flush()

    def flush(self) -> None:
        if self._pending:
            records, self._pending, self._pending_bytes = self._pending, [], 0
            self._note_run(True, len(records))
            if not self._offer(records):
                self.add_decoded(records, counted=True)

    def add_decoded_columns(
        self, columns: Mapping[str, np.ndarray], n: int, absent: Mapping[str, np.ndarray], ragged: Ragged
    ) -> None:
        """``n`` records as the caller decoded them (``Schema.decode_spans`` with ``absent`` and
        ``ragged``), tallied here as ``add_records`` of them would be (the features they lack
        counted as filled): a filter's kept records, decoded where they lie instead of copied
        out and decoded again."""
        self.flush()  # the records queued before these: first, in order
        self._note_run(True, n)
        self.add_columns(columns, n, absent, ragged)

    def add_decoded(self, records: list[bytes], counted: bool) -> None:
        """Decode and tally ``records``; the features they lack count as filled only if
        ``counted`` (else their writer counted them: ``add_batch``)."""
        absent: dict[str, np.ndarray] = {}
        ragged: Ragged = {}
        columns = self.schema.decode_batch(records, absent, ragged)
        self.add_columns(columns, len(records), absent if counted else {}, ragged)

    def _note_run(self, counted: bool, n: int) -> None:
        """The shard's records in order: runs whose lacking features count as filled when
        decoded (``add_records``) or not (``add_batch``); a recount follows them."""
        if self._runs and self._runs[-1][0] == counted:
            self._runs[-1][1] += n
        else:
            self._runs.append([counted, n])

    def add_batch(
        self,
        records: Sequence[bytes],
        columns: Mapping[str, np.ndarray],
        absent: Mapping[str, np.ndarray],
        ragged: Ragged | None = None,
        sizes: np.ndarray | None = None,
    ) -> None:
        """A batch of records with the columns the caller decoded of them (``add_columns``):
        the records go to the helper if it takes them, else the columns are tallied here.
        Either way the features ``absent`` says records lacked are counted as filled from it,
        not from the records (which may hold the defaults their writer filled in). ``sizes``:
        the records' lengths, when the caller has them (else measured)."""
        self._note_run(False, len(records))
        for name, mask in absent.items():
            self._writer_fills[name] += int(np.count_nonzero(mask))
        # A SequenceExample's records are decoded a step at a time (half a millisecond a record):
        # the helper would lag far behind the writer, who tallies the columns it has for less.
        if self._sequence or not self._offer_columns(records, columns, ragged, sizes):
            self.add_columns(columns, len(records), {}, ragged)

    def _too_long(self, records: Sequence[bytes], sizes: np.ndarray | None = None) -> bool:
        """Whether ``records`` (of ``sizes``, when known) average more than the helper takes."""
        total = int((record_sizes(records) if sizes is None else sizes).sum())
        return total > self._helper_max_record * len(records)

    def _offer(self, records: Sequence[bytes]) -> bool:
        """Whether the helper took ``records`` (of at most HELPER_MAX_RECORD bytes on average, or
        HELPER_MAX_SCALAR_BYTES a feature for a schema of scalars)."""
        if not (self._helper or self._want_helper) or self._too_long(records):
            return False
        self._early = self._early or len(records) >= EARLY_RECORDS
        return self._hand(lambda helper: helper.offer(records))

    def _offer_columns(
        self,
        records: Sequence[bytes],
        columns: Mapping[str, np.ndarray],
        ragged: Ragged | None,
        sizes: np.ndarray | None = None,
    ) -> bool:
        """Whether the helper took a batch's ``columns`` (and ``ragged`` values), decoded by the
        writer already: sent as they are (pickled: a copy of the arrays), never the records,
        which the helper would decode a second time (it cost as much as the writer's own
        decode: CPU off/on 0.46x for an append of a TFRecord file). The same batches as
        ``_offer`` takes (records of at most HELPER_MAX_RECORD bytes on average)."""
        if not (self._helper or self._want_helper) or self._too_long(records, sizes):
            return False

        def payload() -> bytes:
            plain, joined = dict(columns), dict(ragged or {})
            for name, dtype in self._joinable.items():
                packed = joined_arrays(plain.get(name), dtype)
                if packed is not None:  # the helper's add_columns takes it as decode_batch's ragged values
                    joined[name] = packed
                    del plain[name]
            texts = {}
            for name in self._texts:  # a str an object to pickle (20 ms a 100k distinct): their bytes instead
                column = plain.get(name)
                if type(column) is np.ndarray and column.dtype == object and column.ndim == 1:
                    got = texts_joined(column)
                    if got is not None:
                        texts[name] = got
                        del plain[name]
            return pickle.dumps((len(records), plain, joined, texts), pickle.HIGHEST_PROTOCOL)

        return self._hand(lambda helper: helper.offer_columns(payload))

    def _offer_sample(self, name: str, values: np.ndarray) -> bool:
        """Whether the helper took ``values`` for feature ``name``'s quantile sketch (a tensor's
        sample: its KLL updates are most of what a batch of images costs the writer)."""
        return self._hand(lambda helper: helper.offer_sample(name, values))

    def offer_span(self, path: str, offset: int, size: int, records: int, crc: int, guessed: bool = False) -> bool:
        """Whether the helper took a span of a local file's ``records`` whole records (``size``
        bytes at ``offset``, their CRC32C ``crc`` as the caller read them) to read again itself,
        check against this tally's schema and tally (helper.Helper.offer_span): the caller
        then neither decodes nor tallies them, and learns from ``spans_held`` whether they passed.
        Taken from the first span when the process's helper is up already."""
        self._early = True
        if not self._hand(lambda helper: helper.offer_span(path, offset, size, records, crc, guessed)):
            return False
        self._note_run(True, records)
        self._bytes.inline = True  # the helper takes the other core: a thread would only compete for this one
        return True

    def ask_result(self) -> None:
        """No more records come: the helper, if lent, is asked for its part of the statistics
        now, to work it out while the caller goes on (``result`` takes it)."""
        if self._helper is not None and self._sent:
            self._asked = True
            self._helper.ask_result()

    def spans_held(self) -> bool:
        """Whether every span the helper took was checked and tallied (see ``offer_span``);
        False when one was refused, or the helper was lost: the caller checks them itself."""
        return self._helper is None or self._helper.spans_held()

    def _hand(self, send: Callable[[helpers.Helper], bool]) -> bool:
        """Whether the helper, lent to this tally, took what ``send`` gives it."""
        if self._asked or not self._borrow():
            return False
        assert self._helper is not None
        if not send(self._helper):
            return False
        self._sent += 1
        return True

    def _borrow(self) -> bool:
        """Whether the helper is lent to this tally (asked for once, past its first batch, or
        at a first batch of EARLY_RECORDS when the process's helper is up already)."""
        if self._helper is None:
            if not self._want_helper or not (self._batches or (self._early and helpers.SLOT.running())):
                return False
            self._want_helper = False
            self._helper = helpers.SLOT.borrow()
            if self._helper is None:
                return False
            self._helper.open(json.dumps(self.schema.to_json()).encode("utf-8"))
            self._finalizer = weakref.finalize(self, helpers.SLOT.drop, self._helper)
        return True

    def fill(self, name: str, count: int = 1) -> None:
        """``count`` records of those added read ``name``'s default because the writer filled it in."""
        self._writer_fills[name] += count

    def set_filled(self, fills: Mapping[str, int]) -> None:
        """How many of the records had each feature filled from its default, known exactly by
        the caller (a migration carries its source shard's counts): replaces what decoding sees."""
        self._exact_fills = dict(fills)

    def add_columns(
        self,
        columns: Mapping[str, np.ndarray],
        n: int,
        absent: Mapping[str, np.ndarray],
        ragged: Ragged | None = None,
    ) -> None:
        """Decoded columns of ``n`` records (``Schema.decode_batch``), with its ``absent`` masks
        and, when the caller has them, its ``ragged`` columns' values joined."""
        self.stats.records += n
        for name, feat in self._features.items():
            if name in self._given:
                continue
            fs = self.stats.features[name]
            mask = absent.get(name)
            lacked = int(np.count_nonzero(mask)) if mask is not None else 0
            fs.records += n
            fs.filled += lacked
            feed = Feed(name, self._rates[name], self._rng, self._bytes, self._offer_sample)
            joined = ragged.get(name) if ragged else None
            if joined is not None:  # (decode_batch gave no column for it)
                _add_joined(fs, *joined, feed)
            else:
                _add_column(fs, feat, columns[name], name in self._sequence, feed)
        self._batches += 1

    def ungive(self) -> None:
        """The features given whole are not so after all (a map passed a column through in some
        batches only): the shard is tallied again from its file (``result``'s ``reread``)."""
        self._recount_all = bool(self._given)

    def result(self, reread: Reread | None = None) -> DatasetStats:
        """The shard's statistics. ``reread``: the shard's records again, batch by batch, for
        when the helper was lost with its part, or given features were taken back (the whole
        shard is then tallied here)."""
        self.flush()
        self._bytes.apply(self.stats.features)
        if self._recount_all or any(fs.records != self.stats.records for fs in self._given.values()):
            self._recount(reread)  # (given features included: tallied from the records)
            self._given.clear()
        elif self._helper is not None:
            self._merge_helper(reread)
        for name, fs in self.stats.features.items():
            if self._exact_fills is not None:
                fs.filled = self._exact_fills.get(name, 0)
            else:  # written as values, so read as present: they were not
                fs.filled += self._writer_fills[name]
            fs.present = fs.records - fs.missing - fs.filled
        self._writer_fills.clear()
        for name, given in self._given.items():
            self.stats.features[name] = copy.copy(given)
        return self.stats

    def _merge_helper(self, reread: Reread | None) -> None:
        helper, self._helper = self._helper, None
        assert helper is not None and self._finalizer is not None
        self._finalizer.detach()
        part, failed = None, False
        try:
            if self._sent:
                part = DatasetStats.from_bytes(helper.result())
            else:
                helper.end_sending()
        except Exception:  # whatever went wrong with the helper, the shard read again says it right
            failed = True
        finally:  # an interruption (Ctrl-C) leaves its reply unread: that helper is ended too
            helper.lost = helper.lost or failed or (part is None and self._sent > 0)
            helpers.SLOT.give_back(helper, failed=failed)
        if part is not None:
            self.stats.merge(part)
            self.stats.shards = 1
        elif self._sent:
            self._recount(reread)

    def _recount(self, reread: Reread | None) -> None:
        """The whole shard tallied here again: the helper's part of it was lost."""
        if reread is None:
            raise ExecutorError("the statistics helper process ended before it finished: nothing registered")
        fresh = Tally(self.schema, helper=False)
        runs = iter(self._runs)
        counted, left = True, 0
        for batch in reread():
            start = 0
            while start < len(batch):
                if not left:  # the next run (records past the last are decoded as add_records does)
                    counted, left = next(runs, (True, len(batch) - start))
                take = min(left, len(batch) - start)
                fresh.add_decoded(batch[start : start + take], counted)
                start, left = start + take, left - take
        self.stats = fresh.result()

    def release(self) -> None:
        """The tally is dropped, its records tallied elsewhere (a file whose spans the helper
        refused is read again): its helper, if lent, given back once it answered the rest of
        what it was sent (ended if it does not)."""
        helper, self._helper = self._helper, None
        if helper is None or self._finalizer is None:
            return
        self._finalizer.detach()
        try:
            if self._sent:
                helper.result()  # (what it tallied goes nowhere)
            else:
                helper.end_sending()
        except BaseException as e:  # lost, stalled, or interrupted (Ctrl-C): that helper is ended
            helper.lost = True
            if not isinstance(e, Exception):
                raise
        finally:
            helpers.SLOT.give_back(helper, failed=False)

    def discard(self) -> None:
        """The shard is abandoned: the helper (if lent) is ended, not waited for."""
        if self._finalizer is not None:
            self._finalizer()
            self._helper = None


def written_again(fs: FeatureStats) -> FeatureStats:
    """A feature's statistics once its records' values are written again, as a map writes a
    column it passed through: a default its source read is now a value there (present)."""
    out = copy.copy(fs)
    out.present, out.filled = fs.present + fs.filled, 0
    return out


class ByteCounts:
    """Exact figures of many values of tensors (pixels: by sums, byte_sums; others:
    number_figures), computed on a helper thread: NumPy's
    reductions let go of the GIL, so the passes over every pixel run on a second core while
    the writer frames and writes. Sums add up in any order: the figures are exact all the same."""

    INFLIGHT = 8  # batches counted or waiting at most (each holds its batch's memory: 64 MiB at most);
    # the thread gets the GIL back after each NumPy call only at the writer's switch interval, so it
    # falls behind in bursts: a deeper queue lets the writer go on instead of waiting for it

    # Batches of fewer bytes are counted at once, here: a thread's start and the writer's switch
    # interval (5 ms before the thread gets the GIL) cost a small append more than its counts
    # (a 100-image append: 8 ms waiting for 0.2 ms of sums).
    INLINE_BYTES = 1 << 20

    def __init__(self, inline: bool = False) -> None:
        self.inline = inline  # every batch counted at once (see Tally's threads)
        self._pool: ThreadPoolExecutor | None = None
        self._jobs: list[tuple[str, Future[Any]]] = []  # (byte_sums' tuple, or Figures)
        self._done: list[tuple[str, Any]] = []  # counted at once (INLINE_BYTES)
        self._waited = 0  # jobs before this one are done

    def add(self, name: str, values: np.ndarray) -> None:
        """Count ``values``: 1-byte integers by sums (byte_sums), others as numbers (number_figures)."""
        count: Callable[[np.ndarray], Any] = byte_sums if values.dtype.itemsize == 1 else _figures_alone
        if self.inline or values.nbytes < self.INLINE_BYTES:
            self._done.append((name, count(values)))
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="catalog-statistics")
        self._jobs.append((name, self._pool.submit(count, values)))
        while len(self._jobs) - self._waited > self.INFLIGHT:
            self._jobs[self._waited][1].result()
            self._waited += 1

    def apply(self, features: Mapping[str, FeatureStats]) -> None:
        """Wait for the counts, and add each feature's exact figures from them."""
        for name, figures in chain(self._done, ((name, job.result()) for name, job in self._jobs)):
            if isinstance(figures, Figures):
                figures.add_to(features[name])
            else:
                _add_byte_sums(features[name], *figures)
        self._jobs.clear()
        self._done.clear()
        self._waited = 0
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


@dataclass
class Feed:
    """What a feature's column goes to besides its FeatureStats: its quantile sketch's sample
    rate (sample_rate), the tally's generator, its byte counts, and the helper."""

    name: str
    rate: float
    rng: np.random.Generator
    bytes: ByteCounts
    elsewhere: Callable[[str, np.ndarray], bool]  # hands a sample to the helper's sketch


def _add_column(fs: FeatureStats, feat: Feature, column: np.ndarray, sequence: bool, feed: Feed) -> None:
    values: list[Any] | np.ndarray
    if column.dtype == object:
        present = column.tolist()
        if feat.optional:  # only an optional feature decodes to None (a record without it)
            present = [v for v in present if v is not None]
            fs.missing += len(column) - len(present)
        if not present:
            return
        if _varlen(feat, sequence) or not feat.is_scalar:  # (a scalar tensor's values are numbers, as a scalar's)
            sizes = np.fromiter(map(len, present), dtype=np.int64, count=len(present))
            if fs.lengths is not None:
                fs.lengths.add(sizes)
                sketch(fs.length_quantiles, sizes)
            if sequence and not feat.is_scalar and _steps_as_rows(fs, present):
                sizes = np.fromiter((v.size for v in present), dtype=np.int64, count=len(present))
            elif sequence and not feat.is_scalar:  # each record's steps are lists: their values count
                present = [step for steps in present for step in steps]
                sizes = np.fromiter(map(len, present), dtype=np.int64, count=len(present))
            values = _flatten(fs, feat, present, int(sizes.sum())) if present else []
        else:
            values = present
    else:
        values = column.reshape(-1)
    if fs.numeric:
        _add_numbers(fs, np.asarray(values), feed)
    else:
        _add_texts(fs, values if isinstance(values, list) else values.tolist())


def _steps_as_rows(fs: FeatureStats, present: list[Any]) -> bool:
    """Whether each record's steps are the rows of one array of numbers (decoding's form, and
    the columns an append takes as given): flattened whole, not split into a list of steps
    first (a list of 200,000 arrays a batch of SequenceExamples)."""
    return fs.numeric and all(type(v) is np.ndarray and v.ndim >= 2 for v in present)


def _add_joined(fs: FeatureStats, flat: np.ndarray, counts: np.ndarray, feed: Feed) -> None:
    """A variable-length numeric column given as its values joined and each record's count
    (as ``_add_column`` would take its arrays: every record present)."""
    if not counts.size:
        return
    sizes = counts.astype(np.int64, copy=False)
    if fs.lengths is not None:  # (every variable-length feature has them)
        fs.lengths.add(sizes)
        sketch(fs.length_quantiles, sizes)
    _add_numbers(fs, flat, feed)


def _flatten(fs: FeatureStats, feat: Feature, present: list[Any], total: int) -> list[Any] | np.ndarray:
    """Every value (``total`` of them) of the present records, in one flat list (texts) or
    array (numbers)."""
    if feat.is_varlen and fs.kind == "int":
        return _int64s(present, total)
    if fs.numeric:
        if isinstance(present[0], np.ndarray):
            return np.concatenate(present, axis=None)  # each array flattened, in one call
        return np.concatenate([np.asarray(v).reshape(-1) for v in present])
    flat: list[Any] = []
    for v in present:
        if isinstance(v, np.ndarray):
            flat.extend(v.reshape(-1).tolist())
        elif v and isinstance(v[0], (list, np.ndarray)):  # a sequence's steps of lists
            flat.extend(chain.from_iterable(np.asarray(step, dtype=object).reshape(-1).tolist() for step in v))
        else:
            flat.extend(v)
    return flat


def _int64s(rows: list[Any], total: int) -> np.ndarray:
    """An int64 list feature's values, from its decoded arrays or from the lists, tuples and
    arrays of any integer type the encoder took (stats.columns), as int64 (every value is in
    its range: the encoder checked; NumPy would join a uint64 array and an int64 one as floats,
    and an empty list as a float array)."""
    if set(map(type, rows)) == {np.ndarray}:
        return np.concatenate(rows, axis=None, dtype=np.int64, casting="unsafe")
    return np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=total)


def _add_numbers(fs: FeatureStats, values: np.ndarray, feed: Feed) -> None:
    if values.dtype == object:
        values = values.astype(np.float64 if fs.kind == "float" else np.int64)
    if not values.size:
        return
    if values.dtype.kind == "c":  # complex tensors: statistics of the magnitudes
        values = np.abs(values)
    if values.dtype.kind == "b":
        values = values.astype(np.int64)
    if (feed.rate < 1 or values.dtype.itemsize == 1) and values.size >= BYTE_SUMS:  # tensors: exact figures on a thread
        feed.bytes.add(feed.name, values)
        sample = sampled(values.reshape(-1), feed.rate, feed.rng)
        if sample.dtype.kind == "f":
            sample = sample[np.isfinite(sample)]
        if not feed.elsewhere(feed.name, sample):
            sketch(fs.quantiles, sample)
        return
    figures = number_figures(values)
    figures.add_to(fs)
    sketch(fs.quantiles, sampled(figures.finite, feed.rate, feed.rng))
    if fs.top is not None:  # class labels: which classes, how often
        labels, counts = np.unique(figures.finite, return_counts=True)
        for label, count in zip(labels.tolist(), counts.tolist(), strict=True):
            fs.top.update(str(label), count)
            fs.distinct.update(int(label))


def sketch(quantiles: Any, values: np.ndarray) -> None:
    """Add ``values`` to a KLL ``quantiles`` sketch, sorted first: the sketch sorts each
    buffer of K values it compacts, which is most of its cost per value, and a sorted input
    makes that nearly free (2.8 ms for 100,000 values unsorted, 1.5 ms sorting included). Its
    error bounds hold for values in any order. Sorted in their own dtype, then widened (in
    order: widening never reorders): float32 values sort in half the time of float64 ones."""
    quantiles.update(sorted_values(values.reshape(-1)))


# Integers spanning at most this many times their count (+ COUNTED_SPAN) are sorted by counting
# them: labels, counts, ids of a batch (a tenth of np.sort's time for 8,192 values in 0..999).
COUNTED_SPAN = 1 << 12


def sorted_values(flat: np.ndarray) -> np.ndarray:
    """``flat``'s values in order, as float64. Integers of a small range are counted
    (bincount) and repeated, the same values as np.sort gives, in O(values + range)."""
    if flat.dtype.kind in "iu" and flat.size > 1:
        lo, hi = int(flat.min()), int(flat.max())
        if hi - lo <= 2 * flat.size + COUNTED_SPAN:
            wide = flat if flat.dtype.itemsize == 8 else flat.astype(np.int64)  # (no wrap below)
            counts = np.bincount((wide - wide.dtype.type(lo)).astype(np.intp), minlength=hi - lo + 1)
            levels = np.arange(lo, hi + 1, dtype=wide.dtype).astype(np.float64)  # each rounded as np.sort's would be
            return np.repeat(levels, counts)
    return np.sort(flat).astype(np.float64, copy=False)


@dataclass
class Figures:
    """The exact figures of some numbers: zeros, NaNs, infinities, and the finite ones' moments."""

    zeros: int
    nans: int
    infs: int
    moments: Moments
    finite: np.ndarray

    def add_to(self, fs: FeatureStats) -> None:
        fs.zeros += self.zeros
        fs.nans += self.nans
        fs.infs += self.infs
        fs.values.merge(self.moments)


def number_figures(values: np.ndarray) -> Figures:
    """``values``' Figures (flat, numeric). Their minimum and maximum are finite only when
    every value is (NaN spreads to both, an infinity is one of them): then no pass of isfinite."""
    if values.dtype == np.float32 and values.size:
        native = float32_figures(values)
        if native is not None:  # every value finite
            zeros, lo, hi, mean, m2 = native
            return Figures(zeros, 0, 0, Moments(int(values.size), mean, m2, lo, hi), values)
    zeros = count_zeros(values)
    finite, nan, inf = values, 0, 0
    bounds = None
    if values.dtype.kind == "f" and values.size:
        lo, hi = values.min(), values.max()
        if np.isfinite(lo) and np.isfinite(hi):
            bounds = (lo.item(), hi.item())  # the moments' too: two passes fewer
        else:
            ok = np.isfinite(values)
            nan = int(np.count_nonzero(np.isnan(values)))
            inf = int(values.size - np.count_nonzero(ok)) - nan
            finite = values[ok]
    moments = Moments()
    moments.add(finite, bounds)
    return Figures(zeros, nan, inf, moments, finite)


def count_zeros(values: np.ndarray) -> int:
    """How many of ``values`` are zero (-0.0 too). Floats are compared: NumPy's count_nonzero
    of floats takes a slow path, 12 ms for 2 M float32 values where ``== 0`` takes 0.5 ms."""
    if values.dtype.kind in "fc":
        return int(np.count_nonzero(values == 0))
    return int(values.size - np.count_nonzero(values))


def _figures_alone(values: np.ndarray) -> Figures:
    """number_figures without the finite values kept (a thread's: only the figures are added)."""
    figures = number_figures(values)
    figures.finite = values[:0]
    return figures


def byte_sums(values: np.ndarray) -> tuple[int, int, int, int, int, int]:
    """Count, sum, sum of squares, zeros, minimum and maximum of 1-byte integers, exactly:
    summed in rows of BYTE_ROW values in int32 (no overflow), which NumPy does without casting
    every value to 8 bytes first (a 256-bin histogram by bincount costs three times as much)."""
    flat = values.reshape(-1)
    whole = flat.size - flat.size % BYTE_ROW
    rows = flat[:whole].reshape(-1, BYTE_ROW)
    rest = flat[whole:].astype(np.int64)
    total = int(rows.sum(axis=1, dtype=np.int32).sum(dtype=np.int64)) + int(rest.sum())
    squares = int(np.einsum("ij,ij->i", rows, rows, dtype=np.int32).sum(dtype=np.int64)) + int(rest @ rest)
    zeros = flat.size - int(np.count_nonzero(flat))
    return flat.size, total, squares, zeros, int(flat.min()), int(flat.max())


def _add_byte_sums(fs: FeatureStats, n: int, total: int, squares: int, zeros: int, lo: int, hi: int) -> None:
    """Add ``byte_sums``' figures: the sum of squared deviations from Python's exact integers."""
    fs.zeros += zeros
    fs.values.merge(Moments(n, total / n, (n * squares - total * total) / n, lo, hi))


def sampled(flat: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """``flat``'s values for the quantile sketch, each taken with probability ``rate`` (in
    expectation): all of them at rate 1, else runs of RUN consecutive values at random places,
    as many as ``flat.size * rate / RUN`` rounded at random (single random picks from tens of
    megabytes of pixels cost a cache miss each: 2.5 ms a batch)."""
    if rate >= 1:
        return flat
    if flat.size <= RUN:
        return flat[rng.random(flat.size) < rate]
    want = flat.size * rate / RUN
    runs = int(want) + int(rng.random() < want - int(want))
    starts = rng.integers(0, flat.size - RUN + 1, runs)
    # each run a row of a window view: one copy of the runs, no index array of every value
    return np.lib.stride_tricks.sliding_window_view(flat, RUN)[starts].reshape(-1)


def sample_rate(feat: Feature, sequence: bool) -> float:
    """The share of ``feat``'s elements its quantile sketch sees (see PER_RECORD)."""
    size = feat.size
    if _varlen(feat, sequence) or size is None or size <= PER_RECORD:
        return 1.0  # a list's length varies: no rate fits all its records, so every value
    return PER_RECORD / size


def _add_texts(fs: FeatureStats, values: list[Any]) -> None:
    if not values:
        return
    sizes = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    fs.zeros += int(len(values) - np.count_nonzero(sizes))  # empty strings
    fs.values.add(sizes)
    sketch(fs.quantiles, sizes)
    long = sizes > TOP_MAX_BYTES
    distinct_long = 0
    if long.any():  # counted by digest, never top values
        values, distinct_long = _add_long_values(fs, values, long)
    counts = Counter(values)
    empty = counts.pop("" if fs.kind == "string" else b"", 0)
    if empty:  # the distinct-count sketch ignores an empty value: counted by zeros (distinct_estimate)
        fs.top.update("", empty)
    if counts:
        once = len(counts) + int(empty > 0) == len(values) and distinct_long == int(np.count_nonzero(long))
        _count_values(fs, counts, once, len(counts) + distinct_long)


def _add_long_values(fs: FeatureStats, values: list[Any], long: np.ndarray) -> tuple[list[Any], int]:
    """Values longer than TOP_MAX_BYTES into the distinct-count sketch by their digests,
    computed for all of them at once (stats.digest: a Counter of them hashed each value in
    Python, and a digest a value cost a Python call); returns the others, and how many
    distinct digests the long values had."""
    picked = np.flatnonzero(long).tolist()
    chosen = [values[i] for i in picked] if len(picked) < len(values) else values
    if fs.kind == "string":
        chosen = [v.encode("utf-8", "surrogatepass") for v in chosen]
    fs.long_values += len(chosen)
    found = np.unique(digests(chosen))  # (the sketch needs each once)
    deque(map(fs.distinct.update, found.tolist()), maxlen=0)
    rest = [] if len(picked) == len(values) else [values[i] for i in np.flatnonzero(~long).tolist()]
    return rest, len(found)


def _skip_singles(distinct: int) -> int:
    """In a batch of many distinct values, a value seen once cannot be one the frequent-items
    sketch reports (a reported value holds several percent of all): its update, the costliest
    per value, is skipped. Returns the minimum count shown to the sketch."""
    return 2 if distinct > TOP_SKIP_SINGLES else 1


def _count_values(fs: FeatureStats, counts: Counter[Any], once: bool, distinct: int) -> None:
    """A batch's distinct strings (or bytes) of at most TOP_MAX_BYTES into the distinct-count
    and top-value sketches, which take text: bytes go as latin-1 (one character a byte,
    reversible). ``once``: whether every value of the batch was seen once; ``distinct``: its
    distinct values, longer ones too."""
    least = _skip_singles(distinct)
    keys = list(counts) if fs.kind == "string" else [v.decode("latin-1") for v in counts]
    deque(map(fs.distinct.update, keys), maxlen=0)  # a C-level loop: a few dozen ns a value saved
    if least > 1 and once:  # every value once (ids): none is shown
        fs.top_rest += len(counts)
        return
    top = fs.top.update
    if least == 1:
        for key, count in zip(keys, counts.values(), strict=True):
            top(key, count)
        return
    many = np.fromiter(counts.values(), dtype=np.int64, count=len(counts))
    shown = np.flatnonzero(many >= least)  # few: the loop runs over them alone
    for i, count in zip(shown.tolist(), many[shown].tolist(), strict=True):
        top(keys[i], count)
    fs.top_rest += int(many.sum() - many[shown].sum())


def per_row(filled: Mapping[str, list[int]], n: int) -> list[list[str]] | None:
    """``encode_columns``' filled rows per feature, as the features filled per row (None: none)."""
    if not any(filled.values()):
        return None
    rows: list[list[str]] = [[] for _ in range(n)]
    for name, indexes in filled.items():
        for i in indexes:
            rows[i].append(name)
    return rows


def constant_stats(feat: Feature, n: int) -> FeatureStats:
    """The statistics of ``n`` records that all read ``feat``'s default (filled: a migration
    added the feature), or, for an optional feature, that all lack it; no data decoded but one."""
    schema = Schema([feat])
    one = schema.decode_batch([schema.encode({})])[feat.name]
    if one.dtype == object:
        column = np.empty(n, dtype=object)
        column[:] = [one[0]] * n
    else:
        column = np.repeat(one, n, axis=0)
    tally = Tally(schema)
    tally.add_columns({feat.name: column}, n, {feat.name: np.ones(n, dtype=bool)} if feat.has_default else {})
    return tally.result().features[feat.name]
