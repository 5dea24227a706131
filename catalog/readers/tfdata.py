"""``Dataset.tf_dataset``: a ``tf.data`` pipeline over one pinned version's shards, what
``tf.data.experimental.make_batched_features_dataset`` gives, built from the manifest.

The pipeline is the one a careful user writes by hand, nothing in Python per record:

    the read plan's shard ranges (path, compression, start, count)
      -> in dataset order: one TFRecordDataset per run of whole shards, skip/take for cut ones
         shuffled: ranges in a random order, TFRecordDatasets of 16 at a time interleaved in parallel
      -> [shard(n, i) by record]  -> [shuffle buffer]  -> repeat
      -> [decode_images: each record's images decoded (parallel map, tfimages.py)]  -> batch
      -> parse_example on the whole batch, decode_raw + reshape, ragged features (parallel map)
      -> prefetch

Each shard's size is checked against the manifest before the pipeline is built (one stat or
HEAD each): :class:`~catalog.errors.CorruptShardError` then, before any training starts.
TensorFlow's reader checks every record's CRCs, but a shard cut at a record boundary (or grown
by whole records) reads cleanly: so the records are counted too, and a count other than the
manifest's fails the iteration instead of ending an epoch short or long. One pass with every
batch kept (``num_epochs=1``, no ``drop_remainder``: what Keras is given) is checked on its
batches' sizes alone, nothing per record (``InvalidArgumentError`` naming the dataset); other
pipelines count each run or range of shards as it is read (``assert_cardinality``:
``FailedPreconditionError: ... expected to contain N elements``). Neither can name the shard: the
size check is the one that does. The batches' count is set too, so Keras knows an epoch's length.

TensorFlow is an optional extra (``tfrecord-catalog[tf]``), imported when this is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from catalog.commit.handles import DatasetHandle
from catalog.commit.plans import PlannedShard, ReadPlan, plan, with_cache
from catalog.errors import CodecError, CorruptShardError, DependencyError, FeatureNotFoundError, UsageError
from catalog.keywords import Unpack
from catalog.readers.files import Facts, check_content, file_facts
from catalog.readers.images import ImageDecoding, ReadKeywords, image_decoding, reading
from catalog.readers.tfimages import optional_column, per_record, record_decoder
from catalog.schema import SHAPE_SUFFIX, Feature, Schema, to_tf_feature_spec
from catalog.storage.cache import CachedFileIO
from catalog.storage.files import OWNED
from catalog.words import counted

TF_EXTRA = "pip install 'tfrecord-catalog[tf]'"
# TFRecordDataset's spelling of each compression the manifest records.
TF_COMPRESSION = {"none": "", "gzip": "GZIP", "zlib": "ZLIB"}
# Records the shuffle buffer holds: TensorFlow's own default in make_batched_features_dataset.
SHUFFLE_BUFFER = 10_000
# Shards read at once when shuffling: records of this many shards are mixed before the buffer.
SHUFFLE_CYCLE = 16
HEADS_AT_ONCE = 16
# decode_raw reads these dtypes only; others of the same width are read as one and bitcast.
_RAW_OF_WIDTH = {1: "uint8", 2: "uint16", 4: "int32", 8: "int64", 16: "complex128"}
_RAW_DTYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "bool",
               "complex64", "complex128"}  # fmt: skip


def tf_dataset(
    ds: DatasetHandle,
    batch_size: int,
    label_key: str | None = None,
    shuffle: bool = False,
    seed: int | None = None,
    num_epochs: int | None = 1,
    version: int | str | None = None,
    split: str | None = None,
    columns: Sequence[str] | None = None,
    drop_remainder: bool = False,
    *,
    input_context: Any = None,
    **read: Unpack[ReadKeywords],
) -> Any:
    """A ``tf.data.Dataset`` of batches of feature dicts (``(features, label)`` with
    ``label_key``) over ``version`` (a number or a tag; default: current) and ``split`` (a
    TFDS-style spec such as ``"train[:90%]"``; default: every record), parsed per the schema
    of that version: scalars ``[batch]``, fixed shapes ``[batch, *shape]`` (tensor features
    decoded from their bytes), variable-length features and tensors of unknown dimensions as
    ``tf.RaggedTensor``, optional features as ragged ``[batch, (0 or 1), *shape]`` (a list
    feature of no values, shape ``[0]``, is ``(0)`` in every record: TensorFlow's parse cannot
    tell it present from absent).

    ``shuffle``: shards in a random order, records of up to 16 of them mixed, then a buffer of
    10,000 records; with ``seed`` the order is the same on every run (each epoch's differs).
    ``shuffle=False`` reads in dataset order. ``num_epochs``: passes over the data (None: for
    ever); batches run across epochs, as in TensorFlow's own helper, so with Keras keep 1 and
    give ``fit`` its ``epochs``. ``columns``: the features to parse (the label is parsed anyway).
    ``input_context``: a ``tf.distribute.InputContext`` (``distribute_datasets_from_function``
    passes one): this pipeline then reads its own share, whole shards when there are at least
    as many shard ranges as pipelines, else every n-th record; ``batch_size`` is this
    pipeline's batch (``input_context.get_per_replica_batch_size(global)``). ``cache_dir``,
    ``cache_limit``: shards on an object store are read from local copies (see :func:`fetched`).
    ``decode_images``, ``channels``: image features as uint8 pixels, decoded in the graph (tfimages.py)."""
    _check_arguments(batch_size, num_epochs)
    cache, decode_images, channels = reading("tf_dataset", read)
    tf = import_tensorflow()
    rp = fetched(with_cache(plan(ds, version, split), cache, "tf_dataset"))
    check_sizes(rp.shards)
    schema = rp.schema()
    names = selected_features(schema, columns, label_key, rp.dataset)
    images = image_decoding(schema, tuple(names), decode_images, channels)
    shards, by_record = partition(list(rp.shards), input_context)
    total = pipeline_records(shards, by_record)
    # One pass, every batch kept: the batches' sizes prove that every record came, so nothing
    # needs counting per record. Otherwise each run or range of shards is counted as it is read.
    sizes = BatchSizes(total, batch_size, f"dataset {rp.dataset!r} version {rp.version}")
    at_end = num_epochs == 1 and not drop_remainder
    records = read_records(tf, shards, shuffle, seed, by_record, count_each=not at_end)
    records = _epochs(tf, records, shuffle, seed, num_epochs)
    if images is not None and per_record(images):  # in parallel, after the shuffle buffer (no pixels held)
        images_spec = parse_spec(tf, schema, [f.name for f in per_record(images)])
        decoder = record_decoder(tf, images, images_spec, bool(schema.sequence), sizes.where)
        records = records.map(decoder, num_parallel_calls=tf.data.AUTOTUNE)
    batches = _batched(tf, records, batch_size, drop_remainder, num_epochs, total)
    if at_end:
        batches = batches.enumerate()
    parse = parser(tf, schema, names, label_key, sizes if at_end else None, images, sizes.where)
    return batches.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def _epochs(tf: Any, records: Any, shuffle: bool, seed: int | None, num_epochs: int | None) -> Any:
    """``records`` through the shuffle buffer (after the shards' own shuffle), repeated."""
    if shuffle:
        records = records.shuffle(SHUFFLE_BUFFER, seed=_second(seed), reshuffle_each_iteration=True)
    return records if num_epochs == 1 else records.repeat(num_epochs)


def _batched(tf: Any, records: Any, batch_size: int, drop: bool, num_epochs: int | None, total: int) -> Any:
    """``records`` in batches, their count set when there is one: Keras sees an epoch's length
    (set on batches, it costs nothing per record)."""
    batches = records.batch(batch_size, drop_remainder=drop)
    if num_epochs is None:
        return batches
    count = (num_epochs * total) // batch_size if drop else -(-num_epochs * total // batch_size)
    return batches.apply(tf.data.experimental.assert_cardinality(count))


@dataclass(frozen=True)
class BatchSizes:
    """What one pass of ``records`` records in batches of ``batch_size`` gives: every batch full
    but the last. A batch of another size means a shard changed after the size check."""

    records: int
    batch_size: int
    where: str

    def check(self, tf: Any, index: Any, serialized: Any) -> Any:
        """``serialized``, once its size is checked against batch ``index``'s."""
        full, last = divmod(self.records, self.batch_size)
        want = tf.where(index < full, tf.constant(self.batch_size, tf.int64), tf.constant(last, tf.int64))
        found = tf.shape(serialized, out_type=tf.int64)[0]
        message = (
            f"{self.where}: its shards hold other record counts than the manifest registered "
            "(changed after their commit? run `catalog verify`); batch, records, expected:"
        )
        # the Assert op itself: tf.debugging's wrappers trace a cond or ten ops for the same check
        ok = tf.raw_ops.Assert(condition=tf.equal(found, want), data=[message, index, found, want], summarize=3)
        with tf.control_dependencies([ok]):
            return tf.identity(serialized)


def _check_arguments(batch_size: int, num_epochs: int | None) -> None:
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise UsageError(f"batch_size must be a positive integer, got {batch_size!r}")
    if num_epochs is not None and (isinstance(num_epochs, bool) or not isinstance(num_epochs, int) or num_epochs < 1):
        raise UsageError(f"num_epochs must be a positive integer or None (for ever), got {num_epochs!r}")


def _second(seed: int | None) -> int | None:
    """The record buffer's seed: another stream than the shard order's, both fixed by ``seed``."""
    return None if seed is None else (seed + 1) % (1 << 63)


def import_tensorflow() -> Any:
    try:
        import tensorflow as tf
    except ImportError as e:
        raise DependencyError(f"tf_dataset needs TensorFlow ({TF_EXTRA})") from e
    return tf


# --------------------------------------------------------------------------- the shards


def fetched(rp: ReadPlan) -> ReadPlan:
    """``rp`` with each shard its FileIO reads from a local cache fetched there now (once per
    host, checked against the manifest: storage/cache.py), and named by its copy: TensorFlow
    opens the files by name itself; give a cache limit that holds them. The copies were checked
    whole against the registered checksum: nothing more to check of their content."""
    return replace(rp, shards=tuple(_copy(s) for s in rp.shards))


def _copy(shard: PlannedShard) -> PlannedShard:
    io = shard.io
    if not isinstance(io, CachedFileIO):
        return shard
    return replace(shard, path=io.local_copy(), cache=None, location=None, fingerprint=OWNED)


def check_sizes(shards: Sequence[PlannedShard]) -> None:
    """Each shard's size (and content, for a file others may write: storage.content) against
    the manifest, one stat (or HEAD) per file: a shard grown, cut or rewritten is a
    CorruptShardError before anything is read. HEADs to an object store go out a few at a
    time: a round trip each would add up."""
    registered = {s.path: s for s in shards}  # a split spec may name two ranges of one shard
    remote = [url for url, shard in registered.items() if shard.io.remote]
    heads: dict[str, tuple[int, Facts]] = {}
    if remote:
        with ThreadPoolExecutor(min(HEADS_AT_ONCE, len(remote))) as pool:
            heads = dict(zip(remote, pool.map(file_facts, remote), strict=True))
    for url, shard in registered.items():
        found, facts = heads[url] if url in heads else file_facts(url)
        if found != shard.bytes:
            raise CorruptShardError(url, "size", counted(shard.bytes, "byte"), counted(found, "byte"))
        check_content(shard, facts)


def partition(shards: list[PlannedShard], context: Any) -> tuple[list[PlannedShard], tuple[int, int] | None]:
    """This input pipeline's shard ranges, and (pipelines, this one) when it must take every
    n-th record instead: whole ranges when there are enough of them for every pipeline."""
    if context is None or context.num_input_pipelines <= 1:
        return shards, None
    n, i = int(context.num_input_pipelines), int(context.input_pipeline_id)
    if len(shards) >= n:
        return shards[i::n], None
    return shards, (n, i)


def read_records(
    tf: Any,
    shards: list[PlannedShard],
    shuffle: bool,
    seed: int | None,
    by_record: tuple[int, int] | None,
    count_each: bool = True,
) -> Any:
    """The serialized records of ``shards``: in dataset order, or mixed when shuffling; with
    ``by_record`` = (n, i), every n-th record from the i-th, of one order that every pipeline
    shares (so no shard shuffle then). ``count_each``: each run or range of shards is counted as
    it is read (``assert_cardinality``), a shard cut or grown since the size check failing there."""
    mixed = shuffle and by_record is None and len(shards) > 1
    records = _mixed(tf, shards, seed, count_each) if mixed else _in_order(tf, shards, count_each)
    if by_record is not None:
        records = records.shard(*by_record)
    return records


def pipeline_records(shards: Sequence[PlannedShard], by_record: tuple[int, int] | None) -> int:
    """The records one epoch of this pipeline gives."""
    count = _count(shards)
    if by_record is None:
        return count
    n, i = by_record
    return len(range(i, count, n))


def _count(shards: Sequence[PlannedShard]) -> int:
    return sum(s.count for s in shards)


def _whole(s: PlannedShard) -> bool:
    return (s.start, s.stop) == (0, s.records)


def _in_order(tf: Any, shards: list[PlannedShard], count_each: bool) -> Any:
    """Dataset order, built in Python from the plan so that each record passes through as few
    tf.data stages as a hand-written pipeline: one TFRecordDataset per run of whole shards of
    one compression, skip/take only for the shards a split slice cuts."""
    pieces: list[Any] = []
    run: list[PlannedShard] = []
    for s in [*shards, None]:
        if run and (s is None or not _whole(s) or s.compression != run[0].compression):
            files = tf.constant([r.path for r in run], tf.string)
            records = tf.data.TFRecordDataset(files, compression_type=TF_COMPRESSION[run[0].compression])
            pieces.append(_counted(tf, records, _count(run), count_each))
            run = []
        if s is not None and _whole(s):
            run.append(s)
        elif s is not None:
            records = tf.data.TFRecordDataset(s.path, compression_type=TF_COMPRESSION[s.compression])
            pieces.append(_counted(tf, records.skip(s.start).take(s.count), s.count, count_each))
    if not pieces:
        return tf.data.Dataset.from_tensor_slices(tf.constant([], tf.string))
    while len(pieces) > 1:  # a balanced tree: a record passes log2(pieces) concatenations, not all of them
        pairs = [pieces[i].concatenate(pieces[i + 1]) for i in range(0, len(pieces) - 1, 2)]
        pieces = pairs + pieces[len(pieces) & ~1 :]  # an odd one out stays last
    return pieces[0]


def _counted(tf: Any, records: Any, count: Any, count_each: bool) -> Any:
    """``records``, counted when ``count_each`` (one step per record: about 4% of the pipeline's
    time on small records, which is why one pass leaves the count to its batches' sizes)."""
    return records.apply(tf.data.experimental.assert_cardinality(count)) if count_each else records


def _mixed(tf: Any, shards: list[PlannedShard], seed: int | None, count_each: bool) -> Any:
    """Shard ranges in a random order (another each epoch), records of up to SHUFFLE_CYCLE of
    them at a time, read in parallel; in a reproducible order when ``seed`` is given. Each range
    is counted in the thread that reads it: counting the mixed stream would cost the consumer
    thread about a fifth of its speed."""
    ranges = tf.data.Dataset.from_tensor_slices(
        (
            tf.constant([s.path for s in shards], tf.string),
            tf.constant([TF_COMPRESSION[s.compression] for s in shards], tf.string),
            tf.constant([s.start for s in shards], tf.int64),
            tf.constant([s.count for s in shards], tf.int64),
        )
    ).shuffle(len(shards), seed=seed, reshuffle_each_iteration=True)

    def read(path: Any, compression: Any, start: Any, count: Any) -> Any:
        records = tf.data.TFRecordDataset(path, compression_type=compression).skip(start).take(count)
        return _counted(tf, records, count, count_each)

    def read_whole(path: Any, compression: Any, _start: Any, count: Any) -> Any:
        records = tf.data.TFRecordDataset(path, compression_type=compression)  # a grown file shows too
        return _counted(tf, records, count, count_each)

    # whole shards (no split slice): no skip and take between the reader and its count
    whole = all(_whole(s) for s in shards)
    return ranges.interleave(
        read_whole if whole else read,
        cycle_length=min(len(shards), SHUFFLE_CYCLE),
        block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=seed is not None,
    )


# --------------------------------------------------------------------------- parsing


def selected_features(schema: Schema, columns: Sequence[str] | None, label_key: str | None, dataset: str) -> list[str]:
    """The features to parse, in schema order: ``columns`` (default: all) and the label."""
    known = list(schema.all_features)
    wanted = list(known) if columns is None else list(columns)
    if isinstance(columns, str):
        raise UsageError(f"columns is a list of feature names, got the string {columns!r}")
    if label_key is not None:
        wanted.append(label_key)
    for name in wanted:
        if name not in schema.all_features:
            raise FeatureNotFoundError(f"dataset {dataset!r} has no feature {name!r} (features: {', '.join(known)})")
    return [name for name in known if name in wanted]


def parse_spec(tf: Any, schema: Schema, names: list[str]) -> dict[str, Any]:
    """``tf.io.parse_example``'s spec for ``names`` (and the stored shapes they need)."""
    full = schema.feature_spec()
    spec: dict[str, dict[str, Any]] = {}
    for name in names:
        feat = schema.features[name]
        entry = dict(full[name])
        entry.pop("decode_raw", None)
        if feat.tensor and feat.has_default:  # a record without it takes the default's bytes, as decode_batch does
            entry["default_value"] = np.asarray(feat.default, dtype=feat.np_dtype).tobytes()
        spec[name] = entry
        if feat.stores_shape:
            spec[name + SHAPE_SUFFIX] = full[name + SHAPE_SUFFIX]
    return to_tf_feature_spec(spec, tf)


def parser(
    tf: Any,
    schema: Schema,
    names: list[str],
    label_key: str | None,
    sizes: BatchSizes | None = None,
    images: ImageDecoding | None = None,
    where: str = "",
) -> Any:
    """The batch parse: one ``parse_example`` over the batch, then each feature shaped. With
    ``sizes``, it takes (batch index, records) and checks the batch's size first; with
    ``images``, the records come with their image features decoded ({"record", "images"}:
    tfimages.record_decoder), which are not parsed again, but for the optional ones, decoded
    here (``where``: the read, for errors)."""
    decoded = {f.name for f in per_record(images)} if images is not None else set()
    optional = [f for f in images.features if f.optional] if images is not None else []
    parsed_names = [name for name in names if name in schema.features and name not in decoded]
    spec = parse_spec(tf, schema, parsed_names)
    features = [schema.features[name] for name in parsed_names]
    steps = [name for name in names if name in schema.sequence]
    for feat in features:
        if feat.tensor:
            _raw_dtypes(tf, feat)  # fails now, naming the feature, not inside the traced map
    every_step = schema.sequence_feature_spec()
    seq_spec = to_tf_feature_spec({n: every_step[n] for n in steps}, tf)

    def parse(*batch: Any) -> Any:
        serialized, pixels = (batch[-1]["record"], batch[-1]["images"]) if decoded else (batch[-1], {})
        if sizes is not None:
            serialized = sizes.check(tf, batch[0], serialized)
        n = tf.shape(serialized, out_type=tf.int64)[0]
        if schema.sequence and (spec or seq_spec):
            parsed, out = sequence_batch(tf, serialized, spec, seq_spec)
        else:  # (nothing to parse when every feature asked for is a decoded image)
            parsed, out = (tf.io.parse_example(serialized, spec) if spec else {}), {}
        out = {f.name: column(tf, f, parsed, n) for f in features} | out | pixels
        if images is not None:
            out |= {f.name: optional_column(tf, f, images, out[f.name], where) for f in optional}
        out = {name: out[name] for name in names}  # in schema order
        if label_key is None:
            return out
        label = out.pop(label_key)
        return out, label

    return tf.autograph.experimental.do_not_convert(parse)  # plain Python over the schema: nothing to convert


def sequence_batch(tf: Any, serialized: Any, spec: dict[str, Any], seq_spec: dict[str, Any]) -> tuple[Any, Any]:
    """A batch of SequenceExamples: (context as parse_example gives it, each sequence feature
    as a RaggedTensor ``[n, (steps), *step]``: a fixed step's padded rows cut to each
    record's own number of steps)."""
    context, sequences, lengths = tf.io.parse_sequence_example(serialized, spec, seq_spec)
    out = {}
    for name, value in sequences.items():
        if isinstance(value, tf.RaggedTensor):
            out[name] = value
        else:
            out[name] = tf.RaggedTensor.from_tensor(value, lengths=lengths[name])
    return context, out


def column(tf: Any, feat: Feature, parsed: dict[str, Any], n: Any) -> Any:
    """One feature of a parsed batch of ``n`` records, shaped per the schema."""
    value = parsed[feat.name]
    if feat.tensor:
        return _tensor_column(tf, feat, parsed, n)
    if feat.optional and not feat.is_varlen and feat.shape:  # [n, (0 or 1), *shape]
        # A shape of no values (inference's [0] of an empty list): present and absent records
        # parse alike (no values), so each reads as absent, [n, (0), *shape], as TF's parse gives.
        present = tf.RaggedTensor.from_sparse(value).row_lengths() // max(1, feat.size or 0)
        return nest(tf, value.values, n, [present], list(feat.shape))
    if feat.is_varlen or feat.optional:  # a scalar that may be absent: [n, (0 or 1)]
        return tf.RaggedTensor.from_sparse(value)
    return value


def _raw_dtypes(tf: Any, feat: Feature) -> tuple[Any, Any]:
    """(what decode_raw reads, what the values are) for a tensor feature's dtype."""
    try:
        target = tf.as_dtype(feat.np_dtype.newbyteorder("="))
    except TypeError as e:
        raise CodecError(f"feature {feat.name!r}: TensorFlow has no dtype {feat.dtype}") from e
    raw = feat.dtype if feat.dtype in _RAW_DTYPES else _RAW_OF_WIDTH[feat.np_dtype.itemsize]
    return getattr(tf, raw), target


def _tensor_column(tf: Any, feat: Feature, parsed: dict[str, Any], n: Any) -> Any:
    raw, target = _raw_dtypes(tf, feat)
    value = parsed[feat.name]

    def decode(data: Any) -> Any:
        values = tf.io.decode_raw(data, raw, little_endian=True)
        return values if raw == target else tf.bitcast(values, target)

    if not feat.optional and not feat.stores_shape:  # the common case: one reshape of the whole batch
        if feat.size:  # a constant shape: no op more than by hand
            return tf.reshape(decode(value), [-1, *feat.shape])
        return tf.reshape(decode(value), tf.concat([[n], tf.constant(feat.shape, tf.int64)], 0))  # -1 is ambiguous
    lead: list[Any] = []
    if feat.optional:
        lead.append(tf.RaggedTensor.from_sparse(value).row_lengths())
        value = value.values
    # tensors of unequal sizes: decode_raw wants one length, so the batch's bytes are joined first
    flat = decode(tf.strings.reduce_join(value))
    dims: list[Any] = list(feat.shape)
    if feat.stores_shape:
        shapes = parsed[feat.name + SHAPE_SUFFIX]
        if feat.optional:  # absent records: all dimensions 0
            shapes = tf.sparse.to_dense(tf.sparse.reset_shape(shapes, tf.stack([n, len(feat.shape)])))
        dims = [shapes[:, j] if d is None else d for j, d in enumerate(feat.shape)]
        last = max(j for j, d in enumerate(feat.shape) if d is None)
        lead, dims = lead + dims[: last + 1], dims[last + 1 :]
    return nest(tf, flat, n, lead, dims)


def nest(tf: Any, flat: Any, n: Any, lead: list[Any], inner: list[Any]) -> Any:
    """A RaggedTensor ``[n, *lead, *inner]`` of flat values in record order. ``lead``: per level,
    each record's length there (an int64 vector of ``n``) or one known length (an int); ``inner``:
    the known dimensions after them."""
    rows = tf.ones(tf.reshape(n, [1]), tf.int64)  # each record's rows at the current level
    levels = []
    for d in lead:
        if isinstance(d, int):
            levels.append((d, tf.reduce_sum(rows)))
            rows = rows * d
        else:
            levels.append((tf.repeat(d, rows), None))
            rows = rows * d
    # -1 cannot be told from no values when an inner dimension is 0 (TensorFlow takes 1 row):
    # the levels above say how many rows there are
    values = tf.reshape(flat, [tf.reduce_sum(rows) if 0 in inner else -1, *inner])
    for lengths, nrows in reversed(levels):
        if nrows is not None:
            values = tf.RaggedTensor.from_uniform_row_length(values, lengths, nrows=nrows)
        else:
            values = tf.RaggedTensor.from_row_lengths(values, lengths)
    return values
