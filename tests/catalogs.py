"""A dataset of a few shards, for the tests of the verbs that change or derive rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from catalog import Catalog


def made(
    root: Path,
    schema: dict[str, Any],
    rows: Callable[[int, int], list[dict[str, Any]]],
    shards: int,
    per: int,
    splits: tuple[str, ...] = ("train",),
    **register: Any,
) -> Any:
    """Dataset "d" of catalog ``root/cat``: ``shards`` appends of ``per`` rows (``rows(start,
    n)``, ids running on) to each of ``splits`` in turn; ``register``: register()'s keywords."""
    cat = Catalog.init(root / "cat")
    ds = cat.register("d", schema, **register)
    n = 0
    for split in splits:
        for _ in range(shards):
            ds.append_rows(rows(n, per), split=split)
            n += per
    return cat.dataset("d")
