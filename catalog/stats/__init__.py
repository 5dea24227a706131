"""Feature statistics: computed as shards are written, kept in the manifest, merged per
version and split without reading data (sketches from Apache DataSketches)."""

from catalog.stats.dataset import DatasetStats, merged
from catalog.stats.sketches import FeatureStats, Moments
from catalog.stats.tally import Tally, feature_kind

__all__ = ["DatasetStats", "FeatureStats", "Moments", "Tally", "feature_kind", "merged"]
