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

from catalog.errors import CatalogError

ALL = "all"  # every split, in name order (TFDS's reserved name)
SPLIT_NAME = r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}"  # what `append --split` accepts
_PART = re.compile(
    rf"(?P<split>{SPLIT_NAME})"
    r"(?:\[(?P<from>-?\d+(?:\.\d+)?%?)?:(?P<to>-?\d+(?:\.\d+)?%?)?\])?"
)


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
        raise CatalogError(f"bad split name {name!r}: letters, digits, '_', '-', '.'; not 'all'; at most 64")
    return name


def resolve(spec: str, counts: Mapping[str, int]) -> list[SplitSlice]:
    """The slices ``spec`` selects, given each split's record count at the pinned version."""
    parts = [p.strip() for p in spec.split("+")]
    if not spec.strip() or not all(parts):
        raise CatalogError(f"bad split {spec!r}: expected e.g. 'train', 'train[:90%]' or 'train[:10%]+test'")
    out: list[SplitSlice] = []
    for part in parts:
        out.extend(_resolve_part(spec, part, counts))
    return out


def _resolve_part(spec: str, part: str, counts: Mapping[str, int]) -> list[SplitSlice]:
    m = _PART.fullmatch(part)
    if m is None:
        raise CatalogError(f"bad split {spec!r}: cannot read {part!r} (e.g. 'train', 'train[10%:]', 'test[-500:]')")
    name, low, high = m.group("split"), m.group("from"), m.group("to")
    if name == ALL and ALL not in counts:
        if low is not None or high is not None:
            raise CatalogError(f"bad split {spec!r}: 'all' takes no slice; slice each split instead")
        return [SplitSlice(s, 0, counts[s]) for s in sorted(counts)]
    if name not in counts:
        have = ", ".join(sorted(counts)) or "none"
        raise CatalogError(f"no split {name!r} in {spec!r} (splits: {have})")
    if (low or "").endswith("%") != (high or "").endswith("%") and low is not None and high is not None:
        raise CatalogError(f"bad split {spec!r}: both boundaries of {part!r} in percent, or neither")
    n = counts[name]
    start, stop, _ = slice(_boundary(low, n, spec), _boundary(high, n, spec)).indices(n)
    return [SplitSlice(name, start, max(start, stop))]


def _boundary(text: str | None, n: int, spec: str) -> int | None:
    if text is None:
        return None
    if text.endswith("%"):
        pct = float(text[:-1])
        if abs(pct) > 100:
            raise CatalogError(f"bad split {spec!r}: {text} is beyond 100%")
        return round(pct * n / 100.0)  # TFDS: int(round(...)); round() of a float is an int
    if "." in text:
        raise CatalogError(f"bad split {spec!r}: {text} is not a whole record number")
    return int(text)
