"""catalog.stats.drift: the L-infinity distance (TFDV's) between two features' statistics, and
the checks `append --check` applies. Properties that hold for any data, against figures worked
out by hand from the values themselves."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.schema import Schema
from catalog.stats import FeatureStats, Tally
from catalog.stats.drift import check, linf, missing_rate

SCHEMA = Schema.from_json(
    {"features": {"x": {"dtype": "float32", "optional": True}, "word": {"dtype": "string", "default": ""}}}
)


def stats(rows: list[dict[str, Any]]) -> dict[str, FeatureStats]:
    tally = Tally(SCHEMA, helper=False)
    tally.add_records(SCHEMA.encode(r) for r in rows)
    return tally.result().features


def words(counts: dict[str, int]) -> dict[str, FeatureStats]:
    return stats([{"x": 0.0, "word": w} for w, n in counts.items() for _ in range(n)])


def test_categorical_distance_is_the_largest_frequency_gap() -> None:
    a = words({"cat": 6, "dog": 4})
    b = words({"cat": 3, "dog": 3, "eel": 4})
    # frequencies: cat .6 -> .3, dog .4 -> .3, eel 0 -> .4: the largest gap is 0.4
    assert abs(linf(a["word"], b["word"]) - 0.4) < 1e-9  # type: ignore[operator]
    assert linf(a["word"], a["word"]) == 0.0


def test_numbers_that_share_no_value_are_one_apart_and_equal_ones_zero() -> None:
    low = stats([{"x": float(v)} for v in range(100)])
    high = stats([{"x": float(v)} for v in range(1000, 1100)])
    assert linf(low["x"], high["x"]) == 1.0
    assert linf(low["x"], low["x"]) == 0.0


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(-50, 50), min_size=1, max_size=60),
    st.lists(st.integers(-50, 50), min_size=1, max_size=60),
)
def test_the_distance_is_symmetric_and_between_zero_and_one(xs: list[int], ys: list[int]) -> None:
    a, b = stats([{"x": float(v)} for v in xs])["x"], stats([{"x": float(v)} for v in ys])["x"]
    d = linf(a, b)
    assert d is not None and 0.0 <= d <= 1.0
    assert abs(d - linf(b, a)) < 1e-9  # type: ignore[operator]
    # the exact Kolmogorov-Smirnov statistic of the two samples, from the values themselves
    grid = sorted(set(xs) | set(ys))
    exact = max(abs(np.mean(np.array(xs) <= g) - np.mean(np.array(ys) <= g)) for g in grid)
    assert abs(d - exact) < 0.05  # small samples: the sketches hold every value


def test_missing_rate_counts_the_records_without_a_value() -> None:
    fs = stats([{"x": 1.0}, {"word": "a"}, {"x": 2.0, "word": "b"}, {}])
    assert missing_rate(fs["x"]) == 0.5  # two of four records have no x
    # the default was written into the records: read back, it is a value (the writer alone
    # knows it filled it, and says so: see test_stats)
    assert missing_rate(fs["word"]) == 0.0


def test_checks_report_only_what_is_broken() -> None:
    current = stats([{"x": float(v)} for v in range(100)])["x"]
    new = stats([{"x": float(v)} for v in range(50, 150)])["x"]
    broken = check("x", new, current, {"max": 120.0, "linf": 0.9}, None)
    assert [(v.check, v.found, v.limit) for v in broken] == [("max", 149.0, 120.0)]
    assert broken[0].message() == "feature 'x': maximum 149 is above the limit 120"
    assert [v.check for v in check("x", new, current, {"linf": 0.1}, None)] == ["linf"]
