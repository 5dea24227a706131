"""The data area's interface: what the catalog asks of the place its shard files live.

One interface, one implementation per kind of place (see ARCHITECTURE.md): a local directory
(:mod:`catalog.storage.local`) or an object store reached through fsspec
(:mod:`catalog.storage.remote`); :func:`catalog.storage.factory.store_for` picks one from the
data root. What both share (the ownership marker's protocol, the path checks, reading and
checksumming a shard) is written once here.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, ClassVar

from catalog.errors import DataAreaError, ManifestError
from catalog.storage.fileio import FileIO, write_error
from catalog.storage.files import file_checksum, open_shard
from catalog.storage.names import AREA_PATH_RE, INDEX_FOLDER, INDEX_PATH_RE, OWNER_FILE, index_rel

# Bound once: url() runs once per shard (a million in `show --json`).
_inside = AREA_PATH_RE.fullmatch
_index_inside = INDEX_PATH_RE.fullmatch


@dataclass(frozen=True)
class StoredFile:
    """A file found in the data area by a listing: registered or not, the catalog's or not, a
    shard or not (a shard's facts are :class:`ShardFile`'s, a registered one's ``LiveShard``'s).
    A spool file is one too, by its local path."""

    rel: str  # "<dataset>/<file>" (a spool file: its local path)
    size: int
    mtime: float  # seconds since the epoch
    shard: str = ""  # a spool file: the name of the shard it was to become

    @property
    def name(self) -> str:
        return self.shard or self.rel.rsplit("/", 1)[-1]


class Store(abc.ABC):
    """The data area: a local directory, or any fsspec URL such as ``s3://bucket/prefix``.

    A shard is written in full under a name no reader looks at, then published under its
    final, never-reused name at once (a rename, or one upload): nothing is visible through
    the catalog until the manifest commit registers it. Picklable (jobs carry it as its root
    string).

    A store is the area's layout (dataset folders, the index tree, the owner marker, where a
    shard is written before it is published) on top of one :class:`FileIO`, ``io``, which
    does every read, write, listing and deletion of its files.
    """

    remote: ClassVar[bool]  # whether shards live behind URLs rather than local paths
    links_local_files: ClassVar[bool]  # whether a local file can become a shard without a copy
    temp_mode: ClassVar[str]  # how open_temp opens the file temp_for made room for

    def __init__(self, root: str, prefix: str, io: FileIO) -> None:
        self.root = root
        self.io = io
        # url() is called once per shard (a million in `show --json`): a prefix beats os.path.join.
        self._prefix = prefix

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

    def __reduce__(self) -> tuple[type[Store], tuple[str]]:
        return (type(self), (self.root,))

    def check(self) -> None:
        """Fail with one line now, not at the first append, when the area cannot be reached."""
        self.io.reach(self.root)

    # ---- paths
    def url(self, rel: str) -> str:
        """Where the shard ``rel`` (``<dataset>/<file>``) is: a local path or a URL. Every path
        the manifest names passes here, so one edited to ``../x`` or ``/x`` is refused here."""
        if _inside(rel) is None and _index_inside(rel) is None:  # a shard, or a record index (storage.index)
            raise ManifestError(
                f"the manifest names a shard {rel!r} outside the data area (a shard is <dataset>/<file>)"
            )
        return self._prefix + rel

    def shard_url(self, rel: str, location: str | None) -> str:
        """Where a registered shard's bytes are: its own ``location`` when it was adopted in
        place (outside the area: read, never written or deleted), else :meth:`url` of ``rel``."""
        return location if location is not None else self.url(rel)

    def index_url(self, rel: str) -> str:
        """Where the record index of the shard ``rel`` is (names.index_rel): in this area's index
        tree, whether the shard is in the area or adopted in place."""
        return self.url(index_rel(rel))

    def open(self, rel: str) -> IO[bytes]:
        return open_shard(self.url(rel))

    def checksum(
        self, rel: str, limit: int | None = None, tap: Callable[[memoryview], object] | None = None
    ) -> tuple[int, str]:
        """(size, "crc32c:xxxxxxxx") of a stored shard, streamed (see file_checksum for ``limit``, ``tap``)."""
        return file_checksum(self.url(rel), limit, tap)

    # ---- ownership
    def url_of_marker(self) -> str:
        return self._prefix + OWNER_FILE

    def owner(self) -> str | None:
        """The catalog id in the data area's marker, or None when there is none."""
        try:
            data = self._read_marker()
        except FileNotFoundError:
            return None
        return data.decode("ascii", "replace").strip()

    def check_new(self) -> None:
        """Refuse, in one line, a data area for a new catalog that is not a new or empty
        directory (or object prefix): it holds someone's files, or another catalog's."""
        found = self.owner()
        if found is not None:
            raise DataAreaError(f"{self.root}: already the data area of catalog {found}; each catalog needs its own")
        if not self._is_empty():
            raise DataAreaError(
                f"{self.root}: not empty and not a catalog's data area; give --storage a new or empty directory"
            )

    def claim(self, catalog_id: str) -> str:
        """Mark the data area as catalog ``catalog_id``'s unless a marker is there already;
        returns the owner the marker names now (another catalog's, when not ``catalog_id``)."""
        found = self.owner()
        if found is not None:
            return found
        return self._write_marker(catalog_id)

    def unclaim(self, catalog_id: str) -> None:
        """Remove the marker if it names ``catalog_id`` (an init undone)."""
        if self.owner() == catalog_id:
            self._remove_marker()

    @abc.abstractmethod
    def _read_marker(self) -> bytes:
        """The marker's bytes; FileNotFoundError when there is none."""

    @abc.abstractmethod
    def _write_marker(self, catalog_id: str) -> str:
        """Write a marker naming ``catalog_id``; the owner it names afterwards (see claim)."""

    def _remove_marker(self) -> None:
        self.io.delete(self.url_of_marker())

    def _is_empty(self) -> bool:
        """Whether the area holds nothing yet (an area not made yet is empty)."""
        return self.io.is_empty(self.root)

    # ---- finding and removing files
    def exists(self, rel: str) -> bool:
        return self.io.exists(self.url(rel))

    def remove(self, rel: str) -> bool:
        """Delete a shard; one already gone is fine. Whether there was one to delete."""
        return self.io.delete(self.url(rel))

    @abc.abstractmethod
    def listing(self, datasets: set[str] | None = None, links: list[str] | None = None) -> list[StoredFile]:
        """Every file in the dataset folders (all datasets, or those named), sorted by ``rel``.
        Symbolic links are never followed (a linked folder could lead anywhere): with ``links``
        given, the paths (relative) of those found are added to it."""

    @abc.abstractmethod
    def index_listing(self, datasets: set[str] | None = None) -> list[StoredFile]:
        """Every file in the index folders (names.index_folder) of all datasets, or of those
        named, sorted by ``rel`` (``.index/<dataset>/<file>``); links are never followed."""

    @abc.abstractmethod
    def spool_files(self) -> list[StoredFile]:
        """This machine's local files written for this area and not published yet, ``rel``
        being their local path and ``name`` starting with the writer's intent id: a writer
        that crashed before publishing leaves one behind; gc takes it like an unregistered
        shard. None where shards are written in place (beside their final name)."""

    def tidy(self, keep: set[str]) -> None:
        """Remove emptied folders (and index folders) of datasets not in ``keep`` (where folders exist)."""
        for top in (self.root, self._prefix + INDEX_FOLDER):
            self.io.remove_empty_folders(top, lambda ds: ds in keep or ds == INDEX_FOLDER)

    # ---- writing
    def prepare(self, dataset: str) -> None:
        """Make room for the files of ``dataset`` (its folder, where folders exist); or, given
        an index folder (names.index_folder), for its record indexes."""
        self.io.make_folder(self._prefix + dataset)

    @abc.abstractmethod
    def temp_for(self, rel: str, unique: bool = False) -> Path:
        """Where to write ``rel`` before publishing it: beside it, or in a local spool.
        ``unique``: a name of this call's own, for files several processes may write at once
        (a record index built after its shard's commit); else the one name ``rel`` has."""

    def open_temp(self, rel: str, unique: bool = False) -> tuple[Path, IO[bytes]]:
        """A new file to write ``rel`` into (see temp_for), open for writing."""
        try:
            temp = self.temp_for(rel, unique)
            return temp, open(temp, self.temp_mode)
        except FileNotFoundError:
            raise  # the folder went (gc of an emptied dataset): the caller makes it again
        except OSError as e:
            raise write_error(self.url(rel), e) from e

    def publish(self, f: IO[bytes], temp: Path, rel: str, sync: bool = True) -> None:
        """Close ``f`` (written at ``temp``) and make it the shard ``rel``: rename, or upload.
        A FileNotFoundError means the temporary file was taken (by gc): the shard vanished."""
        self.io.publish(f, temp, self.url(rel), sync)

    def sync_dir(self, dataset: str) -> None:
        """Make the publications in a dataset folder (or index folder) durable."""
        self.io.sync_folder(self._prefix + dataset)

    def sync_written(self, f: IO[bytes]) -> bool:
        """Make a file being written durable before its publication, where that is how it
        becomes durable (FileIO.sync_written): whether it did."""
        return self.io.sync_written(f)

    def sync_file(self, rel: str) -> None:
        """Make the bytes of ``rel``, published without ``sync`` by a process of this machine,
        durable (then its folder's publication: sync_dir)."""
        self.io.sync_file(self.url(rel))

    @abc.abstractmethod
    def link(self, source: str, rel: str) -> bool:
        """Make ``rel`` hold the bytes of the stored shard ``source`` without reading them
        here: a hard link, or a server-side copy. False when the filesystem cannot."""

    @abc.abstractmethod
    def adopt(self, source: Path, rel: str) -> bool:
        """Make the local file ``source`` (outside the area) the shard ``rel`` without a copy;
        False when it cannot be (another filesystem, or no links: see links_local_files)."""
