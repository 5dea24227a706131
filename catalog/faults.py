"""Fault points: the named moments of the write path where the crash, kill and interrupt
tests stop, gate or kill a writer (see ARCHITECTURE.md, "The commit protocol").

A point is one call, ``faults.point(NAME, **info)``; with no hook installed it costs a
global lookup. A test installs a hook, ``faults.install(hook)``, in its own process or in
the child it runs, and the hook sees every point by name with what is known there. The
names below are a contract the tests rely on, kept through refactors:

- ``intent.recorded``: a writer's intent is committed; no file of it exists yet
  (info: ``intent``, the intent id).
- ``append.closing``: an append's rows are all written; its last shard is about to be
  published and the commit to begin (info: ``intent``).
- ``shard.closing``: a shard's records are all written to its temporary file, not yet
  flushed, fsynced or published (info: ``temp``, its path; ``records``; ``flush``, to push
  the buffered bytes into the file first).
- ``index.closing``: a shard's record index is written to its temporary file, not yet
  flushed, fsynced or published (info: ``temp``; ``shard``, the shard's path in the data
  area; ``flush``).
- ``index.written``: ``catalog index`` (or a reader building indexes) has published index
  files; the manifest does not register them yet (info: ``shards``, their paths).
- ``dedup.spilled``: a dedup's scan has written every shard's hash entries to its spill
  directory; no duplicate is marked, no intent recorded yet (info: ``folder``).
- ``commit.before``: every new shard is published; the commit transaction has not begun
  (info: ``change``, the Change about to be committed).
- ``commit.after``: the commit is durable; the caller has not been told yet
  (info: ``commit``, the Commit).
- ``gc.read``: gc has listed the data area and read the manifest; nothing is deleted yet
  (info: ``dead``, the intents it found dead).
- ``verify.listed``: verify has listed the data area; it has not read the manifest yet.
- ``export.written``: export's temporary file holds every record; it is not yet published
  (info: ``target``).
- ``backup.write``: backup's temporary file is named, nothing is written (info: ``target``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Hook = Callable[[str, dict[str, Any]], None]

POINTS = (
    "intent.recorded", "shard.closing", "append.closing", "index.closing", "index.written", "dedup.spilled",
    "commit.before", "commit.after",
    "gc.read", "verify.listed", "export.written", "backup.write",
)  # fmt: skip

_hook: Hook | None = None


def install(hook: Hook | None) -> Hook | None:
    """Make ``hook`` see every fault point (None: none); returns the hook it replaces."""
    global _hook
    previous, _hook = _hook, hook
    return previous


def point(name: str, **info: Any) -> None:
    if _hook is not None:
        _hook(name, info)
