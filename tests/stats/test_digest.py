"""stats.digest: a value's digest is the same alone and in any batch (whichever path computes
it), reads every byte, and counts distinct long values within the sketch's error."""

from __future__ import annotations

import numpy as np
import pytest

from catalog.schema import Schema
from catalog.stats import Tally, digest
from catalog.stats.digest import digests
from catalog.tfrecord import native


def test_a_digest_is_the_same_alone_and_in_any_batch() -> None:
    rng = np.random.default_rng(0)
    fixed = [rng.bytes(1024) for _ in range(300)]  # one length, a multiple of 4: the 2-D view
    mixed = [rng.bytes(int(n)) for n in rng.integers(0, 5000, 300)]  # size classes
    together = digests(fixed + mixed + [bytes(70_000)])
    alone = np.array([digests([v])[0] for v in [*fixed, *mixed, bytes(70_000)]])
    assert np.array_equal(together, alone)
    assert np.array_equal(digests(fixed), together[:300])
    assert len(set(together.tolist())) == len(together) - (len(mixed) - len(set(mixed)))


def test_every_byte_and_the_length_count() -> None:
    base = bytes(1024)
    changed = [base[:i] + b"\x80" + base[i + 1 :] for i in range(1024)]  # one byte differs, anywhere
    lengths = [bytes(n) for n in range(0, 40)]  # zero bytes alone: only the length tells them apart
    found = digests([base, *changed, *lengths]).tolist()
    assert len(set(found)) == 1 + 1024 + 40


def test_distinct_long_values_are_counted_within_the_sketchs_error() -> None:
    """100,000 distinct 1 KiB values alike but for 8 bytes somewhere in the middle, in batches
    of a tally; then the same values again: the estimate stays within 3 standard errors (2.3%)."""
    schema = Schema.from_json({"features": {"payload": {"dtype": "bytes"}}})
    rng = np.random.default_rng(1)
    base = bytearray(rng.bytes(1024))
    values = []
    for i in range(100_000):
        base[500:508] = i.to_bytes(8, "little")
        values.append(bytes(base))
    tally = Tally(schema, helper=False)
    for twice in (values, values[::-1]):
        for start in range(0, len(twice), 8192):
            part = np.array(twice[start : start + 8192], dtype=object)
            tally.add_columns({"payload": part}, len(part), {})
    fs = tally.result().features["payload"]
    assert fs.long_values == 200_000 and fs.top_values() == []
    assert abs((fs.distinct_estimate() or 0) / 100_000 - 1) < 3 * 0.023


def test_the_c_loop_sums_as_numpy_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """native.digest_sums (one C loop a value) gives the NumPy path's sums, bit for bit, for
    values of every length (a multiple of 4 or not, empty, past 64 KiB), so that digests of
    one value match across machines with and without the extension; anything but bytes is
    left to NumPy."""
    if native.NATIVE is None:
        pytest.skip("the C extension is not built here")
    rng = np.random.default_rng(2)
    values = [rng.bytes(int(n)) for n in rng.integers(0, 3000, 500)] + [b"", b"\xff", bytes(70_001)]
    words = (max(map(len, values)) + 3) // 4
    got = native.digest_sums(values, digest._coefficient_row(words))
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    assert got is not None and np.array_equal(got, digest._classed_sums(values, lengths))
    fixed = [rng.bytes(1024) for _ in range(50)]
    assert np.array_equal(
        native.digest_sums(fixed, digest._coefficient_row(256)), digest._block_sums(b"".join(fixed), 50, 1024)
    )
    assert native.digest_sums([b"ab", "ab"], digest._coefficient_row(1)) is None  # type: ignore[list-item]
    assert native.digest_sums([bytes(9)], digest._coefficient_row(2)) is None  # more words than coefficients
    with_c = digests(values)
    monkeypatch.setattr(digest, "digest_sums", lambda *_: None)
    assert np.array_equal(digests(values), with_c)
