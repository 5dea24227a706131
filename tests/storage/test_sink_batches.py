"""ShardSink's batch paths (write_many of a list, write_framed, write_decoded) and
Tally.add_records: the shards, their rolls, indexes and statistics are those of the records
written one by one."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from catalog.schema import Schema
from catalog.stats import Tally
from catalog.stats.dataset import DatasetStats
from catalog.stats.summary import summary
from catalog.storage.sink import UNLIMITED, ShardSink
from catalog.tfrecord.framing import frame_header, masked_crc32c

INTENT = "0123456789abcdef0123456789ab"
SCHEMA = Schema.from_json({"features": {"id": {"dtype": "int64"}, "text": {"dtype": "string", "default": "-"}}})


def _records(n: int) -> list[bytes]:
    rng = random.Random(n)
    return [SCHEMA.encode({"id": i, "text": "x" * rng.randrange(40)} if i % 7 else {"id": i}) for i in range(n)]


def _framed(records: list[bytes]) -> bytes:
    return b"".join(frame_header(len(r)) + r + masked_crc32c(r).to_bytes(4, "little") for r in records)


def _shards(root: Path, write: Any, size: int, count: int) -> list[tuple[Any, ...]]:
    sink = ShardSink(root, "ds", INTENT, shard_size=size, shard_records=count, schema=SCHEMA)
    write(sink)
    out = []
    for s in sink.close():
        stats = {f["feature"]: f for f in _stats_json(s.stats)}
        out.append((s.records, s.bytes, s.checksum, s.index_checksum, stats, (root / s.rel).read_bytes()))
    return out


def _stats_json(data: bytes) -> list[dict[str, Any]]:
    sketched = ("quantiles", "histogram")  # random (the sketches' own coins)
    features = DatasetStats.from_bytes(data).features.values()
    return [{k: v for k, v in summary(f).items() if k not in sketched} for f in features]


@pytest.mark.parametrize(("size", "count"), [(UNLIMITED, UNLIMITED), (UNLIMITED, 700), (9000, UNLIMITED)])
def test_batches_write_the_shards_records_one_by_one_write(tmp_path, size, count):
    records = _records(2000)

    def one_by_one(sink: ShardSink) -> None:
        for r in records:
            sink.write(r)

    def many(sink: ShardSink) -> None:
        sink.write_many(records[:500])
        sink.write_many(records[500:])

    def framed(sink: ShardSink) -> None:
        sink.write_many(records[:3])
        sink.write_framed(_framed(records[3:1500]), [len(r) for r in records[3:1500]], lambda: records[3:1500])
        sink.write_framed(_framed(records[1500:]), [len(r) for r in records[1500:]], lambda: records[1500:])

    def decoded(sink: ShardSink) -> None:
        absent: dict[str, Any] = {}
        sink.write_decoded(records, SCHEMA.decode_batch(records, absent), absent)

    want = _shards(tmp_path / "a", one_by_one, size, count)
    assert len(want) == 1 if size == count == UNLIMITED else len(want) > 1  # (the shards roll)
    assert _shards(tmp_path / "b", many, size, count) == want
    assert _shards(tmp_path / "c", framed, size, count) == want
    assert _shards(tmp_path / "d", decoded, size, count) == want


def test_add_records_tallies_what_add_record_does() -> None:
    records = _records(20_000)
    one, many = Tally(SCHEMA, helper=False), Tally(SCHEMA, helper=False)
    for r in records:
        one.add_record(r)
    many.add_records(records[:5])
    many.add_records(records[5:])
    assert one._runs == many._runs
    assert _stats_json(one.result().to_bytes()) == _stats_json(many.result().to_bytes())


def test_an_empty_batch_opens_no_shard(tmp_path):
    sink = ShardSink(tmp_path, "ds", INTENT, shard_size=UNLIMITED, shard_records=UNLIMITED, schema=SCHEMA)
    sink.write_many([])
    sink.write_framed(b"", [], list)
    sink.write_decoded([], {}, {})
    assert sink.close() == [] and sink.records == 0
