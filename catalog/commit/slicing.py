"""Split specs as TFDS writes them: ``"train"``, ``"train[:90%]"``, ``"test[-500:]"``,
``"train[1000:2000]"``, ``"train[:10%]+validation"``, ``"all"``; resolved exactly, by record
count, against one version's splits. Pure: no manifest, no files.

Percent boundaries round to the closest record as TFDS's default ``rounding="closest"`` does
(``int(round(pct * n / 100))``, Python's round); then Python slice semantics apply (negative
from the end, clamped). Parts joined by ``+`` are read one after the other, in spec order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from catalog.errors import CatalogError, SplitError, SplitNotFoundError

ALL = "all"  # every split, in name order (TFDS's reserved name)
SPLIT_NAME = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}"  # what `append --split` accepts
MAX_SPEC = 4096  # characters of a split spec: 60 parts of the longest names
MAX_DIGITS = 18  # of a boundary, before its point and after it: record numbers below 10**18
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")  # SPLIT_NAME, unbounded: a long one is refused by length
_NUMBER = re.compile(r"-?(?P<whole>[0-9]+)(?:\.(?P<fraction>[0-9]+))?%?")


@dataclass(frozen=True)
class SplitSlice:
    """Records ``start`` (inclusive) to ``stop`` (exclusive) of ``split``, in its read order."""

    split: str
    start: int
    stop: int

    @property
    def records(self) -> int:
        return self.stop - self.start


def validate_split(name: str) -> str:
    """A split name shards may be registered under (no slice syntax, at most 64 characters)."""
    if not isinstance(name, str) or not re.fullmatch(SPLIT_NAME, name) or name == ALL:
        raise SplitError(f"bad split name {name!r}: letters, digits, '_', '-', '.'; not 'all'; at most 64")
    return name


def resolve(spec: str, counts: Mapping[str, int]) -> list[SplitSlice]:
    """The slices ``spec`` selects, given each split's record count at the pinned version."""
    return [sl for part in parse(spec) for sl in _resolve_part(spec, part, counts)]


@dataclass(frozen=True)
class _Part:
    """One ``+``-separated part of a spec: a split and its two boundaries as written (None: open)."""

    split: str
    low: str | None
    high: str | None
    sliced: bool


def parse(spec: str) -> list[_Part]:
    """The parts of ``spec``, read left to right; anything else is one CatalogError naming the
    character (from 1) where reading stopped. Bounded: a spec of at most MAX_SPEC characters,
    numbers of at most MAX_DIGITS digits (Python's int() refuses more than 4,300: a
    ValueError), ASCII digits only (int() also takes other scripts' digits)."""
    if not isinstance(spec, str):
        raise SplitError(f"bad split {spec!r}: a split spec is text, e.g. 'train[:90%]'")
    if not spec.strip():
        raise SplitError(f"bad split {spec!r}: expected e.g. 'train', 'train[:90%]' or 'train[:10%]+test'")
    reader = _Reader(spec)
    parts = [reader.part()]
    while reader.take("+"):
        parts.append(reader.part())
    reader.expect_end()
    if len(spec) > MAX_SPEC:  # after reading: a long number is named where it is
        raise SplitError(f"bad split {_shown(spec)}: a split of {len(spec):,} characters (at most {MAX_SPEC:,})")
    return parts


class _Reader:
    """A cursor over a spec: each method reads one piece at ``at`` or fails naming its position."""

    def __init__(self, spec: str) -> None:
        self.spec, self.at = spec, 0
        self.start = self.name_end = 0  # where the part being read starts, where its name ended

    def fail(self, what: str, at: int | None = None) -> CatalogError:
        where = self.at if at is None else at
        end = self.spec.find("+", where)
        part = self.spec[self.start : len(self.spec) if end < 0 else end].strip()
        where_text = f"cannot read {_shown(part)} at character {where + 1}"
        return SplitError(f"bad split {_shown(self.spec)}: {where_text}: {what}")

    def skip_spaces(self) -> None:
        while self.at < len(self.spec) and self.spec[self.at].isspace():
            self.at += 1

    def take(self, text: str) -> bool:
        if text == "+":
            self.skip_spaces()  # spaces around '+' only, as TFDS's parser
        if self.spec.startswith(text, self.at):
            self.at += len(text)
            return True
        return False

    def part(self) -> _Part:
        self.skip_spaces()
        self.start = self.at
        m = _NAME.match(self.spec, self.at)
        if m is None:
            raise self.fail("expected a split name (e.g. 'train', 'train[10%:]', 'test[-500:]')")
        if m.end() - m.start() > 64:
            raise self.fail("a split name of more than 64 characters", m.start() + 64)
        self.at = self.name_end = m.end()
        if not self.take("["):
            return _Part(m.group(), None, None, False)
        low = self.number()
        if not self.take(":"):
            raise self.fail("expected a number, ':' or ']'" if low is None else "expected ':'")
        high = self.number()
        if not self.take("]"):
            raise self.fail("expected a number, ':' or ']'" if high is None else "expected ']'")
        return _Part(m.group(), low, high, True)

    def number(self) -> str | None:
        m = _NUMBER.match(self.spec, self.at)
        if m is None:
            return None
        if len(m.group("whole")) > MAX_DIGITS:
            raise self.fail(f"a number of {len(m.group('whole')):,} digits (at most {MAX_DIGITS})", m.start("whole"))
        fraction = m.group("fraction") or ""
        if len(fraction) > MAX_DIGITS:
            what = f"a number of {len(fraction):,} digits after its point (at most {MAX_DIGITS})"
            raise self.fail(what, m.start("fraction"))
        self.at = m.end()
        return m.group()

    def expect_end(self) -> None:
        self.skip_spaces()
        if self.at < len(self.spec):
            raise self.fail("expected '[', '+' or the end" if self.at == self.name_end else "expected '+' or the end")


def _shown(spec: str) -> str:
    """The spec as an error line quotes it: whole up to 60 characters, else its start."""
    return repr(spec) if len(spec) <= 60 else repr(spec[:40])[:-1] + "…'"


def _resolve_part(spec: str, part: _Part, counts: Mapping[str, int]) -> list[SplitSlice]:
    name, low, high = part.split, part.low, part.high
    shown = _shown(spec)
    if name == ALL and ALL not in counts:
        if part.sliced:
            raise SplitError(f"bad split {shown}: 'all' takes no slice; slice each split instead")
        return [SplitSlice(s, 0, counts[s]) for s in sorted(counts)]
    if name not in counts:
        have = ", ".join(sorted(counts)) or "none"
        raise SplitNotFoundError(f"no split {name!r} in {shown} (splits: {have})")
    if low is not None and high is not None and low.endswith("%") != high.endswith("%"):
        raise SplitError(f"bad split {shown}: both boundaries of {name}[{low}:{high}] in percent, or neither")
    n = counts[name]
    start, stop, _ = slice(_boundary(low, n, shown), _boundary(high, n, shown)).indices(n)
    return [SplitSlice(name, start, max(start, stop))]


def _boundary(text: str | None, n: int, shown: str) -> int | None:
    if text is None:
        return None
    if text.endswith("%"):
        pct = float(text[:-1])  # at most 18 + 18 digits: a float, never an error
        if abs(pct) > 100:
            raise SplitError(f"bad split {shown}: {text} is beyond 100%")
        return round(pct * n / 100.0)  # TFDS: int(round(...)); round() of a float is an int
    if "." in text:
        raise SplitError(f"bad split {shown}: {text} is not a whole record number")
    return int(text)  # at most 18 ASCII digits (parse)
