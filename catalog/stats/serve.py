"""The statistics helper process (catalog.stats.helper starts it): it tallies the batches of
records its writer sends, one tally at a time, until its input ends."""

from __future__ import annotations

import json
import os
import pickle
import struct
import sys
from typing import IO

import numpy as np
from crc32c import crc32c

from catalog.errors import CodecError, ValidationError
from catalog.schema import Schema
from catalog.stats.helper import (
    ACK,
    BATCH,
    COLUMNS,
    FAILED,
    HEAD,
    READY,
    REFUSED,
    RESULT,
    SAMPLE,
    SCHEMA,
    SPAN,
    SPAN_HEAD,
    SPAN_OK,
    STATS,
)
from catalog.stats.tally import Tally, sketch
from catalog.tfrecord.example import first_sequence, plain_examples
from catalog.tfrecord.framing import HEADER_SIZE, whole_records
from catalog.tfrecord.native import texts_from_joined


def _read_exact(f: IO[bytes], n: int) -> bytes | None:
    data = f.read(n)
    return data if data is not None and len(data) == n else None


def _send(out: IO[bytes], kind: bytes, payload: bytes = b"") -> None:
    out.write(HEAD.pack(kind, len(payload)))
    out.write(payload)
    out.flush()


def _records(payload: bytes) -> list[bytes]:
    (n,) = struct.unpack_from("<Q", payload)
    lengths = np.frombuffer(payload, dtype="<u8", count=n, offset=8)
    ends = np.cumsum(lengths) + 8 + 8 * n
    starts = ends - lengths
    return [payload[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


def _sketch(tally: Tally, payload: bytes) -> None:
    """A sample of one feature's values into its quantile sketch (its other figures are the
    writer's: this tally's part of them stays empty, and merges as nothing)."""
    (size,) = struct.unpack_from("<I", payload)
    name = payload[4 : 4 + size].decode("utf-8", "surrogatepass")
    dtype = np.dtype(payload[4 + size : 8 + size].decode("ascii").strip())
    values = np.frombuffer(payload, dtype=dtype, offset=8 + size)
    sketch(tally.stats.features[name].quantiles, values)


class Files:
    """The files a tally's spans are read from, each opened once (closed with the tally)."""

    def __init__(self) -> None:
        self._fds: dict[str, int] = {}

    def read(self, path: str, offset: int, size: int) -> bytes:
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = os.open(path, os.O_RDONLY)
        parts = []
        while size and (part := os.pread(fd, size, offset)):
            parts.append(part)
            offset, size = offset + len(part), size - len(part)
        return b"".join(parts) if len(parts) != 1 else parts[0]

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def span(tally: Tally, payload: bytes, files: Files) -> bool:
    """Read, check and tally one span of a file's records (adopt's: helper.SPAN): whether the
    bytes read are those the writer read (their CRC32C), hold the records it counted, every one
    an Example the tally's schema takes (and, for a ``guessed`` schema, none a SequenceExample).
    The writer checked their framing; a span refused is checked by the writer again."""
    offset, size, count, crc, guessed = SPAN_HEAD.unpack_from(payload)
    data = files.read(os.fsdecode(payload[SPAN_HEAD.size :]), offset, size)
    if len(data) != size or crc32c(data) != crc:
        return False  # the file changed since the writer read it
    schema = tally.schema
    raw = data + bytes(schema.spans_pad)  # (decode_spans reads past a record's end)
    at, lens, pos = whole_records(raw, size)
    if pos != size or len(at) != count:
        return False
    starts = at + HEADER_SIZE
    if (
        guessed
        and first_sequence(plain_examples(raw, starts, lens), lambda i: raw[starts[i] : starts[i] + lens[i]])
        is not None
    ):
        return False
    absent: dict[str, np.ndarray] = {}
    ragged: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    try:
        columns = schema.decode_spans(raw, starts, lens, absent=absent, ragged=ragged)
    except (ValidationError, CodecError):
        return False
    tally.add_decoded_columns(columns, count, absent, ragged)
    return True


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """The helper's loop: tallies, one at a time, until ``inp`` ends."""
    _send(out, READY)
    tally: Tally | None = None
    failure = ""
    files = Files()
    while (head := _read_exact(inp, HEAD.size)) is not None:
        kind, size = HEAD.unpack(head)
        payload = _read_exact(inp, size) if size else b""
        if payload is None:
            return
        try:
            if kind == SCHEMA:
                files.close()
                tally, failure = Tally(Schema.from_json(json.loads(payload)), helper=False, threads=False), ""
            elif kind == BATCH and tally is not None and not failure:
                tally.add_decoded(_records(payload), counted=True)
            elif kind == COLUMNS and tally is not None and not failure:
                # (pickled by this package's writer, the process that started this one: trusted)
                n, columns, ragged, texts = pickle.loads(payload)
                tally.add_columns({**columns, **_texts_again(texts)}, n, {}, ragged)
            elif kind == SAMPLE and tally is not None and not failure:
                _sketch(tally, payload)
            elif kind == SPAN and tally is not None and not failure:
                _send(out, SPAN_OK if span(tally, payload, files) else REFUSED)
                continue
        except Exception as e:  # reported to the writer, which then computes the shard's statistics itself
            failure = f"{type(e).__name__}: {e}"
        if kind in (BATCH, COLUMNS, SAMPLE):
            _send(out, ACK)
        elif kind == SPAN:  # not checked: the writer checks it (and its helper is lost to it)
            _send(out, FAILED, failure.encode())
        elif kind == RESULT:
            reply = (FAILED, failure.encode()) if failure or tally is None else (STATS, tally.result().to_bytes())
            _send(out, *reply)
            tally = None
            files.close()


def _texts_again(texts: dict[str, tuple[bytes, np.ndarray]]) -> dict[str, np.ndarray]:
    """Text columns sent as their UTF-8 joined (native.texts_joined), as object arrays again."""
    out = {}
    for name, (data, sizes) in texts.items():
        made = texts_from_joined(data, sizes)
        if made is None:  # (the writer joined valid texts: reported, and the writer tallies them itself)
            raise ValueError(f"the texts of {name!r} came garbled")
        column = out[name] = np.empty(len(sizes), dtype=object)
        column[:] = made  # (element by element: never a 2-D array)
    return out


def main() -> None:
    serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
