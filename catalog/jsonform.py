"""One way for a report to become JSON: a dataclass's fields, in their order, under their
names. What a field shows otherwise is said once, where the field is declared, in its
metadata (``field(metadata=shown(...))``): another key, a rounding, a function of its value,
or nothing at all (``HIDDEN``). A value with its own ``to_json`` (a nested report), or a list
of them, shows that. A report whose JSON is more than its fields (derived keys, keys present
only sometimes) writes its ``to_json`` by hand, as ``commit.values.Commit`` does."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

Convert = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class _Shown:
    key: str | None = None  # None: the field's name
    digits: int | None = None  # a float rounded to this many decimals
    convert: Convert | None = None  # the value shown, from the field's

    def value(self, value: Any) -> Any:
        if self.convert is not None:
            return self.convert(value)
        if self.digits is not None:
            return round(value, self.digits)
        return plain(value)


_JSON = "catalog.json"  # the metadata key
_PLAIN = _Shown()


def shown(key: str | None = None, digits: int | None = None, convert: Convert | None = None) -> dict[str, Any]:
    """A field's metadata: its JSON ``key``, ``digits`` to round it to, or a ``convert`` of its value."""
    return {_JSON: _Shown(key, digits, convert)}


HIDDEN: dict[str, Any] = {_JSON: None}  # a field the JSON leaves out
SECONDS = shown(digits=3)  # a duration, to the millisecond


def plain(value: Any) -> Any:
    """A field's value as JSON: a nested report's ``to_json``, a list's items each so."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def as_json(report: Any) -> dict[str, Any]:
    """``report`` (a dataclass instance) as a JSON object, its fields in their order."""
    out: dict[str, Any] = {}
    for f in fields(report):
        how: _Shown | None = f.metadata.get(_JSON, _PLAIN)
        if how is not None:
            out[how.key or f.name] = how.value(getattr(report, f.name))
    return out


class JsonReport:
    """A dataclass whose ``to_json`` is its fields (see the module's docstring)."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        return as_json(self)
