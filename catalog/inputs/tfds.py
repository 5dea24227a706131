"""A TensorFlow Datasets (TFDS) prepared directory read without TFDS: its schema from
``features.json`` (class names from the ``<feature>.labels.txt`` files beside it), its splits
and their shard files from ``dataset_info.json``.

How TFDS stores each feature in a ``tf.train.Example`` (tensorflow-datasets 4.9): nested
dicts are flattened with "/" (``meta/id``); a fixed-shape tensor is its flat value list (no
shape stored); integers and bools are an int64_list, floats (float64 too) a float_list,
strings, Text and encoded images a bytes_list; a ClassLabel is the class's index; a Sequence
is one flat list of its items' values (its length is the list's), and a Sequence of
Sequences is ``<key>/ragged_flat_values`` with ``<key>/ragged_row_lengths_0``; an optional
feature that is None is left out. A Tensor with ``encoding: bytes`` is the array's raw
bytes (numpy's ``tobytes``: little-endian on every platform TFDS runs on) as one bytes value,
the catalog's ``"encoding": "tensor"`` when every dimension is known (TFDS stores no shape
otherwise, or stores it under ``<key>/shape`` beside ``<key>/value``). An Image is its encoded
file: uint8 or uint16 pixels as they are, a float32 image (one channel) as a 4-channel uint8
PNG of each pixel's float32 bytes. Each maps to the schema feature that reads those values
back unchanged; a feature TFDS encodes otherwise (``encoding: zlib``, raw tensors of unknown
dimensions or in a Sequence) is refused by name.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from catalog.errors import AppendError, SchemaError
from catalog.schema import Schema, json_problem
from catalog.schema.features import MAX_SCHEMA_BYTES
from catalog.words import counted

FEATURES_FILE = "features.json"
INFO_FILE = "dataset_info.json"
DEFAULT_TEMPLATE = "{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}"
_INTS = {"int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64", "bool"}
_FLOATS = {"float32", "float64", "float16", "bfloat16"}
# What a metadata file may be and claim: TFDS writes a few KiB (a labels file: its class
# names, which go into the schema, itself at most MAX_SCHEMA_BYTES); features nest a few deep.
MAX_METADATA_BYTES = 64 << 20
MAX_NESTING = 64
_IMAGE_DTYPES = ("uint8", "uint16", "float32")  # what tfds.features.Image accepts
FLOAT_IMAGE_NOTE = (
    "TFDS Image(dtype=float32): a 4-channel PNG of each pixel's float32 bytes; "
    "decode it to uint8 [H, W, 4], then view the pixels as float32 for TFDS's [H, W, 1]"
)


@dataclass(frozen=True)
class TfdsSplit:
    name: str
    files: tuple[Path, ...]  # in shard order
    shard_lengths: tuple[int, ...] | None  # records per shard, as dataset_info.json says (None: not said)


@dataclass(frozen=True)
class TfdsDataset:
    folder: Path
    name: str
    description: str
    schema: Schema
    splits: tuple[TfdsSplit, ...]

    def inputs(self) -> list[tuple[Path, str]]:
        """Every shard file as (path, split), split after split, each in shard order."""
        return [(f, s.name) for s in self.splits for f in s.files]

    def expected(self) -> dict[Path, int]:
        """The record count dataset_info.json gives each shard file (where it gives one)."""
        return {f: n for s in self.splits if s.shard_lengths for f, n in zip(s.files, s.shard_lengths, strict=True)}


def is_tfds_dir(path: Path) -> bool:
    """A TFDS prepared directory: ``features.json`` and ``dataset_info.json`` in a folder."""
    return path.is_dir() and (path / FEATURES_FILE).is_file() and (path / INFO_FILE).is_file()


def read_tfds(folder: Path) -> TfdsDataset:
    """The schema, splits and shard files of a TFDS prepared directory; one line on what is wrong."""
    try:
        return _read(folder)
    except (TypeError, AttributeError, ValueError, KeyError, OverflowError) as e:  # a JSON value of the wrong kind
        what = f"{type(e).__name__}: {e}"[:200]
        raise AppendError(f"{folder}: not the metadata of a TFDS prepared directory ({what})", str(folder)) from e


def _read(folder: Path) -> TfdsDataset:
    info = _load(folder / INFO_FILE)
    fmt = info.get("fileFormat", "tfrecord")
    if fmt != "tfrecord":
        raise AppendError(f"{folder / INFO_FILE}: the shards are {fmt}, not TFRecord: nothing to adopt", str(folder))
    features = _load(folder / FEATURES_FILE)
    try:
        mapped = _Mapper(folder).features(features)
        schema = Schema.from_json({"features": {f.pop("name"): f for f in mapped}})
    except (SchemaError, TypeError, AttributeError, ValueError) as e:
        raise AppendError(f"{folder / FEATURES_FILE}: {e}", str(folder)) from e
    name = str(info.get("name", folder.name))
    listed = info.get("splits", [])
    if not isinstance(listed, list):
        raise AppendError(f"{folder / INFO_FILE}: splits is not a list", str(folder))
    files = sum(1 for e in os.scandir(folder) if e.is_file())  # what any count of shards is checked against first
    splits: list[TfdsSplit] = []
    for raw in listed:
        splits.append(_split(folder, name, raw, files))
        total = sum(len(s.files) for s in splits)
        if total > files:  # splits never share a shard file
            what = f"its splits list {total} shards in all but the folder holds {files} files"
            raise AppendError(f"{folder / INFO_FILE}: {what}", str(folder))
    if not splits:
        raise AppendError(f"{folder / INFO_FILE}: no splits listed", str(folder))
    description = str(info.get("description", "")).strip()
    return TfdsDataset(folder, name, description, schema, tuple(splits))


def _load(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            text = f.read(MAX_METADATA_BYTES + 1)
        if len(text) > MAX_METADATA_BYTES:
            raise AppendError(f"{path}: larger than {MAX_METADATA_BYTES >> 20} MiB: not TFDS metadata", str(path))
        data = json.loads(text.decode("utf-8"))
    except json.JSONDecodeError as e:
        raise AppendError(f"{path}: cannot read it as JSON: {e}", str(path)) from e
    except (RecursionError, ValueError) as e:  # UnicodeDecodeError is a ValueError too
        what = json_problem(e) if not isinstance(e, UnicodeDecodeError) else f"not UTF-8 text (byte {e.start})"
        raise AppendError(f"{path}: cannot read it as JSON: {what}", str(path)) from e
    except OSError as e:
        raise AppendError(f"{path}: cannot read it as JSON: {e}", str(path)) from e
    if not isinstance(data, dict):
        raise AppendError(f"{path}: a JSON object expected", str(path))
    return data


def _split(folder: Path, dataset: str, raw: Any, held: int) -> TfdsSplit:
    """One entry of dataset_info.json's ``splits``: its shard files (each must exist; no more
    than the ``held`` files of the folder are named)."""
    where = folder / INFO_FILE
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str) or not raw["name"]:
        raise AppendError(f"{where}: a split without a name: {raw!r}"[:300], str(folder))
    split = raw["name"]
    lengths = raw.get("shardLengths")
    try:
        shard_lengths = tuple(int(n) for n in lengths) if lengths is not None else None
        shards = len(shard_lengths) if shard_lengths is not None else int(raw.get("numShards", 0))
    except (TypeError, ValueError, OverflowError) as e:
        raise AppendError(f"{where}: split {split!r}: shard lengths are not numbers", str(folder)) from e
    if shards > held:  # before a name is made: 10^9 of them would take minutes and gigabytes
        raise AppendError(
            f"{where}: split {split!r} lists {shards} shards but the folder holds {held} files", str(folder)
        )
    template = str(raw.get("filepathTemplate") or DEFAULT_TEMPLATE)
    names = [
        template.replace("{DATASET}", dataset).replace("{SPLIT}", split).replace("{FILEFORMAT}", "tfrecord")
        .replace("{SHARD_X_OF_Y}", f"{i:05d}-of-{shards:05d}").replace("{SHARD_INDEX}", f"{i:05d}")
        .replace("{NUM_SHARDS}", f"{shards:05d}")
        for i in range(shards)
    ]  # fmt: skip
    files = tuple(folder / n for n in names)
    if not names:
        raise AppendError(f"{where}: split {split!r} lists no shards (no shardLengths or numShards)", str(folder))
    if any(os.sep in n or n.startswith(".") for n in names):
        raise AppendError(f"{where}: split {split!r}: shard names outside the folder", str(folder))
    if len(set(names)) != len(names):
        what = "its filepathTemplate names one file for several shards"
        raise AppendError(f"{where}: split {split!r}: {what}", str(folder))
    for f in files:
        try:
            there = f.is_file()
        except OSError as e:  # a name the filesystem refuses (too long, say): no such shard either
            what = f"split {split!r}: shard {f.name[:80]!r}: {e.strerror or e}"
            raise AppendError(f"{where}: {what}", str(folder)) from e
        if not there:
            raise AppendError(f"{f}: missing: {INFO_FILE} lists {counted(shards, 'shard')} for split {split!r}", str(f))
    return TfdsSplit(split, files, shard_lengths)


class _Mapper:
    """TFDS feature JSON to schema features (see the module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def features(self, doc: dict[str, Any]) -> list[dict[str, Any]]:
        top = doc.get("featuresDict")
        if not isinstance(top, dict):
            raise SchemaError("the top level is not a FeaturesDict")
        out: list[dict[str, Any]] = []
        self._dict(top, [], out, sequence=False)
        return out

    def _dict(self, fd: dict[str, Any], path: list[str], out: list[dict[str, Any]], sequence: bool) -> None:
        for key, spec in fd.get("features", {}).items():
            self._feature(spec, [*path, key], out, sequence)

    def _feature(self, spec: Any, path: list[str], out: list[dict[str, Any]], sequence: bool) -> None:
        name = "/".join(path)
        if len(path) > MAX_NESTING:  # each level a few frames of this mapping's recursion
            raise SchemaError(f"feature {name[:100]!r}...: FeaturesDicts nested more than {MAX_NESTING} levels deep")
        if not isinstance(spec, dict):
            raise SchemaError(f"feature {name!r}: not a feature description")
        kind = str(spec.get("pythonClassName", "?")).rsplit(".", 1)[-1]
        if "featuresDict" in spec:
            self._dict(spec["featuresDict"], path, out, sequence)
        elif "sequence" in spec:
            self._sequence(spec["sequence"], path, out, sequence)
        elif "classLabel" in spec:
            out.append(self._label(path, sequence))
        elif "text" in spec:
            out.append(_named(name, {"dtype": "string", "shape": [None]} if sequence else {"dtype": "string"}))
        elif "image" in spec:
            out.append(_image(name, spec["image"], sequence))
        elif "boundingBox" in spec:
            out.append(_named(name, {"dtype": "float32", "shape": [None] if sequence else [4]}))
        elif "tensor" in spec:
            out.append(_tensor(name, spec["tensor"], sequence))
        else:
            raise SchemaError(f"feature {name!r}: TFDS {kind} is not a feature the catalog can map")

    def _sequence(self, seq: dict[str, Any], path: list[str], out: list[dict[str, Any]], sequence: bool) -> None:
        inner = seq.get("feature", {})
        if sequence or "sequence" in inner:  # a Sequence of Sequences: ragged, as TFDS stores it
            name = "/".join(path)
            leaf, nested = _leaf_of(inner, name)
            out.append({"name": f"{name}/ragged_flat_values", **leaf})
            # one row-lengths list per level but the innermost (the sequence this one is in counts)
            for level in range(nested + int(sequence)):
                out.append({"name": f"{name}/ragged_row_lengths_{level}", "dtype": "int64", "shape": [None]})
            return
        self._feature(inner, path, out, sequence=True)

    def _label(self, path: list[str], sequence: bool) -> dict[str, Any]:
        spec: dict[str, Any] = {"dtype": "int64", "shape": [None]} if sequence else {"dtype": "int64"}
        names_file = self.folder / ("-".join(path) + ".labels.txt")
        if names_file.is_file():
            try:
                with open(names_file, "rb") as f:
                    data = f.read(MAX_SCHEMA_BYTES + 1)
            except OSError as e:
                raise SchemaError(f"{names_file.name}: cannot read it: {e.strerror or e}") from e
            if len(data) > MAX_SCHEMA_BYTES:  # the names go into the schema, which holds no more
                raise SchemaError(f"{names_file.name}: larger than {MAX_SCHEMA_BYTES >> 20} MiB: not class names")
            try:
                spec["names"] = data.decode("utf-8").splitlines()
            except UnicodeDecodeError as e:
                raise SchemaError(f"{names_file.name}: not UTF-8 text (byte {e.start})") from e
        return _named("/".join(path), spec)


def _named(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, **spec}


def _dims(raw: Any) -> list[int | None]:
    return [None if int(d) < 0 else int(d) for d in (raw or {}).get("dimensions", [])]


def _list_dtype(dtype: str, name: str) -> str:
    if dtype in _INTS:
        return "int64"
    if dtype in _FLOATS:
        return "float32"  # TFDS stores float64 as a float_list too
    if dtype == "string":
        return "bytes"
    raise SchemaError(f"feature {name!r}: TFDS dtype {dtype!r} has no TFRecord list type")


def _tensor(name: str, t: dict[str, Any], sequence: bool) -> dict[str, Any]:
    encoding = t.get("encoding", "none")
    if encoding == "bytes":
        return _raw_tensor(name, t, sequence)
    if encoding not in ("none", None, ""):
        raise SchemaError(f"feature {name!r}: TFDS tensors encoded as {encoding!r} are not supported")
    spec: dict[str, Any] = {"name": name, "dtype": _list_dtype(str(t.get("dtype")), name)}
    dims = _dims(t.get("shape"))
    if sequence or None in dims:
        spec["shape"] = [None]  # a flat list of every value: its length says how many
    elif dims:
        spec["shape"] = dims
    if t.get("optional") and not sequence:
        spec["optional"] = True
    return spec


def _raw_tensor(name: str, t: dict[str, Any], sequence: bool) -> dict[str, Any]:
    """``Tensor(encoding="bytes")``: one bytes value of the array's raw bytes, which the
    catalog's tensor encoding reads as TFDS does when the schema knows the whole shape."""
    if sequence:  # a bytes_list of one value per item: no catalog feature reads that as arrays
        raise SchemaError(f"feature {name!r}: TFDS tensors encoded as 'bytes' in a Sequence are not supported")
    dtype = str(t.get("dtype"))
    if dtype == "string" or dtype not in _INTS | _FLOATS | {"complex64", "complex128"}:
        raise SchemaError(f"feature {name!r}: TFDS dtype {dtype!r} has no raw tensor encoding")
    dims = _dims(t.get("shape"))
    if None in dims:  # TFDS keeps no shape with the bytes (one unknown) or keeps it as <key>/shape
        shown = "[" + ", ".join(str(d) for d in dims) + "]"
        what = f"TFDS tensors encoded as 'bytes' of unknown dimensions (shape {shown}) are not supported"
        raise SchemaError(f"feature {name!r}: {what}")
    spec: dict[str, Any] = {"name": name, "dtype": dtype, "encoding": "tensor"}
    if dims:
        spec["shape"] = dims
    if t.get("optional"):
        spec["optional"] = True
    return spec


def _image(name: str, img: dict[str, Any], sequence: bool) -> dict[str, Any]:
    dtype = str(img.get("dtype") or "uint8")
    if dtype not in _IMAGE_DTYPES:
        raise SchemaError(f"feature {name!r}: TFDS images of dtype {dtype!r} are not supported")
    dims = _dims(img.get("shape"))
    fmt = img.get("encodingFormat")
    spec: dict[str, Any] = {"name": name, "dtype": "bytes"}
    if dtype == "float32":  # TFDS bitcasts each float to 4 uint8 channels and stores a PNG of them
        if dims and dims[-1] != 1:
            raise SchemaError(f"feature {name!r}: a TFDS float32 image has one channel, not {dims[-1]}")
        dims, fmt = [*dims[:-1], 4], "png"
        spec["description"] = FLOAT_IMAGE_NOTE
    if sequence:
        return spec | {"shape": [None]}
    spec["encoding"] = "image"
    if fmt:
        spec["format"] = fmt
    if len(dims) in (2, 3):
        spec["shape"] = dims
    return spec


def _leaf_of(inner: dict[str, Any], name: str) -> tuple[dict[str, Any], int]:
    """The list type of the innermost values of a nested Sequence, and how many Sequences
    ``inner`` nests (each one more ``ragged_row_lengths_<i>``)."""
    nested = 0
    while "sequence" in inner:
        inner = inner["sequence"].get("feature", {})
        nested += 1
        if nested > MAX_NESTING:
            raise SchemaError(f"feature {name!r}: Sequences nested more than {MAX_NESTING} levels deep")
    if "tensor" in inner and inner["tensor"].get("encoding") not in ("none", None, ""):
        encoding = inner["tensor"]["encoding"]
        raise SchemaError(f"feature {name!r}: TFDS tensors encoded as {encoding!r} in a Sequence are not supported")
    if "tensor" in inner:
        return {"dtype": _list_dtype(str(inner["tensor"].get("dtype")), name), "shape": [None]}, nested
    if "classLabel" in inner:
        return {"dtype": "int64", "shape": [None]}, nested
    if "text" in inner:
        return {"dtype": "string", "shape": [None]}, nested
    raise SchemaError(f"feature {name!r}: a nested Sequence of this kind is not supported")
