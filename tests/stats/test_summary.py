"""catalog.stats.summary: a feature's statistics as the figures a person reads."""

from __future__ import annotations

import pytest

from catalog.schema import Schema
from catalog.stats.summary import QUANTILES, shown_value, summary
from catalog.stats.tally import Tally


def _features(doc: dict[str, object], rows: list[dict[str, object]]) -> dict[str, object]:
    schema = Schema.from_json({"features": doc})
    tally = Tally(schema, helper=False)
    tally.add_records(schema.encode(r) for r in rows)
    return tally.result().features  # type: ignore[return-value]


def test_a_numeric_features_summary() -> None:
    rows = [{"x": 0.0}, {"x": 3.0}, {"x": float("nan")}, {"x": float("inf")}, {}]
    feats = _features({"x": {"dtype": "float32", "optional": True}}, rows)
    out = summary(feats["x"])  # type: ignore[arg-type]
    assert (out["feature"], out["kind"], out["records"], out["present"], out["missing"]) == ("x", "float", 5, 4, 1)
    assert out["missing_rate"] == 0.2
    assert (out["values"]["nans"], out["values"]["infs"], out["values"]["zeros"]) == (1, 1, 1)
    assert (out["values"]["count"], out["values"]["min"], out["values"]["max"]) == (2, 0.0, 3.0)  # finite values
    assert list(out["quantiles"]) == [str(q) for q in QUANTILES]
    assert out["quantiles"]["0.0"] == 0.0 and out["quantiles"]["1.0"] == 3.0
    assert sum(c for _lo, _hi, c in out["histogram"]) == pytest.approx(2)
    assert "distinct" not in out and "value_lengths" not in out


def test_text_and_labels_show_lengths_and_top_values() -> None:
    feats = _features(
        {"w": {"dtype": "string", "shape": [None]}, "label": {"dtype": "int64", "names": ["cat", "dog"]}},
        [{"w": ["ab", "ab"], "label": 1}, {"w": [""], "label": 1}, {"w": [], "label": 0}],
    )
    words = summary(feats["w"])  # type: ignore[arg-type]
    assert words["value_lengths"]["empty"] == 1 and words["value_lengths"]["max"] == 2
    assert words["list_lengths"]["max"] == 2 and words["list_lengths"]["min"] == 0
    assert words["top_values"][0] == {"value": "ab", "count": 2}
    labels = summary(feats["label"], names=("cat", "dog"))  # type: ignore[arg-type]
    assert labels["top_values"] == [{"value": "1 (dog)", "count": 2}, {"value": "0 (cat)", "count": 1}]
    assert labels["distinct"] == 2


def test_shown_value_of_bytes_and_labels() -> None:
    feats = _features({"b": {"dtype": "bytes"}, "n": {"dtype": "int64"}}, [{"b": b"x", "n": 1}])
    assert shown_value(feats["b"], "caf\u00c3\u00a9") == "café"  # type: ignore[arg-type]  # UTF-8 bytes as text
    assert shown_value(feats["b"], "\u00ff\u00fe") == "//4="  # type: ignore[arg-type]  # else base64
    assert shown_value(feats["n"], "1", ("a", "b")) == "1 (b)"  # type: ignore[arg-type]
    assert shown_value(feats["n"], "5", ("a", "b")) == "5"  # type: ignore[arg-type]  # no such class
    assert shown_value(feats["n"], "-1", ("a", "b")) == "-1"  # type: ignore[arg-type]
