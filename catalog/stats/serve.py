"""The statistics helper process (catalog.stats.helper starts it): it tallies the batches of
records its writer sends, one tally at a time, until its input ends."""

from __future__ import annotations

import json
import struct
import sys
from typing import IO

import numpy as np

from catalog.schema import Schema
from catalog.stats.helper import ACK, BATCH, FAILED, HEAD, KNOWN, READY, RESULT, SAMPLE, SCHEMA, STATS
from catalog.stats.tally import Tally, sketch


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


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """The helper's loop: tallies, one at a time, until ``inp`` ends."""
    _send(out, READY)
    tally: Tally | None = None
    failure = ""
    while (head := _read_exact(inp, HEAD.size)) is not None:
        kind, size = HEAD.unpack(head)
        payload = _read_exact(inp, size) if size else b""
        if payload is None:
            return
        try:
            if kind == SCHEMA:
                tally, failure = Tally(Schema.from_json(json.loads(payload)), helper=False), ""
            elif kind in (BATCH, KNOWN) and tally is not None and not failure:
                tally.add_decoded(_records(payload), counted=kind == BATCH)
            elif kind == SAMPLE and tally is not None and not failure:
                _sketch(tally, payload)
        except Exception as e:  # reported to the writer, which then computes the shard's statistics itself
            failure = f"{type(e).__name__}: {e}"
        if kind in (BATCH, KNOWN, SAMPLE):
            _send(out, ACK)
        elif kind == RESULT:
            reply = (FAILED, failure.encode()) if failure or tally is None else (STATS, tally.result().to_bytes())
            _send(out, *reply)
            tally = None


def main() -> None:
    serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
