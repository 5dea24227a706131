"""The local cache of remote shards (catalog/storage/cache.py, issue 33 §4): readers given
``cache_dir=`` fetch each shard on an object store once into it, checked against the manifest;
a second epoch makes no GET. The S3 tests count the requests moto's server receives (from
this process and from DataLoader workers alike); the cache's own rules (LRU eviction, one
download across processes, damaged copies) are also tested on a local "remote" store whose
fetches are counted."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, ClassVar

import pytest

from catalog import Catalog
from catalog.errors import CatalogError, CorruptShardError, StorageError, UsageError
from catalog.storage import cache
from catalog.storage.cache import CachedFileIO, CacheMismatchError, ShardCache
from catalog.storage.fileio import LocalFileIO
from catalog.storage.files import file_checksum

SCHEMA = {"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string"}}}


def rows(ids: range) -> list[dict[str, Any]]:
    return [{"id": i, "text": f"t{i:03d}"} for i in ids]


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    cache.forget()
    yield
    cache.forget()


# --------------------------------------------------------------------------- a counted "remote"


class Remote(LocalFileIO):
    """Local files posing as an object store: each open (a download) is appended to ``log``,
    a line per open, so that other processes' fetches are counted too; ``delay`` slows it."""

    remote: ClassVar[bool] = True

    def __init__(self, log: Path, delay: float = 0.0) -> None:
        self.log, self.delay = log, delay

    def open(self, location: str) -> IO[bytes]:
        with open(self.log, "a") as f:
            f.write(location + "\n")
        time.sleep(self.delay)
        return super().open(location)

    def fetches(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


def shard(tmp_path: Path, name: str, size: int = 100, fill: bytes = b"x") -> tuple[str, str]:
    """A file of ``size`` bytes: its path and checksum."""
    path = tmp_path / "remote" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes((fill * size)[:size])
    return str(path), file_checksum(path)[1]


def read(c: ShardCache, remote: Remote, location: str, checksum: str, size: int = 100) -> bytes:
    with c.open(remote, location, checksum, size) as f:
        return f.read()


def entries(c: ShardCache) -> set[str]:
    return {p.name for p in Path(c.directory).iterdir() if p.name.endswith(".tfrecord")}


def test_a_shard_is_fetched_once_and_checked(tmp_path: Path) -> None:
    remote = Remote(tmp_path / "log")
    c = ShardCache.at(tmp_path / "cache")
    a, crc = shard(tmp_path, "a")
    assert read(c, remote, a, crc) == b"x" * 100
    assert read(c, remote, a, crc) == b"x" * 100
    cache.forget()  # a new process: the copy's checksum is checked again, not fetched again
    assert read(c, remote, a, crc) == b"x" * 100
    assert remote.fetches() == [a]
    assert entries(c) == {c.entry(a, crc).name}
    assert not [p for p in Path(c.directory).iterdir() if p.name.endswith(".part")]


def test_cached_file_io_reads_its_shard_from_the_copy(tmp_path: Path) -> None:
    remote = Remote(tmp_path / "log")
    a, crc = shard(tmp_path, "a", fill=b"0123456789")
    io = CachedFileIO(remote, ShardCache.at(tmp_path / "cache"), a, crc, 100)
    assert not io.remote and io.verified
    assert io.read_ranges([a, a], [0, 95], [3, 100]) == [b"012", b"56789"]
    with io.open(a) as f:
        assert io.stat(a, f).st_size == 100  # type: ignore[union-attr]
    assert remote.fetches() == [a]


def test_beyond_the_limit_the_least_recently_used_go_first(tmp_path: Path) -> None:
    remote = Remote(tmp_path / "log")
    c = ShardCache.at(tmp_path / "cache", limit=250)
    (a, ca), (b, cb), (d, cd) = (shard(tmp_path, n) for n in "abd")
    read(c, remote, a, ca)
    read(c, remote, b, cb)
    read(c, remote, a, ca)  # a used after b: b is now the least recently used
    read(c, remote, d, cd)
    assert entries(c) == {c.entry(a, ca).name, c.entry(d, cd).name}
    read(c, remote, b, cb)  # fetched again; a is now the oldest
    assert entries(c) == {c.entry(d, cd).name, c.entry(b, cb).name}
    assert remote.fetches() == [a, b, d, b]


def test_an_entry_open_for_reading_is_never_evicted(tmp_path: Path) -> None:
    remote = Remote(tmp_path / "log")
    c = ShardCache.at(tmp_path / "cache", limit=150)
    (a, ca), (b, cb), (d, cd) = (shard(tmp_path, n) for n in "abd")
    with c.open(remote, a, ca, 100) as held:
        read(c, remote, b, cb)  # over the limit, but a is in use and b was just fetched
        assert entries(c) == {c.entry(a, ca).name, c.entry(b, cb).name}
        assert held.read() == b"x" * 100
    read(c, remote, d, cd)  # now a (the oldest, no longer open) and b go
    assert entries(c) == {c.entry(d, cd).name}


def test_a_damaged_copy_is_refused_and_fetched_again(tmp_path: Path) -> None:
    remote = Remote(tmp_path / "log")
    c = ShardCache.at(tmp_path / "cache")
    a, crc = shard(tmp_path, "a")
    read(c, remote, a, crc)
    entry = c.entry(a, crc)
    entry.write_bytes(b"y" * 100)  # same size, other bytes (a disk error, a stray write)
    cache.forget()
    assert read(c, remote, a, crc) == b"x" * 100
    entry.write_bytes(b"x" * 40)  # cut: its size tells, no checksum needed
    assert read(c, remote, a, crc) == b"x" * 100
    assert remote.fetches() == [a, a, a]
    assert entry.read_bytes() == b"x" * 100


def test_a_changed_manifest_checksum_is_another_entry_fetched_and_verified(tmp_path: Path) -> None:
    remote = Remote(tmp_path / "log")
    c = ShardCache.at(tmp_path / "cache")
    a, old = shard(tmp_path, "a")
    read(c, remote, a, old)
    _, new = shard(tmp_path, "a", fill=b"z")  # the object rewritten, the manifest updated
    assert c.entry(a, new) != c.entry(a, old)
    assert read(c, remote, a, new) == b"z" * 100
    assert remote.fetches() == [a, a]
    # ... and a reader still holding the old checksum is refused the new bytes, nothing kept
    cache.forget()
    c.entry(a, old).unlink()
    with pytest.raises(CacheMismatchError) as e:
        read(c, remote, a, old)
    assert isinstance(e.value, StorageError) and isinstance(e.value, CorruptShardError)
    found = f"registered {old}, found {new} (changed after its commit?)"
    assert str(e.value) == f"{a}: checksum fetched into the cache: {found}"
    assert "\n" not in str(e.value)
    assert entries(c) == {c.entry(a, new).name}
    assert not [p for p in Path(c.directory).iterdir() if p.name.endswith(".part")]


def test_a_fetch_of_the_wrong_size_is_refused(tmp_path: Path) -> None:
    remote = Remote(tmp_path / "log")
    c = ShardCache.at(tmp_path / "cache")
    a, crc = shard(tmp_path, "a")
    grown = r": size fetched into the cache: registered 90 bytes, found more than 90 bytes "
    with pytest.raises(CacheMismatchError, match=grown):
        read(c, remote, a, crc, size=90)
    cut = r": size fetched into the cache: registered 120 bytes, found 100 bytes "
    with pytest.raises(CacheMismatchError, match=cut):
        read(c, remote, a, crc, size=120)
    assert entries(c) == set()


def _open_after(barrier: Any, c: ShardCache, remote: Remote, location: str, checksum: str, out: Any) -> None:
    barrier.wait()
    out.put(read(c, remote, location, checksum))


def test_processes_wanting_one_shard_download_it_once(tmp_path: Path) -> None:
    remote = Remote(tmp_path / "log", delay=0.5)  # slow: the others arrive while it downloads
    c = ShardCache.at(tmp_path / "cache")
    a, crc = shard(tmp_path, "a")
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_open_after, args=(barrier, c, remote, a, crc, out)) for _ in range(3)]
    for p in procs:
        p.start()
    got = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert got == [b"x" * 100] * 3
    assert remote.fetches() == [a]


def test_threads_wanting_one_shard_download_it_once(tmp_path: Path) -> None:
    """flock locks belong to open files, not processes: threads of one process wait too."""
    remote = Remote(tmp_path / "log", delay=0.3)
    c = ShardCache.at(tmp_path / "cache")
    a, crc = shard(tmp_path, "a")
    got: list[bytes] = []
    threads = [threading.Thread(target=lambda: got.append(read(c, remote, a, crc))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert got == [b"x" * 100] * 3
    assert remote.fetches() == [a]


def test_a_bad_cache_dir_or_limit_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(StorageError) as e:
        ShardCache.at(tmp_path / "f")
    assert str(e.value) == f"{tmp_path / 'f'}: cannot use as the shard cache: not a directory"
    with pytest.raises(StorageError) as e:
        ShardCache.at(tmp_path / "f" / "cache")
    assert str(e.value) == f"{tmp_path / 'f' / 'cache'}: cannot use as the shard cache: Not a directory"
    for bad in (-1, 1.5, True, "10"):
        with pytest.raises(UsageError, match=r"^cache_limit must be a number of bytes \(an int >= 0\), not "):
            ShardCache.at(tmp_path / "c", bad)  # type: ignore[arg-type]


def test_an_unwritable_cache_dir_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ro").mkdir(mode=0o500)
    if os.access(tmp_path / "ro", os.W_OK):  # root writes anywhere: the check is what is tested
        monkeypatch.setattr(cache.os, "access", lambda *_args: False)
    with pytest.raises(StorageError) as e:
        ShardCache.at(tmp_path / "ro")
    assert str(e.value) == f"{tmp_path / 'ro'}: cannot use as the shard cache: not writable"


def test_an_abandoned_temporary_file_is_swept(tmp_path: Path) -> None:
    remote = Remote(tmp_path / "log")
    c = ShardCache.at(tmp_path / "cache", limit=1000)
    a, crc = shard(tmp_path, "a")
    stray = c.entry(a, crc).with_name(c.entry(a, crc).name + ".123.abcd.part")  # a killed fetch's
    stray.write_bytes(b"x" * 50)
    b, cb = shard(tmp_path, "b")
    read(c, remote, b, cb)  # a fetch runs an eviction pass
    assert not stray.exists()


# --------------------------------------------------------------------------- readers over S3


class Requests:
    """Every request moto's server receives: (method, path), and each GET's Range header."""

    def __init__(self, app: Any) -> None:
        self.app, self.lock = app, threading.Lock()
        self.seen: list[tuple[str, str]] = []
        self.ranges: list[tuple[str, str | None]] = []  # (path, Range header) of each GET

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        with self.lock:
            method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
            self.seen.append((method, path))
            if method == "GET":
                self.ranges.append((path, environ.get("HTTP_RANGE")))
        return self.app(environ, start_response)

    def shard_gets(self) -> list[str]:
        with self.lock:
            return [path for method, path in self.seen if method == "GET" and path.endswith(".tfrecord")]

    def shard_ranges(self) -> list[tuple[str, int, int]]:
        """(path, first byte, end) of each ranged GET of a shard; a GET of a whole shard fails
        the test (every read of a shard here names its bytes)."""
        with self.lock:
            got = [(path, header) for path, header in self.ranges if path.endswith(".tfrecord")]
        out = []
        for path, header in got:
            assert header is not None and header.startswith("bytes="), (path, header)
            first, _, last = header.removeprefix("bytes=").partition("-")
            out.append((path, int(first), int(last) + 1))
        return out

    def clear(self) -> None:
        with self.lock:
            self.seen.clear()
            self.ranges.clear()


@pytest.fixture
def requests(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> Requests:
    wsgi = s3_server.server._server  # werkzeug's server calls its ``app`` for each request
    counted = Requests(wsgi.app)
    monkeypatch.setattr(wsgi, "app", counted)
    return counted


@pytest.fixture
def s3_ds(s3_url: str, tmp_path: Path) -> Iterator[Any]:
    with Catalog.init(tmp_path / "c", storage=s3_url) as cat:
        ds = cat.register("ev", SCHEMA)
        ds.append_rows(rows(range(30)), shard_records=10)
        yield ds


def test_a_second_epoch_makes_no_get_for_cached_shards(s3_ds: Any, requests: Requests, tmp_path: Path) -> None:
    where = tmp_path / "cache"
    assert [r["id"] for r in s3_ds.read(cache_dir=where)] == list(range(30))
    first = requests.shard_gets()
    assert len(first) == 3 and len(set(first)) == 3  # each shard once
    assert [r["id"] for r in s3_ds.read(cache_dir=where)] == list(range(30))
    batches = s3_ds.batches(7, shuffle=True, cache_dir=where, cache_limit=1 << 20)
    assert sorted(i for b in batches for i in b["id"].tolist()) == list(range(30))
    src = s3_ds.source(cache_dir=where)
    assert [src[i]["id"] for i in (29, 0, 15)] == [29, 0, 15]
    assert list(s3_ds.records(cache_dir=where)) == list(s3_ds.records())
    assert requests.shard_gets()[: len(first)] == first
    assert len(requests.shard_gets()) == 3 + 3  # only the uncached records() above read again
    assert len(list(where.glob("*.tfrecord"))) == 3


def test_a_shard_changed_on_s3_is_refused_by_the_cache(s3_ds: Any, requests: Requests, tmp_path: Path) -> None:
    import fsspec

    url = s3_ds.files()[1]
    fs = fsspec.filesystem("s3", use_listings_cache=False)
    data = bytearray(fs.cat(url))
    data[-5] ^= 1  # a record's bytes, same size
    fs.pipe(url, bytes(data))
    with pytest.raises(CacheMismatchError, match=f"^{url}: checksum fetched into the cache: registered crc32c:"):
        list(s3_ds.read(cache_dir=tmp_path / "cache"))
    assert len(list((tmp_path / "cache").glob("*.tfrecord"))) == 1  # the first shard's; not the changed one


def test_a_bad_cache_dir_fails_the_reader_at_once(s3_ds: Any, tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(CatalogError, match=r": cannot use as the shard cache: not a directory$"):
        s3_ds.read(cache_dir=tmp_path / "f")
    with pytest.raises(UsageError, match=r"^cache_limit needs a cache_dir$"):
        s3_ds.batches(4, cache_limit=100)


def test_torch_dataloader_workers_share_the_cache(s3_ds: Any, requests: Requests, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install '.[test]')")
    from torch.utils.data import DataLoader

    tds = s3_ds.torch(batch_size=4, shuffle=True, cache_dir=tmp_path / "cache", cache_limit=1 << 20)
    loader = DataLoader(tds, batch_size=None, num_workers=2, multiprocessing_context="fork")
    for epoch in range(2):
        tds.set_epoch(epoch)
        got = sorted(i for batch in loader for i in batch["id"].tolist())
        assert got == list(range(30)), epoch
        assert len(requests.shard_gets()) == 3 and len(set(requests.shard_gets())) == 3, epoch
    assert torch is not None


def test_a_cached_epoch_makes_no_request_at_all(s3_ds: Any, requests: Requests, tmp_path: Path) -> None:
    """Shuffled readers use each shard's record index: it is cached beside the shard, so a
    second epoch's new DataLoader workers ask S3 for nothing (no HEAD, no index GET)."""
    pytest.importorskip("torch", reason="PyTorch is not installed (pip install '.[test]')")
    from torch.utils.data import DataLoader

    tds = s3_ds.torch(batch_size=4, shuffle=True, cache_dir=tmp_path / "cache")
    loader = DataLoader(tds, batch_size=None, num_workers=2, multiprocessing_context="fork")
    assert sorted(i for batch in loader for i in batch["id"].tolist()) == list(range(30))
    requests.clear()
    tds.set_epoch(1)
    assert sorted(i for batch in loader for i in batch["id"].tolist()) == list(range(30))
    src = s3_ds.source(cache_dir=tmp_path / "cache")
    assert [src[i]["id"] for i in (29, 0, 15)] == [29, 0, 15]
    assert requests.seen == []


def test_tf_dataset_reads_the_cached_copies(s3_ds: Any, requests: Requests, tmp_path: Path) -> None:
    pytest.importorskip("tensorflow", reason="TensorFlow is not installed (pip install '.[test]')")
    for _epoch in range(2):
        data = s3_ds.tf_dataset(8, cache_dir=tmp_path / "cache")
        assert sorted(int(i) for b in data for i in b["id"].numpy()) == list(range(30))
    assert len(requests.shard_gets()) == 3


# --------------------------------------------------------------------------- without a cache: ranged reads

RECORDS, PER_SHARD = 1200, 400


@pytest.fixture
def wide_ds(s3_url: str, tmp_path: Path) -> Iterator[Any]:
    """Three shards of 400 records of about 1 KB each on S3."""
    with Catalog.init(tmp_path / "c", storage=s3_url) as cat:
        ds = cat.register("wide", SCHEMA)
        ds.append_rows([{"id": i, "text": f"{i:04d}" + "x" * 996} for i in range(RECORDS)], shard_records=PER_SHARD)
        yield ds


def shard_sizes(ds: Any) -> dict[str, int]:
    """Each shard's size by its path as moto's server sees it (/bucket/key)."""
    import fsspec

    fs = fsspec.filesystem("s3", use_listings_cache=False)
    return {"/" + url.removeprefix("s3://"): int(fs.size(url)) for url in ds.files()}


def test_one_record_by_position_is_fetched_alone(wide_ds: Any, requests: Requests) -> None:
    shards = sorted(shard_sizes(wide_ds))
    requests.clear()
    src = wide_ds.source()
    assert src[777]["id"] == 777
    (path, first, end), *more = requests.shard_ranges()
    assert not more and path == shards[1]
    assert 1000 < end - first < 1100  # the record and its framing, not the shard (about 400 KB)
    index_gets = [path for path, _ in requests.ranges if path.endswith(".idx")]
    assert len(index_gets) == 1 and len(requests.ranges) == 2  # plus the shard's record index
    requests.clear()
    rows = src.__getitems__([3, 390, 1100, 805])  # a DataLoader's batch of scattered records
    assert [r["id"] for r in rows] == [3, 390, 1100, 805]
    got = requests.shard_ranges()
    assert len(got) == 4 and sum(end - first for _, first, end in got) < 4 * 1100


def test_a_shuffled_epoch_fetches_about_the_dataset_once(wide_ds: Any, requests: Requests) -> None:
    total = sum(shard_sizes(wide_ds).values())
    requests.clear()
    got = sorted(i for b in wide_ds.batches(64, shuffle=True, seed=3) for i in b["id"].tolist())
    assert got == list(range(RECORDS))
    fetched = requests.shard_ranges()
    # Each batch of 64 has about 21 records scattered through each shard: reading the span
    # from the first to the last would fetch most of every shard for each batch (about 19x).
    assert sum(end - first for _, first, end in fetched) < 3 * total
    assert len(fetched) <= RECORDS


def test_a_sequential_epoch_reads_ahead_in_blocks(wide_ds: Any, requests: Requests) -> None:
    sizes = shard_sizes(wide_ds)
    requests.clear()
    assert [r["id"] for r in wide_ds.read()] == list(range(RECORDS))
    assert sum(len(b["id"]) for b in wide_ds.batches(100)) == RECORDS
    fetched = requests.shard_ranges()
    assert len(fetched) <= 2 * 2 * len(sizes)  # a few requests per shard and epoch, not one per record
    for path, size in sizes.items():
        assert sum(end - first for p, first, end in fetched if p == path) == 2 * size, path
