"""Where shard bytes live: new immutable files, published atomically.

A shard is written under a temporary name while its record count and whole-file
CRC32C are computed, fsynced, renamed to its final, never-reused name, and its directory
fsynced; only then may a manifest transaction register it. Every file a writer makes
starts with its intent id, so gc can tell the files of a live writer from leftovers.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import os
import re
import secrets
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from crc32c import crc32c

from catalog.errors import CatalogError, ManifestError
from catalog.tfrecord.framing import FOOTER_SIZE, HEADER_SIZE, RecordWriter, read_record_batches
from catalog.tfrecord.sources import is_url, open_location, remote_error, remote_errors

CHECKSUM_ALGO = "crc32c"
SHARD_SUFFIX = ".tfrecord"
TEMP_PREFIX = "."
TEMP_SUFFIX = ".tmp"
SPOOL_PREFIX = "catalog-spool-"  # then the data area's tag, the shard's name, mkstemp's letters
CHECKSUM_CHUNK = 4 << 20
OWNER_FILE = ".catalog-owner"  # at the top of the data area: the id of the catalog that owns it
# A file as the manifest names it: "<dataset>/<file>" (a dataset folder alone for writers), the
# dataset as names are (never starting with "."), the file neither "." nor "..", no other "/":
# always inside the data area.
_DATASET_PART = r"[A-Za-z0-9_-][A-Za-z0-9._-]*"
_DATASET_RE = re.compile(_DATASET_PART)
_REL_RE = re.compile(_DATASET_PART + r"(?:/(?!\.\.?$)[A-Za-z0-9._-]+)?")
# Every file the catalog makes in a dataset folder: a shard "<intent id>(-<5 digits>)+.tfrecord"
# (ShardSink's names; rewrites' and restore's add a unit number), or its temporary ".<shard>.tmp".
# gc deletes nothing else, so no file of anyone else's is ever at risk.
_OWN_FILE_RE = re.compile(r"[0-9a-f]{28}(?:-[0-9]{5})+\.tfrecord|\.[0-9a-f]{28}(?:-[0-9]{5})+\.tfrecord\.tmp")


@dataclass(frozen=True)
class ShardFile:
    """A published shard file, ready to be registered."""

    path: str  # relative to the data area, "/"-separated
    records: int
    bytes: int
    checksum: str  # "crc32c:" + 8 hex digits of the whole file
    compression: str = "none"


def format_checksum(crc: int) -> str:
    return f"{CHECKSUM_ALGO}:{crc:08x}"


def new_intent_id() -> str:
    """Time-ordered and unique: 12 hex digits of milliseconds, then 16 random hex digits."""
    return f"{int(time.time() * 1000):012x}{secrets.token_hex(8)}"


def new_catalog_id() -> str:
    """A catalog's identity, recorded in its manifest and in its data area's marker."""
    return secrets.token_hex(16)


def intent_of(filename: str) -> str | None:
    """The intent id a data file was written under, if its name has one."""
    name = filename[len(TEMP_PREFIX) :] if filename.startswith(TEMP_PREFIX) else filename
    head = name.split("-", 1)[0]
    return head if len(head) == 28 else None


def is_catalog_file(name: str) -> bool:
    """Whether a file name in a dataset folder is one the catalog makes (see _OWN_FILE_RE)."""
    return _OWN_FILE_RE.fullmatch(name) is not None


class _Sized(io.RawIOBase):
    """A shard read no further than its registered size, and found to be exactly that long:
    a file grown or cut since it was registered is one line, never extra or missing records."""

    def __init__(self, f: IO[bytes], path: str, size: int) -> None:
        super().__init__()
        self._f, self.name, self._size, self._pos = f, path, size, 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        want = min(len(view), self._size - self._pos)
        if want <= 0:
            if want == 0 and len(view) and self._f.read(1):
                raise CatalogError(f"{self.name}: more than the {self._size} bytes registered; run `catalog verify`")
            return 0
        n = self._f.readinto(view[:want])  # type: ignore[attr-defined]  # FileIO and RemoteFile have it
        if not n:
            raise CatalogError(f"{self.name}: {self._pos} bytes, {self._size} registered; run `catalog verify`")
        self._pos += n
        return int(n)

    def seekable(self) -> bool:
        return bool(self._f.seekable())

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = (0, self._pos, self._size)[whence]  # the end is the registered end
        self._pos = self._f.seek(base + offset)
        return self._pos

    def close(self) -> None:
        self._f.close()
        super().close()


def open_shard(path: str, size: int | None = None) -> IO[bytes]:
    """Open a shard for reading: a URL, or a regular local file reached without following a
    symbolic link at the file or at its dataset folder (the data area itself may be a link:
    the user chose it). A FIFO, device or link is refused in one line, before any read. With
    ``size`` (the registered size), reads stop there and a longer or shorter file is one line."""
    if size is not None:
        return _Sized(open_shard(path), path, size)  # type: ignore[return-value]
    if is_url(path):
        return open_location(path)
    folder, name = os.path.split(path)
    nofollow = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        dir_fd = os.open(folder, nofollow | os.O_DIRECTORY)
        try:  # O_NONBLOCK: opening a FIFO would wait for a writer
            fd = os.open(name, nofollow | os.O_NONBLOCK, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR) and (os.path.islink(path) or os.path.islink(folder)):
            raise CatalogError(f"{path}: a symbolic link; the catalog reads only regular files in its data area") from e
        if e.errno == errno.ENOENT:
            raise FileNotFoundError(e.errno, e.strerror, path) from e
        raise CatalogError(f"{path}: cannot open: {e.strerror}") from e
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CatalogError(f"{path}: not a regular file; the catalog reads only regular files in its data area")
    os.set_blocking(fd, True)
    f = os.fdopen(fd, "rb", buffering=0)
    f.name = path  # messages name the file, not its descriptor
    return f


def shard_batches(path: str, size: int | None = None) -> Iterator[list[bytes]]:
    """The record batches of a shard, opened as :func:`open_shard` does."""
    with open_shard(path, size) as f:
        yield from read_record_batches(f)


def file_checksum(path: str | os.PathLike[str], limit: int | None = None) -> tuple[int, str]:
    """(size, "crc32c:xxxxxxxx") of a whole shard (or URL), read in large chunks; with ``limit``
    (the registered size) at most one byte more is read: enough to know the size is wrong."""
    crc = 0
    size = 0
    buf = bytearray(CHECKSUM_CHUNK)  # one buffer refilled: no 4 MiB allocation per chunk
    view = memoryview(buf)
    end = None if limit is None else limit + 1
    with open_shard(os.fspath(path)) as f:
        while n := f.readinto(view if end is None else view[: min(len(buf), end - size)]):  # type: ignore[attr-defined]  # FileIO and RemoteFile both have it
            crc = crc32c(view[:n], crc)
            size += n
    return size, format_checksum(crc)


def publish(f: IO[bytes], temp: Path, final: Path, sync: bool = True) -> None:
    """Close a written temporary file under its final name: flush, fsync (``sync``), rename.
    The caller fsyncs the directory (once for all the files it publishes there)."""
    f.flush()
    if sync:
        os.fsync(f.fileno())
    f.close()
    os.rename(temp, final)


# A file being written outside the data area (export, backup) before it is published under its
# final name: ".catalog-partial-<machine>-<pid>-<process start>-<final name>.tmp". The next
# export or backup into the directory removes those whose process is gone (a SIGKILL's).
PARTIAL_PREFIX = ".catalog-partial-"
_PARTIAL_RE = re.compile(re.escape(PARTIAL_PREFIX) + r"([0-9a-f]{8})-([0-9]+)-([0-9]+)-.*")


def _machine_tag() -> str:
    """This machine since its last boot: a pid means nothing on another host, or after a reboot."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        boot = ""
    return hashlib.sha256(f"{os.uname().nodename}/{boot}".encode()).hexdigest()[:8]


def _process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot), None when there is no such process.
    With the pid it names one process: a pid is reused, a (pid, start) pair is not."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(text.rpartition(")")[2].split()[19])  # field 22; the name in (...) may hold spaces


def partial_path(target: Path) -> Path:
    """Where to write ``target`` before publishing it (see PARTIAL_PREFIX)."""
    pid = os.getpid()
    return target.with_name(f"{PARTIAL_PREFIX}{_machine_tag()}-{pid}-{_process_start(pid) or 0}-{target.name}.tmp")


def clear_dead_partials(directory: Path) -> None:
    """Remove partial files in ``directory`` left by processes of this machine that are gone."""
    tag = _machine_tag()
    with contextlib.suppress(OSError), os.scandir(directory) as entries:
        for entry in entries:
            m = _PARTIAL_RE.fullmatch(entry.name)
            if m and m[1] == tag and _process_start(int(m[2])) != int(m[3]):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def publish_new(temp: Path, target: Path) -> None:
    """Give the written, fsynced file ``temp`` the name ``target``, which must still be free:
    a file someone created there meanwhile is never replaced (a hard link cannot replace)."""
    try:
        os.link(temp, target)
    except FileExistsError as e:
        raise CatalogError(f"{target}: created by someone else meanwhile; left as it is, nothing written") from e
    except OSError as e:
        raise CatalogError(f"{target}: cannot create: {e.strerror}") from e
    finally:
        temp.unlink(missing_ok=True)
    fsync_dir(target.parent)


def write_error(where: str | os.PathLike[str], e: OSError, what: str = "cannot write") -> CatalogError:
    """A full disk, a read-only or unwritable data area: one line naming the place."""
    return CatalogError(f"{os.fspath(where)}: {what}: {e.strerror or e}")


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
    ) -> None:
        self.store = data_root if isinstance(data_root, Store) else Store(data_root)
        self.dir = Path(self.store.url(dataset))  # a local data area's dataset folder
        self.dataset = dataset
        self.intent_id = intent_id
        self.shard_size = shard_size
        self.shard_records = shard_records
        self.sync = sync
        self.shards: list[ShardFile] = []
        self.made: list[Path] = []  # every local path created, for abort()
        self.uploaded: list[str] = []  # shards uploaded to an object store, for abort()
        self._publishing: str | None = None  # the shard being renamed or uploaded, for abort()
        self._file: IO[bytes] | None = None
        self._writer: RecordWriter | None = None
        self._temp: Path | None = None
        self._rel = ""  # the open shard's final name, "<dataset>/<file>"
        self._bytes = 0
        self._records = 0
        self.store.prepare(dataset)

    @property
    def records(self) -> int:
        return sum(s.records for s in self.shards) + self._records

    def _final_name(self, index: int) -> str:
        return f"{self.intent_id}-{index:05d}{SHARD_SUFFIX}"

    def _next_name(self) -> str:
        return self._final_name(len(self.made) + len(self.uploaded))  # one index per file: never repeats

    def _open(self) -> RecordWriter:
        self._rel = self._relative(self._next_name())
        self.store.prepare(self.dataset)  # gc may have removed an empty folder meanwhile
        self._temp, self._file = self.store.open_temp(self._rel)  # closed in _finish
        self.made.append(self._temp)
        self._writer = RecordWriter(self._file)
        return self._writer

    def write(self, record: bytes) -> None:
        size = len(record) + HEADER_SIZE + FOOTER_SIZE
        writer = self._writer
        if writer is None or (
            self._records and (self._bytes + size > self.shard_size or self._records >= self.shard_records)
        ):
            self._finish()
            writer = self._open()
        try:
            writer.write(record)
        except OSError as e:
            raise write_error(self._temp or self.dir, e) from e
        self._bytes += size
        self._records += 1

    def write_many(self, records: Iterable[bytes]) -> None:
        for r in records:
            self.write(r)

    def adopt(self, source: Path, records: int) -> ShardFile | None:
        """Take an existing local file as a shard by hard link; None when it cannot be linked
        (another filesystem, or an object store): the caller then copies the records."""
        if self.store.remote:
            return None
        self._finish()
        final = self.dir / self._next_name()
        try:
            os.link(source, final)
        except OSError as e:
            if e.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                return None
            raise CatalogError(f"{source}: cannot link into the catalog: {e.strerror}") from e
        self.made.append(final)
        size, checksum = file_checksum(final)
        shard = ShardFile(self._relative(final.name), records, size, checksum)
        self.shards.append(shard)
        return shard

    def take(self, files: Iterable[ShardFile]) -> None:
        """Shards published by jobs under this sink's intent: registered with its own at
        commit, in this order, and removed by abort() like its own."""
        for f in files:
            if self.store.remote:
                self.uploaded.append(f.path)
            else:
                self.made.append(Path(self.store.url(f.path)))
            self.shards.append(f)

    def _relative(self, name: str) -> str:
        return f"{self.dataset}/{name}"

    def _finish(self) -> None:
        writer, f, temp = self._writer, self._file, self._temp
        if writer is None or f is None or temp is None:
            return
        self._writer = self._file = self._temp = None
        rel = self._rel
        try:
            writer.close()
        except OSError as e:
            f.close()
            raise write_error(temp, e) from e
        # Until the lists below say where the shard is, abort() finds it here: a Ctrl-C that
        # lands right after the rename (or upload) must not leave the published file behind.
        self._publishing = rel
        self.store.publish(f, temp, rel, self.sync)
        if self.store.remote:
            self.made.pop()  # the spool file is gone; the object is what abort() must remove
            self.uploaded.append(rel)
        else:
            self.made[-1] = Path(self.store.url(rel))  # the temp file is always the newest entry
        self.shards.append(ShardFile(rel, writer.records, writer.file_bytes, format_checksum(writer.checksum)))
        self._publishing = None
        self._bytes = self._records = 0

    def close(self) -> list[ShardFile]:
        """Publish the last shard and make every rename durable."""
        self._finish()
        if self.sync and self.made:
            self.store.sync_dir(self.dataset)
        return self.shards

    def abort(self) -> None:
        """Remove every file this sink made (the caller registers nothing)."""
        if self._file is not None:
            self._file.close()
        self._writer = self._file = self._temp = None
        for path in self.made:
            with contextlib.suppress(OSError):  # gone, or a read-only area: gc takes what stays
                path.unlink()
        if self._publishing is not None:
            with contextlib.suppress(CatalogError):
                self.store.remove(self._publishing)
            self._publishing = None
        for rel in self.uploaded:
            with contextlib.suppress(CatalogError):
                self.store.remove(rel)
        self.made.clear()
        self.uploaded.clear()
        self.shards.clear()


# --------------------------------------------------------------------------- the data area


class Store:
    """The data area: a local directory, or any fsspec URL such as ``s3://bucket/prefix``.

    Locally a shard is written under a temporary name and renamed (atomic, see publish).
    Object stores have no rename, so there a shard is spooled to a local temporary file
    and uploaded once to its final, never-reused key: one PUT, or a multipart upload that
    appears only when completed. Either way nothing is visible through the catalog until
    the manifest commit registers it. Picklable (jobs carry it as its root string).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        text = os.fspath(root)
        self.remote = is_url(text)
        self.root = text.rstrip("/") if self.remote else text
        # url() is called once per shard (a million in `show --json`): a prefix beats os.path.join.
        self._prefix = self.root + "/" if self.remote else os.path.join(self.root, "")
        # Spool files are tagged by data area: gc of one catalog never takes another's.
        self._spool_prefix = f"{SPOOL_PREFIX}{hashlib.sha256(self.root.encode()).hexdigest()[:12]}-"
        self._fs: Any = None

    def __repr__(self) -> str:
        return f"Store({self.root!r})"

    def __reduce__(self) -> tuple[type[Store], tuple[str]]:
        return (Store, (self.root,))

    @property
    def fs(self) -> Any:
        """The fsspec filesystem of a remote data area (credentials from its usual places)."""
        if self._fs is None:
            try:
                import fsspec
            except ImportError as e:
                raise CatalogError(f"{self.root}: object storage needs `pip install 'tfrecord-catalog[s3]'`") from e
            protocol = self.root.split("://", 1)[0]
            try:
                # No listings cache: a writer's exists() must see what another process just uploaded.
                self._fs = fsspec.filesystem(protocol, use_listings_cache=False)
            except (ImportError, ValueError) as e:
                raise CatalogError(f"{self.root}: no filesystem for {protocol}:// ({e})") from e
        return self._fs

    def check(self) -> None:
        """Fail with one line now, not at the first append, when an object store is unreachable
        (no bucket, no credentials, no network)."""
        if not self.remote:
            return
        fs = self.fs
        bucket = fs._strip_protocol(self.root).split("/", 1)[0]
        with remote_errors(self.root, "cannot reach the object store"):
            found = fs.exists(bucket)
        if not found:
            raise CatalogError(f"{self.root}: no such bucket (create it first)")

    # ---- ownership
    def url_of_marker(self) -> str:
        return self._prefix + OWNER_FILE

    def owner(self) -> str | None:
        """The catalog id in the data area's marker, or None when there is none."""
        where = self.url_of_marker()
        try:
            if self.remote:
                with remote_errors(where, "cannot read"):
                    data = bytes(self.fs.cat_file(where))
            else:
                with open_shard(where) as f:  # a link or a FIFO is no marker
                    data = f.read(256)
        except FileNotFoundError:
            return None
        return data.decode("ascii", "replace").strip()

    def check_new(self) -> None:
        """Refuse, in one line, a data area for a new catalog that is not a new or empty
        directory (or object prefix): it holds someone's files, or another catalog's."""
        if not self.remote and os.path.lexists(self.root) and not os.path.isdir(self.root):
            raise CatalogError(f"{self.root}: not a directory; the data area must be a directory")
        found = self.owner()
        if found is not None:
            raise CatalogError(f"{self.root}: already the data area of catalog {found}; each catalog needs its own")
        if self.remote:
            try:
                with remote_errors(self.root, "cannot list"):
                    empty = not self.fs.ls(self.fs._strip_protocol(self.root))
            except FileNotFoundError:
                empty = True
        else:
            try:
                with os.scandir(self.root) as entries:
                    empty = next(entries, None) is None
            except FileNotFoundError:
                empty = True
            except OSError as e:
                raise CatalogError(f"{self.root}: cannot read: {e.strerror}") from e
        if not empty:
            raise CatalogError(
                f"{self.root}: not empty and not a catalog's data area; give --storage a new or empty directory"
            )

    def claim(self, catalog_id: str) -> str:
        """Mark the data area as catalog ``catalog_id``'s unless a marker is there already;
        returns the owner the marker names now (another catalog's, when not ``catalog_id``)."""
        found = self.owner()
        if found is not None:
            return found
        data = f"{catalog_id}\n".encode()
        where = self.url_of_marker()
        if self.remote:  # no exclusive create in S3: only inits racing on one prefix could both write
            with remote_errors(where, "cannot write"):
                self.fs.pipe_file(where, data)
            return catalog_id
        temp = f"{where}.{os.getpid()}.tmp"
        try:
            os.makedirs(self.root, exist_ok=True)
            with open(temp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(temp, where)  # never replaces: of two catalogs racing for it, one owns it
            except FileExistsError:
                return self.claim(catalog_id)
            finally:
                os.unlink(temp)
            fsync_dir(Path(self.root))
        except OSError as e:
            raise write_error(where, e) from e
        return catalog_id

    def unclaim(self, catalog_id: str) -> None:
        """Remove the marker if it names ``catalog_id`` (an init undone)."""
        if self.owner() != catalog_id:
            return
        if self.remote:
            with remote_errors(self.url_of_marker(), "cannot delete"):
                self.fs.rm_file(self.url_of_marker())
        else:
            os.unlink(self.url_of_marker())

    def url(self, rel: str) -> str:
        """Where the shard ``rel`` (``<dataset>/<file>``) is: a local path or a URL. Every path
        the manifest names passes here, so one edited to ``../x`` or ``/x`` is refused here."""
        if _REL_RE.fullmatch(rel) is None:
            raise ManifestError(
                f"the manifest names a shard {rel!r} outside the data area (a shard is <dataset>/<file>)"
            )
        return self._prefix + rel

    def exists(self, rel: str) -> bool:
        if not self.remote:
            return os.path.exists(self.url(rel))
        with remote_errors(self.url(rel), "cannot check"):
            return bool(self.fs.exists(self.url(rel)))

    def open(self, rel: str) -> IO[bytes]:
        return open_shard(self.url(rel))

    def checksum(self, rel: str, limit: int | None = None) -> tuple[int, str]:
        """(size, "crc32c:xxxxxxxx") of a stored shard, streamed (see file_checksum for ``limit``)."""
        return file_checksum(self.url(rel), limit)

    def remove(self, rel: str) -> bool:
        """Delete a shard; one already gone is fine. Whether there was one to delete."""
        try:
            if self.remote:
                if not self.exists(rel):  # S3's DELETE succeeds on a missing key
                    return False
                with remote_errors(self.url(rel), "cannot delete"):
                    self.fs.rm_file(self.url(rel))
            else:
                os.unlink(self.url(rel))
        except FileNotFoundError:
            return False
        except OSError as e:
            raise write_error(self.url(rel), e, "cannot delete") from e
        return True

    def spool_files(self) -> list[StoredFile]:
        """This machine's spool files for this (remote) data area, ``rel`` being their local
        path and ``name`` starting with the writer's intent id. A writer that crashed before
        uploading leaves its spool file behind; gc takes it like an unregistered upload."""
        if not self.remote:
            return []
        out = []
        prefix = self._spool_prefix
        for entry in os.scandir(tempfile.gettempdir()):
            if entry.name.startswith(prefix):
                with contextlib.suppress(FileNotFoundError):
                    st = entry.stat()
                    out.append(StoredFile(entry.path, st.st_size, st.st_mtime, entry.name[len(prefix) :]))
        return out

    def listing(self, datasets: set[str] | None = None, links: list[str] | None = None) -> list[StoredFile]:
        """Every file in the dataset folders (all datasets, or those named), sorted. Symbolic
        links are never followed (a linked folder could lead anywhere): with ``links`` given,
        the paths (relative) of those found are added to it."""
        if self.remote:
            return self._remote_listing(datasets)
        out: list[StoredFile] = []
        if not os.path.isdir(self.root):
            return out
        for top in sorted(os.scandir(self.root), key=lambda e: e.name):
            if datasets is not None and top.name not in datasets:
                continue
            if top.is_symlink():
                if links is not None:
                    links.append(top.name)
                continue
            if not top.is_dir(follow_symlinks=False) or _DATASET_RE.fullmatch(top.name) is None:
                continue  # not a dataset folder: the catalog makes none like it
            for entry in sorted(os.scandir(top.path), key=lambda e: e.name):
                with contextlib.suppress(FileNotFoundError):
                    if entry.is_symlink():
                        if links is not None:
                            links.append(f"{top.name}/{entry.name}")
                    elif entry.is_file(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        out.append(StoredFile(f"{top.name}/{entry.name}", st.st_size, st.st_mtime))
        return out

    def _remote_listing(self, datasets: set[str] | None) -> list[StoredFile]:
        base = self.fs._strip_protocol(self.root).rstrip("/")
        try:
            with remote_errors(self.root, "cannot list"):
                found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return []
        out = []
        for key, info in found.items():
            rel = key[len(base) + 1 :]
            ds, sep, name = rel.partition("/")
            if not sep or "/" in name or (datasets is not None and ds not in datasets):
                continue
            modified = info.get("LastModified") or info.get("mtime")
            mtime = modified.timestamp() if hasattr(modified, "timestamp") else float(modified or 0)
            out.append(StoredFile(rel, int(info.get("size", 0)), mtime))
        return sorted(out, key=lambda f: f.rel)

    # ---- writing
    def prepare(self, dataset: str) -> None:
        if not self.remote:
            folder = os.path.join(self.root, dataset)
            try:
                os.makedirs(folder, exist_ok=True)
            except OSError as e:
                raise write_error(folder, e) from e

    def temp_for(self, rel: str) -> Path:
        """Where to write ``rel`` before publishing it: beside it, or in a local spool."""
        if self.remote:
            shard = rel.rsplit("/", 1)[-1]  # starts with the intent id, for gc
            fd, name = tempfile.mkstemp(prefix=f"{self._spool_prefix}{shard}.", suffix=TEMP_SUFFIX)
            os.close(fd)
            return Path(name)
        folder, name = os.path.split(self.url(rel))
        return Path(folder) / f"{TEMP_PREFIX}{name}{TEMP_SUFFIX}"

    def open_temp(self, rel: str) -> tuple[Path, IO[bytes]]:
        """A new file to write ``rel`` into (see temp_for), open for writing."""
        try:
            temp = self.temp_for(rel)
            # A spool file exists already, empty: "r+b" writes into it, where "wb" would truncate
            # it and make ext4 start writing it out at close (auto_da_alloc), 2-180 ms a shard.
            return temp, open(temp, "r+b" if self.remote else "xb")
        except FileNotFoundError:
            raise  # the folder went (gc of an emptied dataset): the caller makes it again
        except OSError as e:
            raise write_error(self.url(rel), e) from e

    def publish(self, f: IO[bytes], temp: Path, rel: str, sync: bool = True) -> None:
        """Close ``f`` (written at ``temp``) and make it the shard ``rel``: rename, or upload."""
        if not self.remote:
            try:
                publish(f, temp, Path(self.url(rel)), sync)
            except OSError as e:
                f.close()
                if isinstance(e, FileNotFoundError):
                    raise  # gc took the temporary file: the commit says the shard vanished
                raise write_error(temp, e) from e
            return
        f.close()
        try:
            with remote_errors(self.url(rel), "upload failed"):
                self.fs.put_file(str(temp), self.url(rel))
        except FileNotFoundError as e:  # no such bucket: not a shard gone missing before its commit
            raise remote_error(self.url(rel), "upload failed", e) from e
        finally:
            temp.unlink(missing_ok=True)

    def sync_dir(self, dataset: str) -> None:
        """Make renames in a dataset folder durable (an object store's PUT already is)."""
        if not self.remote:
            try:
                fsync_dir(Path(self.root) / dataset)
            except OSError as e:
                raise write_error(Path(self.root) / dataset, e) from e

    def link(self, source: str, rel: str) -> bool:
        """Make ``rel`` hold the bytes of the stored shard ``source`` without reading them
        here: a hard link, or a server-side copy. False when the filesystem cannot."""
        if self.remote:
            with remote_errors(self.url(rel), "server-side copy failed"):
                self.fs.copy(self.url(source), self.url(rel))
            return True
        if not stat.S_ISREG(os.lstat(self.url(source)).st_mode):  # never a link to a place outside
            raise CatalogError(f"{self.url(source)}: not a regular file; the catalog links only regular files")
        try:
            os.link(self.url(source), self.url(rel), follow_symlinks=False)
        except OSError as e:
            if e.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                return False
            raise write_error(self.url(rel), e) from e
        return True

    def tidy(self, keep: set[str]) -> None:
        """Remove emptied local folders of datasets not in ``keep`` (object stores have none)."""
        if self.remote or not os.path.isdir(self.root):
            return
        for ds in os.listdir(self.root):
            folder = os.path.join(self.root, ds)
            if ds not in keep and os.path.isdir(folder) and not os.listdir(folder):
                with contextlib.suppress(OSError):
                    os.rmdir(folder)


@dataclass(frozen=True)
class StoredFile:
    rel: str  # "<dataset>/<file>" (a spool file: its local path)
    size: int
    mtime: float  # seconds since the epoch
    shard: str = ""  # a spool file: the name of the shard it was to become

    @property
    def name(self) -> str:
        return self.shard or self.rel.rsplit("/", 1)[-1]
