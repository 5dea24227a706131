"""Counts in words: "1 shard", "2 shards", for every message that shows a count."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None, *, grouped: bool = False) -> str:
    """``n`` and ``noun``, the noun plural unless ``n`` is 1 ("0 shards", "1 shard",
    "2 shards"); ``plural`` where adding an s is wrong ("1 index", "2 indexes"); ``grouped``:
    thousands separated (1,234 records)."""
    number = f"{n:,}" if grouped else str(n)
    return f"{number} {noun if n == 1 else plural or noun + 's'}"
