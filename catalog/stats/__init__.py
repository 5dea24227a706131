"""Feature statistics: computed as shards are written, kept in the manifest, merged per
version and split without reading data (sketches from Apache DataSketches).

The names below load on first use (PEP 562): a module that needs only the statistics
helper's switch (``catalog.executors``, which every verb running jobs imports, verify's among
them) does not load the sketches and the tally.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from catalog.lazy import exports

if TYPE_CHECKING:
    from catalog.stats.dataset import DatasetStats, merged
    from catalog.stats.sketches import FeatureStats, Moments
    from catalog.stats.tally import Tally, feature_kind

_HOMES = {
    "DatasetStats": "catalog.stats.dataset",
    "merged": "catalog.stats.dataset",
    "FeatureStats": "catalog.stats.sketches",
    "Moments": "catalog.stats.sketches",
    "Tally": "catalog.stats.tally",
    "feature_kind": "catalog.stats.tally",
}
__getattr__, __dir__ = exports(__name__, _HOMES)

__all__ = ["DatasetStats", "FeatureStats", "Moments", "Tally", "feature_kind", "merged"]
