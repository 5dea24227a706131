"""Appends: rows or validated records written into new shards under a write intent, then
one commit through the commit protocol (catalog.commit.protocol)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from catalog import faults
from catalog import manifest as mf
from catalog.commit.changes import APPEND, Change, NewShard, RequireNewBytes, adding
from catalog.commit.handles import DatasetHandle, raise_explained
from catalog.commit.intents import Intent
from catalog.commit.protocol import DATASET_STATE, commit, prior_commit
from catalog.commit.slicing import validate_split
from catalog.commit.statistics import CheckReport, DriftCheck, check_possible, drift_check, refuse
from catalog.commit.values import (
    DEFAULT_SHARD_RECORDS,
    DEFAULT_SHARD_SIZE,
    Commit,
    default_author,
    manifest_text,
    positive_int,
)
from catalog.errors import (
    CommitConflictError,
    DatasetNotFoundError,
    StorageError,
    UsageError,
    ValidationError,
)
from catalog.ops.options import WriteOptions
from catalog.schema.frames import column_batches, exact_columns, is_columnar
from catalog.storage import ShardFile, ShardSink

ROWS_SOURCE = "rows"  # the source of shards written from Python rows
ROW_CHUNK = 1024  # rows encoded before their records are written (write_rows)


def drift(options: WriteOptions) -> DriftCheck | None:
    """The drift check ``options`` ask for (None: none); a bad one is refused here."""
    return DriftCheck.asked(options.check, options.max_linf)


class Writer:
    """Appends rows or validated records into new shards; one commit at the end."""

    def __init__(self, ds: DatasetHandle, options: WriteOptions | None = None) -> None:
        opts = options or WriteOptions()
        self.split = validate_split(opts.split)  # before the intent: a bad name writes nothing
        # False: refuse shards whose bytes a live shard has (an input appended twice)
        self.allow_duplicate = opts.allow_duplicate
        self.ds = ds
        self.catalog = ds.catalog
        self.token = None if opts.token is None else manifest_text(opts.token, "token")
        self.message = manifest_text(opts.message, "message")
        self.author = manifest_text(opts.author or default_author(), "author")
        size = DEFAULT_SHARD_SIZE if opts.shard_size is None else opts.shard_size  # (0 is refused, not the default)
        self.shard_size = positive_int(size, "shard_size")
        records = DEFAULT_SHARD_RECORDS if opts.shard_records is None else opts.shard_records
        self.shard_records = positive_int(records, "shard_records")
        check = drift(opts)
        self.commit: Commit | None = None
        self.skipped = False  # a retried token: nothing to write
        self.sink: ShardSink | None = None
        self.intent = Intent(ds.catalog.engine, ds.catalog.store, ds.name)
        self.read_version = ds.version
        self.rows = 0  # rows written by write() and write_batch(), for messages
        self.splits: dict[str, str] = {}  # a shard's split where it is not ``split`` (adopt: TFDS's splits)
        self.check = check  # append --check: new data against the schema's checks

    @property
    def records(self) -> int:
        """Records written so far (0 before the block starts, or when a retried token skips it)."""
        return self.sink.records if self.sink is not None else 0

    @property
    def intent_id(self) -> str:
        return self.intent.id

    # ---- lifecycle
    def __enter__(self) -> Writer:
        prior = self._start()
        if prior is not None:
            self.commit, self.skipped = prior, True
            return self
        if self.check is not None:  # before a byte is written: a check that could compare nothing is refused
            check_possible(self.ds, self.check)
        faults.point("intent.recorded", intent=self.intent.id)
        self.sink = ShardSink(
            self.catalog.store,
            self.ds.name,
            self.intent.id,
            self.shard_size,
            self.shard_records,
            compression=self.ds.compression,
            schema=self.ds.schema if self.catalog.statistics else None,
        )
        self.sink.source = ROWS_SOURCE
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if self.skipped:
            return
        if exc is not None:
            self._settle(exc)
            return
        try:
            self.commit = self._commit()
        except BaseException as e:
            self._settle(e)
            raise
        if self.commit.duplicate:  # a twin committed first (its files settled in _commit)
            self._same_split(self.commit)

    def _settle(self, error: BaseException | None) -> None:
        if self.sink is not None:
            self.intent.settle(error, self.sink.abort)

    def _start(self) -> Commit | None:
        """Check the dataset and token, then record the intent before any file is written."""

        def txn() -> Commit | None:
            with mf.write_txn(self.catalog.engine, durable=False) as conn:  # the intent dies with its writer
                row = conn.execute(DATASET_STATE, {"ds": self.ds.id}).first()
                if row is None:
                    raise DatasetNotFoundError(f"dataset {self.ds.name!r} was dropped", self.ds.name)
                # A migration committed before this append began is no conflict: the rows are
                # validated against the schema now (a bad row is a ValidationError, named so)
                self.ds.follow_schema(conn, row.schema_version)
                prior = prior_commit(conn, self.ds, self.token)
                if prior is not None:
                    return self._same_split(prior)
                self.read_version = row.version
                self.intent.open(conn)
                return None

        return mf.with_lock_retry(txn)

    # ---- writing
    def write(self, row: Mapping[str, Any]) -> None:
        """Validate and encode one row into the current shard."""
        record, filled = self._encode(row, self.rows)
        self.write_record(record, filled)
        self.rows += 1

    def write_rows(self, rows: Iterable[Any]) -> None:
        """``write`` of each row (``write_batch`` of a DataFrame, table or dict of columns among
        them), ROW_CHUNK rows encoded before their records go to the shard in one step: one
        call a record cost a 100-row append as much as encoding its rows."""
        chunk: list[Mapping[str, Any]] = []
        for row in rows:
            if type(row) is not dict and is_columnar(row):  # (a dict is a row: no module looked up)
                self._write_chunk(chunk)
                chunk = []
                self.write_batch(row)
                continue
            chunk.append(row)
            self.intent.beat()  # while a slow iterator makes the rows, too
            if len(chunk) >= ROW_CHUNK:
                self._write_chunk(chunk)
                chunk = []
        self._write_chunk(chunk)

    def _write_chunk(self, rows: list[Mapping[str, Any]]) -> None:
        if not rows:
            return  # (_whole would open a shard for nothing)
        if self._write_as_columns(rows):
            return
        encoded = [self._encode(row, self.rows + i) for i, row in enumerate(rows)]
        self._sink().write_many([record for record, _ in encoded], [filled for _, filled in encoded])
        self.rows += len(rows)
        self.intent.beat()

    def _write_as_columns(self, rows: list[Mapping[str, Any]]) -> bool:
        """Write ``rows`` a column at a time (encode_columns, as a dict of columns is), when each
        is a dict of exactly the schema's features and every value passes; whether it did. The
        records are the row encoder's and the statistics take the columns, not the records
        decoded again (a 100-row append: 0.43 -> 0.16 ms). Anything else (a key the schema
        lacks, one left out, a value refused) goes row by row, so an error names the row the
        row path names, first in row order, with the same words."""
        schema = self.ds.schema
        columns = None if schema.sequence else exact_columns(rows, list(schema.features))
        if columns is None:
            return False
        try:
            done = [(part, *self._encode_columns(part, n)) for part, n in column_batches(columns, schema.features)]
        except ValidationError:
            return False
        for part, records, filled, entries, framed in done:  # nothing written before every row passed
            self._sink().write_encoded(records, part, filled, entries, self.intent.beat, framed)
        self.rows += len(rows)
        return True

    def write_batch(self, batch: Any) -> None:
        """Validate and encode a pandas DataFrame, a pyarrow Table or RecordBatch, or a dict of
        equal-length columns (lists or numpy arrays), a column at a time (schema.frames)."""
        for columns, n in column_batches(batch, self.ds.schema.features):
            try:
                records, filled, entries, framed = self._encode_columns(columns, n)
            except ValidationError as e:
                error = self._at_row(e, self.rows + (e.record or 0))
                raise_explained(self.ds, error, lambda older: older.encode_columns(columns, n))  # noqa: B023
            self._sink().write_encoded(records, columns, filled, entries, self.intent.beat, framed)
            self.rows += n

    def _encode_columns(
        self, columns: Any, n: int
    ) -> tuple[Sequence[bytes], dict[str, list[int]], dict[str, Sequence[bytes]], bytes | None]:
        """``n`` rows' records, with what the statistics take from encode_columns when the
        shards get them (the rows given defaults, each feature's entries), and the records
        framed when the fast path laid them out so (None: the shard frames them)."""
        tallying = self._sink().tallying
        filled: dict[str, list[int]] = {}
        entries: dict[str, Sequence[bytes]] = {}
        framed: list[bytes] = []
        records = self.ds.schema.encode_columns(
            columns, n, filled if tallying else None, entries if tallying else None, framed
        )
        return records, filled, entries, (b"".join(framed) if framed else None)

    def _encode(self, row: Mapping[str, Any], at: int) -> tuple[bytes, list[str]]:
        """Row ``at``'s record and the features whose default it was given; a row the schema
        refuses raises naming the row (or what an older schema of the dataset says of it)."""
        filled: list[str] = []
        try:
            return self.ds.schema.encode(row, filled), filled
        except ValidationError as e:
            raise_explained(self.ds, self._at_row(e, at), lambda schema: schema.encode(row))

    def _at_row(self, e: ValidationError, row: int) -> ValidationError:
        """``e`` naming the row (counted over this writer's rows) and, for a key the schema
        lacks, how to add the feature."""
        where = f"feature {e.feature!r}: " if e.feature else ""
        hint = ""
        if e.reason == "not in the schema" and e.feature:
            hint = f": add it with `catalog migrate {self.ds.name} --add {e.feature}:DTYPE=DEFAULT`, or leave it out"
        error = ValidationError(f"row {row}: {where}{e.reason}{hint}")
        error.feature, error.record = e.feature, row
        return error

    def write_record(self, record: bytes, filled: Iterable[str] = ()) -> None:
        """Write one serialized Example already validated against the dataset's schema
        (``filled``: the features whose default its encoder filled in, for the statistics)."""
        self._sink().write(record, filled)
        # Rows written through write()/append_rows() must keep the intent alive too, or gc
        # takes a busy writer for dead; a beat is one clock read when the last is recent.
        self.intent.beat()

    def _sink(self) -> ShardSink:
        if self.sink is None:
            raise UsageError("the writer is not open (use it in a `with` block)")
        return self.sink

    def heartbeat(self) -> None:
        """Tell gc this writer is alive; cheap (one clock read) when the last beat is recent."""
        self.intent.beat()

    # ---- commit
    def _commit(self) -> Commit:
        assert self.sink is not None
        faults.point("append.closing", intent=self.intent.id)
        try:
            shards = self.sink.close()
        except FileNotFoundError as e:  # a temp file removed under us (by gc, once our intent was dead)
            raise StorageError(f"{e.filename}: shard vanished before commit; nothing registered") from e
        added = [NewShard(s, split=self.splits.get(s.rel, self.split)) for s in shards]
        report = self._checked(shards)
        change = Change(
            APPEND, self.read_version, self.ds.schema_version, self.message, self.author, self.intent.id,
            (adding(added),), () if self.allow_duplicate else (RequireNewBytes(),), self.token,
        )  # fmt: skip
        done = commit(self.ds, change)
        if done.duplicate:  # a twin with our token committed first: our files are not needed
            self._settle(None)
        if report is None:
            return done
        warnings = tuple(v.message() for v in report.violations)
        return replace(done, warnings=warnings, check=report.to_json(), checked=tuple(report.lines()))

    def _checked(self, shards: list[ShardFile]) -> CheckReport | None:
        """Apply ``check`` to the new shards: raise (fail, a violation) or return what it compared."""
        if self.check is None or not shards:
            return None
        report = drift_check(self.ds, shards, self.split, self.check)
        if report.violations and self.check.mode == "fail":
            raise refuse(self.ds, report.violations)
        return report

    def _same_split(self, prior: Commit) -> Commit:
        """The earlier commit of this writer's token, unless it registered its records under
        another split: a retry is the same append, and one that says otherwise is a mistake
        (its records would silently be missing from the split asked for)."""
        other = sorted({s.split for s in prior.shards} - {self.split, *self.splits.values()})
        if other:
            raise CommitConflictError(
                f"token {self.token!r} already committed version {prior.version} of {self.ds.name!r} under split "
                f"{other[0]!r}, not {self.split!r}: nothing was registered; use another token for another split"
            )
        return prior
