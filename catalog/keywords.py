"""Keyword sets that several methods take whole (PEP 692's ``**kw: Unpack[SomeTypedDict]``),
so that a keyword is declared once: the TypedDicts live beside what they configure
(catalog.ops.options' for the verbs that commit, catalog.commit.plans' for the readers'
cache). A TypedDict is a promise to the type checker only: :func:`check_keywords` makes a
mistyped keyword the TypeError Python gives for a signature that lacks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from typing_extensions import Unpack  # (typing's from Python 3.11)

__all__ = ["Unpack", "check_keywords"]


def check_keywords(verb: str, given: Mapping[str, Any], allowed: type) -> None:
    """Refuse a keyword of ``given`` that ``allowed`` (a TypedDict) does not name."""
    for name in given:
        if name not in allowed.__annotations__:  # (a TypedDict's, with its bases')
            raise TypeError(f"{verb}() got an unexpected keyword argument {name!r}")
