"""A version's statistics from its shards' (catalog/commit/statistics.py): merged per version
and split, the shards without any found, statistics registered later once, checks' options."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog import Catalog
from catalog.commit.statistics import (
    DriftCheck,
    readable,
    register_stats,
    shards_without_stats,
    stored_stats,
    version_stats,
)
from catalog.errors import SplitNotFoundError, UsageError
from catalog.stats import DatasetStats

SCHEMA = {"features": {"x": {"dtype": "int64"}}}


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    return Catalog.init(tmp_path / "cat")


def test_version_stats_merge_the_shards_of_a_version_and_a_split(cat: Catalog) -> None:
    d = cat.register("d", SCHEMA)
    d.append_rows([{"x": 1}, {"x": 2}])
    d.append_rows([{"x": 3}], split="test")
    whole = version_stats(d)
    assert (whole.version, whole.records, whole.shards, whole.splits, whole.complete) == (
        3,
        3,
        2,
        ["test", "train"],
        True,
    )
    assert whole.stats.records == 3 and "x" in whole.stats.features
    test = version_stats(d, split="test")
    assert (test.split, test.records, test.stats.records) == ("test", 1, 1)
    assert version_stats(d, 2).records == 2  # an older version: its shards only
    with pytest.raises(SplitNotFoundError) as e:
        version_stats(d, split="validation")
    assert str(e.value) == "no split 'validation' in dataset 'd' version 3 (splits: test, train)"


def test_shards_written_without_statistics_are_found_and_registered_once(cat: Catalog) -> None:
    d = cat.register("d", SCHEMA)
    d.append_rows([{"x": 1}])  # with statistics
    cat.statistics = False
    d.append_rows([{"x": 2}, {"x": 3}])  # without
    missing = [shard for shard, _schema in shards_without_stats(d)]
    assert [(m.records, m.adopted) for m in missing] == [(2, False)]
    counted = version_stats(d)
    assert (counted.complete, counted.missing_shards, counted.missing_records) == (False, 1, 2)
    computed = DatasetStats(records=2).to_bytes()
    assert register_stats(d, {missing[0].rel: computed, "d/not-a-shard.tfrecord": computed}) == 1
    assert register_stats(d, {missing[0].rel: computed}) == 0  # already has good ones
    assert register_stats(d, {}) == 0
    assert shards_without_stats(d) == []
    assert stored_stats(d, [missing[0].rel])[missing[0].rel].records == 2


def test_stored_statistics_that_do_not_read_back_are_as_good_as_none() -> None:
    good = DatasetStats(records=4).to_bytes()
    assert readable(None, "d/a", 4) is None
    assert readable(b"not zlib", "d/a", 4) is None
    assert readable(good, "d/a", 5) is None  # counts other records than the shard's
    found = readable(good, "d/a", 4)
    assert found is not None and found.records == 4


def test_a_drift_check_takes_a_mode_and_a_distance_between_0_and_1() -> None:
    assert DriftCheck.asked(None, None) is None
    assert DriftCheck.asked(None, 0.2) == DriftCheck("fail", 0.2)
    assert DriftCheck.asked("warn", None) == DriftCheck("warn", None)
    with pytest.raises(UsageError) as e:
        DriftCheck("maybe")
    assert str(e.value) == "bad check mode 'maybe': fail or warn"
    for bad in (1.5, -0.1, True):
        with pytest.raises(UsageError) as e:
            DriftCheck("fail", bad)
        assert str(e.value) == f"--max-linf is a distance between 0 and 1, got {bad}"
