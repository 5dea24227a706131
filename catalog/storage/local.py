"""A data area in a local directory: shards written beside their final name, then renamed.

A rename is atomic and a hard link never replaces a file, so a shard appears whole or not
at all, and of two writers racing for one name only one gets it. Nothing here follows a
symbolic link inside the area: a linked file or folder could lead anywhere.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path
from typing import IO, ClassVar

from catalog.errors import StorageError
from catalog.storage.base import Store, StoredFile
from catalog.storage.files import fsync_dir, open_shard, publish, write_error
from catalog.storage.names import INDEX_FOLDER, is_dataset_folder, temp_name

# What os.link raises when this filesystem cannot link there (another device, no link support,
# too many links): the caller copies the bytes instead.
_CANNOT_LINK = (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP)


class LocalStore(Store):
    """A data area in a local directory (see the module docstring)."""

    remote: ClassVar[bool] = False
    links_local_files: ClassVar[bool] = True
    temp_mode: ClassVar[str] = "xb"  # exclusive: a name taken (by an earlier attempt) is never reused

    def __init__(self, root: str | os.PathLike[str]) -> None:
        text = os.fspath(root)
        super().__init__(text, os.path.join(text, ""))

    def check(self) -> None:
        """Nothing to reach: a directory that cannot be used is one line at its first use."""

    # ---- ownership
    def check_new(self) -> None:
        if os.path.lexists(self.root) and not os.path.isdir(self.root):
            raise StorageError(f"{self.root}: not a directory; the data area must be a directory")
        super().check_new()

    def _read_marker(self) -> bytes:
        with open_shard(self.url_of_marker()) as f:  # a link or a FIFO is no marker
            return f.read(256)

    def _write_marker(self, catalog_id: str) -> str:
        where = self.url_of_marker()
        temp = f"{where}.{os.getpid()}.tmp"
        try:
            os.makedirs(self.root, exist_ok=True)
            with open(temp, "wb") as f:
                f.write(f"{catalog_id}\n".encode())
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

    def _remove_marker(self) -> None:
        os.unlink(self.url_of_marker())

    def _is_empty(self) -> bool:
        try:
            with os.scandir(self.root) as entries:
                return next(entries, None) is None
        except FileNotFoundError:
            return True
        except OSError as e:
            raise StorageError(f"{self.root}: cannot read: {e.strerror}") from e

    # ---- finding and removing files
    def exists(self, rel: str) -> bool:
        return os.path.exists(self.url(rel))

    def remove(self, rel: str) -> bool:
        try:
            os.unlink(self.url(rel))
        except FileNotFoundError:
            return False
        except OSError as e:
            raise write_error(self.url(rel), e, "cannot delete") from e
        return True

    def listing(self, datasets: set[str] | None = None, links: list[str] | None = None) -> list[StoredFile]:
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
            if top.is_dir(follow_symlinks=False) and is_dataset_folder(top.name):
                _list_folder(top, out, links)  # anything else is no dataset folder: the catalog makes none like it
        return out

    def index_listing(self, datasets: set[str] | None = None) -> list[StoredFile]:
        out: list[StoredFile] = []
        top = os.path.join(self.root, INDEX_FOLDER)
        if os.path.islink(top) or not os.path.isdir(top):
            return out  # a linked index tree could lead anywhere: never followed
        for folder in sorted(os.scandir(top), key=lambda e: e.name):
            if (datasets is None or folder.name in datasets) and folder.is_dir(follow_symlinks=False):
                for f in sorted(os.scandir(folder.path), key=lambda e: e.name):
                    with contextlib.suppress(FileNotFoundError):
                        if f.is_file(follow_symlinks=False):
                            st = f.stat(follow_symlinks=False)
                            out.append(StoredFile(f"{INDEX_FOLDER}/{folder.name}/{f.name}", st.st_size, st.st_mtime))
        return out

    def spool_files(self) -> list[StoredFile]:
        return []  # shards are written beside their final name: a leftover is in the listing

    def tidy(self, keep: set[str]) -> None:
        if not os.path.isdir(self.root):
            return
        for top in (self.root, os.path.join(self.root, INDEX_FOLDER)):
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                for ds in os.listdir(top):
                    folder = os.path.join(top, ds)
                    if ds not in keep and ds != INDEX_FOLDER and os.path.isdir(folder) and not os.listdir(folder):
                        with contextlib.suppress(OSError):
                            os.rmdir(folder)

    # ---- writing
    def prepare(self, dataset: str) -> None:
        folder = os.path.join(self.root, dataset)
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as e:
            raise write_error(folder, e) from e

    def temp_for(self, rel: str, unique: bool = False) -> Path:
        folder, name = os.path.split(self.url(rel))
        return Path(folder) / temp_name(name, secrets.token_hex(8) if unique else "")

    def publish(self, f: IO[bytes], temp: Path, rel: str, sync: bool = True) -> None:
        try:
            publish(f, temp, Path(self.url(rel)), sync)
        except OSError as e:
            f.close()
            if isinstance(e, FileNotFoundError):
                raise  # gc took the temporary file: the commit says the shard vanished
            raise write_error(temp, e) from e

    def sync_dir(self, dataset: str) -> None:
        """Make renames in a dataset folder durable."""
        try:
            fsync_dir(Path(self.root) / dataset)
        except OSError as e:
            raise write_error(Path(self.root) / dataset, e) from e

    def link(self, source: str, rel: str) -> bool:
        if not stat.S_ISREG(os.lstat(self.url(source)).st_mode):  # never a link to a place outside
            raise StorageError(f"{self.url(source)}: not a regular file; the catalog links only regular files")
        try:
            os.link(self.url(source), self.url(rel), follow_symlinks=False)
        except OSError as e:
            if e.errno in _CANNOT_LINK:
                return False
            raise write_error(self.url(rel), e) from e
        return True

    def adopt(self, source: Path, rel: str) -> bool:
        try:
            os.link(source, self.url(rel))
        except OSError as e:
            if e.errno in _CANNOT_LINK:
                return False
            raise StorageError(f"{source}: cannot link into the catalog: {e.strerror}") from e
        return True


def _list_folder(top: os.DirEntry[str], out: list[StoredFile], links: list[str] | None) -> None:
    """The regular files of one dataset folder into ``out``, its symbolic links into ``links``."""
    for entry in sorted(os.scandir(top.path), key=lambda e: e.name):
        with contextlib.suppress(FileNotFoundError):
            if entry.is_symlink():
                if links is not None:
                    links.append(f"{top.name}/{entry.name}")
            elif entry.is_file(follow_symlinks=False):
                st = entry.stat(follow_symlinks=False)
                out.append(StoredFile(f"{top.name}/{entry.name}", st.st_size, st.st_mtime))
