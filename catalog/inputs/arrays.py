"""NumPy inputs: ``.npy`` (one array, one row per index of its first axis, for one feature) and
``.npz`` (one array per feature, all of the same length). A ``.npy`` is memory-mapped, so
its size is not bounded by memory; an ``.npz`` member is loaded whole when it is read (a
zip member, perhaps compressed, cannot be mapped). Pickled object arrays are refused: loading
them would run code from the file."""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, BinaryIO

import numpy as np

from catalog.errors import AppendError
from catalog.inputs.files import InputOptions
from catalog.schema import Feature, Schema
from catalog.schema.inference import RowInference
from catalog.tfrecord.sources import open_regular

# Rows are taken from each array this many at a time: a slice of a memory map is read once,
# and its rows are numpy values the encoders take as they are.
CHUNK = 4096


def _fail(path: Path, reason: str) -> AppendError:
    return AppendError(f"{path}: {reason}", str(path))


def _claim(fp: BinaryIO, available: int) -> str | None:
    """What is wrong with the array whose ``.npy`` header starts at ``fp`` (``available`` bytes
    in all, header included): None when the data its header claims is there. Counted in
    Python's integers, before NumPy multiplies the shape in int64 (overflow warnings on stderr)
    and maps or allocates what the header claims."""
    version = np.lib.format.read_magic(fp)
    # version 3.0 differs from 2.0 in the header's text encoding only (utf-8 field names):
    # read as 2.0, its shape and item size are the same
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _fortran, dtype = read(fp)
    if dtype.hasobject:
        return None  # a pickle, whose size says nothing: np.load refuses it (allow_pickle=False)
    claimed = math.prod(shape) * dtype.itemsize
    held = available - fp.tell()
    if claimed <= held:
        return None
    return f"its header claims shape {tuple(shape)} of {dtype}: {claimed:,} bytes, {{}} holds {held:,} after its header"


def _check_npy(path: Path) -> None:
    """Before NumPy maps it: a file that is no .npy (an archive, a pickle) is np.load's to judge."""
    try:
        with open_regular(path) as fp:
            if fp.read(len(np.lib.format.MAGIC_PREFIX)) != np.lib.format.MAGIC_PREFIX:
                return
            fp.seek(0)
            problem = _claim(fp, os.fstat(fp.fileno()).st_size)
    except ValueError as e:  # not a .npy header
        raise _fail(path, f"not a NumPy array file numpy can read without pickle: {e}") from e
    except OSError as e:
        raise _fail(path, f"cannot read as NumPy: {e}") from e
    if problem is not None:
        raise _fail(path, problem.format("the file"))


def _check_npz(path: Path, archive: Any, names: list[str]) -> None:
    members = set(archive.zip.namelist())
    for name in names:
        member = name + ".npy" if name + ".npy" in members else name
        try:
            with archive.zip.open(member) as fp:
                problem = _claim(fp, archive.zip.getinfo(member).file_size)
        except (ValueError, OSError, zipfile.BadZipFile) as e:
            raise _fail(path, f"cannot read an array: {e}") from e
        if problem is not None:
            raise _fail(path, f"array {name!r}: " + problem.format("the member"))


def _load(path: Path, **kwargs: Any) -> Any:
    try:
        return np.load(path, allow_pickle=False, **kwargs)
    except ValueError as e:  # an object array (pickled), or a header numpy cannot read
        raise _fail(path, f"not a NumPy array file numpy can read without pickle: {e}") from e
    except (OSError, EOFError, zipfile.BadZipFile) as e:
        raise _fail(path, f"cannot read as NumPy: {e}") from e


def _check_absent(path: Path, schema: Schema | None, given: set[str]) -> None:
    if schema is None:
        return
    for name, feat in schema.features.items():
        if name not in given and not feat.may_be_absent:
            raise _fail(path, f"no array for feature {name!r}, and the feature has no default")


def _rows(path: Path, arrays: Mapping[str, Any]) -> Iterator[tuple[int, dict[str, Any]]]:
    lengths = {name: len(a) if a.ndim else -1 for name, a in arrays.items()}
    if any(n < 0 for n in lengths.values()):
        scalar = next(name for name, n in lengths.items() if n < 0)
        raise _fail(path, f"array {scalar!r} is 0-dimensional: rows are along the first axis")
    if len(set(lengths.values())) > 1:
        raise _fail(path, f"arrays of different lengths: {', '.join(f'{k} {n:,}' for k, n in lengths.items())}")
    total = next(iter(lengths.values()), 0)
    for lo in range(0, total, CHUNK):
        chunk = {name: np.asarray(a[lo : lo + CHUNK]) for name, a in arrays.items()}
        for i in range(len(next(iter(chunk.values())))):
            yield lo + i, {name: part[i] for name, part in chunk.items()}


class NpyRows:
    """The rows of one ``.npy`` array, for one feature (``feature``, else the schema's only one)."""

    unit = "row"

    def __init__(self, path: Path, schema: Schema | None, feature: str | None) -> None:
        """``schema`` None (inferring one): the feature is ``feature``, else the file's stem."""
        if schema is None:
            self.path, self.feature = path, feature or path.stem
            return
        names = list(schema.features)
        if feature is None:
            if len(names) != 1:
                raise _fail(path, f"a .npy file fills one feature: name it with --feature (one of {', '.join(names)})")
            feature = names[0]
        elif feature not in schema.features:
            raise _fail(path, f"--feature {feature!r} is not a feature of the schema ({', '.join(names)})")
        _check_absent(path, schema, {feature})
        self.path, self.feature = path, feature

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        _check_npy(self.path)
        array = _load(self.path, mmap_mode="r")
        if not isinstance(array, np.ndarray):
            raise _fail(self.path, "holds several arrays (an .npz archive?), not one")
        yield from _rows(self.path, {self.feature: array})


class NpzRows:
    """The rows of an ``.npz`` archive: one array per feature, named as the feature."""

    unit = "row"

    def __init__(self, path: Path, schema: Schema | None) -> None:
        self.path, self.schema = path, schema  # schema None: inferring one, any arrays

    def __iter__(self) -> Iterator[tuple[int, dict[str, Any]]]:
        archive = _load(self.path)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise _fail(self.path, "holds one array, not an .npz archive of one array per feature")
        with archive:
            names = list(archive.files)
            unknown = [] if self.schema is None else [n for n in names if n not in self.schema.features]
            if unknown:
                raise _fail(self.path, f"array {unknown[0]!r} is not a feature of the schema")
            _check_absent(self.path, self.schema, set(names))
            _check_npz(self.path, archive, names)
            try:
                arrays = {n: archive[n] for n in names}
            except (ValueError, OSError, zipfile.BadZipFile) as e:
                raise _fail(self.path, f"cannot read an array: {e}") from e
            yield from _rows(self.path, arrays)


def npy_rows(path: Path, schema: Schema | None, options: InputOptions, stream: IO[bytes] | None) -> NpyRows:
    """The format table's reader for ``.npy`` (``options.feature``: the feature it fills)."""
    return NpyRows(path, schema, options.feature)


def npz_rows(path: Path, schema: Schema | None, options: InputOptions, stream: IO[bytes] | None) -> NpzRows:
    """The format table's reader for ``.npz``."""
    return NpzRows(path, schema)


def infer_npy(path: Path, options: InputOptions, tally: RowInference) -> list[Feature]:
    """The format table's inference for ``.npy``."""
    for _, row in npy_rows(path, None, options, None):
        tally.add(row)
    return []


def infer_npz(path: Path, options: InputOptions, tally: RowInference) -> list[Feature]:
    """The format table's inference for ``.npz``."""
    for _, row in npz_rows(path, None, options, None):
        tally.add(row)
    return []
