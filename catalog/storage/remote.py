"""A data area on an object store (``s3://bucket/prefix`` and the like), through fsspec.

Object stores have no rename, so a shard is spooled to a local temporary file and uploaded
once to its final, never-reused key: one PUT, or a multipart upload that appears only when
completed. A PUT is durable when it returns, and there are no folders to make or fsync.
Every failure of the store (an endpoint down, no credentials) is one line naming the URL.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import IO, Any, ClassVar

from catalog.errors import StorageError
from catalog.storage.base import Store, StoredFile
from catalog.storage.fileio import filesystem, remote_error, remote_errors
from catalog.storage.files import write_error
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
        super().__init__(text, text + "/")
        # Spool files are tagged by data area: gc of one catalog never takes another's.
        self._spool_prefix = f"{SPOOL_PREFIX}{hashlib.sha256(self.root.encode()).hexdigest()[:12]}-"
        self._fs: Any = None

    @property
    def fs(self) -> Any:
        """The fsspec filesystem of the data area (credentials from its usual places)."""
        if self._fs is None:
            self._fs = filesystem(self.root)
        return self._fs

    def check(self) -> None:
        """Fail with one line when the object store is unreachable (no bucket, no credentials,
        no network)."""
        fs = self.fs
        bucket = fs._strip_protocol(self.root).split("/", 1)[0]
        with remote_errors(self.root, "cannot reach the object store"):
            found = fs.exists(bucket)
        if not found:
            raise StorageError(f"{self.root}: no such bucket (create it first)")

    # ---- ownership
    def _read_marker(self) -> bytes:
        where = self.url_of_marker()
        with remote_errors(where, "cannot read"):
            return bytes(self.fs.cat_file(where))

    def _write_marker(self, catalog_id: str) -> str:
        where = self.url_of_marker()
        # No exclusive create in S3: only inits racing on one prefix could both write.
        with remote_errors(where, "cannot write"):
            self.fs.pipe_file(where, f"{catalog_id}\n".encode())
        return catalog_id

    def _remove_marker(self) -> None:
        with remote_errors(self.url_of_marker(), "cannot delete"):
            self.fs.rm_file(self.url_of_marker())

    def _is_empty(self) -> bool:
        try:
            with remote_errors(self.root, "cannot list"):
                return not self.fs.ls(self.fs._strip_protocol(self.root))
        except FileNotFoundError:
            return True

    # ---- finding and removing files
    def exists(self, rel: str) -> bool:
        with remote_errors(self.url(rel), "cannot check"):
            return bool(self.fs.exists(self.url(rel)))

    def remove(self, rel: str) -> bool:
        try:
            if not self.exists(rel):  # S3's DELETE succeeds on a missing key
                return False
            with remote_errors(self.url(rel), "cannot delete"):
                self.fs.rm_file(self.url(rel))
        except FileNotFoundError:
            return False
        except OSError as e:  # what remote_errors lets through (io.UnsupportedOperation)
            raise write_error(self.url(rel), e, "cannot delete") from e
        return True

    def listing(self, datasets: set[str] | None = None, links: list[str] | None = None) -> list[StoredFile]:
        """As Store.listing; an object store has no links."""
        return self._find("", datasets)

    def index_listing(self, datasets: set[str] | None = None) -> list[StoredFile]:
        return [replace(f, rel=f"{INDEX_FOLDER}/{f.rel}") for f in self._find(INDEX_FOLDER + "/", datasets)]

    def _find(self, under: str, datasets: set[str] | None) -> list[StoredFile]:
        """The objects "<under><dataset>/<file>", as StoredFiles whose ``rel`` is "<dataset>/<file>"."""
        base = self.fs._strip_protocol(self.root).rstrip("/")
        try:
            with remote_errors(self.root, "cannot list"):
                found = self.fs.find(f"{base}/{under}".rstrip("/"), detail=True)
        except FileNotFoundError:
            return []
        out = []
        for key, info in found.items():
            rel = key[len(base) + 1 + len(under) :]
            ds, sep, name = rel.partition("/")
            if not sep or "/" in name or (datasets is not None and ds not in datasets):
                continue  # under "": the index tree's keys have two "/" and are left out here
            modified = info.get("LastModified") or info.get("mtime")
            mtime = modified.timestamp() if hasattr(modified, "timestamp") else float(modified or 0)
            out.append(StoredFile(rel, int(info.get("size", 0)), mtime))
        return sorted(out, key=lambda f: f.rel)

    def spool_files(self) -> list[StoredFile]:
        out = []
        prefix = self._spool_prefix
        for entry in os.scandir(tempfile.gettempdir()):
            if entry.name.startswith(prefix):
                with contextlib.suppress(FileNotFoundError):
                    st = entry.stat()
                    out.append(StoredFile(entry.path, st.st_size, st.st_mtime, entry.name[len(prefix) :]))
        return out

    def tidy(self, keep: set[str]) -> None:
        """Nothing to do: an object store has no folders to empty."""

    # ---- writing
    def prepare(self, dataset: str) -> None:
        """Nothing to do: a key needs no folder."""

    def temp_for(self, rel: str, unique: bool = False) -> Path:
        shard = rel.rsplit("/", 1)[-1]  # starts with the intent id, for gc; mkstemp's names are unique
        fd, name = tempfile.mkstemp(prefix=f"{self._spool_prefix}{shard}.", suffix=TEMP_SUFFIX)
        os.close(fd)
        return Path(name)

    def publish(self, f: IO[bytes], temp: Path, rel: str, sync: bool = True) -> None:
        f.close()
        try:
            with remote_errors(self.url(rel), "upload failed"):
                self.fs.put_file(str(temp), self.url(rel))
        except FileNotFoundError as e:  # no such bucket: not a shard gone missing before its commit
            raise remote_error(self.url(rel), "upload failed", e) from e
        finally:
            temp.unlink(missing_ok=True)

    def sync_dir(self, dataset: str) -> None:
        """Nothing to do: a PUT is durable when it returns."""

    def link(self, source: str, rel: str) -> bool:
        with remote_errors(self.url(rel), "server-side copy failed"):
            self.fs.copy(self.url(source), self.url(rel))
        return True

    def adopt(self, source: Path, rel: str) -> bool:
        return False  # a local file reaches an object store only by an upload: the caller copies
