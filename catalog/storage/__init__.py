"""Where shard bytes live: new immutable files, published atomically (see ARCHITECTURE.md).

- :mod:`~catalog.storage.fileio`: the one IO seam: a :class:`FileIO` (local files, or an
  object store through fsspec) reads any file by its location; :func:`file_io` picks one;
- :mod:`~catalog.storage.names`: the names the catalog gives its files and ids;
- :mod:`~catalog.storage.files`: one shard file: safe reads, checksums, durable publishing;
- :mod:`~catalog.storage.partial`: files written outside the data area (export, backup);
- :mod:`~catalog.storage.base`: the :class:`Store` interface of a data area;
- :mod:`~catalog.storage.local` and :mod:`~catalog.storage.remote`: a local directory, an
  object store through fsspec; :func:`store_for` picks one from the data root;
- :mod:`~catalog.storage.sink`: :class:`ShardSink`, a writer's records into shard files;
- :mod:`~catalog.storage.index`: a shard's record index (its records' offsets).

The names below load on first use (PEP 562): a module that needs only the IO seam
(``catalog.tfrecord.read_records`` opening a name through :mod:`~catalog.storage.fileio`)
does not load the writers' sink and its statistics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from catalog.lazy import exports

if TYPE_CHECKING:
    from catalog.storage.base import Store, StoredFile
    from catalog.storage.content import UNCHECKED
    from catalog.storage.factory import store_for
    from catalog.storage.fileio import FileIO, FsspecFileIO, LocalFileIO, file_io, fsync_dir, publish, write_error
    from catalog.storage.files import (
        CHECKSUM_ALGO,
        CHECKSUM_CHUNK,
        OWNED,
        ShardFile,
        copy_verified,
        damaged_shard,
        file_checksum,
        format_checksum,
        location_exists,
        location_size,
        open_shard,
        shard_batches,
        shard_missing,
        size_mismatch,
    )
    from catalog.storage.local import LocalStore
    from catalog.storage.names import (
        INDEX_FOLDER,
        OWNER_FILE,
        SHARD_SUFFIX,
        SPOOL_PREFIX,
        TEMP_PREFIX,
        TEMP_SUFFIX,
        index_folder,
        index_owner,
        index_rel,
        intent_of,
        is_catalog_file,
        is_catalog_index,
        is_index_name,
        new_catalog_id,
        new_intent_id,
        shard_name,
    )
    from catalog.storage.partial import (
        PARTIAL_PREFIX,
        check_target,
        clear_dead_partials,
        partial_path,
        publish_new,
        publish_written,
        spill_dir,
    )
    from catalog.storage.remote import FsspecStore
    from catalog.storage.sink import UNLIMITED, ShardSink, clear_attempt

_HOMES = {
    "INDEX_FOLDER": "catalog.storage.names",
    "CHECKSUM_ALGO": "catalog.storage.files",
    "CHECKSUM_CHUNK": "catalog.storage.files",
    "OWNED": "catalog.storage.files",
    "OWNER_FILE": "catalog.storage.names",
    "UNCHECKED": "catalog.storage.content",
    "PARTIAL_PREFIX": "catalog.storage.partial",
    "SHARD_SUFFIX": "catalog.storage.names",
    "SPOOL_PREFIX": "catalog.storage.names",
    "TEMP_PREFIX": "catalog.storage.names",
    "TEMP_SUFFIX": "catalog.storage.names",
    "FileIO": "catalog.storage.fileio",
    "FsspecFileIO": "catalog.storage.fileio",
    "FsspecStore": "catalog.storage.remote",
    "LocalFileIO": "catalog.storage.fileio",
    "LocalStore": "catalog.storage.local",
    "ShardFile": "catalog.storage.files",
    "ShardSink": "catalog.storage.sink",
    "UNLIMITED": "catalog.storage.sink",
    "clear_attempt": "catalog.storage.sink",
    "copy_verified": "catalog.storage.files",
    "damaged_shard": "catalog.storage.files",
    "Store": "catalog.storage.base",
    "StoredFile": "catalog.storage.base",
    "check_target": "catalog.storage.partial",
    "clear_dead_partials": "catalog.storage.partial",
    "file_checksum": "catalog.storage.files",
    "file_io": "catalog.storage.fileio",
    "format_checksum": "catalog.storage.files",
    "fsync_dir": "catalog.storage.fileio",
    "index_folder": "catalog.storage.names",
    "index_owner": "catalog.storage.names",
    "index_rel": "catalog.storage.names",
    "location_exists": "catalog.storage.files",
    "location_size": "catalog.storage.files",
    "intent_of": "catalog.storage.names",
    "is_catalog_file": "catalog.storage.names",
    "is_catalog_index": "catalog.storage.names",
    "is_index_name": "catalog.storage.names",
    "new_catalog_id": "catalog.storage.names",
    "new_intent_id": "catalog.storage.names",
    "open_shard": "catalog.storage.files",
    "partial_path": "catalog.storage.partial",
    "publish": "catalog.storage.fileio",
    "publish_new": "catalog.storage.partial",
    "publish_written": "catalog.storage.partial",
    "shard_batches": "catalog.storage.files",
    "spill_dir": "catalog.storage.partial",
    "shard_missing": "catalog.storage.files",
    "size_mismatch": "catalog.storage.files",
    "shard_name": "catalog.storage.names",
    "store_for": "catalog.storage.factory",
    "write_error": "catalog.storage.fileio",
}

__all__ = [
    "INDEX_FOLDER",
    "CHECKSUM_ALGO",
    "CHECKSUM_CHUNK",
    "OWNED",
    "OWNER_FILE",
    "UNCHECKED",
    "PARTIAL_PREFIX",
    "SHARD_SUFFIX",
    "SPOOL_PREFIX",
    "TEMP_PREFIX",
    "TEMP_SUFFIX",
    "FileIO",
    "FsspecFileIO",
    "FsspecStore",
    "LocalFileIO",
    "LocalStore",
    "ShardFile",
    "ShardSink",
    "UNLIMITED",
    "clear_attempt",
    "copy_verified",
    "damaged_shard",
    "Store",
    "StoredFile",
    "check_target",
    "clear_dead_partials",
    "file_checksum",
    "file_io",
    "format_checksum",
    "fsync_dir",
    "index_folder",
    "index_owner",
    "index_rel",
    "location_exists",
    "location_size",
    "intent_of",
    "is_catalog_file",
    "is_catalog_index",
    "is_index_name",
    "new_catalog_id",
    "new_intent_id",
    "open_shard",
    "partial_path",
    "publish",
    "publish_new",
    "publish_written",
    "shard_batches",
    "spill_dir",
    "shard_missing",
    "size_mismatch",
    "shard_name",
    "store_for",
    "write_error",
]


__getattr__, __dir__ = exports(__name__, _HOMES)
