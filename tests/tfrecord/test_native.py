"""The C extension (catalog/tfrecord/_native.c) against the Python it stands in for.

Its promise: the same results as the fallbacks, on any input. ``parse_example`` may decline
(None) any record, but when it answers, the answer is protobuf's; it never accepts a record
protobuf rejects, and bytes of any shape never crash it.
"""

from __future__ import annotations

import contextlib
import io
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.errors import CodecError, CorruptRecordError
from catalog.schema.codec import kinds_by_protobuf
from catalog.tfrecord import example as wire
from catalog.tfrecord import framing, native, proto

_native = native.NATIVE
_turned_off = os.environ.get("CATALOG_NATIVE", "1") == "0"
needs_native = pytest.mark.skipif(
    _native is None and (os.environ.get("CI") != "true" or _turned_off),
    reason="the C extension is not built here (no C compiler?) or CATALOG_NATIVE=0",
)


def test_built_where_ci_runs() -> None:
    """Under CI the extension must be there: a build that silently fell back would test nothing."""
    if os.environ.get("CI") == "true" and not _turned_off:
        assert _native is not None, "catalog.tfrecord._native did not build (setup.py skips it without a C compiler)"
    else:
        assert native.NATIVE is _native


def test_catalog_native_0_turns_it_off() -> None:
    code = "from catalog.tfrecord import native; print(native.NATIVE is None)"
    env = {**os.environ, "CATALOG_NATIVE": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


# --------------------------------------------------------------------------- CRC and slices


def _ranges(data: bytes, cuts: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    n = len(data)
    pairs = [(min(a, b) % (n + 1), max(a, b) % (n + 1)) for a, b in cuts]
    pairs = [(min(a, b), max(a, b)) for a, b in pairs]
    return np.array([a for a, _ in pairs], dtype=np.int64), np.array([b for _, b in pairs], dtype=np.int64)


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000), st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 4000)), max_size=20))
def test_crc32c_ranges_and_slices_are_the_fallbacks(data: bytes, cuts: list[tuple[int, int]]) -> None:
    starts, ends = _ranges(data, cuts)
    want = [crc32c(data[a:b]) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    assert native.crc32c_ranges(data, starts, ends).tolist() == want
    assert [_native.crc32c(data[a:b]) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)] == want  # type: ignore[union-attr]
    assert native.slices(data, starts, ends) == [data[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    joined = b"".join(data[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True))
    assert native.join_ranges(data, starts, ends) == joined
    native.NATIVE = None  # the fallback's answer too
    try:
        assert native.join_ranges(data, starts, ends) == joined
    finally:
        native.NATIVE = _native


def test_crc32c_ranges_three_at_a_time_whatever_their_lengths_and_alignment() -> None:
    """The hardware path takes records three at a time (their common length together, then
    each one's rest): every mix of lengths, empty ones and unaligned starts, in runs of any
    count, is each range's own CRC."""
    data = os.urandom(5000)
    lengths = [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 3]
    for count in range(1, 10):
        for shift in range(8):
            starts = np.array([(shift + 37 * k) % 900 for k in range(count)], dtype=np.int64)
            ends = starts + np.array([lengths[(k + shift) % len(lengths)] for k in range(count)], dtype=np.int64)
            want = [crc32c(data[a:b]) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
            assert native.crc32c_ranges(data, starts, ends).tolist() == want


@needs_native
def test_crc32c_continues_and_knows_its_check_value() -> None:
    assert _native is not None
    assert _native.crc32c(b"123456789") == 0xE3069283  # CRC-32C's published check value
    assert _native.crc32c(b"56789", _native.crc32c(b"1234")) == 0xE3069283
    big = os.urandom(1 << 20)
    assert _native.crc32c(big) == crc32c(big)


@needs_native
@pytest.mark.parametrize(
    ("starts", "ends"),
    [([0], [11]), ([-1], [2]), ([3], [2]), ([0, 1], [1])],
    ids=["past-end", "negative", "backwards", "lengths"],
)
def test_ranges_outside_the_buffer_are_refused(starts: list[int], ends: list[int]) -> None:
    with pytest.raises(ValueError):
        native.crc32c_ranges(b"0123456789", np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))
    with pytest.raises(ValueError):
        native.slices(b"0123456789", np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))
    with pytest.raises(ValueError):
        native.join_ranges(b"0123456789", np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64))


@needs_native
def test_index_arrays_of_another_type_are_refused() -> None:
    with pytest.raises(TypeError, match="int64"):
        _native.crc32c_ranges(b"0123", np.array([0], dtype=np.int32), np.array([2], dtype=np.int32))  # type: ignore[union-attr]


# --------------------------------------------------------------------------- parse_example

_names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
_values = st.one_of(
    st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=6),
    st.lists(st.floats(width=32, allow_nan=False), max_size=6),
    st.lists(st.binary(max_size=40), max_size=6),
)


def _feature(values: list[Any]) -> bytes:
    ex = proto.Example()
    feat = ex.features.feature["x"]
    if values and isinstance(values[0], int):
        feat.int64_list.value.extend(values)
    elif values and isinstance(values[0], float):
        feat.float_list.value.extend(values)
    else:
        feat.bytes_list.value.extend(values)
    return feat.SerializeToString()


def _example(features: dict[str, list[Any]]) -> bytes:
    ex = proto.Example()
    for name, values in features.items():
        ex.features.feature[name].MergeFromString(_feature(values))
    return ex.SerializeToString()


def _same_as_protobuf(data: bytes) -> None:
    fast = native.parse_example(data)
    try:
        want = kinds_by_protobuf(data)
    except CodecError:
        assert fast is None, "accepted a record protobuf rejects"
        return
    if fast is not None:
        assert _exact(fast) == _exact(want)


def _exact(kinded: dict[str, Any]) -> dict[str, Any]:
    """Values with their Python types, floats by their bits (a NaN equals itself)."""
    out = {}
    for name, (kind, values) in kinded.items():
        out[name] = (kind, [(type(v), struct.pack("<d", v) if isinstance(v, float) else v) for v in values])
    return out


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_names, _values, max_size=6))
def test_serialized_examples_parse_as_protobuf_parses_them(features: dict[str, list[Any]]) -> None:
    data = _example(features)
    assert native.parse_example(data) is not None  # protobuf's own serialization is the regular layout
    _same_as_protobuf(data)


@needs_native
@settings(max_examples=500, deadline=None)
@given(st.dictionaries(_names, _values, min_size=1, max_size=4), st.data())
def test_damaged_examples_are_protobufs_answer_or_declined(features: dict[str, list[Any]], data: st.DataObject) -> None:
    _same_as_protobuf(_damaged(_example(features), data, 1, 3))


def _damaged(record: bytes, data: st.DataObject, least: int, most: int) -> bytes:
    """``record`` with ``least`` to ``most`` random edits: a bit flipped, a cut, bytes inserted."""
    b = bytearray(record)
    for _ in range(data.draw(st.integers(least, most))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        at = data.draw(st.integers(0, max(len(b) - 1, 0)))
        if op == "flip" and b:
            b[at] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "cut":
            del b[at:]
        else:
            b[at:at] = data.draw(st.binary(min_size=1, max_size=4))
    return bytes(b)


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_protobufs_answer_or_declined(data: bytes) -> None:
    _same_as_protobuf(data)


def _twice(key: bytes) -> bytes:
    return wire.map_entry(key, wire.int64_feature([1])) + wire.map_entry(key, wire.int64_feature([2]))


def _int64_payload(packed: bytes) -> bytes:
    return wire.length_delimited(wire.TAG_3, wire.length_delimited(wire.TAG_1, packed))


@needs_native
@pytest.mark.parametrize(
    "record",
    [
        # two entries for one key: protobuf keeps the last
        wire.features_field(
            wire.map_entry(b"a", wire.int64_feature([1])) + wire.map_entry(b"a", wire.int64_feature([2]))
        ),
        # floats unpacked (fixed32 each), as old writers may
        wire.features_field(wire.map_entry(b"f", wire.length_delimited(wire.TAG_2, b"\x0d" + struct.pack("<f", 1.5)))),
        # an unknown field in the Example
        wire.features_field(wire.map_entry(b"a", wire.int64_feature([1]))) + b"\x18\x05",
        # a key that is not UTF-8
        wire.features_field(wire.map_entry(b"\xff", wire.int64_feature([1]))),
        # a SequenceExample's feature_lists
        wire.features_field(b"") + wire.length_delimited(wire.TAG_2, b""),
        # an 11-byte varint
        wire.features_field(
            wire.map_entry(
                b"a", wire.length_delimited(wire.TAG_3, wire.length_delimited(wire.TAG_1, b"\xff" * 10 + b"\x01"))
            )
        ),
    ],
    ids=["repeated-key", "unpacked-floats", "unknown-field", "bad-utf8-key", "sequence-example", "long-varint"],
)
def test_irregular_layouts_are_declined(record: bytes) -> None:
    assert native.parse_example(record) is None
    _same_as_protobuf(record)


@needs_native
@pytest.mark.parametrize("odd", [bytearray(b"\x0a\x00"), memoryview(b"\x0a\x00"), "text", None, 5])
def test_only_bytes_are_parsed(odd: Any) -> None:
    assert native.parse_example(odd) is None  # protobuf says what other objects are


@needs_native
def test_an_empty_feature_is_left_out_and_an_empty_list_kept() -> None:
    record = wire.features_field(wire.map_entry(b"gone", b"") + wire.map_entry(b"empty", wire.int64_feature([])))
    assert native.parse_example(record) == {"empty": ("int64_list", [])} == kinds_by_protobuf(record)


# --------------------------------------------------------------------------- framing scans

_records = st.lists(st.binary(max_size=300), max_size=12)


def _framed_damaged(records: list[bytes], data: st.DataObject) -> bytes:
    framed = [framing.frame_header(len(r)) + r + framing.masked_crc32c(r).to_bytes(4, "little") for r in records]
    buf = bytearray(b"".join(framed))
    for _ in range(data.draw(st.integers(0, 2))):
        if buf and data.draw(st.booleans()):
            buf[data.draw(st.integers(0, len(buf) - 1))] ^= 1 << data.draw(st.integers(0, 7))
        else:
            del buf[data.draw(st.integers(0, len(buf))) :]
    return bytes(buf)


def _scan_outcome(scan: Any, buf: bytes, pos: int, base: int) -> tuple[str, Any]:
    try:
        return "ok", scan(buf, pos, base)
    except CorruptRecordError as e:
        return "error", str(e)


@needs_native
@settings(max_examples=400, deadline=None)
@given(_records, st.data(), st.booleans(), st.booleans())
def test_scan_records_is_the_scan_a_record_at_a_time(
    records: list[bytes], data: st.DataObject, verify: bool, size: bool
) -> None:
    buf = _framed_damaged(records, data)
    pos = data.draw(st.integers(0, min(len(buf), 40)))
    scanner = framing._Scanner(io.BytesIO(), "f.tfrecord", verify, False, len(buf) + 7 if size else None)
    assert _scan_outcome(scanner.scan, buf, pos, 100) == _scan_outcome(scanner.scan_each, buf, pos, 100)


@needs_native
@settings(max_examples=300, deadline=None)
@given(_records, st.data())
def test_whole_records_walks_as_python_does(records: list[bytes], data: st.DataObject) -> None:
    buf = _framed_damaged(records, data)
    end = data.draw(st.integers(0, len(buf)))
    fast = framing.whole_records(buf, end)
    with _without_native():
        slow = framing.whole_records(buf, end)
    assert fast[0].tolist() == slow[0].tolist() and fast[1].tolist() == slow[1].tolist() and fast[2] == slow[2]
    assert fast[0].dtype == slow[0].dtype == np.int64


@contextlib.contextmanager
def _without_native() -> Iterator[None]:
    """The fallbacks run: the C extension is not there for the time being."""
    saved = native.NATIVE
    native.NATIVE = None
    try:
        yield
    finally:
        native.NATIVE = saved


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=8).map(lambda t: t.encode("utf-8")), st.binary(max_size=6)), max_size=10))
def test_texts_decode_as_python_does(values: list[bytes]) -> None:
    buf = b"".join(values)
    ends = np.cumsum([len(v) for v in values], dtype=np.int64)
    starts = ends - np.array([len(v) for v in values], dtype=np.int64)
    fast = native.texts(buf, starts, ends)
    with _without_native():
        slow = native.texts(buf, starts, ends)
    assert fast == slow
    if slow is None:
        assert any(not _is_utf8(v) for v in values)


def _is_utf8(v: bytes) -> bool:
    try:
        v.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# --------------------------------------------------------------------------- hostile arguments


def _survives(code: str) -> str:
    """Run ``code`` (with ``N``, the extension, and ``np``) in a child: a crash fails the test
    rather than the run. Returns what it printed."""
    prelude = "import numpy as np\nfrom catalog.tfrecord import native\nN = native.NATIVE\n"
    out = subprocess.run([sys.executable, "-c", prelude + code], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
    return out.stdout.strip()


@needs_native
@pytest.mark.parametrize("pos", [(1 << 63) - 1, (1 << 63) - 5, (1 << 63) - 12, -1, -(1 << 63)])
def test_scan_records_from_a_position_past_the_buffer_finds_nothing(pos: int) -> None:
    """``pos + 12`` overflowed near 2**63 and the scan read far outside the buffer."""
    assert _survives(f"print(N.scan_records(b'0123456789abcdef', {pos}, True))") == repr(([], pos, -1, -1, -1))


@needs_native
@pytest.mark.parametrize(
    ("kind", "values", "n"),
    [(0, b"\0" * 8, (1 << 61) + 1), (1, b"\0" * 4, (1 << 62) + 1), (0, b"", -1), (2, b"", -1)],
    ids=["int64-n*8-wraps", "float32-n*4-wraps", "negative-int64", "negative-text"],
)
def test_encode_plain_refuses_a_row_count_the_columns_cannot_hold(kind: int, values: bytes, n: int) -> None:
    """``n * 8`` (``n * 4``) wrapped to the values' length and the rows were read past it."""
    code = f"""
try:
    N.encode_plain([(b"k", {kind}, {values!r}, b"")], {n}, False)
except ValueError as e:
    print("ValueError")
"""
    assert _survives(code) == "ValueError"


@needs_native
def test_encode_plain_takes_texts_as_str_objects_or_declines() -> None:
    """Kind 3: a sequence of exactly ``str`` (list, tuple, object array), encoded as kind 2
    encodes their UTF-8; a value of another type or without UTF-8 (a lone surrogate) declines
    the batch (None: the encoders judge it); a length other than ``n`` is refused."""
    texts = ["", "a", "é" * 70, "x" * 200, "\U0001f600"]
    data = "".join(texts).encode("utf-8")
    sizes = np.array([len(t.encode("utf-8")) for t in texts], dtype=np.int64)
    want = _native.encode_plain([(b"t", 2, data, sizes)], len(texts), True)
    for column in (texts, tuple(texts), np.array(texts, dtype=object)):
        assert _native.encode_plain([(b"t", 3, column, None)], len(texts), True) == want
    for odd in (b"bytes", np.str_("a subclass"), None, 5, "\ud800"):
        assert _native.encode_plain([(b"t", 3, [*texts, odd], None)], len(texts) + 1, True) is None
    with pytest.raises(ValueError):
        _native.encode_plain([(b"t", 3, texts, None)], len(texts) + 1, True)
    with pytest.raises(TypeError):
        _native.encode_plain([(b"t", 3, 42, None)], 1, True)


@needs_native
@pytest.mark.parametrize("n", [-1, 1 << 61])
def test_encode_plain_without_columns_refuses_a_negative_or_huge_row_count(n: int) -> None:
    """Without columns nothing bounded ``n``: a loop of 2**61 rows, or a negative size's SystemError."""
    code = f"""
try:
    N.encode_plain([], {n}, True)
except ValueError as e:
    print("ValueError")
"""
    assert _survives(code) == "ValueError"


@needs_native
def test_crc32c_ranges_rechecks_ranges_another_thread_changes() -> None:
    """The ranges were checked, then read again with the GIL released: a thread that moved
    a start meanwhile sent the CRC a gigabyte before the buffer."""
    code = """
import threading, time
buf = bytes(1 << 24)
starts, ends = np.zeros(400, dtype=np.int64), np.full(400, 1 << 24, dtype=np.int64)
def move():
    time.sleep(0.05)
    starts[-1] = -(1 << 40)
threading.Thread(target=move).start()
try:
    N.crc32c_ranges(buf, starts, ends)
    print("raced past" if starts[-1] >= 0 else "too quick")
except ValueError:
    print("ValueError")
"""
    assert _survives(code) in ("ValueError", "too quick")


# --------------------------------------------------------------------------- pread_ranges


@needs_native
@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.binary(max_size=2000), min_size=1, max_size=3),
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2100), st.integers(0, 2100)), max_size=12),
    st.integers(0, 80),
)
def test_pread_ranges_is_the_reads_joined(tmp_path_factory: Any, files: list[bytes], cuts: list[Any], pad: int) -> None:
    """Ranges of several open files, in any order, into one buffer with ``pad`` zeros after it:
    what ``os.pread`` of each, joined, gives; a range past a file's end comes back short: None."""
    folder = tmp_path_factory.mktemp("pread")
    with contextlib.ExitStack() as stack:
        fds = []
        for k, data in enumerate(files):
            (folder / f"{k}").write_bytes(data)
            fds.append(stack.enter_context(open(folder / f"{k}", "rb")).fileno())
        which = [fds[i % len(fds)] for i, _, _ in cuts]
        starts = [min(a, b) for _, a, b in cuts]
        ends = [max(a, b) for _, a, b in cuts]
        reads = [os.pread(fd, b - a, a) for fd, a, b in zip(which, starts, ends, strict=True)]
        got = native.pread_ranges(*(np.array(v, dtype=np.int64) for v in (which, starts, ends)), pad)
        short = any(len(r) != b - a for r, a, b in zip(reads, starts, ends, strict=True))
        assert got == (None if short else b"".join(reads) + bytes(pad))


@needs_native
def test_pread_ranges_of_a_closed_file_or_bad_arguments(tmp_path: Any) -> None:
    """A read that fails (a closed descriptor) is None, for the caller's own read to raise;
    arguments that cannot be ranges are refused before anything is read."""
    path = tmp_path / "f"
    path.write_bytes(b"0123456789")
    with open(path, "rb") as f:
        fd = f.fileno()
    one = np.array([fd], dtype=np.int64)
    assert native.pread_ranges(one, np.array([0], dtype=np.int64), np.array([4], dtype=np.int64), 0) is None
    with open(path, "rb") as f:
        fds = np.array([f.fileno()], dtype=np.int64)
        for starts, ends, pad in (([3], [2], 0), ([-1], [2], 0), ([0], [2], -1), ([0, 1], [2], 0)):
            with pytest.raises(ValueError):
                native.pread_ranges(fds, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64), pad)
        with pytest.raises(TypeError, match="int64"):
            _native.pread_ranges(fds, np.array([0], dtype=np.int32), np.array([2], dtype=np.int32), 0)  # type: ignore[union-attr]


def test_pread_ranges_without_the_extension_declines() -> None:
    """The fallback is the caller's own reads: without the extension the answer is None."""
    code = (
        "from catalog.tfrecord import native; import numpy as np; z = np.zeros(1, np.int64); "
        "print(native.pread_ranges(z, z, z, 0))"
    )
    env = {**os.environ, "CATALOG_NATIVE": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "None"


# --------------------------------------------------------------------------- strided buffers


def _strided(data: bytes) -> memoryview:
    """A view of ``data`` that is not C-contiguous (every other byte of a doubled buffer)."""
    doubled = bytearray(2 * len(data))
    doubled[::2] = data
    return memoryview(doubled)[::2]


def test_strided_views_give_what_their_bytes_give() -> None:
    """A non-contiguous view is copied in its logical order, never a BufferError to the caller
    (with or without the extension)."""
    data = b"alpha-beta-\xc3\xa9"
    starts, ends = np.array([0, 6, 11], dtype=np.int64), np.array([5, 10, 13], dtype=np.int64)
    view = _strided(data)
    assert native.slices(view, starts, ends) == native.slices(data, starts, ends)
    assert native.texts(view, starts, ends) == ["alpha", "beta", "é"]
    assert native.crc32c_ranges(view, starts, ends).tolist() == native.crc32c_ranges(data, starts, ends).tolist()


def test_read_records_takes_a_strided_view() -> None:
    out = io.BytesIO()
    with framing.RecordWriter(out) as w:
        for i in range(5):
            w.write(b"record %d" % i)
    assert list(framing.read_records(_strided(out.getvalue()))) == [b"record %d" % i for i in range(5)]
    assert framing.masked_crc32c(_strided(b"abc")) == framing.masked_crc32c(b"abc")


# --------------------------------------------------------------------------- scalar_columns

_SCALAR_KEYS = (b"a", b"bb", b"a_longer_key_than_eight", b"f", b"t")
_SCALAR_KINDS = bytes([1, 1, 0, 2, 3])  # int64, int64, not extracted, float32, bytes
_LIST_KIND = {1: "int64_list", 2: "float_list", 3: "bytes_list"}


def _scalars_by_protobuf(record: bytes) -> dict[bytes, Any] | None:
    """What scalar_columns may answer for one record: protobuf's one value of each extracted
    key (None where absent), or None when protobuf rejects the record or a key is not one value
    of its kind (the record must then be declined)."""
    try:
        kinded = kinds_by_protobuf(record)
    except CodecError:
        return None
    out: dict[bytes, Any] = {}
    for name, (kind, values) in kinded.items():
        key = name.encode("utf-8")
        if key not in _SCALAR_KEYS:
            return None
        want = _SCALAR_KINDS[_SCALAR_KEYS.index(key)]
        if want == 0:
            continue
        if kind != _LIST_KIND[want] or len(values) != 1:
            return None
        out[key] = values[0]
    return out


def _scalar_answers(records: list[bytes]) -> list[dict[bytes, Any] | None]:
    raw = b"".join(records)
    lens = np.array([len(r) for r in records], dtype=np.int64)
    starts = np.cumsum(lens) - lens
    got = native.scalar_columns(raw, starts, starts + lens, _SCALAR_KEYS, _SCALAR_KINDS)
    assert got is not None
    slow, found, values = got
    extracted = [k for k, kind in zip(_SCALAR_KEYS, _SCALAR_KINDS, strict=True) if kind]
    answers: list[dict[bytes, Any] | None] = []
    for i in range(len(records)):
        if slow[i]:
            answers.append(None)
            continue
        row: dict[bytes, Any] = {}
        for x, key in enumerate(extracted):
            if key == b"t" and found[x, i]:
                start, end = values[x][i].tolist()
                assert starts[i] <= start <= end <= starts[i] + lens[i]  # within its record
                row[key] = raw[start:end]
            elif found[x, i]:
                v = int(values[x][i])
                row[key] = struct.unpack("<f", struct.pack("<I", v))[0] if key == b"f" else v
        answers.append(row)
    return answers


def _scalar_record(ints: dict[bytes, int], f: float | None, other: bool, t: list[bytes] | None = None) -> bytes:
    entries = b"".join(wire.map_entry(k, wire.int64_feature([v])) for k, v in ints.items())
    if f is not None:
        entries += wire.map_entry(b"f", wire.float_feature([f]))
    if other:
        entries += wire.map_entry(b"a_longer_key_than_eight", wire.bytes_feature([b"anything"]))
    if t is not None:  # one value (read), or none or two (declined)
        entries += wire.map_entry(b"t", wire.bytes_feature(t))
    return wire.features_field(entries)


_scalar_records = st.builds(
    _scalar_record,
    st.dictionaries(st.sampled_from([b"a", b"bb"]), st.integers(-(1 << 63), (1 << 63) - 1)),
    st.one_of(st.none(), st.floats(width=32, allow_nan=False)),
    st.booleans(),
    st.one_of(st.none(), st.lists(st.binary(max_size=300), min_size=1, max_size=1), st.lists(st.binary(), max_size=2)),
)


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.lists(_scalar_records, min_size=1, max_size=8), st.data())
def test_scalar_columns_are_protobufs_values_or_declined(records: list[bytes], data: st.DataObject) -> None:
    """Regular records are read (none declined), each value protobuf's; a damaged record (a
    flipped bit, a cut, bytes inserted) is protobuf's answer or declined, never another value.
    (Damaged records hold extracted keys only: a feature not extracted is not looked at, so its
    damage may go unseen, as the NumPy walk's projection promises.)"""
    assert _scalar_answers(records) == [_scalars_by_protobuf(r) for r in records]
    plain = data.draw(st.lists(_scalar_records.filter(lambda r: b"a_longer" not in r), min_size=1, max_size=8))
    damaged = [_damaged(record, data, 0, 2) for record in plain]
    for got, record in zip(_scalar_answers(damaged), damaged, strict=True):
        if got is not None:
            want = _scalars_by_protobuf(record)
            assert want is not None, "accepted a record protobuf rejects or reads otherwise"
            assert {k: struct.pack("<d", v) if isinstance(v, float) else v for k, v in got.items()} == {
                k: struct.pack("<d", v) if isinstance(v, float) else v for k, v in want.items()
            }


@needs_native
@pytest.mark.parametrize(
    "record",
    [
        _twice(b"a"),  # a key twice
        wire.features_field(wire.map_entry(b"f", wire.length_delimited(wire.TAG_2, b"\x0d" + struct.pack("<f", 1.5)))),
        wire.features_field(wire.map_entry(b"a", wire.int64_feature([1]))) + b"\x18\x05",  # unknown field
        wire.features_field(wire.map_entry(b"zz", wire.int64_feature([1]))),  # a key not in keys
        wire.features_field(wire.map_entry(b"a", wire.int64_feature([1, 2]))),  # two values
        wire.features_field(wire.map_entry(b"a", wire.float_feature([1.0]))),  # another kind
        wire.features_field(wire.map_entry(b"a", _int64_payload(b"\xff" * 10 + b"\x01"))),  # 11-byte varint
        wire.features_field(wire.map_entry(b"a", _int64_payload(b"\xff" * 9 + b"\x02"))),  # past 64 bits
        wire.features_field(b"") + wire.length_delimited(wire.TAG_2, b""),  # a SequenceExample
        b"",
    ],
    ids=["repeated-key", "unpacked-floats", "unknown-field", "other-key", "two-values", "other-kind",
         "long-varint", "past-64-bits", "sequence-example", "empty"],
)  # fmt: skip
def test_scalar_columns_decline_irregular_records(record: bytes) -> None:
    assert _scalar_answers([record]) == [None]


@needs_native
def test_scalar_columns_refuse_bad_arguments() -> None:
    at = np.array([0], dtype=np.int64)
    for keys, kinds in [
        ((), b""),
        ((b"a", b"a"), b"\x01\x01"),
        ((b"a",), b"\x01\x01"),
        ((b"a",), b"\x04"),
        (("a",), b"\x01"),
    ]:
        with pytest.raises((TypeError, ValueError)):
            native.scalar_columns(b"\x0a\x00", at, at + 2, keys, kinds)  # type: ignore[arg-type]


def _framed(records: list[bytes]) -> tuple[bytes, np.ndarray, np.ndarray]:
    out = io.BytesIO()
    with framing.RecordWriter(out) as w:
        for r in records:
            w.write(r)
    lengths = np.array([len(r) for r in records], dtype=np.int64)
    at = np.cumsum(lengths + framing.FRAMING) - (lengths + framing.FRAMING)
    return out.getvalue(), at, lengths


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=12), st.data())
def test_the_framing_check_finds_what_the_numpy_check_finds(records: list[bytes], data: st.DataObject) -> None:
    """framing_fault with the C header check (native.header_fault) names the same first
    damaged record, header or data, as without it, wherever the damage is."""
    raw, at, lengths = _framed(records)
    damaged = bytearray(raw)
    for _ in range(data.draw(st.integers(0, 3))):
        damaged[data.draw(st.integers(0, len(damaged) - 1))] ^= 1 << data.draw(st.integers(0, 7))
    buf = bytes(damaged) + bytes(8)
    for check_data in (True, False):
        with_c = framing.framing_fault(buf, at, lengths, {}, check_data)
        native.NATIVE = None
        try:
            without = framing.framing_fault(buf, at, lengths, {}, check_data)
        finally:
            native.NATIVE = _native
        assert with_c == without
    if damaged == bytearray(raw):
        assert framing.framing_fault(buf, at, lengths, {}) is None


@needs_native
def test_header_fault_refuses_records_past_the_buffer() -> None:
    raw, at, lengths = _framed([b"abc", b"defg"])
    assert native.header_fault(raw, at, lengths) == -1
    assert native.header_fault(raw[:-1], at, lengths) == 1  # the last footer cut
    assert native.header_fault(raw, at, lengths + 1) == 0
    assert native.header_fault(raw, np.array([-1], dtype=np.int64), np.array([0], dtype=np.int64)) == 0


# --------------------------------------------------------------------------- float32 figures


def _figures_by_numpy(x: np.ndarray) -> tuple[int, float, float, float, float]:
    wide = x.astype(np.float64)
    mean = float(wide.mean())
    return int((x == 0).sum()), float(x.min()), float(x.max()), mean, float(((wide - mean) ** 2).sum())


@needs_native
@settings(max_examples=200, deadline=None)
@given(
    n=st.sampled_from([1, 3, 4, 5, 4095, 4096, 4097, 8191, 10_003]),
    centre=st.sampled_from([0.0, 1.0, -3e4, 1e5, 1e30, -1e-30, 3e38]),
    spread=st.sampled_from([0.0, 1e-6, 1.0, 1e3, 1e37]),
    zeros=st.floats(0, 0.5),
    seed=st.integers(0, 2**31),
)
def test_float32_figures_are_numpys(n: int, centre: float, spread: float, zeros: float, seed: int) -> None:
    """Zeros (-0.0 too), minimum, maximum, mean and the sum of squared deviations of finite
    float32s: NumPy's in float64, across block edges, any length, means far beyond the spread
    (the blocks' differences are exact) and values near float32's limit (no overflow)."""
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):
        x = (centre + spread * rng.standard_normal(n)).astype(np.float32)
    x[~np.isfinite(x)] = 1.0
    x[rng.random(n) < zeros] = rng.choice([0.0, -0.0])
    got = native.float32_figures(x)
    assert got is not None
    want = _figures_by_numpy(x)
    assert got[:3] == want[:3]
    assert got[3] == pytest.approx(want[3], rel=1e-12, abs=1e-300)
    assert got[4] == pytest.approx(want[4], rel=1e-9, abs=want[3] ** 2 * n * 1e-24)


@needs_native
@pytest.mark.parametrize("n", [1 << 20, 1 << 22, 1 << 24])
def test_float32_figures_of_steps_and_sorted_values_keep_their_spread(n: int) -> None:
    """A spread far below the mean, in order (a step of one ulp at 1e4, sorted values at 1e6):
    no running mean drifts into the squared deviations (a block-by-block merge lost 1e-9 to
    4e-8 of them here)."""
    step = np.full(n, 10_000.0, dtype=np.float32)
    step[n // 2 :] = np.nextafter(np.float32(10_000.0), np.float32(20_000.0))
    ordered = np.sort((1e6 + np.random.default_rng(n).random(n)).astype(np.float32))
    for x in (step, ordered):
        got = native.float32_figures(x)
        assert got is not None
        want = _figures_by_numpy(x)
        assert got[3] == pytest.approx(want[3], rel=1e-15)
        assert got[4] == pytest.approx(want[4], rel=1e-12)


@needs_native
@pytest.mark.parametrize("odd", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("at", [0, 3, 4096, 9999])
def test_float32_figures_leave_nans_and_infinities_to_numpy(odd: float, at: int) -> None:
    x = np.ones(10_000, dtype=np.float32)
    x[at] = odd
    assert native.float32_figures(x) is None
    assert native.float32_figures(x[::2]) is None or at % 2  # a strided view: copied first
    with pytest.raises(ValueError):
        native.NATIVE.float32_figures(b"")  # type: ignore[union-attr]


@needs_native
@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=300), max_size=20), st.booleans())
def test_frame_records_frames_as_the_format_says(records: list[bytes], as_tuple: bool) -> None:
    """Each record: its length (u64), the length's masked CRC32C, the data, the data's masked
    CRC32C; back to back; the lengths as native uint64s (what the writer's index keeps)."""
    framed, lengths = _native.frame_records(tuple(records) if as_tuple else records)
    want = b"".join(framing.frame_header(len(r)) + r + struct.pack("<I", framing.masked_crc32c(r)) for r in records)
    assert framed == want
    assert np.frombuffer(lengths, dtype=np.uint64).tolist() == [len(r) for r in records]


@needs_native
def test_frame_records_takes_only_bytes() -> None:
    for odd in ([b"ok", bytearray(b"no")], [b"ok", "text"], b"not a list", None):
        with pytest.raises(TypeError):
            _native.frame_records(odd)
