"""Row predicates: the small expression language of ``--where`` (``label = 'cat' AND
len(tokens) > 3``), parsed by hand (never ``eval``), checked against a schema, and evaluated
over the columnar batches the readers give.

Grammar (keywords in any case)::

    expr       := term (OR term)*
    term       := factor (AND factor)*
    factor     := NOT factor | '(' expr ')' | test
    test       := operand (cmp value | [NOT] IN '(' value (',' value)* ')' | IS [NOT] NULL)
    operand    := name | len '(' name ')'          name: letters, digits, _ . / or `any text`
    cmp        := = | == | != | <> | < | <= | > | >=
    value      := number | 'text' | "text" | true | false

Semantics are SQL's: a test on a value that is absent (an optional feature's None) is neither
true nor false, and a row matches only when the whole expression is true. A number compared
with a float32 feature is rounded to float32 first (``score = 0.1`` finds the values written
as 0.1); an int64 feature compares exactly with any number (``x < 2.5`` is ``x <= 2``); a
label with class names takes a name where a number is expected (``label IN ('cat', 'dog')``).
"""

from __future__ import annotations

import math
import operator
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from catalog.errors import PredicateError, UsageError
from catalog.schema.features import Feature
from catalog.schema.model import Schema

MAX_TEXT = 65536  # characters of one expression
MAX_DEPTH = 64  # nested parentheses / NOTs: a parser's recursion stays far from Python's limit
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
KEYWORDS = ("and", "or", "not", "in", "is", "null", "true", "false")
_TOKENS = re.compile(
    r"""(?P<space>\s+)
    |(?P<number>[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?(?![A-Za-z_]))
    |(?P<string>'(?:[^']|'')*'|"(?:[^"]|"")*")
    |(?P<quoted>`(?:[^`]|``)+`)
    |(?P<name>[A-Za-z_][A-Za-z0-9_./]*)
    |(?P<op><=|>=|!=|<>|==|=|<|>|\(|\)|,)""",
    re.VERBOSE,
)
_COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, "==": operator.eq, "!=": operator.ne, "<>": operator.ne,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}  # fmt: skip
Batch = Mapping[str, np.ndarray]
Truth = tuple[np.ndarray, np.ndarray]  # (where it is true, where it is false); neither: unknown (an absent value)
# What some records' statistics say of a feature: (least value, greatest value, how many records
# lack a value (null), how many records); min and max None when unknown (only nulls, or no
# exact range kept: texts, NaNs). See Predicate.may_match.
Range = tuple[Any, Any, int, int]
Ranges = Mapping[str, Range]
Possible = tuple[bool, bool]  # (some record may make it true, some record may make it false)


@dataclass(frozen=True)
class Token:
    kind: str  # number, string, name, op, keyword, end
    text: str
    at: int

    @property
    def shown(self) -> str:
        return "the end" if self.kind == "end" else repr(self.text)


@dataclass(frozen=True)
class Value:
    """A literal: an int, float, str or bool, and where it stands."""

    value: int | float | str | bool
    at: int


@dataclass(frozen=True)
class Operand:
    feature: str
    length: bool  # len(feature): the count of its values
    at: int

    @property
    def shown(self) -> str:
        return f"len({self.feature})" if self.length else self.feature


@dataclass(frozen=True)
class Compare:
    operand: Operand
    op: str
    value: Value


@dataclass(frozen=True)
class Member:
    operand: Operand
    values: tuple[Value, ...]
    negated: bool


@dataclass(frozen=True)
class Null:
    operand: Operand
    negated: bool


@dataclass(frozen=True)
class Logic:
    op: str  # "and", "or", "not" (one part)
    parts: tuple[Node, ...]


Node = Compare | Member | Null | Logic


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with an "end" token."""
    if len(text) > MAX_TEXT:
        raise PredicateError(text[:MAX_TEXT], MAX_TEXT, f"an expression of at most {MAX_TEXT:,} characters")
    out, at = [], 0
    while at < len(text):
        m = _TOKENS.match(text, at)
        if m is None:
            raise PredicateError(text, at, _unexpected(text, at))
        kind = m.lastgroup or ""
        if kind == "name" and m.group().lower() in KEYWORDS:
            kind = "keyword"
        if kind != "space":
            out.append(Token(kind, m.group(), at))
        at = m.end()
    out.append(Token("end", "", len(text)))
    return out


def _unexpected(text: str, at: int) -> str:
    """What a character no token starts with means (a quote there was never closed)."""
    c = text[at]
    if c == "`" and text.startswith("``", at):
        return "expected a name between the backquotes, found ``"
    if c in "'\"`":
        return f"a {'name' if c == '`' else 'text'} begun here has no closing {c}"
    return f"unexpected {c!r}"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0
        self.depth = 0

    @property
    def here(self) -> Token:
        return self.tokens[self.i]

    def fail(self, what: str, token: Token | None = None) -> PredicateError:
        token = token or self.here
        return PredicateError(self.text, token.at, f"expected {what}, found {token.shown}")

    def take(self, *words: str) -> Token | None:
        """The next token when it is one of ``words`` (keywords in any case, or operators)."""
        t = self.here
        if (t.kind == "keyword" and t.text.lower() in words) or (t.kind == "op" and t.text in words):
            self.i += 1
            return t
        return None

    def need(self, word: str) -> Token:
        t = self.take(word)
        if t is None:
            raise self.fail(repr(word) if not word.isalpha() else word.upper())
        return t

    def parse(self) -> Node:
        node = self.expr()
        if self.here.kind != "end":
            raise self.fail("AND, OR or the end")
        return node

    def expr(self) -> Node:
        parts = [self.term()]
        while self.take("or"):
            parts.append(self.term())
        return parts[0] if len(parts) == 1 else Logic("or", tuple(parts))

    def term(self) -> Node:
        parts = [self.factor()]
        while self.take("and"):
            parts.append(self.factor())
        return parts[0] if len(parts) == 1 else Logic("and", tuple(parts))

    def factor(self) -> Node:
        if self.depth >= MAX_DEPTH:
            raise self.fail(f"at most {MAX_DEPTH} nested parentheses or NOTs")
        self.depth += 1
        try:
            if self.take("not"):
                return Logic("not", (self.factor(),))
            if self.take("("):
                node = self.expr()
                self.need(")")
                return node
            return self.test()
        finally:
            self.depth -= 1

    def test(self) -> Node:
        operand = self.operand()
        if self.take("is"):
            negated = self.take("not") is not None
            self.need("null")
            return Null(operand, negated)
        negated = self.take("not") is not None
        if negated or self.take("in"):
            if negated:
                self.need("in")
            return Member(operand, self.values(), negated)
        op = self.here
        if op.kind != "op" or op.text not in _COMPARE:
            raise self.fail("a comparison (=, !=, <, <=, >, >=), IN or IS")
        self.i += 1
        return Compare(operand, op.text, self.value())

    def operand(self) -> Operand:
        t = self.here
        if t.kind == "name" and t.text.lower() == "len" and self.tokens[self.i + 1].text == "(":
            self.i += 2
            name = self.name()
            self.need(")")
            return Operand(name, True, t.at)
        return Operand(self.name(), False, t.at)

    def name(self) -> str:
        t = self.here
        if t.kind == "name":
            self.i += 1
            return t.text
        if t.kind == "quoted":
            self.i += 1
            return t.text[1:-1].replace("``", "`")
        raise self.fail("a feature name (`quoted` when it is not a plain word)")

    def number(self, t: Token) -> int | float:
        text = t.text
        if not re.fullmatch(r"[-+]?[0-9]+", text):
            return float(text)
        try:
            return int(text)
        except ValueError:  # Python reads at most sys.get_int_max_str_digits() digits
            limit, digits = sys.get_int_max_str_digits(), len(text.lstrip("+-"))
            raise PredicateError(
                self.text, t.at, f"a number of at most {limit:,} digits, found one of {digits:,}"
            ) from None

    def values(self) -> tuple[Value, ...]:
        self.need("(")
        out = [self.value()]
        while self.take(","):
            out.append(self.value())
        self.need(")")
        return tuple(out)

    def value(self) -> Value:
        t = self.here
        self.i += 1
        if t.kind == "number":
            return Value(self.number(t), t.at)
        if t.kind == "string":
            return Value(t.text[1:-1].replace(t.text[0] * 2, t.text[0]), t.at)
        if t.kind == "keyword" and t.text.lower() in ("true", "false"):
            return Value(t.text.lower() == "true", t.at)
        self.i -= 1
        if t.kind == "keyword" and t.text.lower() == "null":
            raise self.fail("a value (IS NULL tests for an absent value)")
        raise self.fail("a value (a number, a 'quoted' text, true or false)")


def parse(text: str) -> Node:
    """The syntax tree of ``text``; :class:`PredicateError` names the character where it breaks."""
    if not isinstance(text, str):
        raise UsageError(f"a predicate is a string or a function, not {type(text).__name__}")
    if not text.strip():
        raise PredicateError(text, 0, "expected an expression, found nothing")
    return _Parser(text).parse()


# ---- checked against a schema, evaluated over columns

Evaluator = Callable[[Batch], Truth]
Column = Callable[[Batch], tuple[np.ndarray, np.ndarray]]  # (values, known)


def _and(parts: Sequence[Evaluator]) -> Evaluator:
    def run(batch: Batch) -> Truth:
        truths = [p(batch) for p in parts]
        return np.logical_and.reduce([t for t, _ in truths]), np.logical_or.reduce([f for _, f in truths])

    return run


def _or(parts: Sequence[Evaluator]) -> Evaluator:
    def run(batch: Batch) -> Truth:
        truths = [p(batch) for p in parts]
        return np.logical_or.reduce([t for t, _ in truths]), np.logical_and.reduce([f for _, f in truths])

    return run


def _not(part: Evaluator) -> Evaluator:
    def run(batch: Batch) -> Truth:
        t, f = part(batch)
        return f, t

    return run


def _known(column: np.ndarray) -> np.ndarray:
    if column.dtype != object:
        return np.ones(len(column), dtype=bool)
    return np.fromiter((v is not None for v in column), dtype=bool, count=len(column))


def _numbers(name: str, dtype: np.dtype[Any]) -> Column:
    def read(batch: Batch) -> tuple[np.ndarray, np.ndarray]:
        column = batch[name]
        known = _known(column)
        if column.dtype != object:
            return column.astype(dtype, copy=False), known
        values = np.zeros(len(column), dtype=dtype)
        if known.any():
            values[known] = np.asarray(column[known].tolist(), dtype=dtype)
        return values, known

    return read


def _lengths(name: str) -> Column:
    def read(batch: Batch) -> tuple[np.ndarray, np.ndarray]:
        column = batch[name]
        known = _known(column)
        if column.dtype != object:  # a fixed shape: every record has as many
            return np.full(len(column), column.shape[1] if column.ndim > 1 else 1, dtype=np.int64), known
        counts = (len(v) if v is not None else 0 for v in column)
        return np.fromiter(counts, dtype=np.int64, count=len(column)), known

    return read


def _objects(name: str) -> Column:
    def read(batch: Batch) -> tuple[np.ndarray, np.ndarray]:
        column = batch[name]
        return column, _known(column)

    return read


def _int_compare(values: np.ndarray, op: str, value: int | float) -> np.ndarray:
    """``values op value`` exactly, for int64 (or uint64) values and any number (no rounding
    through float)."""
    lowest, highest = _bounds(values.dtype)
    if isinstance(value, float) and math.isnan(value):
        return np.full(len(values), op in ("!=", "<>"))
    if isinstance(value, float) and math.isinf(value):
        value = highest + 1 if value > 0 else lowest - 1
    if isinstance(value, float) and not value.is_integer():
        if op in ("=", "==", "!=", "<>"):
            return np.full(len(values), op in ("!=", "<>"))
        op, value = ("<=", math.floor(value)) if op in ("<", "<=") else (">=", math.ceil(value))
    value = int(value)
    if not lowest <= value <= highest:
        below = value < lowest  # every value is above it
        holds = op in ("!=", "<>") or (op in (">", ">=") if below else op in ("<", "<="))
        return np.full(len(values), holds)
    return np.asarray(_COMPARE[op](values, values.dtype.type(value)), dtype=bool)


@dataclass(frozen=True)
class _Kind:
    """How an operand's values compare: "int" (int64, lengths), "float" (float32), "text", "bytes"."""

    kind: str
    column: Column
    names: tuple[str, ...] | None = None  # a label's class names
    optional: bool = False
    dtype: Any = np.int64  # what a number compared with it becomes: int64, uint64 or its float dtype
    boolean: bool = False  # a bool tensor: true and false are its values (no number's)


class _Binder:
    def __init__(self, text: str, schema: Schema) -> None:
        self.text = text
        self.schema = schema
        self.used: set[str] = set()

    def fail(self, at: int, what: str) -> PredicateError:
        return PredicateError(self.text, at, what)

    def bind(self, node: Node) -> Evaluator:
        if isinstance(node, Logic):
            parts = [self.bind(p) for p in node.parts]
            return _not(parts[0]) if node.op == "not" else (_and if node.op == "and" else _or)(parts)
        kind = self.operand(node.operand)
        if isinstance(node, Null):
            return self.null(node, kind)
        if isinstance(node, Member):
            return self.member(node, kind)
        return self.compare(node, kind)

    def operand(self, operand: Operand) -> _Kind:
        feat = self.feature(operand)
        self.used.add(feat.name)
        optional = feat.optional
        if operand.length:
            if feat.is_scalar and feat.name not in self.schema.sequence:
                raise self.fail(operand.at, f"len({feat.name}): feature {feat.name!r} holds one value, not a list")
            return _Kind("int", _lengths(feat.name), optional=optional)
        if not feat.is_scalar or feat.name in self.schema.sequence:
            raise self.fail(operand.at, f"feature {feat.name!r} holds a list of values: compare len({feat.name})")
        if feat.dtype in ("string", "bytes"):
            return _Kind("text" if feat.dtype == "string" else "bytes", _objects(feat.name), optional=optional)
        return _number_kind(feat)

    def feature(self, operand: Operand) -> Feature:
        features = self.schema.all_features
        feat = features.get(operand.feature)
        if feat is None:
            have = ", ".join(list(features)[:20]) + (", ..." if len(features) > 20 else "")
            raise self.fail(operand.at, f"no feature {operand.feature!r} in the schema (it has {have})")
        return feat

    def literal(self, operand: Operand, kind: _Kind, value: Value) -> Any:
        """``value`` as the operand's values are, or a one-line error naming both."""
        v, shown = value.value, operand.shown
        if kind.kind in ("text", "bytes"):
            if not isinstance(v, str):
                raise self.fail(value.at, f"{shown} holds text: compare it with a 'quoted' text, not {_text(v)}")
            return v.encode() if kind.kind == "bytes" else v
        if isinstance(v, str):
            if kind.names is None:
                raise self.fail(value.at, f"{shown} holds numbers: compare it with a number, not {v!r}")
            if v not in kind.names:
                listed = ", ".join(kind.names[:10]) + (", ..." if len(kind.names) > 10 else "")
                raise self.fail(value.at, f"{v!r} is not a class name of {shown} ({listed})")
            return kind.names.index(v)
        if isinstance(v, bool):
            if not kind.boolean:  # as in rows: true and false are no numbers
                raise self.fail(value.at, f"{shown} holds numbers: compare it with a number, not {_text(v)}")
            return int(v)
        if kind.kind == "float":
            with np.errstate(over="ignore"):
                return kind.dtype.type(v)  # rounded as the feature's values were
        return v

    def compare(self, node: Compare, kind: _Kind) -> Evaluator:
        value, compare = self.literal(node.operand, kind, node.value), _COMPARE[node.op]
        op = node.op

        def test(values: np.ndarray) -> np.ndarray:
            if kind.kind == "int":
                return _int_compare(values, op, value)
            if kind.kind == "float":
                return np.asarray(compare(values, value), dtype=bool)
            return np.fromiter((compare(v, value) for v in values), dtype=bool, count=len(values))

        return _tested(kind.column, test)

    def member(self, node: Member, kind: _Kind) -> Evaluator:
        values = [self.literal(node.operand, kind, v) for v in node.values]
        if kind.kind == "int":
            values = [int(v) for v in values if _exact_int(v, kind.dtype)]  # 2.5 is no int64's value
        numeric = kind.kind in ("int", "float")
        choices = np.array(values if numeric else [], dtype=kind.dtype)
        wanted = set(values)

        def test(column: np.ndarray) -> np.ndarray:
            if not numeric:
                return np.fromiter((v in wanted for v in column), dtype=bool, count=len(column))
            return np.isin(column, choices)

        tested = _tested(kind.column, test)
        return _not(tested) if node.negated else tested

    def null(self, node: Null, kind: _Kind) -> Evaluator:
        if not kind.optional:
            name = node.operand.feature
            raise self.fail(node.operand.at, f"feature {name!r} always has a value: only optional features are null")
        column, negated = kind.column, node.negated

        def run(batch: Batch) -> Truth:
            _, known = column(batch)
            return (known, ~known) if negated else (~known, known)

        return run

    # ---- what a shard's ranges allow (Predicate.may_match): (may be true, may be false) of
    # some record, conservative: "cannot" only when no value in the range could make it so
    def judge(self, node: Node) -> Judge:
        if isinstance(node, Logic):
            parts = [self.judge(p) for p in node.parts]
            return _judge_logic(node.op, parts)
        kind = self.operand(node.operand)
        name = node.operand.feature
        if isinstance(node, Null):
            return _judge_null(name, node.negated)
        if node.operand.length or kind.kind not in ("int", "float") or kind.dtype == np.uint64:
            return _judge_known(name, lambda _lo, _hi: (True, True))  # no range kept of these (held as int64)
        if isinstance(node, Member):
            values = [self.literal(node.operand, kind, v) for v in node.values]
            if kind.kind == "int":
                values = [int(v) for v in values if _exact_int(v, kind.dtype)]
            return _judge_known(name, _member_possible(values, kind.kind, node.negated))
        value = self.literal(node.operand, kind, node.value)
        return _judge_known(name, _compare_possible(node.op, value, kind.kind))


Judge = Callable[[Ranges], Possible]
_UNKNOWN: Possible = (True, True)


def _judge_logic(op: str, parts: Sequence[Judge]) -> Judge:
    """AND: true only if every part may be, false if any may be; OR the reverse; NOT swaps."""

    def run(ranges: Ranges) -> Possible:
        found = [p(ranges) for p in parts]
        if op == "not":
            return found[0][1], found[0][0]
        trues, falses = [t for t, _ in found], [f for _, f in found]
        return (all(trues), any(falses)) if op == "and" else (any(trues), all(falses))

    return run


def _judge_null(name: str, negated: bool) -> Judge:
    def run(ranges: Ranges) -> Possible:
        if name not in ranges:
            return _UNKNOWN
        _lo, _hi, nulls, count = ranges[name]
        null, valued = nulls > 0, nulls < count  # a record with no value, one with a value
        return (valued, null) if negated else (null, valued)

    return run


def _judge_known(name: str, possible: Callable[[Any, Any], Possible]) -> Judge:
    """A test of the known values: none known (all null, or no record), neither true nor false."""

    def run(ranges: Ranges) -> Possible:
        if name not in ranges:
            return _UNKNOWN
        lo, hi, nulls, count = ranges[name]
        if count - nulls <= 0:
            return False, False
        if lo is None or hi is None:
            return _UNKNOWN
        return possible(lo, hi)

    return run


def _ends(lo: Any, hi: Any, kind: str) -> np.ndarray | None:
    """[lo, hi] as the feature's values are held (int64, float32); None when they cannot be
    exactly (a range of another type than the feature's: unknown, never a guess)."""
    if kind == "int":
        ok = all(isinstance(v, int) and not isinstance(v, bool) and INT64_MIN <= v <= INT64_MAX for v in (lo, hi))
        return np.array([lo, hi], dtype=np.int64) if ok else None
    if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in (lo, hi)):
        return None
    ends = np.array([lo, hi], dtype=np.float32)
    return ends if ends.tolist() == [lo, hi] else None  # not float32 values: not this feature's


def _test(kind: str, op: str, value: Any) -> Callable[[np.ndarray], np.ndarray]:
    """The test the evaluator applies to a column (Binder.compare's), over any values."""
    if kind == "int":
        return lambda values: _int_compare(values, op, value)
    compare = _COMPARE[op]
    return lambda values: np.asarray(compare(values, value), dtype=bool)


def _compare_possible(op: str, value: Any, kind: str) -> Callable[[Any, Any], Possible]:
    """For < <= > >=, the truth over [lo, hi] is monotone: its two ends bound every value's.
    For =, a value in [lo, hi] may equal it, and only a range of that one value is never
    unequal; != is its opposite (no NaN among the values: such ranges are not kept)."""
    if op in ("<", "<=", ">", ">="):
        test = _test(kind, op, value)

        def ordered(lo: Any, hi: Any) -> Possible:
            ends = _ends(lo, hi, kind)
            if ends is None:
                return _UNKNOWN
            holds = test(ends)
            return bool(holds.any()), not bool(holds.all())

        return ordered
    above, below, equal = _test(kind, ">=", value), _test(kind, "<=", value), _test(kind, "=", value)

    def equality(lo: Any, hi: Any) -> Possible:
        ends = _ends(lo, hi, kind)
        if ends is None:
            return _UNKNOWN
        may_equal = bool(below(ends[:1])[0]) and bool(above(ends[1:])[0])
        all_equal = lo == hi and bool(equal(ends[:1])[0])
        return (may_equal, not all_equal) if op in ("=", "==") else (not all_equal, may_equal)

    return equality


def _member_possible(values: list[Any], kind: str, negated: bool) -> Callable[[Any, Any], Possible]:
    """IN: true if a listed value lies in [lo, hi]; false unless the range is one listed value."""
    choices = np.array(values, dtype=np.int64 if kind == "int" else np.float32)

    def member(lo: Any, hi: Any) -> Possible:
        ends = _ends(lo, hi, kind)
        if ends is None:
            return _UNKNOWN
        inside = bool(((choices >= ends[0]) & (choices <= ends[1])).any())
        all_in = lo == hi and bool(np.isin(ends[:1], choices)[0])
        return (not all_in, inside) if negated else (inside, not all_in)

    return member


def _exact_int(v: Any, dtype: Any = np.int64) -> bool:
    lo, hi = _bounds(np.dtype(dtype))
    if isinstance(v, float):
        return v.is_integer() and lo <= v <= hi
    return lo <= int(v) <= hi


def _bounds(dtype: np.dtype[Any]) -> tuple[int, int]:
    """The values an integer column holds: int64's, or uint64's."""
    return (0, (1 << 64) - 1) if dtype == np.uint64 else (INT64_MIN, INT64_MAX)


def _number_kind(feat: Feature) -> _Kind:
    """A numeric scalar: an integer one (int64, an integer or bool tensor) compares exactly as
    int64 (uint64 as itself: it holds values int64 does not); a float one in its own dtype."""
    dt = np.dtype(feat.np_dtype)
    if dt.kind in "iub":
        held = np.dtype(np.uint64) if dt == np.uint64 else np.dtype(np.int64)
        return _Kind("int", _numbers(feat.name, held), feat.names, feat.optional, held, dt.kind == "b")
    return _Kind("float", _numbers(feat.name, dt), feat.names, feat.optional, dt)


def _text(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else repr(v)


def _tested(column: Column, test: Callable[[np.ndarray], np.ndarray]) -> Evaluator:
    """An evaluator of ``test`` over the known values of ``column`` (absent ones: unknown)."""

    def run(batch: Batch) -> Truth:
        values, known = column(batch)
        holds = np.zeros(len(known), dtype=bool)
        if known.all():
            holds = test(values)
        elif known.any():
            holds[known] = test(values[known])
        return holds & known, ~holds & known

    return run


class Predicate:
    """``text`` checked against ``schema``: :meth:`mask` of a batch of columns (the readers'
    ``batches()``: the columns in :attr:`features` at least), :meth:`matches` of one row."""

    def __init__(self, text: str, schema: Schema) -> None:
        self.text = text
        binder = _Binder(text, schema)
        tree = parse(text)
        self._run = binder.bind(tree)
        self._judge = binder.judge(tree)
        self.features = tuple(sorted(binder.used))

    def __repr__(self) -> str:
        return f"Predicate({self.text!r})"

    def mask(self, batch: Batch) -> np.ndarray:
        """True for each row of ``batch`` the expression holds for (false or unknown: False)."""
        holds, _ = self._run(batch)
        return holds

    def may_match(self, ranges: Ranges) -> bool:
        """False only when no record whose features lie in ``ranges`` can match: a shard its
        statistics rule out need not be read. ``ranges``: per feature, (min, max, nulls,
        count) of its values (see :data:`Range`); a feature not in it, or of which only
        some is known, may hold anything, so AND, OR and NOT give False only when sure."""
        may_be_true, _ = self._judge(ranges)
        return may_be_true

    def matches(self, row: Mapping[str, Any]) -> bool:
        return bool(self.mask({name: _one(row[name]) for name in self.features})[0])


def _one(value: Any) -> np.ndarray:
    column = np.empty(1, dtype=object)
    column[0] = value
    return column
