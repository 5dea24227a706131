"""The CLI's one output layer: a verb returns an :class:`Output`, :func:`emit` writes it.

A verb says what it has to show in both forms, text for a person and the ``--json``
document, and never decides which: the command wrapper (``catalog.cli.base.verb``) hands
the ``--json`` flag to :func:`emit`, the one place that chooses. Both forms are lazy
(a generator of lines, a function building the document), so the form not chosen costs
nothing and a long listing streams from the manifest instead of being held in memory.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import typer

from catalog.words import counted as counted  # the verbs' counts in words, here with the other formatting

# What a terminal acts on instead of showing: C0 controls but the tab, DEL, the C1 controls
# (U+009B is CSI) and the bidirectional overrides and isolates (text shown reversed).
_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROLS_JSON_KEEPS = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # json.dumps escapes the C0 ones
# A verb's text may be several lines in one (a schema as indented JSON): its newlines stay
_CONTROLS_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(text: str, pattern: re.Pattern[str] = _CONTROLS) -> str:
    """``text`` with what a terminal would act on written as JSON escapes (``\\u001b``):
    a visible value in text; in JSON (``visible_json``) the same value."""
    if pattern.search(text) is None:  # the usual case: one scan, no copy
        return text
    return pattern.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def visible_json(text: str) -> str:
    """JSON text (json.dumps, its newlines and indents kept) with ``visible``'s characters
    escaped inside its strings (the only place they can be)."""
    return visible(text, _CONTROLS_JSON_KEEPS)


class Rendered(str):
    """A line a terminal library already made safe (a rich table, its colours): shown as it is."""

    __slots__ = ()


@dataclass(frozen=True)
class Output:
    """What a command shows.

    ``text``: lines for a person, each echoed as it comes. ``json``: builds the ``--json``
    document. ``rows``: ``(key, rows)``, a long list streamed under ``key`` of that
    document. ``records``: JSON Lines, the only form (``cat``). ``summary``: a line on
    stderr after either form, and ``failed``: exit 1 after it (``verify``).
    """

    text: Iterable[str] = ()
    json: Callable[[], Any] | None = None
    rows: tuple[str, Iterable[dict[str, Any]]] | None = None
    records: Iterable[Any] | None = None
    summary: str | None = None
    failed: bool = False


def emit(out: Output, as_json: bool) -> None:
    """Write ``out`` as JSON (``as_json``, when it has a JSON form) or as text."""
    if out.records is not None:
        write_json_lines(out.records)
    elif as_json and out.json is not None:
        if out.rows is None:
            echo_json(out.json())
        else:
            echo_json_rows(out.json(), *out.rows)
    else:
        for line in out.text:
            typer.echo(line if isinstance(line, Rendered) else visible(line, _CONTROLS_TEXT))
    if out.summary is not None:
        sys.stdout.flush()  # what came before (stdout) precedes the summary (stderr)
        typer.echo(out.summary, err=True)
    if out.failed:
        raise typer.Exit(1)


def echo_json(obj: Any) -> None:
    typer.echo(visible_json(json.dumps(obj, indent=2, ensure_ascii=False)))


def echo_json_rows(obj: dict[str, Any], key: str, rows: Iterable[dict[str, Any]]) -> None:
    """``obj`` with ``obj[key] = rows`` as JSON, the (long, streamed) rows one compact object
    per line: readable, memory-flat for a million shards, and fast (indent= turns off json's
    C encoder, so only the head is indented)."""
    head = visible_json(json.dumps(obj, indent=2, ensure_ascii=False))
    out = sys.stdout
    out.write((head[:-2] + ",\n" if obj else "{\n") + f'  "{key}": [')
    sep = "\n"
    for r in rows:
        out.write(sep + "    " + visible_json(json.dumps(r, ensure_ascii=False)))
        sep = ",\n"
    out.write("\n  ]\n}\n" if sep == ",\n" else "]\n}\n")


def write_json_lines(docs: Iterable[Any]) -> None:
    """One compact JSON document a line, written straight to stdout: a dataset's records
    can be millions, and echoing (a flush per line) would cost more than encoding them."""
    out = sys.stdout
    for doc in docs:
        out.write(visible_json(json.dumps(doc, ensure_ascii=False)) + "\n")


def human(n: float) -> str:
    """A byte count for a person: 512 B, 1.5 KiB, 2.0 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover
