"""The readers without PyTorch: the epoch order and its partition, random access
(``ds.source``), ``ds.batches``/``read``/``records``, shards checked against the manifest,
compressed shards, and handles that pickle."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from readers_data import (
    APPENDS,
    SCHEMA,
    N,
    add_gzip_shard,
    canon,
    epoch_order,
    interleave,
    make_dataset,
    make_dataset_at,
    rank_share,
    row,
)

from catalog import Catalog
from catalog.api import Dataset
from catalog.errors import CatalogError, CorruptShardError, ValidationError, VersionNotFoundError
from catalog.readers.order import EpochOrder, Permutation
from catalog.readers.source import DataSource
from catalog.storage import content
from catalog.tfrecord import RecordWriter, read_records
from catalog.tfrecord.framing import frame_header, masked_crc32c


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Dataset:
    return make_dataset(tmp_path_factory.mktemp("readers") / "c")


def ids(batches: Any) -> list[int]:
    return [int(i) for b in batches for i in b["id"]]


# --------------------------------------------------------------------------- the order


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 13, 15, 16, 17, 31, 63, 64, 65, 101, 255, 256, 257, 4095, 4097])
def test_the_permutation_is_a_bijection(n: int) -> None:
    for seed, epoch in [(0, 0), (1, 0), (0, 1), (2**63 + 5, 7), (-3, 2)]:
        p = Permutation(n, seed, epoch)(np.arange(n))
        assert sorted(p.tolist()) == list(range(n)), (n, seed, epoch)
        halves = np.concatenate(
            [Permutation(n, seed, epoch)(np.arange(n // 2)), Permutation(n, seed, epoch)(np.arange(n // 2, n))]
        )
        assert (halves == p).all()  # computed position by position: any piece, anywhere, the same


def test_the_order_is_a_function_of_seed_and_epoch() -> None:
    n = 1000
    base = epoch_order(n, True, 5, 3)
    assert epoch_order(n, True, 5, 3) == base
    assert epoch_order(n, True, 5, 4) != base and epoch_order(n, True, 6, 3) != base
    assert base != list(range(n))


def test_shuffle_quality_on_a_million_records() -> None:
    n = 1_000_000
    p = Permutation(n, 0, 0)(np.arange(n))
    neighbours = float(np.mean(np.abs(np.diff(p)) == 1))  # consecutive outputs adjacent on disk
    rho = float(np.corrcoef(np.arange(n), p)[0, 1])  # ranks are the values: Pearson is Spearman here
    assert neighbours <= 0.01 and abs(rho) <= 0.01, (neighbours, rho)
    # and one epoch is not the next one's shifted: their correlation is as small
    assert abs(float(np.corrcoef(p, Permutation(n, 0, 1)(np.arange(n)))[0, 1])) <= 0.01


# --------------------------------------------------------------------------- batches: partition and order


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("drop_last", [False, True])
def test_batches_partition_as_distributed_sampler(ds: Dataset, shuffle: bool, drop_last: bool) -> None:
    order = epoch_order(N, shuffle, 7, 2)
    for world in (1, 2, 3, 4, 7):
        shares = []
        for rank in range(world):
            got = list(
                ds.batches(8, shuffle=shuffle, seed=7, epoch=2, rank=rank, world_size=world, drop_last=drop_last)
            )
            assert all(len(b["id"]) == 8 for b in got[:-1])
            shares.append(ids(got))
            assert shares[-1] == rank_share(order, world, rank, drop_last), (world, rank)
        assert len({len(s) for s in shares}) == 1  # every rank the same count
        if not drop_last:
            assert set(interleave(shares)) == set(range(N)) and interleave(shares)[:N] == order


@pytest.mark.parametrize("drop_last", [False, True])
def test_more_ranks_than_records_pad_cyclically_or_get_nothing(drop_last: bool) -> None:
    for n, world in [(5, 12), (3, 3), (1, 4), (0, 2), (7, 16)]:
        order = epoch_order(n, True, 2, 0)
        for rank in range(world):
            got = EpochOrder(n, True, 2, 0, 0, rank, world, drop_last)
            assert got.positions(np.arange(got.per_rank)).tolist() == rank_share(order, world, rank, drop_last)


def test_elastic_determinism_across_world_sizes(ds: Dataset) -> None:
    sequences = []
    for world in (1, 2, 4):
        shares = [ids(ds.batches(5, shuffle=True, seed=3, epoch=1, rank=r, world_size=world)) for r in range(world)]
        sequences.append(interleave(shares)[:N])
    assert sequences[0] == sequences[1] == sequences[2] == epoch_order(N, True, 3, 1)


def test_resume_at_random_k_on_another_world_size(ds: Dataset) -> None:
    rng = random.Random(13)
    for _ in range(6):
        k = rng.randrange(0, N + 1)
        world = rng.choice([1, 2, 3, 4])
        order = epoch_order(N, True, 11, 4)
        shares = [
            ids(ds.batches(4, shuffle=True, seed=11, epoch=4, rank=r, world_size=world, samples=k))
            for r in range(world)
        ]
        assert shares == [rank_share(order, world, r, start=k) for r in range(world)], (k, world)
        assert interleave(shares)[: N - k] == order[k:]  # exactly the rest: none twice, none skipped


def test_batches_in_dataset_order_keep_their_behaviour(ds: Dataset) -> None:
    got = list(ds.batches(12))
    assert [len(b["id"]) for b in got] == [12] * 8 + [5]
    assert ids(got) == list(range(N))
    assert got[0]["img"].shape == (12, 2, 3) and got[0]["vec"].shape == (12, 2)
    with pytest.raises(CatalogError, match="batch_size"):
        ds.batches(0)
    with pytest.raises(CatalogError, match="rank"):
        ds.batches(4, rank=2, world_size=2)


# --------------------------------------------------------------------------- random access


def check_source(ds: Dataset, version: int | None = None) -> None:
    """src[i] is the sequential read's row i, for every i; batches are decode_batch's."""
    rows = list(ds.read(version=version))
    raw = list(ds.records(version=version))
    src = ds.source(version=version)
    assert len(src) == len(rows)
    for i in range(len(rows)):
        assert canon(src[i]) == canon(rows[i]), i
        assert src.records(i) == raw[i]
    assert canon(src[-1]) == canon(rows[-1])
    picks = [len(rows) - 1, 0, 5, 5, 40]
    assert src.records(picks) == [raw[i] for i in picks]
    assert canon(src[picks]) == canon(ds.schema_at(version).decode_batch([raw[i] for i in picks]))
    assert canon(src[np.array(picks)]) == canon(src[picks])
    assert canon(src[3:50:7]) == canon(ds.schema_at(version).decode_batch(raw[3:50:7]))
    assert canon(src.__getitems__(picks)) == canon([rows[i] for i in picks])


def test_src_i_equals_sequential_reading(ds: Dataset) -> None:
    check_source(ds)
    src = ds.source()
    with pytest.raises(IndexError):
        src[N]
    with pytest.raises(IndexError):
        src[[0, -N - 1]]
    with pytest.raises(TypeError):
        src[1.5]
    assert ids([src[[]]]) == []
    again = pickle.loads(pickle.dumps(src))
    assert canon(again[17]) == canon(src[17]) and "engine" not in repr(src.__getstate__())


def test_a_source_read_from_threads(ds: Dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    """Threads (grain's prefetch, say) share one source: its files open and close under them."""
    from concurrent.futures import ThreadPoolExecutor

    from catalog.readers import positions

    monkeypatch.setattr(positions, "OPEN_FILES", 2)  # evictions all the time
    src = ds.source(columns=["id"])
    picks = [random.Random(k).sample(range(N), 20) for k in range(200)]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda p: src[p]["id"].tolist(), picks))
    assert got == picks


def test_src_i_after_a_migration_and_after_compaction(tmp_path: Path) -> None:
    ds = make_dataset(tmp_path / "c")
    before = ds.version
    mdir = tmp_path / "migrations"
    (mdir / "d").mkdir(parents=True)
    (mdir / "d" / "0001_add.py").write_text(
        'from catalog.migrate import AddField\n\noperations = [AddField("extra", {"dtype": "int64"}, default=5)]\n'
    )
    ds.migrate(mdir, workers=1)
    migrated = ds.catalog.dataset("d")
    check_source(migrated)
    assert migrated.source()[3]["extra"] == 5
    check_source(migrated, before)  # the pinned old version reads as it was, with its schema
    assert "extra" not in migrated.source(version=before)[3]
    report = migrated.compact()
    assert report.commit is not None
    compacted = ds.catalog.dataset("d")
    assert len(compacted.shards()) < 10
    check_source(compacted)
    assert [r["id"] for r in compacted.read()] == list(range(N))


def test_columns_select_features(ds: Dataset) -> None:
    src = ds.source(columns=["id", "name"])
    assert src[4] == {"id": 4, "name": "r4"}
    assert sorted(src[[1, 2]]) == ["id", "name"]
    assert [list(r) for r in ds.read(columns="vec")][:2] == [["vec"], ["vec"]]
    assert sorted(next(iter(ds.batches(3, columns=("img", "id"))))) == ["id", "img"]
    with pytest.raises(CatalogError, match="no feature 'nope'"):
        ds.source(columns=["id", "nope"])


def test_split_slices_read_exactly_their_records(ds: Dataset) -> None:
    # Every shard is "train" here; slices are exact by record count (TFDS rounding for %).
    assert [r["id"] for r in ds.read(split="train[10:20]")] == list(range(10, 20))
    assert [r["id"] for r in ds.read(split="train[-7:]")] == list(range(N - 7, N))
    cut = round(N * 0.9)
    assert [int(i) for i in ds.source(split="train[:90%]")[:]["id"]] == list(range(cut))
    assert ids(ds.batches(10, split="train[90%:]", shuffle=True)) != list(range(cut, N))
    assert sorted(ids(ds.batches(10, split="train[90%:]", shuffle=True))) == list(range(cut, N))
    src = ds.source(split="train[5:12]+train[50:53]")
    assert [src[i]["id"] for i in range(len(src))] == [*range(5, 12), 50, 51, 52]
    with pytest.raises(CatalogError, match="test"):
        ds.source(split="test")


def test_an_older_version_reads_as_it_was(ds: Dataset) -> None:
    first = ds.history()[1].version  # the first append
    src = ds.source(version=first)
    assert len(src) == APPENDS[0][0] and src[-1]["id"] == APPENDS[0][0] - 1
    with pytest.raises(VersionNotFoundError):
        ds.source(version=999)


# --------------------------------------------------------------------------- shards checked against the manifest


def linked_dataset(tmp_path: Path) -> tuple[Dataset, Path]:
    """A dataset whose one shard is a hard link to a file outside it (append --link)."""
    outside = tmp_path / "outside.tfrecord"
    schema = Catalog.init(tmp_path / "c").register("d", SCHEMA).schema
    with RecordWriter(outside) as w:
        for i in range(40):
            w.write(schema.encode(row(i)))
    cat = Catalog.open(tmp_path / "c")
    cat.dataset("d").append_files([outside], link=True)
    ds = cat.dataset("d")
    shard = Path(ds.files()[0])
    assert os.path.samefile(shard, outside)
    return ds, outside


def readers_of(ds: Dataset) -> dict[str, Any]:
    return {
        "source": lambda: [ds.source()[i] for i in range(40)],
        "source batch": lambda: ds.source()[list(range(39, -1, -1))],
        "shuffled": lambda: list(ds.batches(7, shuffle=True)),
        "ranks": lambda: list(ds.batches(7, rank=1, world_size=2)),
        "read": lambda: list(ds.read()),
        "records": lambda: list(ds.records()),
    }


@pytest.mark.parametrize("change", ["grown", "cut", "edited"])
def test_a_shard_changed_through_a_link_is_a_corrupt_shard_error(tmp_path: Path, change: str) -> None:
    ds, outside = linked_dataset(tmp_path)
    data = outside.read_bytes()
    shard = ds.files()[0]
    with open(outside, "r+b") as f:
        if change == "grown":
            f.seek(0, os.SEEK_END)
            f.write(frame_header(3) + b"abc" + masked_crc32c(b"abc").to_bytes(4, "little"))
        elif change == "cut":
            f.truncate(len(data) - 100)
        else:  # one byte of a record's data, in place: same size
            f.seek(len(data) // 2)
            f.write(bytes([data[len(data) // 2] ^ 0xFF]))
    for name, read in readers_of(ds).items():
        with pytest.raises(CorruptShardError) as info:
            read()
        assert str(info.value).startswith(f"{shard}: ") and "\n" not in str(info.value), name
        if change != "edited":
            assert (info.value.registered, info.value.found) == (
                f"{len(data)} bytes",
                f"{outside.stat().st_size} bytes",
            )
        err = pickle.loads(pickle.dumps(info.value))  # crosses process boundaries whole
        assert (type(err), str(err)) == (CorruptShardError, str(info.value))


def test_a_shard_with_other_records_in_the_same_bytes_is_caught_by_its_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(content, "needs_check", lambda *a: False)  # the count's check, not the content check's
    ds, outside = linked_dataset(tmp_path)
    records = list(read_records(outside))
    joined = records[0] + records[1] + bytes(16)  # two records' bytes as one record: same size
    with open(outside, "r+b") as f:
        f.write(frame_header(len(joined)) + joined + masked_crc32c(joined).to_bytes(4, "little"))
    assert outside.stat().st_size == ds.shards()[0].bytes
    with pytest.raises(CorruptShardError, match="records: registered 40, found 39"):
        list(ds.records())


def test_a_decode_error_names_the_shard_and_the_record_within_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(content, "needs_check", lambda *a: False)  # the decoder's error, not the content check's
    ds, outside = linked_dataset(tmp_path)
    records = list(read_records(outside))
    target = 29
    offset = sum(len(r) + 16 for r in records[:target])
    bad = b"\xff" * len(records[target])  # framed with valid CRCs: not an Example
    with open(outside, "r+b") as f:
        f.seek(offset)
        f.write(frame_header(len(bad)) + bad + masked_crc32c(bad).to_bytes(4, "little"))
    shard = ds.files()[0]
    for read in (lambda: ds.source()[target], lambda: ds.source()[[3, target]], lambda: list(ds.read()),
                 lambda: list(ds.batches(8, shuffle=True))):  # fmt: skip
        with pytest.raises(ValidationError) as info:
            read()
        assert str(info.value).startswith(f"{shard}: record {target}: "), str(info.value)
        assert info.value.record == target


def test_a_missing_shard_is_one_line(tmp_path: Path) -> None:
    ds = make_dataset(tmp_path / "c")
    gone = ds.files()[3]
    os.unlink(gone)
    for read in (lambda: ds.source()[45], lambda: list(ds.batches(7, shuffle=True)), lambda: list(ds.read())):
        with pytest.raises(VersionNotFoundError, match="shard file is missing"):
            read()


def test_readers_on_an_object_store(s3_url: str, tmp_path: Path) -> None:
    """Ranged GETs, sent together for a batch; the same records as a sequential read."""
    ds = make_dataset_at(tmp_path / "c", None, storage=s3_url)
    assert ds.files()[0].startswith("s3://")
    check_source(ds)
    order = epoch_order(N, True, 3, 0)
    assert [ids(ds.batches(9, shuffle=True, seed=3, rank=r, world_size=2)) for r in range(2)] == [
        rank_share(order, 2, r) for r in range(2)
    ]
    import fsspec

    fs = fsspec.filesystem("s3")
    shard = ds.files()[2]
    fs.pipe_file(shard, fs.cat_file(shard)[:-10])  # the object replaced by a shorter one
    with pytest.raises(CorruptShardError, match="registered"):
        ds.source()[30]
    with pytest.raises(CorruptShardError, match="registered"):
        list(ds.read())


# --------------------------------------------------------------------------- compressed shards


def test_gzip_shards_read_sequentially_and_exactly_but_not_at_random(tmp_path: Path) -> None:
    ds = make_dataset(tmp_path / "c")
    add_gzip_shard(ds, [row(i) for i in range(N, N + 30)])
    ds = ds.catalog.dataset("d")
    n = N + 30
    gz = ds.files()[-1]
    with pytest.raises(CatalogError) as info:
        ds.source()
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"{gz}: a gzip-compressed shard") and "ds.torch()" in message
    assert [r["id"] for r in ds.read()] == list(range(n))
    assert ids(ds.batches(16)) == list(range(n))
    order = epoch_order(n, True, 1, 0)
    shares = [ids(ds.batches(6, shuffle=True, seed=1, rank=r, world_size=3)) for r in range(3)]
    assert shares == [rank_share(order, 3, r) for r in range(3)]
    assert ids(ds.batches(6, split="train[100:120]")) == list(range(100, 120))


# --------------------------------------------------------------------------- pickled handles


def _read_in_child(handle: Any, out: Any) -> None:
    if isinstance(handle, DataSource):  # a source made in the parent, read here
        out.put([handle[i]["id"] for i in (-3, -2, -1)] + [len(handle)])
        return
    if isinstance(handle, Catalog):
        handle = handle.dataset("d")
    out.put([*[r["id"] for r in handle.read()][-3:], len(handle.source())])


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_handles_and_sources_pickle_into_spawned_processes(ds: Dataset, method: str) -> None:
    context = multiprocessing.get_context(method)
    for handle in (ds, ds.catalog, ds.source()):
        out = context.Queue()
        child = context.Process(target=_read_in_child, args=(handle, out))
        child.start()
        got = out.get(timeout=120)
        child.join(60)
        assert child.exitcode == 0 and got == [N - 3, N - 2, N - 1, N]
    copy = pickle.loads(pickle.dumps(ds))
    assert copy.catalog._engine is None and [r["id"] for r in copy.read()][:2] == [0, 1]
    assert copy.schema == ds.schema and copy.version == ds.version


def test_a_pickled_handle_carries_no_password(pg_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlalchemy as sa
    from servers import SECRET_PASSWORD, SECRET_USER

    admin = sa.create_engine(pg_server.url(), isolation_level="AUTOCOMMIT")
    name = f"readers_{os.getpid()}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name} OWNER {SECRET_USER}")
    try:
        bare = f"postgresql+psycopg://{SECRET_USER}@127.0.0.1:{pg_server.port}/{name}"
        with_password = bare.replace("@", f":{SECRET_PASSWORD}@")
        monkeypatch.delenv("CATALOG_DB_URL", raising=False)
        ds = make_dataset_at(tmp_path / "c", with_password)
        blob = pickle.dumps(ds)
        assert SECRET_PASSWORD.encode() not in blob
        copy = pickle.loads(blob)
        with pytest.raises(CatalogError, match="cannot connect"):  # no password anywhere
            list(copy.read())
        monkeypatch.setenv("CATALOG_DB_URL", with_password)  # where Catalog.open finds it
        copy = pickle.loads(blob)
        assert [r["id"] for r in copy.read()][-1] == N - 1
        copy.catalog.close()
        ds.catalog.close()
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()
