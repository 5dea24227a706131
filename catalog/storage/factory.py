"""The one place that picks a data area's implementation from its root: a path or a URL."""

from __future__ import annotations

import os

from catalog.storage.base import Store
from catalog.storage.fileio import file_io
from catalog.storage.local import LocalStore
from catalog.storage.remote import FsspecStore


def store_for(root: str | os.PathLike[str]) -> Store:
    """The data area at ``root``: an fsspec URL (``s3://bucket/prefix``), else a local directory."""
    text = os.fspath(root)
    return FsspecStore(text) if file_io(text).remote else LocalStore(text)
