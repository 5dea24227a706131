"""The commit layer (see ARCHITECTURE.md), bottom to top: `values` (what callers get back),
`listing` (the datasets' summary, from the manifest alone), `handles` (the manifest's read
side: live shards, snapshots, history), `intents` (write intents and their heartbeat) and
`protocol` (the one commit protocol every change goes through). Import the module you
need: this package imports none of them, so the light ones stay light; the names below
load their module on first use (PEP 562), for a module that needs one only sometimes
(gc's ``drop_dataset``: verify, beside it in ops.maintenance, never commits)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from catalog.lazy import exports

if TYPE_CHECKING:
    from catalog.commit.protocol import drop_dataset

_HOMES = {"drop_dataset": "catalog.commit.protocol"}

__all__ = ["drop_dataset"]

__getattr__, __dir__ = exports(__name__, _HOMES)
