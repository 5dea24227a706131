"""The content check: a registered file that others can write is read only while its bytes
are the ones registered.

The catalog writes its own shards under names nobody else is given; readers check their size
and every record's CRCs. An adopted file (``catalog adopt``: the user's own path or object)
and a hard-linked input (``--link``: the user keeps a second name for the same inode) can be
rewritten in place with valid records of the same size, which those checks do not see. So
such a shard's registration keeps a fingerprint of its file (``shards.fingerprint``):

- a local file: ``stat:`` size, inode, mtime and ctime (ns). Writing a file or moving another
  into its place changes its mtime or inode, and ctime cannot be set back by anyone;
- an object: ``etag:`` its ETag (or version id, generation), which changes with every write.

Before a reader serves a record it compares the file's fingerprint now with the registered
one (one fstat, or the HEAD it does anyway for the size). Equal: the file is as registered.
Different (touched, copied back from a backup, or rewritten): the whole file is checksummed,
once per process for that fingerprint, and compared with the registered checksum; a different
checksum is a CorruptShardError naming the file, before any of its records is read.

``owned``: a file the catalog wrote (no check beyond size and CRCs). ``unchecked``: a shared
file whose fingerprint could not be trusted (changed within the clock tick of its
registration, or an object store that gives no ETag): checksummed once per process. NULL (a
shard registered before manifest format 8): checked as ``unchecked`` when adopted or when its
file has another name (a link count above 1), else as ``owned``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from catalog.storage.fileio import file_io
from catalog.storage.files import OWNED, content_changed, file_checksum

UNCHECKED = "unchecked"
# A file whose last change is this close to the fingerprint taken of it may change again in
# the same timestamp tick, keeping every stat field (Linux stamps files with a clock that
# ticks every 1-10 ms): its fingerprint is not trusted.
RACY_NS = 50_000_000
# What an object store's listing calls the token that changes with each write, most exact first.
_OBJECT_TAGS = ("VersionId", "version_id", "generation", "ETag", "etag", "md5Hash")

# (file, its fingerprint now) whose whole checksum this process found equal to the registered one.
_VERIFIED: set[tuple[str, str]] = set()


def forget() -> None:
    """Forget what this process verified (tests; a long-lived process may call it too)."""
    _VERIFIED.clear()


def stat_fingerprint(st: os.stat_result) -> str:
    return f"stat:{st.st_size}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def object_fingerprint(info: Mapping[str, Any]) -> str | None:
    """An object's write token from its fsspec ``info()``; None when the store gives none."""
    for key in _OBJECT_TAGS:
        value = info.get(key)
        if value not in (None, ""):
            return f"etag:{str(value).strip(chr(34))}"
    return None


def observe(url: str, f: Any = None) -> tuple[str | None, int | None]:
    """A file's fingerprint now (``f``: it, open, else found by its name) and, for a local
    file, when it last changed (ns); None for an object store that gives no write token."""
    facts = file_io(url).stat(url, f)
    if not isinstance(facts, os.stat_result):
        return object_fingerprint(facts), None
    return stat_fingerprint(facts), max(facts.st_mtime_ns, facts.st_ctime_ns)


def to_register(seen: tuple[str | None, int | None]) -> str:
    """The fingerprint to register for a file just checked (``seen``: :func:`observe` after the
    check): UNCHECKED when there is none, or while its last change is within RACY_NS of now."""
    fingerprint, changed_ns = seen
    if fingerprint is None or (changed_ns is not None and time.time_ns() - changed_ns < RACY_NS):
        return UNCHECKED
    return fingerprint


def needs_check(fingerprint: str | None, adopted: bool, links: int = 1) -> bool:
    """Whether a registered file is one others can write (see the module's rules)."""
    if fingerprint is None:
        return adopted or links > 1
    return fingerprint != OWNED


def check(url: str, now: str | None, checksum: str, fingerprint: str | None) -> None:
    """The content check of a file that needs one (``now``: its fingerprint as just read;
    None: none to compare): returns when the file is as registered, else raises."""
    if now is not None and now == fingerprint:
        return
    seen = (url, now or UNCHECKED)  # an object with no write token: checksummed once per process
    if seen in _VERIFIED:
        return
    found = checksum_of(url)
    if found != checksum:
        raise content_changed(url, checksum, found)
    _VERIFIED.add(seen)


def check_local(url: str, st: os.stat_result, checksum: str, fingerprint: str | None, adopted: bool) -> None:
    """The content check of a local file just opened or stat'ed (``st``)."""
    if needs_check(fingerprint, adopted, st.st_nlink):
        check(url, stat_fingerprint(st), checksum, fingerprint)


def check_object(url: str, info: Mapping[str, Any], checksum: str, fingerprint: str | None, adopted: bool) -> None:
    """The content check of an object whose ``info()`` (its HEAD) was just read."""
    if needs_check(fingerprint, adopted):
        check(url, object_fingerprint(info), checksum, fingerprint)


def check_named(url: str, checksum: str, fingerprint: str | None, adopted: bool) -> None:
    """The content check of a registered file found by its name (one stat or HEAD), before a
    rewrite (migration, compaction) reads it; a missing file is left to the read to report."""
    if fingerprint == OWNED and not adopted:
        return
    try:
        facts = file_io(url).stat(url)
        if isinstance(facts, os.stat_result):
            check_local(url, facts, checksum, fingerprint, adopted)
        else:
            check_object(url, facts, checksum, fingerprint, adopted)
    except FileNotFoundError:
        return


def checksum_of(url: str) -> str:
    return file_checksum(url)[1]
