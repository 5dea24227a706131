"""Append inputs: TFRecord files (validated, bytes kept exactly) and JSON Lines rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from catalog.errors import AppendError, CodecError, ValidationError
from catalog.jsonrows import row_from_json
from catalog.schema import Schema
from catalog.tfrecord.framing import FOOTER_SIZE, HEADER_SIZE, detect_file_compression, read_record_batches

if TYPE_CHECKING:
    from catalog.core import Progress, Writer

_scan_json = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set in __init__, untyped
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
FORMATS = ("auto", "tfrecord", "jsonl")


def input_format(path: Path, fmt: str) -> str:
    if fmt not in FORMATS:
        raise AppendError(f"unknown input format {fmt!r}: use auto, tfrecord or jsonl")
    if fmt != "auto":
        return fmt
    if path.name.lower().endswith(JSONL_SUFFIXES):
        return "jsonl"
    with open(path, "rb") as f:
        head = f.read(64).lstrip()
    return "jsonl" if head.startswith(b"{") else "tfrecord"


def ingest_file(w: Writer, path: Path, fmt: str, link: bool, progress: Progress | None) -> None:
    if input_format(path, fmt) == "jsonl":
        ingest_jsonl(w, path, progress)
    else:
        ingest_tfrecord(w, path, link, progress)


def check_batch(w: Writer, batch: list[bytes], path: Path, first_index: int) -> None:
    """validate_batch against the writer's schema; data in an older schema version says so."""
    try:
        validate_batch(w.ds.schema, batch, path, first_index)
    except AppendError as e:
        raise w.ds.explain(e, lambda schema: schema.decode_batch(batch)) from e


def validate_batch(schema: Schema, batch: list[bytes], path: Path, first_index: int) -> None:
    """Check every record of a batch; the error names file, record index and feature."""
    try:
        schema.decode_batch(batch)
    except ValidationError as e:
        index = first_index + (e.record or 0)
        where = f"feature {e.feature!r}: " if e.feature else ""
        raise AppendError(f"{path}: record {index}: {where}{e.reason}", str(path), index, e.feature) from e
    except CodecError:
        for i, rec in enumerate(batch):  # find which record is malformed
            try:
                schema.validate_record(rec)
            except CodecError as e:
                raise AppendError(f"{path}: record {first_index + i}: {e}", str(path), first_index + i) from e
        raise


def ingest_tfrecord(w: Writer, path: Path, link: bool, progress: Progress | None) -> None:
    if link and detect_file_compression(path) is None:
        count = 0
        for batch in read_record_batches(path):
            check_batch(w, batch, path, count)
            count += len(batch)
            w.heartbeat()  # validation writes nothing, so beat by hand
        assert w.sink is not None
        if w.sink.adopt(path, count) is not None:
            if progress:
                progress(path.stat().st_size)
            return
    index = 0
    for batch in read_record_batches(path):
        check_batch(w, batch, path, index)
        for rec in batch:
            w.write_record(rec)  # beats the intent's heartbeat as it goes
        index += len(batch)
        if progress:
            progress(sum(map(len, batch)) + (HEADER_SIZE + FOOTER_SIZE) * len(batch))


def ingest_jsonl(w: Writer, path: Path, progress: Progress | None) -> None:
    schema = w.ds.schema
    index = 0
    try:
        f = open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    except OSError as e:
        raise AppendError(f"{path}: cannot open: {e.strerror}", str(path)) from e
    lineno = 0
    with f:
        try:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = _encode_line(schema, line, path, lineno, index)
                except AppendError as e:
                    raise w.ds.explain(e, lambda old: _encode_line(old, line, path, lineno, index)) from e  # noqa: B023
                w.write_record(record)
                index += 1
                if progress:
                    progress(len(line))
        except UnicodeDecodeError as e:
            raise AppendError(f"{path}: line {lineno + 1}: not UTF-8 text", str(path), index) from e


def _encode_line(schema: Schema, line: str, path: Path, lineno: int, index: int) -> bytes:
    try:
        obj, end = _scan_json(line, 0)  # the C scanner alone: json.loads adds ~1 us of wrappers a line
        if line[end:].strip():
            raise StopIteration
    except (StopIteration, ValueError):
        try:
            obj = json.loads(line)  # slow path, for the exact message
        except json.JSONDecodeError as e:
            raise AppendError(f"{path}: line {lineno}: not valid JSON: {e.msg}", str(path), index) from e
    try:
        try:
            # Most rows are already in their Python form; the JSON conventions (base64 bytes,
            # "NaN" strings) only matter where encoding fails, so convert only then.
            return schema.encode(obj)
        except ValidationError:
            return schema.encode(row_from_json(schema, obj))
    except ValidationError as e:
        where = f"feature {e.feature!r}: " if e.feature else ""
        raise AppendError(
            f"{path}: record {index} (line {lineno}): {where}{e.reason}", str(path), index, e.feature
        ) from e
