"""The one place that picks a data area's implementation from its root: a path or a URL."""

from __future__ import annotations

import os

from catalog.storage.base import Store
from catalog.storage.local import LocalStore
from catalog.storage.remote import FsspecStore
from catalog.tfrecord.sources import is_url


def store_for(root: str | os.PathLike[str]) -> Store:
    """The data area at ``root``: an fsspec URL (``s3://bucket/prefix``), else a local directory."""
    text = os.fspath(root)
    return FsspecStore(text) if is_url(text) else LocalStore(text)
