"""One schema inferred from every record of a set of inputs, in any input format, as a stream:
memory follows the number of features and the largest record, never the inputs' size.

TFRecord inputs are inferred from their wire kinds (an empty float_list is float32); every
other format from its rows' values (schema.inference), CSV cells read as the numbers, JSON
arrays or text they look like. Image folders give an ``image`` feature (``"encoding":
"image"``, with its format when every file has the same), a ``label`` with the class names,
and ``filename``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from catalog.errors import AppendError, CodecError, SchemaError, ValidationError
from catalog.inputs.delimited import finite_float
from catalog.inputs.files import STDIN, InputOptions
from catalog.inputs.formats import detect
from catalog.inputs.registry import INPUT_FORMATS, InputFormat, input_format, stdin_formats
from catalog.schema import Feature, Schema
from catalog.schema.features import parse_feature
from catalog.schema.inference import RowInference
from catalog.tfrecord.framing import read_records


class Inferred:
    """What inference saw: the schema, the records it read from each input, and how many
    records lacked a value of each optional feature (None: not counted, TFRecord inputs)."""

    def __init__(self, schema: Schema, counts: list[tuple[str, int]], missing: dict[str, int] | None = None) -> None:
        self.schema = schema
        self.counts = counts
        self.missing: dict[str, int | None] = {
            n: (missing or {}).get(n) for n, f in schema.features.items() if f.optional
        }

    @property
    def records(self) -> int:
        return sum(n for _path, n in self.counts)

    def with_defaults(self, defaults: Mapping[str, Any], fill_missing: bool = False) -> Inferred:
        """The schema with ``defaults`` (``--default FEATURE=VALUE``: a feature that may be
        absent reads as VALUE instead of None) and, with ``fill_missing``, the zero of its
        dtype for every other optional feature that can take a default."""
        if not defaults and not fill_missing:
            return self
        features = dict(self.schema.features)
        for name, value in defaults.items():
            if name not in features:
                have = ", ".join(features) or "none"
                raise SchemaError(f"--default names no inferred feature (features: {have})", name)
            features[name] = with_default(features[name], value)
        if fill_missing:
            for name, feat in features.items():
                if feat.optional and name not in defaults and default_possible(feat):
                    features[name] = with_default(feat, zero(feat))
        schema = Schema(features.values(), self.schema.sequence.values())
        return Inferred(schema, self.counts, {n: m for n, m in self.missing.items() if m is not None})

    def summary(self) -> list[str]:
        """Which features became optional and why, one line each (none: no line)."""
        return optional_summary(self.missing, self.records)


def optional_summary(missing: Mapping[str, int | None], records: int) -> list[str]:
    """A line for each optional feature of an inferred schema: how many of the ``records``
    had no value of it (None: not counted), what that means, and how to give it a default."""
    out = []
    for name, n in missing.items():
        what = f"no value in {n:,} of {records:,} records" if n is not None else "absent from some records"
        out.append(
            f"optional: {name!r} ({what}): it reads as None, and ragged in tf_dataset; "
            f"--default {name}=VALUE or --fill-missing gives it a default"
        )
    return out


def zero(feat: Feature) -> Any:
    """The zero of a feature's dtype, as a schema's JSON default: 0, 0.0, "", false; [] for a
    variable-length list (what TensorFlow's VarLenFeature reads for a missing one)."""
    if feat.is_varlen:
        return []
    return {"int64": 0, "float32": 0.0, "string": "", "bytes": "", "bool": False}.get(feat.dtype, 0)


def default_possible(feat: Feature) -> bool:
    """Whether a default can fill ``feat`` (a tensor of unknown dimensions has none to fill)."""
    return not (feat.tensor and feat.size is None)


def with_default(feat: Feature, value: Any) -> Feature:
    """``feat`` with ``value`` as its default (text from the command line is read as the dtype's:
    JSON for numbers and lists, text lists too (a bytes list's texts as UTF-8), as it is for
    a text scalar), no longer optional."""
    text = feat.dtype in ("string", "bytes") and feat.is_scalar
    if isinstance(value, str) and not text:  # numbers and lists (of text too) are JSON
        try:
            value = json.loads(value, parse_float=finite_float)  # 1e400 refused, as in every input
            if feat.dtype == "bytes" and isinstance(value, list):
                value = [v.encode() if isinstance(v, str) else v for v in value]  # text's UTF-8, as --set's
        except ValidationError as e:
            raise SchemaError(f"bad default {value!r}: {e.reason}", feat.name) from None
        except ValueError:
            article = "an" if feat.dtype.startswith(("int", "uint")) else "a"
            raise SchemaError(f"bad default {value!r}: not {article} {feat.dtype} value", feat.name) from None
    raw = feat.to_json()
    raw.pop("optional", None)
    raw["default"] = value
    return parse_feature(feat.name, raw)


def infer_inputs(inputs: list[tuple[Path, str]], options: InputOptions) -> Inferred:
    """One schema over every record of ``inputs`` (as formats.expand gives them)."""
    if any(str(p) == STDIN for p, _ in inputs):  # read here, it could not be read again to append it
        raise AppendError("a schema is inferred from files: save standard input to a file first", STDIN)
    formats = [input_format(detect(p, f)) for p, f in inputs]
    counts: list[tuple[str, int]] = []
    if all(f.reads == "records" for f in formats):
        at: list[tuple[Path, int]] = []  # the record being read, while one is
        try:
            return Inferred(Schema.infer(_all_records(inputs, counts, at)), counts)  # SequenceExamples' lists too
        except (CodecError, SchemaError) as e:
            if not at:
                raise
            path, i = at[0]
            raise AppendError(f"{path}: record {i}: {e}", str(path), i) from e
    if any(f.reads == "records" for f in formats):
        raise AppendError("cannot infer one schema over TFRecord files and inputs of other formats together")
    tally = RowInference()
    told: list[Feature] = []  # features with what values cannot tell (an image folder's class names)
    for (path, _), spec in zip(inputs, formats, strict=True):
        before = tally.rows
        try:
            told.extend(_infer_one(path, spec, options, tally))
        except SchemaError as e:
            raise AppendError(f"{path}: {e}", str(path)) from e
        counts.append((str(path), tally.rows - before))
    try:
        features = {f.name: f for f in tally.features()}
    except SchemaError as e:
        raise AppendError(f"{', '.join(str(p) for p, _ in inputs)}: {e}") from e
    features.update({f.name: f for f in told if f.name in features})  # with their metadata
    missing = {name: tally.rows - t.present for name, t in tally.tallies.items()}
    return Inferred(Schema(features.values()), counts, missing)


def _infer_one(path: Path, spec: InputFormat, options: InputOptions, tally: RowInference) -> list[Feature]:
    if spec.infer is None:
        raise AppendError(f"{path}: cannot infer a schema from {spec.name} input", str(path))
    return spec.infer(path, options, tally)


def check_options(inputs: list[tuple[Path, str]], options: InputOptions) -> None:
    """An option no input takes is a mistake worth one line, not silence: --delimiter with no
    CSV, --feature with no .npy, --image-shape with no image folder (each format's ``option``)."""
    asked = [
        (spec, flag, getattr(options, field))
        for spec in INPUT_FORMATS.values()
        if spec.option is not None
        for flag, field in [spec.option]
    ]
    if all(value is None for _, _, value in asked):
        return
    formats: set[str] = set()
    for p, f in inputs:  # standard input, which cannot be read twice, may hold any of its formats
        formats.update(stdin_formats() if str(p) == STDIN else [detect(p, f)])
    for spec, flag, value in asked:
        if value is not None and spec.name not in formats:
            raise AppendError(f"{flag} applies to {spec.label} inputs, and none is given")


def _all_records(
    inputs: list[tuple[Path, str]], counts: list[tuple[str, int]], at: list[tuple[Path, int]]
) -> Iterator[bytes]:
    """Every record of the inputs; ``at`` says which is being read (an error names it)."""
    for path, _ in inputs:
        n = 0
        for record in read_records(path):
            at[:] = [(path, n)]
            n += 1
            yield record
        counts.append((str(path), n))
    at.clear()  # read through: an error now is of them all
