"""Split specs resolved exactly, by record count, against hand-computed boundaries (TFDS's
closest rounding: int(round(pct * n / 100)), then Python slice semantics)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.commit.slicing import resolve, validate_split
from catalog.errors import CatalogError

COUNTS = {"train": 1001, "test": 10, "validation": 7}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("train", [("train", 0, 1001)]),
        ("train[:90%]", [("train", 0, 901)]),  # 900.9 -> 901
        ("train[90%:]", [("train", 901, 1001)]),  # the complement, no record lost or doubled
        ("train[1000:2000]", [("train", 1000, 1001)]),  # clamped as Python slices are
        ("test[-5:]", [("test", 5, 10)]),
        ("test[-500:]", [("test", 0, 10)]),
        ("train[:10%]+validation", [("train", 0, 100), ("validation", 0, 7)]),  # 100.1 -> 100
        ("train[33.3%:66.6%]", [("train", 333, 667)]),  # 333.333 -> 333, 666.666 -> 667
        ("train[-1%:]", [("train", 991, 1001)]),  # -10.01 -> -10
        ("test[25%:75%]", [("test", 2, 8)]),  # 2.5 -> 2 and 7.5 -> 8 (round half to even)
        ("test[5:2]", [("test", 5, 5)]),  # empty, never negative
        ("all", [("test", 0, 10), ("train", 0, 1001), ("validation", 0, 7)]),
    ],
)
def test_specs_resolve_to_exact_record_ranges(spec: str, expected: list[tuple[str, int, int]]) -> None:
    assert [(s.split, s.start, s.stop) for s in resolve(spec, COUNTS)] == expected


def test_percent_slices_partition_the_split() -> None:
    for n in range(0, 300):
        cuts = [sl for pct in range(0, 100, 10) for sl in resolve(f"train[{pct}%:{pct + 10}%]", {"train": n})]
        assert sum(s.records for s in cuts) == n
        assert all(a.stop == b.start for a, b in itertools.pairwise(cuts))


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("nope", "no split 'nope' in 'nope' (splits: test, train, validation)"),
        ("train[:x]", "cannot read 'train[:x]'"),
        ("train[10:50%]", "both boundaries"),
        ("", "bad split ''"),
        ("train+", "bad split 'train+'"),
        ("all[:5]", "'all' takes no slice"),
        ("train[:101%]", "beyond 100%"),
        ("train[1.5:]", "not a whole record number"),
    ],
)
def test_bad_specs_say_what_exists(spec: str, says: str) -> None:
    with pytest.raises(CatalogError, match=None) as e:
        resolve(spec, COUNTS)
    assert says in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["all", "train[:5]", "a+b", "", "x" * 65, ".hidden"])
def test_split_names_that_would_not_parse_are_refused(name: str) -> None:
    with pytest.raises(CatalogError, match="bad split name"):
        validate_split(name)
    assert validate_split("validation_2") == "validation_2"


# --------------------------------------------------------------------------- bounded input

DIGITS = "9" * 5000  # Python 3.11 refuses int() of more than 4,300 digits: a ValueError


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (f"train[:{DIGITS}]", "bad split 'train[:99999"),
        (f"train[{DIGITS}:]", "at character 7: a number of 5,000 digits (at most 18)"),
        (f"train[:{DIGITS}]", "at character 8: a number of 5,000 digits (at most 18)"),
        (f"train[:{DIGITS}%]", "at character 8: a number of 5,000 digits (at most 18)"),
        (f"train[:0.{DIGITS}%]", "at character 10: a number of 5,000 digits after its point (at most 18)"),
        (f"test+train[{DIGITS}:]", "at character 12:"),
        ("train[:٣]", "at character 8: expected a number, ':' or ']'"),  # int() takes Arabic-Indic digits
        ("train[:5]x", "at character 10: expected '+' or the end"),
        ("train[:5", "at character 9: expected ']'"),
        ("tr ain", "cannot read 'tr ain' at character 4: expected '+' or the end"),
        ("train(x)", "cannot read 'train(x)' at character 6: expected '[', '+' or the end"),
        ("[:5]", "at character 1: expected a split name"),
        ("x" * 100, "at character 65: a split name of more than 64 characters"),
        ("train+" * 1000 + "train", "a split of 6,005 characters (at most 4,096)"),
    ],
)
def test_hostile_specs_are_one_bounded_line_naming_the_position(spec: str, says: str) -> None:
    """A 5,000-digit bound was a ValueError traceback in `cat` and a 500 in the viewer."""
    with pytest.raises(CatalogError) as e:
        resolve(spec, COUNTS)
    message = str(e.value)
    assert says in message, message
    assert "\n" not in message and len(message) < 300


def test_a_record_number_of_18_digits_is_still_a_number() -> None:
    assert [(s.start, s.stop) for s in resolve("train[:999999999999999999]", COUNTS)] == [(0, 1001)]
    assert [(s.start, s.stop) for s in resolve(" train[-5:] + test ", COUNTS)] == [(996, 1001), (0, 10)]


# --------------------------------------------------------------------------- properties

SPLITS = ["train", "test", "validation"]
_number = st.integers(-(10**6), 10**6)
_pct = st.one_of(
    st.integers(-100, 100).map(str),
    st.decimals(-100, 100, places=3, allow_nan=False, allow_infinity=False).map(lambda d: f"{d:f}"),
)


@st.composite
def _specs(draw: st.DrawFn) -> tuple[str, list[tuple[str, int | None, int | None, bool]]]:
    """A valid spec and what it says: per part, a split and its two bounds (None: open)."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        name, pct = draw(st.sampled_from(SPLITS)), draw(st.booleans())
        bounds = [draw(st.none() | (_pct if pct else _number.map(str))) for _ in range(2)]
        sliced = draw(st.booleans()) or any(b is not None for b in bounds)
        parts.append((name, bounds[0], bounds[1], pct, sliced))
    text = "+".join(
        name + (f"[{'' if a is None else a + '%' * pct}:{'' if b is None else b + '%' * pct}]" if sliced else "")
        for name, a, b, pct, sliced in parts
    )
    return text, [(name, a, b, pct) for name, a, b, pct, _ in parts]


def _expected(parts: list[tuple[str, Any, Any, bool]], counts: dict[str, int]) -> list[tuple[str, int, int]]:
    """The documented semantics (README, module docstring): percent bounds to the closest record,
    int(round(pct * n / 100)); then Python's slice semantics on the split's records."""
    out = []
    for name, a, b, pct in parts:
        n = counts[name]
        bound = [None if x is None else (round(float(x) * n / 100.0) if pct else int(x)) for x in (a, b)]
        kept = range(n)[bound[0] : bound[1]]
        out.append((name, kept.start, max(kept.start, kept.stop)))
    return out


@given(st.text(max_size=60) | st.text(alphabet="train[]:%.-+0123456789 ", max_size=40))
@settings(max_examples=400, deadline=None)
def test_any_text_is_slices_or_a_catalog_error(text: str) -> None:
    try:
        got = resolve(text, COUNTS)
    except CatalogError as e:
        assert "\n" not in str(e)
        return
    assert all(0 <= s.start <= s.stop <= COUNTS[s.split] for s in got)


@given(_specs(), st.fixed_dictionaries({s: st.integers(0, 5000) for s in SPLITS}))
@settings(max_examples=400, deadline=None)
def test_valid_specs_resolve_as_documented(spec: Any, counts: dict[str, int]) -> None:
    text, parts = spec
    assert [(s.split, s.start, s.stop) for s in resolve(text, counts)] == _expected(parts, counts)
