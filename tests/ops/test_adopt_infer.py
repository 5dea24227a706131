"""`catalog adopt` into a new name in one pass: the schema inferred from the first records, and
every record checked to infer that same schema during the adoption itself (ops/adopt.py,
GUESS_RECORDS). The schema must be exactly the one inference over every record gives, and a
record the guess does not describe must fall back to that inference, with its errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from catalog import Catalog, RecordWriter
from catalog.errors import CatalogError
from catalog.inputs import InputOptions
from catalog.inputs.infer import infer_inputs
from catalog.ops import adopt as adoption
from catalog.tfrecord import proto
from catalog.tfrecord.example import encode_example, encode_sequence_example

GUESS = 8  # records the guess is made from, in these tests


@pytest.fixture(autouse=True)
def small_guess(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adoption, "GUESS_RECORDS", GUESS)


def write(path: Path, records: list[bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with RecordWriter(path) as w:
        for r in records:
            w.write(r)
    return path


def no_kind(**features: Any) -> bytes:
    """An Example with the features given, and ``empty`` a Feature with no list set (TFX's missing value)."""
    ex = proto.Example.FromString(encode_example(features))
    ex.features.feature["empty"].SetInParent()
    return ex.SerializeToString()


def rows(n: int, start: int = 0, **late: Any) -> list[bytes]:
    """``n`` records alike; from record ``late["at"]`` on, the features ``late`` gives too."""
    at = late.pop("at", n)
    out = []
    for i in range(start, start + n):
        feats: dict[str, Any] = {"id": i, "x": [i / 2, -i / 4], "text": f"row {i}"}
        if i >= at:
            feats.update(late)
        out.append(encode_example(feats))
    return out


def two_pass(files: list[Path]) -> dict[str, Any]:
    """The schema inference over every record gives (what adopt into a new name did before)."""
    return infer_inputs([(p, "tfrecord") for p in files], InputOptions()).schema.to_json()


# Each case: the files' records; they differ from the first GUESS records somewhere later, or not.
CASES: dict[str, list[list[bytes]]] = {
    "alike": [rows(20), rows(20, 20)],
    "optional feature later": [rows(20), rows(20, 20, at=30, extra=[1, 2])],
    "feature missing later": [
        rows(20),
        [encode_example({"id": i, "x": [0.0, 1.0]}) for i in range(5)],
    ],
    "list lengths vary later": [rows(20), [encode_example({"id": 1, "x": [1.0, 2.0, 3.0], "text": "t"})]],
    "list lengths vary from the start": [
        [encode_example({"v": list(range(i % 3))}) for i in range(30)],
        [encode_example({"v": list(range(4))}) for i in range(3)],
    ],
    "optional from the start": [
        [encode_example({"a": i} if i % 2 else {"a": i, "b": [1.5]}) for i in range(30)],
        [encode_example({"a": 1})],
    ],
    "bytes not UTF-8 later": [rows(20), [encode_example({"id": 1, "x": [0.0, 0.0], "text": b"\xff\xfe"})]],
    "a feature with no list": [[no_kind(id=i, x=[0.0, 1.0], text="t") for i in range(20)]],
    "an empty first file": [[], rows(20)],
    "more records than a guess": [rows(3), rows(3, 3), rows(40, 6, at=44, late=[3.5])],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_pass_infers_the_schema_of_every_record(tmp_path: Path, case: str) -> None:
    files = [write(tmp_path / "in" / f"part-{i}.tfrecord", recs) for i, recs in enumerate(CASES[case])]
    expected = two_pass(files)
    cat = Catalog.init(tmp_path / "cat")
    commit = cat.adopt("new", [tmp_path / "in"])
    ds = cat.dataset("new")
    assert ds.schema.to_json() == expected
    assert commit.records == sum(len(r) for r in CASES[case])
    assert ds.verify().ok


def test_the_guess_holds_then_the_records_are_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Records that all infer the first records' schema: no inference over every record (a
    second read of every file) before the adoption."""
    write(tmp_path / "in" / "a.tfrecord", rows(30))
    write(tmp_path / "in" / "b.tfrecord", rows(30, 30, at=31, extra=[1]))  # optional: guessed from neither
    called: list[int] = []

    def counted(*args: Any, **kw: Any) -> Any:
        called.append(1)
        return infer_inputs(*args, **kw)

    monkeypatch.setattr("catalog.api.infer_inputs", counted)
    cat = Catalog.init(tmp_path / "cat")
    cat.adopt("same", [tmp_path / "in" / "a.tfrecord"])
    assert called == []  # one pass
    cat.adopt("widened", [tmp_path / "in"])
    assert called == [1]  # 'extra' appears past the guess: every record inferred, as before
    assert "extra" in cat.dataset("widened").schema.features


class Inferred(Exception):
    """What the spy below raises once inference over every record is asked for."""


def test_a_sequence_example_past_the_guess_means_inference_over_every_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decoding against the guess takes a SequenceExample by its context alone, so the
    adoption refuses it itself: the schema is then inferred from every record (its feature
    lists too)."""
    write(tmp_path / "in" / "a.tfrecord", rows(20))
    seq = encode_sequence_example({"id": 7, "x": [0.0, 1.0], "text": "t"}, {"steps": [[1], [2, 3]]})
    write(tmp_path / "in" / "b.tfrecord", [seq])

    def spy(*args: Any, **kw: Any) -> Any:
        raise Inferred

    monkeypatch.setattr("catalog.api.infer_inputs", spy)
    cat = Catalog.init(tmp_path / "cat")
    with pytest.raises(Inferred):
        cat.adopt("new", [tmp_path / "in"])
    assert [d.name for d in cat.list()] == []


def test_a_record_inference_refuses_fails_as_it_did(tmp_path: Path) -> None:
    """A feature with two kinds past the guess: the error inference over every record gives, and
    nothing registered (the guessed dataset dropped again)."""
    files = [write(tmp_path / "in" / "a.tfrecord", rows(20)), write(tmp_path / "in" / "b.tfrecord", rows(1))]
    write(tmp_path / "in" / "c.tfrecord", [encode_example({"id": 1.5, "x": [0.0, 1.0], "text": "t"})])
    with pytest.raises(CatalogError) as expected:
        infer_inputs([(p, "tfrecord") for p in [*files, tmp_path / "in" / "c.tfrecord"]], InputOptions())
    cat = Catalog.init(tmp_path / "cat")
    with pytest.raises(CatalogError) as got:
        cat.adopt("new", [tmp_path / "in"])
    assert type(got.value) is type(expected.value) and str(got.value) == str(expected.value)
    assert [d.name for d in cat.list()] == []


def test_damage_past_the_guess_is_reported_as_inference_reports_it(tmp_path: Path) -> None:
    path = write(tmp_path / "in" / "a.tfrecord", rows(40))
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF  # inside the last record's data: its CRC no longer matches
    path.write_bytes(bytes(data))
    with pytest.raises(CatalogError) as expected:
        infer_inputs([(path, "tfrecord")], InputOptions())
    cat = Catalog.init(tmp_path / "cat")
    with pytest.raises(CatalogError) as got:
        cat.adopt("new", [path])
    assert type(got.value) is type(expected.value) and str(got.value) == str(expected.value)
    assert [d.name for d in cat.list()] == []


def test_sequence_examples_are_told_from_examples_exactly() -> None:
    """refuse_sequences: Examples written any way pass (a features field repeated, empty, or
    records shorter than its head), a SequenceExample anywhere in a batch is named."""
    examples = [
        encode_example({"id": 1}),
        b"",
        encode_example({"id": 1}) + encode_example({"x": [1.0]}),  # two features fields: merged
        encode_example({"t": "y" * 300}),  # a two-byte length
    ]
    adoption.refuse_sequences(examples, Path("p"), 0)
    seq = encode_sequence_example({"id": 1}, {"s": [[1]]})
    with pytest.raises(adoption.GuessMissed, match="record 12: a SequenceExample"):
        adoption.refuse_sequences([*examples, seq], Path("p"), 8)


def test_a_guess_missed_in_a_window_is_not_read_record_by_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window the guessed schema refuses ends the guess at once: the schema is inferred
    again, no record-by-record read looks for the record first."""
    write(tmp_path / "in" / "a.tfrecord", rows(20))
    write(tmp_path / "in" / "b.tfrecord", rows(20, 20, at=25, extra=[1]))
    slow: list[int] = []
    real = adoption._read_batches

    def counted(*args: Any, **kw: Any) -> Any:
        slow.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(adoption, "_read_batches", counted)
    cat = Catalog.init(tmp_path / "cat")
    cat.adopt("new", [tmp_path / "in"])
    assert "extra" in cat.dataset("new").schema.features
    assert slow == []


def test_a_mix_of_examples_and_sequence_examples_is_adopted_as_sequence_examples(tmp_path: Path) -> None:
    """The inferred schema has the feature lists (an Example reads as a SequenceExample without
    steps); its step of lists was tallied as one value a step and stopped the adoption."""
    write(tmp_path / "in" / "a.tfrecord", rows(20))
    seq = encode_sequence_example({"id": 7, "x": [0.0, 1.0], "text": "t"}, {"steps": [[1], [2, 3]]})
    write(tmp_path / "in" / "b.tfrecord", [seq])
    cat = Catalog.init(tmp_path / "cat")
    cat.adopt("new", [tmp_path / "in"])
    ds = cat.dataset("new")
    assert ds.schema.to_json()["sequence_features"] == {"steps": {"dtype": "int64", "shape": [None]}}
    steps = ds.stats().feature("steps")
    assert (steps.values.count, steps.values.min, steps.values.max) == (3, 1, 3)
