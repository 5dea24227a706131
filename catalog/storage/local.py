"""A data area in a local directory: shards written beside their final name, then renamed.

A rename is atomic and a hard link never replaces a file, so a shard appears whole or not
at all, and of two writers racing for one name only one gets it. Nothing here follows a
symbolic link inside the area: a linked file or folder could lead anywhere. Every file
operation is :class:`~catalog.storage.fileio.LocalFileIO`'s; this is the area's layout.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path
from typing import ClassVar

from catalog.errors import StorageError
from catalog.storage.base import Store, StoredFile
from catalog.storage.fileio import LOCAL, write_error
from catalog.storage.names import INDEX_FOLDER, is_dataset_folder, temp_name


class LocalStore(Store):
    """A data area in a local directory (see the module docstring)."""

    remote: ClassVar[bool] = False
    links_local_files: ClassVar[bool] = True
    temp_mode: ClassVar[str] = "xb"  # exclusive: a name taken (by an earlier attempt) is never reused

    def __init__(self, root: str | os.PathLike[str]) -> None:
        text = os.fspath(root)
        super().__init__(text, os.path.join(text, ""), LOCAL)

    # ---- ownership
    def check_new(self) -> None:
        if os.path.lexists(self.root) and not os.path.isdir(self.root):
            raise StorageError(f"{self.root}: not a directory; the data area must be a directory")
        super().check_new()

    def _read_marker(self) -> bytes:
        return self.io.read(self.url_of_marker(), 256)  # a link or a FIFO is no marker

    def _write_marker(self, catalog_id: str) -> str:
        # A hard link never replaces: of two catalogs racing for it, one owns it.
        if not self.io.write_new(self.url_of_marker(), f"{catalog_id}\n".encode()):
            return self.claim(catalog_id)
        return catalog_id

    # ---- finding files
    def listing(self, datasets: set[str] | None = None, links: list[str] | None = None) -> list[StoredFile]:
        def descend(ds: str) -> bool:  # anything else is no dataset folder: the catalog makes none like it
            return (datasets is None or ds in datasets) and is_dataset_folder(ds)

        out: list[StoredFile] = []
        for f in self.io.list(self.root, depth=2, descend=descend):
            if datasets is not None and f.path.split("/", 1)[0] not in datasets:
                continue
            if f.link:
                if links is not None:
                    links.append(f.path)
            elif "/" in f.path:  # a file at the top (the owner marker) is no shard
                out.append(StoredFile(f.path, f.size, f.mtime))
        return out

    def index_listing(self, datasets: set[str] | None = None) -> list[StoredFile]:
        # A linked index tree or folder could lead anywhere: never followed.
        def descend(folder: str) -> bool:  # ".index/<dataset>"
            return datasets is None or folder[len(INDEX_FOLDER) + 1 :] in datasets

        found = self.io.list(self.root, f"{INDEX_FOLDER}/", depth=2, descend=descend)
        return [StoredFile(f.path, f.size, f.mtime) for f in found if not f.link and f.path.count("/") == 2]

    def spool_files(self) -> list[StoredFile]:
        return []  # shards are written beside their final name: a leftover is in the listing

    # ---- writing
    def temp_for(self, rel: str, unique: bool = False) -> Path:
        folder, name = os.path.split(self.url(rel))
        return Path(folder) / temp_name(name, secrets.token_hex(8) if unique else "")

    def link(self, source: str, rel: str) -> bool:
        facts = self.io.lstat(self.url(source))
        if not (isinstance(facts, os.stat_result) and stat.S_ISREG(facts.st_mode)):
            raise StorageError(f"{self.url(source)}: not a regular file; the catalog links only regular files")
        try:
            return self.io.link(self.url(source), self.url(rel), follow=False)  # never a link to a place outside
        except OSError as e:
            raise write_error(self.url(rel), e) from e

    def adopt(self, source: Path, rel: str) -> bool:
        try:
            return self.io.link(os.fspath(source), self.url(rel))
        except OSError as e:
            raise StorageError(f"{source}: cannot link into the catalog: {e.strerror}") from e
