"""The commit layer: values, handles on the manifest's read side, write intents and the
one commit protocol every change goes through (see ARCHITECTURE.md)."""

from catalog.commit.handles import CatalogHandle, DatasetHandle, LiveShard, Snapshot, snapshot
from catalog.commit.intents import Intent
from catalog.commit.protocol import Change, LiveChanged, NewShard, commit
from catalog.commit.values import Commit, DatasetInfo, GcReport, Problem, Progress, ShardInfo, VerifyReport

__all__ = [
    "CatalogHandle", "Change", "Commit", "DatasetHandle", "DatasetInfo", "GcReport", "Intent", "LiveChanged",
    "LiveShard", "NewShard", "Problem", "Progress", "ShardInfo", "Snapshot", "VerifyReport", "commit", "snapshot",
]  # fmt: skip
