"""The public API: `Catalog` and `Dataset`. Thin: reading comes from the commit layer's
handles, every change from an operation module (see ARCHITECTURE.md)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from catalog import directory
from catalog import manifest as mf
from catalog.commit import tags
from catalog.commit.handles import CatalogHandle, DatasetHandle, snapshot
from catalog.commit.plans import CacheKeywords, ReadPlan, plan, with_cache
from catalog.commit.protocol import create_dataset, drop_dataset, token_commit
from catalog.commit.values import (
    Commit,
    GcReport,
    Progress,
    VerifyReport,
    VersionRef,
    default_author,
    validate_name,
)
from catalog.errors import AppendError, DatasetNotFoundError, Interrupted, SchemaError, UsageError
from catalog.inputs import STDIN, InputOptions, expand, given_paths, reads_folders
from catalog.inputs.infer import check_options, infer_inputs
from catalog.manifest import DEFAULT_SPLIT
from catalog.ops import adopt as adoption
from catalog.ops import dedup, derive, describe, indexing, ingest, maintenance, provision, rewrite, rowchanges
from catalog.ops.export import export_dataset
from catalog.ops.migrations import runner
from catalog.ops.options import (
    AdoptKeywords,
    AdoptOptions,
    AppendOptions,
    RunKeywords,
    Unpack,
    VerbKeywords,
    WriteOptions,
    check_keywords,
)
from catalog.ops.writer import Writer, drift
from catalog.readers import batches as readers
from catalog.readers import tfdata
from catalog.readers.images import ReadKeywords, reading
from catalog.readers.order import OrderKeywords
from catalog.readers.pytorch import require_torch, torch_dataset
from catalog.readers.source import DataSource
from catalog.schema import Schema
from catalog.schema.frames import is_columnar
from catalog.schema.sequences import pad_batch
from catalog.tfrecord.framing import stored_compression
from catalog.tfrecord.sources import regular_file_problem
from catalog.words import counted

Columns = str | Iterable[str] | None  # features a reader keeps (None: all)


class Catalog(CatalogHandle):
    """A catalog directory and its manifest. Create with :meth:`init`, reopen with :meth:`open`."""

    # ---- opening
    @classmethod
    def init(
        cls, path: str | os.PathLike[str], db_url: str | None = None, storage: str | os.PathLike[str] | None = None
    ) -> Catalog:
        """A new catalog directory. With ``db_url`` (or $CATALOG_DB_URL) naming a database that
        already holds a manifest, the directory attaches to it: another machine joining."""
        root, url = provision.create(path, db_url, storage)
        return cls._connect(root, url, check=True)

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None, *, check: bool = True) -> Catalog:
        root, url = directory.locate(path)
        return cls._connect(root, url, check)

    @classmethod
    def _connect(cls, root: Path, url: str, check: bool) -> Catalog:
        return cls(root, *directory.connect(root, url, check))

    def runtime_url(self, url: str) -> str:
        """A copy unpickled in another process connects as Catalog.open would (see
        CatalogHandle.__getstate__)."""
        return directory.runtime_url(url)

    def copy_manifest(self, db_url: str, switch: bool = True) -> dict[str, int]:
        """Copy the manifest, every row of it, into the empty database at ``db_url`` (SQLite or
        PostgreSQL); with ``switch``, this catalog directory uses the copy from then on. Other
        directories attached to the old manifest keep using it: attach them anew."""
        return provision.copy_manifest(self, db_url, switch)

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def upgrade(self) -> tuple[int, int]:
        """Bring the manifest to the current format; returns (from, to)."""
        return mf.upgrade(self.engine)

    # ---- datasets
    def register(
        self,
        name: str,
        schema: Schema | Mapping[str, Any] | str | os.PathLike[str],
        description: str = "",
        compression: str = "none",
        *,
        message: str = "",
        token: str | None = None,
    ) -> Dataset:
        """A new dataset at version 1; ``compression`` (none, gzip or zlib): how its shards are
        stored (TensorFlow reads each as ``TFRecordDataset(..., compression_type=...)``).
        ``message``: the first commit's (default: the description). ``token``: a retry with the
        token of a registration that committed returns that dataset, not DatasetExistsError."""
        validate_name(name)
        if token is not None and self.committed(name, token) is not None:
            return self.dataset(name)
        return self._create(name, _as_schema(schema), description, compression, None, message, token)

    def _create(
        self, name: str, schema: Schema, description: str, compression: str, pending: str | None, message: str = "",
        token: str | None = None,
    ) -> Dataset:  # fmt: skip
        validate_name(name)
        schema = Schema.from_json(schema.to_json())  # stored as JSON: what is stored must read back
        how = stored_compression(compression)
        create_dataset(self, name, schema, description, default_author(), how, pending, message, token)
        return self.dataset(name)

    def register_inferred(
        self,
        name: str,
        paths: Iterable[str | os.PathLike[str]],
        description: str = "",
        *,
        split: str = DEFAULT_SPLIT,
        compression: str = "none",
        format: str = "auto",
        delimiter: str | None = None,
        feature: str | None = None,
        image_shape: tuple[int, int, int] | None = None,
        token: str | None = None,
        message: str = "",
        author: str | None = None,
        defaults: Mapping[str, Any] | None = None,
        fill_missing: bool = False,
    ) -> Commit:
        """Register ``name`` with the schema inferred from every record of the inputs (any
        format ``append_files`` takes), then append them to ``split``. All or nothing: when
        the append fails, the dataset is dropped again. ``token``, ``message``, ``author``: the
        append's, as ``append_files`` takes them; a retry with the token of a registration that
        committed returns its commit (``duplicate``), nothing read. A feature some records lack
        is optional (None when absent): ``defaults`` ({feature: value}) gives such features a
        default instead, and ``fill_missing`` the zero of their dtype (0, 0.0, "", [])."""
        validate_name(name)
        if token is not None:
            done = self.committed(name, token)
            if done is not None:
                return done
        options = InputOptions(delimiter, feature, image_shape)
        inputs = expand(given_paths(paths), format)
        if not inputs:
            raise AppendError("no input files: nothing registered")
        inferred = infer_inputs(inputs, options).with_defaults(defaults or {}, fill_missing)
        if not inferred.schema.features:
            seen = sum(n for _path, n in inferred.counts)
            what = f"{counted(seen, 'record', grouped=True)}, none with a value" if seen else "no records in the inputs"
            raise AppendError(f"{what}: no schema to infer, nothing registered")
        ds = self._register_for_inputs(name, inferred.schema, description, compression)
        try:
            return ds.append_files(
                [p for p, _ in inputs], format=format, split=split, delimiter=delimiter, feature=feature,
                image_shape=image_shape, token=token, message=message, author=author,
            )  # fmt: skip
        except BaseException as e:
            self._undo_register(ds, e)
            raise

    def committed(self, name: str, token: str) -> Commit | None:
        """The commit of dataset ``name`` made under ``token`` (``duplicate`` set), if any: whether
        a request with that token (a register, append, migrate, compact or restore) is done."""
        try:
            ds = self.dataset(name)
        except DatasetNotFoundError:
            return None
        return token_commit(ds, token)

    def _register_for_inputs(self, name: str, schema: Schema, description: str, compression: str) -> Dataset:
        """register(), pending until the inputs' commit: should this process die before it, the
        dataset is no dataset (lists and lookups skip it, its name is free, gc drops it)."""
        return self._create(name, schema, description, compression, mf.process_identity())

    def _undo_register(self, ds: Dataset, error: BaseException) -> None:
        """Drop a dataset registered for inputs that then failed, unless a commit made it more
        than that: ours (interrupted after its commit) or another writer's meanwhile."""
        if isinstance(error, Interrupted) and error.version is not None:
            return  # the commit is complete: the dataset stays with it
        drop_dataset(self, ds.id, only_at=ds.version)

    def adopt(
        self, name: str, paths: Iterable[str | os.PathLike[str]], *, description: str = "", **kw: Unpack[AdoptKeywords]
    ) -> Commit:
        """:meth:`Dataset.adopt` into ``name``; a dataset not registered yet is registered first,
        with the schema of a TFDS directory's ``features.json`` (its description too), else the
        schema inferred from every record of the files (and the compression they share, if they
        share one), and dropped again when the adoption fails: all or nothing. The inference
        rides on the adoption's one read where it can (see ops.adopt.GUESS_RECORDS)."""
        check_keywords("adopt", kw, AdoptKeywords)
        paths = given_paths(paths)
        validate_name(name)
        opts = _adopt_options(kw)
        try:
            ds = self.dataset(name)
        except DatasetNotFoundError:
            pass
        else:
            return ds._adopt(adoption.plan(paths, opts.split), opts, kw)
        todo = adoption.plan(paths, opts.split)
        if todo.tfds is not None:
            return self._adopt_new(name, todo.tfds.schema, description or todo.tfds.description, todo, opts, kw)
        one_pass = kw.get("executor") is None or len(todo.inputs) == 1  # (jobs check no SequenceExample)
        guess = adoption.guess_schema(todo) if one_pass and not (opts.copy or opts.link) else None
        if guess is not None:
            try:  # one pass: the adoption checks that every record infers this schema (adopt.GUESS_RECORDS)
                return self._adopt_new(name, guess, description, replace(todo, guessed=True), opts, kw)
            except adoption.GuessMissed:
                pass  # a record the guess does not describe (or damage, which inference then names)
        schema = infer_inputs([(p, "tfrecord") for p, _ in todo.inputs], InputOptions()).schema
        return self._adopt_new(name, schema, description, todo, opts, kw)

    def _adopt_new(
        self, name: str, schema: Schema, description: str, todo: adoption.Plan, opts: AdoptOptions, kw: AdoptKeywords
    ) -> Commit:
        """Register ``name`` for inputs with ``schema`` and adopt ``todo`` into it: all or nothing."""
        if not schema.features:
            raise AppendError(f"{todo.named()}: no records: no schema to infer, nothing registered")
        ds = self._register_for_inputs(name, schema, description, todo.compression())
        try:
            return ds._adopt(todo, opts, kw)
        except BaseException as e:
            self._undo_register(ds, e)
            raise

    def dataset(self, name: str) -> Dataset:
        return Dataset(self, *self.dataset_row(name))

    def drop(self, name: str) -> None:
        """Remove a dataset from the manifest; its files are collected by the next gc."""
        drop_dataset(self, self.dataset_id(name))

    # ---- maintenance
    def backup(self, out: str | os.PathLike[str], force: bool = False) -> Path:
        """A consistent copy of the manifest in a new SQLite file: SQLite's online backup API,
        or, from PostgreSQL, :func:`copy_manifest` (every row, writers held meanwhile). Written
        under a partial name, fsynced, then published without replacing anything (``force``:
        replacing the file at ``out`` once the copy is complete): a killed backup leaves no file
        under ``out``, or the one that was there (the next one removes its partial file). A SQLite
        manifest of an older format (opened with ``check=False``) is copied as it is: the backup
        to take before :meth:`upgrade`."""
        return provision.backup(self, out, force)

    def verify(
        self, names: Sequence[str] | None = None, progress: Progress | None = None, *, executor: Executor | None = None
    ) -> VerifyReport:
        """Check shards against the manifest; with ``executor``, in jobs on it (same report, same order)."""
        return maintenance.verify_catalog(self, names, progress, executor)

    def gc(
        self,
        grace: timedelta = timedelta(hours=1),
        dry_run: bool = False,
        *,
        keep_versions: int | None = None,
        older_than: timedelta | None = None,
    ) -> GcReport:
        """Remove unregistered files; with ``keep_versions`` and/or ``older_than`` also retired
        shards that no kept version needs (time travel to older versions ends there)."""
        return maintenance.collect_garbage(self, grace, dry_run, keep_versions, older_than)

    def index(
        self, names: Sequence[str] | None = None, version: VersionRef = None, progress: Progress | None = None
    ) -> list[indexing.IndexReport]:
        """Give every uncompressed shard without a record index (registered before format 4, or
        ``--link``ed) its index: one read per shard; idempotent, safe beside writers and gc."""
        return indexing.index_catalog(self, names, version, progress)


def _adopt_options(kw: AdoptKeywords) -> AdoptOptions:
    """An adoption's options from its keywords: ``copy`` or ``link``, not both."""
    opts = AdoptOptions.taking(kw)
    if opts.copy and opts.link:
        raise UsageError("adopt takes --copy or --link, not both")
    return opts


def _link_report(w: Writer, inputs: Sequence[Path]) -> Commit:
    """A committed ``--link`` append's commit, saying which inputs were hard linked and which
    copied (a retried token's commit as it was)."""
    assert w.commit is not None
    if w.skipped or w.sink is None:
        return w.commit
    linked = {f.source for f in w.sink.shards if f.linked}
    everyone = [ingest.source_of(p) for p in inputs]
    return replace(
        w.commit,
        linked=tuple(s for s in everyone if s in linked),
        copied=tuple(s for s in everyone if s not in linked),
    )


def _as_schema(schema: Schema | Mapping[str, Any] | str | os.PathLike[str]) -> Schema:
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, Mapping):
        return Schema.from_json(dict(schema))
    if not isinstance(schema, (str, os.PathLike)):
        raise SchemaError(f"a schema is a Schema, a mapping or a JSON file's path, got {type(schema).__name__}")
    return Schema.load(schema)


class Dataset(DatasetHandle):
    """A handle on one dataset. Its schema is the one it read, until an append starts: that
    follows a migration committed since (rows are validated against the current schema), and
    fails at commit only if a newer schema version was committed while it wrote."""

    # ---- appends
    def append_rows(
        self,
        rows: Iterable[Mapping[str, Any]] | Any,
        token: str | None = None,
        message: str = "",
        shard_size: int | None = None,
        shard_records: int | None = None,
        author: str | None = None,
        split: str = DEFAULT_SPLIT,
        check: str | None = None,
        max_linf: float | None = None,
    ) -> Commit:
        """Validate and write ``rows`` as new shards of ``split``, registered in one commit.

        ``rows``: an iterable of rows (mappings of feature to value); or, encoded a column at a
        time, a pandas DataFrame, a pyarrow Table or RecordBatch, a dict of equal-length columns
        (lists or numpy arrays), or an iterable of DataFrames, Tables or RecordBatches (a dict
        inside an iterable is a row). An error names the row, counted from 0 over the call.
        ``check`` ("fail" or "warn") compares the new records' statistics with the dataset's
        before committing: the schema's per-feature ``checks``, and ``max_linf`` (which
        implies "fail") for the L-infinity distance of every feature without its own."""
        opts = WriteOptions.taking(locals())
        drift(opts)  # a bad check is refused before the rows are looked at
        if not (is_columnar(rows) or isinstance(rows, (Mapping, Iterable))) or isinstance(rows, (str, bytes)):
            kinds = "an iterable of rows, a DataFrame, a table or a dict of columns"
            raise AppendError(f"rows are {kinds}, got {rows!r:.40}")
        with Writer(self, opts) as w:
            if w.skipped:
                pass
            elif is_columnar(rows) or isinstance(rows, Mapping):
                w.write_batch(rows)
            else:
                w.write_rows(rows)
            if not w.skipped and w.records == 0:  # raised inside: the writer registers nothing
                raise AppendError("no rows in the input: nothing committed")
        assert w.commit is not None
        return w.commit

    def append_files(
        self,
        paths: Iterable[str | os.PathLike[str]],
        token: str | None = None,
        message: str = "",
        shard_size: int | None = None,
        shard_records: int | None = None,
        *,
        link: bool = False,
        format: str = "auto",
        author: str | None = None,
        progress: Progress | None = None,
        executor: Executor | None = None,
        split: str = DEFAULT_SPLIT,
        delimiter: str | None = None,
        feature: str | None = None,
        image_shape: tuple[int, int, int] | None = None,
        allow_duplicate: bool = False,
        check: str | None = None,
        max_linf: float | None = None,
    ) -> Commit:
        """Validate and write the inputs as new shards of ``split``, registered in one commit.

        Inputs are TFRecord (any compression), JSON Lines, CSV/TSV, Parquet, ``.npy``/``.npz``
        files or image folders (``format``, else told by name and content), directories of
        such files, globs, or ``"-"`` for JSON Lines or CSV on standard input. ``delimiter``:
        CSV's; ``feature``: the one a ``.npy`` fills; ``image_shape``: decode images to uint8
        tensors. Each input gets its own shards (its path is their ``source``); an input whose
        shards have the bytes of live ones (appended before) is refused unless
        ``allow_duplicate``. With ``executor`` and several inputs, each input is a job on it
        (see ingest.ingest_files). ``check``, ``max_linf``: as :meth:`append_rows`."""
        opts = AppendOptions.taking(locals())
        inputs = expand(given_paths(paths), format)
        if not inputs:  # (a folder or a pattern without files says so in expand)
            raise AppendError("no input files: nothing committed")
        for p, fmt in inputs:
            problem = None if str(p) == STDIN or reads_folders(fmt) else regular_file_problem(p)
            if problem is not None:
                raise AppendError(f"{p}: {problem}", str(p))
        if sum(str(p) == STDIN for p, _ in inputs) > 1:
            raise AppendError("standard input (-) can be read once: name it once", STDIN)
        options = InputOptions(delimiter, feature, image_shape)
        check_options(inputs, options)
        drift(opts)
        with Writer(self, opts) as w:
            local = any(str(p) == STDIN for p, _ in inputs)  # stdin is this process's alone
            if not w.skipped and executor is not None and len(inputs) > 1 and not local:
                ingest.ingest_files(w, inputs, link, progress, executor, options)
            elif not w.skipped:
                for p, fmt in inputs:
                    w.sink.cut(ingest.source_of(p))  # type: ignore[union-attr]  # open inside the block
                    ingest.ingest_file(w, p, fmt, link, progress, options)
            if not w.skipped and w.records == 0:  # raised inside: the writer registers nothing
                names = ", ".join(str(p) for p, _ in inputs[:3]) + (", ..." if len(inputs) > 3 else "")
                raise AppendError(f"{names}: no records in the input: nothing committed", str(inputs[0][0]))
        assert w.commit is not None
        return _link_report(w, [p for p, _ in inputs]) if link else w.commit

    def adopt(self, paths: Iterable[str | os.PathLike[str]], **kw: Unpack[AdoptKeywords]) -> Commit:
        """Register existing TFRecord files (any compression; files, folders, globs) as shards
        of ``split`` (default train) where they are, in one commit, after one read of each that
        checks every record against the schema, counts, checksums and indexes it: nothing is
        copied, and the catalog never writes or deletes them (gc forgets them once no kept
        version needs them). A TFDS prepared directory brings its splits, from its files' names,
        each shard's record count checked against its ``dataset_info.json``. ``copy``: copy
        them into the data area instead (as ``append_files``); ``link``: hard link them there,
        copying what cannot be linked. An input already in the dataset (the same bytes as a
        live shard) is refused unless ``allow_duplicate``. With ``executor`` and several files,
        each file is read by a job on it (in place only)."""
        check_keywords("adopt", kw, AdoptKeywords)
        opts = _adopt_options(kw)
        return self._adopt(adoption.plan(paths, opts.split), opts, kw)

    def _adopt(self, todo: adoption.Plan, opts: AdoptOptions, kw: AdoptKeywords) -> Commit:
        """:meth:`adopt` of planned inputs (Catalog.adopt plans them once, for a new dataset too)."""
        copy, link, progress = opts.copy, opts.link, kw.get("progress")
        if not (copy or link):
            adoption.refuse_data_area(todo, self.catalog.store)
        with Writer(self, opts.writing(todo.split)) as w:
            if not w.skipped:
                if copy or link:
                    adoption.bring_in(w, todo, link, progress)
                else:
                    adoption.adopt_files(w, todo, progress, kw.get("executor"))
                if w.records == 0:  # raised inside: the writer registers nothing
                    raise AppendError(f"{todo.named()}: no records in the input: nothing committed")
        assert w.commit is not None
        return _link_report(w, [p for p, _ in todo.inputs]) if link else w.commit

    def writer(
        self,
        token: str | None = None,
        message: str = "",
        shard_size: int | None = None,
        shard_records: int | None = None,
        author: str | None = None,
        split: str = DEFAULT_SPLIT,
    ) -> Writer:
        """``with ds.writer() as w: w.write(row)`` commits on clean exit, registers nothing on
        error; its shards belong to ``split`` (``train`` by default)."""
        return Writer(self, WriteOptions.taking(locals()))

    def verify(self, progress: Progress | None = None, *, executor: Executor | None = None) -> VerifyReport:
        return maintenance.verify_catalog(self.catalog, [self.name], progress, executor)

    def index(self, version: VersionRef = None, progress: Progress | None = None) -> indexing.IndexReport:
        """Index the uncompressed shards of ``version`` (default: current) that have no record index."""
        return indexing.index_dataset(self, version, progress)

    def dali_index(self, directory: str | os.PathLike[str], version: VersionRef = None) -> indexing.DaliReport:
        """Write NVIDIA DALI's index file of each shard of ``version`` into ``directory``, named
        ``<shard file name>.idx``: pair them with :meth:`files` (``indexing.dali_name``)."""
        return indexing.dali_indexes(self, directory, version)

    # ---- readers (catalog/readers): each pins its version and split in one manifest read, then
    # carries that plan alone (no connection): it pickles into workers and other processes.
    # Every reader takes ``cache_dir=`` and ``cache_limit=`` (bytes): shards on an object store
    # are then read from whole copies kept there, fetched once per host (storage/cache.py); all
    # but ``records`` take ``decode_images=`` and ``channels=`` too (readers/images.ReadKeywords).
    def source(
        self,
        version: VersionRef = None,
        split: str | None = None,
        columns: Columns = None,
        **read: Unpack[ReadKeywords],
    ) -> DataSource:
        """Random access: ``len(src)``, ``src[i]`` (a row), ``src[[i, j]]`` or ``src[a:b]`` (a
        columnar batch), ``src.records(indices)`` (raw bytes). A ``torch.utils.data.Dataset``
        for any sampler, and a grain ``RandomAccessDataSource``. Needs uncompressed shards.
        ``decode_images``: image features as uint8 ``H x W x C`` arrays, ``channels`` (1, 3, 4)
        forced (every reader's; catalog/readers/images.py)."""
        cache, decode_images, channels = reading("source", read)
        return DataSource(self._indexed_plan(version, split, cache, "source"), columns, decode_images, channels)

    def _indexed_plan(self, version: VersionRef, split: str | None, cache: CacheKeywords, reader: str) -> ReadPlan:
        """The read plan, every shard it reads by position indexed first (built here, in this
        process, where missing): workers then load offsets instead of scanning shards."""
        return indexing.ensure_indexes(self, with_cache(plan(self, version, split), cache, reader))

    def torch(
        self,
        batch_size: int | None = None,
        shuffle: bool = False,
        seed: int = 0,
        version: VersionRef = None,
        split: str | None = None,
        columns: Columns = None,
        drop_last: bool = False,
        rank: int | None = None,
        world_size: int | None = None,
        transform: Callable[[Any], Any] | None = None,
        **read: Unpack[ReadKeywords],
    ) -> Any:
        """A ``torch.utils.data.IterableDataset``: partitioned across ranks and DataLoader
        workers, shuffled by (seed, epoch), resumable (``set_epoch``, ``state_dict``,
        ``load_state_dict``, which refuses a state of another dataset, version, split,
        shuffle, seed, columns or record count); see catalog/readers/pytorch.py. Needs the
        ``torch`` extra."""
        require_torch()
        cache, decode_images, channels = reading("torch", read)
        options: dict[str, Any] = {"batch_size": batch_size, "shuffle": shuffle, "seed": seed, "columns": columns}
        options |= {"drop_last": drop_last, "rank": rank, "world_size": world_size, "transform": transform}
        options |= {"decode_images": decode_images, "channels": channels}  # decoded in the workers
        return torch_dataset(self._indexed_plan(version, split, cache, "torch"), **options)

    def batches(
        self,
        batch_size: int,
        version: VersionRef = None,
        split: str | None = None,
        columns: Columns = None,
        shuffle: bool = False,
        seed: int = 0,
        epoch: int = 0,
        rank: int = 0,
        world_size: int = 1,
        drop_last: bool = False,
        *,
        samples: int = 0,
        pad: bool = False,
        **read: Unpack[ReadKeywords],
    ) -> Iterator[dict[str, np.ndarray]]:
        """Columnar NumPy batches of ``batch_size`` rows (the last may be smaller) of rank
        ``rank``'s share of epoch ``epoch``: ds.torch()'s partition and order, for NumPy/JAX
        loops; ``samples``: resume after that many samples of the epoch, consumed globally
        (in [0, records]; trusted to be a position of this same read: give the version, split,
        shuffle, seed and epoch it was counted in, nothing else says what they were).
        A SequenceExample dataset's sequence features are ragged (an object array of each
        record's steps), or with ``pad`` padded arrays ``(rows, steps, ...)`` with each
        record's number of steps in ``<name>/length``. ``decode_images``: image features as
        ``(rows, H, W, C)`` uint8 when the schema fixes their shape, else ragged (an object
        array of each row's ``H x W x C``)."""
        cache, decode_images, channels = reading("batches", read)
        order = OrderKeywords(shuffle=shuffle, seed=seed, epoch=epoch, rank=rank, world_size=world_size)
        order |= {"drop_last": drop_last, "samples": samples}
        pinned = with_cache(plan(self, version, split), cache, "batches")
        if shuffle or world_size > 1 or samples:  # read by position: each shard's index, made here once
            pinned = indexing.ensure_indexes(self, pinned)
        out = readers.batches(pinned, batch_size, columns, decode_images, channels, **order)
        steps = pinned.schema().sequence
        if pad and steps:
            return (pad_batch(steps, batch) for batch in out)
        return out

    def read(
        self,
        version: VersionRef = None,
        split: str | None = None,
        columns: Columns = None,
        **read: Unpack[ReadKeywords],
    ) -> Iterator[dict[str, Any]]:
        """Rows (dicts per the schema of that version), in dataset order; ``decode_images``:
        image features as uint8 ``H x W x C`` arrays."""
        cache, decode_images, channels = reading("read", read)
        return readers.rows(with_cache(plan(self, version, split), cache, "read"), columns, decode_images, channels)

    def records(
        self,
        version: VersionRef = None,
        split: str | None = None,
        **cache: Unpack[CacheKeywords],
    ) -> Iterator[bytes]:
        """The raw serialized records, in dataset order, CRC-checked."""
        return readers.records(with_cache(plan(self, version, split), cache, "records"))

    # ---- rewrites: the operations themselves, bound as methods (see rewrite.py, export.py
    # and catalog/migrations/runner.py for their parameters)
    tag = tags.tag  # ds.tag("run-42", version=None); ds.untag("run-42"); ds.tags() (read side)
    untag = tags.untag
    migrate = runner.migrate
    migrations = runner.status
    restore = rewrite.restore
    compact = rewrite.compact
    export = export_dataset
    delete = rowchanges.delete  # ds.delete("label = 'cat'"): rows gone, a new version
    update = rowchanges.update  # ds.update("id = 7", set={"label": 2})
    dedup = dedup.dedup  # ds.dedup("id"): the first record of each key kept, a new version

    # ---- datasets derived from this one (see derive.py)
    def filter(
        self,
        where: str | Callable[..., Any],
        into: str,
        *,
        version: VersionRef = None,
        split: str | None = None,
        batched: bool = False,
        description: str = "",
        **kw: Unpack[VerbKeywords],
    ) -> derive.DeriveReport:
        """A new dataset ``into`` of the rows ``where`` matches (a predicate, or a function of a
        row; of a batch of columns with ``batched``), at ``version`` (default current), every
        split's or ``split``'s, in their order, with this schema (class names and all); its
        lineage names this dataset, the version read and the predicate. All or nothing;
        ``token``: a retry with it answers with the first run's commit."""
        check_keywords("filter", kw, VerbKeywords)
        op = derive.Operation(derive.FILTER, where=rowchanges.checked_where(self, where), batched=batched)
        return self._derive(op, into, None, version, split, description, kw)

    def map(
        self,
        fn: Callable[..., Any],
        into: str,
        *,
        schema: Schema | Mapping[str, Any] | str | os.PathLike[str] | None = None,
        batched: bool = False,
        version: VersionRef = None,
        split: str | None = None,
        description: str = "",
        **kw: Unpack[VerbKeywords],
    ) -> derive.DeriveReport:
        """A new dataset ``into`` of ``fn`` applied to every row (a dict in, a dict out: new,
        changed or dropped features), or with ``batched`` to every batch of columns (a dict of
        columns out, as many rows or not), in this dataset's order, splits kept. ``schema``:
        the output's, else inferred from the first outputs (features passing through keep
        their declaration: class names, image metadata) and then enforced. ``fn`` runs in
        worker processes: a module's function, which lineage names (and refresh imports)."""
        check_keywords("map", kw, VerbKeywords)
        if not callable(fn):
            raise UsageError(f"map takes a function of a row, not {type(fn).__name__}")
        given = None if schema is None else _as_schema(schema)
        op = derive.Operation(derive.MAP, fn=fn, batched=batched)
        return self._derive(op, into, given, version, split, description, kw)

    def _derive(
        self, op: derive.Operation, into: str, given: Schema | None, version: VersionRef, split: str | None,
        description: str, kw: VerbKeywords,
    ) -> derive.DeriveReport:  # fmt: skip
        validate_name(into)
        cat = self.catalog
        if not isinstance(cat, Catalog):  # (a Dataset is made by its Catalog)
            raise TypeError(f"a Dataset of a {type(cat).__name__}")
        token = kw.get("token")
        if token is not None and (prior := cat.committed(into, token)) is not None:
            return derive.DeriveReport(into, self.name, prior.read_version, "", prior.version, duplicate=True)
        snap = snapshot(self, version)
        shards = rowchanges.shards_in_split(self, snap, split)
        target = derive.target_schema(self, op, snap, given, split)
        about = description or f"{op.describe()} of {self.name} version {snap.version}"
        dst = cat._register_for_inputs(into, target, about, self.compression)
        try:
            return derive.run(self, dst, op, snap, shards, split, **kw)
        except BaseException as e:
            cat._undo_register(dst, e)
            raise

    def _other(self, name: str) -> Dataset:
        """Dataset ``name`` of this one's catalog."""
        return Dataset(self.catalog, *self.catalog.dataset_row(name))

    def lineage(self) -> list[derive.LineageEntry]:
        """Where this dataset came from: its derivation, its source's, and so on back to a
        dataset that was not derived (empty: this one was not)."""
        return derive.chain(self, self._other)

    def refresh(self, **kw: Unpack[RunKeywords]) -> derive.DeriveReport:
        """Apply this derived dataset's filter or map to the rows its source appended since
        the version it read (one commit); refused when the source changed otherwise."""
        check_keywords("refresh", kw, RunKeywords)
        return derive.refresh(self, self._other, **kw)

    # ---- statistics (see describe.py): ds.stats(version, split, features), kept by the manifest;
    # ds.compute_stats() for shards that have none; ds.compare_stats("train", "validation")
    stats = describe.stats
    compute_stats = describe.compute_stats
    compare_stats = describe.compare_stats

    # ---- readers (see catalog/readers/)
    tf_dataset = tfdata.tf_dataset
