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
from catalog.inputs.arrays import NpyRows, NpzRows
from catalog.inputs.delimited import DelimitedRows, finite_float
from catalog.inputs.formats import STDIN, InputOptions, check_json_document, detect, open_input
from catalog.inputs.images import class_names
from catalog.inputs.parquet import ParquetRows
from catalog.schema import Feature, Schema
from catalog.schema.features import parse_feature
from catalog.schema.inference import RowInference
from catalog.tfrecord.framing import read_records

_IMAGE_FORMAT = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg", ".gif": "gif", ".bmp": "bmp", ".webp": "webp"}


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
    JSON for numbers and lists, as it is for text), no longer optional."""
    if isinstance(value, str) and feat.dtype not in ("string", "bytes"):
        try:
            value = json.loads(value)
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
    formats = [detect(p, f) for p, f in inputs]
    counts: list[tuple[str, int]] = []
    if all(f == "tfrecord" for f in formats):
        at: list[tuple[Path, int]] = []  # the record being read, while one is
        try:
            return Inferred(Schema.infer(_all_records(inputs, counts, at)), counts)  # SequenceExamples' lists too
        except (CodecError, SchemaError) as e:
            if not at:
                raise
            path, i = at[0]
            raise AppendError(f"{path}: record {i}: {e}", str(path), i) from e
    if "tfrecord" in formats:
        raise AppendError("cannot infer one schema over TFRecord files and inputs of other formats together")
    tally = RowInference()
    images: list[Feature] = []
    for (path, _), fmt in zip(inputs, formats, strict=True):
        before = tally.rows
        try:
            if fmt == "images":
                images = _image_features(path, tally)
            else:
                for row in _rows(path, fmt, options, tally):
                    tally.add(row, text=fmt == "csv")
        except SchemaError as e:
            raise AppendError(f"{path}: {e}", str(path)) from e
        counts.append((str(path), tally.rows - before))
    try:
        features = {f.name: f for f in tally.features()}
    except SchemaError as e:
        raise AppendError(f"{', '.join(str(p) for p, _ in inputs)}: {e}") from e
    features.update({f.name: f for f in images if f.name in features})  # with their metadata
    missing = {name: tally.rows - t.present for name, t in tally.tallies.items()}
    return Inferred(Schema(features.values()), counts, missing)


def check_options(inputs: list[tuple[Path, str]], options: InputOptions) -> None:
    """An option no input takes is a mistake worth one line, not silence: --delimiter with no
    CSV, --feature with no .npy, --image-shape with no image folder."""
    asked = {
        "csv": ("--delimiter", options.delimiter),
        "npy": ("--feature", options.feature),
        "images": ("--image-shape", options.image_shape),
    }
    if all(value is None for _, value in asked.values()):
        return
    formats = {"csv" if str(p) == STDIN else detect(p, f) for p, f in inputs}
    for fmt, (option, value) in asked.items():
        if value is not None and fmt not in formats:
            kind = {"csv": "CSV", "npy": ".npy", "images": "image folder"}[fmt]
            raise AppendError(f"{option} applies to {kind} inputs, and none is given")


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


def _rows(path: Path, fmt: str, options: InputOptions, tally: RowInference) -> Iterator[dict[str, Any]]:
    if fmt == "jsonl":
        yield from _json_rows(path)
    elif fmt == "csv":
        with open_input(path) as f:
            source = DelimitedRows(f, path, None, options.delimiter)
            yield from (row for _, row in source)
            tally.declare(source.header)  # a column whose every cell is empty too
    elif fmt == "parquet":
        table = ParquetRows(path, None)
        yield from (row for _, row in table)
        tally.declare(table.names)  # a column of nulls only too
    elif fmt in ("npy", "npz"):
        arrays = NpyRows(path, None, options.feature) if fmt == "npy" else NpzRows(path, None)
        yield from (row for _, row in arrays)
    else:
        raise AppendError(f"{path}: cannot infer a schema from {fmt} input", str(path))


def _json_rows(path: Path) -> Iterator[dict[str, Any]]:
    with open_input(path) as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw, parse_float=finite_float)
            except ValidationError as e:
                raise AppendError(f"{path}: line {lineno}: {e}", str(path)) from e
            except (ValueError, RecursionError) as e:
                if lineno == 1:
                    check_json_document(path, raw.decode("utf-8", errors="replace"), f)
                raise AppendError(f"{path}: line {lineno}: not valid JSON: {e}", str(path)) from e
            if lineno == 1 and isinstance(row, list):
                check_json_document(path, raw.decode("utf-8", errors="replace"), f)
            if not isinstance(row, dict):
                raise AppendError(f"{path}: line {lineno}: a JSON row is an object, got {type(row).__name__}")
            yield row


def _image_features(folder: Path, tally: RowInference) -> list[Feature]:
    """An image folder's three features; its rows counted into ``tally``."""
    classes = class_names(folder)
    if not classes:
        raise AppendError(f"{folder}: no class folders in it (an image folder is DIR/<class>/<image file>)")
    formats: set[str | None] = set()
    for c in classes:
        for f in sorted((folder / c).iterdir()):
            if not f.name.startswith("."):
                formats.add(_IMAGE_FORMAT.get(f.suffix.lower()))
                tally.add({"image": b"", "label": 0, "filename": ""})
    fmt = formats.pop() if len(formats) == 1 else None
    return [
        Feature("image", "bytes", image=True, image_format=fmt),
        Feature("label", "int64", names=tuple(classes)),
        Feature("filename", "string"),
    ]
