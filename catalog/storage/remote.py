"""A data area on an object store (``s3://bucket/prefix`` and the like), through fsspec.

Object stores have no rename, so a shard is spooled to a local temporary file and uploaded
once to its final, never-reused key: one PUT, or a multipart upload that appears only when
completed. A PUT is durable when it returns, and there are no folders to make or fsync.
Every failure of the store (an endpoint down, no credentials) is one line naming the URL.
Every operation on the store is :class:`~catalog.storage.fileio.FsspecFileIO`'s (and on the
local spool, :class:`~catalog.storage.fileio.LocalFileIO`'s); this is the area's layout.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import ClassVar

from catalog.storage.base import Store, StoredFile
from catalog.storage.fileio import LOCAL, FsspecFileIO
from catalog.storage.names import INDEX_FOLDER, SPOOL_PREFIX, TEMP_SUFFIX


class FsspecStore(Store):
    """A data area on an object store (see the module docstring)."""

    remote: ClassVar[bool] = True
    links_local_files: ClassVar[bool] = False
    # The spool file exists already, empty: "r+b" writes into it, where "wb" would truncate it
    # and make ext4 start writing it out at close (auto_da_alloc), 2-180 ms a shard.
    temp_mode: ClassVar[str] = "r+b"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        text = os.fspath(root).rstrip("/")
        super().__init__(text, text + "/", FsspecFileIO(text))
        # Spool files are tagged by data area: gc of one catalog never takes another's.
        self._spool_prefix = f"{SPOOL_PREFIX}{hashlib.sha256(self.root.encode()).hexdigest()[:12]}-"

    # ---- ownership
    def _read_marker(self) -> bytes:
        return self.io.read(self.url_of_marker())

    def _write_marker(self, catalog_id: str) -> str:
        # No exclusive create in S3: only inits racing on one prefix could both write.
        self.io.write_new(self.url_of_marker(), f"{catalog_id}\n".encode())
        return catalog_id

    # ---- finding files
    def listing(self, datasets: set[str] | None = None, links: list[str] | None = None) -> list[StoredFile]:
        """As Store.listing; an object store has no links."""
        return self._find("", datasets)

    def index_listing(self, datasets: set[str] | None = None) -> list[StoredFile]:
        return self._find(f"{INDEX_FOLDER}/", datasets)

    def _find(self, under: str, datasets: set[str] | None) -> list[StoredFile]:
        """The objects "<under><dataset>/<file>" (under "": the index tree's keys have two "/"
        and are left out)."""

        def descend(folder: str) -> bool:  # "<under><dataset>"
            return datasets is None or folder[len(under) :] in datasets

        found = self.io.list(self.root, under, depth=2, descend=descend)
        return [StoredFile(f.path, f.size, f.mtime) for f in found if "/" in f.path[len(under) :]]

    def spool_files(self) -> list[StoredFile]:
        prefix = self._spool_prefix
        spool = tempfile.gettempdir()
        return [
            StoredFile(os.path.join(spool, f.path), f.size, f.mtime, f.path[len(prefix) :])
            for f in LOCAL.list(spool, prefix)
            if not f.link
        ]

    # ---- writing
    def temp_for(self, rel: str, unique: bool = False) -> Path:
        shard = rel.rsplit("/", 1)[-1]  # starts with the intent id, for gc; mkstemp's names are unique
        fd, name = tempfile.mkstemp(prefix=f"{self._spool_prefix}{shard}.", suffix=TEMP_SUFFIX)
        os.close(fd)
        return Path(name)

    def link(self, source: str, rel: str) -> bool:
        return self.io.link(self.url(source), self.url(rel))  # a server-side copy

    def adopt(self, source: Path, rel: str) -> bool:
        return False  # a local file reaches an object store only by an upload: the caller copies
