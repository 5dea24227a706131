"""``catalog inspect``: what is in a TFRecord file, checked record by record."""

from __future__ import annotations

import base64
import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from catalog.errors import CatalogError, SchemaError
from catalog.jsonform import JsonReport
from catalog.schema import Kinded, Schema, decode_kinds, float32_json
from catalog.schema.sequences import StepInference
from catalog.tfrecord.example import EXAMPLE, SEQUENCE_EXAMPLE, beyond_features
from catalog.tfrecord.framing import FOOTER_SIZE, HEADER_SIZE, detect_file_compression, read_record_batches


@dataclass
class FileReport(JsonReport):
    path: str
    records: int
    bytes: int  # size of the file on disk
    data_bytes: int  # bytes of the framed (decompressed) record stream
    compression: str
    crc: str
    message: str | None = EXAMPLE  # tf.train.Example, tf.train.SequenceExample, or None: neither
    schema: dict[str, Any] | None = None
    examples: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""


def jsonable(value: Any) -> Any:
    """A decoded value as JSON: bytes as their UTF-8 text when they are text, else the object
    ``{"base64": ...}``; a JSON string is always text, so the two never look alike."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, float):  # a FloatList's value: a float32
        return float32_json(value)
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    return value


@dataclass
class _Tally:
    records: int = 0
    data_bytes: int = 0
    note: str = ""
    message: str | None = EXAMPLE


def _examples(path: str, tally: _Tally, shown: list[Kinded], limit: int, steps: StepInference) -> Iterator[Kinded]:
    """Each record decoded (wire kinds kept: an empty list has a type) as it is read and then
    let go, so memory follows the largest record, not the file; counting goes on to the end
    when records are not Examples."""
    for batch in read_record_batches(path, "auto"):
        first = tally.records
        tally.records += len(batch)
        tally.data_bytes += sum(map(len, batch)) + (HEADER_SIZE + FOOTER_SIZE) * len(batch)
        if tally.note:
            continue
        for i, record in enumerate(batch):
            try:
                example = decode_kinds(record)
            except CatalogError as e:
                tally.note = f"records are not tf.train.Example (record {first + i}: {e})"
                tally.message = None
                shown.clear()
                break
            if beyond_features(record):  # decode_kinds let it through: a SequenceExample
                tally.message = SEQUENCE_EXAMPLE
                steps.add(record)  # its feature lists: the schema's sequence features
            if len(shown) < limit:
                shown.append(example)
            yield example


def inspect_file(path: str | os.PathLike[str], limit: int = 5) -> FileReport:
    """Read every record of ``path`` (checking CRCs), decode the first ``limit`` and infer a schema."""
    reports, schema = inspect_files([path], limit)
    reports[0].schema = schema
    return reports[0]


def inspect_files(
    paths: list[str | os.PathLike[str]], limit: int = 5
) -> tuple[list[FileReport], dict[str, Any] | None]:
    """Each file read once (every record's CRCs checked, the first ``limit`` decoded), and one
    schema inferred over the records of all of them (None when none can be)."""
    names = [os.fspath(p) for p in paths]
    tallies = [_Tally() for _ in names]
    shown: list[list[Kinded]] = [[] for _ in names]
    steps = StepInference()
    streams = [_examples(n, t, s, limit, steps) for n, t, s in zip(names, tallies, shown, strict=True)]
    inferred: Schema | None = None
    problem = ""
    try:
        context = Schema.infer(itertools.chain.from_iterable(streams))
        inferred = Schema(context.features.values(), steps.features())
    except SchemaError as e:  # records disagree on a feature: every one is still read and counted
        problem = f"no schema could be inferred: {e}"
    for stream in streams:  # the rest is still counted and checked when inference stopped early
        for _ in stream:
            pass
    reports = [_report(n, t, s, problem) for n, t, s in zip(names, tallies, shown, strict=True)]
    usable = inferred is not None and not problem and any(t.records for t in tallies)
    usable = usable and all(t.message is not None for t in tallies)
    schema = None
    if usable and inferred is not None:
        schema = {kind: dict(sorted(feats.items())) for kind, feats in inferred.to_json().items()}
    return reports, schema


def _report(path: str, tally: _Tally, shown: list[Kinded], problem: str) -> FileReport:
    if tally.message == SEQUENCE_EXAMPLE and not tally.note:
        tally.note = (
            "records are tf.train.SequenceExample: the schema's features are their context, its "
            "sequence_features their feature lists (one step each)"
        )
    return FileReport(
        path=path,
        records=tally.records,
        bytes=os.path.getsize(path),
        data_bytes=tally.data_bytes,
        compression=detect_file_compression(path) or "none",
        crc="ok",
        examples=[{k: jsonable(ex[k][1]) for k in sorted(ex)} for ex in shown],
        note=tally.note or (problem if tally.message is not None else ""),
        message=tally.message,
    )
