"""catalog.stats.serve: the helper process's loop, driven over in-memory pipes."""

from __future__ import annotations

import io
import json
import os
import struct
from pathlib import Path
from typing import Any

import pytest
from crc32c import crc32c

from catalog import RecordWriter
from catalog.schema import Schema
from catalog.stats.dataset import DatasetStats
from catalog.stats.helper import (
    ACK,
    BATCH,
    FAILED,
    HEAD,
    READY,
    REFUSED,
    RESULT,
    SCHEMA,
    SPAN,
    SPAN_HEAD,
    SPAN_OK,
    STATS,
)
from catalog.stats.serve import Files, serve, span
from catalog.stats.tally import Tally
from catalog.tfrecord.example import encode_example, encode_sequence_example

DOC = {"features": {"n": {"dtype": "int64"}}}


def _msg(kind: bytes, payload: bytes = b"") -> bytes:
    return HEAD.pack(kind, len(payload)) + payload


def _batch(records: list[bytes]) -> bytes:
    return struct.pack("<Q", len(records)) + struct.pack(f"<{len(records)}Q", *map(len, records)) + b"".join(records)


def _replies(data: bytes) -> list[tuple[bytes, bytes]]:
    out, at = [], 0
    while at < len(data):
        kind, size = HEAD.unpack_from(data, at)
        at += HEAD.size
        out.append((kind, data[at : at + size]))
        at += size
    return out


def _serve(messages: bytes) -> list[tuple[bytes, bytes]]:
    out = io.BytesIO()
    serve(io.BytesIO(messages), out)
    return _replies(out.getvalue())


def test_a_tally_of_batches_comes_back_as_statistics() -> None:
    records = [Schema.from_json(DOC).encode({"n": i}) for i in range(5)]
    replies = _serve(
        _msg(SCHEMA, json.dumps(DOC).encode()) + _msg(BATCH, _batch(records[:2])) + _msg(BATCH, _batch(records[2:]))
        + _msg(RESULT)
    )  # fmt: skip
    assert [k for k, _ in replies] == [READY, ACK, ACK, STATS]
    stats = DatasetStats.from_bytes(replies[-1][1])
    assert stats.records == 5 and stats.features["n"].values.max == 4


def test_a_failure_is_reported_not_raised_and_the_next_tally_starts_clean() -> None:
    good = Schema.from_json(DOC).encode({"n": 1})
    replies = _serve(
        _msg(SCHEMA, json.dumps(DOC).encode()) + _msg(BATCH, _batch([b"\xff garbage"])) + _msg(RESULT)
        + _msg(SCHEMA, json.dumps(DOC).encode()) + _msg(BATCH, _batch([good])) + _msg(RESULT)
    )  # fmt: skip
    assert [k for k, _ in replies] == [READY, ACK, FAILED, ACK, STATS]
    assert replies[2][1].startswith(b"CodecError: ")
    assert DatasetStats.from_bytes(replies[4][1]).records == 1


def test_a_result_without_a_tally_and_a_cut_message() -> None:
    assert _serve(_msg(RESULT)) == [(READY, b""), (FAILED, b"")]
    assert _serve(_msg(SCHEMA, b"{}")[:-1]) == [(READY, b"")]  # input ends inside a message: the loop ends


# --------------------------------------------------------------------------- spans of a file (adopt's)
def _file_of(path: Path, rows: list[dict[str, Any]], more: tuple[bytes, ...] = ()) -> tuple[list[bytes], int]:
    records = [encode_example(r) for r in rows] + list(more)
    with RecordWriter(path) as w:
        for r in records:
            w.write(r)
    return records, path.stat().st_size


def _span_msg(path: Path, size: int, count: int, crc: int, guessed: bool = False) -> bytes:
    return SPAN_HEAD.pack(0, size, count, crc, guessed) + os.fsencode(str(path))


def test_a_span_is_read_checked_and_tallied_as_its_records_decoded_here(tmp_path: Path) -> None:
    path = tmp_path / "a.tfrecord"
    records, size = _file_of(path, [{"n": i % 7} for i in range(100)])
    schema = Schema.from_json(DOC)
    crc = crc32c(path.read_bytes())
    tally, files = Tally(schema, helper=False, threads=False), Files()
    assert span(tally, _span_msg(path, size, 100, crc), files)
    alone = Tally(schema, helper=False)
    alone.add_decoded(records, counted=True)
    assert tally.result().to_bytes() == alone.result().to_bytes()
    files.close()


@pytest.mark.parametrize("what", ["crc", "count", "size", "schema", "sequence"])
def test_a_span_not_as_the_writer_read_it_or_refused_by_the_schema_is_refused(tmp_path: Path, what: str) -> None:
    """Bytes changed since the writer read them (their CRC32C), another record count, a span
    cutting a record, a record the schema refuses, a SequenceExample under a guessed schema."""
    path = tmp_path / "a.tfrecord"
    rows: list[dict[str, Any]] = [{"n": i} for i in range(10)]
    if what == "schema":
        rows[5] = {"n": "text"}
    sequence = (encode_sequence_example({"n": 1}, {"s": [[1]]}),) if what == "sequence" else ()
    _records, size = _file_of(path, rows, sequence)
    crc = crc32c(path.read_bytes()[: size - 1 if what == "size" else size])
    count = 11 if what == "sequence" else 10
    size -= what == "size"
    msg = _span_msg(path, size, count if what != "count" else 9, crc ^ (what == "crc"), what == "sequence")
    tally = Tally(Schema.from_json(DOC), helper=False, threads=False)
    assert not span(tally, msg, Files())


def test_a_span_is_answered_ok_or_refused_and_a_failure_fails_it(tmp_path: Path) -> None:
    path = tmp_path / "a.tfrecord"
    _records, size = _file_of(path, [{"n": i} for i in range(10)])
    crc = crc32c(path.read_bytes())
    schema = json.dumps(DOC).encode()
    good, bad = _span_msg(path, size, 10, crc), _span_msg(path, size, 10, crc ^ 1)
    gone = _span_msg(tmp_path / "gone.tfrecord", size, 10, crc)
    replies = _serve(_msg(SCHEMA, schema) + _msg(SPAN, good) + _msg(SPAN, bad) + _msg(SPAN, gone) + _msg(SPAN, good))
    assert [k for k, _ in replies] == [READY, SPAN_OK, REFUSED, FAILED, FAILED]
