"""The `--where` language (catalog/schema/predicates.py): generated expressions against a Python
evaluation of the same rows written here (SQL's three-valued logic, Python's exact number
comparisons), the errors a user meets, and arbitrary text never failing otherwise."""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog.errors import PredicateError, UsageError
from catalog.schema import Schema
from catalog.schema.predicates import Predicate, parse, tokenize

NAMES = ["cat", "dog", "bird"]
SCHEMA = Schema.from_json(
    {
        "features": {
            "x": {"dtype": "int64", "shape": []},
            "f": {"dtype": "float32", "shape": []},
            "s": {"dtype": "string", "shape": []},
            "b": {"dtype": "bytes", "shape": []},
            "o": {"dtype": "float32", "shape": [], "optional": True},
            "v": {"dtype": "int64", "shape": [None]},
            "label": {"dtype": "int64", "shape": [], "names": NAMES},
            "odd name": {"dtype": "int64", "shape": []},
        }
    }
)
TEXTS = ["", "a", "b", "ab", "é", "a b", "'", "Z"]
NUMBERS = [0, 1, -1, 2, 3, 7, 2.5, -0.5, 0.1, 1e30, -1e30, 2**63, -(2**63) - 1, 100]

rows = st.fixed_dictionaries(
    {
        "x": st.integers(-3, 8) | st.sampled_from([2**63 - 1, -(2**63)]),
        "f": st.sampled_from([0.0, 0.1, 2.5, -1.0, 3.0, 1e30, math.nan]) | st.floats(-10, 10, width=32),
        "s": st.sampled_from(TEXTS),
        "b": st.sampled_from(TEXTS).map(str.encode),
        "o": st.none() | st.sampled_from([0.1, 2.5, -1.0]),
        "v": st.lists(st.integers(-5, 5), max_size=4),
        "label": st.integers(0, len(NAMES) - 1),
        "odd name": st.integers(0, 3),
    }
)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _number(n: Any) -> str:
    return repr(n) if isinstance(n, float) else str(n)


# An expression here is (text, function of a row -> True/False/None), None being "unknown".
def _compare(feature: str, op: str, literal: Any) -> tuple[str, Any]:
    ops = {
        "=": operator.eq,
        "!=": operator.ne,
        "<": operator.lt,
        "<=": operator.le,
        ">": operator.gt,
        ">=": operator.ge,
    }

    def value_of(row: dict[str, Any]) -> Any:
        if feature.startswith("len("):
            return len(row[feature[4:-1]])
        return row[feature]

    def holds(row: dict[str, Any]) -> bool | None:
        v = value_of(row)
        if v is None:
            return None
        want = literal
        if feature in ("f", "o"):  # float32 both sides
            v, want = float(np.float32(v)), float(np.float32(want))
        elif feature == "b":
            want = literal.encode()
        elif feature == "label" and isinstance(literal, str):
            want = NAMES.index(literal)
        return bool(ops[op](v, want))

    shown = _quote(literal) if isinstance(literal, str) else _number(literal)
    name = "`odd name`" if feature == "odd name" else feature
    return f"{name} {'==' if op == '=' and len(shown) % 2 else op} {shown}", holds


@st.composite
def simple_tests(draw: st.DrawFn) -> tuple[str, Any]:
    feature = draw(st.sampled_from(["x", "f", "s", "b", "o", "len(v)", "label", "odd name"]))
    op = draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
    if feature in ("s", "b"):
        literal: Any = draw(st.sampled_from(TEXTS))
    elif feature == "label":
        literal = draw(st.sampled_from(NAMES) | st.integers(-1, 3))
    else:
        literal = draw(st.sampled_from(NUMBERS))
    if draw(st.booleans()) and feature != "len(v)":
        return _membership(draw, feature, literal)
    if feature == "o" and draw(st.integers(0, 4)) == 0:
        negated = draw(st.booleans())
        return f"o IS {'NOT ' if negated else ''}NULL", lambda row: (row["o"] is None) != negated
    return _compare(feature, op, literal)


def _membership(draw: st.DrawFn, feature: str, first: Any) -> tuple[str, Any]:
    pool = TEXTS if feature in ("s", "b") else NAMES if feature == "label" and isinstance(first, str) else NUMBERS
    literals = [first, *draw(st.lists(st.sampled_from(pool), max_size=3))]
    negated = draw(st.booleans())
    parts = [_compare(feature, "=", lit) for lit in literals]

    def holds(row: dict[str, Any]) -> bool | None:
        found = [p(row) for _, p in parts]
        if any(f is None for f in found):
            return None
        return any(found) != negated

    shown = ", ".join(_quote(v) if isinstance(v, str) else _number(v) for v in literals)
    name = "`odd name`" if feature == "odd name" else feature
    return f"{name} {'NOT IN' if negated else 'IN'} ({shown})", holds


def _kleene_and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _kleene_or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


expressions = st.recursive(
    simple_tests(),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(
            lambda ab: (f"({ab[0][0]}) AND ({ab[1][0]})", lambda r: _kleene_and(ab[0][1](r), ab[1][1](r)))
        ),
        st.tuples(inner, inner).map(
            lambda ab: (f"({ab[0][0]}) or ({ab[1][0]})", lambda r: _kleene_or(ab[0][1](r), ab[1][1](r)))
        ),
        inner.map(lambda a: (f"NOT ({a[0]})", lambda r: None if a[1](r) is None else not a[1](r))),
    ),
    max_leaves=6,
)


def _batch(schema: Schema, written: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """The columns a reader gives for these rows: written as records and decoded back."""
    return schema.decode_batch([schema.encode(row) for row in written])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rows, min_size=1, max_size=12), expressions)
def test_generated_expressions_match_a_python_evaluation_of_the_same_rows(written, expression):
    text, reference = expression
    batch = _batch(SCHEMA, written)
    read = [{name: batch[name][i] for name in batch} for i in range(len(written))]
    expected = [reference(row) is True for row in read]
    predicate = Predicate(text, SCHEMA)
    assert predicate.mask(batch).tolist() == expected, text
    assert [predicate.matches(row) for row in read] == expected, text


@settings(max_examples=500, deadline=None)
@given(
    st.text(max_size=60)
    | st.lists(st.sampled_from(["x", "=", "(", ")", "AND", "'a'", "1", "NOT", "IN", ","])).map(" ".join)
)
def test_any_text_is_an_expression_or_one_predicate_error(text):
    try:
        Predicate(text, SCHEMA)
    except PredicateError as e:
        assert "\n" not in str(e) or "\n" in text
        assert 0 <= e.at <= len(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x >", "at character 4: expected a value (a number, a 'quoted' text, true or false), found the end"),
        ("y = 1", "at character 1: no feature 'y' in the schema (it has x, f, s, b, o, v, label, odd name)"),
        ("s = 3", "at character 5: s holds text: compare it with a 'quoted' text, not 3"),
        ("label = 'cow'", "at character 9: 'cow' is not a class name of label (cat, dog, bird)"),
        ("v = 1", "at character 1: feature 'v' holds a list of values: compare len(v)"),
        ("len(x) > 1", "at character 1: len(x): feature 'x' holds one value, not a list"),
        ("x IS NULL", "at character 1: feature 'x' always has a value: only optional features are null"),
        ("x = NULL", "at character 5: expected a value (IS NULL tests for an absent value), found 'NULL'"),
        ("(x = 1", "at character 7: expected ')', found the end"),
        ("x = 1 y", "at character 7: expected AND, OR or the end, found 'y'"),
        ("x ~ 1", "at character 3: unexpected '~'"),
        ("   ", "at character 1: expected an expression, found nothing"),
        ("x IN 1", "at character 6: expected '(', found '1'"),
        ("x = \uff19", "at character 5: unexpected '\uff19'"),  # a fullwidth 9: digits are ASCII, as names are
        ("x = 1\u0663", "at character 6: unexpected '\u0663'"),  # an Arabic-Indic 3
    ],
)
def test_errors_name_the_character_and_what_was_expected(text, message):
    with pytest.raises(PredicateError) as caught:
        Predicate(text, SCHEMA)
    assert str(caught.value) == f"where {text!r}: {message}"
    assert isinstance(caught.value, UsageError)


def test_deep_nesting_and_long_text_are_refused_in_one_line():
    with pytest.raises(PredicateError, match="at most 64 nested parentheses"):
        parse("(" * 10_000 + "x = 1" + ")" * 10_000)
    with pytest.raises(PredicateError, match="at most 65,536 characters"):
        parse("x = 1 OR " * 10_000 + "x = 2")
    with pytest.raises(UsageError, match="a predicate is a string or a function, not int"):
        parse(3)  # type: ignore[arg-type]


def test_keywords_are_any_case_and_names_can_be_quoted():
    kinds = [(t.kind, t.text) for t in tokenize("`odd name` in (1) And NOT x Is nUlL")]
    assert kinds[0] == ("quoted", "`odd name`")
    assert [k for k, _ in kinds].count("keyword") == 5
    batch = _batch(SCHEMA, [dict(zip(SCHEMA.features, (1, 0.5, "a", b"a", None, [1], 0, 1), strict=True))])
    assert Predicate("`odd name` in (1) AND not s = 'b'", SCHEMA).mask(batch).tolist() == [True]


def test_a_float32_feature_finds_the_values_written_as_the_literal():
    batch = _batch(
        SCHEMA, [dict(zip(SCHEMA.features, (0, v, "", b"", None, [], 0, 0), strict=True)) for v in (0.1, 0.2)]
    )
    assert Predicate("f = 0.1", SCHEMA).mask(batch).tolist() == [True, False]
    assert Predicate("f <= 0.1", SCHEMA).mask(batch).tolist() == [True, False]


def test_predicates_read_only_the_features_they_name():
    p = Predicate("label = 'dog' OR len(v) > 2 AND o IS NOT NULL", SCHEMA)
    assert p.features == ("label", "o", "v")


# ---- may_match: what a shard's statistics rule out (data skipping)


def _ranges(written: list[dict[str, Any]]) -> dict[str, Any]:
    """The ranges a shard of these rows has: its statistics, as a writer tallies them."""
    from catalog.stats import Tally

    tally = Tally(SCHEMA, helper=False)
    tally.add_records([SCHEMA.encode(row) for row in written])
    return tally.result().ranges()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rows, min_size=1, max_size=12), expressions)
def test_may_match_never_rules_out_rows_that_match(written, expression):
    text, _reference = expression
    predicate = Predicate(text, SCHEMA)
    if predicate.mask(_batch(SCHEMA, written)).any():
        assert predicate.may_match(_ranges(written)), text


RANGES = {"id": (1000, 2000, 0, 10), "x": (0.5, 3.0, 0, 10), "o": (None, None, 10, 10), "p": (1, 4, 3, 10)}
RANGE_SCHEMA = Schema.from_json(
    {
        "features": {
            "id": {"dtype": "int64"},
            "x": {"dtype": "float32"},
            "o": {"dtype": "int64", "optional": True},
            "p": {"dtype": "int64", "optional": True},
            "s": {"dtype": "string"},
            "t": {"dtype": "string", "shape": [None]},
        }
    }
)


@pytest.mark.parametrize(
    ("text", "may"),
    [
        ("id IN (5, 9)", False),
        ("id IN (5, 1500)", True),
        ("id = 3", False),
        ("id = 1000", True),
        ("id < 1000", False),
        ("id <= 1000", True),
        ("NOT id < 5000", False),
        ("id != 1000", True),
        ("id NOT IN (5)", True),
        ("id = 1500.5", True),  # conservative: no integer is 1500.5, but it lies in the range
        ("x > 3", False),
        ("x >= 3", True),
        ("x = 0.1", False),
        ("o IS NULL", True),
        ("o IS NOT NULL", False),
        ("o = 3", False),  # no value at all: unknown, never true
        ("NOT o = 3", False),
        ("p IS NULL AND p IS NOT NULL", True),  # conservative: each part may hold, of some record
        ("p > 4 OR p IS NULL", True),
        ("p > 4", False),
        ("id = 5 OR x > 1", True),
        ("id = 5 AND x > 1", False),
        ("s = 'a'", True),  # no range kept of texts
        ("s = 'a' AND id = 5", False),
        ("s = 'a' OR id = 5", True),
        ("len(t) > 2", True),  # nor of lengths
    ],
)
def test_may_match_rules_out_only_what_the_ranges_exclude(text, may):
    assert Predicate(text, RANGE_SCHEMA).may_match(RANGES) is may


def test_may_match_without_ranges_or_with_inexact_ones_says_maybe():
    predicate = Predicate("id = 5 AND x < 0", RANGE_SCHEMA)
    assert predicate.may_match({}) is True
    assert predicate.may_match({"id": (None, None, 0, 10)}) is True
    assert predicate.may_match({"id": (1.5, 9.0, 0, 10)}) is True  # not int64 values: not trusted
    assert predicate.may_match({"x": (0.1, 1.0, 0, 10)}) is True  # 0.1 is no float32 value
    assert predicate.may_match({"x": (0.5, 1.0, 0, 10)}) is False
    assert predicate.may_match({"id": (0, 3, 0, 0)}) is False  # no records: nothing matches


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(rows, min_size=0, max_size=12))
def test_ranges_read_from_stored_statistics_are_the_statistics_ranges(written):
    from catalog.stats import Tally
    from catalog.stats.dataset import stored_ranges

    tally = Tally(SCHEMA, helper=False)
    tally.add_records([SCHEMA.encode(row) for row in written])
    stats = tally.result()
    assert stored_ranges(stats.to_bytes(), len(written)) == stats.ranges()
    assert stored_ranges(stats.to_bytes(), len(written) + 1) is None  # not this shard's count
    assert stored_ranges(b"damaged", len(written)) is None


TENSORS = Schema.from_json(
    {
        "features": {
            "i32": {"dtype": "int32", "shape": [], "encoding": "tensor"},
            "u64": {"dtype": "uint64", "shape": [], "encoding": "tensor"},
            "f64": {"dtype": "float64", "shape": [], "encoding": "tensor"},
            "f16": {"dtype": "float16", "shape": [], "encoding": "tensor"},
            "flag": {"dtype": "bool", "shape": [], "encoding": "tensor"},
        }
    }
)
TENSOR_ROW = {"i32": 16777217, "u64": 2**64 - 1, "f64": 0.1, "f16": 0.1, "flag": True}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("i32 = 16777217", True),  # not through float32, which holds no 16777217
        ("i32 = 16777216", False),
        ("i32 > 16777216", True),
        ("i32 IN (16777216, 3)", False),
        ("i32 IN (16777217)", True),
        ("i32 = 16777217.5", False),
        ("i32 < 1e30", True),
        ("u64 = 18446744073709551615", True),
        ("u64 = 18446744073709551614", False),  # float32 rounds both to 2**64
        ("u64 > 18446744073709551614", True),
        ("u64 IN (18446744073709551614)", False),
        ("u64 > -1", True),
        ("f64 = 0.1", True),  # rounded to the feature's own dtype, as float32 features are
        ("f16 = 0.1", True),
        ("f16 < 1e10", True),
        ("flag = true", True),
        ("flag != false", True),
        ("NOT flag = false", True),
    ],
)
def test_tensor_scalars_compare_exactly_in_their_own_dtype(text: str, expected: bool) -> None:
    assert Predicate(text, TENSORS).matches(TENSOR_ROW) is expected
    columns = {name: np.array([v], dtype=TENSORS.features[name].np_dtype) for name, v in TENSOR_ROW.items()}
    assert bool(Predicate(text, TENSORS).mask(columns)[0]) is expected


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("x = true", "at character 5: x holds numbers: compare it with a number, not true"),
        ("x IN (1, false)", "at character 10: x holds numbers: compare it with a number, not false"),
        ("f < true", "at character 5: f holds numbers: compare it with a number, not true"),
        ("len(v) = true", "at character 10: len(v) holds numbers: compare it with a number, not true"),
    ],
)
def test_true_and_false_are_no_numbers(text: str, error: str) -> None:
    with pytest.raises(PredicateError) as e:
        Predicate(text, SCHEMA)
    assert str(e.value).endswith(error)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("s = 'open", "at character 5: a text begun here has no closing '"),
        ('s = "open', 'at character 5: a text begun here has no closing "'),
        ("`odd name = 1", "at character 1: a name begun here has no closing `"),
        ("`` = 1", "at character 1: expected a name between the backquotes, found ``"),
        ("s = 'it''s", "at character 9: a text begun here has no closing '"),  # 'it' then 's
    ],
)
def test_an_unclosed_quote_says_so(text: str, error: str) -> None:
    with pytest.raises(PredicateError) as e:
        Predicate(text, SCHEMA)
    assert str(e.value).endswith(error)


def test_a_number_too_long_to_read_is_one_predicate_error():
    """Python reads integers of at most 4,300 digits: a longer literal is the expression's error."""
    text = "x = " + "9" * 5000
    with pytest.raises(PredicateError, match=r"at character 5: a number of at most 4,300 digits, found one of 5,000$"):
        Predicate(text, SCHEMA)
    assert Predicate("x < " + "9" * 4000, SCHEMA) is not None  # long, but readable: beyond int64, no row equals it
