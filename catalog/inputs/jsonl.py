"""JSON Lines inputs, as inference reads them (an append's own reader is ``ingest``'s, which
keeps the bytes it can): one object per line; a file holding one JSON document instead (an
array, an object over several lines) gets a message saying how to turn it into JSON Lines."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from catalog.errors import AppendError, ValidationError
from catalog.inputs.delimited import finite_float
from catalog.inputs.files import STDIN, InputOptions, open_input
from catalog.schema import Feature
from catalog.schema.inference import RowInference

DOCUMENT_LIMIT = 64 << 20  # a .json file read whole to tell one document from JSON Lines


def json_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a JSON Lines input (blank lines skipped); a bad line names its number."""
    with open_input(path) as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw, parse_float=finite_float)
            except ValidationError as e:
                raise AppendError(f"{path}: line {lineno}: {e}", str(path)) from e
            except (ValueError, RecursionError) as e:
                if lineno == 1:
                    check_json_document(path, raw.decode("utf-8", errors="replace"), f)
                raise AppendError(f"{path}: line {lineno}: not valid JSON: {e}", str(path)) from e
            if lineno == 1 and isinstance(row, list):
                check_json_document(path, raw.decode("utf-8", errors="replace"), f)
            if not isinstance(row, dict):
                raise AppendError(f"{path}: line {lineno}: a JSON row is an object, got {type(row).__name__}")
            yield row


def infer_jsonl(path: Path, options: InputOptions, tally: RowInference) -> list[Feature]:
    """The format table's inference."""
    for row in json_rows(path):
        tally.add(row)
    return []


def check_json_document(path: Path, first: str, rest: IO[bytes]) -> None:
    """Raise the message for a file holding one JSON document (an array, or an object over
    several lines) where JSON Lines, one object per line, was expected; return otherwise."""
    if str(path) == STDIN and not first.lstrip().startswith("["):
        return  # standard input cannot be read twice: its first line's message stands
    text = first + rest.read(DOCUMENT_LIMIT).decode("utf-8", errors="replace")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        if not first.lstrip().startswith("["):
            return
        doc = []
    kind, jq = ("an array", "jq -c '.[]'") if isinstance(doc, list) else ("one object over several lines", "jq -c .")
    raise AppendError(
        f"{path}: holds one JSON document ({kind}), not JSON Lines (one object per line): "
        f"write one row per line, e.g. with `{jq}`",
        str(path),
        0,
    )
