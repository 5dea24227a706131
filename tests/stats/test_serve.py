"""catalog.stats.serve: the helper process's loop, driven over in-memory pipes."""

from __future__ import annotations

import io
import json
import struct

from catalog.schema import Schema
from catalog.stats.dataset import DatasetStats
from catalog.stats.helper import ACK, BATCH, FAILED, HEAD, READY, RESULT, SCHEMA, STATS
from catalog.stats.serve import serve

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
