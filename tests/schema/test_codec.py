"""catalog.schema.codec: the compiled row codec (encode, check, decode a record) and feature inference."""

from __future__ import annotations

import numpy as np
import pytest

from catalog.errors import CodecError, ValidationError
from catalog.schema.codec import RowCodec, decode_kinds, infer_features, kinds_from_values, unknown_fields_within
from catalog.schema.features import Feature, parse_feature
from catalog.tfrecord import example as wire


def _codec(**raw: dict[str, object]) -> RowCodec:
    return RowCodec({name: parse_feature(name, spec) for name, spec in raw.items()})


def test_rows_round_trip_with_defaults_and_optional_features() -> None:
    codec = _codec(
        id={"dtype": "int64"},
        score={"dtype": "float32", "default": 0.5},
        tags={"dtype": "string", "shape": [None]},
        note={"dtype": "string", "optional": True},
        t={"dtype": "uint8", "shape": [None, 2], "encoding": "tensor"},
    )
    filled: list[str] = []
    data = codec.encode({"id": 3, "tags": ["a", "b"], "t": np.ones((1, 2), np.uint8)}, filled)
    assert filled == ["score"]  # the optional feature is absent, not filled
    row = codec.decode(data)
    assert row["id"] == 3 and row["score"] == 0.5 and row["tags"] == ["a", "b"] and row["note"] is None
    assert row["t"].tolist() == [[1, 1]]
    assert set(decode_kinds(data)) == {"id", "score", "tags", "t", "t/shape"}


def test_encoding_refuses_missing_extra_and_non_mapping_rows() -> None:
    codec = _codec(id={"dtype": "int64"})
    with pytest.raises(ValidationError, match=r"^feature 'id': missing \(the feature has no default\)$"):
        codec.encode({})
    with pytest.raises(ValidationError, match=r"^feature 'x': not in the schema$"):
        codec.encode({"id": 1, "x": 2})
    with pytest.raises(ValidationError, match=r"^a row is a mapping of feature name to value, got list$"):
        codec.encode([1])  # type: ignore[arg-type]


def test_encode_columns_names_the_row_of_a_bad_value() -> None:
    codec = _codec(id={"dtype": "int64"}, s={"dtype": "string", "default": "z"})
    filled: dict[str, list[int]] = {}
    records = codec.encode_columns({"id": [1, 2, 3], "s": ["a", None, "c"]}, 3, filled)
    assert records == [codec.encode({"id": 1, "s": "a"}), codec.encode({"id": 2}), codec.encode({"id": 3, "s": "c"})]
    assert filled == {"s": [1]}
    with pytest.raises(ValidationError, match=r"^record 2, feature 'id': expected int64, got str 'x'$"):
        codec.encode_columns({"id": [1, 2, "x"]}, 3)


def test_records_that_break_the_schema_are_refused_by_name() -> None:
    codec = _codec(id={"dtype": "int64"}, v={"dtype": "float32", "shape": [2]}, s={"dtype": "string"})
    good = {"id": (wire.INT64, [1]), "v": (wire.FLOAT, [1.0, 2.0]), "s": (wire.BYTES, [b"ok"])}
    codec.check_decoded(good)
    cases = [
        (
            {**good, "id": (wire.FLOAT, [1.0])},
            "feature 'id': stored as float_list, the schema wants int64_list (int64)",
        ),
        ({**good, "id": (wire.INT64, [1, 2])}, "feature 'id': expected exactly one value, got 2"),
        ({**good, "v": (wire.FLOAT, [1.0])}, "feature 'v': expected 2 values for shape [2], got 1"),
        ({**good, "s": (wire.BYTES, [b"\xff"])}, "feature 's': not valid UTF-8 text at byte 0"),
        ({**good, "z": (wire.INT64, [1])}, "feature 'z': not in the schema"),
    ]
    for decoded, message in cases:
        with pytest.raises(ValidationError) as e:
            codec.check_decoded(decoded)
        assert str(e.value) == message


def test_bytes_that_are_not_an_example_are_a_codec_error() -> None:
    with pytest.raises(CodecError, match=r"^not a valid serialized tf\.train\.Example"):
        decode_kinds(b"\x0a\xff\xff")
    codec = _codec(id={"dtype": "int64"})
    assert not unknown_fields_within(codec.encode({"id": 1}))


def test_kinds_and_inference() -> None:
    assert kinds_from_values({"a": [1], "b": [1.0], "c": [b"x"], "d": []}) == {
        "a": (wire.INT64, [1]), "b": (wire.FLOAT, [1.0]), "c": (wire.BYTES, [b"x"]), "d": (None, []),
    }  # fmt: skip
    codec = _codec(id={"dtype": "int64"}, s={"dtype": "string", "optional": True})
    records = [codec.encode({"id": 1, "s": "a"}), codec.encode({"id": 2})]
    inferred = sorted(infer_features(records), key=lambda f: f.name)  # a protobuf map's order is its own
    assert inferred == [Feature("id", "int64"), Feature("s", "string", optional=True)]


def test_inferred_feature_order_does_not_depend_on_the_wire_order() -> None:
    """An Example's features are a protobuf map: TensorFlow writes them in a hash order that
    changes from run to run, so the same records written twice must imply the same schema."""
    from catalog import Schema, encode_example, encode_sequence_example

    one = encode_example({"user_id": 1, "clicks": 2.0, "query": b"q"})
    other = encode_example({"query": b"q", "user_id": 1, "clicks": 2.0})
    assert one != other  # the same features, in another order on the wire
    assert list(Schema.infer([one]).features) == list(Schema.infer([other]).features) == ["clicks", "query", "user_id"]
    seq = [
        encode_sequence_example({"id": 1}, {"words": [[b"a"]], "frames": [[1.0]]}),
        encode_sequence_example({"id": 2}, {"frames": [[2.0]], "words": [[b"b"]]}),
    ]
    assert list(Schema.infer(seq).sequence) == ["frames", "words"]
    # rows keep their author's order: a dict's keys are ordered
    assert list(Schema.infer([{"b": 1, "a": 2}]).features) == ["b", "a"]


def test_schemaless_decoding_gives_features_by_name() -> None:
    """decode_example's dict is in name order, not the protobuf map's hash order (which
    differs between parsers and runs), so the same bytes always decode to the same dict."""
    from catalog import decode_example, decode_sequence_example, encode_example, encode_sequence_example

    names = [f"f{(i * 7) % 20:02d}" for i in range(20)]  # every name once, out of order
    assert list(decode_example(encode_example({n: 1 for n in names}))) == sorted(names)
    context, lists = decode_sequence_example(
        encode_sequence_example({n: 1 for n in names}, {n: [[1]] for n in reversed(names)})
    )
    assert list(context) == list(lists) == sorted(names)
